"""Plots: the drawn data (bar lengths, line coordinates, mesh values, edges and labels) are the
fit's numbers."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import bartpy_suite as bps  # noqa: E402
from bartpy_suite import plotting  # noqa: E402
from bartpy_suite.errors import ArgumentError  # noqa: E402

QUIET = {"progress": False, "check_mixing": False, "log_likelihood": False}


@pytest.fixture(scope="module")
def fit():
    df = bps.datasets.load("cgm1998")
    return bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=2, draws=300, tune=2000, seed=1, **QUIET)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_variable_activity_bars_are_the_means_and_intervals(fit):
    table = fit.variable_activity(level=0.9)
    ax = plotting.plot_variable_activity(fit, level=0.9)
    np.testing.assert_allclose([p.get_width() for p in ax.patches], table["mean"].to_numpy())
    # error bars: one segment per predictor from the lower to the upper bound
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[:, 0].min() for s in segments], table["lower"].to_numpy())
    np.testing.assert_allclose([s[:, 0].max() for s in segments], table["upper"].to_numpy())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x1", "x2"]
    with pytest.raises(ArgumentError, match="forest= picks one forest of a bcf fit"):
        plotting.plot_variable_activity(fit, forest="mu")


def test_partial_dependence_of_one_numeric_predictor(fit):
    ax = plotting.plot_partial_dependence(fit, "x1", grid=8, level=0.8)
    pd_ = plotting.partial_dependence(fit, "x1", grid=8, level=0.8)
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0], pd_["values"][0])
    np.testing.assert_allclose(xy[:, 1], pd_["mean"])
    # the partial dependence at a grid point is the average over the training rows of f with
    # x1 set to that point: recompute one by prediction on modified data
    df = bps.datasets.load("cgm1998")
    k = 3
    moved = df.assign(x1=pd_["values"][0][k])
    direct = fit.function_samples(moved).mean(axis=1)
    np.testing.assert_allclose(pd_["samples"][:, k], direct, rtol=1e-12)
    assert (pd_["lower"] <= pd_["mean"]).all() and (pd_["mean"] <= pd_["upper"]).all()
    # against the true partial dependence of the noiseless f (mean over the rows' x2 of
    # f(x1, x2): 4.6, 6.6, 3.4, 4.9 on the four x1 ranges): within 0.5 at every grid point at
    # least 0.25 from a step of f (noise sd 2 on 800 rows; the posterior mean is off by 0.45 at
    # most at seed 1, at the noisy edge of the x1 range)
    x = pd_["values"][0]
    truth = np.array([bps.datasets.f_cgm1998(v, df["x2"]).mean() for v in x])
    away = np.min(np.abs(x[:, None] - np.array([3.0, 5.0, 7.0])), axis=1) > 0.25
    assert away.sum() >= 6
    np.testing.assert_allclose(pd_["mean"][away], truth[away], atol=0.5)


def test_partial_dependence_of_a_factor_and_of_two_predictors(fit):
    ax = plotting.plot_partial_dependence(fit, "x2")
    pd_ = plotting.partial_dependence(fit, "x2")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B", "C", "D"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), pd_["mean"])
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[:, 1].min() for s in segments], pd_["lower"])
    axes = plotting.plot_partial_dependence(fit, ["x1", "x2"], grid=5)
    both = plotting.partial_dependence(fit, ["x1", "x2"], grid=5)
    assert both["mean"].shape == (5, 4)
    for a, key in zip(axes, ("lower", "mean", "upper")):
        np.testing.assert_allclose(np.asarray(a.collections[0].get_array()).reshape(4, 5), both[key].T)
    with pytest.raises(ArgumentError, match=r"predictor 'x9' is not in the model"):
        plotting.partial_dependence(fit, "x9")


@pytest.fixture(scope="module")
def bart_fit():
    df = bps.datasets.load("cgm1998")
    return bps.bart("y ~ x1 + x2", data=df, trees=5, chains=2, draws=30, tune=30, seed=1, **QUIET)


def test_partial_dependence_of_a_sum_of_trees_is_the_brute_force_average(bart_fit):
    # The batched computation evaluates rows equal on the other predictors once and adds the
    # trees that do not split on the chosen predictors as a constant: it must give, per draw,
    # the average over all 800 rows of f with the grid values set (to rounding, 1e-12).
    df = bps.datasets.load("cgm1998")
    pd_ = plotting.partial_dependence(bart_fit, "x1", grid=6)
    for k, v in enumerate(pd_["values"][0]):
        direct = bart_fit.function_samples(df.assign(x1=v)).mean(axis=1)
        np.testing.assert_allclose(pd_["samples"][:, k], direct, rtol=1e-12)
    both = plotting.partial_dependence(bart_fit, ["x1", "x2"])  # default grid: 10 per numeric predictor
    assert both["samples"].shape == (60, 10, 4)
    i, j = 7, 2
    moved = df.assign(x1=both["values"][0][i], x2=pd.Categorical([both["values"][1][j]] * len(df),
                                                                  categories=df["x2"].cat.categories))
    np.testing.assert_allclose(both["samples"][:, i, j], bart_fit.function_samples(moved).mean(axis=1), rtol=1e-12)


def test_partial_dependence_of_a_fit_with_missing_value_rules():
    # na_action="split" stores a numeric rule's missing-value side in the high word of its cut:
    # the grid classes must read the cut index from the low word only
    df = bps.datasets.load("cgm1998")
    holes = df.copy()
    holes.loc[holes.index[::7], "x1"] = np.nan
    fit = bps.cart("y ~ x1 + x2", data=holes, na_action="split", chains=1, draws=40, tune=60, seed=2, **QUIET)
    assert (fit.tree_store["node_cut"] >> 32).any()  # some rule sends missing values left
    pd_ = plotting.partial_dependence(fit, "x1", grid=7)
    for k, v in enumerate(pd_["values"][0]):
        direct = fit.function_samples(holes.assign(x1=v)).mean(axis=1)
        np.testing.assert_allclose(pd_["samples"][:, k], direct, rtol=1e-12)


def test_partial_dependence_progress_bar(bart_fit, capsys):
    quiet = plotting.partial_dependence(bart_fit, "x1", grid=10, progress=False)
    assert "partial dependence" not in capsys.readouterr().err
    shown = plotting.partial_dependence(bart_fit, "x1", grid=10, progress=True)
    err = capsys.readouterr().err
    # one step per set of rules on x1 held by some tree: the bar reaches its total
    assert "partial dependence" in err and re.search(r" (\d+)/\1 ", err)
    np.testing.assert_array_equal(shown["samples"], quiet["samples"])
    with pytest.raises(ArgumentError, match="progress must be True, False or None"):
        plotting.partial_dependence(bart_fit, "x1", progress="yes")


def test_predicted_vs_observed_points_and_intervals(fit):
    ax = plotting.plot_predicted_vs_observed(fit, level=0.9)
    pred = fit.predict(level=0.9)
    y = bps.datasets.load("cgm1998")["y"].to_numpy()
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0], y)
    np.testing.assert_allclose(xy[:, 1], pred["mean"].to_numpy())
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[:, 1].min() for s in segments], pred["lower"].to_numpy())
    np.testing.assert_allclose([s[:, 1].max() for s in segments], pred["upper"].to_numpy())


def test_predicted_vs_observed_on_new_rows(fit):
    df = bps.datasets.load("cgm1998")
    test = df.iloc[::40]
    pred = fit.predict(test, kind="predictive", level=0.8)
    for y in ("y", test["y"].to_numpy(), None):  # a column name, values, or the response column by default
        ax = plotting.plot_predicted_vs_observed(fit, newdata=test, y=y, kind="predictive", level=0.8)
        xy = ax.lines[0].get_xydata()
        np.testing.assert_allclose(xy[:, 0], test["y"].to_numpy())
        np.testing.assert_allclose(xy[:, 1], pred["mean"].to_numpy())
        segments = ax.collections[0].get_segments()
        np.testing.assert_allclose([s[:, 1].max() for s in segments], pred["upper"].to_numpy())
        assert "new rows, n=20" in ax.get_xlabel()
        plt.close("all")
    # a row with a missing predictor is left out under na_action="pass"
    holes = test.assign(x1=np.where(np.arange(20) == 3, np.nan, test["x1"]))
    ax = plotting.plot_predicted_vs_observed(fit, newdata=holes, na_action="pass")
    assert len(ax.lines[0].get_xdata()) == 19
    bad = [({"y": test["y"].to_numpy()}, "y= gives the observed response of newdata"),
           ({"newdata": test.drop(columns="y")}, "with newdata, pass y=.*newdata has no column 'y'"),
           ({"newdata": test, "y": "z"}, "y='z' is not a column of newdata"),
           ({"newdata": test, "y": np.ones(3)}, r"one observed value per row of newdata \(20\)"),
           ({"newdata": test, "y": np.where(np.arange(20) == 5, np.nan, 1.0)}, r"y has 1 missing observed value"),
           ({"bins": 0}, "bins")]
    for kwargs, message in bad:
        with pytest.raises(ArgumentError, match=message):
            plotting.plot_predicted_vs_observed(fit, **kwargs)


def _reliability(p, hit, bins, level):
    """Bin means, frequencies and Jeffreys intervals, computed directly."""
    from scipy import stats

    out = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = (p >= lo) & ((p < hi) if b < bins - 1 else (p <= hi))
        if inside.any():
            k, m = hit[inside].sum(), inside.sum()
            out.append((p[inside].mean(), k / m, stats.beta.ppf((1 - level) / 2, k + 0.5, m - k + 0.5),
                        stats.beta.ppf((1 + level) / 2, k + 0.5, m - k + 0.5)))
    return np.array(out)


def test_calibration_plot_of_a_binary_classifier_on_new_rows(probit_fit):
    bc = bps.datasets.load("breast_cancer").dropna()
    test = bc.iloc[1::2]
    ax = plotting.plot_predicted_vs_observed(probit_fit, newdata=test, bins=8, level=0.9)
    p = probit_fit.predict(test, kind="prob")["prob_malignant"].to_numpy()
    want = _reliability(p, (test["class"] == "malignant").to_numpy(), 8, 0.9)
    assert len(ax.lines) == 2  # the diagonal and the curve of the second class
    np.testing.assert_allclose(ax.lines[1].get_xydata(), want[:, :2], rtol=1e-12)
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([[s[:, 1].min(), s[:, 1].max()] for s in segments], want[:, 2:], rtol=1e-9)
    assert ax.get_xlabel().startswith("predicted P(malignant)") and "Jeffreys" in ax.get_ylabel()
    assert ax.get_title() == f"Calibration (new rows, n={len(test)})"
    with pytest.raises(ArgumentError, match=r"classes the fit does not know: \['maybe'\]"):
        plotting.plot_predicted_vs_observed(probit_fit, newdata=test, y=np.array(["maybe"] * len(test)))


def test_calibration_plot_of_three_classes_one_vs_rest(iris_fit):
    iris = bps.datasets.load("iris")
    ax = plotting.plot_predicted_vs_observed(iris_fit, bins=5)
    pred = iris_fit.predict(kind="prob")
    assert [line.get_label() for line in ax.lines[1:]] == ["setosa", "versicolor", "virginica"]
    for line, label in zip(ax.lines[1:], ["setosa", "versicolor", "virginica"]):
        want = _reliability(pred[f"prob_{label}"].to_numpy(), (iris["Species"] == label).to_numpy(), 5, 0.95)
        np.testing.assert_allclose(line.get_xydata(), want[:, :2], rtol=1e-12)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["setosa", "versicolor", "virginica"]


def _texts(ax, gid):
    return [t for t in ax.texts if t.get_gid() == gid]


def test_tree_drawing_matches_the_map_tree(fit):
    ax = plotting.plot_tree(fit, level=0.9)
    nodes = fit.map_tree().nodes
    assert len(ax.lines) == len(nodes) - 1  # one edge per non-root node
    node_texts = _texts(ax, "node")
    assert len(node_texts) == len(nodes)
    leaves = [n for n in nodes if n.leaf]
    leaf_texts = [t for t, n in zip(node_texts, nodes) if n.leaf]
    assert [t.get_text().splitlines()[-1].split(",")[0] for t in leaf_texts] == [f"n={n.n}" for n in leaves]
    assert sum(n.n for n in leaves) == 800
    # leaves sit on their depth, left to right in preorder
    assert [t.get_position()[0] for t in leaf_texts] == list(range(len(leaves)))
    assert [t.get_position()[1] for t in leaf_texts] == [-n.depth for n in leaves]
    # each edge joins a split (its text's position) to a node drawn one level below, and is
    # labelled at its middle: "yes" towards the left child (rule true), "no" towards the right
    splits = {tuple(t.get_position()) for t, n in zip(node_texts, nodes) if not n.leaf}
    drawn = {tuple(t.get_position()) for t in node_texts}
    edge_words = {tuple(np.round(t.get_position(), 9)): t.get_text() for t in _texts(ax, "edge")}
    assert len(edge_words) == len(ax.lines)
    for line in ax.lines:
        (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
        assert (x0, y0) in splits and (x1, y1) in drawn and y1 == y0 - 1
        middle = tuple(np.round(((x0 + x1) / 2, (y0 + y1) / 2), 9))
        assert edge_words[middle] == ("yes" if x1 < x0 else "no")
    assert "posterior mean [90% interval]" in _texts(ax, "note")[0].get_text()


def test_tree_leaf_interval_is_that_of_the_draws_with_the_same_leaf(fit):
    # Independent of the plot's leaf lookup: in a single-tree regression f(x_i) of a draw is the
    # value of row i's leaf (continuous draws: equal values mean the same leaf), so a draw has
    # the leaf of rows R when f is constant on R and takes that value nowhere else.
    lp = fit.sample_stats["log_posterior"].values.reshape(-1)
    s = int(np.argmax(lp))
    f = fit.function_samples()
    nodes = fit.map_tree().nodes
    posts = plotting._leaf_posteriors(fit, s, 0, nodes, 0.9)
    w = fit.flat_weights
    checked = 0
    for leaf in (n for n in nodes if n.leaf):
        value = [v for v in np.unique(f[s]) if (f[s] == v).sum() == leaf.n]
        if len(value) != 1:
            continue  # two leaves of the same size: skip, the test needs a unique match
        rows = f[s] == value[0]
        same = ((f == f[:, [np.argmax(rows)]]) == rows).all(axis=1)
        vals = f[same, np.argmax(rows)]
        lo, hi = np.quantile(vals, [0.05, 0.95])  # equal weights: numpy's linear quantiles
        post = posts[leaf.number]
        assert post["draws"] == same.sum() and post["share"] == pytest.approx(w[same].sum())
        np.testing.assert_allclose([post["mean"][0], post["lower"][0], post["upper"][0]], [vals.mean(), lo, hi],
                                   rtol=1e-12)
        checked += 1
    assert checked >= 3
    ax = plotting.plot_tree(fit, intervals=False)
    assert all("[" not in t.get_text() for t in _texts(ax, "node"))


@pytest.fixture(scope="module")
def iris_fit():
    iris = bps.datasets.load("iris")
    return bps.cart("Species ~ .", data=iris, chains=1, draws=60, tune=100, seed=1, **QUIET)


@pytest.fixture(scope="module")
def probit_fit():
    bc = bps.datasets.load("breast_cancer").dropna()
    return bps.bart("class ~ . - id", data=bc.iloc[::2], trees=5, chains=1, draws=30, tune=30, seed=1, **QUIET)


def test_classification_tree_lists_classes_in_order_with_intervals(iris_fit):
    fit = iris_fit
    ax = plotting.plot_tree(fit)
    nodes = fit.map_tree().nodes
    for text, node in zip(_texts(ax, "node"), nodes):
        if node.leaf:
            lines = text.get_text().splitlines()
            if lines[-1].endswith("1 draw"):
                continue
            assert [line.split(" ")[0] for line in lines[1:4]] == ["setosa", "versicolor", "virginica"]
            probs = [float(line.split(" ")[1]) for line in lines[1:4]]
            assert lines[0] == ["setosa", "versicolor", "virginica"][int(np.argmax(probs))]
            assert sum(probs) == pytest.approx(1.0, abs=0.015)  # means rounded to 2 decimals
    assert "class probabilities" in _texts(ax, "note")[0].get_text()


def test_probit_bart_tree_is_labelled_on_the_latent_scale(probit_fit):
    fit = probit_fit
    ax = plotting.plot_tree(fit, chain=0, draw=20, tree=1)
    leaf_texts = [t.get_text() for t, n in zip(_texts(ax, "node"), fit.tree(0, 20, 1).nodes) if n.leaf]
    assert all(t.startswith("latent ") for t in leaf_texts)
    assert not any(label in t for t in leaf_texts for label in ("benign", "malignant"))
    assert "latent probit scale" in _texts(ax, "note")[0].get_text()


def test_bart_tree_of_a_draw_and_trace_rank():
    pytest.importorskip("arviz_plots")
    df = bps.datasets.load("cgm1998")
    fit = bps.bart("y ~ x1 + x2", data=df, trees=5, chains=2, draws=30, tune=30, seed=1, **QUIET)
    ax = plotting.plot_tree(fit, chain=1, draw=3, tree=2)
    nodes = fit.tree(chain=1, draw=3, tree=2).nodes
    assert len(_texts(ax, "node")) == len(nodes)
    assert len(_texts(ax, "edge")) == len(nodes) - 1
    with pytest.raises(ArgumentError, match="map_tree needs the log posterior"):
        plotting.plot_tree(fit)
    pc = plotting.plot_trace(fit)
    for name in ("mean_leaves", "sigma"):
        line = pc.viz["trace"][name].sel(chain=1).item()
        np.testing.assert_allclose(line.get_ydata(), fit.posterior[name].values[1])
    rank = plotting.plot_rank(fit, var_names="sigma")
    assert rank.viz["ecdf_lines"]["sigma"].sizes["chain"] == 2
