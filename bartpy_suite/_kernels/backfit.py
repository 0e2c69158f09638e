"""Bayesian backfitting (PG-BART paper, Algorithm 1): the BART bookkeeping around any
single-tree update.

A forest is a ``TreeArrays`` whose fields are stacked per tree (shape (T, ...)); ``tree_view``
gives tree j as an ordinary ``TreeArrays`` so every single-tree kernel runs on it unchanged,
with the leaf model ``MODEL_NORMAL_KNOWN_VARIANCE`` (mu ~ N(0, tau2), sigma^2 given). For that
model the per-leaf field ``b`` holds the leaf's sum of partial residuals.

A sampler's BART sweep is the loop

    begin_sweep(state, forest)
    for j in range(trees):
        tree = prepare_tree(state, forest, j)      # leaf terms of R_j cached in the tree
        changed = <the sampler's update of tree j against state.resid>
        finish_tree(rng, state, forest, j, changed)  # leaf map, leaf draws, next residual
    draw_noise(rng, state)                          # sigma^2 or the probit latents

(``mh_bart_sweep`` in ``bart_chain.py`` is the MH one.) Numba cannot cache a kernel that takes
another kernel as an argument, so each sampler writes these five lines itself rather than
passing its tree update to a generic sweep.

Residual bookkeeping: ``resid`` holds the partial residual R_j = y - sum_{k != j} f_k(x) while
tree j is updated, and y - sum_k f_k(x) between sweeps. ``leaf_of[j, i]`` is the leaf of row i
in tree j. After tree j's leaf values are drawn, one pass in row order subtracts tree j's new
fit, adds tree j+1's fit back and collects tree j+1's leaf sums: one sequential pass per tree.

Row permutation: each tree has its own ``perm`` (forest ``perm`` of shape (T, n)), or, when
those would take too much memory (``samplers/forest.py``), the trees share one (shape (1, n)):
then the same pass that brings tree j+1's fit back writes its rows into it, leaf by leaf in row
order, at the segments ``start``/``end`` of tree j+1's leaves (``exchange_fits``). Every move
keeps each leaf's rows sorted (``tree.py``), so this is exactly the permutation tree j+1 had
when it was last updated: the draws are the same either way, and a forest needs n row indices
instead of T x n (8 GB at 10^7 rows and 200 trees), for one scattered write per row and tree.

Binary responses use Albert & Chib (1993) latent variables: z_i ~ N(f(x_i), 1) truncated to
z > 0 if y_i = 1 and z < 0 otherwise; sigma is fixed at 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper, kernel
from .likelihood import draw_inverse_gamma, leaf_log_marginal_normal_known_variance
from .record import record_tree
from .records import Target
from .row_parallel import exchange_fits_blocks, map_leaves_blocks, sum_squares_blocks
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    LEAF,
    M_N_LEAVES,
    M_SPAN,
    TreeArrays,
    subtree_nodes,
    tree_depth,
)

SIGMA_SAMPLED = 0
SIGMA_FIXED = 1
SIGMA_PROBIT = 2

N_ACC = 4  # independent leaf-sum accumulators, so consecutive rows do not wait on one another


class BackfitState(NamedTuple):
    """Mutable state of one BART chain besides its forest.

    ``target`` is what the tree updates condition on (``records.Target``): the chain's prior and
    its sigma^2 cell, the chain's current sigma^2, which ``draw_noise`` writes.
    """

    resid: np.ndarray  # float64[n]: partial residual (see the module docstring)
    leaf_of: np.ndarray  # uint8[T, n]: leaf of each row in each tree (capacity <= 255)
    sums: np.ndarray  # float64[N_ACC, N]: leaf sums of the next tree's partial residual
    z: np.ndarray  # float64[n]: probit latents (unused otherwise)
    ybin: np.ndarray  # int64[n]: 0/1 response (probit) or zeros
    ycls: np.ndarray  # int64[n]: zeros (the single-tree kernels' class codes)
    target: Target  # records.Target: the prior and the chain's sigma^2 (float64[1])
    fstate: np.ndarray  # float64[2]: F_LM_SUM, F_B_SUM of the tree being updated
    sigma_mode: np.ndarray  # int64[1]: SIGMA_SAMPLED, SIGMA_FIXED or SIGMA_PROBIT
    cursor: np.ndarray  # int64[N]: next free place of each leaf's segment while ``perm`` is rebuilt
    # None, or the number of row blocks of ``row_parallel.py`` (whose layout then widens ``sums`` and
    # ``cursor``). A None-typed argument lets numba drop the block passes before typing (``exchange_fits``,
    # ``leaf_map``, ``sum_of_squares``), so a chain without blocks compiles none of them.
    blocks: int | None = None


@helper(inline=True)
def tree_view(forest, j):
    """Tree j of a forest as a ``TreeArrays`` of views (no copy); ``perm`` is the tree's own row
    permutation, or the one the trees share (valid for the tree being updated, module docstring).
    Inlined, so that the views belong to the caller and a borrowing caller needs no reference
    counts (``jit.helper``)."""
    f = forest
    return TreeArrays(
        f.var[j], f.cut[j], f.left[j], f.right[j], f.parent[j], f.depth[j], f.start[j], f.end[j], f.lm[j],
        f.b[j], f.lp[j], f.value[j], f.leaf_sigma[j], f.leaf_prob[j], f.perm[j if f.perm.shape[0] > 1 else 0],
        f.free[j], f.meta[j],
    )


@helper(inline=True)
def shared_perm(forest):
    """The row permutation the trees share, to be rebuilt for each tree; empty when every
    tree keeps its own."""
    if forest.perm.shape[0] < forest.var.shape[0]:
        return forest.perm[0]
    return forest.perm[0, :0]


@helper
def leaf_cursors(var, start, span, cursor):
    """``cursor[leaf] = start[leaf]`` for every leaf of a tree (node arrays ``var``, ``start``;
    node span ``span``, ``tree.M_SPAN``)."""
    for node in range(span):
        if var[node] == LEAF:
            cursor[node] = start[node]


@helper
def clear_leaf_terms(tree, fstate):
    """The likelihood off: every leaf's cached ``b`` and ``lm`` and their running totals in ``fstate`` are 0."""
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] == LEAF:
            tree.lm[node] = 0.0
            tree.b[node] = 0.0
    fstate[F_LM_SUM] = 0.0
    fstate[F_B_SUM] = 0.0


@helper
def set_leaf_terms(tree, sums, target, fstate):
    """Cache every leaf's residual sum (``b``) and log marginal (``lm``) from ``sums[k, leaf]``
    summed over k; the running totals go to ``fstate`` (all 0 with the likelihood off)."""
    if not target.prior.likelihood:
        clear_leaf_terms(tree, fstate)
        return
    sigma2 = target.sigma2[0]
    tau2 = target.prior.tau2
    lm_sum = 0.0
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        s = 0.0
        for k in range(N_ACC):
            s += sums[k, node]
        lm = leaf_log_marginal_normal_known_variance(tree.end[node] - tree.start[node], s, sigma2, tau2)
        tree.lm[node] = lm
        tree.b[node] = s
        lm_sum += lm
    fstate[F_LM_SUM] = lm_sum
    fstate[F_B_SUM] = 0.0


@helper
def exchange_fits(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor, blocks):
    """One pass in row order: resid -= f_out, resid += f_in, the leaf sums of the new resid
    under ``leaf_in`` into ``sums`` (N_ACC, nodes; the incoming tree's node span ``span_in``
    zeroed first), and, given a shared ``perm`` (else an empty one), the rows of each leaf of
    the incoming tree into it from ``cursor[leaf]`` on (``leaf_cursors``). Either tree may be
    absent (empty map). With row ``blocks`` (``BackfitState.blocks``) the block pass of
    ``row_parallel.py``; with None numba prunes that branch unseen."""
    if blocks is not None:
        exchange_fits_blocks(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor)
        return
    sums[:, :span_in] = 0.0
    n = resid.shape[0]
    has_out = leaf_out.shape[0] == n
    has_in = leaf_in.shape[0] == n
    rebuild = has_in and perm.shape[0] == n
    for i in range(n):
        r = resid[i]
        if has_out:
            r -= value_out[leaf_out[i]]
        if has_in:
            leaf = leaf_in[i]
            r += value_in[leaf]
            sums[i & (N_ACC - 1), leaf] += r
            if rebuild:
                perm[cursor[leaf]] = i
                cursor[leaf] += 1
        resid[i] = r


@helper
def map_leaves(tree, leaf_of):
    """leaf_of[i] = the leaf holding row i."""
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        for i in range(tree.start[node], tree.end[node]):
            leaf_of[tree.perm[i]] = node


@helper
def leaf_map(tree, leaf_of, blocks):
    """``map_leaves``, or with row ``blocks`` (not None) its block pass (``row_parallel.py``)."""
    if blocks is None:
        map_leaves(tree, leaf_of)
    else:
        map_leaves_blocks(tree.var, tree.start, tree.end, tree.perm, tree.meta[M_SPAN], leaf_of, blocks)


@helper
def sum_of_squares(resid, blocks):
    """Sum of ``resid[i]**2`` in row order, or with row ``blocks`` (not None) by blocks."""
    if blocks is not None:
        return sum_squares_blocks(resid, blocks)
    ss = 0.0
    for i in range(resid.shape[0]):
        ss += resid[i] * resid[i]
    return ss


@helper
def draw_leaves(rng, tree, target):
    """Draw every leaf value from its normal full conditional (or the prior, likelihood off)."""
    sigma2 = target.sigma2[0]
    tau2 = target.prior.tau2
    use_lik = target.prior.likelihood
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        if use_lik:
            n = tree.end[node] - tree.start[node]
            prec = n / sigma2 + 1.0 / tau2
            tree.value[node] = tree.b[node] / sigma2 / prec + rng.standard_normal() / math.sqrt(prec)
        else:
            tree.value[node] = math.sqrt(tau2) * rng.standard_normal()


@helper
def truncated_normal_above(rng, a):
    """Draw from N(0, 1) truncated to (a, inf): plain rejection for a < 0.45, otherwise the
    exponential-proposal rejection sampler of Robert (1995)."""
    if a < 0.45:
        while True:
            x = rng.standard_normal()
            if x > a:
                return x
    lam = 0.5 * (a + math.sqrt(a * a + 4.0))
    while True:
        x = a + rng.exponential(1.0) / lam
        if math.log(rng.random()) < -0.5 * (x - lam) ** 2:
            return x


@helper
def _update_latent(rng, resid, z, ybin):
    """Albert-Chib step: redraw z_i given f_i = z_i - resid_i and keep resid = z - f."""
    for i in range(resid.shape[0]):
        f = z[i] - resid[i]
        if ybin[i] == 1:
            znew = f + truncated_normal_above(rng, -f)
        else:
            znew = f - truncated_normal_above(rng, f)
        z[i] = znew
        resid[i] = znew - f


@helper
def begin_sweep(state, forest):
    """Add tree 0's fit back to the residual and collect its leaf sums."""
    empty_map = state.leaf_of[0, :0]
    empty_value = forest.value[0, :0]
    leaf_cursors(forest.var[0], forest.start[0], forest.meta[0, M_SPAN], state.cursor)
    exchange_fits(state.resid, empty_map, empty_value, state.leaf_of[0], forest.value[0], forest.meta[0, M_SPAN],
                  state.sums, shared_perm(forest), state.cursor, state.blocks)


@helper(inline=True)
def prepare_tree(state, forest, j):
    """Tree j as a ``TreeArrays`` view with its leaf terms under the partial residual cached."""
    tree = tree_view(forest, j)
    set_leaf_terms(tree, state.sums, state.target, state.fstate)
    return tree


@helper
def finish_tree(rng, state, forest, j, changed):
    """After tree j's update: refresh its leaf map if its partition ``changed``, draw its leaf
    values, and move the residual on to tree j + 1 (or to the full residual after the last)."""
    tree = tree_view(forest, j)
    if changed:
        leaf_map(tree, state.leaf_of[j], state.blocks)
    draw_leaves(rng, tree, state.target)
    if j + 1 < forest.var.shape[0]:
        leaf_cursors(forest.var[j + 1], forest.start[j + 1], forest.meta[j + 1, M_SPAN], state.cursor)
        exchange_fits(state.resid, state.leaf_of[j], forest.value[j], state.leaf_of[j + 1], forest.value[j + 1],
                      forest.meta[j + 1, M_SPAN], state.sums, shared_perm(forest), state.cursor, state.blocks)
    else:
        exchange_fits(state.resid, state.leaf_of[j], forest.value[j], state.leaf_of[0, :0], forest.value[0, :0], 0,
                      state.sums, shared_perm(forest), state.cursor, state.blocks)


@helper
def draw_noise(rng, state):
    """End of a sweep: redraw sigma^2 (inverse gamma full conditional, or its prior with the
    likelihood off), or the probit latents; a fixed sigma stays."""
    target = state.target
    mode = state.sigma_mode[0]
    use_lik = target.prior.likelihood
    if mode == SIGMA_PROBIT:
        if use_lik:
            _update_latent(rng, state.resid, state.z, state.ybin)
    elif mode == SIGMA_SAMPLED:
        nu = target.prior.nu
        lam = target.prior.lam
        if use_lik:
            resid = state.resid
            ss = sum_of_squares(resid, state.blocks)
            target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * (nu + resid.shape[0]), 0.5 * (nu * lam + ss))
        else:
            target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)


@kernel
def record_forest_now(forest, store, d, out_leaves, out_depth, nodes, order, stack):
    """``record_forest`` called from Python: a draw left pending when the store was full (see
    ``record.record_tree_now``)."""
    return record_forest(forest, store, d, out_leaves, out_depth, nodes, order, stack)


@helper
def record_forest(forest, store, d, out_leaves, out_depth, nodes, order, stack):
    """Append every tree of the forest to draw d of ``store`` and its leaf count and depth to
    ``out_leaves[d]`` / ``out_depth[d]``; False (draw incomplete) when the store lacks room,
    checked before anything is written."""
    if store.fill[0] + forest_nodes(forest) > store.var.shape[0]:
        return False
    for j in range(forest.var.shape[0]):
        tree = tree_view(forest, j)
        record_tree(tree, store, d, j, order, stack)
        out_leaves[d, j] = tree.meta[M_N_LEAVES]
        count = subtree_nodes(tree, 0, nodes, stack)
        out_depth[d, j] = tree_depth(tree, nodes, count)
    return True


@helper
def forest_nodes(forest):
    """Nodes of all trees of a forest (the store room one draw needs)."""
    total = 0
    for j in range(forest.var.shape[0]):
        total += 2 * forest.meta[j, M_N_LEAVES] - 1
    return total
