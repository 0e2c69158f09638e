"""Chains over several forests in one backfitting sweep (issue 30, "Engine"): the Bayesian causal
forest chain (``_kernels/multi_forest.py``), a mu forest and a tau forest of basis leaves
(``_kernels/basis.py``) against one residual.

The samplers that run inside BART update either forest (``_kernels/multi_forest_update.py``): the MH
samplers ``grow_prune`` and ``cgm`` (one move per tree), ``pg`` (a conditional SMC update of each tree,
PG-BART Algorithm 2) and ``ctmc`` (the birth-death process run for a fixed time per tree), each with its
registered options (``samplers/particle.py``, ``samplers/ctmc.py``). One sampler may serve both forests or
each forest its own (``{"mu": "pg", "tau": "grow_prune"}``). Other samplers are refused by
``check_multi_forest_sampler`` with the names of those that work and why.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import N_ACC, SIGMA_SAMPLED, BackfitState, record_forest_now
from .._kernels.ctmc import MAX_FACTOR_LEVELS, FactorLevelsError, new_ctmc_state
from .._kernels.likelihood import MODEL_BASIS_NORMAL
from .._kernels.multi_forest import N_PARAMS, CausalState, ForestPart, run_causal_chain
from .._kernels.multi_forest_update import (
    N_UPDATE_STATS,
    UPDATE_CTMC,
    UPDATE_MH,
    UPDATE_PG,
    CtmcUpdate,
    PgUpdate,
    update_tag,
)
from .._kernels.particle import RESAMPLING_NAMES
from .._kernels.record import grow_store, new_store, nodes_of_trees, trim_store
from .._kernels.records import (
    CtmcClock,
    Data,
    ForestOut,
    Moves,
    ParticleSystems,
    PgSettings,
    Prior,
    make_basis_target,
    make_window,
)
from ..errors import ArgumentError
from .ctmc import CTMC, event_rates
from .forest import BART_MAX_NODES, INITIAL_NODES_PER_TREE, new_forest
from .mh import CGM_MOVES, GROW_PRUNE_MOVES, move_flags, move_vector
from .particle import PG, new_particles, new_work

#: The MH samplers a multi-forest chain runs, with their default move mixes.
MULTI_FOREST_SAMPLERS = {"grow_prune": GROW_PRUNE_MOVES, "cgm": CGM_MOVES}
#: Every sampler that updates a forest of a multi-forest chain, and its ``multi_forest_update`` code.
FOREST_SAMPLERS = {"grow_prune": UPDATE_MH, "cgm": UPDATE_MH, "pg": UPDATE_PG, "ctmc": UPDATE_CTMC}
#: The forests of the BCF chain, in sweep order.
FORESTS = ("mu", "tau")
#: Why a sampler of BART does not run a forest of a multi-forest chain (yet).
REFUSED = {
    "tempered": "its ladder tempers one forest's likelihood with sigma alone; tempering a BCF chain needs a "
                "ladder of whole BCF chains whose coding, scale and sigma^2 updates are tempered too, which is "
                "not built",
}
#: Names of the kept scalar parameters, the columns of ``out_params``.
PARAM_NAMES = ("sigma", "b0", "b1", "mu_scale", "delta_mu")
#: Names of the per-draw statistics of a forest's sampler, by ``multi_forest_update`` code.
UPDATE_STATS = {UPDATE_PG: ("ess", "kept_reference", "stages"), UPDATE_CTMC: ("jumps", "total_rate", "time")}


def forest_samplers(sampler) -> dict:
    """``{"mu": name, "tau": name}`` from ``sampler``: one name for both forests or a dict by forest.

    Raises
    ------
    ArgumentError
        A sampler that cannot update these forests, naming the ones that can (and why it cannot), or a
        dict whose keys are not the forests.
    """
    if isinstance(sampler, Mapping):
        keys = set(sampler)
        if keys != set(FORESTS):
            raise ArgumentError(f"sampler by forest must name each of {', '.join(map(repr, FORESTS))} once (got "
                                f"{sorted(map(str, keys))}); or give one sampler name for both forests")
        names = {k: sampler[k] for k in FORESTS}
    else:
        names = dict.fromkeys(FORESTS, sampler)
    for forest, name in names.items():
        if not isinstance(name, str) or name not in FOREST_SAMPLERS:
            why = f" ({REFUSED[name]})" if isinstance(name, str) and name in REFUSED else ""
            where = f" for the {forest} forest" if isinstance(sampler, Mapping) else ""
            raise ArgumentError(
                f"sampler {name!r}{where} cannot run a model of several forests (bcf) yet{why}; samplers that can: "
                f"{', '.join(repr(s) for s in FOREST_SAMPLERS)}"
            )
    return names


def check_multi_forest_sampler(sampler, moves: dict | None = None) -> dict:
    """The move mix of the MH sampler(s) in ``sampler`` (``moves`` overrides the default mix); an empty
    dict when no forest runs an MH sampler.

    ``sampler`` is one name for both forests or ``{"mu": name, "tau": name}`` (``forest_samplers``).

    Raises
    ------
    ArgumentError
        A sampler that cannot update these forests, naming the ones that can; two different MH samplers
        (the forests share one move mix); ``moves`` without an MH sampler or with a move its sampler lacks.
    """
    names = forest_samplers(sampler)
    mh = sorted({n for n in names.values() if n in MULTI_FOREST_SAMPLERS})
    if not mh:
        if moves is not None:
            raise ArgumentError(f"moves set the move mix of the MH samplers ({', '.join(MULTI_FOREST_SAMPLERS)}); "
                                f"sampler {sampler!r} has none: leave moves out")
        return {}
    if len(mh) > 1:
        raise ArgumentError(f"the forests' MH samplers share one move mix: give both forests the same one (got "
                            f"{sampler!r}), or one of them and moves= for the mix")
    name = mh[0]
    mix = dict(MULTI_FOREST_SAMPLERS[name] if moves is None else moves)
    allowed = set(MULTI_FOREST_SAMPLERS[name])
    extra = sorted(k for k, v in mix.items() if k not in allowed and v)
    if extra:
        raise ArgumentError(f"sampler {name!r} has no {', '.join(map(repr, extra))} move for bcf: use "
                            f"{sorted(allowed)}")
    total = sum(float(v) for v in mix.values())
    if not total > 0 or any(float(v) < 0 for v in mix.values()):
        raise ArgumentError(f"moves must be non-negative with a positive sum (got {mix})")
    return {k: float(v) / total for k, v in mix.items()}


def check_forest_options(sampler, options: Mapping | None = None) -> dict:
    """``{"mu": options, "tau": options}``: each forest's sampler options (``pg``: ``particles``,
    ``resampling``, ``ancestor_sampling``, ``ess_threshold``; ``ctmc``: ``time``, ``rotate``, ``perturb``),
    checked by the sampler's registry entry and filled with its defaults; the MH samplers take none.

    ``options`` is one dict for every forest, or ``{"mu": {...}, "tau": {...}}`` (keys ``mu``/``tau`` only).

    Raises
    ------
    ArgumentError
        An unknown option or a bad value, naming it and the sampler; options for an MH sampler.
    """
    names = forest_samplers(sampler)
    if options is not None and not isinstance(options, Mapping):
        raise ArgumentError(f"sampler options must be a dict (got {type(options).__name__})")
    options = dict(options or {})
    per_forest = bool(options) and set(options) <= set(FORESTS)
    out = {}
    for forest in FORESTS:
        name = names[forest]
        if per_forest:
            given = options.get(forest) or {}
        else:  # one dict for the forests whose sampler takes options
            given = options if FOREST_SAMPLERS[name] != UPDATE_MH else {}
        if FOREST_SAMPLERS[name] == UPDATE_MH:
            if given:
                raise ArgumentError(f"sampler {name!r} ({forest} forest) takes no sampler options (its move mix is "
                                    f"moves=); got {sorted(given)}")
            out[forest] = {}
            continue
        spec = PG if name == "pg" else CTMC
        checked = spec.check_options(given)
        if name == "pg" and checked["ancestor_sampling"] and checked["ess_threshold"] < 1.0:
            raise ArgumentError("sampler options 'ancestor_sampling' and 'ess_threshold' < 1 do not combine (ancestor "
                                "sampling redraws the reference's ancestor at every resampling stage); set one of "
                                "them to its default")
        out[forest] = checked
    return out


@dataclass
class ForestSpec:
    """One forest of a multi-forest problem: its binned predictors, tree prior (a ``records.Prior``
    whose ``model`` is ``MODEL_BASIS_NORMAL``), number of trees, leaf prior variance (its start when a
    scale parameter moves it) and starting leaf value."""

    codes: np.ndarray  # int32[p, n]
    is_categorical: np.ndarray  # bool[p]
    nbins: np.ndarray  # int64[p]
    prior: Prior
    n_trees: int
    tau2: float
    start_value: float


@dataclass
class CausalProblem:
    """The standardised BCF problem (``_kernels/multi_forest.py``): the response, 0/1 treatment and
    weights, the two forests, the mu leaf variance at delta = 1 (``mu_scale2``) and sigma^2's start."""

    y: np.ndarray
    z: np.ndarray
    w: np.ndarray
    mu: ForestSpec
    tau: ForestSpec
    mu_scale2: float
    sigma2: float
    model: str = "bcf"


def _part(spec: ForestSpec, resid: np.ndarray, sigma2: np.ndarray, basis: np.ndarray, name: str = "mh",
          options: dict | None = None, forest_name: str = "mu"):
    """A ``ForestPart`` for ``spec`` on the shared residual and sigma^2 cell, its trees updated by the
    sampler ``name`` with ``options`` (``check_forest_options``); also its capacity."""
    codes = np.ascontiguousarray(spec.codes, dtype=np.int32)
    n = resid.shape[0]
    if spec.prior.model != MODEL_BASIS_NORMAL:
        raise ValueError("a multi-forest chain's forests have basis leaves (MODEL_BASIS_NORMAL)")
    capacity = min(_tree.node_capacity(n, spec.prior.min_leaf), BART_MAX_NODES)
    forest = new_forest(int(spec.n_trees), n, capacity)
    forest.value[:, 0] = spec.start_value
    nbins = np.asarray(spec.nbins, dtype=np.int64)
    is_cat = np.asarray(spec.is_categorical, dtype=np.bool_)
    scratch = _tree.new_scratch(codes, capacity, nbins, model=MODEL_BASIS_NORMAL)
    state = BackfitState(
        resid=resid, leaf_of=np.zeros((int(spec.n_trees), n), dtype=np.uint8),
        sums=np.zeros((2 * N_ACC, capacity)), z=np.zeros(0), ybin=np.zeros(0, dtype=np.int64),
        ycls=np.zeros(0, dtype=np.int64), target=make_basis_target(spec.prior, sigma2, spec.tau2, basis),
        fstate=np.zeros(2), sigma_mode=np.array([SIGMA_SAMPLED], dtype=np.int64),
        cursor=np.zeros(capacity, dtype=np.int64),
    )
    data = Data(codes, is_cat, nbins, resid, state.ycls)
    code = FOREST_SAMPLERS.get(name, UPDATE_MH)
    update = _new_update(code, options or {}, n, capacity, nbins, is_cat, forest_name)
    return ForestPart(forest, state, data, scratch, update_tag(code), update), capacity


def _new_update(code: int, options: dict, n: int, capacity: int, nbins: np.ndarray, is_cat: np.ndarray,
                forest_name: str):
    """The state of a forest's sampler (``multi_forest_update``; None for MH), before ``allocate`` gives it
    room for the kept draws."""
    if code == UPDATE_PG:
        count = int(options["particles"])
        particles = ParticleSystems(new_particles(count, n, capacity), new_particles(count, n, capacity),
                                    new_particles(1, n, capacity), new_work(count, capacity))
        # None, not False, without ancestor sampling: the kernels then compile none of it (samplers/particle.py)
        settings = PgSettings(RESAMPLING_NAMES.index(options["resampling"]),
                              True if options["ancestor_sampling"] else None, float(options["ess_threshold"]))
        return PgUpdate(particles, settings, np.zeros(N_UPDATE_STATS), np.zeros((0, N_UPDATE_STATS)))
    if code == UPDATE_CTMC:
        try:
            cs = new_ctmc_state(n, capacity, nbins, is_cat, 1)
        except FactorLevelsError as err:
            raise ArgumentError(
                f"sampler 'ctmc': predictor {err.predictor} of the {forest_name} forest is a factor with {err.levels} "
                f"levels, more than the {MAX_FACTOR_LEVELS} it supports (every birth "
                f"rate at a leaf walks the 2^(L-1) - 1 partitions of the L levels present there); use 'grow_prune', "
                f"'cgm' or 'pg' for that forest, or merge the factor's levels") from None
        adapt = options["time"] == "auto"
        # the starting time before adaptation, as samplers/ctmc.CtmcBartChain: adaptation replaces it
        clock = CtmcClock(np.array([1e-3 if adapt else float(options["time"])]), bool(adapt))
        return CtmcUpdate(cs, clock, event_rates(options["rotate"], options["perturb"]), np.zeros(N_UPDATE_STATS),
                          np.zeros((0, N_UPDATE_STATS)))
    return None


class CausalChain:
    """One BCF chain (the chain protocol of ``samplers/registry.Chain``: ``allocate``, ``run``,
    ``collect``).

    Parameters
    ----------
    problem : CausalProblem
    moves : dict
        Move probabilities by name of the MH sampler (``check_multi_forest_sampler``; unused when no
        forest runs one).
    rng : numpy.random.Generator
    sampler : str or dict
        The sampler of both forests (``grow_prune``, ``cgm``, ``pg``, ``ctmc``) or ``{"mu": name, "tau":
        name}``.
    options : dict, optional
        The forests' sampler options (``check_forest_options``; default: each sampler's defaults).

    Starts as bcf does (spec 3.6): mu leaves at ``mu.start_value``, tau leaves at
    ``tau.start_value`` (1 / M_tau: t = 1), b_0 = -1/2, b_1 = 1/2, s_m = 1, delta = 1.
    """

    def __init__(self, problem: CausalProblem, moves: dict, rng: np.random.Generator, sampler="grow_prune",
                 options: dict | None = None):
        self.rng = rng
        names = forest_samplers(sampler)
        forest_options = check_forest_options(sampler, options)
        y = np.ascontiguousarray(problem.y, dtype=np.float64)
        z = np.ascontiguousarray(problem.z, dtype=np.int64)
        w = np.ascontiguousarray(problem.w, dtype=np.float64)
        n = y.shape[0]
        # a chain without MH forests still hands the kernel a move record (unused; no change/swap compiled)
        self.move_probs = move_vector(moves or GROW_PRUNE_MOVES)
        sigma2 = np.array([float(problem.sigma2)])
        params = np.zeros(N_PARAMS)
        params[:] = (-0.5, 0.5, 1.0, 1.0)
        bz = np.where(z == 1, params[1], params[0])
        mfit = np.full(n, problem.mu.n_trees * problem.mu.start_value)
        tfit = np.full(n, problem.tau.n_trees * problem.tau.start_value)
        resid = np.ascontiguousarray(y - params[2] * mfit - bz * tfit)
        mu_basis = np.stack([np.full(n, params[2]), w * params[2], w * params[2] ** 2])
        tau_basis = np.stack([bz, w * bz, w * bz * bz])
        mu_tau2 = float(problem.mu_scale2) / params[3]
        self.mu, self.mu_capacity = _part(ForestSpec(**{**problem.mu.__dict__, "tau2": mu_tau2}), resid, sigma2,
                                          mu_basis, names["mu"], forest_options["mu"], "mu")
        self.tau, self.tau_capacity = _part(problem.tau, resid, sigma2, tau_basis, names["tau"],
                                            forest_options["tau"], "tau")
        self.causal = CausalState(y, z, w, mfit, tfit, params, float(problem.mu_scale2), 2.0)
        self.out = None

    @property
    def moves(self) -> Moves:
        """The move mix as the kernels' record."""
        return Moves(self.move_probs, *move_flags(self.move_probs))

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (scalars, move counts, both forests' sizes, stores and sampler
        statistics)."""
        self.out = {"params": np.full((draws, len(PARAM_NAMES)), np.nan),
                    "counts": np.zeros((draws, self.move_probs.shape[0], 2), dtype=np.int64)}
        for attr in ("mu", "tau"):
            part = getattr(self, attr)
            if part.update is not None:
                setattr(self, attr, part._replace(update=part.update._replace(out=np.zeros((draws, N_UPDATE_STATS)))))
        self.forest_out = []
        for part, cap in ((self.mu, self.mu_capacity), (self.tau, self.tau_capacity)):
            t = part.forest.var.shape[0]
            self.forest_out.append(ForestOut(np.zeros((draws, t), dtype=np.int32), np.zeros((draws, t), dtype=np.int32),
                                             new_store(draws, t, INITIAL_NODES_PER_TREE * t * min(draws, 256)),
                                             np.zeros(cap, dtype=np.int32), np.empty(cap, dtype=np.int32)))

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the stores grow on demand)."""
        done = 0
        while done < n_iter:
            steps, pending, which = run_causal_chain(
                self.rng, self.mu, self.tau, self.causal, self.moves,
                make_window(first_iter + done, n_iter - done, tune, thin),
                self.out["params"], self.out["counts"], self.forest_out[0], self.forest_out[1])
            done += steps
            if pending >= 0:
                for k in range(which, 2):
                    self._record_pending(k, pending)

    def _record_pending(self, k: int, d: int) -> None:
        part = (self.mu, self.tau)[k]
        out = self.forest_out[k]
        store = grow_store(out.store, nodes_of_trees(part.forest.meta[:, _tree.M_N_LEAVES]), d)
        out = self.forest_out[k] = out._replace(store=store)
        record_forest_now(part.forest, store, d, out.leaves, out.depth, out.nodes, out.order, part.scratch.stack)

    def sampler_stats(self, forest: str, kept: int) -> dict:
        """The first ``kept`` draws' statistics of the sampler of ``forest`` (``mu`` or ``tau``): for ``pg``
        ``ess``, ``kept_reference``, ``stages`` (means over the forest's trees, as for BART), for ``ctmc``
        ``jumps`` (mean per tree visit), ``total_rate`` (mean starting Lambda) and ``time`` (per visit);
        none for MH (its moves are in ``counts``)."""
        part = getattr(self, forest)
        code = len(part.kind)
        if code == UPDATE_MH:
            return {}
        return {name: part.update.out[:kept, k].copy() for k, name in enumerate(UPDATE_STATS[code])}

    def collect(self, kept: int) -> dict:
        """The first ``kept`` draws: ``params`` (draw, 5: ``PARAM_NAMES``), ``counts``, and per forest
        (``mu``, ``tau``) its ``n_leaves`` (draw, tree), trimmed ``store`` and ``sampler_stats``."""
        out = {"params": self.out["params"][:kept].copy(), "counts": self.out["counts"][:kept].copy()}
        for name, fo in zip(("mu", "tau"), self.forest_out):
            out[name] = {"n_leaves": fo.leaves[:kept].copy(), "depth": fo.depth[:kept].copy(),
                         "store": trim_store(fo.store, kept), "sampler_stats": self.sampler_stats(name, kept)}
        self.out = self.forest_out = None
        return out
