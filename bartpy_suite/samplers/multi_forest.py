"""Chains over several forests in one backfitting sweep (issue 30, "Engine"): the Bayesian causal
forest chain (``_kernels/multi_forest.py``), a mu forest and a tau forest of basis leaves
(``_kernels/basis.py``) against one residual.

The samplers that run inside BART update either forest (``_kernels/multi_forest_update.py``): the MH
samplers ``grow_prune`` and ``cgm`` (one move per tree), ``pg`` (a conditional SMC update of each tree,
PG-BART Algorithm 2) and ``ctmc`` (the birth-death process run for a fixed time per tree), each with its
registered options (``samplers/particle.py``, ``samplers/ctmc.py``). One sampler may serve both forests or
each forest its own (``{"mu": "pg", "tau": "grow_prune"}``). ``tempered`` runs a ladder of whole BCF chains
with swaps (``CausalChain.run``; options ``rungs``, ``temperatures``), each rung's forests updated by cgm's
MH moves. Other samplers (those of CART or soft trees only) are refused by ``check_multi_forest_sampler``
with the names of those that work.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import N_ACC, SIGMA_SAMPLED, BackfitState, record_forest_now
from .._kernels.causal_re import collect_re, new_causal_re, no_random_effects, with_draws
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
from .mh import CGM_MOVES, GROW_PRUNE_MOVES, move_flags, move_vector, perturb_table
from .particle import PG, new_particles, new_work
from .tempered import _check_rungs, _check_temperatures, default_temperatures

#: The samplers whose forest update is an MH move per tree, with their default move mixes (``tempered``:
#: the move mix within each rung, cgm's as for tempered BART).
MULTI_FOREST_SAMPLERS = {"grow_prune": GROW_PRUNE_MOVES, "cgm": CGM_MOVES, "tempered": CGM_MOVES}
#: Every sampler that updates a forest of a multi-forest chain, and its ``multi_forest_update`` code.
FOREST_SAMPLERS = {"grow_prune": UPDATE_MH, "cgm": UPDATE_MH, "pg": UPDATE_PG, "ctmc": UPDATE_CTMC,
                   "tempered": UPDATE_MH}
#: Samplers that run the whole chain (both forests and every other block) under their scheme: one name for
#: both forests only.
CHAIN_SAMPLERS = ("tempered",)
#: The forests of the BCF chain, in sweep order.
FORESTS = ("mu", "tau")
#: Rungs of a tempered BCF chain unless ``rungs`` or ``temperatures`` say otherwise: each rung costs a whole
#: BCF sweep (not tuned).
TEMPERED_RUNGS = 4
#: A hot rung's chain is never recorded: its tuning never ends.
NEVER_KEPT = 2 ** 62
#: Names of the kept scalar parameters, the columns of ``out_params``.
PARAM_NAMES = ("sigma", "b0", "b1", "mu_scale", "delta_mu")
#: Names of the per-draw statistics of a forest's sampler, by ``multi_forest_update`` code.
UPDATE_STATS = {UPDATE_PG: ("ess", "kept_reference", "stages"), UPDATE_CTMC: ("jumps", "total_rate", "time")}


def forest_samplers(sampler) -> dict:
    """``{"mu": name, "tau": name}`` from ``sampler``: one name for both forests or a dict by forest.

    Raises
    ------
    ArgumentError
        A sampler that cannot update these forests, naming the ones that can; a dict whose keys are not the
        forests, or that gives a whole-chain sampler (``tempered``) to one forest.
    """
    if isinstance(sampler, Mapping):
        chained = [k for k in FORESTS if sampler.get(k) in CHAIN_SAMPLERS]
        if chained:
            raise ArgumentError(f"sampler {sampler[chained[0]]!r} runs the whole chain (every forest and block): "
                                f"give sampler={sampler[chained[0]]!r}, not one per forest")
        keys = set(sampler)
        if keys != set(FORESTS):
            raise ArgumentError(f"sampler by forest must name each of {', '.join(map(repr, FORESTS))} once (got "
                                f"{sorted(map(str, keys))}); or give one sampler name for both forests")
        names = {k: sampler[k] for k in FORESTS}
    else:
        names = dict.fromkeys(FORESTS, sampler)
    for forest, name in names.items():
        if not isinstance(name, str) or name not in FOREST_SAMPLERS:
            where = f" for the {forest} forest" if isinstance(sampler, Mapping) else ""
            raise ArgumentError(
                f"sampler {name!r}{where} cannot run a model of several forests (bcf) yet; samplers that can: "
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
    if isinstance(sampler, str) and sampler in CHAIN_SAMPLERS:
        tempered_ladder(options)  # checked here, used by the chain
        return dict.fromkeys(FORESTS, {})
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


def tempered_ladder(options: Mapping | None = None) -> np.ndarray:
    """The inverse temperatures 1 = t_0 > t_1 > ... >= 0 of a tempered BCF chain from its options
    ``rungs`` (default ``TEMPERED_RUNGS``) or ``temperatures`` (explicit; as the ``tempered`` sampler of BART:
    default K - 1 values spaced geometrically from 1 to 10^-3, then 0).

    Raises
    ------
    ArgumentError
        An unknown option, a bad value, or both options given.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - {"rungs", "temperatures"})
    if unknown:
        raise ArgumentError(f"sampler 'tempered' of bcf has no option {unknown[0]!r}; its options are: 'rungs', "
                            "'temperatures'")
    rungs = _check_rungs("rungs", options.get("rungs"))
    temps = _check_temperatures("temperatures", options.get("temperatures"))
    if rungs is not None and temps is not None and len(temps) != rungs:
        raise ArgumentError(f"sampler options 'rungs' ({rungs}) and 'temperatures' ({len(temps)} values) disagree; "
                            "give one of them")
    if temps is not None:
        return np.array(temps, dtype=np.float64)
    return default_temperatures(TEMPERED_RUNGS if rungs is None else rungs)


def _tempered_problem(problem: CausalProblem, t: float) -> CausalProblem:
    """The problem of a rung at inverse temperature ``t`` (``CausalChain.run``): weights t w and the sigma^2
    prior's nu - (1 - t) n+ with nu lam kept (read only by the sigma^2 draw, whose shape (nu + n+) / 2 then
    becomes (nu + t n+) / 2; at t = 0 every weight is 0, n+ drops out of that draw and nu stays)."""
    prior = problem.mu.prior
    n_pos = int(np.count_nonzero(np.asarray(problem.w) > 0))
    # with the likelihood off every rung samples the prior: nu stays
    nu_t = prior.nu - (1.0 - t) * n_pos if t > 0 and prior.likelihood else prior.nu
    if nu_t == 0.0:
        raise ArgumentError(f"tempered bcf: the inverse temperature {t} makes nu - (1 - t) n+ exactly 0 (nu "
                            f"{prior.nu}, {n_pos} rows); move it slightly")
    mu = dataclasses.replace(problem.mu, prior=prior._replace(nu=nu_t, lam=prior.nu * prior.lam / nu_t))
    return dataclasses.replace(problem, w=np.asarray(problem.w, dtype=np.float64) * t, mu=mu)


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
    #: ``causal_re.CausalRe`` arguments (group codes, basis, groups, prior) or None: no random effects
    random_effects: dict | None = None


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
    update = _new_update(code, options or {}, n, capacity, nbins, is_cat, forest_name, codes)
    return ForestPart(forest, state, data, scratch, update_tag(code), update), capacity


def _new_update(code: int, options: dict, n: int, capacity: int, nbins: np.ndarray, is_cat: np.ndarray,
                forest_name: str, codes: np.ndarray):
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
        chv = perturb_table(codes, is_cat, nbins, options["perturb"], options["change_of_variable"],
                            options["perturb_sweep"])
        return CtmcUpdate(cs, clock, event_rates(options["rotate"], options["perturb"], chv), np.zeros(N_UPDATE_STATS),
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
        tempered = isinstance(sampler, str) and sampler == "tempered"
        if tempered and problem.random_effects is not None:
            # a swap would have to exchange the random effects' state and the response minus them as well
            raise ArgumentError("sampler='tempered' is not available for bcf with random effects (1 | g) yet; use "
                                "'grow_prune', 'cgm', 'pg' or 'ctmc'")
        self.temperatures = tempered_ladder(options) if tempered else np.ones(1)
        y = np.array(problem.y, dtype=np.float64)  # a copy: with random effects the chain writes y - gamma
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
        re = no_random_effects(n) if problem.random_effects is None else new_causal_re(y, **problem.random_effects)
        self.causal = CausalState(y, z, w, mfit, tfit, params, float(problem.mu_scale2), 2.0, re)
        self.out = None
        # Tempering (``run``): rung r is this chain with every weight multiplied by t_r; rung 0 (this object)
        # is the posterior. The hot rungs' generators are spawned only when tempering, so that an untempered
        # chain's draws are unchanged.
        self.weights = w.copy()
        self.likelihood = bool(problem.mu.prior.likelihood)
        self.hot = []
        if tempered:
            streams = rng.spawn(len(self.temperatures))
            self.swap_rng = streams[0]
            self.hot = [CausalChain(_tempered_problem(problem, t), moves, g, sampler="cgm")
                        for t, g in zip(self.temperatures[1:], streams[1:])]
            k = len(self.temperatures) - 1
            self.swap_counts = np.zeros((2, k), dtype=np.int64)  # proposed, accepted per adjacent pair

    @property
    def moves(self) -> Moves:
        """The move mix as the kernels' record."""
        return Moves(self.move_probs, *move_flags(self.move_probs))

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (scalars, move counts, both forests' sizes, stores and sampler
        statistics); a tempered chain's hot rungs keep none."""
        for rung in self.hot:
            rung.allocate(1)
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
        self.causal = self.causal._replace(re=with_draws(self.causal.re, draws))

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the stores grow on demand).

        Tempered: each iteration is one sweep of every rung (rung 0's kept draws recorded), then one round of
        swaps of adjacent rungs' whole states, the even pairs at even iterations and the odd ones at odd
        iterations (DEO, as tempered BART). Rung r targets the posterior with the likelihood raised to t_r,
        pi_r(x) ∝ p(x) L(x)^t_r, L(x) = prod_{w_i > 0} N(y_i; f_i(x), sigma^2 / w_i) (t = 0: the prior). Since

            L(x)^t ∝ prod_{w_i > 0} N(y_i; f_i, sigma^2 / (t w_i)) x (sigma^2)^((1 - t) n+ / 2)

        (n+ the rows with w_i > 0), rung r is an ordinary BCF chain with the weights t_r w and the sigma^2
        prior's nu replaced by nu - (1 - t_r) n+ with nu lam unchanged (``_tempered_problem``): its sigma^2
        draw then has the tempered conditional IG((nu + t n+) / 2, (nu lam + t sum w r^2) / 2) and every other
        block is exact for pi_r as it stands, so no block needs a tempered twin. A swap of the states x (rung
        r) and x' (rung r + 1) is accepted with log a = (t_r - t_{r+1}) (log L(x') - log L(x)), as tempered
        BART's. Rung 0 records its state after the sweeps, before the swaps: both are invariant for the joint
        law.
        """
        if self.hot:
            for step in range(n_iter):
                it = first_iter + step
                self._advance(it, 1, tune, thin)
                for rung in self.hot:
                    rung._advance(it, 1, NEVER_KEPT, 1)
                self._swap_round(it, it >= tune)
            return
        self._advance(first_iter, n_iter, tune, thin)

    def _rung_chain(self, r: int) -> CausalChain:
        return self if r == 0 else self.hot[r - 1]

    def _log_lik(self, w: np.ndarray) -> float:
        """log prod_{w_i > 0} N(y_i; f_i, sigma^2 / w_i) of this chain's current state up to a constant (``w``
        the model's weights, rung 0's), from the residual y - fit left by its last sweep."""
        sigma2 = float(self.mu.state.target.sigma2[0])
        r = self.mu.state.resid
        return -0.5 * int(np.count_nonzero(w > 0)) * math.log(sigma2) - float(np.dot(w * r, r)) / (2.0 * sigma2)

    def _swap_round(self, it: int, count: bool) -> None:
        temps, w = self.temperatures, self.weights
        for r in range(it % 2, len(temps) - 1, 2):
            a, b = self._rung_chain(r), self._rung_chain(r + 1)
            log_a = (temps[r] - temps[r + 1]) * (b._log_lik(w) - a._log_lik(w)) if self.likelihood else 0.0
            accept = math.log(self.swap_rng.random()) < log_a
            if count:
                self.swap_counts[0, r] += 1
                self.swap_counts[1, r] += int(accept)
            if accept:
                a._exchange_state(b)

    def _state_arrays(self) -> list:
        """Every array of the chain's state that a swap moves: both forests (trees, row maps, leaf variance
        cells), the residual, the raw forest sums, the scalar parameters and sigma^2."""
        arrays = []
        for part in (self.mu, self.tau):
            arrays += list(part.forest) + [part.state.leaf_of, part.state.target.tau2]
        cs = self.causal
        return arrays + [self.mu.state.resid, cs.mfit, cs.tfit, cs.params, self.mu.state.target.sigma2]

    def _exchange_state(self, other: CausalChain) -> None:
        """Swap the states of two rungs in place (the rungs keep their weights), then rebuild each one's bases
        from its new s_m and coding and its own weights, as the sweep's ``set_bases`` does."""
        for x, y in zip(self._state_arrays(), other._state_arrays()):
            tmp = x.copy()
            x[...] = y
            y[...] = tmp
        for chain in (self, other):
            cs = chain.causal
            sm = cs.params[2]
            bz = np.where(cs.z == 1, cs.params[1], cs.params[0])
            mb, tb = chain.mu.state.target.basis, chain.tau.state.target.basis
            mb[0], mb[1], mb[2] = sm, cs.w * sm, cs.w * sm * sm
            tb[0], tb[1], tb[2] = bz, cs.w * bz, cs.w * bz * bz

    def swap_rates(self) -> dict:
        """A tempered chain's ladder and its swaps proposed and accepted per adjacent pair since tuning
        ended (empty for other samplers)."""
        if not self.hot:
            return {}
        return {"temperatures": self.temperatures.copy(), "swap_proposed": self.swap_counts[0].copy(),
                "swap_accepted": self.swap_counts[1].copy()}

    def _advance(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
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
        out["re"] = collect_re(self.causal.re, kept)
        out["tempering"] = self.swap_rates()
        self.hot = []
        self.out = self.forest_out = None
        return out
