"""Integrated leaf/tree likelihoods of ``bartpy_suite/_kernels/likelihood.py`` against quadrature.

Every reference value here is an independent numerical integral of the model written from its
densities (normal, inverse-gamma, Dirichlet/Beta), never from the closed forms:

* common-sigma mean-shift tree (CGM 1998, paper 003): ``y_ij | mu_i, sigma ~ N(mu_i, sigma^2)``,
  ``mu_i | sigma ~ N(mu_bar, sigma^2/a)`` i.i.d. over leaves, ``sigma^2 ~ IG(nu/2, nu*lam/2)``.
  Given sigma the leaves are independent, so the (b+1)-dimensional integral is an outer quad over
  ``t = log sigma`` of a product of b inner integrals over ``mu_i``;
* mean-variance-shift leaf (thesis eq. 3.3): the same with one leaf (its own sigma);
* Dirichlet-multinomial leaf (thesis eq. 3.4/3.17): ``int prod_j p_{y_j} Dir(p | alpha) dp``,
  i.e. the probability of the observed *sequence* of labels (that is the kernel's convention;
  ``test_dirichlet_is_a_distribution_over_label_sequences`` pins it down). K = 2 by quad over
  p in (0, 1), K = 3 by nested quad over the 2-simplex in stick-breaking coordinates;
* known-variance normal leaf (PG-BART section 2, mu ~ N(0, tau2) as its docstring says): the
  kernel drops ``log p(R | mu = 0) = -sum r^2/(2 sigma2) - n/2 log(2 pi sigma2)``, so the
  reference is ``log int N(mu | 0, tau2) prod_j N(r_j | mu, sigma2)/N(r_j | 0, sigma2) dmu``.

The kernels are called exactly as the samplers call them: scalar sufficient statistics with an
integer ``n`` for the leaf functions (``tree.leaf_terms``, ``cart_moves._known_variance_lm``), a
float64 ``class_counts[:k]`` view for the Dirichlet leaf, and, end to end, ``leaf_terms`` +
``global_term`` on real ``TreeArrays`` split with ``split_leaf``.

Quadrature is done in log space so that no scale under- or overflows: an integrand is divided by
its maximum before it is integrated and the log maximum is added back; sums of squares use
residuals about a fixed centre, so scales 1e-6 and 1e6 are as well conditioned as scale 1. 1-d
integrals use scipy's adaptive quad on a window stepped out from the numerically located mode until
the log integrand is 60 below its maximum (neglected mass < e^-50 relative). For the normal-
inverse-gamma models the outer integral over ``t = log sigma`` is such a quad; the inner integral
over each ``mu_i`` (evaluated at every outer node, hence vectorised instead of a nested quad or
dblquad) is 64-node Gauss-Legendre over +-12 conditional standard deviations, with its tails
checked to be 60 below the peak and its error estimated against 96 nodes. The Dirichlet integrals
use quad's algebraic end-point weight (QAWS) for the ``alpha < 1`` singularities, nested for K = 3.

Tolerance: ``|log got - log ref| <= 1e-6 + 1e-12 |log ref|``. quad runs with epsrel 1e-11, and
every reference asserts that the propagated relative error estimate of its integral(s) (quad's
estimates, plus the Gauss-Legendre 64-vs-96 differences times the number of leaves) is below 1e-8.
A relative error e on the integral is an absolute error e on its log, so each reference is good to
~1e-8 absolute and 1e-6 leaves a factor 100 in case an error estimate is optimistic; observed
differences are ~1e-13. The ``1e-12 |ref|`` part allows for double rounding (a few ulp of the
largest term, summed over at most 50 rows) and only matters for the one ill-conditioned case (known
variance, response 1e6 with sigma2 = 0.64 unrescaled, log marginal ~1e13, where rounding alone is
~1e-3); for every other case |ref| < 1e3 and it is below 1e-9. A wrong term in a closed form is
far outside the tolerance: ``n/2 log pi`` >= 0.57, ``0.5 log(a/(n+a))``, ``nu/2 log(nu lam)`` and the
lgamma differences are >= 0.1 in magnitude, a multinomial coefficient would add >= log 2 (n >= 2
with two classes present), and treating the common-sigma tree as independent leaves changes the
value by > 0.02 in every multi-leaf case.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from scipy.special import gammaln, xlogy

from bartpy_suite._kernels import likelihood as L
from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.records import make_prior, make_target

LEAF_SIZES = (1, 2, 5, 17, 50)
SCALES = (1e-6, 1.0, 1e6)
CUT = 60.0  # stop the window where the log integrand is this far below its maximum
EPSREL = 1e-11
REF_RELERR = 1e-8  # required relative error estimate of every reference integral


def _tol(ref):
    """Absolute tolerance on a log marginal (see the module docstring)."""
    return 1e-6 + 1e-12 * abs(ref)


def _check(got, ref):
    assert np.isfinite(got)
    assert abs(got - ref) <= _tol(ref), f"got {got!r}, quadrature {ref!r}, diff {got - ref:.3e}"


# -- densities written out from their definitions ---------------------------------------------------

def _log_normal(x, mean, var):
    """log N(x | mean, var), elementwise."""
    return -0.5 * np.log(2.0 * np.pi * var) - 0.5 * (x - mean) ** 2 / var


def _log_inv_gamma(x, shape, scale):
    """log IG(x | shape, scale), density scale^shape/Gamma(shape) x^(-shape-1) exp(-scale/x)."""
    return shape * math.log(scale) - gammaln(shape) - (shape + 1.0) * math.log(x) - scale / x


def test_reference_densities_match_scipy():
    """The hand-written densities used by the references agree with scipy.stats."""
    for x, m, v in [(0.3, -1.2, 0.7), (5e5, 1e6, 4e11), (2e-6, 0.0, 1e-12)]:
        assert _log_normal(x, m, v) == pytest.approx(stats.norm.logpdf(x, m, math.sqrt(v)), abs=1e-12)
    for x, shape, scale in [(0.5, 1.5, 0.6), (3e11, 5.0, 2.6e12), (7e-13, 1.5, 1e-12)]:
        assert _log_inv_gamma(x, shape, scale) == pytest.approx(
            stats.invgamma.logpdf(x, shape, scale=scale), rel=1e-13, abs=1e-12)


# -- generic 1-d quadrature in log space ------------------------------------------------------------

def _log_quad(logf, guess, step):
    """``log int exp(logf(x)) dx`` by adaptive quad, and the relative error estimate of the integral.

    ``guess``/``step`` only place the window: the mode is refined by Brent's method, the window is
    stepped out from it (steps growing by 1.5) until ``logf`` is ``CUT`` below the maximum, and
    quad integrates the integrand scaled by its maximum.
    """
    res = optimize.minimize_scalar(lambda x: -logf(x), bracket=(guess - step, guess + step))
    mode = float(res.x) if logf(res.x) >= logf(guess) else guess
    lmax = logf(mode)
    bounds = []
    for direction in (-1.0, 1.0):
        x, h = mode, step
        for _ in range(100):
            x += direction * h
            h *= 1.5
            if logf(x) < lmax - CUT:
                break
        else:
            raise AssertionError("quadrature window did not close")
        bounds.append(x)
    val, err = integrate.quad(lambda x: math.exp(logf(x) - lmax), bounds[0], bounds[1], points=[mode],
                              epsabs=0.0, epsrel=EPSREL, limit=400)
    assert val > 0.0
    return lmax + math.log(val), err / val


_GL64 = np.polynomial.legendre.leggauss(64)
_GL96 = np.polynomial.legendre.leggauss(96)


def _log_gauss_legendre(logf, centre, half_width):
    """``log int exp(logf(x)) dx`` over ``centre +- half_width`` by vectorised Gauss-Legendre.

    Returns the 64-node value and the relative difference to the 96-node value (error estimate);
    asserts that the window ends are ``CUT`` below the largest node value (negligible tails).
    """
    out = []
    for nodes, weights in (_GL64, _GL96):
        lf = logf(centre + half_width * nodes)
        lmax = float(np.max(lf))
        out.append((lmax, half_width * float(np.sum(weights * np.exp(lf - lmax)))))
    ends = logf(np.array([centre - half_width, centre + half_width]))
    assert np.all(ends < out[1][0] - CUT), "inner window too narrow"
    (l1, v1), (l2, v2) = out
    return l1 + math.log(v1), abs(v1 / v2 * math.exp(l1 - l2) - 1.0)


def _ref_normal_inverse_gamma(leaves, a, mu_bar, nu, lam):
    """log p(Y) with mu_i ~ N(mu_bar, sigma^2/a) per leaf and one sigma^2 ~ IG(nu/2, nu lam/2).

    Outer adaptive quad over t = log sigma (Jacobian d sigma^2 = 2 sigma^2 dt). Inner integral
    per leaf over mu = c + x, c the leaf's sample mean (residuals y - c are formed once, so the
    squared deviations stay accurate at any scale), by 64-node Gauss-Legendre over 12 posterior
    standard deviations either side of the conditional mode (the window is only placed with the
    conjugate formulas; its tails are checked numerically, its accuracy against 96 nodes).
    """
    centred = []
    for y in leaves:
        c = float(np.mean(y))
        centred.append((np.asarray(y, dtype=float) - c, c - mu_bar))
    inner_err = [0.0]

    def log_given_sigma(t):
        s2 = math.exp(2.0 * t)
        total = 0.0
        for e, off in centred:
            n = e.shape[0]

            def logf(x):
                # prod_j N(y_j | c + x, s2) * N(c + x | mu_bar, s2/a), with y_j - (c + x) = e_j - x
                lik = np.sum(_log_normal(e[:, None], x[None, :], s2), axis=0)
                return lik + _log_normal(off + x, 0.0, s2 / a)

            val, rel = _log_gauss_legendre(logf, -a * off / (n + a), 12.0 * math.sqrt(s2 / (n + a)))
            inner_err[0] = max(inner_err[0], rel)
            total += val
        return total + _log_inv_gamma(s2, 0.5 * nu, 0.5 * nu * lam) + math.log(2.0 * s2)

    spread = sum(float(np.sum((np.asarray(y) - mu_bar) ** 2)) for y in leaves)
    n_total = sum(len(y) for y in leaves)
    t0 = 0.5 * math.log((spread + nu * lam) / (n_total + nu))
    val, rel = _log_quad(log_given_sigma, t0, 0.25)
    assert rel + len(leaves) * inner_err[0] < REF_RELERR, (rel, inner_err[0])
    return val


def _ref_known_variance(r, sigma2, tau2):
    """log int N(mu | 0, tau2) prod_j N(r_j | mu, sigma2) / N(r_j | 0, sigma2) dmu.

    With mu = c + x and e_j = r_j - c, the exact rearrangements
    log N(r_j|mu,s2) - log N(r_j|0,s2) = c (2 r_j - c)/(2 s2) + x (2 e_j - x)/(2 s2) and
    log N(c + x|0,t2) = log N(c|0,t2) - x (2 c + x)/(2 t2) split off constants so the integrand
    in x is free of cancellation even when r ~ 1e6 and sigma2 = 1.
    """
    r = np.asarray(r, dtype=float)
    n = r.shape[0]
    c = float(np.mean(r)) * n * tau2 / (sigma2 + n * tau2)
    e = r - c
    const = float(np.sum(c * (2.0 * r - c))) / (2.0 * sigma2) + float(_log_normal(c, 0.0, tau2))

    def logf(x):
        return float(np.sum(x * (2.0 * e - x))) / (2.0 * sigma2) - x * (2.0 * c + x) / (2.0 * tau2)

    val, rel = _log_quad(logf, 0.0, math.sqrt(1.0 / (1.0 / tau2 + n / sigma2)))
    assert rel < REF_RELERR, rel
    return const + val


def _ref_dirichlet(counts, alpha):
    """log of int prod_k p_k^{n_k} Dir(p | alpha, ..., alpha) dp, K = 2 or 3.

    The Dirichlet kernel prod_k p_k^(alpha-1) (times the stick-breaking Jacobian 1-u for K = 3,
    p = (u, (1-u) v, (1-u)(1-v))) is passed to quad as its algebraic end-point weight, which
    handles the alpha < 1 singularities; the normaliser is the same integral with all n_k = 0.
    The likelihood is scaled by its maximum over the simplex, prod_k (n_k/n)^{n_k}.
    """
    counts = [float(c) for c in counts]
    n = sum(counts)
    lmax = sum(float(xlogy(c, c / n)) for c in counts) if n > 0 else 0.0
    am1 = alpha - 1.0

    def log_integral(nk, shift):
        if len(nk) == 2:
            def lik(p):
                return math.exp(float(xlogy(nk[0], p) + xlogy(nk[1], 1.0 - p)) - shift)

            val, err = integrate.quad(lik, 0.0, 1.0, weight="alg", wvar=(am1, am1), epsabs=0.0,
                                      epsrel=EPSREL, limit=400)
            return math.log(val), err / val
        inner_err = [0.0]

        def over_v(u):
            def lik(v):
                p = (u, (1.0 - u) * v, (1.0 - u) * (1.0 - v))
                return math.exp(float(sum(xlogy(k, pk) for k, pk in zip(nk, p))) - shift)

            val, err = integrate.quad(lik, 0.0, 1.0, weight="alg", wvar=(am1, am1), epsabs=0.0,
                                      epsrel=EPSREL, limit=400)
            if val > 0.0:
                inner_err[0] = max(inner_err[0], err / val)
            return val

        # weight u^(alpha-1) (1-u)^(2 alpha - 2) * (1-u) [Jacobian] = u^(alpha-1) (1-u)^(2 alpha - 1)
        val, err = integrate.quad(over_v, 0.0, 1.0, weight="alg", wvar=(am1, 2.0 * alpha - 1.0),
                                  epsabs=0.0, epsrel=EPSREL, limit=400)
        return math.log(val), err / val + inner_err[0]

    num, e1 = log_integral(counts, lmax)
    den, e2 = log_integral([0.0] * len(counts), 0.0)
    assert e1 + e2 < REF_RELERR, (e1, e2)
    return lmax + num - den


# -- data -------------------------------------------------------------------------------------------

def _leaf_y(n, scale, seed):
    """A leaf's response: scale * (0.7 + N(0, 1)), fixed seed."""
    rng = np.random.default_rng(seed)
    return scale * (0.7 + rng.standard_normal(n))


def _suff(y):
    """(n, ybar, ssd) as ``tree.leaf_terms`` forms them: integer n, sum/n, two-pass scatter."""
    n = int(y.shape[0])
    ybar = float(np.sum(y)) / n
    return n, ybar, float(np.sum((y - ybar) ** 2))


# Hyperparameters on the unit scale: (a, mu_bar, nu, lam); rescaled as mu_bar*s, lam*s^2.
HYPERS = [(1.0 / 3.0, 0.5, 3.0, 0.4), (2.0, -0.2, 10.0, 1.3)]


def _hyper(which, scale, rescale):
    a, mu_bar, nu, lam = HYPERS[which]
    if rescale:
        return a, mu_bar * scale, nu, lam * scale * scale
    return a, mu_bar, nu, lam


NIG_CASES = [(n, s, True, i % 2) for i, (n, s) in enumerate(itertools.product(LEAF_SIZES, SCALES))]
NIG_CASES += [(5, 1e-6, False, 0), (17, 1e6, False, 1), (2, 1e6, False, 0)]


# -- mean-variance-shift leaf (thesis eq. 3.3) ------------------------------------------------------

@pytest.mark.parametrize("n, scale, rescale, which", NIG_CASES)
def test_mean_variance_leaf_against_quadrature(n, scale, rescale, which):
    """``leaf_log_marginal_mean_variance(n, ybar, ssd, a, mu_bar, nu, lam)`` = log of the
    (mu, sigma) integral of one leaf."""
    a, mu_bar, nu, lam = _hyper(which, scale, rescale)
    y = _leaf_y(n, scale, seed=1000 + n)
    got = L.leaf_log_marginal_mean_variance(*_suff(y), a, mu_bar, nu, lam)
    _check(got, _ref_normal_inverse_gamma([y], a, mu_bar, nu, lam))


# -- common-sigma mean-shift tree (paper 003) -------------------------------------------------------

MEAN_SHIFT_CASES = [
    ((5,), 1.0, True, 0),
    ((50,), 1e6, True, 1),
    ((1, 17), 1.0, True, 1),
    ((2, 5), 1e-6, True, 0),
    ((17, 2), 1e6, False, 0),
    ((1, 5, 50), 1.0, True, 0),
    ((2, 17, 1), 1e6, True, 1),
    ((5, 1, 2), 1e-6, False, 1),
]


def _mean_shift_leaves(sizes, scale):
    """Leaves with different locations (leaf i centred at (0.7 + 1.5 i) * scale)."""
    return [_leaf_y(m, scale, seed=2000 + 31 * i + m) + 1.5 * i * scale for i, m in enumerate(sizes)]


@pytest.mark.parametrize("sizes, scale, rescale, which", MEAN_SHIFT_CASES)
def test_mean_shift_tree_against_quadrature(sizes, scale, rescale, which):
    """``tree_log_marginal_mean_shift(counts, ybars, ssds, ...)`` with 1, 2 and 3 leaves, and the
    sampler's decomposition ``sum_i mean_shift_leaf_terms`` + ``mean_shift_global_term``."""
    a, mu_bar, nu, lam = _hyper(which, scale, rescale)
    leaves = _mean_shift_leaves(sizes, scale)
    ref = _ref_normal_inverse_gamma(leaves, a, mu_bar, nu, lam)
    suff = [_suff(y) for y in leaves]
    counts = np.array([s[0] for s in suff], dtype=np.float64)
    ybars = np.array([s[1] for s in suff])
    ssds = np.array([s[2] for s in suff])
    _check(L.tree_log_marginal_mean_shift(counts, ybars, ssds, a, mu_bar, nu, lam), ref)
    _check(L.tree_log_marginal_mean_shift(counts.astype(np.int64), ybars, ssds, a, mu_bar, nu, lam), ref)
    lm_sum = b_sum = 0.0
    for n, ybar, ssd in suff:
        lm, b = L.mean_shift_leaf_terms(n, ybar, ssd, a, mu_bar)
        lm_sum += lm
        b_sum += b
    _check(lm_sum + L.mean_shift_global_term(float(sum(sizes)), b_sum, nu, lam), ref)


# -- known-variance normal leaf (BART backfitting) --------------------------------------------------

KNOWN_VARIANCE_CASES = [(n, s, True) for n, s in itertools.product(LEAF_SIZES, SCALES)]
KNOWN_VARIANCE_CASES += [(5, 1e-6, False), (17, 1e6, False)]


def _known_variance_hyper(scale, rescale):
    s = scale if rescale else 1.0
    return (0.8 * s) ** 2, (0.5 * s) ** 2


@pytest.mark.parametrize("n, scale, rescale", KNOWN_VARIANCE_CASES)
def test_normal_known_variance_leaf_against_quadrature(n, scale, rescale):
    """``leaf_log_marginal_normal_known_variance(n, r_sum, sigma2, tau2)`` = log p(R) - log p(R|mu=0)
    with mu ~ N(0, tau2) integrated out."""
    sigma2, tau2 = _known_variance_hyper(scale, rescale)
    r = _leaf_y(n, scale, seed=3000 + n)
    got = L.leaf_log_marginal_normal_known_variance(n, float(np.sum(r)), sigma2, tau2)
    _check(got, _ref_known_variance(r, sigma2, tau2))


# -- Dirichlet-multinomial leaf (thesis eq. 3.4 / 3.17) ---------------------------------------------

def _class_counts(n, k, seed):
    rng = np.random.default_rng(seed)
    probs = np.array([0.5, 0.3, 0.2][:k])
    return rng.multinomial(n, probs / probs.sum()).astype(np.float64)


DIRICHLET_CASES = [(n, k, alpha) for n in LEAF_SIZES for k in (2, 3) for alpha in (0.5, 1.0, 2.5)]


@pytest.mark.parametrize("n, k, alpha", DIRICHLET_CASES)
def test_dirichlet_leaf_against_quadrature(n, k, alpha):
    """``leaf_log_marginal_dirichlet(class_counts[:k], class_alpha)`` = log of
    int prod_j p_{y_j} Dir(p | alpha) dp, called on a view of a longer buffer as ``leaf_terms`` does."""
    counts = _class_counts(n, k, seed=4000 + 10 * n + k)
    buf = np.full(4, 7.0)  # entries past k must be ignored
    buf[:k] = counts
    got = L.leaf_log_marginal_dirichlet(buf[:k], alpha)
    _check(got, _ref_dirichlet(counts, alpha))


@pytest.mark.parametrize("n, k, alpha", [(5, 3, 0.5), (4, 2, 2.5), (1, 3, 1.0)])
def test_dirichlet_is_a_distribution_over_label_sequences(n, k, alpha):
    """exp(lm) summed over all k^n label sequences is 1: the kernel is the probability of the
    observed sequence (no multinomial coefficient)."""
    total = 0.0
    for seq in itertools.product(range(k), repeat=n):
        counts = np.bincount(np.array(seq, dtype=np.int64), minlength=k).astype(np.float64)
        total += math.exp(L.leaf_log_marginal_dirichlet(counts, alpha))
    assert total == pytest.approx(1.0, rel=1e-12)


# -- end to end through tree.leaf_terms / global_term -------------------------------------------------

def _hyper_vector(model, *, a=1.0, mu_bar=0.0, nu=3.0, lam=1.0, class_alpha=1.0, n_classes=1,
                  sigma2=1.0, tau2=1.0):
    prior = make_prior(min_leaf=1, a=a, mu_bar=mu_bar, nu=nu, lam=lam, class_alpha=class_alpha,
                       n_classes=n_classes, model=model, likelihood=True, tau2=tau2)
    return make_target(prior, sigma2)


def _grouped_tree(sizes, seed):
    """A tree over shuffled rows whose leaves are the groups 0, 1, ... of ``sizes`` (split with
    ``split_leaf`` on one numeric code). Returns (tree, leaves, group of every row)."""
    group = np.repeat(np.arange(len(sizes)), sizes)
    np.random.default_rng(seed).shuffle(group)
    xt = group[None, :].astype(np.int32)
    is_cat = np.array([False])
    tree = T.new_tree(group.shape[0], 2 * len(sizes) + 1)
    leaves = [0]
    for cut in range(len(sizes) - 1):
        lc, rc = T.split_leaf(tree, xt, is_cat, leaves[-1], 0, cut, np.empty(group.shape[0], dtype=np.int32))
        leaves[-1:] = [lc, rc]
    return tree, leaves, group


@pytest.mark.parametrize("sizes, scale, rescale, which", [MEAN_SHIFT_CASES[i] for i in (0, 3, 5, 6, 7)])
def test_leaf_terms_mean_shift_tree_against_quadrature(sizes, scale, rescale, which):
    """sum of ``leaf_terms`` lm over the leaves + ``global_term(sum b, n)`` on a real tree."""
    a, mu_bar, nu, lam = _hyper(which, scale, rescale)
    leaf_y = _mean_shift_leaves(sizes, scale)
    tree, leaves, group = _grouped_tree(sizes, seed=5)
    y = np.empty(group.shape[0])
    for g, vals in enumerate(leaf_y):
        y[group == g] = vals
    hyper = _hyper_vector(L.MODEL_MEAN_SHIFT, a=a, mu_bar=mu_bar, nu=nu, lam=lam)
    ycls = np.zeros(y.shape[0], dtype=np.int64)
    lm_sum = b_sum = 0.0
    for g, node in enumerate(leaves):
        assert tree.end[node] - tree.start[node] == sizes[g]
        lm, b = T.leaf_terms(tree, node, y, ycls, hyper, np.zeros(1), T.model_tag(L.MODEL_MEAN_SHIFT))
        lm_sum += lm
        b_sum += b
    got = lm_sum + T.global_term(b_sum, float(y.shape[0]), hyper, T.model_tag(L.MODEL_MEAN_SHIFT))
    _check(got, _ref_normal_inverse_gamma(leaf_y, a, mu_bar, nu, lam))


@pytest.mark.parametrize("n, scale", [(1, 1.0), (17, 1e6), (50, 1e-6)])
def test_leaf_terms_stump_other_models_against_quadrature(n, scale):
    """``leaf_terms`` at the root of a stump for the mean-variance, known-variance and
    classification models."""
    tree = T.new_tree(n, 3)
    y = _leaf_y(n, scale, seed=6000 + n)
    a, mu_bar, nu, lam = _hyper(1, scale, True)
    h = _hyper_vector(L.MODEL_MEAN_VARIANCE_SHIFT, a=a, mu_bar=mu_bar, nu=nu, lam=lam)
    ycls = np.zeros(n, dtype=np.int64)
    lm, _ = T.leaf_terms(tree, 0, y, ycls, h, np.zeros(1), T.model_tag(L.MODEL_MEAN_VARIANCE_SHIFT))
    _check(lm, _ref_normal_inverse_gamma([y], a, mu_bar, nu, lam))

    sigma2, tau2 = _known_variance_hyper(scale, True)
    h = _hyper_vector(L.MODEL_NORMAL_KNOWN_VARIANCE, sigma2=sigma2, tau2=tau2)
    lm, r_sum = T.leaf_terms(tree, 0, y, ycls, h, np.zeros(1), T.model_tag(L.MODEL_NORMAL_KNOWN_VARIANCE))
    assert r_sum == pytest.approx(float(np.sum(y)), rel=1e-12)
    _check(lm, _ref_known_variance(y, sigma2, tau2))

    ycls = np.random.default_rng(7).integers(0, 3, size=n).astype(np.int64)
    h = _hyper_vector(L.MODEL_CLASSIFICATION, class_alpha=0.5, n_classes=3)
    lm, _ = T.leaf_terms(tree, 0, y, ycls, h, np.zeros(3), T.model_tag(L.MODEL_CLASSIFICATION))
    _check(lm, _ref_dirichlet(np.bincount(ycls, minlength=3), 0.5))
