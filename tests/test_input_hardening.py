"""Inputs that look right but are not: string booleans, counts given as floats or numpy
integers, fits too large for the memory, responses and predictors at extreme scales, int64
predictors that float64 cannot tell apart.

The keyword tests only construct models (validation happens in ``__init__``), so they compile
nothing; the fits are tiny (one chain, a few dozen iterations).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import bartpy_suite as bps
from bartpy_suite._validation import check_bool, check_int_at_least
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models.registry import MODELS

# ---------------------------------------------------------------------------------------------
# boolean keywords
# ---------------------------------------------------------------------------------------------


def _boolean_keywords(cls) -> list[str]:
    """Keywords of a model whose default is a bool, and ``log_likelihood`` (bool or None)."""
    out = []
    for p in cls.keyword_parameters():
        if isinstance(p.default, bool) or p.name == "log_likelihood":
            out.append(p.name)
    return out


BOOL_CASES = [(name, kw) for name, cls in sorted(MODELS.items()) for kw in _boolean_keywords(cls)]


def test_every_model_has_the_expected_boolean_keywords():
    # The parametrised tests below discover the keywords; this pins that the discovery finds them.
    found = {name: set(_boolean_keywords(cls)) for name, cls in MODELS.items()}
    common = {"likelihood", "progress", "check_mixing", "log_likelihood"}
    assert all(common <= kws for kws in found.values()), found
    assert {"class_constant", "standardize"} <= found["soft_tree"]


@pytest.mark.parametrize(("model", "keyword"), BOOL_CASES)
@pytest.mark.parametrize("bad", ["False", "True", "no", 0, 1, 1.0])
def test_boolean_keyword_refuses_non_booleans(model, keyword, bad):
    with pytest.raises(ArgumentError, match=rf"^{keyword} must be True or False, got {bad!r}"):
        MODELS[model](**{keyword: bad})


@pytest.mark.parametrize(("model", "keyword"), BOOL_CASES)
def test_boolean_keyword_accepts_python_and_numpy_bools(model, keyword):
    for value in (False, True, np.False_, np.True_):
        instance = MODELS[model](**{keyword: value})
        stored = getattr(instance, keyword)
        assert stored is bool(value), (keyword, value, stored)  # a Python bool, whatever was passed


def test_string_false_through_the_formula_alias_names_the_argument():
    # The case: likelihood="False" used to fit with the likelihood on.
    with pytest.raises(ArgumentError, match=r"likelihood must be True or False, got 'False' \(the string 'False' "
                                            r"is not a bool: write False without quotes\)"):
        bps.cart("y ~ x", data=None, likelihood="False")


def test_check_bool_none_is_refused():
    with pytest.raises(ArgumentError, match="check_mixing must be True or False, got None"):
        check_bool("check_mixing", None)


# ---------------------------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------------------------

COUNTS = {"cart": ("chains", "draws", "tune", "thin", "threads", "min_leaf_size", "max_cuts"),
          "bart": ("chains", "draws", "tune", "thin", "threads", "min_leaf_size", "max_cuts", "trees"),
          "soft_tree": ("chains", "draws", "tune", "thin", "threads")}
COUNT_CASES = [(m, kw) for m, kws in COUNTS.items() for kw in kws]


def test_count_keywords_are_the_models_integer_keywords():
    # Every keyword with an integer default is listed above, so none escapes the tests.
    for model, cls in MODELS.items():
        ints = {p.name for p in cls.keyword_parameters()
                if isinstance(p.default, int) and not isinstance(p.default, bool)}
        assert ints <= set(COUNTS[model]), (model, ints - set(COUNTS[model]))


@pytest.mark.parametrize(("model", "keyword"), COUNT_CASES)
def test_count_accepts_numpy_integers_and_integral_floats(model, keyword):
    for value in (np.int64(3), np.int32(3), np.uint8(3), 3.0, np.float64(3.0)):
        instance = MODELS[model](**{keyword: value})
        stored = instance.tree_prior.min_leaf_size if keyword == "min_leaf_size" else \
            getattr(instance, keyword)
        assert type(stored) is int and stored == 3, (keyword, value, stored)


@pytest.mark.parametrize(("model", "keyword"), COUNT_CASES)
@pytest.mark.parametrize("bad", [2.5, "3", True, float("nan"), float("inf")])
def test_count_refuses_fractions_strings_bools_and_non_finite(model, keyword, bad):
    with pytest.raises(ArgumentError, match=rf"^{keyword} must be an integer >= \d+, got "):
        MODELS[model](**{keyword: bad})


def test_fractional_count_message_says_why():
    with pytest.raises(ArgumentError, match=r"draws must be an integer >= 1, got 1000\.5 \(not a whole number\)"):
        check_int_at_least("draws", 1000.5, 1)


def test_keyword_parameters_are_keyword_only():
    # The discovery above relies on the keyword list being the keyword-only parameters.
    for cls in MODELS.values():
        kinds = {p.kind for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"}
        assert kinds == {inspect.Parameter.KEYWORD_ONLY}
