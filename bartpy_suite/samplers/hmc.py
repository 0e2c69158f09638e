"""RJHMC-Tree samplers of soft decision trees: ``hmc_df`` (a split variable per node, updated
by Metropolis-within-Gibbs, and a soft threshold) and ``hmc_dfi`` (a split direction on the
simplex and a threshold). Each iteration is the reversible-jump transition of
``_kernels.rjhmc`` (paper Alg. 1) with NUTS (``_kernels.nuts``) on the continuous parameters.

Two ways to run the intermediate NUTS runs: ``adaptation="restart"`` with ``warmup=500`` is
the authors' code (every run re-adapts from eps = 1 and an identity metric: about 1,000 NUTS
transitions per iteration); the default ``adaptation="carry"`` with ``warmup=20`` carries the
step size and the inverse metric across iterations by node, runs a 25th of the warm-up and, after
tune, skips the second run of a stay move (always accepted there: ``_kernels.rjhmc.iteration``).

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and this package's modules.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._kernels import nuts, rjhmc
from .._kernels import soft_tree as st
from .._kernels.kept import kept_draw
from .._kernels.record import grow_store, new_store, trim_store
from .._kernels.soft_records import (
    KIND_SOFT_TREE,
    RJSettings,
    RJStates,
    SoftConf,
    SoftData,
    SoftSettings,
    new_state,
)
from .._validation import check_choice, check_int_at_least, check_moves, check_open_unit
from ..errors import ArgumentError
from .draws import ChainDraws
from .problems import SoftTreeProblem
from .registry import Option, SamplerSpec, Statistic, register

MOVE_NAMES = ("grow", "prune", "stay")
FIRST_CAPACITY = 31


def _int_option(low):
    # partials of module-level functions (not closures), so that models holding the spec pickle
    return functools.partial(_int_at_least, low=low)


def _int_at_least(name, value, low):
    return check_int_at_least(name, value, low)


def _bool_option(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"sampler option {name!r} must be True or False; got {value!r}")
    return bool(value)


def _choice_option(options):
    return functools.partial(_one_of, options=options)


def _one_of(name, value, options):
    return check_choice(name, value, options)


def _moves_option(name, value):
    out = check_moves(value, {"grow": 1.0, "prune": 1.0, "stay": 1.0}, paired=[("grow", "prune")],
                      required=["grow"], name=name)
    return out


OPTIONS = (
    Option("warmup", 20, _int_option(0),
           "NUTS warm-up transitions of each intermediate run (default 20; the authors' code: 500)"),
    Option("adaptation", "carry", _choice_option(("carry", "restart")),
           "'carry' (default): step size and inverse metric carried across iterations by node, and one NUTS run "
           "for a stay after tune; 'restart': "
           "every intermediate run adapts from eps = 1 and an identity metric, as the authors' code"),
    Option("max_tree_depth", 10, _int_option(1), "NUTS maximum tree depth (default 10: 1,023 leapfrog steps)"),
    Option("target_accept", 0.8, check_open_unit, "dual-averaging target acceptance statistic (default 0.8)"),
    Option("init_stepsize", False, _bool_option,
           "Stan's step-size doubling/halving heuristic at the start of each run and after each window"),
    Option("h_schedule", "recommended", _choice_option(("recommended", "code")),
           "h annealing during warm-up: 'recommended' (reaches h_final) or 'code' (the authors' version, "
           "ends 1/274 of the range below h_final; spec 3)"),
    Option("code_quirks", False, _bool_option,
           "reproduce the authors' code: positional warm start after a prune, the prune's rv ratio at x rather "
           "than x', and p_grow as the reverse probability of a prune to a stump (spec 2.3)"),
    Option("keep_first_run", False, _bool_option,
           "on rejection keep x' (the first NUTS run's state) instead of returning to x as the code does"),
    Option("moves_tune", {"grow": 0.5, "prune": 0.25, "stay": 0.25}, _moves_option,
           "move probabilities during tune (default .5/.25/.25, the code's)"),
    Option("moves", {"grow": 0.2, "prune": 0.2, "stay": 0.6}, _moves_option,
           "move probabilities after tune (default .2/.2/.6, the code's)"),
)

STATISTICS = (
    Statistic("move", (), "move tried at the kept iteration (index into the move coordinate)"),
    Statistic("accepted", (), "1 if that move was accepted"),
    Statistic("log_alpha", (), "log acceptance ratio of the move (eq. 18 after tune, eq. 19 during it)"),
    Statistic("step_size", (), "NUTS step size after the iteration's last run"),
    Statistic("tree_depth", (), "mean NUTS tree depth over the iteration's transitions"),
    Statistic("n_leapfrog", (), "leapfrog steps of the iteration's two NUTS runs"),
    Statistic("diverging", (), "divergent NUTS transitions in the iteration"),
    Statistic("acceptance_rate", (), "mean NUTS adaptation statistic over the iteration's transitions"),
    Statistic("accepted_total", (), "RJ moves accepted since the chain's start, tune included (the paper's "
              "acceptance rate is the last value / (tune + iterations after tune))"),
)


def soft_settings(problem: SoftTreeProblem, options: dict, mode: int) -> SoftSettings:
    """The kernels' settings of a chain: the density (``SoftConf``, from the model's prior vector
    ``problem.conf``, whose slots are ``st.C_*``), the moves (``RJSettings``) and NUTS
    (``NutsSettings``: one run is ``warmup`` adaptive transitions, then one kept), typed and immutable.

    Parameters
    ----------
    problem : SoftTreeProblem
        The model's problem (predictors, response, prior settings, tree prior, bandwidths).
    options : dict
        The validated sampler options (``OPTIONS``).
    mode : int
        ``st.MODE_DF`` (``hmc_df``) or ``st.MODE_DFI`` (``hmc_dfi``).

    Returns
    -------
    SoftSettings
    """
    v = np.asarray(problem.conf, dtype=np.float64)
    conf = SoftConf(mode=int(mode), nx=int(np.shape(problem.x)[1]), n_classes=int(problem.n_classes),
                    lik=bool(v[st.C_LIK] != 0.0), mu_mean=float(v[st.C_MU_MEAN]), mu_scale=float(v[st.C_MU_SCALE]),
                    sig_a=float(v[st.C_SIG_A]), sig_b=float(v[st.C_SIG_B]),
                    class_alpha=float(v[st.C_CLASS_ALPHA]), class_const=bool(v[st.C_CLASS_CONST] != 0.0),
                    kind=KIND_SOFT_TREE)
    tune_moves, moves = options["moves_tune"], options["moves"]
    rj = RJSettings(p_grow_warm=float(tune_moves["grow"]), p_prune_warm=float(tune_moves["prune"]),
                    p_grow=float(moves["grow"]), p_prune=float(moves["prune"]), alpha_s=float(problem.alpha_s),
                    beta_s=float(problem.beta_s), carry=options["adaptation"] == "carry",
                    code_quirks=bool(options["code_quirks"]), keep_first=bool(options["keep_first_run"]))
    ns = nuts.settings(options["warmup"], 1, problem.h_init, problem.h_final,
                       target_accept=options["target_accept"], max_tree_depth=options["max_tree_depth"],
                       code_schedule=options["h_schedule"] == "code")
    return SoftSettings(conf, rj, ns)


class SoftTreeChain:
    """One RJHMC-Tree chain: the soft tree, the NUTS scratch and the draw buffers."""

    def __init__(self, problem: SoftTreeProblem, options: dict, rng: np.random.Generator, mode: int):
        self.x = np.ascontiguousarray(problem.x, dtype=np.float64)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.ycls = np.ascontiguousarray(problem.ycls, dtype=np.int64)
        self.n_classes = int(problem.n_classes)
        self.rng = rng
        self.n, self.nx = self.x.shape
        self.data = SoftData(self.x, self.y, self.ycls)
        self.settings = soft_settings(problem, options, mode)
        self.conf = self.settings.conf
        self.mode = mode
        self.max_depth = self.settings.nuts.max_depth
        self.init_step = True if options["init_stepsize"] else None  # None: not compiled (nuts.run)
        self.it = np.zeros(rjhmc.N_IT)
        self._allocate_state(FIRST_CAPACITY)
        # the code's start (spec 2.5): a stump at U(-2, 2) on the unconstrained scale, then one NUTS run
        s = self.cur
        s.mu[0] = rng.uniform(-2.0, 2.0)
        s.scal[0] = math.exp(rng.uniform(-2.0, 2.0))
        self.started = False
        self.n_accepted = 0

    def _allocate_state(self, cap: int) -> None:
        old = getattr(self, "cur", None)
        self.cap = cap
        self.cur = new_state(cap, self.nx)
        if old is not None:
            rjhmc.copy_state(old, self.cur)
        self.x1 = new_state(cap, self.nx)
        self.prop = new_state(cap, self.nx)
        self.xs = new_state(cap, self.nx)
        self.states = RJStates(self.cur, self.x1, self.prop, self.xs, self.it)
        self.scratch = rjhmc.new_scratch(cap, self.n, self.nx, self.n_classes, self.settings.nuts)
        self.work = self.scratch.work

    # -- the chain protocol ------------------------------------------------------------------
    def allocate(self, draws: int) -> None:
        self.post = {"sigma": np.full(draws, np.nan), "n_leaves": np.zeros(draws, dtype=np.int64),
                     "depth": np.zeros(draws, dtype=np.int64), "log_posterior": np.zeros(draws)}
        self.stats = {"move": np.zeros(draws, dtype=np.int8), "accepted": np.zeros(draws, dtype=np.int8),
                      "log_alpha": np.zeros(draws), "step_size": np.zeros(draws), "tree_depth": np.zeros(draws),
                      "n_leapfrog": np.zeros(draws, dtype=np.int64), "diverging": np.zeros(draws, dtype=np.int64),
                      "acceptance_rate": np.zeros(draws), "accepted_total": np.zeros(draws, dtype=np.int64)}
        k = self.n_classes
        self.store = new_store(draws, 1, 16 * min(draws, 4096), n_classes=k)
        self.soft_store = new_store(draws, 1, 16 * min(draws, 4096), n_classes=self.nx)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        if not self.started:
            self._iteration(False, start=True, record=False)
            self.started = True
        for it in range(first_iter, first_iter + n_iter):
            if int(self.cur.nn[0]) + 2 > self.cap:
                self._allocate_state(2 * self.cap + 1)
            # the kernels' rule, run as plain Python (the helper's twin would compile in every process)
            d = kept_draw.py_func(it, tune, thin, self.post["n_leaves"].shape[0])
            record = d >= 0
            self._iteration(it < tune, start=False, record=record)
            self.n_accepted += int(self.it[rjhmc.I_ACCEPTED])
            if record:
                self._record(d)

    def _iteration(self, warm: bool, *, start: bool, record: bool) -> None:
        rjhmc.iteration(self.states, self.scratch, self.settings, self.data, self.rng, warm, start, record,
                        self.init_step)

    def _record(self, d: int) -> None:
        s = self.cur
        n = int(s.nn[0])
        right = s.right[:n]
        leaves = right < 0
        self.post["n_leaves"][d] = int(leaves.sum())
        self.post["depth"][d] = int(s.depth[:n].max())
        it = self.it
        lik = 1.0 if self.conf.lik else 0.0
        self.post["log_posterior"][d] = lik * it[rjhmc.I_LOG_LIK] + it[rjhmc.I_LOG_PRIOR] + it[rjhmc.I_LOG_TREE_PRIOR]
        if self.n_classes == 0:
            self.post["sigma"][d] = s.scal[0]
        self.stats["move"][d] = int(it[rjhmc.I_MOVE])
        self.stats["accepted"][d] = int(it[rjhmc.I_ACCEPTED])
        self.stats["log_alpha"][d] = it[rjhmc.I_LOG_ALPHA]
        self.stats["step_size"][d] = it[rjhmc.I_EPS]
        self.stats["tree_depth"][d] = it[rjhmc.I_DEPTH_SUM] / max(it[rjhmc.I_TRANSITIONS], 1.0)
        self.stats["n_leapfrog"][d] = int(it[rjhmc.I_LEAPFROG])
        self.stats["diverging"][d] = int(it[rjhmc.I_DIVERGENT])
        self.stats["acceptance_rate"][d] = it[rjhmc.I_ACCEPT_STAT] / max(it[rjhmc.I_TRANSITIONS], 1.0)
        self.stats["accepted_total"][d] = self.n_accepted
        self.store = grow_store(self.store, n, d)
        self.soft_store = grow_store(self.soft_store, n, d)
        f = int(self.store.fill[0])
        delta = s.delta[:n]
        var = np.where(leaves, -1, np.argmax(delta, axis=1) if self.mode == st.MODE_DFI else s.kappa[:n])
        for store in (self.store, self.soft_store):
            store.var[f:f + n] = var
            store.cut[f:f + n] = 0
            store.tree_nodes[d, 0] = n
            store.fill[0] = f + n
        self.store.value[f:f + n] = np.where(leaves, s.mu[:n], np.nan)
        self.soft_store.value[f:f + n] = np.where(leaves, np.nan, s.tau[:n])
        self.soft_store.prob[f:f + n] = np.where(leaves[:, None], np.nan, delta)
        if self.n_classes:
            self.store.prob[f:f + n] = self._leaf_class_draws(n, leaves)

    def _leaf_class_draws(self, n: int, leaves: np.ndarray) -> np.ndarray:
        """A draw of each leaf's class probabilities given its soft class counts: Dirichlet(C_k + alpha)."""
        s = self.cur
        w = self.work
        phi = np.empty((self.n, int(leaves.sum())))
        st.leaf_probabilities(self.x, s, self.settings.nuts.h_final, self.mode, w, phi)
        counts = np.zeros((phi.shape[1], self.n_classes))
        for m in range(self.n_classes):
            counts[:, m] = phi[self.ycls == m].sum(axis=0)
        out = np.full((n, self.n_classes), np.nan)
        alpha = self.conf.class_alpha if self.conf.lik else 0.0
        out[leaves] = self.rng.dirichlet(np.ones(self.n_classes), size=phi.shape[1]) if not self.conf.lik \
            else np.vstack([self.rng.dirichlet(c + alpha) for c in counts])
        return out

    def collect(self, kept: int) -> ChainDraws:
        post = {k: v[:kept].copy() for k, v in self.post.items()}
        stats = {k: v[:kept].copy() for k, v in self.stats.items()}
        out = ChainDraws(post, stats, trim_store(self.store, kept),
                         extra_stores={"soft_trees": ("tree", trim_store(self.soft_store, kept))})
        self.store = self.soft_store = None
        return out


def _build_chain(problem, options, rng, mode: int):
    return SoftTreeChain(problem, options, rng, mode)


def _builder(mode: int):
    return functools.partial(_build_chain, mode=mode)


HMC_DF = register(SamplerSpec(
    "hmc_df", "hmc", "RJHMC-Tree with per-node split variables (MH within Gibbs) and NUTS on thresholds and leaves",
    builders={"soft_tree": _builder(st.MODE_DF)}, options=OPTIONS, statistics={"soft_tree": STATISTICS},
    coords={"move": MOVE_NAMES},
))
HMC_DFI = register(SamplerSpec(
    "hmc_dfi", "hmc", "RJHMC-Tree with split directions on the simplex; NUTS on directions, thresholds and leaves",
    builders={"soft_tree": _builder(st.MODE_DFI)}, options=OPTIONS, statistics={"soft_tree": STATISTICS},
    coords={"move": MOVE_NAMES},
))
