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
from numba import njit

from .particle_proposal import optimal_choice
from .tree import (
    FREE,
    H_ALPHA,
    H_BETA,
    H_MIN_LEAF,
    H_NA_SPLIT,
    LEAF,
    M_N_FREE,
    M_N_INTERNAL,
    M_N_LEAVES,
    TreeArrays,
    global_term,
    has_available_rule,
    leaf_terms,
    p_split,
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
    out: np.ndarray  # float64[3]: ESS of the last weights, stages, returned particle


@njit(cache=True, nogil=True)
def particle_view(p, i):
    """Particle i's tree as a ``TreeArrays`` of views (no copy)."""
    f = p.trees
    return TreeArrays(
        f.var[i], f.cut[i], f.left[i], f.right[i], f.parent[i], f.depth[i], f.start[i], f.end[i], f.lm[i],
        f.b[i], f.lp[i], f.value[i], f.leaf_sigma[i], f.leaf_prob[i], f.perm[i], f.free[i], f.meta[i],
    )


@njit(cache=True, nogil=True)
def _used(tree):
    """Node slots in use: particles allocate slots 0, 1, 2, ... in order and never free one."""
    return tree.var.shape[0] - tree.meta[M_N_FREE]


@njit(cache=True, nogil=True)
def _eligible(tree, node, xt, is_cat, nbins, hyper, scratch):
    m = int(hyper[H_MIN_LEAF])
    return has_available_rule(xt, tree.perm, tree.start[node], tree.end[node], is_cat, nbins, m, scratch.hist,
                              scratch.sums, hyper[H_NA_SPLIT] != 0.0)


@njit(cache=True, nogil=True)
def reset_root(p, i, root_lm, root_b, root_eligible):
    """Make particle i a root leaf holding every row (in row order)."""
    t = particle_view(p, i)
    used = _used(t)
    for k in range(used):
        t.var[k] = FREE
        t.left[k] = -1
        t.right[k] = -1
    n = t.perm.shape[0]
    for r in range(n):
        t.perm[r] = r
    cap = t.var.shape[0]
    t.var[0] = LEAF
    t.parent[0] = -1
    t.depth[0] = 0
    t.start[0] = 0
    t.end[0] = n
    t.lm[0] = root_lm
    t.b[0] = root_b
    t.lp[0] = np.nan
    t.meta[M_N_FREE] = cap - 1
    t.meta[M_N_LEAVES] = 1
    t.meta[M_N_INTERNAL] = 0
    p.head[i] = 0
    p.tail[i] = 0
    if root_eligible:
        p.queue[i, 0] = 0
        p.tail[i] = 1
    p.lm_sum[i] = root_lm
    p.b_sum[i] = root_b


@njit(cache=True, nogil=True)
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
    b.perm[:] = a.perm
    b.meta[:] = a.meta
    for k in range(src.head[i], src.tail[i]):
        dst.queue[j, k] = src.queue[i, k]
    dst.head[j] = src.head[i]
    dst.tail[j] = src.tail[i]
    dst.lm_sum[j] = src.lm_sum[i]
    dst.b_sum[j] = src.b_sum[i]


@njit(cache=True, nogil=True)
def copy_tree(a, b):
    """b = a, every node slot (the output tree may have been built by another sampler)."""
    b.var[:] = a.var
    b.cut[:] = a.cut
    b.left[:] = a.left
    b.right[:] = a.right
    b.parent[:] = a.parent
    b.depth[:] = a.depth
    b.start[:] = a.start
    b.end[:] = a.end
    b.lm[:] = a.lm
    b.b[:] = a.b
    b.lp[:] = a.lp
    b.perm[:] = a.perm
    b.free[:] = a.free
    b.meta[:] = a.meta


@njit(cache=True, nogil=True)
def _apply_split(p, i, t, node, v, cut, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total):
    """Split ``node`` of particle i by (v, cut); returns (log weight increment of eq. 11, left
    child) or (0, -1) when the node capacity is exhausted (the node then stays a leaf)."""
    lc, rc = split_leaf(t, xt, is_cat, node, v, cut, scratch.part_buf)
    if lc < 0:
        return 0.0, -1
    lm_l, b_l = leaf_terms(t, lc, y, ycls, hyper, scratch.class_counts)
    lm_r, b_r = leaf_terms(t, rc, y, ycls, hyper, scratch.class_counts)
    t.lm[lc] = lm_l
    t.b[lc] = b_l
    t.lm[rc] = lm_r
    t.b[rc] = b_r
    old = p.lm_sum[i] + global_term(p.b_sum[i], n_total, hyper)
    p.lm_sum[i] += lm_l + lm_r - t.lm[node]
    p.b_sum[i] += b_l + b_r - t.b[node]
    new = p.lm_sum[i] + global_term(p.b_sum[i], n_total, hyper)
    for child in (lc, rc):
        if _eligible(t, child, xt, is_cat, nbins, hyper, scratch):
            p.queue[i, p.tail[i]] = child
            p.tail[i] += 1
    return new - old, lc


@njit(cache=True, nogil=True)
def grow_step(rng, p, i, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total):
    """One stage of particle i under the prior proposal (section 2.5); returns the log weight
    increment (eq. 11). The caller checks that the queue is not empty."""
    t = particle_view(p, i)
    node = p.queue[i, p.head[i]]
    p.head[i] += 1
    if rng.random() >= p_split(hyper[H_ALPHA], hyper[H_BETA], t.depth[node]):
        return 0.0
    m = int(hyper[H_MIN_LEAF])
    v, cut = sample_rule(rng, xt, t.perm, t.start[node], t.end[node], is_cat, nbins, m, scratch.hist,
                         scratch.sums, scratch.var_order, hyper[H_NA_SPLIT] != 0.0)
    delta, _ = _apply_split(p, i, t, node, v, cut, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
    return delta


@njit(cache=True, nogil=True)
def optimal_step(rng, p, i, xt, is_cat, nbins, y, ycls, hyper, scratch, bins, levels, n_total):
    """One stage of particle i under the one-step optimal proposal (``particle_proposal``);
    returns the log weight increment (the proposal's normaliser)."""
    t = particle_view(p, i)
    node = p.queue[i, p.head[i]]
    p.head[i] += 1
    delta, v, cut = optimal_choice(rng, t, node, xt, is_cat, nbins, y, ycls, hyper, scratch, bins, levels,
                                   p.lm_sum[i], p.b_sum[i], n_total)
    if v >= 0:
        _apply_split(p, i, t, node, v, cut, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
    return delta


@njit(cache=True, nogil=True)
def replay_step(p, ref, ref_map, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total):
    """One stage of particle 0, clamped to the reference tree ``ref`` (Algorithm 2 line 7): the
    popped node takes T*'s decision at the corresponding node."""
    t = particle_view(p, 0)
    node = p.queue[0, p.head[0]]
    p.head[0] += 1
    r = ref_map[node]
    v = ref.var[r]
    if v == LEAF:
        return 0.0
    delta, lc = _apply_split(p, 0, t, node, v, ref.cut[r], xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
    ref_map[lc] = ref.left[r]
    ref_map[t.right[node]] = ref.right[r]
    return delta


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _inverse_cdf(w, u, k, acc):
    """Advance (k, acc = w[0] + ... + w[k]) to the first k with acc > u (u increasing calls)."""
    n = w.shape[0]
    while acc <= u and k < n - 1:
        k += 1
        acc += w[k]
    return k, acc


@njit(cache=True, nogil=True)
def resample(rng, w, anc, first, scheme, conditional):
    """Ancestors ``anc[first:]`` from the normalised weights ``w``.

    Multinomial: independent draws. Systematic: the points (j + U) / N. With ``conditional``
    (``first`` = 1, slot 0 holding the reference with ancestor 0), the systematic grid is drawn
    given that one of its points falls in particle 0's interval [0, w[0]) (the conditional
    systematic resampling of Chopin & Singh 2015): the point s ~ U(0, w[0]) fixes U, the grid
    slot j0 = floor(N s) is the reference's, and the other N - 1 points give ``anc[1:]``.
    This keeps the law of the other ancestors exactly that of systematic resampling with
    randomly permuted slots conditioned on the reference's ancestor, as conditional SMC needs.
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
    if conditional:
        s0 = rng.random() * w[0]
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


@njit(cache=True, nogil=True)
def _all_done(p, count):
    for i in range(count):
        if p.head[i] < p.tail[i]:
            return False
    return True


@njit(cache=True, nogil=True)
def _root_terms(p, xt, is_cat, nbins, y, ycls, hyper, scratch):
    """Leaf terms and eligibility of the root (all rows), computed on particle 0."""
    reset_root(p, 0, 0.0, 0.0, False)
    t = particle_view(p, 0)
    lm, b = leaf_terms(t, 0, y, ycls, hyper, scratch.class_counts)
    return lm, b, _eligible(t, 0, xt, is_cat, nbins, hyper, scratch)


@njit(cache=True, nogil=True)
def csmc_update(rng, ref, pa, pb, work, xt, is_cat, nbins, y, ycls, hyper, scratch, scheme, fstate):
    """Particle Gibbs update of the tree ``ref`` (Algorithm 2): conditional SMC with particle 0
    clamped to ``ref``, then ``ref`` is overwritten by a particle drawn from the final weights
    (``fstate`` gets its leaf-term sums). Returns True if ``ref``'s partition may have changed.

    ``ref`` must hold its leaf terms (lm, b) under the current response ``y`` only where the
    caller reads them afterwards; the replay recomputes every node it splits. ``work.out``
    receives (ESS of the last stage's weights, stages, returned particle index).
    """
    n_part = work.logw.shape[0]
    n_total = float(y.shape[0])
    root_lm, root_b, root_ok = _root_terms(pa, xt, is_cat, nbins, y, ycls, hyper, scratch)
    for i in range(n_part):
        reset_root(pa, i, root_lm, root_b, root_ok)
        work.logw[i] = 0.0
    work.ref_map[0] = 0
    cur = pa
    nxt = pb
    stages = 0
    ess = float(n_part)
    while not _all_done(cur, n_part):
        if stages > 0:
            # Algorithm 2 lines 15-16: resample all but the clamped particle; equal weights.
            resample(rng, work.w, work.anc, 1, scheme, True)
            work.anc[0] = 0
            for i in range(n_part):
                copy_particle(cur, work.anc[i], nxt, i)
                work.logw[i] = 0.0
            cur, nxt = nxt, cur
        for i in range(n_part):
            if cur.head[i] >= cur.tail[i]:
                continue
            if i == 0:
                delta = replay_step(cur, ref, work.ref_map, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
            else:
                delta = grow_step(rng, cur, i, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
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
    work.out[0] = ess
    work.out[1] = stages
    work.out[2] = chosen
    changed = chosen != 0
    if changed:
        copy_tree(particle_view(cur, chosen), ref)
    else:
        # The replayed particle 0 is T* with its leaf terms under the current response.
        copy_tree(particle_view(cur, 0), ref)
    fstate[0] = cur.lm_sum[chosen]
    fstate[1] = cur.b_sum[chosen]
    return changed


@njit(cache=True, nogil=True)
def smc_run(rng, pa, pb, work, xt, is_cat, nbins, y, ycls, hyper, scratch, scheme, ess_threshold, proposal, bins,
            levels):
    """The top-down particle filter (spec 2.2, node-wise breadth-first growth; ``proposal``
    ``PROPOSAL_PRIOR`` or ``PROPOSAL_OPTIMAL`` with its work arrays ``bins``, ``levels``):
    N = ``work.logw.shape[0]`` particles from the root; resample (``scheme``) before a stage when
    the Kish ESS of the weights is at most ``ess_threshold * N``. Returns the set holding the
    final particles; ``work.w`` holds their normalised weights and ``work.out`` (ESS of the final
    weights, stages, log evidence estimate log p(Y | X) relative to the root's term)."""
    n_part = work.logw.shape[0]
    n_total = float(y.shape[0])
    root_lm, root_b, root_ok = _root_terms(pa, xt, is_cat, nbins, y, ycls, hyper, scratch)
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
            resample(rng, work.w, work.anc, 0, scheme, False)
            for i in range(n_part):
                copy_particle(cur, work.anc[i], nxt, i)
                work.logw[i] = 0.0
            cur, nxt = nxt, cur
        for i in range(n_part):
            if cur.head[i] >= cur.tail[i]:
                continue
            if proposal == PROPOSAL_OPTIMAL:
                work.logw[i] += optimal_step(rng, cur, i, xt, is_cat, nbins, y, ycls, hyper, scratch, bins, levels,
                                             n_total)
            else:
                work.logw[i] += grow_step(rng, cur, i, xt, is_cat, nbins, y, ycls, hyper, scratch, n_total)
        stages += 1
        _, ess = normalise(work.logw, work.w)
    lse, ess = normalise(work.logw, work.w)
    work.out[0] = ess
    work.out[1] = stages
    work.out[2] = log_z + lse - math.log(n_part) + root_lm + global_term(root_b, n_total, hyper)
    return cur
