"""Gaussian random effects inside the Bayesian causal forest sweep (``bps.bcf("y ~ x1 + (1 | g)", ...)``;
issue 30, "Random effects"; spec multi_forest.md 3.5, 4).

The model on the standardised response (spec 1.1, 4.1):

    y_i = s_m m(x_i) + b_{z_i} t(x_i) + W_i' beta_{g(i)} + e_i,   beta_g = alpha * xi_g

with the random-effects prior and Gibbs block of BART's (``random_effects.py``: the redundant
parameterisation, its scale move). The effects are prognostic: they are part of mu_0, never of the
CATE (W holds 1 and the slope columns, never the treatment).

Where the block sits (spec 3.5, bcf's order): after every mu and tau tree, the coding b_0, b_1, s_m and
delta, and before sigma^2. ``multi_forest.causal_sweep`` calls ``causal_re_block`` there. The chain's
``CausalState.y`` is the response the forests' blocks see: y - gamma. The coding and s_m updates and
the residual's recomputation in ``multi_forest.set_bases`` read it, so they condition on the current
effects without a change to them; the block keeps it equal to ``y0 - gamma`` (``y0`` the response).

After the Gibbs block, BART's level move (``random_effects.level_move`` with scale T s_m) along the direction the
likelihood cannot see, written for the mu forest's basis s_m: every mu leaf moves by c / (T s_m) (each
row's s_m m by c) and every random intercept by -c, so s_m m + gamma and the residual are unchanged. With
the leaves N(0, tau2_mu) and xi_g0 N(0, sigma_0^2), c is Gaussian with precision L / (T s_m)^2 / tau2_mu
+ G / (alpha_0^2 sigma_0^2) and linear term -sum theta / (T s_m tau2_mu) + sum xi_g0 / (alpha_0 sigma_0^2):
a translation, so the Gibbs step is exact (Liu & Sabatti 2000). It keeps ``CausalState.mfit`` current.

A chain without random effects holds a record with K = 0 terms (``no_random_effects``): the block then
returns at once, drawing nothing, so such a chain's draws are those of the code before this module.

Observation weights are not supported with random effects (``random_effects_block`` uses omega =
1 / sigma^2); ``bps.bcf`` refuses the combination.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .jit import helper
from .random_effects import RandomEffects, level_move, new_random_effects, random_effects_block
from .tree import copy_into


class CausalRe(NamedTuple):
    """The random effects of a BCF chain and where its kept draws go."""

    re: RandomEffects
    y0: np.ndarray  # float64[n]: the standardised response (CausalState.y is y0 - gamma)
    out_alpha: np.ndarray  # float64[draws, K]
    out_xi: np.ndarray  # float64[draws, G, K]
    out_sigma_xi: np.ndarray  # float64[draws, K]: sqrt of the diagonal of Sigma_xi


def new_causal_re(y: np.ndarray, group: np.ndarray, basis: np.ndarray, n_groups: int, *, a: float = 1.0,
                  b: float = 1.0, alpha_var: float = 1.0, intercept: int = -1) -> CausalRe:
    """The record of a chain with random effects (``random_effects.new_random_effects``'s start: gamma = 0);
    no kept draws until ``with_draws``."""
    re = new_random_effects(group, basis, n_groups, a=a, b=b, alpha_var=alpha_var, intercept=intercept)
    k = re.alpha.shape[0]
    return CausalRe(re, np.array(y, dtype=np.float64), np.zeros((0, k)), np.zeros((0, n_groups, k)),
                    np.zeros((0, k)))


def no_random_effects(n: int) -> CausalRe:
    """The record of a chain without random effects: K = 0 terms and no groups (``causal_re_block`` does
    nothing), typed as a chain with random effects so that one compiled sweep serves both."""
    return new_causal_re(np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros((n, 0)), 0)


def with_draws(cre: CausalRe, draws: int) -> CausalRe:
    """``cre`` with room for ``draws`` kept draws."""
    g, k = cre.re.xi.shape
    return cre._replace(out_alpha=np.full((draws, k), np.nan), out_xi=np.full((draws, g, k), np.nan),
                        out_sigma_xi=np.full((draws, k), np.nan))


def collect_re(cre: CausalRe, kept: int) -> dict:
    """The first ``kept`` draws: ``re_alpha`` (draw, K), ``re_xi`` (draw, G, K), ``re_sigma_xi`` (draw, K)."""
    return {"re_alpha": cre.out_alpha[:kept].copy(), "re_xi": cre.out_xi[:kept].copy(),
            "re_sigma_xi": cre.out_sigma_xi[:kept].copy()}


@helper
def causal_re_block(rng, cs, resid, sigma2, use_lik, forest, tau2):
    """The random-effects block of one BCF sweep (module docstring) on the residual ``resid`` (y0 - s_m m -
    b_z t - gamma); ``cs`` the chain's ``multi_forest.CausalState`` (its ``re``, ``y``, ``mfit`` and s_m),
    ``forest`` the mu forest and ``tau2`` its leaf prior variance. Nothing without random effects."""
    cre = cs.re
    re = cre.re
    if re.alpha.shape[0] == 0:
        return
    random_effects_block(rng, re, resid, sigma2, use_lik)
    # the mu forest's leaves enter f as s_m times their sum: a leaf shift of c / (T s_m) moves each row by c
    n_trees = forest.var.shape[0]
    shift = level_move(rng, re, forest, tau2, n_trees * cs.params[2])
    for i in range(cs.mfit.shape[0]):
        cs.mfit[i] += n_trees * shift  # the raw sum m gains T shifts
    for i in range(resid.shape[0]):
        cs.y[i] = cre.y0[i] - re.gamma[i]


@helper
def record_causal_re(cre, d):
    """Keep draw ``d`` of the random effects (nothing without them)."""
    re = cre.re
    if re.alpha.shape[0] == 0:
        return
    copy_into(cre.out_alpha[d], re.alpha)
    for g in range(re.xi.shape[0]):
        copy_into(cre.out_xi[d, g], re.xi[g])
    for k in range(re.sigma2.shape[0]):
        cre.out_sigma_xi[d, k] = math.sqrt(re.sigma2[k])
