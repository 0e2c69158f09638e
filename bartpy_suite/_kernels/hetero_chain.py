"""BART with observation weights and, optionally, a variance forest (issue 30, "Heteroskedastic BART and
weights"; spec multi_forest.md 1.1, 2.1, 5): the chunked chain runner.

On the working response y (offset already taken out by the model):

    y_i = f(x_i) + e_i,   e_i ~ N(0, sigma^2 v(x_i) / w_i)

with f the mean forest of basis leaves with b = 1 (``basis.py``: row i's precision is
``basis[1, i] / sigma2`` with ``basis[1, i] = w_i exp(-logv_i)``), v the variance forest
(``variance_forest.py``; v = 1 when it has no trees) and w_i >= 0 known precision weights (dbarts' and
bcf's meaning, spec 5.5). One sweep: every mean tree (an MH move each), every variance tree (on the
full residual, spec 5.4 "Order"), the mean forest's weights refreshed from the new logv, then sigma^2:
drawn from IG((nu + n+)/2, (nu lam + sum_i w_i r_i^2 / v_i)/2) (n+ the rows with w_i > 0) when it is
sampled, fixed otherwise (a fit with a variance forest fixes sigma0^2, spec 5.4).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .backfit import SIGMA_SAMPLED, record_forest
from .bart_chain import record_sigma_and_counts
from .basis import mh_basis_forest
from .cart_moves import N_MOVES
from .jit import helper, kernel
from .kept import kept_draw
from .likelihood import draw_inverse_gamma
from .variance_forest import mh_variance_forest, set_mean_weights


class HeteroPart(NamedTuple):
    """What a weighted / heteroskedastic BART chain holds besides its mean forest and backfitting state."""

    w: np.ndarray  # float64[n]: the observation (precision) weights w_i >= 0
    variance: tuple  # variance_forest.VariancePart (a forest of no trees: v = 1)
    var_counts: np.ndarray  # int64[N_MOVES, 2]: work array, the variance trees' move counts


@helper
def draw_weighted_sigma2(rng, state, w):
    """sigma^2 from IG((nu + n+)/2, (nu lam + sum_i omega_i r_i^2)/2) with omega_i = basis[1, i] (w_i /
    v_i) and n+ the rows with w_i > 0 (spec 5.5: a row of weight 0 is out of every likelihood term); its
    prior with the likelihood off; unchanged when sigma is fixed."""
    target = state.target
    if state.sigma_mode[0] != SIGMA_SAMPLED:
        return
    nu = target.prior.nu
    lam = target.prior.lam
    if not target.prior.likelihood:
        target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)
        return
    resid = state.resid
    omega = target.basis[1]
    ss = 0.0
    n_pos = 0
    for i in range(resid.shape[0]):
        if w[i] > 0.0:
            ss += omega[i] * resid[i] * resid[i]
            n_pos += 1
    target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * (nu + n_pos), 0.5 * (nu * lam + ss))


@helper(inline=True)
def hetero_sweep(rng, forest, state, data, moves, scratch, hetero, counts):
    """One sweep (module docstring)."""
    mh_basis_forest(rng, forest, state, data, moves, scratch, counts)
    part = hetero.variance
    if part.forest.var.shape[0] > 0:
        mh_variance_forest(rng, part, state.resid, hetero.w, moves, hetero.var_counts)
        set_mean_weights(part.state.logv, hetero.w, state.target.basis)
    draw_weighted_sigma2(rng, state, hetero.w)


@kernel
def run_hetero_chain(rng, forest, state, data, moves, scratch, hetero, window, mh_out, out):
    """Advance one chain by up to ``window.n_iter`` sweeps (``hetero_sweep``), recording kept draws:
    sigma and the mean trees' move counts (``mh_out``, a ``records.MhBartOut``), the mean forest (``out``)
    and the variance forest (``hetero.variance.out``).

    Returns ``(iterations done, pending draw, forest)``: when a forest's store has no room the chain stops
    after that sweep and returns the draw and the forest (0 mean, 1 variance) from which recording is left
    to the caller (else -1, -1).
    """
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    vout = hetero.variance.out
    vforest = hetero.variance.forest
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        hetero_sweep(rng, forest, state, data, moves, scratch, hetero, counts)
        d = kept_draw(it, tune, thin, mh_out.sigma.shape[0])
        if d < 0:
            continue
        record_sigma_and_counts(mh_out.sigma, mh_out.counts, d, state, counts)
        if not record_forest(forest, out.store, d, out.leaves, out.depth, out.nodes, out.order, scratch.stack):
            return step + 1, d, 0
        if not record_forest(vforest, vout.store, d, vout.leaves, vout.depth, vout.nodes, vout.order,
                             hetero.variance.scratch.stack):
            return step + 1, d, 1
    return n_iter, -1, -1
