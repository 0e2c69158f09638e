"""The ``tempered`` sampler: parallel tempering of Bayesian CART (thesis chapter 4) and BART.

Each chain of a fit runs K rungs (one tree each) inside one kernel call per chunk
(``_kernels/tempering.py``): one ``cgm`` MH transition per rung against that rung's target, then
one round of swaps between adjacent rungs (DEO or SEO). The target rung's kept draws are the
fit's draws. For BART (``_kernels/tempering_bart.py``) a rung is a whole forest with its own
sigma, the likelihood of the sum of trees is tempered (``ladder="likelihood"`` only), a rung's
iteration is one backfitting sweep, and swaps exchange whole forests.

Options (``sampler_options``):

``ladder``
    "likelihood" (default): rung r targets ``L(T)^t_r p(T)``; "geometric": ``[L(T) p(T)]^t_r``
    (eq. 4.2); "shrinkage": ``L(T) p(T | alpha_r, beta_r)`` (section 4.2).
``rungs``
    Number of rungs K, used when no explicit ladder is given. Default 16 for CART: the best of
    the cgm1998 experiment (``benchmarks/results/tempered_cgm.md``, 8 runs of 120,000 MH steps):
    the adapted 16-rung likelihood ladder gave R-hat of n_leaves across the runs 1.20, against
    1.38 with 8 rungs, 1.43-1.66 for the thesis' ladders and 2.68 for ``cgm``; at the thesis'
    1.2 M steps it gave 1.010 against 1.667 (``tempered_cgm_long.md``). 15 for "shrinkage" (the
    thesis' ladder), 8 for BART (not tuned: a BART rung costs a whole backfitting sweep).
``temperatures``
    Explicit inverse temperatures t_0 = 1 > t_1 > ... >= 0 (likelihood / geometric ladders).
    Default: K - 1 values spaced geometrically from 1 down to 10^-3, then 0 (the hottest rung is
    the prior itself for "likelihood", the uniform distribution over trees for "geometric");
    with ``adapt`` this is only the starting ladder.
``shrinkage_pairs``
    Explicit (alpha, beta) of rungs 1 .. K-1 (rung 0 keeps the model's tree prior). Default: the
    thesis' 14 pairs (table 5.1 settings), or K - 1 points placed evenly along the piecewise-linear
    path through them.
``swaps``
    "deo" (default; deterministic even/odd alternation, Syed et al. 2019) or "seo".
``adapt``
    Re-place the rungs along the initial ladder's path during ``tune`` so that the swap
    rejection rates of the pairs are equal (``ladder.py``), then freeze the ladder (default True:
    in the experiment it evened the swap rates and doubled the round trips).
``moves``
    The within-rung MH move mix (as ``cgm``; CART also takes Pratola's ``rotate`` and ``perturb``,
    weight 0 by default, perturb without the change of variable).
``store_rungs``
    Also keep every rung's tree at each kept draw (default False: only the target rung's). CART
    only. The fit then has a DataTree group ``rung_trees``: ``tree_nodes`` (chain, draw, rung)
    and the flat preorder ``node_var`` / ``node_cut`` (as ``trees``); rung r of draw d is the tree
    of the rung-r target at that draw (rung 0: the fit's own tree). Only the structure is kept:
    the sampler draws leaf parameters for the target rung alone, so no hot-rung leaf values
    exist. ``fit.tree_arrays("rung_trees")`` pads them, dims (chain, draw, rung, node). The
    target rung's draws are the same with and without it (same seed).

Statistics per kept draw: ``swap_proposed``, ``swap_accepted`` and ``swap_rate`` per adjacent
pair (dim ``pair``: pair r is rungs (r, r + 1)), counted from the first kept iteration;
``round_trips`` (target -> hottest -> target journeys of the trees, summed over trees, same
count), ``rung_moves_accepted``, ``rung_n_leaves`` and ``rung_log_target`` (dim ``rung``; BART:
``rung_sigma``), and ``ladder`` (dims ``rung``,
``ladder_param``: inverse temperature t, prior power s, alpha, beta of each rung; constant after
tuning).

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import _validation as check
from .._kernels import tree as _tree
from .._kernels.backfit import SIGMA_PROBIT
from .._kernels.record import grow_store, new_store, nodes_of_trees, trim_store
from .._kernels.records import (
    BartLadder,
    BartRungs,
    Depths,
    ForestOut,
    Ladder,
    Moves,
    Prior,
    RungOut,
    Rungs,
    SigmaOut,
    SwapOut,
    Tally,
    TemperedOut,
    make_swaps,
    make_window,
    typed_prior,
)
from .._kernels.tempering import (
    SWAPS_DEO,
    SWAPS_SEO,
    record_rung_trees,
    retarget_prior_cache,
    run_tempered_chain,
    rung_list,
    rung_list_append,
)
from .._kernels.tempering_bart import run_tempered_bart_chain
from ..errors import ArgumentError
from .draws import ChainDraws
from .forest import ForestChain
from .ladder import new_positions, path_rows, round_boundaries
from .mh import CGM_MOVES, EXTRA_MOVES, move_flags, move_vector
from .problems import BartProblem, CartProblem
from .registry import Option, SamplerSpec, Statistic, register
from .single_tree import INITIAL_NODES_PER_DRAW, TreeChain

LADDERS = ("likelihood", "geometric", "shrinkage")
SWAP_SCHEMES = {"deo": SWAPS_DEO, "seo": SWAPS_SEO}
DEFAULT_RUNGS = 16
BART_DEFAULT_RUNGS = 8
#: Hottest positive inverse temperature of the default likelihood / geometric ladder.
DEFAULT_T_MIN = 1e-3
#: DataTree group of the rungs' trees (``store_rungs``); its tree dimension is ``rung``.
RUNG_TREES_GROUP = "rung_trees"
#: The thesis' shrinkage ladder (section 5, table 5.1), rungs 1..14 (rung 0 is (0.95, 1)).
THESIS_SHRINKAGE_PAIRS = (
    (0.35, 0.75), (0.35, 1.45), (0.25, 2.1), (0.3, 3.1), (0.3, 4.0), (0.3, 5.0), (0.3, 5.9), (0.4, 7.4),
    (0.4, 9.08), (0.5, 9.92), (0.35, 10.5), (0.35, 11.7), (0.35, 13.0), (0.35, 14.3),
)
#: The columns of a ladder's rows (``rung_ladder``; the fields of ``_kernels/records.Ladder``), and
#: their names in the ``ladder`` statistic (the prior power is reported as s = 1 - heat).
LADDER_COLUMNS = ("inv_temp", "prior_heat", "alpha", "beta")
LADDER_PARAMS = ("inv_temp", "prior_power", "alpha", "beta")
#: The thesis' geometric ladder (section 5).
THESIS_TEMPERATURES = (1.0, 0.85, 0.7, 0.48, 0.31, 0.2, 0.08, 1e-7)


def typed_list(items: list):
    """The numba typed List of ``items`` that the tempered kernels take, built by cached kernels
    (``rung_list``): a ``numba.typed.List`` made and filled from Python compiles its methods in
    every process."""
    out = rung_list(items[0])
    for item in items[1:]:
        rung_list_append(out, item)
    return out


def default_temperatures(n_rungs: int) -> np.ndarray:
    """``1, geometric steps down to DEFAULT_T_MIN, 0`` for ``n_rungs`` rungs."""
    if n_rungs == 2:
        return np.array([1.0, 0.0])
    return np.append(np.geomspace(1.0, DEFAULT_T_MIN, n_rungs - 1), 0.0)


def shrinkage_path(model_pair: tuple[float, float], n_rungs: int) -> np.ndarray:
    """(alpha, beta) of rungs 1..K-1 placed evenly (by index) along the piecewise-linear path
    through the model's pair and the thesis' 14 pairs."""
    path = np.array((model_pair,) + THESIS_SHRINKAGE_PAIRS)
    if n_rungs == len(path):
        return path[1:]
    pos = np.linspace(0.0, len(path) - 1.0, n_rungs)[1:]
    idx = np.arange(len(path))
    return np.column_stack([np.interp(pos, idx, path[:, 0]), np.interp(pos, idx, path[:, 1])])


def rung_ladder(prior: Prior, ladder: str, temperatures, pairs) -> np.ndarray:
    """The rungs' (t, heat, alpha, beta) rows (``LADDER_COLUMNS``), shape (K, 4); row 0 is the
    model's own prior."""
    if ladder == "shrinkage":
        out = np.tile([prior.inv_temp, prior.prior_heat, prior.alpha, prior.beta], (len(pairs) + 1, 1))
        for r, (a, b) in enumerate(pairs, start=1):
            out[r, 2] = a
            out[r, 3] = b
        return out
    out = np.tile([prior.inv_temp, prior.prior_heat, prior.alpha, prior.beta], (len(temperatures), 1))
    out[:, 0] = temperatures
    if ladder == "geometric":
        out[:, 1] = 1.0 - np.asarray(temperatures)
    return out


class _Rungs:
    """The rung bookkeeping the CART and BART tempered chains share: swap counters, the index
    process, ladder adaptation rounds and the swap statistics.

    A subclass calls ``_init_rungs`` and implements ``_advance`` (one kernel call) and
    ``_set_ladder`` (apply re-placed ladder rows, shape (K, 4): t, heat, alpha, beta).
    """

    def _init_rungs(self, initial_ladder: np.ndarray, adapt: bool) -> None:
        self.n_rungs = initial_ladder.shape[0]
        self.adapt = adapt
        self.slot_of = np.arange(self.n_rungs, dtype=np.int64)
        self.phase = np.zeros(self.n_rungs, dtype=np.int64)
        self.phase[0] = 1
        # rows: swaps proposed, accepted (per pair; [0, K-1]: round trips), accepted moves per rung
        self.counters = np.zeros((3, self.n_rungs), dtype=np.int64)
        self._initial_ladder = np.array(initial_ladder, dtype=np.float64)
        self._positions = np.linspace(0.0, 1.0, self.n_rungs)
        self._round_start = np.zeros((2, self.n_rungs), dtype=np.int64)

    def _allocate_swaps(self, draws: int) -> None:
        pairs = max(self.n_rungs - 1, 1)
        self.out_proposed = np.zeros((draws, pairs), dtype=np.int64)
        self.out_accepted = np.zeros((draws, pairs), dtype=np.int64)
        self.out_trips = np.zeros(draws, dtype=np.int64)

    def _advance(self, it: int, n_iter: int, tune: int, thin: int) -> int:
        raise NotImplementedError

    def _set_ladder(self, rows: np.ndarray) -> None:
        raise NotImplementedError

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` tempered iterations; with ``adapt``, stop at the ends of the tuning
        rounds (``ladder.round_boundaries``) to re-place the rungs."""
        boundaries = round_boundaries(tune) if self.adapt and self.n_rungs > 2 else []
        done = 0
        while done < n_iter:
            it = first_iter + done
            todo = n_iter - done
            ahead = [b for b in boundaries if b > it]
            if ahead:
                todo = min(todo, ahead[0] - it)
            done += self._advance(it, todo, tune, thin)
            if first_iter + done in boundaries:
                self.adapt_ladder()

    def adapt_ladder(self) -> None:
        """Re-place the rungs from the swap rejection rates since the last adaptation."""
        k = self.n_rungs
        proposed = self.counters[0, : k - 1] - self._round_start[0, : k - 1]
        accepted = self.counters[1, : k - 1] - self._round_start[1, : k - 1]
        self._round_start[:] = self.counters[:2]
        rejection = np.where(proposed > 0, 1.0 - accepted / np.maximum(proposed, 1), 1.0)
        self._positions = new_positions(self._positions, rejection)
        self._set_ladder(path_rows(self._initial_ladder, self._positions))

    def _swap_stats(self, kept: int, ladder: np.ndarray) -> dict:
        """Swap counts and rates per pair, round trips, and the ladder (t, s, alpha, beta) per draw."""
        proposed = self.out_proposed[:kept].copy()
        accepted = self.out_accepted[:kept].copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(proposed > 0, accepted / np.maximum(proposed, 1), np.nan)
        ladder = ladder.copy()
        ladder[:, 1] = 1.0 - ladder[:, 1]
        return {"swap_proposed": proposed, "swap_accepted": accepted, "swap_rate": rate,
                "round_trips": self.out_trips[:kept].copy(),
                "ladder": np.broadcast_to(ladder, (kept,) + ladder.shape).copy()}


class TemperedCartChain(_Rungs, TreeChain):
    """One parallel-tempering Bayesian CART chain: K trees, one per rung.

    Parameters
    ----------
    problem : CartProblem
    ladder_rows : ndarray, shape (K, 4)
        The rungs' (t, heat, alpha, beta) (``rung_ladder``); row 0 is the target.
    moves : dict
        Within-rung MH move probabilities.
    swaps : str
        "deo" or "seo".
    rng : numpy.random.Generator
    adapt : bool
        Re-place the rungs during tuning (``ladder.py``).
    store_rungs : bool
        Also record every rung's tree structure at each kept draw (``rung_trees``).
    """

    def __init__(self, problem: CartProblem, ladder_rows: np.ndarray, moves: dict, swaps: str, rng: np.random.Generator,
                 adapt: bool = False, store_rungs: bool = False):
        super().__init__(problem, rng)
        self.store_rungs = bool(store_rungs)
        self.rung_store = new_store(0, 1, 1)
        # One row per ladder field, so that each field of ``Ladder`` is a contiguous view that
        # adaptation rewrites in place.
        self.ladder_fields = np.ascontiguousarray(np.asarray(ladder_rows, dtype=np.float64).T)
        self.ladder = Ladder(*self.ladder_fields)
        self._init_rungs(self.ladder_fields.T, adapt)
        self.move_probs = move_vector(moves)
        self.swaps = SWAP_SCHEMES[swaps]
        n = self.y.shape[0]
        self.rung_trees = [self.tree] + [_tree.new_tree(n, self.capacity, self.n_classes)
                                         for _ in range(1, self.n_rungs)]
        self.trees = typed_list(self.rung_trees)
        self.fstates = np.tile(self.fstate, (self.n_rungs, 1))
        for k in range(1, self.n_rungs):  # the stumps' cached leaf terms (refresh writes the row views)
            self.tree, self.fstate = self.rung_trees[k], self.fstates[k]
            self.refresh()
        depth_room = self.capacity + 1
        self.n_int = np.zeros((2, depth_room), dtype=np.int64)
        self.n_spl = np.zeros((2, depth_room), dtype=np.int64)
        self._sync_target()

    def _sync_target(self) -> None:
        """Point ``tree`` / ``fstate`` (what ``TreeChain`` and the tests read) at the target rung."""
        k = int(self.slot_of[0])
        self.tree = self.rung_trees[k]
        self.fstate = self.fstates[k]

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the swaps' statistics)."""
        super().allocate(draws)
        self._allocate_swaps(draws)
        self.out_rung_moves = np.zeros((draws, self.n_rungs), dtype=np.int64)
        self.out_rung_leaves = np.zeros((draws, self.n_rungs), dtype=np.int32)
        self.out_rung_lp = np.zeros((draws, self.n_rungs))
        if self.store_rungs:
            self.rung_store = new_store(draws, self.n_rungs, INITIAL_NODES_PER_DRAW * self.n_rungs * min(draws, 4096))

    def _advance(self, it: int, n_iter: int, tune: int, thin: int) -> int:
        """One kernel call of up to ``n_iter`` iterations (one move per rung, one swap round each)."""
        steps, pending = run_tempered_chain(
            self.rng, Rungs(self.trees, self.fstates, self.slot_of), self.target, self.ladder, self.data,
            Moves(self.move_probs, *move_flags(self.move_probs)), self.scratch,
            make_swaps(self.swaps, Tally(self.counters, self.phase), Depths(self.n_int, self.n_spl),
                       SwapOut(self.out_proposed, self.out_accepted, self.out_trips)),
            make_window(it, n_iter, tune, thin),
            TemperedOut(self.cart_out(),
                        RungOut(self.out_rung_moves, self.out_rung_leaves, self.out_rung_lp, self.rung_store)),
        )
        self._sync_target()
        if pending >= 0:
            self.record_pending(pending)
        return steps

    def record_pending(self, d: int) -> None:
        """Grow the store(s) and record what draw d still lacks: the target tree and/or, with
        ``store_rungs``, the rungs' trees (a missing record has node count 0)."""
        if self.store.tree_nodes[d, 0] == 0:
            super().record_pending(d)
        if self.store_rungs and self.rung_store.tree_nodes[d, 0] == 0:
            leaves = [self.rung_trees[int(k)].meta[_tree.M_N_LEAVES] for k in self.slot_of]
            self.rung_store = grow_store(self.rung_store, nodes_of_trees(leaves), d)
            if not record_rung_trees(self.trees, self.slot_of, self.rung_store, d, self.order, self.scratch.stack):
                raise RuntimeError("rung tree store still full after growing it")  # a bug, not a user error

    def collect(self, kept: int) -> ChainDraws:
        """The first ``kept`` draws, with the rungs' trees as the ``rung_trees`` store if kept."""
        rung_store = trim_store(self.rung_store, kept) if self.store_rungs else None
        out = super().collect(kept)
        if rung_store is not None:
            out.extra_stores[RUNG_TREES_GROUP] = ("rung", rung_store)
        self.rung_store = new_store(0, 1, 1)
        return out

    def _set_ladder(self, rows: np.ndarray) -> None:
        fields = self.ladder_fields
        for r in range(1, self.n_rungs):  # row 0 (the target) sits at position 0 and never moves
            old_alpha, old_beta = float(fields[2, r]), float(fields[3, r])
            fields[:, r] = rows[r]
            retarget_prior_cache(self.rung_trees[int(self.slot_of[r])], old_alpha, old_beta, float(fields[2, r]),
                                 float(fields[3, r]))

    def sampler_stats(self, kept: int) -> dict:
        """Swap counts and rates per pair, round trips, the ladder, and per rung the accepted moves,
        leaves and log target."""
        out = self._swap_stats(kept, self.ladder_fields.T)
        out.update(rung_moves_accepted=self.out_rung_moves[:kept].copy(),
                   rung_n_leaves=self.out_rung_leaves[:kept].copy(), rung_log_target=self.out_rung_lp[:kept].copy())
        return out

    # -- rung states (tests) -----------------------------------------------------------------
    def set_rung_tree(self, rung: int, nested) -> None:
        """Load a nested-tuple tree into ``rung``."""
        k = int(self.slot_of[rung])
        self.fstate = np.zeros(2)  # not a view of another rung's row: set_tree refreshes it
        TreeChain.set_tree(self, nested)
        self.rung_trees[k] = self.tree
        self.trees = typed_list(self.rung_trees)
        self.fstates[k] = self.fstate
        self._sync_target()

    def get_rung_tree(self, rung: int):
        """The tree of ``rung`` as a canonical nested tuple."""
        self.tree = self.rung_trees[int(self.slot_of[rung])]
        out = TreeChain.get_tree(self)
        self._sync_target()
        return out

    def set_tree(self, nested, rng: np.random.Generator | None = None) -> None:
        """Load a nested-tuple tree into the target rung."""
        self.set_rung_tree(0, nested)


class TemperedBartChain(_Rungs, ForestChain):
    """One parallel-tempering BART chain: K forests (with their own sigma), one per rung.

    Parameters
    ----------
    problem : BartProblem
    temperatures : ndarray, shape (K,)
        Inverse temperatures of the likelihood, ``temperatures[0] == 1``.
    moves : dict
        MH move probabilities of each tree update.
    swaps : str
        "deo" or "seo".
    rng : numpy.random.Generator
    adapt : bool
        Re-place the rungs during tuning (``ladder.py``).
    """

    def __init__(self, problem: BartProblem, temperatures: np.ndarray, moves: dict, swaps: str,
                 rng: np.random.Generator, adapt: bool = False):
        if int(problem.sigma_mode) == SIGMA_PROBIT:
            raise ArgumentError("sampler 'tempered' tempers the Gaussian likelihood of BART; binary responses "
                                "(probit BART) are not supported: use sampler='cgm'")
        super().__init__(problem, rng)
        self.temps = np.ascontiguousarray(temperatures, dtype=np.float64)
        prior = self.prior
        k = self.temps.shape[0]
        self._init_rungs(np.column_stack([self.temps, np.zeros(k), np.full(k, prior.alpha),
                                          np.full(k, prior.beta)]), adapt)
        self.move_probs = move_vector(moves)
        self.swaps_seo = swaps == "seo"
        # The swap ratios of forests need no work arrays (``records.Swaps``).
        self._no_depths = Depths(np.zeros((2, 0), dtype=np.int64), np.zeros((2, 0), dtype=np.int64))
        self.likelihood_on = prior.likelihood
        # The prior of a rung at t = 0 (or of every rung when the model samples the prior).
        self.prior_off = typed_prior(prior._replace(likelihood=False))
        others = [ForestChain(problem, rng) for _ in range(1, self.n_rungs)]
        self.rung_forests = [self.forest] + [other.forest for other in others]
        self.rung_states = [self.state] + [other.state for other in others]
        self.forests = typed_list(self.rung_forests)
        self.states = typed_list(self.rung_states)
        self.sigma2 = np.full(self.n_rungs, self.current_sigma2)

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the swaps' statistics)."""
        super().allocate(draws)
        self._allocate_swaps(draws)
        self.out_rung_sigma = np.zeros((draws, self.n_rungs))

    def _sync_target(self) -> None:
        k = int(self.slot_of[0])
        self.forest = self.rung_forests[k]
        self.state = self.rung_states[k]

    def _advance(self, it: int, n_iter: int, tune: int, thin: int) -> int:
        """One kernel call of up to ``n_iter`` iterations (one sweep per rung, one swap round each)."""
        steps, pending = run_tempered_bart_chain(
            self.rng, BartRungs(self.forests, self.states, self.sigma2, self.slot_of),
            BartLadder(self.temps, self.likelihood_on, self.prior_off), self.data,
            Moves(self.move_probs, *move_flags(self.move_probs)), self.scratch,
            make_swaps(SWAPS_SEO if self.swaps_seo else SWAPS_DEO, Tally(self.counters, self.phase), self._no_depths,
                       SwapOut(self.out_proposed, self.out_accepted, self.out_trips)),
            make_window(it, n_iter, tune, thin),
            SigmaOut(self.out["sigma"], self.out_rung_sigma),
            ForestOut(self.out["n_leaves"], self.out["depth"], self.store, self.scratch.nodes, self.order),
        )
        self._sync_target()
        if pending >= 0:
            self.record_pending(pending)
        return steps

    def _set_ladder(self, rows: np.ndarray) -> None:
        self.temps[1:] = rows[1:, 0]

    def sampler_stats(self, kept: int) -> dict:
        """Swap counts and rates per pair, round trips, the ladder, and each rung's sigma."""
        prior = self.prior
        k = self.n_rungs
        ladder = np.column_stack([self.temps, np.zeros(k), np.full(k, prior.alpha), np.full(k, prior.beta)])
        out = self._swap_stats(kept, ladder)
        out["rung_sigma"] = self.out_rung_sigma[:kept].copy()
        return out


# -- options -------------------------------------------------------------------------------------

def _check_moves(name: str, value) -> dict:
    return check.check_moves(value, {**CGM_MOVES, **EXTRA_MOVES}, paired=[("grow", "prune")], required=["grow"],
                             name=name)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"sampler option {name!r} must be True or False, got {value!r}")
    return bool(value)


def _check_rungs(name: str, value):
    return None if value is None else check.check_int_at_least(name, value, 2)


def _check_temperatures(name: str, value):
    if value is None:
        return None
    try:
        t = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be a list of inverse temperatures, got {value!r}") from None
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)):
        raise ArgumentError(f"{name} must be a list of at least 2 finite inverse temperatures, got {value!r}")
    if t[0] != 1.0 or np.any(np.diff(t) >= 0) or t[-1] < 0:
        raise ArgumentError(
            f"{name} must start at 1 (the target rung) and decrease strictly to a value >= 0, got {list(t)}"
        )
    return tuple(float(x) for x in t)


def _check_pairs(name: str, value):
    if value is None:
        return None
    try:
        pairs = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be a list of (alpha, beta) pairs, got {value!r}") from None
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.shape[0] < 1:
        raise ArgumentError(f"{name} must be a list of (alpha, beta) pairs for rungs 1.., got {value!r}")
    for a, b in pairs:
        check.check_open_unit(f"{name}: alpha", a)
        check.check_nonnegative(f"{name}: beta", b)
    return tuple((float(a), float(b)) for a, b in pairs)


def _ladder(problem: CartProblem, options: dict) -> np.ndarray:
    """The rungs' ladder rows (``rung_ladder``) the options describe (cross-option checks live here)."""
    ladder = options["ladder"]
    n_rungs = options["rungs"]
    temps = options["temperatures"]
    pairs = options["shrinkage_pairs"]
    if ladder == "shrinkage":
        if temps is not None:
            raise ArgumentError("sampler option 'temperatures' applies to the 'likelihood' and 'geometric' "
                                "ladders; give 'shrinkage_pairs' for ladder='shrinkage'")
        if pairs is None:
            model = (problem.prior.alpha, problem.prior.beta)
            pairs = shrinkage_path(model, n_rungs or len(THESIS_SHRINKAGE_PAIRS) + 1)
        elif n_rungs is not None and n_rungs != len(pairs) + 1:
            raise ArgumentError(f"sampler option 'rungs' ({n_rungs}) must be len(shrinkage_pairs) + 1 "
                                f"({len(pairs) + 1}); give one of them")
        return rung_ladder(problem.prior, ladder, None, pairs)
    if pairs is not None:
        raise ArgumentError(f"sampler option 'shrinkage_pairs' applies to ladder='shrinkage', not {ladder!r}")
    if temps is None:
        temps = default_temperatures(n_rungs or DEFAULT_RUNGS)
    elif n_rungs is not None and n_rungs != len(temps):
        raise ArgumentError(f"sampler option 'rungs' ({n_rungs}) must equal len(temperatures) ({len(temps)}); "
                            "give one of them")
    return rung_ladder(problem.prior, ladder, np.asarray(temps, dtype=float), None)


def _build_bart(problem: BartProblem, options: dict, rng) -> TemperedBartChain:
    if options["store_rungs"]:
        raise ArgumentError("sampler option 'store_rungs' is for CART (bps.cart) only: a BART rung is a whole "
                            "forest and its trees are not kept; use store_rungs=False with BART")
    if options["ladder"] != "likelihood":
        raise ArgumentError(f"sampler 'tempered' for BART tempers the likelihood of the sum of trees: "
                            f"ladder must be 'likelihood', got {options['ladder']!r}")
    if any(options["moves"].get(m, 0.0) > 0 for m in EXTRA_MOVES):
        # their ratios are checked against tempered CART targets only (tests/test_tempered.py)
        raise ArgumentError("sampler 'tempered' offers the 'rotate' and 'perturb' moves for CART (bps.cart) "
                            "only; give BART's tempered rungs grow, prune, change and swap moves")
    n_rungs = options["rungs"]
    temps = options["temperatures"]
    if temps is None:
        temps = default_temperatures(n_rungs or BART_DEFAULT_RUNGS)
    elif n_rungs is not None and n_rungs != len(temps):
        raise ArgumentError(f"sampler option 'rungs' ({n_rungs}) must equal len(temperatures) ({len(temps)}); "
                            "give one of them")
    return TemperedBartChain(problem, np.asarray(temps, dtype=float), options["moves"], options["swaps"], rng,
                             adapt=options["adapt"])


def _build_cart(problem: CartProblem, options: dict, rng) -> TemperedCartChain:
    return TemperedCartChain(problem, _ladder(problem, options), options["moves"], options["swaps"], rng,
                             adapt=options["adapt"], store_rungs=options["store_rungs"])


def _options() -> Sequence[Option]:
    return (
        Option("ladder", "likelihood", lambda n, v: check.check_choice(n, v, LADDERS),
               "'likelihood' (L^t p), 'geometric' ((L p)^t, eq. 4.2) or 'shrinkage' (own (alpha, beta) per rung)"),
        Option("rungs", None, _check_rungs, "number of rungs (default 16; 15 for 'shrinkage'; 8 for BART)"),
        Option("temperatures", None, _check_temperatures,
               "inverse temperatures 1 > t_1 > ... >= 0 (default 1, 1e-3 geometric steps, 0)"),
        Option("shrinkage_pairs", None, _check_pairs,
               "(alpha, beta) of rungs 1.. for ladder='shrinkage' (default: the thesis' 14 pairs)"),
        Option("swaps", "deo", lambda n, v: check.check_choice(n, v, tuple(SWAP_SCHEMES)),
               "'deo' (deterministic even/odd) or 'seo' (stochastic even/odd)"),
        Option("moves", dict(CGM_MOVES), _check_moves, f"within-rung MH move probabilities (default {CGM_MOVES})"),
        Option("adapt", True, _check_bool,
               "re-place the rungs during tune so that swap rejection rates are equal (Syed et al. 2019)"),
        Option("store_rungs", False, _check_bool,
               "CART only: also keep every rung's tree structure (split variables and cuts, no leaf values: "
               "the hot rungs' are never drawn) at each kept draw, in the group idata['rung_trees'] "
               "(tree_nodes dims chain, draw, rung); fit.tree_arrays('rung_trees') pads them"),
    )


_STATISTICS = {
    "cart": (
        Statistic("swap_proposed", ("pair",), "swaps proposed between rungs (r, r+1) since the first kept iteration"),
        Statistic("swap_accepted", ("pair",), "swaps accepted between rungs (r, r+1) since the first kept iteration"),
        Statistic("swap_rate", ("pair",), "swap_accepted / swap_proposed (NaN before the first proposal)"),
        Statistic("round_trips", (), "target -> hottest -> target journeys of the trees since the first kept "
                                     "iteration"),
        Statistic("rung_moves_accepted", ("rung",), "MH moves accepted on each rung since the first kept iteration"),
        Statistic("rung_n_leaves", ("rung",), "number of leaves of each rung's tree"),
        Statistic("rung_log_target", ("rung",), "log of each rung's unnormalised target at its tree"),
        Statistic("ladder", ("rung", "ladder_param"), "each rung's (t, s, alpha, beta); constant after tuning"),
    ),
    "bart": (
        Statistic("swap_proposed", ("pair",), "forest swaps proposed between rungs (r, r+1) since the first kept "
                                              "iteration"),
        Statistic("swap_accepted", ("pair",), "forest swaps accepted between rungs (r, r+1)"),
        Statistic("swap_rate", ("pair",), "swap_accepted / swap_proposed (NaN before the first proposal)"),
        Statistic("round_trips", (), "target -> hottest -> target journeys of the forests since the first kept "
                                     "iteration"),
        Statistic("rung_sigma", ("rung",), "sigma of each rung's state (working scale)"),
        Statistic("ladder", ("rung", "ladder_param"), "each rung's (t, s, alpha, beta); constant after tuning"),
    ),
}

TEMPERED = register(SamplerSpec(
    name="tempered", family="tempered",
    description="parallel tempering of cgm MH moves: likelihood, geometric or shrinkage ladder, DEO/SEO swaps "
                "(thesis ch. 4)",
    builders={"cart": _build_cart, "bart": _build_bart}, options=tuple(_options()), statistics=_STATISTICS,
    coords={"ladder_param": LADDER_PARAMS}, missing_split=True,
))
