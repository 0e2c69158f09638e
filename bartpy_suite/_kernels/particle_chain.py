"""Chain runners of the particle samplers: particle Gibbs for one tree (CART) and for every tree
of a backfitting sweep (BART), and the recording of an SMC island's weighted particles.
"""

from __future__ import annotations

import math

import numpy as np

from .backfit import begin_sweep, draw_noise, finish_tree, prepare_tree, record_forest
from .cart_draws import record_cart_draw
from .jit import helper, kernel
from .kept import kept_draw
from .particle import csmc_update, particle_view
from .tree import F_B_SUM, F_LM_SUM, copy_into

# Columns of a particle sampler's per-draw statistics.
S_ESS = 0
S_KEPT_REFERENCE = 1
S_STAGES = 2


@kernel
def run_pg_cart_chain(rng, tree, particles, data, target, fstate, scratch, pg, window, run_out):
    """Advance a particle Gibbs CART chain by up to ``n_iter`` iterations (one conditional SMC
    update of the tree, Algorithm 2, then the leaf parameters at kept iterations).

    Kept iteration ``it`` is draw ``(it - tune) // thin``; ``out_stats[d]`` gets (ESS of the last
    stage's weights, 1 if the clamped particle was returned, stages), ``run_out`` being a
    ``records.RunOut`` of the ``CartOut`` and ``out_stats``. Returns ``(iterations done, pending
    draw)`` as ``run_cart_chain`` does when the store is full.
    """
    out_stats = run_out.stats
    out = run_out.draws
    scheme, ancestor, ess_threshold = pg.scheme, pg.ancestor, pg.ess_threshold
    work = particles.work
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    for step in range(n_iter):
        it = first_iter + step
        csmc_update(rng, tree, particles, data, target, scratch, scheme, ancestor, fstate,
                    ess_threshold)
        d = kept_draw(it, tune, thin, out_stats.shape[0])
        if d < 0:
            continue
        out_stats[d, S_ESS] = work.out[0]
        out_stats[d, S_KEPT_REFERENCE] = work.out[2]
        out_stats[d, S_STAGES] = work.out[1]
        if not record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
            return step + 1, d
    return n_iter, -1


@helper(inline=True)
def pg_bart_sweep(rng, forest, state, particles, data, scratch, pg,
                  stats):
    """One backfitting sweep (Algorithm 1) with a conditional SMC update of every tree against
    its partial residual (Algorithm 2), then sigma (or the probit latents). ``stats`` gets the
    means over the trees of (last-stage ESS, clamped particle returned, stages)."""
    scheme, ancestor, ess_threshold = pg.scheme, pg.ancestor, pg.ess_threshold
    work = particles.work
    n_trees = forest.var.shape[0]
    stats[:] = 0.0
    begin_sweep(state, forest)
    for j in range(n_trees):
        tree = prepare_tree(state, forest, j)
        changed = csmc_update(rng, tree, particles, data, state.target,
                              scratch, scheme, ancestor, state.fstate, ess_threshold)
        stats[S_ESS] += work.out[0] / n_trees
        stats[S_KEPT_REFERENCE] += work.out[2] / n_trees
        stats[S_STAGES] += work.out[1] / n_trees
        finish_tree(rng, state, forest, j, changed)
    draw_noise(rng, state)


@kernel
def run_pg_bart_chain(rng, forest, state, particles, data, scratch, pg, pg_out, window, out):
    """Advance a particle Gibbs BART chain by up to ``n_iter`` sweeps (see ``run_bart_chain``
    for the recording and the pending-draw protocol); ``pg_out`` (a ``records.PgBartOut``)
    receives sigma and the sweep's statistics."""
    out_sigma, out_stats = pg_out.sigma, pg_out.stats
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    stats = np.zeros(3)
    for step in range(n_iter):
        it = first_iter + step
        pg_bart_sweep(rng, forest, state, particles, data, scratch, pg,
                      stats)
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        out_sigma[d] = math.sqrt(state.target.sigma2[0])
        copy_into(out_stats[d], stats)  # not out_stats[d] = stats: see tree.copy_into
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1


@kernel
def record_particles(rng, final, work, data, target, fstate, scratch, out, perm, first):
    """Record the particles of an SMC island as draws ``first, first + 1, ...``: particle
    ``perm[d]`` becomes draw d (leaf parameters drawn from their full conditionals given its
    tree). Returns the first draw not recorded because the store was full (N when done); that
    draw's scalars are written and its tree must be recorded after growing the store."""
    n_part = work.w.shape[0]
    for d in range(first, n_part):
        i = perm[d]
        tree = particle_view(final, i)
        fstate[F_LM_SUM] = final.lm_sum[i]
        fstate[F_B_SUM] = final.b_sum[i]
        if not record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
            return d
    return n_part
