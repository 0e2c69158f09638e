"""``bps.cart`` from the user's side (the issue's contract): the summary table, the ArviZ
posterior, credible and predictive intervals, classification probabilities, variable activity,
weights, the MAP tree, netCDF persistence, prior-only sampling, the mean-variance-shift model,
recovery of the CGM 1998 function, bad inputs through the front door, and the caller's data
left untouched.

The bad inputs are checked here through ``bps.cart`` / ``Fit.predict`` (the contract); the
checkers themselves are tested in ``test_validation.py`` and the formula layer in
``test_formula.py``. Fits are shared through module-scoped fixtures and kept small: the whole
file runs in a few seconds once numba's cache is warm.
"""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bartpy_suite as bps
from bartpy_suite import datasets
from bartpy_suite.errors import ArgumentError, BartpySuiteError, BartpySuiteWarning, DataError, FormulaError
from bartpy_suite.posterior.fit import Fit

# Points of the CGM 1998 example, each at least 1.5 away from the split points 3, 5, 7 of f,
# one in each of the five regions of f (thesis eq. 3.18).
GRID = pd.DataFrame({"x1": [1.5, 8.5, 1.5, 5.0, 8.5], "x2": ["A", "B", "C", "D", "C"]})

# 4 chains x 500 kept draws after 3000 tuning iterations (one iteration = one tree move): the
# cgm sampler finds the five regions on 800 rows well within the tuning phase (checked with
# seeds 1-5: every grid prediction within 0.3 of f).
FIT = dict(sampler="cgm", chains=4, draws=500, tune=3000, seed=1, progress=False)

# Tiny settings for the bad-input tests that must get as far as sampling.
TINY = dict(sampler="cgm", chains=1, draws=5, tune=5, seed=1, progress=False)


@pytest.fixture(scope="module")
def reg(cgm) -> Fit:
    """Regression tree on the CGM 1998 example (x1 numeric, x2 a factor with levels A-D)."""
    return bps.cart("y ~ x1 + x2", data=cgm, **FIT)


@pytest.fixture(scope="module")
def clf_data(cgm) -> pd.DataFrame:
    """The CGM 1998 example with y thresholded at 5 into the labels 'hi' and 'lo'."""
    return cgm.assign(label=np.where(cgm["y"] > 5.0, "hi", "lo")).drop(columns="y")


@pytest.fixture(scope="module")
def clf(clf_data) -> Fit:
    return bps.cart("label ~ x1 + x2", data=clf_data, sampler="cgm", chains=2, draws=500, tune=2000, seed=3,
                    progress=False)


@pytest.fixture
def small(cgm) -> pd.DataFrame:
    """60 rows of the example: enough for a valid tree, fast to fit."""
    return cgm.head(60).copy()


# --- the summary table and the DataTree --------------------------------------------------------

def test_summary_rows_columns_and_values(reg):
    table = reg.summary()
    assert list(table.index[:3]) == ["sigma", "n_leaves", "depth"]
    assert list(table.columns) == ["mean", "sd", "2.5%", "97.5%", "ess_bulk", "ess_tail", "r_hat"]
    assert np.all(table["2.5%"] <= table["mean"]) and np.all(table["mean"] <= table["97.5%"])
    assert np.all(table["sd"] > 0)
    assert np.all(table[["ess_bulk", "ess_tail"]] > 0) and np.all(np.isfinite(table["r_hat"]))
    # The noise sd of the example is 2; with 800 rows the posterior sd of sigma is about 0.05,
    # so 0.3 is 6 sd: only a tree missing a region of f (sigma >= 2.5) or a wrong scale fails.
    assert table.loc["sigma", "mean"] == pytest.approx(2.0, abs=0.3)
    # f has five regions; a tree needs at least 5 leaves to represent them.
    assert table.loc["n_leaves", "mean"] >= 5.0


def test_summary_level_sets_the_interval_columns(reg):
    table = reg.summary(level=0.9)
    assert list(table.columns) == ["mean", "sd", "5%", "95%", "ess_bulk", "ess_tail", "r_hat"]
    wide = reg.summary()
    assert np.all(table["95%"] - table["5%"] <= wide["97.5%"] - wide["2.5%"])


def test_posterior_layout(reg):
    assert isinstance(reg.idata, xr.DataTree)
    assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= set(reg.idata.children)
    assert reg.posterior["n_leaves"].dims == ("chain", "draw")
    assert reg.posterior["sigma"].dims == ("chain", "draw")
    assert reg.posterior.sizes["chain"] == FIT["chains"] and reg.posterior.sizes["draw"] == FIT["draws"]
    assert reg.tree_arrays()["split_var"].dims == ("chain", "draw", "tree", "node")
    # The DataTree is the fit's posterior: the summary is computed from it.
    n_leaves = reg.posterior["n_leaves"].values
    assert reg.summary().loc["n_leaves", "mean"] == pytest.approx(n_leaves.mean(), rel=1e-12)


def test_weights_are_uniform_and_sum_to_one(reg):
    w = reg.weights
    assert w.dims == ("chain", "draw")
    values = w.values
    assert values.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(values, 1.0 / values.size, rtol=1e-12)


# --- regression predictions ----------------------------------------------------------------

def test_predict_mean_columns_and_order(reg):
    pred = reg.predict(GRID)
    assert list(pred.columns) == ["mean", "lower", "upper"]
    assert pred.index.equals(GRID.index)
    assert np.all(pred["lower"] <= pred["mean"]) and np.all(pred["mean"] <= pred["upper"])


def test_predict_follows_the_index_of_newdata(reg):
    new = GRID.iloc[[3, 0, 4]].set_index(pd.Index(["d", "a", "e"]))
    pred = reg.predict(new)
    assert list(pred.index) == ["d", "a", "e"]
    # The mean is a weighted matrix product over the draws, whose summation order may depend on
    # the number of rows predicted (BLAS): equal to rounding, 1e-12 relative.
    np.testing.assert_allclose(pred.to_numpy(), reg.predict(GRID).iloc[[3, 0, 4]].to_numpy(), rtol=1e-12)


def test_level_changes_width_monotonically(reg):
    widths = [(p["upper"] - p["lower"]).to_numpy() for p in (reg.predict(GRID, level=lv) for lv in (0.5, 0.8, 0.95))]
    assert np.all(widths[0] <= widths[1]) and np.all(widths[1] <= widths[2])
    # 2000 draws give distinct quantiles: the totals grow strictly.
    assert widths[0].sum() < widths[1].sum() < widths[2].sum()


def test_predictive_interval_is_wider_than_the_credible_interval(reg):
    cred = reg.predict(GRID)
    pred = reg.predict(GRID, kind="predictive")
    assert list(pred.columns) == ["mean", "lower", "upper"]
    np.testing.assert_array_equal(pred["mean"], cred["mean"])
    assert np.all(pred["upper"] - pred["lower"] > cred["upper"] - cred["lower"])
    # The noise sd is 2, so a 95% predictive interval is about 2 * 1.96 * 2 = 7.8 wide; the
    # uncertainty in sigma (sd ~0.05) cannot bring it below 6.
    assert np.all(pred["upper"] - pred["lower"] > 6.0)


def test_recovers_the_cgm1998_function(reg):
    """Posterior mean of f at the centre of each of the five regions against the true f.

    Tolerance 0.75: each region holds 100-200 of the 800 rows with noise sd 2, so a leaf mean
    has posterior sd at most 0.2 and 0.75 is more than 3.5 of those; the smallest step between
    regions is 3, so a missing or misplaced split fails by far."""
    pred = reg.predict(GRID)
    truth = datasets.f_cgm1998(GRID["x1"], GRID["x2"])
    np.testing.assert_array_less(np.abs(pred["mean"].to_numpy() - truth), 0.75)


def test_predict_kind_prob_is_refused_for_regression(reg):
    with pytest.raises(ArgumentError, match=r"kind='prob' needs a categorical response"):
        reg.predict(GRID, kind="prob")


# --- classification ------------------------------------------------------------------------

def test_classification_prob_columns_sum_to_one(clf):
    pred = clf.predict(GRID, kind="prob")
    probs = ["prob_hi", "prob_lo"]
    assert set(probs) <= set(pred.columns) and "class" in pred.columns
    np.testing.assert_allclose(pred[probs].sum(axis=1), 1.0, atol=1e-12)
    for col in probs:
        lower, upper = pred[f"{col}_lower"], pred[f"{col}_upper"]
        assert np.all(lower <= pred[col]) and np.all(pred[col] <= upper)
        assert np.all((lower >= 0) & (upper <= 1))


def test_classification_class_uses_the_users_labels(clf):
    pred = clf.predict(GRID, kind="prob")
    assert set(pred["class"]) <= {"hi", "lo"}
    expected = np.where(pred["prob_hi"] > pred["prob_lo"], "hi", "lo")
    np.testing.assert_array_equal(pred["class"].to_numpy(dtype=str), expected)
    only = clf.predict(GRID, kind="class")
    assert list(only.columns) == ["class"]
    np.testing.assert_array_equal(only["class"].to_numpy(), pred["class"].to_numpy())


def test_classification_is_sensible(clf):
    """P(y > 5) is Phi(1.5) = 0.93 where f = 8 and Phi(-2) = 0.02 where f = 1. With ~100 rows
    per region the Dirichlet posterior of a leaf has sd ~0.03, so 0.75 / 0.25 leave room for
    a region merged with a neighbour but not for a tree that ignores x1 or x2."""
    pred = clf.predict(GRID, kind="prob")
    assert pred.loc[0, "prob_hi"] > 0.75  # x1 = 1.5, x2 = A: f = 8
    assert pred.loc[4, "prob_hi"] > 0.75  # x1 = 8.5, x2 = C: f = 8
    assert pred.loc[1, "prob_hi"] < 0.25  # x1 = 8.5, x2 = B: f = 2
    assert pred.loc[2, "prob_hi"] < 0.25  # x1 = 1.5, x2 = C: f = 1


def test_classification_summary_has_no_sigma(clf):
    table = clf.summary()
    assert "sigma" not in table.index
    assert list(table.index[:2]) == ["n_leaves", "depth"]


def test_category_response_keeps_label_order(clf_data):
    data = clf_data.assign(label=pd.Categorical(clf_data["label"], categories=["lo", "hi"]))
    fit = bps.cart("label ~ x1 + x2", data=data, sampler="cgm", chains=1, draws=50, tune=300, seed=2, progress=False)
    pred = fit.predict(GRID, kind="prob")
    assert [c for c in pred.columns if c.startswith("prob_") and c.count("_") == 1] == ["prob_lo", "prob_hi"]
    assert set(pred["class"]) <= {"lo", "hi"}


# --- variable activity, MAP tree ---------------------------------------------------------------

def test_variable_activity(reg):
    act = reg.variable_activity()
    assert isinstance(act, pd.DataFrame)
    assert list(act.index) == ["x1", "x2"]
    assert "mean" in act.columns
    # Every kept tree splits (f has five regions), so the shares of each draw sum to one.
    assert act["mean"].sum() == pytest.approx(1.0, abs=1e-12)
    # f depends on both predictors: the five regions need at least two splits on each.
    assert act.loc["x1", "mean"] > 0.1 and act.loc["x2", "mean"] > 0.1


def test_map_tree_prints_like_rpart(reg):
    text = str(reg.map_tree())
    lp = reg.sample_stats["log_posterior"].values
    assert f"log posterior {lp.max():.4f}" in text
    assert "1) root 800" in text
    assert re.search(r"x1 <= [0-9.]+", text) and re.search(r"x1 > [0-9.]+", text)
    assert re.search(r"x2 in \{[A-D](,[A-D])*\}", text)
    # One line marked '*' per leaf of the MAP draw.
    s = np.unravel_index(np.argmax(lp), lp.shape)
    n_leaves = int(reg.posterior["n_leaves"].values[s])
    assert sum(line.rstrip().endswith("*") for line in text.splitlines() if ")" in line) == n_leaves


# --- persistence ------------------------------------------------------------------------------

def test_netcdf_round_trip_regression(reg, tmp_path):
    path = tmp_path / "fit.nc"
    reg.to_netcdf(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.nc"]  # no temporary file left
    back = bps.load(path)
    for kind in ("mean", "predictive"):
        pd.testing.assert_frame_equal(back.predict(GRID, kind=kind), reg.predict(GRID, kind=kind))
    pd.testing.assert_frame_equal(back.summary(), reg.summary())
    pd.testing.assert_frame_equal(back.variable_activity(), reg.variable_activity())
    assert str(back.map_tree()) == str(reg.map_tree())
    assert back.config == reg.config


def test_netcdf_round_trip_classification(clf, tmp_path):
    path = tmp_path / "clf.nc"
    clf.to_netcdf(str(path))
    back = bps.load(str(path))
    pd.testing.assert_frame_equal(back.predict(GRID, kind="prob"), clf.predict(GRID, kind="prob"))


def test_failed_write_leaves_no_temporary_file(reg, tmp_path, monkeypatch):
    """A write that fails half-way removes its temporary file and leaves no target."""

    def broken(self, path, **kw):  # the DataTree writer fails after writing part of the file
        with open(path, "wb") as handle:
            handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(xr.DataTree, "to_netcdf", broken)
    with pytest.raises(OSError, match="disk full"):
        reg.to_netcdf(tmp_path / "fit.nc")
    assert list(tmp_path.iterdir()) == []


def test_to_netcdf_into_missing_folder(reg, tmp_path):
    with pytest.raises(ArgumentError, match=r"folder .* does not exist"):
        reg.to_netcdf(tmp_path / "nope" / "fit.nc")


# --- other settings ---------------------------------------------------------------------------

def test_likelihood_false_samples_the_sigma_prior(cgm):
    """Prior only: the default lam puts P(sigma < sd(y)) = 0.9 (CGM 1998's calibration).
    Without a likelihood sigma is redrawn from its prior each iteration (ess ~ draws), so 2000
    draws estimate the probability with sd 0.007; 0.03 is about 4 of those."""
    fit = bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", chains=2, draws=1000, tune=100, seed=4, likelihood=False,
                   progress=False)
    sigma = fit.posterior["sigma"].values
    assert np.mean(sigma < cgm["y"].std()) == pytest.approx(0.9, abs=0.03)
    assert fit.config["likelihood"] is False
    assert fit.posterior["n_leaves"].values.min() >= 1


def test_mean_variance_shift(cgm):
    """One sigma per leaf: the summary has no common sigma; the predictive interval uses the
    leaf sigmas. The true noise sd is 2 everywhere; leaves of 5-200 rows put a leaf sigma within
    a factor 1.6 of it (measured 1.9-2.5 at the grid), which a sigma left on the standardised
    scale (sd(y) ~ 3.3 times smaller) would not be."""
    fit = bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", chains=2, draws=300, tune=2000, seed=3,
                   model="mean_variance_shift",
                   progress=False)
    assert "leaf_sigma" in fit.tree_arrays()
    assert "sigma" not in fit.summary().index
    cred = fit.predict(GRID)
    pred = fit.predict(GRID, kind="predictive")
    assert np.all(pred["upper"] - pred["lower"] > cred["upper"] - cred["lower"])
    implied_sd = (pred["upper"] - pred["lower"]) / (2 * 1.96)
    assert np.all((implied_sd > 1.25) & (implied_sd < 3.2)), implied_sd.to_numpy()


def test_constant_response_warns_and_predicts_the_constant(small):
    with pytest.warns(BartpySuiteWarning, match=r"the response 'y' is constant \(3.0\)"):
        fit = bps.cart("y ~ x1 + x2", data=small.assign(y=3.0), sampler="cgm", chains=1, draws=100, tune=100, seed=1,
                       progress=False)
    # mu_bar is the mean of y (3) and sigma's posterior shrinks to ~0.1, so every leaf value is
    # within a few hundredths of 3.
    np.testing.assert_allclose(fit.predict(GRID)["mean"], 3.0, atol=0.05)


def test_constant_predictor_warns_and_fits(small):
    with pytest.warns(BartpySuiteWarning, match=r"predictor 'x3' is constant"):
        fit = bps.cart("y ~ x1 + x3", data=small.assign(x3=1.0), **TINY)
    # A constant predictor offers no split rule: it is never used.
    assert (fit.tree_arrays()["split_var"].values != 1).all()


def test_signature_matches_the_issue():
    params = inspect.signature(bps.cart).parameters
    # the default sampler was cgm until benchmarks/results/first_hour.md chose tempered
    expected = {"sampler": "tempered", "chains": 4, "draws": 1000, "tune": 1000, "thin": 1, "seed": None,
                "alpha": 0.95, "beta": 0.5, "min_leaf_size": 5, "max_cuts": None, "model": "mean_shift",
                "a": 1 / 3, "mu_bar": None, "nu": 3.0, "lam": None, "class_alpha": 1.0, "moves": None,
                "likelihood": True, "progress": True, "na_action": "drop"}
    for name, default in expected.items():
        assert params[name].kind == inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default == default, name


# --- bad inputs through the front door ---------------------------------------------------------

def test_missing_column_is_named_with_a_suggestion(small):
    with pytest.raises(FormulaError, match=r"names column\(s\) not in data: 'X1' \(did you mean 'x1'\?\)"):
        bps.cart("y ~ X1 + x2", data=small, **TINY)
    with pytest.raises(FormulaError, match=r"not in data: 'x3'\. Columns of data: 'x1', 'x2', 'y'"):
        bps.cart("y ~ x1 + x3", data=small, **TINY)


def test_empty_data(small):
    with pytest.raises(DataError, match=r"data has no rows"):
        bps.cart("y ~ x1 + x2", data=small.iloc[:0], **TINY)


def test_fewer_rows_than_two_leaves(small):
    with pytest.raises(DataError, match=r"9 rows are too few for min_leaf_size=5: a split needs at least "
                                        r"2\*min_leaf_size=10 rows"):
        bps.cart("y ~ x1 + x2", data=small.head(9), **TINY)
    with pytest.raises(DataError, match=r"19 rows are too few for min_leaf_size=10"):
        bps.cart("y ~ x1 + x2", data=small.head(19), min_leaf_size=10, **TINY)
    bps.cart("y ~ x1 + x2", data=small.head(10), **TINY)  # exactly 2 * min_leaf_size is enough


@pytest.mark.parametrize("column, label", [("y", "response 'y'"), ("x1", "predictor 'x1'")])
def test_inf_is_named(small, column, label):
    data = small.copy()
    data.loc[4, column] = -np.inf
    with pytest.raises(DataError, match=rf"{label} has infinite values in 1 row \(index 4\)"):
        bps.cart("y ~ x1 + x2", data=data, **TINY)


def test_nan_with_raise(small):
    data = small.assign(x1=small["x1"].where(~small.index.isin([3, 7])))
    with pytest.raises(DataError, match=r"predictor 'x1' has missing values in 2 rows \(index 3, 7\)\. "
                                        r"With na_action='raise'"):
        bps.cart("y ~ x1 + x2", data=data, na_action="raise", **TINY)


def test_nan_dropped_with_a_warning_giving_the_count(small):
    data = small.assign(x1=small["x1"].where(~small.index.isin([3, 7])), y=small["y"].where(small.index != 9))
    with pytest.warns(BartpySuiteWarning, match=r"dropped 3 of 60 rows with missing values \(na_action='drop'\)"):
        fit = bps.cart("y ~ x1 + x2", data=data, **TINY)
    assert fit.idata["observed_data"]["y"].size == 57
    np.testing.assert_array_equal(fit.idata["observed_data"]["y"].values, data["y"].drop([3, 7, 9]).to_numpy())


def test_unknown_na_action(small):
    with pytest.raises(ArgumentError, match=r"unknown na_action 'omit'"):
        bps.cart("y ~ x1 + x2", data=small, na_action="omit", **TINY)


def test_one_class_only(small):
    with pytest.raises(DataError, match=r"the categorical response 'label' has a single class 'hi'"):
        bps.cart("label ~ x1 + x2", data=small.assign(label="hi"), **TINY)


def test_unseen_level_at_predict_time(reg):
    new = pd.DataFrame({"x1": [1.0, 2.0], "x2": ["A", "E"]})
    with pytest.raises(DataError, match=r"predictor 'x2' has level\(s\) not seen in the training data: 'E'; "
                                        r"known levels: 'A', 'B', 'C', 'D'"):
        reg.predict(new)


def test_missing_column_at_predict_time(reg):
    with pytest.raises(FormulaError, match=r"newdata lacks column\(s\) needed by the model: 'x2'"):
        reg.predict(GRID[["x1"]])


def test_inf_at_predict_time(reg):
    with pytest.raises(DataError, match=r"predictor 'x1' has infinite values in newdata: 1 row \(index 2\)"):
        reg.predict(GRID.assign(x1=np.where(GRID.index == 2, np.inf, GRID["x1"])))


def test_nan_at_predict_time_is_named(reg):
    with pytest.raises(DataError, match=r"newdata has missing values.*predictor 'x1': 1 row \(index 0\)"):
        reg.predict(GRID.assign(x1=np.where(GRID.index == 0, np.nan, GRID["x1"])))


def test_nan_at_predict_time_suggests_a_usable_fix(reg):
    with pytest.raises(DataError) as info:
        reg.predict(GRID.assign(x1=np.where(GRID.index == 0, np.nan, GRID["x1"])))
    suggests_na_action = "na_action" in str(info.value)
    assert not suggests_na_action or "na_action" in inspect.signature(Fit.predict).parameters


def test_series_at_predict_time_is_a_clear_error_or_one_row(reg, cgm):
    row = cgm.iloc[0]
    try:
        pred = reg.predict(row)
    except BartpySuiteError:
        return
    pd.testing.assert_frame_equal(pred.reset_index(drop=True), reg.predict(cgm.iloc[[0]]).reset_index(drop=True))


@pytest.mark.parametrize("kw, match", [
    ({"a": 0}, r"a must be a positive finite number \(> 0\), got 0"),
    ({"nu": -1.0}, r"nu must be a positive finite number \(> 0\), got -1.0"),
    ({"lam": 0.0}, r"lam must be a positive finite number \(> 0\), got 0.0"),
    ({"class_alpha": 0}, r"class_alpha must be a positive finite number \(> 0\), got 0"),
    ({"min_leaf_size": 0}, r"min_leaf_size must be an integer >= 1, got 0"),
    ({"max_cuts": 0}, r"max_cuts must be an integer >= 1, got 0"),
    ({"beta": -0.5}, r"beta must be a non-negative finite number \(>= 0\), got -0.5"),
    ({"alpha": 0.0}, r"alpha must be a number in the open interval \(0, 1\), got 0.0"),
    ({"alpha": 1.0}, r"alpha must be a number in the open interval \(0, 1\), got 1.0"),
    ({"alpha": 1.5}, r"alpha must be a number in the open interval \(0, 1\), got 1.5"),
    ({"sampler": "gibbs"}, r"unknown sampler 'gibbs'; valid options: 'cgm', 'grow_prune'"),
    ({"sampler": "cmg"}, r"unknown sampler 'cmg'; valid options: 'cgm', 'grow_prune'.*Did you mean 'cgm'\?"),
    ({"model": "mean"}, r"unknown model 'mean'; valid options: 'mean_shift', 'mean_variance_shift'"),
    ({"draws": 0}, r"draws must be an integer >= 1, got 0"),
    ({"chains": 0}, r"chains must be an integer >= 1, got 0"),
    ({"tune": -1}, r"tune must be an integer >= 0, got -1"),
    ({"thin": 0}, r"thin must be an integer >= 1, got 0"),
    ({"mu_bar": np.nan}, r"mu_bar must be a finite number"),
])
def test_bad_arguments_are_named(small, kw, match):
    with pytest.raises(ArgumentError, match=match):
        bps.cart("y ~ x1 + x2", data=small, **{**TINY, **kw})


def test_duplicate_column_names(small):
    data = pd.concat([small, small[["x1"]]], axis=1)
    with pytest.raises(DataError, match=r"data has duplicate column names: 'x1' \(2 times\)"):
        bps.cart("y ~ x1 + x2", data=data, **TINY)


@pytest.mark.parametrize("make, match", [
    (lambda d: d.to_numpy(), r"data must be a pandas DataFrame, got ndarray"),
    (lambda d: d.to_dict("list"), r"data must be a pandas DataFrame, got dict"),
    (lambda d: d["y"], r"data must be a pandas DataFrame, got Series"),
])
def test_data_not_a_dataframe(small, make, match):
    with pytest.raises(DataError, match=match):
        bps.cart("y ~ x1 + x2", data=make(small), **TINY)


def test_bad_predict_arguments(reg):
    with pytest.raises(ArgumentError, match=r"unknown kind 'quantile'; valid options: 'mean', 'predictive'"):
        reg.predict(GRID, kind="quantile")
    with pytest.raises(ArgumentError, match=r"level must be a number in the open interval \(0, 1\), got 95"):
        reg.predict(GRID, level=95)
    with pytest.raises(ArgumentError, match=r"level must be a number in the open interval \(0, 1\), got 1"):
        reg.summary(level=1)


# --- the caller's data are never modified -------------------------------------------------------

def test_regression_fit_and_predict_leave_the_data_unchanged(cgm):
    data = cgm.head(200).copy()
    data.loc[[5, 9], "x1"] = np.nan  # exercises the drop path
    before = data.copy(deep=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BartpySuiteWarning)
        fit = bps.cart("y ~ x1 + x2", data=data, sampler="cgm", chains=1, draws=20, tune=50, seed=1, progress=False)
    pd.testing.assert_frame_equal(data, before)
    new = GRID.copy()
    new_before = new.copy(deep=True)
    fit.predict(new)
    fit.predict(new, kind="predictive")
    pd.testing.assert_frame_equal(new, new_before)
    pd.testing.assert_frame_equal(data, before)


def test_classification_fit_and_predict_leave_the_data_unchanged(clf_data):
    data = clf_data.head(200).assign(label=lambda d: pd.Categorical(d["label"]))
    before = data.copy(deep=True)
    fit = bps.cart("label ~ x1 + x2", data=data, sampler="cgm", chains=1, draws=20, tune=50, seed=1, progress=False)
    pd.testing.assert_frame_equal(data, before)
    fit.predict(data, kind="prob")
    pd.testing.assert_frame_equal(data, before)
