"""The RJHMC-Tree transition (paper Alg. 1, spec 2): grow / prune / stay proposals, a NUTS run
on the current topology, a warm start of the new dimensions, a NUTS run on the proposed
topology and the reversible-jump acceptance (eq. 18 telescoped after warm-up, eq. 19 during it).

A soft-tree state (``soft_records.SoftState``) holds the topology in preorder (``right``, ``kappa``,
``depth``) and the constrained node parameters (``tau``, ``delta``, ``mu``, ``sig``), plus the
inverse metric carried per node for the cheap mode. Values move with their node when a node is
inserted or removed, so the warm start maps values by node identity (spec 2.3); the code's
positional mapping is reachable with ``code_quirks``.

The kernel ``iteration`` takes the records of ``soft_records.py``: the four states (``RJStates``),
the scratch (``RJScratch``, built by ``new_scratch``), the settings (``SoftSettings``: density,
moves, NUTS) and the data, and hands them to the helper ``_iteration``. Nothing below the kernel
allocates or counts references: every buffer is in the scratch. Taking a record of arrays apart in
a function that counts references costs one reference-count call per array; with the arrays in
records that was half of the kernel's code and 1-2 CPU s of the first fit's compile.

Import rule: numpy, numba, ``math``, the soft-tree and NUTS kernels and ``soft_records``.
"""

from __future__ import annotations

import math

import numpy as np

from . import nuts
from .jit import helper, kernel
from .soft_records import (  # noqa: F401 (SoftState, new_state re-exported)
    MODE_DFI,
    RJScratch,
    SoftState,
    SoftTarget,
    new_state,
    new_work,
)
from .soft_tree import layout, pack, unpack

MOVE_GROW = 0
MOVE_PRUNE = 1
MOVE_STAY = 2

# slots of the per-iteration output ``it``
I_MOVE = 0
I_ACCEPTED = 1
I_LOG_ALPHA = 2
I_EPS = 3
I_DEPTH_SUM = 4
I_TRANSITIONS = 5
I_LEAPFROG = 6
I_DIVERGENT = 7
I_ACCEPT_STAT = 8
I_LOG_LIK = 9  # log lik, log prior of the parameters and log p(T) of the state left, when ``record``
I_LOG_PRIOR = 10
I_LOG_TREE_PRIOR = 11
N_IT = 12


@helper
def copy_state(src, dst):
    """Copy the first ``src.nn[0]`` nodes of ``src`` into ``dst``."""
    n = src.nn[0]
    for j in range(n):
        dst.right[j] = src.right[j]
        dst.kappa[j] = src.kappa[j]
        dst.depth[j] = src.depth[j]
        dst.tau[j] = src.tau[j]
        dst.mu[j] = src.mu[j]
        for d in range(src.delta.shape[1]):
            dst.delta[j, d] = src.delta[j, d]
            dst.minv[j, d] = src.minv[j, d]
    for k in range(4):
        dst.scal[k] = src.scal[k]
    dst.nn[0] = n


@helper
def _move_node(s, src, dst):
    s.right[dst] = s.right[src]
    s.kappa[dst] = s.kappa[src]
    s.depth[dst] = s.depth[src]
    s.tau[dst] = s.tau[src]
    s.mu[dst] = s.mu[src]
    for d in range(s.delta.shape[1]):
        s.delta[dst, d] = s.delta[src, d]
        s.minv[dst, d] = s.minv[src, d]


@helper
def grow_at(s, i):
    """Make leaf i internal with two leaf children at i + 1 (left) and i + 2 (right); the left
    child inherits i's mu. The new split and the right child's mu are left for the caller."""
    n = s.nn[0]
    for j in range(n - 1, i, -1):
        _move_node(s, j, j + 2)
    for j in range(n + 2):
        if j != i and s.right[j] > i and not (i < j <= i + 2):
            s.right[j] += 2
    s.right[i] = i + 2
    for c in (i + 1, i + 2):
        s.right[c] = -1
        s.depth[c] = s.depth[i] + 1
        s.kappa[c] = 0
        s.mu[c] = s.mu[i]
        for d in range(s.delta.shape[1]):
            s.minv[c, d] = 1.0
            s.delta[c, d] = 0.0
    for d in range(s.delta.shape[1]):
        s.minv[i, d] = 1.0
    s.nn[0] = n + 2


@helper
def prune_at(s, i):
    """Make internal node i (whose children are leaves) a leaf keeping its left child's mu."""
    n = s.nn[0]
    s.mu[i] = s.mu[i + 1]
    s.minv[i, 0] = s.minv[i + 1, 0]
    s.right[i] = -1
    for j in range(i + 3, n):
        _move_node(s, j, j - 2)
    s.nn[0] = n - 2
    for j in range(n - 2):
        if s.right[j] > i:
            s.right[j] -= 2


@helper
def log_tree_prior(s, alpha_s, beta_s):
    """log p(T) = sum over internal nodes of log p_s(d) + sum over leaves of log(1 - p_s(d)) (eqs. 14-15)."""
    lp = 0.0
    for j in range(s.nn[0]):
        ps = alpha_s * (1.0 + s.depth[j]) ** (-beta_s)
        if s.right[j] >= 0:
            lp += math.log(ps)
        else:
            lp += math.log1p(-ps)
    return lp


@helper
def count_nog(s):
    """Internal nodes whose two children are leaves."""
    c = 0
    for j in range(s.nn[0]):
        r = s.right[j]
        if r >= 0 and s.right[j + 1] < 0 and s.right[r] < 0:
            c += 1
    return c


@helper
def count_leaves(s):
    c = 0
    for j in range(s.nn[0]):
        if s.right[j] < 0:
            c += 1
    return c


@helper
def _log_split_prior(s, j, conf):
    """log p of node j's split parameters: tau ~ Beta(1,1) (0), kappa uniform or Delta ~ Dir(1)."""
    nx = conf.nx
    if conf.mode == MODE_DFI:
        return math.lgamma(nx)
    return -math.log(nx)


@helper
def _log_mu_prior(m, conf):
    m0, s0 = conf.mu_mean, conf.mu_scale
    z = (m - m0) / s0
    return -0.5 * math.log(2.0 * math.pi) - math.log(s0) - 0.5 * z * z


@helper
def _draw_split(s, j, conf, rng):
    """Prior draws of node j's split: tau ~ U(0,1), kappa ~ U{0..nx-1} or Delta ~ Dir(1)."""
    nx = conf.nx
    s.tau[j] = rng.random()
    if conf.mode == MODE_DFI:
        tot = 0.0
        for d in range(nx):
            e = -math.log(1.0 - rng.random())
            s.delta[j, d] = e
            tot += e
        for d in range(nx):
            s.delta[j, d] /= tot
    else:
        s.kappa[j] = min(int(rng.random() * nx), nx - 1)
        for d in range(nx):
            s.delta[j, d] = 0.0
        s.delta[j, s.kappa[j]] = 1.0


@helper
def _positional_copy(src, dst, index):
    """The code's warm start after a prune (spec 2.3 [QUIRK]): internal nodes of ``dst`` take the
    values of ``src``'s internal nodes by preorder position, leaves those of ``src``'s leaves
    left to right. ``index`` (2, >= nodes) is scratch."""
    ni = 0
    nl = 0
    ints = index[0]
    leaves = index[1]
    for j in range(src.nn[0]):
        if src.right[j] >= 0:
            ints[ni] = j
            ni += 1
        else:
            leaves[nl] = j
            nl += 1
    a = 0
    b = 0
    for j in range(dst.nn[0]):
        if dst.right[j] >= 0:
            k = ints[a]
            a += 1
            dst.tau[j] = src.tau[k]
            dst.kappa[j] = src.kappa[k]
            for d in range(src.delta.shape[1]):
                dst.delta[j, d] = src.delta[k, d]
        else:
            k = leaves[b]
            b += 1
            dst.mu[j] = src.mu[k]


@helper
def state_energy(s, h, conf, data, sc):
    """(U, log lik, log prior) of state ``s`` at bandwidth h (``conf`` a ``SoftConf``, ``sc`` an
    ``RJScratch``: q and gradient in ``sc.bufs[4]``, ``sc.bufs[5]``)."""
    regression = conf.n_classes == 0
    off, work = sc.off, sc.work
    dim = layout(s.right, s.nn[0], conf.nx, conf.mode, regression, off)
    q = sc.bufs[4, :dim]
    pack(s.right, s.nn[0], conf, off, s.tau, s.delta, s.mu, s.scal[0], q)
    old = work.h[0]
    work.h[0] = h
    tgt = SoftTarget(data, s.right, s.kappa, s.nn, off, conf, work)
    u = nuts.energy(q, sc.bufs[5, :dim], tgt, False)
    work.h[0] = old
    return u, work.parts[0], work.parts[1]


@helper
def nuts_on(s, settings, data, sc, rng, init_step):
    """One intermediate NUTS run on state ``s``, in place (spec 2.1, step 2): ``settings.nuts.warmup``
    adaptive transitions with the h ramp, then one transition kept. The faithful mode restarts
    the adaptation (eps 1, identity metric); the cheap mode starts from the values carried by node."""
    conf, ns = settings.conf, settings.nuts
    off, bufs, work = sc.off, sc.bufs, sc.work
    regression = conf.n_classes == 0
    nx = conf.nx
    mode = conf.mode
    n = s.nn[0]
    dim = layout(s.right, n, nx, mode, regression, off)
    q = bufs[0, :dim]
    g = bufs[1, :dim]
    minv = bufs[2, :dim]
    out = sc.kept[:, :dim]  # soft_settings: n_after = 1, the transition kept
    pack(s.right, n, conf, off, s.tau, s.delta, s.mu, s.scal[0], q)
    carry = settings.rj.carry
    per_int = 1 + (nx - 1 if mode == MODE_DFI else 0)
    for j in range(n):
        o = off[j]
        m = per_int if s.right[j] >= 0 else (1 if regression else 0)
        for d in range(m):
            minv[o + d] = s.minv[j, d] if carry else 1.0
    if regression:
        minv[dim - 1] = s.scal[1] if carry else 1.0
    eps0 = s.scal[2] if carry else 1.0
    work.h[0] = ns.h_init if ns.warmup > 0 else ns.h_final
    tgt = SoftTarget(data, s.right, s.kappa, s.nn, off, conf, work)
    u = sc.u
    u[0] = nuts.energy(q, g, tgt, True)
    eps = nuts.run((q, g, u), eps0, minv, ns, tgt, sc.nuts, out, rng, sc.rs, init_step)
    for a in range(dim):
        q[a] = out[ns.n_after - 1, a]
    sigma, _ = unpack(q, s.right, s.kappa, off, n, conf, s.tau, s.delta, s.mu)
    s.scal[0] = sigma
    s.scal[2] = eps
    for j in range(n):
        o = off[j]
        m = per_int if s.right[j] >= 0 else (1 if regression else 0)
        for d in range(m):
            s.minv[j, d] = minv[o + d]
    if regression:
        s.scal[1] = minv[dim - 1]


@helper
def _propose(cur, prop, move, p_g, settings, rng):
    """Build T* in ``prop`` (a copy of ``cur`` holding x') for ``move`` (never a prune of a stump:
    ``iteration`` makes that a grow); return log q ratio + log rv ratio. Spec 2.3."""
    conf = settings.conf
    copy_state(cur, prop)
    quirks = settings.rj.code_quirks
    regression = conf.n_classes == 0
    b = count_leaves(cur)
    if move == MOVE_STAY:
        return 0.0
    if move == MOVE_GROW:
        target = min(int(rng.random() * b), b - 1)
        i = -1
        c = -1
        for j in range(cur.nn[0]):
            if cur.right[j] < 0:
                c += 1
                if c == target:
                    i = j
                    break
        grow_at(prop, i)
        _draw_split(prop, i, conf, rng)
        log_rv = -_log_split_prior(prop, i, conf)
        if regression:
            prop.mu[i + 2] = conf.mu_mean + conf.mu_scale * rng.standard_normal()
            log_rv -= _log_mu_prior(prop.mu[i + 2], conf)
        pg_eff = 1.0 if b == 1 else p_g
        log_q = math.log(1.0 - p_g) - math.log(count_nog(prop)) + math.log(b) - math.log(pg_eff)
        return log_q + log_rv
    n_nog = count_nog(cur)
    target = min(int(rng.random() * n_nog), n_nog - 1)
    i = -1
    c = -1
    for j in range(cur.nn[0]):
        r = cur.right[j]
        if r >= 0 and cur.right[j + 1] < 0 and cur.right[r] < 0:
            c += 1
            if c == target:
                i = j
                break
    log_rv = _log_split_prior(cur, i, conf)
    if regression:
        log_rv += _log_mu_prior(cur.mu[i + 2], conf)
    prune_at(prop, i)
    pg_rev = p_g if (quirks or b - 1 > 1) else 1.0
    log_q = math.log(pg_rev) - math.log(b - 1) - math.log(1.0 - p_g) + math.log(n_nog)
    return log_q + log_rv


def new_scratch(cap: int, n: int, nx: int, n_classes: int, ns) -> RJScratch:
    """Scratch of ``iteration`` for trees of at most ``cap`` nodes on ``n`` rows of ``nx``
    predictors (``n_classes`` 0: regression), with the NUTS settings ``ns`` (a ``NutsSettings``).

    Parameters
    ----------
    cap, n, nx, n_classes : int
        Node capacity, rows, predictors and classes (0: regression).
    ns : NutsSettings
        NUTS's settings (maximum depth, kept transitions per run, final bandwidth).

    Returns
    -------
    RJScratch
    """
    dim = cap * nx + 1
    return RJScratch(np.zeros(cap, dtype=np.int64), np.zeros((6, dim)), new_work(n, cap, nx, n_classes, ns.h_final),
                     nuts.new_scratch(dim, ns.max_depth), np.zeros(nuts.N_RUN_STATS), np.zeros(1),
                     np.zeros((ns.n_after, dim)), np.zeros((2, cap), dtype=np.int64))


@kernel
def iteration(states, sc, settings, data, rng, warm, start, record, init_step):
    """One RJHMC-Tree iteration (``_iteration``), called from Python.

    The kernel only hands its records to a helper: a kernel counts references, which for records
    of arrays means a reference-count call per array each time a record or a field of one is
    taken apart, most of the kernel's code; the helpers below it borrow and allocate nothing.
    """
    return _iteration(states, sc, settings, data, rng, warm, start, record, init_step)


@helper
def _iteration(states, sc, settings, data, rng, warm, start, record, init_step):
    """One RJHMC-Tree iteration (spec 2.1) from state ``states.cur`` = (T, x), in place.

    ``states`` (an ``RJStates``) also holds the scratch states ``x1``, ``prop``, ``xs`` (x',
    (T*, x''), the x values before the code's prune rv) and ``it``, which receives the move,
    acceptance, log alpha and the NUTS statistics of both runs, and with ``record`` the log
    likelihood, log prior and log p(T) of the state the iteration leaves. ``sc`` is an
    ``RJScratch``, ``settings`` a ``SoftSettings``, ``data`` a ``SoftData``. ``warm`` selects the
    warm-up move probabilities and eq. 19. ``init_step`` as in ``nuts.run``.

    After tune, in the cheap mode (``settings.rj.carry``), a stay runs NUTS once (x' is kept: eq. 18
    accepts every stay there, so the second run is only a further NUTS kernel on the same target).

    With ``start``, instead, the chain's first NUTS run on ``cur`` (spec 2.5) and nothing else.
    The one kernel serves both (and the energies) so that the NUTS code is optimised and turned
    into machine code once, not once per kernel that calls it (issue 11, section 1).
    """
    cur, x1, prop, xs = states.cur, states.x1, states.prop, states.xs
    conf, rj = settings.conf, settings.rj
    rs = sc.rs
    for k in range(rs.shape[0]):
        rs[k] = 0.0
    if start:
        nuts_on(cur, settings, data, sc, rng, init_step)
        return 0.0
    if warm:
        pg, pp = rj.p_grow_warm, rj.p_prune_warm
    else:
        pg, pp = rj.p_grow, rj.p_prune
    u = rng.random()
    move = MOVE_STAY
    if u < pg + pp:
        move = MOVE_GROW if rng.random() < pg / (pg + pp) else MOVE_PRUNE
        if move == MOVE_PRUNE and count_leaves(cur) == 1:
            move = MOVE_GROW  # a stump can only grow (spec 2.1)
    p_g = pg / (pg + pp) if pg + pp > 0.0 else 0.5
    h_f = settings.nuts.h_final
    alpha_s, beta_s = rj.alpha_s, rj.beta_s
    # S_m(x) and P(T) before the first run (eq. 19 needs them; the code's prune rv reads x)
    u_x, ll_x, lp_x = state_energy(cur, h_f, conf, data, sc)
    lik = 1.0 if conf.lik else 0.0
    s_x = lik * ll_x + lp_x
    log_pt = log_tree_prior(cur, alpha_s, beta_s)
    # first NUTS run on T: x -> x'
    copy_state(cur, x1)
    nuts_on(x1, settings, data, sc, rng, init_step)
    if move == MOVE_STAY and not warm and rj.carry:
        # After tune a stay is always accepted (eq. 18 telescopes to S_m(x') - S_m(x') = 0, spec
        # 2.4), so the code's second run on the same T is one more NUTS transition kernel on the
        # same target: the cheap mode keeps x' and skips it (a third of the post-tune NUTS work
        # at the default .2/.2/.6 moves). The faithful mode (restart) runs it, as the code.
        copy_state(x1, cur)
        _finish(states, rs, MOVE_STAY, True, 0.0, record, settings, data, sc)
        return u_x
    _, ll1, lp1 = state_energy(x1, h_f, conf, data, sc)
    s_x1 = lik * ll1 + lp1
    # T* and x'' (warm start: survivors keep x' values by node; new coordinates from the prior)
    if rj.code_quirks and move == MOVE_PRUNE:
        ratio = _propose(cur, xs, move, p_g, settings, rng)  # the code's rv at x
        copy_state(xs, prop)
        _positional_copy(x1, prop, sc.index)
        prop.scal[0] = x1.scal[0]
    else:
        ratio = _propose(x1, prop, move, p_g, settings, rng)
    log_pt_new = log_tree_prior(prop, alpha_s, beta_s)
    _, ll2, lp2 = state_energy(prop, h_f, conf, data, sc)
    s_x2 = lik * ll2 + lp2
    # second NUTS run on T*: x'' -> x*
    nuts_on(prop, settings, data, sc, rng, init_step)
    if warm:
        _, ll3, lp3 = state_energy(prop, h_f, conf, data, sc)
        log_alpha = lik * ll3 + lp3 + log_pt_new - s_x - log_pt + ratio  # eq. 19
    else:
        log_alpha = s_x2 - s_x1 + log_pt_new - log_pt + ratio  # eq. 18, telescoped (spec 2.4)
    accepted = math.log(rng.random()) < log_alpha
    if accepted:
        copy_state(prop, cur)
    elif rj.keep_first:
        copy_state(x1, cur)
    elif rj.carry:
        cur.scal[1] = x1.scal[1]
        cur.scal[2] = x1.scal[2]
        for j in range(cur.nn[0]):
            for d in range(cur.minv.shape[1]):
                cur.minv[j, d] = x1.minv[j, d]
    _finish(states, rs, move, accepted, log_alpha, record, settings, data, sc)
    return u_x


@helper(inline=True)
def _finish(states, rs, move, accepted, log_alpha, record, settings, data, sc):
    """Fill the iteration's statistics ``states.it`` (and with ``record`` the energies of the state
    left, ``states.cur``)."""
    cur, it = states.cur, states.it
    it[I_MOVE] = move
    it[I_ACCEPTED] = 1.0 if accepted else 0.0
    it[I_LOG_ALPHA] = log_alpha
    it[I_EPS] = cur.scal[2]
    it[I_DEPTH_SUM] = rs[nuts.R_DEPTH]
    it[I_TRANSITIONS] = rs[nuts.R_TRANSITIONS]
    it[I_LEAPFROG] = rs[nuts.R_LEAPFROG]
    it[I_DIVERGENT] = rs[nuts.R_DIVERGENT]
    it[I_ACCEPT_STAT] = rs[nuts.R_ACCEPT]
    if record:
        _, it[I_LOG_LIK], it[I_LOG_PRIOR] = state_energy(cur, settings.nuts.h_final, settings.conf, data, sc)
        it[I_LOG_TREE_PRIOR] = log_tree_prior(cur, settings.rj.alpha_s, settings.rj.beta_s)
