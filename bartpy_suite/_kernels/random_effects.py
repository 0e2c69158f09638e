"""Gaussian random effects inside Bayesian backfitting: the Gibbs block of spec
``multi_forest.md`` 4.2 (stochtree's redundant parameterisation, Gelman et al. 2008).

Model, on the standardised response: gamma_i = W_i' beta_{g(i)} with the K-vector basis W_i
(1 for a random intercept, (1, x_i) for a random intercept and slope) and the group
coefficients written beta_g = alpha * xi_g (elementwise), where

    alpha ~ N(0, s_alpha I_K)                     working parameter shared by all groups
    xi_g  ~ iid N(0, diag(sigma2_1, ..., sigma2_K))
    sigma2_k ~ iid IG(a, b)

Why this prior (spec 4.1): given alpha_k and sigma_k the beta_kg are iid N(0, alpha_k^2
sigma_k^2), and the effective sd |alpha_k| sigma_k is half-t with 2a degrees of freedom and scale
sqrt(s_alpha b / a): at the defaults a = b = 1, s_alpha = 1 a half-t_2 of scale one sd of the
standardised response, heavy-tailed enough to let a large group effect through, with its mode
at zero so that a factor without an effect shrinks towards none. The alpha step (parameter
expansion) also speeds mixing when the sigma_k are small. Sigma_xi is diagonal: the components
are a priori independent and no correlation between them is modelled.

One block, given the residual r = y - (everything but gamma) - gamma and omega = 1 / sigma^2
(``random_effects_block``):

0. R = r + gamma; per group G_g = sum_{i in g} omega W_i W_i', h_g = sum_{i in g} omega W_i R_i.
1. For each g: P = Sigma_xi^-1 + D_alpha G_g D_alpha; xi_g ~ N(P^-1 D_alpha h_g, P^-1).
2. P = I / s_alpha + sum_g D_xi_g G_g D_xi_g; alpha ~ N(P^-1 sum_g D_xi_g h_g, P^-1).
3. For each k: sigma2_k ~ IG(a + G/2, b + sum_g xi_kg^2 / 2) (the exact conditional; stochtree
   draws IG(a + G, b + sum_g xi_kg^2), spec 4.2).
3b. For each k, a scale move along the line the likelihood cannot see: (alpha_k, xi_kg, sigma2_k)
   -> (c alpha_k, xi_kg / c, sigma2_k / c^2) leaves every beta_g unchanged. Drawn from its
   conditional on the multiplicative group (Liu & Sabatti 2000: density pi(T_c theta) |J_c| under
   the Haar measure dc / c), which works out to c^2 ~ Gamma(a + 1/2, rate alpha_k^2 / (2 s_alpha)
   + b / sigma2_k): exact. Without it, when the data pin beta down, alpha and xi move along that
   line only through steps 1 and 2 (each nearly determined by the other) and the prior's share
   b / sigma2_k, hence each effect's sd |alpha_k| sigma_k, mixes over hundreds of sweeps.
4. gamma_i = W_i' (alpha * xi_{g(i)}); r = R - gamma.

With the likelihood off every G_g and h_g is zero and the block draws from the prior.
K is small (1 or 2 in practice): the K x K systems are solved with an in-place Cholesky on work
arrays of the record, so nothing here allocates.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper, kernel
from .likelihood import draw_inverse_gamma
from .tree import LEAF, M_SPAN

#: Slots of ``RandomEffects.conf``.
RE_A = 0  # shape a of sigma2_k ~ IG(a, b)
RE_B = 1  # scale b
RE_ALPHA_VAR = 2  # s_alpha, the prior variance of each alpha_k
RE_FIXED_SCALES = 3  # 1: steps 2 and 3 skipped (alpha and Sigma_xi held fixed; the exact tests), else 0
RE_INTERCEPT = 4  # the basis column of the random intercept (``level_move``), -1 when there is none


class RandomEffects(NamedTuple):
    """State and work arrays of the random-effects block of one chain (n rows, G groups, K terms)."""

    group: np.ndarray  # int64[n]: group code 0..G-1 of each row
    basis: np.ndarray  # float64[n, K]: W
    alpha: np.ndarray  # float64[K]: working parameter
    xi: np.ndarray  # float64[G, K]: group parameters
    sigma2: np.ndarray  # float64[K]: diagonal of Sigma_xi
    gamma: np.ndarray  # float64[n]: current W_i' (alpha * xi_g(i)), subtracted from the residual
    conf: np.ndarray  # float64[5]: RE_A, RE_B, RE_ALPHA_VAR, RE_FIXED_SCALES, RE_INTERCEPT
    gram: np.ndarray  # float64[G, K, K]: work, G_g
    h: np.ndarray  # float64[G, K]: work, h_g
    prec: np.ndarray  # float64[K, K]: work, a precision matrix and then its Cholesky factor
    vec: np.ndarray  # float64[K]: work
    draw: np.ndarray  # float64[K]: work


def new_random_effects(group: np.ndarray, basis: np.ndarray, n_groups: int, *, a: float = 1.0, b: float = 1.0,
                       alpha_var: float = 1.0, intercept: int = -1) -> RandomEffects:
    """A ``RandomEffects`` record for ``group`` codes (0..n_groups-1) and the basis W (n, K).

    The start is alpha = 1, xi_g = 0, Sigma_xi = I, so gamma = 0: the chain starts from the fit
    without group effects. (stochtree starts alpha at 0, where step 1 draws xi from its prior;
    the start does not change what the chain converges to.) ``intercept`` is the basis column of
    the random intercept (-1: none), for ``level_move``.
    """
    basis = np.ascontiguousarray(basis, dtype=np.float64)
    k = basis.shape[1]
    return RandomEffects(
        group=np.ascontiguousarray(group, dtype=np.int64), basis=basis, alpha=np.ones(k),
        xi=np.zeros((n_groups, k)), sigma2=np.ones(k), gamma=np.zeros(basis.shape[0]),
        conf=np.array([a, b, alpha_var, 0.0, intercept], dtype=np.float64), gram=np.zeros((n_groups, k, k)),
        h=np.zeros((n_groups, k)), prec=np.zeros((k, k)), vec=np.zeros(k), draw=np.zeros(k),
    )


@helper
def cholesky_in_place(a):
    """Lower Cholesky factor of the symmetric positive definite ``a`` (K, K), written over its lower
    triangle (the upper triangle is left as it was and never read)."""
    k = a.shape[0]
    for j in range(k):
        s = a[j, j]
        for m in range(j):
            s -= a[j, m] * a[j, m]
        d = math.sqrt(s)
        a[j, j] = d
        for i in range(j + 1, k):
            t = a[i, j]
            for m in range(j):
                t -= a[i, m] * a[j, m]
            a[i, j] = t / d


@helper
def draw_gaussian(rng, chol, b, out):
    """``out`` ~ N(P^-1 b, P^-1) given the lower Cholesky factor ``chol`` of P (``b`` is
    overwritten): the mean solves L L' m = b; the noise is L'^-1 z, z standard normal."""
    k = b.shape[0]
    for i in range(k):  # L y = b
        t = b[i]
        for m in range(i):
            t -= chol[i, m] * b[m]
        b[i] = t / chol[i, i]
    for i in range(k):  # add z: L' x = y + z gives x = m + L'^-1 z
        b[i] += rng.standard_normal()
    for i in range(k - 1, -1, -1):  # L' x = y + z
        t = b[i]
        for m in range(i + 1, k):
            t -= chol[m, i] * out[m]
        out[i] = t / chol[i, i]


@helper
def random_effects_block(rng, re, resid, sigma2, use_lik):
    """One Gibbs update of the random effects (module docstring, steps 0-4) on the residual
    ``resid`` (gamma is added back, updated and subtracted again); ``sigma2`` the noise variance
    (omega = 1 / sigma2); ``use_lik`` False draws from the prior."""
    n = resid.shape[0]
    n_groups, k = re.xi.shape
    gram, h, prec, vec = re.gram, re.h, re.prec, re.vec
    alpha, xi = re.alpha, re.xi
    gram[:, :, :] = 0.0
    h[:, :] = 0.0
    if use_lik:
        omega = 1.0 / sigma2
        for i in range(n):
            g = re.group[i]
            r = resid[i] + re.gamma[i]
            for p in range(k):
                wp = re.basis[i, p]
                h[g, p] += omega * wp * r
                for q in range(k):
                    gram[g, p, q] += omega * wp * re.basis[i, q]
    # 1. xi_g | alpha, Sigma_xi
    for g in range(n_groups):
        for p in range(k):
            for q in range(k):
                prec[p, q] = alpha[p] * gram[g, p, q] * alpha[q]
            prec[p, p] += 1.0 / re.sigma2[p]
            vec[p] = alpha[p] * h[g, p]
        cholesky_in_place(prec)
        draw_gaussian(rng, prec, vec, xi[g])
    if re.conf[RE_FIXED_SCALES] == 0.0:
        _draw_scales(rng, re)
    # 4. gamma and the residual
    for i in range(n):
        g = re.group[i]
        new = 0.0
        for p in range(k):
            new += re.basis[i, p] * alpha[p] * xi[g, p]
        resid[i] += re.gamma[i] - new
        re.gamma[i] = new


@helper
def _draw_scales(rng, re):
    """Steps 2 (alpha | xi), 3 (Sigma_xi | xi) and 3b (the scale move) of ``random_effects_block``,
    with its G_g, h_g."""
    n_groups, k = re.xi.shape
    gram, h, prec, vec = re.gram, re.h, re.prec, re.vec
    alpha, xi = re.alpha, re.xi
    # 2. alpha | xi
    for p in range(k):
        for q in range(k):
            s = 0.0
            for g in range(n_groups):
                s += xi[g, p] * gram[g, p, q] * xi[g, q]
            prec[p, q] = s
        prec[p, p] += 1.0 / re.conf[RE_ALPHA_VAR]
        s = 0.0
        for g in range(n_groups):
            s += xi[g, p] * h[g, p]
        vec[p] = s
    cholesky_in_place(prec)
    draw_gaussian(rng, prec, vec, alpha)
    # 3. sigma2_k | xi (the exact conditional: shape a + G/2, scale b + sum xi^2 / 2)
    for p in range(k):
        ss = 0.0
        for g in range(n_groups):
            ss += xi[g, p] * xi[g, p]
        re.sigma2[p] = draw_inverse_gamma(rng, re.conf[RE_A] + 0.5 * n_groups, re.conf[RE_B] + 0.5 * ss)
    # 3b. the scale move along (alpha_k, xi_k, sigma2_k) -> (c alpha_k, xi_k / c, sigma2_k / c^2), which leaves
    # beta and the likelihood unchanged (module docstring)
    for p in range(k):
        rate = alpha[p] * alpha[p] / (2.0 * re.conf[RE_ALPHA_VAR]) + re.conf[RE_B] / re.sigma2[p]
        u = rng.gamma(re.conf[RE_A] + 0.5, 1.0) / rate
        c = math.sqrt(u)
        alpha[p] *= c
        for g in range(n_groups):
            xi[g, p] /= c
        re.sigma2[p] /= u


@helper
def level_move(rng, re, forest, tau2, scale):
    """Gibbs move along the direction the likelihood cannot see: every leaf of the forest's T trees
    moves by c / scale (each row's f by c) and every random intercept beta_g0 by -c (xi_g0 by
    -c / alpha_0), so f + gamma and the residual are unchanged. ``scale`` is how far a row's f moves
    per unit shift of every leaf: T for BART's forest, T s_m for bcf's mu forest (whose leaves enter f
    as s_m times their sum). Given the rest, c has the Gaussian density of the priors along that line
    (leaf values N(0, tau2), xi_g0 N(0, sigma_0^2)): precision L / (scale^2 tau2) + G / (alpha_0^2
    sigma_0^2) for L leaves and G groups, and the move draws c from it (a translation, so the Gibbs
    step on the group is exact: Liu & Sabatti 2000). Without it the forest's level and the
    intercepts' mean trade off only through the trees' leaf draws, a random walk of a few hundred
    sweeps per step; with it the level of the intercepts mixes at once. Returns the leaf shift
    c / scale (0.0 without a random intercept, when nothing happens)."""
    col = int(re.conf[RE_INTERCEPT])
    if col < 0:
        return 0.0
    n_trees = forest.var.shape[0]
    leaves = 0
    total = 0.0
    for t in range(n_trees):
        for node in range(forest.meta[t, M_SPAN]):
            if forest.var[t, node] == LEAF:
                leaves += 1
                total += forest.value[t, node]
    a0 = re.alpha[col]
    s2 = re.sigma2[col]
    n_groups = re.xi.shape[0]
    xsum = 0.0
    for g in range(n_groups):
        xsum += re.xi[g, col]
    prec = leaves / (scale * scale * tau2) + n_groups / (a0 * a0 * s2)
    lin = -total / (scale * tau2) + xsum / (a0 * s2)
    c = lin / prec + rng.standard_normal() / math.sqrt(prec)
    shift = c / scale
    for t in range(n_trees):
        for node in range(forest.meta[t, M_SPAN]):
            if forest.var[t, node] == LEAF:
                forest.value[t, node] += shift
    for g in range(n_groups):
        re.xi[g, col] -= c / a0
    for i in range(re.gamma.shape[0]):
        re.gamma[i] -= c * re.basis[i, col]
    return shift


@kernel
def random_effects_steps(rng, re, resid, sigma2, use_lik, out_beta, out_sd):
    """``out_beta.shape[0]`` blocks with a fixed ``sigma2``, recording beta = alpha * xi after each
    into ``out_beta[s]`` (steps, G, K) and the effective sds |alpha_k| sigma_k into ``out_sd[s]``:
    the block alone, for the exact tests."""
    for s in range(out_beta.shape[0]):
        random_effects_block(rng, re, resid, sigma2, use_lik)
        for p in range(re.xi.shape[1]):
            out_sd[s, p] = abs(re.alpha[p]) * math.sqrt(re.sigma2[p])
        for g in range(re.xi.shape[0]):
            for p in range(re.xi.shape[1]):
                out_beta[s, g, p] = re.alpha[p] * re.xi[g, p]
