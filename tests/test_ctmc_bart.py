"""BART with the continuous-time tree update (``ctmc``): each tree visit runs the birth-death
process for a fixed time against the partial residual.

* One tree, sigma fixed: the tree distribution against the enumerated posterior (numeric grid
  and factor grid of ``test_bart_exact.py``). The state at a fixed time is invariant for the
  tree's full conditional, so the kept trees must follow it: G-test p > 1e-4 and TV below the
  i.i.d. sampling-noise TV + 0.01 (as the MH samplers there).
* Likelihood off, 5 trees: each tree's distribution against the exact prior (as
  ``test_bart_prior.py`` checks cgm).
* Geweke joint-distribution test (slow), with ``test_geweke_bart.py``'s simulators.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from _chains import run_padded

from bartpy_suite._kernels.backfit import SIGMA_FIXED, SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS, BartProblem

try:
    import test_bart_exact as BE
    import test_geweke_bart as GW
    from test_bart_prior import exact_prior
except ImportError:  # tests/ imported as a package
    from tests import test_bart_exact as BE
    from tests import test_geweke_bart as GW
    from tests.test_bart_prior import exact_prior


def ctmc_chain(binned, y, prior, n_trees, sigma_mode, seed, time=1.0, sigma2=1.0):
    problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.asarray(y, dtype=float), prior,
                          n_trees, sigma_mode, 0.0, sigma2=sigma2)
    options = SAMPLERS["ctmc"].check_options({"time": time})
    return SAMPLERS["ctmc"].make_chain(problem, options, np.random.default_rng(seed))


def iid_tv(n, probs, seed=0):
    pv = np.array(list(probs.values()))
    rng = np.random.default_rng(seed)
    return float(np.mean([0.5 * np.abs(rng.multinomial(n, pv) / n - pv).sum() for _ in range(100)]))


# 20,000 draws, one every 5 sweeps of time 1 (several jumps each: mean Lambda of these trees is a
# few): draws close to independent, expected count >= 5 in every cell holding >= 2.5e-4.
@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_one_tree_fixed_sigma_matches_exact_posterior(factor):
    binned, y = BE.grid_problem(factor)
    keys, _, post = BE.exact_posterior(binned, y)
    probs = dict(zip(keys, post))
    hyper = kernel_prior(TreePrior(BE.ALPHA, BE.BETA, BE.MIN_LEAF), None, likelihood=True,
                         tau2=BE.TAU2, model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = ctmc_chain(binned, y, hyper, 1, SIGMA_FIXED, 31 + factor, sigma2=BE.SIGMA2)
    draws, thin, tune = 20_000, 5, 500
    out = run_padded(chain, draws, 0, tune + draws * thin, tune, thin)
    trees = BE.canonical_draws(out, binned)
    counts = Counter(trees)
    assert set(counts) <= set(probs)
    g, p, dof = BE.g_test(counts, probs)
    tv = BE.total_variation(counts, probs)
    ref = iid_tv(draws, probs)
    print(f"\nctmc BART one tree factor={factor}: G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {ref:.4f}); "
          f"mean jumps per visit {chain.jumps.mean() if hasattr(chain, 'jumps') else float('nan'):.2f}")
    assert p > 1e-4
    assert tv < ref + 0.01


def test_prior_only_trees_match_exact_prior():
    """5 trees, likelihood off, alpha 0.95, beta 2 on the factor grid: 20,000 tree draws
    (4,000 sweeps kept every 5th, time 1 per visit) against the exact prior; G-test p > 1e-4,
    TV within 0.01 of the i.i.d. TV."""
    binned, y = BE.grid_problem(True)
    probs = exact_prior(binned, 0.95, 2.0, 2)
    hyper = kernel_prior(TreePrior(0.95, 2.0, 2), None, likelihood=False, tau2=0.1,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    n_trees, draws, thin = 5, 4000, 5
    chain = ctmc_chain(binned, y, hyper, n_trees, SIGMA_FIXED, 43)
    out = run_padded(chain, draws, 0, 200 + draws * thin, 200, thin)
    sampled = Counter()
    for d in range(draws):
        for j in range(n_trees):
            sampled[BE.canonical_from_arrays(out["split_var"][d, j], out["split_cut"][d, j], out["left"][d, j],
                                             out["right"][d, j], binned.codes, binned.is_categorical)] += 1
    g, p, dof = BE.g_test(sampled, probs)
    tv = BE.total_variation(sampled, probs)
    ref = iid_tv(draws * n_trees, probs)
    print(f"\nctmc BART prior: G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {ref:.4f})")
    assert p > 1e-4
    assert tv < ref + 0.01


def test_time_adapts_during_tuning_then_stays():
    """With time='auto' the time per visit changes during tuning and is constant afterwards;
    the recorded jumps per visit are then about one (between 0.3 and 3 on this small problem)."""
    binned, y = BE.grid_problem(False)
    hyper = kernel_prior(TreePrior(0.95, 2.0, 2), None, likelihood=True, tau2=0.1,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = ctmc_chain(binned, y, hyper, 5, SIGMA_SAMPLED, 3, time="auto")
    chain.allocate(200)
    chain.run(0, 300, 100, 1)
    kept = chain.collect(200)
    times = kept.stats["time"]
    assert np.all(times == times[0])
    assert times[0] != 1e-3
    assert 0.3 < kept.stats["jumps"].mean() < 3.0, kept.stats["jumps"].mean()


def ctmc_successive_conditional(binned, iterations, burn, rng):
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(GW.ALPHA, GW.BETA, GW.MIN_LEAF), None, likelihood=True,
                         tau2=GW.TAU2, model_code=MODEL_NORMAL_KNOWN_VARIANCE,
                         nu=GW.NU, lam=GW.LAM)
    problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.zeros(n), hyper, GW.N_TREES,
                          SIGMA_SAMPLED, 0.0, sigma2=GW.LAM)
    chain = SAMPLERS["ctmc"].make_chain(problem, SAMPLERS["ctmc"].check_options({"time": 0.5}), rng)
    f = np.zeros(n)
    y = f + np.sqrt(chain.current_sigma2) * rng.standard_normal(n)
    chain.resid[:] = y - f
    out = np.empty((iterations, len(GW.NAMES)))
    from bartpy_suite._kernels.tree import M_N_LEAVES
    for it in range(burn + iterations):
        chain.sweep()
        f = y - chain.resid
        sigma2 = chain.current_sigma2
        if it >= burn:
            out[it - burn] = GW.functions(f, y, sigma2, chain.forest.meta[:, M_N_LEAVES].mean())
        y = f + np.sqrt(sigma2) * rng.standard_normal(n)
        chain.resid[:] = y - f
    return out


@pytest.mark.slow
def test_geweke():
    """MC (40,000 iid draws) against SC (100,000 ctmc sweeps, time 0.5 per visit, after 2,000
    burn-in): |z_k| < 4 for all 8 functions (Bonferroni, see ``test_geweke_bart.py``)."""
    binned = GW.problem()
    mc = GW.marginal_conditional(binned, 40_000, np.random.default_rng(1))
    sc = ctmc_successive_conditional(binned, 100_000, 2_000, np.random.default_rng(2))
    GW.assert_joint_agrees(mc, sc, GW.NAMES, "ctmc")
