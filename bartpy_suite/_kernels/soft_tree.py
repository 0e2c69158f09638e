"""Soft decision trees (RJHMC-Tree, Cochrane et al.): routing, log density and its analytic
gradient in unconstrained coordinates, float64 throughout.

A soft tree is stored in preorder: ``right[j]`` is the right child of internal node j (its left
child is j + 1) and -1 at a leaf. Internal node j routes row i right with probability
psi_ij = expit(a_ij), a_ij = (x_i[kappa_j] - tau_j) / h (``MODE_DF``) or
(x_i . Delta_j - tau_j) / h (``MODE_DFI``); a leaf's probability phi_ik is the product of the
psi / (1 - psi) factors on its path (paper eq. 5; psi is P(go right), spec 1.1).

The parameter vector ``q`` is unconstrained: per node in preorder, an internal node holds
t_j (tau = expit(t)) and, in DFI, v_j (nx - 1 stick-breaking coordinates of Delta); a leaf holds
mu_k (regression only); regression adds s = log sigma last. ``layout`` computes the offsets.
The potential energy U(q) = -(log lik + log prior + log |J|) (spec 1.2, 1.4, 5).

The settings (``SoftConf``), the data, the scratch and the stored trees are the typed records of
``soft_records.py``; NUTS's target is a ``SoftTarget``.

Import rule: numpy, numba, ``math`` and ``soft_records``.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import helper, kernel
from .soft_records import MODE_DF, MODE_DFI, SoftWork, new_work  # noqa: F401 (SoftWork, new_work re-exported)

# Slots of the model's prior vector ``SoftTreeProblem.conf`` (``models/soft_tree.py`` fills it);
# ``samplers.hmc.soft_settings`` reads it once into the typed ``soft_records.SoftConf`` that the
# kernels take. The kernels never read this vector.
C_LIK = 1  # 1: likelihood on, 0: prior only
C_MU_MEAN = 3
C_MU_SCALE = 4
C_SIG_A = 5  # sigma ~ InverseGamma(a, b) on sigma (not sigma^2), spec 1.2
C_SIG_B = 6
C_CLASS_ALPHA = 8  # symmetric Dirichlet alpha of the class likelihood (eq. 10)
C_CLASS_CONST = 9  # 1: include lnGamma(A) - sum lnGamma(alpha) per leaf (eq. 10); 0: the code's version
N_CONF = 12  # slots 0, 2, 7, 10 and 11 (once h, mode, classes, predictors, target kind) are unused

LOG_2PI = math.log(2.0 * math.pi)


@helper
def expit(a):
    """Branch-stable logistic function."""
    if a >= 0.0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)
    return e / (1.0 + e)


@helper
def expit_pair(a):
    """(expit(a), expit(-a)) from one exponential exp(-|a|) and one division (the gradient's
    forward pass evaluates this for every row and internal node at every leapfrog step)."""
    if a >= 0.0:
        e = math.exp(-a)
        r = 1.0 / (1.0 + e)
        return r, e * r
    e = math.exp(a)
    r = 1.0 / (1.0 + e)
    return e * r, r


@helper
def softplus(a):
    """log(1 + e^a) without overflow."""
    if a > 0.0:
        return a + math.log1p(math.exp(-a))
    return math.log1p(math.exp(a))


@helper
def digamma(x):
    """psi_0(x) for x > 0: recurrence up to x >= 10, then the asymptotic series to x^-10 (spec 5,
    pitfall 5; the first omitted term is below 3e-14 there)."""
    r = 0.0
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
        1.0 / 240.0 - f / 132.0))))


@helper
def layout(right, n_nodes, nx, mode, regression, off):
    """Fill ``off`` with each node's first parameter index; return the dimension of ``q``."""
    k = 0
    per_internal = 1 + (nx - 1 if mode == MODE_DFI else 0)
    for j in range(n_nodes):
        off[j] = k
        if right[j] >= 0:
            k += per_internal
        elif regression:
            k += 1
    if regression:
        k += 1
    return k


@helper
def stick_forward(v, out_delta):
    """Stick-breaking v (K-1) -> simplex Delta (K); return log |J| (spec 1.2)."""
    K = out_delta.shape[0]
    log_rem = 0.0
    logj = 0.0
    for k in range(K - 1):
        a = v[k] - math.log(K - k - 1)
        log_z = -softplus(-a)
        log_1mz = -softplus(a)
        out_delta[k] = math.exp(log_rem + log_z)
        logj += log_z + log_1mz + log_rem
        log_rem += log_1mz
    out_delta[K - 1] = math.exp(log_rem)
    return logj


@helper
def stick_inverse(delta, out_v):
    """Simplex Delta (K) -> stick-breaking coordinates v (K-1)."""
    K = delta.shape[0]
    rem = 1.0
    for k in range(K - 1):
        z = min(max(delta[k] / rem, 1e-300), 1.0 - 1e-16) if rem > 0.0 else 0.5
        out_v[k] = math.log(z) - math.log1p(-z) + math.log(K - k - 1)
        rem -= delta[k]
        if rem < 0.0:
            rem = 0.0


@helper
def stick_backward(v, gdelta, out_gv, buf):
    """Gradient of f(Delta(v)) + log |J(v)| given ``gdelta`` = df/dDelta (spec 5); ``buf`` (2, >= K)
    is scratch (the gradient is evaluated at every leapfrog step, so nothing is allocated here)."""
    K = gdelta.shape[0]
    # forward quantities
    zs = buf[0]
    rems = buf[1]
    rem = 1.0
    for k in range(K - 1):
        z = expit(v[k] - math.log(K - k - 1))
        z = min(max(z, 1e-300), 1.0 - 1e-16)
        zs[k] = z
        rems[k] = rem
        rem = rem * (1.0 - z)
    g_rem = gdelta[K - 1]
    for k in range(K - 2, -1, -1):
        z = zs[k]
        rk = rems[k]
        g_z = rk * (gdelta[k] - g_rem) + 1.0 / z - 1.0 / (1.0 - z)
        g_rem = z * gdelta[k] + (1.0 - z) * g_rem + (1.0 / rk if rk > 0.0 else 0.0)
        out_gv[k] = g_z * z * (1.0 - z)


@helper
def unpack(q, right, kappa, off, n_nodes, conf, tau, delta, mu):
    """Constrained node parameters from ``q`` (``conf`` a ``SoftConf``); return (sigma, log |J|)."""
    nx = conf.nx
    mode = conf.mode
    regression = conf.n_classes == 0
    logj = 0.0
    for j in range(n_nodes):
        o = off[j]
        if right[j] >= 0:
            t = q[o]
            tau[j] = expit(t)
            logj += -softplus(-t) - softplus(t)
            if mode == MODE_DFI:
                logj += stick_forward(q[o + 1:o + nx], delta[j])
            else:
                for d in range(nx):
                    delta[j, d] = 0.0
                delta[j, kappa[j]] = 1.0
        elif regression:
            mu[j] = q[o]
    sigma = 1.0
    if regression:
        s = q[q.shape[0] - 1]
        sigma = math.exp(s)
        logj += s
    return sigma, logj


@helper
def route(X, right, kappa, n_nodes, tau, delta, h, mode, w):
    """Forward pass: reach probabilities ``w.P`` (n, nodes) and expit(+-a) at internal nodes
    (``w.SP``, ``w.SM``)."""
    P, SP, SM = w.P, w.SP, w.SM
    n, nx = X.shape
    inv_h = 1.0 / h
    for i in range(n):
        P[i, 0] = 1.0
        for j in range(n_nodes):
            r = right[j]
            if r < 0:
                continue
            if mode == MODE_DFI:
                z = 0.0
                for d in range(nx):
                    z += X[i, d] * delta[j, d]
            else:
                z = X[i, kappa[j]]
            a = (z - tau[j]) * inv_h
            sp, sm = expit_pair(a)
            SP[i, j] = sp
            SM[i, j] = sm
            P[i, j + 1] = P[i, j] * sm
            P[i, r] = P[i, j] * sp


@helper
def log_prior(right, n_nodes, conf, tau, delta, mu, sigma):
    """log p(theta | T) in constrained coordinates, with every normalising constant (spec 5, pitfall 7)."""
    nx = conf.nx
    mode = conf.mode
    regression = conf.n_classes == 0
    lp = 0.0
    m0, s0 = conf.mu_mean, conf.mu_scale
    for j in range(n_nodes):
        if right[j] >= 0:
            # tau ~ Beta(1, 1): log density 0
            if mode == MODE_DFI:
                lp += math.lgamma(nx)  # Dirichlet(1) on the nx-simplex
            else:
                lp -= math.log(nx)  # kappa ~ Uniform{0..nx-1}
        elif regression:
            zz = (mu[j] - m0) / s0
            lp += -0.5 * LOG_2PI - math.log(s0) - 0.5 * zz * zz
    if regression:
        a, b = conf.sig_a, conf.sig_b
        lp += a * math.log(b) - math.lgamma(a) - (a + 1.0) * math.log(sigma) - b / sigma
    return lp


@helper
def log_lik_grad(t, sigma, want_grad):
    """log likelihood (eq. 12 regression, eq. 10 classification) of the target ``t`` (a
    ``SoftTarget``) at the parameters in ``t.work``, at the bandwidth ``t.work.h[0]``.

    With ``want_grad`` also d/dtau and d/dDelta (into ``w.gtau``, ``w.gdelta``) and, for
    regression, d/dmu into ``w.counts[:, 0]``. Returns (log lik, d log lik / d s) with s = log sigma.
    """
    X, y, ycls = t.data
    right, kappa, n_nodes, conf, w = t.right, t.kappa, t.nn[0], t.conf, t.work
    n, nx = X.shape
    mode = conf.mode
    h = w.h[0]
    ncls = conf.n_classes
    P, SP, SM, B = w.P, w.SP, w.SM, w.B
    route(X, right, kappa, n_nodes, w.tau, w.delta, h, mode, w)
    if want_grad:
        for j in range(n_nodes):
            w.gtau[j] = 0.0
            for d in range(nx):
                w.gdelta[j, d] = 0.0
    ll = 0.0
    ds = 0.0
    if ncls == 0:
        var = sigma * sigma
        for j in range(n_nodes):
            w.counts[j, 0] = 0.0  # d log lik / d mu_j
        ssr = 0.0
        for i in range(n):
            f = 0.0
            for j in range(n_nodes):
                if right[j] < 0:
                    f += P[i, j] * w.mu[j]
            r = f - y[i]
            ssr += r * r
            if want_grad:
                for j in range(n_nodes - 1, -1, -1):
                    if right[j] < 0:
                        B[j] = -r * w.mu[j] / var
                        w.counts[j, 0] -= r * P[i, j] / var
                    else:
                        B[j] = SM[i, j] * B[j + 1] + SP[i, j] * B[right[j]]
                _backward_row(X, i, right, n_nodes, mode, h, w)
        ll = -0.5 * n * (LOG_2PI + 2.0 * math.log(sigma)) - 0.5 * ssr / var
        ds = -n + ssr / var
        return ll, ds
    alpha = conf.class_alpha
    A = alpha * ncls
    C = w.counts
    for j in range(n_nodes):
        if right[j] < 0:
            for m in range(ncls):
                C[j, m] = 0.0
    for i in range(n):
        for j in range(n_nodes):
            if right[j] < 0:
                C[j, ycls[i]] += P[i, j]
    const = math.lgamma(A) - ncls * math.lgamma(alpha) if conf.class_const else 0.0
    for j in range(n_nodes):
        if right[j] < 0:
            tot = 0.0
            for m in range(ncls):
                tot += C[j, m]
                ll += math.lgamma(C[j, m] + alpha)
            ll += const - math.lgamma(tot + A)
    if want_grad:
        # a leaf's adjoint depends on the row only through its class: tabulate it once per
        # (leaf, class) instead of two digammas per row and leaf (most of the gradient's cost)
        gl = w.gleaf
        for j in range(n_nodes):
            if right[j] < 0:
                tot = 0.0
                for m in range(ncls):
                    tot += C[j, m]
                dg_tot = digamma(tot + A)
                for m in range(ncls):
                    gl[j, m] = digamma(C[j, m] + alpha) - dg_tot
        for i in range(n):
            c = ycls[i]
            for j in range(n_nodes - 1, -1, -1):
                if right[j] < 0:
                    B[j] = gl[j, c]
                else:
                    B[j] = SM[i, j] * B[j + 1] + SP[i, j] * B[right[j]]
            _backward_row(X, i, right, n_nodes, mode, h, w)
    return ll, ds


@helper
def _backward_row(X, i, right, n_nodes, mode, h, w):
    """Add row i's contribution to d log lik / d tau and d/dDelta (``w.gtau``, ``w.gdelta``) from
    the adjoints ``w.B`` and the forward pass in ``w`` (spec 5, backward pass)."""
    P, SP, SM, B, gtau, gdelta = w.P, w.SP, w.SM, w.B, w.gtau, w.gdelta
    nx = X.shape[1]
    inv_h = 1.0 / h
    for j in range(n_nodes):
        r = right[j]
        if r < 0:
            continue
        G = P[i, j] * SP[i, j] * SM[i, j] * (B[r] - B[j + 1]) * inv_h
        gtau[j] -= G
        if mode == MODE_DFI:
            for d in range(nx):
                gdelta[j, d] += G * X[i, d]


@helper
def potential(q, grad, t, want_grad):
    """U(q) = -(lik * log lik + log prior + log |J|) of the target ``t`` (a ``SoftTarget``); fills
    ``grad`` = dU/dq when ``want_grad``.

    ``t.work.parts`` receives (log lik, log prior, log |J|), so S_T = parts[0] + parts[1] (spec 2.4).
    """
    right, kappa, off, n_nodes, conf, w = t.right, t.kappa, t.off, t.nn[0], t.conf, t.work
    nx = conf.nx
    mode = conf.mode
    regression = conf.n_classes == 0
    lik = conf.lik
    sigma, logj = unpack(q, right, kappa, off, n_nodes, conf, w.tau, w.delta, w.mu)
    if regression and not 0.0 < sigma * sigma < np.inf:
        # A leapfrog step of a restarted run (eps near 1) can take log sigma so far that sigma^2
        # is 0 or inf in float64: U is then not representable (and computing it would divide by
        # zero). U = inf makes NUTS treat the point as divergent, as it treats NaN.
        w.parts[0] = -np.inf
        w.parts[1] = -np.inf
        w.parts[2] = logj
        if want_grad:
            for a in range(q.shape[0]):
                grad[a] = 0.0
        return np.inf
    lp = log_prior(right, n_nodes, conf, w.tau, w.delta, w.mu, sigma)
    ll = 0.0
    ds = 0.0
    if lik:
        ll, ds = log_lik_grad(t, sigma, want_grad)
    w.parts[0] = ll
    w.parts[1] = lp
    w.parts[2] = logj
    u = -(ll + lp + logj)
    if u != u:
        u = np.inf
    if not want_grad:
        return u
    m0, s0 = conf.mu_mean, conf.mu_scale
    for j in range(n_nodes):
        o = off[j]
        if right[j] >= 0:
            tau = w.tau[j]
            g = (w.gtau[j] if lik else 0.0) * tau * (1.0 - tau) + (1.0 - 2.0 * tau)
            grad[o] = -g
            if mode == MODE_DFI and nx > 1:
                if not lik:
                    for d in range(nx):
                        w.gdelta[j, d] = 0.0
                gv = grad[o + 1:o + nx]
                stick_backward(q[o + 1:o + nx], w.gdelta[j], gv, w.stick)
                for d in range(nx - 1):
                    gv[d] = -gv[d]
        elif regression:
            g = -(w.mu[j] - m0) / (s0 * s0)
            if lik:
                g += w.counts[j, 0]
            grad[o] = -g
    if regression:
        a, b = conf.sig_a, conf.sig_b
        grad[q.shape[0] - 1] = -(ds - a + b / sigma)
    return u


@helper
def pack(right, n_nodes, conf, off, tau, delta, mu, sigma, q):
    """Unconstrained ``q`` from constrained node parameters (the inverse of ``unpack``)."""
    nx = conf.nx
    mode = conf.mode
    regression = conf.n_classes == 0
    for j in range(n_nodes):
        o = off[j]
        if right[j] >= 0:
            t = min(max(tau[j], 1e-300), 1.0 - 1e-16)
            q[o] = math.log(t) - math.log1p(-t)
            if mode == MODE_DFI and nx > 1:
                stick_inverse(delta[j], q[o + 1:o + nx])
        elif regression:
            q[o] = mu[j]
    if regression:
        q[q.shape[0] - 1] = math.log(sigma)


@kernel
def leaf_probabilities(X, s, h, mode, w, phi):
    """phi (n, n_leaves): each row's probability of each leaf of the tree of ``s`` (a
    ``SoftState``), leaves left to right, at bandwidth ``h``; ``w`` (a ``SoftWork``) is scratch."""
    right, n_nodes = s.right, s.nn[0]
    P = w.P
    route(X, right, s.kappa, n_nodes, s.tau, s.delta, h, mode, w)
    k = 0
    for j in range(n_nodes):
        if right[j] < 0:
            for i in range(X.shape[0]):
                phi[i, k] = P[i, j]
            k += 1


@helper
def _reach(X, i, first, count, trees, P):
    """Reach probabilities of row i in the stored tree at flat slots first..first+count-1 of
    ``trees`` (a ``SoftTrees``)."""
    node_var, right, tau, delta, h, mode = trees.var, trees.right, trees.tau, trees.delta, trees.h, trees.mode
    nx = X.shape[1]
    P[0] = 1.0
    for j in range(first, first + count):
        v = node_var[j]
        if v < 0:
            continue
        if mode == MODE_DFI:
            z = 0.0
            for d in range(nx):
                z += X[i, d] * delta[j, d]
        else:
            z = X[i, v]
        a = (z - tau[j]) / h
        sp, sm = expit_pair(a)
        P[j + 1 - first] = P[j - first] * sm
        P[right[j] - first] = P[j - first] * sp


@kernel
def predict_samples(X, trees, value, prob, out_f, out_p):
    """Soft-routed predictions of every stored tree (eq. 3 before the average over draws).

    ``trees`` (a ``SoftTrees``) locates each draw's tree in the flat store (``roots``/``counts``)
    and routes it. Regression fills ``out_f`` (samples, n) with sum_k phi_k mu_k;
    classification (``prob`` with columns) fills ``out_p`` (samples, n, classes) with
    sum_k phi_k p_k.
    """
    node_var, roots, counts = trees.var, trees.roots, trees.counts
    n = X.shape[0]
    k = prob.shape[1]
    P = np.empty(max(counts.max(), 1) if counts.shape[0] > 0 else 1)
    for s in range(roots.shape[0]):
        first = roots[s]
        c = counts[s]
        for i in range(n):
            _reach(X, i, first, c, trees, P)
            f = 0.0
            for m in range(k):
                out_p[s, i, m] = 0.0
            for j in range(first, first + c):
                if node_var[j] < 0:
                    pj = P[j - first]
                    if k == 0:
                        f += pj * value[j]
                    else:
                        for m in range(k):
                            out_p[s, i, m] += pj * prob[j, m]
            if k == 0:
                out_f[s, i] = f


@kernel
def argmax_leaves(X, trees, out):
    """The paper's per-iteration routing (spec 4): each row's most probable leaf (flat slot) in each
    tree of ``trees`` (a ``SoftTrees``)."""
    node_var, roots, counts = trees.var, trees.roots, trees.counts
    n = X.shape[0]
    P = np.empty(max(counts.max(), 1) if counts.shape[0] > 0 else 1)
    for s in range(roots.shape[0]):
        first = roots[s]
        c = counts[s]
        for i in range(n):
            _reach(X, i, first, c, trees, P)
            best = -1.0
            for j in range(first, first + c):
                if node_var[j] < 0 and P[j - first] > best:
                    best = P[j - first]
                    out[s, i] = j


@kernel
def soft_class_counts(X, ycls, n_classes, trees, out):
    """Soft class counts C_km of the training rows per leaf (flat slot, class) of ``trees`` (a ``SoftTrees``)."""
    node_var, roots, counts = trees.var, trees.roots, trees.counts
    n = X.shape[0]
    P = np.empty(max(counts.max(), 1) if counts.shape[0] > 0 else 1)
    for s in range(roots.shape[0]):
        first = roots[s]
        c = counts[s]
        for j in range(first, first + c):
            for m in range(n_classes):
                out[j, m] = 0.0
        for i in range(n):
            _reach(X, i, first, c, trees, P)
            for j in range(first, first + c):
                if node_var[j] < 0:
                    out[j, ycls[i]] += P[j - first]
