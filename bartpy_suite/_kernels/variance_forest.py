"""A multiplicative variance forest (heteroskedastic BART; issue 30; spec multi_forest.md 5, Murray 2021's
log-linear leaves as stochtree codes them).

Row i's noise variance is ``sigma0^2 v(x_i) / w_i`` with ``v(x) = prod_j s_j(x)``, one factor s per tree
and each leaf's s ~ IG(a, b) (``Prior.lg_shape``, ``Prior.lg_rate``). A tree stores lambda = log s in
``value``, so ``logv_i = sum_j lambda_j(x_i)`` is an ordinary sum of trees (spec 5.1). sigma0^2 is fixed
(spec 5.4: only sigma0^2 v is identified); it is the variance cell of the part's ``Target``.

Tree j sees, for each row, ``u_i = w_i r_i^2 / V_{-j,i}`` with ``V_{-j,i} = sigma0^2 exp(logv_i -
lambda_j(x_i))`` and r the full mean residual; a leaf's statistics are n (rows with w_i > 0) and
S = sum u_i, its log marginal ``likelihood.leaf_log_marginal_log_variance`` (the tree kernels'
``MODEL_LOG_VARIANCE``, so every MH move of ``cart_moves`` scores it), its full conditional
IG(a + n/2, b + S/2) (spec 5.3). The sweep over the trees (spec 5.4, the caches):

    for j in range(trees):
        tree = prepare_variance_tree(part, j, resid, w)     # u, the rest of logv, leaf terms
        changed = <an MH move of tree j against part.data>
        finish_variance_tree(rng, part, j, changed)         # leaf map, leaf draws, logv updated

after which ``set_mean_weights`` gives the mean forest's rows their precision weights w_i exp(-logv_i)
(basis leaves with b = 1: ``basis.py``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import leaf_cursors, map_leaves, shared_perm, tree_view
from .cart_chain import cart_step
from .jit import helper
from .likelihood import MODEL_LOG_VARIANCE
from .loglinear import score_leaves
from .records import Target
from .tree import LEAF, M_SPAN, model_tag

LOG_VARIANCE = model_tag(MODEL_LOG_VARIANCE)  # a global tuple: numba compiles it in as a constant


class VarianceState(NamedTuple):
    """Mutable state of a variance forest besides its trees."""

    logv: np.ndarray  # float64[n]: log v(x_i) = sum over the trees of lambda
    u: np.ndarray  # float64[n]: w_i r_i^2 / V_{-j,i} of the tree being updated (the part's ``Data.y``)
    rest: np.ndarray  # float64[n]: logv_i minus the tree being updated
    pos: np.ndarray  # int64[n]: 1 for rows with w_i > 0 (the part's ``Data.ycls``)
    leaf_of: np.ndarray  # uint8[T, n]: leaf of each row in each tree
    target: Target  # the variance trees' prior (model MODEL_LOG_VARIANCE) and sigma0^2 in its sigma2 cell
    fstate: np.ndarray  # float64[2]
    class_counts: np.ndarray  # float64[1]: work array of ``leaf_terms``
    cursor: np.ndarray  # int64[N]: work array of the shared row permutation's rebuild


class VariancePart(NamedTuple):
    """A variance forest in a chain: its stacked trees (``TreeArrays``), ``VarianceState``, the data its
    trees split (``records.Data``: its own predictors, ``y`` = ``state.u``, ``ycls`` = ``state.pos``), its
    move scratch (model ``MODEL_LOG_VARIANCE``) and where its kept draws go (``records.ForestOut``)."""

    forest: tuple
    state: VarianceState
    data: tuple
    scratch: tuple
    out: tuple


@helper(inline=True)
def prepare_variance_tree(part, j, resid, w):
    """Tree j as a view, with each row's u_i and the rest of logv, and its leaf terms cached (its rows
    written into the row permutation the trees share, if they share one: ``backfit``)."""
    vs = part.state
    forest = part.forest
    tree = tree_view(forest, j)
    leaf_of = vs.leaf_of[j]
    inv_s0 = 1.0 / vs.target.sigma2[0]
    perm = shared_perm(forest)
    rebuild = perm.shape[0] == resid.shape[0]
    cursor = vs.cursor
    leaf_cursors(tree.var, tree.start, tree.meta[M_SPAN], cursor)
    for i in range(resid.shape[0]):
        leaf = leaf_of[i]
        rest = vs.logv[i] - tree.value[leaf]
        vs.rest[i] = rest
        r = resid[i]
        vs.u[i] = w[i] * r * r * math.exp(-rest) * inv_s0
        if rebuild:
            perm[cursor[leaf]] = i
            cursor[leaf] += 1
    score_leaves(tree, vs.u, vs.pos, vs.target, vs.class_counts, LOG_VARIANCE, vs.fstate)
    return tree


@helper
def draw_variance_leaves(rng, tree, vs):
    """Every leaf's lambda = log s, s ~ IG(a + n/2, b + S/2) (spec 5.3; the prior IG(a, b) with the
    likelihood off): lambda = log(b + S/2) - log G, G ~ Gamma(a + n/2, 1)."""
    shape = vs.target.prior.lg_shape
    rate = vs.target.prior.lg_rate
    use_lik = vs.target.prior.likelihood
    perm = tree.perm
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] != LEAF:
            continue
        n_pos = 0.0
        total = 0.0
        if use_lik:
            for i in range(tree.start[node], tree.end[node]):
                r = perm[i]
                n_pos += vs.pos[r]
                total += vs.u[r]
        tree.value[node] = math.log(rate + 0.5 * total) - math.log(rng.gamma(shape + 0.5 * n_pos, 1.0))


@helper
def finish_variance_tree(rng, part, j, changed):
    """After tree j's update: its leaf map (if its partition ``changed``), its leaf draws, and logv."""
    vs = part.state
    tree = tree_view(part.forest, j)
    if changed:
        map_leaves(tree, vs.leaf_of[j])
    draw_variance_leaves(rng, tree, vs)
    leaf_of = vs.leaf_of[j]
    for i in range(vs.logv.shape[0]):
        vs.logv[i] = vs.rest[i] + tree.value[leaf_of[i]]


@helper
def set_mean_weights(logv, w, basis):
    """The mean forest's basis rows for b = 1 and precision weights w_i exp(-logv_i) (``basis.py``)."""
    for i in range(w.shape[0]):
        wi = w[i] * math.exp(-logv[i])
        basis[0, i] = 1.0
        basis[1, i] = wi
        basis[2, i] = wi


@helper(inline=True)
def mh_variance_forest(rng, part, resid, w, moves, counts):
    """One pass over the variance trees, an MH move (``cart_step``) per tree against the full mean residual
    ``resid``; ``counts`` as in ``bart_chain.mh_tree_updates``."""
    move_probs, change_swap, rotation = moves.probs, moves.change_swap, moves.rotation
    vs = part.state
    for j in range(part.forest.var.shape[0]):
        tree = prepare_variance_tree(part, j, resid, w)
        move, accepted = cart_step(rng, tree, part.data, vs.target, move_probs, change_swap, rotation, vs.fstate,
                                   part.scratch, vs.leaf_of[j])
        if move >= 0:
            counts[move, 0] += 1
            if accepted:
                counts[move, 1] += 1
        finish_variance_tree(rng, part, j, accepted)
