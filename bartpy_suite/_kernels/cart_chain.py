"""One Bayesian CART chain: tree moves, conjugate parameter draws, and draw recording.

``run_cart_chain`` advances a chain by a chunk of iterations (thesis Algorithm 4: one proposed
tree move, then the parameter draws) and writes every kept draw into preallocated buffers. The
Python side calls it repeatedly so that Ctrl-C can be honoured between chunks.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .cart_moves import (
    F_B_SUM,
    F_LM_SUM,
    MOVE_GROW,
    MOVE_PRUNE,
    accept_grow,
    accept_prune,
    undo_grow,
    change_or_swap,
    choose_move,
)
from .likelihood import (
    MODEL_CLASSIFICATION,
    MODEL_MEAN_SHIFT,
    MODEL_MEAN_VARIANCE_SHIFT,
    draw_inverse_gamma,
)
from .tree import (
    H_A,
    H_CLASS_ALPHA,
    H_LAM,
    H_LIKELIHOOD,
    H_MODEL,
    H_MU_BAR,
    H_N_CLASSES,
    H_NU,
    LEAF,
    M_N_INTERNAL,
    M_N_LEAVES,
    cached_subtree_log_prior,
    global_term,
    subtree_nodes,
    tree_depth,
)
from .cart_moves import propose_grow, propose_prune


@njit(cache=True, nogil=True)
def cart_step(rng, tree, xt, is_cat, nbins, y, ycls, hyper, move_probs, fstate, scratch):
    """One MH transition of the tree. Returns (move type, accepted); move -1 means no move was
    possible and the tree is unchanged."""
    n_total = float(y.shape[0])
    move = choose_move(rng, move_probs, tree.meta[M_N_INTERNAL])
    if move < 0:
        return move, False
    if move == MOVE_GROW:
        log_r, node = propose_grow(rng, tree, xt, is_cat, nbins, y, ycls, hyper, move_probs, fstate, n_total, scratch)
        if node < 0:
            return move, False
        if math.log(rng.random()) < log_r:
            accept_grow(tree, node, fstate)
            return move, True
        undo_grow(tree, node, hyper, scratch)
        return move, False
    if move == MOVE_PRUNE:
        log_r, node = propose_prune(rng, tree, xt, is_cat, nbins, y, ycls, hyper, move_probs, fstate, n_total, scratch)
        if node >= 0 and math.log(rng.random()) < log_r:
            accept_prune(tree, node, fstate, scratch, hyper)
            return move, True
        return move, False
    accepted, _, _ = change_or_swap(rng, tree, xt, is_cat, nbins, y, ycls, hyper, fstate, n_total, scratch, move)
    return move, accepted


@njit(cache=True, nogil=True)
def draw_leaf_parameters(rng, tree, y, ycls, hyper, fstate, n_total):
    """Draw leaf means / sigmas / class probabilities from their full conditionals given the
    tree (thesis eq. 3.5, 3.6; Dirichlet for classes); from the prior when the likelihood is off.

    Returns the common sigma (mean-shift model) or NaN.
    """
    model = int(hyper[H_MODEL])
    use_lik = hyper[H_LIKELIHOOD] != 0.0
    a = hyper[H_A]
    mu_bar = hyper[H_MU_BAR]
    nu = hyper[H_NU]
    lam = hyper[H_LAM]
    perm = tree.perm
    sigma = np.nan
    sigma2 = 1.0
    if model == MODEL_MEAN_SHIFT:
        # sigma^2 | T, Y with mu integrated out, then mu_i | sigma, T, Y: an exact joint draw.
        if use_lik:
            sigma2 = draw_inverse_gamma(rng, 0.5 * (n_total + nu), 0.5 * (fstate[F_B_SUM] + nu * lam))
        else:
            sigma2 = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)
        sigma = math.sqrt(sigma2)
    k = int(hyper[H_N_CLASSES])
    for node in range(tree.var.shape[0]):
        if tree.var[node] != LEAF:
            continue
        s = tree.start[node]
        e = tree.end[node]
        n = float(e - s) if use_lik else 0.0
        if model == MODEL_CLASSIFICATION:
            total = 0.0
            for j in range(k):
                tree.leaf_prob[node, j] = 0.0
            if use_lik:
                for i in range(s, e):
                    tree.leaf_prob[node, ycls[perm[i]]] += 1.0
            for j in range(k):
                g = rng.gamma(tree.leaf_prob[node, j] + hyper[H_CLASS_ALPHA], 1.0)
                tree.leaf_prob[node, j] = g
                total += g
            for j in range(k):
                tree.leaf_prob[node, j] /= total
            continue
        ybar = 0.0
        ssd = 0.0
        if use_lik:
            for i in range(s, e):
                ybar += y[perm[i]]
            ybar /= n
            for i in range(s, e):
                d = y[perm[i]] - ybar
                ssd += d * d
        if model == MODEL_MEAN_VARIANCE_SHIFT:
            d = ybar - mu_bar
            b = ssd + n * a / (n + a) * d * d
            sigma2 = draw_inverse_gamma(rng, 0.5 * (n + nu), 0.5 * (b + nu * lam))
            tree.leaf_sigma[node] = math.sqrt(sigma2)
        mean = (n * ybar + a * mu_bar) / (n + a)
        tree.value[node] = mean + math.sqrt(sigma2 / (n + a)) * rng.standard_normal()
    return sigma


@njit(cache=True, nogil=True)
def record_tree(tree, d, out_var, out_cut, out_left, out_right, out_value, out_sigma, out_prob, stack, order):
    """Write the tree in preorder (root = 0) into row ``d`` of the output buffers; return the
    number of nodes written. Children indices are remapped to preorder positions."""
    count = subtree_nodes(tree, 0, order, stack)
    # position of each node slot in preorder, reusing ``stack`` as the map.
    for j in range(count):
        stack[order[j]] = j
    for j in range(count):
        node = order[j]
        v = tree.var[node]
        out_var[d, j] = v
        out_cut[d, j] = tree.cut[node]
        if v >= 0:
            out_left[d, j] = stack[tree.left[node]]
            out_right[d, j] = stack[tree.right[node]]
            out_value[d, j] = np.nan
        else:
            out_left[d, j] = -1
            out_right[d, j] = -1
            out_value[d, j] = tree.value[node]
            if out_sigma.shape[1] > 0:
                out_sigma[d, j] = tree.leaf_sigma[node]
            for c in range(out_prob.shape[2]):
                out_prob[d, j, c] = tree.leaf_prob[node, c]
    for j in range(count, out_var.shape[1]):
        out_var[d, j] = -2
    return count


@njit(cache=True, nogil=True)
def run_cart_chain(
    rng, tree, xt, is_cat, nbins, y, ycls, hyper, move_probs, fstate, scratch,
    first_iter, n_iter, tune, thin,
    out_n_leaves, out_depth, out_sigma, out_move, out_accepted, out_log_post,
    out_var, out_cut, out_left, out_right, out_value, out_leaf_sigma, out_prob,
):
    """Advance one chain by ``n_iter`` iterations starting at global iteration ``first_iter``.

    Iterations ``>= tune`` whose offset is a multiple of ``thin`` are recorded at draw index
    ``(it - tune) // thin``. Returns the number of nodes of the largest recorded tree.
    """
    n_total = float(y.shape[0])
    order = np.empty(tree.var.shape[0], dtype=np.int32)
    max_nodes = 0
    for it in range(first_iter, first_iter + n_iter):
        move, accepted = cart_step(rng, tree, xt, is_cat, nbins, y, ycls, hyper, move_probs, fstate, scratch)
        if it < tune or (it - tune) % thin != 0:
            continue
        d = (it - tune) // thin
        if d >= out_n_leaves.shape[0]:
            continue
        sigma = draw_leaf_parameters(rng, tree, y, ycls, hyper, fstate, n_total)
        count = subtree_nodes(tree, 0, scratch.nodes, scratch.stack)
        out_n_leaves[d] = tree.meta[M_N_LEAVES]
        out_depth[d] = tree_depth(tree, scratch.nodes, count)
        out_sigma[d] = sigma
        out_move[d] = move
        out_accepted[d] = 1 if accepted else 0
        log_prior = cached_subtree_log_prior(
            tree, scratch.nodes, count, xt, is_cat, nbins, hyper, scratch,
        )
        out_log_post[d] = log_prior + fstate[F_LM_SUM] + global_term(fstate[F_B_SUM], n_total, hyper)
        written = record_tree(tree, d, out_var, out_cut, out_left, out_right, out_value, out_leaf_sigma, out_prob, scratch.stack, order)
        if written > max_nodes:
            max_nodes = written
    return max_nodes
