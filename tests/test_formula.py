"""Tests of bartpy_suite.formula: design round trips, factors kept as factors, bad inputs.

Behaviour pinned with formulaic 1.2 (term names such as 'I(x2 ** 2)' are formulaic's).
"""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

from bartpy_suite.errors import (
    ArgumentError,
    BartpySuiteWarning,
    DataError,
    FormulaError,
)
from bartpy_suite.formula import Design, build_design


@pytest.fixture
def df() -> pd.DataFrame:
    rng = np.random.default_rng(42)
    n = 12
    return pd.DataFrame(
        {
            "y": rng.normal(size=n),
            "x1": rng.uniform(1.0, 10.0, size=n),
            "x2": np.arange(n) % 4,  # int64
            "x3": rng.normal(size=n),
            "g": pd.Categorical(list("abcd") * 3, categories=["d", "b", "a", "c", "unused"]),
            "s": ["u", "w", "v"] * 4,
            "flag": [True, False, False] * 4,
            "label": ["malignant", "benign"] * 6,
        }
    )


def _build_quiet(formula, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning expected unless a test says so
        return build_design(formula, data, **kw)


# ----------------------------------------------------------------------------------------
# numeric designs and formula syntax
# ----------------------------------------------------------------------------------------

def test_numeric_design(df):
    design, X, y = _build_quiet("y ~ x1 + x3", df)
    assert X.dtype == np.float64 and X.shape == (12, 2) and X.flags.c_contiguous
    np.testing.assert_array_equal(X, df[["x1", "x3"]].to_numpy())
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, df["y"].to_numpy())
    assert design.response == "y" and design.response_kind == "numeric"
    assert design.class_labels == ()
    assert design.predictors == ("x1", "x3")
    assert design.is_categorical == (False, False)
    assert design.levels == (None, None)
    assert design.n_predictors == 2 and design.n_levels == (0, 0)
    assert design.columns == ("x1", "x3")


def test_int_predictor_is_numeric_float64(df):
    design, X, _ = _build_quiet("y ~ x2", df)
    assert design.is_categorical == (False,)
    np.testing.assert_array_equal(X[:, 0], df["x2"].to_numpy(dtype=float))


def test_dot_expands_to_all_other_columns_in_data_order(df):
    design, X, _ = _build_quiet("y ~ .", df)
    assert design.predictors == ("x1", "x2", "x3", "g", "s", "flag", "label")
    assert design.is_categorical == (False, False, False, True, True, True, True)
    assert design.expanded_formula == "y ~ x1 + x2 + x3 + g + s + flag + label"
    assert X.shape == (12, 7)


def test_dot_minus_columns(df):
    design, _, _ = _build_quiet("y ~ . - x3 - label", df)
    assert design.predictors == ("x1", "x2", "g", "s", "flag")


def test_dot_excludes_transformed_response(df):
    data = df.assign(y=np.abs(df["y"]) + 1)
    design, _, y = _build_quiet("log(y) ~ . - g - s - flag - label", data)
    assert design.response == "log(y)"
    assert design.predictors == ("x1", "x2", "x3")
    np.testing.assert_allclose(y, np.log(data["y"].to_numpy()))


@pytest.mark.parametrize("formula", ["y ~ x1 + x3", "y ~ x1 + x3 - 1", "y ~ x1 + x3 + 0",
                                     "y ~ 1 + x1 + x3", "y ~ 0 + x1 + x3", "y~x1+x3+x1"])
def test_intercept_is_ignored(df, formula):
    design, X, _ = _build_quiet(formula, df)
    assert design.predictors == ("x1", "x3")
    np.testing.assert_array_equal(X, df[["x1", "x3"]].to_numpy())


def test_transforms(df):
    design, X, _ = _build_quiet("y ~ log(x1) + I(x1**2) + np.sqrt(x1) + exp(x3)", df)
    assert design.predictors == ("log(x1)", "I(x1 ** 2)", "np.sqrt(x1)", "exp(x3)")
    assert design.methods == ("python",) * 4
    assert design.sources == (("x1",), ("x1",), ("x1",), ("x3",))
    x1 = df["x1"].to_numpy()
    np.testing.assert_allclose(X[:, 0], np.log(x1))
    np.testing.assert_allclose(X[:, 1], x1**2)
    np.testing.assert_allclose(X[:, 2], np.sqrt(x1))
    np.testing.assert_allclose(X[:, 3], np.exp(df["x3"].to_numpy()))


def test_backquoted_names():
    data = pd.DataFrame({"my y": [1.0, 2.0, 3.0, 4.0], "my x": [3.0, 1.0, 2.0, 5.0]})
    design, X, y = _build_quiet("`my y` ~ `my x` + log(`my x`)", data)
    assert design.response == "my y"
    assert design.predictors == ("my x", "log(`my x`)")
    assert design.columns == ("my x",)
    assert design.expanded_formula == "my y ~ `my x` + log(`my x`)"
    np.testing.assert_allclose(X[:, 1], np.log(data["my x"].to_numpy()))
    np.testing.assert_array_equal(design.transform(data.drop(columns="my y")), X)


# ----------------------------------------------------------------------------------------
# factors stay factors
# ----------------------------------------------------------------------------------------

def test_category_keeps_category_order_and_drops_unused(df):
    design, X, _ = _build_quiet("y ~ g", df)
    assert design.is_categorical == (True,)
    assert design.levels == (("d", "b", "a", "c"),)  # 'unused' never occurs
    assert design.n_levels == (4,)
    expected = pd.Series(df["g"].astype(str)).map({"d": 0, "b": 1, "a": 2, "c": 3})
    np.testing.assert_array_equal(X[:, 0], expected.to_numpy(dtype=float))
    assert X.dtype == np.float64


def test_string_factor_sorted_labels(df):
    design, X, _ = _build_quiet("y ~ s", df)
    assert design.levels == (("u", "v", "w"),)
    np.testing.assert_array_equal(X[:3, 0], [0.0, 2.0, 1.0])


def test_object_dtype_factor(df):
    data = df.assign(s=df["s"].astype(object))
    design, X, _ = _build_quiet("y ~ s", data)
    assert design.levels == (("u", "v", "w"),)
    np.testing.assert_array_equal(X[:3, 0], [0.0, 2.0, 1.0])


def test_bool_predictor_is_factor(df):
    design, X, _ = _build_quiet("y ~ flag", df)
    assert design.is_categorical == (True,)
    assert design.levels == ((False, True),)
    assert all(type(v) is bool for v in design.levels[0])
    np.testing.assert_array_equal(X[:3, 0], [1.0, 0.0, 0.0])


def test_C_of_numeric_column_keeps_int_labels(df):
    design, X, _ = _build_quiet("y ~ C(x2) + x2", df)
    assert design.predictors == ("C(x2)", "x2")
    assert design.is_categorical == (True, False)
    assert design.levels[0] == (0, 1, 2, 3)
    assert all(type(v) is int for v in design.levels[0])
    np.testing.assert_array_equal(X[:, 0], X[:, 1])


def test_C_with_levels_uses_given_order(df):
    design, X, _ = _build_quiet("y ~ C(s, levels=['w', 'v', 'u'])", df)
    assert design.levels == (("w", "v", "u"),)
    np.testing.assert_array_equal(X[:3, 0], [2.0, 0.0, 1.0])


def test_C_with_levels_treats_other_values_as_missing(df):
    with pytest.warns(BartpySuiteWarning, match=r"dropped 4 of 12 rows .*C\(s, levels=\['u', 'v'\]\): 4"):
        design, X, _ = build_design("y ~ C(s, levels=['u', 'v'])", df)
    assert design.levels == (("u", "v"),)
    assert X.shape == (8, 1)


def test_every_level_code_occurs_in_training_X(df):
    design, X, _ = _build_quiet("y ~ g + s + flag", df)
    for j, lv in enumerate(design.levels):
        assert set(X[:, j]) == set(range(len(lv)))


def test_pandas_nullable_dtypes():
    data = pd.DataFrame(
        {
            "y": pd.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype="Float64"),
            "i": pd.array([1, 2, None, 4, 5], dtype="Int64"),
            "b": pd.array([True, False, True, None, False], dtype="boolean"),
        }
    )
    with pytest.warns(BartpySuiteWarning, match=r"dropped 2 of 5 rows"):
        design, X, y = build_design("y ~ i + b", data)
    assert design.is_categorical == (False, True)
    assert design.levels[1] == (False, True)
    np.testing.assert_array_equal(X, [[1.0, 1.0], [2.0, 0.0], [5.0, 0.0]])
    np.testing.assert_array_equal(y, [1.0, 2.0, 5.0])
    assert y.dtype == np.float64


# ----------------------------------------------------------------------------------------
# the response
# ----------------------------------------------------------------------------------------

def test_string_response_is_categorical_with_user_labels(df):
    design, _, y = _build_quiet("label ~ x1", df)
    assert design.response_kind == "categorical"
    assert design.class_labels == ("benign", "malignant")
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y[:4], [1, 0, 1, 0])
    labels = np.array(design.class_labels, dtype=object)[y]
    assert labels.tolist() == df["label"].tolist()


def test_bool_response_keeps_bool_labels(df):
    design, _, y = _build_quiet("flag ~ x1", df)
    assert design.class_labels == (False, True)
    assert all(type(v) is bool for v in design.class_labels)
    np.testing.assert_array_equal(y[:3], [1, 0, 0])


def test_category_response_keeps_category_order(df):
    data = df.assign(label=pd.Categorical(df["label"], categories=["malignant", "benign"]))
    design, _, y = _build_quiet("label ~ x1", data)
    assert design.class_labels == ("malignant", "benign")
    np.testing.assert_array_equal(y[:2], [0, 1])


def test_C_response_of_int_column(df):
    design, _, y = _build_quiet("C(x2) ~ x1", df)
    assert design.response_kind == "categorical"
    assert design.class_labels == (0, 1, 2, 3)
    np.testing.assert_array_equal(y, df["x2"].to_numpy())
    assert y.dtype == np.int64


def test_int_response_is_numeric(df):
    design, _, y = _build_quiet("x2 ~ x1", df)
    assert design.response_kind == "numeric"
    assert y.dtype == np.float64


# ----------------------------------------------------------------------------------------
# transform(newdata)
# ----------------------------------------------------------------------------------------

def test_transform_reproduces_training_X(df):
    design, X, _ = _build_quiet("y ~ log(x1) + I(x1**2) + g + s + flag + C(x2)", df)
    np.testing.assert_array_equal(design.transform(df), X)
    # the response is not needed, extra columns are ignored, row order is followed
    new = df.drop(columns="y").iloc[::-1].assign(extra=1.0)
    np.testing.assert_array_equal(design.transform(new), X[::-1])


def test_transform_maps_labels_not_codes(df):
    design, _, _ = _build_quiet("y ~ g + s", df)
    new = pd.DataFrame(
        {
            # a category column with another category order, and an object column
            "g": pd.Categorical(["c", "d", "a"], categories=["a", "c", "d"]),
            "s": np.array(["w", "u", "u"], dtype=object),
        }
    )
    np.testing.assert_array_equal(design.transform(new), [[3.0, 2.0], [0.0, 0.0], [2.0, 0.0]])


def test_transform_factor_from_strings_given_category(df):
    design, _, _ = _build_quiet("y ~ s", df)
    new = pd.DataFrame({"s": pd.Categorical(["v", "w"])})
    np.testing.assert_array_equal(design.transform(new), [[1.0], [2.0]])


def test_transform_uses_training_state_of_stateful_transforms(df):
    design, X, _ = _build_quiet("y ~ center(x1)", df)
    mean = df["x1"].mean()
    np.testing.assert_allclose(X[:, 0], df["x1"].to_numpy() - mean)
    new = pd.DataFrame({"x1": [0.0, mean]})
    np.testing.assert_allclose(design.transform(new)[:, 0], [-mean, 0.0], atol=1e-12)
    again = Design.from_json(design.to_json())
    np.testing.assert_allclose(again.transform(new)[:, 0], [-mean, 0.0], atol=1e-12)


def test_stateful_transform_fitted_on_rows_kept(df):
    data = df.assign(x1=df["x1"].where(df.index != 0))  # one NaN
    with pytest.warns(BartpySuiteWarning, match=r"dropped 1 of 12 rows.*center\(x1\): 1"):
        design, X, _ = build_design("y ~ center(x1)", data)
    kept = data["x1"].to_numpy()[1:]
    np.testing.assert_allclose(X[:, 0], kept - kept.mean())


def test_transform_empty_newdata(df):
    design, _, _ = _build_quiet("y ~ x1 + g", df)
    out = design.transform(df.iloc[:0])
    assert out.shape == (0, 2) and out.dtype == np.float64


def test_transform_object_numbers_for_numeric_predictor(df):
    design, _, _ = _build_quiet("y ~ x1", df)
    new = pd.DataFrame({"x1": pd.Series([1.5, 2], dtype=object)})
    np.testing.assert_array_equal(design.transform(new), [[1.5], [2.0]])


def test_transform_drop_and_return_index(df):
    design, _, _ = _build_quiet("y ~ x1 + g", df)
    new = pd.DataFrame({"x1": [1.0, np.nan, 3.0], "g": ["a", "b", None]}, index=[10, 11, 12])
    with pytest.warns(BartpySuiteWarning, match=r"dropped 2 of 3 rows of newdata"):
        X, index = design.transform(new, na_action="drop", return_index=True)
    np.testing.assert_array_equal(X, [[1.0, 2.0]])
    assert index.tolist() == [10]


def test_build_return_index(df):
    data = df.assign(x1=df["x1"].where(df.index % 5 != 0))
    with pytest.warns(BartpySuiteWarning):
        design, X, y, index = build_design("y ~ x1", data, return_index=True)
    assert index.tolist() == [i for i in range(12) if i % 5 != 0]
    np.testing.assert_array_equal(y, data.loc[index, "y"].to_numpy())


# ----------------------------------------------------------------------------------------
# JSON and pickle
# ----------------------------------------------------------------------------------------

def test_json_round_trip_is_plain_json_and_exact(df):
    design, X, _ = _build_quiet(
        "label ~ log(x1) + I(x1**2) + g + s + flag + C(x2) + scale(x3)", df
    )
    text = design.to_json()
    assert isinstance(text, str) and text.isascii()
    payload = json.loads(text)  # plain JSON: no pickle, no custom objects
    assert payload["format"] == "bartpy_suite.Design" and payload["version"] == 2
    # each predictor is stored as an expression tree, never as Python text to evaluate
    assert payload["terms"][0] == {"fn": "log", "args": [{"col": "x1"}]}
    assert payload["terms"][1] == {"op": "**", "args": [{"col": "x1"}, {"num": 2}]}
    assert payload["terms"][2] == {"col": "g"}
    assert payload["terms"][5] == {"fn": "C", "args": [{"col": "x2"}], "levels": None}
    x3 = df["x3"].to_numpy()
    assert payload["terms"][6] == {"fn": "scale", "args": [{"col": "x3"}], "center": x3.mean(),
                                   "scale": np.sqrt(np.sum((x3 - x3.mean()) ** 2) / 11)}
    assert payload["class_labels"] == ["benign", "malignant"]
    assert payload["levels"][2:6] == [["d", "b", "a", "c"], ["u", "v", "w"], [False, True],
                                      [0, 1, 2, 3]]
    again = Design.from_json(text)
    assert again == design
    assert hash(again) == hash(design)
    assert again.levels[4] == (False, True) and type(again.levels[4][0]) is bool
    assert type(again.levels[5][0]) is int
    np.testing.assert_array_equal(again.transform(df), X)
    assert again.to_json() == text


def test_json_float_labels_round_trip():
    data = pd.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "x": [0.5, 1.5, 0.5, 2.25]})
    design, X, _ = _build_quiet("y ~ C(x)", data)
    assert design.levels == ((0.5, 1.5, 2.25),)
    again = Design.from_json(design.to_json())
    assert again.levels == design.levels and type(again.levels[0][0]) is float


def test_pickle_round_trip(df):
    design, X, _ = _build_quiet("y ~ center(x1) + g", df)
    again = pickle.loads(pickle.dumps(design))
    assert again == design
    np.testing.assert_array_equal(again.transform(df), X)


def test_from_json_rejects_other_text():
    with pytest.raises(FormulaError, match=r"not a saved bartpy_suite design \(invalid JSON"):
        Design.from_json("{nope")
    with pytest.raises(FormulaError, match=r"no 'format' marker"):
        Design.from_json('{"a": 1}')
    with pytest.raises(FormulaError, match=r"format version 99"):
        Design.from_json('{"format": "bartpy_suite.Design", "version": 99}')


def test_repr_is_short(df):
    design, _, _ = _build_quiet("label ~ x1 + g", df)
    assert repr(design) == (
        "Design('label ~ x1 + g'; response label (categorical, classes ['benign', "
        "'malignant']); predictors x1 (numeric), g (factor, 4 levels))"
    )


# ----------------------------------------------------------------------------------------
# the caller's DataFrame is never modified
# ----------------------------------------------------------------------------------------

def test_input_unchanged(df):
    data = df.assign(x1=df["x1"].where(df.index != 3), s=df["s"].where(df.index != 5))
    copy = data.copy(deep=True)
    with pytest.warns(BartpySuiteWarning):
        design, X, y = build_design("y ~ center(x1) + log(x1) + g + s + flag", data)
    assert data.equals(copy)
    assert data.dtypes.equals(copy.dtypes)
    X[:] = -1.0
    y[:] = -1.0
    assert data.equals(copy)
    new = copy.copy(deep=True)
    with pytest.warns(BartpySuiteWarning, match="dropped 2 of 12 rows of newdata"):
        design.transform(new, na_action="drop")
    assert new.equals(copy)


# ----------------------------------------------------------------------------------------
# warnings
# ----------------------------------------------------------------------------------------

def test_drop_warns_with_count_and_points_at_caller(df):
    data = df.assign(x1=df["x1"].where(df.index > 1), y=df["y"].where(df.index != 5))
    with pytest.warns(BartpySuiteWarning) as record:
        design, X, y = build_design("y ~ x1 + g", data)
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("dropped 3 of 12 rows with missing values (na_action='drop')")
    assert "y: 1" in message and "x1: 2" in message
    assert record[0].filename == __file__
    assert X.shape == (9, 2) and y.shape == (9,)


def test_nan_produced_by_transform_is_dropped(df):
    data = df.assign(x3=np.where(df.index < 2, -1.0, df.index + 1.0))
    with pytest.warns(BartpySuiteWarning, match=r"dropped 2 of 12 rows.*log\(x3\): 2"):
        _, X, _ = build_design("y ~ log(x3)", data)
    assert X.shape == (10, 1)


def test_constant_response_warns(df):
    with pytest.warns(BartpySuiteWarning, match=r"the response 'y' is constant \(1.5\)"):
        build_design("y ~ x1", df.assign(y=1.5))


def test_constant_predictor_warns(df):
    with pytest.warns(BartpySuiteWarning, match=r"predictor 'x3' is constant \(every row is 2\.0\); it offers no split"):
        _, X, _ = build_design("y ~ x1 + x3", df.assign(x3=2.0))
    assert X.shape == (12, 2)


def test_single_level_factor_warns(df):
    with pytest.warns(BartpySuiteWarning, match=r"predictor 's' is constant \(every row has level 'u'\)"):
        build_design("y ~ x1 + s", df.assign(s="u"))


# ----------------------------------------------------------------------------------------
# bad input at build time
# ----------------------------------------------------------------------------------------

def test_missing_column_named_with_suggestion():
    data = pd.DataFrame({"y": [1.0, 2.0], "height": [1.0, 2.0], "x1": [0.0, 1.0]})
    with pytest.raises(FormulaError, match=r"names column\(s\) not in data: 'heigth' \(did you mean 'height'\?\)"):
        build_design("y ~ heigth + x1", data)
    with pytest.raises(FormulaError, match=r"'X1' \(did you mean 'x1'\?\)\. Columns of data: 'y', 'height', 'x1'"):
        build_design("y ~ X1", data)
    with pytest.raises(FormulaError, match=r"not in data: 'yy' \(did you mean 'y'\?\)"):
        build_design("yy ~ x1", data)


def test_missing_column_inside_expression(df):
    with pytest.raises(FormulaError, match=r"predictor 'log\(xx1\)' uses 'xx1', which is neither a column of data nor a known transform \(did you mean 'x1'"):
        build_design("y ~ log(xx1)", df)
    with pytest.raises(FormulaError, match=r"uses 'lg'.*did you mean 'log'"):
        build_design("y ~ lg(x1)", df)


def test_misspelt_column_after_minus_is_an_error(df):
    # formulaic would silently ignore '- x33'; the user meant to remove something.
    with pytest.raises(FormulaError, match=r"not in data: 'x33' \(did you mean 'x3'\?\)"):
        build_design("y ~ . - x33", df)


@pytest.mark.parametrize("formula, term", [("y ~ x1:x3", "x1:x3"), ("y ~ x1*x3", "x1:x3"),
                                           ("y ~ (x1 + x3)**2", "x1:x3"), ("y ~ x1 + g:s", "g:s")])
def test_interactions_refused(df, formula, term):
    with pytest.raises(FormulaError, match=rf"interaction term '{term}' .* trees find interactions themselves, so list main effects only"):
        build_design(formula, df)


def test_interaction_message_suggests_main_effects(df):
    with pytest.raises(FormulaError, match=r"e\.g\. 'y ~ x1 \+ x3'$"):
        build_design("y ~ x1*x3", df)


@pytest.mark.parametrize("data, match", [
    (np.zeros((3, 2)), r"data must be a pandas DataFrame, got ndarray; wrap the array as pd.DataFrame"),
    ({"y": [1.0]}, r"data must be a pandas DataFrame, got dict; convert it with pd.DataFrame\(data\)"),
    ([1, 2], r"data must be a pandas DataFrame, got list"),
    (pd.Series([1.0]), r"data must be a pandas DataFrame, got Series"),
])
def test_data_not_a_dataframe(data, match):
    with pytest.raises(DataError, match=match):
        build_design("y ~ x", data)


def test_duplicate_column_names():
    data = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["y", "x", "x"])
    with pytest.raises(DataError, match=r"data has duplicate column names: 'x' \(2 times\)"):
        build_design("y ~ x", data)


def test_empty_data(df):
    with pytest.raises(DataError, match=r"data has no rows"):
        build_design("y ~ x1", df.iloc[:0])


@pytest.mark.parametrize("column, formula, label", [
    ("y", "y ~ x1", "response 'y'"),
    ("x1", "y ~ x1", "predictor 'x1'"),
    ("x1", "y ~ x3 + x1", "predictor 'x1'"),
])
def test_inf_is_always_an_error(df, column, formula, label):
    data = df.copy()
    data.loc[[2, 7], column] = [np.inf, -np.inf]
    for na_action in ("drop", "raise"):
        with pytest.raises(DataError, match=rf"{label} has infinite values in 2 rows \(index 2, 7\)"):
            build_design(formula, data, na_action=na_action)


def test_inf_produced_by_transform(df):
    with pytest.raises(DataError, match=r"predictor 'log\(x2\)' has infinite values in 3 rows"):
        build_design("y ~ log(x2)", df)


def test_nan_with_raise_names_column_and_count(df):
    data = df.assign(x1=df["x1"].where(~df.index.isin([1, 4, 6])))
    with pytest.raises(DataError, match=r"predictor 'x1' has missing values in 3 rows \(index 1, 4, 6\)\. With na_action='raise'"):
        build_design("y ~ x1 + x3", data, na_action="raise")
    data = df.assign(s=df["s"].where(df.index != 0))
    with pytest.raises(DataError, match=r"predictor 's' has missing values in 1 row \(index 0\)"):
        build_design("y ~ s", data, na_action="raise")


def test_nan_from_transform_with_raise_says_so(df):
    data = df.assign(x3=np.where(df.index < 2, -1.0, 1.0))
    with pytest.raises(DataError, match=r"predictor 'log\(x3\)' has missing values in 2 rows \(index 0, 1\) \(produced by the transform"):
        build_design("y ~ log(x3)", data, na_action="raise")


def test_all_rows_missing(df):
    with pytest.raises(DataError, match=r"every one of the 12 rows has a missing value in the used terms \(x1: 12\)"):
        build_design("y ~ x1", df.assign(x1=np.nan))


@pytest.mark.parametrize("response", ["label", "flag"])
def test_single_class_response(df, response):
    data = df.assign(**{response: df[response].iloc[0]})
    with pytest.raises(DataError, match=rf"the categorical response '{response}' has a single class"):
        build_design(f"{response} ~ x1", data)


def test_single_class_after_dropping(df):
    data = df.assign(x1=df["x1"].where(df["label"] == "benign"))
    with pytest.raises(DataError, match=r"single class 'benign' in the 6 rows used"):
        with pytest.warns(BartpySuiteWarning):
            build_design("label ~ x1", data)


@pytest.mark.parametrize("na_action, match", [
    ("omit", r"unknown na_action 'omit'; valid options: 'drop' .* or 'raise'; use 'drop' for R's na.omit"),
    ("dorp", r"unknown na_action 'dorp'.*\(did you mean 'drop'\?\)"),
    (None, r"unknown na_action None"),
])
def test_unknown_na_action(df, na_action, match):
    with pytest.raises(ArgumentError, match=match):
        build_design("y ~ x1", df, na_action=na_action)


@pytest.mark.parametrize("formula, match", [
    ("~ x1", r"formula '~ x1' has no response; write it as 'response ~ predictors'"),
    ("y ~ 1", r"formula 'y ~ 1' has no predictors"),
    ("y ~ -1", r"formula 'y ~ -1' has no predictors"),
    ("y ~ (x1", r"cannot parse formula 'y ~ \(x1': Could not find matching context marker"),
    ("y ~ x1 | x3", r"has several parts"),
    ("y + x3 ~ x1", r"must have exactly one response term on the left of '~', got 'y \+ x3'"),
    ("y ~ x1 + log(y)", r"the response 'y' also appears among the predictors \('log\(y\)'\)"),
    ("y ~ poly(x1, 2)", r"predictor 'poly\(x1, 2\)' produces several columns"),
    ("y ~ I(1)", r"predictor 'I\(1\)' evaluates to the single value 1, not one value per row"),
    ("y ~ 2:x1", r"scales a term by a constant"),
    ("y ~ log(s)", r"cannot evaluate predictor 'log\(s\)': log\(\) needs numbers, but column 's' holds text \(dtype .*, e\.g\. 'u'\)"),
])
def test_bad_formulas(df, formula, match):
    with pytest.raises(FormulaError, match=match):
        build_design(formula, df)


def test_response_from_several_columns_may_share_one_with_a_predictor(df):
    design, _, y = _build_quiet("I(x3 - x1) ~ x1", df)
    np.testing.assert_allclose(y, (df["x3"] - df["x1"]).to_numpy())
    with pytest.raises(FormulaError, match=r"the response 'log\(x1\)' also appears among the predictors \('x1'\)"):
        build_design("log(x1) ~ x1", df)


def test_formula_not_a_string(df):
    with pytest.raises(FormulaError, match=r"formula must be a string such as 'y ~ x1 \+ x2', got int"):
        build_design(3, df)


def test_unsupported_dtype_named(df):
    data = df.assign(when=pd.date_range("2020-01-01", periods=12))
    with pytest.raises(FormulaError, match=r"predictor 'when' has dtype datetime64.*leave it out of the formula \(e\.g\. '\.\.\. - when'\)"):
        build_design("y ~ .", data)


def test_dot_needs_string_column_names():
    data = pd.DataFrame(np.ones((3, 2))).assign(y=[1.0, 2.0, 3.0])
    with pytest.raises(DataError, match=r"'\.' in the formula needs string column names, but data has column\(s\) 0, 1"):
        build_design("y ~ .", data)


def test_unstorable_labels(df):
    data = df.assign(when=pd.date_range("2020-01-01", periods=12))
    with pytest.raises(DataError, match=r"predictor 'C\(when\)' has labels of type Timestamp"):
        build_design("y ~ C(when)", data)


# ----------------------------------------------------------------------------------------
# bad input at transform time
# ----------------------------------------------------------------------------------------

@pytest.fixture
def fitted(df):
    return _build_quiet("y ~ log(x1) + x3 + g + s", df)[0]


def test_transform_missing_columns_named(fitted, df):
    with pytest.raises(FormulaError, match=r"newdata lacks column\(s\) needed by the model: 'x1' \(used by 'log\(x1\)'\); 'g'\. The model was fitted with 'y ~ log\(x1\) \+ x3 \+ g \+ s'"):
        fitted.transform(df.drop(columns=["x1", "g"]))
    with pytest.raises(FormulaError, match=r"'x3' \(did you mean 'X3'\?\)"):
        fitted.transform(df.rename(columns={"x3": "X3"}))


def test_transform_unseen_levels_named(fitted, df):
    new = df.assign(s=["u", "zz", "v", "q"] * 3)
    with pytest.raises(DataError, match=r"predictor 's' has level\(s\) not seen in the training data: 'q', 'zz'; known levels: 'u', 'v', 'w'"):
        fitted.transform(new)
    new = df.assign(g=pd.Categorical(["e"] * 12))
    with pytest.raises(DataError, match=r"predictor 'g' has level\(s\) not seen in the training data: 'e'"):
        fitted.transform(new)


def test_transform_inf_named(fitted, df):
    with pytest.raises(DataError, match=r"predictor 'x3' has infinite values in newdata: 1 row \(index 4\)"):
        fitted.transform(df.assign(x3=np.where(df.index == 4, np.inf, 0.0)))
    with pytest.raises(DataError, match=r"predictor 'log\(x1\)' has infinite values in newdata"):
        fitted.transform(df.assign(x1=0.0))


def test_transform_nan_named(fitted, df):
    new = df.assign(x3=df["x3"].where(df.index != 2), s=df["s"].where(df.index > 7))
    with pytest.raises(DataError, match=r"newdata has missing values: predictor 'x3': 1 row \(index 2\); predictor 's': 8 rows \(first index 0, 1, 2, 3, 4, \.\.\.\)"):
        fitted.transform(new)


def test_transform_kind_mismatch(fitted, df):
    with pytest.raises(DataError, match=r"predictor 'x3' was numeric in the training data, but newdata gives values of dtype .* \(e\.g\. 'a'\); convert the column to numbers"):
        fitted.transform(df.assign(x3="a"))


def test_transform_not_a_dataframe(fitted):
    with pytest.raises(DataError, match=r"newdata must be a pandas DataFrame, got ndarray"):
        fitted.transform(np.zeros((2, 4)))


def test_transform_unknown_na_action(fitted, df):
    with pytest.raises(ArgumentError, match=r"unknown na_action 'omit'"):
        fitted.transform(df, na_action="omit")
