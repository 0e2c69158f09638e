"""BART with observation weights and an offset (issue 30, "Heteroskedastic BART and weights";
``bps.bart(..., weights="w", offset="o")``, ``samplers/hetero.py``, ``posterior/variance.py``).

The statistical checks use fixed seeds; each tolerance says what it covers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, DataError
from bartpy_suite.models.bart import residual_sd

RUN = {"check_mixing": False, "progress": False}


def _root_posterior(y, w, sigma, prior_var, center):
    """Exact posterior (mean, sd) of f when every tree is a root (one tree): f ~ N(center, prior_var)
    a priori, y_i ~ N(f, sigma^2 / w_i)."""
    prec = w.sum() / sigma ** 2 + 1.0 / prior_var
    mean = center + (w * (y - center)).sum() / sigma ** 2 / prec
    return mean, 1.0 / np.sqrt(prec)


def _tiny():
    y = np.array([0.3, 1.2, -0.4, 2.0, 0.9, 1.5])
    w = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 1.0])
    x = np.array([0.1, 0.5, 0.2, 0.9, 0.4, 0.7])
    return x, y, w


def test_integer_weights_equal_duplicated_rows_root_only():
    """A root-only forest (alpha = 1e-12: a grow is accepted with probability ~1e-12 times a bounded
    likelihood ratio, never in 4000 sweeps) of one tree
    with sigma fixed: the weighted fit draws f from its exact conditional, which is the posterior of
    the data with row i repeated w_i times. Both fits (the weighted kernels and the plain ones on the
    duplicated rows) are compared with the closed form: 4000 independent draws each, so the posterior
    mean is within 5 Monte Carlo standard errors (sd / sqrt(4000)) and the sd within 6% (its relative
    MC error is about 1 / sqrt(2 * 4000) = 1.1%)."""
    x, y, w = _tiny()
    sigma = 0.8
    kw = dict(trees=1, sigma=sigma, alpha=1e-12, min_leaf_size=1, draws=4000, tune=10, chains=1, seed=3, **RUN)
    weighted = bps.BART(**kw).fit(x[:, None], y, sample_weight=w)
    rep = np.repeat(np.arange(y.size), w.astype(int))
    dup = bps.BART(**kw).fit(x[rep, None], y[rep])
    for fit in (weighted, dup):
        center, scale, k = fit.config["center"], fit.config["scale"], fit.config["k"]
        mean, sd = _root_posterior(y, w, sigma, (scale * 0.5 / k) ** 2, center)
        f = fit.function_samples()[:, 0]
        assert abs(f.mean() - mean) < 5 * sd / np.sqrt(f.size)
        assert abs(f.std() / sd - 1) < 0.06
    assert weighted.config["leaf_model"] == "normal_hetero" and dup.config["leaf_model"] == "normal"
    assert weighted.posterior["n_leaves"].values.max() == 1


def test_integer_weights_equal_duplicated_rows_tree_posterior():
    """One tree, sigma fixed, min_leaf_size 1: the weighted tree posterior equals that of the duplicated
    rows (the same rules are available, every leaf's marginal has A = sum of weights = rows). The leaf
    count distribution and the posterior mean of f at each distinct row must agree: total variation
    < 0.06 (two MH chains of 2 x 3000 draws; the leaf-count distribution's MC error at this size is
    about 0.02) and f within 0.1 posterior sd."""
    x, y, w = _tiny()
    kw = dict(trees=1, sigma=0.5, min_leaf_size=1, draws=3000, tune=200, chains=2, seed=11, **RUN)
    weighted = bps.BART(**kw).fit(x[:, None], y, sample_weight=w)
    rep = np.repeat(np.arange(y.size), w.astype(int))
    dup = bps.BART(**kw).fit(x[rep, None], y[rep])
    la = weighted.posterior["n_leaves"].values.ravel()
    lb = dup.posterior["n_leaves"].values.ravel()
    top = max(la.max(), lb.max()) + 1
    tv = 0.5 * np.abs(np.bincount(la, minlength=top) / la.size - np.bincount(lb, minlength=top) / lb.size).sum()
    assert tv < 0.06, tv
    new = pd.DataFrame({"x0": x})
    fa = weighted.function_samples(new)
    fb = dup.function_samples(new)
    assert np.all(np.abs(fa.mean(0) - fb.mean(0)) < 0.1 * fb.std(0)), (fa.mean(0), fb.mean(0))


def _friedman(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 3))
    y = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 5 * x[:, 2] + rng.normal(size=n)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2], "y": y})


def test_unit_weights_agree_with_unweighted_bart():
    """Weights 1 run the weighted kernels, whose target is BART's posterior: f at the training rows
    and sigma agree with the unweighted fit within Monte Carlo error. Each fit keeps 2 x 400 draws
    (an effective size of 100+ for f), so the difference of two posterior means has an MC sd of about
    0.15 posterior sd; the tolerance is 0.6 posterior sd per row and 0.25 on average over the rows."""
    df = _friedman(80, 0).assign(w=1.0)
    kw = dict(trees=20, draws=400, tune=300, chains=2, seed=5, **RUN)
    a = bps.bart("y ~ x1 + x2 + x3", data=df, weights="w", **kw)
    b = bps.bart("y ~ x1 + x2 + x3", data=df, **kw)
    fa, fb = a.function_samples(), b.function_samples()
    z = np.abs(fa.mean(0) - fb.mean(0)) / fb.std(0)
    assert z.max() < 0.6 and z.mean() < 0.25, (z.max(), z.mean())
    sa, sb = a.posterior["sigma"].values.ravel(), b.posterior["sigma"].values.ravel()
    assert abs(sa.mean() - sb.mean()) < 0.25 * sb.std() + 0.02, (sa.mean(), sb.mean())


def test_prior_recovery_with_weights():
    """With the likelihood off the weighted chain samples the prior: f(x) at a row ~ N(center,
    (scale * 0.5 / k)^2) (a sum of trees leaves), sigma^2 ~ nu lam / chi^2_nu, and the tree sizes match
    the unweighted chain's prior draws. 2 x 2000 draws: mean within 0.1 prior sd, sd within 8%, sigma's
    median within 8%, mean leaves per tree within 0.1 (their MC error at this size is about 0.02)."""
    df = _friedman(40, 1).assign(w=np.linspace(0.5, 3.0, 40))
    kw = dict(trees=10, draws=2000, tune=50, chains=2, seed=7, likelihood=False, **RUN)
    fit = bps.bart("y ~ x1 + x2 + x3", data=df, weights="w", **kw)
    plain = bps.bart("y ~ x1 + x2 + x3", data=df, **kw)
    c = fit.config
    f = fit.function_samples()[:, 3]
    prior_sd = c["scale"] * 0.5 / c["k"]
    assert abs(f.mean() - c["center"]) < 0.1 * prior_sd
    assert abs(f.std() / prior_sd - 1) < 0.08
    sigma2 = fit.posterior["sigma"].values.ravel() ** 2
    from scipy import stats

    prior_median = c["nu"] * c["lam"] / stats.chi2.ppf(0.5, c["nu"])
    assert abs(np.median(sigma2) / prior_median - 1) < 0.08
    ml = fit.posterior["mean_leaves"].values.mean()
    mp = plain.posterior["mean_leaves"].values.mean()
    assert abs(ml - mp) < 0.1, (ml, mp)


def test_offset_shifts_predictions_exactly():
    """An offset alone runs the unweighted kernels on y - o: the fit's draws are those of a plain fit
    to y - o (same seed), and predictions of new rows add their offset exactly."""
    df = _friedman(60, 2)
    df["o"] = np.linspace(-3, 3, 60)
    df["y"] = df["y"] + df["o"]
    kw = dict(trees=10, draws=50, tune=50, chains=1, seed=9, **RUN)
    fit = bps.bart("y ~ x1 + x2 + x3", data=df, offset="o", **kw)
    plain = bps.bart("y ~ x1 + x2 + x3", data=df.assign(y=df.y - df.o), **kw)
    new = df.head(5)
    base = plain.predict(new)
    got = fit.predict(new)
    np.testing.assert_allclose(got.values, base.values + new["o"].to_numpy()[:, None], rtol=0, atol=1e-12)
    shifted = fit.predict(new.assign(o=new["o"] + 10.0))
    np.testing.assert_allclose(shifted.values, got.values + 10.0, rtol=0, atol=1e-9)
    # training rows carry their own offsets
    np.testing.assert_allclose(fit.predict().values[:5], got.values, rtol=0, atol=1e-12)
    with pytest.raises(DataError, match="'o'"):
        fit.predict(new.drop(columns="o"))
    with pytest.raises(DataError, match="'o'"):
        fit.predict(new[["x1", "x2", "x3"]].to_numpy())


def test_weighted_fit_round_trips(tmp_path):
    """A fit with weights and an offset saves and loads: same configuration, same predictions of every
    kind (predictive intervals included: their noise uses the rows' weights), same log-likelihood."""
    df = _friedman(50, 3)
    df["w"] = np.tile([1.0, 2.0, 0.5, 0.0, 3.0], 10)
    df["o"] = np.linspace(0, 1, 50)
    fit = bps.bart("y ~ x1 + x2 + x3", data=df, weights="w", offset="o", trees=10, draws=30, tune=30, chains=2,
                   seed=4, **RUN)
    path = tmp_path / "w.nc"
    fit.to_netcdf(path)
    back = bps.load(path)
    assert back.config == fit.config
    for kind in ("mean", "predictive", "sigma"):
        pd.testing.assert_frame_equal(back.predict(df.head(7), kind=kind), fit.predict(df.head(7), kind=kind))
    np.testing.assert_array_equal(back.idata["log_likelihood"]["y"].values, fit.idata["log_likelihood"]["y"].values)
    # log N(y; o + f, sigma^2 / w) per draw and row; a row of weight 0 is in no likelihood term
    from scipy import stats

    ll = fit.idata["log_likelihood"]["y"].values.reshape(-1, 50)
    f = fit.predict(kind="mean", samples=True).values.reshape(-1, 50)  # training rows: f + o
    np.testing.assert_allclose(f, fit.function_samples() + df.o.to_numpy()[None, :], rtol=0, atol=1e-12)
    sigma = fit.posterior["sigma"].values.reshape(-1, 1)
    pos = df.w.to_numpy() > 0
    ref = stats.norm.logpdf(df.y.to_numpy()[None, pos], f[:, pos], sigma / np.sqrt(df.w.to_numpy()[None, pos]))
    np.testing.assert_allclose(ll[:, pos], ref, rtol=1e-10)
    assert np.all(ll[:, ~pos] == 0)


def test_weighted_sigma_hat_is_weighted_least_squares():
    """sigma_hat with weights: the residual sd of the weighted least-squares fit (bcf's), compared with
    statsmodels' WLS scale."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    w = rng.uniform(0.2, 3, 40)
    y = x @ [1.0, -2.0] + rng.normal(size=40) / np.sqrt(w)
    ref = np.sqrt(sm.WLS(y, sm.add_constant(x), weights=w).fit().scale)
    assert residual_sd(x, y, np.zeros(2, bool), w) == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("column, values, match", [
    ("w", [1.0, np.nan], "'w' holds nan at row 'b'"),
    ("w", [1.0, -2.0], "'w' holds -2.0 at row 'b'"),
    ("w", [1.0, "x"], "'w' is not numeric: row 'b' holds 'x'"),
    ("o", [0.0, np.inf], "'o' holds inf at row 'b'"),
])
def test_bad_weight_or_offset_names_column_and_row(column, values, match):
    df = _friedman(30, 4)
    df.index = ["a", "b"] + [f"r{i}" for i in range(28)]
    df["w"] = 1.0
    df["o"] = 0.0
    df[column] = pd.Series(list(values) + ([1.0] * 28), index=df.index, dtype=object if isinstance(values[1], str)
                           else float)
    with pytest.raises(DataError, match=match):
        bps.bart("y ~ x1 + x2", data=df, weights="w", offset="o", trees=5, draws=5, tune=5, **RUN)


def test_bad_input_errors():
    df = _friedman(30, 5).assign(w=0.0)
    with pytest.raises(DataError, match="0 in every row"):
        bps.bart("y ~ x1", data=df, weights="w", trees=5, draws=5, tune=5, **RUN)
    with pytest.raises(DataError, match="no column 'nope'"):
        bps.bart("y ~ x1", data=df, weights="nope", trees=5, draws=5, tune=5, **RUN)
    with pytest.raises(ArgumentError, match="categorical"):
        bps.bart("yb ~ x1", data=df.assign(w=1.0, yb=df.y > df.y.median()), weights="w", trees=5, draws=5, tune=5,
                 **RUN)
    with pytest.raises(ArgumentError, match="'grow_prune', 'cgm'|'cgm', 'grow_prune'"):
        bps.bart("y ~ x1", data=df.assign(w=1.0), weights="w", sampler="pg", trees=5, draws=5, tune=5, **RUN)
    with pytest.raises(ArgumentError, match="names a data column"):
        bps.BART(weights="w", **RUN).fit(df[["x1"]].to_numpy(), df.y.to_numpy())
    with pytest.raises(ArgumentError, match="sparse"):
        bps.BART(weights="w", sparse=True)


def test_dot_formula_leaves_weight_and_offset_columns_out():
    df = _friedman(30, 6).assign(w=1.0, o=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = bps.bart("y ~ .", data=df, weights="w", offset="o", trees=5, draws=5, tune=5, **RUN)
    assert fit.predictors == ["x1", "x2", "x3"]
    assert df.columns.tolist() == ["x1", "x2", "x3", "y", "w", "o"]  # the caller's frame is untouched


def test_cli_weights_offset_and_variance(tmp_path):
    """``fit --model bart --weights w --offset o --variance '~ x1'`` and ``predict`` of a CSV with the offset
    column: the same predictions as the Python fit with the same settings and seed; the options on another
    model are a usage error."""
    import contextlib
    import io

    from bartpy_suite.cli import main

    df = _friedman(40, 8).assign(w=np.tile([1.0, 2.0], 20), o=np.linspace(0, 2, 40))
    train, new, saved, out = (tmp_path / "train.csv", tmp_path / "new.csv", tmp_path / "fit.nc",
                              tmp_path / "pred.csv")
    df.to_csv(train, index=False)
    df.head(5).to_csv(new, index=False)
    args = ["--model", "bart", "--weights", "w", "--offset", "o", "--variance", "~ x1", "--trees", "5", "--draws", "10",
            "--tune", "10", "--chains", "1", "--seed", "2", "--no-check-mixing", "--no-progress"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["fit", "y ~ x1 + x2 + x3", str(train), *args, "--out", str(saved)]) == 0
        assert main(["predict", str(saved), str(new), "--out", str(out)]) == 0
    got = pd.read_csv(out)
    ref = bps.bart("y ~ x1 + x2 + x3", data=df, weights="w", offset="o", variance="~ x1", trees=5, draws=10, tune=10,
                   chains=1, seed=2, **RUN).predict(df.head(5))
    np.testing.assert_allclose(got[["mean", "lower", "upper"]].to_numpy(), ref.to_numpy(), rtol=1e-9)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["fit", "y ~ x1", str(train), "--model", "cart", "--weights", "w"]) == 2
    assert "--weights applies to --model bart" in err.getvalue()


def test_array_fit_with_weights_and_offset():
    """``fit(X, y, sample_weight=, sample_offset=)``: the caller's arrays are neither changed nor kept (the
    fit copies them); new rows are a DataFrame of the predictors and an ``offset`` column."""
    df = _friedman(40, 9)
    x = df[["x1", "x2", "x3"]].to_numpy()
    w = np.tile([1.0, 3.0], 20)
    o = np.linspace(-1, 1, 40)
    w0, o0 = w.copy(), o.copy()
    fit = bps.BART(trees=5, draws=10, tune=10, chains=1, seed=1, **RUN).fit(x, df.y.to_numpy() + o, sample_weight=w,
                                                                            sample_offset=o)
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_array_equal(o, o0)
    w[:] = 5.0
    np.testing.assert_array_equal(fit.idata["constant_data"]["obs_weight"].values, w0)
    assert fit.config["hetero"]["weights"] == "weights" and fit.config["hetero"]["offset"] == "offset"
    new = pd.DataFrame(x[:3], columns=fit.predictors).assign(offset=[0.0, 1.0, 2.0])
    mean = fit.predict(new)["mean"].to_numpy()
    f = fit.function_samples(new[fit.predictors]).mean(0)
    np.testing.assert_allclose(mean, f + [0.0, 1.0, 2.0], rtol=0, atol=1e-12)


def test_sklearn_sample_weight_is_the_weights_keyword():
    """``BARTRegressor.fit(X, y, sample_weight=w)`` is ``BART().fit(X, y, sample_weight=w)``: the same fit."""
    from bartpy_suite.sklearn import BARTRegressor

    df = _friedman(40, 10)
    x, y = df[["x1", "x2", "x3"]].to_numpy(), df.y.to_numpy()
    w = np.tile([1.0, 2.0, 0.5, 3.0], 10)
    kw = dict(trees=5, draws=20, tune=20, chains=1, seed=3, **RUN)
    est = BARTRegressor(**kw).fit(x, y, sample_weight=w)
    ref = bps.BART(**kw).fit(x, y, sample_weight=w)
    np.testing.assert_allclose(est.predict(x[:5]), ref.function_samples(x[:5]).mean(0), rtol=1e-12)
    assert est.posterior_.config["leaf_model"] == "normal_hetero"
