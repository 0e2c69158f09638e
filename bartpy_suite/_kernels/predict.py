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

import numpy as np
from numba import prange

from .jit import helper, kernel
from .tree import goes_left

#: Rows evaluated together (per-rule buffers of BLOCK int32 stay in L1 cache).
BLOCK = 256


@helper
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


@helper
def _work_for(work, size):
    """``work`` if it has at least ``size`` rows, else a larger one."""
    if work.shape[0] >= size:
        return work
    return np.empty((max(size, 2 * work.shape[0]), BLOCK), dtype=np.int32)


@helper
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


@helper
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


# The parallel loops only call a helper per sample: numba's parfor passes analyse every statement
# of a prange body, so a body of one call compiles in a fraction of the time. The sample index is
# cast because numba types it int64 outside the parallel loop and uint64 inside: one signature.
@kernel(parallel=True)
def leaf_indices(codes, is_cat, var, cut, right, roots, out):
    """``out[s, t, i]``: flat index of the leaf reached by row i in tree t of sample s."""
    blocks = blocked_codes(codes)
    for s in prange(roots.shape[0]):
        _sample_leaf_indices(blocks, codes.shape[1], is_cat, var, cut, right, roots, np.int64(s), out)


@kernel(parallel=True)
def sum_of_trees(codes, is_cat, var, cut, right, value, roots, out):
    """``out[s, i] = sum_t value[leaf(s, t, i)]``: the fitted function per sample (the trees
    added in order, from 0.0)."""
    blocks = blocked_codes(codes)
    for s in prange(roots.shape[0]):
        _sample_sum_of_trees(blocks, codes.shape[1], is_cat, var, cut, right, value, roots, np.int64(s), out)
