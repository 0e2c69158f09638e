"""Weighted summaries and diagnostics (bartpy_suite.posterior.weighted).

Statistical tolerances come from one-off simulations of each estimator's spread over seeds
(numbers in the comments); every test uses a fixed seed.
"""

import numpy as np
import pytest
from arviz_stats.base import array_stats
from scipy.signal import lfilter

from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.weighted import (
    kish_ess,
    weighted_ess,
    weighted_mean_sd,
    weighted_quantiles,
    weighted_rhat,
)

PHI = 0.9


def ar1(rng, shape, phi=PHI):
    """Stationary AR(1) chains along axis 1 (marginal variance 1 / (1 - phi**2))."""
    e = rng.normal(size=shape)
    e[:, 0] /= np.sqrt(1 - phi**2)
    return lfilter([1.0], [1.0, -phi], e, axis=1)


# -- uniform weights reproduce the unweighted numbers exactly ----------------------------------
@pytest.mark.parametrize("kind", ["iid", "ar1", "skewed"])
def test_uniform_weights_give_arviz_bulk_ess_and_rank_rhat(kind):
    rng = np.random.default_rng(11)
    x = {"iid": rng.normal(size=(4, 1000)), "ar1": ar1(rng, (4, 1000)), "skewed": rng.gamma(0.5, size=(3, 501))}[kind]
    w = np.full(x.shape, 1.0 / x.size)  # as Fit.weights: normalised to sum to one
    kw = dict(chain_axis=0, draw_axis=1)
    assert weighted_ess(x, w) == float(array_stats.ess(x, method="bulk", **kw))
    assert weighted_rhat(x, w) == float(array_stats.rhat(x, method="rank", **kw))
    assert weighted_ess(x, 7 * np.ones(x.shape)) == weighted_ess(x, w)  # any scale


def test_uniform_weights_weighted_formulas_match_arviz_unranked_versions():
    rng = np.random.default_rng(12)
    x = ar1(rng, (4, 2000))
    w = np.ones(x.shape)
    kw = dict(chain_axis=0, draw_axis=1)
    # Same split-R-hat formula once every Kish size is the split-chain length.
    assert weighted_rhat(x, w, method="split") == pytest.approx(float(array_stats.rhat(x, method="split", **kw)), rel=1e-12)
    # Delta-method ESS = arviz "mean" ESS x s2_w / var_plus (total variance over the split-chain
    # multi-chain variance, a 1 - O(tau/S) factor), i.e. the same Geyer sum on z = h - mean.
    split = np.vstack((x[:, :1000], x[:, -1000:]))
    var_plus = split.var(axis=1).mean() + split.mean(axis=1).var(ddof=1)
    factor = x.var() / var_plus
    assert 0.99 < factor < 1
    expected = float(array_stats.ess(x, method="mean", **kw)) * factor
    assert weighted_ess(x, w, method="delta") == pytest.approx(expected, rel=1e-10)


def test_uniform_weights_quantiles_are_numpy_linear_quantiles():
    rng = np.random.default_rng(13)
    x = rng.normal(size=(2001, 3))
    probs = [0.0, 0.025, 0.1, 0.5, 0.975, 1.0]
    assert np.array_equal(weighted_quantiles(x, np.full(2001, 1 / 2001), probs), np.quantile(x, probs, axis=0))


# -- duplicate-draw equivalence ----------------------------------------------------------------
def test_integer_weights_equal_repeated_draws():
    rng = np.random.default_rng(15)
    x = rng.normal(size=(3, 40))
    w = rng.integers(1, 6, size=x.shape)
    rep = np.repeat(x.reshape(-1), w.reshape(-1))
    mean, sd = weighted_mean_sd(x, w)
    assert mean == pytest.approx(rep.mean(), abs=1e-12)
    assert sd == pytest.approx(rep.std(), abs=1e-12)
    assert weighted_mean_sd(x.reshape(-1), w.reshape(-1)) == (mean, sd)
    # Non-uniform weights: the inverse weighted CDF, numpy's "inverted_cdf" on the repeated
    # sample (the default linear rule interpolates between copies and cannot match).
    probs = [0.01, 0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975, 0.99]
    got = weighted_quantiles(x.reshape(-1, 1), w.reshape(-1).astype(float), probs)[:, 0]
    assert np.array_equal(got, np.quantile(rep, probs, method="inverted_cdf"))
    assert kish_ess(w) == pytest.approx(w.sum() ** 2 / (w**2).sum(), rel=1e-14)


# -- ESS under weights -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sigma, tol",
    [
        # S/Kish = 1.28. ESS/Kish over 300 seeds: mean 0.990, sd 0.021, range 0.909-1.041; 10% is ~4.7 sd.
        (0.5, 0.10),
        # S/Kish = 2.72. Heavier weights make Var(z) noisier: sd 0.057, range 0.77-1.22; 20% is ~3.5 sd.
        (1.0, 0.20),
    ],
)
def test_independent_draws_with_lognormal_weights_give_kish(sigma, tol):
    rng = np.random.default_rng(21)
    x = rng.normal(size=(4, 5000))
    w = rng.lognormal(0.0, sigma, size=x.shape)  # independent of x
    ess, kish = weighted_ess(x, w), kish_ess(w)
    assert kish < 0.9 * x.size
    assert abs(ess / kish - 1) < tol


def test_ar1_uniform_weights_give_theoretical_ess():
    rng = np.random.default_rng(22)
    x = ar1(rng, (4, 50_000))
    target = x.size * (1 - PHI) / (1 + PHI)  # 10,526
    # Bulk ESS / target over 150 seeds: mean 0.998, sd 0.027, range 0.92-1.06; 10% is ~3.7 sd.
    assert abs(weighted_ess(x, np.ones(x.shape)) / target - 1) < 0.10


def test_ar1_with_independent_weights_beats_the_product_rule():
    rng = np.random.default_rng(23)
    x = ar1(rng, (4, 50_000))
    w = rng.lognormal(0.0, 1.0, size=x.shape)
    s = x.size
    # Var(mu_hat) = sigma^2 / S * (S/Kish + 2 phi / (1 - phi)) for weights independent in time.
    target = s / (s / kish_ess(w) + 2 * PHI / (1 - PHI))  # ~9,650
    ess = weighted_ess(x, w)
    # ESS / target over 150 seeds: mean 1.003, sd 0.025, range 0.93-1.07; 10% is ~4 sd.
    assert abs(ess / target - 1) < 0.10
    product = s * (1 - PHI) / (1 + PHI) * kish_ess(w) / s  # ~3,870: ESS_autocorr x Kish factor
    assert ess > 2 * product


# -- R-hat under weights -----------------------------------------------------------------------
def test_weighted_rhat_same_distribution_and_shifted_chain():
    rng = np.random.default_rng(31)
    x = rng.normal(size=(4, 5000))
    w = rng.lognormal(0.0, 1.0, size=x.shape)
    # Same distribution: over 300 seeds mean 1.0000, sd 0.0003, max 1.0012.
    assert weighted_rhat(x, w) < 1.01
    # One chain shifted by 1 sd: two of 8 split-chain means at 1, so R-hat ~ sqrt(1 + Var_j m_j)
    # = sqrt(1 + 1.5/7) = 1.102 (seeds: sd 0.005, range 1.088-1.118). It exceeds 1.1 only about
    # two times in three, so test the expected value, and > 1.1 with a 2 sd shift (1.363).
    y = x.copy()
    y[0] += 1.0
    assert abs(weighted_rhat(y, w) - np.sqrt(1 + 1.5 / 7)) < 0.025
    y[0] += 1.0
    assert weighted_rhat(y, w) > 1.1


def test_weighted_rhat_is_centred_at_one_under_strong_degeneracy():
    # Lognormal(0, 2) weights: Kish size ~ 500 / e^4 = 9 per split chain of 500 draws. Using the
    # Kish size as the chain length keeps R-hat centred at 1; the raw length (500) would not:
    # over 300 seeds the mean is 0.9999 (sd 0.017) with Kish sizes, 1.022 (sd 0.019) with the
    # raw length. Averaging 40 seeds gives a standard error ~0.003, so 0.01 is ~3.5 se.
    values = []
    for seed in range(40):
        rng = np.random.default_rng(3200 + seed)
        x = rng.normal(size=(4, 1000))
        values.append(weighted_rhat(x, rng.lognormal(0.0, 2.0, size=x.shape)))
    assert abs(np.mean(values) - 1) < 0.01


# -- edge cases --------------------------------------------------------------------------------
@pytest.mark.parametrize("uniform", [True, False])
def test_undefined_cases_give_nan(uniform):
    rng = np.random.default_rng(41)
    w = np.ones((4, 100)) if uniform else rng.lognormal(size=(4, 100))
    x = rng.normal(size=(4, 100))
    const = np.full((4, 100), 2.5)
    short = x[:, :3]
    with_nan, with_inf = x.copy(), x.copy()
    with_nan[1, 7], with_inf[2, 3] = np.nan, np.inf
    for arr, ww in ((const, w), (short, w[:, :3]), (with_nan, w), (with_inf, w)):
        assert np.isnan(weighted_ess(arr, ww))
        assert np.isnan(weighted_rhat(arr, ww))
    assert np.isnan(weighted_rhat(x[:1], w[:1]))  # one chain
    assert np.isnan(weighted_mean_sd(with_nan, w)[0])


def test_invalid_weights_raise():
    x = np.random.default_rng(42).normal(size=(2, 10))
    for bad in (-np.ones((2, 10)), np.zeros((2, 10)), np.full((2, 10), np.nan), np.ones((2, 9))):
        with pytest.raises(ArgumentError):
            weighted_ess(x, bad)
        with pytest.raises(ValueError):
            weighted_rhat(x, bad)
    with pytest.raises(ArgumentError):
        weighted_ess(x, np.ones((2, 10)), method="bulk")
    assert kish_ess(np.ones(50)) == pytest.approx(50) and kish_ess([0, 0, 3.0]) == 1.0


@pytest.mark.parametrize("scale", [1e-250, 1e-200, 1e200, 1e250])
def test_weighted_sd_is_scale_safe(scale):
    # The squares of deviations overflow (1e250**2) or underflow (1e-250**2) in float64; the sd
    # must still be the scale times the sd at scale 1, to a few ulps of rounding in the rescaling.
    x = np.random.default_rng(3).normal(size=(2, 50))
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=x.shape)
    mean1, sd1 = weighted_mean_sd(x, w)
    mean, sd = weighted_mean_sd(x * scale, w)
    assert sd / scale == pytest.approx(sd1, rel=1e-14)
    assert mean / scale == pytest.approx(mean1, rel=1e-12)
