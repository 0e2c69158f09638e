"""Continuous-time birth-death MCMC on one tree (Mohammadi, Pratola & Kaptein, JMLR 2020).

The process jumps between trees. In tree T every *event* has a rate (CT-MCMC eq. 9, 10, with
the leaf parameters integrated out):

* a birth at every leaf, for every predictor and every available rule of it (numeric cuts;
  for a factor every unordered partition of the levels present at the leaf, at most
  ``MAX_FACTOR_LEVELS`` levels), with rate
  ``min(1, pi(T+) / pi(T))``;
* a death at every internal node whose two children are leaves, with rate
  ``min(1, pi(T-) / pi(T))``;

where pi is the marginal posterior of the *canonical* tree under exactly the prior of
``tree.py`` (p_SPLIT, p_RULE; a factor rule is an unordered partition, whose prior is p_RULE
summed over its stored representations). Then ``pi(T) rate(T -> T') = min(pi(T), pi(T'))`` on
both sides: detailed balance (the paper's Theorem 1), so pi is the stationary law of the
process. A jump picks an event with probability ``rate / Lambda(T)`` (eq. 5, 6), Lambda the
total rate; the holding time in T is Exp(Lambda(T)) with mean ``W(T) = 1 / Lambda(T)`` (eq. 4).

The embedded jump chain alone is stationary for ``pi * Lambda``, not pi. A single-tree fit
records every visited tree with weight ``1 / Lambda`` (the Rao-Blackwellized estimator of
eq. 12); inside BART each tree visit runs the process for a fixed time (``run_for_time``).

A birth's stored representation of a factor rule gets a uniform orientation and uniform bits
for the absent levels, as every other sampler's, so representations stay uniformly spread.

Cost: rates are cached per leaf and predictor (``rate_var``) and per nog node (``rate_death``).
A leaf's rates over one predictor's cuts come from one counting sort of its rows by that
predictor: binned counts and response sums give both children's leaf terms in O(1) per cut,
and whether a child can split again is monotone in a numeric cut, so it is found by bisection.
Cuts falling in bins empty at the leaf split its rows alike and share one computation. A
factor's partitions are walked in Gray-code order over per-level statistics (``_factor_walk``):
one level changes side per step, so both children's counts, sums and availability tallies are
updated in O(1); only a side whose availability the tallies leave undecided is checked on its
rows. Drawing a factor's partition re-walks the code to the drawn cumulative rate, so no table
of 2^(L-1) rates is stored; ``MAX_FACTOR_LEVELS`` bounds L. After a
jump only the nodes it touched are recomputed from their rows. In the common-sigma model the
log marginal has a term in the total scatter B, which every jump changes, so every rate
changes: each leaf keeps, per distinct partition of each predictor, the B-free part of its log
ratio and its change of B (at most rows - 1 entries, stored in the leaf's own row slots), and a
jump refreshes all rates from these with one log1p and one exp each. When the node capacity is
nearly used up (births need two free slots) every rate is recomputed.

Sparse data (most codes of most predictors at one value, e.g. 0/1 indicators; the predictors'
exceptions kept, ``tree.mode_exceptions``) takes two faster paths to the same numbers. A sparse
predictor's bins at a leaf come from its exceptions (``_bin_rows_exceptions``: the leaf's response
terms gathered once per leaf, ``_prepare_leaf``; one contiguous pass per predictor, every bin still
summed in row order, the mode's in registers; ``_bin_rows_sparse`` when the leaf is not prepared),
and whether a small row set offers a rule (the small side of a rare code's cut, in the bisection
above) is decided by comparing its rows' code vectors (``_rows_available``) rather than by
``has_available_rule``'s column scans and per-predictor histograms. On grants (D = 1,497, 2,000
rows) BART's sweep went from 4.9 to 1.6 CPU s (``benchmarks/results/ctmc_wide_cost.md``); what is
left is mostly the binning, one pass over the leaf's rows per (leaf, predictor with a rule): the
sums must keep their order to give the same rates.

Rotate and perturb (CT-B, CT-C) are events too, each an MH step of ``rotate.py`` fired at a
constant rate: ``mh_rates[0]`` while the tree has a rotatable node (two or more splits),
``mh_rates[1]`` while it has a split (``mh_rates`` is None when both rates are 0: numba then compiles
the chain without these events); ``mh_rates[2:]`` is perturb's CHANGE-OF-VARIABLE table
(``rotate.change_of_variable_table``: its probability, the sweep flag, then the predictors' correlations).
The process then has the extra generator ``lambda K``
with K the pi-reversible MH kernel, so it stays pi-reversible, and Lambda(T) includes these
rates. A rejected step is a jump to the same tree: the holding time in T is still split into
Exp(Lambda) pieces, so ``1 / Lambda`` stays the right weight of each recorded state. The rate
must not depend on the tree (beyond the move being possible, which rotate and perturb never
change): a rate proportional to, say, the number of rotatable nodes would make the process
target pi times that number. This is why the paper's mixture weight of Appendix B, a share of
Lambda(T), is not offered: a state-dependent share breaks the balance. (A per-outcome rate
``min(1, pi(T')/pi(T))`` as in App. B would need every merge outcome enumerated and, for
rotations reachable two ways or with merge multiplicities, the proposal counts in the rate.)

Event selection: a sum tree (``sum_tree``, a binary tree over the node slots whose leaves hold
each slot's total event rate, births summed over predictors and rules at a leaf, the death
rate at a nog node, and whose inner entries are the sums of their two children) picks the node
in O(log nodes) by descending from the root; a jump updates the slots it touched in O(log nodes)
each, every parent sum recomputed from its children (no drift from adding differences). The
chosen leaf's predictor is then picked over its p totals and the rule among that predictor's
recomputed rates, as before. Lambda is the root of the sum tree.

Imports numpy, numba and the kernels of this package only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper
from .likelihood import (
    MODEL_BASIS_NORMAL,
    MODEL_CLASSIFICATION,
    MODEL_MEAN_SHIFT,
    MODEL_NORMAL_KNOWN_VARIANCE,
    leaf_log_marginal_basis,
    leaf_log_marginal_dirichlet,
    leaf_log_marginal_mean_variance,
    leaf_log_marginal_normal_known_variance,
    mean_shift_leaf_terms,
)
from .rotate import perturb_step, rotate_step
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    LEAF,
    M_N_FREE,
    M_N_INTERNAL,
    _cut_available,
    collapse_node,
    has_available_rule,
    leaf_terms,
    merge_sorted_halves,
    p_split,
    prior_rule_counts,
    split_leaf,
    var_rule_count,
)

EVENT_BIRTH = 0
EVENT_DEATH = 1
EVENT_ROTATE = 2
EVENT_PERTURB = 3
EVENT_NAMES = ("birth", "death", "rotate", "perturb")

#: Most levels a factor may have under ``ctmc``: the birth rates of a leaf holding all L levels
#: walk its 2^(L-1) - 1 partitions. Measured (``benchmarks/results/ctmc_factor_levels.md``, 1,000
#: rows, CPU time): at L = 20 the rates of a stump take 54 ms (about 100 ns per partition) and a
#: single-tree chain 0.55 ms per jump (its leaves soon hold few levels); L = 22 takes 214 ms and
#: 6-8 ms. Inside BART every tree visit recomputes the tree's rates, so with many small trees a
#: 20-level factor costs about the stump's 54 ms per tree visit (``cgm`` is far cheaper there).
MAX_FACTOR_LEVELS = 20


class CtmcState(NamedTuple):
    """Cached rates and work arrays of one continuous-time chain (nothing grows per jump)."""

    rate_var: np.ndarray  # float64[N, p]: total birth rate of a leaf over the rules of one predictor
    rate_death: np.ndarray  # float64[N]: death rate of a nog node (0 elsewhere)
    rates: np.ndarray  # float64[bins + 1]: rates of one (leaf, numeric predictor)'s cuts
    sorted_rows: np.ndarray  # int32[n]: a leaf's rows sorted by one predictor's code
    sub_rows: np.ndarray  # int32[n]: the rows of one side of a factor rule
    bin_n: np.ndarray  # int64[bins + 1]: rows per bin, then cumulative
    bin_s1: np.ndarray  # float64[bins]: response sum per bin
    bin_s2: np.ndarray  # float64[bins]: response square sum per bin
    bin_cls: np.ndarray  # float64[bins, K]: class counts per bin
    cls_left: np.ndarray  # float64[K]
    cls_right: np.ndarray  # float64[K]
    levels: np.ndarray  # int64[L]: present levels of a factor at a leaf (L: most levels of a factor)
    lev_self: np.ndarray  # bool[L]: whether a present level's rows alone offer an available rule
    # int64[7], diagnostics: Gray-code steps walked, sides checked on their rows; leaves whose birth
    # rates were computed, their rows, their (leaf, predictor) pairs with a rule; availability checks
    # (``_rows_available``), those decided by comparing rows (``benchmarks/ctmc_wide_cost.py``)
    walk_stats: np.ndarray
    no_sub: np.ndarray  # int64[0] and
    no_rate: np.ndarray  # float64[0]: "record nothing" for ``_factor_walk``
    cut_a: np.ndarray  # float64[p, n]: per birth candidate, log pi(T+)/pi(T) without the global term
    cut_db: np.ndarray  # float64[p, n]: and its change of the leaf scatter sum (common-sigma model)
    cut_m: np.ndarray  # float64[p, n]: number of rules (cuts) giving that candidate's partition
    cut_count: np.ndarray  # int64[N, p]: candidates cached for (leaf, predictor); -1: not cached
    death_a: np.ndarray  # float64[N]: the same for the death of a nog node
    death_db: np.ndarray  # float64[N]
    sum_tree: np.ndarray  # float64[2 S], S the power of two >= N: event rate of each node slot, sums
    bin_mode: np.ndarray  # int64[p]: a sparse predictor's most common code (``_bin_rows``), else -1
    var_diff: np.ndarray  # uint8[p]: predictors whose code varies over a small row set (``_rows_available``)
    leaf_x1: np.ndarray  # float64[n]: per row of the prepared leaf, in its row order, its response sum term
    leaf_x2: np.ndarray  # float64[n]: and square sum term (``_prepare_leaf``)
    pos_of: np.ndarray  # int32[n]: a row's position in the prepared leaf (stale for rows elsewhere)
    off_code: np.ndarray  # int32[n]: per position of the prepared leaf, 1 + the code if off the mode, else 0
    prepared: np.ndarray  # int64[1]: the leaf ``_prepare_leaf`` prepared, -1: none


def new_ctmc_state(n_rows: int, capacity: int, nbins: np.ndarray, is_cat: np.ndarray, n_classes: int) -> CtmcState:
    """Allocate the rate caches and work arrays of one chain."""
    p = nbins.shape[0]
    max_bins = max(int(np.max(nbins)) if p else 1, 1)
    max_levels = max([int(nbins[v]) for v in range(p) if is_cat[v]] + [1])
    for v in range(p):
        if is_cat[v] and int(nbins[v]) > MAX_FACTOR_LEVELS:
            raise FactorLevelsError(v, int(nbins[v]))
    k = max(n_classes, 1)
    return CtmcState(
        rate_var=np.zeros((capacity, p)),
        rate_death=np.zeros(capacity),
        rates=np.zeros(max_bins + 1),
        sorted_rows=np.zeros(n_rows, dtype=np.int32),
        sub_rows=np.zeros(n_rows, dtype=np.int32),
        bin_n=np.zeros(max_bins + 1, dtype=np.int64),
        bin_s1=np.zeros(max_bins),
        bin_s2=np.zeros(max_bins),
        bin_cls=np.zeros((max_bins, k)),
        cls_left=np.zeros(k),
        cls_right=np.zeros(k),
        levels=np.zeros(max_levels, dtype=np.int64),
        lev_self=np.zeros(max_levels, dtype=np.bool_),
        walk_stats=np.zeros(7, dtype=np.int64),
        no_sub=np.zeros(0, dtype=np.int64),
        no_rate=np.zeros(0),
        cut_a=np.zeros((p, n_rows)),
        cut_db=np.zeros((p, n_rows)),
        cut_m=np.zeros((p, n_rows)),
        cut_count=np.zeros((capacity, p), dtype=np.int64),
        death_a=np.zeros(capacity),
        death_db=np.zeros(capacity),
        sum_tree=np.zeros(2 * _pow2(capacity)),
        bin_mode=np.full(p, -1, dtype=np.int64),
        var_diff=np.zeros(p, dtype=np.uint8),
        leaf_x1=np.zeros(n_rows),
        leaf_x2=np.zeros(n_rows),
        pos_of=np.zeros(n_rows, dtype=np.int32),
        off_code=np.zeros(n_rows, dtype=np.int32),
        prepared=np.full(1, -1, dtype=np.int64),
    )


class FactorWalk(NamedTuple):
    """What one walk of a factor's partitions at a leaf is over and for (``_factor_walk``)."""

    v: int  # the factor
    n_present: int  # its levels present at the leaf (``_factor_setup``)
    log_base: float  # the partition-independent part of the log ratio
    goal: float  # < 0: sum every rate; >= 0: stop where the cumulative rate passes it
    out_sub: np.ndarray  # int64: every step's code (tests; ``CtmcState.no_sub``: none)
    out_rate: np.ndarray  # float64: every step's rate (``CtmcState.no_rate``: none)


class FactorLevelsError(ValueError):
    """A factor has more levels than ``ctmc`` enumerates (``MAX_FACTOR_LEVELS``); ``predictor``
    is its column index, ``levels`` its level count."""

    def __init__(self, predictor: int, levels: int):
        super().__init__(f"predictor {predictor} is a factor with {levels} levels")
        self.predictor = predictor
        self.levels = levels


def _pow2(n: int) -> int:
    size = 1
    while size < n:
        size *= 2
    return size


# -- leaf terms from sufficient statistics ---------------------------------------------------------

@helper
def stats_leaf_terms(n, s1, s2, cls, target, model):
    """The (lm, b) of ``tree.leaf_terms`` from a leaf's row count, response sum and square sum
    (or class counts ``cls``; for basis leaves c and A in place of the sums, ``_bin_rows``);
    ``model`` is the chain's ``tree.model_tag``."""
    if not target.prior.likelihood:
        return 0.0, 0.0
    if len(model) == MODEL_CLASSIFICATION:
        return leaf_log_marginal_dirichlet(cls[:target.prior.n_classes], target.prior.class_alpha), 0.0
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE:
        return leaf_log_marginal_normal_known_variance(n, s1, target.sigma2[0], target.prior.tau2), s1
    if len(model) == MODEL_BASIS_NORMAL:
        # basis leaves (``records.BasisTarget``): ``_bin_rows`` sums s1 = c = sum w b R and s2 = A = sum w b^2
        return leaf_log_marginal_basis(s2, s1, target.sigma2[0], target.tau2[0]), s1
    ybar = s1 / n
    ssd = max(s2 - s1 * ybar, 0.0)
    if len(model) == MODEL_MEAN_SHIFT:
        return mean_shift_leaf_terms(n, ybar, ssd, target.prior.a, target.prior.mu_bar)
    prior = target.prior
    return leaf_log_marginal_mean_variance(n, ybar, ssd, prior.a, prior.mu_bar, prior.nu, prior.lam), 0.0


@helper
def _global_delta(fstate, db, n_total, target, model):
    """Change of the non-additive part of the log marginal (common-sigma model) when the leaf
    scatter sum B changes by ``db``: the constant of ``mean_shift_global_term`` cancels,
    leaving -(n + nu)/2 log((B + db + nu lam) / (B + nu lam))."""
    if len(model) != MODEL_MEAN_SHIFT or not target.prior.likelihood:
        return 0.0
    base = fstate[F_B_SUM] + target.prior.nu * target.prior.lam
    return -0.5 * (n_total + target.prior.nu) * math.log1p(db / base)


#: Largest row set whose availability ``_rows_available`` decides from the row-major codes
#: (``Scratch.codes_by_row``) rather than with ``tree.has_available_rule``.
SMALL_SET = 64
#: Predictors whose first-row cut ``_rows_available`` tries before comparing the rows' code vectors.
FIRST_ROW_CUTS = 128
#: A predictor takes ``_bin_rows_sparse`` when at most this share of all rows are off its most common code.
SPARSE_BIN_SHARE = 0.25


@helper(inline=True)
def _rows_available(data, rows, start, end, m, scratch, cs):
    """``tree.has_available_rule`` on ``rows[start:end]`` (no missing-value split), the same answer.

    With the predictors' exceptions kept (``Scratch.ex_ptr``: sparse data, ``tree.mode_exceptions``)
    and at most ``SMALL_SET`` rows, the rows' code vectors (``scratch.codes_by_row``, one contiguous
    row each) are compared with the first row's: only a predictor whose code varies over the rows
    can offer a rule (one code sends every row one way), and those few are counted exactly with
    ``tree.var_rule_count``. ``has_available_rule`` reads the codes column by column, one cache line
    per (row, predictor) and, on a set where no first-row cut works, a histogram per predictor: the
    small sets that a sparse predictor's rare codes split off a leaf (grants: over 90% of the
    ``has_available_rule`` work of CT-MCMC's birth rates).

    Inlined into its callers: a call that passes the chain's records (``Scratch``, ``CtmcState``:
    dozens of arrays) costs as much as a dense data set's typical answer, so every other set goes to
    ``has_available_rule`` (arrays only) as it did."""
    n = end - start
    cs.walk_stats[5] += 1
    if n < 2 * m:
        return False
    if n > SMALL_SET or m < 1 or scratch.ex_ptr.shape[0] != data.xt.shape[0] + 1:
        return has_available_rule(data.xt, rows, start, end, data.is_cat, data.nbins, m, scratch.hist, scratch.sums,
                                  False)
    return _small_rows_available(data, rows, start, end, m, scratch, cs)


@helper
def _small_rows_available(data, rows, start, end, m, scratch, cs):
    """``_rows_available`` on at most ``SMALL_SET`` rows with the exceptions kept and m >= 1."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    p = xt.shape[0]
    # The first-row cuts of ``has_available_rule`` settle most sets within its first predictors;
    # a set they leave undecided (one where most predictors are constant) is compared row-wise.
    for u in range(min(p, FIRST_ROW_CUTS)):
        if not is_cat[u] and nbins[u] > 1 and _cut_available(xt, rows, start, end, u, xt[u, rows[start]], m):
            return True
    cs.walk_stats[6] += 1
    xr = scratch.codes_by_row
    diff = cs.var_diff
    first = xr[rows[start]]
    for u in range(p):
        diff[u] = 0
    for i in range(start + 1, end):
        other = xr[rows[i]]
        for u in range(p):
            diff[u] |= other[u] != first[u]
    for u in range(p):
        if diff[u]:
            c, lo, ex = var_rule_count(xt, rows, start, end, u, is_cat, nbins, m, scratch.hist, scratch.sums, False)
            if c > 0:
                return True
    return False


@helper
def _set_bin_modes(data, scratch, cs):
    """``cs.bin_mode``: each predictor's most common code if at most ``SPARSE_BIN_SHARE`` of the rows
    are off it (exceptions kept: ``tree.mode_exceptions``), else -1 (``_bin_rows``)."""
    ptr = scratch.ex_ptr
    p = cs.bin_mode.shape[0]
    n_rows = data.xt.shape[1]
    kept = ptr.shape[0] == p + 1
    for v in range(p):
        sparse = kept and ptr[v + 1] - ptr[v] <= SPARSE_BIN_SHARE * n_rows
        cs.bin_mode[v] = scratch.ex_mode[v] if sparse else -1


@helper
def _log_one_minus(perm, start, end, data, depth, target, scratch, cs):
    """log(1 - p_SPLIT) of a leaf over ``perm[start:end]``; 0 if it has no available rule."""
    if _rows_available(data, perm, start, end, target.prior.min_leaf, scratch, cs):
        return math.log1p(-p_split(target.prior.alpha, target.prior.beta, depth))
    return 0.0


@helper
def _rate(log_ratio):
    """min(1, exp(log_ratio)) (CT-MCMC eq. 9, 10)."""
    if log_ratio >= 0.0:
        return 1.0
    return math.exp(log_ratio)


# -- birth rates ------------------------------------------------------------------------------------

@helper
def _bin_rows(tree, node, xt, v, nb, y, ycls, target, cs, model):
    """Counting sort of the leaf's rows by the code of v into ``cs.sorted_rows[:n]``; binned
    counts, sums and class counts (basis leaves: c and A, ``stats_leaf_terms``); ``cs.bin_n[k]``
    ends as the rows with code < k.

    A sparse predictor (``cs.bin_mode[v] >= 0``, its most common code, set by ``_leaf_rule_setup``)
    takes ``_bin_rows_sparse``: the same numbers, faster when most rows share that code."""
    s = tree.start[node]
    e = tree.end[node]
    n_cls = cs.bin_cls.shape[1]
    for k in range(nb + 1):
        cs.bin_n[k] = 0
    for k in range(nb):
        cs.bin_s1[k] = 0.0
        cs.bin_s2[k] = 0.0
        if len(model) == MODEL_CLASSIFICATION:
            for j in range(n_cls):
                cs.bin_cls[k, j] = 0.0
    row = xt[v]
    if cs.bin_mode[v] >= 0:
        _bin_rows_sparse(tree, node, row, nb, y, ycls, target, cs, model, cs.bin_mode[v])
        return
    for i in range(s, e):
        r = tree.perm[i]
        c = row[r]
        cs.bin_n[c + 1] += 1
        yr = y[r]
        if len(model) == MODEL_BASIS_NORMAL:
            # the statistics of ``tree.leaf_terms`` for basis leaves: c = sum w b R and A = sum w b^2
            cs.bin_s1[c] += target.basis[1, r] * yr
            cs.bin_s2[c] += target.basis[2, r]
        else:
            cs.bin_s1[c] += yr
            cs.bin_s2[c] += yr * yr
        if len(model) == MODEL_CLASSIFICATION:
            cs.bin_cls[c, ycls[r]] += 1.0
    for k in range(nb):
        cs.bin_n[k + 1] += cs.bin_n[k]
    # bin_n[k] is now the first slot of bin k; fill, then shift back to "rows with code < k".
    for i in range(s, e):
        r = tree.perm[i]
        c = row[r]
        cs.sorted_rows[cs.bin_n[c]] = r
        cs.bin_n[c] += 1
    for k in range(nb, 0, -1):
        cs.bin_n[k] = cs.bin_n[k - 1]
    cs.bin_n[0] = 0


@helper
def _bin_rows_sparse(tree, node, row, nb, y, ycls, target, cs, model, mode):
    """``_bin_rows``'s two passes (bins zeroed by the caller) for a predictor whose rows mostly sit
    at code ``mode``: that bin's count, sums and next sorted slot are kept in registers rather than
    in ``cs.bin_*``. The hot bin's running sum lived in memory, so each row waited for the previous
    row's store (grants: about 5 ns per row, ``benchmarks/results/ctmc_wide_cost.md``). Every bin
    still adds its rows' terms in row order from 0.0, so every sum, count and slot is the same
    number. The square sums are left at zero for the leaf models that never read them
    (``stats_leaf_terms``: known variance, classification)."""
    use_s2 = len(model) != MODEL_NORMAL_KNOWN_VARIANCE and len(model) != MODEL_CLASSIFICATION
    perm = tree.perm
    s = tree.start[node]
    e = tree.end[node]
    off = cs.sub_rows  # positions of the rows off the mode, in row order
    n_off = 0
    n_mode = 0
    m1 = 0.0
    m2 = 0.0
    for i in range(s, e):
        r = perm[i]
        c = row[r]
        yr = y[r]
        if len(model) == MODEL_BASIS_NORMAL:
            x1 = target.basis[1, r] * yr
            x2 = target.basis[2, r]
        else:
            x1 = yr
            x2 = yr * yr
        if c == mode:
            n_mode += 1
            m1 += x1
            if use_s2:
                m2 += x2
        else:
            off[n_off] = i
            n_off += 1
            cs.bin_n[c + 1] += 1
            cs.bin_s1[c] += x1
            if use_s2:
                cs.bin_s2[c] += x2
        if len(model) == MODEL_CLASSIFICATION:
            cs.bin_cls[c, ycls[r]] += 1.0
    cs.bin_n[mode + 1] = n_mode
    cs.bin_s1[mode] = m1
    cs.bin_s2[mode] = m2
    for k in range(nb):
        cs.bin_n[k + 1] += cs.bin_n[k]
    # The counting sort's second pass: the mode's rows are the runs of the leaf's rows between
    # those off it (copied, no code read); the others go to their bins.
    slot = cs.bin_n[mode]
    i0 = s
    for j in range(n_off):
        i1 = off[j]
        for i in range(i0, i1):
            cs.sorted_rows[slot] = perm[i]
            slot += 1
        r = perm[i1]
        c = row[r]
        cs.sorted_rows[cs.bin_n[c]] = r
        cs.bin_n[c] += 1
        i0 = i1 + 1
    for i in range(i0, e):
        cs.sorted_rows[slot] = perm[i]
        slot += 1
    cs.bin_n[mode] = slot
    for k in range(nb, 0, -1):
        cs.bin_n[k] = cs.bin_n[k - 1]
    cs.bin_n[0] = 0


@helper
def _prepare_leaf(tree, node, data, target, scratch, cs, model):
    """Gather a leaf's response terms in its row order (``cs.leaf_x1``, ``cs.leaf_x2``: what
    ``_bin_rows`` adds per row) and its rows' positions (``cs.pos_of``) for ``_bin_rows_exceptions``,
    and mark the leaf prepared (``cs.prepared``; ``_unprepare`` when done: the response changes
    between tree visits). Nothing is prepared without kept exceptions (``tree.mode_exceptions``) or
    for classification (class counts per bin stay with ``_bin_rows``). ``model``: ``scratch.model``."""
    if scratch.ex_ptr.shape[0] != data.xt.shape[0] + 1 or len(model) == MODEL_CLASSIFICATION:
        cs.prepared[0] = -1
        return
    s = tree.start[node]
    y = data.y
    for i in range(tree.end[node] - s):
        r = tree.perm[s + i]
        cs.pos_of[r] = i
        yr = y[r]
        if len(model) == MODEL_BASIS_NORMAL:
            cs.leaf_x1[i] = target.basis[1, r] * yr
            cs.leaf_x2[i] = target.basis[2, r]
        else:
            cs.leaf_x1[i] = yr
            cs.leaf_x2[i] = yr * yr
    cs.prepared[0] = node


@helper
def _unprepare(cs):
    cs.prepared[0] = -1


@helper
def _bin_leaf_var(tree, node, data, v, target, scratch, cs):
    """``_bin_rows`` of predictor v at a leaf: from v's exceptions (``_bin_rows_exceptions``) when
    the leaf is prepared and v is sparse with no more exceptions in all than the leaf has rows."""
    ptr = scratch.ex_ptr
    if cs.prepared[0] == node and cs.bin_mode[v] >= 0 and ptr[v + 1] - ptr[v] <= tree.end[node] - tree.start[node]:
        _bin_rows_exceptions(tree, node, v, data.nbins[v], scratch, cs, scratch.model)
    else:
        _bin_rows(tree, node, data.xt, v, data.nbins[v], data.y, data.ycls, target, cs, scratch.model)


@helper
def _bin_rows_exceptions(tree, node, v, nb, scratch, cs, model):
    """``_bin_rows`` (the same sorted rows, counts and sums, bit for bit) of a sparse predictor v at
    the prepared leaf, without reading v's codes row by row: v's exceptions (``Scratch.ex_row``,
    ``ex_code``) found at the leaf by their positions (``cs.pos_of``, checked against the leaf's
    rows) give every bin's count before the pass, so one pass over the leaf's positions adds each
    row's terms (``cs.leaf_x1``, ``leaf_x2``, contiguous) to its bin in row order and places it in
    ``cs.sorted_rows``. The mode bin's sums stay in registers."""
    use_s2 = len(model) != MODEL_NORMAL_KNOWN_VARIANCE
    perm = tree.perm
    s = tree.start[node]
    n = tree.end[node] - s
    mode = cs.bin_mode[v]
    ptr, ex_row, ex_code = scratch.ex_ptr, scratch.ex_row, scratch.ex_code
    flag = cs.off_code
    for k in range(nb + 1):
        cs.bin_n[k] = 0
    for k in range(nb):
        cs.bin_s1[k] = 0.0
        cs.bin_s2[k] = 0.0
    n_off = 0
    for j in range(ptr[v], ptr[v + 1]):
        r = ex_row[j]
        i = cs.pos_of[r]
        if i < n and perm[s + i] == r:
            c = ex_code[j]
            flag[i] = c + 1
            cs.bin_n[c + 1] += 1
            n_off += 1
    cs.bin_n[mode + 1] = n - n_off
    for k in range(nb):
        cs.bin_n[k + 1] += cs.bin_n[k]
    # bin_n[k] is the first slot of bin k: fill in row order, then shift back as ``_bin_rows``
    slot = cs.bin_n[mode]
    m1 = 0.0
    m2 = 0.0
    x1, x2 = cs.leaf_x1, cs.leaf_x2
    for i in range(n):
        f = flag[i]
        if f == 0:
            m1 += x1[i]
            if use_s2:
                m2 += x2[i]
            cs.sorted_rows[slot] = perm[s + i]
            slot += 1
        else:
            c = f - 1
            cs.bin_s1[c] += x1[i]
            if use_s2:
                cs.bin_s2[c] += x2[i]
            cs.sorted_rows[cs.bin_n[c]] = perm[s + i]
            cs.bin_n[c] += 1
            flag[i] = 0
    cs.bin_s1[mode] = m1
    cs.bin_s2[mode] = m2
    cs.bin_n[mode] = slot
    for k in range(nb, 0, -1):
        cs.bin_n[k] = cs.bin_n[k - 1]
    cs.bin_n[0] = 0


@helper
def _numeric_rates(tree, node, data, v, log_base, target, fstate, scratch, cs, model):
    """Birth rates of the available cuts ``lo .. lo + count - 1`` of numeric v at a leaf
    (``scratch.lows[v]``, ``scratch.counts[v]``, as ``_leaf_rule_setup`` leaves them) into
    ``cs.rates[k]`` (0 elsewhere); returns their sum. ``_bin_rows`` must have run for (node, v).

    ``log_base`` holds the cut-independent part of log pi(T+)/pi(T): log p_SPLIT + log p_RULE
    - log(1 - p_SPLIT) of the leaf.
    """
    nbins = data.nbins
    lo, count = scratch.lows[v], int(scratch.counts[v])
    nb = nbins[v]
    n = tree.end[node] - tree.start[node]
    # the leaf's own terms and the data size: read here rather than passed (as ``_factor_walk``)
    lm_leaf = tree.lm[node]
    b_leaf = tree.b[node]
    n_total = float(data.y.shape[0])
    depth = tree.depth[node] + 1
    ps_child = math.log1p(-p_split(target.prior.alpha, target.prior.beta, depth))
    hi = lo + count - 1
    rows = cs.sorted_rows
    # Whether the left child (codes <= k) can split is monotone (non-decreasing) in k, the right
    # child's non-increasing: a superset of rows keeps every available rule available.
    a = lo
    b = hi + 1
    while a < b:  # first k whose left child can split
        mid = (a + b) // 2
        if _rows_available(data, rows, 0, cs.bin_n[mid + 1], target.prior.min_leaf, scratch, cs):
            b = mid
        else:
            a = mid + 1
    first_left = a
    a = lo - 1
    b = hi
    while a < b:  # last k whose right child can split
        mid = (a + b + 1) // 2
        if _rows_available(data, rows, cs.bin_n[mid + 1], n, target.prior.min_leaf, scratch, cs):
            a = mid
        else:
            b = mid - 1
    last_right = a
    n_cls = cs.bin_cls.shape[1]
    for k in range(nb):
        cs.rates[k] = 0.0
    tot_s1 = 0.0
    tot_s2 = 0.0
    for k in range(nb):
        tot_s1 += cs.bin_s1[k]
        tot_s2 += cs.bin_s2[k]
    if len(model) == MODEL_CLASSIFICATION:
        for j in range(n_cls):
            cs.cls_left[j] = 0.0
            cs.cls_right[j] = 0.0
            for k in range(nb):
                cs.cls_right[j] += cs.bin_cls[k, j]
    s1 = 0.0
    s2 = 0.0
    total = 0.0
    entry = tree.start[node] - 1
    rate = 0.0
    for k in range(hi + 1):
        s1 += cs.bin_s1[k]
        s2 += cs.bin_s2[k]
        if len(model) == MODEL_CLASSIFICATION:
            for j in range(n_cls):
                cs.cls_left[j] += cs.bin_cls[k, j]
                cs.cls_right[j] -= cs.bin_cls[k, j]
        if k < lo:
            continue
        if k > lo and cs.bin_n[k + 1] == cs.bin_n[k]:
            # bin k is empty here: cut k splits the rows as cut k - 1 does (same rate)
            cs.cut_m[v, entry] += 1.0
            cs.rates[k] = rate
            total += rate
            continue
        n_left = cs.bin_n[k + 1]
        lm_l, b_l = stats_leaf_terms(n_left, s1, s2, cs.cls_left, target, model)
        lm_r, b_r = stats_leaf_terms(n - n_left, tot_s1 - s1, tot_s2 - s2, cs.cls_right, target, model)
        log_r = log_base + lm_l + lm_r - lm_leaf
        if k >= first_left:
            log_r += ps_child
        if k <= last_right:
            log_r += ps_child
        db = b_l + b_r - b_leaf
        # one cache entry per distinct partition: at most (distinct codes - 1) < rows entries
        entry += 1
        cs.cut_a[v, entry] = log_r
        cs.cut_db[v, entry] = db
        cs.cut_m[v, entry] = 1.0
        rate = _rate(log_r + _global_delta(fstate, db, n_total, target, model))
        cs.rates[k] = rate
        total += rate
    cs.cut_count[node, v] = entry + 1 - tree.start[node]
    return total


@helper
def _subset_mask(cs, n_present, sub):
    """Level mask of the partition index ``sub`` (bits over the present levels but the last)."""
    mask = np.int64(0)
    for j in range(n_present - 1):
        if (sub >> j) & 1:
            mask |= np.int64(1) << cs.levels[j]
    return mask


@helper
def _factor_setup(data, v, target, scratch, cs):
    """Per-level statistics of factor v at a leaf (``_bin_rows`` must have run for it): the
    present levels into ``cs.levels``, and per level whether its rows alone offer an available
    rule (``cs.lev_self``, one ``has_available_rule`` on the level's rows: O(rows * p) in all).
    Returns the number of present levels."""
    nbins = data.nbins
    m = target.prior.min_leaf
    n_present = 0
    for k in range(nbins[v]):
        if cs.bin_n[k + 1] > cs.bin_n[k]:
            cs.levels[n_present] = k
            cs.lev_self[n_present] = _rows_available(data, cs.sorted_rows, cs.bin_n[k], cs.bin_n[k + 1], m, scratch,
                                                     cs)
            n_present += 1
    return n_present


@helper
def _neumaier(s, c, x):
    """s + x with the rounding error added to the compensation c (Neumaier's summation): the
    Gray-code walk adds and removes each level's sums up to 2^(L-2) times, and the compensated
    sums stay within a few ulps of the direct ones however long the walk."""
    t = s + x
    if abs(s) >= abs(x):
        c += (s - t) + x
    else:
        c += (x - t) + s
    return t, c


@helper
def _side_availability(n_side, size, n_self, n_big, big_sum, m):
    """Whether one side of a factor partition offers an available rule, from its per-level
    tallies: 1 yes, 0 no, -1 undecided (then check the rows). The side has ``n_side`` rows in
    ``size`` levels, ``n_self`` of which offer an available rule on their own rows, ``n_big``
    of which hold at least m rows (``big_sum`` rows in all).

    Availability only grows with the rows (the same rule splits a superset at least as well), so
    a side holding a self-available level is available. The factor itself is available on the
    side iff some subset of its levels holds between m and n_side - m rows: with two levels of
    >= m rows, yes; with one (c rows), iff n_side - c >= m (any subset either holds it and leaves
    fewer than m rows outside, or lacks it and holds fewer than m); with none, adding levels until
    the sum reaches m stops below 2m - 1, so n_side >= 3m - 2 suffices. A single level is decided
    by its own flag. What is left (the factor unavailable or undecided and no level available
    alone) needs the other predictors on the union of the rows."""
    if n_side < 2 * m:
        return 0
    if n_self > 0:
        return 1
    if size == 1:
        return 0
    if n_big >= 2:
        return 1
    if n_big == 1:
        return 1 if n_side - big_sum >= m else -1
    return 1 if n_side >= 3 * m - 2 else -1


@helper
def _side_rows_available(data, m, g, n_present, left, scratch, cs):
    """``has_available_rule`` on the rows of one side of partition g (the undecided case of
    ``_side_availability``): the side's rows are copied into ``cs.sub_rows``."""
    fill = 0
    for j in range(n_present):
        on_left = j < n_present - 1 and (g >> j) & 1 == 1
        if on_left == left:
            lev = cs.levels[j]
            for i in range(cs.bin_n[lev], cs.bin_n[lev + 1]):
                cs.sub_rows[fill] = cs.sorted_rows[i]
                fill += 1
    cs.walk_stats[1] += 1
    return _rows_available(data, cs.sub_rows, 0, fill, m, scratch, cs)


@helper
def _factor_walk(tree, node, data, walk, target, fstate, scratch, cs, model):
    """Birth rates of every unordered partition of the ``n_present`` levels of factor v present
    at a leaf, walked in reflected Gray-code order (``_factor_setup`` must have run); ``walk`` (a
    ``FactorWalk``) holds v, n_present, log_base, goal, out_sub and out_rate.

    Partition g (a bit per present level but the last, which always goes right, so each
    unordered partition appears once) has left side ``_subset_mask(g)``. Consecutive codes
    differ in one level, so each step moves one level's count, sums (compensated) and class
    counts between the sides and updates the sides' availability tallies in O(1) (O(classes)
    for classification); the rate then costs two leaf terms (CT-MCMC eq. 9 with the prior of
    ``tree.py``), the same arithmetic as a direct enumeration. Only a side that
    ``_side_availability`` leaves undecided is checked on its rows (counted in
    ``cs.walk_stats[1]``; steps in ``cs.walk_stats[0]``).

    ``goal < 0``: sum every rate, cache each valid partition's log ratio and scatter change
    for ``refresh_global_rates`` (when they fit in the leaf's row slots) and return
    ``(total, -1)``. ``goal >= 0``: stop at the first partition whose cumulative rate exceeds
    ``goal`` and return ``(cumulative, g)``; the walk repeats the first one's arithmetic, so
    the rates and their cumulative sums are the same numbers (no 2^(L-1) table is stored). If
    rounding leaves ``goal`` at or past the total, the last partition with a positive rate is
    returned. With ``out_sub`` non-empty every step's code and rate are also written there (tests).
    """
    v, n_present, log_base, goal, out_sub, out_rate = (walk.v, walk.n_present, walk.log_base, walk.goal,
                                                       walk.out_sub, walk.out_rate)
    n = tree.end[node] - tree.start[node]
    # the leaf's own terms and the data size: read here rather than passed (issue 29: short signatures)
    lm_leaf = tree.lm[node]
    b_leaf = tree.b[node]
    n_total = float(data.y.shape[0])
    m = target.prior.min_leaf
    depth = tree.depth[node] + 1
    ps_child = math.log1p(-p_split(target.prior.alpha, target.prior.beta, depth))
    n_cls = cs.bin_cls.shape[1]
    record = out_sub.shape[0] > 0
    select = goal >= 0.0
    # every level starts on the right
    n_l = 0
    l1 = 0.0
    l1c = 0.0
    l2 = 0.0
    l2c = 0.0
    r1 = 0.0
    r1c = 0.0
    r2 = 0.0
    r2c = 0.0
    self_l = 0
    self_r = 0
    big_l = 0
    big_r = 0
    bsum_l = 0
    bsum_r = 0
    for c in range(n_cls):
        cs.cls_left[c] = 0.0
        cs.cls_right[c] = 0.0
    for j in range(n_present):
        lev = cs.levels[j]
        cnt = cs.bin_n[lev + 1] - cs.bin_n[lev]
        r1, r1c = _neumaier(r1, r1c, cs.bin_s1[lev])
        r2, r2c = _neumaier(r2, r2c, cs.bin_s2[lev])
        if cs.lev_self[j]:
            self_r += 1
        if cnt >= m:
            big_r += 1
            bsum_r += cnt
        if len(model) == MODEL_CLASSIFICATION:
            for c in range(n_cls):
                cs.cls_right[c] += cs.bin_cls[lev, c]
    n_sub = 1 << (n_present - 1)
    total = 0.0
    last = -1
    cached = 0
    slot0 = tree.start[node]
    g = 0
    for i in range(1, n_sub):
        # Gray codes i - 1 and i differ in the lowest set bit of i
        j = 0
        while (i >> j) & 1 == 0:
            j += 1
        g ^= 1 << j
        lev = cs.levels[j]
        cnt = cs.bin_n[lev + 1] - cs.bin_n[lev]
        x1 = cs.bin_s1[lev]
        x2 = cs.bin_s2[lev]
        is_self = 1 if cs.lev_self[j] else 0
        is_big = 1 if cnt >= m else 0
        if (g >> j) & 1 == 1:  # level j moves left
            n_l += cnt
            l1, l1c = _neumaier(l1, l1c, x1)
            l2, l2c = _neumaier(l2, l2c, x2)
            r1, r1c = _neumaier(r1, r1c, -x1)
            r2, r2c = _neumaier(r2, r2c, -x2)
            self_l += is_self
            self_r -= is_self
            big_l += is_big
            big_r -= is_big
            bsum_l += is_big * cnt
            bsum_r -= is_big * cnt
            if len(model) == MODEL_CLASSIFICATION:
                for c in range(n_cls):
                    cs.cls_left[c] += cs.bin_cls[lev, c]
                    cs.cls_right[c] -= cs.bin_cls[lev, c]
        else:  # back right
            n_l -= cnt
            l1, l1c = _neumaier(l1, l1c, -x1)
            l2, l2c = _neumaier(l2, l2c, -x2)
            r1, r1c = _neumaier(r1, r1c, x1)
            r2, r2c = _neumaier(r2, r2c, x2)
            self_l -= is_self
            self_r += is_self
            big_l -= is_big
            big_r += is_big
            bsum_l -= is_big * cnt
            bsum_r += is_big * cnt
            if len(model) == MODEL_CLASSIFICATION:
                for c in range(n_cls):
                    cs.cls_left[c] -= cs.bin_cls[lev, c]
                    cs.cls_right[c] += cs.bin_cls[lev, c]
        cs.walk_stats[0] += 1
        rate = 0.0
        if n_l >= m and n - n_l >= m:
            size_l = 0
            gg = g
            while gg:
                gg &= gg - 1
                size_l += 1
            lm_l, b_l = stats_leaf_terms(n_l, l1 + l1c, l2 + l2c, cs.cls_left, target, model)
            lm_r, b_r = stats_leaf_terms(n - n_l, r1 + r1c, r2 + r2c, cs.cls_right, target, model)
            log_r = log_base + lm_l + lm_r - lm_leaf
            side = _side_availability(n_l, size_l, self_l, big_l, bsum_l, m)
            if side < 0:
                side = 1 if _side_rows_available(data, m, g, n_present, True, scratch, cs) else 0
            if side == 1:
                log_r += ps_child
            side = _side_availability(n - n_l, n_present - size_l, self_r, big_r, bsum_r, m)
            if side < 0:
                side = 1 if _side_rows_available(data, m, g, n_present, False, scratch, cs) else 0
            if side == 1:
                log_r += ps_child
            db = b_l + b_r - b_leaf
            if not select:
                if cached >= 0 and cached < n:
                    cs.cut_a[v, slot0 + cached] = log_r
                    cs.cut_db[v, slot0 + cached] = db
                    cs.cut_m[v, slot0 + cached] = 1.0
                    cached += 1
                else:
                    cached = -1  # more partitions than the leaf has slots: recomputed when needed
            rate = _rate(log_r + _global_delta(fstate, db, n_total, target, model))
            total += rate
            if select and rate > 0.0:
                last = g
                if goal < total:
                    return total, g
        if record:
            out_sub[i - 1] = g
            out_rate[i - 1] = rate
    if select:
        return total, last
    cs.cut_count[node, v] = cached
    return total, -1


@helper
def factor_partition_rates(tree, node, v, data, target, fstate, scratch, cs, out_sub, out_rate):
    """Every partition's birth rate of factor v at leaf ``node``, in the walk's order: codes
    (``_subset_mask`` gives the left side's levels, over ``cs.levels``) into ``out_sub`` and
    rates into ``out_rate`` (length >= 2^(L-1) - 1, L the present levels). Returns L; 0 when v
    has no available rule there. For tests and ``CtmcCartChain.events``."""
    xt, nbins, y, ycls = data.xt, data.nbins, data.y, data.ycls
    n_vars, log_split = _leaf_rule_setup(tree, node, data, target, scratch)
    count = scratch.counts[v]
    if n_vars == 0 or count <= 0.0:
        return 0
    _bin_rows(tree, node, xt, v, nbins[v], y, ycls, target, cs, scratch.model)
    n_present = _factor_setup(data, v, target, scratch, cs)
    log_base = log_split - math.log(n_vars) - math.log(0.5 * count)
    _factor_walk(tree, node, data, FactorWalk(v, n_present, log_base, -1.0, out_sub, out_rate), target, fstate,
                 scratch, cs, scratch.model)
    return n_present


@helper
def _leaf_rule_setup(tree, node, data, target, scratch):
    """Rule counts at a leaf (``scratch.counts``, ``scratch.lows``) and the cut-independent log
    ratio part shared by all births there; returns (n_vars, log p_SPLIT - log(1 - p_SPLIT))."""
    is_cat, nbins = data.is_cat, data.nbins
    m = target.prior.min_leaf
    n_vars = prior_rule_counts(tree.perm, tree.start[node], tree.end[node], is_cat, nbins, m, scratch, False)
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    return n_vars, math.log(ps) - math.log1p(-ps)


@helper
def _var_birth_rates(tree, node, v, n_vars, log_split, data, target, fstate, scratch, cs):
    """Birth rates of predictor v's rules at a leaf into ``cs.rates``; returns their sum.
    ``_leaf_rule_setup`` must have run for the leaf."""
    is_cat = data.is_cat
    count = scratch.counts[v]
    if count <= 0.0:
        cs.cut_count[node, v] = 0
        return 0.0
    _bin_leaf_var(tree, node, data, v, target, scratch, cs)
    if is_cat[v]:
        # p_RULE of an unordered partition: 1 / (n_vars * count / 2), count of ordered subsets.
        log_base = log_split - math.log(n_vars) - math.log(0.5 * count)
        n_present = _factor_setup(data, v, target, scratch, cs)
        total, _ = _factor_walk(tree, node, data, FactorWalk(v, n_present, log_base, -1.0, cs.no_sub, cs.no_rate),
                                target, fstate, scratch, cs, scratch.model)
        return total
    log_base = log_split - math.log(n_vars) - math.log(count)
    return _numeric_rates(tree, node, data, v, log_base, target, fstate, scratch, cs, scratch.model)


@helper
def leaf_birth_rates(tree, node, data, target, fstate, scratch, cs):
    """Fill ``cs.rate_var[node, v]``: the total birth rate at a leaf over each predictor's rules
    (all 0 when fewer than two node slots are free: the tree cannot grow)."""
    xt = data.xt
    p = xt.shape[0]
    for v in range(p):
        cs.rate_var[node, v] = 0.0
        cs.cut_count[node, v] = 0
    if tree.meta[M_N_FREE] < 2:
        return
    n_vars, log_split = _leaf_rule_setup(tree, node, data, target, scratch)
    if n_vars == 0:
        return
    cs.walk_stats[2] += 1
    cs.walk_stats[3] += tree.end[node] - tree.start[node]
    cs.walk_stats[4] += n_vars
    _set_bin_modes(data, scratch, cs)
    _prepare_leaf(tree, node, data, target, scratch, cs, scratch.model)
    for v in range(p):
        if scratch.counts[v] > 0.0:  # has_available_rule leaves scratch.counts/lows intact
            cs.rate_var[node, v] = _var_birth_rates(tree, node, v, n_vars, log_split, data,
                                                    target, fstate, scratch, cs)
    _unprepare(cs)


# -- death rates ------------------------------------------------------------------------------------

@helper
def nog_death_rate(tree, node, data, target, fstate, scratch, cs):
    """Death rate of a nog node: ``min(1, pi(T-) / pi(T))`` (CT-MCMC eq. 10)."""
    is_cat, nbins, y, ycls = data.is_cat, data.nbins, data.y, data.ycls
    m = target.prior.min_leaf
    s = tree.start[node]
    e = tree.end[node]
    lc = tree.left[node]
    rc = tree.right[node]
    v = tree.var[node]
    n_vars = prior_rule_counts(tree.perm, s, e, is_cat, nbins, m, scratch, False)
    count = scratch.counts[v]
    log_rule = -math.log(n_vars) - (math.log(0.5 * count) if is_cat[v] else math.log(count))
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    # the merged leaf's terms: its rows are the node's segment
    lm_n, b_n = leaf_terms(tree, node, y, ycls, target, scratch.class_counts, scratch.model)
    d = tree.depth[node] + 1
    log_r = math.log1p(-ps) - math.log(ps) - log_rule
    log_r -= _log_one_minus(tree.perm, tree.start[lc], tree.end[lc], data, d, target, scratch, cs)
    log_r -= _log_one_minus(tree.perm, tree.start[rc], tree.end[rc], data, d, target, scratch, cs)
    log_r += lm_n - tree.lm[lc] - tree.lm[rc]
    db = b_n - tree.b[lc] - tree.b[rc]
    cs.death_a[node] = log_r
    cs.death_db[node] = db
    return _rate(log_r + _global_delta(fstate, db, float(y.shape[0]), target, scratch.model))


@helper
def _is_nog(tree, node):
    return tree.var[node] >= 0 and tree.var[tree.left[node]] == LEAF and tree.var[tree.right[node]] == LEAF


@helper
def compute_all_rates(tree, data, target, fstate, scratch, cs):
    """Recompute every cached rate of the tree."""
    xt = data.xt
    for node in range(tree.var.shape[0]):
        cs.rate_death[node] = 0.0
        for v in range(xt.shape[0]):
            cs.rate_var[node, v] = 0.0
        if tree.var[node] == LEAF:
            leaf_birth_rates(tree, node, data, target, fstate, scratch, cs)
        elif _is_nog(tree, node):
            cs.rate_death[node] = nog_death_rate(tree, node, data, target, fstate, scratch, cs)
    rebuild_sum_tree(tree, cs)


@helper
def refresh_global_rates(tree, data, target, fstate, scratch, cs):
    """Common-sigma model: after a jump changed the scatter sum B, recompute every rate from the
    cached local parts (``cut_a``, ``cut_db``, ``death_a``, ``death_db``): one log1p and one exp
    per candidate, no pass over the rows. (Leaf-variable pairs without a cache, factors with more
    partitions than rows, are recomputed from the rows.)"""
    xt, y = data.xt, data.y
    n_total = float(y.shape[0])
    p = xt.shape[0]
    for node in range(tree.var.shape[0]):
        if tree.var[node] == LEAF:
            uncached = False
            for v in range(p):
                if cs.cut_count[node, v] < 0:
                    uncached = True
            if uncached:
                leaf_birth_rates(tree, node, data, target, fstate, scratch, cs)
                continue
            for v in range(p):
                count = cs.cut_count[node, v]
                total = 0.0
                start = tree.start[node]
                for j in range(start, start + count):
                    total += cs.cut_m[v, j] * _rate(cs.cut_a[v, j] + _global_delta(fstate, cs.cut_db[v, j], n_total,
                                                                                     target, scratch.model))
                cs.rate_var[node, v] = total
        elif tree.var[node] >= 0 and _is_nog(tree, node):
            cs.rate_death[node] = _rate(cs.death_a[node] + _global_delta(fstate, cs.death_db[node], n_total, target,
                                                                          scratch.model))
    rebuild_sum_tree(tree, cs)


@helper
def total_rate(tree, cs):
    """Lambda(T): the sum of every birth and death rate (1 / the expected holding time, eq. 4),
    the root of the sum tree (kept current by every function that changes a rate)."""
    return cs.sum_tree[1]


@helper
def node_event_rate(tree, cs, node):
    """Total rate of the events at one node slot: its births (leaf), its death (nog), else 0."""
    v = tree.var[node]
    if v == LEAF:
        w = 0.0
        for k in range(cs.rate_var.shape[1]):
            w += cs.rate_var[node, k]
        return w
    if v >= 0:
        return cs.rate_death[node]
    return 0.0


@helper
def sum_tree_set(st, i, w):
    """Set slot i of the sum tree to w and recompute the sums above it (O(log slots))."""
    j = st.shape[0] // 2 + i
    st[j] = w
    j //= 2
    while j >= 1:
        st[j] = st[2 * j] + st[2 * j + 1]
        j //= 2


@helper
def _update_slots(tree, cs, a, b, c, d):
    """Refresh the sum tree at the (up to four) slots a jump touched (-1: none)."""
    for k in (np.int64(a), np.int64(b), np.int64(c), np.int64(d)):
        if k >= 0:
            sum_tree_set(cs.sum_tree, k, node_event_rate(tree, cs, k))


@helper
def rebuild_sum_tree(tree, cs):
    """Recompute the whole sum tree from the cached rates (O(slots))."""
    st = cs.sum_tree
    size = st.shape[0] // 2
    cap = tree.var.shape[0]
    for i in range(size):
        st[size + i] = node_event_rate(tree, cs, i) if i < cap else 0.0
    for j in range(size - 1, 0, -1):
        st[j] = st[2 * j] + st[2 * j + 1]


@helper
def sum_tree_find(st, u):
    """Slot i with (sum of slots < i) <= u < (sum of slots <= i), and u minus the sum of the
    slots before it; a descent from the root, O(log slots). Rounding can leave u at or past the
    total: the last slot with a positive rate is returned then (``u`` clamped into it)."""
    size = st.shape[0] // 2
    if u >= st[1]:
        j = 1
        while j < size:  # rightmost positive path
            j = 2 * j + 1 if st[2 * j + 1] > 0.0 else 2 * j
        return j - size, st[j]
    j = 1
    while j < size:
        left = st[2 * j]
        if u < left:
            j = 2 * j
        else:
            u -= left
            j = 2 * j + 1
    if st[j] <= 0.0:
        # u landed on a zero-width slot through rounding (u - left just below 0 or past a sum):
        # take the nearest slot to its left with a positive rate
        i = j - size
        while i > 0 and st[size + i] <= 0.0:
            i -= 1
        return i, 0.0
    return j - size, min(max(u, 0.0), st[j])


# -- jumps ------------------------------------------------------------------------------------------

@helper
def _pick(values, count, u):
    """Index i with cumsum(values)[i - 1] <= u < cumsum(values)[i] (the last positive one if
    rounding leaves u beyond the sum)."""
    last = -1
    for i in range(count):
        w = values[i]
        if w <= 0.0:
            continue
        last = i
        if u < w:
            return i
        u -= w
    return last


@helper
def _factor_mask(rng, cs, n_present, sub, nb):
    """Stored representation of the partition ``sub``: uniform orientation, uniform bits for
    the levels absent from the node (the conventions of ``tree.py``)."""
    mask = _subset_mask(cs, n_present, sub)
    if rng.random() < 0.5:
        full = np.int64(0)
        for j in range(n_present):
            full |= np.int64(1) << cs.levels[j]
        mask = full & ~mask
    present = np.int64(0)
    for j in range(n_present):
        present |= np.int64(1) << cs.levels[j]
    for k in range(nb):
        if (present >> k) & 1 == 0 and rng.random() < 0.5:
            mask |= np.int64(1) << k
    return mask


@helper
def apply_birth(tree, node, v, cut, data, target, fstate, scratch):
    """Split leaf ``node`` by (v, cut); cache the children's leaf terms and update the sums."""
    lc, rc = split_leaf(tree, data.xt, data.is_cat, node, v, cut, scratch.part_buf)
    for child in (lc, rc):
        lm, b = leaf_terms(tree, child, data.y, data.ycls, target, scratch.class_counts, scratch.model)
        tree.lm[child] = lm
        tree.b[child] = b
    fstate[F_LM_SUM] += tree.lm[lc] + tree.lm[rc] - tree.lm[node]
    fstate[F_B_SUM] += tree.b[lc] + tree.b[rc] - tree.b[node]
    return lc, rc


@helper
def apply_death(tree, node, y, ycls, target, fstate, scratch):
    """Collapse nog ``node`` into a leaf; cache its leaf terms and update the sums."""
    lc = tree.left[node]
    rc = tree.right[node]
    lm, b = leaf_terms(tree, node, y, ycls, target, scratch.class_counts, scratch.model)
    fstate[F_LM_SUM] += lm - tree.lm[lc] - tree.lm[rc]
    fstate[F_B_SUM] += b - tree.b[lc] - tree.b[rc]
    merge_sorted_halves(tree.perm, tree.start[node], tree.end[lc], tree.end[node], scratch.part_buf)
    collapse_node(tree, node)
    tree.lm[node] = lm
    tree.b[node] = b


@helper
def _needs_full_refresh(tree):
    """Births need two free node slots: near the capacity a jump changes every leaf's births."""
    return tree.meta[M_N_FREE] <= 3


@helper
def jump(rng, tree, data, target, fstate, scratch, cs, lam, model):
    """Make one jump of the process from a tree whose rates are cached (``lam`` = Lambda > 0):
    draw an event with probability rate / Lambda (eq. 5, 6), apply it, refresh the rates it
    changed. Returns (event kind, node). ``model`` is the chain's ``tree.model_tag``."""
    xt, is_cat, nbins, y, ycls = data.xt, data.is_cat, data.nbins, data.y, data.ycls
    u = rng.random() * lam
    p = xt.shape[0]
    node, u = sum_tree_find(cs.sum_tree, u)
    kind = EVENT_BIRTH if tree.var[node] == LEAF else EVENT_DEATH
    full = False
    if kind == EVENT_BIRTH:
        v = _pick(cs.rate_var[node], p, u)
        for k in range(v):
            u -= cs.rate_var[node, k]
        u = min(max(u, 0.0), cs.rate_var[node, v])
        n_vars, log_split = _leaf_rule_setup(tree, node, data, target, scratch)
        _prepare_leaf(tree, node, data, target, scratch, cs, scratch.model)
        total = _var_birth_rates(tree, node, v, n_vars, log_split, data, target, fstate,
                                 scratch, cs)
        _unprepare(cs)
        # the recomputed total equals the cached one up to rounding (summation order): rescale
        u = u * total / cs.rate_var[node, v] if cs.rate_var[node, v] > 0.0 else 0.0
        if is_cat[v]:
            # re-walk the partitions (``_var_birth_rates`` left the leaf's level statistics in
            # place) to the one whose cumulative rate passes u
            n_present = 0
            for k in range(nbins[v]):
                if cs.bin_n[k + 1] > cs.bin_n[k]:
                    n_present += 1
            log_base = log_split - math.log(n_vars) - math.log(0.5 * scratch.counts[v])
            _, sub = _factor_walk(tree, node, data, FactorWalk(v, n_present, log_base, u, cs.no_sub, cs.no_rate),
                                  target, fstate, scratch, cs, model)
            cut = _factor_mask(rng, cs, n_present, sub, nbins[v])
        else:
            cut = np.int64(_pick(cs.rates, nbins[v], u))
        lc, rc = apply_birth(tree, node, v, cut, data, target, fstate, scratch)
        full = _needs_full_refresh(tree)
        if not full:
            for k in range(p):
                cs.rate_var[node, k] = 0.0
            cs.rate_death[lc] = 0.0
            cs.rate_death[rc] = 0.0
            leaf_birth_rates(tree, lc, data, target, fstate, scratch, cs)
            leaf_birth_rates(tree, rc, data, target, fstate, scratch, cs)
            cs.rate_death[node] = nog_death_rate(tree, node, data, target, fstate, scratch, cs)
            par = tree.parent[node] if node != 0 else -1
            if par >= 0:
                cs.rate_death[par] = 0.0
            _update_slots(tree, cs, node, lc, rc, par)
    else:
        lc = tree.left[node]
        rc = tree.right[node]
        apply_death(tree, node, y, ycls, target, fstate, scratch)
        full = _needs_full_refresh(tree)
        if not full:
            for k in range(p):
                cs.rate_var[lc, k] = 0.0
                cs.rate_var[rc, k] = 0.0
            cs.rate_death[node] = 0.0
            leaf_birth_rates(tree, node, data, target, fstate, scratch, cs)
            par = tree.parent[node] if node != 0 else -1
            if par >= 0 and _is_nog(tree, par):
                cs.rate_death[par] = nog_death_rate(tree, par, data, target, fstate, scratch, cs)
            _update_slots(tree, cs, node, lc, rc, par)
    if full:
        compute_all_rates(tree, data, target, fstate, scratch, cs)
    elif len(model) == MODEL_MEAN_SHIFT and target.prior.likelihood:
        # the common-sigma model's global term changed with the scatter sum
        refresh_global_rates(tree, data, target, fstate, scratch, cs)
    return kind, node


@helper
def run_for_time(rng, tree, data, target, fstate, scratch, cs, horizon, mh_rates):
    """Simulate the process for ``horizon`` time units from the current tree (Exp(Lambda)
    holding times; the state at a fixed time is pi-invariant, which a single jump is not).
    Returns (number of jumps, Lambda of the starting tree)."""
    compute_all_rates(tree, data, target, fstate, scratch, cs)
    lam_bd = total_rate(tree, cs)
    lam = lam_bd + mh_event_rate(tree, mh_rates)
    lam0 = lam
    t = 0.0
    jumps = 0
    while lam > 0.0:
        t += rng.exponential(1.0) / lam
        if t > horizon:
            break
        event_step(rng, tree, data, target, fstate, scratch, cs, lam_bd, mh_rates)
        jumps += 1
        lam_bd = total_rate(tree, cs)
        lam = lam_bd + mh_event_rate(tree, mh_rates)
    return jumps, lam0


# -- rotate and perturb events ----------------------------------------------------------------------

@helper
def mh_event_rate(tree, mh_rates):
    """Total rate of the rotate and perturb events of the tree (see the module docstring)."""
    out = 0.0
    if mh_rates is not None:
        n_int = tree.meta[M_N_INTERNAL]
        if n_int >= 2:
            out += mh_rates[0]
        if n_int >= 1:
            out += mh_rates[1]
    return out


@helper
def event_step(rng, tree, data, target, fstate, scratch, cs, lam_bd, mh_rates):
    """One event of the process with birth/death total ``lam_bd`` (cached rates) and the rotate /
    perturb rates ``mh_rates``: returns its kind. Without rotate/perturb events this is exactly
    ``jump`` (same random draws)."""
    y = data.y
    if mh_rates is not None:
        mh = mh_event_rate(tree, mh_rates)
        if mh > 0.0:
            u = rng.random() * (lam_bd + mh)
            if u >= lam_bd:
                u -= lam_bd
                n_total = float(y.shape[0])
                rot = mh_rates[0] if tree.meta[M_N_INTERNAL] >= 2 else 0.0
                if u < rot:
                    kind = EVENT_ROTATE
                    accepted, _, _ = rotate_step(rng, tree, data, target, fstate, n_total,
                                                 scratch)
                else:
                    kind = EVENT_PERTURB
                    accepted, _, _ = perturb_step(rng, tree, data, target, fstate, n_total,
                                                  scratch, mh_rates[2:])
                if accepted:
                    compute_all_rates(tree, data, target, fstate, scratch, cs)
                return kind
    kind, _ = jump(rng, tree, data, target, fstate, scratch, cs, lam_bd, scratch.model)
    return kind
