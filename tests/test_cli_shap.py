"""``python -m bartpy_suite shap FIT.nc DATA.csv``: SHAP values with intervals as CSV.

Small fits made through the API and saved to netCDF (a few draws: these tests check the command,
not the sampler); the CSV is compared with ``Fit.shap_summary`` and ``Fit.predict`` of the saved
fit, which ``tests/test_shap.py`` checks against brute force.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.cli import main, shap_table

QUIET = dict(progress=False, check_mixing=False)


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run ``main(argv)`` in process; return (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(size=n), "b": rng.uniform(size=n),
                       "g": rng.choice(["u", "v", "w"], size=n)})
    df["y"] = 4 * df["a"] + np.where(df["g"] == "v", 2.0, 0.0) + rng.normal(scale=0.3, size=n)
    return df


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_shap")
    paths = {"root": root, "train": root / "train.csv", "new": root / "new.csv", "fit": root / "fit.nc",
             "probit": root / "probit.nc", "surv": root / "surv.nc"}
    train = _frame(120, seed=1)
    train.to_csv(paths["train"], index=False)
    _frame(7, seed=2).drop(columns="y").to_csv(paths["new"], index=False)
    bps.bart("y ~ a + b + g", data=train, trees=10, chains=2, draws=12, tune=20, seed=3,
             **QUIET).to_netcdf(paths["fit"])
    binary = train.assign(y=np.where(train["a"] + 0.3 * train["b"] > 0.6, "yes", "no"))
    bps.bart("y ~ a + b", data=binary, trees=10, chains=1, draws=8, tune=20, seed=4, **QUIET).to_netcdf(paths["probit"])
    surv = train.assign(t=np.round(1 + 10 * train["b"]), d=(train["a"] > 0.3).astype(int))
    bps.bart("Surv(t, d) ~ a", data=surv, trees=5, chains=1, draws=4, tune=4, thin=1, seed=5,
             **QUIET).to_netcdf(paths["surv"])
    return paths


def test_shap_csv_is_the_posterior_summary_row_by_row(files):
    out = files["root"] / "shap.csv"
    status, stdout, stderr = run(["shap", str(files["fit"]), str(files["new"]), "--out", str(out), "--level", "0.8",
                                  "--max-draws", "5"])
    assert status == 0, stderr
    assert stdout == "" and "response scale" in stderr
    table = pd.read_csv(out)
    new = pd.read_csv(files["new"])
    fit = bps.load(str(files["fit"]))
    assert list(table.columns) == [f"shap_{p}_{s}" for p in ("a", "b", "g") for s in ("mean", "lower", "upper")] + [
        "base"]
    assert len(table) == len(new)
    summary = fit.shap_summary(new, level=0.8, max_draws=5).rows
    for p in ("a", "b", "g"):
        part = summary[summary["predictor"] == p]
        for stat in ("mean", "lower", "upper"):
            np.testing.assert_allclose(table[f"shap_{p}_{stat}"], part[stat], rtol=1e-12, atol=1e-12)
    # additivity of the means: base + sum of the mean values = the mean of f(x) over the same 5 draws per chain
    draws = np.unique(np.round(np.linspace(0, fit.posterior.sizes["draw"] - 1, 5)).astype(int))
    f_mean = fit.predict(new, samples=True).isel(draw=draws).mean(("chain", "draw")).values
    total = table["base"] + table[[f"shap_{p}_mean" for p in ("a", "b", "g")]].sum(axis=1)
    np.testing.assert_allclose(total, f_mean, rtol=0, atol=1e-10)
    assert (table["shap_a_lower"] <= table["shap_a_mean"]).all() and (table["shap_a_mean"] <= table["shap_a_upper"]).all()


def test_shap_writes_to_standard_output_by_default(files):
    status, stdout, stderr = run(["shap", str(files["fit"]), str(files["new"]), "--max-draws", "2"])
    assert status == 0, stderr
    table = pd.read_csv(io.StringIO(stdout))
    assert table.shape == (7, 10)
    assert table["base"].nunique() == 1  # the base value does not depend on the row


def test_shap_probit_fit_says_latent_scale(files):
    status, stdout, stderr = run(["shap", str(files["probit"]), str(files["new"])])
    assert status == 0, stderr
    assert "latent probit scale" in stderr
    assert list(pd.read_csv(io.StringIO(stdout)).columns)[:3] == ["shap_a_mean", "shap_a_lower", "shap_a_upper"]


def test_shap_ordinal_fit_names_the_cumulative_probit_scale(files, tmp_path):
    """An ordinal fit is explained on its latent eta, but P(class k) is Phi(c_{k+1} - eta) -
    Phi(c_k - eta): the note once said probit BART's "P(second class) = Phi(f(x))", which is wrong
    for it. Checked against the fit itself: P(above the first class) = Phi(eta) per draw (c_1 = 0)."""
    from scipy.stats import norm

    train = _frame(120, seed=1)
    train["y"] = pd.Categorical(pd.cut(train["y"], [-np.inf, 1.5, 3.5, np.inf], labels=["lo", "mid", "hi"]),
                                ordered=True)
    fit = bps.bart("y ~ a + b", data=train, trees=5, chains=1, draws=6, tune=6, seed=7, **QUIET)
    assert fit.config["leaf_model"] == "ordinal"
    path = tmp_path / "ordinal.nc"
    fit.to_netcdf(path)
    status, stdout, stderr = run(["shap", str(path), str(files["new"])])
    assert status == 0, stderr
    assert "P(second class)" not in stderr
    assert "P(above the first class) = Phi(eta(x))" in stderr and "cutpoints" in stderr
    new = pd.read_csv(files["new"])
    values = fit.shap(new)
    eta = (values["shap"].sum("predictor") + values["base"]).transpose("chain", "draw", ...).values
    prob = fit.predict(new, kind="prob", samples=True)
    assert prob.dims[:3] == ("chain", "draw", "obs") and prob.shape[-1] == 3
    np.testing.assert_allclose(norm.cdf(eta), 1.0 - prob.values[..., 0], rtol=0, atol=1e-9)


def test_shap_table_class_columns():
    """Classification CART explains each class's probability: one column set per class."""
    df = _frame(80, seed=6)
    df["y"] = np.where(df["a"] > 0.5, "hi", "lo")
    fit = bps.cart("y ~ a + b", data=df, chains=1, draws=20, tune=50, seed=1, **QUIET)
    table, scale = shap_table(fit, df.iloc[:4], max_draws=3)
    assert scale == "probability"
    assert [c for c in table.columns if c.startswith("base")] == ["base_hi", "base_lo"]
    assert "shap_a_hi_mean" in table.columns and "shap_b_lo_upper" in table.columns
    # class probabilities sum to one in every draw, so their bases do too and the values cancel
    np.testing.assert_allclose(table["base_hi"] + table["base_lo"], 1.0, atol=1e-12)
    np.testing.assert_allclose(table["shap_a_hi_mean"] + table["shap_a_lo_mean"], 0.0, atol=1e-12)


def test_shap_refuses_survival_fits(files):
    status, stdout, stderr = run(["shap", str(files["surv"]), str(files["new"])])
    assert status == 2 and stdout == ""
    assert "does not explain survival fits" in stderr and "Traceback" not in stderr


def test_shap_missing_predictor_column_is_named(files, tmp_path):
    bad = tmp_path / "bad.csv"
    pd.read_csv(files["new"]).drop(columns="b").to_csv(bad, index=False)
    status, _, stderr = run(["shap", str(files["fit"]), str(bad)])
    assert status == 2 and "'b'" in stderr


def test_shap_row_with_a_missing_value_is_named_by_its_file_line(files, tmp_path):
    bad = tmp_path / "gap.csv"
    frame = pd.read_csv(files["new"])
    frame.loc[2, "b"] = np.nan
    frame.to_csv(bad, index=False)
    status, stdout, stderr = run(["shap", str(files["fit"]), str(bad)])
    assert status == 2 and stdout == ""
    assert "line 4 of gap.csv" in stderr and "'b'" in stderr  # data row 2 is file line 4 (line 1: the header)


def test_shap_bad_options(files):
    for option, value, words in (("--max-draws", "0", "--max-draws must be at least 1"),
                                 ("--level", "1.5", "--level must be between 0 and 1")):
        status, _, stderr = run(["shap", str(files["fit"]), str(files["new"]), option, value])
        assert status == 2 and words in stderr


def test_shap_out_safety(files, tmp_path):
    # never over an input; not over a netCDF file unless --force; atomic: nothing else left behind
    status, _, stderr = run(["shap", str(files["fit"]), str(files["new"]), "--out", str(files["new"])])
    assert status == 2 and "would destroy the input" in stderr
    target = tmp_path / "looks_like_a_fit.nc"
    target.write_bytes(Path(files["fit"]).read_bytes())
    status, _, stderr = run(["shap", str(files["fit"]), str(files["new"]), "--out", str(target), "--max-draws", "1"])
    assert status == 2 and "--force" in stderr
    assert target.read_bytes() == Path(files["fit"]).read_bytes()
    status, _, stderr = run(["shap", str(files["fit"]), str(files["new"]), "--out", str(target), "--max-draws", "1",
                             "--force"])
    assert status == 0, stderr
    assert pd.read_csv(target).shape == (7, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["looks_like_a_fit.nc"]


def test_shap_appears_in_help(capsys):
    assert main(["shap", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--max-draws" in text and "--level" in text and "--force" in text
