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
from bartpy_suite._binning import make_cuts
from bartpy_suite._validation import check_bool, check_int_at_least
from bartpy_suite.errors import ArgumentError, DataError
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


# ---------------------------------------------------------------------------------------------
# extreme response scales
# ---------------------------------------------------------------------------------------------

SCALE_N = 40
TINY = {"chains": 1, "draws": 20, "tune": 20, "seed": 3, "progress": False, "check_mixing": False}
SCALE_MODELS = {
    "cart": lambda: bps.BayesianCART(**TINY),
    "bart": lambda: bps.BART(trees=5, **TINY),
    "soft_tree": lambda: bps.SoftTree(**{**TINY, "draws": 5, "tune": 5}),
}
#: Decimal scales (not powers of two: the standardised response differs from the scale-1 one in
#: the last bits) and powers of two near them (dividing by them is exact: the same draws).
DECIMAL_SCALES = (1e-250, 1e-200, 1e200, 1e250)
BINARY_SCALES = (2.0**-830, 2.0**-664, 2.0**664, 2.0**830)


def _scale_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(SCALE_N, 2))
    y = np.where(x[:, 0] > 0.5, 2.0, -1.0) + 0.3 * rng.normal(size=SCALE_N) + 0.4
    return x, y


@pytest.fixture(scope="module")
def scale_reference():
    """Predictions (mean of f) of each model at scale 1 on the first 8 training rows."""
    x, y = _scale_data()
    return {name: make().fit(x, y).predict(x[:8])["mean"].to_numpy() for name, make in SCALE_MODELS.items()}


@pytest.mark.parametrize("scale", DECIMAL_SCALES + BINARY_SCALES)
@pytest.mark.parametrize("model", sorted(SCALE_MODELS))
def test_prediction_follows_the_response_scale(model, scale, scale_reference):
    # Before: CART at 1e200 predicted NaN (the variance overflowed) and at 1e-200 ~1e195 (it
    # underflowed to 0, so y was "standardised" by 1); BART's sigma_hat fell back to the range.
    x, y = _scale_data()
    fit = SCALE_MODELS[model]().fit(x, y * scale)
    pred = fit.predict(x[:8])["mean"].to_numpy()
    ref = scale_reference[model]
    assert np.all(np.isfinite(pred))
    error = np.max(np.abs(pred / scale - ref))
    if model == "soft_tree" and scale in DECIMAL_SCALES:
        # NUTS is chaotic: a standardised response that differs in the last bits gives another
        # chain after a few leapfrog steps, so only the posterior agrees. 5 draws move the mean by
        # about the posterior sd of f; measured: up to 0.11 sd(y) at these scales and at 1e+-100,
        # where the standardisation was never at fault. 0.5 sd(y) still catches any scale error.
        assert error <= 0.5 * np.std(y), error
    else:
        # CART and BART: the discrete MH decisions do not flip on last-bit differences (measured
        # <= 7e-16 relative); at powers of two the draws are the same (measured 0). 1e-9 leaves
        # room for the rounding of the rescaled leaf values.
        assert error <= 1e-9 * np.max(np.abs(ref)), error
    sigma = fit.posterior["sigma"].values
    assert np.all(np.isfinite(sigma)) and np.all(sigma > 0)
    assert 1e-3 * scale < np.median(sigma) < 10 * scale  # on the response's scale (sd(y) ~ 1.5)


def test_response_beyond_float_range_after_standardising_names_the_cause():
    x, y = _scale_data()
    big = np.where(y > 0, 1.7e308, -1.7e308)  # finite, but its sd is 1.7e308 and its range 3.4e308
    with pytest.raises(DataError, match=r"the response is too large: .* exceeds the largest float64 .*"
                                        r"divide y by a constant"):
        bps.BART(**TINY).fit(x, big)


def test_cut_midpoints_do_not_overflow_near_the_float_maximum():
    top = np.finfo(np.float64).max
    values = np.array([-top, -0.99 * top, 0.5 * top, 0.9 * top, top])
    cuts = make_cuts(values, None)
    assert np.all(np.isfinite(cuts))
    assert np.all((values[:-1] < cuts) & (cuts < values[1:]))
    # Ordinary values keep the plain expression (bit-identical grids and draws).
    ordinary = np.sort(np.random.default_rng(1).normal(size=50))
    assert make_cuts(ordinary, None).tobytes() == (0.5 * (ordinary[:-1] + ordinary[1:])).tobytes()


def test_cart_splits_a_predictor_near_the_float_maximum():
    # Before, every midpoint between the two groups was inf, so x offered no split at all.
    rng = np.random.default_rng(2)
    top = np.finfo(np.float64).max
    x = np.where(np.arange(SCALE_N) < SCALE_N // 2, 0.8, 0.95)[:, None] * top * (1 - 0.01 * rng.uniform(size=(SCALE_N, 1)))
    y = np.where(x[:, 0] > 0.9 * top, 5.0, 0.0) + 0.1 * rng.normal(size=SCALE_N)
    fit = bps.BayesianCART(**TINY).fit(x, y)
    assert fit.posterior["variable_activity"].values.max() == 1.0  # splits, all on x
    pred = fit.predict(x)["mean"].to_numpy()
    assert abs(pred[y > 2.5].mean() - 5.0) < 0.5 and abs(pred[y < 2.5].mean()) < 0.5


def test_soft_tree_predictor_spanning_beyond_the_float_range_is_named():
    x, y = _scale_data()
    x = x.copy()
    x[:, 1] = np.where(x[:, 1] > 0.5, 1.7e308, -1.7e308)
    with pytest.raises(DataError, match=r"predictor 'x1' spans more than the largest float64"):
        bps.SoftTree(**TINY).fit(x, y)
