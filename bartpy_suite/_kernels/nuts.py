"""The No-U-Turn Sampler with a diagonal metric, multinomial sampling along the trajectory,
dual-averaging step size and windowed metric adaptation (Stan's ``base_nuts.hpp``,
``windowed_adaptation.hpp``, ``stepsize_adaptation.hpp``, ``var_adaptation.hpp``; spec 6).

The target ``tgt`` is a ``soft_records.SoftTarget``: a soft tree (``_kernels.soft_tree.potential``;
``tgt.nn[0]`` its node count, ``tgt.work.h[0]`` the routing bandwidth, which ``run`` anneals) or,
when ``tgt.conf.kind == KIND_GAUSSIAN``, a Gaussian with precision ``tgt.data.X`` and mean
``tgt.data.y`` (used by the tests of NUTS alone). numba cannot cache a kernel that takes another
kernel as an argument, hence this dispatch. The settings are a ``soft_records.NutsSettings``, the
scratch a ``soft_records.NutsScratch``; a point ``z = (q, g, u)`` is the position, the gradient of
U there and U (``u[0]``).

Import rule: numpy, numba, ``math``, ``_kernels.soft_tree`` and ``_kernels.soft_records``.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import helper
from .soft_records import KIND_GAUSSIAN, KIND_SOFT_TREE, MODE_DF, NutsScratch, NutsSettings
from .soft_tree import potential

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


def settings(warmup: int, n_after: int, h_init: float, h_final: float, *, target_accept: float = 0.8,
             max_tree_depth: int = 10, code_schedule: bool = False) -> NutsSettings:
    """NUTS settings: Stan's and NumPyro's adaptation defaults (gamma 0.05, t0 10, kappa 0.75) and
    the plan of a run (``warmup`` adaptive transitions with h annealed from ``h_init`` to
    ``h_final``, then ``n_after`` kept ones). Stan's step-size initialisation is chosen by
    ``run``'s ``init_step`` argument.

    Parameters
    ----------
    warmup, n_after : int
        Adaptive and kept transitions of a run.
    h_init, h_final : float
        Routing bandwidth at the start and the end of the warm-up.
    target_accept : float
        Dual-averaging target acceptance statistic.
    max_tree_depth : int
        Maximum tree depth (2^depth - 1 leapfrog steps).
    code_schedule : bool
        The authors' code's h schedule (spec 3) instead of the recommended one.

    Returns
    -------
    NutsSettings
    """
    return NutsSettings(float(target_accept), 0.05, 10.0, 0.75, int(max_tree_depth), int(warmup), int(n_after),
                        float(h_init), float(h_final), bool(code_schedule))


@helper
def energy(q, g, tgt, want_grad):
    """U(q) and its gradient (into ``g``) of the target ``tgt``."""
    if tgt.conf.kind == KIND_GAUSSIAN:
        X, y = tgt.data.X, tgt.data.y
        d = q.shape[0]
        u = 0.0
        for a in range(d):
            s = 0.0
            for b in range(d):
                s += X[a, b] * (q[b] - y[b])
            g[a] = s
            u += 0.5 * (q[a] - y[a]) * s
        return u
    return potential(q, g, tgt, want_grad)


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
def _build_tree(depth, z, prop, edge, leap, tgt, sc, rng, acc):
    """Stan's ``build_tree``: extend the trajectory in ``z = (q, p, g, u)`` by 2^depth leapfrog
    steps of signed size ``eps``; return False if the subtree is divergent or turns back.

    ``prop = (q, g, u)`` receives the subtree's proposal; ``edge = (p_sharp_beg, p_sharp_end, rho,
    p_beg, p_end)`` the momenta at its two ends and the sum of its momenta (added to ``rho``);
    ``leap = (H0, eps, minv)``: the initial Hamiltonian, the signed step size and the inverse metric.
    ``acc`` = (n_leapfrog, log_sum_weight of this subtree (in/out), sum of metropolis probabilities,
    divergent). ``sc.scr[depth]`` / ``sc.scs[depth]`` are this depth's vector / scalar scratch.
    """
    zq, zp, zg, zu = z
    prop_q, prop_g, prop_u = prop
    p_sharp_beg, p_sharp_end, rho, p_beg, p_end = edge
    H0, eps, minv = leap
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
    s = sc.scr[depth]
    p_sharp_init_end, p_init_end, rho_init = s[0, :d], s[1, :d], s[2, :d]
    p_final_beg, p_sharp_final_beg, rho_final = s[3, :d], s[4, :d], s[5, :d]
    prop_final_q, prop_final_g = s[6, :d], s[7, :d]
    prop_final_u = sc.scs[depth, 0:1]
    for a in range(d):
        rho_init[a] = 0.0
        rho_final[a] = 0.0
    lsw_outer = acc[1]
    acc[1] = -np.inf
    valid_init = _build_tree(depth - 1, z, prop, (p_sharp_beg, p_sharp_init_end, rho_init, p_beg, p_init_end),
                             leap, tgt, sc, rng, acc)
    lsw_init = acc[1]
    if not valid_init:
        acc[1] = _logsumexp(lsw_outer, lsw_init)
        return False
    acc[1] = -np.inf
    valid_final = _build_tree(depth - 1, z, (prop_final_q, prop_final_g, prop_final_u),
                              (p_sharp_final_beg, p_sharp_end, rho_final, p_final_beg, p_end), leap, tgt, sc, rng,
                              acc)
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


@helper
def transition(z, eps, minv, max_depth, tgt, sc, rng, rs):
    """One NUTS transition from the point ``z = (q, g, u)`` in place; return the adaptation statistic.

    ``sc.tmp`` (16, >= dim) holds the trajectory's end states and momenta (scratch may be wider than
    ``q``: only the first dim entries are used); ``rs`` accumulates divergences, depth and leapfrog counts.
    """
    q, g, u = z
    scr, scs, tmp, acc = sc.scr, sc.scs, sc.tmp, sc.acc
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
    for a in range(4):
        acc[a] = 0.0
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
            valid = _build_tree(depth, (zq, zp, zg, zu), (prop, prop_g, prop_u),
                                (p_sharp_fwd_bck, p_sharp_fwd_fwd, rho_fwd, p_fwd_bck, p_fwd_fwd), (H0, eps, minv),
                                tgt, sc, rng, acc)
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
            valid = _build_tree(depth, (zq, zp, zg, zu), (prop, prop_g, prop_u),
                                (p_sharp_bck_fwd, p_sharp_bck_bck, rho_bck, p_bck_fwd, p_bck_bck), (H0, -eps, minv),
                                tgt, sc, rng, acc)
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


def new_scratch(dim: int, max_depth: int) -> NutsScratch:
    """Scratch of ``run`` for at most ``dim`` coordinates and trees up to ``max_depth``.

    Parameters
    ----------
    dim : int
        Largest number of coordinates of q.
    max_depth : int
        NUTS's maximum tree depth.

    Returns
    -------
    NutsScratch
    """
    # a soft tree of n nodes has at least (n - 1) / 2 coordinates (classification, DF): order's size
    return NutsScratch(np.zeros((max_depth + 1, 8, dim)), np.zeros((max_depth + 1, 5)), np.zeros((16, dim)),
                       np.zeros(4), np.zeros(64, dtype=np.int64), np.zeros((2, dim)),
                       np.zeros(2 * dim + 1, dtype=np.int64))


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


@helper
def _gibbs_kappa(q, g, u, tgt, rng, order):
    """HMC-DF's discrete update (spec 2.6): visit every split variable in random order, propose
    a uniform kappa' (possibly equal) and accept with probability min(1, exp(U_old - U_new))."""
    right, kappa, nn = tgt.right, tgt.kappa, tgt.nn
    nx = tgt.conf.nx
    n = nn[0]
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


@helper
def run(z, eps0, minv, ns, tgt, sc, out, rng, rs, init_step):
    """``ns.warmup`` adaptive warm-up transitions (h annealed from ``ns.h_init`` to ``ns.h_final``),
    then ``ns.n_after`` transitions at the adapted step size, recorded into ``out`` (n_after, dim).

    The point ``z = (q, g, u)`` holds the state (U and its gradient at the current h,
    ``tgt.work.h[0]``); ``minv`` the diagonal inverse metric, adapted in place; ``ns`` is a
    ``NutsSettings``. Returns the final step size. ``rs`` collects statistics.
    ``init_step``: None, or True for Stan's step-size heuristic at the start and after each
    metric window. None is a type, so without the heuristic it is not compiled at all (which is
    why it is an argument of its own, not a field of ``ns``).
    """
    q, g, u = z
    W, n_after = ns.warmup, ns.n_after
    h_init, h_final, code_schedule = ns.h_init, ns.h_final, ns.code_schedule
    tmp = sc.tmp
    d = q.shape[0]
    conf = tgt.conf
    hbuf = tgt.work.h
    max_depth = ns.max_depth
    delta, gamma, t0, kappa = ns.target_accept, ns.gamma, ns.t0, ns.kappa
    ends = sc.ends
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
    wmean = sc.welford[0, :d]
    wm2 = sc.welford[1, :d]
    for a in range(d):
        wmean[a] = 0.0
        wm2[a] = 0.0
    widx = 0
    h_prev = hbuf[0]
    gibbs = conf.kind == KIND_SOFT_TREE and conf.mode == MODE_DF and conf.nx > 1
    for t in range(W + n_after):
        h = h_at(t, h_init, h_final, w1, ramp, code_schedule) if t < W else \
            h_at(W, h_init, h_final, w1, ramp, code_schedule)
        hbuf[0] = h
        if h != h_prev:
            u[0] = energy(q, g, tgt, True)  # spec 5, pitfall 3: recompute after h changes
            h_prev = h
        if gibbs:
            _gibbs_kappa(q, g, u, tgt, rng, sc.order)
        stat = transition(z, eps, minv, max_depth, tgt, sc, rng, rs)
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
