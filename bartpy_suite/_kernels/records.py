"""Typed records that travel together through the compiled functions (issue 29, "Kernel interface").

A compiled function takes a few records instead of many loose arrays and numbers, so that two
same-typed arguments cannot be swapped unnoticed and a new setting is one field, not one more
parameter in every signature.

* ``Prior``: the prior a tree update targets, immutable and typed (floats as float, counts as
  int, flags as bool). Built on the Python side by ``priors.kernel_prior``; nothing compiled
  writes it. A tempered rung's prior is the chain's ``Prior`` with the rung's power, heat and
  (alpha, beta) (``rung_prior``).
* ``Data``: the binned predictors and the response a tree update reads (``xt``, ``is_cat``,
  ``nbins``, ``y``, ``ycls``).
* ``Target``: what a tree update conditions on: its ``Prior`` and ``sigma2``, a one-element array
  holding the sigma^2 of the normal known-variance leaf model (BART). ``sigma2`` is chain state
  (a BART chain's ``backfit.BackfitState.target.sigma2``: ``backfit.draw_noise`` writes it, a
  tempered BART rung sets its effective sigma^2 / t there); a single tree's chain, which has no
  such variance, holds a constant 1.
* The runners' records: ``Window`` (the iterations of one call), ``Moves`` (the MH move mix),
  ``Dart`` (DART's settings, split counts and recorded weights), ``CtmcClock`` (a CT-MCMC BART
  chain's time per visit), ``MoveOut`` / ``CtmcCartOut`` / ``CtmcBartOut`` /
  ``ForestOut`` / ``SwapOut`` / ``RungOut`` (where kept draws go; ``cart_draws.CartOut`` for a
  single tree), ``Rungs``, ``Tally``, ``Depths``, ``Ladder`` and ``BartLadder`` (tempering),
  ``ParticleSystems`` and ``PgSettings`` (particle Gibbs), ``Swaps`` (a tempered chain's swap scheme,
  bookkeeping, work arrays and statistics), ``TemperedOut`` and ``RunOut`` (a runner's draws and its
  sampler statistics). A record field that selects code at
  compile time (``Moves.change_swap``, ``PgSettings.ancestor``: None or True) is unpacked and
  passed on as an argument, because numba prunes ``x is None`` branches on arguments only.

Every field of a record must keep its numba type from one fit to the next (a float field
given an int compiles a second copy of every kernel): build records with the functions here or
in ``priors.py``, which convert.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .jit import helper

__all__ = ["BartLadder", "BartRungs", "BasisTarget", "CtmcBartOut", "CtmcCartOut", "CtmcClock", "Dart", "Data",
           "Depths", "ForestOut", "Ladder", "MhBartOut", "MoveOut", "Moves", "OrdinalOut", "ParticleSystems",
           "PgBartOut", "PgSettings", "Prior", "RunOut", "RungOut", "Rungs", "SigmaOut", "SwapOut", "Swaps", "Tally",
           "Target", "TemperedOut", "Window", "make_basis_target", "make_prior", "make_swaps", "make_target",
           "make_window", "rung_prior", "typed_prior"]


class Prior(NamedTuple):
    """The prior of a tree and of its leaf parameters, on the standardised response."""

    alpha: float  # p_SPLIT = alpha (1 + depth)^-beta
    beta: float
    min_leaf: int  # rows each child of a rule needs
    na_split: bool  # rules carry a missing-value direction (na_action="split"; tree.py)
    likelihood: bool  # False: sample the prior (the likelihood is switched off)
    model: int  # leaf model code (likelihood.MODEL_*); compiled code branches on ``Scratch.model``
    a: float  # normal leaf prior: mu ~ N(mu_bar, sigma^2 / a), sigma^2 ~ IG(nu / 2, nu lam / 2)
    mu_bar: float
    nu: float
    lam: float
    tau2: float  # known-variance (BART) leaf prior: mu ~ N(0, tau2)
    class_alpha: float  # Dirichlet leaf prior of a classification tree
    n_classes: int
    lg_shape: float  # log-gamma leaf prior of log-linear BART: exp(mu) ~ Gamma(shape, rate)
    lg_rate: float
    inv_temp: float  # likelihood power of a tempered rung (1: the posterior)
    prior_heat: float  # 1 - prior power of a geometrically tempered rung (0: the posterior)


class Target(NamedTuple):
    """What a tree update conditions on: the prior and the current sigma^2 (chain state)."""

    prior: Prior
    sigma2: np.ndarray  # float64[1]


class BasisTarget(NamedTuple):
    """What a tree of basis leaves (``likelihood.MODEL_BASIS_NORMAL``, issue 30) conditions on: the
    ``Target`` fields plus chain state of its own. Row i of a leaf with parameter theta ~ N(0, tau2[0])
    has mean ``b_i theta`` and precision ``w_i / sigma2[0]`` (spec multi_forest.md 2.1-2.2).

    The per-row weights travel here rather than in ``Data`` because ``tree.leaf_terms``, which every
    sampler calls, reads the target but only ``y`` and ``ycls`` of the data; every function that takes a
    ``Target`` reads it by field name, so it takes a ``BasisTarget`` unchanged.
    """

    prior: Prior
    sigma2: np.ndarray  # float64[1]: the chain's sigma^2 cell (shared by the forests of one chain)
    tau2: np.ndarray  # float64[1]: the leaf prior variance (chain state: a scale parameter may move it)
    basis: np.ndarray  # float64[3, n]: rows b_i, w_i b_i, w_i b_i^2 (w_i = 0: the row is out of the likelihood)


def make_basis_target(prior: Prior, sigma2: np.ndarray, tau2: float, basis: np.ndarray) -> BasisTarget:
    """A ``BasisTarget`` of ``prior`` sharing the sigma^2 cell ``sigma2`` (float64[1]), with its own leaf
    variance cell (starting at ``tau2``) and ``basis`` (float64[3, n], C-contiguous)."""
    basis = np.ascontiguousarray(basis, dtype=np.float64)
    if basis.ndim != 2 or basis.shape[0] != 3:
        raise ValueError("make_basis_target: basis must have shape (3, n)")
    return BasisTarget(typed_prior(prior), sigma2, np.array([float(tau2)]), basis)


class Data(NamedTuple):
    """What a tree is fitted to: the binned predictors and the response the tree update reads.

    A BART chain's ``y`` is its partial residual and ``ycls`` its (empty) class codes, arrays of
    its state that the sweep rewrites in place; log-linear BART's are the rows' rate weights and
    class indicators of the class being updated.
    """

    xt: np.ndarray  # int32[p, n]: bin codes, feature-major
    is_cat: np.ndarray  # bool[p]
    nbins: np.ndarray  # int64[p]
    y: np.ndarray  # float64[n]: the response (or zeros)
    ycls: np.ndarray  # int64[n]: class codes (or zeros, or empty)


class Ladder(NamedTuple):
    """Per-rung settings of a tempered CART chain (rung 0 is the target); adaptation rewrites them
    in place between chunks."""

    inv_temp: np.ndarray  # float64[K]: likelihood power t_r
    prior_heat: np.ndarray  # float64[K]: 1 - s_r
    alpha: np.ndarray  # float64[K]
    beta: np.ndarray  # float64[K]


class Window(NamedTuple):
    """The iterations one call of a chain runner advances: ``n_iter`` from global iteration
    ``first_iter``, with ``tune`` tuning iterations and every ``thin``-th one after kept
    (``kept.kept_draw``)."""

    first_iter: int
    n_iter: int
    tune: int
    thin: int


class Moves(NamedTuple):
    """The MH move mix: ``probs`` by move type (``cart_moves.MOVE_*``) and the flags of
    ``samplers/mh.move_flags`` (None when the mix gives the change and swap, or the rotate and
    perturb, moves no mass; then those moves are not compiled, ``cart_chain.cart_step``)."""

    probs: np.ndarray  # float64[N_MOVES]
    change_swap: object  # True or None
    # perturb's CHANGE-OF-VARIABLE table (float64[2] or [2 + p*p], rotate.change_of_variable_table) or None
    rotation: object


class Dart(NamedTuple):
    """DART's split-variable weights of one chain (``sparse.py``): the settings vector (written by
    the kernels: theta, and ``S_START`` by the sampler), the split counts s is drawn from, and
    where kept draws record s and theta (``sparse.record_weights``)."""

    conf: np.ndarray  # float64[N_CONF]: sparse.new_conf
    split_count: np.ndarray  # float64[p]
    split_probs: np.ndarray  # float64[draws, p]: recorded s
    alpha: np.ndarray  # float64[draws]: recorded theta


class MoveOut(NamedTuple):
    """A single tree's MH runner's per-draw move statistics."""

    move: np.ndarray  # int8[draws]: index into cart_moves.MOVE_NAMES, -1: no move possible
    accepted: np.ndarray  # int8[draws]: 1 when the move was accepted


class CtmcCartOut(NamedTuple):
    """A CT-MCMC CART runner's per-draw statistics (``ctmc_chain.run_ctmc_cart_chain``)."""

    weight: np.ndarray  # float64[draws]: 1 / Lambda (1 for an absorbing tree)
    rate: np.ndarray  # float64[draws]: Lambda
    event: np.ndarray  # int8[draws]: the event kind that led to the draw (-1: none)


class CtmcClock(NamedTuple):
    """A CT-MCMC BART chain's process settings (``ctmc_chain.run_ctmc_bart_chain``)."""

    horizon: np.ndarray  # float64[1]: time per tree visit (written while it adapts)
    adapt: bool  # reset the horizon during tuning to about one jump per visit


class CtmcBartOut(NamedTuple):
    """A CT-MCMC BART runner's per-draw model and process statistics."""

    sigma: np.ndarray  # float64[draws]
    jumps: np.ndarray  # float64[draws]: mean jumps per tree visit
    rate: np.ndarray  # float64[draws]: mean starting Lambda of the visits
    time: np.ndarray  # float64[draws]: the time per visit used


class OrdinalOut(NamedTuple):
    """An ordinal BART runner's per-draw model and sampler statistics (``ordinal.run_ordinal_chain``)."""

    cut: np.ndarray  # float64[draws, K - 1]: the finite cutpoints
    counts: np.ndarray  # int64[draws, N_MOVES, 2]: moves proposed and accepted over the sweep's trees
    cut_accepted: np.ndarray  # float64[draws]: share of the sweep's cutpoint MH steps accepted


class PgBartOut(NamedTuple):
    """A particle Gibbs BART runner's per-draw sigma and sweep statistics (``particle_chain``)."""

    sigma: np.ndarray  # float64[draws]
    stats: np.ndarray  # float64[draws, 3]: mean ESS, kept-reference share and stages over the trees


class MhBartOut(NamedTuple):
    """An MH BART runner's per-draw sigma and move counts (``bart_chain.run_sparse_bart_chain``)."""

    sigma: np.ndarray  # float64[draws]
    counts: np.ndarray  # int64[draws, N_MOVES, 2]: moves proposed and accepted over the sweep's trees


class ForestOut(NamedTuple):
    """Where a forest runner records kept draws besides its own statistics: the trees' leaf counts
    and depths per draw, the draw store (``record.py``) and its work arrays."""

    leaves: np.ndarray  # int32[draws, T]
    depth: np.ndarray  # int32[draws, T]
    store: tuple  # record.DrawStore
    nodes: np.ndarray  # int32[N]: work array
    order: np.ndarray  # int32[N]: work array


class SwapOut(NamedTuple):
    """A tempered chain's per-draw swap statistics (``tempering.record_swaps``)."""

    proposed: np.ndarray  # int64[draws, K - 1]
    accepted: np.ndarray  # int64[draws, K - 1]
    trips: np.ndarray  # int64[draws]


class ParticleSystems(NamedTuple):
    """The particle systems of a particle Gibbs chain (``particle.py``): two generations, the
    conditioning system and the work arrays."""

    a: tuple
    b: tuple
    c: tuple
    work: tuple


class PgSettings(NamedTuple):
    """Particle Gibbs settings: the resampling ``scheme``, ``ancestor`` sampling (None: off, and
    not compiled; ``particle.csmc_update``) and the ESS threshold of resampling."""

    scheme: int
    ancestor: object
    ess_threshold: float


class Rungs(NamedTuple):
    """A tempered CART chain's rung states: the trees in their slots (a typed List), their running
    sums (float64[K, 2]) and the slot at each rung (int64[K])."""

    trees: object
    fstates: np.ndarray
    slot_of: np.ndarray


class BartRungs(NamedTuple):
    """A tempered BART chain's rung states: the forests and backfitting states in their slots
    (typed Lists), each slot's sigma^2 (float64[K]) and the slot at each rung (int64[K])."""

    forests: object
    states: object
    sigma2: np.ndarray
    slot_of: np.ndarray


class SigmaOut(NamedTuple):
    """A tempered BART chain's per-draw sigma: the target rung's and every rung's."""

    sigma: np.ndarray  # float64[draws]
    rung_sigma: np.ndarray  # float64[draws, K]


class Tally(NamedTuple):
    """A tempered chain's swap bookkeeping: ``counters`` (int64[3, K], ``tempering.run_tempered_chain``)
    and each slot's ``phase`` (int64[K], ``tempering.track_round_trips``)."""

    counters: np.ndarray
    phase: np.ndarray


class Depths(NamedTuple):
    """Work arrays of the swap ratios: internal nodes and splittable leaves by depth (int64[2, D])."""

    n_int: np.ndarray
    n_spl: np.ndarray


class RungOut(NamedTuple):
    """A tempered CART chain's per-draw, per-rung statistics, and the store of every rung's tree
    (``store_rungs``; a store of zero draws otherwise)."""

    moves: np.ndarray  # int64[draws, K]: accepted moves
    leaves: np.ndarray  # int32[draws, K]
    lp: np.ndarray  # float64[draws, K]: log target
    store: tuple  # record.DrawStore


class BartLadder(NamedTuple):
    """The rungs of a tempered BART chain: likelihood powers ``temps`` (float64[K]), whether the
    model has its likelihood on, and the chain's prior with the likelihood off (rungs at t = 0)."""

    temps: np.ndarray
    likelihood_on: bool
    prior_off: Prior


def make_window(first_iter: int, n_iter: int, tune: int, thin: int) -> Window:
    """A ``Window`` of int fields (one compilation for every call)."""
    return Window(int(first_iter), int(n_iter), int(tune), int(thin))


def make_prior(*, alpha: float = 0.95, beta: float = 2.0, min_leaf: int = 5, na_split: bool = False,
               likelihood: bool = True, model: int = 0, a: float = 0.0, mu_bar: float = 0.0, nu: float = 0.0,
               lam: float = 0.0, tau2: float = 1.0, class_alpha: float = 0.0, n_classes: int = 1,
               lg_shape: float = 0.0, lg_rate: float = 0.0, inv_temp: float = 1.0,
               prior_heat: float = 0.0) -> Prior:
    """A ``Prior`` with every field converted to its type (so that all fits share one compilation).

    Parameters
    ----------
    alpha, beta, min_leaf, na_split, likelihood, model, a, mu_bar, nu, lam, tau2, class_alpha, n_classes, \
lg_shape, lg_rate, inv_temp, prior_heat
        The fields of ``Prior`` (see its comments); a field a model does not use keeps its default.

    Returns
    -------
    Prior
        The record.
    """
    return Prior(float(alpha), float(beta), int(min_leaf), bool(na_split), bool(likelihood), int(model), float(a),
                 float(mu_bar), float(nu), float(lam), float(tau2), float(class_alpha), int(n_classes),
                 float(lg_shape), float(lg_rate), float(inv_temp), float(prior_heat))


def typed_prior(prior: Prior) -> Prior:
    """``prior`` with its fields converted to their types (after a ``_replace``)."""
    return make_prior(**prior._asdict())


def make_target(prior: Prior, sigma2: float = 1.0) -> Target:
    """A ``Target`` of ``prior`` holding its own sigma^2 cell (starting at ``sigma2``)."""
    return Target(typed_prior(prior), np.array([float(sigma2)]))


@helper(inline=True)
def rung_prior(prior, ladder, r):
    """``prior`` with the power, heat and (alpha, beta) of rung r of ``ladder``."""
    p = prior
    return Prior(ladder.alpha[r], ladder.beta[r], p.min_leaf, p.na_split, p.likelihood, p.model, p.a, p.mu_bar,
                 p.nu, p.lam, p.tau2, p.class_alpha, p.n_classes, p.lg_shape, p.lg_rate, ladder.inv_temp[r],
                 ladder.prior_heat[r])


class Swaps(NamedTuple):
    """A tempered chain's swap moves: the scheme ``kind`` (``tempering.SWAPS_DEO`` or ``SWAPS_SEO``),
    their bookkeeping (``Tally``), the work arrays of the swap ratios (``Depths``; a tempered BART
    chain's ratios need none: arrays of zero depths) and where kept draws record them (``SwapOut``)."""

    kind: int
    tally: Tally
    depths: Depths
    out: SwapOut


class TemperedOut(NamedTuple):
    """Where a tempered CART chain's kept draws go: the target rung's tree (``cart_draws.CartOut``)
    and every rung's statistics (``RungOut``)."""

    draws: tuple  # cart_draws.CartOut
    rungs: RungOut


def make_swaps(kind: int, tally: Tally, depths: Depths, out: SwapOut) -> Swaps:
    """A ``Swaps`` with an int ``kind`` (one compilation for every call)."""
    return Swaps(int(kind), tally, depths, out)


class RunOut(NamedTuple):
    """Where a chain runner's kept draws go: the model's draws (a single tree's
    ``cart_draws.CartOut`` or a forest's ``ForestOut``) and the sampler's own per-draw statistics
    (``MoveOut``, ``CtmcCartOut``, ``CtmcBartOut``, or particle Gibbs' float64[draws, 3])."""

    draws: tuple
    stats: object
