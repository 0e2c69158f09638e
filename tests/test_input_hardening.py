"""Inputs that look right but are not: string booleans, counts given as floats or numpy
integers, fits too large for the memory, responses and predictors at extreme scales, int64
predictors that float64 cannot tell apart.

The keyword tests only construct models (validation happens in ``__init__``), so they compile
nothing; the fits are tiny (one chain, a few dozen iterations).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite._binning import BinnedPredictors, make_cuts
from bartpy_suite._validation import check_bool, check_int_at_least
from bartpy_suite.errors import ArgumentError, DataError
from bartpy_suite.formula import build_design
from bartpy_suite.models import _base
from bartpy_suite.models.registry import MODELS
from bartpy_suite.priors import NormalLeafPrior, TreePrior, kernel_prior
from bartpy_suite.samplers import CartProblem

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
          "bart": ("chains", "draws", "tune", "thin", "threads", "min_leaf_size", "max_cuts", "trees", "variance_trees"),
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
    print(f"{model} at {scale:.3g}: max |pred / scale - ref| = {error:.3g} = {error / np.std(y):.3g} sd(y) "
          f"= {error / np.max(np.abs(ref)):.3g} max|ref|")
    if model == "soft_tree" and scale in DECIMAL_SCALES:
        # NUTS is chaotic: a standardised response that differs in the last bits gives another
        # chain after a few leapfrog steps, so only the posterior agrees. 5 draws move the mean by
        # about the posterior sd of f; measured (pytest -s prints it): up to 0.12 sd(y) here, and as much at 1e+-100,
        # where the standardisation was never at fault. 0.5 sd(y) still catches any scale error.
        assert error <= 0.5 * np.std(y), error
    else:
        # CART and BART: the discrete MH decisions do not flip on last-bit differences (measured
        # <= 3.8e-16 relative, pytest -s); at powers of two the draws are the same (measured 0). 1e-9 leaves
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


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------


def _memory_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 3))
    return x, 2.0 * x[:, 0] + rng.normal(size=n)


def _spy_estimate(monkeypatch) -> dict:
    captured: dict = {}
    real = _base.estimate_fit_bytes

    def spy(*args, **kwargs):
        captured.update(real(*args, **kwargs))
        return captured

    monkeypatch.setattr(_base, "estimate_fit_bytes", spy)
    return captured


def test_huge_draws_are_refused_before_anything_is_allocated(monkeypatch):
    # The case: draws=10**9 used to die in numpy's _ArrayMemoryError (or swap first).
    monkeypatch.setattr(_base, "available_memory", lambda: 16 * 10**9)  # a 16 GB machine, whatever runs this
    x, y = _memory_data()
    tracemalloc.start()
    try:
        with pytest.raises(ArgumentError) as info:
            bps.BayesianCART(chains=4, draws=10**9, progress=False).fit(x, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 10**6  # refused before the chains' buffers (hundreds of GB) were allocated
    message = str(info.value)
    assert re.search(r"^this fit would need about \d+(\.\d+)? TB of memory, but 16 GB is available: 4 chains x "
                     r"1,000,000,000 kept draws x \d+ B per draw", message), message
    assert "fewer draws (raise thin to span as many iterations with fewer stored draws" in message
    assert "fewer chains" in message
    assert "log_likelihood" not in message  # the default skips it at this size: no advice about it


def test_refusal_names_log_likelihood_when_it_is_what_does_not_fit(monkeypatch):
    captured = _spy_estimate(monkeypatch)
    monkeypatch.setattr(_base, "available_memory", lambda: 30 * 10**6)
    x, y = _memory_data(n=2000)
    # 4 x 1000 x 2000 rows = 8e6 values: stored by default (<= 1e7), 4 x 64 MB while computed.
    with pytest.raises(ArgumentError, match=r"the pointwise log-likelihood \(4 x 1,000 x 2,000 rows x 8 bytes, "
                                            r"held about 4 times while computed\) 256 MB\. Lower it: fewer draws .*"
                                            r"; log_likelihood=False \(the pointwise log-likelihood alone needs "
                                            r"256 MB; fit\.add_log_likelihood\(\) adds it later\); fewer chains\."):
        bps.BayesianCART(chains=4, draws=1000, progress=False).fit(x, y)
    assert captured["log_likelihood"] == 4 * 4 * 1000 * 2000 * 8
    # ... and log_likelihood=False is indeed enough here (the rest is a few MB).
    assert captured["total"] - captured["log_likelihood"] < 30 * 10**6


def test_fit_runs_when_memory_suffices_or_is_unknown(monkeypatch):
    x, y = _memory_data()
    for available in (None, 10**12):
        monkeypatch.setattr(_base, "available_memory", lambda a=available: a)
        fit = bps.BayesianCART(chains=1, draws=5, tune=5, seed=1, progress=False, check_mixing=False).fit(x, y)
        assert fit.posterior.sizes["draw"] == 5


def test_available_memory_reads_meminfo_and_falls_back_to_sysconf(monkeypatch):
    found = _base.available_memory()
    assert found is None or found > 0
    if sys.platform.startswith("linux"):
        assert found is not None

    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(_base, "open", no_proc, raising=False)  # shadows the builtin in the module only
    fallback = _base.available_memory()
    if hasattr(os, "sysconf") and "SC_AVPHYS_PAGES" in os.sysconf_names:
        assert fallback == os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    else:
        assert fallback is None


#: The estimate is a model of the peak, not a measurement: it must stay within this factor of
#: tracemalloc's peak on small fits (``pytest -s`` prints the ratio; measured 0.78-1.14 on CART and
#: BART with and without the log-likelihood, 1.44 on the soft tree of the slow case). Within a
#: factor 2, a fit like these that is refused needed at least half of the free memory, and one that
#: is let through needs at most twice it (numba's own allocations inside kernels are not traced).
ESTIMATE_FACTOR = 2.0


RUN = {"chains": 2, "tune": 10, "seed": 1, "progress": False, "check_mixing": False}


@pytest.mark.parametrize(("make", "n", "log_likelihood"), [
    (lambda ll: bps.BayesianCART(draws=4000, log_likelihood=ll, **RUN), 200, False),
    (lambda ll: bps.BayesianCART(draws=2000, log_likelihood=ll, **RUN), 300, True),
    (lambda ll: bps.BART(trees=20, draws=400, log_likelihood=ll, **RUN), 300, False),
    (lambda ll: bps.BART(trees=20, draws=400, log_likelihood=ll, **RUN), 300, True),
    # slow: the soft tree's Python loop under tracemalloc took 290 s (0.5 s without)
    pytest.param(lambda ll: bps.SoftTree(draws=150, log_likelihood=ll, **{**RUN, "tune": 5}), 100, False,
                 marks=pytest.mark.slow),
], ids=["cart", "cart-loglik", "bart", "bart-loglik", "soft_tree"])
def test_estimate_is_within_a_factor_of_the_measured_peak(monkeypatch, make, n, log_likelihood):
    captured = _spy_estimate(monkeypatch)
    x, y = _memory_data(n=n)
    make(False).fit(x[:20], y[:20])  # compile first: the compiler's own allocations are not the fit's
    captured.clear()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        fit = make(log_likelihood).fit(x, y)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert ("log_likelihood" in fit.idata.children) == log_likelihood
    assert (captured["log_likelihood"] > 0) == log_likelihood
    ratio = captured["total"] / peak
    print(f"estimate / tracemalloc peak = {ratio:.2f} ({captured['total']} / {peak} bytes)")
    assert 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR, (ratio, captured, peak)


# ---------------------------------------------------------------------------------------------
# int64 predictors near 2**63
# ---------------------------------------------------------------------------------------------

TOP_INT64 = np.iinfo(np.int64).max


def test_int64_values_float64_cannot_tell_apart_are_named_through_the_formula():
    # The case: 100 distinct int64 values next to 2**63 all become 9.223372036854776e18,
    # so the predictor used to be reported as "constant".
    df = pd.DataFrame({"x": TOP_INT64 - np.arange(100, dtype=np.int64), "y": np.arange(100.0)})
    with pytest.raises(DataError, match=r"^predictor 'x' holds integers beyond 2\*\*53 = 9007199254740992 in "
                                        r"magnitude, which float64 \(the type the trees split on\) rounds: its 100 "
                                        r"distinct values become 1 \(e\.g\. 9223372036854775708 and "
                                        r"9223372036854775709 both become 9\.223372036854776e\+18\).*Subtract a "
                                        r"reference value in the data first \(e\.g\. df\[\"x\"\] - df\[\"x\"\]\.min\(\)"):
        build_design("y ~ x", df)
    # The advice works: the differences are small integers, exact in float64.
    design, x, _ = build_design("y ~ x", df.assign(x=df["x"] - df["x"].min()))
    assert np.unique(x[:, 0]).size == 100


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, "Int64"])
def test_int64_check_covers_unsigned_and_nullable_columns(dtype):
    values = np.uint64(2**64 - 1) - np.arange(10, dtype=np.uint64) if dtype is np.uint64 else \
        TOP_INT64 - np.arange(10, dtype=np.int64)
    df = pd.DataFrame({"x": pd.Series(values, dtype=dtype), "y": np.arange(10.0)})
    with pytest.raises(DataError, match=r"predictor 'x' holds integers beyond 2\*\*53 .* its 10 distinct values "
                                        r"become 1"):
        build_design("y ~ x", df)


def test_int64_collapse_is_named_at_the_array_level():
    x = np.column_stack([np.arange(40, dtype=np.int64), TOP_INT64 - np.arange(40, dtype=np.int64)])
    y = np.arange(40.0)
    with pytest.raises(DataError, match=r"^predictor 'b' \(column 1\) holds integers beyond 2\*\*53"):
        bps.BayesianCART(**TINY).fit(x, y, predictor_names=["a", "b"])
    frame = pd.DataFrame({"a": x[:, 0] * 0.5, "b": x[:, 1]})  # mixed dtypes: each column checked as given
    with pytest.raises(DataError, match=r"^predictor column 1 holds integers beyond 2\*\*53"):
        bps.BayesianCART(**TINY).fit(frame, y)


def test_large_int64_values_that_stay_distinct_fit_and_split():
    # Multiples of 4096 near 2**62 are exact in float64: nothing is merged, nothing is refused.
    rng = np.random.default_rng(4)
    x = (2**62 + 4096 * np.arange(40, dtype=np.int64))[:, None]
    y = np.where(np.arange(40) < 20, 0.0, 5.0) + 0.1 * rng.normal(size=40)
    fit = bps.BayesianCART(**TINY).fit(x, y)
    pred = fit.predict(x.astype(np.float64))["mean"].to_numpy()
    assert abs(pred[:20].mean()) < 0.5 and abs(pred[20:].mean() - 5.0) < 0.5


def test_executor_fit_is_refused_before_any_chain_is_submitted(monkeypatch):
    # With executor= the chains run elsewhere, but their draws are gathered here.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(_base, "available_memory", lambda: 10**6)
    x, y = _memory_data()
    submitted = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        real_submit = pool.submit
        monkeypatch.setattr(pool, "submit", lambda *a, **k: submitted.append(a) or real_submit(*a, **k))
        with pytest.raises(ArgumentError, match=r"^this fit would need about .* but 1 MB is available"):
            bps.BayesianCART(chains=2, draws=10**6, progress=False, executor=pool).fit(x, y)
    assert submitted == []


def test_smc_particles_count_as_per_draw_memory():
    # smc keeps one particle (a tree with its row map) per kept draw: the probe sees it.
    x, y = _memory_data(n=500)
    binned = BinnedPredictors.fit(x, np.zeros(3, bool), None, None)
    hyper = kernel_prior(TreePrior(), NormalLeafPrior(1 / 3, 0.0, 3.0, 1.0), likelihood=True)
    problem = CartProblem(binned.codes, np.zeros(3, bool), binned.nbins, (y - y.mean()) / y.std(),
                          np.zeros(500, np.int64), hyper)

    def per_draw(sampler: str) -> int:
        spec = bps.samplers.SAMPLERS[sampler]
        chain = spec.make_chain(problem, spec.check_options(None), np.random.default_rng(0))
        return _base.estimate_fit_bytes(chain, problem, chains=1, draws=10, rows=500, predictors=3,
                                        log_likelihood=False)["per_draw"]

    assert per_draw("smc") > 2 * 4 * 500  # two particle sets, each particle with a 4-byte map of 500 rows
    assert per_draw("cgm") < 500  # a few numbers and the store's room for 8 nodes


def test_a_chain_state_too_large_to_allocate_names_its_sizes(monkeypatch):
    # e.g. trees=10**8: the forest itself (trees x 255 nodes) cannot be allocated. Simulated, since a
    # real attempt may be granted lazily by the kernel and then swap or be killed, machine-dependently.
    model = bps.BART(trees=10**8, chains=1, draws=5, tune=5, progress=False)

    def refuse(*args, **kwargs):
        raise MemoryError("Unable to allocate 93.1 GiB for an array with shape (100000000, 255) and data type int32")

    monkeypatch.setattr(type(model.spec), "make_chain", refuse)  # the spec is a frozen dataclass
    x, y = _memory_data(n=50)
    with pytest.raises(ArgumentError, match=r"^the state of one chain \(50 rows and 100,000,000 trees\) does not "
                                            r"fit in memory: Unable to allocate 93\.1 GiB .*\. Lower trees, or fit a "
                                            r"sample of the rows$"):
        model.fit(x, y)
