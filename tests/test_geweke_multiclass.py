"""Geweke (2004) joint-distribution test of log-linear multinomial BART (issue 14).

theta = (trees, leaf values mu) of K = 3 classes with 2 trees each; y_i ~ Categorical(softmax_k
F_k(x_i)). The augmentation latents phi are independent of y given theta
(p(y, phi | theta) = p(y | theta) Exp(phi; sum_k lambda_k)), so:

* marginal-conditional (MC): trees from the generative prior (``simulate_prior_tree`` of
  ``test_bart_prior.py``), mu = log Gamma(c, d), then y. Independent draws.
* successive-conditional (SC): one sweep of the sampler (every tree move and leaf draw given y
  and phi, then phi) followed by a fresh y given theta.

Test statistic and tolerance as in ``test_geweke_bart.py``: z_k with batch-means standard errors
for the SC draws, |z_k| < 4 for each of the 7 functions (Bonferroni: a correct sampler fails with
probability about 7 * 6.3e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from bartpy_suite._kernels.bart_chain import mh_multinomial_sweep
from bartpy_suite._kernels.likelihood import MODEL_LOG_GAMMA
from bartpy_suite._kernels.records import Moves
from bartpy_suite._kernels.tree import M_N_LEAVES
from bartpy_suite.models.bart import log_gamma_prior
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS
from bartpy_suite.samplers.mh import MultinomialMHChain, move_flags
from bartpy_suite.samplers.problems import MultinomialBartProblem

try:
    from test_bart_exact import leaves_of
    from test_bart_prior import simulate_prior_tree
    from test_geweke_bart import assert_joint_agrees, problem
except ImportError:  # tests/ imported as a package
    from tests.test_bart_exact import leaves_of
    from tests.test_bart_prior import simulate_prior_tree
    from tests.test_geweke_bart import assert_joint_agrees, problem

K, TREES = 3, 2
ALPHA, BETA, MIN_LEAF = 0.95, 1.0, 2
SHAPE, RATE = log_gamma_prior(TREES, 2.0)
NAMES = ("mean leaves", "mean F0^2", "roughness F0", "F0[0]", "mean P(y=0)", "mean 1[y=0]", "mean F_y")


def functions(fit, y, leaves):
    prob = special.softmax(fit, axis=0)
    return np.array([leaves, np.mean(fit[0] ** 2), np.mean(np.diff(fit[0]) ** 2), fit[0, 0], prob[0].mean(),
                     np.mean(y == 0), np.mean(fit[y, np.arange(y.size)])])


def draw_labels(fit, rng):
    prob = special.softmax(fit, axis=0)
    u = rng.uniform(size=fit.shape[1])
    return (u[None, :] > np.cumsum(prob, axis=0)).sum(axis=0).astype(np.int64)


def marginal_conditional(binned, draws, rng):
    n = binned.codes.shape[1]
    out = np.empty((draws, len(NAMES)))
    for s in range(draws):
        fit = np.zeros((K, n))
        leaves = 0
        for k in range(K):
            for _ in range(TREES):
                tree = simulate_prior_tree(rng, binned.codes, binned.is_categorical, binned.nbins, MIN_LEAF, ALPHA,
                                           BETA)
                for rows in leaves_of(tree, binned.codes, binned.is_categorical):
                    fit[k, rows] += np.log(rng.gamma(SHAPE) / RATE)
                    leaves += 1
        y = draw_labels(fit, rng)
        out[s] = functions(fit, y, leaves / (K * TREES))
    return out


def successive_conditional(binned, sampler, iterations, burn, rng):
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, model_code=MODEL_LOG_GAMMA,
                         lg_shape=SHAPE, lg_rate=RATE)
    y = draw_labels(np.zeros((K, n)), rng)
    chain = MultinomialMHChain(MultinomialBartProblem(binned.codes, binned.is_categorical, binned.nbins, y, hyper,
                                                      K, TREES), SAMPLERS[sampler].option_defaults()["moves"], rng)
    state = chain.state
    move_probs = chain.move_probs
    counts = np.zeros((4, 2), dtype=np.int64)
    out = np.empty((iterations, len(NAMES)))
    for it in range(burn + iterations):
        mh_multinomial_sweep(rng, chain.forest, state, chain.data, Moves(move_probs, *move_flags(move_probs)),
                             chain.scratch, counts)
        fit = state.log_fit
        if it >= burn:
            out[it - burn] = functions(fit, state.ycls, chain.forest.meta[:, M_N_LEAVES].mean())
        state.ycls[:] = draw_labels(fit, rng)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
def test_geweke_multinomial(sampler):
    """MC (20,000 iid draws) against SC (100,000 sweeps after 2,000 burn-in): |z_k| < 4."""
    binned = problem()
    mc = marginal_conditional(binned, 20_000, np.random.default_rng(1))
    sc = successive_conditional(binned, sampler, 100_000, 2_000, np.random.default_rng(2))
    assert_joint_agrees(mc, sc, NAMES, sampler)
