"""Backfitting over a forest of basis leaves (issue 30; spec multi_forest.md 1.2-1.3, 2.1-2.2).

A tree of this forest adds ``b_i theta_leaf(i)`` to row i's mean, where ``b_i`` is the row's basis
(the treatment coding b_{z_i} of a BCF tau forest, a global scale s_m for its mu forest, 1 for a
constant leaf), and row i carries the precision weight ``w_i / sigma^2``. The leaf model is
``likelihood.MODEL_BASIS_NORMAL`` with ``records.BasisTarget``: ``basis[0] = b``, ``basis[1] = w b``,
``basis[2] = w b^2``. Its statistics are A = sum w b^2 and c = sum w b R (R the partial residual);
``tree.leaf_terms`` scores them for every MH move (``cart_moves`` takes its general path for this model:
the count-and-sum shortcuts there are guarded by ``MODEL_NORMAL_KNOWN_VARIANCE``).

The functions here are the weighted twins of ``backfit.py``'s (same loop, same residual bookkeeping,
``backfit.BackfitState`` with a ``BasisTarget`` and ``sums`` of 2 ``N_ACC`` rows: the first ``N_ACC``
accumulate c, the next A):

    begin_basis_sweep(state, forest)
    for j in range(trees):
        tree = prepare_basis_tree(state, forest, j)
        changed = <the tree update against state.resid>
        finish_basis_tree(rng, state, forest, j, changed)

Several forests share one residual by sharing ``state.resid`` (and the sigma^2 cell): each forest's
sweep starts from and leaves the full residual y - sum of all forests.
"""

from __future__ import annotations

import math

from .backfit import N_ACC, clear_leaf_terms, leaf_cursors, map_leaves, shared_perm, tree_view
from .bart_chain import counted_cart_step
from .jit import helper
from .likelihood import leaf_log_marginal_basis
from .tree import F_B_SUM, F_LM_SUM, LEAF, M_SPAN


@helper
def basis_exchange_fits(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, basis, perm, cursor):
    """``backfit.exchange_fits`` with a basis: resid -= b f_out, resid += b f_in, and the incoming tree's
    leaf sums of ``w b resid`` (rows 0..N_ACC-1 of ``sums``) and ``w b^2`` (rows N_ACC..2 N_ACC-1)."""
    sums[:, :span_in] = 0.0
    n = resid.shape[0]
    has_out = leaf_out.shape[0] == n
    has_in = leaf_in.shape[0] == n
    rebuild = has_in and perm.shape[0] == n
    for i in range(n):
        r = resid[i]
        bi = basis[0, i]
        if has_out:
            r -= bi * value_out[leaf_out[i]]
        if has_in:
            leaf = leaf_in[i]
            r += bi * value_in[leaf]
            k = i & (N_ACC - 1)
            sums[k, leaf] += basis[1, i] * r
            sums[N_ACC + k, leaf] += basis[2, i]
            if rebuild:
                perm[cursor[leaf]] = i
                cursor[leaf] += 1
        resid[i] = r


@helper
def set_basis_leaf_terms(tree, sums, target, fstate):
    """Cache every leaf's c (``b``) and log marginal (``lm``) from the sums of ``basis_exchange_fits`` (all 0
    with the likelihood off)."""
    if not target.prior.likelihood:
        clear_leaf_terms(tree, fstate)
        return
    sigma2 = target.sigma2[0]
    tau2 = target.tau2[0]
    lm_sum = 0.0
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        c = 0.0
        a = 0.0
        for k in range(N_ACC):
            c += sums[k, node]
            a += sums[N_ACC + k, node]
        lm = leaf_log_marginal_basis(a, c, sigma2, tau2)
        tree.lm[node] = lm
        tree.b[node] = c
        lm_sum += lm
    fstate[F_LM_SUM] = lm_sum
    fstate[F_B_SUM] = 0.0


@helper
def draw_basis_leaves(rng, tree, target):
    """Draw every leaf value from its full conditional N(c / (A + sigma2 / tau2), sigma2 / (A + sigma2 /
    tau2)) (spec 2.1, with A, c in sigma^2 units), A summed over the leaf's rows and c the cached ``b``;
    from the prior N(0, tau2) with the likelihood off. A leaf whose rows all have w b = 0 draws from the
    prior too (A = c = 0; spec 2.2)."""
    sigma2 = target.sigma2[0]
    tau2 = target.tau2[0]
    use_lik = target.prior.likelihood
    wbb = target.basis[2]
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        if use_lik:
            a = 0.0
            for i in range(tree.start[node], tree.end[node]):
                a += wbb[tree.perm[i]]
            prec = a / sigma2 + 1.0 / tau2
            tree.value[node] = tree.b[node] / sigma2 / prec + rng.standard_normal() / math.sqrt(prec)
        else:
            tree.value[node] = math.sqrt(tau2) * rng.standard_normal()


@helper
def begin_basis_sweep(state, forest):
    """Add tree 0's fit back to the residual and collect its leaf sums."""
    leaf_cursors(forest.var[0], forest.start[0], forest.meta[0, M_SPAN], state.cursor)
    basis_exchange_fits(state.resid, state.leaf_of[0, :0], forest.value[0, :0], state.leaf_of[0], forest.value[0],
                        forest.meta[0, M_SPAN], state.sums, state.target.basis, shared_perm(forest), state.cursor)


@helper(inline=True)
def prepare_basis_tree(state, forest, j):
    """Tree j as a ``TreeArrays`` view with its leaf terms under the partial residual cached."""
    tree = tree_view(forest, j)
    set_basis_leaf_terms(tree, state.sums, state.target, state.fstate)
    return tree


@helper
def finish_basis_tree(rng, state, forest, j, changed):
    """After tree j's update: its leaf map (if its partition ``changed``), its leaf draws, and the
    residual moved on to tree j + 1 (or to the full residual after the last tree)."""
    tree = tree_view(forest, j)
    if changed:
        map_leaves(tree, state.leaf_of[j])
    draw_basis_leaves(rng, tree, state.target)
    basis = state.target.basis
    if j + 1 < forest.var.shape[0]:
        leaf_cursors(forest.var[j + 1], forest.start[j + 1], forest.meta[j + 1, M_SPAN], state.cursor)
        basis_exchange_fits(state.resid, state.leaf_of[j], forest.value[j], state.leaf_of[j + 1], forest.value[j + 1],
                            forest.meta[j + 1, M_SPAN], state.sums, basis, shared_perm(forest), state.cursor)
    else:
        basis_exchange_fits(state.resid, state.leaf_of[j], forest.value[j], state.leaf_of[0, :0], forest.value[0, :0],
                            0, state.sums, basis, shared_perm(forest), state.cursor)


@helper(inline=True)
def mh_basis_forest(rng, forest, state, data, moves, scratch, counts):
    """One backfitting pass over the trees of a basis forest, an MH move (``cart_step``) per tree.
    ``counts[k, 0]`` / ``counts[k, 1]`` accumulate proposals / acceptances of move type k."""
    begin_basis_sweep(state, forest)
    for j in range(forest.var.shape[0]):
        tree = prepare_basis_tree(state, forest, j)
        accepted = counted_cart_step(rng, tree, data, state.target, moves, state.fstate, scratch, state.leaf_of[j],
                                     counts)
        finish_basis_tree(rng, state, forest, j, accepted)


@helper
def raw_forest_fit(forest, leaf_of, out):
    """``out[i]`` = the raw sum of the forest's leaf values at row i (without the basis)."""
    n = out.shape[0]
    for i in range(n):
        out[i] = 0.0
    for t in range(forest.var.shape[0]):
        value = forest.value[t]
        lo = leaf_of[t]
        for i in range(n):
            out[i] += value[lo[i]]
