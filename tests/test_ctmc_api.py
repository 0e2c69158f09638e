"""The user contract of ``sampler="ctmc"``: weighted draws reach every ``Fit`` method, options
are validated, every CART leaf model and BART work from Python and the CLI.

Each weighted summary is checked against a plain numpy computation on the fit's own draws and
``fit.weights`` (equalities to 1e-10: the same arithmetic in another order).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite._kernels.ctmc import MAX_FACTOR_LEVELS
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.weighted import weighted_quantiles


def small_wu(n=120, seed=5):
    df = bps.datasets.load("wu2007")
    return df.iloc[np.random.default_rng(seed).choice(len(df), n, replace=False)].reset_index(drop=True)


@pytest.fixture(scope="module")
def fit():
    return bps.cart("y ~ x1 + x2 + x3", data=small_wu(), sampler="ctmc", chains=2, draws=600, tune=200, seed=3,
                    min_leaf_size=5, progress=False)


def test_weights_are_normalised_expected_holding_times(fit):
    w = fit.weights.values
    rate = fit.sample_stats["total_rate"].values
    assert w.shape == (2, 600)
    assert w.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(w, (1 / rate) / (1 / rate).sum(), rtol=1e-12)
    np.testing.assert_allclose(fit.sample_stats["weight"].values, 1 / rate, rtol=1e-12)
    assert np.ptp(w) > 0  # genuinely unequal
    assert set(np.unique(fit.sample_stats["event"].values)) <= {0, 1}


def test_summary_is_weighted(fit):
    s = fit.summary(level=0.9)
    w = fit.weights.values
    for name in ("n_leaves", "depth", "sigma"):
        x = fit.posterior[name].values
        mean = float((w * x).sum() / w.sum())
        sd = float(np.sqrt((w * (x - mean) ** 2).sum() / w.sum()))
        assert s.loc[name, "mean"] == pytest.approx(mean, rel=1e-10)
        assert s.loc[name].iloc[1] == pytest.approx(sd, rel=1e-6, abs=1e-12)
        q = weighted_quantiles(x.reshape(-1, 1), w.reshape(-1), [0.05, 0.95])[:, 0]
        assert s.loc[name].iloc[2] == pytest.approx(q[0])
        assert s.loc[name].iloc[3] == pytest.approx(q[1])
    # the ESS of weighted draws is the delta-method ESS, never the number of jumps
    assert np.all(s["ess_bulk"] < 1200)


def test_predict_and_activity_are_weighted(fit):
    new = pd.DataFrame({"x1": [0.2, 0.8], "x2": [0.2, 0.7], "x3": [0.7, 0.3]})
    w = fit.weights.values.reshape(-1)
    f = fit.predict(new, samples=True).values.reshape(-1, 2)
    pred = fit.predict(new, level=0.9)
    np.testing.assert_allclose(pred["mean"].values, w @ f / w.sum(), rtol=1e-10)
    q = weighted_quantiles(f, w, [0.05, 0.95])
    np.testing.assert_allclose(pred[["lower", "upper"]].values.T, q, rtol=1e-10)
    act = fit.variable_activity()
    a = fit.posterior["variable_activity"].values.reshape(len(w), -1)
    np.testing.assert_allclose(act["mean"].values, w @ np.nan_to_num(a) / w.sum(), rtol=1e-10)


def test_map_tree_and_save_load_keep_the_weights(fit, tmp_path):
    assert "MAP tree" in str(fit.map_tree())
    path = tmp_path / "ctmc.nc"
    fit.to_netcdf(path)
    back = bps.load(path)
    np.testing.assert_allclose(back.weights.values, fit.weights.values)
    pd.testing.assert_frame_equal(back.summary(), fit.summary())


@pytest.mark.parametrize("model", ["mean_variance_shift", "classification"])
def test_other_leaf_models(model):
    df = small_wu(80)
    if model == "classification":
        df["y"] = np.where(df["y"] > 3, "high", "low")
        fit = bps.cart("y ~ .", data=df, sampler="ctmc", chains=1, draws=300, tune=100, seed=1, progress=False)
        prob = fit.predict(df.head(3), kind="prob")
        w = fit.weights.values.reshape(-1)
        p = fit.predict(df.head(3), samples=True).values.reshape(len(w), 3, -1)
        np.testing.assert_allclose(prob.iloc[:, 0].values, (w @ p.reshape(len(w), -1) / w.sum()).reshape(3, -1)[:, 0],
                                   rtol=1e-10)
    else:
        fit = bps.cart("y ~ .", data=df, sampler="ctmc", model=model, chains=1, draws=300, tune=100, seed=1,
                       progress=False)
        fit.predict(df.head(3), kind="predictive")
    assert fit.weights.values.sum() == pytest.approx(1.0)
    assert fit.summary().loc["n_leaves", "mean"] > 1.5  # the signal is found


def test_same_seed_same_draws():
    a = bps.cart("y ~ .", data=small_wu(60), sampler="ctmc", chains=2, draws=100, tune=20, seed=9, progress=False)
    b = bps.cart("y ~ .", data=small_wu(60), sampler="ctmc", chains=2, draws=100, tune=20, seed=9, progress=False,
                 threads=1)
    np.testing.assert_array_equal(a.sample_stats["weight"].values, b.sample_stats["weight"].values)
    np.testing.assert_array_equal(a.posterior["sigma"].values, b.posterior["sigma"].values)


def test_bart_ctmc():
    df = small_wu(100)
    fit = bps.bart("y ~ .", data=df, sampler="ctmc", trees=10, chains=1, draws=100, tune=100, seed=2, progress=False)
    stats = fit.sample_stats
    assert {"jumps", "total_rate", "time"} <= set(stats.data_vars)
    assert np.all(fit.weights.values == fit.weights.values.flat[0])  # BART draws are equally weighted
    assert np.all(stats["time"].values == stats["time"].values[0, 0])
    rmse = float(np.sqrt(np.mean((fit.predict(df)["mean"] - df["y"]) ** 2)))
    assert rmse < 1.3  # the noise sd of wu2007 is 1; a stump would give ~1.7
    fixed = bps.bart("y ~ .", data=df, sampler="ctmc", sampler_options={"time": 0.2}, trees=5, chains=1, draws=20,
                     tune=10, seed=2, progress=False)
    assert np.all(fixed.sample_stats["time"].values == 0.2)


def test_option_errors():
    df = small_wu(40)
    with pytest.raises(ArgumentError, match="'time' applies to BART only"):
        bps.cart("y ~ .", data=df, sampler="ctmc", sampler_options={"time": 1.0}, draws=5, tune=0, progress=False)
    with pytest.raises(ArgumentError, match="'time' must be 'auto' or a positive number"):
        bps.bart("y ~ .", data=df, sampler="ctmc", sampler_options={"time": -1}, draws=5, tune=0, progress=False)
    with pytest.raises(ArgumentError, match="sampler 'ctmc' has no option 'rotate_share'; its options are: 'time', "
                                            "'rotate', 'perturb'"):
        bps.cart("y ~ .", data=df, sampler="ctmc", sampler_options={"rotate_share": 0.5}, draws=5, tune=0,
                 progress=False)


@pytest.mark.parametrize("executor", [None, "threads"])
def test_factor_with_too_many_levels_is_refused(executor):
    """The error names the column, its level count, the limit and what to do (CART and BART),
    also when the chains are built inside an executor's tasks."""
    from concurrent.futures import ThreadPoolExecutor

    levels = MAX_FACTOR_LEVELS + 1
    df = pd.DataFrame({"g": [f"l{i % levels}" for i in range(3 * levels)], "x": np.arange(3.0 * levels),
                       "y": np.arange(3.0 * levels)})
    pool = ThreadPoolExecutor(2) if executor else None
    for fit in (bps.cart, lambda *a, **k: bps.bart(*a, trees=3, **k)):
        with pytest.raises(ArgumentError) as info:
            fit("y ~ x + C(g)", data=df, sampler="ctmc", draws=5, tune=0, progress=False, executor=pool)
        msg = str(info.value)
        assert f"column 'C(g)' is a factor with {levels} levels, more than the {MAX_FACTOR_LEVELS}" in msg, msg
        assert "sampler='cgm'" in msg and "merge levels of column 'C(g)'" in msg, msg
    if pool is not None:
        pool.shutdown()


def test_cli(tmp_path):
    path = tmp_path / "wu.csv"
    small_wu(60).to_csv(path, index=False)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["fit", "y ~ .", str(path), "--model", "bart", "--sampler", "ctmc", "--sampler-option",
                       "time=0.5", "--trees", "5", "--chains", "1", "--draws", "20", "--tune", "10", "--seed", "1",
                       "--no-progress"])
    assert status == 0, err.getvalue()
