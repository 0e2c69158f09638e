"""CODA's effective sample size: ``coda::effectiveSize`` (Plummer, Best, Cowles & Vines 2006).

The PG-BART paper (Lakshminarayanan, Roy & Teh 2015, section 4.1) reports "ESS computed using
R-CODA"; this module reproduces that estimator so that our numbers can stand beside the paper's.
It is *not* the package's default ESS (``weighted.weighted_ess``: arviz-stats' rank-normalised
split-chain bulk ESS, Vehtari et al. 2021); the two answer slightly different questions and
differ most on short or drifting chains, so benchmarks report both.

For one chain x_1..x_n, ``coda::effectiveSize`` is ``n * var(x) / spectrum0.ar(x)$spec``:

* ``var(x)`` is the sample variance (denominator n - 1);
* ``spectrum0.ar`` fits an autoregressive model with R's ``ar(x, aic = TRUE)`` (method
  Yule-Walker, ``stats:::ar.yw.default``): the series is demeaned, its autocovariances
  ``c_k = sum_{t} x_t x_{t+k} / n`` (denominator n, as ``acf(type = "covariance")``) are computed
  up to ``order.max = min(n - 1, floor(10 log10 n))``, the Yule-Walker equations are solved for
  every order p = 0..order.max by the Levinson-Durbin recursion (R's Fortran ``eureka``), giving
  the innovation variances v_p, and the order minimising ``AIC_p = n log v_p + 2 p`` is chosen
  (the first one on a tie). R then rescales the innovation variance
  ``var.pred = v_p * n / (n - (p + 1))``;
* the spectral density at frequency zero is ``spec = var.pred / (1 - sum_k phi_k)^2``.

A series whose residuals about a least-squares line in time have zero standard deviation
(``all.equal(sd, 0)``: sd at most sqrt(machine epsilon) = 1.49e-8) has ``spec = 0`` and ESS 0, as in CODA.
Several chains (CODA's ``mcmc.list``) give the **sum** of the per-chain values, as
``effectiveSize`` does.

Import rule: numpy and the package's errors only.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentError

# R's all.equal(sd, 0) (target sd, current 0) with its default tolerance sqrt(.Machine$double.eps):
# for sd above the tolerance the comparison is relative (|sd - 0| / sd = 1, not equal); at or below
# it absolute (sd <= tolerance: equal).
_ALL_EQUAL_TOLERANCE = math.sqrt(np.finfo(np.float64).eps)  # 1.4901161193847656e-08


def _autocovariance(x: np.ndarray, max_lag: int) -> np.ndarray:
    """c_0..c_max_lag of a demeaned series, denominator n (``acf(type="covariance")``)."""
    n = x.size
    return np.array([float(np.dot(x[: n - k], x[k:])) / n for k in range(max_lag + 1)])


def _levinson(r: np.ndarray):
    """Yule-Walker fits of every order 1..len(r) - 1 by the Levinson-Durbin recursion.

    Returns ``(coefs, variances)``: ``coefs[p - 1, :p]`` are the AR(p) coefficients and
    ``variances[p]`` the innovation variance of order p (``variances[0] = r[0]``), as the
    ``coefs`` and ``vars`` of R's ``eureka``.
    """
    order_max = r.size - 1
    coefs = np.zeros((order_max, order_max))
    variances = np.empty(order_max + 1)
    variances[0] = r[0]
    phi = np.zeros(0)
    v = r[0]
    for p in range(1, order_max + 1):
        # reflection coefficient: (c_p - sum_k phi_k c_{p-k}) / v_{p-1}
        k = (r[p] - float(np.dot(phi, r[p - 1:0:-1]))) / v
        phi = np.concatenate([phi - k * phi[::-1], [k]])
        v = v * (1.0 - k * k)
        coefs[p - 1, :p] = phi
        variances[p] = v
    return coefs, variances


def spectrum0_ar(x) -> tuple[float, int]:
    """Spectral density at frequency zero of one chain by an AR fit (``coda::spectrum0.ar``).

    Parameters
    ----------
    x : array_like
        One chain, 1-D, at least 2 finite values.

    Returns
    -------
    spec : float
        ``var.pred / (1 - sum(ar))^2`` of R's ``ar(x, aic=TRUE)`` (Yule-Walker), or 0 for a
        series that is constant about a line in time.
    order : int
        The AR order chosen by AIC (0 when ``spec`` is 0).

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``x`` is not 1-D, has fewer than 2 values or a non-finite value.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ArgumentError(f"x: spectrum0_ar needs one chain of at least 2 draws (a 1-D array); got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        bad = np.flatnonzero(~np.isfinite(x))[:5].tolist()
        raise ArgumentError(f"x: the chain has non-finite values at draws {bad}; drop or fix them first")
    n = x.size
    # coda: lm(x ~ z), z = 1..n; a zero-sd residual means no variation to estimate
    z = np.arange(1.0, n + 1.0)
    zc = z - z.mean()
    xc = x - x.mean()
    slope = float(np.dot(zc, xc)) / float(np.dot(zc, zc))
    resid = xc - slope * zc
    if abs(float(np.std(resid, ddof=1))) <= _ALL_EQUAL_TOLERANCE:
        return 0.0, 0
    order_max = min(n - 1, int(math.floor(10.0 * math.log10(n))))
    r = _autocovariance(xc, order_max)
    coefs, variances = _levinson(r)
    with np.errstate(divide="ignore"):
        aic = n * np.log(variances) + 2.0 * np.arange(order_max + 1) + 2.0  # + 2 * demean, as R
    order = int(np.argmin(aic))  # the first minimum, as R's (0:order.max)[xaic == 0][1]
    ar = coefs[order - 1, :order] if order else np.zeros(0)
    var_pred = variances[order] * n / (n - (order + 1))
    return float(var_pred / (1.0 - ar.sum()) ** 2), order


def coda_ess(values) -> float:
    """Effective sample size as ``coda::effectiveSize`` computes it.

    Parameters
    ----------
    values : array_like
        Draws: 1-D (one chain) or (chain, draw). Each chain needs at least 2 finite draws.

    Returns
    -------
    float
        ``n * var(x) / spectrum0.ar(x)$spec`` per chain (0 for a chain constant about a line in
        time), summed over the chains (CODA's rule for an ``mcmc.list``).

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``values`` has more than 2 dimensions, fewer than 2 draws per chain or a non-finite
        value.

    Notes
    -----
    The estimator extrapolates the spectrum from a finite-order AR model, so it can exceed the
    number of draws for anticorrelated chains and is unreliable on chains too short to fit the
    autocorrelation (CODA's own caveat). See the module docstring for the exact steps.

    Examples
    --------
    >>> import numpy as np
    >>> from bartpy_suite.posterior.coda_ess import coda_ess
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> 900 < coda_ess(x) < 1100
    True
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ArgumentError(f"values: expected draws of shape (draw,) or (chain, draw); got shape {arr.shape}")
    total = 0.0
    for c in range(arr.shape[0]):
        x = arr[c]
        try:
            spec, _ = spectrum0_ar(x)
        except ArgumentError as err:
            raise ArgumentError(f"values: chain {c}: {err}") from None
        if spec > 0.0:
            total += x.size * float(np.var(x, ddof=1)) / spec
    return total
