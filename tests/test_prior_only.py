"""Prior-only checks: with the likelihood switched off the CART samplers must sample the tree
prior of issue 2 exactly (enumerated in ``tests/exact/enumerate.py``).

A bug in a rarely visited state shows here and hides in posterior runs: the stump has prior
probability 1 - alpha = 0.05 in these data sets but posterior probability < 0.5%.

* Exact-start invariance of every kernel (as in ``test_exact_posterior.py``): 20,000 i.i.d.
  prior draws, 3 transitions, G-test p > 1e-4 and TV within 4.5 noise sd.
* Long runs from a stump: the distributions of the number of leaves and of the depth against the
  exact prior by a G-test with the first-order Rao-Scott correction for autocorrelation
  (design effects estimated by 40 batch means), p > 1e-4; and the stump frequency by a
  batch-means t statistic (Bonferroni family level 1e-4 over the stump and E[n_leaves]).
"""

from __future__ import annotations

import numpy as np
import pytest
from exact import harness as H
from exact.problems import exact, make_problem
from test_exact_posterior import KERNELS, SAMPLERS, check_exact_start, seed_of

PRIOR_DATASETS = ["grid", "factor"]


@pytest.mark.parametrize("label,moves,move", KERNELS, ids=[k[0] for k in KERNELS])
@pytest.mark.parametrize("dataset", PRIOR_DATASETS)
def test_prior_exact_start_invariance(dataset, label, moves, move):
    check_exact_start(dataset, None, label, moves, move, likelihood=False)


def check_prior_long_run(dataset: str, classification: bool, label: str, moves: dict, n_draws: int, thin: int,
                         burn: int):
    prob = make_problem("classes" if classification else dataset, None)
    ex = exact(dataset, None)
    chain = H.make_chain(prob, moves, seed_of("prior-long", dataset, classification, label, n_draws),
                         likelihood=False)
    assert chain.get_tree() is None
    run = H.long_run(chain, n_draws + burn, thin)
    n_leaves = run.n_leaves[burn:]
    depth = run.depth[burn:]
    # The recorded statistics agree with the recorded trees.
    n_check, d_check = H.tree_stats(run.trees[burn:])
    assert np.array_equal(n_check, n_leaves) and np.array_equal(d_check, depth)
    nl_exact = np.bincount(ex.n_leaves, weights=ex.prior)
    d_exact = np.bincount(ex.depth, weights=ex.prior)
    g_n, df_n, p_n, deff_n = H.rao_scott_g_test(n_leaves, nl_exact)
    g_d, df_d, p_d, deff_d = H.rao_scott_g_test(depth, d_exact)
    stump = (n_leaves == 1).astype(float)
    zmax, threshold, z = H.mean_check(np.column_stack([stump, n_leaves]), [nl_exact[1], np.sum(ex.n_leaves * ex.prior)],
                                      indicator=[True, False])
    print(f"\nprior long run {dataset}{'/classes' if classification else ''}/{label}: N={len(n_leaves)} x thin {thin}; "
          f"n_leaves G={g_n:.1f} df={df_n} p={p_n:.3g} (deff {deff_n:.2f}) "
          f"TV={H.tv_distance(np.bincount(n_leaves, minlength=len(nl_exact)), nl_exact):.4f}; "
          f"depth G={g_d:.1f} df={df_d} p={p_d:.3g} (deff {deff_d:.2f}); stump {stump.mean():.4f} vs "
          f"{nl_exact[1]:.4f}, E[n_leaves] {n_leaves.mean():.4f} vs {np.sum(ex.n_leaves * ex.prior):.4f} "
          f"(max|z|={zmax:.2f}, threshold {threshold:.2f})")
    assert p_n > 1e-4
    assert p_d > 1e-4
    assert zmax < threshold


PRIOR_LONG = [(ds, False) for ds in PRIOR_DATASETS] + [("grid", True)]
PRIOR_LONG_IDS = ["grid", "factor", "grid-classification-leaves"]


@pytest.mark.parametrize("label,moves", SAMPLERS, ids=[s[0] for s in SAMPLERS])
@pytest.mark.parametrize("dataset,classification", PRIOR_LONG, ids=PRIOR_LONG_IDS)
def test_prior_long_run_from_stump_short(dataset, classification, label, moves):
    check_prior_long_run(dataset, classification, label, moves, n_draws=10_000, thin=5, burn=200)


@pytest.mark.slow
@pytest.mark.parametrize("label,moves", SAMPLERS, ids=[s[0] for s in SAMPLERS])
@pytest.mark.parametrize("dataset,classification", PRIOR_LONG, ids=PRIOR_LONG_IDS)
def test_prior_long_run_from_stump(dataset, classification, label, moves):
    check_prior_long_run(dataset, classification, label, moves, n_draws=200_000, thin=5, burn=1_000)
