"""Geweke (2004) joint-distribution test of BART's Bayesian backfitting (issue 3, Correctness).

Two simulators of the joint distribution p(theta, y), theta = (trees, leaf values, sigma^2):

* marginal-conditional (MC): theta from the prior directly (trees from the plain-Python
  generative tree prior of ``test_bart_prior.py``, leaf values N(0, tau2), sigma^2 ~
  IG(nu/2, nu lam/2)), then y ~ N(f(x), sigma^2 I). Independent draws.
* successive-conditional (SC): alternate one full ``BartChain`` sweep (every tree move and leaf
  draw, then sigma, all given y) with a fresh y ~ N(f(x), sigma^2 I) given the new theta.

If the sweep leaves p(theta | y) invariant, both simulate the same joint. The chain is driven
through ``BartChain`` with fixed hyperparameters (the calibrated data-based priors of the
model would make the prior depend on y). ``chain.resid`` holds y - f(x), so after a sweep
f = y - resid, and a new y is installed by writing resid = sigma * eps.

Test statistic: for each of K functions g of (theta, y)

    z_k = (mean_MC(g) - mean_SC(g)) / sqrt(var_MC(g) / M + se_SC(g)^2)

with se_SC from batch means over 50 batches (the SC draws are autocorrelated). Tolerance:
|z_k| < 4 for every k: with K = 8 functions a correct sampler fails with probability about
K * 6.3e-5 = 5e-4 (Bonferroni). The functions probe sigma (sigma and 1/sigma^2: both have
finite variance under the IG(5/2) prior, unlike sigma^4), tree sizes, the scale and spatial
structure of the fitted values, and their relation to y.

A second test does the same for probit BART (Albert-Chib latent variables z, sigma = 1): theta
= (trees, leaf values), the augmented data (z, y) with z ~ N(f, 1) and y = 1[z > 0]; the SC
step is one sweep (tree moves given z, then z | f, y from the truncated normals) followed by a
fresh (z, y) given f.

Power (measured when the test was written, 20,000 MC / 100,000 SC draws): running the chain
with tau2 20% too large gives z = -13 to -15 on mean f^2, roughness and mean f*y; alpha 0.90
instead of 0.95 gives z = 18 on mean leaves; lam 10% too large gives z = -9 / 16 on sigma and
1/sigma^2. A correct run gives |z| < 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from _chains import bart_chain

from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels.backfit import SIGMA_PROBIT, SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.tree import M_N_LEAVES
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS, BartProblem
from bartpy_suite.samplers.gfr import check_init_options, warm_start

try:
    from test_bart_exact import leaves_of
    from test_bart_prior import simulate_prior_tree
except ImportError:  # tests/ imported as a package
    from tests.test_bart_exact import leaves_of
    from tests.test_bart_prior import simulate_prior_tree

N_TREES = 3
ALPHA, BETA, MIN_LEAF = 0.95, 1.0, 2
TAU2 = 0.25
NU, LAM = 5.0, 0.25
NAMES = ("sigma", "1/sigma2", "mean leaves", "mean f^2", "roughness", "f0", "mean f*y", "mean (y-f)^2/sigma2")


def problem():
    """12 rows: x1 numeric with 6 values, x2 a 3-level factor."""
    x1 = np.repeat(np.arange(6.0), 2)
    x2 = np.tile([0.0, 1.0, 2.0, 1.0], 3)
    x = np.column_stack([x1, x2])
    is_cat = np.array([False, True])
    return BinnedPredictors.fit(x, is_cat, [0, 3], None)


def functions(f, y, sigma2, leaves):
    """The K test functions g(theta, y)."""
    return np.array([
        np.sqrt(sigma2),
        1.0 / sigma2,
        leaves,
        np.mean(f * f),
        np.mean(np.diff(f) ** 2),
        f[0],
        np.mean(f * y),
        np.mean((y - f) ** 2) / sigma2,
    ])


def prior_sum_of_trees(binned, rng):
    """f(x) at the rows of ``binned`` for N_TREES trees drawn from the generative prior with
    N(0, TAU2) leaf values, and the total number of leaves."""
    f = np.zeros(binned.codes.shape[1])
    total_leaves = 0
    for _ in range(N_TREES):
        tree = simulate_prior_tree(rng, binned.codes, binned.is_categorical, binned.nbins, MIN_LEAF, ALPHA, BETA)
        for rows in leaves_of(tree, binned.codes, binned.is_categorical):
            f[rows] += np.sqrt(TAU2) * rng.standard_normal()
            total_leaves += 1
    return f, total_leaves


def marginal_conditional(binned, draws, rng):
    out = np.empty((draws, len(NAMES)))
    n = binned.codes.shape[1]
    for s in range(draws):
        f, total_leaves = prior_sum_of_trees(binned, rng)
        sigma2 = NU * LAM / 2 / rng.gamma(NU / 2)
        y = f + np.sqrt(sigma2) * rng.standard_normal(n)
        out[s] = functions(f, y, sigma2, total_leaves / N_TREES)
    return out


def successive_conditional(binned, sampler, iterations, burn, rng, start="stumps"):
    """SC draws; ``start="gfr"``: the chain starts from a GFR forest fitted to a y drawn from the
    prior predictive (BART's ``init="gfr"``, ``samplers/gfr.warm_start``), else from stumps."""
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE,
                         nu=NU, lam=LAM)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, np.zeros(n), hyper,
                       SAMPLERS[sampler].option_defaults()["moves"], rng, N_TREES, SIGMA_SAMPLED, sigma2=LAM)
    # Start: stumps with zero leaves (the chain's own start for y = 0), y from p(y | theta).
    f = np.zeros(n)
    y = f + np.sqrt(chain.current_sigma2) * rng.standard_normal(n)
    chain.resid[:] = y - f
    if start == "gfr":
        y = marginal_conditional_y(binned, rng)
        problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, y, hyper, N_TREES, SIGMA_SAMPLED,
                              sigma2=LAM)
        warm_start([chain], problem, rng, check_init_options(None, 1))
        assert chain.forest.meta[:, M_N_LEAVES].max() > 1, "the GFR start should not be all stumps"
    out = np.empty((iterations, len(NAMES)))
    for it in range(burn + iterations):
        chain.sweep()
        f = y - chain.resid
        sigma2 = chain.current_sigma2
        if it >= burn:
            out[it - burn] = functions(f, y, sigma2, chain.forest.meta[:, M_N_LEAVES].mean())
        y = f + np.sqrt(sigma2) * rng.standard_normal(n)
        chain.resid[:] = y - f
    return out


def marginal_conditional_y(binned, rng):
    """One y from the prior predictive (trees, leaves and sigma^2 from the prior)."""
    f, _ = prior_sum_of_trees(binned, rng)
    sigma2 = NU * LAM / 2 / rng.gamma(NU / 2)
    return f + np.sqrt(sigma2) * rng.standard_normal(f.shape[0])


def geweke_z(mc, sc, batches=50):
    m = mc.shape[0]
    usable = (sc.shape[0] // batches) * batches
    bm = sc[:usable].reshape(batches, -1, sc.shape[1]).mean(axis=1)
    se_sc = bm.std(axis=0, ddof=1) / np.sqrt(batches)
    return (mc.mean(axis=0) - sc.mean(axis=0)) / np.sqrt(mc.var(axis=0, ddof=1) / m + se_sc**2)


def assert_joint_agrees(mc, sc, names, label: str = "") -> None:
    """Print each function's MC and SC means with its z, and check |z_k| < 4 for every k (the
    module docstring's tolerance)."""
    z = geweke_z(mc, sc)
    for name, a, b, zk in zip(names, mc.mean(axis=0), sc.mean(axis=0), z):
        print(f"{label} {name:22s} MC {a:9.5f} SC {b:9.5f} z {zk:6.2f}")
    assert np.all(np.abs(z) < 4.0), dict(zip(names, np.round(z, 2)))


@pytest.fixture(scope="module")
def mc_draws():
    return marginal_conditional(problem(), 40_000, np.random.default_rng(1))


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
def test_geweke_sigma_and_fitted_values(sampler, mc_draws):
    """MC (40,000 iid draws) against SC (200,000 sweeps after 2,000 burn-in): |z_k| < 4 for all
    8 functions (see the module docstring)."""
    binned = problem()
    mc = mc_draws
    sc = successive_conditional(binned, sampler, 200_000, 2_000, np.random.default_rng(2))
    assert_joint_agrees(mc, sc, NAMES, sampler)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
def test_geweke_from_a_gfr_start(sampler, mc_draws):
    """The same test with the SC chain started from a GFR forest (BART's ``init="gfr"``, the
    default warm start from 10,000 rows): the warm start sets the chain's forest, leaves,
    residuals and sigma^2 consistently, so the kernel's joint distribution is unchanged (a
    warm start that left the residuals or leaf maps out of step with its forest would bias every
    later sweep). Same tolerance."""
    sc = successive_conditional(problem(), sampler, 200_000, 2_000, np.random.default_rng(5), start="gfr")
    assert_joint_agrees(mc_draws, sc, NAMES, f"{sampler} from gfr")


PROBIT_NAMES = ("mean leaves", "mean f^2", "roughness", "f0", "mean y", "mean f*(2y-1)", "mean (z-f)^2", "y0")


def probit_functions(f, z, y, leaves):
    return np.array([leaves, np.mean(f * f), np.mean(np.diff(f) ** 2), f[0], np.mean(y), np.mean(f * (2 * y - 1)),
                     np.mean((z - f) ** 2), y[0]])


def probit_marginal_conditional(binned, draws, rng):
    out = np.empty((draws, len(PROBIT_NAMES)))
    n = binned.codes.shape[1]
    for s in range(draws):
        f, total_leaves = prior_sum_of_trees(binned, rng)
        z = f + rng.standard_normal(n)
        out[s] = probit_functions(f, z, (z > 0).astype(float), total_leaves / N_TREES)
    return out


def probit_successive_conditional(binned, sampler, iterations, burn, rng):
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    f = np.zeros(n)
    z = f + rng.standard_normal(n)
    y = (z > 0).astype(np.int64)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, y.astype(float), hyper,
                       SAMPLERS[sampler].option_defaults()["moves"], rng, N_TREES, SIGMA_PROBIT)
    chain.z[:] = z
    chain.resid[:] = z - f
    out = np.empty((iterations, len(PROBIT_NAMES)))
    for it in range(burn + iterations):
        chain.sweep()
        f = chain.z - chain.resid
        if it >= burn:
            out[it - burn] = probit_functions(f, chain.z, chain.ybin.astype(float),
                                              chain.forest.meta[:, M_N_LEAVES].mean())
        z = f + rng.standard_normal(n)
        chain.z[:] = z
        chain.ybin[:] = z > 0
        chain.resid[:] = z - f
    return out


@pytest.mark.slow
def test_geweke_probit():
    """Probit BART (cgm moves): MC (20,000 iid draws) against SC (100,000 sweeps after 2,000
    burn-in); |z_k| < 4 for all 8 functions (Bonferroni as above)."""
    binned = problem()
    mc = probit_marginal_conditional(binned, 20_000, np.random.default_rng(3))
    sc = probit_successive_conditional(binned, "cgm", 100_000, 2_000, np.random.default_rng(4))
    assert_joint_agrees(mc, sc, PROBIT_NAMES, "probit")
