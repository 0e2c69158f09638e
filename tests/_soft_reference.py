"""Plain-numpy reference versions of the soft-tree density (RJHMC-Tree spec 1), written
independently of the numba kernels: recursion over a nested tree, vectorised over rows."""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from bartpy_suite._kernels import soft_tree as st


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


def make_conf(nx, mode, h=0.1, n_classes=0, lik=1.0, class_const=1.0, mu_mean=0.0, mu_scale=1.0, a=1.5, b=1.5,
              class_alpha=1.0):
    conf = np.zeros(st.N_CONF)
    conf[st.C_H] = h
    conf[st.C_LIK] = lik
    conf[st.C_MODE] = mode
    conf[st.C_MU_MEAN] = mu_mean
    conf[st.C_MU_SCALE] = mu_scale
    conf[st.C_SIG_A] = a
    conf[st.C_SIG_B] = b
    conf[st.C_N_CLASSES] = n_classes
    conf[st.C_CLASS_ALPHA] = class_alpha
    conf[st.C_CLASS_CONST] = class_const
    conf[st.C_NX] = nx
    return conf


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


def reference_potential(q, X, y, ycls, right, kappa, conf):
    """U(q) = -(log lik + log prior + log|J|) by recursion over the tree (no shared code)."""
    n, nx = X.shape
    mode, h, ncls = int(conf[st.C_MODE]), conf[st.C_H], int(conf[st.C_N_CLASSES])
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
            logprior += stats.norm(conf[st.C_MU_MEAN], conf[st.C_MU_SCALE]).logpdf(q[pos])
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
        logprior += stats.invgamma(conf[st.C_SIG_A], scale=conf[st.C_SIG_B]).logpdf(sigma)
        f = sum(phi[k] * params[k] for k in leaves)
        loglik = stats.norm(f, sigma).logpdf(y).sum()
    else:
        alpha = conf[st.C_CLASS_ALPHA]
        for k in leaves:
            C = np.array([phi[k][ycls == m].sum() for m in range(ncls)])
            term = -special.gammaln(C.sum() + ncls * alpha) + special.gammaln(C + alpha).sum()
            if conf[st.C_CLASS_CONST]:
                term += special.gammaln(ncls * alpha) - ncls * special.gammaln(alpha)
            loglik += term
    if conf[st.C_LIK] == 0:
        loglik = 0.0
    return -(loglik + logprior + logj)
