"""Soft-tree kernels: the log density against a plain numpy version, analytic gradients against
central finite differences, and NUTS alone (fixed topology) against exact or independent
reference answers (RJHMC-Tree spec 5 and 6)."""

from __future__ import annotations

import numpy as np
import pytest
from _soft_reference import make_conf, random_preorder_tree, reference_potential
from scipy import special, stats

from bartpy_suite._kernels import nuts
from bartpy_suite._kernels import soft_tree as st
from bartpy_suite._kernels.soft_records import KIND_GAUSSIAN, SoftData, SoftTarget, new_state


def _problem(rng, mode, n_classes, n=40, nx=3, h=0.2, **conf_kw):
    X = rng.random((n, nx))
    y = rng.normal(size=n)
    ycls = rng.integers(0, max(n_classes, 1), n)
    right, _ = random_preorder_tree(rng)
    kappa = rng.integers(0, nx, len(right))
    conf = make_conf(nx, mode, n_classes=n_classes, **conf_kw)
    off = np.zeros(len(right), dtype=np.int64)
    dim = st.layout(right, len(right), nx, mode, n_classes == 0, off)
    work = st.new_work(n, len(right), nx, n_classes, h)
    tgt = SoftTarget(SoftData(X, y, ycls), right, kappa, np.array([len(right)]), off, conf, work)
    return tgt, dim


CASES = [(mode, k, const, lik) for mode in (st.MODE_DF, st.MODE_DFI) for k in (0, 2, 3)
         for const in (True, False) for lik in (True, False) if not (k == 0 and not const)]


@pytest.mark.parametrize("mode,n_classes,const,lik", CASES)
def test_log_density_matches_numpy(mode, n_classes, const, lik):
    # Same formula evaluated two independent ways in float64: agreement to 1e-10 relative.
    rng = np.random.default_rng(100 + 10 * mode + n_classes + int(2 * const) + int(4 * lik))
    for _ in range(3):
        tgt, dim = _problem(rng, mode, n_classes, class_const=const, lik=lik)
        q = rng.normal(size=dim)
        u = st.potential(q, np.zeros(dim), tgt, False)
        ref = reference_potential(q, *tgt.data, tgt.right, tgt.kappa, tgt.conf, tgt.work.h[0])
        assert u == pytest.approx(ref, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("mode,n_classes", [(m, k) for m in (st.MODE_DF, st.MODE_DFI) for k in (0, 3)])
def test_gradient_matches_finite_differences(mode, n_classes):
    # Central differences with step 1e-5 have truncation error ~1e-10 * U''' here (h = 0.2);
    # the analytic gradient must agree to 1e-6 relative to the largest gradient entry.
    rng = np.random.default_rng(7 + mode + n_classes)
    for _ in range(4):
        tgt, dim = _problem(rng, mode, n_classes, nx=4)
        q = rng.normal(size=dim)
        g = np.zeros(dim)
        st.potential(q, g, tgt, True)
        fd = np.empty(dim)
        for a in range(dim):
            e = np.zeros(dim)
            e[a] = 1e-5
            up = st.potential(q + e, np.zeros(dim), tgt, False)
            down = st.potential(q - e, np.zeros(dim), tgt, False)
            fd[a] = (up - down) / 2e-5
        assert np.max(np.abs(g - fd)) <= 1e-6 * max(1.0, np.max(np.abs(g)))


@pytest.mark.parametrize("mode", [st.MODE_DF, st.MODE_DFI])
@pytest.mark.parametrize("log_sigma", [-400.0, 400.0])
def test_potential_is_infinite_where_sigma_squared_leaves_float64(mode, log_sigma):
    # exp(2 * 400) overflows and exp(-2 * 400) underflows: a leapfrog step of a run restarted at
    # eps = 1 reached such points on the CGM data and the likelihood divided by zero. U must be
    # +inf (NUTS: divergent), not an exception; one step back inside the range it is finite.
    rng = np.random.default_rng(11 + mode)
    tgt, dim = _problem(rng, mode, 0)
    q = rng.normal(size=dim)
    q[-1] = log_sigma
    g = np.ones(dim)
    assert st.potential(q, g, tgt, True) == np.inf
    assert np.all(g == 0.0)
    q[-1] = np.sign(log_sigma) * 300.0
    assert np.isfinite(st.potential(q, np.zeros(dim), tgt, True))


def test_digamma_and_stick_breaking():
    x = np.array([1e-3, 0.3, 1.0, 2.5, 5.99, 6.0, 17.2, 300.0])
    ours = np.array([st.digamma(v) for v in x])
    np.testing.assert_allclose(ours, special.digamma(x), rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(3)
    for K in (2, 3, 7):
        v = rng.normal(size=K - 1) * 2
        delta = np.empty(K)
        st.stick_forward(v, delta)
        assert delta.sum() == pytest.approx(1.0, abs=1e-14) and np.all(delta > 0)
        back = np.empty(K - 1)
        st.stick_inverse(delta, back)
        np.testing.assert_allclose(back, v, rtol=1e-9, atol=1e-9)
    zero = np.empty(4)
    st.stick_forward(np.zeros(3), zero)
    np.testing.assert_allclose(zero, 0.25)  # v = 0 maps to the centre of the simplex


def _batch_se(x, batches=50):
    """Monte Carlo standard error of the mean of each column by batch means."""
    m = x.shape[0] // batches
    means = x[: m * batches].reshape(batches, m, -1).mean(axis=1)
    return means.std(axis=0, ddof=1) / np.sqrt(batches)


def _nuts_draws(tgt, q0, n_draws, seed, warmup=500):
    d = q0.shape[0]
    q, g, u = q0.copy(), np.zeros(d), np.zeros(1)
    u[0] = nuts.energy(q, g, tgt, True)
    minv, rs = np.ones(d), np.zeros(nuts.N_RUN_STATS)
    out = np.zeros((n_draws, d))
    h = tgt.work.h[0]
    nuts.run((q, g, u), 1.0, minv, nuts.settings(warmup, n_draws, h, h), tgt, nuts.new_scratch(d, 10), out,
             np.random.default_rng(seed), rs, None)
    return out, rs


def _gaussian_target(cov, mean):
    conf = make_conf(1, st.MODE_DF)._replace(kind=KIND_GAUSSIAN)
    s = new_state(1, 1)
    data = SoftData(np.linalg.inv(cov), mean, np.zeros(1, dtype=np.int64))
    return SoftTarget(data, s.right, s.kappa, s.nn, np.zeros(1, dtype=np.int64), conf, st.new_work(1, 1, 1, 0, 1.0))


def test_nuts_correlated_gaussian():
    # Exact moments known. Means and variances within 4 Monte Carlo standard errors (batch means):
    # a correct sampler fails this about once in 15,000 coordinates.
    cov = np.array([[1.0, 0.95, 0.0], [0.95, 1.0, 0.0], [0.0, 0.0, 9.0]])
    mean = np.array([1.0, -2.0, 0.5])
    draws, rs = _nuts_draws(_gaussian_target(cov, mean), np.zeros(3), 20_000, seed=11)
    se = _batch_se(draws)
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 4 * se)
    sq = (draws - mean) ** 2
    assert np.all(np.abs(sq.mean(axis=0) - np.diag(cov)) <= 4 * _batch_se(sq))
    assert rs[nuts.R_DIVERGENT] <= 20  # only early warm-up steps from eps = 1 may diverge


def _soft_target(rng, lik=True, mode=st.MODE_DFI, n=60, nx=2):
    X = rng.random((n, nx))
    right = np.array([2, -1, -1] + [-1] * 2, dtype=np.int64)[:3]
    kappa = np.zeros(3, dtype=np.int64)
    y = np.where(X[:, 0] > 0.5, 1.0, -1.0) + 0.5 * rng.normal(size=n)
    conf = make_conf(nx, mode, lik=lik)
    off = np.zeros(3, dtype=np.int64)
    dim = st.layout(right, 3, nx, mode, True, off)
    tgt = SoftTarget(SoftData(X, y, np.zeros(n, dtype=np.int64)), right, kappa, np.array([3]), off, conf,
                     st.new_work(n, 3, nx, 0, 0.1))
    return tgt, dim


def _rwm(tgt, q0, n_steps, scale_chol, rng):
    """Random-walk Metropolis on U (the reference chain, independent of NUTS)."""
    d = q0.shape[0]
    q = q0.copy()
    g = np.zeros(d)
    u = nuts.energy(q, g, tgt, False)
    out = np.empty((n_steps, d))
    steps = rng.standard_normal((n_steps, d)) @ scale_chol.T
    logu = np.log(rng.random(n_steps))
    for t in range(n_steps):
        prop = q + steps[t]
        up = nuts.energy(prop, g, tgt, False)
        if logu[t] < u - up:
            q, u = prop, up
        out[t] = q
    return out


def test_nuts_soft_tree_fixed_topology_against_random_walk():
    # One split (DFI, 2 predictors) + 2 leaves + sigma: 5 unconstrained coordinates. Reference: a
    # 400,000-step random-walk Metropolis chain with a proposal shaped by a pilot NUTS run.
    # Means and variances must agree within 4 combined Monte Carlo standard errors.
    rng = np.random.default_rng(5)
    tgt, dim = _soft_target(rng)
    draws, _ = _nuts_draws(tgt, np.zeros(dim), 10_000, seed=21, warmup=1000)
    chol = np.linalg.cholesky(np.cov(draws.T) * 2.38**2 / dim)
    ref = _rwm(tgt, draws[-1], 400_000, chol, np.random.default_rng(22))[20_000:]
    for stat in (lambda a, m: a, lambda a, m: (a - m) ** 2):
        m_ref = ref.mean(axis=0)
        a, b = stat(draws, m_ref), stat(ref, m_ref)
        tol = 4 * np.sqrt(_batch_se(a) ** 2 + _batch_se(b) ** 2)
        assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= tol)


def test_nuts_soft_tree_fixed_topology_short():
    # The default-run version of the check above: 3,000 NUTS draws against a 60,000-step random walk
    # (thinned reference moments), 4 combined Monte Carlo standard errors.
    rng = np.random.default_rng(5)
    tgt, dim = _soft_target(rng)
    draws, _ = _nuts_draws(tgt, np.zeros(dim), 3_000, seed=31, warmup=500)
    chol = np.linalg.cholesky(np.cov(draws.T) * 2.38**2 / dim)
    ref = _rwm(tgt, draws[-1], 60_000, chol, np.random.default_rng(32))[5_000:]
    m_ref = ref.mean(axis=0)
    tol = 4 * np.sqrt(_batch_se(draws) ** 2 + _batch_se(ref) ** 2)
    assert np.all(np.abs(draws.mean(axis=0) - m_ref) <= tol)


def test_nuts_prior_only_recovers_priors():
    # Likelihood off: tau ~ U(0,1), each Delta component ~ Beta(1, nx - 1) (Dirichlet(1) margin),
    # mu ~ N(0, 1), sigma ~ InverseGamma(1.5, 1.5). KS tests on every 10th of 10,000 draws (lag-10
    # autocorrelation is negligible here); each must have p > 0.001.
    rng = np.random.default_rng(8)
    nx = 3
    tgt, dim = _soft_target(rng, lik=False, nx=nx)
    draws, _ = _nuts_draws(tgt, np.zeros(dim), 10_000, seed=41)
    draws = draws[::10]
    right, kappa, off, conf, work = tgt.right, tgt.kappa, tgt.off, tgt.conf, tgt.work
    taus, deltas, mus, sigmas = [], [], [], []
    for q in draws:
        sigma, _ = st.unpack(q, right, kappa, off, 3, conf, work.tau, work.delta, work.mu)
        taus.append(work.tau[0])
        deltas.append(work.delta[0].copy())
        mus.append(work.mu[1])
        sigmas.append(sigma)
    deltas = np.array(deltas)
    checks = [stats.kstest(taus, "uniform"), stats.kstest(mus, "norm"),
              stats.kstest(sigmas, stats.invgamma(1.5, scale=1.5).cdf)]
    checks += [stats.kstest(deltas[:, k], stats.beta(1, nx - 1).cdf) for k in range(nx)]
    assert min(c.pvalue for c in checks) > 0.001, [round(c.pvalue, 4) for c in checks]
