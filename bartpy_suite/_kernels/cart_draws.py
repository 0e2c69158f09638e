"""What every single-tree (CART) sampler records per kept draw: the leaf parameters drawn from
their full conditionals, the tree's size, depth and log posterior, and the tree itself.

Sampler-specific statistics (accepted moves, weights, ...) are recorded by the sampler's own
kernels; ``record_cart_draw`` is the model's part, shared by them all.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper
from .likelihood import (
    MODEL_CLASSIFICATION,
    MODEL_MEAN_SHIFT,
    MODEL_MEAN_VARIANCE_SHIFT,
    draw_inverse_gamma,
)
from .record import record_tree
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    LEAF,
    M_N_LEAVES,
    M_SPAN,
    cached_subtree_log_prior,
    global_term,
    subtree_nodes,
    tree_depth,
)


class CartDraws(NamedTuple):
    """Per-draw model quantities of one CART chain (length ``draws`` each)."""

    n_leaves: np.ndarray  # int32
    depth: np.ndarray  # int32
    sigma: np.ndarray  # float64: common sigma (mean-shift model), else NaN
    log_posterior: np.ndarray  # float64: log prior + log marginal likelihood of the tree


class CartOut(NamedTuple):
    """Where a CART runner records kept draws: the model quantities (``CartDraws``), the draw store
    (``record.DrawStore``) and the store's work array ``order`` (int32[N])."""

    draws: CartDraws
    store: tuple
    order: np.ndarray


def new_cart_draws(draws: int) -> CartDraws:
    """Buffers for ``draws`` kept draws."""
    return CartDraws(np.zeros(draws, dtype=np.int32), np.zeros(draws, dtype=np.int32), np.full(draws, np.nan),
                     np.zeros(draws))


@helper
def draw_leaf_parameters(rng, tree, y, ycls, target, fstate, n_total, model):
    """Draw leaf means / sigmas / class probabilities from their full conditionals given the
    tree (thesis eq. 3.5, 3.6; Dirichlet for classes); from the prior when the likelihood is off.
    ``model`` is the chain's ``model_tag``.

    Returns the common sigma (mean-shift model) or NaN.
    """
    use_lik = target.prior.likelihood
    a = target.prior.a
    mu_bar = target.prior.mu_bar
    nu = target.prior.nu
    lam = target.prior.lam
    perm = tree.perm
    sigma = np.nan
    sigma2 = 1.0
    if len(model) == MODEL_MEAN_SHIFT:
        # sigma^2 | T, Y with mu integrated out, then mu_i | sigma, T, Y: an exact joint draw.
        if use_lik:
            sigma2 = draw_inverse_gamma(rng, 0.5 * (n_total + nu), 0.5 * (fstate[F_B_SUM] + nu * lam))
        else:
            sigma2 = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)
        sigma = math.sqrt(sigma2)
    k = target.prior.n_classes
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        s = tree.start[node]
        e = tree.end[node]
        n = float(e - s) if use_lik else 0.0
        if len(model) == MODEL_CLASSIFICATION:
            total = 0.0
            for j in range(k):
                tree.leaf_prob[node, j] = 0.0
            if use_lik:
                for i in range(s, e):
                    tree.leaf_prob[node, ycls[perm[i]]] += 1.0
            for j in range(k):
                g = rng.gamma(tree.leaf_prob[node, j] + target.prior.class_alpha, 1.0)
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
            if len(model) == MODEL_MEAN_VARIANCE_SHIFT:  # the common-sigma model needs no scatter
                for i in range(s, e):
                    d = y[perm[i]] - ybar
                    ssd += d * d
        if len(model) == MODEL_MEAN_VARIANCE_SHIFT:
            d = ybar - mu_bar
            b = ssd + n * a / (n + a) * d * d
            sigma2 = draw_inverse_gamma(rng, 0.5 * (n + nu), 0.5 * (b + nu * lam))
            tree.leaf_sigma[node] = math.sqrt(sigma2)
        mean = (n * ybar + a * mu_bar) / (n + a)
        tree.value[node] = mean + math.sqrt(sigma2 / (n + a)) * rng.standard_normal()
    return sigma



@helper
def record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
    """Draw the leaf parameters of the current tree and record draw d: the scalars into
    ``draws`` (a ``CartDraws``) and the tree into ``store``. Returns False when the store had
    no room for the tree (the scalars are written; record the tree again after growing it)."""
    draws = out.draws
    y, ycls = data.y, data.ycls
    n_total = float(y.shape[0])
    draws.sigma[d] = draw_leaf_parameters(rng, tree, y, ycls, target, fstate, n_total, scratch.model)
    count = subtree_nodes(tree, 0, scratch.nodes, scratch.stack)
    draws.n_leaves[d] = tree.meta[M_N_LEAVES]
    draws.depth[d] = tree_depth(tree, scratch.nodes, count)
    log_prior = cached_subtree_log_prior(tree, scratch.nodes, count, data, target, scratch)
    draws.log_posterior[d] = log_prior + fstate[F_LM_SUM] + global_term(fstate[F_B_SUM], n_total, target, scratch.model)
    return record_tree(tree, out.store, d, 0, out.order, scratch.stack)
