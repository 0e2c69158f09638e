"""``bps.soft_tree`` with the RJHMC-Tree samplers ``hmc_df`` and ``hmc_dfi``: the topology prior
with the likelihood off, the user contract (summary, predictions, variable activity, save/load,
seeds, bad input), classification and the command line. Data are simulated here."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bartpy_suite as bps
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning, DataError
from bartpy_suite.models.soft_tree import warn_if_bandwidth_below_grid
from bartpy_suite.posterior import soft

FAST = {"warmup": 25}


def smooth_steps(n, seed):
    """Continuous x0, x1 on (0, 10) and a two-split step function with noise sd 0.3: no grid, so
    small bandwidths do not make the posterior flat between data points (spec 5, pitfall 2)."""
    rng = np.random.default_rng(seed)
    x0, x1 = 10 * rng.random(n), 10 * rng.random(n)
    f = np.where(x1 <= 4, np.where(x0 <= 5, 1.0, 5.0), 8.0)
    return pd.DataFrame({"x0": x0, "x1": x1, "y": f + 0.3 * rng.standard_normal(n)}), f


@pytest.fixture(scope="module")
def reg():
    df, f = smooth_steps(60, 1)
    fit = bps.soft_tree("y ~ x0 + x1", data=df, sampler="hmc_dfi", chains=2, draws=30, tune=30, seed=3,
                        h_init=0.1, h_final=0.05, sampler_options=FAST, progress=False)
    return df, f, fit


def prior_leaf_pmf(alpha, beta, max_leaves, depth=40):
    """P(number of leaves = k), k = 0..max_leaves, under p_split(d) = alpha (1 + d)^-beta (no depth limit)."""
    dist = np.zeros(max_leaves + 1)
    dist[1] = 1.0
    for d in range(depth, -1, -1):
        ps = alpha * (1 + d) ** -beta
        both = np.convolve(dist, dist)[: max_leaves + 1]
        dist = ps * both
        dist[1] += 1 - ps
    return dist


@pytest.mark.parametrize("sampler,draws", [("hmc_dfi", 300), pytest.param("hmc_df", 600, marks=pytest.mark.slow)])
def test_prior_only_leaf_counts_follow_topology_prior(sampler, draws):
    # Likelihood off, quirks off: the ratios of spec 2.3 make the leaf count's stationary law the
    # topology prior exactly. 4 chains x `draws` draws, every 4th iteration of grow/prune-only moves.
    # G-test on 1, 2, 3, 4, >= 5 leaves: p > 0.001.
    rng = np.random.default_rng(0)
    x = rng.random((30, 3))
    fit = bps.SoftTree(sampler=sampler, chains=4, draws=draws, thin=4, tune=100, seed=12, alpha=0.6, beta=1.0,
                       likelihood=False, progress=False,
                       sampler_options={"warmup": 10, "moves": {"grow": 0.5, "prune": 0.5, "stay": 0.0}}
                       ).fit(x, rng.normal(size=30))
    leaves = fit.posterior["n_leaves"].values.reshape(-1)
    pmf = prior_leaf_pmf(0.6, 1.0, 4)
    expected = np.append(pmf[1:5], 1 - pmf[1:5].sum()) * leaves.size
    observed = np.array([(leaves == k).sum() for k in range(1, 5)] + [(leaves >= 5).sum()])
    g, p = stats.power_divergence(observed, expected, lambda_="log-likelihood")
    assert p > 0.001, (observed, expected.round(1))


def test_regression_contract(reg):
    df, f, fit = reg
    summary = fit.summary()
    assert {"sigma", "n_leaves", "depth"} <= set(summary.index)
    assert np.isfinite(summary.loc["sigma", "mean"])
    pred = fit.predict(df, level=0.9)
    assert list(pred.columns) == ["mean", "lower", "upper"]
    assert (pred["lower"] <= pred["mean"]).all() and (pred["mean"] <= pred["upper"]).all()
    # A step function with noise sd 0.3: the posterior-averaged soft tree (eq. 3) must explain most
    # of the variance (a sampler stuck at the stump explains none).
    r2 = 1 - np.mean((pred["mean"] - df["y"]) ** 2) / np.var(df["y"])
    assert r2 > 0.6
    predictive = fit.predict(df, kind="predictive", level=0.9)
    assert ((predictive["upper"] - predictive["lower"]) >= (pred["upper"] - pred["lower"]) - 1e-12).all()
    act = fit.variable_activity()
    assert list(act.index) == ["x0", "x1"]
    assert 0.99 <= act["mean"].sum() <= 1.0 + 1e-9 or fit.posterior["n_leaves"].values.min() == 1
    acc = fit.acceptance()
    assert set(acc.index) <= {"grow", "prune", "stay"} and len(acc) >= 2
    assert {"step_size", "tree_depth", "diverging", "n_leapfrog"} <= set(fit.sample_stats.data_vars)
    with pytest.raises(ArgumentError, match="categorical response"):
        fit.predict(df, kind="prob")


def test_paper_metric_and_arrays(reg):
    df, f, fit = reg
    per_draw = soft.paper_metric(fit, df)
    assert per_draw.shape == (fit.posterior.sizes["chain"] * fit.posterior.sizes["draw"], len(df))
    draws = fit.predict(df, samples=True)
    assert draws.dims == ("chain", "draw", "obs")


def numpy_soft_tree(var, tau, delta, value, x, h, dfi):
    """(soft mean sum_k phi_k mu_k, leaf value of the most probable leaf) of one preorder tree, by
    plain recursion: psi = expit((x[var] - tau) / h) (DF) or expit((x . delta - tau) / h) (DFI) is
    P(go right) (spec 1.1)."""
    mean = np.zeros(x.shape[0])
    best = np.full(x.shape[0], -1.0)
    hard = np.zeros(x.shape[0])

    def walk(j, reach):
        if var[j] < 0:
            nonlocal mean
            mean = mean + reach * value[j]
            better = reach > best
            best[better] = reach[better]
            hard[better] = value[j]
            return j + 1
        z = x @ delta[j] if dfi else x[:, var[j]]
        right = 1.0 / (1.0 + np.exp(-(z - tau[j]) / h))
        after_left = walk(j + 1, reach * (1.0 - right))
        return walk(after_left, reach * right)

    walk(0, np.ones(x.shape[0]))
    return mean, hard


def test_predictions_are_the_stored_trees_at_h_final(reg):
    # fit.predict (eq. 3) and the paper's argmax metric must be the stored soft trees routed at
    # h_final on the training scaling, computed here without the kernels. The fixture has
    # h_init = 0.1 and h_final = 0.05, so routing at the wrong bandwidth or on unscaled x fails.
    # Tolerance 1e-9: the same arithmetic in another order.
    df, _, fit = reg
    new = df.head(25)
    trees, group = fit.idata["trees"], fit.idata["soft_trees"]
    var, value = trees["node_var"].values, trees["node_value"].values
    tau, delta = group["node_tau"].values, group["node_delta"].values
    counts = trees["tree_nodes"].values.reshape(-1)
    x = (new[["x0", "x1"]].to_numpy() - np.array(fit.config["x_min"])) / np.array(fit.config["x_range"])
    assert fit.config["h_final"] == 0.05
    means, hards = [], []
    start = 0
    for c in counts:
        sl = slice(start, start + c)
        m, hd = numpy_soft_tree(var[sl], tau[sl], delta[sl], value[sl], x, 0.05, dfi=True)
        means.append(m)
        hards.append(hd)
        start += c
    draws = fit.predict(new, samples=True).values.reshape(len(counts), -1)
    np.testing.assert_allclose(draws, np.array(means), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fit.predict(new)["mean"], np.mean(means, axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(soft.paper_metric(fit, new), np.array(hards), rtol=1e-9, atol=1e-9)


def test_save_load_same_predictions(reg, tmp_path):
    df, _, fit = reg
    path = tmp_path / "soft.nc"
    fit.to_netcdf(path)
    back = bps.load(path)
    pd.testing.assert_frame_equal(back.predict(df.head(7), level=0.8), fit.predict(df.head(7), level=0.8))
    pd.testing.assert_frame_equal(back.variable_activity(), fit.variable_activity())


def test_same_seed_same_draws_and_data_untouched():
    df, _ = smooth_steps(30, 2)
    before = df.copy()
    kw = dict(sampler="hmc_df", chains=2, draws=5, tune=5, seed=9, sampler_options={"warmup": 20}, progress=False)
    a = bps.soft_tree("y ~ .", data=df, threads=1, **kw)
    b = bps.soft_tree("y ~ .", data=df, threads=2, **kw)
    pd.testing.assert_frame_equal(df, before)
    np.testing.assert_array_equal(a.posterior["sigma"].values, b.posterior["sigma"].values)
    np.testing.assert_array_equal(a.idata["soft_trees"]["node_tau"].values, b.idata["soft_trees"]["node_tau"].values)


def test_bad_inputs():
    df, _ = smooth_steps(30, 4)
    with pytest.raises(ArgumentError, match="h_init"):
        bps.soft_tree("y ~ .", data=df, h_init=-1.0)
    with pytest.raises(ArgumentError, match="hmc_df"):
        bps.soft_tree("y ~ .", data=df, sampler="cgm")
    with pytest.raises(ArgumentError, match="did you mean 'warmup'|Did you mean 'warmup'"):
        bps.soft_tree("y ~ .", data=df, sampler_options={"warmpu": 10})
    with pytest.raises(ArgumentError, match="adaptation"):
        bps.soft_tree("y ~ .", data=df, sampler_options={"adaptation": "sometimes"})
    with pytest.raises(ArgumentError, match="'grow'"):
        bps.soft_tree("y ~ .", data=df, sampler_options={"moves": {"grow": 0, "prune": 0, "stay": 1}})
    factor = df.assign(g=np.where(df["x0"] > 5, "a", "b"))
    with pytest.raises(DataError, match=r"'C\(g\)' is a factor"):
        bps.soft_tree("y ~ x0 + C(g)", data=factor, progress=False)
    fit = bps.soft_tree("y ~ .", data=df, chains=1, draws=2, tune=1, seed=1, sampler_options={"warmup": 5},
                        progress=False)
    with pytest.raises(DataError, match="missing values.*na_action='pass'"):
        fit.predict(np.array([[1.0, np.nan]]))
    with pytest.raises(DataError, match="columns"):
        fit.predict(np.ones((2, 3)))


def test_classification_three_classes():
    # Three classes separated by x0 < 1/3, 1/3..2/3, > 2/3 with 10% label noise: the soft tree
    # must classify the training rows far better than chance (0.33); it reaches about 0.85.
    rng = np.random.default_rng(6)
    n = 60
    x = rng.random((n, 2))
    code = np.digitize(x[:, 0], [1 / 3, 2 / 3])
    flip = rng.random(n) < 0.1
    code[flip] = rng.integers(0, 3, flip.sum())
    df = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "label": np.array(["lo", "mid", "hi"])[code]})
    fit = bps.soft_tree("label ~ a + b", data=df, sampler="hmc_df", chains=2, draws=25, tune=25, seed=2,
                        h_init=0.1, h_final=0.05, alpha=0.9, sampler_options=FAST, progress=False)
    prob = fit.predict(df, kind="prob")
    cols = [c for c in prob.columns if c.startswith("prob_") and not c.endswith(("_lower", "_upper"))]
    assert sorted(cols) == ["prob_hi", "prob_lo", "prob_mid"]
    np.testing.assert_allclose(prob[cols].sum(axis=1), 1.0, atol=1e-9)
    assert (prob["class"] == df["label"]).mean() > 0.6
    assert "sigma" not in fit.summary().index
    labels = soft.paper_metric(fit, df)
    assert labels.min() >= 0 and labels.max() <= 2


def test_cli_fits_soft_tree(tmp_path):
    df, _ = smooth_steps(30, 5)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(["fit", "y ~ .", str(csv), "--model", "soft_tree", "--chains", "1", "--draws", "3", "--tune",
                       "2", "--seed", "1", "--no-progress", "--sampler-option", "warmup=5", "--out",
                       str(tmp_path / "f.nc")])
    assert status == 0
    assert "n_leaves" in out.getvalue()
    assert bps.load(tmp_path / "f.nc").config["model_type"] == "soft_tree"


def test_formula_fit_runs_and_refuses_na_action_split():
    """from_formula passes na_action to fit (since na_action='split'): soft trees take 'drop'
    (the formula default) and refuse 'split', whose missing-value rule soft splits lack."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"x": rng.uniform(size=40)})
    data["y"] = (data["x"] > 0.5) + 0.1 * rng.normal(size=40)
    fit = bps.soft_tree("y ~ x", data=data, chains=1, draws=2, tune=2, seed=1, progress=False,
                        check_mixing=False, sampler_options={"warmup": 3})
    assert fit.posterior.sizes["draw"] == 2
    with pytest.raises(ArgumentError, match="na_action='split' is not supported by soft trees"):
        bps.soft_tree("y ~ x", data=data, chains=1, draws=2, tune=2, seed=1, progress=False, na_action="split")


@pytest.mark.parametrize("sampler", ["hmc_dfi", "hmc_df"])
def test_code_quirks_survive_a_prune_drawn_for_a_stump(sampler):
    """With ``code_quirks`` a prune drawn while the tree is a stump is made a grow (spec 2.1), and
    grows are warm-started by node as always. The code's positional warm start, which is meant for
    a prune, used to run for it too and read past the stump's one leaf: a segmentation fault
    within the first iterations of this fit."""
    df, _ = smooth_steps(30, 5)
    options = {"warmup": 5, "code_quirks": True, "moves_tune": {"grow": 0.1, "prune": 0.8, "stay": 0.1}}
    fit = bps.soft_tree("y ~ .", data=df, sampler=sampler, chains=1, draws=10, tune=10, seed=2,
                        sampler_options=options, progress=False)
    assert np.isfinite(fit.sample_stats["log_posterior"].values).all()
    assert (fit.posterior["n_leaves"].values >= 1).all()


def test_prior_only_parameters_with_single_run_stays():
    # Likelihood off, the default moves (.2/.2/.6 after tune): a stay after tune runs NUTS once and
    # keeps x' (the cheap mode). The root is never pruned, so its threshold must follow its prior
    # U(0, 1), and sigma its InverseGamma(1.5, 1.5), and the leaf count the topology prior. 2 chains
    # x 300 kept draws, every 3rd draw: KS and G tests, each p > 0.001.
    rng = np.random.default_rng(1)
    x = rng.random((30, 3))
    fit = bps.SoftTree(sampler="hmc_dfi", chains=2, draws=300, tune=20, seed=5, alpha=0.6, beta=1.0,
                       likelihood=False, progress=False, check_mixing=False).fit(x, rng.normal(size=30))
    stays = fit.sample_stats["move"].values == 2
    assert stays.mean() > 0.4 and np.all(fit.sample_stats["accepted"].values[stays] == 1)
    counts = fit.idata["trees"]["tree_nodes"].values.reshape(-1)
    roots = np.concatenate([[0], np.cumsum(counts)[:-1]])
    tau = fit.idata["soft_trees"]["node_tau"].values[roots]
    root_split = ~np.isnan(tau)  # a stump's root has no threshold
    tau = tau.reshape(2, -1)[:, ::3].reshape(-1)
    tau = tau[~np.isnan(tau)]
    assert root_split.mean() > 0.3 and tau.size > 50
    sigma = fit.posterior["sigma"].values[:, ::3].reshape(-1)
    checks = [stats.kstest(tau, "uniform").pvalue, stats.kstest(sigma, stats.invgamma(1.5, scale=1.5).cdf).pvalue]
    leaves = fit.posterior["n_leaves"].values[:, ::3].reshape(-1)
    pmf = prior_leaf_pmf(0.6, 1.0, 3)
    expected = np.append(pmf[1:4], 1 - pmf[1:4].sum()) * leaves.size
    observed = np.array([(leaves == k).sum() for k in range(1, 4)] + [(leaves >= 4).sum()])
    checks.append(stats.power_divergence(observed, expected, lambda_="log-likelihood")[1])
    assert min(checks) > 0.001, checks


def test_fit_path_is_the_chain_run_by_hand():
    # The CGM diagnosis compared a Fit (bps.soft_tree) with a chain driven iteration by iteration
    # (benchmarks/rjhmc_cgm_trace.py). Both must be the same chain: same generator (chain 0 of the
    # seed), same problem; the Fit's last draw must be the hand-run chain's current tree, and its
    # prediction the soft mean of that tree at h_final. Exact up to 1e-12 (same arithmetic).
    from bartpy_suite._kernels import soft_tree as kst
    from bartpy_suite.models._base import spawn_generators
    from bartpy_suite.samplers.hmc import OPTIONS, SoftTreeChain
    from bartpy_suite.samplers.problems import SoftTreeProblem

    cgm = bps.datasets.load("cgm_rjhmc")
    train = cgm[cgm["split"] == "train"].head(80)
    x, y = train[["x0", "x1"]].to_numpy(float), train["y"].to_numpy(float)
    tune, draws, seed = 6, 4, 7
    fit = bps.SoftTree(sampler="hmc_dfi", chains=1, tune=tune, draws=draws, seed=seed, h_init=0.01, h_final=0.001,
                       alpha=0.45, beta=2.5, standardize=False, progress=False, check_mixing=False).fit(x, y)
    low, width = x.min(0), x.max(0) - x.min(0)
    xs = (x - low) / width
    conf = np.zeros(kst.N_CONF)
    conf[[kst.C_LIK, kst.C_MU_SCALE, kst.C_SIG_A, kst.C_SIG_B, kst.C_CLASS_ALPHA, kst.C_CLASS_CONST]] = \
        1, 1, 1.5, 1.5, 1, 1
    problem = SoftTreeProblem(xs, y, np.zeros(len(y), dtype=np.int64), 0, conf, 0.45, 2.5, 0.01, 0.001)
    chain = SoftTreeChain(problem, {o.name: o.default for o in OPTIONS}, spawn_generators(seed, 1)[0],
                          kst.MODE_DFI)
    chain.allocate(draws)
    for it in range(tune + draws):
        chain.run(it, 1, tune, 1)
    s = chain.cur
    n = int(s.nn[0])
    counts = fit.idata["trees"]["tree_nodes"].values.reshape(-1)
    last = slice(int(counts[:-1].sum()), int(counts.sum()))
    tau = fit.idata["soft_trees"]["node_tau"].values[last]
    assert counts[-1] == n
    np.testing.assert_allclose(tau[s.right[:n] >= 0], s.tau[:n][s.right[:n] >= 0], rtol=0, atol=1e-12)
    assert fit.posterior["sigma"].values[0, -1] == pytest.approx(s.scal[0], abs=1e-12)
    work = kst.new_work(len(y), chain.cap, 2, 0, 0.001)
    leaves = s.right[:n] < 0
    phi = np.empty((len(y), int(leaves.sum())))
    kst.leaf_probabilities(xs, s, 0.001, kst.MODE_DFI, work, phi)
    draws_f = soft.samples(fit, soft.scaled_x(fit, None)[0])
    np.testing.assert_allclose(draws_f[-1], phi @ s.mu[:n][leaves], rtol=0, atol=1e-9)
    assert int(fit.sample_stats["accepted_total"].values[0, -1]) == chain.n_accepted


def test_small_bandwidth_on_gridded_predictors_warns():
    # The CGM predictors take the values 1..10 (0.111 apart once scaled): at h_init = 0.001 hmc_df
    # trapped on them (rjhmc_tables.md), so the fit must say so, naming both predictors and a
    # larger h_init; at h_init = 0.01 (gap / h = 11 < 20) it must not.
    cgm = bps.datasets.load("cgm_rjhmc")
    train = cgm[cgm["split"] == "train"].drop(columns="split").iloc[:60]
    kw = dict(sampler="hmc_df", chains=1, tune=2, draws=2, seed=1, h_final=0.001, sampler_options=FAST,
              progress=False, check_mixing=False)
    with pytest.warns(BartpySuiteWarning, match=r"h_init=0.001 .*'x0' \(0.111\), 'x1' \(0.111\).*h_init=0.011"):
        bps.soft_tree("y ~ x0 + x1", data=train, h_init=0.001, **kw)
    bps.soft_tree("y ~ x0 + x1", data=train, h_init=0.01, **kw)  # BartpySuiteWarning is an error in tests


def test_small_bandwidth_warning_ignores_continuous_predictors_and_outliers():
    # Continuous values have tiny median gaps; one outlying value opens one wide gap but does not
    # move the median, so neither warns even at h_init = 0.001.
    rng = np.random.default_rng(3)
    x = np.r_[rng.random(199) * 0.1, 1.0]  # 199 values in [0, 0.1], one at 1
    warn_if_bandwidth_below_grid(np.c_[x, rng.random(200)], ["a", "b"], 0.001)
    with pytest.warns(BartpySuiteWarning, match="'g'"):
        warn_if_bandwidth_below_grid(np.c_[x, rng.integers(0, 5, 200) / 4.0], ["a", "g"], 0.001)
