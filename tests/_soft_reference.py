"""Plain-numpy reference versions of the soft-tree density (RJHMC-Tree spec 1), written
independently of the numba kernels: recursion over a nested tree, vectorised over rows."""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from bartpy_suite._kernels import soft_tree as st
from bartpy_suite._kernels.soft_records import KIND_SOFT_TREE, SoftConf


def random_preorder_tree(rng, max_depth=3, p_split=0.7):
    """(right, depth) arrays of a random binary tree in preorder."""
    right, depth = [], []

    def build(d):
        j = len(right)
        right.append(-1)
        depth.append(d)
        if d < max_depth and (d == 0 or rng.random() < p_split):
            build(d + 1)
            right[j] = len(right)
            build(d + 1)

    build(0)
    return np.array(right, dtype=np.int64), np.array(depth, dtype=np.int64)


def make_conf(nx, mode, n_classes=0, lik=True, class_const=True, mu_mean=0.0, mu_scale=1.0, a=1.5, b=1.5,
              class_alpha=1.0):
    """The kernels' density settings (the routing bandwidth is the work's ``h``)."""
    return SoftConf(mode=int(mode), nx=int(nx), n_classes=int(n_classes), lik=bool(lik), mu_mean=float(mu_mean),
                    mu_scale=float(mu_scale), sig_a=float(a), sig_b=float(b), class_alpha=float(class_alpha),
                    class_const=bool(class_const), kind=KIND_SOFT_TREE)


def stick(v):
    """Stick-breaking (v of length K-1) -> (Delta, log|J|), straight from the definition."""
    K = len(v) + 1
    delta = np.zeros(K)
    rem, logj = 1.0, 0.0
    for k in range(K - 1):
        z = special.expit(v[k] - math.log(K - k - 1))
        delta[k] = rem * z
        logj += math.log(z) + math.log(1 - z) + math.log(rem)
        rem *= 1 - z
    delta[-1] = rem
    return delta, logj


def reference_potential(q, X, y, ycls, right, kappa, conf, h):
    """U(q) = -(log lik + log prior + log|J|) at bandwidth h by recursion over the tree (no shared code)."""
    n, nx = X.shape
    mode, ncls = conf.mode, conf.n_classes
    regression = ncls == 0
    pos = 0
    params = {}
    logj = 0.0
    logprior = 0.0
    for j in range(len(right)):
        if right[j] >= 0:
            t = q[pos]
            tau = special.expit(t)
            logj += math.log(tau) + math.log(1 - tau)
            pos += 1
            if mode == st.MODE_DFI:
                delta, lj = stick(q[pos:pos + nx - 1])
                logj += lj
                pos += nx - 1
                logprior += stats.dirichlet(np.ones(nx)).logpdf(np.clip(delta, 1e-300, None)) if nx > 1 else 0.0
            else:
                delta = np.eye(nx)[kappa[j]]
                logprior += -math.log(nx)
            params[j] = (tau, delta)
        elif regression:
            params[j] = q[pos]
            logprior += stats.norm(conf.mu_mean, conf.mu_scale).logpdf(q[pos])
            pos += 1
    phi = {}

    def descend(j, prob):
        if right[j] < 0:
            phi[j] = prob
            return
        tau, delta = params[j]
        psi = special.expit((X @ delta - tau) / h)  # P(go right)
        descend(j + 1, prob * (1 - psi))
        descend(right[j], prob * psi)

    descend(0, np.ones(n))
    leaves = sorted(phi)
    loglik = 0.0
    if regression:
        s = q[-1]
        sigma = math.exp(s)
        logj += s
        logprior += stats.invgamma(conf.sig_a, scale=conf.sig_b).logpdf(sigma)
        f = sum(phi[k] * params[k] for k in leaves)
        loglik = stats.norm(f, sigma).logpdf(y).sum()
    else:
        alpha = conf.class_alpha
        for k in leaves:
            C = np.array([phi[k][ycls == m].sum() for m in range(ncls)])
            term = -special.gammaln(C.sum() + ncls * alpha) + special.gammaln(C + alpha).sum()
            if conf.class_const:
                term += special.gammaln(ncls * alpha) - ncls * special.gammaln(alpha)
            loglik += term
    if not conf.lik:
        loglik = 0.0
    return -(loglik + logprior + logj)
