"""Test helpers shared by the bcf test files (``test_bcf.py``, ``test_bcf_samplers.py``, ``test_bcf_re.py``):
a small BCF problem, batch-means standard errors, the Geweke test of a causal chain and the check that a
bcf fit leaves numba's array counts balanced."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from kernel_conventions import nrt_balance
from scipy import stats

import bartpy_suite as bps
from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels.likelihood import MODEL_BASIS_NORMAL
from bartpy_suite._kernels.records import make_prior
from bartpy_suite.samplers.multi_forest import CausalChain, CausalProblem, ForestSpec


def bcf_problem(n=20, mu_trees=8, tau_trees=5, likelihood=True, min_leaf=1, seed=0, alpha=(0.95, 0.25),
                beta=(2.0, 3.0), lam=0.2, y=None, w=None) -> CausalProblem:
    """A small standardised BCF problem on two continuous predictors (HMC20's priors at these tree counts)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    z = np.arange(n) % 2
    if y is None:
        y = rng.normal(size=n)
    binned = BinnedPredictors.fit(x, np.zeros(2, bool), [0, 0], 100)
    common = {"min_leaf": min_leaf, "model": MODEL_BASIS_NORMAL, "nu": 3.0, "lam": lam, "likelihood": likelihood}
    c_tau = 1 / stats.norm.ppf(0.75)
    mu = ForestSpec(binned.codes, np.zeros(2, bool), binned.nbins, make_prior(alpha=alpha[0], beta=beta[0], **common),
                    mu_trees, 4.0 / mu_trees, 0.0)
    tau = ForestSpec(binned.codes, np.zeros(2, bool), binned.nbins, make_prior(alpha=alpha[1], beta=beta[1], **common),
                     tau_trees, c_tau ** 2 / tau_trees, 1.0 / tau_trees)
    w = np.ones(n) if w is None else np.asarray(w, float)
    return CausalProblem(np.asarray(y, float), z, w, mu, tau, 4.0 / mu_trees, 1.0)


def batch_se(x, batches=50) -> float:
    """Standard error of the mean of a correlated series by batch means."""
    x = np.asarray(x, float)
    k = x.size // batches
    means = x[: k * batches].reshape(batches, k).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(batches))


def assert_mean_near(values, expected: float, what: str) -> None:
    """The mean of the series ``values`` is within 4 batch-means standard errors of ``expected``."""
    values = np.asarray(values, float)
    assert abs(values.mean() - expected) < 4 * batch_se(values), (what, values.mean(), expected)


def check_prior_draws(out: dict) -> None:
    """The kept draws ``out`` (a ``CausalChain.collect``) of ``bcf_problem(likelihood=False, mu_trees=2,
    tau_trees=8, lam=0.2)`` have the prior's probabilities (``assert_mean_near``): (b_1 - b_0) ~ N(0, 1);
    s_m / sqrt(delta) standard Cauchy; delta ~ chi^2_1 at its quartiles; sigma^2 at its median; the share of
    stumps 1 - alpha in each forest (0.95 mu, 0.25 tau)."""
    p = out["params"]
    diff = p[:, 2] - p[:, 1]
    assert_mean_near(np.abs(diff) < 1, 0.6827, "P(|b1 - b0| < 1)")
    ratio = p[:, 3] / np.sqrt(p[:, 4])
    assert_mean_near(np.abs(ratio) < 1, 0.5, "P(|s_m / sqrt(delta)| < 1)")
    assert_mean_near(ratio < -1, 0.25, "P(s_m / sqrt(delta) < -1)")
    for q in (0.25, 0.5, 0.75):
        assert_mean_near(p[:, 4] < stats.chi2(1).ppf(q), q, f"P(delta < its {q} quantile)")
    assert_mean_near(p[:, 0] ** 2 < 3 * 0.2 / stats.chi2(3).ppf(0.5), 0.5, "P(sigma^2 < its median)")
    for forest, alpha in (("mu", 0.95), ("tau", 0.25)):
        stumps = (out[forest]["n_leaves"] == 1).mean(axis=1)  # share per draw
        assert_mean_near(stumps, 1 - alpha, f"share of stumps in the {forest} forest")


def check_geweke(make_chain: Callable[[CausalProblem, np.random.Generator], CausalChain], n: int = 20,
                 sweeps: int = 30_000) -> None:
    """Geweke (2004) successive-conditional test of the chains ``make_chain(problem, rng)`` builds, on
    ``bcf_problem(n)`` with 5 mu and 4 tau trees (spec 8.3): alternate one sweep with a fresh
    y ~ p(y | parameters); the identified functions at row 0, tau_0 = (b_1 - b_0) t(x_0) and
    mu0_0 = s_m m(x_0) + b_0 t(x_0), and log sigma^2, and their squares, must have the means of a chain with
    the likelihood off, within 4 combined batch-means standard errors (the first 1,000 sweeps dropped)."""
    chain = make_chain(bcf_problem(n=n, mu_trees=5, tau_trees=4, min_leaf=2, lam=0.5), np.random.default_rng(8))
    chain.allocate(1)
    rng = np.random.default_rng(7)
    cs, resid = chain.causal, chain.mu.state.resid
    stats_g = np.empty((sweeps, 3))
    for it in range(sweeps):
        chain.run(it, 1, 10**9, 1)  # one sweep, nothing kept
        b0, b1, sm = cs.params[0], cs.params[1], cs.params[2]
        sigma2 = chain.mu.state.target.sigma2[0]
        stats_g[it] = ((b1 - b0) * cs.tfit[0], sm * cs.mfit[0] + b0 * cs.tfit[0], math.log(sigma2))
        mean = sm * cs.mfit + np.where(cs.z == 1, b1, b0) * cs.tfit
        y_new = mean + math.sqrt(sigma2) * rng.normal(size=n)
        resid += y_new - cs.y  # the residual follows y (resid = y - fit)
        cs.y[:] = y_new
    prior = make_chain(bcf_problem(n=n, mu_trees=5, tau_trees=4, min_leaf=2, lam=0.5, likelihood=False),
                       np.random.default_rng(9))
    prior.allocate(1)
    stats_p = np.empty((sweeps, 3))
    for it in range(sweeps):
        prior.run(it, 1, 10**9, 1)
        c = prior.causal
        stats_p[it] = ((c.params[1] - c.params[0]) * c.tfit[0], c.params[2] * c.mfit[0] + c.params[0] * c.tfit[0],
                       math.log(prior.mu.state.target.sigma2[0]))
    for k, name in enumerate(("tau", "mu0", "log sigma2")):
        for f, label in ((lambda v: v, "mean"), (lambda v: v * v, "second moment")):
            a, b = f(stats_g[1000:, k]), f(stats_p[1000:, k])
            se = math.hypot(batch_se(a), batch_se(b))
            assert abs(a.mean() - b.mean()) < 4 * se, (name, label, a.mean(), b.mean(), se)


def check_releases_every_array(formula: str, df, keywords: dict, use: Callable[[object], None]) -> None:
    """``bps.bcf(formula, df, **keywords)`` and ``use(fit)`` (which asserts on what it computes) leave numba's
    meminfo counts balanced; the first fit, which compiles, runs outside the counted window."""
    use(bps.bcf(formula, df, **keywords))

    def fit_and_use():
        use(bps.bcf(formula, df, **keywords))

    made, released = nrt_balance(fit_and_use)
    assert made > 0
    assert made == released
