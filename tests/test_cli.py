"""Tests of the command line (``python -m bartpy_suite``), in process through ``main(argv)``
and, for the Quickstart's ``demo``, in a subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bartpy_suite
import bartpy_suite as bps
from bartpy_suite import datasets
from bartpy_suite.cli import main

REPO_ROOT = Path(bartpy_suite.__file__).resolve().parents[1]

# Settings of the CLI fit shared by the tests below: 2 chains x 1000 draws after 3000 tuning
# draws (one draw = one tree move), enough for the cgm sampler to leave the stump and find the
# five regions of the CGM 1998 function on 800 rows.
FIT_ARGS = ["--chains", "2", "--draws", "1000", "--tune", "3000", "--seed", "1", "--no-progress"]

# New points of the CGM 1998 example, each at least 1 away from the split points 3, 5, 7 of f.
GRID = pd.DataFrame({"x1": [1.5, 4.0, 6.0, 8.5] * 2, "x2": ["A"] * 4 + ["C"] * 4})


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run ``main(argv)`` in process; return (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def run_module(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python -m bartpy_suite *argv`` in a subprocess with this checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "bartpy_suite", *argv], capture_output=True,
                          text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    paths = {"train": root / "train.csv", "grid": root / "grid.csv", "fit": root / "fit.nc",
             "root": root}
    datasets.load("cgm1998").to_csv(paths["train"], index=False)
    GRID.to_csv(paths["grid"], index=False)
    return paths


@pytest.fixture(scope="module")
def fitted(files) -> tuple[int, str, str]:
    """One CART fit through the CLI, saved to files['fit']."""
    return run(["fit", "y ~ x1 + x2", str(files["train"]), "--model", "cart", "--sampler", "cgm",
                *FIT_ARGS, "--out", str(files["fit"])])


# --- usage and file errors: exit status 2, a one-line message, no traceback -----------------

def test_help_lists_the_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "fit", "predict"):
        assert command in out


def test_no_command_is_a_usage_error():
    status, _, err = run([])
    assert status == 2
    assert "COMMAND" in err


def test_fit_missing_data_file(tmp_path):
    missing = tmp_path / "nope.csv"
    status, out, err = run(["fit", "y ~ .", str(missing)])
    assert status == 2
    assert err == f"bartpy_suite: error: data file not found: '{missing}'\n"
    assert out == ""


def test_fit_data_path_is_a_directory(tmp_path):
    status, _, err = run(["fit", "y ~ .", str(tmp_path)])
    assert status == 2
    assert f"data path is not a file: '{tmp_path}'" in err


def test_fit_empty_csv(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    status, _, err = run(["fit", "y ~ .", str(empty)])
    assert status == 2
    assert f"cannot read data file '{empty}' as CSV" in err


def test_fit_output_directory_missing_is_caught_before_fitting(files, tmp_path):
    target = tmp_path / "no_such_dir" / "fit.nc"
    status, _, err = run(["fit", "y ~ .", str(files["train"]), "--out", str(target)])
    assert status == 2
    assert f"directory of the output file does not exist: '{target.parent}'" in err


def test_trees_only_with_bart(files):
    status, _, err = run(["fit", "y ~ .", str(files["train"]), "--trees", "10"])
    assert status == 2
    assert "--trees applies to --model bart only" in err


def test_bad_choice_is_a_usage_error(files):
    status, _, err = run(["fit", "y ~ .", str(files["train"]), "--model", "forest"])
    assert status == 2
    assert "invalid choice: 'forest'" in err
    status, _, err = run(["predict", "fit.nc", str(files["grid"]), "--kind", "quantile"])
    assert status == 2
    assert "invalid choice: 'quantile'" in err


def test_predict_missing_fit_file(files, tmp_path):
    missing = tmp_path / "nope.nc"
    status, out, err = run(["predict", str(missing), str(files["grid"])])
    assert status == 2
    assert err == f"bartpy_suite: error: fit file not found: '{missing}'\n"
    assert out == ""


def test_predict_missing_new_data_file(files, tmp_path):
    missing = tmp_path / "nope.csv"
    status, _, err = run(["predict", str(files["train"]), str(missing)])
    assert status == 2
    assert f"new data file not found: '{missing}'" in err


# --- fit and predict through the API ---------------------------------------------------------

def test_fit_prints_summary_and_saves(fitted, files):
    status, out, err = fitted
    assert status == 0, err
    for row in ("sigma", "n_leaves", "depth"):
        assert row in out
    for column in ("mean", "sd", "ess_bulk", "r_hat"):
        assert column in out
    assert files["fit"].is_file()
    assert f"saved the fit to '{files['fit']}'" in err


def test_predict_writes_the_api_predictions(fitted, files):
    assert fitted[0] == 0, fitted[2]
    status, out, err = run(["predict", str(files["fit"]), str(files["grid"]), "--level", "0.9"])
    assert status == 0, err
    pred = pd.read_csv(io.StringIO(out))
    assert list(pred.columns) == ["mean", "lower", "upper"]
    assert len(pred) == len(GRID)
    # the CSV holds exactly what the API returns for the same saved fit and new data
    expected = bartpy_suite.load(str(files["fit"])).predict(pd.read_csv(files["grid"]), level=0.9)
    np.testing.assert_array_equal(pred.to_numpy(), expected[["mean", "lower", "upper"]].to_numpy())
    assert (pred["lower"] <= pred["mean"]).all() and (pred["mean"] <= pred["upper"]).all()


def test_predict_recovers_the_cgm1998_function(fitted, files):
    assert fitted[0] == 0, fitted[2]
    status, out, err = run(["predict", str(files["fit"]), str(files["grid"])])
    assert status == 0, err
    pred = pd.read_csv(io.StringIO(out))
    f_true = datasets.f_cgm1998(GRID["x1"], GRID["x2"])
    # Each region holds about 100 of the 800 rows with noise sd 2, so a leaf mean has sd ~0.2.
    # The grow/prune/change/swap chains can sit in a neighbouring mode that misplaces one split
    # (seeds 1-6 of this fit: one grid point off by up to 1.1, the others within 0.2), so the
    # typical point must be within 0.5 and none off by 2 (a tree missing a split of f).
    error = np.abs(pred["mean"] - f_true)
    assert np.median(error) < 0.5, error
    assert error.max() < 2.0, error


def test_predict_out_file_level_and_kind(fitted, files):
    assert fitted[0] == 0, fitted[2]
    root = files["root"]
    paths = {}
    for name, extra in {"mean90": ["--level", "0.9"], "mean50": ["--level", "0.5"],
                        "pred90": ["--level", "0.9", "--kind", "predictive"]}.items():
        paths[name] = root / f"{name}.csv"
        status, out, err = run(["predict", str(files["fit"]), str(files["grid"]), *extra,
                                "--out", str(paths[name])])
        assert status == 0, err
        assert out == ""
    mean90, mean50, pred90 = (pd.read_csv(paths[k]) for k in ("mean90", "mean50", "pred90"))
    width = {k: v["upper"] - v["lower"] for k, v in
             {"mean90": mean90, "mean50": mean50, "pred90": pred90}.items()}
    # a 50% interval is never wider than the 90% one from the same draws
    assert (width["mean50"] <= width["mean90"]).all()
    # the predictive interval adds noise of sd ~2 (eq. 3.18): about 2 * 1.645 * 2 = 6.6 wide,
    # far more than the interval of f(x)
    assert (width["pred90"] > width["mean90"]).all()
    assert (width["pred90"] > 4.0).all()


def test_predict_unseen_column_is_reported(fitted, files, tmp_path):
    assert fitted[0] == 0, fitted[2]
    bad = tmp_path / "bad.csv"
    GRID[["x1"]].to_csv(bad, index=False)
    status, _, err = run(["predict", str(files["fit"]), str(bad)])
    assert status == 2
    assert err.startswith("bartpy_suite: error:")
    assert "x2" in err
    assert "Traceback" not in err


def test_predict_corrupt_fit_file(files, tmp_path):
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_text("this is not netCDF\n")
    status, _, err = run(["predict", str(corrupt), str(files["grid"])])
    assert status == 2
    assert err.startswith("bartpy_suite: error:")
    assert "corrupt.nc" in err


def test_fit_formula_error_is_reported(files):
    status, out, err = run(["fit", "y ~ x1 + nope", str(files["train"]), *FIT_ARGS])
    assert status == 2
    assert err.startswith("bartpy_suite: error:")
    assert "nope" in err
    assert out == ""


def test_fit_unknown_sampler_lists_valid_ones(files):
    status, _, err = run(["fit", "y ~ .", str(files["train"]), "--sampler", "gibbs", *FIT_ARGS])
    assert status == 2
    assert "gibbs" in err
    assert "cgm" in err and "grow_prune" in err


def test_sampler_options_reach_the_sampler(files):
    """--sampler-option key=value (JSON values) gives the same fit as sampler_options in Python."""
    moves = {"grow": 0.5, "prune": 0.5}
    status, out, err = run(["fit", "y ~ x1 + x2", str(files["train"]), "--sampler", "cgm", *FIT_ARGS,
                            "--sampler-option", f"moves={json.dumps(moves)}"])
    assert status == 0, err
    same = bps.cart("y ~ x1 + x2", data=datasets.load("cgm1998"), sampler="cgm", sampler_options={"moves": moves},
                    **{k.lstrip("-"): int(v) for k, v in zip(FIT_ARGS[0::2], FIT_ARGS[1::2]) if v.isdigit()},
                    progress=False)
    assert f"{same.summary().loc['n_leaves', 'mean']:.3f}" in out


def test_sampler_option_errors(files):
    status, _, err = run(["fit", "y ~ .", str(files["train"]), "--sampler", "cgm", *FIT_ARGS,
                          "--sampler-option", "mvoes=1"])
    assert status == 2
    assert ("sampler 'cgm' has no option 'mvoes'; its options are: 'moves', 'change_of_variable', 'perturb_sweep'. "
            "Did you mean 'moves'?") in err
    status, _, err = run(["fit", "y ~ .", str(files["train"]), *FIT_ARGS, "--sampler-option", "moves"])
    assert status == 2
    assert "--sampler-option takes KEY=VALUE, got 'moves'" in err


def test_classification_prob_through_cli(files):
    root = files["root"]
    df = datasets.load("cgm1998")
    df["label"] = np.where(df["y"] > 5.0, "high", "low")
    df = df.drop(columns="y")
    train, fit_path = root / "clf.csv", root / "clf.nc"
    df.to_csv(train, index=False)
    status, out, err = run(["fit", "label ~ x1 + x2", str(train), "--sampler", "cgm", *FIT_ARGS, "--out",
                            str(fit_path)])
    assert status == 0, err
    assert "n_leaves" in out
    status, out, err = run(["predict", str(fit_path), str(files["grid"]), "--kind", "prob"])
    assert status == 0, err
    pred = pd.read_csv(io.StringIO(out))
    assert {"prob_high", "prob_low", "class"} <= set(pred.columns)
    # posterior mean class probabilities sum to one (each draw's do)
    np.testing.assert_allclose(pred["prob_high"] + pred["prob_low"], 1.0, atol=1e-9)
    expected_class = np.where(pred["prob_high"] > pred["prob_low"], "high", "low")
    np.testing.assert_array_equal(pred["class"].to_numpy(dtype=str), expected_class)


def test_bart_through_cli(files):
    fit_path = files["root"] / "bart.nc"
    status, out, err = run(["fit", "y ~ .", str(files["train"]), "--model", "bart", "--trees", "20",
                            "--chains", "1", "--draws", "200", "--tune", "200", "--seed", "3",
                            "--no-progress", "--out", str(fit_path)])
    assert status == 0, err
    assert "sigma" in out
    status, out, err = run(["predict", str(fit_path), str(files["grid"])])
    assert status == 0, err
    pred = pd.read_csv(io.StringIO(out))
    assert list(pred.columns) == ["mean", "lower", "upper"]
    assert len(pred) == len(GRID)


# --- the Quickstart command ------------------------------------------------------------------

def _demo_tables(out: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary and the prediction table printed by ``demo``."""
    summary_text = out.split("Posterior summary:\n", 1)[1].split("\n\n", 1)[0]
    pred_text = out.split("eq. 3.18):\n", 1)[1]
    return (pd.read_csv(io.StringIO(summary_text), sep=r"\s+"),
            pd.read_csv(io.StringIO(pred_text), sep=r"\s+"))


def test_demo_prints_its_sampler_summary_and_predictions():
    """The demo's output, with short chains (the full demo is the slow test below)."""
    proc = run_module("demo", "--draws", "300", "--tune", "100", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert "Sampler 'tempered'" in out and "beta = 2.0" in out
    assert "90% credible intervals" in out
    summary, pred = _demo_tables(out)
    assert {"sigma", "n_leaves", "depth"} <= set(summary.index)
    assert list(pred.columns) == ["x1", "x2", "f_true", "mean", "lower", "upper"]
    # the demo says whether its chains mixed, by its own numbers
    mixed = summary["r_hat"].max() <= 1.01 and summary["ess_bulk"].min() >= 400
    assert ("chains mix:" in out) == mixed
    assert ("have not mixed yet" in out) == (not mixed)


@pytest.mark.slow
def test_demo_runs_as_in_the_quickstart_and_mixes():
    proc = run_module("demo")
    assert proc.returncode == 0, proc.stderr
    # no warning at all: in particular not the post-fit mixing check's
    assert proc.stderr == ""
    out = proc.stdout
    summary, pred = _demo_tables(out)
    # the demo's settings were chosen for this (benchmarks/results/demo_mixing.md: seeds 1-3)
    assert (summary["r_hat"] < 1.01).all(), summary
    assert (summary["ess_bulk"] > 400).all(), summary
    assert "The 4 chains mix" in out
    # Each of the five regions holds about 100-200 of the 800 rows with noise sd 2, so a leaf mean
    # has sd <= 0.2; the grid points are at least 1 from f's split points: 0.6 is 3 sd.
    assert (pred["mean"] - pred["f_true"]).abs().max() < 0.6, pred
    assert ((pred["lower"] <= pred["f_true"]) & (pred["f_true"] <= pred["upper"])).mean() >= 0.75, pred


def test_module_reports_errors_without_traceback(tmp_path):
    proc = run_module("fit", "y ~ .", str(tmp_path / "missing.csv"), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"bartpy_suite: error: data file not found: '{tmp_path / 'missing.csv'}'\n"
