"""The grow-from-root sampler ``gfr`` and ``init="gfr"`` warm starts (issue 32; spec
``/work/shared/specs/gfr.md``).

What GFR targets (spec section 10): with one tree and sigma fixed, each sweep regrows the tree
from its root on the same residual (the response itself), so the draws are independent draws
of GFR's sequential proposal q(T | y) = product over the evaluated nodes of the chosen option's
probability (spec 3.2). That q is enumerated here on the 3x3 grids of ``test_bart_exact.py``
with dense Gaussian marginals (independent of the kernel's closed form) and the draws are
compared with it; q is not the posterior (the test prints and checks their distance). With the
likelihood off, q in weight mode "B" is the BART tree prior itself and mode "U" a prior uniform
over a node's candidate rules: both are checked against enumerations.

Warm starts: the MCMC kernel is untouched, so a grow_prune chain started from a GFR forest must
still pass ``test_bart_exact.py``'s exact-posterior test.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from _chains import bart_chain, run_padded

import bartpy_suite as bps
from bartpy_suite._kernels.backfit import SIGMA_FIXED, SIGMA_PROBIT
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.record import to_padded
from bartpy_suite.errors import ArgumentError
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS, BartProblem
from bartpy_suite.samplers.gfr import GFR, GfrChain, check_init_options, warm_start

try:
    import test_bart_exact as BE
except ImportError:  # tests/ imported as a package
    from tests import test_bart_exact as BE

ALPHA, BETA, MIN_LEAF, SIGMA2, TAU2 = BE.ALPHA, BE.BETA, BE.MIN_LEAF, BE.SIGMA2, BE.TAU2


def _prior(likelihood=True):
    return kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=likelihood, tau2=TAU2,
                        model_code=MODEL_NORMAL_KNOWN_VARIANCE)


def _problem(binned, y, likelihood=True, trees=1, mode=SIGMA_FIXED):
    return BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.asarray(y, dtype=float),
                       _prior(likelihood), trees, mode, sigma2=SIGMA2)


def gfr_tree_draws(binned, y, seed, draws, likelihood=True, **options):
    """Canonical trees of ``draws`` GFR sweeps of one tree with sigma fixed."""
    chain = GfrChain(_problem(binned, y, likelihood), GFR.check_options(options), np.random.default_rng(seed))
    chain.allocate(draws)
    chain.run(0, draws, 0, 1)
    store = chain.collect(draws).store
    out = to_padded(store.var, store.cut, store.value, store.tree_nodes)
    return BE.canonical_draws(out, binned)


# --------------------------------------------------------------------------------------------
# Plain-Python enumeration of GFR's proposal q(T | y)
# --------------------------------------------------------------------------------------------
def node_options_python(codes, is_cat, nbins, rows, depth, leaf_loglik, mode="B"):
    """GFR's option probabilities at a node with ``rows`` at ``depth`` (spec 3.2), in plain
    Python: ``[(None, p_stop), ((v, rule, left rows, right rows), p), ...]``, or None when the
    node has no available rule (a leaf with probability 1).

    Options (``BE.available_rules``: factor rules as unordered partitions; the two ordered masks
    of one partition have equal weight, so their total is the weight of the partition with K_v
    counted in partitions) get the log weights

        stop:        log(1 - p_d) + L(R)
        (v, rule):   log p_d - log |V| - log K_v + L(R_L) + L(R_R)   (mode "B")
                     log p_d - log K + L(R_L) + L(R_R)                (mode "U")

    with L the dense Gaussian log marginal (the terms common to all options cancel in the
    normalisation).
    """
    rules = BE.available_rules(codes, rows, is_cat, nbins, MIN_LEAF)
    if not rules:
        return None
    ps = ALPHA * (1.0 + depth) ** (-BETA)
    options = [(None, math.log1p(-ps) + leaf_loglik(rows))]
    k_total = sum(len(o) for o in rules.values())
    for v, found in rules.items():
        prior = math.log(ps) - (math.log(k_total) if mode == "U" else math.log(len(rules)) + math.log(len(found)))
        for rule, lrows, rrows in found:
            options.append(((v, rule, lrows, rrows), prior + leaf_loglik(lrows) + leaf_loglik(rrows)))
    weights = np.array([w for _, w in options])
    logp = weights - (weights.max() + math.log(np.exp(weights - weights.max()).sum()))
    return [(choice, float(lp)) for (choice, _), lp in zip(options, logp)]


def enumerate_q(codes, is_cat, nbins, leaf_loglik, mode="B"):
    """Every valid tree with its log probability under GFR's top-down proposal: the product of
    ``node_options_python``'s probabilities of the choices made at its nodes."""
    cache = {}

    def enum(rows, depth):
        key = (rows, depth)
        if key in cache:
            return cache[key]
        options = node_options_python(codes, is_cat, nbins, rows, depth, leaf_loglik, mode)
        if options is None:
            cache[key] = [(None, 0.0)]
            return cache[key]
        result = [(None, options[0][1])]
        for (v, rule, lrows, rrows), lp in options[1:]:
            for lt, llp in enum(lrows, depth + 1):
                for rt, rlp in enum(rrows, depth + 1):
                    result.append(((v, rule, lt, rt), lp + llp + rlp))
        cache[key] = result
        return result

    return dict(enum(tuple(range(codes.shape[1])), 0))


def enumerated_probs(binned, leaf_loglik, mode):
    q = enumerate_q(binned.codes, binned.is_categorical, binned.nbins, leaf_loglik, mode)
    return {t: math.exp(lp) for t, lp in q.items()}


def check_draws(draws, probs, label):
    """G-test (tiny cells pooled) p > 1e-4 and TV below the mean TV of 100 iid multinomial
    samples of the same size plus 0.01, as ``test_bart_exact.py`` (the draws here are iid)."""
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-9)
    counts = Counter(draws)
    assert set(counts) <= set(probs), "GFR drew a tree outside the valid set"
    g, p, dof = BE.g_test(counts, probs)
    tv = BE.total_variation(counts, probs)
    keys = list(probs)
    pv = np.array([probs[k] for k in keys])
    rng = np.random.default_rng(0)
    iid_tv = np.mean([0.5 * np.abs(rng.multinomial(len(draws), pv) / len(draws) - pv).sum() for _ in range(100)])
    print(f"\n{label}: G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {iid_tv:.4f})")
    assert p > 1e-4, (label, g, dof, p)
    assert tv < iid_tv + 0.01, (label, tv, iid_tv)


# 20,000 independent draws: expected counts >= 5 in every cell holding >= 2.5e-4 of the mass.
DRAWS = 20_000


@pytest.mark.parametrize("mode", ["B", "U"])
@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_gfr_without_likelihood_draws_its_prior(factor, mode):
    """Likelihood off (every l = 0): mode "B" draws trees exactly from the BART tree prior (the
    enumerated prior of ``test_bart_exact.py``), mode "U" from the prior uniform over a node's
    candidate rules (XBART's). The depth cap (10) is never reached on 18 rows with
    min_leaf_size 2. A correct sampler fails the G-test with probability 1e-4 per case."""
    binned, y = BE.grid_problem(factor)
    probs = enumerated_probs(binned, lambda rows: 0.0, mode)
    if mode == "B":
        prior = {t: math.exp(lp) for t, lp, _ in BE.enumerate_trees(
            binned.codes, binned.is_categorical, binned.nbins, MIN_LEAF, ALPHA, BETA, lambda rows: 0.0)}
        assert set(prior) == set(probs)
        assert all(probs[t] == pytest.approx(prior[t], rel=1e-9) for t in prior)
    draws = gfr_tree_draws(binned, y, seed=3 + factor, draws=DRAWS, likelihood=False, weights=mode)
    check_draws(draws, probs, f"prior mode {mode} factor={factor}")


@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_gfr_one_tree_draws_its_proposal_not_the_posterior(factor):
    """One tree, sigma fixed: GFR's draws follow the enumerated proposal q(T | y) (spec 10),
    whose distance from the exact posterior is printed and is far above sampling noise: GFR is
    an approximation, which is what the docs say."""
    binned, y = BE.grid_problem(factor)
    leaf = BE.normal_leaf_loglik(y, SIGMA2, TAU2)
    probs = enumerated_probs(binned, leaf, "B")
    draws = gfr_tree_draws(binned, y, seed=7 + factor, draws=DRAWS)
    check_draws(draws, probs, f"proposal q factor={factor}")
    keys, _, post = BE.exact_posterior(binned, y)
    tv_q_post = 0.5 * sum(abs(probs.get(k, 0.0) - p) for k, p in zip(keys, post))
    print(f"TV(q, exact posterior) = {tv_q_post:.3f}")
    # Far above the ~0.05 TV of 20,000 iid draws: the GFR distribution is not the posterior.
    assert tv_q_post > 0.1


def test_gfr_same_seed_same_draws_and_chains_differ():
    """Two fits with one seed give identical draws; the chains of a fit differ."""
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(120, 3))
    y = np.where(x[:, 0] > 0.5, 1.0, -1.0) + 0.3 * rng.normal(size=120)
    kw = dict(sampler="gfr", trees=10, chains=2, draws=20, tune=5, seed=5, progress=False, check_mixing=False)
    a = bps.BART(**kw).fit(x, y)
    b = bps.BART(**kw).fit(x, y)
    for name in ("sigma", "n_leaves"):
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    np.testing.assert_array_equal(a.idata["trees"]["node_cut"].values, b.idata["trees"]["node_cut"].values)
    sigma = a.posterior["sigma"].values
    assert not np.array_equal(sigma[0], sigma[1])


def test_gfr_recovers_a_step_function():
    """f = 2 for x0 > 0.5 else -1, noise sd 0.3, n = 400: the posterior mean of f from 40 GFR
    sweeps (15 tuning) is within RMSE 0.1 of f (an oracle that knew the cut would average
    ~200 rows per side, RMSE about 0.3 / sqrt(200) = 0.02; the tolerance leaves room for the
    trees' extra splits on noise; a sampler that missed the step would have RMSE ~1.5)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(size=(400, 4))
    f = np.where(x[:, 0] > 0.5, 2.0, -1.0)
    y = f + 0.3 * rng.normal(size=400)
    fit = bps.BART(sampler="gfr", trees=20, chains=1, draws=25, tune=15, seed=2, progress=False,
                   check_mixing=False).fit(x, y)
    mean = fit.predict(x)["mean"].to_numpy()
    rmse = float(np.sqrt(np.mean((mean - f) ** 2)))
    print(f"\nRMSE of f: {rmse:.4f}, sigma {fit.posterior['sigma'].values.mean():.3f}")
    assert rmse < 0.1
    assert abs(float(fit.posterior["sigma"].values.mean()) - 0.3) < 0.05  # 400 rows: sd of sigma's draw ~0.011


def test_warm_start_maps_sweeps_to_chains_and_leaves_their_generators():
    """Chain c starts from the forest and sigma^2 of GFR sweep k - 1 - c (stochtree's rule);
    the chains' generators are not used by the warm start; the residual is y - f(x)."""
    binned, y = BE.grid_problem(False)
    problem = _problem(binned, y, mode=SIGMA_FIXED, trees=3)
    moves = SAMPLERS["grow_prune"].option_defaults()["moves"]
    chains = [bart_chain(binned.codes, binned.is_categorical, binned.nbins, y, problem.prior, moves,
                         np.random.default_rng(100 + c), 3, SIGMA_FIXED, sigma2=SIGMA2) for c in range(2)]
    states = [c.rng.bit_generator.state for c in chains]
    options = check_init_options({"sweeps": 4}, 2)
    warm_start(chains, problem, np.random.default_rng(9), options)
    assert [c.rng.bit_generator.state for c in chains] == states
    ref = GfrChain(problem, {k: options[k] for k in GFR.option_defaults()}, np.random.default_rng(9))
    ref.allocate(0)
    for sweep in range(4):
        ref.run(sweep, 1, 0, 1)
        c = 3 - sweep
        if c < 2:
            for name in ("var", "cut", "left", "right", "value", "start", "end"):
                np.testing.assert_array_equal(getattr(chains[c].forest, name), getattr(ref.forest, name))
            fit = sum(ref.forest.value[j][ref.state.leaf_of[j]] for j in range(3))
            np.testing.assert_allclose(chains[c].state.resid, y - fit, atol=1e-12)
    assert not np.array_equal(chains[0].forest.value, chains[1].forest.value)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["grow_prune", "cgm"])
@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_warm_started_chain_matches_exact_posterior(factor, sampler):
    """A grow_prune or cgm chain (one tree, sigma fixed) started from a GFR forest, no tuning,
    passes ``test_bart_exact.py``'s exact-posterior test with its settings (40,000 draws thinned
    by 30; G-test p > 1e-4, TV within 0.01 of iid noise): the warm start does not change the
    kernel's stationary distribution."""
    binned, y = BE.grid_problem(factor)
    keys, _, post = BE.exact_posterior(binned, y)
    problem = _problem(binned, y)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, y, problem.prior,
                       SAMPLERS[sampler].option_defaults()["moves"], np.random.default_rng(31 + factor), 1,
                       SIGMA_FIXED, sigma2=SIGMA2)
    warm_start([chain], problem, np.random.default_rng(61 + factor), check_init_options(None, 1))
    assert chain.forest.meta[0, 1] > 1, "the GFR start should not be a stump on this data"
    out = run_padded(chain, BE.DRAWS, 0, BE.DRAWS * BE.THIN, 0, BE.THIN)
    check_draws(BE.canonical_draws(out, binned), dict(zip(keys, post)), f"warm-started {sampler} factor={factor}")


def test_warm_start_through_bart_is_deterministic_and_fits():
    """``init="gfr"`` with grow_prune: same seed, same draws; after 10 tuning sweeps sigma is
    near its true 0.3 (a cold start on this step function is still far off: its first sweeps
    start from stumps with sigma at the OLS residual sd)."""
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(300, 3))
    y = np.where(x[:, 0] > 0.5, 2.0, -1.0) + 0.3 * rng.normal(size=300)
    kw = dict(trees=20, chains=2, draws=20, tune=10, seed=8, progress=False, check_mixing=False, init="gfr")
    a = bps.BART(**kw).fit(x, y)
    b = bps.BART(**kw).fit(x, y)
    np.testing.assert_array_equal(a.posterior["sigma"].values, b.posterior["sigma"].values)
    assert a.config["init"] == "gfr" and a.config["init_options"]["sweeps"] == 5
    assert abs(float(a.posterior["sigma"].values.mean()) - 0.3) < 0.05


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampler="gfr", sampler_options={"depth": 3}), "no option 'depth'"),
    (dict(sampler="gfr", sampler_options={"weights": "C"}), "weights"),
    (dict(sampler="gfr", sampler_options={"max_depth": 0}), "max_depth"),
    (dict(sampler="gfr", sampler_options={"sigma_update": "node"}), "sigma_update"),
    (dict(init="xbart"), "init"),
    (dict(init="gfr", sampler="pg"), "'grow_prune', 'cgm', 'gfr'"),
    (dict(init="gfr", init_options={"sweeps": 1}, chains=2), "fewer than the 2 chains"),
    (dict(init="gfr", init_options={"particles": 3}), "init_options: .*no option 'particles'"),
    (dict(init=None, init_options={"sweeps": 5}), "give init='gfr'"),
    (dict(init="gfr", sparse=True), "DART"),
])
def test_bad_settings_raise_clear_errors(kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        bps.BART(**kwargs)


@pytest.mark.parametrize("key, close", [("sweep", "sweeps"), ("weight", "weights"), ("max_dept", "max_depth")])
def test_misspelled_init_option_suggests_the_right_one(key, close):
    """A near miss of an ``init_options`` key, 'sweeps' included (it is not a sampler option),
    names the key and suggests the one meant, as ``sampler_options`` does."""
    with pytest.raises(ArgumentError, match=f"init_options.*{key!r}.*'sweeps'.*Did you mean {close!r}"):
        bps.BART(init="gfr", init_options={key: 3})


def test_unsupported_models_say_what_gfr_fits():
    """Probit, multinomial and ordinal BART, and CART, are refused naming what works."""
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(60, 2))
    with pytest.raises(ArgumentError, match="regression BART"):
        bps.BART(sampler="gfr", progress=False).fit(x, (x[:, 0] > 0.5).astype(int), class_labels=[0, 1])
    with pytest.raises(ArgumentError, match="regression BART"):
        bps.BART(init="gfr", progress=False).fit(x, (x[:, 0] > 0.5).astype(int), class_labels=[0, 1])
    with pytest.raises(ArgumentError, match="regression BART"):
        bps.BART(init="gfr", progress=False).fit(x, rng.integers(0, 3, 60), class_labels=[0, 1, 2])
    with pytest.raises(ArgumentError, match="gfr"):
        bps.BART(sampler="gfr", progress=False).fit(x, rng.integers(0, 3, 60), class_labels=[0, 1, 2])
    with pytest.raises(ArgumentError, match="grow_prune"):
        bps.BayesianCART(sampler="gfr")
    import pandas as pd

    df = pd.DataFrame({"time": rng.uniform(1, 5, 60), "event": rng.integers(0, 2, 60), "x": x[:, 0]})
    with pytest.raises(ArgumentError, match="not survival BART"):
        bps.bart("Surv(time, event) ~ x", data=df, init="gfr")
    with pytest.raises(ArgumentError, match="probit"):
        GfrChain(_problem(*BE.grid_problem(False), mode=SIGMA_PROBIT), GFR.option_defaults(),
                 np.random.default_rng(0))


@pytest.mark.parametrize("mode", ["B", "U"])
@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_node_probabilities_match_brute_force(factor, mode):
    """Spec 14.1: the kernel's option probabilities at a node (``node_options``,
    ``add_prior_terms``, the stop weight of ``grow_from_root``) equal the brute-force ones with
    the full dense Gaussian marginal to 1e-12, at the root and at a depth-1 node of the factor
    grid (the likelihood parts differ from the dense ones by constants that cancel)."""
    from bartpy_suite._kernels import gfr as K

    binned, y = BE.grid_problem(factor)
    codes, is_cat, nbins = binned.codes, binned.is_categorical, binned.nbins
    leaf = BE.normal_leaf_loglik(y, SIGMA2, TAU2)
    work = K.new_work(nbins, is_cat, weights=K.WEIGHTS_U if mode == "U" else K.WEIGHTS_B, max_depth=10,
                      sigma_update=K.SIGMA_PER_SWEEP)
    xr = np.ascontiguousarray(codes.T)
    for rows, depth in ((tuple(range(18)), 0), (tuple(int(r) for r in np.flatnonzero(codes[0] >= 1)), 1)):
        perm = np.array(rows, dtype=np.int32)
        hn, hs = work.hn[0], work.hs[0]
        K.fill_histogram(xr, perm, 0, perm.size, y, work.off, hn, hs)
        n, s_node = perm.size, float(y[list(rows)].sum())
        lik = K.LeafLik(SIGMA2, TAU2, True)
        n_opt, n_vars = K.node_options(hn, hs, is_cat, nbins, n, s_node, MIN_LEAF, lik, work)
        ps = ALPHA * (1.0 + depth) ** (-BETA)
        K.add_prior_terms(work, n_opt, n_vars, ps, K.WEIGHTS_U if mode == "U" else K.WEIGHTS_B, is_cat)
        lam = np.concatenate([[K.leaf_ell(n, s_node, lik) + math.log1p(-ps)], work.lam[:n_opt]])
        prob = np.exp(lam - lam.max())
        prob /= prob.sum()
        kernel = Counter({None: prob[0]})
        for o in range(n_opt):  # the kernel's ordered masks summed per canonical partition
            v, cut = int(work.ovar[o]), int(work.ocut[o])
            col = codes[v, list(rows)]
            left = col <= cut if not is_cat[v] else ((cut >> col.astype(np.int64)) & 1) == 1
            if is_cat[v]:
                present = sorted(set(int(c) for c in col))
                chosen = frozenset(lev for lev in present if (cut >> lev) & 1)
                rule = frozenset(present) - chosen if present[-1] in chosen else chosen
            else:
                rule = cut
            kernel[(v, rule)] += prob[1 + o]
            assert left.sum() >= MIN_LEAF and (~left).sum() >= MIN_LEAF
        brute = {None if c is None else (c[0], c[1]): math.exp(lp)
                 for c, lp in node_options_python(codes, is_cat, nbins, rows, depth, leaf, mode)}
        assert set(kernel) == set(brute)
        for key, p in brute.items():
            assert kernel[key] == pytest.approx(p, rel=1e-12, abs=1e-15), key


def test_sigma_update_per_tree_and_depth_cap():
    """``sigma_update="tree"`` (XBART's order) still recovers sigma on the step function (true
    0.3; 400 rows, sd of a draw ~0.011, tolerance 0.05), and ``max_depth=1`` gives trees of at
    most two leaves."""
    rng = np.random.default_rng(12)
    x = rng.uniform(size=(400, 3))
    y = np.where(x[:, 0] > 0.5, 2.0, -1.0) + 0.3 * rng.normal(size=400)
    fit = bps.BART(sampler="gfr", sampler_options={"sigma_update": "tree", "max_depth": 1}, trees=20, chains=1,
                   draws=20, tune=10, seed=3, progress=False, check_mixing=False).fit(x, y)
    assert int(fit.posterior["n_leaves"].values.max()) == 2
    assert abs(float(fit.posterior["sigma"].values.mean()) - 0.3) < 0.05
    assert int(fit.sample_stats["n_truncated"].values.sum()) == 0


def test_full_node_arrays_stop_the_growth_and_are_counted():
    """One tree over 2,000 noise rows with min_leaf_size 1 and a tiny sigma wants more than the
    255 node slots of a BART tree: the nodes that found no room stay leaves, the tree stays a
    valid 255-node state, and ``n_truncated`` counts them."""
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(2000, 2))
    y = rng.normal(size=2000)
    fit = bps.BART(sampler="gfr", trees=1, sigma=0.01, min_leaf_size=1, alpha=0.999, beta=0.0, chains=1, draws=3,
                   tune=0, seed=1, progress=False, check_mixing=False).fit(x, y)
    assert int(fit.sample_stats["n_truncated"].values.min()) > 0
    assert int(fit.posterior["n_leaves"].values.max()) == 128  # 255 nodes


def test_factor_with_many_levels_uses_fisher_prefixes():
    """A 20-level factor (above the 12 levels of exact enumeration, spec 6): the rules are
    Fisher's prefixes of the levels sorted by mean residual, which contain the split of the
    even from the odd levels here; f = +1 on even levels, -1 on odd, noise sd 0.2, 600 rows:
    the posterior mean of f is within RMSE 0.1 of f (missing the grouping would leave ~1)."""
    rng = np.random.default_rng(8)
    levels = rng.integers(0, 20, 600)
    x = np.column_stack([levels.astype(float), rng.uniform(size=600)])
    f = np.where(levels % 2 == 0, 1.0, -1.0)
    y = f + 0.2 * rng.normal(size=600)
    fit = bps.BART(sampler="gfr", trees=10, chains=1, draws=20, tune=10, seed=4, progress=False,
                   check_mixing=False).fit(x, y, is_categorical=[True, False], n_levels=[20, 0])
    rmse = float(np.sqrt(np.mean((fit.predict(x)["mean"].to_numpy() - f) ** 2)))
    print(f"\nRMSE of f: {rmse:.4f}")
    assert rmse < 0.1


def test_missing_split_is_refused():
    x = np.random.default_rng(0).uniform(size=(60, 2))
    y = x[:, 0].copy()
    x[3, 1] = np.nan
    with pytest.raises(ArgumentError, match="na_action='split'"):
        bps.BART(sampler="gfr", progress=False).fit(x, y, na_action="split")
    with pytest.raises(ArgumentError, match="na_action='split'"):
        bps.BART(init="gfr", progress=False).fit(x, y, na_action="split")


def test_one_model_fitted_from_two_threads_warm_starts_each_fit_from_its_own_data(monkeypatch):
    """``init="gfr"`` keeps no per-fit state on the model: two fits of one ``BART`` instance running
    at once (threads) each warm-start from their own data. A barrier holds both fits just before
    the warm start, where the model used to read the problem it had stored on itself: one fit
    then started from the other's GFR forests (different draws from its sequential fit)."""
    import threading

    from bartpy_suite.models import bart as bart_module

    rng = np.random.default_rng(21)
    x = rng.uniform(size=(80, 2))
    ys = [np.where(x[:, 0] > 0.5, 2.0, -1.0) + 0.3 * rng.normal(size=80), 3.0 * x[:, 1] + 0.3 * rng.normal(size=80)]
    model = bps.BART(init="gfr", trees=5, chains=1, draws=5, tune=0, seed=3, progress=False, check_mixing=False)
    alone = [model.fit(x, y).posterior["sigma"].values for y in ys]
    barrier = threading.Barrier(2, timeout=120)
    spawn = bart_module.spawn_generators

    def spawn_together(*args):
        barrier.wait()
        return spawn(*args)

    monkeypatch.setattr(bart_module, "spawn_generators", spawn_together)
    out = [None, None]

    def run(i):
        out[i] = model.fit(x, ys[i]).posterior["sigma"].values

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        np.testing.assert_array_equal(out[i], alone[i])


def test_mixing_check_of_a_gfr_fit_says_its_draws_are_a_search_not_posterior_draws():
    """Spec pitfall 15: a ``gfr`` fit's sweeps are a stochastic search, so the mixing check's
    advice for it (note, warning and strong warning) points to ``init="gfr"`` with an MCMC
    sampler for posterior intervals instead of "another sampler" in general."""
    from bartpy_suite.posterior.mixing import _advice, mixing_report

    rng = np.random.default_rng(3)
    x = rng.uniform(size=(200, 3))
    y = np.sin(6 * x[:, 0]) + 0.3 * rng.normal(size=200)
    fit = bps.BART(sampler="gfr", trees=10, chains=2, tune=15, draws=25, seed=1, progress=False,
                   check_mixing=False).fit(x, y)
    for severity in ("note", "warning", "strong"):
        advice = _advice(fit, severity)
        assert "not posterior draws" in advice and "init='gfr'" in advice, advice
    report = mixing_report(fit)
    assert report.severity == "ok" or "init='gfr'" in report.message
