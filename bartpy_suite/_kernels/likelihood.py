"""Integrated (marginal) likelihoods of the leaf models, with every constant kept.

A tree's log marginal likelihood is written as ``sum_i lm_i + G(sum_i b_i)``: a sum of per-leaf
terms ``lm_i`` plus, for the common-variance model only, a global term of the summed leaf
scatter ``b_i``. Tree moves then update two running sums instead of recomputing every leaf.

Model codes (``MODEL_*``) are shared with the tree kernels.
"""

from __future__ import annotations

import math

from .jit import helper

MODEL_MEAN_SHIFT = 0  # common sigma, mu_i ~ N(mu_bar, sigma^2/a), sigma^2 ~ IG(nu/2, nu*lam/2)
MODEL_MEAN_VARIANCE_SHIFT = 1  # sigma_i per leaf (thesis eq. 3.3)
MODEL_CLASSIFICATION = 2  # Dirichlet-multinomial leaves (thesis eq. 3.4 / 3.17)
MODEL_NORMAL_KNOWN_VARIANCE = 3  # BART backfitting: mu ~ N(0, tau2), sigma^2 given
MODEL_LOG_GAMMA = 4  # log-linear BART: leaf factor gamma ~ Gamma(c, d), Poisson-type augmented likelihood
# Basis / weighted leaves (issue 30; spec multi_forest.md 2.1-2.2): row i of a leaf has mean b_i theta and
# precision w_i / sigma^2, theta ~ N(0, tau2); the rows' (b_i, w_i b_i, w_i b_i^2) are in ``BasisTarget.basis``
MODEL_BASIS_NORMAL = 5
# Log-linear variance leaves (issue 30; spec multi_forest.md 5.3): a variance tree's leaf holds lambda = log s,
# s ~ IG(lg_shape, lg_rate), row i's noise variance V_{-j,i} s / w_i; ``Data.y`` holds u_i = w_i r_i^2 / V_{-j,i}
# and ``Data.ycls`` 1 for the rows with w_i > 0 (``variance_forest.py``)
MODEL_LOG_VARIANCE = 6

LOG_PI = math.log(math.pi)


@helper
def mean_shift_leaf_terms(n, ybar, ssd, a, mu_bar):
    """Per-leaf pieces of the common-sigma marginal (CGM 1998, paper 003 closed form).

    Returns ``(lm, b)`` with ``lm = 0.5*log(a/(n+a))`` and
    ``b = s_i + t_i = ssd + n*a/(n+a)*(ybar-mu_bar)^2``.
    """
    lm = 0.5 * (math.log(a) - math.log(n + a))
    d = ybar - mu_bar
    b = ssd + n * a / (n + a) * d * d
    return lm, b


@helper
def leaf_log_marginal_log_gamma(count, rate_sum, shape, rate):
    """log of the integral of gamma^count exp(-gamma rate_sum) over gamma ~ Gamma(shape, rate):
    ``shape log(rate) - lgamma(shape) + lgamma(shape + count) - (shape + count) log(rate + rate_sum)``.

    The leaf term of log-linear BART (Murray 2021) after the augmentation
    p(y_i = k, phi_i | lambda) = lambda_k(x_i) exp(-phi_i sum_l lambda_l(x_i)): for tree t of
    class k a leaf with factor gamma contributes gamma^count exp(-gamma rate_sum), ``count`` its
    rows of class k and ``rate_sum`` the sum over its rows of phi_i times the other trees' factors.
    """
    return (shape * math.log(rate) - math.lgamma(shape) + math.lgamma(shape + count)
            - (shape + count) * math.log(rate + rate_sum))


@helper
def mean_shift_global_term(n_total, b_sum, nu, lam):
    """Global part of the common-sigma marginal: constant c and ``(sum b + nu*lam)^(-(n+nu)/2)``.

    ``log c = -n/2 log(pi) + nu/2 log(nu*lam) + lgamma((n+nu)/2) - lgamma(nu/2)``.
    """
    logc = (
        -0.5 * n_total * LOG_PI
        + 0.5 * nu * math.log(nu * lam)
        + math.lgamma(0.5 * (n_total + nu))
        - math.lgamma(0.5 * nu)
    )
    return logc - 0.5 * (n_total + nu) * math.log(b_sum + nu * lam)


@helper
def tree_log_marginal_mean_shift(counts, ybars, ssds, a, mu_bar, nu, lam):
    """log p(Y | X, T) of the common-sigma mean-shift model, mu and sigma integrated out.

    Paper 003 (CGM 1998 lecture notes), closed form:
    ``p(Y|X,T) = c a^{b/2} / prod_i (n_i+a)^{1/2} * (sum_i (s_i + t_i) + nu*lam)^{-(n+nu)/2}``.

    Parameters
    ----------
    counts, ybars, ssds : 1-d arrays
        Leaf sizes n_i, leaf means and within-leaf sums of squared deviations S_i.
    a, mu_bar, nu, lam : float
        Prior hyperparameters.
    """
    lm_sum = 0.0
    b_sum = 0.0
    n_total = 0.0
    for i in range(counts.shape[0]):
        lm, b = mean_shift_leaf_terms(counts[i], ybars[i], ssds[i], a, mu_bar)
        lm_sum += lm
        b_sum += b
        n_total += counts[i]
    return lm_sum + mean_shift_global_term(n_total, b_sum, nu, lam)


@helper
def leaf_log_marginal_mean_variance(n, ybar, ssd, a, mu_bar, nu, lam):
    """log p(Y_i) of one leaf with its own (mu_i, sigma_i) integrated out (thesis eq. 3.3).

    ``pi^{-n/2} (nu lam)^{nu/2} sqrt(a/(n+a)) Gamma((n+nu)/2)/Gamma(nu/2)
    (nu lam + S_i + n a/(n+a) (ybar - mu_bar)^2)^{-(n+nu)/2}``.
    """
    d = ybar - mu_bar
    b = ssd + n * a / (n + a) * d * d
    return (
        -0.5 * n * LOG_PI
        + 0.5 * nu * math.log(nu * lam)
        + 0.5 * (math.log(a) - math.log(n + a))
        + math.lgamma(0.5 * (n + nu))
        - math.lgamma(0.5 * nu)
        - 0.5 * (n + nu) * math.log(nu * lam + b)
    )


@helper
def leaf_log_marginal_dirichlet(class_counts, class_alpha):
    """log p(Y_i) of one leaf under a symmetric Dirichlet(class_alpha) prior (thesis eq. 3.4/3.17).

    ``Gamma(K alpha)/Gamma(alpha)^K * prod_k Gamma(n_k + alpha) / Gamma(n + K alpha)``.
    """
    k = class_counts.shape[0]
    n = 0.0
    out = math.lgamma(k * class_alpha) - k * math.lgamma(class_alpha)
    for j in range(k):
        out += math.lgamma(class_counts[j] + class_alpha)
        n += class_counts[j]
    return out - math.lgamma(n + k * class_alpha)


@helper
def leaf_log_marginal_normal_known_variance(n, r_sum, sigma2, tau2):
    """log p(R_i) of one leaf with mu ~ N(0, tau2) integrated out, sigma2 known, up to a term
    ``-sum r^2/(2 sigma2) - n/2 log(2 pi sigma2)`` that is the same for every tree over the
    same rows (PG-BART section 2, used in Bayesian backfitting).
    """
    prec = 1.0 + n * tau2 / sigma2
    return -0.5 * math.log(prec) + 0.5 * tau2 * r_sum * r_sum / (sigma2 * (sigma2 + n * tau2))


@helper
def leaf_log_marginal_basis(a_sum, c_sum, sigma2, tau2):
    """log p(R_leaf) of a basis leaf (spec multi_forest.md 2.1-2.2) with theta ~ N(0, tau2) integrated
    out, where R_i ~ N(b_i theta, sigma2 / w_i): ``a_sum = sum w_i b_i^2``, ``c_sum = sum w_i b_i R_i``.

    ``-1/2 log(1 + tau2 A) + c^2 / (2 (A + 1/tau2))`` with ``A = a_sum / sigma2``, ``c = c_sum / sigma2``,
    written without dividing by tau2 (``tau2 = 0`` is allowed). It leaves out
    ``sum_i [1/2 log(w_i / (2 pi sigma2)) - w_i R_i^2 / (2 sigma2)]`` (rows with w_i > 0), the same for
    every partition of the same rows (spec 1.3). With ``b_i = w_i = 1`` it is
    ``leaf_log_marginal_normal_known_variance`` (``a_sum = n``).
    """
    prec = 1.0 + a_sum * tau2 / sigma2
    return -0.5 * math.log(prec) + 0.5 * tau2 * c_sum * c_sum / (sigma2 * (sigma2 + a_sum * tau2))


@helper
def leaf_log_marginal_log_variance(n_pos, s_sum, shape, rate):
    """log p(r_leaf) of a variance leaf (spec multi_forest.md 5.3) with s ~ IG(shape, rate) integrated out,
    where r_i ~ N(0, V_i s / w_i): ``n_pos`` rows with w_i > 0, ``s_sum`` = S = sum_i w_i r_i^2 / V_i.

    ``shape log(rate) - lgamma(shape) + lgamma(shape + n/2) - (shape + n/2) log(rate + S/2)``: the
    log-gamma marginal of ``leaf_log_marginal_log_gamma`` in the precision 1/s with count n/2 and rate sum
    S/2. It leaves out ``sum_i 1/2 log(w_i / (2 pi V_i))`` (rows with w_i > 0), which depends on the other
    trees only and cancels in every move of this tree (spec 5.3).
    """
    return leaf_log_marginal_log_gamma(0.5 * n_pos, 0.5 * s_sum, shape, rate)


@helper
def draw_inverse_gamma(rng, shape, scale):
    """One draw of IG(shape, scale) (density proportional to x^{-shape-1} exp(-scale/x))."""
    return scale / rng.gamma(shape, 1.0)


