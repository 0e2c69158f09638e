"""Log-linear (multinomial logistic) BART by data augmentation (Murray 2021, "Log-linear Bayesian
additive regression trees for multinomial logistic and count regression models", JASA).

Model: P(y_i = k | x_i) = lambda_k(x_i) / sum_l lambda_l(x_i), log lambda_k(x) = F_k(x) =
sum_t mu_kt(x), one forest of ``m`` trees per class; a leaf's factor gamma = exp(mu) has the
prior Gamma(shape, rate). With phi_i | lambda ~ Exp(rate = sum_l lambda_l(x_i)),

    p(y_i = k, phi_i | lambda) = lambda_k(x_i) exp(-phi_i sum_l lambda_l(x_i)),

so a leaf of tree t of class k contributes gamma^n exp(-gamma S): n its rows of class k and
S = sum over its rows of phi_i r_i, r_i = lambda_k(x_i) / gamma (the other trees' factors). The
leaf factor integrates in closed form (``likelihood.leaf_log_marginal_log_gamma``, the tree
kernels' ``MODEL_LOG_GAMMA``) and its full conditional is Gamma(shape + n, rate + S).

The forest holds the K m trees class by class (tree j = k m + t); ``value`` holds mu = log gamma,
so the stored draws sum to F_k(x) like any sum of trees. A sampler's sweep is

    for k in range(K):
        set_class(state, k)
        for t in range(m):
            tree = prepare_tree(state, forest, k * m + t)   # rate weights and leaf terms
            changed = <the sampler's update of tree against state.weight, state.is_class>
            finish_tree(rng, state, forest, k * m + t, changed)
    draw_latent(rng, state)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import leaf_cursors, map_leaves, shared_perm, tree_view
from .jit import helper
from .likelihood import MODEL_LOG_GAMMA
from .records import Target
from .tree import F_B_SUM, F_LM_SUM, LEAF, M_SPAN, leaf_terms, model_tag

LOG_GAMMA = model_tag(MODEL_LOG_GAMMA)  # a global tuple: numba compiles it in as a constant


class LoglinearState(NamedTuple):
    """Mutable state of one log-linear BART chain besides its forest."""

    log_fit: np.ndarray  # float64[K, n]: F_k(x_i)
    phi: np.ndarray  # float64[n]: augmentation latents
    weight: np.ndarray  # float64[n]: phi_i r_i of the tree being updated
    rest: np.ndarray  # float64[n]: F_k(x_i) minus the tree being updated
    is_class: np.ndarray  # int64[n]: 1 for the rows of the class being updated
    ycls: np.ndarray  # int64[n]: class codes
    leaf_of: np.ndarray  # uint8[K m, n]: leaf of each row in each tree
    target: Target  # records.Target: the prior (its sigma^2 cell is unused)
    fstate: np.ndarray  # float64[2]
    class_counts: np.ndarray  # float64[1]: work array of ``leaf_terms``
    cursor: np.ndarray  # int64[N]: work array of the shared row permutation's rebuild
    trees_per_class: int


@helper
def set_class(state, k):
    """Mark the rows of class k (the counts of the class's tree updates)."""
    for i in range(state.ycls.shape[0]):
        state.is_class[i] = 1 if state.ycls[i] == k else 0


@helper(inline=True)
def prepare_tree(state, forest, j):
    """Tree j as a view, with the rows' rate weights phi_i r_i and its leaf terms cached (and its
    rows written into the row permutation the trees share, if they share one: ``backfit``)."""
    k = j // state.trees_per_class
    tree = tree_view(forest, j)
    leaf_of = state.leaf_of[j]
    fit = state.log_fit[k]
    perm = shared_perm(forest)
    rebuild = perm.shape[0] == fit.shape[0]
    cursor = state.cursor
    leaf_cursors(tree.var, tree.start, tree.meta[M_SPAN], cursor)
    for i in range(fit.shape[0]):
        leaf = leaf_of[i]
        rest = fit[i] - tree.value[leaf]
        state.rest[i] = rest
        state.weight[i] = state.phi[i] * math.exp(rest)
        if rebuild:
            perm[cursor[leaf]] = i
            cursor[leaf] += 1
    score_leaves(tree, state.weight, state.is_class, state.target, state.class_counts, LOG_GAMMA, state.fstate)
    return tree


@helper
def score_leaves(tree, weight, pos, target, class_counts, model, fstate):
    """Every leaf's log marginal and b term from the per-row ``weight`` and ``pos`` (``tree.leaf_terms``
    of the log-linear leaf ``model``), their sum into ``fstate[F_LM_SUM]`` (these leaves have no b sum):
    the scoring both log-linear forests (this module's log-gamma trees and ``variance_forest``'s
    log-variance trees) run after refreshing their per-row terms."""
    lm_sum = 0.0
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        lm, b = leaf_terms(tree, node, weight, pos, target, class_counts, model)
        tree.lm[node] = lm
        tree.b[node] = b
        lm_sum += lm
    fstate[F_LM_SUM] = lm_sum
    fstate[F_B_SUM] = 0.0


@helper
def draw_leaves(rng, tree, state):
    """Every leaf's mu = log gamma, gamma ~ Gamma(shape + n, rate + S) (the prior with the
    likelihood off)."""
    shape = state.target.prior.lg_shape
    rate = state.target.prior.lg_rate
    use_lik = state.target.prior.likelihood
    perm = tree.perm
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        count = 0.0
        total = 0.0
        if use_lik:
            for i in range(tree.start[node], tree.end[node]):
                r = perm[i]
                count += state.is_class[r]
                total += state.weight[r]
        tree.value[node] = math.log(rng.gamma(shape + count, 1.0) / (rate + total))


@helper
def finish_tree(rng, state, forest, j, changed):
    """After tree j's update: refresh its leaf map if its partition ``changed``, draw its leaf
    factors and put its new fit into F_k."""
    tree = tree_view(forest, j)
    if changed:
        map_leaves(tree, state.leaf_of[j])
    draw_leaves(rng, tree, state)
    k = j // state.trees_per_class
    fit = state.log_fit[k]
    leaf_of = state.leaf_of[j]
    for i in range(fit.shape[0]):
        fit[i] = state.rest[i] + tree.value[leaf_of[i]]


@helper
def draw_latent(rng, state):
    """phi_i ~ Exp(rate = sum_k lambda_k(x_i)) (kept at 1 with the likelihood off)."""
    if not state.target.prior.likelihood:
        return
    fit = state.log_fit
    for i in range(state.phi.shape[0]):
        total = 0.0
        for k in range(fit.shape[0]):
            total += math.exp(fit[k, i])
        state.phi[i] = rng.exponential(1.0) / total
