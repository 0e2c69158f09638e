"""The basis / weighted Gaussian leaf model (issue 30; spec multi_forest.md 2.1-2.2, tests 8.1).

Row i of a leaf has mean b_i theta and precision w_i / sigma^2, theta ~ N(0, tau2). ``tree.leaf_terms``
scores it (``likelihood.MODEL_BASIS_NORMAL`` with a ``records.BasisTarget``) and
``basis.draw_basis_leaves`` draws theta; both are checked against quadrature and the closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from bartpy_suite._kernels import tree as _tree
from bartpy_suite._kernels.basis import basis_exchange_fits, draw_basis_leaves, set_basis_leaf_terms
from bartpy_suite._kernels.likelihood import (
    MODEL_BASIS_NORMAL,
    leaf_log_marginal_basis,
    leaf_log_marginal_normal_known_variance,
)
from bartpy_suite._kernels.records import make_basis_target, make_prior

TAG = _tree.model_tag(MODEL_BASIS_NORMAL)


def _case(seed, n=12, zero_basis=3):
    """Residuals, basis (some rows 0, as controls under a treatment basis), weights, sigma^2, tau2."""
    rng = np.random.default_rng(seed)
    r = rng.normal(0.3, 1.2, n)
    b = rng.normal(0.0, 1.0, n)
    b[:zero_basis] = 0.0
    w = rng.uniform(0.2, 3.0, n)
    return r, b, w, float(rng.uniform(0.3, 2.0)), float(rng.uniform(0.05, 1.5))


def _target(b, w, sigma2, tau2, likelihood=True):
    prior = make_prior(model=MODEL_BASIS_NORMAL, likelihood=likelihood)
    return make_basis_target(prior, np.array([sigma2]), tau2, np.stack([b, w * b, w * b * b]))


def _quadrature_log_marginal(r, b, w, sigma2, tau2):
    """log of the integral over theta of prod_i N(r_i; b_i theta, sigma2 / w_i) N(theta; 0, tau2)."""
    sd = np.sqrt(sigma2 / w)

    def integrand(theta):
        return math.exp(np.sum(stats.norm.logpdf(r, b * theta, sd)) + stats.norm.logpdf(theta, 0, math.sqrt(tau2))
                        - offset)

    # centre the integrand at the posterior mean to keep it O(1)
    a = np.sum(w * b * b) / sigma2
    c = np.sum(w * b * r) / sigma2
    mean = c / (a + 1 / tau2)
    offset = float(np.sum(stats.norm.logpdf(r, b * mean, sd)) + stats.norm.logpdf(mean, 0, math.sqrt(tau2)))
    width = 12.0 / math.sqrt(a + 1 / tau2)
    value, _ = integrate.quad(integrand, mean - width, mean + width, epsabs=0, epsrel=1e-11, limit=200)
    return math.log(value) + offset


def _dropped_constant(r, w, sigma2):
    """The per-row terms the leaf's lm leaves out (spec 1.3): sum_i 1/2 log(w_i / (2 pi sigma2)) - w_i r_i^2 /
    (2 sigma2)."""
    return float(np.sum(0.5 * np.log(w / (2 * np.pi * sigma2)) - w * r * r / (2 * sigma2)))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_leaf_terms_match_quadrature(seed):
    """lm of ``tree.leaf_terms`` + the dropped per-row constants = the log marginal by quadrature.

    Tolerance 1e-8 absolute: quad's relative error is set to 1e-11 on an integrand of order 1 and the
    closed form is exact, so anything above ~1e-10 is a wrong formula, not rounding."""
    r, b, w, sigma2, tau2 = _case(seed)
    tree = _tree.new_tree(r.size, 8)
    target = _target(b, w, sigma2, tau2)
    lm, c = _tree.leaf_terms(tree, 0, r, np.zeros(0, dtype=np.int64), target, np.zeros(1), TAG)
    assert c == pytest.approx(np.sum(w * b * r), rel=1e-12)
    exact = _quadrature_log_marginal(r, b, w, sigma2, tau2)
    assert lm + _dropped_constant(r, w, sigma2) == pytest.approx(exact, abs=1e-8)


def test_partition_differences_do_not_depend_on_the_dropped_constants():
    """Spec 8.1: (left + right - parent) of the lm equals that of the full log marginals, the per-row
    constants cancelling; rows of a leaf are a segment of the tree's ``perm``."""
    r, b, w, sigma2, tau2 = _case(7, n=15)
    target = _target(b, w, sigma2, tau2)
    tree = _tree.new_tree(r.size, 8)
    left = np.array([0, 2, 3, 7, 9, 11, 14])
    right = np.setdiff1d(np.arange(r.size), left)
    tree.perm[:] = np.concatenate([left, right])

    def lm_of(start, end):
        tree.start[0], tree.end[0] = start, end
        return _tree.leaf_terms(tree, 0, r, np.zeros(0, dtype=np.int64), target, np.zeros(1), TAG)[0]

    diff = lm_of(0, left.size) + lm_of(left.size, r.size) - lm_of(0, r.size)
    full = (_quadrature_log_marginal(r[left], b[left], w[left], sigma2, tau2)
            + _quadrature_log_marginal(r[right], b[right], w[right], sigma2, tau2)
            - _quadrature_log_marginal(r, b, w, sigma2, tau2))
    assert diff == pytest.approx(full, abs=1e-8)


def test_unit_basis_is_the_known_variance_leaf():
    """b = w = 1 gives BART's known-variance leaf exactly (spec 2.2: the constant leaf is b = 1)."""
    r, _, _, sigma2, tau2 = _case(4)
    n = r.size
    lm = leaf_log_marginal_basis(float(n), float(r.sum()), sigma2, tau2)
    assert lm == pytest.approx(leaf_log_marginal_normal_known_variance(n, float(r.sum()), sigma2, tau2), rel=1e-14)


def test_zero_basis_leaf_is_flat():
    """A leaf whose rows all have b = 0 (controls in a tau leaf) has A = c = 0: lm = 0 (spec 2.2)."""
    r, b, w, sigma2, tau2 = _case(5)
    lm, c = _tree.leaf_terms(_tree.new_tree(r.size, 8), 0, r, np.zeros(0, dtype=np.int64),
                             _target(np.zeros_like(b), w, sigma2, tau2), np.zeros(1), TAG)
    assert lm == 0.0 and c == 0.0


def test_draw_matches_the_closed_form():
    """20,000 draws of a leaf's theta by ``draw_basis_leaves`` against N(c / (A + 1/tau2), 1 / (A + 1/tau2))
    (A, c in sigma^2 units; spec 2.1): mean within 4 standard errors, variance within 4 standard errors
    of the sample variance (sd of s^2 ~ s^2 sqrt(2 / N)), and a KS test at level 1e-3. Seeded, so it
    fails only on a wrong conditional (a wrong factor of sigma^2 moves the mean by tens of errors)."""
    r, b, w, sigma2, tau2 = _case(6)
    target = _target(b, w, sigma2, tau2)
    tree = _tree.new_tree(r.size, 8)
    tree.b[0] = float(np.sum(w * b * r))
    rng = np.random.default_rng(11)
    draws = np.empty(20_000)
    for k in range(draws.size):
        draw_basis_leaves(rng, tree, target)
        draws[k] = tree.value[0]
    prec = np.sum(w * b * b) / sigma2 + 1 / tau2
    mean, var = np.sum(w * b * r) / sigma2 / prec, 1 / prec
    se = math.sqrt(var / draws.size)
    assert abs(draws.mean() - mean) < 4 * se
    assert abs(draws.var() - var) < 4 * var * math.sqrt(2 / draws.size)
    assert stats.kstest(draws, stats.norm(mean, math.sqrt(var)).cdf).pvalue > 1e-3


def test_prior_draw_with_the_likelihood_off():
    """Likelihood off: theta ~ N(0, tau2) whatever the data (mean and variance within 4 errors)."""
    r, b, w, sigma2, tau2 = _case(8)
    target = _target(b, w, sigma2, tau2, likelihood=False)
    tree = _tree.new_tree(r.size, 8)
    rng = np.random.default_rng(3)
    draws = np.empty(20_000)
    for k in range(draws.size):
        draw_basis_leaves(rng, tree, target)
        draws[k] = tree.value[0]
    assert abs(draws.mean()) < 4 * math.sqrt(tau2 / draws.size)
    assert abs(draws.var() - tau2) < 4 * tau2 * math.sqrt(2 / draws.size)


def test_exchange_collects_the_leaf_statistics():
    """``basis_exchange_fits`` moves the residual by b f and collects c = sum w b R and A = sum w b^2 per
    leaf of the incoming tree, which ``set_basis_leaf_terms`` turns into the same lm as ``leaf_terms``."""
    r, b, w, sigma2, tau2 = _case(9, n=16)
    target = _target(b, w, sigma2, tau2)
    leaf_in = np.array([1, 2] * 8, dtype=np.uint8)
    value_in = np.array([0.0, 0.5, -1.0])
    resid = r.copy()
    sums = np.zeros((8, 3))
    basis_exchange_fits(resid, np.zeros(0, dtype=np.uint8), np.zeros(0), leaf_in, value_in, 3, sums, target.basis,
                        np.zeros(0, dtype=np.int32), np.zeros(3, dtype=np.int64))
    np.testing.assert_allclose(resid, r + b * value_in[leaf_in], rtol=1e-14)
    for leaf in (1, 2):
        rows = leaf_in == leaf
        assert sums[:4, leaf].sum() == pytest.approx(np.sum(w[rows] * b[rows] * resid[rows]), rel=1e-12)
        assert sums[4:, leaf].sum() == pytest.approx(np.sum(w[rows] * b[rows] ** 2), rel=1e-12)
    tree = _tree.new_tree(16, 8)
    tree.var[0], tree.left[0], tree.right[0] = 0, 1, 2
    tree.var[1] = tree.var[2] = _tree.LEAF
    tree.meta[_tree.M_SPAN] = 3
    set_basis_leaf_terms(tree, sums, target, np.zeros(2))
    rows = leaf_in == 1
    expected = leaf_log_marginal_basis(np.sum(w[rows] * b[rows] ** 2), np.sum(w[rows] * b[rows] * resid[rows]),
                                       sigma2, tau2)
    assert tree.lm[1] == pytest.approx(expected, rel=1e-12)
