"""Particle samplers of whole trees: the top-down particle filter (Lakshminarayanan, Roy & Teh
2013) and the conditional SMC of particle Gibbs (PG-BART paper, section 2.5 and Algorithm 2).

A particle is a partial tree grown breadth-first by the sequential generative process of the
tree prior (PG-BART section 2.5): it keeps a FIFO queue of *eligible* nodes (leaves with an
available rule; a node without one has p_SPLIT = 0 and never enters the queue). At each stage
every particle with a non-empty queue pops its head node and, with probability
p_SPLIT(depth), splits it with a rule drawn from p_RULE (``tree.sample_rule``: the same
conventions as every other sampler, categorical masks with random orientation and absent-level
bits included), pushing the children that are eligible; otherwise the node stays a leaf. The
proposal is the prior, so the weight update is the ratio of marginal likelihoods of the partial
tree after and before the stage (eq. 11), the eligible nodes counting as leaves. For the
common-sigma model (sigma integrated out) the marginal likelihood is not a product over leaves;
the ratio then includes the change of its global term (``tree.global_term``).

Particles live in stacked ``TreeArrays`` (``Particles.trees``, fields of shape (N, ...)), each
with its own row permutation, so a split partitions only its node's rows of that particle. Two
particle sets are used alternately: resampling copies the ancestors into the other set (only the
nodes in use: particles are grown from a root by ``split_leaf`` alone, so their nodes occupy the
slots 0 .. used-1). Nothing is allocated inside an update.

Conditional SMC (``csmc_update``): particle 0 replays the current tree T* in the same
breadth-first order (its decisions are read from T*), the others are resampled from all N at
every stage (Algorithm 2 line 15), and one particle is returned by the final weights.
``smc_run`` is the unconditional filter with resampling when the Kish ESS of the weights falls
below a threshold.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper, kernel
from .particle_proposal import optimal_choice
from .tree import (
    FREE,
    LEAF,
    M_N_FREE,
    TreeArrays,
    copy_unchecked,
    global_term,
    has_available_rule,
    leaf_terms,
    p_split,
    prior_rule_counts,
    reset_to_root,
    rule_log_prob,
    sample_rule,
    split_leaf,
)

RESAMPLE_SYSTEMATIC = 0
RESAMPLE_MULTINOMIAL = 1
RESAMPLING_NAMES = ("systematic", "multinomial")
PROPOSAL_PRIOR = 0
PROPOSAL_OPTIMAL = 1
PROPOSAL_NAMES = ("prior", "optimal")


class Particles(NamedTuple):
    """N particles: stacked trees and their growth state."""

    trees: TreeArrays  # fields stacked (N, ...)
    queue: np.ndarray  # int32[N, capacity]: eligible nodes, FIFO queue[head:tail]
    head: np.ndarray  # int64[N]
    tail: np.ndarray  # int64[N]
    lm_sum: np.ndarray  # float64[N]: sum of the cached leaf terms lm over the current leaves
    b_sum: np.ndarray  # float64[N]: sum of the leaf terms b (global term of the common-sigma model)


class Work(NamedTuple):
    """Per-update work arrays shared by both particle sets."""

    logw: np.ndarray  # float64[N]
    w: np.ndarray  # float64[N]: normalised weights
    anc: np.ndarray  # int64[N]: ancestors at a resampling step
    ref_map: np.ndarray  # int32[capacity]: node of T* replayed by each node of particle 0
    out: np.ndarray  # float64[3]: csmc: ESS of the last weights, stages, 1 if T* was returned
    ref_var: np.ndarray  # int64[capacity]: ancestor sampling: T*'s decision at each stage (LEAF: stop)
    ref_cut: np.ndarray  # int64[capacity]
    as_logw: np.ndarray  # float64[N]: ancestor-sampling log weights


@helper(inline=True)
def particle_view(p, i):
    """Particle i's tree as a ``TreeArrays`` of views (no copy)."""
    f = p.trees
    return TreeArrays(
        f.var[i], f.cut[i], f.left[i], f.right[i], f.parent[i], f.depth[i], f.start[i], f.end[i], f.lm[i],
        f.b[i], f.lp[i], f.value[i], f.leaf_sigma[i], f.leaf_prob[i], f.perm[i], f.free[i], f.meta[i],
    )


@helper
def _used(tree):
    """Node slots in use: particles allocate slots 0, 1, 2, ... in order and never free one."""
    return tree.var.shape[0] - tree.meta[M_N_FREE]


@helper
def _eligible(tree, node, data, target, scratch):
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    m = target.prior.min_leaf
    return has_available_rule(xt, tree.perm, tree.start[node], tree.end[node], is_cat, nbins, m, scratch.hist,
                              scratch.sums, target.prior.na_split)


@helper
def reset_root(p, i, root_lm, root_b, root_eligible):
    """Make particle i a root leaf holding every row (in row order)."""
    t = particle_view(p, i)
    reset_to_root(t, t.perm.shape[0], _used(t))
    t.lm[0] = root_lm
    t.b[0] = root_b
    p.head[i] = 0
    p.tail[i] = 0
    if root_eligible:
        p.queue[i, 0] = 0
        p.tail[i] = 1
    p.lm_sum[i] = root_lm
    p.b_sum[i] = root_b


@helper
def copy_particle(src, i, dst, j):
    """dst[j] = src[i] (tree nodes in use, rows, queue, sums)."""
    a = particle_view(src, i)
    b = particle_view(dst, j)
    used_a = _used(a)
    used_b = _used(b)
    for k in range(used_a):
        b.var[k] = a.var[k]
        b.cut[k] = a.cut[k]
        b.left[k] = a.left[k]
        b.right[k] = a.right[k]
        b.parent[k] = a.parent[k]
        b.depth[k] = a.depth[k]
        b.start[k] = a.start[k]
        b.end[k] = a.end[k]
        b.lm[k] = a.lm[k]
        b.b[k] = a.b[k]
        b.lp[k] = a.lp[k]
    for k in range(used_a, used_b):
        b.var[k] = FREE
        b.left[k] = -1
        b.right[k] = -1
    copy_unchecked(b.perm, a.perm)  # particles of one store: same lengths
    copy_unchecked(b.meta, a.meta)
    for k in range(src.head[i], src.tail[i]):
        dst.queue[j, k] = src.queue[i, k]
    dst.head[j] = src.head[i]
    dst.tail[j] = src.tail[i]
    dst.lm_sum[j] = src.lm_sum[i]
    dst.b_sum[j] = src.b_sum[i]


@helper
def copy_tree(a, b):
    """b = a, every node slot (the output tree may have been built by another sampler)."""
    # the node arrays share one length (the capacity), so three checks cover all fourteen copies
    if a.var.shape[0] != b.var.shape[0] or a.perm.shape[0] != b.perm.shape[0] or a.meta.shape[0] != b.meta.shape[0]:
        raise ValueError("copy_tree: the trees differ in node capacity or rows")
    copy_unchecked(b.var, a.var)
    copy_unchecked(b.cut, a.cut)
    copy_unchecked(b.left, a.left)
    copy_unchecked(b.right, a.right)
    copy_unchecked(b.parent, a.parent)
    copy_unchecked(b.depth, a.depth)
    copy_unchecked(b.start, a.start)
    copy_unchecked(b.end, a.end)
    copy_unchecked(b.lm, a.lm)
    copy_unchecked(b.b, a.b)
    copy_unchecked(b.lp, a.lp)
    copy_unchecked(b.perm, a.perm)
    copy_unchecked(b.free, a.free)
    copy_unchecked(b.meta, a.meta)


@helper
def _apply_split(p, i, t, node, v, cut, data, target, scratch, n_total):
    """Split ``node`` of particle i by (v, cut); returns (log weight increment of eq. 11, left
    child) or (0, -1) when the node capacity is exhausted (the node then stays a leaf)."""
    xt, is_cat, y, ycls = data.xt, data.is_cat, data.y, data.ycls
    lc, rc = split_leaf(t, xt, is_cat, node, v, cut, scratch.part_buf)
    if lc < 0:
        return 0.0, -1
    lm_l, b_l = leaf_terms(t, lc, y, ycls, target, scratch.class_counts, scratch.model)
    lm_r, b_r = leaf_terms(t, rc, y, ycls, target, scratch.class_counts, scratch.model)
    t.lm[lc] = lm_l
    t.b[lc] = b_l
    t.lm[rc] = lm_r
    t.b[rc] = b_r
    old = p.lm_sum[i] + global_term(p.b_sum[i], n_total, target, scratch.model)
    p.lm_sum[i] += lm_l + lm_r - t.lm[node]
    p.b_sum[i] += b_l + b_r - t.b[node]
    new = p.lm_sum[i] + global_term(p.b_sum[i], n_total, target, scratch.model)
    for child in (lc, rc):
        if _eligible(t, child, data, target, scratch):
            p.queue[i, p.tail[i]] = child
            p.tail[i] += 1
    return new - old, lc


@helper
def grow_step(rng, p, i, data, target, scratch, n_total):
    """One stage of particle i under the prior proposal (section 2.5); returns the log weight
    increment (eq. 11). The caller checks that the queue is not empty."""
    t = particle_view(p, i)
    node = p.queue[i, p.head[i]]
    p.head[i] += 1
    if rng.random() >= p_split(target.prior.alpha, target.prior.beta, t.depth[node]):
        return 0.0
    m = target.prior.min_leaf
    v, cut = sample_rule(rng, data, t.perm, t.start[node], t.end[node], m, scratch, target.prior.na_split)
    delta, _ = _apply_split(p, i, t, node, v, cut, data, target, scratch, n_total)
    return delta


@helper
def optimal_step(rng, p, i, data, target, scratch, proposal, n_total):
    """One stage of particle i under the one-step optimal proposal (``particle_proposal``; its work
    arrays in ``proposal``); returns the log weight increment (the proposal's normaliser)."""
    t = particle_view(p, i)
    node = p.queue[i, p.head[i]]
    p.head[i] += 1
    delta, v, cut = optimal_choice(rng, t, node, data, target, scratch, proposal, p.lm_sum[i], p.b_sum[i],
                                   n_total)
    if v >= 0:
        _apply_split(p, i, t, node, v, cut, data, target, scratch, n_total)
    return delta


@helper
def replay_step(p, ref, ref_map, data, target, scratch, n_total):
    """One stage of particle 0, clamped to the reference tree ``ref`` (Algorithm 2 line 7): the
    popped node takes T*'s decision at the corresponding node."""
    t = particle_view(p, 0)
    node = p.queue[0, p.head[0]]
    p.head[0] += 1
    r = ref_map[node]
    v = ref.var[r]
    if v == LEAF:
        return 0.0
    delta, lc = _apply_split(p, 0, t, node, v, ref.cut[r], data, target, scratch, n_total)
    ref_map[lc] = ref.left[r]
    ref_map[t.right[node]] = ref.right[r]
    return delta


@helper
def normalise(logw, w):
    """w = softmax(logw); returns (log sum exp(logw), Kish ESS of w)."""
    mx = -np.inf
    for k in range(logw.shape[0]):
        if logw[k] > mx:
            mx = logw[k]
    total = 0.0
    for k in range(logw.shape[0]):
        w[k] = math.exp(logw[k] - mx)
        total += w[k]
    sq = 0.0
    for k in range(logw.shape[0]):
        w[k] /= total
        sq += w[k] * w[k]
    return mx + math.log(total), 1.0 / sq


@helper
def _inverse_cdf(w, u, k, acc):
    """Advance (k, acc = w[0] + ... + w[k]) to the first k with acc > u (u increasing calls)."""
    n = w.shape[0]
    while acc <= u and k < n - 1:
        k += 1
        acc += w[k]
    return k, acc


@helper
def resample(rng, w, anc, first, scheme, ref_anc):
    """Ancestors ``anc[first:]`` from the normalised weights ``w``.

    Multinomial: independent draws. Systematic: the points (j + U) / N. With ``ref_anc >= 0``
    (``first`` = 1, slot 0 holding the reference, whose ancestor is ``ref_anc``), the systematic
    grid is drawn given that one of its points falls in that particle's interval (the
    conditional systematic resampling of Chopin & Singh 2015): the point s ~ U over the
    interval fixes U, the grid slot j0 = floor(N s) is the reference's, and the other N - 1
    points give ``anc[1:]``. This keeps the law of the other ancestors exactly that of
    systematic resampling with randomly permuted slots conditioned on the reference's ancestor,
    as conditional SMC needs (with ancestor sampling, ``ref_anc`` is drawn first from its
    marginal conditional, so this completes a blocked Gibbs step on all the ancestors).
    """
    n = w.shape[0]
    if scheme == RESAMPLE_MULTINOMIAL:
        for s in range(first, n):
            u = rng.random()
            k = 0
            acc = w[0]
            while acc <= u and k < n - 1:
                k += 1
                acc += w[k]
            anc[s] = k
        return
    if ref_anc >= 0:
        below = 0.0
        for k in range(ref_anc):
            below += w[k]
        s0 = below + rng.random() * w[ref_anc]
        j0 = int(s0 * n)
        if j0 >= n:
            j0 = n - 1
        shift = s0 * n - j0
    else:
        j0 = -1
        shift = rng.random()
    k = 0
    acc = w[0]
    slot = first
    for j in range(n):
        if j == j0:
            continue
        k, acc = _inverse_cdf(w, (j + shift) / n, k, acc)
        anc[slot] = k
        slot += 1


@helper
def _resample_into(rng, cur, nxt, work, scheme, ref_anc):
    """Resample ``cur`` into ``nxt`` by the normalised weights ``work.w`` and reset the log
    weights to 0 (equal). ``ref_anc < 0``: all N particles (SMC); else slot 0 is the reference
    and gets particle ``ref_anc`` (conditional SMC, Algorithm 2 lines 15-16)."""
    n_part = work.logw.shape[0]
    if ref_anc < 0:
        resample(rng, work.w, work.anc, 0, scheme, -1)
    else:
        resample(rng, work.w, work.anc, 1, scheme, ref_anc)
        work.anc[0] = ref_anc
    for i in range(n_part):
        copy_particle(cur, work.anc[i], nxt, i)
        work.logw[i] = 0.0


@helper
def _all_done(p, count):
    for i in range(count):
        if p.head[i] < p.tail[i]:
            return False
    return True


@helper
def _root_terms(p, data, target, scratch):
    """Leaf terms and eligibility of the root (all rows), computed on particle 0."""
    y, ycls = data.y, data.ycls
    reset_root(p, 0, 0.0, 0.0, False)
    t = particle_view(p, 0)
    lm, b = leaf_terms(t, 0, y, ycls, target, scratch.class_counts, scratch.model)
    return lm, b, _eligible(t, 0, data, target, scratch)


# -- ancestor sampling (Lindsten, Jordan & Schon 2014) --------------------------------------------
# A particle's path is its sequence of stage decisions (stop, or a stored rule (v, cut)) at the
# nodes it pops breadth-first. T*'s decisions d*_0, d*_1, ... (``reference_decisions``) can be
# applied to any partial tree: the concatenation of particle i's first s decisions with
# d*_s, d*_s+1, ... is a valid path when every rule is available at the node it lands on and
# the decisions use up the queue exactly.


@helper
def reference_decisions(ref, pc, work, data, target, scratch, n_total):
    """Replay T* (``ref``) on the one-particle set ``pc`` and store its decision at each stage in
    ``work.ref_var`` / ``work.ref_cut`` (LEAF for a stop); returns the number of stages."""
    root_lm, root_b, root_ok = _root_terms(pc, data, target, scratch)
    reset_root(pc, 0, root_lm, root_b, root_ok)
    work.ref_map[0] = 0
    stages = 0
    while pc.head[0] < pc.tail[0]:
        r = work.ref_map[pc.queue[0, pc.head[0]]]
        work.ref_var[stages] = ref.var[r]
        work.ref_cut[stages] = ref.cut[r]
        replay_step(pc, ref, work.ref_map, data, target, scratch, n_total)
        stages += 1
    return stages


@helper
def _rule_log_prior(t, node, v, cut, is_cat, nbins, target, scratch):
    """log p_RULE of the stored rule (v, cut) at ``node`` (``tree.rule_log_prob``), or -inf if
    the rule is not available there (a side with fewer than m rows)."""
    m = target.prior.min_leaf
    s0 = t.start[node]
    e0 = t.end[node]
    # The counts alone (no per-variable histograms: wide sparse data, ``prior_rule_counts``); a
    # factor's left-hand rows are counted from v's codes at the node.
    n_vars = prior_rule_counts(t.perm, s0, e0, is_cat, nbins, m, scratch, False)
    count = scratch.counts[v]
    if count <= 0:
        return -np.inf
    if is_cat[v]:
        left = 0
        xr = scratch.codes_by_row
        nb = nbins[v]
        for i in range(s0, e0):
            k = xr[t.perm[i], v]
            if k < nb and (cut >> k) & 1:
                left += 1
        if left < m or left > (e0 - s0) - m:
            return -np.inf
    else:
        lo = scratch.lows[v]
        if cut < lo or cut >= lo + count:
            return -np.inf
    return rule_log_prob(n_vars, count, scratch.extras[v], is_cat[v])


@helper
def forced_step(p, i, v, cut, data, target, scratch, n_total, with_prior):
    """Pop particle i's head node and apply the decision (v, cut) (``v == LEAF``: stop). Returns
    the change of log L (eq. 11), plus the decision's log prior if ``with_prior``; -inf when
    the rule is not available at the node (checked only ``with_prior``) or the node capacity is
    exhausted."""
    is_cat, nbins = data.is_cat, data.nbins
    t = particle_view(p, i)
    node = p.queue[i, p.head[i]]
    p.head[i] += 1
    out = 0.0
    if with_prior:
        ps = p_split(target.prior.alpha, target.prior.beta, t.depth[node])
        if v == LEAF:
            return math.log1p(-ps)
        lp = _rule_log_prior(t, node, v, cut, is_cat, nbins, target, scratch)
        if lp == -np.inf:
            return -np.inf
        out = math.log(ps) + lp
    elif v == LEAF:
        return 0.0
    delta, lc = _apply_split(p, i, t, node, v, cut, data, target, scratch, n_total)
    if lc < 0:
        return -np.inf
    return out + delta


@helper
def completion_log_ratio(src, i, pc, work, first, n_dec, data, target, scratch, n_total):
    """log [gamma(x^i_{<first}, d*_{first:}) / gamma(x^i_{<first})]: prior times likelihood of
    particle i's partial tree completed by T*'s decisions from stage ``first`` on, over those of
    the partial tree (-inf if the completion is not a valid path). Works on the scratch set
    ``pc``."""
    if src.head[i] >= src.tail[i]:
        return 0.0 if first >= n_dec else -np.inf
    # Each decision consumes one queued node: a longer queue cannot be used up.
    if src.tail[i] - src.head[i] > n_dec - first:
        return -np.inf
    copy_particle(src, i, pc, 0)
    total = 0.0
    for d in range(first, n_dec):
        if pc.head[0] >= pc.tail[0]:
            return -np.inf
        total += forced_step(pc, 0, work.ref_var[d], work.ref_cut[d], data, target, scratch,
                             n_total, True)
        if total == -np.inf or pc.tail[0] - pc.head[0] > n_dec - d - 1:
            return -np.inf
    return total


@helper
def ancestor_draw(rng, cur, pc, work, stage, n_dec, data, target, scratch, n_total):
    """Draw the reference's ancestor before ``stage`` (Lindsten, Jordan & Schon 2014, the
    ancestor-sampling weights of non-Markovian models): P(i) proportional to
    w_i * gamma(x^i, d*_{stage:}) / gamma(x^i)."""
    n_part = work.logw.shape[0]
    for i in range(n_part):
        work.as_logw[i] = work.logw[i] + completion_log_ratio(cur, i, pc, work, stage, n_dec, data, target, scratch,
        n_total)
    mx = -np.inf
    for i in range(n_part):
        if work.as_logw[i] > mx:
            mx = work.as_logw[i]
    total = 0.0
    for i in range(n_part):
        total += math.exp(work.as_logw[i] - mx)
    u = rng.random() * total
    acc = 0.0
    last = 0
    for i in range(n_part):
        e = math.exp(work.as_logw[i] - mx)
        if e > 0.0:
            last = i
            acc += e
            if u < acc:
                return i
    return last


@helper
def csmc_update(rng, ref, particles, data, target, scratch, scheme, ancestor, fstate,
                ess_threshold):
    """Particle Gibbs update of the tree ``ref`` (Algorithm 2): conditional SMC with particle 0
    clamped to ``ref``, then ``ref`` is overwritten by a particle drawn from the final weights
    (``fstate`` gets its leaf-term sums). Returns True if ``ref``'s partition may have changed.

    With ``ancestor`` True (particle Gibbs with ancestor sampling), before each resampling the
    reference's ancestor is drawn by ``ancestor_draw`` instead of being kept, and particle 0
    applies T*'s decision of the stage to the partial tree it inherits; ``pc`` is a one-particle
    scratch set. Without it ``ancestor`` is None, and numba compiles none of that.

    ``ess_threshold`` >= 1 resamples before every stage (Algorithm 2 line 15). Below 1 the
    particles are resampled before a stage only when the Kish ESS of their weights is at most
    ``ess_threshold`` times their number (pgbart's ``--ess_threshold``); otherwise every particle,
    the clamped one included, keeps its own path and its weight accumulates. The decision is a
    symmetric function of the whole particle system, so the update still leaves pi(T) invariant
    (checked against the enumerated posteriors in ``tests/test_pg_ess_threshold.py``); fewer
    resampling steps keep the free particles' own early decisions alive, which is what lets the
    top of the tree change (``benchmarks/results/pg_bart_hypercube.md``).

    ``ref`` must hold its leaf terms (lm, b) under the current response ``y`` only where the
    caller reads them afterwards; the replay recomputes every node it splits. ``work.out``
    receives (ESS of the last stage's weights, stages, 1 if T* itself was returned else 0).
    """
    pa, pb, pc, work = particles.a, particles.b, particles.c, particles.work
    y = data.y
    n_part = work.logw.shape[0]
    n_total = float(y.shape[0])
    n_dec = 0
    if ancestor is not None:
        n_dec = reference_decisions(ref, pc, work, data, target, scratch, n_total)
    root_lm, root_b, root_ok = _root_terms(pa, data, target, scratch)
    for i in range(n_part):
        reset_root(pa, i, root_lm, root_b, root_ok)
        work.logw[i] = 0.0
    work.ref_map[0] = 0
    cur = pa
    nxt = pb
    stages = 0
    ess = float(n_part)
    switched = False
    while not _all_done(cur, n_part):
        if stages > 0 and (ess_threshold >= 1.0 or ess <= ess_threshold * n_part):
            ref_anc = 0
            if ancestor is not None:
                ref_anc = ancestor_draw(rng, cur, pc, work, stages, n_dec, data, target,
                                        scratch, n_total)
                switched = switched or ref_anc != 0
            _resample_into(rng, cur, nxt, work, scheme, ref_anc)
            cur, nxt = nxt, cur
        for i in range(n_part):
            if cur.head[i] >= cur.tail[i]:
                continue
            if i == 0:
                if ancestor is not None:
                    delta = forced_step(cur, 0, work.ref_var[stages], work.ref_cut[stages], data, target, scratch,
                    n_total, False)
                else:
                    delta = replay_step(cur, ref, work.ref_map, data, target, scratch, n_total)
            else:
                delta = grow_step(rng, cur, i, data, target, scratch, n_total)
            work.logw[i] += delta  # eq. 11
        stages += 1
        _, ess = normalise(work.logw, work.w)
    if stages == 0:
        normalise(work.logw, work.w)
    u = rng.random()
    chosen = 0
    acc = work.w[0]
    while acc <= u and chosen < n_part - 1:
        chosen += 1
        acc += work.w[chosen]
    kept = chosen == 0 and not switched
    work.out[0] = ess
    work.out[1] = stages
    work.out[2] = 1.0 if kept else 0.0
    # Particle 0 unswitched is T* with its leaf terms under the current response.
    copy_tree(particle_view(cur, chosen), ref)
    fstate[0] = cur.lm_sum[chosen]
    fstate[1] = cur.b_sum[chosen]
    return not kept


@kernel
def smc_run(rng, pa, pb, work, data, target, scratch, settings, proposal):
    """The top-down particle filter (spec 2.2, node-wise breadth-first growth; ``proposal`` a
    ``particle_proposal.Proposal``: ``PROPOSAL_PRIOR`` or ``PROPOSAL_OPTIMAL`` with its work
    arrays): N = ``work.logw.shape[0]`` particles from the root; resample (``settings.scheme``,
    a ``records.PgSettings`` whose ``ancestor`` is unused) before a stage when the Kish ESS of the
    weights is at most ``settings.ess_threshold * N``. Returns the set holding the
    final particles; ``work.w`` holds their normalised weights and ``work.out`` (ESS of the final
    weights, stages, log evidence estimate log p(Y | X) relative to the root's term)."""
    scheme, ess_threshold = settings.scheme, settings.ess_threshold
    y = data.y
    n_part = work.logw.shape[0]
    n_total = float(y.shape[0])
    root_lm, root_b, root_ok = _root_terms(pa, data, target, scratch)
    for i in range(n_part):
        reset_root(pa, i, root_lm, root_b, root_ok)
        work.logw[i] = 0.0
    cur = pa
    nxt = pb
    stages = 0
    ess = float(n_part)
    log_z = 0.0
    while not _all_done(cur, n_part):
        if stages > 0 and ess <= ess_threshold * n_part:
            lse, _ = normalise(work.logw, work.w)
            log_z += lse - math.log(n_part)
            _resample_into(rng, cur, nxt, work, scheme, -1)
            cur, nxt = nxt, cur
        for i in range(n_part):
            if cur.head[i] >= cur.tail[i]:
                continue
            if proposal.kind == PROPOSAL_OPTIMAL:
                work.logw[i] += optimal_step(rng, cur, i, data, target, scratch, proposal, n_total)
            else:
                work.logw[i] += grow_step(rng, cur, i, data, target, scratch, n_total)
        stages += 1
        _, ess = normalise(work.logw, work.w)
    lse, ess = normalise(work.logw, work.w)
    work.out[0] = ess
    work.out[1] = stages
    work.out[2] = log_z + lse - math.log(n_part) + root_lm + global_term(root_b, n_total, target, scratch.model)
    return cur
