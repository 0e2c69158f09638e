"""Tempered BART (``sampler="tempered"``, the likelihood of the sum of trees tempered, whole
forests swapped) against the exact one-tree posterior and the prior.

* One tree, sigma fixed, three rungs t = (1, 0.3, 0): the target rung's tree distribution against
  the enumerated posterior of ``test_bart_exact.py`` (G-test p > 1e-4, TV within 0.01 of an
  i.i.d. sampler's TV at the same size: the tolerances of that module, same reasons). The hot
  rungs are right only if the sigma^2 / t conditioning and the swap ratio are.
* Likelihood off: every rung is the prior; leaf counts against trees simulated from the
  generative prior (two-sample G-test p > 1e-4) and sigma^2 against its inverse-chi-square prior
  (KS p > 1e-4), as ``test_bart_prior.py`` checks ``cgm``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from _chains import run_padded
from scipy import stats
from test_bart_exact import (
    ALPHA,
    BETA,
    MIN_LEAF,
    SIGMA2,
    TAU2,
    canonical_draws,
    exact_posterior,
    g_test,
    grid_problem,
    n_leaves,
    total_variation,
)
from test_bart_prior import BART_ALPHA, BART_BETA, prior_data, simulate_prior_tree, two_sample_g_test

import bartpy_suite as bps
from bartpy_suite._kernels.backfit import SIGMA_FIXED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.errors import ArgumentError
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import BartProblem
from bartpy_suite.samplers.tempered import CGM_MOVES, TemperedBartChain


@pytest.mark.parametrize("swaps", ["deo", pytest.param("seo", marks=pytest.mark.slow)])
def test_one_tree_fixed_sigma_target_rung_matches_exact_posterior(swaps):
    binned, y = grid_problem(False)
    keys, _, post = exact_posterior(binned, y)
    probs = dict(zip(keys, post))
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.asarray(y, float), hyper, 1,
                          SIGMA_FIXED, sigma2=SIGMA2)
    chain = TemperedBartChain(problem, np.array([1.0, 0.3, 0.0]), CGM_MOVES, swaps, np.random.default_rng(23))
    draws, thin, tune = 20_000, 20, 1000
    out = run_padded(chain, draws, 0, tune + draws * thin, tune, thin)
    trees = canonical_draws(out, binned)
    counts = Counter(trees)
    assert set(counts) <= set(probs)
    g, p, dof = g_test(counts, probs)
    tv = total_variation(counts, probs)
    rng = np.random.default_rng(0)
    iid_tv = np.mean([0.5 * np.abs(rng.multinomial(draws, post) / draws - post).sum() for _ in range(100)])
    rates = chain.out_accepted[-1] / chain.out_proposed[-1]
    print(f"\ntempered BART {swaps}: G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {iid_tv:.4f}) swap rates {rates}")
    assert p > 1e-4
    assert tv < iid_tv + 0.01
    exact_leaves = Counter()
    for key, pr in probs.items():
        exact_leaves[n_leaves(key)] += pr
    g2, p2, _ = g_test(Counter(n_leaves(t) for t in trees), dict(exact_leaves))
    assert p2 > 1e-4


def test_prior_only_leaf_counts_and_sigma():
    fit = bps.bart("y ~ .", data=prior_data(), trees=10, chains=1, draws=2000, tune=200, thin=5, seed=19,
                   likelihood=False, progress=False, sampler="tempered", sampler_options={"rungs": 3})
    const = fit.idata["constant_data"]
    codes = const["x_codes"].values.astype(np.int64)
    is_cat = const["is_categorical"].values.astype(bool)
    nbins = const["nbins"].values.astype(np.int64)
    rng = np.random.default_rng(8)
    sim = Counter(n_leaves(simulate_prior_tree(rng, codes, is_cat, nbins, 5, BART_ALPHA, BART_BETA))
                  for _ in range(20_000))
    got = Counter(fit.posterior["n_leaves"].values.ravel().tolist())
    g, p, _ = two_sample_g_test(got, sim)
    cfg = fit.config
    ks = stats.kstest(fit.posterior["sigma"].values.ravel() ** 2,
                      stats.invgamma(a=cfg["nu"] / 2, scale=cfg["nu"] * cfg["lam"] / 2).cdf)
    print(f"\nprior-only tempered BART: leaves G={g:.1f} p={p:.3g}; sigma KS p={ks.pvalue:.3g}")
    assert p > 1e-4
    assert ks.pvalue > 1e-4
    # With the likelihood off every rung is the prior: every swap is accepted.
    rates = fit.idata["sample_stats"]["swap_rate"].isel(draw=-1).values
    assert np.all(rates == 1.0)


def test_bart_options_and_statistics():
    df = prior_data(60)
    fit = bps.bart("y ~ .", data=df, trees=5, chains=1, draws=30, tune=30, seed=2, progress=False,
                   sampler="tempered", sampler_options={"temperatures": [1.0, 0.5, 0.1], "adapt": False})
    ss = fit.idata["sample_stats"]
    assert ss["rung_sigma"].sizes["rung"] == 3 and ss["swap_rate"].sizes["pair"] == 2
    np.testing.assert_allclose(ss["ladder"].values[0, 0, :, 0], [1.0, 0.5, 0.1])
    with pytest.raises(ArgumentError, match="ladder must be 'likelihood'"):
        bps.bart("y ~ .", data=df, trees=5, chains=1, draws=5, tune=5, sampler="tempered",
                 sampler_options={"ladder": "geometric"})
    with pytest.raises(ArgumentError, match="'rotate' and 'perturb' moves for CART"):
        bps.bart("y ~ .", data=df, trees=5, chains=1, draws=5, tune=5, sampler="tempered",
                 sampler_options={"moves": {"grow": 0.4, "prune": 0.4, "perturb": 0.2}})
    binary = df.assign(y=np.where(df["y"] > df["y"].median(), "high", "low"))
    with pytest.raises(ArgumentError, match="probit BART"):
        bps.bart("y ~ .", data=binary, trees=5, chains=1, draws=5, tune=5, sampler="tempered")


@pytest.mark.slow
def test_geweke_target_rung_with_a_prior_rung():
    """Geweke (2004) test of tempered BART, as ``test_geweke_bart.py`` does for ``cgm``, with rungs
    t = (1, 0): the hot rung is the prior, which does not depend on y, so refreshing y from
    p(y | target rung's theta) (and every rung's residual with it) is a valid Gibbs step of the
    joint p(theta_0, y) p(theta_1). The target rung's (theta, y) must then match the
    marginal-conditional simulator: |z_k| < 4 for the 8 functions (Bonferroni level ~5e-4).
    """
    from test_geweke_bart import ALPHA as G_ALPHA
    from test_geweke_bart import BETA as G_BETA
    from test_geweke_bart import LAM, N_TREES, NAMES, NU, assert_joint_agrees, functions, marginal_conditional, problem
    from test_geweke_bart import MIN_LEAF as G_MIN_LEAF
    from test_geweke_bart import TAU2 as G_TAU2

    from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
    from bartpy_suite._kernels.tree import M_N_LEAVES

    binned = problem()
    n = binned.codes.shape[1]
    mc = marginal_conditional(binned, 40_000, np.random.default_rng(1))
    hyper = kernel_prior(TreePrior(G_ALPHA, G_BETA, G_MIN_LEAF), None, likelihood=True, tau2=G_TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE,
                         nu=NU, lam=LAM)
    rng = np.random.default_rng(2)
    problem_ = BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.zeros(n), hyper, N_TREES,
                           SIGMA_SAMPLED, sigma2=LAM)
    chain = TemperedBartChain(problem_, np.array([1.0, 0.0]), CGM_MOVES, "deo", rng)
    chain.allocate(1)
    y = np.sqrt(LAM) * rng.standard_normal(n)
    for state in chain.states:
        state.resid[:] = y  # stumps with zero leaves: f = 0
    iterations, burn = 100_000, 2_000
    sc = np.empty((iterations, len(NAMES)))
    for it in range(burn + iterations):
        chain.run(it, 1, 10**9, 1)
        k0 = int(chain.slot_of[0])
        f = y - chain.rung_states[k0].resid
        sigma2 = chain.sigma2[k0]
        if it >= burn:
            sc[it - burn] = functions(f, y, sigma2, chain.rung_forests[k0].meta[:, M_N_LEAVES].mean())
        y_new = f + np.sqrt(sigma2) * rng.standard_normal(n)
        for state in chain.states:
            state.resid[:] = y_new - (y - state.resid)
        y = y_new
    assert_joint_agrees(mc, sc, NAMES, "tempered")
