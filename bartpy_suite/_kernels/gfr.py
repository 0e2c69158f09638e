"""Grow-from-root (GFR, "XBART": He, Yalov & Hahn 2019; He & Hahn 2021) for BART regression:
every tree of a sweep is regrown from its root (spec ``gfr.md`` sections 2-3).

One sweep (spec section 2, our recommendation there: leaves after the tree, sigma^2 once per
sweep) is the backfitting loop of ``backfit.py`` with the MH move replaced by a fresh top-down
draw::

    begin_sweep(state, forest)
    for j in range(trees):
        tree = prepare_tree(state, forest, j)     # partial residual R_j in state.resid
        grow_from_root(...)                        # the old tree j is discarded, not edited
        finish_tree(rng, state, forest, j, True)   # leaf map, leaf draws (preorder), next residual
    draw_noise(rng, state)                         # sigma^2 | full residual

Growing one tree (spec 3.5): an explicit stack pops nodes in preorder. At a node eta with n rows,
residual sum S, at depth d, every available rule o = (v, rule) (both children >= ``min_leaf_size``
rows, the package's prior convention, ``tree.py``) and "no split" get a log weight (spec 3.2)

    weights "B" (the package's tree prior; default):
        lam(v, rule) = l(n_L, S_L) + l(n_R, S_R) + log p_d - log |V_eta| - log K_v
        lam(stop)    = l(n, S) + log(1 - p_d)
    weights "U" (XBART and stochtree: uniform over all K candidate rules of the node):
        lam(v, rule) = l(n_L, S_L) + l(n_R, S_R) + log p_d - log K
        lam(stop)    = l(n, S) + log(1 - p_d)
        (K counts a numeric variable's available cut indices, several of which give one
        partition when bins between them are empty at the node (spec 3.1), and a factor's
        partitions: its two masks of one partition share one candidate's mass)

with p_d = alpha (1 + d)^-beta, l(n, S) = -1/2 log(1 + n tau/sigma^2) + tau S^2 / (2 sigma^2
(sigma^2 + n tau)) the leaf log marginal of spec section 1 (``likelihood.
leaf_log_marginal_normal_known_variance``; the terms common to every option cancel), V_eta the
variables with an available rule and K_v their counts. Mode "U" is spec 3.2's mode U written with
the common factor p_d / K moved from the stop option to the splits. One option is drawn with
probability exp(lam) / sum exp(lam) by a single scan in the fixed order stop, then variables in
index order, each variable's rules ascending (spec 3.3); log-sum-exp, so no weight overflows.
A node is a leaf without a draw at depth ``max_depth``, with fewer than 2 m rows, with no
available rule (spec 3.4), or when the tree's node arrays are full (255 nodes, the BART chains'
capacity ``samplers/forest.BART_MAX_NODES``: the GFR tree is always a valid state of the MCMC).

Factor rules (spec 6): every ordered subset of the levels present at the node is a rule (as in
the prior) when the node has at most ``GFR_EXACT_LEVELS`` = 12 present levels; above that the
levels are sorted by mean residual (ties by level index) and the rules are the prefixes "first t
levels left" and "first t levels right" (Fisher 1958), K_v their valid count. After a factor rule
is drawn, the bit of each level absent from the node is drawn with probability 1/2, the tree
representation convention of ``tree.py``.

Node statistics (spec 5.2): per-bin counts and residual sums of every predictor, one histogram
slot per depth; only the smaller child's histogram is built from its rows, the larger one is its
parent's minus it. Every node's rows stay sorted (the root starts from the identity permutation
and ``tree.partition`` is stable), which the MCMC samplers require of a tree they continue from.

What it targets (spec 10): GFR draws tree j from the sequential proposal q(T | R_j) = product
over evaluated nodes of the chosen option's probability, which compares splits as if the
children were final leaves. This is not the conditional posterior p(T | R_j) that a Gibbs step
would need, so a GFR chain is a stochastic search whose stationary distribution is not the BART
posterior. With the likelihood off (all l = 0) mode "B" draws every tree exactly from the BART
tree prior (truncated at ``max_depth`` and the node capacity); ``tests/test_gfr.py`` checks that
and q itself against an enumeration.

Prior and sigma^2 are read once per tree (``tree_settings``), so that a change of how the
kernels receive them touches that function; besides it only ``draw_sigma_before_tree``
(``sigma_update="tree"``) reads nu, lambda and writes sigma^2, as ``backfit.draw_noise`` does.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import (
    SIGMA_SAMPLED,
    begin_sweep,
    draw_noise,
    finish_tree,
    prepare_tree,
    record_forest,
)
from .jit import helper, kernel
from .kept import kept_draw
from .likelihood import draw_inverse_gamma, leaf_log_marginal_normal_known_variance
from .tree import (
    LOG2,
    M_SPAN,
    p_split,
    reset_to_root,
    scan_draw,
    split_leaf,
)

# Indices into ``GfrWork.conf`` (int64).
C_WEIGHTS = 0  # WEIGHTS_B or WEIGHTS_U
C_MAX_DEPTH = 1  # nodes at this depth are leaves
C_SIGMA_UPDATE = 2  # SIGMA_PER_SWEEP or SIGMA_PER_TREE
N_CONF = 3

WEIGHTS_B = 0
WEIGHTS_U = 1
SIGMA_PER_SWEEP = 0
SIGMA_PER_TREE = 1

#: Most levels present at a node for which every ordered level subset is a candidate rule
#: (2^12 - 2 = 4094 rules, spec 6); above, Fisher's ordered prefixes.
GFR_EXACT_LEVELS = 12


class GfrWork(NamedTuple):
    """Work arrays of one GFR chain (``new_work``); nothing is allocated per sweep."""

    conf: np.ndarray  # int64[N_CONF]
    off: np.ndarray  # int64[p + 1]: first histogram cell of each predictor
    hn: np.ndarray  # int64[slots, cells]: per-bin row counts, one slot per depth
    hs: np.ndarray  # float64[slots, cells]: per-bin residual sums
    tn: np.ndarray  # int64[cells]: the smaller child's counts, built from its rows
    ts: np.ndarray  # float64[cells]
    lam: np.ndarray  # float64[options]: log weights of the node's candidate rules
    ovar: np.ndarray  # int64[options]: their variable
    ocut: np.ndarray  # int64[options]: their cut index or level mask
    kvar: np.ndarray  # float64[p]: candidate rules per variable at the node
    levels: np.ndarray  # int64[max bins]: levels present at the node (factor rules)
    keys: np.ndarray  # float64[max bins]: their mean residuals (Fisher order)
    stack_node: np.ndarray  # int64[max_depth + 3]: pending nodes
    stack_slot: np.ndarray  # int64[max_depth + 3]: their histogram slots


def max_options(nbins: np.ndarray, is_cat: np.ndarray) -> int:
    """Most candidate rules one node can have (length of the option buffers)."""
    total = 0
    for nb, cat in zip(np.asarray(nbins), np.asarray(is_cat)):
        nb = int(nb)
        if cat:
            exact = (1 << min(nb, GFR_EXACT_LEVELS)) - 2
            total += max(exact, 2 * (nb - 1), 0)
        else:
            total += max(nb - 1, 0)
    return max(total, 1)


def new_work(nbins: np.ndarray, is_cat: np.ndarray, *, weights: int, max_depth: int, sigma_update: int) -> GfrWork:
    """Work arrays for predictors with ``nbins`` bins (``is_cat``: factors) and the settings."""
    nbins = np.asarray(nbins, dtype=np.int64)
    p = nbins.shape[0]
    off = np.zeros(p + 1, dtype=np.int64)
    off[1:] = np.cumsum(nbins)
    cells = max(int(off[-1]), 1)
    slots = max_depth + 1
    n_opt = max_options(nbins, is_cat)
    max_bins = max(int(nbins.max()) if p else 1, 1)
    conf = np.zeros(N_CONF, dtype=np.int64)
    conf[C_WEIGHTS] = weights
    conf[C_MAX_DEPTH] = max_depth
    conf[C_SIGMA_UPDATE] = sigma_update
    return GfrWork(
        conf=conf, off=off, hn=np.zeros((slots, cells), dtype=np.int64), hs=np.zeros((slots, cells)),
        tn=np.zeros(cells, dtype=np.int64), ts=np.zeros(cells), lam=np.zeros(n_opt),
        ovar=np.zeros(n_opt, dtype=np.int64), ocut=np.zeros(n_opt, dtype=np.int64), kvar=np.zeros(max(p, 1)),
        levels=np.zeros(max_bins, dtype=np.int64), keys=np.zeros(max_bins),
        stack_node=np.zeros(max_depth + 3, dtype=np.int64), stack_slot=np.zeros(max_depth + 3, dtype=np.int64),
    )


@helper
def tree_settings(target):
    """The prior and sigma^2 one tree is grown under (``records.Target``): (alpha, beta, m, a
    ``LeafLik``). The only place the GFR kernel reads the prior."""
    prior = target.prior
    return prior.alpha, prior.beta, prior.min_leaf, LeafLik(target.sigma2[0], prior.tau2, prior.likelihood)


class LeafLik(NamedTuple):
    """What the likelihood part l(n, S) of a leaf is computed with (``leaf_ell``)."""

    sigma2: float
    tau2: float
    use_lik: bool  # False: l = 0 (the prior)


@helper
def reset_tree(tree, n):
    """Make ``tree`` a single root leaf over rows 0..n-1 in ascending order (free slots as a new
    tree's, ``tree.new_tree``)."""
    reset_to_root(tree, n, tree.meta[M_SPAN])
    cap = tree.var.shape[0]
    for k in range(cap - 1):
        tree.free[k] = cap - 1 - k


@helper
def fill_histogram(xr, perm, start, end, resid, off, hn, hs):
    """Per-bin counts and residual sums of every predictor over rows ``perm[start:end]``
    (``xr`` the row-major codes (n, p))."""
    for c in range(hn.shape[0]):
        hn[c] = 0
        hs[c] = 0.0
    p = xr.shape[1]
    for i in range(start, end):
        r = perm[i]
        row = xr[r]
        y = resid[r]
        for v in range(p):
            c = off[v] + row[v]
            hn[c] += 1
            hs[c] += y


@helper
def leaf_ell(n, s, lik):
    """l(n, S) of spec section 1 (``lik`` a ``LeafLik``), 0 with the likelihood off."""
    if not lik.use_lik:
        return 0.0
    return leaf_log_marginal_normal_known_variance(n, s, lik.sigma2, lik.tau2)


@helper
def _partition_ell(nl, sl, n, s, lik):
    """The likelihood part of a candidate rule's log weight, l(n_L, S_L) + l(n_R, S_R), at a node
    of n rows and residual sum s with nl rows and sum sl on the left."""
    return leaf_ell(nl, sl, lik) + leaf_ell(n - nl, s - sl, lik)


@helper(inline=True)
def _put_option(work, o, ell, v, cut):
    """Write option ``o`` (rule (v, cut), log weight ``ell``) into the buffers; return o + 1."""
    work.lam[o] = ell
    work.ovar[o] = v
    work.ocut[o] = cut
    return o + 1


@helper
def _factor_options(hn, hs, base, nb, v, n, m, lik, work, o):
    """Append factor v's candidate rules at a node (histogram cells ``base``..``base + nb - 1``)
    to the option buffers from index ``o``; return the new end."""
    levels = work.levels
    present = 0
    total_s = 0.0
    for b in range(nb):
        if hn[base + b] > 0:
            levels[present] = b
            present += 1
            total_s += hs[base + b]
    if present < 2:
        return o
    if present <= GFR_EXACT_LEVELS:
        for sub in range(1, (1 << present) - 1):
            nl = 0
            sl = 0.0
            mask = np.int64(0)
            for t in range(present):
                if (sub >> t) & 1:
                    lev = levels[t]
                    nl += hn[base + lev]
                    sl += hs[base + lev]
                    mask |= np.int64(1) << lev
            if nl < m or n - nl < m:
                continue
            o = _put_option(work, o, _partition_ell(nl, sl, n, total_s, lik), v, mask)
        return o
    # Fisher's order: present levels by mean residual, ties by level index (insertion sort is stable).
    keys = work.keys
    for t in range(present):
        keys[t] = hs[base + levels[t]] / hn[base + levels[t]]
    for t in range(1, present):
        lev = levels[t]
        key = keys[t]
        u = t - 1
        while u >= 0 and keys[u] > key:
            levels[u + 1] = levels[u]
            keys[u + 1] = keys[u]
            u -= 1
        levels[u + 1] = lev
        keys[u + 1] = key
    all_mask = np.int64(0)
    for t in range(present):
        all_mask |= np.int64(1) << levels[t]
    nl = 0
    sl = 0.0
    prefix = np.int64(0)
    for t in range(present - 1):
        lev = levels[t]
        nl += hn[base + lev]
        sl += hs[base + lev]
        prefix |= np.int64(1) << lev
        if nl < m or n - nl < m:
            continue
        ell = _partition_ell(nl, sl, n, total_s, lik)
        o = _put_option(work, o, ell, v, prefix)  # prefix left, then prefix right
        o = _put_option(work, o, ell, v, all_mask & ~prefix)
    return o


@helper
def node_options(hn, hs, is_cat, nbins, n, s_node, m, lik, work):
    """Fill the option buffers with every candidate rule of a node with histograms ``hn``/``hs``
    (one slot, cells from ``work.off``), ``n`` rows and residual sum ``s_node``, their log weights
    holding the likelihood part l(n_L, S_L) + l(n_R, S_R) only (``lik`` a ``LeafLik``);
    ``work.kvar[v]`` gets each variable's count. Returns the number of options and of variables
    with at least one (spec 3.1)."""
    off = work.off
    o = 0
    n_vars = 0
    for v in range(nbins.shape[0]):
        first = o
        base = off[v]
        nb = nbins[v]
        if is_cat[v]:
            o = _factor_options(hn, hs, base, nb, v, n, m, lik, work, o)
        else:
            cum_n = 0
            cum_s = 0.0
            last_n = -1
            last_ell = 0.0
            for k in range(nb - 1):
                cum_n += hn[base + k]
                cum_s += hs[base + k]
                if cum_n > n - m:
                    break
                if cum_n < m:
                    continue
                if cum_n != last_n:  # empty bins repeat a partition: its weight is computed once (spec 4.3)
                    last_ell = _partition_ell(cum_n, cum_s, n, s_node, lik)
                    last_n = cum_n
                o = _put_option(work, o, last_ell, v, np.int64(k))
        work.kvar[v] = o - first
        if o > first:
            n_vars += 1
    return o, n_vars


@helper
def add_prior_terms(work, n_opt, n_vars, ps, mode, is_cat):
    """Add each option's log prior mass relative to "stop" (spec 3.2): log p_d - log |V| - log K_v
    (mode B) or log p_d - log K (mode U). In mode U a candidate is a partition of the node's rows:
    a factor's rules come in pairs (a level set and its complement, both ordered masks of one
    partition), so a factor counts K_v / 2 candidates and each mask half a candidate's mass."""
    lp = math.log(ps)
    if mode == WEIGHTS_U:
        k = 0.0
        for v in range(is_cat.shape[0]):
            k += 0.5 * work.kvar[v] if is_cat[v] else work.kvar[v]
        lp -= math.log(k)
        for o in range(n_opt):
            work.lam[o] += lp - LOG2 if is_cat[work.ovar[o]] else lp
        return
    lp -= math.log(n_vars)
    for o in range(n_opt):
        work.lam[o] += lp - math.log(work.kvar[work.ovar[o]])


@helper
def draw_option(rng, lam, n_opt, lam_stop):
    """Index of the drawn option (-1: stop) with probabilities exp(lam) / sum exp(lam), one
    uniform and one scan in the fixed order stop, options 0..n_opt-1 (spec 3.3)."""
    top = lam_stop
    for o in range(n_opt):
        if lam[o] > top:
            top = lam[o]
    total = math.exp(lam_stop - top)
    for o in range(n_opt):
        total += math.exp(lam[o] - top)
    u = rng.random() * total
    acc = math.exp(lam_stop - top)
    if u < acc:
        return -1
    # rounding carrying u past the end: the last option of positive weight
    return scan_draw(lam, None, n_opt, top, u, acc, -1)


@helper
def node_total(hn, hs, off):
    """Rows and residual sum of a node from its histogram slot (predictor 0's cells)."""
    n = 0
    s = 0.0
    for c in range(off[0], off[1]):
        n += hn[c]
        s += hs[c]
    return n, s


@helper
def grow_from_root(rng, tree, data, xr, target, buf, work):
    """Replace ``tree`` by a tree grown from its root on the partial residual ``resid``
    (module docstring); every leaf gets its residual sum in ``b`` and its l in ``lm`` for the
    leaf draws. Returns the number of nodes that stayed leaves because the node arrays were full."""
    alpha, beta, m, lik = tree_settings(target)
    xt, is_cat, nbins, resid = data.xt, data.is_cat, data.nbins, data.y
    mode = work.conf[C_WEIGHTS]
    max_depth = work.conf[C_MAX_DEPTH]
    n = resid.shape[0]
    off = work.off
    reset_tree(tree, n)
    fill_histogram(xr, tree.perm, 0, n, resid, off, work.hn[0], work.hs[0])
    work.stack_node[0] = 0
    work.stack_slot[0] = 0
    top = 1
    truncated = 0
    while top > 0:
        top -= 1
        node = work.stack_node[top]
        h = work.stack_slot[top]
        hn = work.hn[h]
        hs = work.hs[h]
        n_node, s_node = node_total(hn, hs, off)
        ell_node = leaf_ell(n_node, s_node, lik)
        tree.b[node] = s_node if lik.use_lik else 0.0
        tree.lm[node] = ell_node
        d = tree.depth[node]
        if d >= max_depth or n_node < 2 * m:
            continue
        n_opt, n_vars = node_options(hn, hs, is_cat, nbins, n_node, s_node, m, lik, work)
        if n_opt == 0:
            continue
        ps = p_split(alpha, beta, d)
        add_prior_terms(work, n_opt, n_vars, ps, mode, is_cat)
        o = draw_option(rng, work.lam, n_opt, ell_node + math.log1p(-ps))
        if o < 0:
            continue
        v = work.ovar[o]
        cut = work.ocut[o]
        if is_cat[v]:  # bits of the levels absent from the node: uniform (tree.py's convention)
            base = off[v]
            for b in range(nbins[v]):
                if hn[base + b] == 0 and rng.random() < 0.5:
                    cut |= np.int64(1) << b
        lc, rc = split_leaf(tree, xt, is_cat, node, v, cut, buf)
        if lc < 0:
            truncated += 1
            continue
        s = tree.start[node]
        mid = tree.end[lc]
        e = tree.end[node]
        # The smaller child's histogram from its rows, the larger one's by subtraction: the
        # right child's goes to slot h (the parent's is no longer needed), the left's to h + 1.
        small_left = mid - s <= e - mid
        if small_left:
            fill_histogram(xr, tree.perm, s, mid, resid, off, work.tn, work.ts)
        else:
            fill_histogram(xr, tree.perm, mid, e, resid, off, work.tn, work.ts)
        left_n = work.hn[h + 1]
        left_s = work.hs[h + 1]
        for c in range(work.tn.shape[0]):
            rest_n = hn[c] - work.tn[c]
            rest_s = hs[c] - work.ts[c]
            if small_left:
                left_n[c] = work.tn[c]
                left_s[c] = work.ts[c]
                hn[c] = rest_n
                hs[c] = rest_s
            else:
                left_n[c] = rest_n
                left_s[c] = rest_s
                hn[c] = work.tn[c]
                hs[c] = work.ts[c]
        work.stack_node[top] = rc
        work.stack_slot[top] = h
        top += 1
        work.stack_node[top] = lc
        work.stack_slot[top] = h + 1
        top += 1
    return truncated


@helper
def draw_sigma_before_tree(rng, state, forest, j):
    """XBART's order (spec section 2, ``sigma_update="tree"``): sigma^2 from its full conditional
    given the full residual with tree j at its previous fit, before tree j is regrown."""
    prior = state.target.prior
    nu = prior.nu
    lam = prior.lam
    if not prior.likelihood:
        state.target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)
        return
    resid = state.resid
    leaf_of = state.leaf_of[j]
    value = forest.value[j]
    ss = 0.0
    for i in range(resid.shape[0]):
        r = resid[i] - value[leaf_of[i]]
        ss += r * r
    state.target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * (nu + resid.shape[0]), 0.5 * (nu * lam + ss))


@helper(inline=True)
def gfr_sweep(rng, forest, state, data, scratch, work):
    """One GFR sweep (module docstring); returns the nodes left unsplit for lack of room."""
    per_tree = work.conf[C_SIGMA_UPDATE] == SIGMA_PER_TREE and state.sigma_mode[0] == SIGMA_SAMPLED
    truncated = 0
    begin_sweep(state, forest)
    for j in range(forest.var.shape[0]):
        tree = prepare_tree(state, forest, j)
        if per_tree:
            draw_sigma_before_tree(rng, state, forest, j)
        truncated += grow_from_root(rng, tree, data, scratch.codes_by_row, state.target, scratch.part_buf, work)
        finish_tree(rng, state, forest, j, True)
    if not per_tree:
        draw_noise(rng, state)
    return truncated


@kernel
def run_gfr_chain(rng, forest, state, data, scratch, work, window, out_sigma, out_truncated, out):
    """Advance a GFR chain by up to ``n_iter`` sweeps from global iteration ``first_iter``; as
    ``bart_chain.run_bart_chain`` (returns ``(iterations done, pending draw index)``)."""
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    for step in range(n_iter):
        it = first_iter + step
        truncated = gfr_sweep(rng, forest, state, data, scratch, work)
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        out_sigma[d] = math.sqrt(state.target.sigma2[0])
        out_truncated[d] = truncated
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1
