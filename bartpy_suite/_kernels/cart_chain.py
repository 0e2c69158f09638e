"""The Metropolis-Hastings tree sampler (``cgm``, ``grow_prune``) on one tree.

``cart_step`` is one MH transition of a tree against a response (the whole of a CART
iteration, or the tree update inside a BART sweep). ``run_cart_chain`` advances a Bayesian CART
chain by a chunk of iterations (thesis Algorithm 4: one proposed tree move, then the parameter
draws at kept iterations) and records every kept draw; the Python side calls it repeatedly so
that Ctrl-C can be honoured between chunks.
"""

from __future__ import annotations

import math

import numpy as np

from .cart_draws import record_cart_draw
from .cart_moves import (
    MOVE_GROW,
    MOVE_PERTURB,
    MOVE_PRUNE,
    MOVE_ROTATE,
    accept_grow,
    accept_prune,
    change_or_swap,
    choose_move,
    propose_grow,
    propose_prune,
    undo_grow,
)
from .jit import helper, kernel
from .kept import kept_draw
from .rotate import perturb_step, rotate_step
from .sparse import S_START, record_weights, tree_sparse_update
from .tree import M_N_INTERNAL


@helper
def cart_step(rng, tree, data, target, move_probs, change_swap, rotation, fstate, scratch,
              leaf_of):
    """One MH transition of the tree. Returns (move type, accepted); move -1 means no move was
    possible and the tree is unchanged.

    ``leaf_of``: the tree's current row-to-leaf map (BART keeps one), or an empty uint8 array
    (see ``cart_moves.propose_grow``).

    ``change_swap`` is None when ``move_probs`` gives the change and swap moves no mass, and
    ``rotation`` when it gives the rotate and perturb moves none; ``change_swap`` is True otherwise and
    ``rotation`` perturb's CHANGE-OF-VARIABLE table (``rotate.change_of_variable_table``). Numba
    drops a ``... is not None`` branch while compiling for None, so a chain does not compile the
    moves it never proposes (``grow_prune``, BART's default, compiles neither; issue 11, section 1).
    """
    y = data.y
    n_total = float(y.shape[0])
    move = choose_move(rng, move_probs, tree.meta[M_N_INTERNAL])
    if move < 0:
        return move, False
    if move == MOVE_GROW:
        log_r, node, log_u = propose_grow(rng, tree, data, target, move_probs, fstate, n_total,
                                          scratch, leaf_of, scratch.model)
        if node < 0:
            return move, False
        if math.isnan(log_u):
            log_u = math.log(rng.random())
        if log_u < log_r:
            accept_grow(tree, node, fstate)
            return move, True
        undo_grow(tree, node, target, scratch)
        return move, False
    if move == MOVE_PRUNE:
        log_r, node = propose_prune(rng, tree, data, target, move_probs, fstate, n_total, scratch,
                                    scratch.model)
        if node >= 0 and math.log(rng.random()) < log_r:
            accept_prune(tree, node, fstate, scratch, target)
            return move, True
        return move, False
    if rotation is not None:
        if move == MOVE_ROTATE:
            accepted, _, _ = rotate_step(rng, tree, data, target, fstate, n_total, scratch)
            return move, accepted
        if move == MOVE_PERTURB:
            accepted, _, _ = perturb_step(rng, tree, data, target, fstate, n_total, scratch, rotation)
            return move, accepted
    if change_swap is not None:
        accepted, _, _ = change_or_swap(rng, tree, data, target, fstate, n_total, scratch,
                                        move, scratch.model)
        return move, accepted
    return move, False  # not reached: choose_move draws only moves with mass


@kernel
def run_cart_chain(rng, tree, data, target, moves, fstate, scratch, window, out, move_out):
    """Advance one chain by up to ``n_iter`` iterations from global iteration ``first_iter``.

    Iterations ``>= tune`` whose offset is a multiple of ``thin`` are recorded at draw index
    ``(it - tune) // thin`` (``out``: a ``CartOut``; the move and its acceptance into
    ``move_out``, a ``records.MoveOut``). Returns ``(iterations done,
    pending draw)``: when the store has no room for a kept tree the chain stops after that
    iteration with everything but the tree recorded, and returns its draw index (else -1); the
    caller grows the store and records the tree (the state is unchanged in between).
    """
    move_probs, change_swap, rotation = moves.probs, moves.change_swap, moves.rotation
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    out_move, out_accepted = move_out.move, move_out.accepted
    no_map = np.empty(0, dtype=np.uint8)
    for step in range(n_iter):
        it = first_iter + step
        move, accepted = cart_step(rng, tree, data, target, move_probs, change_swap, rotation,
                                   fstate,
                                   scratch, no_map)
        d = kept_draw(it, tune, thin, out_move.shape[0])
        if d < 0:
            continue
        out_move[d] = move
        out_accepted[d] = 1 if accepted else 0
        if not record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
            return step + 1, d
    return n_iter, -1


@kernel
def run_sparse_cart_chain(rng, tree, data, target, moves, fstate, scratch, dart, window, run_out):
    """``run_cart_chain`` with DART's split-variable weights (``sparse.py``, a ``records.Dart``):
    after each iteration from ``dart.conf[S_START]`` on, s and theta are redrawn from the tree's
    split counts; kept draws also record s (``dart.split_probs``) and theta (``dart.alpha``).
    ``run_out``: a ``records.RunOut`` of the ``CartOut`` and the ``MoveOut``."""
    conf, split_count, out_split_probs, out_alpha = dart.conf, dart.split_count, dart.split_probs, dart.alpha
    out_move, out_accepted = run_out.stats.move, run_out.stats.accepted
    out = run_out.draws
    move_probs, change_swap, rotation = moves.probs, moves.change_swap, moves.rotation
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    no_map = np.empty(0, dtype=np.uint8)
    for step in range(n_iter):
        it = first_iter + step
        move, accepted = cart_step(rng, tree, data, target, move_probs, change_swap, rotation,
                                   fstate, scratch, no_map)
        if it >= conf[S_START]:
            tree_sparse_update(rng, tree, scratch.log_s, split_count, conf)
        d = kept_draw(it, tune, thin, out_move.shape[0])
        if d < 0:
            continue
        out_move[d] = move
        out_accepted[d] = 1 if accepted else 0
        record_weights(scratch.log_s, conf, out_split_probs, out_alpha, d)
        if not record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
            return step + 1, d
    return n_iter, -1
