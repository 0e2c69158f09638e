"""The particle samplers ``pg`` (particle Gibbs, PG-BART Algorithm 2) and ``smc`` (top-down
particle filter) against the exact posterior and prior of the tiny data sets of
``tests/exact`` (every valid tree enumerated), and their user contract.

* ``pg`` CART, exact-start invariance: trees drawn i.i.d. from pi(T | Y) (or the prior with the
  likelihood off), each loaded into a chain and moved by one conditional SMC update, must still
  be distributed as pi. Tolerance as in ``test_exact_posterior.py``: G-test p > 1e-4 (cells with
  expected count < 5 pooled) and TV below the i.i.d. sampling-noise TV plus 4.5 of its sd; both
  are tail bounds of order 1e-5 under a correct kernel. 5,000 draws per case keep the default
  run short (the slow version uses 20,000).
* ``pg`` CART long run from a stump: the tree labels against pi by the Rao-Scott corrected
  G-test (design effects from 40 batch means), p > 1e-4.
* ``smc``: one island of many particles; the weighted particle frequencies against pi (TV and a
  G-test on the effective counts), and the bias of the self-normalised estimate of E[n_leaves]
  shrinking as the particles grow.
* ``pg`` BART, likelihood off: the pooled per-tree distribution against the exact prior.
"""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from _chains import run_padded
from exact import harness as H
from exact.problems import exact, make_problem

import bartpy_suite as bps
from bartpy_suite._kernels.backfit import SIGMA_FIXED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.weighted import kish_ess
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers.particle import PgBartChain
from bartpy_suite.samplers.problems import BartProblem

try:
    from test_bart_exact import canonical_from_arrays, g_test, grid_problem, n_leaves, total_variation
    from test_bart_prior import BART_ALPHA, BART_BETA, exact_prior
except ImportError:  # tests/ imported as a package
    from tests.test_bart_exact import canonical_from_arrays, g_test, grid_problem, n_leaves, total_variation
    from tests.test_bart_prior import BART_ALPHA, BART_BETA, exact_prior

CASES = [
    ("grid", "mean_shift"),
    ("grid", "mean_variance_shift"),
    ("factor", "mean_shift"),
    ("classes", "classification"),
]


def seed_of(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def pg_exact_start(dataset, model, options, n_draws, likelihood=True):
    prob = make_problem(dataset, model)
    ex = exact(dataset, model)
    target = ex.post if likelihood else ex.prior
    seed = seed_of("pg", dataset, model, options, likelihood)
    stepper = H.Stepper(lambda _: H.make_sampler_chain(prob, "pg", options, seed, likelihood=likelihood), None, {})
    observed = H.exact_start_run(stepper, ex.trees, target, n_draws, 1, seed + 1)
    fit = H.fit_trees(observed, ex.index, target)
    print(f"\npg exact-start {dataset}/{model}/{options}/lik={likelihood}: {fit.line()}")
    assert fit.unknown == 0
    assert fit.p_value > 1e-4, fit.line()
    assert fit.tv < fit.tv_null_mean + 4.5 * fit.tv_null_sd, fit.line()


# Default run: each leaf model once, both particle counts and both schemes among them.
PG_DEFAULT = [
    ("grid", "mean_shift", {"particles": 10}),
    ("grid", "mean_variance_shift", {"particles": 2}),
    ("factor", "mean_shift", {"particles": 2}),
    ("factor", "mean_variance_shift", {"particles": 5, "resampling": "multinomial"}),
    ("classes", "classification", {"particles": 10}),
]


@pytest.mark.parametrize("dataset,model,options", PG_DEFAULT)
def test_pg_exact_start_invariance(dataset, model, options):
    pg_exact_start(dataset, model, options, 5_000)


@pytest.mark.parametrize("dataset", ["grid", "factor"])
def test_pg_prior_exact_start_invariance(dataset):
    pg_exact_start(dataset, None, {"particles": 10}, 5_000, likelihood=False)


@pytest.mark.slow
@pytest.mark.parametrize("resampling", ["systematic", "multinomial"])
@pytest.mark.parametrize("particles", [2, 10])
@pytest.mark.parametrize("dataset,model", CASES)
def test_pg_exact_start_invariance_long(dataset, model, particles, resampling):
    pg_exact_start(dataset, model, {"particles": particles, "resampling": resampling}, 20_000)


def pg_long_run(dataset, model, n_draws, likelihood=True):
    prob = make_problem(dataset, model)
    ex = exact(dataset, model)
    target = ex.post if likelihood else ex.prior
    chain = H.make_sampler_chain(prob, "pg", {"particles": 10}, seed_of("pg-long", dataset, model, likelihood),
                                 likelihood=likelihood)
    run = H.long_run(chain, n_draws + 100, 1)
    labels = np.array([ex.index[t] for t in run.trees[100:]])
    g, df, p, deff = H.rao_scott_g_test(labels, target)
    n_check, _ = H.tree_stats(run.trees[100:])
    tv = H.tv_distance(np.bincount(labels, minlength=len(target)), target)
    print(f"\npg long run {dataset}/{model}/lik={likelihood}: N={len(labels)} G={g:.1f} df={df} p={p:.3g} "
          f"(deff {deff:.2f}) TV={tv:.4f}")
    assert np.array_equal(n_check, run.n_leaves[100:])
    assert p > 1e-4


def test_pg_long_run_from_stump():
    pg_long_run("grid", "mean_shift", 3_000)


@pytest.mark.slow
def test_pg_prior_long_run_from_stump():
    pg_long_run("grid", None, 40_000, likelihood=False)


@pytest.mark.slow
@pytest.mark.parametrize("dataset,model", CASES)
def test_pg_long_run_from_stump_slow(dataset, model):
    pg_long_run(dataset, model, 40_000)


# -- smc --------------------------------------------------------------------------------------------
def smc_island(dataset, model, particles, seed, options=None):
    """One island: (canonical trees, normalised weights, n_leaves) of its particles."""
    prob = make_problem(dataset, model)
    chain = H.make_sampler_chain(prob, "smc", options or {}, seed)
    chain.allocate(particles)
    chain.run(0, 1, 0, 1)
    stats = chain.sampler_stats(particles)
    kept = chain.collect(particles)
    out = run_trees(kept.store, chain)
    return out, stats["weight"], kept.posterior["n_leaves"], stats


def run_trees(store, chain):
    from bartpy_suite._kernels.record import to_padded

    pad = to_padded(store.var, store.cut, store.value, store.tree_nodes)
    return [canonical_from_arrays(pad["split_var"][d, 0], pad["split_cut"][d, 0], pad["left"][d, 0],
                                  pad["right"][d, 0], chain.codes, chain.is_categorical)
            for d in range(store.tree_nodes.shape[0])]


SMC_SLOW = [
    ("grid", "mean_shift", "prior"),
    ("factor", "mean_variance_shift", "prior"),
    ("classes", "classification", "prior"),
]
# The optimal proposal on the factor data is checked in test_smc_proposal.py: there 500 particles
# per island are too few (the proposal is myopic: the root split leading to the posterior's second
# mode has proposal probability 0.001-0.004), so these criteria need 20,000 per island.
SMC_DEFAULT = [
    ("grid", "mean_shift", "optimal"),
    ("classes", "classification", "optimal"),
]


@pytest.mark.parametrize("dataset,model,proposal", SMC_DEFAULT)
def test_smc_weighted_particles_match_exact_posterior(dataset, model, proposal):
    check_smc(dataset, model, proposal)


@pytest.mark.slow
@pytest.mark.parametrize("dataset,model,proposal", SMC_SLOW)
def test_smc_prior_proposal_matches_exact_posterior(dataset, model, proposal):
    check_smc(dataset, model, proposal)


def test_smc_prior_proposal_short():
    """The prior proposal in the default run: as ``check_smc`` with 20 islands of 500
    particles on the classification data."""
    check_smc("classes", "classification", "prior", islands=20, particles=500)


def check_smc(dataset, model, proposal, islands=40, particles=None):
    """``islands`` islands (40) of 2,000 particles (500 with the optimal proposal). For the
    likelier trees (pi >= 0.01), the n_leaves classes and the pooled rest, the islands' weighted
    frequencies are independent estimates: their mean against pi by t statistics with the
    between-island standard error (Bonferroni family level 1e-4, t with islands - 1 df). TV of the pooled weighted frequencies must be below 0.15, a coarse bound
    (measured 0.032 grid, 0.091 factor, 0.032 classes): on the factor data the between-island
    variance implies only about 30 effective draws per island, about 1,000 in all, whose i.i.d.
    TV over these ~150 trees is itself about 0.08-0.1.

    The islands' evidence estimates Z_k = exp(log_evidence) are unbiased for p(Y | X) (an SMC
    property): the mean of Z_k / Z, Z from the enumeration, must be within 4 standard errors
    (between islands) of 1.

    Kish's ESS of the final weights (the ``island_ess`` statistic) ignores the copies made by
    resampling, so it is not used as a sample size here; the test prints the ESS implied by the
    between-island variance of the likeliest tree's frequency beside it."""
    from scipy import stats as st

    ex = exact(dataset, model)
    particles = particles or (2_000 if proposal == "prior" else 500)
    likely = np.flatnonzero(ex.post >= 0.01)
    sizes = np.unique(ex.n_leaves)
    rows, kish, pooled, log_z = [], [], np.zeros(len(ex.trees)), []
    for k in range(islands):
        trees, w, nl, stats = smc_island(dataset, model, particles, seed_of("smc", dataset, model, proposal, k),
                                         {"proposal": proposal})
        log_z.append(stats["log_evidence"][0])
        freq = np.zeros(len(ex.trees))
        for t, wi in zip(trees, w):
            freq[ex.index[t]] += wi
        assert stats["island_ess"][0] == pytest.approx(kish_ess(w), rel=1e-9)
        kish.append(kish_ess(w))
        pooled += freq / islands
        rows.append(np.concatenate([freq[likely], [1.0 - freq[likely].sum()],
                                    [np.sum(w * (nl == s)) for s in sizes]]))
    rows = np.array(rows)
    truth = np.concatenate([ex.post[likely], [1.0 - ex.post[likely].sum()],
                            [ex.post[ex.n_leaves == s].sum() for s in sizes]])
    # Floored at the i.i.d. standard error of a frequency over all particles, so a rare tree that
    # no island produced (all estimates 0: between-island sd 0) still gets a finite z.
    se = np.maximum(rows.std(axis=0, ddof=1) / np.sqrt(islands),
                    np.sqrt(truth * (1 - truth) / (islands * particles)) + 1e-12)
    z = (rows.mean(axis=0) - truth) / se
    threshold = st.t.ppf(1 - 1e-4 / (2 * len(truth)), islands - 1)
    tv = H.tv_distance(pooled, ex.post)
    top = int(np.argmax(ex.post[likely]))
    implied = truth[top] * (1 - truth[top]) / max(rows[:, top].var(ddof=1), 1e-300)
    exact_log_z = float(np.logaddexp.reduce(np.asarray(ex.log_prior) + np.asarray(ex.log_lik)))
    ratio = np.exp(np.array(log_z) - exact_log_z)
    z_evidence = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(islands))
    print(f"\nsmc {dataset}/{model}/{proposal}: {islands} islands x {particles}: max|z|={np.max(np.abs(z)):.2f} "
          f"(threshold {threshold:.2f}, {len(truth)} statistics), pooled TV={tv:.4f}; Kish ESS per island "
          f"{np.mean(kish):.0f}, ESS implied by the likeliest tree's variance {implied:.0f}; "
          f"mean Z_k/Z = {ratio.mean():.4f} (z = {z_evidence:.2f})")
    assert np.max(np.abs(z)) < threshold
    assert tv < 0.15
    assert abs(z_evidence) < 4


@pytest.mark.slow
def test_smc_bias_shrinks_with_particles():
    """Self-normalised estimate of E[n_leaves | Y] on the grid (mean-shift model), averaged over
    islands: with 10 particles per island the bias is several standard errors from zero; with
    1,000 it is within 4 standard errors of zero and at most a quarter of the 10-particle bias.
    SMC estimates are consistent as N grows with a bias of order 1/N, so the 100-fold increase
    should shrink it far more than 4-fold."""
    ex = exact("grid", "mean_shift")
    exact_mean = float(np.sum(ex.n_leaves * ex.post))
    out = {}
    for particles, islands in ((10, 2_000), (1_000, 60)):
        est = []
        for k in range(islands):
            _, w, nl, _ = smc_island("grid", "mean_shift", particles, seed_of("bias", particles, k))
            est.append(float(np.sum(w * nl)))
        est = np.array(est)
        bias = est.mean() - exact_mean
        se = est.std(ddof=1) / np.sqrt(islands)
        out[particles] = (bias, se)
        print(f"\nsmc N={particles}: E[n_leaves] bias {bias:+.4f} (se {se:.4f}) exact {exact_mean:.4f}")
    small, large = out[10], out[1_000]
    assert abs(small[0]) > 4 * small[1]
    assert abs(large[0]) < 4 * large[1]
    assert abs(large[0]) < 0.25 * abs(small[0])


# -- pg BART -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("draws", [1_000, pytest.param(4_000, marks=pytest.mark.slow)])
def test_pg_bart_prior_only_trees_match_exact_prior(draws):
    """BART (5 trees, likelihood off, alpha=0.95, beta=2) with pg on the tiny factor grid:
    each tree's canonical distribution, pooled over trees and thinned sweeps, against the exact
    prior. G-test p > 1e-4 on trees and leaf counts; TV below an i.i.d. sampler's mean TV at the
    same size plus 4.5 of its sd (100 simulated i.i.d. samples)."""
    binned, y = grid_problem(True)
    probs = exact_prior(binned, BART_ALPHA, BART_BETA, 2)
    hyper = kernel_prior(TreePrior(BART_ALPHA, BART_BETA, 2), None, likelihood=False, tau2=0.1,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    n_trees, thin = 5, 2
    problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, np.asarray(y, dtype=float), hyper,
                          n_trees, SIGMA_FIXED)
    chain = PgBartChain(problem, 5, "systematic", np.random.default_rng(43))
    out = run_padded(chain, draws, 0, 100 + draws * thin, 100, thin)
    sampled = Counter()
    for d in range(draws):
        for j in range(n_trees):
            sampled[canonical_from_arrays(out["split_var"][d, j], out["split_cut"][d, j], out["left"][d, j],
                                          out["right"][d, j], binned.codes, binned.is_categorical)] += 1
    g, p, dof = g_test(sampled, probs)
    tv = total_variation(sampled, probs)
    pv = np.array(list(probs.values()))
    rng = np.random.default_rng(0)
    total = draws * n_trees
    iid = [0.5 * np.abs(rng.multinomial(total, pv) / total - pv).sum() for _ in range(100)]
    iid_tv, iid_sd = np.mean(iid), np.std(iid, ddof=1)
    exact_leaves = Counter()
    for key, pr in probs.items():
        exact_leaves[n_leaves(key)] += pr
    g2, p2, dof2 = g_test(Counter(out["n_leaves"].ravel().tolist()), dict(exact_leaves))
    print(f"\npg BART prior: trees G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {iid_tv:.4f}); "
          f"leaf counts G={g2:.1f} dof={dof2} p={p2:.3g}")
    assert p > 1e-4
    assert tv < iid_tv + 4.5 * iid_sd
    assert p2 > 1e-4


# -- user contract ----------------------------------------------------------------------------------
def small_data(n=60, seed=4):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.uniform(size=n), "g": rng.choice(list("abc"), size=n)})
    df["y"] = 2.0 * (df.x1 > 0.5) + (df.g == "a") + 0.3 * rng.normal(size=n)
    return df


def test_pg_and_smc_through_the_api():
    df = small_data()
    one = bps.cart("y ~ .", data=df, sampler="pg", chains=2, draws=50, tune=20, seed=3, progress=False,
                   sampler_options={"particles": 4})
    assert set(one.sample_stats.data_vars) >= {"ess", "kept_reference", "stages", "weight"}
    assert ((one.sample_stats["ess"] >= 1) & (one.sample_stats["ess"] <= 4 + 1e-9)).all()
    assert np.allclose(one.weights, 1.0 / 100)
    again = bps.cart("y ~ .", data=df, sampler="pg", chains=2, draws=50, tune=20, seed=3, progress=False,
                     sampler_options={"particles": 4}, threads=1)
    assert np.array_equal(one.posterior["sigma"].values, again.posterior["sigma"].values)
    smc = bps.cart("y ~ .", data=df, sampler="smc", chains=3, draws=200, seed=3, progress=False)
    w = smc.sample_stats["weight"].values
    assert np.allclose(w.sum(axis=1), 1.0)
    table = smc.summary()
    expected = sum(kish_ess(w[c]) for c in range(3))
    assert table.loc["n_leaves", "ess_bulk"] == pytest.approx(expected)
    assert np.isfinite(table.loc["n_leaves", "r_hat"])
    assert smc.predict(df.head(5)).shape == (5, 3)
    ens = bps.bart("y ~ .", data=df, sampler="pg", trees=5, chains=1, draws=20, tune=10, seed=3, progress=False,
                   sampler_options={"particles": 3, "resampling": "multinomial"})
    assert ens.sample_stats["stages"].shape == (1, 20)


@pytest.mark.parametrize("options,match", [
    ({"particles": 1}, "'particles' must be an integer >= 2"),
    ({"particles": 2.5}, "'particles' must be an integer >= 2"),
    ({"resampling": "stratified"}, "'resampling' must be one of 'systematic', 'multinomial'"),
    ({"ancestor_sampling": "yes"}, "'ancestor_sampling' must be True or False"),
    ({"ancestor": True}, "sampler 'pg' has no option 'ancestor'"),
])
def test_pg_bad_options(options, match):
    with pytest.raises(ArgumentError, match=match):
        bps.cart("y ~ .", data=small_data(), sampler="pg", sampler_options=options)


def test_smc_bad_options():
    with pytest.raises(ArgumentError, match="'proposal' must be one of 'prior', 'optimal'"):
        bps.cart("y ~ .", data=small_data(), sampler="smc", sampler_options={"proposal": "posterior"})
    with pytest.raises(ArgumentError, match="'ess_threshold' must be a number in \\[0, 1\\]"):
        bps.cart("y ~ .", data=small_data(), sampler="smc", sampler_options={"ess_threshold": 2})
    with pytest.raises(ArgumentError, match="'smc'"):
        bps.bart("y ~ .", data=small_data(), sampler="smc")


@pytest.mark.slow
def test_pg_bart_geweke(monkeypatch):
    """Geweke joint-distribution test of a pg BART sweep (5 particles), with the functions,
    simulators and tolerance of ``test_geweke_bart.py`` (|z_k| < 4 for each of 8 functions,
    Bonferroni level about 5e-4): its successive-conditional simulator is run with the chain
    builder replaced by ``PgBartChain`` (20,000 MC draws, 50,000 SC sweeps after 2,000 burn-in)."""
    try:
        import test_geweke_bart as G
    except ImportError:  # tests/ imported as a package
        from tests import test_geweke_bart as G

    def pg_chain(codes, is_cat, nbins, y, hyper, moves, rng, n_trees, sigma_mode, offset=0.0):
        return PgBartChain(BartProblem(codes, is_cat, nbins, np.asarray(y, dtype=float), hyper, n_trees, sigma_mode,
                                       offset), 5, "systematic", rng)

    monkeypatch.setattr(G, "bart_chain", pg_chain)
    binned = G.problem()
    mc = G.marginal_conditional(binned, 20_000, np.random.default_rng(1))
    sc = G.successive_conditional(binned, "cgm", 50_000, 2_000, np.random.default_rng(2))
    G.assert_joint_agrees(mc, sc, G.NAMES, "pg")


def test_cli_fits_with_particle_samplers(tmp_path, capsys):
    """``--sampler pg`` / ``--sampler smc`` with ``--sampler-option`` reach the registry."""
    from bartpy_suite.cli import main

    path = tmp_path / "d.csv"
    small_data().to_csv(path, index=False)
    assert main(["fit", "y ~ .", str(path), "--sampler", "smc", "--draws", "100", "--chains", "2",
                 "--sampler-option", 'proposal="optimal"']) == 0
    assert "n_leaves" in capsys.readouterr().out
    assert main(["fit", "y ~ .", str(path), "--model", "bart", "--trees", "3", "--sampler", "pg", "--draws", "10",
                 "--tune", "5", "--chains", "1", "--sampler-option", "particles=3"]) == 0
    assert "sigma" in capsys.readouterr().out
