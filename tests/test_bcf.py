"""Bayesian causal forests (issue 30, "Causal"; spec multi_forest.md 3, tests 8.2-8.4).

The chain-level tests drive ``samplers.multi_forest.CausalChain`` on small problems; the user-contract
tests go through ``bps.bcf``. Statistical tests have fixed seeds and state their tolerances.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from _bcf import (
    assert_mean_near,
    batch_se,
    bcf_problem,
    check_geweke,
    check_prior_draws,
    check_releases_every_array,
)
from scipy import stats

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, DataError
from bartpy_suite.posterior.bcf import CommonSupportWarning
from bartpy_suite.samplers.multi_forest import CausalChain


def _run(problem, sweeps, tune, seed, moves=None):
    chain = CausalChain(problem, moves or {"grow": 0.5, "prune": 0.5}, np.random.default_rng(seed))
    chain.allocate(sweeps)
    chain.run(0, tune + sweeps, tune, 1)
    return chain.collect(sweeps)


# -- the prior (spec 8.2) -------------------------------------------------------------------------

def test_prior_recovery_with_the_likelihood_off():
    """With the likelihood off the chain samples the prior (spec 8.2). Every check compares a probability
    or moment with its prior value within 4 batch-means standard errors of the chain (delta mixes slowly
    through its Gibbs step with the leaves, so independent-draw errors would be too small):

    * (b_1 - b_0) ~ N(0, 1): mean 0, P(|b_1 - b_0| < 1) = 0.6827, sd within 0.05 of 1;
    * s_m / sqrt(delta) standard Cauchy: P(|.| < 1) = 1/2, P(. < -1) = 1/4 (the half-Cauchy of HMC20);
    * delta ~ chi^2_1: P(delta < its quartiles) = 1/4, 1/2, 3/4;
    * sigma^2 ~ nu lam / chi^2_nu: P(sigma^2 < its median) = 1/2;
    * tree sizes: the root (continuous predictors, min_leaf 1: a rule is always available there) splits
      with probability alpha, so the share of stumps is 1 - alpha: 0.05 (mu forest), 0.75 (tau forest).

    The mu forest has 2 trees: the Gibbs pair (delta, leaves) mixes in log delta by steps of about
    1 / sqrt(number of leaves), so with 8 trees (~30 leaves) excursions to small delta take hundreds of
    sweeps and 20,000 sweeps under-sample them (in runs of this test with 8 trees, P(delta < its lower
    quartile) came out well below 1/4 with batch errors that missed it); with 2 trees the same code mixes
    in a few sweeps.
    """
    sweeps = 20_000
    out = _run(bcf_problem(likelihood=False, mu_trees=2, tau_trees=8, lam=0.2), sweeps, 200, seed=1)
    diff = out["params"][:, 2] - out["params"][:, 1]
    assert_mean_near(diff, 0.0, "b1 - b0 mean")
    assert abs(diff.std() - 1.0) < 0.05
    check_prior_draws(out)


def test_zero_weights_sample_the_prior():
    """Spec 8.2's own recipe: with the likelihood on but every weight w_i = 0 no row informs anything, so
    the chain samples the prior through the weighted code paths (leaf statistics A = c = 0, coding and s_m
    precisions from the prior, sigma^2 with n+ = 0). Same checks and tolerances as above (4 batch-means
    standard errors), on the quantities the weights reach."""
    n = 20
    out = _run(bcf_problem(n=n, likelihood=True, mu_trees=2, tau_trees=8, lam=0.2, w=np.zeros(n)), 20_000, 200, seed=4)
    p = out["params"]
    assert_mean_near(np.abs(p[:, 2] - p[:, 1]) < 1, 0.6827, "P(|b1 - b0| < 1)")
    assert_mean_near(np.abs(p[:, 3] / np.sqrt(p[:, 4])) < 1, 0.5, "P(|s_m / sqrt(delta)| < 1)")
    assert_mean_near(p[:, 0] ** 2 < 3 * 0.2 / stats.chi2(3).ppf(0.5), 0.5, "P(sigma^2 < its median)")
    assert_mean_near((out["tau"]["n_leaves"] == 1).mean(axis=1), 0.75, "share of stumps in the tau forest")


# -- the conjugate reduction (spec 8.4) -----------------------------------------------------------

def _importance_moments(y, z, m_mu, m_tau, mu_leaf_var, tau_leaf_var, nu, lam, draws, seed):
    """Posterior means and sds of mu0 = s_m Theta_mu + b_0 Theta_tau and tau = (b_1 - b_0) Theta_tau of the
    root-only model y_i = s_m Theta_mu + b_{z_i} Theta_tau + e_i, by importance sampling from the prior
    (Theta_mu | delta ~ N(0, M_mu mu_leaf_var / delta), Theta_tau ~ N(0, M_tau tau_leaf_var)) with the
    Gaussian likelihood as weight."""
    rng = np.random.default_rng(seed)
    delta = rng.gamma(0.5, 2.0, draws)
    theta_mu = rng.normal(size=draws) * np.sqrt(m_mu * mu_leaf_var / delta)
    theta_tau = rng.normal(size=draws) * math.sqrt(m_tau * tau_leaf_var)
    sm = rng.normal(size=draws)
    b0, b1 = rng.normal(scale=math.sqrt(0.5), size=(2, draws))
    sigma2 = nu * lam / rng.chisquare(nu, draws)
    mu0 = sm * theta_mu + b0 * theta_tau
    mu1 = sm * theta_mu + b1 * theta_tau
    y0, y1 = y[z == 0], y[z == 1]
    ss = ((y0[:, None] - mu0[None]) ** 2).sum(0) + ((y1[:, None] - mu1[None]) ** 2).sum(0)
    logw = -0.5 * y.size * np.log(sigma2) - 0.5 * ss / sigma2
    w = np.exp(logw - logw.max())
    w /= w.sum()
    ess = 1 / np.sum(w * w)
    out = {}
    for name, v in (("mu0", mu0), ("tau", mu1 - mu0)):
        mean = float(np.sum(w * v))
        out[name] = (mean, float(np.sqrt(np.sum(w * (v - mean) ** 2))))
    return out, ess


@pytest.mark.slow
def test_root_only_trees_reduce_to_the_conjugate_model():
    """Spec 8.4: with no split possible (min_leaf above n) every tree is a root and BCF reduces to
    y_i = s_m Theta_mu + b_{z_i} Theta_tau + e_i. The chain's posterior means of mu0 = s_m Theta_mu +
    b_0 Theta_tau and tau = (b_1 - b_0) Theta_tau must match importance sampling from the prior (2 million
    draws, ESS printed) within 4 combined standard errors (batch means for the chain, sd / sqrt(ESS) for the
    importance sampler); and their posterior sds within 10%."""
    n = 12
    rng = np.random.default_rng(5)
    z = np.arange(n) % 2
    y = 0.4 + 0.8 * z + 0.7 * rng.normal(size=n)
    problem = bcf_problem(n=n, mu_trees=4, tau_trees=3, min_leaf=n + 1, y=y, lam=0.3)
    out = _run(problem, 60_000, 1000, seed=2)
    p = out["params"]
    theta_mu = out["mu"]["store"].value.reshape(-1, 4).sum(1)
    theta_tau = out["tau"]["store"].value.reshape(-1, 3).sum(1)
    chain = {"mu0": p[:, 3] * theta_mu + p[:, 1] * theta_tau, "tau": (p[:, 2] - p[:, 1]) * theta_tau}
    exact, ess = _importance_moments(y, z, 4, 3, problem.mu_scale2, problem.tau.tau2, 3.0, 0.3, 2_000_000, 9)
    print("importance ESS", ess)
    for name, (mean, sd) in exact.items():
        se = math.hypot(batch_se(chain[name]), sd / math.sqrt(ess))
        assert abs(chain[name].mean() - mean) < 4 * se, (name, chain[name].mean(), mean, se)
        assert abs(chain[name].std() / sd - 1) < 0.1, (name, chain[name].std(), sd)


# -- Geweke (spec 8.3) ----------------------------------------------------------------------------

@pytest.mark.slow
def test_geweke_joint_distribution():
    """Geweke (2004) successive-conditional test on n = 20 (spec 8.3): alternate one sweep with a fresh
    y ~ p(y | parameters); the identified functions at row 0, tau_0 = (b_1 - b_0) t(x_0) and mu0_0 =
    s_m m(x_0) + b_0 t(x_0), and sigma^2 must have the prior's distribution, taken from a chain with the
    likelihood off. Their means, and the means of their squares (fourth-moment-free for sigma^2: its
    log), agree within 4 combined batch-means standard errors. A wrong conditional (e.g. the wrong
    sigma^2 power in a leaf draw) shifts them by tens of errors."""
    moves = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}
    check_geweke(lambda problem, rng: CausalChain(problem, moves, rng))


# -- the user contract ----------------------------------------------------------------------------

def _hmc20(n, seed, heterogeneous=True, linear=True, noise=1.0):
    """HMC20 section 6's design (``datasets.simulate_hmc20``) with x4, x5 named xb, xc and the true
    propensity as the column ps; returns the data and the true tau(x_i)."""
    df, tau, pi = bps.datasets.simulate_hmc20(n, seed, heterogeneous=heterogeneous, linear=linear, noise=noise)
    return df.rename(columns={"x4": "xb", "x5": "xc"}).assign(ps=pi), tau


def test_bcf_user_contract_small():
    """``bps.bcf`` with a propensity column: effects, CATE, prediction and summary have the documented
    shapes and are finite; the CATE interval holds the mean; the data are not modified."""
    df, _ = _hmc20(60, 0)
    before = df.copy()
    fit = bps.bcf("y ~ x1 + x2 + x3 + xb + C(xc)", df, treatment="z", propensity="ps", mu_trees=20, tau_trees=10,
                  chains=2, draws=40, tune=40, seed=1)
    pd.testing.assert_frame_equal(df, before)
    ate = fit.ate(level=0.9)
    assert ate["lower"] <= ate["mean"] <= ate["upper"] and ate["level"] == 0.9
    assert np.isfinite(fit.att()["mean"]) and np.isfinite(fit.atc()["mean"])
    cate = fit.cate()
    assert list(cate.columns) == ["mean", "lower", "upper"] and len(cate) == 60
    assert ((cate["lower"] <= cate["mean"]) & (cate["mean"] <= cate["upper"])).all()
    new = df.drop(columns=["y", "z"]).head(7)
    assert fit.cate(new).shape == (7, 3)
    pred = fit.predict(df.head(5))
    assert pred.shape == (5, 3) and np.isfinite(pred.to_numpy()).all()
    summary = fit.summary()
    assert {"ATE", "ATT", "ATC", "sigma"} <= set(summary.index)
    assert len(fit.params) == 80 and set(fit.params.columns) >= {"sigma", "b0", "b1", "mu_scale", "delta_mu"}
    # the mean CATE over the rows is the ATE, draw by draw
    assert fit.cate()["mean"].mean() == pytest.approx(ate["mean"], rel=1e-10)


def test_bcf_bad_input():
    df, _ = _hmc20(40, 1)
    with pytest.raises(DataError, match=r"treatment column 'xc' must be binary 0/1.*found the values"):
        bps.bcf("y ~ x1", df, treatment="xc", propensity="ps")
    with pytest.raises(DataError, match=r"treatment column 'z' is constant"):
        bps.bcf("y ~ x1", df.assign(z=1), treatment="z", propensity="ps")
    with pytest.raises(ArgumentError, match=r"treatment 'z' may not be a predictor"):
        bps.bcf("y ~ x1 + z", df, treatment="z", propensity="ps")
    with pytest.raises(ArgumentError, match=r"sampler 'smc' cannot run a model of several forests.*'grow_prune', 'cgm'"):
        bps.bcf("y ~ x1", df, treatment="z", propensity="ps", sampler="smc")
    with pytest.raises(ArgumentError, match=r"'zz' is not a column"):
        bps.bcf("y ~ x1", df, treatment="zz")
    with pytest.raises(DataError, match=r"propensity column 'x1' must lie strictly between 0 and 1"):
        bps.bcf("y ~ x2", df, treatment="z", propensity="x1")
    # an array where a column name belongs: the message names its type and length, not its values
    with pytest.raises(ArgumentError, match=r"^propensity=<ndarray of 40 values> is not a column of data"):
        bps.bcf("y ~ x1", df, treatment="z", propensity=np.full(40, 0.5))


def test_common_support_warning():
    """Rows with a propensity outside [0.05, 0.95] are counted and warned about, naming how many."""
    df, _ = _hmc20(40, 2)
    df["ps"] = np.where(np.arange(40) < 3, 0.02, 0.5)
    with pytest.warns(CommonSupportWarning, match=r"3 of 40 rows have a propensity \(the column 'ps'\)"):
        fit = bps.bcf("y ~ x1", df, treatment="z", propensity="ps", mu_trees=5, tau_trees=3, chains=1, draws=5,
                      tune=5, seed=0)
    assert fit.common_support()["below"] == 3


@pytest.mark.slow
def test_bcf_recovers_the_ate_of_the_hmc20_design():
    """HMC20's heterogeneous, linear design at n = 250 (noise sd 1; spec 3.9) on four fixed replicates,
    propensity by probit BART (the default): at least 3 of the 4 95% ATE intervals cover the true sample ATE
    mean_i tau(x_i), and the ATE rmse over them is below 0.5. Why not one interval on one seed: targeted
    selection makes some data sets hard (when this test was written, the replicate ``_hmc20(250, 11)`` with
    seed 4 and 2 x 500 draws gave an interval that missed the truth), and ``benchmarks/bcf_hmc20.py``
    (``benchmarks/results/bcf_hmc20.md``) measures ATE rmse about 0.15-0.24 and coverage 0.8-1 per setting
    at n = 250, so 0.5 leaves room for four replicates. HMC20's targeted selection puts some propensities
    outside [0.05, 0.95]: the common-support warning is expected and silenced here."""
    errors, covered = [], 0
    for rep in range(4):
        df, tau = _hmc20(250, 100 + 2 * rep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CommonSupportWarning)
            fit = bps.bcf("y ~ x1 + x2 + x3 + xb + C(xc)", df, treatment="z", chains=2, draws=500, tune=500,
                          seed=rep)
        ate = fit.ate()
        truth = tau.mean()
        covered += ate["lower"] <= truth <= ate["upper"]
        errors.append(ate["mean"] - truth)
    assert covered >= 3, errors
    assert math.sqrt(np.mean(np.square(errors))) < 0.5, errors


def test_bcf_calls_no_helper_from_python(monkeypatch):
    """Fitting and predicting reach compiled code through kernels only (``tests/test_kernel_entry_points.py``):
    a helper called from Python would compile its uncached twin in every process."""
    from kernel_conventions import record_helper_calls

    calls = record_helper_calls(monkeypatch)
    df, _ = _hmc20(40, 3)
    fit = bps.bcf("y ~ x1 + x2", df, treatment="z", propensity="ps", mu_trees=5, tau_trees=3, chains=1, draws=5,
                  tune=5, seed=0)
    fit.cate(df.head(3))
    fit.summary()
    assert calls == []


def test_save_and_load_give_the_same_effects(tmp_path):
    """``CausalFit.save`` (netCDF) and ``bps.load``: the loaded fit gives the same ATE, CATE on new rows (through
    the stored propensity model) and predictions, exactly; a damaged file is a ``FitFileError`` naming it, and an
    edited tree (a leaf turned into a split) is refused naming the variable, before a prediction kernel could walk
    past the tree's nodes."""
    import xarray as xr

    from bartpy_suite.errors import FitFileError

    df, _ = _hmc20(50, 4)
    df["ps_unused"] = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CommonSupportWarning)
        fit = bps.bcf("y ~ x1 + x2 + C(xc)", df.drop(columns=["ps"]), treatment="z", mu_trees=6, tau_trees=3,
                      chains=2, draws=8, tune=8, seed=2,
                      propensity_options={"trees": 10, "draws": 20, "tune": 20})
    path = tmp_path / "fit.nc"
    fit.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.nc"]  # nothing else left behind
    back = bps.load(path)
    new = df.drop(columns=["y", "z"]).tail(6)
    pd.testing.assert_series_equal(back.ate(), fit.ate())
    pd.testing.assert_frame_equal(back.cate(new), fit.cate(new))
    pd.testing.assert_frame_equal(back.predict(df.head(4)), fit.predict(df.head(4)))
    pd.testing.assert_frame_equal(back.params, fit.params)
    bad = tmp_path / "bad.nc"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = b"\0" * 64
    bad.write_bytes(bytes(raw))
    with pytest.raises(FitFileError, match="bad.nc"):
        bps.load(bad)
    tree = xr.open_datatree(path, engine="netcdf4").load()
    var = tree["mu_forest"]["node_var"].values.copy()
    var[int(np.flatnonzero(var == -1)[0])] = 0
    tree["mu_forest"] = tree["mu_forest"].to_dataset().assign(node_var=(("node",), var))
    edited = tmp_path / "edited.nc"
    tree.to_netcdf(edited, engine="netcdf4")
    with pytest.raises(FitFileError, match=r"mu_forest/node_var.*not a complete preorder tree"):
        bps.load(edited)


def test_cli_fit_and_predict_bcf(tmp_path):
    """``fit --model bcf --treatment z --out f.nc`` prints the ATE rows and saves the fit; ``predict`` writes
    the CATE per row (and E[y] where the treatment column is given), the same as the loaded fit's."""
    import contextlib
    import io

    from bartpy_suite.cli import main

    df, _ = _hmc20(40, 5)
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    new = tmp_path / "new.csv"
    df.drop(columns=["y", "z"]).head(5).to_csv(new, index=False)

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
        return status, out.getvalue(), err.getvalue()

    status, out, err = run(["fit", "y ~ x1 + x2", str(data), "--model", "bcf", "--treatment", "z", "--propensity",
                            "ps", "--chains", "1", "--draws", "5", "--tune", "5", "--seed", "1", "--no-progress",
                            "--out", str(tmp_path / "f.nc")])
    assert status == 0, err
    assert "ATE" in out and "ATT" in out
    status, out, err = run(["predict", str(tmp_path / "f.nc"), str(new)])
    assert status == 0, err
    got = pd.read_csv(io.StringIO(out))
    expected = bps.load(tmp_path / "f.nc").cate(pd.read_csv(new))
    np.testing.assert_allclose(got[["cate_mean", "cate_lower", "cate_upper"]].to_numpy(), expected.to_numpy(),
                               rtol=1e-12)
    status, _, err = run(["fit", "y ~ x1", str(data), "--model", "bcf", "--no-progress"])
    assert status == 2 and "--model bcf needs --treatment" in err
    status, _, err = run(["fit", "y ~ x1", str(data), "--model", "bart", "--treatment", "z", "--no-progress"])
    assert status == 2 and "--treatment applies to --model bcf only" in err


def test_tau_formula_and_missing_rows():
    """``tau_formula`` restricts the treatment forest's predictors (its stored rules split on them only; the
    mu forest keeps the formula's and the propensity); rows with a missing predictor are dropped with a
    warning and the effects are indexed by the rows kept; the treatment may be bool."""
    df, _ = _hmc20(60, 6)
    df.loc[3, "x2"] = np.nan
    df["z"] = df["z"].astype(bool)
    with pytest.warns(UserWarning, match=r"dropped 1 of 60 rows with missing values"):
        fit = bps.bcf("y ~ x1 + x2 + x3", df, treatment="z", propensity="ps", tau_formula="~ x3", mu_trees=8,
                      tau_trees=6, chains=1, draws=30, tune=30, seed=3, sampler="cgm")
    assert fit.tau.names == ["x3"] and fit.mu.names == ["x1", "x2", "x3", "propensity"]
    internal = fit.tau.var[fit.tau.var >= 0]
    assert internal.size > 0 and set(internal) == {0}
    activity = fit.variable_activity()
    assert activity.loc["x3", "tau"] == pytest.approx(1.0) and np.isnan(activity.loc["x1", "tau"])
    assert activity["mu"].sum() == pytest.approx(1.0, abs=0.05)  # draws without a split count 0
    cate = fit.cate()
    assert len(cate) == 59 and 3 not in cate.index
    with pytest.raises(ArgumentError, match="may not be a moderator"):
        bps.bcf("y ~ x1", df, treatment="z", propensity="ps", tau_formula="~ z")


def test_mixing_warning_on_unmixed_chains():
    """Two chains of 6 draws and no tuning disagree: ``bcf`` warns (``MixingWarning``) naming the split
    R-hat; ``check_mixing=False`` silences it."""
    from bartpy_suite.errors import MixingWarning

    df, _ = _hmc20(60, 7)
    kw = dict(treatment="z", propensity="ps", mu_trees=8, tau_trees=4, chains=2, draws=6, tune=0, seed=0)
    with pytest.warns(MixingWarning, match=r"split R-hat (ATE|sigma) \d"):
        bps.bcf("y ~ x1 + x2 + x3", df, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        bps.bcf("y ~ x1 + x2 + x3", df, check_mixing=False, **kw)


def test_weights():
    """``weights="w"``: precision weights reach the chain (doubling every weight is the same model as halving
    sigma^2, so the fitted sigma is about sqrt(2) larger on the response scale: within 15% on this seed,
    2 x 400 draws); a negative weight is a ``DataError`` naming the column; the weights are not a predictor."""
    df, _ = _hmc20(80, 8)
    kw = dict(treatment="z", propensity="ps", mu_trees=10, tau_trees=5, chains=2, draws=400, tune=200, seed=5)
    one = bps.bcf("y ~ x1 + x2 + x3 + C(xc)", df.assign(w=1.0), weights="w", **kw)
    two = bps.bcf("y ~ x1 + x2 + x3 + C(xc)", df.assign(w=2.0), weights="w", **kw)
    ratio = two.params["sigma"].mean() / one.params["sigma"].mean()
    assert abs(ratio / math.sqrt(2) - 1) < 0.15, ratio
    assert "w" not in one.mu.names
    with pytest.raises(DataError, match=r"weights column 'w' must hold finite values >= 0"):
        bps.bcf("y ~ x1", df.assign(w=-1.0), weights="w", **kw)


def test_bcf_releases_every_array_numba_holds():
    """As ``tests/test_refcounts.py`` for the other fits: a bcf fit and its CATE on new rows leave numba's
    meminfo counts balanced (the basis helpers borrow their caller's arrays)."""
    df, _ = _hmc20(50, 9)
    kw = dict(treatment="z", propensity="ps", mu_trees=4, tau_trees=3, chains=2, draws=5, tune=3, seed=1,
              threads=1, sampler="cgm")

    def cate(fit):
        assert fit.cate(df.head(5)).shape == (5, 3)

    check_releases_every_array("y ~ x1 + x2", df, kw, cate)


def test_dot_formula_leaves_out_the_treatment_propensity_and_weights():
    """``"y ~ ."`` takes every column but the response, the treatment, the propensity and the weights; the
    mu forest adds the propensity, the tau forest does not."""
    df, _ = _hmc20(40, 1)
    fit = bps.bcf("y ~ .", df.assign(w=1.0), treatment="z", propensity="ps", weights="w", mu_trees=4, tau_trees=2,
                  chains=1, draws=5, tune=5, seed=0)
    assert fit.mu.names == ["x1", "x2", "x3", "xb", "xc", "propensity"]
    assert fit.tau.names == ["x1", "x2", "x3", "xb", "xc"]
