"""Fit files never run code: formula terms are stored as whitelisted expression trees (design JSON
version 2), version-1 designs are parsed, never evaluated, and anything outside the whitelist is
refused at load with the term named. Also the formula-side input hardening: float64 arithmetic,
warnings for text columns of numbers or dates, and messages that name the real cause of missing
values."""

from __future__ import annotations

import ast
import builtins
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import BartpySuiteWarning, DataError, FitFileError, FormulaError
from bartpy_suite.formula import Design, build_design
from bartpy_suite.formula.expr import ALLOWED, check_tree, parse_term

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
LEGACY = DATA / "v1_transforms_cart.nc"
DESIGN_ATTR = "bartpy_suite_design"
CONFIG_ATTR = "bartpy_suite_config"
# Predictions are means and quantiles over draws; as in test_legacy_files.py, numpy's reductions
# may differ in the last bit between CPUs (vector width), far below any change of a draw.
RTOL = 1e-12
# The design matrix's transforms (log, exp, ...) come from numpy's vectorised math, whose last bit
# depends on the CPU's vector width (a CPU without AVX-512 gave 1 ulp on 2 of 297 entries of the
# committed matrix); 1e-14 is a few ulps, far below any change of a transform's meaning.
DESIGN_RTOL = 1e-14

sys.path.insert(0, str(DATA))
import make_v1_transforms as v1  # noqa: E402  (the script that wrote the legacy file)


def evil(marker: Path) -> str:
    """The issue's payload: a term that would run a shell command if it were evaluated."""
    return f"I(x1 + __import__('os').system('touch {marker}'))"


@pytest.fixture
def df() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 30
    return pd.DataFrame({
        "y": rng.normal(size=n),
        "x1": rng.uniform(0.5, 9.0, size=n),
        "x3": rng.normal(size=n),
        "s": ["u", "v", "w"] * 10,
        "my x": rng.uniform(1.0, 2.0, size=n),
    })


def quiet(formula, data, **kw):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return build_design(formula, data, **kw)


def read_design(path: Path) -> dict:
    with netCDF4.Dataset(path) as nc:
        return json.loads(nc["constant_data"].getncattr(DESIGN_ATTR))


def write_design(path: Path, payload: dict | str) -> None:
    """Replace the saved design; as a careful attacker would, also make the configuration's
    predictor names agree with it, so that the file's consistency check (``file_check``) passes
    and the refusal tested is the formula whitelist's."""
    with netCDF4.Dataset(path, "a") as nc:
        nc["constant_data"].setncattr(DESIGN_ATTR, payload if isinstance(payload, str) else json.dumps(payload))
        if isinstance(payload, dict):
            config = json.loads(nc["constant_data"].getncattr(CONFIG_ATTR))
            config["predictors"] = payload["predictors"]
            nc["constant_data"].setncattr(CONFIG_ATTR, json.dumps(config))


def v2_file(tmp_path: Path) -> Path:
    """The committed fit with its design in version 2 (as a fit made now saves it)."""
    path = tmp_path / "v2.nc"
    shutil.copy(LEGACY, path)
    write_design(path, bps.load(LEGACY).design.to_json())
    return path


# ----------------------------------------------------------------------------------------
# the committed version-1 file: loads, same design matrix, same predictions
# ----------------------------------------------------------------------------------------

def test_version_1_file_with_transforms_predicts_as_before(tmp_path):
    expected = np.load(DATA / "v1_transforms_predictions.npz")
    assert read_design(LEGACY)["version"] == 1
    fit = bps.load(LEGACY)
    new = v1.new_rows()
    np.testing.assert_allclose(fit.design.transform(new), expected["design_matrix"], rtol=DESIGN_RTOL, atol=0)
    np.testing.assert_allclose(fit.predict(new, level=0.9).to_numpy(), expected["predictions"], rtol=RTOL, atol=0)
    # as a version-2 file (trees, no expression text to evaluate) it predicts the same
    path = v2_file(tmp_path)
    payload = read_design(path)
    assert payload["version"] == 2 and "transform_state" not in payload
    assert payload["terms"][3] == {"fn": "scale", "args": [{"col": "x1"}], "center": 5.061852242740406, "scale": None}
    again = bps.load(path)
    assert again.design == fit.design
    np.testing.assert_allclose(again.predict(new, level=0.9).to_numpy(), expected["predictions"], rtol=RTOL, atol=0)


# ----------------------------------------------------------------------------------------
# crafted files are refused at load, and nothing runs
# ----------------------------------------------------------------------------------------

def test_edited_version_1_file_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.nc"
    shutil.copy(LEGACY, path)
    payload = read_design(path)
    payload["predictors"][7] = evil(marker)  # was 'log2(x1)'
    write_design(path, payload)
    with pytest.raises(FitFileError, match=r"evil\.nc' is not a usable bartpy_suite fit: .*the saved design's predictor \"I\(x1 \+ __import__\('os'\)\.system\(.*\)\)\" "
                                           r"calls attribute access \(__import__\('os'\)\.system\), which is not a function a "
                                           r"formula may use; it was refused and nothing in it was evaluated\. Only fits whose "
                                           r"terms fit this whitelist can be loaded: A formula term may contain column names"):
        bps.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("edit, match", [
    (lambda p, m: p["terms"].__setitem__(0, {"fn": "system", "args": [{"col": f"touch {m}"}]}),
     r"predictor 'log\(x1\)' calls 'system' with the fields \['args', 'fn'\], which is not an allowed function"),
    (lambda p, m: p["terms"].__setitem__(0, evil(m)),
     r"predictor 'log\(x1\)' holds str \"I\(x1 \+ __import__"),
    (lambda p, m: p["terms"].__setitem__(0, {"col": "x1", "eval": evil(m)}),
     r"predictor 'log\(x1\)' has a node with the fields \['col', 'eval'\], which is not allowed"),
    # a file that claims to be version 1 goes through the parser, which refuses the text
    (lambda p, m: p.update(version=1, methods=["python"] * 9, transform_state=[{}] * 9,
                           predictors=[evil(m)] + p["predictors"][1:]),
     r"predictor \"I\(x1 \+ __import__.*calls attribute access"),
])
def test_edited_version_2_file_is_refused_and_nothing_runs(tmp_path, edit, match):
    marker = tmp_path / "pwned"
    path = v2_file(tmp_path)
    payload = read_design(path)
    edit(payload, marker)
    write_design(path, payload)
    with pytest.raises(FitFileError, match=r"v2\.nc' is not a usable bartpy_suite fit: .*" + match):
        bps.load(path)
    assert not marker.exists()


def test_crafted_file_through_the_command_line_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.nc"
    shutil.copy(LEGACY, path)
    payload = read_design(path)
    payload["predictors"][0] = evil(marker)
    write_design(path, payload)
    v1.new_rows().head(3).to_csv(tmp_path / "new.csv", index=False)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "bartpy_suite", "predict", str(path), str(tmp_path / "new.csv")],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 2, result.stderr
    assert "evil.nc' is not a usable bartpy_suite fit: " in result.stderr
    assert "the saved design's predictor" in result.stderr
    assert "it was refused and nothing in it was evaluated" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not marker.exists()


# Things a term may not contain, as a version-1 file would hold them (formulaic's text).
REFUSED_TEXT = [
    ("x1.values", r"contains attribute access \(x1\.values\)"),
    ("I(x1[0])", r"contains a subscript \(x1\[0\]\)"),
    ("(lambda: 1)()", r"calls a lambda"),
    ("I(__builtins__)", r"uses the name '__builtins__'; names starting with '__' are refused"),
    ("eval('1')", r"uses 'eval', which is not a function a formula may use"),
    ("open('/etc/passwd')", r"uses 'open', which is not a function a formula may use"),
    ("getattr(x1, 'real')", r"uses 'getattr'"),
    ("np.load('x.npy')", r"calls np\.load\(\), which is not among the numpy functions a formula may use"),
    ("numpy.random.seed(1)", r"calls attribute access \(numpy\.random\.seed\)"),
    ("I([v for v in x1])", r"contains a comprehension"),
    ("I(x1 > 1)", r"contains a comparison"),
    ("I(x1 if x1 else x1)", r"contains a conditional"),
    ("I(f'{x1}')", r"contains an f-string"),
    ("I(x1 @ x1)", r"uses the operator MatMult"),
    ("I(x1 + 'a')", r"contains the text 'a'; text is allowed only in C\(x, levels=\[\.\.\.\]\) and Q\('column name'\)"),
    ("C(s, levels=__import__('os').listdir('.'))", r"gives levels= a Call expression"),
    ("C(s, __import__('os').system('x'))", r"gives C\(\) the contrasts"),
    ("scale(x1, center=__import__('os'))", r"gives scale\(\)'s center a Call expression"),
    ("log(*x1)", r"passes \*args or \*\*kwargs to log\(\)"),
    ("log(x1, base=2)", r"calls log\(\) with 1 positional argument\(s\) and keywords"),
    ("exp10(x1)", r"calls exp10\(\), which a formula here may not use"),
    ("I(" * 100 + "x1" + ")" * 100, r"is too large"),
    ("I(x1", r"is not a valid expression"),
]


@pytest.mark.parametrize("text, reason", REFUSED_TEXT)
def test_version_1_text_outside_the_whitelist_is_refused(text, reason):
    payload = json.loads(Design.from_json(quiet("y ~ x1", pd.DataFrame({"y": [1.0, 2.0], "x1": [3.0, 4.0]}))[0]
                                          .to_json()).to_json())
    payload.update(version=1, predictors=[text], methods=["python"], transform_state=[{}])
    del payload["terms"]
    with pytest.raises(FormulaError, match=r"the saved design's predictor .* " + reason):
        Design.from_json(json.dumps(payload))


@pytest.mark.parametrize("tree, reason", [
    ({"col": 3}, r"has a column name that is not text: 3"),
    ({"num": "1"}, r"has a number node holding '1'"),
    ({"num": True}, r"has a number node holding True"),
    ({"op": "@", "args": [{"col": "x"}, {"col": "x"}]}, r"has the operator '@'"),
    ({"op": "+", "args": [{"col": "x"}]}, r"has a node .* without its 2 argument\(s\)"),
    ({"fn": "C", "args": [{"col": "x"}], "levels": {"a": 1}}, r"has C\(\) levels that are not a list of labels"),
    ({"fn": "scale", "args": [{"col": "x"}], "center": "os", "scale": None}, r"has scale\(\) center 'os', not a number"),
    ({"fn": "scale", "args": [{"col": "x"}], "fit": {}, "key": "x"}, r"calls 'scale' with the fields"),
    (["col", "x"], r"holds list"),
])
def test_version_2_tree_outside_the_whitelist_is_refused(tree, reason):
    design = quiet("y ~ log(x)", pd.DataFrame({"y": [1.0, 2.0], "x": [3.0, 4.0]}))[0]
    payload = json.loads(design.to_json())
    payload["terms"] = [tree]
    with pytest.raises(FormulaError, match=r"the saved design's predictor 'log\(x\)' " + reason):
        Design.from_json(json.dumps(payload))


def test_deep_or_huge_trees_are_refused_cleanly():
    design = quiet("y ~ log(x)", pd.DataFrame({"y": [1.0, 2.0], "x": [3.0, 4.0]}))[0]
    text = design.to_json()
    tree = json.dumps(json.loads(text)["terms"][0])
    deep = '{"op": "neg", "args": [' * 5000 + '{"col": "x"}' + "]}" * 5000  # past the JSON parser's recursion
    nested = '{"op": "neg", "args": [' * 100 + '{"col": "x"}' + "]}" * 100  # past MAX_DEPTH

    def balanced(depth):
        return {"col": "x"} if depth == 0 else {"op": "+", "args": [balanced(depth - 1), balanced(depth - 1)]}

    wide = json.dumps(balanced(9))  # 1023 nodes, past MAX_NODES
    for crafted, match in ((deep, r"not a saved bartpy_suite design \(invalid JSON"), (nested, r"is too large"),
                           (wide, r"is too large")):
        with pytest.raises(FormulaError, match=match):
            Design.from_json(text.replace(tree, crafted))


def test_loading_and_predicting_never_evaluate_python(monkeypatch, df):
    """From a version-1 text and a version-2 tree alike, ``from_json`` and ``transform`` only
    parse (``ast.parse``, i.e. ``compile`` with ``PyCF_ONLY_AST``) and compute with numpy/pandas."""
    formula = ("y ~ log(x1) + I(x1**2 - 3*x1) + np.sqrt(x1) + center(x1) + scale(`my x`, ddof=0) "
               "+ C(s, levels=['w', 'v', 'u']) + exp(-x1/4) + Q('my x')")
    design, X, _ = quiet(formula, df)
    cases = [(design.to_json(), df, X),
             (json.dumps(read_design(LEGACY)), v1.new_rows(),
              np.load(DATA / "v1_transforms_predictions.npz")["design_matrix"])]
    real_compile = builtins.compile

    def no_code(*args, **kwargs):
        raise AssertionError("Python code was evaluated")

    def ast_only(source, filename, mode, flags=0, *args, **kwargs):
        if not flags & ast.PyCF_ONLY_AST:
            raise AssertionError("Python code was compiled")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "eval", no_code)
    monkeypatch.setattr(builtins, "exec", no_code)
    monkeypatch.setattr(builtins, "compile", ast_only)
    for text, data, expected in cases:
        np.testing.assert_allclose(Design.from_json(text).transform(data), expected, rtol=DESIGN_RTOL, atol=0)


# ----------------------------------------------------------------------------------------
# at fit time: what works, and what is refused with the list of what a formula may contain
# ----------------------------------------------------------------------------------------

def test_every_whitelisted_transform_round_trips(df):
    formula = ("y ~ log(x1) + log2(x1) + log10(x1) + log1p(x1) + exp(x3) + exp2(x3) + expm1(x3) + sqrt(x1) "
               "+ abs(x3) + np.log(x1) + numpy.sqrt(x1) + I(x1 // 2) + I(x1 % 3) + I(-x3 + +x1 * 2 / x1 ** 0.5) "
               "+ Q('my x') + log(`my x`) + center(x3) + scale(x3, ddof=0) + scale(x3, center=False) "
               "+ scale(x1, center=2, scale=4) + standardize(x1) + scale(center(x3)) + C(s, levels=['w', 'u', 'v'])")
    design, X, _ = quiet(formula, df)
    x1, x3, mx = df["x1"].to_numpy(), df["x3"].to_numpy(), df["my x"].to_numpy()
    c3 = x3 - x3.mean()
    expected = [np.log(x1), np.log2(x1), np.log10(x1), np.log1p(x1), np.exp(x3), np.exp2(x3), np.expm1(x3),
                np.sqrt(x1), np.abs(x3), np.log(x1), np.sqrt(x1), x1 // 2, x1 % 3, -x3 + +x1 * 2 / x1 ** 0.5,
                mx, np.log(mx), c3, c3 / np.sqrt(np.sum(c3**2) / 30), x3 / np.sqrt(np.sum(x3**2) / 29),
                (x1 - 2) / 4, (x1 - x1.mean()) / np.sqrt(np.sum((x1 - x1.mean())**2) / 30),
                c3 / np.sqrt(np.sum(c3**2) / 29), pd.Series(df["s"]).map({"w": 0, "u": 1, "v": 2}).to_numpy()]
    assert X.shape[1] == len(expected) == design.n_predictors
    for j, column in enumerate(expected):
        np.testing.assert_allclose(X[:, j], column, rtol=1e-13, err_msg=design.predictors[j])
    again = Design.from_json(design.to_json())
    assert again == design
    np.testing.assert_array_equal(again.transform(df), X)


@pytest.mark.parametrize("term, reason", [
    ("I(x1 + __import__('os').system('touch {marker}'))", r"calls attribute access"),
    ("np.random.uniform(x1)", r"calls attribute access \(np\.random\.uniform\)"),
    ("lag(x1)", r"calls lag\(\), which a formula here may not use"),
    ("I(x1 > 2)", r"contains a comparison"),
    ("I(x1.__class__)", r"contains attribute access"),
])
def test_fit_refuses_terms_outside_the_whitelist(df, tmp_path, term, reason):
    marker = tmp_path / "pwned"
    text = term.format(marker=marker)
    with pytest.raises(FormulaError, match=r"predictor .* " + reason + r".*\. A formula term may contain"):
        build_design(f"y ~ x3 + {text}", df)
    assert not marker.exists()
    assert "no other functions, attributes, subscripts, comparisons, lambdas" in ALLOWED


def test_parse_term_gives_plain_json_trees():
    tree = parse_term("C(`my g`, levels=['b', -1, 2.5, True])")
    assert tree == {"fn": "C", "args": [{"col": "my g"}], "levels": ["b", -1, 2.5, True]}
    assert check_tree(json.loads(json.dumps(tree))) == tree
    assert parse_term("I(-x ** 2)") == {"op": "neg", "args": [{"op": "**", "args": [{"col": "x"}, {"num": 2}]}]}


# ----------------------------------------------------------------------------------------
# input hardening
# ----------------------------------------------------------------------------------------

def test_small_integer_and_bool_columns_are_float64_in_arithmetic():
    data = pd.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "u": np.array([100, 200, 250, 7], dtype=np.uint8),
                         "b": [True, False, True, False], "i": np.array([-3, 5, 9, 2], dtype=np.int8)})
    design, X, _ = quiet("y ~ I(u + 200) + I(b + 1) + I(i * 100) + I(u - 201)", data)
    np.testing.assert_array_equal(X, [[300, 2, -300, -101], [400, 1, 500, -1], [450, 2, 900, 49], [207, 1, 200, -194]])
    np.testing.assert_array_equal(design.transform(data), X)


def test_text_response_of_mostly_numbers_warns():
    values = [str(v) for v in range(1, 40)] + ["1,000"]
    data = pd.DataFrame({"y": values, "x": np.arange(40.0)})
    with pytest.warns(BartpySuiteWarning, match=r"response 'y' is text, but 98% of its rows hold numbers; it is fitted as a "
                                                r"classifier with 40 classes\. The values that are not numbers: '1,000'\. .*"
                                                r"pd\.read_csv\(\.\.\., thousands=','\)\); to keep it categorical and silence "
                                                r"this, write C\(y\)"):
        design, _, _ = build_design("y ~ x", data)
    assert design.response_kind == "categorical"
    quiet("C(y) ~ x", data)  # asked for: no warning


def test_date_strings_warn_with_the_conversion():
    data = pd.DataFrame({"y": np.arange(10.0), "when": [f"2021-03-{d:02d}" for d in range(1, 11)],
                         "x": np.arange(10.0) % 3})
    with pytest.warns(BartpySuiteWarning, match=r"predictor 'when' is text, but 100% of its rows hold dates \('2021-03-01', "
                                                r".*it is fitted as a factor with 10 levels, one per distinct date\. To use the "
                                                r"time, convert the column first, e.g\. d = pd\.to_datetime\(df\['when'\]\) and "
                                                r"then df\['days'\] = \(d - d\.min\(\)\)\.dt\.days or df\['year'\] = d\.dt\.year"):
        build_design("y ~ x + when", data)
    with pytest.warns(BartpySuiteWarning, match=r"response 'when' is text, but 100% of its rows hold dates .* fitted as a "
                                                r"classifier with 10 classes"):
        build_design("when ~ x", data)
    quiet("y ~ x + C(when)", data)


def test_datetime64_columns_are_an_error_saying_how_to_convert(df):
    data = df.assign(when=pd.date_range("2020-01-01", periods=len(df)))
    with pytest.raises(FormulaError, match=r"predictor 'when' has dtype datetime64\[\w+\] \(dates or times\), which is "
                                           r"neither numeric nor categorical; convert it to numbers first, e\.g\. "
                                           r"df\['days'\] = \(df\['when'\] - df\['when'\]\.min\(\)\)\.dt\.days"):
        build_design("y ~ x1 + when", data)
    with pytest.raises(FormulaError, match=r"cannot evaluate predictor 'I\(when - 1\)': unary -|cannot evaluate predictor "
                                           r"'I\(when - 1\)': - needs numbers, but column 'when' holds dates or times"):
        build_design("y ~ I(when - 1)", data)


def test_log_of_only_non_positive_values_names_the_cause():
    data = pd.DataFrame({"y": np.arange(6.0), "x": [-1.0, -2, -3, -5, -7, -9], "z": np.arange(6.0)})
    with pytest.raises(DataError, match=r"every one of the 6 rows has a missing value in the used terms \(log\(x\): 6 \(6 "
                                        r"produced by the transform from values that are present: outside its domain, "
                                        r"e\.g\. log of a number <= 0\)\)"):
        build_design("y ~ z + log(x)", data)
    with pytest.raises(DataError, match=r"predictor 'log\(x\)' has missing values in 6 rows .* \(produced by the transform "
                                        r"from values that are present: outside its domain, e\.g\. log of a number <= 0\)"):
        build_design("y ~ z + log(x)", data, na_action="raise")
    design, _, _ = quiet("y ~ log(z + 1)", data)
    with pytest.raises(DataError, match=r"newdata has missing values: predictor 'log\(z \+ 1\)': 1 row \(index 1\) "
                                        r"\(produced by the transform from values that are present: outside its domain, "
                                        r"e\.g\. log of a number <= 0\)"):
        design.transform(pd.DataFrame({"z": [1.0, -3.0]}))


def test_values_outside_C_levels_are_named_not_blamed_on_a_domain(df):
    data = df.assign(s=df["s"].where(df.index != 4))  # one genuinely missing value too
    with pytest.warns(BartpySuiteWarning) as record:
        build_design("y ~ C(s, levels=['u', 'v'])", data)
    message = str(record[0].message)
    assert "C(s, levels=['u', 'v']): 11 (10 with a value(s) not among the levels given to C(): 'w'" in message
    assert "domain" not in message and "log" not in message
    with pytest.raises(DataError, match=r"has missing values in 11 rows .* \(10 of them value\(s\) not among the levels "
                                        r"given to C\(\): 'w'; add them to levels=\[\.\.\.\] or remove those rows\)"):
        build_design("y ~ C(s, levels=['u', 'v'])", data, na_action="raise")


def test_text_in_arithmetic_at_predict_is_a_data_error(df):
    design, _, _ = quiet("y ~ log(x1)", df)
    with pytest.raises(DataError, match=r"cannot compute predictor 'log\(x1\)' on newdata: log\(\) needs numbers, but "
                                        r"column 'x1' holds text \(dtype .*, e\.g\. 'a'\)"):
        design.transform(pd.DataFrame({"x1": ["a", "b"]}))
    # numbers stored as objects are numbers
    np.testing.assert_allclose(design.transform(pd.DataFrame({"x1": pd.Series([1.0, 2], dtype=object)}))[:, 0],
                               np.log([1.0, 2.0]))


def test_split_says_when_a_transform_made_the_missing_values():
    data = pd.DataFrame({"y": np.arange(6.0), "x": [-1.0, -2, 3, 5, 7, np.nan], "z": np.arange(6.0)})
    with pytest.warns(BartpySuiteWarning, match=r"predictor 'log\(x\)' is missing in 2 rows \(index 0, 1\) although the "
                                                r"data have values there \(2 produced by the transform from values that are "
                                                r"present: outside its domain, e\.g\. log of a number <= 0\); "
                                                r"na_action='split' routes them as missing values"):
        _, X, _ = build_design("y ~ z + log(x)", data, na_action="split")
    assert np.isnan(X[:, 1]).sum() == 3
    quiet("y ~ z + x", data, na_action="split")  # missing in the data: no warning
