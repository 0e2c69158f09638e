"""The compiled prediction kernels (``_kernels/predict.py``: ``leaf_indices``, ``sum_of_trees``)
against a pure-Python walk of the stored trees.

The reference walks each stored tree from the root on the *raw* new-data values: a numeric
rule (v, k) sends a row left iff ``x_v <= cuts[v][k]`` (the cut grid stored in
``constant_data``), a categorical rule iff bit ``level code`` of the mask is set. It therefore
checks the binning of new data (``Fit.prepare``) and the traversal together. New data include
every training row, values exactly on cut points (ties must go left), values beyond the
training range and every factor level.

Tolerances: leaf indices and per-draw function values must agree exactly (the reference adds
the trees' leaf values in the kernel's order, starting from 0.0, so the floating-point sums are
the same); posterior means computed by ``Fit.predict`` (a weighted matrix product) agree to a
relative 1e-12.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite import datasets
from bartpy_suite._kernels.predict import leaf_indices, sum_of_trees
from bartpy_suite._kernels.record import right_children, tree_roots


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    """cgm1998 plus a 6-level factor g and a numeric x3 (noise), so that trees split on two
    numeric and two categorical predictors."""
    df = datasets.load("cgm1998").head(300).copy()
    rng = np.random.default_rng(17)
    df["g"] = pd.Categorical(rng.choice(list("uvwxyz"), size=len(df)))
    df["x3"] = rng.normal(size=len(df)).round(2)  # ties in the training data
    df["y"] = df["y"] + 2.0 * (df["g"].isin(["u", "x"])) + df["x3"]
    return df


FORMULA = "y ~ x1 + x2 + g + x3"


@pytest.fixture(scope="module")
def fits(train) -> dict:
    cart = bps.cart(FORMULA, data=train, sampler="cgm", chains=2, draws=60, tune=1500, seed=11, progress=False)
    bart = bps.bart(FORMULA, data=train, trees=10, chains=2, draws=30, tune=100, seed=12, progress=False)
    labelled = train.assign(label=np.where(train["y"] > train["y"].median(), "big", "small"))
    clf = bps.cart("label ~ x1 + x2 + g + x3", data=labelled, sampler="cgm", chains=2, draws=60, tune=1500, seed=13,
                   progress=False)
    return {"cart": cart, "bart": bart, "clf": clf}


def new_data(fit, train: pd.DataFrame) -> pd.DataFrame:
    """Training rows, rows on the cut points used by the stored trees, rows outside the range."""
    cuts = fit.idata["constant_data"]["cuts"].values
    var = fit.tree_arrays()["split_var"].values
    cut = fit.tree_arrays()["split_cut"].values
    rows = [train.drop(columns="y")]
    for j, name in ((0, "x1"), (3, "x3")):
        used = np.unique(cut[var == j])
        assert used.size > 0, f"no stored tree splits on {name}: the tie check would be empty"
        on_cut = train.drop(columns="y").sample(n=used.size, replace=True, random_state=j).copy()
        on_cut[name] = cuts[j, used]
        rows.append(on_cut)
    extremes = pd.DataFrame({"x1": [-1e9, 1e9, -0.0, 10.0], "x2": ["A", "B", "C", "D"],
                             "g": ["u", "v", "y", "z"], "x3": [1e9, -1e9, 0.0, np.nextafter(0.0, 1.0)]})
    rows.append(extremes)
    out = pd.concat(rows, ignore_index=True)
    out["x2"] = out["x2"].astype(str)
    out["g"] = out["g"].astype(str)
    return out


def python_leaf(x_row, is_cat, cuts, var, cut, left, right) -> int:
    """Walk one stored tree (preorder arrays, leaves have var < 0) on raw values."""
    node = 0
    n_nodes = var.shape[0]
    for _ in range(n_nodes):
        v = int(var[node])
        assert v != -2, "walked into an unused node slot"
        if v < 0:
            return node
        if is_cat[v]:
            go_left = (int(cut[node]) >> int(x_row[v])) & 1 == 1
        else:
            go_left = float(x_row[v]) <= float(cuts[v, int(cut[node])])
        child = int(left[node]) if go_left else int(right[node])
        assert node < child < n_nodes, "children come after their parent in preorder"
        node = child
    raise AssertionError("no leaf reached")


def python_walk(fit, newdata: pd.DataFrame):
    """Leaf per (sample, tree, row) and, for regression, f per (sample, row)."""
    x = fit.design.transform(newdata)
    const = fit.idata["constant_data"]
    is_cat = const["is_categorical"].values.astype(bool)
    cuts = const["cuts"].values
    post = fit.tree_arrays()
    flat = {k: post[k].values.reshape((-1,) + post[k].shape[2:])
            for k in ("split_var", "split_cut", "left_child", "right_child")}
    samples, trees = flat["split_var"].shape[:2]
    leaves = np.empty((samples, trees, x.shape[0]), dtype=np.int64)
    for s in range(samples):
        for t in range(trees):
            args = (flat["split_var"][s, t], flat["split_cut"][s, t], flat["left_child"][s, t],
                    flat["right_child"][s, t])
            for i in range(x.shape[0]):
                leaves[s, t, i] = python_leaf(x[i], is_cat, cuts, *args)
    f = None
    if "leaf_value" in post:
        values = post["leaf_value"].values.reshape((samples, trees, -1))
        f = np.empty((samples, x.shape[0]))
        for s in range(samples):
            for i in range(x.shape[0]):
                total = 0.0
                for t in range(trees):
                    total += values[s, t, leaves[s, t, i]]
                f[s, i] = total
    return leaves, f


@pytest.mark.parametrize("name", ["cart", "bart"])
def test_regression_kernels_match_the_python_walk(fits, train, name):
    fit = fits[name]
    new = new_data(fit, train)
    leaves, f = python_walk(fit, new)
    codes = fit.prepare(new)[0]
    # the kernels index the compact store: subtract each tree's root to get preorder positions
    np.testing.assert_array_equal(fit.leaf_indices(codes) - fit.tree_store["roots"][:, :, None], leaves)
    np.testing.assert_array_equal(fit.function_samples(new), f)
    assert np.isfinite(f).all(), "a reached leaf holds no value"
    pred = fit.predict(new)
    np.testing.assert_allclose(pred["mean"].to_numpy(), f.mean(axis=0), rtol=1e-12, atol=1e-12)
    # Training rows through newdata=None (stored codes) agree with the walk on the raw rows.
    np.testing.assert_array_equal(fit.function_samples(), f[:, : len(train)])


def test_trees_really_split_on_every_kind_of_predictor(fits):
    """Guard for the tests above: the stored trees use numeric and categorical rules."""
    for name in ("cart", "bart", "clf"):
        var = fits[name].tree_arrays()["split_var"].values
        for v in range(4):  # x1, x2 (factor), g (factor), x3
            assert (var == v).any(), (name, v)


def test_classification_probabilities_match_the_python_walk(fits, train):
    fit = fits["clf"]
    new = new_data(fit, train)
    leaves, _ = python_walk(fit, new)
    assert leaves.shape[1] == 1
    leaf_prob = fit.tree_arrays()["leaf_prob"].values.reshape(leaves.shape[0], 1, -1, 2)[:, 0]
    expected = np.take_along_axis(leaf_prob, leaves[:, 0, :, None], axis=1)  # (samples, rows, classes)
    got = fit.predict(new, kind="prob", samples=True).values.reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(expected.sum(axis=-1), 1.0, atol=1e-12)
    pred = fit.predict(new, kind="prob")
    labels = fit.config["class_labels"]
    for k, label in enumerate(labels):
        np.testing.assert_allclose(pred[f"prob_{label}"].to_numpy(), expected[:, :, k].mean(axis=0),
                                   rtol=1e-12, atol=1e-12)


def test_kernels_on_a_hand_made_forest():
    """Two samples of two trees on one numeric and one 63-level factor (the largest supported):
    the mask tests bit 62, which needs a 64-bit shift."""
    codes = np.array([[0, 1, 2, 3, 2], [62, 0, 61, 62, 5]], dtype=np.int32)  # (p, rows)
    is_cat = np.array([False, True])
    big_mask = (1 << 62) | (1 << 5)  # levels 62 and 5 go left
    # tree A: root splits x0 <= 1; left leaf, right splits factor on big_mask
    a = dict(var=[0, -1, 1, -1, -1], cut=[1, 0, big_mask, 0, 0],
             value=[np.nan, 10.0, np.nan, 20.0, 30.0])
    # tree B: a stump
    b = dict(var=[-1], cut=[0], value=[0.5])
    forest = [[a, b], [b, a]]
    # the compact store: the trees' preorder nodes one after another, sample by sample
    flat = {k: np.concatenate([np.asarray(t[k]) for sample in forest for t in sample]) for k in ("var", "cut", "value")}
    tree_nodes = np.array([[len(t["var"]) for t in sample] for sample in forest])
    split_var = flat["var"].astype(np.int32)
    split_cut = flat["cut"].astype(np.int64)
    roots = tree_roots(tree_nodes)
    right = right_children(split_var, tree_nodes)
    np.testing.assert_array_equal(right[:5], [2, -1, 4, -1, -1])  # tree A's right children
    leaves = np.empty((2, 2, 5), dtype=np.int64)
    leaf_indices(codes, is_cat, split_var, split_cut, right, roots, leaves)
    leaves -= roots[:, :, None]
    # rows: (x0, level) = (0, 62) (1, 0) (2, 61) (3, 62) (2, 5)
    tree_a = [1, 1, 4, 3, 3]
    np.testing.assert_array_equal(leaves[0, 0], tree_a)
    np.testing.assert_array_equal(leaves[1, 1], tree_a)
    np.testing.assert_array_equal(leaves[0, 1], 0)
    np.testing.assert_array_equal(leaves[1, 0], 0)
    f = np.empty((2, 5))
    sum_of_trees(codes, is_cat, split_var, split_cut, right, flat["value"].astype(np.float64), roots, f)
    expected = np.array([10.0, 10.0, 30.0, 20.0, 20.0]) + 0.5
    np.testing.assert_array_equal(f[0], expected)
    np.testing.assert_array_equal(f[1], expected)
