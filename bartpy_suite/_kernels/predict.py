"""Traversal of stored trees for prediction.

Stored trees are in preorder with ``split_var < 0`` at leaves (``-2`` pads unused slots);
tree arrays are shaped (samples, trees, nodes) and new-data codes (p, m).
"""

from __future__ import annotations

from numba import njit, prange

from .tree import goes_left


@njit(cache=True, nogil=True)
def find_leaf(codes, i, is_cat, var, cut, left, right):
    """Node index of the leaf that row ``i`` reaches in one stored tree."""
    node = 0
    v = var[0]
    while v >= 0:
        if goes_left(codes[v, i], cut[node], is_cat[v]):
            node = left[node]
        else:
            node = right[node]
        v = var[node]
    return node


@njit(cache=True, parallel=True)
def leaf_indices(codes, is_cat, split_var, split_cut, left, right, out):
    """``out[s, t, i]``: the leaf reached by row i in tree t of sample s."""
    n_samples, n_trees, _ = split_var.shape
    for s in prange(n_samples):
        for t in range(n_trees):
            for i in range(codes.shape[1]):
                out[s, t, i] = find_leaf(codes, i, is_cat, split_var[s, t], split_cut[s, t], left[s, t], right[s, t])


@njit(cache=True, parallel=True)
def sum_of_trees(codes, is_cat, split_var, split_cut, left, right, leaf_value, out):
    """``out[s, i] = sum_t leaf_value[s, t, leaf(s, t, i)]``: the fitted function per sample."""
    n_samples, n_trees, _ = split_var.shape
    m = codes.shape[1]
    for s in prange(n_samples):
        row = out[s]
        row[:] = 0.0
        # One tree at a time over all rows: its few nodes stay in L1 and each split reads one
        # predictor's codes in row order.
        for t in range(n_trees):
            var = split_var[s, t]
            cut = split_cut[s, t]
            lc = left[s, t]
            rc = right[s, t]
            value = leaf_value[s, t]
            for i in range(m):
                row[i] += value[find_leaf(codes, i, is_cat, var, cut, lc, rc)]
