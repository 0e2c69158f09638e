"""The block traversal of ``_kernels/predict.py`` on hand-built stores: random trees of every
shape (single leaves, stumps, deep unbalanced trees larger than the kernels' first work
buffer), numeric and categorical rules, and row counts around the block size (one row, a
partial block, exactly one block, one more, several). Compared exactly with a plain walk of
each tree from its root: the kernels select leaves and add the trees' values in tree order
from 0.0, so the sums are bit-identical.
"""

from __future__ import annotations

import numpy as np
import pytest

from bartpy_suite._kernels.predict import BLOCK, leaf_indices, sum_of_trees
from bartpy_suite._kernels.record import right_children, tree_roots

P, NBINS, LEVELS = 4, 40, 6
IS_CAT = np.array([False, True, False, True])


def random_tree(rng, max_depth: int, depth: int = 0) -> list:
    """Preorder (var, cut, value) triples of a random tree; leaves have var -1."""
    if depth == max_depth or rng.random() < 0.08 * depth:
        return [(-1, 0, float(rng.normal()))]
    v = int(rng.integers(P))
    cut = int(rng.integers(1, 2 ** LEVELS - 1)) if IS_CAT[v] else int(rng.integers(NBINS))
    return [(v, cut, np.nan)] + random_tree(rng, max_depth, depth + 1) + random_tree(rng, max_depth, depth + 1)


@pytest.fixture(scope="module")
def store():
    rng = np.random.default_rng(4)
    samples, trees = 5, 7
    nodes, counts = [], np.zeros((samples, trees), dtype=np.int64)
    for s in range(samples):
        for t in range(trees):
            tree = random_tree(rng, max_depth=int(rng.integers(0, 10)))
            nodes += tree
            counts[s, t] = len(tree)
    assert counts.max() > 16 and (counts == 1).any() and (counts == 3).any(), "every tree shape is covered"
    var = np.array([n[0] for n in nodes], dtype=np.int32)
    return {"var": var, "cut": np.array([n[1] for n in nodes], dtype=np.int64),
            "value": np.array([n[2] for n in nodes]), "right": right_children(var, counts),
            "roots": tree_roots(counts)}


def walk(codes, i, st, root) -> int:
    node = root
    while st["var"][node] >= 0:
        v, cut = st["var"][node], st["cut"][node]
        left = (cut >> codes[v, i]) & 1 == 1 if IS_CAT[v] else codes[v, i] <= cut
        node = node + 1 if left else st["right"][node]
    return node


@pytest.mark.parametrize("m", [1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17])
def test_block_traversal_equals_a_walk_from_the_root(store, m):
    rng = np.random.default_rng(m)
    codes = np.where(IS_CAT[:, None], rng.integers(0, LEVELS, (P, m)), rng.integers(0, NBINS, (P, m))).astype(np.int32)
    roots = store["roots"]
    leaves = np.empty(roots.shape + (m,), dtype=np.int64)
    leaf_indices(codes, IS_CAT, store["var"], store["cut"], store["right"], roots, leaves)
    f = np.empty((roots.shape[0], m))
    sum_of_trees(codes, IS_CAT, store["var"], store["cut"], store["right"], store["value"], roots, f)
    expected_f = np.zeros((roots.shape[0], m))
    for s in range(roots.shape[0]):
        for t in range(roots.shape[1]):
            for i in range(m):
                leaf = walk(codes, i, store, roots[s, t])
                assert leaves[s, t, i] == leaf, (s, t, i)
                expected_f[s, i] += store["value"][leaf]
    np.testing.assert_array_equal(f, expected_f)


@pytest.mark.parametrize("threads", [1, 2, 3, 5, 8])
def test_the_samples_split_among_threads_give_the_same_arrays(store, threads):
    # 5 samples: 2 and 3 threads split them unevenly, 8 threads is capped at one sample each
    rng = np.random.default_rng(9)
    m = BLOCK + 5
    codes = np.where(IS_CAT[:, None], rng.integers(0, LEVELS, (P, m)), rng.integers(0, NBINS, (P, m))).astype(np.int32)
    args = (codes, IS_CAT, store["var"], store["cut"], store["right"])
    roots = store["roots"]
    leaves = {k: np.full(roots.shape + (m,), -1, dtype=np.int64) for k in ("one", "split")}
    f = {k: np.full((roots.shape[0], m), np.nan) for k in ("one", "split")}
    leaf_indices(*args, roots, leaves["one"], threads=1)
    leaf_indices(*args, roots, leaves["split"], threads=threads)
    sum_of_trees(*args, store["value"], roots, f["one"], threads=1)
    sum_of_trees(*args, store["value"], roots, f["split"], threads=threads)
    assert (leaves["one"] >= 0).all() and np.isfinite(f["one"]).all(), "every entry is written"
    np.testing.assert_array_equal(leaves["split"], leaves["one"])
    np.testing.assert_array_equal(f["split"], f["one"])


def test_concurrent_calls_from_python_threads_do_not_interfere(store):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(10)
    m = 2 * BLOCK
    codes = [np.where(IS_CAT[:, None], rng.integers(0, LEVELS, (P, m)),
                      rng.integers(0, NBINS, (P, m))).astype(np.int32) for _ in range(4)]
    roots = store["roots"]

    def f_of(c):
        out = np.empty((roots.shape[0], m))
        sum_of_trees(c, IS_CAT, store["var"], store["cut"], store["right"], store["value"], roots, out)
        return out

    expected = [f_of(c) for c in codes]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(f_of, codes))
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
