"""Exact path-dependent TreeSHAP of stored trees (Lundberg et al. 2020, Nature Machine
Intelligence 2, "From local explanations to global understanding with explainable AI for trees",
Algorithm 2).

The value function of a tree is the path-dependent conditional expectation of Algorithm 1: for a
coalition S of predictors, ``v(S)`` walks the tree from the root; at a rule on a predictor in S it
follows the row, at a rule on any other predictor it averages both children weighted by their
*covers*, the numbers of training rows that reach them (``cover(child) / cover(node)``; one half
each when no training row reaches the node, a convention the brute-force tests share). TreeSHAP
returns the exact Shapley values of that game, so for every row the values plus ``v({})``, the
cover-weighted mean leaf (the mean of the tree over the training rows), add up to the tree's value
at the row. A forest's values are the sums over its trees.

The covers come from routing the binned training rows (codes (p, n)) through each stored tree with
the prediction kernels' bottom-up block evaluation (``predict.block_leaves``), once per tree and
call. Rows to explain are (m, p) codes, one row contiguous, because the recursion reads one row's
codes at many predictors. A factor is one predictor: its rules are level masks, and
``tree.goes_left`` decides every rule, the missing bit of ``na_action="split"`` included.

The recursion is written with an explicit stack (numba compiles self-recursion only with declared
signatures, which do not cache well); ``paths[level]`` holds the unique path at depth ``level``
(feature ``path_d``, zero and one fractions ``path_z``/``path_o``, weights ``path_w``), as in the
shap library's C++ ``tree_shap_recursive``. A tree with one split (the commonest BART tree) takes a
short cut: its only predictor gets ``value(leaf) - v({})``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .jit import helper, kernel
from .predict import BLOCK, _over_samples, _work_for, block_leaves, blocked_codes, tree_size
from .soft_records import SoftTrees
from .soft_tree import expit
from .tree import goes_left


class StoredTrees(NamedTuple):
    """The stored trees to explain: the store's node arrays (``predict.py``), the leaf value per
    node and the flat root index of each tree per sample."""

    var: np.ndarray  # int32[nodes]
    cut: np.ndarray  # int64[nodes]
    right: np.ndarray  # int64[nodes]
    value: np.ndarray  # float64[nodes]
    roots: np.ndarray  # int64[samples, trees]


class Paths(NamedTuple):
    """Scratch of ``tree_shap_row``: the unique path at each level (feature ``d``, zero and one
    fractions ``z``/``o``, weights ``w``; (levels, levels) each) and the explicit recursion stack
    (``stack_i`` int64 (nodes, 4), ``stack_f`` float64 (nodes, 2)); all with at least the tree's node
    count + 1 rows."""

    d: np.ndarray
    z: np.ndarray
    o: np.ndarray
    w: np.ndarray
    stack_i: np.ndarray
    stack_f: np.ndarray


@helper
def tree_covers(train_blocks, n_train, is_cat, var, cut, right, root, size, work, cover):
    """``cover[k]``: training rows reaching local node k of the tree rooted at ``root``.

    ``train_blocks`` are the blocked training codes (``predict.blocked_codes``); ``work`` an int32
    array of at least (size, BLOCK); ``cover`` a float64 array of at least ``size`` entries.
    """
    for k in range(size):
        cover[k] = 0.0
    for b in range(train_blocks.shape[0]):
        n = min(BLOCK, n_train - b * BLOCK)  # the last block's padding rows are not training rows
        block_leaves(train_blocks[b], is_cat, var, cut, right, root, size, work)
        leaf = work[0]
        for i in range(n):
            cover[leaf[i]] += 1.0
    for k in range(size - 1, -1, -1):  # children before parents
        if var[root + k] >= 0:
            cover[k] = cover[k + 1] + cover[right[root + k] - root]


@helper(inline=True)
def _fraction(cover, node, child):
    """Share of ``node``'s training rows that reach ``child`` (1/2 when none reach ``node``)."""
    if cover[node] > 0.0:
        return cover[child] / cover[node]
    return 0.5


@helper
def expected_value(var, right, value, root, size, cover, buf):
    """``v({})``: the tree's cover-weighted mean leaf value (``buf``: float64 scratch >= size)."""
    for k in range(size - 1, -1, -1):
        if var[root + k] < 0:
            buf[k] = value[root + k]
        else:
            r = right[root + k] - root
            buf[k] = _fraction(cover, k, k + 1) * buf[k + 1] + _fraction(cover, k, r) * buf[r]
    return buf[0]


@helper
def _extend(path_d, path_z, path_o, path_w, level, depth, zero, one, feature):
    """Algorithm 2's EXTEND of the path at ``level`` by a predictor with fractions zero/one."""
    path_d[level, depth] = feature
    path_z[level, depth] = zero
    path_o[level, depth] = one
    path_w[level, depth] = 1.0 if depth == 0 else 0.0
    for i in range(depth - 1, -1, -1):
        path_w[level, i + 1] += one * path_w[level, i] * (i + 1) / (depth + 1)
        path_w[level, i] = zero * path_w[level, i] * (depth - i) / (depth + 1)


@helper
def _unwind(path_d, path_z, path_o, path_w, level, depth, index):
    """Algorithm 2's UNWIND: remove element ``index`` from the path at ``level`` (in place)."""
    one = path_o[level, index]
    zero = path_z[level, index]
    next_one = path_w[level, depth]
    for i in range(depth - 1, -1, -1):
        if one != 0.0:
            tmp = path_w[level, i]
            path_w[level, i] = next_one * (depth + 1) / ((i + 1) * one)
            next_one = tmp - path_w[level, i] * zero * (depth - i) / (depth + 1)
        else:
            path_w[level, i] = path_w[level, i] * (depth + 1) / (zero * (depth - i))
    for i in range(index, depth):
        path_d[level, i] = path_d[level, i + 1]
        path_z[level, i] = path_z[level, i + 1]
        path_o[level, i] = path_o[level, i + 1]


@helper
def _unwound_sum(path_z, path_o, path_w, level, depth, index):
    """Sum of the weights of the path at ``level`` with element ``index`` unwound."""
    one = path_o[level, index]
    zero = path_z[level, index]
    next_one = path_w[level, depth]
    total = 0.0
    if one != 0.0:
        for i in range(depth - 1, -1, -1):
            tmp = next_one / ((i + 1) * one)
            total += tmp
            next_one = path_w[level, i] - tmp * zero * (depth - i)
    else:
        for i in range(depth - 1, -1, -1):
            total += path_w[level, i] / (zero * (depth - i))
    return total * (depth + 1)


@helper
def tree_shap_row(xrow, is_cat, trees, root, cover, paths, phi):
    """Add the path-dependent TreeSHAP values of the tree of ``trees`` (a ``StoredTrees``) rooted at
    ``root`` for the row of codes ``xrow`` (p,) to ``phi`` (p,).

    ``paths`` (a ``Paths``) is the scratch. A stack entry is (local node, level, unique depth,
    parent feature) and (zero fraction, one fraction).
    """
    var, cut, right, value = trees.var, trees.cut, trees.right, trees.value
    path_d, path_z, path_o, path_w = paths.d, paths.z, paths.o, paths.w
    stack_i, stack_f = paths.stack_i, paths.stack_f
    top = 1
    stack_i[0, 0] = 0
    stack_i[0, 1] = 0
    stack_i[0, 2] = 0
    stack_i[0, 3] = -1
    stack_f[0, 0] = 1.0
    stack_f[0, 1] = 1.0
    while top > 0:
        top -= 1
        k = stack_i[top, 0]
        level = stack_i[top, 1]
        depth = stack_i[top, 2]
        if level > 0:  # the parent's (possibly unwound) path, depth elements
            for j in range(depth):
                path_d[level, j] = path_d[level - 1, j]
                path_z[level, j] = path_z[level - 1, j]
                path_o[level, j] = path_o[level - 1, j]
                path_w[level, j] = path_w[level - 1, j]
        _extend(path_d, path_z, path_o, path_w, level, depth, stack_f[top, 0], stack_f[top, 1], stack_i[top, 3])
        node = root + k
        v = var[node]
        if v < 0:
            leaf_value = value[node]
            for j in range(1, depth + 1):
                w = _unwound_sum(path_z, path_o, path_w, level, depth, j)
                phi[path_d[level, j]] += w * (path_o[level, j] - path_z[level, j]) * leaf_value
            continue
        left_k = k + 1
        right_k = right[node] - root
        if goes_left(xrow[v], cut[node], is_cat[v]):
            hot, cold = left_k, right_k
        else:
            hot, cold = right_k, left_k
        incoming_zero = 1.0
        incoming_one = 1.0
        found = -1
        for j in range(depth + 1):
            if path_d[level, j] == v:
                found = j
                break
        if found >= 0:  # a predictor already on the path: undo its earlier split and redo it here
            incoming_zero = path_z[level, found]
            incoming_one = path_o[level, found]
            _unwind(path_d, path_z, path_o, path_w, level, depth, found)
            depth -= 1
        # A child whose zero and one fractions are both 0 adds nothing (every path weight below
        # it is 0, and so is its own one - zero), and skipping it avoids UNWIND's division by
        # them: a cold child no training row reaches, or one below a cold split on the same
        # predictor.
        cold_zero = _fraction(cover, k, cold) * incoming_zero
        if cold_zero > 0.0:
            stack_i[top, 0] = cold
            stack_i[top, 1] = level + 1
            stack_i[top, 2] = depth + 1
            stack_i[top, 3] = v
            stack_f[top, 0] = cold_zero
            stack_f[top, 1] = 0.0
            top += 1
        hot_zero = _fraction(cover, k, hot) * incoming_zero
        if hot_zero > 0.0 or incoming_one != 0.0:
            stack_i[top, 0] = hot
            stack_i[top, 1] = level + 1
            stack_i[top, 2] = depth + 1
            stack_i[top, 3] = v
            stack_f[top, 0] = hot_zero
            stack_f[top, 1] = incoming_one
            top += 1


@helper(refcounts=True)
def _float_for(buf, size):
    """``buf`` if it has at least ``size`` entries, else a larger float64 array."""
    if buf.shape[0] >= size:
        return buf
    return np.empty(max(size, 2 * buf.shape[0]))


@helper(refcounts=True)
def _sample_shap(rows, train_blocks, n_train, is_cat, trees, s, phi, base):
    """``forest_shap`` for sample ``s`` (``trees`` a ``StoredTrees``)."""
    var, cut, right, value, roots = trees.var, trees.cut, trees.right, trees.value, trees.roots
    work = np.empty((16, BLOCK), dtype=np.int32)
    cover = np.empty(16)
    buf = np.empty(16)
    width = 0
    path_d = np.empty((0, 0), dtype=np.int64)
    path_z = np.empty((0, 0))
    path_o = np.empty((0, 0))
    path_w = np.empty((0, 0))
    stack_i = np.empty((0, 4), dtype=np.int64)
    stack_f = np.empty((0, 2))
    m = rows.shape[0]
    total = 0.0
    for t in range(roots.shape[1]):
        root = roots[s, t]
        if var[root] < 0:
            total += value[root]  # a leaf alone: every row gets its value, no predictor matters
            continue
        size = tree_size(var, root)
        work = _work_for(work, size)
        cover = _float_for(cover, size)
        buf = _float_for(buf, size)
        tree_covers(train_blocks, n_train, is_cat, var, cut, right, root, size, work, cover)
        ev = expected_value(var, right, value, root, size, cover, buf)
        total += ev
        if size == 3:
            v = var[root]
            c = cut[root]
            cat = is_cat[v]
            delta_left = value[root + 1] - ev
            delta_right = value[root + 2] - ev
            for i in range(m):
                phi[s, i, v] += delta_left if goes_left(rows[i, v], c, cat) else delta_right
            continue
        if size + 1 > width:  # levels and path lengths are below the node count + 1
            width = max(size + 1, 2 * width)
            path_d = np.empty((width, width), dtype=np.int64)
            path_z = np.empty((width, width))
            path_o = np.empty((width, width))
            path_w = np.empty((width, width))
            stack_i = np.empty((width, 4), dtype=np.int64)
            stack_f = np.empty((width, 2))
        paths = Paths(path_d, path_z, path_o, path_w, stack_i, stack_f)
        for i in range(m):
            tree_shap_row(rows[i], is_cat, trees, root, cover, paths, phi[s, i])
    base[s] = total


# Threads as in prediction (``predict._over_samples``): each kernel call runs a range of samples
# without the GIL and writes only those samples' entries of ``phi`` and ``base``.
@kernel
def _shap_range(rows, train_codes, is_cat, trees, start, stop, phi, base):
    """``forest_shap`` for samples ``start`` to ``stop - 1`` (``trees`` a ``StoredTrees``)."""
    train_blocks = blocked_codes(train_codes)
    for s in range(start, stop):
        for i in range(rows.shape[0]):
            for v in range(rows.shape[1]):
                phi[s, i, v] = 0.0
        _sample_shap(rows, train_blocks, train_codes.shape[1], is_cat, trees, s, phi, base)


def forest_shap(rows: np.ndarray, train_codes: np.ndarray, is_cat: np.ndarray, var: np.ndarray, cut: np.ndarray,
                right: np.ndarray, value: np.ndarray, roots: np.ndarray, phi: np.ndarray, base: np.ndarray,
                threads: int | None = None) -> None:
    """Path-dependent TreeSHAP of a sum of stored trees, per sample.

    Parameters
    ----------
    rows : ndarray of int32, shape (m, p)
        Bin codes of the rows to explain, one row contiguous.
    train_codes : ndarray of int32, shape (p, n)
        Bin codes of the training rows, which define the covers.
    is_cat, var, cut, right : ndarray
        Categorical flag per predictor and the store's node arrays (``predict.py``).
    value : ndarray of float64
        Leaf value per stored node.
    roots : ndarray of int64, shape (samples, trees)
        Flat root index per sample of the trees to sum.
    phi : ndarray of float64, shape (samples, m, p)
        Written: ``phi[s, i, v]``, predictor v's SHAP value at row i in sample s.
    base : ndarray of float64, shape (samples,)
        Written: ``v({})`` per sample, the sum of the trees' mean over the training rows, so that
        ``base[s] + phi[s, i].sum()`` is the sample's sum of trees at row i.
    threads : int or None
        Threads to split the samples among (default ``NUMBA_NUM_THREADS``).
    """
    if train_codes.shape[1] == 0:
        raise ValueError("forest_shap: the covers need at least one training row")
    trees = StoredTrees(var, cut, right, value, roots)
    _over_samples(lambda a, b: _shap_range(rows, train_codes, is_cat, trees, a, b, phi, base), roots.shape[0],
                  threads)


# -- soft trees (RJHMC-Tree, axis-aligned gates: sampler hmc_df) ------------------------------------------
#
# A soft tree sends a row to the right child of node k with probability expit((x_v - tau_k) / h) and
# to the left with expit(-(x_v - tau_k) / h), so f(x) = sum over leaves of value * the product of the
# gates on the leaf's path. The path-dependent game generalises with soft covers (each training row
# counts with its probability of reaching the node): for a coalition S a gate on a predictor in S is
# kept, any other is replaced by cover(child) / cover(node). Per leaf that game is a product over the
# leaf's distinct path predictors u of o_u (the product of u's gates) or z_u (of u's cover fractions),
# whose Shapley value for predictor i is (o_i - z_i) sum_k c_k k! (d - 1 - k)! / d!, with c_k the
# coefficients of prod_{u != i} (z_u + t o_u). Every term is positive, so this is stable where
# Algorithm 2's UNWIND, dividing by a one fraction of 1e-40 (a row far from a sharp gate), is not.
# O(leaves x depth^3) per row: soft trees are single trees of a few leaves.

@helper
def _soft_gates(x, i, trees, root, size, out):
    """``out[k]``: the gate probability of the edge into local node k for row i of ``x`` (1 at the
    root) in the tree of ``size`` nodes at ``root`` of ``trees`` (a ``SoftTrees``)."""
    var, right, tau, h = trees.var, trees.right, trees.tau, trees.h
    out[0] = 1.0
    for k in range(size):
        node = root + k
        v = var[node]
        if v < 0:
            continue
        a = (x[i, v] - tau[node]) / h
        out[k + 1] = expit(-a)
        out[right[node] - root] = expit(a)


@helper(refcounts=True)
def _soft_sample_shap(rows, train, trees, value, s, phi, base):
    """Soft-tree SHAP values of sample ``s`` (one tree of ``trees.counts[s]`` nodes at ``trees.roots[s]``)."""
    var, right = trees.var, trees.right
    root, size = trees.roots[s], trees.counts[s]
    parent = np.empty(size, dtype=np.int64)
    parent[0] = -1
    for k in range(size):
        if var[root + k] >= 0:
            parent[k + 1] = k
            parent[right[root + k] - root] = k
    gate = np.empty(size)
    reach = np.empty(size)
    cover = np.zeros(size)
    for i in range(train.shape[0]):
        _soft_gates(train, i, trees, root, size, gate)
        reach[0] = 1.0
        for k in range(1, size):  # preorder: a parent before its children
            reach[k] = reach[parent[k]] * gate[k]
        for k in range(size):
            cover[k] += reach[k]
    frac = np.empty(size)
    frac[0] = 1.0
    for k in range(1, size):
        c = cover[parent[k]]
        frac[k] = cover[k] / c if c > 0.0 else 0.5
    total = 0.0
    reach[0] = 1.0
    for k in range(1, size):
        reach[k] = reach[parent[k]] * frac[k]
    for k in range(size):
        if var[root + k] < 0:
            total += value[root + k] * reach[k]
    base[s] = total
    feats = np.empty(size, dtype=np.int64)
    one = np.empty(size)
    zero = np.empty(size)
    coef = np.empty(size + 1)
    for i in range(rows.shape[0]):
        for v in range(rows.shape[1]):
            phi[s, i, v] = 0.0
        _soft_gates(rows, i, trees, root, size, gate)
        for leaf in range(size):
            if var[root + leaf] >= 0:
                continue
            d = 0
            k = leaf
            while k > 0:  # the leaf's distinct path predictors with their products of gates and fractions
                u = var[root + parent[k]]
                j = 0
                while j < d and feats[j] != u:
                    j += 1
                if j == d:
                    feats[d] = u
                    one[d] = 1.0
                    zero[d] = 1.0
                    d += 1
                one[j] *= gate[k]
                zero[j] *= frac[k]
                k = parent[k]
            leaf_value = value[root + leaf]
            for j in range(d):
                coef[0] = 1.0
                deg = 0
                for q in range(d):
                    if q == j:
                        continue
                    coef[deg + 1] = coef[deg] * one[q]  # times (zero_q + t one_q)
                    for r in range(deg, 0, -1):
                        coef[r] = coef[r] * zero[q] + coef[r - 1] * one[q]
                    coef[0] *= zero[q]
                    deg += 1
                weight = 0.0
                binom = 1.0  # C(d - 1, r)
                for r in range(d):
                    weight += coef[r] / (d * binom)  # r! (d - 1 - r)! / d! = 1 / (d C(d - 1, r))
                    binom = binom * (d - 1 - r) / (r + 1)
                phi[s, i, feats[j]] += leaf_value * (one[j] - zero[j]) * weight


@kernel
def _soft_shap_range(rows, train, trees, value, start, stop, phi, base):
    """``soft_tree_shap`` for samples ``start`` to ``stop - 1``."""
    for s in range(start, stop):
        _soft_sample_shap(rows, train, trees, value, s, phi, base)


def soft_tree_shap(rows: np.ndarray, train: np.ndarray, trees: SoftTrees, value: np.ndarray, phi: np.ndarray,
                   base: np.ndarray, threads: int | None = None) -> None:
    """Path-dependent SHAP values of soft trees with axis-aligned gates (one tree per sample).

    Parameters
    ----------
    rows : ndarray of float64, shape (m, p)
        Scaled predictors of the rows to explain.
    train : ndarray of float64, shape (n, p)
        Scaled training predictors, which define the soft covers.
    trees : SoftTrees
        The samples' trees: split predictor (-1 at leaves), flat right child and threshold per
        stored node, flat root and node count of each sample's tree (int64, shape (samples,)) and
        the gate bandwidth ``h`` (``delta`` and ``mode`` are not read: the gates are axis-aligned).
    value : ndarray of float64, shape (nodes,)
        Leaf value per stored node.
    phi : ndarray of float64, shape (samples, m, p)
        Written: the SHAP values.
    base : ndarray of float64, shape (samples,)
        Written: the soft-cover-weighted mean leaf value (the tree's mean over the training rows).
    threads : int or None
        Threads to split the samples among (default ``NUMBA_NUM_THREADS``).
    """
    if train.shape[0] == 0:
        raise ValueError("soft_tree_shap: the covers need at least one training row")
    _over_samples(lambda a, b: _soft_shap_range(rows, train, trees, value, a, b, phi, base), trees.roots.shape[0],
                  threads)
