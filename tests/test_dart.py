"""DART, ``sparse=True`` (Linero 2018; ``_kernels/sparse.py``): the uniform rule prior's draws are
unchanged, the Dirichlet weights and their concentration sample their prior when the likelihood
is off, the user contract (posterior variables, ``variable_inclusion``, save and load, the file
check) and bad input."""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import special

import bartpy_suite as bps
from bartpy_suite._kernels.sparse import N_GRID
from bartpy_suite.errors import ArgumentError, FitFileError
from bartpy_suite.posterior import file_check
from bartpy_suite.posterior.weighted import weighted_ess, weighted_quantiles

# --- the uniform rule prior is untouched ----------------------------------------------------------

#: Hashes of the trees and sigma of four short fits (``_hash_fit``), computed with the package at
#: ac35070, before DART: the default (uniform) rule prior must give the same draws bit for bit.
UNIFORM_HASHES = {
    "bart_grow_prune": "74d5db3b62ab2da7",
    "bart_cgm": "e42e554e095dec4d",
    "cart_cgm": "b76565d5ea215e29",
    "cart_pg": "4ae4dc947495aa32",
}


def _hash_fit(fit) -> str:
    h = hashlib.sha256()
    trees = fit.idata["trees"].dataset
    for name in ("node_var", "node_cut", "node_value", "tree_nodes"):
        if name in trees:
            h.update(np.ascontiguousarray(trees[name].values).tobytes())
    if "sigma" in fit.posterior.dataset:
        h.update(np.ascontiguousarray(fit.posterior["sigma"].values).tobytes())
    return h.hexdigest()[:16]


def _hash_data():
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(60, 4))
    x[:, 3] = rng.integers(0, 3, 60)
    y = np.sin(3 * x[:, 0]) + x[:, 1] + 0.3 * rng.standard_normal(60)
    return x, y, np.array([False, False, False, True])


HASH_KW = dict(chains=1, draws=20, tune=20, seed=3, progress=False, check_mixing=False, log_likelihood=False)


@pytest.mark.parametrize("key", [
    "bart_grow_prune",
    "cart_cgm",
    pytest.param("bart_cgm", marks=pytest.mark.slow),
    pytest.param("cart_pg", marks=pytest.mark.slow),
])
def test_uniform_rule_prior_draws_are_unchanged(key):
    x, y, cat = _hash_data()
    model, sampler = key.split("_", 1)
    if model == "bart":
        fit = bps.BART(trees=10, sampler=sampler, **HASH_KW).fit(x, y, is_categorical=cat)
    else:
        fit = bps.BayesianCART(sampler=sampler, **HASH_KW).fit(x, y, is_categorical=cat)
    assert "split_probs" not in fit.posterior.dataset
    assert _hash_fit(fit) == UNIFORM_HASHES[key]


# --- prior only -----------------------------------------------------------------------------------

def _discretised_prior(p: int, a: float, b: float, rho: float):
    """The grid of the theta update (``_kernels/sparse.py``) and the Beta(a, b) prior of lambda
    discretised on it: the exact stationary law of lambda with the likelihood off."""
    lam = (np.arange(N_GRID) + 0.5) / N_GRID
    logw = (a - 1) * np.log(lam) + (b - 1) * np.log1p(-lam)
    w = np.exp(logw - logw.max())
    return lam, w / w.sum(), rho * lam / (1 - lam)


def _within(values: np.ndarray, expected: float, what: str) -> None:
    """The chains' mean within 4.5 Monte Carlo standard errors (sd / sqrt(bulk ESS)) of the
    exact value: a false alarm has probability below 1e-5 for a normal error, and a shift of a
    few standard errors, the size of a wrong weight, still shows."""
    ess = weighted_ess(values, np.ones_like(values))
    se = values.std() / math.sqrt(ess)
    z = (values.mean() - expected) / se
    print(f"{what}: mean {values.mean():.4f} vs {expected:.4f}, ESS {ess:.0f}, z {z:.2f}")
    assert abs(z) < 4.5, f"{what}: {values.mean()} vs {expected} (z = {z:.2f})"


@pytest.mark.parametrize("model", ["bart", "cart"])
def test_prior_only_weights_follow_the_dirichlet_beta_prior(model):
    """With the likelihood off the chain's (s, theta) must follow the hierarchical prior. Three
    continuous predictors with distinct values and min_leaf_size 5: every internal node has at
    least 10 rows, so every variable is available at every split and Linero's conditional of s is
    exact. Checked: lambda = theta / (theta + rho) against the discretised Beta(0.5, 1) prior,
    E[s_0] = 1/3 and E[s_0^2] = E[(theta/p + 1) / (p (theta + 1))] under it."""
    p, a, b = 3, 0.5, 1.0
    rng = np.random.default_rng(11)
    x = rng.uniform(size=(30, p))
    y = rng.standard_normal(30)
    kw = dict(chains=4, draws=5000, tune=200, seed=7, likelihood=False, progress=False, check_mixing=False,
              log_likelihood=False, sparse=True, sampler="grow_prune")
    if model == "bart":
        fit = bps.BART(trees=2, **kw).fit(x, y)
    else:
        fit = bps.BayesianCART(**kw).fit(x, y)
    s = fit.posterior["split_probs"].values
    theta = fit.posterior["sparse_alpha"].values
    assert s.shape == (4, 5000, p) and theta.shape == (4, 5000)
    lam_grid, w, theta_grid = _discretised_prior(p, a, b, rho=float(p))
    # every recorded theta is a grid point
    lam = theta / (theta + p)
    assert np.allclose(np.round(lam * N_GRID - 0.5), lam * N_GRID - 0.5, atol=1e-6)
    _within(lam, float(w @ lam_grid), f"{model} E[lambda]")
    _within(s[..., 0], 1 / p, f"{model} E[s_0]")
    second = (theta_grid / p + 1) / (p * (theta_grid + 1))
    _within(s[..., 0] ** 2, float(w @ second), f"{model} E[s_0^2]")


def test_theta_grid_draw_matches_its_density():
    """The griddy Gibbs step alone, for a fixed s: its draws of lambda against the normalised
    grid density (chi-square over 10 bins of equal probability, p > 1e-4)."""
    from scipy import stats

    from bartpy_suite._kernels import jit
    from bartpy_suite._kernels.sparse import draw_theta

    log_s = np.log(np.array([0.7, 0.2, 0.05, 0.03, 0.02]))
    p, a, b, rho = 5, 0.5, 1.0, 5.0
    lam = (np.arange(N_GRID) + 0.5) / N_GRID
    th = rho * lam / (1 - lam)
    logw = (special.gammaln(th) - p * special.gammaln(th / p) + th / p * log_s.sum() + (a - 1) * np.log(lam)
            + (b - 1) * np.log1p(-lam))
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert isinstance(draw_theta, jit.HelperDispatcher)
    rng = np.random.default_rng(3)
    draws = np.array([draw_theta(rng, log_s, a, b, rho) for _ in range(4000)])
    g = np.round(draws / (draws + rho) * N_GRID - 0.5).astype(int)
    edges = np.searchsorted(np.cumsum(w), np.linspace(0, 1, 11)[1:-1])
    observed = np.bincount(np.searchsorted(edges, g, side="right"), minlength=10)
    expected = np.diff(np.concatenate([[0], np.cumsum(w)[edges], [1]])) * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-4


# --- the user contract ----------------------------------------------------------------------------

def _frame(n=120):
    rng = np.random.default_rng(2)
    df = pd.DataFrame(rng.uniform(size=(n, 3)), columns=["a", "b", "c"])
    df["f"] = pd.Categorical(np.array(["u", "v", "w"])[rng.integers(0, 3, n)])
    df["y"] = 4 * df["a"] + (df["f"] == "u") + 0.3 * rng.standard_normal(n)
    return df


KW = dict(chains=2, draws=30, tune=30, seed=1, progress=False, check_mixing=False)


@pytest.fixture(scope="module")
def sparse_fit():
    return bps.bart("y ~ a + b + c + f", data=_frame(), trees=10, sparse=True, **KW)


def test_sparse_fit_records_weights_per_predictor(sparse_fit):
    fit = sparse_fit
    s = fit.posterior["split_probs"]
    assert s.dims == ("chain", "draw", "predictor")
    assert list(s["predictor"].values) == ["a", "b", "c", "f"]  # the factor is one predictor
    assert np.allclose(s.values.sum(axis=2), 1.0, atol=1e-12)
    assert (fit.posterior["sparse_alpha"].values > 0).all()
    assert fit.config["sparse"] == {"a": 0.5, "b": 1.0, "rho": 4.0}


def test_variable_inclusion(sparse_fit):
    fit = sparse_fit
    table = fit.variable_inclusion(level=0.9)
    assert list(table.columns) == ["inclusion", "split_prob", "lower", "upper"]
    assert list(table.index) == ["a", "b", "c", "f"]
    used = (fit.posterior["variable_activity"].values > 0).reshape(-1, 4).mean(axis=0)
    assert np.allclose(table["inclusion"].values, used)
    s = fit.posterior["split_probs"].values.reshape(-1, 4)
    assert np.allclose(table["split_prob"].values, s.mean(axis=0))
    q = weighted_quantiles(s, np.ones(len(s)), [0.05, 0.95])  # the package's (weighted) quantile rule
    assert np.allclose(table["lower"].values, q[0]) and np.allclose(table["upper"].values, q[1])
    assert (table["lower"] <= table["split_prob"]).all() and (table["split_prob"] <= table["upper"]).all()
    # a is the strongest signal
    assert table["inclusion"]["a"] == pytest.approx(1.0)


def test_variable_inclusion_without_dart():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bps.bart("y ~ a + b", data=_frame(), trees=5, **KW)
    table = fit.variable_inclusion()
    assert list(table.columns) == ["inclusion"]
    with pytest.raises(ArgumentError, match="level"):
        fit.variable_inclusion(level=1.5)


def test_sparse_cart_cgm_runs_and_saves(tmp_path):
    fit = bps.cart("y ~ a + b + c + f", data=_frame(), sampler="cgm", sparse=True, sparse_a=1.0, sparse_rho=2.0,
                   **KW)
    assert fit.config["sparse"] == {"a": 1.0, "b": 1.0, "rho": 2.0}
    assert np.allclose(fit.posterior["split_probs"].values.sum(axis=2), 1.0)
    path = tmp_path / "cart.nc"
    fit.to_netcdf(path)
    back = bps.load(path)
    assert np.array_equal(back.posterior["split_probs"].values, fit.posterior["split_probs"].values)


def test_save_load_and_file_check(sparse_fit, tmp_path):
    path = tmp_path / "dart.nc"
    sparse_fit.to_netcdf(path)
    back = bps.load(path)
    for name in ("split_probs", "sparse_alpha"):
        assert np.array_equal(back.posterior[name].values, sparse_fit.posterior[name].values)
    pd.testing.assert_frame_equal(back.variable_inclusion(), sparse_fit.variable_inclusion())

    def refused(name, change, pattern):
        tree = back.idata.copy(deep=True)
        ds = tree["posterior"].to_dataset()
        ds[name] = (ds[name].dims, change(ds[name].values.copy()))
        tree["posterior"] = ds
        with pytest.raises(FitFileError, match=pattern):
            file_check.check_fit(tree, "edited.nc")

    def outside(v):
        v[0, 1, 0] = 1.5
        return v

    def nan(v):
        v[1, 0, 2] = np.nan
        return v

    def unnormalised(v):
        return v * 0.9

    def negative_alpha(v):
        v[0, 3] = -1.0
        return v

    refused("split_probs", outside, r"posterior/split_probs.*draw 1 .*not finite and in \[0, 1\]")
    refused("split_probs", nan, r"posterior/split_probs.*not finite")
    refused("split_probs", unnormalised, r"posterior/split_probs.*does not sum to 1")
    refused("sparse_alpha", negative_alpha, r"posterior/sparse_alpha.*not finite and > 0")


def test_the_file_check_reads_the_dart_settings(sparse_fit):
    """config["sparse"] (a, b, rho) describes the fit's prior (variable_inclusion's columns exist
    for DART fits only): a, b and rho finite and > 0, and the DART variables present with it and
    absent without it. Before, any JSON value passed."""
    import json

    from bartpy_suite.posterior.fit import CONFIG_ATTR

    def edited(change, drop=()):
        tree = sparse_fit.idata.copy(deep=True)
        config = json.loads(tree["constant_data"].attrs[CONFIG_ATTR])
        change(config)
        tree["constant_data"].attrs[CONFIG_ATTR] = json.dumps(config)
        if drop:
            tree["posterior"] = tree["posterior"].to_dataset().drop_vars(list(drop))
        return tree

    file_check.check_fit(edited(lambda c: None), "same.nc")
    for bad in ({"a": 0.5, "b": 1.0, "rho": 0}, {"a": -1, "b": 1.0, "rho": 3.0}, {"a": 0.5, "b": "x", "rho": 3.0},
                {"a": 0.5, "b": 1.0}, 5, [0.5, 1.0, 3.0], {"a": 0.5, "b": 1.0, "rho": True}):
        with pytest.raises(FitFileError, match=r"bartpy_suite_config.*sparse"):
            file_check.check_fit(edited(lambda c, bad=bad: c.update(sparse=bad)), "edited.nc")
    with pytest.raises(FitFileError, match="posterior/split_probs: variable missing"):
        file_check.check_fit(edited(lambda c: None, drop=("split_probs",)), "edited.nc")
    with pytest.raises(FitFileError, match="posterior/split_probs: present without config"):
        file_check.check_fit(edited(lambda c: c.pop("sparse")), "edited.nc")


# --- bad input ------------------------------------------------------------------------------------

def test_command_line_sparse(tmp_path):
    from test_cli import run

    csv, out = tmp_path / "d.csv", tmp_path / "fit.nc"
    _frame().to_csv(csv, index=False)
    base = ["fit", "y ~ a + b + c + f", str(csv), "--chains", "2", "--draws", "30", "--tune", "30", "--seed", "1",
            "--no-check-mixing", "--no-progress"]
    status, _, err = run([*base, "--model", "bart", "--trees", "10", "--sparse", "--out", str(out)])
    assert status == 0, err
    fit = bps.load(out)
    assert fit.config["sparse"]["rho"] == 4.0 and fit.posterior["split_probs"].sizes["predictor"] == 4
    # the soft tree has no DART: the error names the models that do
    status, _, err = run([*base, "--model", "soft_tree", "--sparse"])
    assert status != 0 and "--sparse applies to --model" in err and "bart" in err and "cart" in err


def test_sparse_with_one_predictor_is_an_error():
    with pytest.raises(ArgumentError, match=r"sparse=True \(DART\).*has one \('a'\)"):
        bps.bart("y ~ a", data=_frame(), trees=5, sparse=True, **KW)


def test_sparse_with_an_unsupported_sampler_names_those_that_work():
    for model in (bps.bart, bps.cart):
        with pytest.raises(ArgumentError, match="sampler 'pg'.*'grow_prune', 'cgm'"):
            model("y ~ a + b", data=_frame(), sampler="pg", sparse=True, **KW)


def test_sparse_bad_settings():
    with pytest.raises(ArgumentError, match="sparse_a"):
        bps.BART(sparse=True, sparse_a=0)
    with pytest.raises(ArgumentError, match="sparse_b"):
        bps.BART(sparse=True, sparse_b=-1.0)
    with pytest.raises(ArgumentError, match="sparse_rho"):
        bps.BayesianCART(sampler="cgm", sparse=True, sparse_rho=float("inf"))
    with pytest.raises(ArgumentError, match="sparse"):
        bps.BART(sparse="yes")


def test_sparse_rho_that_would_under_or_overflow_theta_is_refused():
    """theta = rho lambda / (1 - lambda) reaches 1999 rho on the lambda grid and the Dirichlet draw
    divides by theta / p: before the bounds, sparse_rho=1e305 recorded NaN split probabilities and
    an infinite sparse_alpha for every draw (a fit that saved but failed its own file check), and
    1e-306 with p = 2 underflows every Gamma variate of an empty forest to log 0 (NaN weights)."""
    for rho in (1e305, 1e-306):
        with pytest.raises(ArgumentError, match=r"sparse_rho=.*p = 2 predictors"):
            bps.bart("y ~ a + b", data=_frame(), trees=3, sparse=True, sparse_rho=rho, **KW)
    edge = bps.bart("y ~ a + b", data=_frame(), trees=3, sparse=True, sparse_rho=1e300, **KW)
    assert np.isfinite(edge.posterior["split_probs"].values).all()
    assert np.isfinite(edge.posterior["sparse_alpha"].values).all()


def test_sparse_survival_is_an_error_of_the_package():
    """The DART guide says survival BART does not take sparse=True; bps.bart passed the keyword on
    to SurvivalBART, whose constructor raised a bare TypeError."""
    df = _frame().assign(t=lambda d: 1.0 + (np.arange(len(d)) % 5), d=lambda d: np.arange(len(d)) % 2)
    for keywords in ({"sparse": True}, {"sparse_rho": 2.0}):
        with pytest.raises(ArgumentError, match=r"sparse=True \(DART\) is not available for survival BART"):
            bps.bart("Surv(t, d) ~ a + b", data=df, trees=3, **keywords, **KW)


def test_sparse_multinomial_is_an_error():
    df = _frame()
    df["k"] = pd.Categorical(np.array(["p", "q", "r"])[np.arange(len(df)) % 3])
    with pytest.raises(ArgumentError, match="multinomial"):
        bps.bart("k ~ a + b", data=df, trees=3, sparse=True, **KW)


def test_inputs_are_not_modified():
    df = _frame()
    before = df.copy()
    bps.bart("y ~ a + b + c", data=df, trees=3, sparse=True, **KW)
    pd.testing.assert_frame_equal(df, before)


# --- exact posterior of the split variables on a tiny CART problem ---------------------------------

#: Eight rows, three numeric predictors with distinct values, min_leaf_size 2: every internal node
#: has at least 4 rows, so every variable has an available rule there and Linero's conditional of
#: s is exact (458 trees).
EXACT_X = np.array([[0, 5, 2], [1, 2, 6], [2, 7, 0], [3, 0, 4], [4, 6, 7], [5, 1, 3], [6, 4, 1], [7, 3, 5]], float)
EXACT_Y = np.array([0.1, -0.3, 1.9, 2.2, 0.2, 2.4, 1.8, 0.1])


def _split_counts(tree, p: int) -> np.ndarray:
    counts = np.zeros(p, dtype=int)
    stack = [tree]
    while stack:
        t = stack.pop()
        if t is not None:
            counts[t[0]] += 1
            stack += [t[2], t[3]]
    return counts


def dart_exact(ex, p: int, a: float, b: float, rho: float) -> np.ndarray:
    """Posterior of the enumerated trees under DART: the uniform rule prior's p_RULE factors
    (1/p per split, every variable being available) are replaced by the Dirichlet-multinomial
    marginal of the split variables, Gamma(theta) / Gamma(theta + B) prod_j Gamma(theta/p + c_j) /
    Gamma(theta/p), averaged over theta under the discretised Beta prior of the chain's grid."""
    _, w, theta = _discretised_prior(p, a, b, rho)
    log_post = np.empty(len(ex.trees))
    for i, tree in enumerate(ex.trees):
        c = _split_counts(tree, p)
        n_splits = c.sum()
        log_dm = (special.gammaln(theta) - special.gammaln(theta + n_splits)
                  + (special.gammaln(theta[:, None] / p + c) - special.gammaln(theta[:, None] / p)).sum(axis=1))
        log_post[i] = (ex.log_prior[i] + n_splits * math.log(p) + special.logsumexp(log_dm, b=w)
                       + ex.log_lik[i])
    post = np.exp(log_post - log_post.max())
    return post / post.sum()


@pytest.mark.slow  # about 2 CPU minutes each (44,000 Python calls into the chain)
@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
def test_exact_tree_posterior_under_dart(sampler):
    """A DART CART chain's tree frequencies against the enumerated DART posterior (G-test with
    the Rao-Scott correction for autocorrelation, ``exact.harness``, p > 1e-4, the level of the
    package's exact-posterior tests), and against the posterior under the uniform rule prior,
    which it must reject (p < 1e-4): the test tells the two priors apart."""
    from exact import harness as H
    from exact.enumerate import Problem, exact_posterior
    from exact.problems import calibrated_lambda

    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite.priors import NormalLeafPrior, TreePrior, kernel_prior
    from bartpy_suite.samplers.mh import CGM_MOVES, GROW_PRUNE_MOVES, CartChain

    p, a, b = 3, 0.5, 1.0
    prob = Problem(EXACT_X, np.zeros(p, bool), np.zeros(p, int), 2, 0.95, 1.0, "mean_shift", y=EXACT_Y,
                   mu_bar=float(EXACT_Y.mean()), lam=calibrated_lambda(EXACT_Y))
    ex = exact_posterior(prob)
    target = dart_exact(ex, p, a, b, float(p))
    bp = BinnedPredictors.fit(prob.X, prob.is_cat, prob.n_levels, None)
    h = kernel_prior(TreePrior(prob.alpha, prob.beta, prob.m),
                     NormalLeafPrior(prob.a, prob.mu_bar, prob.nu, prob.lam), likelihood=True)
    moves = CGM_MOVES if sampler == "cgm" else GROW_PRUNE_MOVES
    # Independent chains, concatenated: under DART a chain can stay for long on trees of one
    # variable (s concentrates on it, and that keeps it), so one long chain's batch means
    # understate the autocorrelation; batches that span separate chains do not.
    n_chains, burn, n_draws, thin = 16, 250, 2500, 4
    labels = []
    for k in range(n_chains):
        chain = CartChain(bp.codes, bp.is_categorical, bp.nbins, EXACT_Y, np.zeros(8, dtype=np.int64), h, moves,
                          np.random.default_rng([2018, k]), sparse=(a, b, float(p)))
        chain.allocate(1)
        for d in range(burn + n_draws):
            chain.run(d * thin + 1, thin, 0, thin)  # tune 0: s and theta are updated at every iteration
            if d >= burn:
                labels.append(ex.index[chain.get_tree()])
    labels = np.array(labels)
    _, _, p_dart, deff = H.rao_scott_g_test(labels, target, n_batches=2 * n_chains)
    _, _, p_uniform, _ = H.rao_scott_g_test(labels, ex.post, n_batches=2 * n_chains)
    tv = H.tv_distance(np.bincount(labels, minlength=len(target)), target)
    print(f"\n{sampler}: G-test p {p_dart:.3g} (deff {deff:.2f}), TV {tv:.4f}; against the uniform-prior posterior "
          f"p {p_uniform:.3g} (TV between the two exact posteriors "
          f"{0.5 * np.abs(target - ex.post).sum():.3f})")
    assert p_dart > 1e-4
    assert p_uniform < 1e-4
