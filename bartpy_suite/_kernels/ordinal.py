"""Cumulative-probit (ordinal) BART: the latent and cutpoint updates and the MH chain runner.

Model (Albert & Chib 1993, section 4; spec ``outcomes.md`` 2.1), classes coded 0..K-1:

    z_i = eta_i + eps_i,  eps_i ~ N(0, 1),  eta_i = mu0 + f(x_i),
    y_i = k  <=>  c_k < z_i <= c_{k+1},   c_0 = -inf < c_1 = 0 < c_2 < ... < c_{K-1} < c_K = +inf.

The kernels hold the cutpoints padded with the two infinite ends, ``cut`` of length K + 1, so the
interval of class k is ``(cut[k], cut[k + 1]]``. The free cutpoints are ``cut[2:K]``.

Cutpoint prior: c_2, ..., c_{K-1} i.i.d. N(0, s^2) restricted to 0 < c_2 < ... < c_{K-1}
(``s`` = ``settings[O_PRIOR_SD]``). It is proper, which the prior-only tests need; the flat prior
of Albert & Chib (1993) and Cowles (1996) is its limit s -> inf.

One sweep (``mh_ordinal_sweep``): the trees by probit backfitting on z - mu0 (sigma = 1, the
existing ``backfit`` bookkeeping, ``resid = z - eta``); then (c, z) | f, y as one block:

(a) c by a Metropolis-Hastings step on the marginal p(c | f, y), z integrated out (Cowles 1996's
    blocking): a Gaussian random walk on the log increments d_k = log(c_k - c_{k-1}),
    k = 2..K-1, all at once (the log-gap parameterisation of Albert & Chib 2001, section 3.2). The
    acceptance ratio is

        prod_i [Phi(c'_{y_i+1} - eta_i) - Phi(c'_{y_i} - eta_i)] / [same with c]
        x pi(c') / pi(c) x prod_k (c'_k - c'_{k-1}) / (c_k - c_{k-1}),

    the last factor the Jacobian of c -> d (the walk is symmetric in d). The step size adapts
    during tuning only (``adapt_step``).
(b) z_i ~ TN(eta_i, 1; (c_{y_i}, c_{y_i+1}]) for every i, exactly (``truncated_normal_between``).

(a) then (b) leaves p(c, z | f, y) invariant: (a) is a Metropolis step on the marginal of c and
(b) draws z from its conditional given c, so the old z may be discarded.

``settings[O_GIBBS] = 1`` replaces (a) by Albert & Chib's (1993) Gibbs step, c_k | z drawn from its
prior restricted to (max{z_i : y_i = k - 1}, min{z_i : y_i = k}). It is exact but mixes ever more
slowly as n grows (the interval shrinks like 1/n), which is why (a) is the default; it is kept as a
cross-check (``benchmarks/ordinal.py``, part 2, measures both).

With K = 2 there is no free cutpoint: the step consumes no random numbers and the latent draws call
``truncated_normal_above`` exactly as probit BART does, so the chain reproduces probit BART draw
for draw (a test).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import record_forest, truncated_normal_above
from .bart_chain import mh_tree_updates
from .cart_moves import N_MOVES
from .jit import helper, kernel
from .kept import kept_draw
from .tree import copy_into

O_PRIOR_SD = 0  # prior sd s of the free cutpoints
O_STEP = 1  # sd of the random walk on the log increments
O_STEPS = 2  # MH steps per sweep
O_GIBBS = 3  # 1: Albert & Chib's Gibbs step instead of the MH step
N_SETTINGS = 4
#: Sweeps between two adaptations of the step size during tuning (spec 2.2).
ADAPT_EVERY = 50
#: Acceptance rate the adaptation aims at (a random walk in a few dimensions).
TARGET_ACCEPT = 0.35
_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class OrdinalState(NamedTuple):
    """The ordinal part of a chain's state (the forest and ``backfit.BackfitState`` hold the rest:
    ``z`` the latents, ``resid = z - eta``)."""

    ycls: np.ndarray  # int64[n]: class codes 0..K-1
    cut: np.ndarray  # float64[K + 1]: -inf, 0, c_2, ..., c_{K-1}, +inf
    proposal: np.ndarray  # float64[K + 1]: the proposed cutpoints (scratch)
    settings: np.ndarray  # float64[N_SETTINGS]
    tally: np.ndarray  # int64[2]: MH proposals and acceptances since the last adaptation


@helper
def log_ndtr(x):
    """log Phi(x), accurate in both tails: log1p(-Phi(-x)) above 0, the erfc form down to -35,
    the asymptotic series (Abramowitz & Stegun 26.2.12) below."""
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / _SQRT2))
    if x > -35.0:
        return math.log(0.5 * math.erfc(-x / _SQRT2))
    if x == -math.inf:
        return -math.inf
    r = 1.0 / (x * x)
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log1p(r * (-1.0 + r * (3.0 - 15.0 * r)))


@helper
def log_interval(lo, hi):
    """log(Phi(hi) - Phi(lo)) for lo < hi (either may be infinite), without cancellation: both
    ends on one side of 0 through log Phi of the nearer end, an interval around 0 through erf."""
    if lo >= 0.0:  # Phi(hi) - Phi(lo) = Phi(-lo) - Phi(-hi)
        lo, hi = -hi, -lo
    if hi <= 0.0:
        a = log_ndtr(hi)
        return a + math.log1p(-math.exp(log_ndtr(lo) - a))
    return math.log(0.5 * (math.erf(hi / _SQRT2) - math.erf(lo / _SQRT2)))


@helper
def _right_of_zero(rng, lo, hi):
    """N(0, 1) truncated to (lo, hi] with 0 <= lo < hi < inf (Robert 1995): a uniform proposal
    when the interval is narrow against the tail (acceptance >= 1/e), else his exponential
    proposal with the draws beyond ``hi`` rejected."""
    if (hi - lo) * (hi + lo) < 2.0:
        while True:
            x = lo + (hi - lo) * rng.random()
            if math.log(rng.random()) < 0.5 * (lo * lo - x * x):
                return x
    lam = 0.5 * (lo + math.sqrt(lo * lo + 4.0))
    while True:
        x = lo + rng.exponential(1.0) / lam
        if x <= hi and math.log(rng.random()) < -0.5 * (x - lam) ** 2:
            return x


@helper
def truncated_normal_between(rng, lo, hi):
    """Draw from N(0, 1) truncated to (lo, hi] (lo < hi; either may be infinite).

    A half-infinite interval goes to ``backfit.truncated_normal_above`` (so a two-class model
    draws exactly as probit BART); a finite one to a rejection sampler chosen by where the interval
    lies (Robert 1995): plain normal rejection for a wide interval around 0, a uniform proposal for
    a narrow one around 0, ``_right_of_zero`` (mirrored for an interval left of 0) otherwise. Each
    is exact, so the choice only affects the cost."""
    if lo == -math.inf:
        return -truncated_normal_above(rng, -hi)
    if hi == math.inf:
        return truncated_normal_above(rng, lo)
    if lo >= 0.0:
        return _right_of_zero(rng, lo, hi)
    if hi <= 0.0:
        return -_right_of_zero(rng, -hi, -lo)
    if hi - lo >= 2.5066282746310002:  # sqrt(2 pi): normal rejection accepts >= about a half
        while True:
            x = rng.standard_normal()
            if lo < x <= hi:
                return x
    while True:
        x = lo + (hi - lo) * rng.random()
        if math.log(rng.random()) < -0.5 * x * x:
            return x


@helper
def update_latents(rng, resid, z, ycls, cut):
    """z_i ~ TN(eta_i, 1; (cut[y_i], cut[y_i + 1]]) with eta_i = z_i - resid_i, keeping
    resid = z - eta (step (b) of the module docstring)."""
    for i in range(resid.shape[0]):
        eta = z[i] - resid[i]
        k = ycls[i]
        znew = eta + truncated_normal_between(rng, cut[k] - eta, cut[k + 1] - eta)
        z[i] = znew
        resid[i] = znew - eta


@helper
def cutpoint_log_prior(cut):
    """log of the cutpoint prior up to a constant: -sum c_k^2 / 2 over the free cutpoints, in units
    of the prior variance (the caller divides)."""
    total = 0.0
    for k in range(2, cut.shape[0] - 1):
        total += cut[k] * cut[k]
    return -0.5 * total


@helper
def mh_cutpoints(rng, resid, z, ycls, ost, use_lik):
    """One MH step on the log increments of the free cutpoints (step (a) of the module docstring);
    returns whether it was accepted. Rows of class 0 have the fixed interval (-inf, 0] and are
    skipped."""
    cut = ost.cut
    prop = ost.proposal
    n_cut = cut.shape[0]
    step = ost.settings[O_STEP]
    for k in range(n_cut):
        prop[k] = cut[k]
    log_r = 0.0
    for k in range(2, n_cut - 1):
        e = step * rng.standard_normal()
        prop[k] = prop[k - 1] + (cut[k] - cut[k - 1]) * math.exp(e)
        log_r += e  # the Jacobian: log(gap' / gap)
    sd = ost.settings[O_PRIOR_SD]
    log_r += (cutpoint_log_prior(prop) - cutpoint_log_prior(cut)) / (sd * sd)
    if use_lik:
        for i in range(resid.shape[0]):
            k = ycls[i]
            if k == 0:
                continue
            eta = z[i] - resid[i]
            log_r += log_interval(prop[k] - eta, prop[k + 1] - eta) - log_interval(cut[k] - eta, cut[k + 1] - eta)
    ost.tally[0] += 1
    if math.log(rng.random()) < log_r:
        for k in range(2, n_cut - 1):
            cut[k] = prop[k]
        ost.tally[1] += 1
        return True
    return False


@helper
def gibbs_cutpoints(rng, z, ycls, ost, use_lik):
    """Albert & Chib's (1993) Gibbs step: each free c_k from its prior N(0, s^2) restricted to
    (max{z_i : y_i = k - 1}, min{z_i : y_i = k}) and to the order, in turn (one scan of the rows
    per cutpoint)."""
    cut = ost.cut
    n_cut = cut.shape[0]
    sd = ost.settings[O_PRIOR_SD]
    for k in range(2, n_cut - 1):
        lo = cut[k - 1]
        hi = cut[k + 1]
        if use_lik:
            for i in range(z.shape[0]):
                if ycls[i] == k - 1 and z[i] > lo:
                    lo = z[i]
                elif ycls[i] == k and z[i] < hi:
                    hi = z[i]
        cut[k] = sd * truncated_normal_between(rng, lo / sd, hi / sd)


@helper
def adapt_step(ost):
    """During tuning, every ``ADAPT_EVERY`` sweeps: step *= exp(acceptance - TARGET_ACCEPT),
    the factor clipped to [1/2, 2] (spec 2.2); the tally restarts."""
    if ost.tally[0] == 0:
        return
    rate = ost.tally[1] / ost.tally[0]
    factor = math.exp(rate - TARGET_ACCEPT)
    ost.settings[O_STEP] *= min(2.0, max(0.5, factor))
    ost.tally[0] = 0
    ost.tally[1] = 0


@helper
def update_cut_and_latents(rng, state, ost):
    """Step (a) (MH, or Gibbs with ``O_GIBBS``) then step (b); returns the MH acceptances of the
    sweep. K = 2 consumes no random numbers in (a)."""
    use_lik = state.target.prior.likelihood
    accepted = 0
    if ost.cut.shape[0] > 3:
        if ost.settings[O_GIBBS] != 0.0:
            gibbs_cutpoints(rng, state.z, ost.ycls, ost, use_lik)
        else:
            for _ in range(int(ost.settings[O_STEPS])):
                if mh_cutpoints(rng, state.resid, state.z, ost.ycls, ost, use_lik):
                    accepted += 1
    if use_lik:
        update_latents(rng, state.resid, state.z, ost.ycls, ost.cut)
    return accepted


@helper(inline=True)
def mh_ordinal_sweep(rng, forest, state, ost, data, moves, scratch, counts):
    """One backfitting sweep with an MH move per tree (``bart_chain.mh_tree_updates``), then the
    cutpoints and latents; returns the cutpoint acceptances."""
    mh_tree_updates(rng, forest, state, data, moves, scratch, counts)
    return update_cut_and_latents(rng, state, ost)


@kernel
def run_ordinal_chain(rng, forest, state, ost, data, moves, scratch, stats, window, out):
    """``bart_chain.run_bart_chain`` for ordinal BART: records (``stats``, a
    ``records.OrdinalOut``) the K - 1 finite cutpoints and the share of the sweep's cutpoint MH
    steps accepted instead of sigma, and adapts the step size during tuning."""
    out_cut, out_counts, out_cut_accepted = stats.cut, stats.counts, stats.cut_accepted
    out_leaves, out_depth, store, nodes, order = out.leaves, out.depth, out.store, out.nodes, out.order
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    n_cut = ost.cut.shape[0]
    steps = max(1.0, ost.settings[O_STEPS])
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        acc = mh_ordinal_sweep(rng, forest, state, ost, data, moves, scratch,
                               counts)
        if it < tune:
            if (it + 1) % ADAPT_EVERY == 0:
                adapt_step(ost)
            continue
        d = kept_draw(it, tune, thin, out_cut.shape[0])
        if d < 0:
            continue
        for k in range(1, n_cut - 1):
            out_cut[d, k - 1] = ost.cut[k]
        out_cut_accepted[d] = acc / steps
        for k in range(N_MOVES):  # not out_counts[d] = counts: see tree.copy_into
            copy_into(out_counts[d, k], counts[k])
        if not record_forest(forest, store, d, out_leaves, out_depth, nodes, order, scratch.stack):
            return step + 1, d
    return n_iter, -1
