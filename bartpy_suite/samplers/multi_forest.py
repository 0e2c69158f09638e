"""Chains over several forests in one backfitting sweep (issue 30, "Engine"): the Bayesian causal
forest chain (``_kernels/multi_forest.py``), a mu forest and a tau forest of basis leaves
(``_kernels/basis.py``) against one residual.

The MH samplers ``grow_prune`` and ``cgm`` update either forest (one move per tree, as in BART);
other samplers are refused by ``check_multi_forest_sampler`` with the names of those that work.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import N_ACC, SIGMA_SAMPLED, BackfitState, record_forest_now
from .._kernels.causal_re import collect_re, new_causal_re, no_random_effects, with_draws
from .._kernels.likelihood import MODEL_BASIS_NORMAL
from .._kernels.multi_forest import N_PARAMS, CausalState, ForestPart, run_causal_chain
from .._kernels.record import grow_store, new_store, nodes_of_trees, trim_store
from .._kernels.records import Data, ForestOut, Moves, Prior, make_basis_target, make_window
from ..errors import ArgumentError
from .forest import BART_MAX_NODES, INITIAL_NODES_PER_TREE, new_forest
from .mh import CGM_MOVES, GROW_PRUNE_MOVES, move_flags, move_vector

#: The samplers a multi-forest chain runs, with their default move mixes.
MULTI_FOREST_SAMPLERS = {"grow_prune": GROW_PRUNE_MOVES, "cgm": CGM_MOVES}
#: Names of the kept scalar parameters, the columns of ``out_params``.
PARAM_NAMES = ("sigma", "b0", "b1", "mu_scale", "delta_mu")


def check_multi_forest_sampler(sampler: str, moves: dict | None = None) -> dict:
    """The move mix of ``sampler`` for a multi-forest chain (``moves`` overrides the default mix).

    Raises
    ------
    ArgumentError
        A sampler that cannot update these forests yet, naming the ones that can.
    """
    if sampler not in MULTI_FOREST_SAMPLERS:
        raise ArgumentError(
            f"sampler {sampler!r} cannot run a model of several forests (bcf) yet; samplers that can: "
            f"{', '.join(repr(s) for s in MULTI_FOREST_SAMPLERS)}"
        )
    mix = dict(MULTI_FOREST_SAMPLERS[sampler] if moves is None else moves)
    allowed = set(MULTI_FOREST_SAMPLERS[sampler])
    extra = sorted(k for k, v in mix.items() if k not in allowed and v)
    if extra:
        raise ArgumentError(f"sampler {sampler!r} has no {', '.join(map(repr, extra))} move for bcf: use "
                            f"{sorted(allowed)}")
    total = sum(float(v) for v in mix.values())
    if not total > 0 or any(float(v) < 0 for v in mix.values()):
        raise ArgumentError(f"moves must be non-negative with a positive sum (got {mix})")
    return {k: float(v) / total for k, v in mix.items()}


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


def _part(spec: ForestSpec, resid: np.ndarray, sigma2: np.ndarray, basis: np.ndarray):
    """A ``ForestPart`` for ``spec`` on the shared residual and sigma^2 cell; also its capacity."""
    codes = np.ascontiguousarray(spec.codes, dtype=np.int32)
    n = resid.shape[0]
    if spec.prior.model != MODEL_BASIS_NORMAL:
        raise ValueError("a multi-forest chain's forests have basis leaves (MODEL_BASIS_NORMAL)")
    capacity = min(_tree.node_capacity(n, spec.prior.min_leaf), BART_MAX_NODES)
    forest = new_forest(int(spec.n_trees), n, capacity)
    forest.value[:, 0] = spec.start_value
    scratch = _tree.new_scratch(codes, capacity, np.asarray(spec.nbins, dtype=np.int64), model=MODEL_BASIS_NORMAL)
    state = BackfitState(
        resid=resid, leaf_of=np.zeros((int(spec.n_trees), n), dtype=np.uint8),
        sums=np.zeros((2 * N_ACC, capacity)), z=np.zeros(0), ybin=np.zeros(0, dtype=np.int64),
        ycls=np.zeros(0, dtype=np.int64), target=make_basis_target(spec.prior, sigma2, spec.tau2, basis),
        fstate=np.zeros(2), sigma_mode=np.array([SIGMA_SAMPLED], dtype=np.int64),
        cursor=np.zeros(capacity, dtype=np.int64),
    )
    data = Data(codes, np.asarray(spec.is_categorical, dtype=np.bool_), np.asarray(spec.nbins, dtype=np.int64),
                resid, state.ycls)
    return ForestPart(forest, state, data, scratch), capacity


class CausalChain:
    """One BCF chain (the chain protocol of ``samplers/registry.Chain``: ``allocate``, ``run``,
    ``collect``).

    Parameters
    ----------
    problem : CausalProblem
    moves : dict
        Move probabilities by name (``check_multi_forest_sampler``).
    rng : numpy.random.Generator

    Starts as bcf does (spec 3.6): mu leaves at ``mu.start_value``, tau leaves at
    ``tau.start_value`` (1 / M_tau: t = 1), b_0 = -1/2, b_1 = 1/2, s_m = 1, delta = 1.
    """

    def __init__(self, problem: CausalProblem, moves: dict, rng: np.random.Generator):
        self.rng = rng
        y = np.array(problem.y, dtype=np.float64)  # a copy: with random effects the chain writes y - gamma
        z = np.ascontiguousarray(problem.z, dtype=np.int64)
        w = np.ascontiguousarray(problem.w, dtype=np.float64)
        n = y.shape[0]
        self.move_probs = move_vector(moves)
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
                                          mu_basis)
        self.tau, self.tau_capacity = _part(problem.tau, resid, sigma2, tau_basis)
        re = no_random_effects(n) if problem.random_effects is None else new_causal_re(y, **problem.random_effects)
        self.causal = CausalState(y, z, w, mfit, tfit, params, float(problem.mu_scale2), 2.0, re)
        self.out = None

    @property
    def moves(self) -> Moves:
        """The move mix as the kernels' record."""
        return Moves(self.move_probs, *move_flags(self.move_probs))

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (scalars, move counts, both forests' sizes and stores)."""
        self.out = {"params": np.full((draws, len(PARAM_NAMES)), np.nan),
                    "counts": np.zeros((draws, self.move_probs.shape[0], 2), dtype=np.int64)}
        self.forest_out = []
        for part, cap in ((self.mu, self.mu_capacity), (self.tau, self.tau_capacity)):
            t = part.forest.var.shape[0]
            self.forest_out.append(ForestOut(np.zeros((draws, t), dtype=np.int32), np.zeros((draws, t), dtype=np.int32),
                                             new_store(draws, t, INITIAL_NODES_PER_TREE * t * min(draws, 256)),
                                             np.zeros(cap, dtype=np.int32), np.empty(cap, dtype=np.int32)))
        self.causal = self.causal._replace(re=with_draws(self.causal.re, draws))

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

    def collect(self, kept: int) -> dict:
        """The first ``kept`` draws: ``params`` (draw, 5: ``PARAM_NAMES``), ``counts``, and per forest
        (``mu``, ``tau``) its ``n_leaves`` (draw, tree) and trimmed ``store``."""
        out = {"params": self.out["params"][:kept].copy(), "counts": self.out["counts"][:kept].copy()}
        for name, fo in zip(("mu", "tau"), self.forest_out):
            out[name] = {"n_leaves": fo.leaves[:kept].copy(), "depth": fo.depth[:kept].copy(),
                         "store": trim_store(fo.store, kept)}
        out["re"] = collect_re(self.causal.re, kept)
        self.out = self.forest_out = None
        return out
