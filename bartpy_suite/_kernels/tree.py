"""Tree arrays and the operations every tree sampler shares.

A tree lives in preallocated node arrays (``TreeArrays``). Node 0 is the root. A node is a
leaf when ``var[node] == LEAF`` and unused when ``var[node] == FREE``. The training rows are
kept in ``perm`` so that the rows reaching any node form one contiguous segment
``perm[start[node]:end[node]]``: growing a leaf partitions its segment in place, pruning merges
two adjacent segments, and a change at a node re-partitions only that node's rows.

Predictors are pre-binned codes ``xt`` of shape (p, n) (feature-major, for cache-friendly
histograms). A numeric rule ``(v, k)`` sends a row left iff ``code <= k`` (``x <= cut_k``). A
categorical rule stores a 64-bit mask of levels: a row goes left iff bit ``code`` is set.

Prior conventions (issue 2): a rule is available at a node iff both children get at least
``m = min_leaf_size`` rows. ``p_RULE`` is uniform over variables with an available rule, then
uniform over that variable's available rules; ``p_SPLIT = alpha (1 + depth)^-beta`` if the node
has an available rule, else 0 (thesis eq. 3.1). For a categorical variable the rule is an
unordered partition of the levels present at the node; we store an *ordered* mask plus bits for
the levels absent from the node, both drawn uniformly, so the stored representation carries
prior mass ``p_RULE / (2 * 2^(L - L_present))``. Summing over representations gives back the
stated prior exactly, and every move becomes an exact involution on representations.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .likelihood import (
    MODEL_CLASSIFICATION,
    MODEL_MEAN_SHIFT,
    MODEL_MEAN_VARIANCE_SHIFT,
    MODEL_NORMAL_KNOWN_VARIANCE,
    leaf_log_marginal_dirichlet,
    leaf_log_marginal_mean_variance,
    leaf_log_marginal_normal_known_variance,
    mean_shift_global_term,
    mean_shift_leaf_terms,
)

LEAF = -1
FREE = -2
LOG2 = math.log(2.0)

# Indices into the float64 ``hyper`` vector shared by all tree kernels.
H_ALPHA = 0
H_BETA = 1
H_MIN_LEAF = 2
H_A = 3
H_MU_BAR = 4
H_NU = 5
H_LAM = 6
H_CLASS_ALPHA = 7
H_N_CLASSES = 8
H_MODEL = 9
H_LIKELIHOOD = 10
H_SIGMA2 = 11
H_TAU2 = 12
N_HYPER = 13

# Indices into ``meta`` (int64 vector of a tree).
M_N_FREE = 0
M_N_LEAVES = 1
M_N_INTERNAL = 2


class TreeArrays(NamedTuple):
    """One tree: node arrays of capacity N plus the row permutation of its n rows."""

    var: np.ndarray  # int32[N]: split variable, LEAF or FREE
    cut: np.ndarray  # int64[N]: cut index (numeric) or level mask (categorical)
    left: np.ndarray  # int32[N]
    right: np.ndarray  # int32[N]
    parent: np.ndarray  # int32[N]
    depth: np.ndarray  # int32[N]
    start: np.ndarray  # int64[N]: segment of perm holding the node's rows
    end: np.ndarray  # int64[N]
    lm: np.ndarray  # float64[N]: per-leaf log marginal term
    b: np.ndarray  # float64[N]: per-leaf scatter (common-sigma model) or residual sum (BART)
    value: np.ndarray  # float64[N]: leaf mean (drawn)
    leaf_sigma: np.ndarray  # float64[N]: leaf sd (mean-variance model)
    leaf_prob: np.ndarray  # float64[N, K]: leaf class probabilities
    perm: np.ndarray  # int64[n]
    free: np.ndarray  # int32[N]: stack of free node slots
    meta: np.ndarray  # int64[3]: n_free, n_leaves, n_internal


class Scratch(NamedTuple):
    """Work arrays reused by every move of one chain (nothing is allocated per iteration)."""

    hist: np.ndarray  # int64[max bins]
    sums: np.ndarray  # float64[n + 1]
    counts: np.ndarray  # float64[p]
    lows: np.ndarray  # int64[p]
    extras: np.ndarray  # int64[p]
    nodes: np.ndarray  # int32[N]
    stack: np.ndarray  # int32[N + 1]
    saved_lm: np.ndarray  # float64[N]
    saved_b: np.ndarray  # float64[N]
    class_counts: np.ndarray  # float64[K]


def new_scratch(n_rows: int, capacity: int, nbins: np.ndarray, n_classes: int = 1) -> Scratch:
    """Allocate the work arrays of one chain."""
    p = len(nbins)
    return Scratch(
        hist=np.zeros(max(int(np.max(nbins)) if p else 1, 1) + 1, dtype=np.int64),
        sums=np.zeros(n_rows + 1, dtype=np.float64),
        counts=np.zeros(p, dtype=np.float64),
        lows=np.zeros(p, dtype=np.int64),
        extras=np.zeros(p, dtype=np.int64),
        nodes=np.zeros(capacity, dtype=np.int32),
        stack=np.zeros(capacity + 1, dtype=np.int32),
        saved_lm=np.zeros(capacity, dtype=np.float64),
        saved_b=np.zeros(capacity, dtype=np.float64),
        class_counts=np.zeros(max(n_classes, 1), dtype=np.float64),
    )


def new_tree(n_rows: int, capacity: int, n_classes: int = 1) -> TreeArrays:
    """Allocate a stump tree over ``n_rows`` rows with room for ``capacity`` nodes."""
    var = np.full(capacity, FREE, dtype=np.int32)
    var[0] = LEAF
    free = np.arange(capacity - 1, 0, -1, dtype=np.int32)
    free = np.concatenate([free, np.zeros(1, dtype=np.int32)])
    tree = TreeArrays(
        var=var,
        cut=np.zeros(capacity, dtype=np.int64),
        left=np.full(capacity, -1, dtype=np.int32),
        right=np.full(capacity, -1, dtype=np.int32),
        parent=np.full(capacity, -1, dtype=np.int32),
        depth=np.zeros(capacity, dtype=np.int32),
        start=np.zeros(capacity, dtype=np.int64),
        end=np.zeros(capacity, dtype=np.int64),
        lm=np.zeros(capacity, dtype=np.float64),
        b=np.zeros(capacity, dtype=np.float64),
        value=np.zeros(capacity, dtype=np.float64),
        leaf_sigma=np.ones(capacity, dtype=np.float64),
        leaf_prob=np.zeros((capacity, max(n_classes, 1)), dtype=np.float64),
        perm=np.arange(n_rows, dtype=np.int64),
        free=free,
        meta=np.array([capacity - 1, 1, 0], dtype=np.int64),
    )
    tree.end[0] = n_rows
    return tree


def node_capacity(n_rows: int, min_leaf_size: int) -> int:
    """Most nodes a valid tree can have: every leaf holds at least ``min_leaf_size`` rows."""
    return 2 * max(n_rows // max(min_leaf_size, 1), 1) - 1 + 2


@njit(cache=True, nogil=True)
def p_split(alpha, beta, depth):
    """Split probability of a splittable node at ``depth`` (thesis eq. 3.1)."""
    return alpha * (1.0 + depth) ** (-beta)


@njit(cache=True, nogil=True)
def goes_left(code, cut, is_cat):
    """Whether a row with bin ``code`` goes left under rule ``cut``."""
    if is_cat:
        return (cut >> code) & 1 == 1
    return code <= cut


@njit(cache=True, nogil=True)
def partition(xt, perm, start, end, v, cut, is_cat):
    """Partition ``perm[start:end]`` in place by rule (v, cut); return the first right index."""
    i = start
    j = end - 1
    row = xt[v]
    while True:
        while i <= j and goes_left(row[perm[i]], cut, is_cat):
            i += 1
        while i <= j and not goes_left(row[perm[j]], cut, is_cat):
            j -= 1
        if i >= j:
            return i
        tmp = perm[i]
        perm[i] = perm[j]
        perm[j] = tmp
        i += 1
        j -= 1


@njit(cache=True, nogil=True)
def _histogram(xt, perm, start, end, v, nbins, hist):
    for k in range(nbins):
        hist[k] = 0
    row = xt[v]
    for i in range(start, end):
        hist[row[perm[i]]] += 1


@njit(cache=True, nogil=True)
def _count_level_subsets(hist, nbins, n, m, sums):
    """Ordered subsets S of the present levels with m <= rows(S) <= n - m (a 0/1 knapsack count).

    Returns (count, number of present levels). ``sums`` is scratch of length >= n + 1.
    """
    for s in range(n + 1):
        sums[s] = 0.0
    sums[0] = 1.0
    top = 0
    present = 0
    for k in range(nbins):
        c = hist[k]
        if c == 0:
            continue
        present += 1
        top += c
        for s in range(top, c - 1, -1):
            sums[s] += sums[s - c]
    total = 0.0
    for s in range(m, n - m + 1):
        total += sums[s]
    return total, present


@njit(cache=True, nogil=True)
def var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, hist, sums):
    """Number of available (ordered, for factors) rules on variable v at a segment.

    Returns ``(count, lo, extra)``: for a numeric variable the available cut indices are the
    contiguous range ``lo .. lo + count - 1``; for a factor ``extra`` is the number of levels
    absent from the node (their mask bits are free).
    """
    n = end - start
    if n < 2 * m:
        return 0.0, 0, 0
    _histogram(xt, perm, start, end, v, nbins[v], hist)
    if is_cat[v]:
        count, present = _count_level_subsets(hist, nbins[v], n, m, sums)
        return count, 0, nbins[v] - present
    # cumulative count c_k = rows with code <= k; rule k available iff m <= c_k <= n - m.
    ncut = nbins[v] - 1
    cum = 0
    lo = -1
    hi = -1
    for k in range(ncut):
        cum += hist[k]
        if cum >= m and lo < 0:
            lo = k
        if cum <= n - m:
            hi = k
        else:
            break
    if lo < 0 or hi < lo:
        return 0.0, 0, 0
    return float(hi - lo + 1), lo, 0


@njit(cache=True, nogil=True)
def node_rule_counts(xt, perm, start, end, is_cat, nbins, m, hist, sums, counts, lows, extras):
    """Fill per-variable available-rule counts at a segment; return the number of variables
    with at least one available rule."""
    p = xt.shape[0]
    n_vars = 0
    for v in range(p):
        c, lo, ex = var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, hist, sums)
        counts[v] = c
        lows[v] = lo
        extras[v] = ex
        if c > 0:
            n_vars += 1
    return n_vars


@njit(cache=True, nogil=True)
def has_available_rule(xt, perm, start, end, is_cat, nbins, m, hist, sums):
    """Whether any variable offers an available rule at the segment (p_SPLIT > 0)."""
    if end - start < 2 * m:
        return False
    for v in range(xt.shape[0]):
        c, lo, ex = var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, hist, sums)
        if c > 0:
            return True
    return False


@njit(cache=True, nogil=True)
def rule_log_prob(n_vars, count_v, extra_v, is_cat_v):
    """log of the prior mass of one stored rule representation given the node's rows."""
    out = -math.log(n_vars) - math.log(count_v)
    if is_cat_v:
        out -= extra_v * LOG2
    return out


@njit(cache=True, nogil=True)
def _sample_level_mask(rng, xt, perm, start, end, v, nbins, m, hist, count):
    """Uniform draw of an ordered valid level subset (present levels) plus uniform bits for the
    absent levels. ``hist`` must hold the level counts of the segment."""
    n = end - start
    nb = nbins[v]
    present = 0
    for k in range(nb):
        if hist[k] > 0:
            present += 1
    # Rejection from uniform subsets of the present levels; the acceptance rate is
    # count / 2^present, so fall back to exact enumeration when it is small.
    accept_rate = count / (2.0**present)
    mask = np.int64(0)
    if accept_rate > 1e-3:
        while True:
            mask = np.int64(0)
            s = 0
            for k in range(nb):
                if hist[k] > 0 and rng.random() < 0.5:
                    mask |= np.int64(1) << k
                    s += hist[k]
            if m <= s <= n - m:
                break
    else:
        levels = np.empty(present, dtype=np.int64)
        j = 0
        for k in range(nb):
            if hist[k] > 0:
                levels[j] = k
                j += 1
        target = int(rng.random() * count)
        seen = 0
        for sub in range(1, 2**present - 1):
            s = 0
            for j in range(present):
                if (sub >> j) & 1:
                    s += hist[levels[j]]
            if m <= s <= n - m:
                if seen == target:
                    mask = np.int64(0)
                    for j in range(present):
                        if (sub >> j) & 1:
                            mask |= np.int64(1) << levels[j]
                    break
                seen += 1
    for k in range(nb):
        if hist[k] == 0 and rng.random() < 0.5:
            mask |= np.int64(1) << k
    return mask


@njit(cache=True, nogil=True)
def sample_rule(rng, xt, perm, start, end, is_cat, nbins, m, hist, sums, counts, lows, extras):
    """Draw a rule from p_RULE at a segment.

    Returns ``(v, cut, log_q)``; ``v = -1`` when no rule is available. ``log_q`` is the log
    probability of the stored representation (equal to its prior rule term).
    """
    n_vars = node_rule_counts(xt, perm, start, end, is_cat, nbins, m, hist, sums, counts, lows, extras)
    if n_vars == 0:
        return -1, np.int64(0), 0.0
    pick = int(rng.random() * n_vars)
    v = -1
    for u in range(xt.shape[0]):
        if counts[u] > 0:
            if pick == 0:
                v = u
                break
            pick -= 1
    if is_cat[v]:
        _histogram(xt, perm, start, end, v, nbins[v], hist)
        cut = _sample_level_mask(rng, xt, perm, start, end, v, nbins, m, hist, counts[v])
    else:
        cut = np.int64(lows[v] + int(rng.random() * counts[v]))
    return v, cut, rule_log_prob(n_vars, counts[v], extras[v], is_cat[v])


@njit(cache=True, nogil=True)
def alloc_node(tree):
    """Pop a free node slot (-1 when the capacity is exhausted)."""
    nf = tree.meta[M_N_FREE]
    if nf == 0:
        return -1
    node = tree.free[nf - 1]
    tree.meta[M_N_FREE] = nf - 1
    return node


@njit(cache=True, nogil=True)
def release_node(tree, node):
    """Return a node slot to the free stack."""
    tree.var[node] = FREE
    tree.left[node] = -1
    tree.right[node] = -1
    nf = tree.meta[M_N_FREE]
    tree.free[nf] = node
    tree.meta[M_N_FREE] = nf + 1


@njit(cache=True, nogil=True)
def split_leaf(tree, xt, is_cat, node, v, cut):
    """Turn leaf ``node`` into an internal node with rule (v, cut) and two leaf children.

    Returns (left, right) or (-1, -1) if the node capacity is exhausted.
    """
    lchild = alloc_node(tree)
    if lchild < 0:
        return -1, -1
    rchild = alloc_node(tree)
    if rchild < 0:
        release_node(tree, lchild)
        return -1, -1
    s = tree.start[node]
    e = tree.end[node]
    mid = partition(xt, tree.perm, s, e, v, cut, is_cat[v])
    tree.var[node] = v
    tree.cut[node] = cut
    tree.left[node] = lchild
    tree.right[node] = rchild
    d = tree.depth[node] + 1
    for child, cs, ce in ((lchild, s, mid), (rchild, mid, e)):
        tree.var[child] = LEAF
        tree.parent[child] = node
        tree.depth[child] = d
        tree.left[child] = -1
        tree.right[child] = -1
        tree.start[child] = cs
        tree.end[child] = ce
    tree.meta[M_N_LEAVES] += 1
    tree.meta[M_N_INTERNAL] += 1
    return lchild, rchild


@njit(cache=True, nogil=True)
def collapse_node(tree, node):
    """Turn an internal node whose children are leaves back into a leaf."""
    release_node(tree, tree.left[node])
    release_node(tree, tree.right[node])
    tree.var[node] = LEAF
    tree.left[node] = -1
    tree.right[node] = -1
    tree.meta[M_N_LEAVES] -= 1
    tree.meta[M_N_INTERNAL] -= 1


@njit(cache=True, nogil=True)
def subtree_nodes(tree, root, out, stack):
    """Write the nodes of the subtree at ``root`` in preorder into ``out``; return the count."""
    stack[0] = root
    top = 1
    count = 0
    while top > 0:
        top -= 1
        node = stack[top]
        out[count] = node
        count += 1
        if tree.var[node] >= 0:
            stack[top] = tree.right[node]
            top += 1
            stack[top] = tree.left[node]
            top += 1
    return count


@njit(cache=True, nogil=True)
def repartition_subtree(tree, xt, is_cat, root, m, stack):
    """Re-split the rows of ``root``'s segment down its subtree after a rule changed.

    Returns False as soon as some child would get fewer than ``m`` rows (the tree then has
    prior probability zero); the caller restores the old rules and calls this again.
    """
    stack[0] = root
    top = 1
    valid = True
    while top > 0:
        top -= 1
        node = stack[top]
        v = tree.var[node]
        if v < 0:
            continue
        s = tree.start[node]
        e = tree.end[node]
        mid = partition(xt, tree.perm, s, e, v, tree.cut[node], is_cat[v])
        lc = tree.left[node]
        rc = tree.right[node]
        tree.start[lc] = s
        tree.end[lc] = mid
        tree.start[rc] = mid
        tree.end[rc] = e
        if mid - s < m or e - mid < m:
            valid = False
        stack[top] = rc
        top += 1
        stack[top] = lc
        top += 1
    return valid


@njit(cache=True, nogil=True)
def leaf_terms(tree, node, y, ycls, hyper, class_counts):
    """Per-leaf (lm, b) of the model selected by ``hyper[H_MODEL]`` for the rows of ``node``."""
    if hyper[H_LIKELIHOOD] == 0.0:
        return 0.0, 0.0
    s = tree.start[node]
    e = tree.end[node]
    n = e - s
    model = int(hyper[H_MODEL])
    perm = tree.perm
    if model == MODEL_CLASSIFICATION:
        k = int(hyper[H_N_CLASSES])
        for j in range(k):
            class_counts[j] = 0.0
        for i in range(s, e):
            class_counts[ycls[perm[i]]] += 1.0
        return leaf_log_marginal_dirichlet(class_counts[:k], hyper[H_CLASS_ALPHA]), 0.0
    total = 0.0
    for i in range(s, e):
        total += y[perm[i]]
    if model == MODEL_NORMAL_KNOWN_VARIANCE:
        # b carries the leaf's residual sum, which the backfitting leaf draw needs.
        return leaf_log_marginal_normal_known_variance(n, total, hyper[H_SIGMA2], hyper[H_TAU2]), total
    ybar = total / n
    ssd = 0.0
    for i in range(s, e):
        d = y[perm[i]] - ybar
        ssd += d * d
    if model == MODEL_MEAN_SHIFT:
        return mean_shift_leaf_terms(n, ybar, ssd, hyper[H_A], hyper[H_MU_BAR])
    return leaf_log_marginal_mean_variance(n, ybar, ssd, hyper[H_A], hyper[H_MU_BAR], hyper[H_NU], hyper[H_LAM]), 0.0


@njit(cache=True, nogil=True)
def global_term(b_sum, n_total, hyper):
    """The non-additive part of the tree log marginal (common-sigma model only)."""
    if hyper[H_LIKELIHOOD] == 0.0 or int(hyper[H_MODEL]) != MODEL_MEAN_SHIFT:
        return 0.0
    return mean_shift_global_term(n_total, b_sum, hyper[H_NU], hyper[H_LAM])


@njit(cache=True, nogil=True)
def refresh_leaf_terms(tree, nodes, count, y, ycls, hyper, class_counts):
    """Recompute the cached (lm, b) of every leaf among ``nodes[:count]``."""
    for i in range(count):
        node = nodes[i]
        if tree.var[node] == LEAF:
            lm, b = leaf_terms(tree, node, y, ycls, hyper, class_counts)
            tree.lm[node] = lm
            tree.b[node] = b


@njit(cache=True, nogil=True)
def sum_leaf_terms(tree, nodes, count):
    """Sum the cached (lm, b) over the leaves among ``nodes[:count]``."""
    lm = 0.0
    b = 0.0
    for i in range(count):
        node = nodes[i]
        if tree.var[node] == LEAF:
            lm += tree.lm[node]
            b += tree.b[node]
    return lm, b


@njit(cache=True, nogil=True)
def node_log_prior(tree, node, xt, is_cat, nbins, hyper, hist, sums, counts, lows, extras):
    """Prior factor of one node given its rows: ``log p_SPLIT + log p_RULE`` for an internal node
    (``-inf`` if its rule is not available), ``log(1 - p_SPLIT)`` for a leaf."""
    m = int(hyper[H_MIN_LEAF])
    s = tree.start[node]
    e = tree.end[node]
    ps = p_split(hyper[H_ALPHA], hyper[H_BETA], tree.depth[node])
    v = tree.var[node]
    if v == LEAF:
        if has_available_rule(xt, tree.perm, s, e, is_cat, nbins, m, hist, sums):
            return math.log1p(-ps)
        return 0.0
    lc = tree.left[node]
    rc = tree.right[node]
    if tree.end[lc] - tree.start[lc] < m or tree.end[rc] - tree.start[rc] < m:
        return -np.inf
    n_vars = node_rule_counts(xt, tree.perm, s, e, is_cat, nbins, m, hist, sums, counts, lows, extras)
    return math.log(ps) + rule_log_prob(n_vars, counts[v], extras[v], is_cat[v])


@njit(cache=True, nogil=True)
def subtree_log_prior(tree, nodes, count, xt, is_cat, nbins, hyper, hist, sums, counts, lows, extras):
    """Sum of node prior factors over ``nodes[:count]`` (``-inf`` if any rule is unavailable)."""
    total = 0.0
    for i in range(count):
        total += node_log_prior(tree, nodes[i], xt, is_cat, nbins, hyper, hist, sums, counts, lows, extras)
        if total == -np.inf:
            return total
    return total


@njit(cache=True, nogil=True)
def tree_depth(tree, nodes, count):
    """Largest depth among ``nodes[:count]``."""
    d = 0
    for i in range(count):
        if tree.depth[nodes[i]] > d:
            d = tree.depth[nodes[i]]
    return d
