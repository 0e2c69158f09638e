"""Several forests in one chain: Bayesian causal forests (issue 30; spec multi_forest.md 1.2, 1.4, 3.1,
3.4, 3.5; Hahn, Murray & Carvalho 2020, "HMC20", as the authors' ``bcf`` package codes it).

On the standardised response y (spec 3.1):

    y_i = s_m m(x_i) + b_{z_i} t(x_i) + e_i,   e_i ~ N(0, sigma^2 / w_i)

with m the mu forest (leaves N(0, c_mu^2 / (delta M_mu))), t the tau forest (leaves N(0, tau2_tau)),
s_m ~ N(0, 1), delta ~ Gamma(1/2, rate 1/2), b_0, b_1 ~ N(0, 1/2) and sigma^2 ~ nu lam / chi^2_nu.
Both forests are basis forests (``basis.py``): the mu forest's basis is s_m on every row, the tau
forest's b_{z_i}. One sweep, in bcf's order (spec 3.5): every mu tree, every tau tree (each an MH move
against the one shared residual), the raw sums m_i and t_i, the coding b_0, b_1 (3.4c), s_m (3.4d), delta
(3.4e, the exact conditional, not bcf's variant), the bases and the residual recomputed from scratch
(spec 1.2: no drift), then sigma^2 (3.4f). With the likelihood off every block draws from its prior
(delta from its conditional given the mu leaves, a Gibbs step of the prior).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backfit import record_forest
from .basis import mh_basis_forest, raw_forest_fit
from .cart_moves import N_MOVES
from .causal_re import causal_re_block, record_causal_re
from .jit import helper, kernel
from .kept import kept_draw
from .likelihood import draw_inverse_gamma
from .tree import LEAF, M_SPAN, copy_into

# Indices into ``CausalState.params`` (the chain's scalar parameters) and the columns of the kept
# ``out_params`` (column 0 is sigma, then these shifted by one).
P_B0 = 0
P_B1 = 1
P_SM = 2
P_DELTA = 3
N_PARAMS = 4


class ForestPart(NamedTuple):
    """One forest of a multi-forest chain: its stacked trees (``TreeArrays``), backfitting state
    (``backfit.BackfitState`` with a ``records.BasisTarget`` and 2 N_ACC rows of ``sums``), the data its
    trees split (``records.Data`` whose ``y`` is the shared residual) and its move scratch."""

    forest: tuple
    state: tuple
    data: tuple
    scratch: tuple


class CausalState(NamedTuple):
    """The BCF chain's own state besides its two forests."""

    y: np.ndarray  # float64[n]: standardised response
    z: np.ndarray  # int64[n]: 0/1 treatment
    w: np.ndarray  # float64[n]: observation (precision) weights
    mfit: np.ndarray  # float64[n]: raw mu-forest sum m_i (work array)
    tfit: np.ndarray  # float64[n]: raw tau-forest sum t_i (work array)
    params: np.ndarray  # float64[N_PARAMS]: b_0, b_1, s_m, delta
    mu_scale2: float  # c_mu^2 / M_mu: the mu leaf prior variance at delta = 1
    coding_prec: float  # prior precision of b_0 and b_1 (2: b ~ N(0, 1/2))
    re: tuple  # causal_re.CausalRe: the random effects (K = 0 terms without them); y is then y0 - gamma


@helper
def update_coding(rng, cs, sigma2, use_lik):
    """b_0, b_1 from their normal full conditionals (spec 3.4c) given R_i = y_i - s_m m_i."""
    sm = cs.params[P_SM]
    prec0 = cs.coding_prec
    prec1 = cs.coding_prec
    lin0 = 0.0
    lin1 = 0.0
    if use_lik:
        for i in range(cs.y.shape[0]):
            t = cs.tfit[i]
            om = cs.w[i] / sigma2
            r = cs.y[i] - sm * cs.mfit[i]
            if cs.z[i] == 1:
                prec1 += om * t * t
                lin1 += om * t * r
            else:
                prec0 += om * t * t
                lin0 += om * t * r
    cs.params[P_B0] = lin0 / prec0 + rng.standard_normal() / math.sqrt(prec0)
    cs.params[P_B1] = lin1 / prec1 + rng.standard_normal() / math.sqrt(prec1)


@helper
def update_mu_scale(rng, cs, sigma2, use_lik):
    """s_m from its normal full conditional (spec 3.4d) given R_i = y_i - b_{z_i} t_i."""
    prec = 1.0
    lin = 0.0
    if use_lik:
        b0 = cs.params[P_B0]
        b1 = cs.params[P_B1]
        for i in range(cs.y.shape[0]):
            m = cs.mfit[i]
            om = cs.w[i] / sigma2
            bz = b1 if cs.z[i] == 1 else b0
            prec += om * m * m
            lin += om * m * (cs.y[i] - bz * cs.tfit[i])
    cs.params[P_SM] = lin / prec + rng.standard_normal() / math.sqrt(prec)


@helper
def update_delta(rng, forest, cs, tau2):
    """delta ~ Gamma(shape (1 + L)/2, rate (1 + sum theta^2 / (c_mu^2 / M_mu)) / 2) over the L leaves
    of the mu forest (spec 3.4e, exact); then the mu leaf prior variance ``tau2[0] = c_mu^2 / (delta
    M_mu)``. A prior-level Gibbs step: the same with the likelihood off."""
    n_leaves = 0
    ss = 0.0
    for t in range(forest.var.shape[0]):
        for node in range(forest.meta[t, M_SPAN]):
            if forest.var[t, node] == LEAF:
                n_leaves += 1
                v = forest.value[t, node]
                ss += v * v
    rate = 0.5 * (1.0 + ss / cs.mu_scale2)
    delta = rng.gamma(0.5 * (1.0 + n_leaves), 1.0) / rate
    cs.params[P_DELTA] = delta
    tau2[0] = cs.mu_scale2 / delta


@helper
def set_bases(cs, mu_basis, tau_basis, resid):
    """The forests' bases from the current s_m and coding (mu: s_m; tau: b_{z_i}), each with its w b and
    w b^2 rows, and the residual y - s_m m - b_z t recomputed from the raw sums."""
    sm = cs.params[P_SM]
    b0 = cs.params[P_B0]
    b1 = cs.params[P_B1]
    for i in range(cs.y.shape[0]):
        w = cs.w[i]
        bz = b1 if cs.z[i] == 1 else b0
        mu_basis[0, i] = sm
        mu_basis[1, i] = w * sm
        mu_basis[2, i] = w * sm * sm
        tau_basis[0, i] = bz
        tau_basis[1, i] = w * bz
        tau_basis[2, i] = w * bz * bz
        resid[i] = cs.y[i] - sm * cs.mfit[i] - bz * cs.tfit[i]


@helper
def draw_sigma2(rng, cs, resid, target):
    """sigma^2 = (nu lam + sum w r^2) / chi^2_{nu + n+} (spec 3.4f, n+ the rows with w > 0); its prior
    with the likelihood off."""
    nu = target.prior.nu
    lam = target.prior.lam
    if target.prior.likelihood:
        ss = 0.0
        n_pos = 0
        for i in range(resid.shape[0]):
            if cs.w[i] > 0.0:
                ss += cs.w[i] * resid[i] * resid[i]
                n_pos += 1
        target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * (nu + n_pos), 0.5 * (nu * lam + ss))
    else:
        target.sigma2[0] = draw_inverse_gamma(rng, 0.5 * nu, 0.5 * nu * lam)


@helper(inline=True)
def causal_sweep(rng, mu, tau, cs, moves, counts):
    """One BCF sweep (module docstring)."""
    mh_basis_forest(rng, mu.forest, mu.state, mu.data, moves, mu.scratch, counts)
    mh_basis_forest(rng, tau.forest, tau.state, tau.data, moves, tau.scratch, counts)
    raw_forest_fit(mu.forest, mu.state.leaf_of, cs.mfit)
    raw_forest_fit(tau.forest, tau.state.leaf_of, cs.tfit)
    target = mu.state.target
    sigma2 = target.sigma2[0]
    use_lik = target.prior.likelihood
    update_coding(rng, cs, sigma2, use_lik)
    update_mu_scale(rng, cs, sigma2, use_lik)
    update_delta(rng, mu.forest, cs, target.tau2)
    set_bases(cs, target.basis, tau.state.target.basis, mu.state.resid)
    causal_re_block(rng, cs, mu.state.resid, sigma2, use_lik, mu.forest, target.tau2[0])  # spec 3.5: before sigma
    draw_sigma2(rng, cs, mu.state.resid, target)


@kernel
def run_causal_chain(rng, mu, tau, cs, moves, window, out_params, out_counts, out_mu, out_tau):
    """Advance one BCF chain by up to ``window.n_iter`` sweeps (``causal_sweep``), recording kept draws:
    ``out_params[d]`` = (sigma, b_0, b_1, s_m, delta), the move counts and both forests.

    Returns ``(iterations done, pending draw, forest)``: when a forest's store has no room the chain stops
    after that sweep and returns the draw and the forest (0 mu, 1 tau) from which recording is left to the
    caller (else -1, -1).
    """
    first_iter, n_iter, tune, thin = window.first_iter, window.n_iter, window.tune, window.thin
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for step in range(n_iter):
        it = first_iter + step
        counts[:, :] = 0
        causal_sweep(rng, mu, tau, cs, moves, counts)
        d = kept_draw(it, tune, thin, out_params.shape[0])
        if d < 0:
            continue
        out_params[d, 0] = math.sqrt(mu.state.target.sigma2[0])
        for k in range(N_PARAMS):
            out_params[d, 1 + k] = cs.params[k]
        for k in range(N_MOVES):  # not out_counts[d] = counts: see tree.copy_into
            copy_into(out_counts[d, k], counts[k])
        record_causal_re(cs.re, d)
        if not record_forest(mu.forest, out_mu.store, d, out_mu.leaves, out_mu.depth, out_mu.nodes, out_mu.order,
                             mu.scratch.stack):
            return step + 1, d, 0
        if not record_forest(tau.forest, out_tau.store, d, out_tau.leaves, out_tau.depth, out_tau.nodes,
                             out_tau.order, tau.scratch.stack):
            return step + 1, d, 1
    return n_iter, -1, -1
