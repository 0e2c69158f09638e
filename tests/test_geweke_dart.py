"""Geweke (2004) joint-distribution test of BART with DART's sparsity prior (``sparse=True``,
``_kernels/sparse.py``): trees, leaf values, sigma^2, the split-variable weights s and their
concentration theta, all together.

The model: ``test_geweke_bart.py``'s (12 rows, 3 trees, tau^2 = 0.25, sigma^2 ~ IG(5/2, 5/8)),
with two continuous predictors of distinct values, so that at every node either both predictors
have an available rule or neither has: there Linero's conditional Dirichlet(theta/p + split
counts) is the exact full conditional of s (with binary or few-level predictors it is an
approximation, which this test would catch). lambda = theta / (theta + rho) has the Beta(a, b)
prior on the sampler's grid of 1,000 midpoints (the griddy Gibbs step targets that discrete
prior); Linero's a = 0.5, b = 1, rho = p = 2.

* marginal-conditional (MC): lambda, s ~ Dirichlet(theta/2, theta/2), trees from the generative
  prior whose split variable is drawn with probabilities s among the predictors with an available
  rule, leaves, sigma^2, then y. Independent draws.
* successive-conditional (SC): one BART sweep (an MH move per tree, s-weighted rule draws and
  node prior; then sigma^2), the DART update (s, then theta), then a fresh y given the rest.

Statistic and tolerance as ``test_geweke_bart.py``: |z_k| < 4 for each of K = 10 functions (a
correct sampler fails with probability about 10 x 6.3e-5 = 6e-4).

Measured when written (31 s): the correct sweep gives |z| <= 1.81 on every function; running
the sampler with a = 0.7 against the simulator's 0.5 gives z = -16.3 on lambda.
"""

from __future__ import annotations

import numpy as np
import pytest
from _chains import bart_chain
from test_geweke_bart import ALPHA, BETA, LAM, MIN_LEAF, N_TREES, NU, TAU2, assert_joint_agrees

from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.sparse import N_GRID, S_THETA, forest_sparse_update
from bartpy_suite._kernels.tree import M_N_LEAVES
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS

try:
    from test_bart_exact import leaves_of
    from test_bart_prior import rule_choices
except ImportError:  # tests/ imported as a package
    from tests.test_bart_exact import leaves_of
    from tests.test_bart_prior import rule_choices

A, B, RHO = 0.5, 1.0, 2.0
NAMES = ("sigma", "1/sigma2", "mean leaves", "mean f^2", "roughness", "f0", "mean f*y", "lambda", "s_0",
         "splits on x0 - x1")


def problem():
    """12 rows, two numeric predictors with 12 distinct values each."""
    x1 = np.arange(12.0)
    x2 = np.array([3.0, 7, 0, 11, 5, 9, 1, 6, 10, 2, 8, 4])
    return BinnedPredictors.fit(np.column_stack([x1, x2]), np.array([False, False]), [0, 0], None)


def lambda_grid():
    """The sampler's grid of lambda and the discrete Beta(A, B) prior on it."""
    lam = (np.arange(N_GRID) + 0.5) / N_GRID
    w = lam ** (A - 1) * (1 - lam) ** (B - 1)
    return lam, w / w.sum()


def log_dirichlet(rng, alpha, p):
    """log of s ~ Dirichlet(alpha, ..., alpha) in p coordinates, in log space (G(a) = G(a + 1)
    U^(1/a): a tiny alpha must not underflow)."""
    log_g = np.log(rng.gamma(alpha + 1.0, size=p)) + np.log(rng.random(p)) / alpha
    return log_g - np.logaddexp.reduce(log_g)


def simulate_weighted_tree(rng, codes, is_cat, nbins, log_s, rows=None, depth=0):
    """A tree from the generative prior with DART's split-variable probabilities: a node with an
    available rule splits with probability alpha (1 + depth)^-beta, on a predictor drawn with
    probabilities proportional to s among those with an available rule, at a uniform rule."""
    if rows is None:
        rows = np.arange(codes.shape[1])
    choices = rule_choices(codes, rows, is_cat, nbins, MIN_LEAF)
    if not choices or rng.random() >= ALPHA * (1.0 + depth) ** (-BETA):
        return None
    variables = sorted(choices)
    logw = log_s[variables]
    prob = np.exp(logw - logw.max())
    v = variables[int(rng.choice(len(variables), p=prob / prob.sum()))]
    rule = choices[v][int(rng.integers(len(choices[v])))]
    go_left = codes[v, rows] <= rule
    return (v, rule, simulate_weighted_tree(rng, codes, is_cat, nbins, log_s, rows[go_left], depth + 1),
            simulate_weighted_tree(rng, codes, is_cat, nbins, log_s, rows[~go_left], depth + 1))


def split_counts(tree, out):
    if tree is not None:
        out[tree[0]] += 1
        split_counts(tree[2], out)
        split_counts(tree[3], out)


def functions(f, y, sigma2, leaves, lam, log_s, splits):
    return np.array([np.sqrt(sigma2), 1.0 / sigma2, leaves, np.mean(f * f), np.mean(np.diff(f) ** 2), f[0],
                     np.mean(f * y), lam, np.exp(log_s[0]), splits[0] - splits[1]])


def marginal_conditional(binned, draws, rng):
    lam_grid, lam_prob = lambda_grid()
    out = np.empty((draws, len(NAMES)))
    n = binned.codes.shape[1]
    for s in range(draws):
        lam = lam_grid[rng.choice(N_GRID, p=lam_prob)]
        log_s = log_dirichlet(rng, RHO * lam / (1 - lam) / 2, 2)
        f = np.zeros(n)
        total_leaves = 0
        splits = np.zeros(2)
        for _ in range(N_TREES):
            tree = simulate_weighted_tree(rng, binned.codes, binned.is_categorical, binned.nbins, log_s)
            split_counts(tree, splits)
            for rows in leaves_of(tree, binned.codes, binned.is_categorical):
                f[rows] += np.sqrt(TAU2) * rng.standard_normal()
                total_leaves += 1
        sigma2 = NU * LAM / 2 / rng.gamma(NU / 2)
        y = f + np.sqrt(sigma2) * rng.standard_normal(n)
        out[s] = functions(f, y, sigma2, total_leaves / N_TREES, lam, log_s, splits)
    return out


def successive_conditional(binned, iterations, burn, rng):
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE,
                         nu=NU, lam=LAM)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, np.zeros(n), hyper,
                       SAMPLERS["grow_prune"].option_defaults()["moves"], rng, N_TREES, SIGMA_SAMPLED,
                       sparse=(A, B, RHO), sigma2=LAM)
    f = np.zeros(n)
    y = f + np.sqrt(chain.current_sigma2) * rng.standard_normal(n)
    chain.resid[:] = y - f
    out = np.empty((iterations, len(NAMES)))
    splits = np.zeros(2)
    for it in range(burn + iterations):
        chain.sweep()
        forest_sparse_update(chain.rng, chain.forest, chain.scratch.log_s, chain.split_count, chain.sparse_conf)
        f = y - chain.resid
        sigma2 = chain.current_sigma2
        if it >= burn:
            theta = chain.sparse_conf[S_THETA]
            splits[:] = chain.split_count  # the counts the update just used: this sweep's forest
            out[it - burn] = functions(f, y, sigma2, chain.forest.meta[:, M_N_LEAVES].mean(), theta / (theta + RHO),
                                       chain.scratch.log_s, splits)
        y = f + np.sqrt(sigma2) * rng.standard_normal(n)
        chain.resid[:] = y - f
    return out


@pytest.mark.slow
def test_geweke_dart_weights_trees_and_sigma():
    """MC (20,000 iid draws) against SC (100,000 sweeps after 2,000 burn-in): |z_k| < 4 for all 10
    functions (module docstring)."""
    binned = problem()
    mc = marginal_conditional(binned, 20_000, np.random.default_rng(1))
    sc = successive_conditional(binned, 100_000, 2_000, np.random.default_rng(2))
    assert_joint_agrees(mc, sc, NAMES, "dart")
