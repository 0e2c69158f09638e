"""The one-step optimal ("posterior") node proposal of the top-down particle filter
(Lakshminarayanan, Roy & Teh 2013; spec ``tree_moves.md`` 2.1).

At a popped node every option is scored by prior times likelihood ratio,

    s_stop = log(1 - p_SPLIT),   s(v, S) = log p_SPLIT + log p_RULE(v, S) + [L(after) - L(before)],

where L is the log marginal likelihood of the partial tree (eligible nodes as leaves; for the
common-sigma model including its global term). One option is drawn with probability
proportional to exp(s) and the particle's log weight grows by log sum exp(s) (the proposal is
the normalised target increment, so the weight is its normaliser). Rules follow the prior's
conventions (``tree.py``): numeric cuts in the node's available range; for a factor, ordered
subsets S of the levels present at the node with both sides holding at least m rows, each of
p_RULE mass 1 / (n_vars * count_v), the bits of absent levels drawn uniformly afterwards (they do
not change the rows). A factor is enumerated over its 2^(present levels) subsets.

The scores come from per-bin sufficient statistics of the node's rows (count, sum, sum of
squares, class counts), one variable at a time; two passes (normaliser, then the draw) avoid
storing the candidates.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper
from .likelihood import (
    MODEL_CLASSIFICATION,
    MODEL_MEAN_SHIFT,
    MODEL_NORMAL_KNOWN_VARIANCE,
    leaf_log_marginal_dirichlet,
    leaf_log_marginal_mean_variance,
    leaf_log_marginal_normal_known_variance,
    mean_shift_leaf_terms,
)
from .tree import (
    global_term,
    p_split,
    prior_rule_counts,
)


class BinStats(NamedTuple):
    """Sufficient statistics of a node's rows per bin of one variable, and two sides' totals."""

    n: np.ndarray  # float64[max bins]
    s: np.ndarray  # float64[max bins]
    ss: np.ndarray  # float64[max bins]
    cls: np.ndarray  # float64[max bins, K]
    side: np.ndarray  # float64[2, 3 + K]: (n, sum, sumsq, class counts) of left and right


class Proposal(NamedTuple):
    """The node proposal of a particle filter (``particle.PROPOSAL_PRIOR`` or ``PROPOSAL_OPTIMAL``)
    and the work arrays of the optimal one: the per-bin statistics and the present levels."""

    kind: int
    bins: BinStats
    levels: np.ndarray  # int64[max bins]


class NodeTerms(NamedTuple):
    """What the score of every rule at a node is measured against: the particle's sums of leaf
    terms, the node's own terms and the data size (``_split_score``)."""

    lm_sum: float
    b_sum: float
    lm_node: float
    b_node: float
    n_total: float


def new_proposal(kind: int, max_bins: int, n_classes: int) -> Proposal:
    """A ``Proposal`` of ``kind`` with work arrays for ``max_bins`` bins and ``n_classes`` classes."""
    return Proposal(int(kind), new_bin_stats(max_bins, n_classes), np.zeros(max_bins, dtype=np.int64))


def new_bin_stats(max_bins: int, n_classes: int) -> BinStats:
    """Work arrays for ``max_bins`` bins and ``n_classes`` classes."""
    k = max(n_classes, 1)
    return BinStats(np.zeros(max_bins), np.zeros(max_bins), np.zeros(max_bins), np.zeros((max_bins, k)),
                    np.zeros((2, 3 + k)))


@helper
def _terms(side, j, target, model):
    """(lm, b) of a leaf with the statistics ``side[j]`` (as ``tree.leaf_terms``; ``model`` the
    chain's ``tree.model_tag``)."""
    if not target.prior.likelihood:
        return 0.0, 0.0
    n = side[j, 0]
    if len(model) == MODEL_CLASSIFICATION:
        k = target.prior.n_classes
        return leaf_log_marginal_dirichlet(side[j, 3:3 + k], target.prior.class_alpha), 0.0
    total = side[j, 1]
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE:
        return leaf_log_marginal_normal_known_variance(int(n), total, target.sigma2[0], target.prior.tau2), total
    ybar = total / n
    ssd = max(side[j, 2] - n * ybar * ybar, 0.0)
    if len(model) == MODEL_MEAN_SHIFT:
        return mean_shift_leaf_terms(int(n), ybar, ssd, target.prior.a, target.prior.mu_bar)
    return leaf_log_marginal_mean_variance(int(n), ybar, ssd, target.prior.a, target.prior.mu_bar, target.prior.nu,
                                           target.prior.lam), 0.0


@helper
def _fill_bins(xt, perm, start, end, v, nb, y, ycls, st, model):
    k = st.cls.shape[1]
    for b in range(nb):
        st.n[b] = 0.0
        st.s[b] = 0.0
        st.ss[b] = 0.0
        for c in range(k):
            st.cls[b, c] = 0.0
    row = xt[v]
    for i in range(start, end):
        r = perm[i]
        b = row[r]
        st.n[b] += 1.0
        if len(model) == MODEL_CLASSIFICATION:
            st.cls[b, ycls[r]] += 1.0
        else:
            st.s[b] += y[r]
            st.ss[b] += y[r] * y[r]


@helper
def _split_score(st, left_mask_or_cut, is_cat_v, nb, target, node_terms, base, model):
    """Score of one rule: ``base`` + the change of L when the node splits by it (``node_terms``: a
    ``NodeTerms``; ``model``: the chain's ``model_tag``)."""
    lm_sum, b_sum, lm_node, b_node, n_total = (node_terms.lm_sum, node_terms.b_sum, node_terms.lm_node,
                                               node_terms.b_node, node_terms.n_total)
    k = st.cls.shape[1]
    for j in range(2):
        for c in range(3 + k):
            st.side[j, c] = 0.0
    for b in range(nb):
        if st.n[b] == 0.0:
            continue
        if is_cat_v:
            j = 0 if (left_mask_or_cut >> b) & 1 else 1
        else:
            j = 0 if b <= left_mask_or_cut else 1
        st.side[j, 0] += st.n[b]
        st.side[j, 1] += st.s[b]
        st.side[j, 2] += st.ss[b]
        for c in range(k):
            st.side[j, 3 + c] += st.cls[b, c]
    lm_l, b_l = _terms(st.side, 0, target, model)
    lm_r, b_r = _terms(st.side, 1, target, model)
    before = lm_sum + global_term(b_sum, n_total, target, model)
    after = lm_sum + lm_l + lm_r - lm_node + global_term(b_sum + b_l + b_r - b_node, n_total, target, model)
    return base + after - before


@helper
def _present_levels(st, nb, levels):
    count = 0
    for b in range(nb):
        if st.n[b] > 0.0:
            levels[count] = b
            count += 1
    return count


@helper
def _subset_mask(sub, levels, present):
    mask = np.int64(0)
    for j in range(present):
        if (sub >> j) & 1:
            mask |= np.int64(1) << levels[j]
    return mask


@helper
def _subset_rows(st, sub, levels, present):
    s = 0.0
    for j in range(present):
        if (sub >> j) & 1:
            s += st.n[levels[j]]
    return s


@helper
def optimal_choice(rng, tree, node, data, target, scratch, proposal, lm_sum, b_sum, n_total):
    """Draw the decision at ``node`` from the one-step optimal proposal (its work arrays in
    ``proposal``, a ``Proposal``).

    Returns ``(log weight increment, v, cut)``; ``v = -1`` means the node stays a leaf. The
    increment is log sum exp over all options (the proposal's normaliser).
    """
    st, levels = proposal.bins, proposal.levels
    xt, is_cat, nbins, y, ycls = data.xt, data.is_cat, data.nbins, data.y, data.ycls
    m = target.prior.min_leaf
    perm = tree.perm
    s0 = tree.start[node]
    e0 = tree.end[node]
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    n_vars = prior_rule_counts(perm, s0, e0, is_cat, nbins, m, scratch, False)
    node_terms = NodeTerms(lm_sum, b_sum, tree.lm[node], tree.b[node], n_total)
    s_stop = math.log1p(-ps)
    n_node = float(e0 - s0)
    # Pass 0: the normaliser (running log-sum-exp); pass 1: the draw.
    log_total = s_stop
    goal = 0.0
    acc = 0.0
    for pass_ in range(2):
        if pass_ == 1:
            goal = math.log(rng.random()) + log_total
            acc = s_stop
            if goal <= acc:
                return log_total, -1, np.int64(0)
        for v in range(xt.shape[0]):
            count = scratch.counts[v]
            if count <= 0:
                continue
            nb = nbins[v]
            base = math.log(ps) - math.log(n_vars) - math.log(count)
            _fill_bins(xt, perm, s0, e0, v, nb, y, ycls, st, scratch.model)
            if not is_cat[v]:
                lo = scratch.lows[v]
                for c in range(lo, lo + int(count)):
                    sc = _split_score(st, np.int64(c), False, nb, target, node_terms, base, scratch.model)
                    if pass_ == 0:
                        log_total = _lse(log_total, sc)
                    else:
                        acc = _lse(acc, sc)
                        if goal <= acc:
                            return log_total, v, np.int64(c)
                continue
            present = _present_levels(st, nb, levels)
            for sub in range(1, (1 << present) - 1):
                rows_left = _subset_rows(st, sub, levels, present)
                if rows_left < m or n_node - rows_left < m:
                    continue
                mask = _subset_mask(sub, levels, present)
                sc = _split_score(st, mask, True, nb, target, node_terms, base, scratch.model)
                if pass_ == 0:
                    log_total = _lse(log_total, sc)
                else:
                    acc = _lse(acc, sc)
                    if goal <= acc:
                        for b in range(nb):
                            if st.n[b] == 0.0 and rng.random() < 0.5:
                                mask |= np.int64(1) << b
                        return log_total, v, mask
    # Rounding left the goal beyond the last option: stop (an option of positive mass).
    return log_total, -1, np.int64(0)


@helper
def _lse(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))
