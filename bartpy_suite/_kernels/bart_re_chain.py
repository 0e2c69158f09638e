"""BART with Gaussian random effects (``y ~ x1 + (1 | g)``): the MH tree updates of
``bart_chain.mh_tree_updates``, then the random-effects block (``random_effects.py``), then sigma
(``backfit.draw_noise``), and the chunked chain runner.

The residual the trees see is y - gamma - (the other trees); the block adds gamma back, redraws
it and subtracts it, so after it the residual is y - sum of trees - gamma, which sigma's draw
reads (spec multi_forest.md 4.2: the block runs after the forest, as in stochtree).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import draw_noise, record_forest
from .bart_chain import mh_tree_updates, record_sigma_and_counts
from .cart_moves import N_MOVES
from .jit import helper, kernel
from .kept import kept_draw
from .random_effects import level_move, random_effects_block
from .tree import copy_into


class ReOut(NamedTuple):
    """Where a BART + random effects chain records a kept draw besides its trees (``ForestOut``)."""

    sigma: np.ndarray  # float64[draws]
    counts: np.ndarray  # int64[draws, N_MOVES, 2]: MH proposals and acceptances per move type
    alpha: np.ndarray  # float64[draws, K]
    xi: np.ndarray  # float64[draws, G, K]
    sigma_xi: np.ndarray  # float64[draws, K]: sqrt of the diagonal of Sigma_xi


@helper(inline=True)
def mh_bart_re_sweep(rng, forest, state, data, moves, scratch, re, counts):
    """One sweep: an MH move per tree, the random-effects block, the level move between the forest
    and the random intercepts (``random_effects.level_move``), then sigma."""
    mh_tree_updates(rng, forest, state, data, moves, scratch, counts)
    random_effects_block(rng, re, state.resid, state.target.sigma2[0], state.target.prior.likelihood)
    level_move(rng, re, forest, state.target.prior.tau2, float(forest.var.shape[0]))
    draw_noise(rng, state)


@kernel
def run_bart_re_chain(rng, forest, state, data, moves, scratch, re, window, re_out, out):
    """Advance one BART + random effects chain by up to ``n_iter`` sweeps from ``first_iter``.

    Returns ``(iterations done, pending draw index)`` as ``bart_chain.run_bart_chain``; the
    random-effects and sigma draws of a pending draw are written before it returns.
    """
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        mh_bart_re_sweep(rng, forest, state, data, moves, scratch, re, counts)
        d = kept_draw(it, tune, thin, re_out.sigma.shape[0])
        if d < 0:
            continue
        record_sigma_and_counts(re_out.sigma, re_out.counts, d, state, counts)
        copy_into(re_out.alpha[d], re.alpha)
        for g in range(re.xi.shape[0]):
            copy_into(re_out.xi[d, g], re.xi[g])
        for k in range(re.sigma2.shape[0]):
            re_out.sigma_xi[d, k] = math.sqrt(re.sigma2[k])
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1
