"""The No-U-Turn Sampler with a diagonal metric, multinomial sampling along the trajectory,
dual-averaging step size and windowed metric adaptation (Stan's ``base_nuts.hpp``,
``windowed_adaptation.hpp``, ``stepsize_adaptation.hpp``, ``var_adaptation.hpp``; spec 6).

The target is a tuple ``tgt = (X, y, ycls, right, kappa, off, nn, conf, work)``: a soft tree
(``_kernels.soft_tree.potential``; ``nn[0]`` its node count) or, when ``conf[C_KIND] == 1``, a
Gaussian with precision ``X`` and mean ``y`` (used by the tests of NUTS alone). numba cannot
cache a kernel that takes another kernel as an argument, hence this dispatch.

Import rule: numpy, numba, ``math`` and ``_kernels.soft_tree``.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import helper
from .soft_tree import C_H, C_KIND, C_MODE, C_NX, MODE_DF, potential

MAX_DELTA_H = 1000.0  # a leapfrog point with H - H0 above this is divergent
EPS_MIN = 1e-10
EPS_MAX = 1e3

# slots of the NUTS run statistics ``rs``
R_DIVERGENT = 0  # divergent transitions
R_DEPTH = 1  # sum of tree depths
R_LEAPFROG = 2  # leapfrog steps
R_TRANSITIONS = 3
R_ACCEPT = 4  # sum of the adaptation statistic
R_EPS = 5  # step size after the run
N_RUN_STATS = 6

# slots of the adaptation settings ``ad``
A_DELTA = 0  # target acceptance (0.8)
A_GAMMA = 1
A_T0 = 2
A_KAPPA = 3
A_MAX_DEPTH = 4
N_ADAPT = 5


def default_adapt(target_accept: float = 0.8, max_tree_depth: int = 10) -> np.ndarray:
    """Adaptation settings (Stan's and NumPyro's defaults). Stan's step-size initialisation is
    chosen by ``run``'s ``init_step`` argument."""
    return np.array([target_accept, 0.05, 10.0, 0.75, float(max_tree_depth)])


@helper
def energy(q, g, tgt, want_grad):
    """U(q) and its gradient (into ``g``) of the target ``tgt``."""
    X, y, ycls, right, kappa, off, nn, conf, work = tgt
    if conf[C_KIND] == 1.0:
        d = q.shape[0]
        u = 0.0
        for a in range(d):
            s = 0.0
            for b in range(d):
                s += X[a, b] * (q[b] - y[b])
            g[a] = s
            u += 0.5 * (q[a] - y[a]) * s
        return u
    return potential(q, g, X, y, ycls, right, kappa, off, nn[0], conf, work, want_grad)


@helper
def _kinetic(p, minv):
    k = 0.0
    for a in range(p.shape[0]):
        k += minv[a] * p[a] * p[a]
    return 0.5 * k


@helper
def _leapfrog(q, p, g, eps, minv, tgt):
    """One leapfrog step of signed size ``eps``; return the new U."""
    d = q.shape[0]
    for a in range(d):
        p[a] -= 0.5 * eps * g[a]
    for a in range(d):
        q[a] += eps * minv[a] * p[a]
    u = energy(q, g, tgt, True)
    for a in range(d):
        p[a] -= 0.5 * eps * g[a]
    return u


@helper
def _logsumexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@helper
def _criterion(p_sharp_minus, p_sharp_plus, rho):
    s1 = 0.0
    s2 = 0.0
    for a in range(rho.shape[0]):
        s1 += p_sharp_plus[a] * rho[a]
        s2 += p_sharp_minus[a] * rho[a]
    return s1 > 0.0 and s2 > 0.0


@helper
def _build_tree(depth, z, prop_q, prop_g, prop_u, p_sharp_beg, p_sharp_end, rho, p_beg, p_end, H0, eps, minv, tgt,
                scr, scs, rng, acc):
    """Stan's ``build_tree``: extend the trajectory in ``z = (q, p, g, u)`` by 2^depth leapfrog
    steps of signed size ``eps``; return False if the subtree is divergent or turns back.

    ``acc`` = (n_leapfrog, log_sum_weight of this subtree (in/out), sum of metropolis probabilities,
    divergent). ``scr[depth]`` / ``scs[depth]`` are this depth's vector / scalar scratch.
    """
    zq, zp, zg, zu = z
    d = zq.shape[0]
    if depth == 0:
        zu[0] = _leapfrog(zq, zp, zg, eps, minv, tgt)
        acc[0] += 1.0
        h = zu[0] + _kinetic(zp, minv)
        if h != h:
            h = np.inf
        if h - H0 > MAX_DELTA_H:
            acc[3] = 1.0
        acc[1] = _logsumexp(acc[1], H0 - h)
        acc[2] += 1.0 if H0 - h > 0.0 else math.exp(H0 - h)
        for a in range(d):
            prop_q[a] = zq[a]
            prop_g[a] = zg[a]
            p_sharp_beg[a] = minv[a] * zp[a]
            p_sharp_end[a] = p_sharp_beg[a]
            rho[a] += zp[a]
            p_beg[a] = zp[a]
            p_end[a] = zp[a]
        prop_u[0] = zu[0]
        return acc[3] == 0.0
    s = scr[depth]
    p_sharp_init_end, p_init_end, rho_init = s[0, :d], s[1, :d], s[2, :d]
    p_final_beg, p_sharp_final_beg, rho_final = s[3, :d], s[4, :d], s[5, :d]
    prop_final_q, prop_final_g = s[6, :d], s[7, :d]
    prop_final_u = scs[depth, 0:1]
    for a in range(d):
        rho_init[a] = 0.0
        rho_final[a] = 0.0
    lsw_outer = acc[1]
    acc[1] = -np.inf
    valid_init = _build_tree(depth - 1, z, prop_q, prop_g, prop_u, p_sharp_beg, p_sharp_init_end, rho_init,
                             p_beg, p_init_end, H0, eps, minv, tgt, scr, scs, rng, acc)
    lsw_init = acc[1]
    if not valid_init:
        acc[1] = _logsumexp(lsw_outer, lsw_init)
        return False
    acc[1] = -np.inf
    valid_final = _build_tree(depth - 1, z, prop_final_q, prop_final_g, prop_final_u, p_sharp_final_beg,
                              p_sharp_end, rho_final, p_final_beg, p_end, H0, eps, minv, tgt, scr, scs, rng, acc)
    lsw_final = acc[1]
    if not valid_final:
        acc[1] = _logsumexp(lsw_outer, _logsumexp(lsw_init, lsw_final))
        return False
    lsw_subtree = _logsumexp(lsw_init, lsw_final)
    acc[1] = _logsumexp(lsw_outer, lsw_subtree)
    # uniform progressive sampling within a subtree
    take = lsw_final > lsw_subtree
    if not take:
        take = rng.random() < math.exp(lsw_final - lsw_subtree)
    if take:
        for a in range(d):
            prop_q[a] = prop_final_q[a]
            prop_g[a] = prop_final_g[a]
        prop_u[0] = prop_final_u[0]
    for a in range(d):
        rho_init[a] += rho_final[a]  # rho_subtree
        rho[a] += rho_init[a]
    persist = _criterion(p_sharp_beg, p_sharp_end, rho_init)
    for a in range(d):
        rho_init[a] = rho_init[a] - rho_final[a] + p_final_beg[a]  # rho_init + p_final_beg
    persist = persist and _criterion(p_sharp_beg, p_sharp_final_beg, rho_init)
    for a in range(d):
        rho_final[a] += p_init_end[a]
    persist = persist and _criterion(p_sharp_init_end, p_sharp_end, rho_final)
    return persist


@helper(refcounts=True)
def transition(q, g, u, eps, minv, max_depth, tgt, scr, scs, tmp, rng, rs):
    """One NUTS transition from (q, g, u[0]) in place; return the adaptation statistic.

    ``tmp`` (16, >= dim) holds the trajectory's end states and momenta (scratch may be wider than
    ``q``: only the first dim entries are used); ``rs`` accumulates divergences, depth and leapfrog counts.
    """
    d = q.shape[0]
    (p, rho, p_fwd_bck, p_sharp_fwd_bck, p_fwd_fwd, p_sharp_fwd_fwd, p_bck_fwd, p_sharp_bck_fwd,
     p_bck_bck, p_sharp_bck_bck, rho_fwd, rho_bck) = (tmp[0, :d], tmp[1, :d], tmp[2, :d], tmp[3, :d], tmp[4, :d],
                                                       tmp[5, :d], tmp[6, :d], tmp[7, :d], tmp[8, :d], tmp[9, :d],
                                                       tmp[10, :d], tmp[11, :d])
    zq, zp, zg = tmp[12, :d], tmp[13, :d], tmp[14, :d]
    prop = tmp[15, :d]
    prop_g = scr[0, 0, :d]
    zu = scs[0, 1:2]
    prop_u = scs[0, 2:3]
    fq, fp, fg = scr[0, 1, :d], scr[0, 2, :d], scr[0, 3, :d]  # forward end
    bq, bp, bg = scr[0, 4, :d], scr[0, 5, :d], scr[0, 6, :d]  # backward end
    fu = scs[0, 3:4]
    bu = scs[0, 4:5]
    for a in range(d):
        p[a] = rng.standard_normal() / math.sqrt(minv[a])
        rho[a] = p[a]
        p_fwd_bck[a] = p[a]
        p_fwd_fwd[a] = p[a]
        p_bck_fwd[a] = p[a]
        p_bck_bck[a] = p[a]
        ps = minv[a] * p[a]
        p_sharp_fwd_bck[a] = ps
        p_sharp_fwd_fwd[a] = ps
        p_sharp_bck_fwd[a] = ps
        p_sharp_bck_bck[a] = ps
        fq[a] = q[a]
        fp[a] = p[a]
        fg[a] = g[a]
        bq[a] = q[a]
        bp[a] = p[a]
        bg[a] = g[a]
    fu[0] = u[0]
    bu[0] = u[0]
    H0 = u[0] + _kinetic(p, minv)
    log_sum_weight = 0.0
    acc = np.zeros(4)
    depth = 0
    while depth < max_depth:
        for a in range(d):
            rho_fwd[a] = 0.0
            rho_bck[a] = 0.0
        acc[1] = -np.inf
        forward = rng.random() > 0.5
        if forward:
            for a in range(d):
                rho_bck[a] = rho[a]
                p_bck_fwd[a] = p_fwd_bck[a]
                p_sharp_bck_fwd[a] = p_sharp_fwd_bck[a]
                zq[a] = fq[a]
                zp[a] = fp[a]
                zg[a] = fg[a]
            zu[0] = fu[0]
            valid = _build_tree(depth, (zq, zp, zg, zu), prop, prop_g, prop_u, p_sharp_fwd_bck, p_sharp_fwd_fwd,
                                rho_fwd, p_fwd_bck, p_fwd_fwd, H0, eps, minv, tgt, scr, scs, rng, acc)
            for a in range(d):
                fq[a] = zq[a]
                fp[a] = zp[a]
                fg[a] = zg[a]
            fu[0] = zu[0]
        else:
            for a in range(d):
                rho_fwd[a] = rho[a]
                p_fwd_bck[a] = p_bck_fwd[a]
                p_sharp_fwd_bck[a] = p_sharp_bck_fwd[a]
                zq[a] = bq[a]
                zp[a] = bp[a]
                zg[a] = bg[a]
            zu[0] = bu[0]
            valid = _build_tree(depth, (zq, zp, zg, zu), prop, prop_g, prop_u, p_sharp_bck_fwd, p_sharp_bck_bck,
                                rho_bck, p_bck_fwd, p_bck_bck, H0, -eps, minv, tgt, scr, scs, rng, acc)
            for a in range(d):
                bq[a] = zq[a]
                bp[a] = zp[a]
                bg[a] = zg[a]
            bu[0] = zu[0]
        if not valid:
            break
        depth += 1
        lsw_sub = acc[1]
        # biased progressive sampling at the top level
        take = lsw_sub > log_sum_weight
        if not take:
            take = rng.random() < math.exp(lsw_sub - log_sum_weight)
        if take:
            for a in range(d):
                q[a] = prop[a]
                g[a] = prop_g[a]
            u[0] = prop_u[0]
        log_sum_weight = _logsumexp(log_sum_weight, lsw_sub)
        for a in range(d):
            rho[a] = rho_bck[a] + rho_fwd[a]
        persist = _criterion(p_sharp_bck_bck, p_sharp_fwd_fwd, rho)
        for a in range(d):
            rho_fwd[a] = rho_bck[a] + p_fwd_bck[a]  # reused as rho_extended
        persist = persist and _criterion(p_sharp_bck_bck, p_sharp_fwd_bck, rho_fwd)
        for a in range(d):
            rho_fwd[a] = rho[a] - rho_bck[a] + p_bck_fwd[a]
        persist = persist and _criterion(p_sharp_bck_fwd, p_sharp_fwd_fwd, rho_fwd)
        if not persist:
            break
    n_leap = acc[0]
    rs[R_DIVERGENT] += acc[3]
    rs[R_DEPTH] += depth
    rs[R_LEAPFROG] += n_leap
    rs[R_TRANSITIONS] += 1.0
    stat = acc[2] / n_leap if n_leap > 0 else 0.0
    rs[R_ACCEPT] += stat
    return stat


def new_scratch(dim: int, max_depth: int):
    """Scratch of ``transition`` for ``dim`` coordinates: (scr, scs, tmp)."""
    return np.zeros((max_depth + 1, 8, dim)), np.zeros((max_depth + 1, 5)), np.zeros((16, dim))


@helper
def window_plan(W, ends):
    """Stan's warm-up windows for ``W`` transitions: fill ``ends`` with the last transition of each
    slow window; return (count, first slow transition). No metric adaptation when W < 20."""
    if W < 20:
        return 0, W
    init, term, base = 75, 50, 25
    if init + term + base > W:
        init = int(0.15 * W)
        term = int(0.1 * W)
        base = W - (init + term)
    count = 0
    size = base
    nxt = init + base - 1
    last = W - term - 1
    while True:
        ends[count] = nxt
        count += 1
        if nxt >= last:
            break
        size *= 2
        nxt2 = nxt + size
        if nxt2 + 2 * size >= W - term:
            nxt2 = last
        nxt = min(nxt2, last)
    return count, init


@helper
def h_at(t, h_init, h_final, w1, ramp, code_schedule):
    """Routing bandwidth used at warm-up transition t (eq. 20 as spec 3 recommends, or the code's)."""
    if h_init == h_final:
        return h_final
    if code_schedule:
        steps = min(max(t - w1, 0), ramp + 1)
        return h_init + (h_final - h_init) * steps / ramp
    frac = min(max((t - w1) / ramp, 0.0), 1.0)
    return h_init + (h_final - h_init) * frac


@helper
def h_ramp(W, w1, last_end):
    """Length of the h ramp: 274 for W = 500 (spec 3), scaled with the slow windows otherwise."""
    return max(1, int(round((last_end - w1) * 274.0 / 374.0)))


@helper
def _init_stepsize(q, g, u, eps, minv, tgt, rng, buf):
    """Stan's ``init_stepsize``: double or halve eps until one leapfrog's acceptance crosses 0.8."""
    d = q.shape[0]
    q0, g0, p = buf[0, :d], buf[1, :d], buf[2, :d]
    for a in range(d):
        q0[a] = q[a]
        g0[a] = g[a]
    u0 = u[0]
    direction = 0
    for _ in range(100):
        for a in range(d):
            q[a] = q0[a]
            g[a] = g0[a]
            p[a] = rng.standard_normal() / math.sqrt(minv[a])
        H0 = u0 + _kinetic(p, minv)
        h = _leapfrog(q, p, g, eps, minv, tgt) + _kinetic(p, minv)
        if h != h:
            h = np.inf
        delta_h = H0 - h
        if direction == 0:
            direction = 1 if delta_h > math.log(0.8) else -1
        elif direction == 1 and not delta_h > math.log(0.8):
            break
        elif direction == -1 and not delta_h < math.log(0.8):
            break
        eps = eps * 2.0 if direction == 1 else eps * 0.5
        eps = min(max(eps, EPS_MIN), EPS_MAX)
        if eps == EPS_MIN or eps == EPS_MAX:
            break
    for a in range(d):
        q[a] = q0[a]
        g[a] = g0[a]
    u[0] = u0
    return eps


@helper(refcounts=True)
def _gibbs_kappa(q, g, u, tgt, rng):
    """HMC-DF's discrete update (spec 2.6): visit every split variable in random order, propose
    a uniform kappa' (possibly equal) and accept with probability min(1, exp(U_old - U_new))."""
    right, kappa, nn, conf = tgt[3], tgt[4], tgt[6], tgt[7]
    nx = int(conf[C_NX])
    n = nn[0]
    order = np.empty(n, dtype=np.int64)
    m = 0
    for j in range(n):
        if right[j] >= 0:
            order[m] = j
            m += 1
    if m == 0:
        return
    for a in range(m - 1, 0, -1):
        b = min(int(rng.random() * (a + 1)), a)
        order[a], order[b] = order[b], order[a]
    for a in range(m):
        j = order[a]
        old = kappa[j]
        kappa[j] = min(int(rng.random() * nx), nx - 1)
        if kappa[j] == old:
            continue
        u_new = energy(q, g, tgt, False)
        if math.log(rng.random()) < u[0] - u_new:
            u[0] = u_new
        else:
            kappa[j] = old
    u[0] = energy(q, g, tgt, True)


@helper(refcounts=True)
def run(q, g, u, eps0, minv, W, n_after, out, h_init, h_final, code_schedule, ad, tgt, scr, scs, tmp, rng, rs,
        init_step):
    """W adaptive warm-up transitions (h annealed from ``h_init`` to ``h_final``), then
    ``n_after`` transitions at the adapted step size, recorded into ``out`` (n_after, dim).

    ``q``, ``g``, ``u`` hold the state (U and its gradient at the current h); ``minv`` the diagonal
    inverse metric, adapted in place. Returns the final step size. ``rs`` collects statistics.
    ``init_step``: None, or True for Stan's step-size heuristic at the start and after each
    metric window. None is a type, so without the heuristic it is not compiled at all.
    """
    d = q.shape[0]
    conf = tgt[7]
    max_depth = int(ad[A_MAX_DEPTH])
    delta, gamma, t0, kappa = ad[A_DELTA], ad[A_GAMMA], ad[A_T0], ad[A_KAPPA]
    ends = np.empty(64, dtype=np.int64)
    n_windows, w1 = window_plan(W, ends)
    last_end = ends[n_windows - 1] if n_windows > 0 else W - 1
    ramp = h_ramp(W, w1, last_end)
    eps = eps0
    if init_step is not None and W > 0:
        eps = _init_stepsize(q, g, u, eps, minv, tgt, rng, tmp)
    mu = math.log(10.0 * eps)
    sbar = 0.0
    xbar = 0.0
    counter = 0.0
    wn = 0.0
    wmean = np.zeros(d)
    wm2 = np.zeros(d)
    widx = 0
    h_prev = conf[C_H]
    gibbs = conf[C_KIND] == 0.0 and conf[C_MODE] == MODE_DF and conf[C_NX] > 1.0
    for t in range(W + n_after):
        h = h_at(t, h_init, h_final, w1, ramp, code_schedule) if t < W else \
            h_at(W, h_init, h_final, w1, ramp, code_schedule)
        conf[C_H] = h
        if h != h_prev:
            u[0] = energy(q, g, tgt, True)  # spec 5, pitfall 3: recompute after h changes
            h_prev = h
        if gibbs:
            _gibbs_kappa(q, g, u, tgt, rng)
        stat = transition(q, g, u, eps, minv, max_depth, tgt, scr, scs, tmp, rng, rs)
        if t >= W:
            for a in range(d):
                out[t - W, a] = q[a]
            continue
        # dual averaging
        counter += 1.0
        if stat > 1.0:
            stat = 1.0
        eta = 1.0 / (counter + t0)
        sbar = (1.0 - eta) * sbar + eta * (delta - stat)
        x = mu - sbar * math.sqrt(counter) / gamma
        x_eta = counter ** (-kappa)
        xbar = (1.0 - x_eta) * xbar + x_eta * x
        eps = min(max(math.exp(x), EPS_MIN), EPS_MAX)
        # metric: Welford over each slow window
        if widx < n_windows and t >= w1:
            wn += 1.0
            for a in range(d):
                dlt = q[a] - wmean[a]
                wmean[a] += dlt / wn
                wm2[a] += dlt * (q[a] - wmean[a])
            if t == ends[widx]:
                for a in range(d):
                    var = wm2[a] / (wn - 1.0) if wn > 1.0 else 1.0
                    minv[a] = (wn / (wn + 5.0)) * var + 1e-3 * (5.0 / (wn + 5.0))
                    wmean[a] = 0.0
                    wm2[a] = 0.0
                wn = 0.0
                widx += 1
                if init_step is not None:
                    eps = _init_stepsize(q, g, u, eps, minv, tgt, rng, tmp)
                mu = math.log(10.0 * eps)
                sbar = 0.0
                xbar = 0.0
                counter = 0.0
        if t == W - 1:
            eps = min(max(math.exp(xbar), EPS_MIN), EPS_MAX)
    rs[R_EPS] = eps
    return eps
