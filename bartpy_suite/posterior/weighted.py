"""Summaries and convergence diagnostics of weighted posterior draws.

Continuous-time samplers record each visited tree with a weight (its expected holding time,
Rao-Blackwellized) and SMC returns importance-weighted particles. This module gives the
weighted mean, sd and quantiles, Kish's effective sample size, an effective sample size of the
weighted mean that accounts for both autocorrelation and weight degeneracy, and a weighted
split-R-hat. With uniform weights the diagnostics return arviz-stats' numbers unchanged (bulk
ESS, rank-normalized R-hat), so fits of unweighted samplers keep their summaries.

Weights are relative: any positive scale, normalised inside each function. Edge cases follow
``Fit._diagnostic``: fewer than 4 draws per chain, constant values or non-finite values give
NaN, not an exception; invalid weights (negative, non-finite, all zero, wrong shape) raise
``ArgumentError`` (a ``ValueError``).

Import rule: imports numpy, scipy and the package's ``errors`` module (which imports nothing);
``arviz_stats`` only lazily, inside the functions that return its numbers for uniform weights
(it pulls in scipy.signal). Nothing else from the package, so the samplers may import it.
"""

from __future__ import annotations

import numpy as np
from scipy.fft import irfft, next_fast_len, rfft

from ..errors import ArgumentError

__all__ = ["kish_ess", "weighted_ess", "weighted_mean_sd", "weighted_quantiles", "weighted_rhat"]

#: Weights whose spread (max - min) is at most this fraction of the largest weight count as
#: uniform: floating noise of a normalisation, not a real difference between draws.
UNIFORM_RTOL = 1e-9
MIN_DRAWS = 4
ESS_METHODS = ("auto", "delta")
RHAT_METHODS = ("auto", "split")


# -- checks ------------------------------------------------------------------------------------
def _as_weights(weights, shape: tuple[int, ...]) -> np.ndarray:
    """Weights as a float array of ``shape``; ArgumentError unless finite, >= 0, sum > 0."""
    w = np.asarray(weights, dtype=float)
    if w.shape != shape:
        raise ArgumentError(f"weights: shape {w.shape} does not match the values' shape {shape}")
    if w.size == 0:
        raise ArgumentError("weights: empty")
    if not np.isfinite(w).all():
        raise ArgumentError("weights: must be finite")
    if (w < 0).any():
        raise ArgumentError("weights: must be >= 0")
    if not w.sum() > 0:
        raise ArgumentError("weights: must not all be zero")
    return w


def _is_uniform(w: np.ndarray) -> bool:
    """All weights equal up to floating tolerance (relative ``UNIFORM_RTOL``)."""
    return bool(np.ptp(w) <= UNIFORM_RTOL * np.max(w))


def _chains(values, weights) -> tuple[np.ndarray, np.ndarray]:
    """Values and checked weights as float (chain, draw) arrays; 1-D arrays are one chain."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim not in (1, 2):
        raise ArgumentError(f"values: expected a (chain, draw) array, got shape {arr.shape}")
    w = _as_weights(weights, arr.shape)
    if arr.ndim == 1:
        arr, w = arr[None, :], w[None, :]
    return arr, w


def _undefined(arr: np.ndarray) -> bool:
    """The diagnostic is undefined: too few draws, non-finite or constant values."""
    return arr.shape[1] < MIN_DRAWS or not np.isfinite(arr).all() or np.ptp(arr) == 0


def _split(arr: np.ndarray) -> np.ndarray:
    """Split each chain in halves (middle draw dropped when odd), as arviz-stats does."""
    half = arr.shape[1] // 2
    return np.vstack((arr[:, :half], arr[:, -half:]))


# -- summaries ---------------------------------------------------------------------------------
def kish_ess(weights) -> float:
    """Kish's effective sample size of importance weights.

    Parameters
    ----------
    weights : array_like
        Non-negative weights of any shape (flattened), any scale.

    Returns
    -------
    float
        ``(sum w)**2 / sum w**2``: between 1 (one draw carries all the weight) and the number
        of draws (uniform weights). It is the ESS of the weighted mean of *independent* draws
        whose values are independent of the weights (Kish 1965; Liu 1996).

    References
    ----------
    Kish, L. (1965). *Survey Sampling*. Wiley, New York.
    Liu, J. S. (1996). Metropolized independent sampling with comparisons to rejection sampling
    and importance sampling. *Statistics and Computing* 6, 113-119.
    """
    w = np.asarray(weights, dtype=float).reshape(-1)
    w = _as_weights(w, w.shape)
    w = w / w.max()  # no overflow of the squares
    return float(w.sum() ** 2 / (w**2).sum())


def weighted_mean_sd(values, weights) -> tuple[float, float]:
    """Weighted mean and standard deviation of draws.

    Parameters
    ----------
    values : array_like
        Draws, shape (chain, draw) or (S,).
    weights : array_like
        Non-negative weights of the same shape, any scale (normalised inside).

    Returns
    -------
    mean, sd : float
        ``mean = sum v x`` and ``sd = sqrt(sum v (x - mean)**2)`` with ``v = w / sum w``: the
        moments of the weighted empirical distribution (no small-sample correction), so a draw
        of integer weight k counts exactly as k copies of it. NaN when a value is NaN.
    """
    x = np.asarray(values, dtype=float)
    w = _as_weights(weights, x.shape)
    v = w / w.sum()
    mean = float((v * x).sum())
    dev = x - mean
    with np.errstate(over="ignore", under="ignore"):
        sd = float(np.sqrt((v * dev**2).sum()))
    if not 0.0 < sd < np.inf and np.isfinite(dev).all():
        # Squares overflow past ~1e154 and underflow below ~1e-154 (a response on the scale of
        # 1e250 or 1e-250): the same sum on deviations scaled by their largest magnitude.
        scale = float(np.abs(dev).max())
        if scale > 0.0:
            sd = scale * float(np.sqrt((v * (dev / scale) ** 2).sum()))
    return mean, sd


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, probs) -> np.ndarray:
    """Quantiles along axis 0 of ``values`` (S, m) under sample weights (S,).

    Parameters
    ----------
    values : numpy.ndarray
        Draws, shape (S,) or (S, m); quantiles are taken along axis 0.
    weights : numpy.ndarray
        Non-negative weights, shape (S,), any scale.
    probs : float or array_like
        Probabilities in [0, 1].

    Returns
    -------
    numpy.ndarray
        Shape ``(len(probs),) + values.shape[1:]``. Uniform weights (``np.allclose`` to the
        first one) give exactly numpy's default (linear) ``np.quantile(values, probs, axis=0)``;
        otherwise the inverse of the weighted empirical CDF: the smallest draw whose cumulative
        normalised weight reaches ``p`` (numpy's ``inverted_cdf``; for integer weights it equals
        ``np.quantile(..., method="inverted_cdf")`` of the sample with each draw repeated
        ``w_i`` times).

    Notes
    -----
    Same behaviour as ``bartpy_suite.posterior.fit.weighted_quantiles``, so that function can
    become an import of this one. The uniformity test is numpy's ``allclose`` (absolute
    tolerance 1e-8), kept as it is for that reason: weights must not all be below ~1e-8 unless
    they really are uniform.
    """
    probs = np.atleast_1d(np.asarray(probs, dtype=float))
    if np.allclose(weights, weights[0]):
        return np.quantile(values, probs, axis=0)
    order = np.argsort(values, axis=0)
    sorted_vals = np.take_along_axis(values, order, axis=0)
    cum = np.cumsum(weights[order], axis=0)
    cum /= cum[-1]
    out = np.empty((probs.size,) + values.shape[1:])
    for j, q in enumerate(probs):
        idx = (cum < q).sum(axis=0)
        idx = np.minimum(idx, values.shape[0] - 1)
        out[j] = np.take_along_axis(sorted_vals, idx[None], axis=0)[0]
    return out


# -- effective sample size ---------------------------------------------------------------------
def _autocov(arr: np.ndarray) -> np.ndarray:
    """Biased (divide by n) autocovariance of each row at every lag, by FFT."""
    n = arr.shape[1]
    m = next_fast_len(2 * n)
    centred = arr - arr.mean(axis=1, keepdims=True)
    f = rfft(centred, n=m, axis=1)
    return irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n


def _geyer(arr: np.ndarray) -> tuple[float, float]:
    """Multi-chain variance and integrated autocorrelation time of a (chain, draw) array.

    The algorithm of arviz-stats' ``_ess`` (Vehtari et al. 2021, eqs. 3-4, 10): autocorrelations
    ``rho_t = 1 - (W - mean_c acov_c(t)) / var_plus`` relative to the multi-chain variance
    ``var_plus = mean_c acov_c(0) + Var(chain means)``, summed with Geyer's initial positive
    sequence and made monotone (Geyer 1992). Returns ``(var_plus, tau)``; the asymptotic
    variance of the mean of ``arr`` is ``var_plus * tau / arr.size``.
    """
    n_chain, n_draw = arr.shape
    acov = _autocov(arr)
    mean_acov = acov.mean(axis=0)
    mean_var = mean_acov[0] * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(arr.mean(axis=1), ddof=1)
    rho = np.zeros(n_draw)
    rho[0] = rho_even = 1.0
    rho[1] = rho_odd = 1.0 - (mean_var - mean_acov[1]) / var_plus
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:  # initial positive sequence
        rho_even = 1.0 - (mean_var - mean_acov[t + 1]) / var_plus
        rho_odd = 1.0 - (mean_var - mean_acov[t + 2]) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:  # initial monotone sequence
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * rho[: max_t + 1].sum() + rho[max_t + 1 : max_t + 2].sum()
    tau = max(tau, 1.0 / np.log10(arr.size))
    return float(var_plus), float(tau)


def weighted_ess(values, weights, method: str = "auto") -> float:
    """Effective sample size of the weighted mean of (chain, draw) draws.

    Parameters
    ----------
    values : array_like
        Draws, shape (chain, draw); a 1-D array is one chain.
    weights : array_like
        Non-negative weights of the same shape, relative across *all* draws (as
        ``Fit.weights``), any scale.
    method : {"auto", "delta"}
        ``"auto"``: uniform weights (equal up to a relative 1e-9) give arviz-stats' bulk ESS
        exactly, ``array_stats.ess(values, chain_axis=0, draw_axis=1, method="bulk")`` (split
        chains, rank-normalised; Vehtari et al. 2021), so unweighted fits keep their numbers;
        other weights use the delta method below. ``"delta"``: the delta method always.

    Returns
    -------
    float
        The ESS; NaN for fewer than 4 draws per chain, constant or non-finite values.

    Notes
    -----
    The delta method defines the ESS by a variance ratio, ``ESS = Var_pi(h) / Var(mu_hat)``,
    where ``mu_hat = sum w_i h_i / sum w_i`` is the self-normalised (ratio) estimator of the
    mean. Linearising the ratio (the delta method for self-normalised importance sampling;
    Hesterberg 1995, Owen 2013 ch. 9) gives ``mu_hat - mu ~ (1/S) sum_i z_i`` with

    ``z_i = S w_i (h_i - mu_hat) / sum_j w_j``,

    so ``Var(mu_hat) ~ sigma2_as(z) / S``, the asymptotic variance of the mean of the sequence
    ``z``. That is estimated on split chains as in arviz-stats' ESS: ``sigma2_as(z) = var_plus(z)
    * tau(z)`` with ``var_plus`` the multi-chain variance (within-chain variance plus the
    variance of the chain means, so chains that disagree lower the ESS) and ``tau`` the
    integrated autocorrelation time summed up to Geyer's initial monotone sequence truncation
    (Geyer 1992; Vehtari et al. 2021). With ``Var_pi(h)`` estimated by the weighted variance
    ``s2_w = sum w (h - mu_hat)**2 / sum w``:

    ``ESS = S * s2_w / (var_plus(z) * tau(z))``.

    Checks: independent draws with weights independent of ``h`` give Kish's
    ``(sum w)**2 / sum w**2``; uniform weights give ``S / tau(h)``, arviz-stats' ``"mean"`` ESS
    up to the factor ``s2_w / var_plus(h)`` = 1 - O(1/S). It is the ESS of the *mean* on the
    original scale, not rank-normalised (ranks of weighted draws have no standard definition),
    so for heavy-tailed ``h`` it can differ from the bulk ESS that uniform weights report.

    The product ``ESS_autocorr x Kish / S`` is not used: it is right only when the weights are
    as autocorrelated as ``h``. For an AR(1) ``h`` (coefficient phi) with independent weights the
    true value is ``S / (S / Kish + 2 phi / (1 - phi))``, which the delta method reproduces and
    the product underestimates several fold.

    References
    ----------
    Geyer, C. J. (1992). Practical Markov chain Monte Carlo. *Statistical Science* 7, 473-483.
    Hesterberg, T. (1995). Weighted average importance sampling and defensive mixture
    distributions. *Technometrics* 37, 185-194.
    Owen, A. B. (2013). *Monte Carlo Theory, Methods and Examples*, ch. 9.
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Bürkner, P.-C. (2021). Rank-normalization,
    folding, and localization: an improved R-hat for assessing convergence of MCMC.
    *Bayesian Analysis* 16, 667-718.
    """
    if method not in ESS_METHODS:
        raise ArgumentError(f"method: must be one of {ESS_METHODS}, got {method!r}")
    arr, w = _chains(values, weights)
    if _undefined(arr):
        return float("nan")
    if method == "auto" and _is_uniform(w):
        from arviz_stats.base import array_stats  # here: it pulls in scipy.signal

        with np.errstate(all="ignore"):
            return float(array_stats.ess(arr, chain_axis=0, draw_axis=1, method="bulk"))
    v = w / w.sum()
    mu = float((v * arr).sum())
    s2_w = float((v * (arr - mu) ** 2).sum())
    if not s2_w > 0:  # all the weight on one value
        return float("nan")
    z = arr.size * v * (arr - mu)
    with np.errstate(all="ignore"):
        var_plus, tau = _geyer(_split(z))
        ess = arr.size * s2_w / (var_plus * tau)
    return float(ess) if np.isfinite(ess) else float("nan")


# -- R-hat -------------------------------------------------------------------------------------
def weighted_rhat(values, weights, method: str = "auto") -> float:
    """Weighted split-R-hat of (chain, draw) draws.

    Parameters
    ----------
    values : array_like
        Draws, shape (chain, draw); at least 2 chains.
    weights : array_like
        Non-negative weights of the same shape, any scale; each split chain's weights are
        normalised on their own.
    method : {"auto", "split"}
        ``"auto"``: uniform weights (equal up to a relative 1e-9) give arviz-stats'
        rank-normalised R-hat exactly, ``array_stats.rhat(values, chain_axis=0, draw_axis=1,
        method="rank")`` (Vehtari et al. 2021), so unweighted fits keep their numbers; other
        weights use the weighted split-R-hat below. ``"split"``: the weighted split-R-hat always
        (with uniform weights it equals arviz-stats' ``method="split"``).

    Returns
    -------
    float
        R-hat; NaN for one chain, fewer than 4 draws per chain, constant or non-finite values,
        or a split chain with no weight or all its weight on a single draw; inf when every split
        chain is constant but they differ.

    Notes
    -----
    Gelman-Rubin's between/within comparison on split chains (each chain cut in halves, as in
    Vehtari et al. 2021, so a trend within a chain shows), with each split chain ``j`` summarised
    by its own normalised weights ``v = w / sum w``:

    - mean ``m_j = sum v h``; effective length ``n_j = 1 / sum v**2`` (Kish);
    - variance ``s2_j = sum v (h - m_j)**2 / (1 - 1/n_j)`` (unbiased for reliability weights;
      ddof=1 for uniform weights);
    - ``W = mean_j s2_j``, ``B / n = Var_j(m_j)`` (ddof=1), ``n`` the harmonic mean of the ``n_j``
      (the expected variance of the chain means is ``sigma**2 mean_j(1/n_j)``);
    - ``R-hat = sqrt(((n - 1) / n W + B / n) / W)``.

    With uniform weights every ``n_j`` is the split-chain length and this is the classic split
    R-hat. It is not rank-normalised or folded for non-uniform weights: rank-normalising
    weighted draws (ranks under a weighted empirical CDF, then a normal score) is not a standard
    or validated procedure, so the weighted version stays on the original scale; it compares
    means and therefore is less sensitive than the rank R-hat to chains that differ only in
    scale or tails.
    """
    if method not in RHAT_METHODS:
        raise ArgumentError(f"method: must be one of {RHAT_METHODS}, got {method!r}")
    arr, w = _chains(values, weights)
    if arr.shape[0] < 2 or _undefined(arr):
        return float("nan")
    if method == "auto" and _is_uniform(w):
        from arviz_stats.base import array_stats  # here: it pulls in scipy.signal

        with np.errstate(all="ignore"):
            return float(array_stats.rhat(arr, chain_axis=0, draw_axis=1, method="rank"))
    h, ws = _split(arr), _split(w)
    with np.errstate(all="ignore"):
        v = ws / ws.sum(axis=1, keepdims=True)
        m = (v * h).sum(axis=1)
        inv_n = (v**2).sum(axis=1)
        s2 = (v * (h - m[:, None]) ** 2).sum(axis=1) / (1.0 - inv_n)
        within = s2.mean()
        n_h = 1.0 / inv_n.mean()
        var_plus = (n_h - 1.0) / n_h * within + np.var(m, ddof=1)
        rhat = np.sqrt(var_plus / within)
    return float(rhat)  # inf when every split chain is constant but they differ
