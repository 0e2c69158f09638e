"""Traversal of stored trees for prediction.

Trees come from the compact draw store (``record.py``): flat preorder node arrays ``var``,
``cut`` and the right-child index ``right`` (``preorder_right``; the left child of node i is
i + 1), and ``roots[s, t]``, the flat index of the root of tree t of sample s. New-data codes
are (p, m).

A tree is evaluated for a block of ``BLOCK`` rows at once, bottom-up (``block_leaves``): in
reverse preorder every split rule picks, for each row of the block, the leaf its left or its
right subtree leads to. Each rule is then one branch-free pass over one predictor's codes,
which the compiler turns into vector instructions; walking each row from the root instead
takes a data-dependent branch at every rule, mispredicted about half the time, and that
dominated the cost for the small trees of BART. The codes are first copied into blocks
(``blocked_codes``) so that every pass runs over a contiguous array from index 0 with a
constant length, which is what the vectoriser needs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .jit import helper, kernel
from .tree import goes_left

#: Rows evaluated together (per-rule buffers of BLOCK int32 stay in L1 cache).
BLOCK = 256


@helper(refcounts=True)
def blocked_codes(codes):
    """Codes (p, m) copied to (blocks, p, BLOCK), the last block padded with code 0."""
    p, m = codes.shape
    n_blocks = (m + BLOCK - 1) // BLOCK
    out = np.zeros((n_blocks, p, BLOCK), dtype=np.int32)
    for b in range(n_blocks):
        lo = b * BLOCK
        for v in range(p):
            for i in range(min(BLOCK, m - lo)):
                out[b, v, i] = codes[v, lo + i]
    return out


@helper
def tree_size(var, root):
    """Number of nodes of the tree stored in preorder from ``root``."""
    node = root
    open_slots = 1
    while open_slots > 0:
        open_slots += 1 if var[node] >= 0 else -1
        node += 1
    return node - root


@helper
def block_leaves(x, is_cat, var, cut, right, root, size, work):
    """Leaves reached by the ``BLOCK`` rows of codes ``x`` (p, BLOCK) in the tree of ``size``
    nodes rooted at ``root``, a tree with at least one split.

    ``work`` is an int32 array (>= size, BLOCK); afterwards row i's leaf is
    ``root + work[0, i]`` (local node indices).
    """
    for k in range(size - 1, -1, -1):  # children before parents
        node = root + k
        v = var[node]
        if v < 0:
            continue
        # a constant is_cat per pass lets each pass compile to one vectorised comparison
        if is_cat[v]:
            _rule_pass(x[v], cut[node], True, k, right[node] - root, var, root, work)
        else:
            _rule_pass(x[v], cut[node], False, k, right[node] - root, var, root, work)


@helper(inline=True)
def _rule_pass(x, c, cat, k, right_k, var, root, work):
    """``work[k, i]``: the leaf (local index) row i reaches below split rule k."""
    dest = work[k]
    left_k = k + 1
    left_leaf = var[root + left_k] < 0
    right_leaf = var[root + right_k] < 0
    if left_leaf and right_leaf:
        for i in range(BLOCK):
            dest[i] = left_k if goes_left(x[i], c, cat) else right_k
    elif left_leaf:
        src_r = work[right_k]
        for i in range(BLOCK):
            dest[i] = left_k if goes_left(x[i], c, cat) else src_r[i]
    elif right_leaf:
        src_l = work[left_k]
        for i in range(BLOCK):
            dest[i] = src_l[i] if goes_left(x[i], c, cat) else right_k
    else:
        src_l = work[left_k]
        src_r = work[right_k]
        for i in range(BLOCK):
            dest[i] = src_l[i] if goes_left(x[i], c, cat) else src_r[i]


@helper(refcounts=True)
def _work_for(work, size):
    """``work`` if it has at least ``size`` rows, else a larger one."""
    if work.shape[0] >= size:
        return work
    return np.empty((max(size, 2 * work.shape[0]), BLOCK), dtype=np.int32)


@helper(refcounts=True)
def _sample_leaf_indices(blocks, m, is_cat, var, cut, right, roots, s, out):
    """``leaf_indices`` for sample ``s``."""
    work = np.empty((16, BLOCK), dtype=np.int32)
    for b in range(blocks.shape[0]):
        lo = b * BLOCK
        n = min(BLOCK, m - lo)
        for t in range(roots.shape[1]):
            root = roots[s, t]
            if var[root] < 0:
                out[s, t, lo:lo + n] = root
                continue
            size = tree_size(var, root)
            work = _work_for(work, size)
            block_leaves(blocks[b], is_cat, var, cut, right, root, size, work)
            leaf = work[0]
            for i in range(n):
                out[s, t, lo + i] = root + leaf[i]


@helper(refcounts=True)
def _sample_sum_of_trees(blocks, m, is_cat, var, cut, right, value, roots, s, out):
    """``sum_of_trees`` for sample ``s``."""
    work = np.empty((16, BLOCK), dtype=np.int32)
    acc = np.empty(BLOCK)
    for b in range(blocks.shape[0]):
        x = blocks[b]
        acc[:] = 0.0
        for t in range(roots.shape[1]):
            root = roots[s, t]
            if var[root] < 0:
                leaf_value = value[root]
                for i in range(BLOCK):
                    acc[i] += leaf_value
                continue
            size = tree_size(var, root)
            if size == 3:  # a single split, the commonest tree of BART: no buffer needed
                v = var[root]
                c = cut[root]
                left_value = value[root + 1]
                right_value = value[root + 2]
                xv = x[v]
                if is_cat[v]:
                    for i in range(BLOCK):
                        acc[i] += left_value if goes_left(xv[i], c, True) else right_value
                else:
                    for i in range(BLOCK):
                        acc[i] += left_value if goes_left(xv[i], c, False) else right_value
                continue
            work = _work_for(work, size)
            block_leaves(x, is_cat, var, cut, right, root, size, work)
            leaf = work[0]
            for i in range(BLOCK):
                acc[i] += value[root + leaf[i]]
        lo = b * BLOCK
        for i in range(min(BLOCK, m - lo)):
            out[s, lo + i] = acc[i]


# Threads instead of numba's parallel loops: a ``prange`` loop costs the parfor passes and a second
# compiled function per kernel, 1-2 CPU s of a first fit (issue 11, section 1). Each kernel
# below runs a range of samples without the GIL, and the Python functions after them hand the
# ranges to threads. Each call blocks the codes again, a copy far smaller than the trees' work
# (blocking them once in a kernel of its own was 2% slower). Every sample writes only its own rows
# of ``out``, so the result does not depend on the number of threads.
@kernel
def _leaf_indices_range(codes, is_cat, var, cut, right, roots, start, stop, out):
    """``leaf_indices`` for samples ``start`` to ``stop - 1``."""
    blocks = blocked_codes(codes)
    for s in range(start, stop):
        _sample_leaf_indices(blocks, codes.shape[1], is_cat, var, cut, right, roots, s, out)


@kernel
def _sum_of_trees_range(codes, is_cat, var, cut, right, value, roots, start, stop, out):
    """``sum_of_trees`` for samples ``start`` to ``stop - 1``."""
    blocks = blocked_codes(codes)
    for s in range(start, stop):
        _sample_sum_of_trees(blocks, codes.shape[1], is_cat, var, cut, right, value, roots, s, out)


def _over_samples(run_range, n_samples: int, threads: int | None) -> None:
    """Call ``run_range(start, stop)`` over ``range(n_samples)``, split among ``threads`` threads
    (default: numba's thread count, ``NUMBA_NUM_THREADS``)."""
    threads = numba.config.NUMBA_NUM_THREADS if threads is None else threads
    threads = max(1, min(threads, n_samples))
    if threads == 1:
        run_range(0, n_samples)
        return
    bounds = np.linspace(0, n_samples, threads + 1).astype(np.int64)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for done in [pool.submit(run_range, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]:
            done.result()


def leaf_indices(codes: np.ndarray, is_cat: np.ndarray, var: np.ndarray, cut: np.ndarray, right: np.ndarray,
                 roots: np.ndarray, out: np.ndarray, threads: int | None = None) -> None:
    """Write ``out[s, t, i]``, the flat index of the leaf reached by row i in tree t of sample s.

    Parameters
    ----------
    codes : ndarray of int, shape (p, m)
        Bin codes of the new rows.
    is_cat, var, cut, right : ndarray
        Categorical flag per predictor and the store's node arrays (module docstring).
    roots : ndarray of int64, shape (samples, trees)
        Flat root index per sample and tree.
    out : ndarray of int64, shape (samples, trees, m)
        Filled in place.
    threads : int or None
        Threads to split the samples among (default ``NUMBA_NUM_THREADS``).
    """
    _over_samples(lambda a, b: _leaf_indices_range(codes, is_cat, var, cut, right, roots, a, b, out),
                  roots.shape[0], threads)


def sum_of_trees(codes: np.ndarray, is_cat: np.ndarray, var: np.ndarray, cut: np.ndarray, right: np.ndarray,
                 value: np.ndarray, roots: np.ndarray, out: np.ndarray, threads: int | None = None) -> None:
    """Write ``out[s, i] = sum_t value[leaf(s, t, i)]``, the fitted function per sample (the trees
    added in order, from 0.0).

    Parameters
    ----------
    codes, is_cat, var, cut, right, roots : ndarray
        As for ``leaf_indices``.
    value : ndarray of float64
        Leaf value per stored node.
    out : ndarray of float64, shape (samples, m)
        Filled in place.
    threads : int or None
        Threads to split the samples among (default ``NUMBA_NUM_THREADS``).
    """
    _over_samples(lambda a, b: _sum_of_trees_range(codes, is_cat, var, cut, right, value, roots, a, b, out),
                  roots.shape[0], threads)
