"""BART with the Metropolis-Hastings tree update (``cgm``, ``grow_prune``): one ``cart_step``
per tree inside Bayesian backfitting (``backfit.py``) or inside log-linear (multinomial) BART
(``loglinear.py``), and the chunked chain runners."""

from __future__ import annotations

import math

import numpy as np

from . import loglinear
from .backfit import begin_sweep, draw_noise, finish_tree, prepare_tree, record_forest
from .cart_chain import cart_step
from .cart_moves import N_MOVES
from .jit import helper, kernel
from .kept import kept_draw
from .sparse import S_START, forest_sparse_update, record_weights
from .tree import copy_into


@helper(inline=True)
def counted_cart_step(rng, tree, data, target, moves, fstate, scratch, leaf_of, counts):
    """One MH move on ``tree`` (``cart_step`` with the ``records.Moves`` ``moves``), counted:
    ``counts[k, 0]`` / ``counts[k, 1]`` accumulate proposals / acceptances of move type k. Returns
    whether the move was accepted."""
    move, accepted = cart_step(rng, tree, data, target, moves.probs, moves.change_swap, moves.rotation, fstate,
                               scratch, leaf_of)
    if move >= 0:
        counts[move, 0] += 1
        if accepted:
            counts[move, 1] += 1
    return accepted


@helper(inline=True)
def record_move_counts(out_counts, d, counts):
    """The sweep's move counts ``counts`` as kept draw d of ``out_counts`` (draws, N_MOVES, 2)."""
    for k in range(N_MOVES):  # not out_counts[d] = counts: see tree.copy_into
        copy_into(out_counts[d, k], counts[k])


@helper(inline=True)
def record_sigma_and_counts(out_sigma, out_counts, d, state, counts):
    """Kept draw d of an MH chain: sigma (the square root of the state's sigma^2 cell) into ``out_sigma``
    and the sweep's move counts into ``out_counts`` (``record_move_counts``)."""
    out_sigma[d] = math.sqrt(state.target.sigma2[0])
    record_move_counts(out_counts, d, counts)


@helper(inline=True)
def mh_tree_updates(rng, forest, state, data, moves, scratch, counts):
    """The trees' part of a backfitting sweep: an MH move per tree on its partial residual, counted in
    ``counts`` (``counted_cart_step``)."""
    begin_sweep(state, forest)
    for j in range(forest.var.shape[0]):
        tree = prepare_tree(state, forest, j)
        accepted = counted_cart_step(rng, tree, data, state.target, moves, state.fstate, scratch, state.leaf_of[j],
                                     counts)
        finish_tree(rng, state, forest, j, accepted)


@helper(inline=True)
def mh_bart_sweep(rng, forest, state, data, moves, scratch, counts):
    """One backfitting sweep with an MH move per tree (``mh_tree_updates``), then sigma (or the
    probit latents)."""
    mh_tree_updates(rng, forest, state, data, moves, scratch, counts)
    draw_noise(rng, state)


@kernel
def run_bart_chain(rng, forest, state, data, moves, scratch, window, out_sigma, out_counts, out):
    """Advance one BART chain by up to ``n_iter`` sweeps from global iteration ``first_iter``.

    Returns ``(iterations done, pending draw index)``. When the store has no room for the
    forest of a kept draw, the chain stops right after that sweep and returns its draw index
    as pending (else -1): the caller grows the store and records it with ``record_forest``.
    """
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        mh_bart_sweep(rng, forest, state, data, moves, scratch, counts)
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        record_sigma_and_counts(out_sigma, out_counts, d, state, counts)
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1


@kernel
def run_sparse_bart_chain(rng, forest, state, data, moves, scratch, dart, mh_out, window, out):
    """``run_bart_chain`` with DART's split-variable weights (``sparse.py``, a ``records.Dart``):
    after each sweep from iteration ``dart.conf[S_START]`` on, s and theta are redrawn; kept
    draws also record s (``dart.split_probs``) and theta (``dart.alpha``). A kernel of its own,
    so that fits without DART neither compile nor run any of it. ``mh_out`` (a
    ``records.MhBartOut``) receives sigma and the sweep's move counts."""
    conf, split_count, out_split_probs, out_alpha = dart.conf, dart.split_count, dart.split_probs, dart.alpha
    out_sigma, out_counts = mh_out.sigma, mh_out.counts
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        mh_bart_sweep(rng, forest, state, data, moves, scratch, counts)
        if it >= conf[S_START]:
            forest_sparse_update(rng, forest, scratch.log_s, split_count, conf)
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        record_sigma_and_counts(out_sigma, out_counts, d, state, counts)
        record_weights(scratch.log_s, conf, out_split_probs, out_alpha, d)
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1


@helper(inline=True)
def mh_multinomial_sweep(rng, forest, state, data, moves, scratch, counts):
    """One sweep of log-linear BART (``loglinear.py``) with an MH move per tree, then the
    augmentation latents. ``counts`` as in ``mh_bart_sweep``."""
    m = state.trees_per_class
    for k in range(state.log_fit.shape[0]):
        loglinear.set_class(state, k)
        for t in range(m):
            j = k * m + t
            tree = loglinear.prepare_tree(state, forest, j)
            accepted = counted_cart_step(rng, tree, data, state.target, moves, state.fstate, scratch,
                                         state.leaf_of[0, :0], counts)
            loglinear.finish_tree(rng, state, forest, j, accepted)
    loglinear.draw_latent(rng, state)


@kernel
def run_multinomial_chain(rng, forest, state, data, moves, scratch,
                          window, out_counts, out):
    """``run_bart_chain`` for log-linear BART (no sigma)."""
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        mh_multinomial_sweep(rng, forest, state, data, moves, scratch, counts)
        d = kept_draw(it, tune, thin, out_counts.shape[0])
        if d < 0:
            continue
        record_move_counts(out_counts, d, counts)
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1
