"""CODA's ESS (``posterior/coda_ess.py``) against references derived by hand and R's printed output."""

import numpy as np
import pytest

from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.coda_ess import _autocovariance, _levinson, coda_ess, spectrum0_ar

# R's data set ``lh`` (48 luteinizing hormone samples, datasets package).
LH = np.array([2.4, 2.4, 2.4, 2.2, 2.1, 1.5, 2.3, 2.3, 2.5, 2.0, 1.9, 1.7, 2.2, 1.8, 3.2, 3.2, 2.7, 2.2, 2.2, 1.9,
               1.9, 1.8, 2.7, 3.0, 2.3, 2.0, 2.0, 2.9, 2.9, 2.7, 2.7, 2.3, 2.6, 2.4, 1.8, 1.7, 1.5, 1.4, 2.1, 3.3,
               3.5, 3.5, 3.1, 2.6, 2.1, 3.4, 3.0, 2.9])


def test_alternating_series_by_hand():
    # x = (1, -1, 1, -1): mean 0; autocovariances (denominator n = 4) c0 = 1, c1 = -3/4, c2 = 1/2,
    # c3 = -1/4; order.max = min(3, floor(10 log10 4) = 6) = 3. Levinson-Durbin: k1 = -3/4,
    # v1 = 7/16; k2 = (1/2 - 9/16) / (7/16) = -1/7, v2 = 3/7; k3 = 1/6, v3 = 5/12.
    # AIC_p = 4 log v_p + 2p: 0, -1.307, 0.611, 2.498 -> order 1, phi = -3/4.
    # var.pred = 7/16 * 4 / (4 - 2) = 7/8; spec = (7/8) / (1 + 3/4)^2 = 2/7;
    # var(x) = 4/3 (denominator n - 1); ESS = 4 * (4/3) / (2/7) = 56/3.
    x = np.array([1.0, -1.0, 1.0, -1.0])
    spec, order = spectrum0_ar(x)
    assert order == 1
    assert spec == pytest.approx(2.0 / 7.0, rel=1e-12)
    assert coda_ess(x) == pytest.approx(56.0 / 3.0, rel=1e-12)
    coefs, variances = _levinson(_autocovariance(x, 3))
    assert variances == pytest.approx([1.0, 7 / 16, 3 / 7, 5 / 12], rel=1e-12)
    assert coefs[1, :2] == pytest.approx([-6 / 7, -1 / 7], rel=1e-12)
    assert coefs[2, 2] == pytest.approx(1 / 6, rel=1e-12)


def test_lh_matches_r_ar_output():
    # R's documented output of ar(lh) (Yule-Walker, AIC): "Coefficients: 0.6534 -0.0636 -0.2269;
    # Order selected 3 sigma^2 estimated as 0.1959" (printed to 4 digits). coda's
    # effectiveSize(lh) is then 48 var(lh) / (var.pred / (1 - sum(ar))^2); from the printed
    # values that is 30.27, which the 4-digit rounding leaves uncertain to about 1e-3 relative.
    n = LH.size
    order_max = min(n - 1, int(np.floor(10 * np.log10(n))))
    coefs, variances = _levinson(_autocovariance(LH - LH.mean(), order_max))
    assert coefs[2, :3] == pytest.approx([0.6534, -0.0636, -0.2269], abs=5e-5)
    var_pred = variances[3] * n / (n - 4)
    assert var_pred == pytest.approx(0.1959, abs=5e-5)
    spec, order = spectrum0_ar(LH)
    assert order == 3
    printed = 0.1959 / (1 - (0.6534 - 0.0636 - 0.2269)) ** 2
    assert spec == pytest.approx(printed, rel=2e-3)
    assert coda_ess(LH) == pytest.approx(n * LH.var(ddof=1) / printed, rel=2e-3)


def test_levinson_agrees_with_a_direct_yule_walker_solve():
    # an independent route: solve the Toeplitz system of every order with numpy
    x = np.random.default_rng(3).normal(size=200).cumsum()
    x = x - x.mean()
    r = _autocovariance(x, 10)
    coefs, variances = _levinson(r)
    for p in range(1, 11):
        toeplitz = np.array([[r[abs(i - j)] for j in range(p)] for i in range(p)])
        phi = np.linalg.solve(toeplitz, r[1:p + 1])
        assert coefs[p - 1, :p] == pytest.approx(phi, rel=1e-8, abs=1e-10)
        assert variances[p] == pytest.approx(r[0] - phi @ r[1:p + 1], rel=1e-8)


def test_ar1_against_the_exact_spectral_formula():
    # AR(1) x_t = phi x_{t-1} + e_t: spectral density at zero sigma_e^2 / (1 - phi)^2, variance
    # sigma_e^2 / (1 - phi^2), so ESS / n = (1 - phi) / (1 + phi) = 1/3 for phi = 0.5. With
    # n = 20,000 the AR estimate of that ratio has a standard deviation of about 1.5%
    # (var(phi_hat) = (1 - phi^2) / n, propagated through (1 - phi) / (1 + phi)); the seed is
    # fixed and 6% is four standard deviations.
    rng = np.random.default_rng(20260101)
    n, phi = 20_000, 0.5
    e = rng.normal(size=n + 500)
    x = np.empty_like(e)
    x[0] = e[0]
    for t in range(1, e.size):
        x[t] = phi * x[t - 1] + e[t]
    x = x[500:]
    assert coda_ess(x) / n == pytest.approx((1 - phi) / (1 + phi), rel=0.06)


def test_chains_add_up_and_constant_chain_is_zero():
    x = LH
    assert coda_ess(np.stack([x, x[::-1]])) == pytest.approx(coda_ess(x) + coda_ess(x[::-1]), rel=1e-12)
    assert coda_ess(np.full(50, 2.0)) == 0.0
    assert coda_ess(np.arange(50.0)) == 0.0  # a straight line in time: coda's lm check gives spec 0


def test_bad_input_names_the_problem():
    with pytest.raises(ArgumentError, match="chain 1.*non-finite"):
        coda_ess(np.stack([LH, np.where(np.arange(48) == 4, np.nan, LH)]))
    with pytest.raises(ArgumentError, match="at least 2 draws"):
        coda_ess(np.ones((2, 1)))
    with pytest.raises(ArgumentError, match="shape"):
        coda_ess(np.ones((2, 2, 2)))


def test_the_flat_chain_threshold_is_rs_all_equal_tolerance():
    """coda's ``identical(all.equal(sd(residuals(lm(x ~ z))), 0), TRUE)`` holds when the residual sd
    is at most all.equal's tolerance sqrt(.Machine$double.eps) = 1.4901e-8 (above it the relative
    difference |sd - 0| / sd = 1 fails). A chain with residual sd 1.495e-8 therefore gets an AR
    fit in R; the module once used 1.5e-8 and returned ESS 0 for it."""
    z = np.arange(1.0, LH.size + 1.0)
    resid = LH - np.polyval(np.polyfit(z, LH, 1), z)
    unit = resid / np.std(resid, ddof=1)
    assert spectrum0_ar(1.495e-8 * unit)[0] > 0.0
    assert coda_ess(1.495e-8 * unit) == pytest.approx(coda_ess(unit), rel=1e-6)  # ESS is scale-free
    assert spectrum0_ar(1.48e-8 * unit) == (0.0, 0)
