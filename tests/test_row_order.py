"""The row-order invariant of the tree kernels: every leaf's rows stay sorted by row index.

Partitions are stable, a rejected grow restores its leaf's order, an accepted prune merges the
two children and an accepted change or swap re-splits from sorted rows. Sorted segments make
each pass over a node's rows walk memory forwards. BART also relies on the invariant for
exactness: on large data its trees share one row permutation, rebuilt for each tree from the
leaf map with every leaf's rows in row order (``_kernels/backfit.py``), which is the tree's own
permutation only while the invariant holds.
"""

from __future__ import annotations

import numpy as np
import pytest
from _chains import bart_chain

import bartpy_suite as bps
from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.priors import NormalLeafPrior, TreePrior, kernel_prior


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



@pytest.mark.parametrize("n_runs", [1, 2, 7, None])
def test_sort_segment_sorts_by_merging_runs_or_scanning(n_runs):
    """An accepted change or swap sorts its subtree's rows, a concatenation of sorted leaf runs
    (``n_runs`` of them; None: arbitrary order). Short segments merge their runs, long ones scan
    the row flags; both must give np.sort's order, touch nothing outside the segment and leave
    the flags cleared."""
    rng = np.random.default_rng(17)
    for n_rows, length in ((2_000, 90), (2_000, 700)):  # under and over 1/16 of the rows
        perm = rng.permutation(n_rows).astype(np.int32)
        start = 300
        seg = perm[start:start + length]
        if n_runs is not None:
            cuts = np.sort(rng.choice(np.arange(1, length), size=n_runs - 1, replace=False))
            seg[:] = np.concatenate([np.sort(run) for run in np.split(seg, cuts)])
        want = perm.copy()
        want[start:start + length] = np.sort(want[start:start + length])
        flags = np.zeros(n_rows, dtype=np.uint8)
        T.sort_segment(perm, start, start + length, flags, np.empty(n_rows, dtype=np.int32))
        assert np.array_equal(perm, want)
        assert not flags.any()

def test_bart_leaves_keep_sorted_rows_through_all_moves():
    rng = np.random.default_rng(11)
    n, p = 400, 3
    x = rng.uniform(size=(n, p))
    codes = np.ascontiguousarray((x * 20).astype(np.int32).T)
    y = np.sin(6 * x[:, 0]) + x[:, 1] + 0.1 * rng.standard_normal(n)
    hyper = kernel_prior(TreePrior(0.95, 1.0, 5), NormalLeafPrior(1.0, 0.0, 3.0, 0.01), likelihood=True,
                         tau2=0.05, model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = bart_chain(codes, np.zeros(p, bool), np.full(p, 20), y - y.mean(), hyper,
                       {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}, np.random.default_rng(3), 5,
                      SIGMA_SAMPLED, sigma2=0.01)
    accepted = sum(chain.sweep() for _ in range(300))  # (move, proposed/accepted); rotate, perturb are off
    assert np.all(accepted[:4, 1] > 0), f"grow, prune, change and swap must each be accepted at least once: {accepted}"
    f = chain.forest
    for j in range(f.var.shape[0]):
        assert np.array_equal(np.sort(f.perm[j]), np.arange(n))
        for node in np.flatnonzero(f.var[j] == T.LEAF):
            seg = f.perm[j, f.start[j, node]:f.end[j, node]]
            assert np.all(np.diff(seg) > 0), f"tree {j} node {node}: rows out of order"


@pytest.mark.parametrize("response", ["numeric", "binary", "three classes"])
def test_a_shared_row_permutation_gives_the_same_draws(monkeypatch, response):
    """Above ``PER_TREE_PERM_BYTES`` the trees share one row permutation, rebuilt for each tree
    from its leaf map; the draws must be bit-identical to those with a permutation per tree
    (regression, probit and log-linear BART, whose sweeps rebuild it in different places)."""
    from bartpy_suite.samplers import forest

    rng = np.random.default_rng(2)
    n = 300
    x = rng.uniform(size=(n, 3))
    f = np.sin(6 * x[:, 0]) + x[:, 1]
    keywords = {}
    if response == "numeric":
        y = f + 0.2 * rng.standard_normal(n)
    elif response == "binary":
        y = (f + 0.3 * rng.standard_normal(n) > np.median(f)).astype(np.int64)
        keywords["class_labels"] = [False, True]
    else:
        y = np.digitize(f + 0.3 * rng.standard_normal(n), np.quantile(f, [1 / 3, 2 / 3]))
        keywords["class_labels"] = ["a", "b", "c"]

    def fit():
        model = bps.BART(trees=8, chains=1, draws=25, tune=25, seed=4, progress=False, check_mixing=False,
                         log_likelihood=False)
        return model.fit(x, y, **keywords)

    assert not forest.shares_perm(8, n)
    own = fit()
    monkeypatch.setattr(forest, "PER_TREE_PERM_BYTES", 0)
    assert forest.shares_perm(8, n)
    shared = fit()
    for name, value in own.posterior.data_vars.items():
        assert np.array_equal(value.values, shared.posterior[name].values, equal_nan=True), name
    accepted = own.sample_stats["n_accepted"].values.sum(axis=(0, 1))
    assert accepted[:4].sum() > 0, "no move was accepted: the comparison would not test the rebuilt permutation"


def test_tree_copies_check_lengths_once_and_copy_every_slot():
    from bartpy_suite._kernels.particle import copy_tree

    copied = ("var", "cut", "left", "right", "parent", "depth", "start", "end", "lm", "b", "lp", "perm", "free", "meta")
    rng = np.random.default_rng(3)
    a = T.new_tree(20, 15)
    for name in copied:
        arr = getattr(a, name)
        arr[:] = rng.integers(1, 7, arr.shape[0]).astype(arr.dtype)
    b = T.new_tree(20, 15)
    copy_tree(a, b)
    for name in copied:
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=name)
    with pytest.raises(ValueError, match="node capacity or rows"):
        copy_tree(a, T.new_tree(20, 17))  # the copies themselves are unchecked: this check guards them
    with pytest.raises(ValueError, match="node capacity or rows"):
        copy_tree(a, T.new_tree(21, 15))
    dst = np.zeros(4)
    with pytest.raises(ValueError, match="differ in length"):
        T.copy_into(dst, np.ones(5))
    T.copy_into(dst, np.arange(4.0))
    np.testing.assert_array_equal(dst, np.arange(4.0))
