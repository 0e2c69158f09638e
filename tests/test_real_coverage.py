"""The metrics of ``benchmarks/real_coverage.py``: predictive quantiles, coverage and R-hat.

The benchmark computes the predictive interval of every fit (ours and stochtree's) with one
function, ``predictive_quantiles`` (exact quantiles of the mixture over draws of N(f_d, sigma_d^2)
by bisection), so the comparison rests on it. Checked against closed forms: one draw gives
f + z sigma; at the returned quantile the mixture's CDF equals the probability (to the
bisection's tolerance); and coverage counts the rows inside the interval.
"""

from __future__ import annotations

import numpy as np
import pytest
from _benchmarks import load_benchmark
from scipy import special


@pytest.fixture(scope="module")
def rc():
    return load_benchmark("real_coverage")


def test_one_draw_gives_the_normal_quantile(rc):
    f = np.array([[0.0, 5.0, -2.0]])
    q = rc.predictive_quantiles(f, np.array([2.0]), [0.025, 0.975])
    z = special.ndtri(0.975)
    # bisection stops within 1e-6 of sigma
    np.testing.assert_allclose(q[0], f[0] - 2.0 * z, atol=1e-5)
    np.testing.assert_allclose(q[1], f[0] + 2.0 * z, atol=1e-5)


def test_mixture_cdf_at_the_quantile_is_the_probability(rc):
    rng = np.random.default_rng(3)
    f = rng.normal(size=(200, 4)) * 3.0
    sigma = rng.uniform(0.5, 2.0, size=200)
    probs = [0.05, 0.5, 0.95]
    q = rc.predictive_quantiles(f, sigma, probs)
    for j, p in enumerate(probs):
        cdf = special.ndtr((q[j] - f) / sigma[:, None]).mean(axis=0)
        # the CDF's slope is at most 1 / (sqrt(2 pi) min sigma) ~ 0.8, times the 1e-6 tolerance
        np.testing.assert_allclose(cdf, p, atol=1e-5)


def test_metrics_count_rows_inside_and_rmse(rc):
    f = np.zeros((10, 4))  # ten identical draws: f = 0 at four test rows
    sigma = np.ones((2, 5))
    z = special.ndtri(0.975)
    y = np.array([0.0, z - 0.01, z + 0.01, -3.0])
    with np.errstate(invalid="ignore"):  # constant sigma draws: R-hat is 0 / 0
        m = rc.metrics(f, f[:, :2], sigma, y, np.array([1.0, -1.0]))
    assert np.isnan(m["sigma_rhat"])
    assert m["cover95"] == 0.5  # the first two rows lie inside +-1.96
    assert m["width95"] == pytest.approx(2 * z, abs=1e-5)
    assert m["rmse"] == pytest.approx(np.sqrt(np.mean(y ** 2)))
    assert m["train_rmse"] == pytest.approx(1.0)
    assert m["sigma_mean"] == 1.0
    assert (m["chains"], m["draws"]) == (2, 5)


def test_rhat_flags_chains_at_different_levels(rc):
    rng = np.random.default_rng(0)
    same = rng.normal(size=(4, 500))
    shifted = same + np.array([[0.0], [0.0], [2.0], [2.0]])
    # iid chains: R-hat within 1.01 of 1 at 2,000 draws. Half the chains shifted by 2 sd: the
    # between-chain variance of the means is about 1 = the within, so R-hat ~ sqrt(2) ~ 1.41
    # (1.44 here); 1.3 leaves room for the rank normalisation and the draw.
    assert abs(rc.rhat(same) - 1.0) < 0.01
    assert rc.rhat(shifted) > 1.3
    # one chain: its two halves stand in for chains
    assert rc.rhat(np.concatenate([same[:1], same[2:3] + 2.0], axis=1)) > 1.3
