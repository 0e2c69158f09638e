"""Parallel tempering of BART: K rungs, each a whole forest with its own sigma^2, swapped whole.

Rung r targets ``pi_r(F, mu, sigma^2) ∝ N(y; f(x), sigma^2)^t_r p(F) p(mu) p(sigma^2)`` (the
likelihood of the sum of trees tempered, t_0 = 1). Since
``N(y; f, sigma^2)^t = N(y; f, sigma^2 / t) x (a function of sigma^2, t and n only)``, given
sigma^2 a rung's backfitting sweep is ordinary BART with the effective variance sigma^2 / t in
the tree moves' leaf marginals and the leaf draws (``target.sigma2[0]`` of the rung's state), and
sigma^2 is drawn from its tempered full conditional
``IG((nu + t n) / 2, (nu lam + t SSR) / 2)``. A rung with t = 0 is the prior (likelihood off).
A swap of the forests of rungs (r, r + 1) is accepted with eq. 4.3 restricted to the likelihood:
``log a = (t_r - t_{r+1}) (l_{r+1} - l_r)``, ``l = log N(y; f, sigma^2)`` of each state.

Probit BART is not tempered here (its likelihood lives in the latent z).
"""

from __future__ import annotations

import math

from .backfit import SIGMA_SAMPLED, BackfitState, begin_sweep, finish_tree, prepare_tree, record_forest
from .cart_chain import cart_step
from .jit import helper, kernel
from .kept import kept_draw
from .likelihood import draw_inverse_gamma
from .records import Data, Target
from .tempering import SWAPS_SEO, record_swaps, track_round_trips

LOG_2PI = math.log(2.0 * math.pi)


@helper
def sum_of_squares(resid):
    total = 0.0
    for i in range(resid.shape[0]):
        total += resid[i] * resid[i]
    return total


@helper(inline=True)
def set_rung(state, prior_off, sigma2, t, likelihood_on):
    """A state's view at rung temperature t: its sigma^2 cell set to the effective variance
    sigma^2 / t, or, at t = 0, to sigma^2 with the likelihood switched off (``prior_off``: the
    chain's prior with ``likelihood`` False). Inlined: it returns a record of the state's arrays."""
    if likelihood_on and t > 0.0:
        state.target.sigma2[0] = sigma2 / t
        return state
    state.target.sigma2[0] = sigma2
    s = state
    return BackfitState(s.resid, s.leaf_of, s.sums, s.z, s.ybin, s.ycls, Target(prior_off, s.target.sigma2),
                        s.fstate, s.sigma_mode, s.cursor, s.blocks)


@helper
def draw_tempered_sigma2(rng, state, sigma2, k, t, likelihood_on):
    """sigma^2 of slot k from its tempered full conditional (a fixed sigma stays)."""
    if state.sigma_mode[0] != SIGMA_SAMPLED:
        return
    nu = state.target.prior.nu
    lam = state.target.prior.lam
    if likelihood_on and t > 0.0:
        ss = sum_of_squares(state.resid)
        sigma2[k] = draw_inverse_gamma(rng, 0.5 * (nu + t * state.resid.shape[0]), 0.5 * (nu * lam + t * ss))
    else:
        sigma2[k] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)


@helper
def log_lik(state, sigma2):
    """log N(y; f, sigma^2) of a state between sweeps (``resid`` = y - f)."""
    n = state.resid.shape[0]
    return -0.5 * n * (LOG_2PI + math.log(sigma2)) - 0.5 * sum_of_squares(state.resid) / sigma2


@helper(inline=True)
def tempered_bart_iteration(rng, rungs, ladder, data, moves, scratch, swaps, it):
    """One backfitting sweep per rung (one MH move per tree), then one round of forest swaps
    between adjacent rungs (``swaps.kind``: DEO or SEO). ``rungs``: a ``records.BartRungs``;
    ``swaps``: a ``records.Swaps``, whose ``tally.counters[0]`` and ``[1]`` count the swaps
    proposed and accepted per pair. Returns the round trips completed."""
    forests, states, sigma2, slot_of = rungs.forests, rungs.states, rungs.sigma2, rungs.slot_of
    counters, phase = swaps.tally.counters, swaps.tally.phase
    proposed, accepted = counters[0], counters[1]
    temps, likelihood_on, prior_off = ladder.temps, ladder.likelihood_on, ladder.prior_off
    move_probs, change_swap, rotation = moves.probs, moves.change_swap, moves.rotation
    n_rungs = slot_of.shape[0]
    for r in range(n_rungs):
        k = slot_of[r]
        forest = forests[k]
        state = set_rung(states[k], prior_off, sigma2[k], temps[r], likelihood_on)
        rung_data = Data(data.xt, data.is_cat, data.nbins, state.resid, state.ycls)  # its own residual
        begin_sweep(state, forest)
        for j in range(forest.var.shape[0]):
            tree = prepare_tree(state, forest, j)
            _, ok = cart_step(rng, tree, rung_data, state.target, move_probs,
                              change_swap, rotation, state.fstate, scratch, state.leaf_of[j])
            finish_tree(rng, state, forest, j, ok)
        draw_tempered_sigma2(rng, state, sigma2, k, temps[r], likelihood_on)
    parity = (0 if rng.random() < 0.5 else 1) if swaps.kind == SWAPS_SEO else it % 2
    for r in range(parity, n_rungs - 1, 2):
        ka = slot_of[r]
        kb = slot_of[r + 1]
        log_a = 0.0
        if likelihood_on:
            log_a = (temps[r] - temps[r + 1]) * (log_lik(states[kb], sigma2[kb]) - log_lik(states[ka], sigma2[ka]))
        proposed[r] += 1
        if math.log(rng.random()) < log_a:
            accepted[r] += 1
            slot_of[r] = kb
            slot_of[r + 1] = ka
    return track_round_trips(slot_of, phase)


@kernel
def run_tempered_bart_chain(rng, rungs, ladder, data, moves, scratch, swaps, window, sigma_out, out):
    """Advance a tempered BART chain by up to ``n_iter`` iterations (see ``run_tempered_chain`` for
    the counters and the pending-draw protocol); kept draws record the target rung's forest.
    ``rungs``: a ``records.BartRungs``; ``ladder``: a ``records.BartLadder``; ``swaps``: a
    ``records.Swaps``; ``sigma_out``: a ``records.SigmaOut``; ``out``: a ``records.ForestOut``."""
    forests, sigma2, slot_of = rungs.forests, rungs.sigma2, rungs.slot_of
    out_sigma, out_rung_sigma = sigma_out.sigma, sigma_out.rung_sigma
    counters, swap_out = swaps.tally.counters, swaps.out
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    n_rungs = slot_of.shape[0]
    for step in range(n_iter):
        it = first_iter + step
        if it == tune:
            counters[:, :] = 0
        trips = tempered_bart_iteration(rng, rungs, ladder, data, moves, scratch, swaps, it)
        counters[0, n_rungs - 1] += trips
        d = kept_draw(it, tune, thin, out_sigma.shape[0])
        if d < 0:
            continue
        record_swaps(counters, d, swap_out)
        for r in range(n_rungs):
            out_rung_sigma[d, r] = math.sqrt(sigma2[slot_of[r]])
        k0 = slot_of[0]
        out_sigma[d] = math.sqrt(sigma2[k0])
        if not record_forest(forests[k0], out.store, d, out.leaves, out.depth, out.nodes, out.order,
                             scratch.stack):
            return step + 1, d
    return n_iter, -1
