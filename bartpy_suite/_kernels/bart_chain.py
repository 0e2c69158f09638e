"""BART by Bayesian backfitting (PG-BART paper, Algorithm 1) on a forest of tree arrays.

A forest is a ``TreeArrays`` whose fields are stacked per tree (shape (T, ...)); ``tree_view``
gives tree j as an ordinary ``TreeArrays`` so the CART move kernels run on it unchanged, with
the leaf model ``MODEL_NORMAL_KNOWN_VARIANCE`` (mu ~ N(0, tau2), sigma^2 given). For that model
the per-leaf field ``b`` holds the leaf's sum of partial residuals.

Residual bookkeeping: ``resid`` holds the partial residual R_j = y - sum_{k != j} f_k(x) while
tree j is updated, and y - sum_k f_k(x) between sweeps. ``leaf_of[j, i]`` is the leaf of row i in
tree j. The tree move touches only the rows of the node it changes (and rebuilds ``leaf_of[j]``
when accepted), the leaf values are drawn from their normal full conditionals, then one pass
in row order subtracts tree j's new fit, adds tree j+1's fit back and collects tree j+1's leaf
sums: one sequential pass per tree instead of two passes through the trees' row permutations.
A sweep costs O(trees x rows) plus the moves.

Binary responses use Albert & Chib (1993) latent variables: z_i ~ N(f(x_i), 1) truncated to
z > 0 if y_i = 1 and z < 0 otherwise; sigma is fixed at 1.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .cart_chain import cart_step, record_tree
from .likelihood import draw_inverse_gamma, leaf_log_marginal_normal_known_variance
from .tree import H_LAM, H_LIKELIHOOD, H_NU, H_SIGMA2, H_TAU2, LEAF, M_N_LEAVES, TreeArrays, subtree_nodes, tree_depth

SIGMA_SAMPLED = 0
SIGMA_FIXED = 1
SIGMA_PROBIT = 2


@njit(cache=True, nogil=True)
def tree_view(forest, j):
    """Tree j of a forest as a ``TreeArrays`` of views (no copy)."""
    f = forest
    return TreeArrays(
        f.var[j], f.cut[j], f.left[j], f.right[j], f.parent[j], f.depth[j], f.start[j], f.end[j], f.lm[j],
        f.b[j], f.lp[j], f.value[j], f.leaf_sigma[j], f.leaf_prob[j], f.perm[j], f.free[j], f.meta[j],
    )


N_ACC = 4  # independent leaf-sum accumulators, so consecutive rows do not wait on one another


@njit(cache=True, nogil=True)
def _set_leaf_terms(tree, sums, hyper, fstate):
    """Cache every leaf's residual sum (``b``) and log marginal (``lm``) from ``sums[k, leaf]``
    summed over k; the running totals go to ``fstate``."""
    sigma2 = hyper[H_SIGMA2]
    tau2 = hyper[H_TAU2]
    use_lik = hyper[H_LIKELIHOOD] != 0.0
    lm_sum = 0.0
    for node in range(tree.var.shape[0]):
        if tree.var[node] != LEAF:
            continue
        if use_lik:
            s = 0.0
            for k in range(N_ACC):
                s += sums[k, node]
            lm = leaf_log_marginal_normal_known_variance(tree.end[node] - tree.start[node], s, sigma2, tau2)
            tree.lm[node] = lm
            tree.b[node] = s
            lm_sum += lm
        else:
            tree.lm[node] = 0.0
            tree.b[node] = 0.0
    fstate[0] = lm_sum
    fstate[1] = 0.0


@njit(cache=True, nogil=True)
def _exchange_fits(resid, leaf_out, value_out, leaf_in, value_in, sums):
    """One pass in row order: resid -= f_out, resid += f_in, and the leaf sums of the new resid
    under ``leaf_in`` into ``sums`` (N_ACC, nodes). Either tree may be absent (empty map)."""
    sums[:, :] = 0.0
    n = resid.shape[0]
    has_out = leaf_out.shape[0] == n
    has_in = leaf_in.shape[0] == n
    for i in range(n):
        r = resid[i]
        if has_out:
            r -= value_out[leaf_out[i]]
        if has_in:
            leaf = leaf_in[i]
            r += value_in[leaf]
            sums[i & (N_ACC - 1), leaf] += r
        resid[i] = r


@njit(cache=True, nogil=True)
def _map_leaves(tree, leaf_of):
    """leaf_of[i] = the leaf holding row i."""
    for node in range(tree.var.shape[0]):
        if tree.var[node] != LEAF:
            continue
        for i in range(tree.start[node], tree.end[node]):
            leaf_of[tree.perm[i]] = node


@njit(cache=True, nogil=True)
def _draw_leaves(rng, tree, hyper):
    """Draw every leaf value from its normal full conditional (or the prior, likelihood off)."""
    sigma2 = hyper[H_SIGMA2]
    tau2 = hyper[H_TAU2]
    use_lik = hyper[H_LIKELIHOOD] != 0.0
    for node in range(tree.var.shape[0]):
        if tree.var[node] != LEAF:
            continue
        if use_lik:
            n = tree.end[node] - tree.start[node]
            prec = n / sigma2 + 1.0 / tau2
            tree.value[node] = tree.b[node] / sigma2 / prec + rng.standard_normal() / math.sqrt(prec)
        else:
            tree.value[node] = math.sqrt(tau2) * rng.standard_normal()


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def bart_sweep(rng, forest, leaf_of, xt, is_cat, nbins, resid, hyper, move_probs, fstate, scratch, ycls, z, ybin,
               sigma_mode, counts):
    """One backfitting sweep over all trees, then sigma (or the probit latents).

    ``leaf_of`` (trees, rows) maps rows to leaves (uint8: at most 255 nodes per tree).
    ``counts[k, 0]`` / ``counts[k, 1]`` accumulate proposals / acceptances of move type k.
    """
    n_trees = forest.var.shape[0]
    sums = np.zeros((N_ACC, forest.var.shape[1]))
    none_map = leaf_of[0, :0]
    none_value = forest.value[0, :0]
    _exchange_fits(resid, none_map, none_value, leaf_of[0], forest.value[0], sums)
    for j in range(n_trees):
        tree = tree_view(forest, j)
        _set_leaf_terms(tree, sums, hyper, fstate)
        move, accepted = cart_step(rng, tree, xt, is_cat, nbins, resid, ycls, hyper, move_probs, fstate, scratch)
        if move >= 0:
            counts[move, 0] += 1
            if accepted:
                counts[move, 1] += 1
                _map_leaves(tree, leaf_of[j])
        _draw_leaves(rng, tree, hyper)
        if j + 1 < n_trees:
            _exchange_fits(resid, leaf_of[j], forest.value[j], leaf_of[j + 1], forest.value[j + 1], sums)
        else:
            _exchange_fits(resid, leaf_of[j], forest.value[j], none_map, none_value, sums)
    if sigma_mode == SIGMA_PROBIT:
        if hyper[H_LIKELIHOOD] != 0.0:
            _update_latent(rng, resid, z, ybin)
    elif sigma_mode == SIGMA_SAMPLED:
        nu = hyper[H_NU]
        lam = hyper[H_LAM]
        if hyper[H_LIKELIHOOD] != 0.0:
            ss = 0.0
            for i in range(resid.shape[0]):
                ss += resid[i] * resid[i]
            hyper[H_SIGMA2] = draw_inverse_gamma(rng, 0.5 * (nu + resid.shape[0]), 0.5 * (nu * lam + ss))
        else:
            hyper[H_SIGMA2] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)


@njit(cache=True, nogil=True)
def forest_max_nodes(forest):
    """Largest node count over the trees of a forest."""
    out = 0
    for j in range(forest.var.shape[0]):
        nodes = 2 * forest.meta[j, M_N_LEAVES] - 1
        if nodes > out:
            out = nodes
    return out


@njit(cache=True, nogil=True)
def record_forest(forest, d, out_var, out_cut, out_left, out_right, out_value, out_sigma, out_prob, scratch, order,
                  out_leaves, out_depth):
    """Write every tree of the forest into draw ``d`` of the output buffers (preorder)."""
    for j in range(forest.var.shape[0]):
        tree = tree_view(forest, j)
        record_tree(tree, j, out_var[d], out_cut[d], out_left[d], out_right[d], out_value[d], out_sigma[d],
                    out_prob[d], scratch.stack, order)
        out_leaves[d, j] = tree.meta[M_N_LEAVES]
        count = subtree_nodes(tree, 0, scratch.nodes, scratch.stack)
        out_depth[d, j] = tree_depth(tree, scratch.nodes, count)


@njit(cache=True, nogil=True)
def run_bart_chain(
    rng, forest, leaf_of, xt, is_cat, nbins, resid, hyper, move_probs, fstate, scratch, ycls, z, ybin, sigma_mode,
    first_iter, n_iter, tune, thin,
    out_sigma, out_counts, out_var, out_cut, out_left, out_right, out_value, out_leaf_sigma, out_prob,
    out_leaves, out_depth,
):
    """Advance one BART chain by up to ``n_iter`` sweeps from global iteration ``first_iter``.

    Returns ``(iterations done, pending draw index)``. When a tree to record has more nodes than
    the buffers hold, the chain stops right after that sweep and returns its draw index as
    pending (else -1): the caller enlarges the buffers and records it with ``record_forest``.
    """
    order = np.empty(forest.var.shape[1], dtype=np.int32)
    counts = np.zeros((4, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        bart_sweep(rng, forest, leaf_of, xt, is_cat, nbins, resid, hyper, move_probs, fstate, scratch, ycls, z,
                   ybin, sigma_mode, counts)
        if it < tune or (it - tune) % thin != 0:
            continue
        d = (it - tune) // thin
        if d >= out_sigma.shape[0]:
            continue
        out_sigma[d] = math.sqrt(hyper[H_SIGMA2])
        out_counts[d] = counts
        if forest_max_nodes(forest) > out_var.shape[2]:
            return step + 1, d
        record_forest(forest, d, out_var, out_cut, out_left, out_right, out_value, out_leaf_sigma, out_prob,
                      scratch, order, out_leaves, out_depth)
    return n_iter, -1
