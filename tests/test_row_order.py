"""The row-order invariant of the tree kernels: every leaf's rows stay sorted by row index.

Partitions are stable, a rejected grow restores its leaf's order, an accepted prune merges the
two children and an accepted change or swap re-splits from sorted rows. Sorted segments make
each pass over a node's rows walk memory forwards. BART also relies on the invariant for
exactness: its trees share one row permutation, rebuilt for each tree from the leaf map with
every leaf's rows in row order (``_kernels/backfit.py``), which is the tree's own permutation
only while the invariant holds.
"""

from __future__ import annotations

import numpy as np
from _chains import bart_chain

from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.priors import NormalLeafPrior, TreePrior, hyper_vector


def test_partition_is_stable_and_complete():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 7, size=(2, 500)).astype(np.int32)
    perm = np.sort(rng.choice(500, size=300, replace=False)).astype(np.int32)  # a node's rows
    before = perm.copy()
    mid = T.partition(codes, perm, 0, perm.size, 1, 3, False, np.empty(perm.size, dtype=np.int32))
    left, right = perm[:mid], perm[mid:]
    assert np.all(codes[1, left] <= 3) and np.all(codes[1, right] > 3)
    assert np.array_equal(left, before[codes[1, before] <= 3])  # order kept on each side
    assert np.array_equal(right, before[codes[1, before] > 3])
    # A categorical mask: levels 0 and 5 go left.
    perm = before.copy()
    mid = T.partition(codes, perm, 0, perm.size, 0, (1 << 0) | (1 << 5), True, np.empty(perm.size, dtype=np.int32))
    assert np.array_equal(perm[:mid], before[np.isin(codes[0, before], [0, 5])])


def test_bart_leaves_keep_sorted_rows_through_all_moves():
    rng = np.random.default_rng(11)
    n, p = 400, 3
    x = rng.uniform(size=(n, p))
    codes = np.ascontiguousarray((x * 20).astype(np.int32).T)
    y = np.sin(6 * x[:, 0]) + x[:, 1] + 0.1 * rng.standard_normal(n)
    hyper = hyper_vector(TreePrior(0.95, 1.0, 5), NormalLeafPrior(1.0, 0.0, 3.0, 0.01), likelihood=True,
                         sigma2=0.01, tau2=0.05, model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = bart_chain(codes, np.zeros(p, bool), np.full(p, 20), y - y.mean(), hyper,
                       {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}, np.random.default_rng(3), 5,
                      SIGMA_SAMPLED)
    f = chain.forest
    last = f.var.shape[0] - 1
    assert f.perm.shape == (1, n), "the trees share one row permutation"
    accepted = np.zeros((len(chain.move_probs), 2), dtype=np.int64)  # (move, proposed/accepted)
    for sweep in range(300):
        counts = chain.sweep()
        accepted += counts
        # After a sweep the shared permutation is the last tree's, as its move left it (the
        # rebuild from the leaf map happens before a tree's move, not after).
        perm = f.perm[0]
        assert np.array_equal(np.sort(perm), np.arange(n))
        for node in np.flatnonzero(f.var[last] == T.LEAF):
            seg = perm[f.start[last, node]:f.end[last, node]]
            assert np.all(np.diff(seg) > 0), f"sweep {sweep}, tree {last} node {node}: rows out of order"
            assert np.all(chain.state.leaf_of[last, seg] == node), f"sweep {sweep}: leaf map disagrees"
    # rotate and perturb are off
    assert np.all(accepted[:4, 1] > 0), f"grow, prune, change and swap must each be accepted at least once: {accepted}"
