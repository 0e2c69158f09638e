"""Chain runners of the continuous-time sampler (``ctmc``): Bayesian CART as a weighted jump
chain, and BART with a fixed-time run of the process per tree visit inside backfitting.

Imports numpy, numba and the kernels of this package only.
"""

from __future__ import annotations

import math

import numpy as np

from .backfit import begin_sweep, draw_noise, finish_tree, prepare_tree, record_forest
from .cart_draws import record_cart_draw
from .ctmc import compute_all_rates, event_step, mh_event_rate, run_for_time, total_rate
from .jit import helper, kernel
from .kept import kept_draw


@kernel
def run_ctmc_cart_chain(rng, tree, data, target, fstate, scratch, cs, window, run_out, mh_rates):
    """Advance a CART chain by up to ``n_iter`` jumps of the birth-death process.

    Each iteration is one jump (every event accepted, CT-MCMC Algorithm 2); the tree reached
    is recorded, when kept, with its weight ``1 / Lambda`` (expected holding time, eq. 4 and
    the Rao-Blackwellized estimator eq. 12), its Lambda and the event kind. A tree without
    any event (Lambda = 0: nothing can split) is absorbing and recorded with weight 1.
    ``mh_rates`` are the rates of the rotate and perturb events (``ctmc.event_step``); a
    rejected rotate or perturb is an event that stays in the same tree, recorded again.
    ``run_out`` (a ``records.RunOut``) holds the ``CartOut`` and the ``records.CtmcCartOut`` that
    receives the weights, Lambdas and events.
    Returns ``(iterations done, pending draw)`` as ``run_cart_chain`` does.
    """
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    stats = run_out.stats
    out = run_out.draws
    out_weight, out_rate, out_event = stats.weight, stats.rate, stats.event
    compute_all_rates(tree, data, target, fstate, scratch, cs)
    lam_bd = total_rate(tree, cs)
    lam = lam_bd + mh_event_rate(tree, mh_rates)
    for step in range(n_iter):
        it = first_iter + step
        kind = -1
        if lam > 0.0:
            kind = event_step(rng, tree, data, target, fstate, scratch, cs, lam_bd, mh_rates)
            lam_bd = total_rate(tree, cs)
            lam = lam_bd + mh_event_rate(tree, mh_rates)
        d = kept_draw(it, tune, thin, out_weight.shape[0])
        if d < 0:
            continue
        out_weight[d] = 1.0 / lam if lam > 0.0 else 1.0
        out_rate[d] = lam
        out_event[d] = kind
        if not record_cart_draw(rng, tree, data, target, fstate, scratch, out, d):
            return step + 1, d
    return n_iter, -1


@helper(inline=True)
def ctmc_bart_sweep(rng, forest, state, data, scratch, cs, horizon, out, mh_rates):
    """One backfitting sweep: each tree runs the process for ``horizon`` time against its
    partial residual, then sigma (or the probit latents). ``out`` receives (jumps, sum of the
    trees' starting Lambda)."""
    begin_sweep(state, forest)
    jumps = 0
    lam_sum = 0.0
    for j in range(forest.var.shape[0]):
        tree = prepare_tree(state, forest, j)
        n_jumps, lam0 = run_for_time(rng, tree, data, state.target, state.fstate,
                                     scratch, cs, horizon, mh_rates)
        jumps += n_jumps
        lam_sum += lam0
        finish_tree(rng, state, forest, j, n_jumps > 0)
    draw_noise(rng, state)
    out[0] = jumps
    out[1] = lam_sum


@kernel
def run_ctmc_bart_chain(rng, forest, state, data, scratch, cs, clock, window, run_out, mh_rates):
    """Advance a BART chain by up to ``n_iter`` sweeps (see ``run_bart_chain`` for the return).

    ``horizon[0]`` is the time per tree visit. With ``adapt`` it is reset during tuning after
    every sweep to ``1 / mean Lambda`` of that sweep's visits (about one jump per visit), and
    fixed from the end of tuning on. Kept sweeps record the mean jumps per visit, the mean
    starting Lambda and the time used. ``clock`` is a ``records.CtmcClock`` (``horizon``,
    ``adapt``), ``run_out`` a ``records.RunOut`` of the ``ForestOut`` and the ``records.CtmcBartOut``;
    ``mh_rates`` as in ``run_ctmc_cart_chain`` (an argument, not a record field: None compiles the
    rotate and perturb events out).
    """
    horizon, adapt = clock.horizon, clock.adapt
    stats = run_out.stats
    out = run_out.draws
    out_sigma, out_jumps, out_rate, out_time = stats.sigma, stats.jumps, stats.rate, stats.time
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    n_trees = forest.var.shape[0]
    sweep_out = np.zeros(2)
    for step in range(n_iter):
        it = first_iter + step
        ctmc_bart_sweep(rng, forest, state, data, scratch, cs, horizon[0], sweep_out, mh_rates)
        used = horizon[0]
        if adapt and (it < tune or it == 0) and sweep_out[1] > 0.0:
            horizon[0] = n_trees / sweep_out[1]
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        out_sigma[d] = math.sqrt(state.target.sigma2[0])
        out_jumps[d] = sweep_out[0] / n_trees
        out_rate[d] = sweep_out[1] / n_trees
        out_time[d] = used
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1
