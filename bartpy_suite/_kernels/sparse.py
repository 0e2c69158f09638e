"""DART: the sparsity-inducing Dirichlet prior on the split variables (Linero 2018, JASA).

The rule prior of a node draws its variable v with probability ``s_v / e(node)``, e the sum of
s over the variables with an available rule there (``tree.sample_rule_s``, ``tree.rule_log_prob_s``),
instead of uniformly. The weights have the hierarchical prior

    s ~ Dirichlet(theta / p, ..., theta / p),   lambda = theta / (theta + rho) ~ Beta(a, b),

Linero's defaults a = 0.5, b = 1, rho = p. A chain keeps ``log s`` in ``Scratch.log_s`` (with
theta / p of order 0.01 the Gamma variates behind a Dirichlet draw underflow in float64, so
everything is done in log space) and its settings in a float64 vector ``conf`` (``S_*``).

Each sweep after ``conf[S_START]`` (``sparse_update``), after all trees:

1. s from Linero's conditional ``Dirichlet(theta / p + c_1, ..., theta / p + c_p)``, c_j the
   number of internal nodes splitting on j over the forest. That conditional treats every
   variable as available at every internal node; it is exact when that holds (e.g. continuous
   predictors, every internal node having at least 2 min_leaf_size rows), and otherwise targets
   BART3's and bartz's ``augment=False`` approximation of the posterior (the rule prior's
   normalisers e(node) are left out of s's conditional).
2. theta by griddy Gibbs on lambda (as BART3's ``draw_theta0`` and bartz's ``step_theta``):
   1000 grid points at the midpoints ``(g - 1/2) / 1000``, weights the Dirichlet density of s
   times the Beta(a, b) density of lambda (uniform grid: no Jacobian). The draw is exact for the
   Beta prior discretised on that grid.
3. Every cached node prior of an internal node (``tree.lp``, which holds log s_v - log e) is
   reset to NaN, so that the next change or swap recomputes it under the new s.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import helper
from .tree import M_SPAN

# Indices into a chain's DART settings ``conf`` (float64).
S_A = 0  # Beta(a, b) prior of lambda = theta / (theta + rho)
S_B = 1
S_RHO = 2
S_THETA = 3  # current theta (the Dirichlet concentration; ``sparse_alpha`` in the posterior)
S_START = 4  # first iteration whose sweep updates s and theta (before it s stays uniform)
N_CONF = 5

#: Points of the lambda grid of the theta update.
N_GRID = 1000


def new_conf(a: float, b: float, rho: float, start: int) -> np.ndarray:
    """The DART settings vector of one chain; theta starts at rho (as bartz does).

    Parameters
    ----------
    a, b : float
        Beta prior of lambda = theta / (theta + rho).
    rho : float
        The scale of theta (Linero's default: the number of predictors).
    start : int
        First iteration that updates s and theta.

    Returns
    -------
    ndarray of float64, shape (N_CONF,)
    """
    conf = np.zeros(N_CONF)
    conf[S_A], conf[S_B], conf[S_RHO], conf[S_THETA], conf[S_START] = a, b, rho, rho, start
    return conf


@helper
def log_gamma_variate(rng, shape):
    """log of a Gamma(shape, 1) draw, without underflow for small shapes: for shape < 1,
    ``log G(shape + 1) + log(U) / shape`` (a Gamma(shape) variate is G(shape + 1) U^(1/shape))."""
    if shape < 1.0:
        return math.log(rng.gamma(shape + 1.0, 1.0)) + math.log(1.0 - rng.random()) / shape
    return math.log(rng.gamma(shape, 1.0))


@helper
def draw_log_dirichlet(rng, base, counts, log_s):
    """``log_s`` <- log of a Dirichlet(base + counts) draw (``counts`` float64[p])."""
    p = log_s.shape[0]
    top = -np.inf
    for j in range(p):
        log_s[j] = log_gamma_variate(rng, base + counts[j])
        if log_s[j] > top:
            top = log_s[j]
    total = 0.0
    for j in range(p):
        total += math.exp(log_s[j] - top)
    norm = top + math.log(total)
    for j in range(p):
        log_s[j] -= norm


@helper
def theta_log_weight(lam, sum_log_s, p, a, b, rho):
    """Log weight of grid point ``lam`` in the theta update: the Dirichlet(theta/p) density of s
    (without its part constant in theta) plus the Beta(a, b) log density of lambda."""
    theta = rho * lam / (1.0 - lam)
    return (math.lgamma(theta) - p * math.lgamma(theta / p) + (theta / p) * sum_log_s
            + (a - 1.0) * math.log(lam) + (b - 1.0) * math.log1p(-lam))


@helper
def draw_theta(rng, log_s, a, b, rho):
    """Griddy Gibbs draw of theta given s (module docstring, step 2)."""
    p = log_s.shape[0]
    sum_log_s = 0.0
    for j in range(p):
        sum_log_s += log_s[j]
    top = -np.inf
    for g in range(N_GRID):
        w = theta_log_weight((g + 0.5) / N_GRID, sum_log_s, p, a, b, rho)
        if w > top:
            top = w
    total = 0.0
    for g in range(N_GRID):
        total += math.exp(theta_log_weight((g + 0.5) / N_GRID, sum_log_s, p, a, b, rho) - top)
    u = rng.random() * total
    acc = 0.0
    pick = N_GRID - 1
    for g in range(N_GRID):
        acc += math.exp(theta_log_weight((g + 0.5) / N_GRID, sum_log_s, p, a, b, rho) - top)
        if u < acc:
            pick = g
            break
    lam = (pick + 0.5) / N_GRID
    return rho * lam / (1.0 - lam)


@helper
def add_split_counts(var, span, counts):
    """Add one tree's internal nodes per split variable to ``counts`` (node array ``var`` up to
    the node span ``span``)."""
    for node in range(span):
        v = var[node]
        if v >= 0:
            counts[v] += 1.0


@helper
def reset_internal_lp(var, lp, span):
    """Forget the cached prior factor of every internal node of one tree (it holds log s_v)."""
    for node in range(span):
        if var[node] >= 0:
            lp[node] = np.nan


@helper
def update_weights(rng, counts, log_s, conf):
    """Steps 1 and 2 of the module docstring given the split counts: s, then theta."""
    p = log_s.shape[0]
    draw_log_dirichlet(rng, conf[S_THETA] / p, counts, log_s)
    conf[S_THETA] = draw_theta(rng, log_s, conf[S_A], conf[S_B], conf[S_RHO])


@helper
def forest_sparse_update(rng, forest, log_s, counts, conf):
    """One DART update after a BART sweep (module docstring), counts over every tree of the
    stacked ``forest`` (``counts``: float64[p] work array)."""
    counts[:] = 0.0
    for j in range(forest.var.shape[0]):
        add_split_counts(forest.var[j], forest.meta[j, M_SPAN], counts)
    update_weights(rng, counts, log_s, conf)
    for j in range(forest.var.shape[0]):
        reset_internal_lp(forest.var[j], forest.lp[j], forest.meta[j, M_SPAN])


@helper
def tree_sparse_update(rng, tree, log_s, counts, conf):
    """One DART update after a single-tree (CART) iteration: counts over its one tree."""
    counts[:] = 0.0
    add_split_counts(tree.var, tree.meta[M_SPAN], counts)
    update_weights(rng, counts, log_s, conf)
    reset_internal_lp(tree.var, tree.lp, tree.meta[M_SPAN])


@helper
def record_weights(log_s, conf, out_split_probs, out_alpha, d):
    """Kept draw d: ``out_split_probs[d] = s`` and ``out_alpha[d] = theta``."""
    for j in range(log_s.shape[0]):
        out_split_probs[d, j] = math.exp(log_s[j])
    out_alpha[d] = conf[S_THETA]
