"""Geweke (2004) joint-distribution test of ordinal (cumulative-probit) BART's sweep: the trees,
the cutpoints and the latents together (``_kernels/ordinal.py``).

The model, three classes: trees and leaf values from BART's prior (``test_geweke_bart.py``'s
small problem: 12 rows, 3 trees, tau^2 = 0.25), one free cutpoint c_2 with the prior
N(0, 1) restricted to c_2 > 0 (``cutpoint_sd=1``; c_1 = 0, offset mu0 = 0), latents
z_i ~ N(f(x_i), 1) and y_i = k iff c_k < z_i <= c_{k+1} (c_0 = -inf, c_3 = +inf).

* marginal-conditional (MC): trees, leaves and c_2 from the prior, then (z, y) given them.
  Independent draws.
* successive-conditional (SC): one sweep of the chain (an MH move per tree given z, the MH
  steps on the cutpoints with z integrated out, then z given f, c and y), then a fresh (z, y)
  from p(z, y | f, c).

If the sweep leaves p(trees, leaves, c, z | y) invariant, both simulate the same joint. The
sweep is the chain's own kernel helper (``mh_ordinal_sweep``) called one sweep at a time, with
the cutpoint proposal's step fixed at its initial value (adaptation runs only in ``tune``).

Test statistic and tolerance as ``test_geweke_bart.py``: for each of K = 9 functions,
``z_k = (mean_MC - mean_SC) / sqrt(var_MC / M + se_SC^2)`` with se_SC from 50 batch means, and
|z_k| < 4 for every k (a correct sampler fails with probability about 9 x 6.3e-5 = 6e-4).

Measured when written (18 s): the correct sweep gives |z| <= 1.55 on every function; running the
chain with its cutpoint prior sd 30% too large (1.3 instead of 1) gives z = -7.0 on c2 and 4.2 on
mean y.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_geweke_bart import ALPHA, BETA, MIN_LEAF, N_TREES, TAU2, assert_joint_agrees, prior_sum_of_trees, problem

from bartpy_suite._kernels.backfit import SIGMA_PROBIT
from bartpy_suite._kernels.cart_moves import N_MOVES
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.ordinal import mh_ordinal_sweep
from bartpy_suite._kernels.records import Moves
from bartpy_suite._kernels.tree import M_N_LEAVES
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers.mh import GROW_PRUNE_MOVES, OrdinalMHChain, move_flags, move_vector
from bartpy_suite.samplers.problems import OrdinalBartProblem

CUT_SD = 1.0
NAMES = ("mean leaves", "mean f^2", "roughness", "f0", "c2", "mean y", "mean f*y", "mean (z-f)^2", "y0")


def classes(z, c2):
    """y = 0, 1, 2 for z <= 0, 0 < z <= c2, z > c2."""
    return (z > 0).astype(np.int64) + (z > c2).astype(np.int64)


def functions(f, c2, z, y, leaves):
    return np.array([leaves, np.mean(f * f), np.mean(np.diff(f) ** 2), f[0], c2, np.mean(y), np.mean(f * y),
                     np.mean((z - f) ** 2), y[0]])


def marginal_conditional(binned, draws, rng):
    out = np.empty((draws, len(NAMES)))
    n = binned.codes.shape[1]
    for s in range(draws):
        f, total_leaves = prior_sum_of_trees(binned, rng)
        c2 = abs(CUT_SD * rng.standard_normal())
        z = f + rng.standard_normal(n)
        out[s] = functions(f, c2, z, classes(z, c2), total_leaves / N_TREES)
    return out


def successive_conditional(binned, iterations, burn, rng):
    n = binned.codes.shape[1]
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    c2 = 1.0
    z = rng.standard_normal(n)  # f = 0: the chain starts from stumps with zero leaves
    y = classes(z, c2)
    problem = OrdinalBartProblem(binned.codes, binned.is_categorical, binned.nbins, y.astype(float), hyper, N_TREES,
                                 SIGMA_PROBIT, 0.0, n_classes=3, cutpoints=(0.0, c2), cutpoint_sd=CUT_SD)
    chain = OrdinalMHChain(problem, GROW_PRUNE_MOVES, rng, move_vector, move_flags)
    state, ost = chain.state, chain.ordinal
    state.z[:] = z
    state.resid[:] = z  # resid = z - eta, eta = mu0 + f = 0
    ost.ycls[:] = y
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    moves = Moves(chain.move_probs, *move_flags(chain.move_probs))
    out = np.empty((iterations, len(NAMES)))
    for it in range(burn + iterations):
        mh_ordinal_sweep(chain.rng, chain.forest, state, ost, chain.data, moves, chain.scratch, counts)
        f = state.z - state.resid
        c2 = ost.cut[2]
        if it >= burn:
            out[it - burn] = functions(f, c2, state.z, ost.ycls, chain.forest.meta[:, M_N_LEAVES].mean())
        z = f + rng.standard_normal(n)
        state.z[:] = z
        state.resid[:] = z - f
        ost.ycls[:] = classes(z, c2)
    return out


@pytest.mark.slow
def test_geweke_trees_cutpoints_and_latents():
    """MC (20,000 iid draws) against SC (100,000 sweeps after 2,000 burn-in): |z_k| < 4 for all 9
    functions (module docstring)."""
    binned = problem()
    mc = marginal_conditional(binned, 20_000, np.random.default_rng(1))
    sc = successive_conditional(binned, 100_000, 2_000, np.random.default_rng(2))
    assert_joint_agrees(mc, sc, NAMES, "ordinal")
