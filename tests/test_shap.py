"""Posterior SHAP (``_kernels/shap.py``, ``posterior/shap.py``, ``Fit.shap``/``shap_summary``/``importance``).

The exactness checks compare the kernel with a brute-force Shapley computation written here in
plain Python: the path-dependent value function (Lundberg et al. 2020, Algorithm 1: follow the
row at a rule on a predictor in the coalition, otherwise average the children by their training
covers, one half each under a node no training row reaches), the covers counted by walking every
training row down the tree, and the Shapley formula summed over all 2^p coalitions (p <= 5). Both
are double precision with sums of at most a few hundred terms of size <= the leaf values, so they
agree to 1e-9 (absolute, leaf values of order 1-10) unless the algorithm is wrong; a wrong weight,
a missing UNWIND of a repeated predictor or a wrong cover gives differences of order 0.01-1.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from kernel_conventions import nrt_balance, record_helper_calls

import bartpy_suite as bps
from bartpy_suite._kernels.record import right_children, tree_roots
from bartpy_suite._kernels.shap import forest_shap
from bartpy_suite.errors import ArgumentError, DataError

QUIET = {"progress": False, "check_mixing": False, "log_likelihood": False}
TOL = 1e-9


# -- the reference: brute force over coalitions -----------------------------------------------------

def goes_left(code: int, cut: int, cat: bool) -> bool:
    """``_kernels/tree.goes_left`` restated: factor level mask, or cut index (low 32 bits) with the
    missing code in the high bits when missing values go left."""
    code, cut = int(code), int(cut)
    if cat:
        return (cut >> code) & 1 == 1
    return code <= (cut & 0xFFFFFFFF) or code == (cut >> 32)


def children(var: np.ndarray) -> np.ndarray:
    """Right child (local index) of each internal node of a preorder tree; -1 at leaves."""
    right = np.full(var.size, -1)
    stack = []
    for i in range(var.size):
        if i > 0 and var[i - 1] < 0 and stack:
            right[stack.pop()] = i
        if var[i] >= 0:
            stack.append(i)
    return right


def covers(var, cut, is_cat, train) -> np.ndarray:
    """Training rows (columns of ``train`` (p, n)) reaching each node, by walking each row."""
    right = children(var)
    out = np.zeros(var.size)
    for i in range(train.shape[1]):
        k = 0
        out[k] += 1
        while var[k] >= 0:
            k = k + 1 if goes_left(train[var[k], i], cut[k], is_cat[var[k]]) else right[k]
            out[k] += 1
    return out


def value_function(var, cut, value, cover, is_cat, x, coalition) -> float:
    """Path-dependent E[f | x_S] of one tree (Algorithm 1)."""
    right = children(var)

    def walk(k):
        if var[k] < 0:
            return value[k]
        left, r = k + 1, right[k]
        if var[k] in coalition:
            return walk(left if goes_left(x[var[k]], cut[k], is_cat[var[k]]) else r)
        wl, wr = (cover[left] / cover[k], cover[r] / cover[k]) if cover[k] > 0 else (0.5, 0.5)
        return wl * walk(left) + wr * walk(r)

    return walk(0)



def shapley_values(game, p: int) -> np.ndarray:
    """Shapley values of the p players of ``game`` (a function of a set of players), summed over
    all coalitions with the classic weights |S|! (p - |S| - 1)! / p!."""
    phi = np.zeros(p)
    for i in range(p):
        others = [j for j in range(p) if j != i]
        for size in range(p):
            weight = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for s in itertools.combinations(others, size):
                phi[i] += weight * (game(set(s) | {i}) - game(set(s)))
    return phi

def brute_force(trees, is_cat, train, x) -> tuple[np.ndarray, float]:
    """Shapley values over all coalitions of the sum of ``trees`` [(var, cut, value)] at row x."""
    p = len(is_cat)
    tree_covers = [covers(v, c, is_cat, train) for v, c, _ in trees]

    def game(s):
        return sum(value_function(v, c, val, cov, is_cat, x, s) for (v, c, val), cov in zip(trees, tree_covers))

    phi = shapley_values(game, p)
    return phi, game(set())


# -- random trees against the brute force ------------------------------------------------------------

def random_tree(rng, p, nbins, is_cat, depth=0, max_depth=4):
    """(var, cut, value) lists of a random preorder tree; few predictors, so paths repeat them."""
    if depth >= max_depth or (depth > 0 and rng.uniform() < 0.3):
        return [-1], [0], [float(rng.normal(0, 3))]
    v = int(rng.integers(p))
    if is_cat[v]:
        cut = int(rng.integers(1, 2 ** nbins[v] - 1))
    else:
        cut = int(rng.integers(nbins[v] - 1))
        if rng.uniform() < 0.3:  # missing values (code nbins) go left
            cut |= int(nbins[v]) << 32
    lv, lc, lval = random_tree(rng, p, nbins, is_cat, depth + 1, max_depth)
    rv, rc, rval = random_tree(rng, p, nbins, is_cat, depth + 1, max_depth)
    return [v] + lv + rv, [cut] + lc + rc, [0.0] + lval + rval


def kernel_shap(trees, is_cat, train, rows):
    """``forest_shap`` of one sample holding ``trees``: (phi (m, p), base)."""
    var = np.concatenate([np.asarray(t[0], dtype=np.int32) for t in trees])
    cut = np.concatenate([np.asarray(t[1], dtype=np.int64) for t in trees])
    value = np.concatenate([np.asarray(t[2], dtype=np.float64) for t in trees])
    counts = np.array([[len(t[0]) for t in trees]], dtype=np.int64)
    phi = np.empty((1, rows.shape[0], len(is_cat)))
    base = np.empty(1)
    forest_shap(np.ascontiguousarray(rows, dtype=np.int32), np.ascontiguousarray(train, dtype=np.int32),
                np.asarray(is_cat, dtype=np.bool_), var, cut, right_children(var, counts), value,
                tree_roots(counts), phi, base, threads=1)
    return phi[0], base[0]


def test_random_trees_match_brute_force_shapley_values():
    """80 random forests of 1-3 trees of depth <= 4 over p = 4 predictors (one a factor, with
    missing codes): repeated predictors on a path, empty nodes (20 training rows over up to 16
    leaves leave some nodes without any), factors and the missing bit."""
    rng = np.random.default_rng(20261126)
    p = 4
    is_cat = np.array([False, False, True, False])
    nbins = np.array([5, 3, 4, 6])
    checked_empty = 0
    for _ in range(80):
        trees = [tuple(np.asarray(a) for a in random_tree(rng, p, nbins, is_cat))
                 for _ in range(int(rng.integers(1, 4)))]
        train = np.stack([rng.integers(0, nbins[v] + 1, size=20) for v in range(p)])  # nbins: missing
        rows = np.stack([rng.integers(0, nbins[v] + 1, size=6) for v in range(p)], axis=1)
        phi, base = kernel_shap(trees, is_cat, train, rows)
        checked_empty += any((covers(v, c, is_cat, train) == 0).any() for v, c, _ in trees)
        for i in range(rows.shape[0]):
            ref, ref_base = brute_force(trees, is_cat, train, rows[i])
            np.testing.assert_allclose(phi[i], ref, rtol=0, atol=TOL)
            assert base == pytest.approx(ref_base, abs=TOL)
            # local accuracy: the values and the base add up to the forest at the row
            f = sum(value_function(v, c, val, None, is_cat, rows[i], set(range(p))) for v, c, val in trees)
            assert base + phi[i].sum() == pytest.approx(f, abs=TOL)
    assert checked_empty > 5  # the convention for empty nodes was exercised


# -- fitted models ------------------------------------------------------------------------------------

def _frame(n=120, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(size=n), "b": rng.uniform(size=n), "c": rng.uniform(size=n)})
    df["g"] = pd.Categorical(rng.choice(list("PQR"), n))
    df["y"] = 2.0 * (df["a"] > 0.5) + 1.5 * df["b"] * (df["g"] == "P") + 0.2 * rng.standard_normal(n)
    return df


def stored_trees(fit, sample, trees=slice(None), value_key="node_value", column=None):
    """[(var, cut, value)] of one flat sample's trees, from the fit's tree store."""
    t = fit.tree_store
    out = []
    for root, count in zip(t["roots"][sample][trees], t["counts"][sample][trees]):
        nodes = slice(int(root), int(root + count))
        val = t[value_key][nodes] if column is None else t[value_key][nodes, column]
        out.append((t["node_var"][nodes], t["node_cut"][nodes], val))
    return out


def check_against_brute_force(fit, ds, new, draws=(0, 3), rows=(0, 1, 2), **kw):
    codes = fit.prepare(new)[0]
    is_cat = fit.binned.is_categorical
    train = fit.binned.codes
    n_draws = fit.posterior.sizes["draw"]
    for chain in range(fit.posterior.sizes["chain"]):
        for d in draws:
            trees = stored_trees(fit, chain * n_draws + d, **kw)
            for i in rows:
                ref, ref_base = brute_force(trees, is_cat, train, codes[:, i])
                yield chain, d, i, ref, ref_base


@pytest.fixture(scope="module")
def bart_fit():
    return bps.bart("y ~ .", data=_frame(), trees=8, chains=2, draws=20, tune=30, seed=1, **QUIET)


def test_bart_values_match_brute_force_and_add_up_to_f(bart_fit):
    new = _frame(n=10, seed=9).drop(columns="y")
    ds = bart_fit.shap(new)
    assert ds["shap"].dims == ("chain", "draw", "row", "predictor")
    assert list(ds["predictor"].values) == ["a", "b", "c", "g"]  # the factor is one predictor
    assert ds.attrs["scale"] == "response"
    for chain, d, i, ref, ref_base in check_against_brute_force(bart_fit, ds, new):
        np.testing.assert_allclose(ds["shap"].values[chain, d, i], ref, rtol=0, atol=TOL)
        assert ds["base"].values[chain, d] == pytest.approx(ref_base, abs=TOL)
    f = bart_fit.function_samples(new).reshape(2, 20, 10)
    total = ds["base"].values[:, :, None] + ds["shap"].values.sum(axis=-1)
    np.testing.assert_allclose(total, f, rtol=0, atol=1e-12)  # sums of ~40 terms of size <= 3
    # base: each draw's f averaged over the training rows (covers are training counts)
    np.testing.assert_allclose(ds["base"].values.reshape(-1), bart_fit.function_samples().mean(axis=1),
                               rtol=0, atol=1e-12)


def test_max_draws_keeps_evenly_spaced_draws_with_the_same_values(bart_fit):
    new = _frame(n=4, seed=2).drop(columns="y")
    full = bart_fit.shap(new, threads=2)
    thin = bart_fit.shap(new, max_draws=5, threads=1)
    assert list(thin["draw"].values) == [0, 5, 10, 14, 19]
    np.testing.assert_array_equal(thin["shap"].values, full["shap"].sel(draw=thin["draw"]).values)
    with pytest.raises(ArgumentError, match="max_draws"):
        bart_fit.shap(new, max_draws=0)


def test_summary_and_importance(bart_fit):
    new = _frame(n=6, seed=5).drop(columns="y")
    ds = bart_fit.shap(new)
    summary = bart_fit.shap_summary(new, level=0.8)
    rows = summary.rows.set_index(["row", "predictor"])
    assert len(rows) == 6 * 4
    values = ds["shap"].values.reshape(40, 6, 4)
    np.testing.assert_allclose(rows.loc[(2, "b"), "mean"], values[:, 2, 1].mean(), rtol=1e-12)
    np.testing.assert_allclose(rows.loc[(2, "b"), "upper"], np.quantile(values[:, 2, 1], 0.9), rtol=1e-12)
    imp = summary.importance
    per_draw = np.abs(values).mean(axis=1)
    np.testing.assert_allclose(imp.loc["a", "mean"], per_draw[:, 0].mean(), rtol=1e-12)
    np.testing.assert_allclose(imp.loc["a", "lower"], np.quantile(per_draw[:, 0], 0.1), rtol=1e-12)
    assert list(imp["rank"]) == [1, 2, 3, 4]
    assert imp["mean"].is_monotonic_decreasing
    # y = 2 (a > 0.5) + 1.5 b (g == P) + noise: a moves f by +-1 for every row, far more than the
    # others (c is noise), in every draw
    assert imp.index[0] == "a" and imp.loc["a", "p_top"] == pytest.approx(1.0)
    assert imp.loc["c", "mean"] < 0.25 * imp.loc["a", "mean"]
    np.testing.assert_allclose(imp["share"].sum(), 1.0)
    pd.testing.assert_frame_equal(bart_fit.importance(new, level=0.8), imp)


def test_summary_chunks_rows_without_changing_the_answer(bart_fit, monkeypatch):
    from bartpy_suite.posterior import shap as S

    new = _frame(n=7, seed=6).drop(columns="y")
    whole = bart_fit.shap_summary(new)
    monkeypatch.setattr(S, "CHUNK_BYTES", 40 * 4 * 8 * 2)  # two rows per block
    chunked = bart_fit.shap_summary(new)
    pd.testing.assert_frame_equal(whole.rows, chunked.rows)
    pd.testing.assert_frame_equal(whole.importance, chunked.importance, rtol=1e-12)


def test_cart_regression_deep_tree_matches_brute_force():
    """A single deep tree (a step function in a: a repeated on every path) with a factor."""
    rng = np.random.default_rng(7)
    n = 200
    df = pd.DataFrame({"a": rng.uniform(size=n), "b": rng.uniform(size=n)})
    df["g"] = pd.Categorical(rng.choice(list("PQRS"), n))
    df["y"] = np.floor(6 * df["a"]) + 2 * (df["g"].isin(["P", "Q"])) * df["b"] + 0.1 * rng.standard_normal(n)
    fit = bps.cart("y ~ .", data=df, chains=1, draws=10, tune=300, seed=2, **QUIET)
    assert fit.posterior["n_leaves"].values.min() >= 5
    new = df.head(5)
    ds = fit.shap(new)
    for chain, d, i, ref, ref_base in check_against_brute_force(fit, ds, new, draws=(0, 9), rows=range(5)):
        np.testing.assert_allclose(ds["shap"].values[chain, d, i], ref, rtol=0, atol=TOL)
        assert ds["base"].values[chain, d] == pytest.approx(ref_base, abs=TOL)
    f = fit.function_samples(new).reshape(1, 10, 5)
    np.testing.assert_allclose(ds["base"].values[:, :, None] + ds["shap"].values.sum(-1), f, rtol=0, atol=1e-12)


def test_missing_split_rows_follow_the_stored_bit():
    df = _frame(n=150, seed=4)
    df.loc[df.index[::7], "a"] = np.nan
    fit = bps.bart("y ~ .", data=df, trees=6, chains=1, draws=10, tune=30, seed=3, na_action="split", **QUIET)
    new = _frame(n=5, seed=8).drop(columns="y")
    new.loc[new.index[:3], "a"] = np.nan
    ds = fit.shap(new)
    for chain, d, i, ref, _ in check_against_brute_force(fit, ds, new, draws=(0, 9), rows=range(5)):
        np.testing.assert_allclose(ds["shap"].values[chain, d, i], ref, rtol=0, atol=TOL)
    f = fit.function_samples(new).reshape(1, 10, 5)
    np.testing.assert_allclose(ds["base"].values[:, :, None] + ds["shap"].values.sum(-1), f, rtol=0, atol=1e-12)


def test_probit_bart_explains_the_latent_scale():
    df = _frame(n=120, seed=5)
    df["y"] = pd.Categorical(np.where(df["y"] > 1.5, "hi", "lo"))
    fit = bps.bart("y ~ .", data=df, trees=5, chains=1, draws=10, tune=20, seed=4, **QUIET)
    new = df.head(4)
    ds = fit.shap(new)
    assert ds.attrs["scale"] == "probit latent" and "class" not in ds.dims
    latent = fit.sum_of_trees(fit.prepare(new)[0]).reshape(1, 10, 4)
    np.testing.assert_allclose(ds["base"].values[:, :, None] + ds["shap"].values.sum(-1), latent, rtol=0, atol=1e-12)
    prob = fit.predict(new, kind="prob", samples=True)
    from scipy.special import ndtr

    np.testing.assert_allclose(ndtr(latent), prob.values[..., 1], rtol=1e-12)


def test_multinomial_bart_values_per_class_on_the_log_scale():
    df = _frame(n=120, seed=6)
    df["y"] = pd.Categorical(np.array(["x", "y", "z"])[np.digitize(df["y"], [0.8, 2.0])])
    fit = bps.bart("y ~ .", data=df, trees=4, chains=1, draws=6, tune=20, seed=5, **QUIET)
    new = df.head(3)
    ds = fit.shap(new)
    assert ds["shap"].dims == ("chain", "draw", "row", "predictor", "class")
    assert ds.attrs["scale"] == "log-linear" and list(ds["class"].values) == ["x", "y", "z"]
    codes = fit.prepare(new)[0]
    for k in range(3):
        f_k = fit.sum_of_trees(codes, slice(4 * k, 4 * (k + 1))).reshape(1, 6, 3)
        total = ds["base"].values[..., k][:, :, None] + ds["shap"].values[..., k].sum(-1)
        np.testing.assert_allclose(total, f_k, rtol=0, atol=1e-12)
        for chain, d, i, ref, _ in check_against_brute_force(fit, ds, new, draws=(5,), rows=(0,),
                                                             trees=slice(4 * k, 4 * (k + 1))):
            np.testing.assert_allclose(ds["shap"].values[chain, d, i, :, k], ref, rtol=0, atol=TOL)
    imp = fit.importance(new)
    assert set(imp.index.get_level_values("class")) == {"x", "y", "z", "all"}


def test_classification_cart_values_per_class_on_the_probability_scale():
    df = _frame(n=150, seed=7)
    df["y"] = pd.Categorical(np.array(["u", "v", "w"])[np.digitize(df["y"], [0.8, 2.0])])
    fit = bps.cart("y ~ .", data=df, chains=1, draws=5, tune=100, seed=6, **QUIET)
    new = df.head(4)
    ds = fit.shap(new)
    assert ds.attrs["scale"] == "probability"
    prob = fit.predict(new, kind="prob", samples=True).values.reshape(1, 5, 4, 3)
    total = ds["base"].values[:, :, None, :] + ds["shap"].values.sum(axis=3)
    np.testing.assert_allclose(total, prob, rtol=0, atol=1e-12)
    for chain, d, i, ref, _ in check_against_brute_force(fit, ds, new, draws=(4,), rows=(0, 3),
                                                         value_key="node_prob", column=1):
        np.testing.assert_allclose(ds["shap"].values[chain, d, i, :, 1], ref, rtol=0, atol=TOL)
    # probabilities sum to one in every leaf, so the values of the classes sum to zero per predictor
    np.testing.assert_allclose(ds["shap"].values.sum(axis=-1), 0.0, atol=1e-12)


def test_weighted_draws_weight_the_summary():
    df = _frame(n=80, seed=8)
    fit = bps.cart("y ~ .", data=df, sampler="ctmc", chains=1, draws=30, tune=30, seed=7, **QUIET)
    w = fit.weights.values.reshape(-1)
    assert np.ptp(w) > 0
    ds = fit.shap(df.head(3))
    imp = fit.importance(df.head(3))
    per_draw = np.abs(ds["shap"].values.reshape(30, 3, 4)).mean(axis=1)
    np.testing.assert_allclose(imp.loc[fit.predictors, "mean"].to_numpy(), w @ per_draw / w.sum(), rtol=1e-12)


def test_bad_arguments_and_memory_guard(bart_fit, monkeypatch):
    from bartpy_suite.posterior import shap as S

    with pytest.raises(ArgumentError, match="threads"):
        bart_fit.shap(threads=0)
    with pytest.raises(ArgumentError, match="level"):
        bart_fit.shap_summary(level=1.5)
    with pytest.raises(DataError, match="no rows"):
        bart_fit.importance(_frame(n=3).drop(columns="y").iloc[:0])
    monkeypatch.setattr(S, "MAX_BYTES", 1000)
    with pytest.raises(ArgumentError, match="max_draws"):
        bart_fit.shap()


def test_input_is_not_modified(bart_fit):
    new = _frame(n=5, seed=10).drop(columns="y")
    before = new.copy()
    bart_fit.shap(new)
    bart_fit.shap_summary(new)
    pd.testing.assert_frame_equal(new, before)


def soft_brute_force(var, tau, value, h, train, x):
    """Shapley values of one soft tree's path game with soft covers (``_kernels/shap.py``): a gate on a
    predictor in the coalition is expit(+-(x_v - tau) / h), any other is cover(child) / cover(node)."""
    right = children(var)
    p = train.shape[1]

    def gates(row):
        g = np.ones(var.size)
        for k in range(var.size):
            if var[k] >= 0:
                a = (row[var[k]] - tau[k]) / h
                g[k + 1], g[right[k]] = 1 / (1 + np.exp(a)), 1 / (1 + np.exp(-a))
        return g

    parent = np.full(var.size, -1)
    for k in range(var.size):
        if var[k] >= 0:
            parent[k + 1] = parent[right[k]] = k
    cover = np.zeros(var.size)
    for row in train:
        g = gates(row)
        reach = np.ones(var.size)
        for k in range(1, var.size):
            reach[k] = reach[parent[k]] * g[k]
        cover += reach
    frac = np.array([1.0] + [cover[k] / cover[parent[k]] for k in range(1, var.size)])
    gx = gates(x)

    def game(s):
        total = 0.0
        for leaf in np.flatnonzero(var < 0):
            prod, k = 1.0, leaf
            while k > 0:
                prod *= gx[k] if var[parent[k]] in s else frac[k]
                k = parent[k]
            total += value[leaf] * prod
        return total

    phi = shapley_values(game, p)
    return phi, game(set()), game(set(range(p)))


@pytest.fixture(scope="module")
def soft_fit():
    df = _frame(n=80).drop(columns="g")
    return bps.soft_tree("y ~ a + b + c", data=df, sampler="hmc_df", chains=1, draws=4, tune=10, seed=1,
                         h_final=0.05, **QUIET)


def test_soft_tree_values_match_brute_force_and_add_up_to_f(soft_fit):
    from bartpy_suite.posterior import soft

    new = _frame(n=5, seed=15).drop(columns=["g", "y"])
    ds = soft_fit.shap(new)
    assert ds.attrs["scale"] == "response"
    a = soft.arrays(soft_fit)
    train = soft.scaled_x(soft_fit, None)[0]
    x = soft.scaled_x(soft_fit, new)[0]
    assert max(a["counts"]) >= 5  # trees with two or more gates
    for d in range(4):
        nodes = slice(int(a["roots"][d]), int(a["roots"][d] + a["counts"][d]))
        for i in range(5):
            ref, ref_base, f = soft_brute_force(a["var"][nodes], a["tau"][nodes], a["value"][nodes], 0.05, train, x[i])
            np.testing.assert_allclose(ds["shap"].values[0, d, i], ref, rtol=0, atol=TOL)
            assert ds["base"].values[0, d] == pytest.approx(ref_base, abs=TOL)
    f = soft_fit.function_samples(new).reshape(1, 4, 5)
    np.testing.assert_allclose(ds["base"].values[:, :, None] + ds["shap"].values.sum(-1), f, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds["base"].values.reshape(-1), soft_fit.function_samples().mean(axis=1), atol=1e-12)


def test_soft_tree_with_oblique_gates_is_refused(soft_fit, monkeypatch):
    monkeypatch.setitem(soft_fit.config, "sampler", "hmc_dfi")
    with pytest.raises(ArgumentError, match="not supported for soft trees fitted with sampler='hmc_dfi'"):
        soft_fit.shap()


def test_against_the_shap_library_when_installed(bart_fit):
    """shap's TreeExplainer (path-dependent, ``feature_perturbation="tree_path_dependent"``) reads
    one of our trees as a dict model on the bin codes (left iff code <= cut + 0.5); factors have no
    such rule, so a tree of numeric predictors only is compared. Skipped without shap (not a
    dependency); the brute-force tests above are the ones that always run."""
    shap = pytest.importorskip("shap")
    fit = bps.cart("y ~ a + b + c", data=_frame(n=150, seed=12), chains=1, draws=3, tune=200, seed=8, **QUIET)
    t = fit.tree_store
    var, cut, value = (a[: int(t["counts"][0, 0])] for a in (t["node_var"], t["node_cut"], t["node_value"]))
    assert (var >= 0).sum() >= 2  # a tree with splits to explain
    right = children(var)
    cov = covers(var, cut, np.zeros(3, bool), fit.binned.codes)
    left = np.where(var >= 0, np.arange(var.size) + 1, -1)
    model = {"trees": [{"children_left": left, "children_right": right, "children_default": left,
                        "features": np.where(var >= 0, var, -2), "thresholds": np.where(var >= 0, cut + 0.5, 0.0),
                        "values": value[:, None], "node_sample_weight": cov}]}
    codes = fit.prepare(_frame(n=8, seed=13))[0].T.astype(float)
    explainer = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    ours = fit.shap(_frame(n=8, seed=13))["shap"].values[0, 0]
    np.testing.assert_allclose(explainer.shap_values(codes), ours, rtol=0, atol=1e-9)


# -- the kernel conventions (docs/architecture.md, "Adding a sampler") ----------------------------------

def test_shap_calls_no_helper_from_python_and_releases_every_array(bart_fit, soft_fit, monkeypatch):
    """Only ``kernel`` functions are called from Python (a helper's twin would compile again in every
    process), and numba releases every meminfo it made (``tests/test_refcounts.py``)."""
    new = _frame(n=5, seed=11).drop(columns="y")
    soft_new = new.drop(columns="g")
    bart_fit.shap(new)  # compiled outside the counted window
    soft_fit.shap(soft_new)
    calls = record_helper_calls(monkeypatch)

    def explain():
        bart_fit.shap(new, threads=2)
        bart_fit.shap_summary(new)
        soft_fit.shap(soft_new)

    made, released = nrt_balance(explain)
    assert calls == []
    assert made > 0 and made == released


def test_shap_kernels_assign_no_array_to_a_slice(bart_fit, soft_fit):
    """``tests/test_no_slice_copy.py``'s check on this module's compiled functions."""
    from test_no_slice_copy import slice_copies, typed_state

    from bartpy_suite._kernels import shap as K
    from bartpy_suite._kernels.jit import KernelDispatcher

    bart_fit.shap(_frame(n=3, seed=1).drop(columns="y"))
    soft_fit.shap(_frame(n=3, seed=1).drop(columns=["g", "y"]))
    kernel_shap([(np.array([0, 0, -1, -1, -1]), np.array([2, 1, 0, 0, 0]), np.array([0.0, 0.0, 1.0, 2.0, 3.0]))],
                np.zeros(1, bool), np.arange(4)[None, :], np.arange(4)[:, None])
    checked, offenders = set(), []
    while True:
        todo = [(name, d, sig) for name, d in vars(K).items() if isinstance(d, KernelDispatcher)
                and d.py_func.__module__ == K.__name__ for sig in list(d.signatures) if (name, sig) not in checked]
        if not todo:
            break
        for name, d, sig in todo:
            checked.add((name, sig))
            offenders += [f"{name} {where}" for where in slice_copies(typed_state(d, sig))]
    assert {name for name, _ in checked} >= {"_shap_range", "_sample_shap", "tree_shap_row", "tree_covers",
                                             "_soft_shap_range", "_soft_sample_shap", "_soft_gates"}
    assert not offenders


# -- plots ------------------------------------------------------------------------------------------------

def test_plot_importance_bars_are_the_ranked_importance(bart_fit):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bartpy_suite import plotting

    new = _frame(n=6, seed=5).drop(columns="y")
    table = bart_fit.importance(new, level=0.8)
    ax = plotting.plot_importance(bart_fit, new, level=0.8)
    np.testing.assert_allclose([p.get_width() for p in ax.patches], table["mean"].to_numpy())
    assert [t.get_text() for t in ax.get_yticklabels()] == list(table.index)
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[:, 0].min() for s in segments], table["lower"].to_numpy())
    np.testing.assert_allclose([s[:, 0].max() for s in segments], table["upper"].to_numpy())
    with pytest.raises(ArgumentError, match="cls"):
        plotting.plot_importance(bart_fit, new, cls="P")
    plt.close("all")


def test_plot_shap_points_are_the_posterior_means(bart_fit):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bartpy_suite import plotting

    new = _frame(n=9, seed=6).drop(columns="y")
    summary = bart_fit.shap_summary(new)
    ax = plotting.plot_shap(bart_fit, new)
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == list(summary.importance.index)
    xy = ax.collections[0].get_offsets()
    assert xy.shape == (9 * 4, 2)
    for slot, name in enumerate(names):
        points = xy[9 * slot: 9 * (slot + 1)]
        expected = summary.rows[summary.rows["predictor"] == name]["mean"].to_numpy()
        np.testing.assert_allclose(points[:, 0], expected)
        assert np.all(np.abs(points[:, 1] - slot) <= 0.4 + 1e-12)
    bars = ax.collections[1].get_segments()
    assert len(bars) == 9 * 4
    plt.close("all")


def test_a_loaded_fit_gives_the_same_values(bart_fit, tmp_path):
    new = _frame(n=4, seed=14).drop(columns="y")
    bart_fit.to_netcdf(tmp_path / "fit.nc")
    same = bps.load(tmp_path / "fit.nc")
    np.testing.assert_array_equal(same.shap(new)["shap"].values, bart_fit.shap(new)["shap"].values)
