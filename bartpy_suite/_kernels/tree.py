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

Missing predictor values (``na_action="split"``, ``Prior.na_split``; the MIA approach of
Twala et al. 2008 as used by bartMachine, Kapelner & Bleich 2015, "Prediction with missing data
via Bayesian additive regression trees", Canadian J. Statistics): a missing value of variable v
has the reserved code ``nbins[v]``, one past its last bin, and every rule says where it goes.

* Factor: "missing" is one more level (bit ``nbins[v]`` of the mask). It is present at a node
  when some row there is missing on v and then takes part in the partition like any level;
  otherwise its bit is drawn uniformly like the bit of any absent level (a factor 1/2).
* Numeric: a rule is a pair ``(k, d)``: rows with ``code <= k`` go left, other observed rows go
  right and missing rows go left iff ``d = 1``. The cut indices run over ``0 .. nbins[v] - 1``:
  ``k = nbins[v] - 1`` with ``d = 0`` splits on missingness alone. p_RULE is uniform over the
  available pairs, so at a node without missing rows each cut index offers two rules, each of
  half the mass of the rule without the bit. The pair is stored in the cut: ``k`` in the low 32
  bits and, when ``d = 1``, the missing code in the high bits (``numeric_cut``), so that
  ``goes_left`` alone decides, in the samplers and at prediction time.

Without ``Prior.na_split`` no code reaches ``nbins[v]`` and no cut has high bits: nothing changes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper, kernel
from .likelihood import (
    MODEL_BASIS_NORMAL,
    MODEL_CLASSIFICATION,
    MODEL_LOG_GAMMA,
    MODEL_LOG_VARIANCE,
    MODEL_MEAN_SHIFT,
    MODEL_NORMAL_KNOWN_VARIANCE,
    leaf_log_marginal_basis,
    leaf_log_marginal_dirichlet,
    leaf_log_marginal_log_gamma,
    leaf_log_marginal_log_variance,
    leaf_log_marginal_mean_variance,
    leaf_log_marginal_normal_known_variance,
    mean_shift_global_term,
    mean_shift_leaf_terms,
)

LEAF = -1
FREE = -2
LOG2 = math.log(2.0)

# A numeric rule stores its cut index in the low word and, when missing values go left, the
# variable's missing code in the high word (``numeric_cut``).
NA_SHIFT = 32
CUT_MASK = (1 << NA_SHIFT) - 1

# Indices into a chain's float64 ``fstate``: running sums of the cached leaf terms of its tree.
F_LM_SUM = 0
F_B_SUM = 1

# Indices into ``meta`` (int64 vector of a tree).
M_N_FREE = 0
M_N_LEAVES = 1
M_N_INTERNAL = 2
# Node span: every node in use has an index below it. ``alloc_node`` raises it and nothing lowers
# it, so it is the tree's largest size so far (free slots are reused last-freed first). Loops
# over the nodes of a tree stop there instead of at the capacity, which is 255 for a BART tree
# of 1,000 rows that rarely has more than 20 nodes.
M_SPAN = 3


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
    lp: np.ndarray  # float64[N]: cached prior factor of the node given its rows (NaN: unknown)
    value: np.ndarray  # float64[N]: leaf mean (drawn)
    leaf_sigma: np.ndarray  # float64[N]: leaf sd (mean-variance model)
    leaf_prob: np.ndarray  # float64[N, K]: leaf class probabilities
    perm: np.ndarray  # int32[n]: row indices, grouped by node (each leaf's sorted)
    free: np.ndarray  # int32[N]: stack of free node slots
    meta: np.ndarray  # int64[4]: n_free, n_leaves, n_internal, node span (M_SPAN)


#: Most split rules in a subtree whose proposals are scored from rule-outcome cells (2^k cells).
MAX_CELL_RULES = 2


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
    saved_lp: np.ndarray  # float64[N]
    saved_perm: np.ndarray  # int32[n]: a node's row segment, restored when a move is rejected
    saved_start: np.ndarray  # int64[N]
    saved_end: np.ndarray  # int64[N]
    class_counts: np.ndarray  # float64[K]
    var_order: np.ndarray  # int64[p]
    hist2d: np.ndarray  # int64[p, max bins]
    codes_by_row: np.ndarray  # int32[n, p]: row-major copy of the codes for one-pass histograms
    part_buf: np.ndarray  # int32[n]: right-hand rows of a stable partition, merge buffer
    row_flag: np.ndarray  # uint8[n]: membership flags for sorting a large segment by a scan
    rule_var: np.ndarray  # int64[MAX_CELL_RULES]: rules of a subtree scored by rule-outcome cells
    rule_cut: np.ndarray  # int64[MAX_CELL_RULES]
    node_bit: np.ndarray  # int64[N]: bit of each internal node's rule in a row's outcome code
    cell_n: np.ndarray  # int64[2^MAX_CELL_RULES]: rows per outcome code
    cell_sum: np.ndarray  # float64[2^MAX_CELL_RULES]: their response sum
    leaf_n: np.ndarray  # int64[N]: rows per leaf of the scored subtree
    leaf_sum: np.ndarray  # float64[N]
    # Each predictor's most common code and the rows that do not have it (``mode_exceptions``), so
    # that ``prior_rule_counts`` counts a node's rules in time proportional to those rows rather than
    # to rows x predictors; ``ex_ptr`` is empty when the codes are too dense for this to pay.
    ex_mode: np.ndarray  # int32[p]: most common code of each predictor (the smallest such)
    ex_ptr: np.ndarray  # int64[p + 1] or int64[0]: predictor v's rows are ex_row[ex_ptr[v]:ex_ptr[v + 1]]
    ex_row: np.ndarray  # int32[number of exceptions]: ascending within each predictor
    ex_code: np.ndarray  # int32[number of exceptions]: their codes (read in order, not from codes_by_row)
    # DART (``sparse.py``): log of the split-variable weights s, used by ``sample_rule_s`` and
    # ``node_log_prior``; empty for the uniform rule prior (every sampler's default).
    log_s: np.ndarray  # float64[p] or float64[0]
    model: tuple  # model_tag(prior.model): the chain's leaf model as a type


def model_tag(code: int) -> tuple[int, ...]:
    """The leaf model ``code`` (``likelihood.MODEL_*``) as a type that compiled code branches on.

    A tuple of ``code`` zeros. A compiled function that takes it as an argument ``model`` and
    tests ``len(model) == MODEL_...`` has the test folded to a constant before typing (numba's
    ``rewrite_semantic_constants``, then its dead-branch pruning), so the branches of the other
    models are never compiled: a chain compiles the code of its own model only (issue 11,
    section 1). The function must take the tag itself as an argument; a caller that holds a
    ``Scratch`` passes ``scratch.model``.

    Parameters
    ----------
    code : int
        One of the ``MODEL_*`` codes.

    Returns
    -------
    tuple of int
        ``code`` zeros.
    """
    return (0,) * int(code)


def new_scratch(codes: np.ndarray, capacity: int, nbins: np.ndarray, n_classes: int = 1, *, model: int,
                sparse: bool = False) -> Scratch:
    """Allocate the work arrays of one chain; ``codes`` are the (p, n) binned predictors and
    ``model`` the chain's leaf model code (``Prior.model``). ``sparse``: the chain keeps
    DART split-variable weights (``log_s``, starting uniform)."""
    p, n_rows = codes.shape
    max_bins = max(int(np.max(nbins)) if p else 1, 1) + 1
    return Scratch(
        hist=np.zeros(max_bins, dtype=np.int64),
        sums=np.zeros(n_rows + 1, dtype=np.float64),
        counts=np.zeros(p, dtype=np.float64),
        lows=np.zeros(p, dtype=np.int64),
        extras=np.zeros(p, dtype=np.int64),
        nodes=np.zeros(capacity, dtype=np.int32),
        stack=np.zeros(capacity + 1, dtype=np.int32),
        saved_lm=np.zeros(capacity, dtype=np.float64),
        saved_b=np.zeros(capacity, dtype=np.float64),
        saved_lp=np.zeros(capacity, dtype=np.float64),
        saved_perm=np.zeros(n_rows, dtype=np.int32),
        saved_start=np.zeros(capacity, dtype=np.int64),
        saved_end=np.zeros(capacity, dtype=np.int64),
        class_counts=np.zeros(max(n_classes, 1), dtype=np.float64),
        var_order=np.zeros(p, dtype=np.int64),
        hist2d=np.zeros((p, max_bins), dtype=np.int64),
        codes_by_row=np.ascontiguousarray(codes.T),
        part_buf=np.zeros(n_rows, dtype=np.int32),
        row_flag=np.zeros(n_rows, dtype=np.uint8),
        rule_var=np.zeros(MAX_CELL_RULES, dtype=np.int64),
        rule_cut=np.zeros(MAX_CELL_RULES, dtype=np.int64),
        node_bit=np.zeros(capacity, dtype=np.int64),
        cell_n=np.zeros(1 << MAX_CELL_RULES, dtype=np.int64),
        cell_sum=np.zeros(1 << MAX_CELL_RULES, dtype=np.float64),
        leaf_n=np.zeros(capacity, dtype=np.int64),
        leaf_sum=np.zeros(capacity, dtype=np.float64),
        **mode_exceptions(codes),
        log_s=np.full(p, -math.log(p)) if sparse and p else np.zeros(0),
        model=model_tag(model),
    )


#: ``mode_exceptions`` keeps the exceptions only when at most this share of all codes are exceptions:
#: each costs 8 bytes of every chain's scratch (row and code; a chain already holds the codes twice,
#: 8 bytes per (row, predictor): ``xt`` and ``codes_by_row``), for a path that pays off only at nodes
#: of more than about that share of the rows (``prior_rule_counts``).
EXCEPTION_SHARE = 0.1


def mode_exceptions(codes: np.ndarray) -> dict[str, np.ndarray]:
    """Each predictor's most common code and the rows whose code differs from it.

    Parameters
    ----------
    codes : numpy.ndarray
        The (p, n) binned predictors (non-negative codes).

    Returns
    -------
    dict
        ``ex_mode`` (int32[p], the smallest of the most common codes), ``ex_ptr`` (int64[p + 1]:
        predictor v's exception rows are ``ex_row[ex_ptr[v]:ex_ptr[v + 1]]``, ascending) and
        ``ex_row`` and ``ex_code`` (int32: the rows and their codes), the ``Scratch`` fields that
        ``prior_rule_counts`` reads. When more than ``EXCEPTION_SHARE`` of all codes are exceptions,
        ``ex_ptr``, ``ex_row`` and ``ex_code`` are empty (the fused histogram of
        ``node_rule_counts`` is then used at every node).
    """
    p, n_rows = codes.shape
    mode = np.zeros(p, dtype=np.int32)
    n_except = np.zeros(p, dtype=np.int64)
    # One predictor at a time: a single bincount over all codes would need an n x p index array.
    for v in range(p):
        if n_rows:
            tally = np.bincount(codes[v])
            mode[v] = int(np.argmax(tally))
            n_except[v] = n_rows - int(tally[mode[v]])
    if n_except.sum() > EXCEPTION_SHARE * n_rows * p:
        empty = np.zeros(0, dtype=np.int32)
        return {"ex_mode": mode, "ex_ptr": np.zeros(0, dtype=np.int64), "ex_row": empty, "ex_code": empty.copy()}
    ptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(n_except, out=ptr[1:])
    rows = np.zeros(int(ptr[p]), dtype=np.int32)
    ex_codes = np.zeros(int(ptr[p]), dtype=np.int32)
    for v in range(p):
        off = np.flatnonzero(codes[v] != mode[v])
        rows[ptr[v]:ptr[v + 1]] = off
        ex_codes[ptr[v]:ptr[v + 1]] = codes[v, off]
    return {"ex_mode": mode, "ex_ptr": ptr, "ex_row": rows, "ex_code": ex_codes}


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
        lp=np.full(capacity, np.nan),
        value=np.zeros(capacity, dtype=np.float64),
        leaf_sigma=np.ones(capacity, dtype=np.float64),
        leaf_prob=np.zeros((capacity, max(n_classes, 1)), dtype=np.float64),
        perm=np.arange(n_rows, dtype=np.int32),
        free=free,
        meta=np.array([capacity - 1, 1, 0, 1], dtype=np.int64),
    )
    tree.end[0] = n_rows
    return tree


def node_capacity(n_rows: int, min_leaf_size: int) -> int:
    """Most nodes a valid tree can have: every leaf holds at least ``min_leaf_size`` rows."""
    return 2 * max(n_rows // max(min_leaf_size, 1), 1) - 1 + 2


@helper
def p_split(alpha, beta, depth):
    """Split probability of a splittable node at ``depth`` (thesis eq. 3.1)."""
    return alpha * (1.0 + depth) ** (-beta)


@helper
def goes_left(code, cut, is_cat):
    """Whether a row with bin ``code`` goes left under rule ``cut``.

    A numeric cut's high word is the missing code when missing values go left, else 0 (and
    code 0 goes left under every cut anyway), so no flag is needed here.
    """
    if is_cat:
        return (cut >> code) & 1 == 1
    return code <= (cut & CUT_MASK) or code == (cut >> NA_SHIFT)


@helper
def numeric_cut(k, na_left, na_code):
    """Stored numeric rule: cut index ``k``; missing values (code ``na_code``) go left iff
    ``na_left``."""
    if na_left:
        return np.int64(k) | (np.int64(na_code) << NA_SHIFT)
    return np.int64(k)


@helper
def partition(xt, perm, start, end, v, cut, is_cat, buf):
    """Stable partition of ``perm[start:end]`` by rule (v, cut); return the first right index.

    Rows keep their relative order on each side, so segments that start sorted by row index
    stay sorted and every pass over a node's rows walks memory forwards. Branch-free: each row
    is written to both candidate places (left in place, right to ``buf``) and one count moves.
    """
    row = xt[v]
    n_left = start
    n_right = 0
    for i in range(start, end):
        r = perm[i]
        go = 1 if goes_left(row[r], cut, is_cat) else 0
        perm[n_left] = r
        buf[n_right] = r
        n_left += go
        n_right += 1 - go
    for k in range(n_right):
        perm[n_left + k] = buf[k]
    return n_left


@helper(fastmath={"reassoc"})
def leaf_left_count_sum(leaf_of, node, codes, cut, is_cat, y):
    """Rows i with ``leaf_of[i] == node`` whose code ``codes[i]`` rule ``cut`` sends left: their
    count and the sum of their ``y``, in one branch-free sequential pass over every row.

    The sum may be reassociated (``fastmath={"reassoc"}``) so that the pass vectorises (0.24 ns a
    row on this machine, against 1.3 summed in order); its rounding then differs from a sum in
    row order, so callers use it only where a bound with a margin is enough
    (``cart_moves.propose_grow``).
    """
    count = 0
    total = 0.0
    for i in range(y.shape[0]):
        go = (leaf_of[i] == node) & goes_left(codes[i], cut, is_cat)
        count += go
        total += y[i] if go else 0.0
    return count, total


@helper
def copy_into(dst, src):
    """``dst[:] = src`` for 1-D arrays of one length, element by element: numba's slice assignment
    compiles its formatting of shape-mismatch errors, string machinery that cost 2-3 CPU s of the
    first compile of a sampler using it (issue 11 section 1)."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError("copy_into: the arrays differ in length")
    copy_unchecked(dst, src)


@helper
def copy_unchecked(dst, src):
    """``dst[i] = src[i]`` for every i of ``src``; the caller has checked that ``dst`` is as long.
    For hot loops: without a possible exception the compiler inlines the copy into its caller as a
    plain memory copy (``pg`` ran about 10% faster than with the check in every copy)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@helper
def merge_sorted_halves(perm, start, mid, end, buf):
    """Merge the sorted runs ``perm[start:mid]`` and ``perm[mid:end]`` in place."""
    n_left = mid - start
    for k in range(n_left):
        buf[k] = perm[start + k]
    i = 0
    j = mid
    out = start
    while i < n_left and j < end:
        if buf[i] <= perm[j]:
            perm[out] = buf[i]
            i += 1
        else:
            perm[out] = perm[j]
            j += 1
        out += 1
    while i < n_left:
        perm[out] = buf[i]
        i += 1
        out += 1


@helper
def sort_segment(perm, start, end, flags, buf):
    """Sort ``perm[start:end]`` (distinct row indices) ascending: a scan over all rows when the
    segment holds at least 1/16 of them, else by merging its ascending runs (the rows of a
    subtree are a concatenation of its leaves' sorted runs). ``buf`` (int32, at least half the
    segment long) is the merge buffer. Hand-written rather than ``np.sort``: numba's quicksort
    added about 2.7 CPU s to the first compile (issue 11 section 1)."""
    n_rows = flags.shape[0]
    if (end - start) * 16 < n_rows:
        while True:
            lo = start
            merged = False
            while lo < end:
                mid = lo + 1
                while mid < end and perm[mid - 1] < perm[mid]:
                    mid += 1
                if mid == end:
                    break
                hi = mid + 1
                while hi < end and perm[hi - 1] < perm[hi]:
                    hi += 1
                merge_sorted_halves(perm, lo, mid, hi, buf)
                merged = True
                lo = hi
            if not merged:
                return
    for i in range(start, end):
        flags[perm[i]] = 1
    out = start
    for r in range(n_rows):
        if flags[r]:
            perm[out] = r
            out += 1
            flags[r] = 0


@helper
def _histogram(xt, perm, start, end, v, nbins, hist):
    for k in range(nbins):
        hist[k] = 0
    row = xt[v]
    for i in range(start, end):
        hist[row[perm[i]]] += 1


@helper
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


@helper
def _numeric_na_ranges(hist, nbins_v, n, m):
    """Available numeric rules ``(k, d)`` of a node with n rows when missing values (count
    ``hist[nbins_v]``) follow the rule's bit d: ``(lo0, count0, lo1, count1)``, the contiguous
    ranges of cut indices available with d = 0 (missing right) and d = 1 (missing left)."""
    n_na = hist[nbins_v]
    cum = 0
    lo0 = hi0 = lo1 = hi1 = -1
    for k in range(nbins_v):
        cum += hist[k]
        if m <= cum <= n - m:
            if lo0 < 0:
                lo0 = k
            hi0 = k
        if m <= cum + n_na <= n - m:
            if lo1 < 0:
                lo1 = k
            hi1 = k
    return lo0, (hi0 - lo0 + 1 if lo0 >= 0 else 0), lo1, (hi1 - lo1 + 1 if lo1 >= 0 else 0)


@helper
def _rule_count_from_hist(hist, is_cat_v, nbins_v, n, m, sums, na=False):
    """Available rules of one variable from the code histogram of a node with n rows.

    Returns ``(count, lo, extra)``: for a numeric variable the available cut indices are the
    contiguous range ``lo .. lo + count - 1`` (cumulative count c_k = rows with code <= k; rule
    k is available iff m <= c_k <= n - m); for a factor, count is the number of ordered level
    subsets and ``extra`` the number of levels absent from the node (their mask bits are free).
    With ``na`` (missing values split by the rules; the histogram then has ``nbins_v + 1``
    entries), a factor has the extra "missing" level and a numeric count is that of the
    available pairs ``(k, d)`` (``_numeric_na_ranges``; ``lo`` is then not a range's start).
    """
    if is_cat_v:
        nb = nbins_v + 1 if na else nbins_v
        count, present = _count_level_subsets(hist, nb, n, m, sums)
        return count, 0, nb - present
    if na:
        lo0, c0, lo1, c1 = _numeric_na_ranges(hist, nbins_v, n, m)
        return float(c0 + c1), lo0, 0
    cum = 0
    lo = -1
    hi = -1
    for k in range(nbins_v - 1):
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


@helper
def var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, hist, sums, na):
    """Available rules on variable v at a segment (see ``_rule_count_from_hist``); leaves the
    histogram of v in ``hist``."""
    n = end - start
    if n < 2 * m:
        return 0.0, 0, 0
    _histogram(xt, perm, start, end, v, nbins[v] + 1 if na else nbins[v], hist)
    return _rule_count_from_hist(hist, is_cat[v], nbins[v], n, m, sums, na)


@helper
def node_rule_counts(perm, start, end, is_cat, nbins, m, scratch, na):
    """Fill per-variable available-rule counts at a segment (``scratch.counts``, ``.lows``,
    ``.extras``); return the number of variables with at least one available rule.

    ``scratch.codes_by_row`` holds the codes row-major (n, p) so one pass over the rows fills the
    histograms of all variables (``scratch.hist2d``, shape (p, max bins)).
    """
    xr, hist2d, sums = scratch.codes_by_row, scratch.hist2d, scratch.sums
    counts, lows, extras = scratch.counts, scratch.lows, scratch.extras
    p = xr.shape[1]
    n = end - start
    if n < 2 * m:
        for v in range(p):
            counts[v] = 0.0
        return 0
    for v in range(p):
        for k in range(nbins[v] + 1 if na else nbins[v]):
            hist2d[v, k] = 0
    for i in range(start, end):
        row = xr[perm[i]]
        for v in range(p):
            hist2d[v, row[v]] += 1
    n_vars = 0
    for v in range(p):
        c, lo, ex = _rule_count_from_hist(hist2d[v], is_cat[v], nbins[v], n, m, sums, na)
        counts[v] = c
        lows[v] = lo
        extras[v] = ex
        if c > 0:
            n_vars += 1
    return n_vars


#: Most exceptions of a numeric predictor at a node that ``prior_rule_counts`` sorts to read its
#: rule count off order statistics; with more it builds the histogram.
FEW_EXCEPTIONS = 16


@helper
def _numeric_count_from_exceptions(codes, k, mode, n, m):
    """``_rule_count_from_hist`` of a numeric predictor (no missing-value split, m >= 1, n >= 2m)
    whose n rows sit at ``mode`` but for the ``k`` codes ``codes[:k]`` (sorted here, in place).

    Cut index j is available iff m <= c_j <= n - m, c_j the rows with code <= j: iff
    ``x_(m) <= j < x_(n-m+1)`` with ``x_(i)`` the i-th smallest code. So the available cuts are the
    range ``x_(m) .. x_(n-m+1) - 1``, which is what the histogram's scan finds (it stops below the
    last code, and ``x_(n-m+1)`` is at most that code). Returns ``(count, lo, 0)``, (0, 0, 0) when
    the range is empty.
    """
    for i in range(1, k):  # insertion sort: k is at most FEW_EXCEPTIONS
        c = codes[i]
        j = i - 1
        while j >= 0 and codes[j] > c:
            codes[j + 1] = codes[j]
            j -= 1
        codes[j + 1] = c
    below = 0
    while below < k and codes[below] < mode:
        below += 1
    lo = _kth_code(codes, k, below, mode, n, m)
    hi = _kth_code(codes, k, below, mode, n, n - m + 1) - 1
    if hi < lo:
        return 0.0, 0, 0
    return float(hi - lo + 1), lo, 0


@helper
def _kth_code(codes, k, below, mode, n, i):
    """The i-th smallest (1-based) of n codes: the sorted ``codes[:k]``, of which the first
    ``below`` lie under ``mode``, and n - k rows at ``mode``."""
    if i <= below:
        return codes[i - 1]
    if i <= below + n - k:
        return mode
    return codes[i - (n - k) - 1]


@helper
def prior_rule_counts(perm, start, end, is_cat, nbins, m, scratch, na):
    """``node_rule_counts`` without its histograms in ``scratch.hist2d``: the same per-variable
    counts (``scratch.counts``, ``.lows``, ``.extras``) and the same return value, what the tree
    prior of a node needs (``node_log_prior``).

    The fused histogram of ``node_rule_counts`` touches every (row, predictor) pair of the node.
    When the predictors' exceptions (``mode_exceptions``: rows whose code is not the predictor's
    most common one) are fewer than that, each predictor's counts are built from them instead:
    the node's rows are flagged (``scratch.row_flag``, cleared again) and one pass over the
    predictor's exceptions finds those at the node. A numeric predictor with at most
    ``FEW_EXCEPTIONS`` of them gets its count from their sorted codes
    (``_numeric_count_from_exceptions``); any other gets the histogram: all rows at its mode, each
    exception at the node moved to its own code. Every count is the same; only the work differs
    (grants, 2,000 rows x 1,497 mostly 0/1 predictors: about 1.3% of the codes are exceptions,
    ``benchmarks/results/cgm_wide_cost.md``).
    """
    ptr = scratch.ex_ptr
    p = scratch.ex_mode.shape[0]
    n = end - start
    if ptr.shape[0] != p + 1 or n < 2 * m or ptr[p] + 2 * n >= n * p:
        return node_rule_counts(perm, start, end, is_cat, nbins, m, scratch, na)
    rows, codes, mode = scratch.ex_row, scratch.ex_code, scratch.ex_mode
    flags, hist, sums = scratch.row_flag, scratch.hist, scratch.sums
    counts, lows, extras = scratch.counts, scratch.lows, scratch.extras
    for i in range(start, end):
        flags[perm[i]] = 1
    # Up to ``few`` of a predictor's exception codes at the node are kept (in ``hist``) to read a
    # numeric count off order statistics instead of a histogram of all its bins.
    few = min(FEW_EXCEPTIONS, hist.shape[0] - 1)
    n_vars = 0
    for v in range(p):
        here = 0
        for j in range(ptr[v], ptr[v + 1]):
            # Branch-free (a node's flags follow no pattern the branch predictor could learn): the
            # code is written at the next free place and kept only if its row is at the node.
            hist[min(here, few)] = codes[j]
            here += flags[rows[j]]
        if not is_cat[v] and not na and m >= 1 and here <= few:
            c, lo, ex = _numeric_count_from_exceptions(hist, here, mode[v], n, m)
        else:
            for k in range(nbins[v] + 1 if na else nbins[v]):
                hist[k] = 0
            hist[mode[v]] = n - here
            for j in range(ptr[v], ptr[v + 1]):
                if flags[rows[j]]:
                    hist[codes[j]] += 1
            c, lo, ex = _rule_count_from_hist(hist, is_cat[v], nbins[v], n, m, sums, na)
        counts[v] = c
        lows[v] = lo
        extras[v] = ex
        if c > 0:
            n_vars += 1
    for i in range(start, end):
        flags[perm[i]] = 0
    return n_vars


@helper
def _cut_available(xt, perm, start, end, v, t, m):
    """Whether numeric cut t (stored form) sends at least m rows each way; stops as soon as it does."""
    row = xt[v]
    below = 0
    above = 0
    for i in range(start, end):
        if goes_left(row[perm[i]], t, False):
            below += 1
        else:
            above += 1
        if below >= m and above >= m:
            return True
    return False


@helper
def has_available_rule(xt, perm, start, end, is_cat, nbins, m, hist, sums, na):
    """Whether any variable offers an available rule at the segment (p_SPLIT > 0)."""
    if end - start < 2 * m:
        return False
    for v in range(xt.shape[0]):
        # The cut at the first row's code settles most nodes after a few rows; a miss is
        # inconclusive and falls through to the histograms below. (A missing first row gives
        # the cut nbins[v], which sends every row left: a miss.)
        if not is_cat[v] and nbins[v] > 1 and _cut_available(xt, perm, start, end, v, xt[v, perm[start]], m):
            return True
    for v in range(xt.shape[0]):
        c, lo, ex = var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, hist, sums, na)
        if c > 0:
            return True
    return False


@helper
def rule_log_prob(n_vars, count_v, extra_v, is_cat_v):
    """log of the prior mass of one stored rule representation given the node's rows."""
    out = -math.log(n_vars) - math.log(count_v)
    if is_cat_v:
        out -= extra_v * LOG2
    return out


@helper
def rule_log_prob_s(log_s, counts, v, extra_v, is_cat_v):
    """``rule_log_prob`` under DART's rule prior (``sample_rule_s``): ``log s_v - log e - log
    count_v (- extra_v log 2)``, e the sum of s over the variables with an available rule
    (``counts[j] > 0``, as ``node_rule_counts`` leaves them), summed in log space because the
    smallest weights underflow."""
    top = -np.inf
    for j in range(counts.shape[0]):
        if counts[j] > 0 and log_s[j] > top:
            top = log_s[j]
    total = 0.0
    for j in range(counts.shape[0]):
        if counts[j] > 0:
            total += math.exp(log_s[j] - top)
    out = log_s[v] - (top + math.log(total)) - math.log(counts[v])
    if is_cat_v:
        out -= extra_v * LOG2
    return out


@helper(refcounts=True)
def _sample_level_mask(rng, n, nb, m, hist, count):
    """Uniform draw of an ordered valid level subset (present levels) plus uniform bits for the
    absent levels of a factor at a segment of n rows. ``hist`` must hold the counts of its ``nb``
    levels there (with missing values split by the rules, the "missing" level is the last)."""
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


@helper
def _rule_on_var(rng, data, perm, start, end, v, m, scratch, na):
    """Draw a rule on variable v uniformly among its available rules at the segment: returns
    ``(True, cut)``, or ``(False, 0)`` when v has none (``sample_rule``)."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    if not is_cat[v] and (nbins[v] > 1 or na):
        # Rejection from a uniform cut index (and bit), each check stopping early: exactly
        # uniform over the available cuts, and usually settled after a few rows.
        for _ in range(2):
            if na:
                k = int(rng.random() * nbins[v])
                cut = numeric_cut(k, rng.random() < 0.5, nbins[v])
            else:
                cut = np.int64(int(rng.random() * (nbins[v] - 1)))
            if _cut_available(xt, perm, start, end, v, cut, m):
                return True, cut
    count, lo, _ = var_rule_count(xt, perm, start, end, v, is_cat, nbins, m, scratch.hist, scratch.sums, na)
    if count > 0:
        # var_rule_count left the code counts of v in ``scratch.hist``.
        if is_cat[v]:
            return True, _sample_level_mask(rng, end - start, nbins[v] + 1 if na else nbins[v], m, scratch.hist,
                                            count)
        j = int(rng.random() * count)
        if na:
            lo0, c0, lo1, c1 = _numeric_na_ranges(scratch.hist, nbins[v], end - start, m)
            if j < c0:
                return True, np.int64(lo0 + j)
            return True, numeric_cut(lo1 + j - c0, True, nbins[v])
        return True, np.int64(lo + j)
    return False, np.int64(0)


@helper
def sample_rule(rng, data, perm, start, end, m, scratch, na):
    """Draw a rule from p_RULE at a segment: returns ``(v, cut)``, or ``v = -1`` if none.

    Variables are drawn uniformly without replacement until one has an available rule, which
    makes the chosen variable uniform over the variables with available rules while usually
    histogramming a single variable. Callers never need p_RULE itself: it cancels against the
    prior in every move ratio that draws from it. With ``na`` the rule carries its missing-value
    direction (module docstring), drawn with it. Works in ``scratch.hist``, ``.sums`` and
    ``.var_order``.
    """
    var_order = scratch.var_order
    p = data.xt.shape[0]
    for k in range(p):
        var_order[k] = k
    remaining = p
    if end - start < 2 * m:
        return -1, np.int64(0)
    while remaining > 0:
        idx = int(rng.random() * remaining)
        v = var_order[idx]
        ok, cut = _rule_on_var(rng, data, perm, start, end, v, m, scratch, na)
        if ok:
            return v, cut
        var_order[idx] = var_order[remaining - 1]
        remaining -= 1
    return -1, np.int64(0)


@helper
def _weighted_index(rng, log_s, var_order, remaining):
    """Index i < ``remaining`` drawn with probability proportional to ``s[var_order[i]]``
    (weights given as logs, scaled by their largest so that none overflows)."""
    top = -np.inf
    for i in range(remaining):
        w = log_s[var_order[i]]
        if w > top:
            top = w
    total = 0.0
    for i in range(remaining):
        total += math.exp(log_s[var_order[i]] - top)
    u = rng.random() * total
    # rounding left u at the total: the last variable of positive weight
    return scan_draw(log_s, var_order, remaining, top, u, 0.0, remaining - 1)


@helper
def scan_draw(log_w, order, count, top, u, acc, last):
    """The draw of a weighted index by one scan: the first i < ``count`` at which ``acc`` plus the
    running sum of ``exp(log_w[j] - top)`` (``j = order[i]``, or i itself when ``order`` is None)
    passes the uniform ``u`` on the total; when rounding carries ``u`` past the end, the last i
    of positive weight (``last`` if none has). ``tree._weighted_index`` (DART) and
    ``gfr.draw_option`` draw with it."""
    for i in range(count):
        if order is None:
            w = math.exp(log_w[i] - top)
        else:
            w = math.exp(log_w[order[i]] - top)
        if w > 0.0:
            last = i
            acc += w
            if u < acc:
                return i
    return last


@helper
def sample_rule_s(rng, data, perm, start, end, m, scratch, na):
    """``sample_rule`` under DART's rule prior: the variable drawn with probability
    ``s_v / sum of s over the variables with an available rule`` (Linero 2018; ``log_s`` the
    log weights, ``scratch.log_s``), then a rule uniformly among its available ones.

    Weighted draws without replacement until one variable has an available rule: the first
    available variable drawn has exactly that probability. With an empty ``log_s`` (the uniform
    prior) this is ``sample_rule`` itself, random numbers and all.
    """
    log_s = scratch.log_s
    if log_s.shape[0] == 0:
        return sample_rule(rng, data, perm, start, end, m, scratch, na)
    var_order = scratch.var_order
    p = data.xt.shape[0]
    for k in range(p):
        var_order[k] = k
    remaining = p
    if end - start < 2 * m:
        return -1, np.int64(0)
    while remaining > 0:
        idx = _weighted_index(rng, log_s, var_order, remaining)
        v = var_order[idx]
        ok, cut = _rule_on_var(rng, data, perm, start, end, v, m, scratch, na)
        if ok:
            return v, cut
        var_order[idx] = var_order[remaining - 1]
        remaining -= 1
    return -1, np.int64(0)


@helper
def reset_to_root(tree, n, used):
    """Make ``tree`` a single root leaf over rows 0..n-1 in ascending order, freeing the node
    slots below ``used`` (every slot in use). The free-slot stack is left as it is; the leaf
    terms of the root are the caller's (``gfr.grow_from_root``, ``particle.reset_root``)."""
    for node in range(used):
        tree.var[node] = FREE
        tree.left[node] = -1
        tree.right[node] = -1
    for r in range(n):
        tree.perm[r] = r
    tree.var[0] = LEAF
    tree.parent[0] = -1
    tree.depth[0] = 0
    tree.start[0] = 0
    tree.end[0] = n
    tree.lp[0] = np.nan
    tree.meta[M_N_FREE] = tree.var.shape[0] - 1
    tree.meta[M_N_LEAVES] = 1
    tree.meta[M_N_INTERNAL] = 0
    tree.meta[M_SPAN] = 1


@helper
def alloc_node(tree):
    """Pop a free node slot (-1 when the capacity is exhausted)."""
    nf = tree.meta[M_N_FREE]
    if nf == 0:
        return -1
    node = tree.free[nf - 1]
    tree.meta[M_N_FREE] = nf - 1
    if node >= tree.meta[M_SPAN]:
        tree.meta[M_SPAN] = node + 1
    return node


@helper
def release_node(tree, node):
    """Return a node slot to the free stack."""
    tree.var[node] = FREE
    tree.left[node] = -1
    tree.right[node] = -1
    nf = tree.meta[M_N_FREE]
    tree.free[nf] = node
    tree.meta[M_N_FREE] = nf + 1


@helper
def split_leaf(tree, xt, is_cat, node, v, cut, buf):
    """Turn leaf ``node`` into an internal node with rule (v, cut) and two leaf children
    (``buf``: work array of perm's dtype, at least the node's row count).

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
    mid = partition(xt, tree.perm, s, e, v, cut, is_cat[v], buf)
    tree.var[node] = v
    tree.cut[node] = cut
    tree.left[node] = lchild
    tree.right[node] = rchild
    tree.lp[node] = np.nan
    d = tree.depth[node] + 1
    for child, cs, ce in ((lchild, s, mid), (rchild, mid, e)):
        tree.var[child] = LEAF
        tree.parent[child] = node
        tree.depth[child] = d
        tree.left[child] = -1
        tree.right[child] = -1
        tree.start[child] = cs
        tree.end[child] = ce
        tree.lp[child] = np.nan
    tree.meta[M_N_LEAVES] += 1
    tree.meta[M_N_INTERNAL] += 1
    return lchild, rchild


@helper
def collapse_node(tree, node):
    """Turn an internal node whose children are leaves back into a leaf."""
    release_node(tree, tree.left[node])
    release_node(tree, tree.right[node])
    tree.var[node] = LEAF
    tree.left[node] = -1
    tree.right[node] = -1
    tree.lp[node] = np.nan
    tree.meta[M_N_LEAVES] -= 1
    tree.meta[M_N_INTERNAL] -= 1


@helper
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


@helper
def repartition_subtree(tree, xt, is_cat, root, m, stack, buf):
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
        mid = partition(xt, tree.perm, s, e, v, tree.cut[node], is_cat[v], buf)
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


@helper
def leaf_terms(tree, node, y, ycls, target, class_counts, model):
    """Per-leaf (lm, b) of the leaf model ``model`` (``model_tag``) for the rows of ``node``."""
    if not target.prior.likelihood:
        return 0.0, 0.0
    s = tree.start[node]
    e = tree.end[node]
    n = e - s
    perm = tree.perm
    if len(model) == MODEL_CLASSIFICATION:
        k = target.prior.n_classes
        for j in range(k):
            class_counts[j] = 0.0
        for i in range(s, e):
            class_counts[ycls[perm[i]]] += 1.0
        return leaf_log_marginal_dirichlet(class_counts[:k], target.prior.class_alpha), 0.0
    if len(model) == MODEL_BASIS_NORMAL:
        # Basis leaves (``records.BasisTarget``): y is the residual R, basis[1] = w b, basis[2] = w b^2; b
        # carries c = sum w b R, which the leaf draw needs (``basis.draw_basis_leaves``).
        basis = target.basis
        c = 0.0
        a = 0.0
        for i in range(s, e):
            r = perm[i]
            c += basis[1, r] * y[r]
            a += basis[2, r]
        return leaf_log_marginal_basis(a, c, target.sigma2[0], target.tau2[0]), c
    total = 0.0
    for i in range(s, e):
        total += y[perm[i]]
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE:
        # b carries the leaf's residual sum, which the backfitting leaf draw needs.
        return leaf_log_marginal_normal_known_variance(n, total, target.sigma2[0], target.prior.tau2), total
    if len(model) == MODEL_LOG_VARIANCE:
        # variance leaves (``variance_forest.py``): y holds u_i = w_i r_i^2 / V_{-j,i}, ycls 1 for rows with w_i > 0
        n_pos = 0
        for i in range(s, e):
            n_pos += ycls[perm[i]]
        return leaf_log_marginal_log_variance(n_pos, total, target.prior.lg_shape, target.prior.lg_rate), 0.0
    if len(model) == MODEL_LOG_GAMMA:
        # y holds the rows' rate weights, ycls 1 for the rows of the tree's class
        count = 0
        for i in range(s, e):
            count += ycls[perm[i]]
        return leaf_log_marginal_log_gamma(count, total, target.prior.lg_shape, target.prior.lg_rate), 0.0
    ybar = total / n
    ssd = 0.0
    for i in range(s, e):
        d = y[perm[i]] - ybar
        ssd += d * d
    if len(model) == MODEL_MEAN_SHIFT:
        return mean_shift_leaf_terms(n, ybar, ssd, target.prior.a, target.prior.mu_bar)
    prior = target.prior
    return leaf_log_marginal_mean_variance(n, ybar, ssd, prior.a, prior.mu_bar, prior.nu, prior.lam), 0.0


@helper
def global_term(b_sum, n_total, target, model):
    """The non-additive part of the tree log marginal (common-sigma model only; ``model`` a
    ``model_tag``)."""
    if len(model) != MODEL_MEAN_SHIFT or not target.prior.likelihood:
        return 0.0
    return mean_shift_global_term(n_total, b_sum, target.prior.nu, target.prior.lam)


@kernel
def refresh_all_leaf_terms(tree, y, ycls, target, class_counts, model):
    """Recompute the cached (lm, b) of every leaf of the tree: a CART chain's start, from Python.
    ``leaf_terms`` itself is a helper, so that a BART chain, which never calls it from Python,
    compiles no wrapper and no machine code of its own for it."""
    for node in range(tree.var.shape[0]):
        if tree.var[node] == LEAF:
            lm, b = leaf_terms(tree, node, y, ycls, target, class_counts, model)
            tree.lm[node] = lm
            tree.b[node] = b


@helper
def refresh_leaf_terms(tree, nodes, count, y, ycls, target, class_counts, model):
    """Recompute the cached (lm, b) of every leaf among ``nodes[:count]``."""
    for i in range(count):
        node = nodes[i]
        if tree.var[node] == LEAF:
            lm, b = leaf_terms(tree, node, y, ycls, target, class_counts, model)
            tree.lm[node] = lm
            tree.b[node] = b


@helper
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


@helper
def node_log_prior(tree, node, data, target, scratch):
    """Prior factor of one node given its rows: ``log p_SPLIT + log p_RULE`` for an internal node
    (``-inf`` if its rule is not available), ``log(1 - p_SPLIT)`` for a leaf."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    m = target.prior.min_leaf
    s = tree.start[node]
    e = tree.end[node]
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    v = tree.var[node]
    na = target.prior.na_split
    if v == LEAF:
        if has_available_rule(xt, tree.perm, s, e, is_cat, nbins, m, scratch.hist, scratch.sums, na):
            return math.log1p(-ps)
        return 0.0
    lc = tree.left[node]
    rc = tree.right[node]
    if tree.end[lc] - tree.start[lc] < m or tree.end[rc] - tree.start[rc] < m:
        return -np.inf
    n_vars = prior_rule_counts(tree.perm, s, e, is_cat, nbins, m, scratch, na)
    if scratch.log_s.shape[0] > 0:
        return math.log(ps) + rule_log_prob_s(scratch.log_s, scratch.counts, v, scratch.extras[v], is_cat[v])
    return math.log(ps) + rule_log_prob(n_vars, scratch.counts[v], scratch.extras[v], is_cat[v])


@helper
def subtree_log_prior(tree, nodes, count, data, target, scratch):
    """Sum of node prior factors over ``nodes[:count]`` (``-inf`` if any rule is unavailable).

    Factors are recomputed from the rows and stored in the ``lp`` cache of each node.
    """
    total = 0.0
    for i in range(count):
        node = nodes[i]
        factor = node_log_prior(tree, node, data, target, scratch)
        tree.lp[node] = factor
        total += factor
        if total == -np.inf:
            return total
    return total


@helper
def cached_subtree_log_prior(tree, nodes, count, data, target, scratch):
    """As ``subtree_log_prior`` but reusing cached factors of nodes whose rows and rule have not
    changed since they were computed (moves reset the cache of every node they alter)."""
    total = 0.0
    for i in range(count):
        node = nodes[i]
        if np.isnan(tree.lp[node]):
            tree.lp[node] = node_log_prior(tree, node, data, target, scratch)
        total += tree.lp[node]
    return total


@helper
def tree_depth(tree, nodes, count):
    """Largest depth among ``nodes[:count]``."""
    d = 0
    for i in range(count):
        if tree.depth[nodes[i]] > d:
            d = tree.depth[nodes[i]]
    return d
