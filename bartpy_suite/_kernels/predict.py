"""Traversal of stored trees for prediction.

Trees come from the compact draw store (``record.py``): flat preorder node arrays ``var``,
``cut`` and the right-child index ``right`` (``preorder_right``; the left child of node i is
i + 1), and ``roots[s, t]``, the flat index of the root of tree t of sample s. New-data codes
are (p, m).
"""

from __future__ import annotations

from numba import njit, prange

from .tree import goes_left


@njit(cache=True, nogil=True)
def find_leaf(codes, i, is_cat, var, cut, right, root):
    """Flat index of the leaf that row ``i`` reaches in the tree rooted at ``root``."""
    node = root
    v = var[node]
    while v >= 0:
        if goes_left(codes[v, i], cut[node], is_cat[v]):
            node += 1
        else:
            node = right[node]
        v = var[node]
    return node


@njit(cache=True, parallel=True)
def leaf_indices(codes, is_cat, var, cut, right, roots, out):
    """``out[s, t, i]``: flat index of the leaf reached by row i in tree t of sample s."""
    n_samples, n_trees = roots.shape
    for s in prange(n_samples):
        for t in range(n_trees):
            root = roots[s, t]
            for i in range(codes.shape[1]):
                out[s, t, i] = find_leaf(codes, i, is_cat, var, cut, right, root)


@njit(cache=True, parallel=True)
def sum_of_trees(codes, is_cat, var, cut, right, value, roots, out):
    """``out[s, i] = sum_t value[leaf(s, t, i)]``: the fitted function per sample."""
    n_samples, n_trees = roots.shape
    m = codes.shape[1]
    for s in prange(n_samples):
        row = out[s]
        row[:] = 0.0
        # One tree at a time over all rows: its few nodes stay in L1 and each split reads one
        # predictor's codes in row order.
        for t in range(n_trees):
            root = roots[s, t]
            for i in range(m):
                row[i] += value[find_leaf(codes, i, is_cat, var, cut, right, root)]
