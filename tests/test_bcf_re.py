"""Random effects in Bayesian causal forests (issue 30, "Random effects"; spec multi_forest.md 3.5, 4):
``bps.bcf("y ~ x1 + (1 | g)", ...)`` runs BART's random-effects Gibbs block (with its scale move, and the
level move against the mu forest) inside the BCF sweep after the forests' blocks and before sigma.

Checks: the prior of the effects' sd with the likelihood off, a Geweke test on n = 20 (slow), simulated
groups whose sd is recovered, and the user contract (summary rows, CATE without the effects, ``predict``
with a known group's effect, files, bad input). Statistical tests have fixed seeds and stated tolerances.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from _bcf import batch_se, bcf_problem, check_releases_every_array
from scipy import stats

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, DataError, FormulaError


def _grouped(n=300, groups=12, sd=1.0, seed=1):
    """Rows in ``groups`` groups with random intercepts N(0, sd^2), a heterogeneous effect 1 + x2 / 2, noise
    sd 0.5 and a randomised treatment (propensity 0.5, given as the column ps)."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    u = rng.normal(0, sd, groups)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    z = rng.binomial(1, 0.5, n)
    y = 1 + np.abs(x1) + (1 + 0.5 * x2) * z + u[g] + rng.normal(0, 0.5, n)
    df = pd.DataFrame({"x1": x1, "x2": x2, "g": [f"g{k:02d}" for k in g], "z": z, "y": y, "ps": 0.5})
    return df, u


FAST = dict(treatment="z", propensity="ps", mu_trees=50, tau_trees=20, chains=2, draws=400, tune=400, seed=3)


@pytest.fixture(scope="module")
def grouped_fit():
    df, u = _grouped()
    return df, u, bps.bcf("y ~ x1 + x2 + (1 | g)", df, **FAST)


def test_simulated_groups_recover_the_sd(grouped_fit):
    """12 groups with intercepts drawn with sd 1 (sample sd of the 12: 1.07): the 95% interval of
    sd[(Intercept) | g] holds the sample sd (with 12 groups the posterior of an sd has a relative spread of
    about 1 / sqrt(2 * 11) = 21%, so the interval is wide enough for one fixed seed and narrow enough to miss
    an sd off by a factor 2); the posterior mean effects track the true intercepts (correlation > 0.95: the
    noise sd 0.5 over about 25 rows per group leaves each intercept an sd of 0.1 against a spread of 1); and
    the fit without the groups has a sigma more than twice as large, as the groups' variance goes to noise."""
    df, u, fit = grouped_fit
    row = fit.summary().loc["sd[(Intercept) | g]"]
    truth = u.std(ddof=1)
    assert row["lower"] <= truth <= row["upper"], (row, truth)
    assert row["r_hat"] < 1.05
    eff = fit.posterior["re_effect"].mean(("chain", "draw")).values[:, 0]
    order = [int(label[1:]) for label in fit.posterior["re_group"].values]
    assert np.corrcoef(eff, u[order])[0, 1] > 0.95
    sigma = fit.summary().loc["sigma", "mean"]
    assert abs(sigma / 0.5 - 1) < 0.2, sigma
    without = bps.bcf("y ~ x1 + x2", df, **FAST)
    assert without.summary().loc["sigma", "mean"] > 2 * sigma


def test_user_contract(grouped_fit, tmp_path):
    """The grouping factor is in neither forest (unless it is also a term); the CATE is the tau forest's alone (the effects are
    prognostic); ``predict`` on a known group adds its effect draw by draw, on a new group nothing; a file
    keeps the effects and the loaded fit predicts the same."""
    df, _, fit = grouped_fit
    assert fit.mu.names == ["x1", "x2", "propensity"] and fit.tau.names == ["x1", "x2"]
    both = bps.bcf("y ~ x1 + C(g) + (1 | g)", df, **{**FAST, "draws": 5, "tune": 5, "mu_trees": 5, "tau_trees": 3,
                                                   "check_mixing": False})
    assert both.mu.names == ["x1", "C(g)", "propensity"]  # a term of its own as well: split on
    p = fit.params
    cate = fit.scale * (p["b1"] - p["b0"]).to_numpy()[:, None] * fit.tau.raw_sum(fit.tau.binned.codes)
    np.testing.assert_allclose(fit.cate()["mean"].to_numpy(), cate.mean(axis=0), rtol=1e-12)
    head = df.head(5)
    known = fit.predict(head)["mean"].to_numpy()
    unseen = fit.predict(head.assign(g="a new group"))["mean"].to_numpy()
    labels = list(fit.posterior["re_group"].values)
    codes = [labels.index(v) for v in head["g"]]
    effect = fit.posterior["re_effect"].values[..., 0].reshape(-1, len(labels))[:, codes].mean(axis=0)
    np.testing.assert_allclose(known - unseen, effect, rtol=1e-9, atol=1e-12)
    fit.save(tmp_path / "re.nc")
    back = bps.load(tmp_path / "re.nc")
    pd.testing.assert_frame_equal(back.summary(), fit.summary())
    pd.testing.assert_frame_equal(back.predict(head), fit.predict(head))
    with pytest.raises(DataError, match=r"lacks the column\(s\) \['g'\]"):
        fit.predict(head.drop(columns=["g"]))


def test_random_slope_and_bad_input():
    """``(x1 | g)`` gives an intercept and a slope row; a numeric grouping factor, a single group, weights
    with random effects and a bar term in tau_formula are refused with errors naming what to do."""
    df, _ = _grouped(120, 6, seed=2)
    fit = bps.bcf("y ~ x1 + x2 + (x1 | g)", df, **{**FAST, "mu_trees": 10, "tau_trees": 5, "draws": 20,
                                                    "tune": 20, "check_mixing": False})
    assert {"sd[(Intercept) | g]", "sd[x1 | g]"} <= set(fit.summary().index)
    kw = {**FAST, "draws": 5, "tune": 5, "mu_trees": 5, "tau_trees": 3}
    with pytest.raises(FormulaError, match="numeric"):
        bps.bcf("y ~ x1 + (1 | x2)", df, **kw)
    with pytest.raises(DataError, match="single level"):
        bps.bcf("y ~ x1 + (1 | g)", df.assign(g="one"), **kw)
    with pytest.raises(ArgumentError, match="cannot be combined with random effects"):
        bps.bcf("y ~ x1 + (1 | g)", df.assign(w=1.0), weights="w", **kw)
    with pytest.raises(ArgumentError, match="may not hold a random-effect term"):
        bps.bcf("y ~ x1 + (1 | g)", df, tau_formula="~ x1 + (1 | g)", **kw)


def test_prior_of_the_effect_sd_with_the_likelihood_off():
    """With the likelihood off the chain samples the prior: the effective sd |alpha| sigma_xi of the random
    intercept is half-t with 2 degrees of freedom and scale 1 (spec 4.1, a = b = 1, s_alpha = 1) on the
    standardised response. P(sd < 0.3), P(sd < 1) and P(sd < 3) (0.212, 0.577, 0.905; the half-t_2 has no
    variance, so probabilities rather than moments) agree within 4 batch-means standard errors over 6000
    draws of one chain."""
    df, _ = _grouped(40, 5, seed=4)
    fit = bps.bcf("y ~ x1 + (1 | g)", df, treatment="z", propensity="ps", mu_trees=5, tau_trees=3, chains=1,
                  draws=6000, tune=200, seed=11, likelihood=False)
    sd = fit.posterior["re_sd"].values.reshape(-1) / fit.scale
    for q in (0.3, 1.0, 3.0):
        expected = 2 * stats.t.cdf(q, df=2) - 1
        hits = (sd < q).astype(float)
        se = batch_se(hits)
        assert abs(hits.mean() - expected) < 4 * se + 1e-3, (q, hits.mean(), expected, se)


@pytest.mark.slow
@pytest.mark.parametrize("slope", [False, True], ids=["intercept", "intercept+slope"])
def test_geweke_with_random_effects(slope):
    """Geweke (2004) on n = 20 in 4 groups (spec 8.3, "BCF + RFX"): alternate one sweep with a fresh
    y ~ p(y | parameters); at row 0 the treatment effect (b_1 - b_0) t(x_0), the prognostic sum
    s_m m(x_0) + b_0 t(x_0) + gamma_0 (the identified mu_0: the mu forest's level and the intercepts trade
    off through the level move), log sigma^2 and the effect sd |alpha| sigma_xi must have the prior's
    distribution, taken from a chain with the likelihood off. Means of the first three and of their squares,
    and P(sd < 1), agree within 4 combined batch-means standard errors. With ``slope`` the basis is (1, x_i)
    (``(x | g)``), the slope's sd checked too."""
    n, sweeps = 20, 20_000
    group = np.arange(n) % 4
    moves = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}

    def chain_of(likelihood, seed):
        from bartpy_suite.samplers.multi_forest import CausalChain

        problem = bcf_problem(n=n, mu_trees=5, tau_trees=4, min_leaf=2, lam=0.5, likelihood=likelihood)
        basis = np.column_stack([np.ones(n), np.linspace(-1.5, 1.5, n)]) if slope else np.ones((n, 1))
        problem.random_effects = {"group": group, "basis": basis, "n_groups": 4, "a": 1.0, "b": 1.0,
                                  "alpha_var": 1.0, "intercept": 0}
        chain = CausalChain(problem, moves, np.random.default_rng(seed))
        chain.allocate(1)
        return chain

    def statistics(chain):
        cs = chain.causal
        re = cs.re.re
        b0, b1, sm = cs.params[0], cs.params[1], cs.params[2]
        return ((b1 - b0) * cs.tfit[0], sm * cs.mfit[0] + b0 * cs.tfit[0] + re.gamma[0],
                math.log(chain.mu.state.target.sigma2[0]), abs(re.alpha[0]) * math.sqrt(re.sigma2[0]),
                abs(re.alpha[-1]) * math.sqrt(re.sigma2[-1]))

    rng = np.random.default_rng(7)
    chain = chain_of(True, 8)
    cs, resid = chain.causal, chain.mu.state.resid
    stats_g = np.empty((sweeps, 5))
    for it in range(sweeps):
        chain.run(it, 1, 10**9, 1)  # one sweep, nothing kept
        stats_g[it] = statistics(chain)
        b = np.where(cs.z == 1, cs.params[1], cs.params[0])
        gamma = cs.re.re.gamma
        y_new = cs.params[2] * cs.mfit + b * cs.tfit + gamma + math.sqrt(chain.mu.state.target.sigma2[0]) * \
            rng.normal(size=n)
        resid += (y_new - gamma) - cs.y  # the residual follows y - gamma
        cs.y[:] = y_new - gamma
        cs.re.y0[:] = y_new
    prior = chain_of(False, 9)
    stats_p = np.empty((sweeps, 5))
    for it in range(sweeps):
        prior.run(it, 1, 10**9, 1)
        stats_p[it] = statistics(prior)
    checks = [(k, f, label) for k in range(3) for f, label in ((lambda v: v, "mean"), (lambda v: v * v, "square"))]
    checks.append((3, lambda v: (v < 1.0).astype(float), "P(sd < 1)"))
    if slope:
        checks.append((4, lambda v: (v < 1.0).astype(float), "P(slope sd < 1)"))
    for k, f, label in checks:
        a, b = f(stats_g[1000:, k]), f(stats_p[1000:, k])
        se = math.hypot(batch_se(a), batch_se(b))
        assert abs(a.mean() - b.mean()) < 4 * se, (("tau", "mu0", "log sigma2", "sd", "slope sd")[k], label, a.mean(),
                                                   b.mean(), se)


def test_cli_fit_and_predict_with_random_effects(tmp_path):
    """``fit "y ~ x1 + (1 | g)" --model bcf`` prints the sd row and saves the fit; ``predict`` writes E[y] with
    each row's group effect and the CATE, as the loaded fit gives them."""
    import contextlib
    import io

    from bartpy_suite.cli import main

    df, _ = _grouped(120, 6, seed=2)
    df.to_csv(tmp_path / "d.csv", index=False)
    df.head(4).to_csv(tmp_path / "new.csv", index=False)

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
        return status, out.getvalue(), err.getvalue()

    status, out, err = run(["fit", "y ~ x1 + (1 | g)", str(tmp_path / "d.csv"), "--model", "bcf", "--treatment", "z",
                            "--propensity", "ps", "--chains", "1", "--draws", "20", "--tune", "20", "--seed", "1",
                            "--no-progress", "--out", str(tmp_path / "f.nc")])
    assert status == 0, err
    assert "sd[(Intercept) | g]" in out
    status, out, err = run(["predict", str(tmp_path / "f.nc"), str(tmp_path / "new.csv")])
    assert status == 0, err
    got = pd.read_csv(io.StringIO(out))
    fit = bps.load(tmp_path / "f.nc")
    np.testing.assert_allclose(got[["mean", "lower", "upper"]].to_numpy(), fit.predict(df.head(4)).to_numpy(),
                               rtol=1e-12)


def test_bcf_with_random_effects_releases_every_array_numba_holds():
    """As ``test_bcf.test_bcf_releases_every_array_numba_holds``: a fit with random effects and its predictions
    leave numba's meminfo counts balanced (the random-effects helpers borrow their caller's arrays)."""
    df, _ = _grouped(60, 4, seed=6)
    kw = dict(treatment="z", propensity="ps", mu_trees=4, tau_trees=3, chains=2, draws=5, tune=3, seed=1,
              threads=1, check_mixing=False)

    def predict(fit):
        assert fit.predict(df.head(5)).shape == (5, 3)

    check_releases_every_array("y ~ x1 + (x1 | g)", df, kw, predict)


def test_rows_with_missing_values_are_dropped_consistently():
    """A missing group and a missing predictor each drop their row (with a warning); the effects, the group
    codes and the CATE are indexed by the rows kept, also when ``tau_formula`` drops one more."""
    df, _ = _grouped(60, 4, seed=2)
    df.index = df.index + 100
    df.loc[103, "g"] = None
    df.loc[107, "x1"] = np.nan
    kw = dict(treatment="z", propensity="ps", mu_trees=4, tau_trees=2, chains=1, draws=5, tune=5, seed=0)
    with pytest.warns(UserWarning) as record:
        fit = bps.bcf("y ~ x1 + x2 + (1 | g)", df, **kw)
    messages = " ".join(str(w.message) for w in record)
    assert "missing value in the random-effect term (1 | g)" in messages and "x1: 1" in messages
    cate = fit.cate()
    assert len(cate) == 58 and 103 not in cate.index and 107 not in cate.index
    assert fit.idata["constant_data"]["re_group_code"].shape == (58,)
    df.loc[110, "x2"] = np.nan
    with pytest.warns(UserWarning) as record:
        fit = bps.bcf("y ~ x1 + (1 | g)", df, tau_formula="~ x2", **kw)
    assert "x2: 1" in " ".join(str(w.message) for w in record)
    assert len(fit.cate()) == 57 and 110 not in fit.cate().index and fit.predict().shape == (57, 3)
    labels = list(fit.posterior["re_group"].values)
    codes = fit.idata["constant_data"]["re_group_code"].values
    kept = df.drop(index=[103, 107, 110])
    assert [labels[c] for c in codes] == list(kept["g"])
