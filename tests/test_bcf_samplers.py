"""Every BART sampler that runs inside backfitting updates either forest of the BCF chain (issue 30,
"Engine"; spec multi_forest.md 1.3, 2.2, 8.2-8.4): ``grow_prune``/``cgm`` (MH), ``pg`` (particle Gibbs) and
``ctmc`` (the continuous-time birth-death process), each scoring basis leaves through ``tree.leaf_terms``
(the CT-MCMC rates through the per-bin sums of ``ctmc._bin_rows``).

From the leaf up: the CT-MCMC birth log ratios of a basis leaf against the closed-form basis marginal; one
basis tree updated alone by each sampler against the enumerated exact posterior of its partition; the BCF
chain's prior recovery and conjugate reduction for each sampler (fast versions here, as ``test_bcf.py``'s);
Geweke on n = 20 (slow); the user contract through ``bps.bcf``. Statistical tests have fixed seeds and
state their tolerances.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from _bcf import batch_se, bcf_problem, check_geweke, check_prior_draws, check_releases_every_array
from exact import harness as H
from exact.enumerate import enumerate_trees
from exact.problems import make_problem
from test_bcf import _hmc20, _importance_moments

import bartpy_suite as bps
from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels import tree as _tree
from bartpy_suite._kernels.ctmc import (
    _leaf_rule_setup,
    _subset_mask,
    _var_birth_rates,
    factor_partition_rates,
    new_ctmc_state,
)
from bartpy_suite._kernels.likelihood import MODEL_BASIS_NORMAL, leaf_log_marginal_basis
from bartpy_suite._kernels.multi_forest_update import run_lone_forest
from bartpy_suite._kernels.records import Data, Moves, make_basis_target, make_prior
from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.bcf import CommonSupportWarning
from bartpy_suite.samplers.mh import move_flags, move_vector
from bartpy_suite.samplers.multi_forest import (
    CausalChain,
    ForestSpec,
    _part,
    check_forest_options,
    check_multi_forest_sampler,
)

TAG = _tree.model_tag(MODEL_BASIS_NORMAL)
NEW_SAMPLERS = ("pg", "ctmc", "tempered")
#: Fixed CT-MCMC time per tree visit where a test needs a time-homogeneous chain (no adaptation).
CTMC_FIXED = {"time": 0.5}


def _basis(n, seed):
    """A basis with some zero rows (controls under b_z = 0) and uneven precision weights."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0.0, 1.2, n)
    b[::5] = 0.0
    w = rng.uniform(0.3, 2.5, n)
    return b, w


def _target(b, w, sigma2, tau2, min_leaf=1, alpha=0.95, beta=2.0):
    prior = make_prior(alpha=alpha, beta=beta, min_leaf=min_leaf, model=MODEL_BASIS_NORMAL)
    return make_basis_target(prior, np.array([sigma2]), tau2, np.stack([b, w * b, w * b * b]))


def _lm(rows, r, b, w, sigma2, tau2):
    rows = np.asarray(rows, dtype=np.int64)
    return leaf_log_marginal_basis(float(np.sum(w[rows] * b[rows] ** 2)), float(np.sum(w[rows] * b[rows] * r[rows])),
                                   sigma2, tau2)


# -- the CT-MCMC rates of a basis leaf ---------------------------------------------------------------

def _root_rates(x, is_cat, n_levels, r, target):
    """A root leaf over the rows of ``x`` with its leaf terms cached, and the CT-MCMC state after computing
    its birth rates on every predictor (``cs.cut_a``: each candidate's log ratio without a global term)."""
    binned = BinnedPredictors.fit(x, np.asarray(is_cat), list(n_levels), None)
    n = r.size
    capacity = 2 * n + 1
    tree = _tree.new_tree(n, capacity)
    ycls = np.zeros(0, dtype=np.int64)
    lm, c = _tree.leaf_terms(tree, 0, r, ycls, target, np.zeros(1), TAG)
    tree.lm[0], tree.b[0] = lm, c
    scratch = _tree.new_scratch(binned.codes, capacity, binned.nbins, model=MODEL_BASIS_NORMAL)
    cs = new_ctmc_state(n, capacity, binned.nbins, binned.is_categorical, 1)
    data = Data(binned.codes, binned.is_categorical, binned.nbins, r, ycls)
    return tree, scratch, cs, data, binned


def test_ctmc_birth_ratios_score_basis_leaves():
    """For every numeric cut at a root of 15 rows, the CT-MCMC birth log ratio with the likelihood on minus
    the same ratio with it off is lm(left) + lm(right) - lm(root) of the basis marginal (spec 2.2), the
    leaves' A = sum w b^2 and c = sum w b R taken from their rows directly. Tolerance 1e-10 absolute:
    per-bin sums against sums over the rows, rounding ~1e-15 per term."""
    rng = np.random.default_rng(3)
    n = 15
    x = rng.normal(size=(n, 2))
    r = rng.normal(0.4, 1.0, n)
    b, w = _basis(n, 4)
    sigma2, tau2 = 0.7, 0.3
    ratios = {}
    for likelihood in (True, False):
        target = _target(b, w, sigma2, tau2)
        if not likelihood:
            target = target._replace(prior=target.prior._replace(likelihood=False))
        tree, scratch, cs, data, binned = _root_rates(x, [False, False], [0, 0], r, target)
        n_vars, log_split = _leaf_rule_setup(tree, 0, data, target, scratch)
        for v in range(2):
            _var_birth_rates(tree, 0, v, n_vars, log_split, data, target, np.zeros(2), scratch, cs)
            ratios[likelihood, v] = cs.cut_a[v, :cs.cut_count[0, v]].copy()
    for v in range(2):
        codes = binned.codes[v]
        order = np.unique(codes)
        diff = ratios[True, v] - ratios[False, v]
        assert diff.size == order.size - 1  # min_leaf 1: every cut between distinct values
        root = _lm(np.arange(n), r, b, w, sigma2, tau2)
        for e, k in enumerate(order[:-1]):
            left = np.flatnonzero(codes <= k)
            right = np.flatnonzero(codes > k)
            expected = _lm(left, r, b, w, sigma2, tau2) + _lm(right, r, b, w, sigma2, tau2) - root
            assert diff[e] == pytest.approx(expected, abs=1e-10), (v, k)


def test_ctmc_factor_partition_ratios_score_basis_leaves():
    """The same for every partition of a 5-level factor's levels (the Gray-code walk of ``_factor_walk``
    adds and removes the levels' per-bin c and A): likelihood-on minus likelihood-off log ratio is the
    basis lm difference of the partition's two sides. Tolerance 1e-10 (compensated sums)."""
    rng = np.random.default_rng(5)
    n = 24
    x = np.column_stack([np.arange(n) % 5, rng.normal(size=n)]).astype(float)
    r = rng.normal(-0.2, 1.3, n)
    b, w = _basis(n, 6)
    sigma2, tau2 = 1.3, 0.5
    got = {}
    for likelihood in (True, False):
        target = _target(b, w, sigma2, tau2)
        if not likelihood:
            target = target._replace(prior=target.prior._replace(likelihood=False))
        tree, scratch, cs, data, binned = _root_rates(x, [True, False], [5, 0], r, target)
        size = 2 ** 4 - 1
        codes, rates = np.zeros(size, dtype=np.int64), np.zeros(size)
        n_present = factor_partition_rates(tree, 0, 0, data, target, np.zeros(2), scratch, cs, codes, rates)
        assert n_present == 5
        masks = [int(_subset_mask(cs, n_present, g)) for g in codes]
        got[likelihood] = (masks, cs.cut_a[0, :cs.cut_count[0, 0]].copy())
    masks, on = got[True]
    assert masks == got[False][0] and on.size == len(masks)
    root = _lm(np.arange(n), r, b, w, sigma2, tau2)
    level = binned.codes[0]
    for mask, a_on, a_off in zip(masks, on, got[False][1]):
        left = np.flatnonzero((mask >> level) & 1)
        right = np.flatnonzero(((mask >> level) & 1) == 0)
        expected = _lm(left, r, b, w, sigma2, tau2) + _lm(right, r, b, w, sigma2, tau2) - root
        assert a_on - a_off == pytest.approx(expected, abs=1e-10), mask


# -- one basis tree against its exact posterior ------------------------------------------------------

def _canonical(leaf_of_row) -> tuple:
    """A partition of the rows as a tuple of leaf labels relabelled by first appearance."""
    seen = {}
    return tuple(seen.setdefault(int(v), len(seen)) for v in leaf_of_row)


def _exact_partitions(dataset, r, b, w, sigma2, tau2):
    """Exact posterior of the partition of one basis tree on ``dataset`` (``tests/exact``): prior of each
    enumerated tree times the basis marginal of its leaves, summed over trees of the same partition."""
    prob = make_problem(dataset, None)
    post = {}
    for _, log_prior, leaves in enumerate_trees(prob):
        label = np.empty(prob.n, dtype=np.int64)
        for k, leaf in enumerate(leaves):
            label[list(leaf)] = k
        lp = log_prior + sum(_lm(leaf, r, b, w, sigma2, tau2) for leaf in leaves)
        key = _canonical(label)
        post[key] = np.logaddexp(post.get(key, -np.inf), lp)
    keys = list(post)
    logp = np.array([post[k] for k in keys])
    p = np.exp(logp - logp.max())
    return prob, keys, p / p.sum()


def _lone_tree(prob, r, b, w, sigma2, tau2, sampler, options, seed):
    """One basis tree (a ``ForestPart`` of one tree) on the data of ``prob`` updated ``sweeps`` times alone."""
    binned = BinnedPredictors.fit(prob.X, prob.is_cat, prob.n_levels, None)
    prior = make_prior(alpha=prob.alpha, beta=prob.beta, min_leaf=prob.m, model=MODEL_BASIS_NORMAL)
    spec = ForestSpec(binned.codes, binned.is_categorical, binned.nbins, prior, 1, tau2, 0.0)
    resid = np.ascontiguousarray(r, dtype=np.float64).copy()
    basis = np.stack([b, w * b, w * b * b])
    part, _ = _part(spec, resid, np.array([sigma2]), basis, sampler,
                    check_forest_options(sampler, options)["mu"], "mu")
    mix = check_multi_forest_sampler(sampler) or H.GROW_PRUNE_MOVES
    probs = move_vector(mix)
    return part, Moves(probs, *move_flags(probs)), np.random.default_rng(seed)


@pytest.mark.parametrize("sampler,options,dataset", [
    ("cgm", None, "grid"),
    ("pg", None, "grid"),
    ("pg", {"ess_threshold": 0.5}, "factor"),
    ("ctmc", CTMC_FIXED, "grid"),
    ("ctmc", CTMC_FIXED, "factor"),
])
def test_one_basis_tree_samples_its_exact_posterior(sampler, options, dataset):
    """A basis tree updated alone against a fixed residual (random basis with zero rows, uneven weights;
    sigma^2 and the leaf variance fixed) visits the partitions of the enumerated data sets of
    ``tests/exact`` with their exact posterior probabilities (prior of every tree of the partition times the
    basis marginal of its leaves). 20,000 sweeps; the check is ``exact.harness.mean_check`` (Bonferroni-
    corrected batch-means t-tests at family level 1e-4) on the indicators of the partitions of posterior
    probability >= 0.01 and of n_leaves = 1..4. Scoring the leaves as constant (unit-basis) leaves would be
    detected: that model's exact partition posterior on the same residual is at total variation 0.31 (grid,
    320 partitions) and 0.14 (factor, 71) from this one."""
    sigma2, tau2 = 0.35, 0.8
    prob = make_problem(dataset, None)
    r = np.asarray(make_problem(dataset, "mean_shift").y, float)
    r = r - r.mean()
    b, w = _basis(prob.n, 11)
    b = b + 0.8  # a treatment-like basis of mostly one sign, so the data inform the partition
    b[::5] = 0.0
    prob, keys, probs = _exact_partitions(dataset, r, b, w, sigma2, tau2)
    part, moves, rng = _lone_tree(prob, r, b, w, sigma2, tau2, sampler, options, seed=21)
    sweeps = 20_000
    leaf_of = np.zeros((sweeps, prob.n), dtype=np.uint8)
    run_lone_forest(rng, part, moves, leaf_of)
    seen = [_canonical(row) for row in leaf_of]
    index = {k: i for i, k in enumerate(keys)}
    assert all(s in index for s in seen)  # every visited partition is one of a valid tree
    labels = np.array([index[s] for s in seen])
    n_leaves = np.array([max(k) + 1 for k in keys])
    top = np.flatnonzero(probs >= 0.01)
    columns = [labels == i for i in top] + [n_leaves[labels] == k for k in (1, 2, 3, 4)]
    exact = list(probs[top]) + [probs[n_leaves == k].sum() for k in (1, 2, 3, 4)]
    zmax, threshold, z = H.mean_check(np.column_stack(columns).astype(float), np.array(exact),
                                      indicator=np.ones(len(exact), bool))
    assert zmax < threshold, (zmax, threshold, z)


# -- the BCF chain: prior recovery and conjugate reduction (spec 8.2, 8.4) -----------------------------

def _run(problem, sweeps, tune, seed, sampler, options=None):
    moves = check_multi_forest_sampler(sampler)
    chain = CausalChain(problem, moves, np.random.default_rng(seed), sampler=sampler, options=options)
    chain.allocate(sweeps)
    chain.run(0, tune + sweeps, tune, 1)
    return chain.collect(sweeps)


@pytest.mark.parametrize("sampler", NEW_SAMPLERS)
def test_prior_recovery_with_the_likelihood_off(sampler):
    """``test_bcf.test_prior_recovery_with_the_likelihood_off`` for each new sampler: with the likelihood off
    the chain samples the prior. Each check compares a probability with its prior value within 4
    batch-means standard errors over 20,000 sweeps (8,000 tempered): (b_1 - b_0) ~ N(0, 1); s_m / sqrt(delta) standard Cauchy;
    delta ~ chi^2_1 at its quartiles; sigma^2 at its median; the share of stumps 1 - alpha in each forest (a
    root of continuous predictors with min_leaf 1 always has a rule). Measured z's were all within 2. (For
    ``tempered`` every rung samples the prior, so every swap is accepted: rung 0 still holds prior draws.)"""
    sweeps = 8_000 if sampler == "tempered" else 20_000  # a tempered sweep is 4 BCF sweeps and a swap round
    out = _run(bcf_problem(likelihood=False, mu_trees=2, tau_trees=8, lam=0.2), sweeps, 200, 1, sampler)
    check_prior_draws(out)
    for forest in ("mu", "tau"):
        expected = {"pg": {"ess", "kept_reference", "stages"}, "ctmc": {"jumps", "total_rate", "time"}}
        assert set(out[forest]["sampler_stats"]) == expected.get(sampler, set())
    if sampler == "tempered":
        assert (out["tempering"]["swap_accepted"] == out["tempering"]["swap_proposed"]).all()


@pytest.mark.parametrize("sampler", NEW_SAMPLERS)
def test_root_only_trees_reduce_to_the_conjugate_model(sampler):
    """Spec 8.4 for each new sampler (fast version of ``test_bcf``'s): with min_leaf above n no split is
    possible, every tree is a root and BCF reduces to y_i = s_m Theta_mu + b_{z_i} Theta_tau + e_i. The
    chain's posterior means of mu0 and tau match importance sampling from the prior (400,000 draws) within
    4 combined standard errors (batch means, sd / sqrt(ESS)); posterior sds within 15% (12,000 sweeps, 6,000
    tempered: the
    sd of a batch-means estimate of a sd is a few per cent). The particle update and the process run
    against the basis leaves' root terms, and the leaves are drawn from the basis conditional; for
    ``tempered`` (4 rungs) rung 0 keeps the posterior through the swaps of whole states (a wrong swap ratio or
    a hot rung's wrong sigma^2 conditional shifts these moments: the swaps are accepted 10-80% of the time
    here)."""
    n = 12
    rng = np.random.default_rng(5)
    z = np.arange(n) % 2
    y = 0.4 + 0.8 * z + 0.7 * rng.normal(size=n)
    problem = bcf_problem(n=n, mu_trees=4, tau_trees=3, min_leaf=n + 1, y=y, lam=0.3)
    out = _run(problem, 6_000 if sampler == "tempered" else 12_000, 500, 2, sampler)
    if sampler == "tempered":
        rates = out["tempering"]["swap_accepted"] / out["tempering"]["swap_proposed"]
        assert (rates > 0.02).all(), rates
    p = out["params"]
    theta_mu = out["mu"]["store"].value.reshape(-1, 4).sum(1)
    theta_tau = out["tau"]["store"].value.reshape(-1, 3).sum(1)
    chain = {"mu0": p[:, 3] * theta_mu + p[:, 1] * theta_tau, "tau": (p[:, 2] - p[:, 1]) * theta_tau}
    exact, ess = _importance_moments(y, z, 4, 3, problem.mu_scale2, problem.tau.tau2, 3.0, 0.3, 400_000, 9)
    for name, (mean, sd) in exact.items():
        se = math.hypot(batch_se(chain[name]), sd / math.sqrt(ess))
        assert abs(chain[name].mean() - mean) < 4 * se, (name, chain[name].mean(), mean, se)
        assert abs(chain[name].std() / sd - 1) < 0.15, (name, chain[name].std(), sd)


# -- every sampler against one long reference chain -----------------------------------------------------

def _agreement_problem():
    """n = 24 rows whose treatment effect is 1.5 where x0 is above its median, on HMC20's priors."""
    rng = np.random.default_rng(12)
    n = 24
    problem = bcf_problem(n=n, mu_trees=3, tau_trees=2, min_leaf=2, lam=0.3, seed=12)
    x0 = problem.tau.codes[0]
    y = 0.3 + 1.5 * (np.arange(n) % 2) * (x0 > np.median(x0)) + 0.4 * rng.normal(size=n)
    return dataclasses.replace(problem, y=y)


@functools.cache
def _reference_trace():
    """The cgm chain every sampler is compared with (computed once per session)."""
    return _trace("cgm", None, 20_000, 1, _agreement_problem())


def _trace(sampler, options, sweeps, seed, problem):
    """Per sweep after 500 of tuning: tau at row 0, mu0 at row 0, sigma^2 and the tau forest's leaves, read
    from the chain's state sweep by sweep (rung 0 for ``tempered``)."""
    chain = CausalChain(problem, check_multi_forest_sampler(sampler), np.random.default_rng(seed), sampler=sampler,
                        options=options)
    chain.allocate(sweeps)
    out = np.empty((sweeps, 4))
    cs = chain.causal
    for it in range(500 + sweeps):
        chain.run(it, 1, 500, 1)
        if it >= 500:
            b0, b1, sm = cs.params[0], cs.params[1], cs.params[2]
            leaves = (chain.tau.forest.var[:, :] == _tree.LEAF).sum()
            out[it - 500] = ((b1 - b0) * cs.tfit[0], sm * cs.mfit[0] + b0 * cs.tfit[0],
                             chain.mu.state.target.sigma2[0], leaves)
    return out


@pytest.mark.parametrize("sampler,options", [("pg", None), ("ctmc", None), ("tempered", None),
                                             ({"mu": "pg", "tau": "ctmc"}, None)])
def test_posterior_agrees_with_the_mh_chain(sampler, options):
    """With the likelihood on and trees that split (n = 24, a treatment effect on x0 > 0), each sampler's
    posterior means of tau(x_0), mu0(x_0), sigma^2 and the tau forest's leaf count over 6,000 sweeps agree
    with a cgm chain of 20,000 within 4.5 combined batch-means standard errors (4 statistics x 4 samplers: a z above
    4.5 by chance has probability ~1e-4). A forest update that scored basis leaves wrongly, a particle weight,
    a CT-MCMC rate or a swap ratio, moves these means (the tau forest's basis b_z differs from 1)."""
    reference = _reference_trace()
    got = _trace(sampler, options, 6_000, 2, _agreement_problem())
    for k, name in enumerate(("tau(x0)", "mu0(x0)", "sigma^2", "tau leaves")):
        se = math.hypot(batch_se(got[:, k]), batch_se(reference[:, k]))
        z = (got[:, k].mean() - reference[:, k].mean()) / se
        assert abs(z) < 4.5, (name, got[:, k].mean(), reference[:, k].mean(), z)


# -- Geweke (spec 8.3) --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("sampler,options", [("pg", None), ("ctmc", CTMC_FIXED), ({"mu": "ctmc", "tau": "pg"},
                                                                                   {"mu": CTMC_FIXED})])
def test_geweke_joint_distribution(sampler, options):
    """``test_bcf.test_geweke_joint_distribution`` for each new sampler (and a mixed chain): alternate one
    sweep with a fresh y ~ p(y | parameters) on n = 20; tau_0, mu0_0 and log sigma^2 (and their squares)
    must have the prior's distribution, taken from a chain with the likelihood off, within 4 combined
    batch-means standard errors. CT-MCMC runs a fixed time per visit (adaptation would make the kernel
    depend on the past)."""
    moves = check_multi_forest_sampler(sampler)
    check_geweke(lambda problem, rng: CausalChain(problem, moves, rng, sampler=sampler, options=options))


# -- the user contract ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sampler", ["pg", "ctmc", "tempered", {"mu": "grow_prune", "tau": "pg"}])
def test_bcf_runs_every_forest_sampler(sampler):
    """``bps.bcf(..., sampler=...)`` with pg, ctmc and a per-forest choice: effects are finite with ordered
    intervals, the sampler is recorded in the configuration, the data are not modified, and the MH move
    counts are zero for a chain without an MH forest (they count MH proposals only)."""
    df, _ = _hmc20(50, 0)
    before = df.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CommonSupportWarning)
        fit = bps.bcf("y ~ x1 + x2 + x3 + xb + C(xc)", df, treatment="z", propensity="ps", mu_trees=10,
                      tau_trees=5, chains=2, draws=30, tune=30, seed=1, sampler=sampler, check_mixing=False)
    pd.testing.assert_frame_equal(df, before)
    ate = fit.ate()
    assert np.isfinite(ate["mean"]) and ate["lower"] <= ate["mean"] <= ate["upper"]
    assert fit.config["sampler"] == sampler
    assert (fit.n_leaves["mu"] >= 1).all() and (fit.n_leaves["tau"] > 1).any()
    if sampler in ("pg", "ctmc"):
        assert fit.move_counts.sum() == 0


def test_bad_sampler_choices_name_what_works():
    """A sampler that cannot run a forest (smc: CART only) names the ones that can; tempered per forest, moves
    with no MH forest, two different MH samplers, a dict without both forests and a bad option are errors
    that say what to do."""
    df, _ = _hmc20(30, 1)
    kw = dict(treatment="z", propensity="ps", mu_trees=3, tau_trees=2, chains=1, draws=2, tune=2)
    with pytest.raises(ArgumentError, match=r"sampler 'smc' cannot run a model of several forests \(bcf\) yet; "
                                            r"samplers that can: 'grow_prune', 'cgm', 'pg', 'ctmc', 'tempered'"):
        bps.bcf("y ~ x1", df, sampler="smc", **kw)
    with pytest.raises(ArgumentError, match=r"'tempered' runs the whole chain.*give sampler='tempered'"):
        bps.bcf("y ~ x1", df, sampler={"mu": "tempered", "tau": "cgm"}, **kw)
    with pytest.raises(ArgumentError, match=r"'rungs' \(3\) and 'temperatures' \(2 values\) disagree"):
        check_forest_options("tempered", {"rungs": 3, "temperatures": [1.0, 0.0]})
    with pytest.raises(ArgumentError, match=r"no option 'ladder'"):
        check_forest_options("tempered", {"ladder": "geometric"})
    with pytest.raises(ArgumentError, match=r"sampler 'smc' for the tau forest cannot run.*'pg', 'ctmc'"):
        bps.bcf("y ~ x1", df, sampler={"mu": "pg", "tau": "smc"}, **kw)
    with pytest.raises(ArgumentError, match=r"moves set the move mix of the MH samplers.*leave moves out"):
        bps.bcf("y ~ x1", df, sampler="pg", moves={"grow": 1.0}, **kw)
    with pytest.raises(ArgumentError, match=r"share one move mix"):
        check_multi_forest_sampler({"mu": "cgm", "tau": "grow_prune"})
    with pytest.raises(ArgumentError, match=r"must name each of 'mu', 'tau'"):
        check_multi_forest_sampler({"mu": "pg"})
    with pytest.raises(ArgumentError, match=r"sampler 'pg' has no option 'particle'.*Did you mean 'particles'"):
        check_forest_options("pg", {"particle": 5})
    with pytest.raises(ArgumentError, match=r"'grow_prune' \(tau forest\) takes no sampler options"):
        check_forest_options({"mu": "pg", "tau": "grow_prune"}, {"tau": {"particles": 5}})
    with pytest.raises(ArgumentError, match=r"'ancestor_sampling' and 'ess_threshold' < 1 do not combine"):
        check_forest_options("pg", {"ancestor_sampling": True, "ess_threshold": 0.5})
    assert check_forest_options({"mu": "pg", "tau": "cgm"}, {"particles": 4})["mu"]["particles"] == 4


def test_ctmc_refuses_a_factor_with_too_many_levels():
    """A factor with more levels than CT-MCMC enumerates is an ``ArgumentError`` naming the forest and
    saying which samplers fit it."""
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"y": rng.normal(size=n), "z": np.arange(n) % 2, "g": [f"l{i % 21}" for i in range(n)],
                       "ps": 0.5})
    with pytest.raises(ArgumentError, match=r"predictor 0 of the mu forest is a factor with 21 levels.*'pg'"):
        bps.bcf("y ~ C(g)", df, treatment="z", propensity="ps", sampler="ctmc", mu_trees=2, tau_trees=2, chains=1,
                draws=2, tune=2)


@pytest.mark.parametrize("sampler", NEW_SAMPLERS)
def test_bcf_with_new_samplers_releases_every_array(sampler):
    """As ``test_bcf.test_bcf_releases_every_array_numba_holds``: a pg or ctmc bcf fit leaves numba's meminfo
    counts balanced (the particle and CT-MCMC helpers borrow the forests' arrays)."""
    df, _ = _hmc20(50, 9)
    kw = dict(treatment="z", propensity="ps", mu_trees=4, tau_trees=3, chains=2, draws=5, tune=3, seed=1,
              threads=1, sampler=sampler, check_mixing=False)

    def ate(fit):
        assert np.isfinite(fit.ate()["mean"])

    check_releases_every_array("y ~ x1 + x2", df, kw, ate)
