"""Silent coercions made loud: a 0/1 numeric response, a mostly numeric text column, too many
levels (named), a dict passed to predict, rows dropped because a transform made them missing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import BartpySuiteWarning, DataError
from bartpy_suite.formula import build_design

QUIET = {"chains": 1, "draws": 10, "tune": 10, "seed": 1, "progress": False, "check_mixing": False}


def frame(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(1, 10, size=n), "y": rng.normal(size=n)})


def test_integer_zero_one_response_warns_how_to_get_a_classifier():
    df = frame().assign(flag=lambda d: (d["x"] > 5).astype(int))
    with pytest.warns(BartpySuiteWarning, match=r"response 'flag' holds only the numbers 0 and 1, so it is fitted "
                                                r"as a regression; for a classifier write the formula as "
                                                r"'C\(flag\) ~ \.\.\.' or convert the column first"):
        _, _, y = build_design("flag ~ x", df)
    assert y.dtype == np.float64
    design, _, _ = build_design("C(flag) ~ x", df)  # the advice works, without a warning
    assert design.response_kind == "categorical"


def test_mostly_numeric_text_column_warns_with_the_odd_values():
    df = frame(31)
    text = df["x"].round(2).astype(str)
    text.iloc[7] = "1,000"
    df = df.assign(amount=text)
    with pytest.warns(BartpySuiteWarning, match=r"predictor 'amount' is text, but 97% of its rows hold numbers; it "
                                                r"is fitted as a factor with 31 levels\. The values that are not "
                                                r"numbers: '1,000'\."):
        build_design("y ~ amount", df)
    design, _, _ = build_design("y ~ C(amount)", df)  # asked for a factor: silent
    assert design.is_categorical == (True,)
    words = df.assign(g=np.where(df["x"] > 5, "high", "low"))
    build_design("y ~ g", words)  # a real factor: silent (the test config makes warnings errors)


def test_too_many_levels_error_names_the_column():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x": rng.uniform(size=200), "code": [f"c{i % 70}" for i in range(200)],
                       "y": rng.normal(size=200)})
    with pytest.raises(DataError, match=r"categorical predictor 'code' \(column 1\) has 70 levels; at most 63"):
        bps.cart("y ~ x + code", data=df, sampler="cgm", **QUIET)


def test_predict_with_a_dict_says_to_wrap_it():
    fit = bps.cart("y ~ x", data=frame(), sampler="cgm", **QUIET)
    with pytest.raises(DataError, match=r"newdata must be a DataFrame or a 2-D array, got a dict; wrap it in a "
                                        r"DataFrame: pd.DataFrame\("):
        fit.predict({"x": 2.0})
    with pytest.raises(DataError, match=r"newdata must be a DataFrame or a 2-D numeric array, got list"):
        fit.predict([["a"]])


def test_rows_made_missing_by_a_transform_are_reported_with_the_reason():
    df = frame()
    df.loc[[3, 5], "x"] = [-1.0, -2.0]  # log of a negative number is nan (log(0) = -inf is an error)
    df.loc[8, "y"] = np.nan  # a genuinely missing response
    with pytest.warns(BartpySuiteWarning, match=r"dropped 3 of 40 rows with missing values \(na_action='drop'\); "
                                                r"missing per term: y: 1, log\(x\): 2 \(2 produced by the transform "
                                                r"from values that are present: outside its domain, e.g. log of a "
                                                r"number <= 0"):
        _, x, _ = build_design("y ~ log(x)", df)
    assert x.shape == (37, 1)
