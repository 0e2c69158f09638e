"""The random-effects Gibbs block (``_kernels/random_effects.py``, spec multi_forest.md 4.2)
alone, against exact posteriors (spec 8.4) and its prior (spec 8.2)."""

from __future__ import annotations

import numpy as np
from scipy import integrate, stats

from bartpy_suite._kernels.random_effects import RE_FIXED_SCALES, new_random_effects, random_effects_steps


def _data(seed, n_groups, k, per_group=4):
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_groups), per_group)
    basis = np.ones((group.size, k))
    if k > 1:
        basis[:, 1] = rng.normal(size=group.size)
    beta = rng.normal(size=(n_groups, k))
    y = (basis * beta[group]).sum(axis=1) + 0.5 * rng.normal(size=group.size)
    return group, basis, y


def _run(re, y, sigma2, steps, seed, use_lik=True):
    resid = y.copy()
    g, k = re.xi.shape
    beta, sd = np.empty((steps, g, k)), np.empty((steps, k))
    random_effects_steps(np.random.default_rng(seed), re, resid, sigma2, use_lik, beta, sd)
    # the residual leaves the block as y - gamma of the last draw
    np.testing.assert_allclose(resid, y - (re.basis * (re.alpha * re.xi)[re.group]).sum(axis=1), atol=1e-12)
    return beta, sd


def test_fixed_scales_give_the_exact_gaussian_posterior_of_beta():
    """alpha = 1 and Sigma_xi held fixed: beta_g = xi_g | y ~ N(P^-1 W_g'y / s2, P^-1), P = Sigma^-1 + W_g'W_g / s2.

    Given fixed scales the draws are independent, so the mean's error is sd / sqrt(steps):
    tolerance 4.5 standard errors per entry (a false failure about 1 in 10^5 per entry); the
    covariance entries within 0.03 (their Monte Carlo sd is about sqrt(2 / 20000) ~ 0.01 of
    the variances, which are below 1)."""
    group, basis, y = _data(1, 3, 2)
    sigma2, scales = 0.3, np.array([0.8, 1.7])
    re = new_random_effects(group, basis, 3)
    re.sigma2[:] = scales
    re.conf[RE_FIXED_SCALES] = 1.0
    steps = 20000
    beta, _ = _run(re, y, sigma2, steps, seed=2)
    for g in range(3):
        w = basis[group == g]
        prec = np.diag(1.0 / scales) + w.T @ w / sigma2
        cov = np.linalg.inv(prec)
        mean = cov @ (w.T @ y[group == g]) / sigma2
        se = np.sqrt(np.diag(cov) / steps)
        assert np.all(np.abs(beta[:, g].mean(axis=0) - mean) < 4.5 * se), (g, beta[:, g].mean(axis=0), mean)
        np.testing.assert_allclose(np.cov(beta[:, g].T), cov, atol=0.03)


def _batch_se(x, batches=50):
    """Standard error of the mean of an autocorrelated series by batch means."""
    means = x[: x.size // batches * batches].reshape(batches, -1).mean(axis=1)
    return means.std(ddof=1) / np.sqrt(batches)


def test_full_block_matches_quadrature_of_the_random_intercept_sd():
    """The whole block (steps 1-4, alpha and Sigma_xi drawn) for random intercepts with a fixed
    noise variance: tau = |alpha| sigma has the half-t_2 prior, group means ybar_g | tau ~
    N(0, tau^2 + s2 / n_g), and E[beta_g | y] = E[tau^2 / (tau^2 + s2 / n_g) | y] ybar_g. Both by
    quadrature over tau. Tolerance: 4.5 batch-means standard errors (the chain is autocorrelated)."""
    group, basis, y = _data(3, 5, 1, per_group=3)
    sigma2 = 0.25
    n_g = np.bincount(group)
    ybar = np.bincount(group, weights=y) / n_g

    def post(t):
        v = t * t + sigma2 / n_g
        return 2 * stats.t.pdf(t, 2) * np.exp(-0.5 * np.sum(ybar ** 2 / v + np.log(v)))

    z = integrate.quad(post, 0, np.inf)[0]
    tau_mean = integrate.quad(lambda t: t * post(t), 0, np.inf)[0] / z
    shrink = np.array([integrate.quad(lambda t, g=g: t * t / (t * t + sigma2 / n_g[g]) * post(t), 0, np.inf)[0]
                       for g in range(5)]) / z
    beta, sd = _run(new_random_effects(group, basis, 5), y, sigma2, 200000, seed=4)
    beta, sd = beta[1000:, :, 0], sd[1000:, 0]
    assert abs(sd.mean() - tau_mean) < 4.5 * _batch_se(sd), (sd.mean(), tau_mean, _batch_se(sd))
    for g in range(5):
        assert abs(beta[:, g].mean() - shrink[g] * ybar[g]) < 4.5 * _batch_se(beta[:, g]), g


def test_prior_recovery_product_normal_with_half_t2_sd():
    """Likelihood off (spec 8.2): the effective sd |alpha_k| sigma_k is half-t_2 (scale 1) and each
    beta_kg = alpha_k xi_kg is alpha ~ N(0, 1) times a t_2 (xi_kg | sigma_k^2 normal, sigma_k^2 ~ IG(1, 1)).
    Draws thinned by 20 (the Gibbs sweep on the prior is autocorrelated through sigma^2 and alpha):
    a two-sample KS test against forward simulation at p > 0.001 (a false failure 1 in 1000 if the
    thinned draws were independent; they are close to it at this thinning)."""
    group, basis, y = _data(5, 3, 2)
    beta, sd = _run(new_random_effects(group, basis, 3), y, 1.0, 200000, seed=6, use_lik=False)
    beta, sd = beta[::20], sd[::20]
    rng = np.random.default_rng(7)
    m = 20000
    forward_sd = np.abs(rng.standard_t(2, size=m))
    forward_beta = rng.normal(size=m) * rng.standard_t(2, size=m)
    for k in range(2):
        assert stats.ks_2samp(sd[:, k], forward_sd).pvalue > 1e-3, k
        assert stats.ks_2samp(beta[:, 0, k], forward_beta).pvalue > 1e-3, k
