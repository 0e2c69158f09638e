"""``Fit.predict`` on new rows with missing predictors (``na_action``) and on arrays of the wrong
shape: the default error names the rows and predictors, ``na_action="pass"`` gives NaN rows in
the input's order and predicts the other rows exactly as without them, a ``na_action="split"``
fit keeps routing missing values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, DataError

QUIET = {"progress": False, "check_mixing": False, "log_likelihood": False}


@pytest.fixture(scope="module")
def cart(cgm):
    return bps.cart("y ~ x1 + x2", data=cgm, chains=2, draws=60, tune=100, seed=1, **QUIET)


@pytest.fixture(scope="module")
def iris_cart():
    iris = bps.datasets.load("iris")
    return iris, bps.cart("Species ~ .", data=iris, chains=2, draws=40, tune=60, seed=1, **QUIET)


def _holes(frame: pd.DataFrame) -> pd.DataFrame:
    """Six rows labelled a-f (so a message must use labels, not positions), with x1 missing in
    'b' and the factor x2 missing in 'e'."""
    new = frame.drop(columns="y").head(6).copy()
    new.index = list("abcdef")
    new.loc["b", "x1"] = np.nan
    new.loc["e", "x2"] = np.nan
    return new


def test_default_error_names_rows_predictors_and_the_way_out(cart, cgm):
    new = _holes(cgm)
    with pytest.raises(DataError) as err:
        cart.predict(new)
    text = str(err.value)
    assert "2 rows (index 'b', 'e')" in text
    assert "predictor 'x1': 1 row (index 'b')" in text and "predictor 'x2': 1 row (index 'e')" in text
    assert "na_action='pass'" in text
    with pytest.raises(DataError, match="no rule for a missing value"):
        cart.predict(new, na_action="raise")
    for rows in (new, None, new.drop(index=["b", "e"])):  # checked even when nothing is missing
        with pytest.raises(ArgumentError, match="na_action must be None, 'raise' or 'pass', got 'omit'"):
            cart.predict(rows, na_action="omit")


@pytest.mark.parametrize("kind", ["mean", "predictive"])
def test_pass_gives_nan_rows_and_the_other_rows_unchanged(cart, cgm, kind):
    new = _holes(cgm)
    before = new.copy()
    out = cart.predict(new, kind=kind, level=0.9, na_action="pass")
    pd.testing.assert_frame_equal(new, before)  # the input is not modified
    assert list(out.index) == list("abcdef")
    assert out.loc[["b", "e"]].isna().all().all()
    # the complete rows get exactly what they get without the others (the predictive noise is
    # drawn for the rows predicted, so it is bit-identical too)
    alone = cart.predict(new.drop(index=["b", "e"]), kind=kind, level=0.9)
    pd.testing.assert_frame_equal(out.drop(index=["b", "e"]), alone)


def test_pass_with_samples_duplicate_labels_and_arrays(cart, cgm):
    new = _holes(cgm)
    draws = cart.predict(new, samples=True, na_action="pass")
    assert draws.dims == ("chain", "draw", "obs") and draws.sizes["obs"] == 6
    assert np.isnan(draws.values[:, :, [1, 4]]).all()
    np.testing.assert_array_equal(draws.values[:, :, [0, 2, 3, 5]],
                                  cart.predict(new.iloc[[0, 2, 3, 5]], samples=True).values)
    # rows are placed by position, so repeated index labels are fine
    twice = pd.concat([new, new])
    out = cart.predict(twice, na_action="pass")
    assert out["mean"].isna().to_numpy().tolist() == [False, True, False, False, True, False] * 2
    # an array: codes of the factor as numbers, NaN for missing
    x = np.column_stack([new["x1"].to_numpy(), new["x2"].cat.codes.to_numpy().astype(float)])
    x[4, 1] = np.nan
    arr = cart.predict(x, na_action="pass")
    np.testing.assert_array_equal(arr["mean"].to_numpy(), out["mean"].to_numpy()[:6])
    # every row missing: all NaN, no error
    empty = cart.predict(new.loc[["b", "e"]], na_action="pass")
    assert empty.shape == (2, 3) and empty.isna().all().all()


def test_pass_for_a_classifier_prob_and_class(iris_cart):
    iris, fit = iris_cart
    new = iris.drop(columns="Species").iloc[[0, 60, 120]].copy()
    new.iloc[1, 2] = np.nan
    prob = fit.predict(new, kind="prob", na_action="pass")
    assert prob.loc[60].isna().all()
    pd.testing.assert_frame_equal(prob.loc[[0, 120]], fit.predict(new.loc[[0, 120]], kind="prob"))
    cls = fit.predict(new, kind="class", na_action="pass")
    assert cls["class"].isna().tolist() == [False, True, False]
    draws = fit.predict(new, samples=True, na_action="pass")
    assert draws.dims == ("chain", "draw", "obs", "class")
    assert np.isnan(draws.values[:, :, 1]).all() and not np.isnan(draws.values[:, :, [0, 2]]).any()
    assert list(draws["class"].values) == ["setosa", "versicolor", "virginica"]


def test_split_fit_keeps_routing_missing_values(cgm):
    holes = cgm.copy()
    holes.loc[holes.index[::7], "x1"] = np.nan
    fit = bps.cart("y ~ x1 + x2", data=holes, na_action="split", chains=1, draws=40, tune=60, seed=2, **QUIET)
    new = _holes(cgm)
    routed = fit.predict(new)
    assert not routed.isna().any().any()  # a missing value follows each rule's missing branch
    pd.testing.assert_frame_equal(fit.predict(new, na_action="pass"), routed)
    with pytest.raises(DataError, match="you asked for na_action='raise'"):
        fit.predict(new, na_action="raise")


def test_soft_tree_pass():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x0": rng.uniform(0, 1, 40), "x1": rng.uniform(0, 1, 40)})
    df["y"] = (df["x0"] > 0.5) + 0.1 * rng.standard_normal(40)
    fit = bps.soft_tree("y ~ .", data=df, chains=1, draws=4, tune=2, seed=1, sampler_options={"warmup": 5},
                        progress=False)
    new = df.drop(columns="y").head(4).copy()
    new.iloc[2, 1] = np.nan
    with pytest.raises(DataError, match=r"1 row \(index 2\).*na_action='pass'"):
        fit.predict(new)
    out = fit.predict(new, na_action="pass")
    assert out["mean"].isna().tolist() == [False, False, True, False]
    pd.testing.assert_frame_equal(out.loc[[0, 1, 3]], fit.predict(new.loc[[0, 1, 3]]))


@pytest.mark.parametrize("bad, message", [
    (np.zeros((2, 3, 2)), r"3-D array of shape \(2, 3, 2\); expected a DataFrame or a 2-D array \(rows, 2 "
                          r"columns: x1, x2\)"),
    (np.float64(3.0), "single number; expected a DataFrame or a 2-D array"),
    (np.zeros(5), "1-D array of 5 values; .* needs 2 values"),
    (np.zeros((3, 5)), "has 5 columns; expected a DataFrame or a 2-D array"),
    (np.array([[1.0, np.inf]]), r"infinite values \(first at row 0, predictor 'x2'\)"),
])
def test_arrays_of_the_wrong_shape_say_what_is_expected(cart, bad, message):
    with pytest.raises(DataError, match=message):
        cart.predict(bad)


def test_a_one_dimensional_row_still_predicts(cart):
    one = cart.predict(np.array([2.0, 1.0]))
    pd.testing.assert_frame_equal(one, cart.predict(np.array([[2.0, 1.0]])))
