"""Parallel tempering of one Bayesian CART tree (thesis chapter 4): K rungs, one tree each.

Rung r targets ``pi_r(T) ∝ L(T)^t_r p(T | alpha_r, beta_r)^s_r``: entry r of the ``Ladder``
(``records.py``) carries t_r (``inv_temp``), 1 - s_r (``prior_heat``) and (alpha_r, beta_r), which
``rung_target`` puts into the chain's prior. The geometric ladder
(eq. 4.2) is t_r = s_r, the likelihood ladder s_r = 1, the shrinkage ladder (section 4.2)
t_r = s_r = 1 with the rung's own (alpha_r, beta_r). Rung 0 is the target (the posterior).
``L(T) = p(Y | X, T)`` is the integrated likelihood (leaf parameters and, in the common-sigma
model, sigma integrated out: thesis eq. 3.4, 3.13, 3.17), so a rung's state is the tree alone.

The trees live in fixed slots; ``slot_of[r]`` is the slot at rung r, so a swap exchanges two
indices. One tempered iteration (Algorithm 6) is one ``cart_step`` per rung, then one round of
swaps between adjacent rungs (r, r + 1): even pairs (r even) or odd pairs, chosen at random
(SEO, section 4.3.1) or alternating with the iteration (DEO, section 4.3.2; Syed et al. 2019).
There is no ring: the hottest and the coldest rungs are never paired. A swap is accepted with
eq. 4.1, ``log a = lp_r(T') + lp_r'(T) - lp_r(T) - lp_r'(T')``, which reduces to eq. 4.3 for the
geometric ladder and to eq. 4.5 for the shrinkage ladder.

Categorical rules: the prior a rung tempers is that of the stored representation of a tree
(``tree.py``: a canonical tree has K(T) equally likely representations), so a geometric rung's
marginal over canonical trees is ``L^t p^s K(T)^(1-s)``; the target rung (s = 1) is exact and a
hot rung is only an auxiliary target, so this changes no draw the fit returns.

The log prior of a tree under any rung's (alpha, beta) comes from one pass over its nodes
(``prior_parts``): the sum of its rule terms (the same under every rung) and its internal nodes
and splittable leaves counted by depth, so that ``p_SPLIT`` can be evaluated for each rung.

Leaf parameters are drawn for the target rung only, at kept iterations, from the target's full
conditional (``record_cart_draw``): the moves integrate them out, so the hot rungs never need them.
"""

from __future__ import annotations

import math

import numpy as np
from numba.typed import List

from .cart_chain import cart_step
from .cart_draws import record_cart_draw
from .jit import helper, kernel
from .kept import kept_draw
from .records import Target, rung_prior
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    LEAF,
    M_N_LEAVES,
    M_SPAN,
    cached_subtree_log_prior,
    global_term,
    has_available_rule,
    p_split,
    subtree_nodes,
)

SWAPS_DEO = 0
SWAPS_SEO = 1


@helper
def prior_parts(tree, data, target, scratch, n_int, n_spl):
    """Split the log prior of ``tree`` (whose ``lp`` cache follows ``target``) into the rule terms
    (returned) and counts by depth of internal nodes (``n_int``) and splittable leaves (``n_spl``).

    Returns ``(rule terms, largest depth + 1)``; the counts are written for depths below that.
    """
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    count = subtree_nodes(tree, 0, scratch.nodes, scratch.stack)
    cached_subtree_log_prior(tree, scratch.nodes, count, data, target, scratch)
    m = target.prior.min_leaf
    top = 0
    for i in range(count):
        d = tree.depth[scratch.nodes[i]]
        if d + 1 > top:
            top = d + 1
    for d in range(top):
        n_int[d] = 0
        n_spl[d] = 0
    rules = 0.0
    for i in range(count):
        node = scratch.nodes[i]
        d = tree.depth[node]
        if tree.var[node] == LEAF:
            # The cache just filled holds log(1 - p_SPLIT) for a leaf with an available rule and 0 for
            # one without (``tree.node_log_prior``), which tells them apart unless p_SPLIT is 0 at
            # this depth; only then are the leaf's rows scanned again.
            if p_split(target.prior.alpha, target.prior.beta, d) > 0.0:
                splittable = tree.lp[node] != 0.0
            else:
                splittable = has_available_rule(xt, tree.perm, tree.start[node], tree.end[node], is_cat, nbins, m,
                                                scratch.hist, scratch.sums, target.prior.na_split)
            if splittable:
                n_spl[d] += 1
        else:
            n_int[d] += 1
            rules += tree.lp[node] - math.log(p_split(target.prior.alpha, target.prior.beta, d))
    return rules, top


@helper
def structure_log_prior(target, n_int, n_spl, top):
    """The split / no-split part of the log prior (eq. 4.5's 'structural probability') under the
    (alpha, beta) of ``target``."""
    total = 0.0
    for d in range(top):
        ps = p_split(target.prior.alpha, target.prior.beta, d)
        if n_int[d] > 0:
            total += n_int[d] * math.log(ps)
        if n_spl[d] > 0:
            total += n_spl[d] * math.log1p(-ps)
    return total


@helper
def rung_log_target(target, log_lik, rules, n_int, n_spl, top):
    """log pi_r of a tree (up to the rung's constant): ``t log L + s log p``."""
    prior = rules + structure_log_prior(target, n_int, n_spl, top)
    return target.prior.inv_temp * log_lik + (1.0 - target.prior.prior_heat) * prior


@helper
def tree_log_lik(fstate, n_total, target, model):
    """log p(Y | X, T) from a tree's running sums (0 with the likelihood off; ``model``: the
    chain's ``model_tag``)."""
    return fstate[F_LM_SUM] + global_term(fstate[F_B_SUM], n_total, target, model)


@kernel
def retarget_prior_cache(tree, alpha_from, beta_from, alpha_to, beta_to):
    """Move a tree's ``lp`` cache from one rung's (alpha, beta) to another's: internal nodes
    exchange their log p_SPLIT; leaves are marked unknown (recomputed when needed)."""
    if alpha_from == alpha_to and beta_from == beta_to:
        return
    for node in range(tree.meta[M_SPAN]):
        v = tree.var[node]
        if v == LEAF:
            tree.lp[node] = np.nan
        elif v >= 0 and not np.isnan(tree.lp[node]):
            d = tree.depth[node]
            tree.lp[node] += (math.log(p_split(alpha_to, beta_to, d)) - math.log(p_split(alpha_from, beta_from, d)))


@helper(inline=True)
def rung_target(target, ladder, r):
    """The ``Target`` of rung r: the chain's prior with the rung's entries of ``ladder``."""
    return Target(rung_prior(target.prior, ladder, r), target.sigma2)


@helper(refcounts=True)
def swap_log_ratio(rungs, target, ladder, r, data, n_total, scratch, depths):
    """log acceptance ratio (eq. 4.1) of exchanging the trees of rungs r and r + 1."""
    trees, fstates, slot_of = rungs.trees, rungs.fstates, rungs.slot_of
    n_int, n_spl = depths.n_int, depths.n_spl
    ka = slot_of[r]
    kb = slot_of[r + 1]
    ha = rung_target(target, ladder, r)
    hb = rung_target(target, ladder, r + 1)
    rules_a, top_a = prior_parts(trees[ka], data, ha, scratch, n_int[0], n_spl[0])
    rules_b, top_b = prior_parts(trees[kb], data, hb, scratch, n_int[1], n_spl[1])
    ll_a = tree_log_lik(fstates[ka], n_total, ha, scratch.model)
    ll_b = tree_log_lik(fstates[kb], n_total, hb, scratch.model)
    now = (rung_log_target(ha, ll_a, rules_a, n_int[0], n_spl[0], top_a)
           + rung_log_target(hb, ll_b, rules_b, n_int[1], n_spl[1], top_b))
    swapped = (rung_log_target(ha, ll_b, rules_b, n_int[1], n_spl[1], top_b)
               + rung_log_target(hb, ll_a, rules_a, n_int[0], n_spl[0], top_a))
    return swapped - now


@helper(refcounts=True)
def swap_round(rng, rungs, target, ladder, parity, data, scratch, depths, proposed, accepted):
    """Attempt the swaps of every pair (r, r + 1) with r of the given parity (0 even, 1 odd);
    count them into ``proposed[r]`` / ``accepted[r]``."""
    trees, slot_of = rungs.trees, rungs.slot_of
    n_total = float(data.y.shape[0])
    n_rungs = slot_of.shape[0]
    for r in range(parity, n_rungs - 1, 2):
        log_a = swap_log_ratio(rungs, target, ladder, r, data, n_total, scratch, depths)
        proposed[r] += 1
        if math.log(rng.random()) < log_a:
            accepted[r] += 1
            ka = slot_of[r]
            kb = slot_of[r + 1]
            a0 = ladder.alpha[r]
            b0 = ladder.beta[r]
            a1 = ladder.alpha[r + 1]
            b1 = ladder.beta[r + 1]
            retarget_prior_cache(trees[ka], a0, b0, a1, b1)
            retarget_prior_cache(trees[kb], a1, b1, a0, b0)
            slot_of[r] = kb
            slot_of[r + 1] = ka


@helper
def track_round_trips(slot_of, phase):
    """Update each slot's index process after a swap round; return the round trips completed.

    ``phase[k]``: 0 not yet at an end, 1 last end reached was the target rung, 2 the hottest rung
    since. A round trip is target -> hottest -> target.
    """
    n_rungs = slot_of.shape[0]
    trips = 0
    cold = slot_of[0]
    hot = slot_of[n_rungs - 1]
    if phase[hot] == 1:
        phase[hot] = 2
    if phase[cold] == 2:
        trips += 1
    phase[cold] = 1
    return trips


@helper(inline=True)
def tempered_iteration(rng, rungs, target, ladder, data, moves, scratch, swaps, it, no_map):
    """One tempered iteration: one MH transition per rung, then one round of swaps (Algorithm 6).

    Returns the round trips completed. ``swaps`` (a ``records.Swaps``): in its ``tally``, swaps
    proposed and accepted per pair are counted in ``counters[0]`` and ``counters[1]``, accepted
    moves per rung in ``counters[2]``; ``phase`` tracks the round trips. ``no_map``: an empty
    uint8 array (CART keeps no row-to-leaf map, ``cart_step``).
    """
    counters, phase = swaps.tally.counters, swaps.tally.phase
    proposed, accepted, step_counts = counters[0], counters[1], counters[2]
    trees, fstates, slot_of = rungs.trees, rungs.fstates, rungs.slot_of
    move_probs, change_swap, rotation = moves.probs, moves.change_swap, moves.rotation
    for r in range(slot_of.shape[0]):
        k = slot_of[r]
        _, ok = cart_step(rng, trees[k], data, rung_target(target, ladder, r), move_probs,
                          change_swap, rotation,
                          fstates[k], scratch, no_map)
        if ok:
            step_counts[r] += 1
    if swaps.kind == SWAPS_DEO:
        parity = it % 2
    else:
        parity = 0 if rng.random() < 0.5 else 1
    swap_round(rng, rungs, target, ladder, parity, data, scratch, swaps.depths, proposed, accepted)
    return track_round_trips(slot_of, phase)


@helper
def record_swaps(counters, d, swap_out):
    """Copy the cumulative swap counts per pair and the round trips (``counters[0, K - 1]``) into
    draw d."""
    out_proposed, out_accepted, out_trips = swap_out.proposed, swap_out.accepted, swap_out.trips
    n_rungs = counters.shape[1]
    for r in range(n_rungs - 1):
        out_proposed[d, r] = counters[0, r]
        out_accepted[d, r] = counters[1, r]
    out_trips[d] = counters[0, n_rungs - 1]


@kernel
def record_rung_trees(trees, slot_of, rung_store, d, order, stack):
    """Record the structure of every rung's tree as "tree" r of draw d of ``rung_store``: split
    variables and cuts in preorder, NaN leaf values (a hot rung's leaf parameters are not drawn).
    Returns False, writing nothing, when the store lacks room for all of them."""
    total = 0
    for r in range(slot_of.shape[0]):
        total += subtree_nodes(trees[slot_of[r]], 0, order, stack)
    first = rung_store.fill[0]
    if first + total > rung_store.var.shape[0]:
        return False
    slot = first
    for r in range(slot_of.shape[0]):
        tree = trees[slot_of[r]]
        count = subtree_nodes(tree, 0, order, stack)
        for i in range(count):
            v = tree.var[order[i]]
            rung_store.var[slot] = v
            rung_store.cut[slot] = tree.cut[order[i]] if v >= 0 else 0
            rung_store.value[slot] = np.nan
            slot += 1
        rung_store.tree_nodes[d, r] = count
    rung_store.fill[0] = slot
    return True


@kernel
def run_tempered_chain(rng, rungs, target, ladder, data, moves, scratch, swaps, window, tempered_out):
    """Advance one tempered chain by up to ``n_iter`` iterations from global iteration ``first_iter``.

    ``counters`` (int64, (3, K)): swaps proposed and accepted per pair (row 0, 1; index r is the
    pair (r, r + 1)), accepted moves per rung (row 2), counted from the first kept iteration
    (``it >= tune``); ``counters[0, K - 1]`` holds the round trips. Kept draws record the target
    rung's tree and leaf parameters (``record_cart_draw``), the cumulative counters, and every
    rung's accepted moves, number of leaves and log target. ``swaps``: a ``records.Swaps``;
    ``tempered_out``: a ``records.TemperedOut``. With ``tempered_out.rungs.store`` sized for the kept
    draws (``store_rungs``; zero draws otherwise) every rung's tree structure is recorded too
    (``record_rung_trees``, after the target's draw, so the random stream is the same). Returns
    ``(iterations done, pending draw)`` as ``run_cart_chain`` does; a pending draw may miss its
    target tree or its rung trees (the caller checks which ``tree_nodes`` are still 0).
    """
    counters = swaps.tally.counters
    swap_out, rung_out = swaps.out, tempered_out.rungs
    out = tempered_out.draws
    trees, fstates, slot_of = rungs.trees, rungs.fstates, rungs.slot_of
    n_int, n_spl = swaps.depths.n_int, swaps.depths.n_spl
    out_rung_moves, out_rung_leaves, out_rung_lp = rung_out.moves, rung_out.leaves, rung_out.lp
    rung_store = rung_out.store
    out_proposed = swap_out.proposed
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    y = data.y
    n_rungs = slot_of.shape[0]
    n_total = float(y.shape[0])
    no_map = np.empty(0, dtype=np.uint8)
    for step in range(n_iter):
        it = first_iter + step
        if it == tune:
            counters[:, :] = 0
        trips = tempered_iteration(rng, rungs, target, ladder, data, moves, scratch, swaps, it, no_map)
        counters[0, n_rungs - 1] += trips
        d = kept_draw(it, tune, thin, out_proposed.shape[0])
        if d < 0:
            continue
        record_swaps(counters, d, swap_out)
        for r in range(n_rungs):
            k = slot_of[r]
            out_rung_moves[d, r] = counters[2, r]
            out_rung_leaves[d, r] = trees[k].meta[M_N_LEAVES]
            rung = rung_target(target, ladder, r)
            rules, top = prior_parts(trees[k], data, rung, scratch, n_int[0], n_spl[0])
            log_lik = tree_log_lik(fstates[k], n_total, rung, scratch.model)
            out_rung_lp[d, r] = rung_log_target(rung, log_lik, rules, n_int[0], n_spl[0], top)
        k0 = slot_of[0]
        if not record_cart_draw(rng, trees[k0], data, rung_target(target, ladder, 0),
                                fstates[k0], scratch, out, d):
            return step + 1, d
        if rung_store.tree_nodes.shape[0] > 0 and not record_rung_trees(trees, slot_of, rung_store, d, out.order,
                                                                          scratch.stack):
            return step + 1, d
    return n_iter, -1


@kernel
def rung_list(first):
    """A numba typed List holding ``first`` (the rungs' trees, forests or backfitting states).

    Built here rather than with ``numba.typed.List()`` from Python: the methods of a typed List
    called from Python are compiled in every process and never cached (about 3 CPU s of every
    tempered BART fit), while this kernel and ``rung_list_append`` are cached like the others.
    """
    out = List()
    out.append(first)
    return out


@kernel
def rung_list_append(items, item):
    """Append ``item`` to a typed List made by ``rung_list``."""
    items.append(item)
