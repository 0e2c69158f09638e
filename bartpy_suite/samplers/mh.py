"""The Metropolis-Hastings family: ``cgm`` (grow / prune / change / swap, thesis 3.3.4; CGM
1998) and ``grow_prune`` (its grow / prune subset), for Bayesian CART and, one move per tree
inside Bayesian backfitting, for BART.

Options: ``moves``, the move probabilities (also the models' ``moves=`` keyword). Both samplers
also accept Pratola's (2016) ``"rotate"`` and ``"perturb"`` moves (``_kernels/rotate.py``),
probability 0 by default, e.g. ``{"grow": .25, "prune": .25, "change": .2, "swap": .1,
"rotate": .1, "perturb": .1}`` (the paper's RJ-B/RJ-C counterparts). ``change_of_variable``
(default 0.1, OpenBT's ``probchv``): the probability that a perturb move at a numeric rule is
Pratola's CHANGE-OF-VARIABLE proposal between correlated predictors instead (``_kernels/rotate.py``;
the Spearman matrix of the predictors is computed once per fit, only when perturb has mass).
Fits with the perturb move draw differently from before this option existed unless it is 0.
``perturb_sweep`` (default False): each perturb move visits every internal node in turn, as OpenBT
sweeps perturb / change of variable once per iteration.
Statistics: CART records the move tried at each kept iteration and whether it was accepted;
BART the proposals and acceptances of each move type over the trees of the kept sweep.

Import rule: imports ``_kernels``, ``_validation`` and the modules of this package.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from functools import partial

import numpy as np

from .. import _validation as check
from .._kernels.bart_chain import mh_bart_sweep, run_bart_chain, run_multinomial_chain, run_sparse_bart_chain
from .._kernels.cart_chain import run_cart_chain, run_sparse_cart_chain
from .._kernels.cart_moves import MOVE_NAMES
from .._kernels.records import Dart, MhBartOut, MoveOut, Moves, RunOut, make_window
from .._kernels.rotate import change_of_variable_table
from .._kernels.sparse import S_START, new_conf
from ..errors import ArgumentError
from .forest import ForestChain
from .multinomial import MultinomialChain
from .ordinal import OrdinalMHChain
from .problems import BartProblem, CartProblem, MultinomialBartProblem, OrdinalBartProblem
from .registry import Option, SamplerSpec, Statistic, register
from .single_tree import TreeChain

MOVE_INDEX = {name: k for k, name in enumerate(MOVE_NAMES)}
CGM_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}
GROW_PRUNE_MOVES = {"grow": 0.5, "prune": 0.5}
#: Moves every MH sampler accepts beyond its defaults (weight 0 unless given).
EXTRA_MOVES = {"rotate": 0.0, "perturb": 0.0}
#: ``cgm``'s mix scaled by 0.8 with Pratola's rotate and perturb at 0.1 each: inside ``tempered``'s
#: rungs on cgm1998 it brought the runs' median R-hat of n_leaves below 1.05 at a quarter of the MH
#: steps the plain mix needed (``benchmarks/results/tempered_agreement.md``); the mixing advice
#: suggests it.
ROTATE_PERTURB_MOVES = {"grow": 0.2, "prune": 0.2, "change": 0.32, "swap": 0.08, "rotate": 0.1, "perturb": 0.1}
#: Default probability of a CHANGE-OF-VARIABLE proposal within perturb (OpenBT's R default ``probchv``).
CHANGE_OF_VARIABLE = 0.1


def move_vector(moves: dict) -> np.ndarray:
    """Move probabilities as the kernel's vector, in the order of ``MOVE_NAMES``."""
    return np.array([float(moves.get(name, 0.0)) for name in MOVE_NAMES], dtype=np.float64)


def move_flags(move_probs: np.ndarray, chv: np.ndarray | None = None) -> tuple[bool | None, np.ndarray | None]:
    """The kernels' ``change_swap`` and ``rotation`` arguments for a move vector: ``change_swap``
    True when the vector gives change or swap mass, ``rotation`` the CHANGE-OF-VARIABLE table
    ``chv`` of perturb (``rotate.change_of_variable_table``; ``[0.0, 0.0]``, plain perturb, when None)
    when it gives rotate or perturb mass; each None otherwise, and the chain's kernels are then
    compiled without those moves."""
    change_swap = move_probs[MOVE_INDEX["change"]:MOVE_INDEX["swap"] + 1]
    extra = move_probs[MOVE_INDEX["rotate"]:MOVE_INDEX["perturb"] + 1]
    rotation = None
    if (extra > 0).any():
        rotation = np.zeros(2) if chv is None else chv
    return (True if (change_swap > 0).any() else None), rotation


def perturb_table(codes: np.ndarray, is_categorical: np.ndarray, nbins: np.ndarray, perturb: float,
                  change_of_variable: float, sweep: bool = False) -> np.ndarray:
    """Perturb's CHANGE-OF-VARIABLE table of a chain whose perturb move or event has weight (or rate)
    ``perturb``: built (the predictors' Spearman matrix, once per fit) only when ``perturb`` > 0 and
    ``change_of_variable`` > 0, else ``[0.0, sweep]``: a fit that never perturbs builds no matrix."""
    return change_of_variable_table(codes, is_categorical, nbins, change_of_variable if perturb > 0.0 else 0.0,
                                    sweep=bool(sweep and perturb > 0.0))


def chv_table(codes: np.ndarray, is_categorical: np.ndarray, nbins: np.ndarray, move_probs: np.ndarray,
              change_of_variable: float, sweep: bool = False) -> np.ndarray:
    """``perturb_table`` for an MH chain's move vector (perturb's probability in it)."""
    perturb = float(move_probs[MOVE_INDEX["perturb"]]) if len(move_probs) > MOVE_INDEX["perturb"] else 0.0
    return perturb_table(codes, is_categorical, nbins, perturb, change_of_variable, sweep)


def _check_sweep(name: str, value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ArgumentError(f"sampler option {name!r} must be True or False (True: each perturb move visits every "
                        f"internal node, as OpenBT's sweep); got {value!r}")


def _check_change_of_variable(name: str, value) -> float:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 <= float(value) <= 1.0:
        return float(value)
    raise ArgumentError(f"sampler option {name!r} must be a probability in [0, 1] (the share of perturb moves at a "
                        f"numeric rule that are change-of-variable proposals; 0 switches them off); got {value!r}")


class CartChain(TreeChain):
    """One Bayesian CART chain of MH tree moves.

    Parameters
    ----------
    codes, is_categorical, nbins, y, ycls, prior
        The fields of a ``CartProblem`` (binned predictors, working response, class codes,
        the kernels' ``Prior``).
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    change_of_variable : float
        Probability of a CHANGE-OF-VARIABLE proposal within a perturb move (0: plain perturb).
    """

    def __init__(self, codes, is_categorical, nbins, y, ycls, prior, moves, rng, capacity=None, sparse=None,
                 change_of_variable: float = 0.0, perturb_sweep: bool = False):
        super().__init__(CartProblem(codes, is_categorical, nbins, y, ycls, prior, sparse=sparse), rng, capacity)
        self.move_probs = move_vector(moves)
        self.chv = chv_table(codes, is_categorical, nbins, self.move_probs, change_of_variable, perturb_sweep)
        # DART (``_kernels/sparse.py``): its settings and the split counts' work array
        self.sparse_conf = None if sparse is None else new_conf(*sparse, start=0)
        self.split_count = np.zeros(self.codes.shape[0])

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the moves' statistics)."""
        super().allocate(draws)
        self.move = np.zeros(draws, dtype=np.int8)
        self.accepted = np.zeros(draws, dtype=np.int8)
        if self.sparse_conf is not None:
            self.split_probs = np.full((draws, self.codes.shape[0]), np.nan)
            self.sparse_alpha = np.full(draws, np.nan)

    def model_draws(self, kept: int) -> dict:
        """The model's per-draw quantities, with DART's s and theta."""
        out = super().model_draws(kept)
        if self.sparse_conf is not None:
            out.update(split_probs=self.split_probs[:kept].copy(), sparse_alpha=self.sparse_alpha[:kept].copy())
        return out

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` MH iterations, recording kept draws (the store grows on demand).

        With DART, s and theta are updated from iteration ``tune // 2`` on (as for BART,
        ``BartChain.run``).
        """
        done = 0
        while done < n_iter:
            head = (self.rng, self.tree, self.data, self.target,
                    Moves(self.move_probs, *move_flags(self.move_probs, self.chv)), self.fstate, self.scratch)
            if self.sparse_conf is None:
                steps, pending = run_cart_chain(
                    *head, make_window(first_iter + done, n_iter - done, tune, thin),
                    self.cart_out(), MoveOut(self.move, self.accepted),
                )
            else:
                self.sparse_conf[S_START] = tune // 2
                steps, pending = run_sparse_cart_chain(
                    *head, Dart(self.sparse_conf, self.split_count, self.split_probs, self.sparse_alpha),
                    make_window(first_iter + done, n_iter - done, tune, thin),
                    RunOut(self.cart_out(), MoveOut(self.move, self.accepted)),
                )
            done += steps
            if pending >= 0:
                self.record_pending(pending)

    def sampler_stats(self, kept: int) -> dict:
        """``move`` (index into ``MOVE_NAMES``, -1: none possible) and ``accepted`` per draw."""
        return {"move": self.move[:kept].copy(), "accepted": self.accepted[:kept].copy()}


class BartChain(ForestChain):
    """One BART chain with an MH move per tree.

    Parameters
    ----------
    problem : BartProblem
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    change_of_variable : float
        Probability of a CHANGE-OF-VARIABLE proposal within a perturb move (0: plain perturb).
    """

    def __init__(self, problem: BartProblem, moves: dict, rng: np.random.Generator, change_of_variable: float = 0.0,
                 perturb_sweep: bool = False):
        super().__init__(problem, rng)
        self.move_probs = move_vector(moves)
        self.chv = chv_table(problem.codes, problem.is_categorical, problem.nbins, self.move_probs, change_of_variable,
                             perturb_sweep)
        # DART (``_kernels/sparse.py``): its settings and the split counts' work array
        self.sparse_conf = None if problem.sparse is None else new_conf(*problem.sparse, start=0)
        self.split_count = np.zeros(self.codes.shape[0])

    def model_buffers(self, draws: int) -> dict:
        """sigma, and with DART s (``split_probs``) and theta (``sparse_alpha``)."""
        out = super().model_buffers(draws)
        if self.sparse_conf is not None:
            out.update(split_probs=np.full((draws, self.codes.shape[0]), np.nan),
                       sparse_alpha=np.full(draws, np.nan))
        return out

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the moves' statistics)."""
        super().allocate(draws)
        self.counts = np.zeros((draws, len(MOVE_NAMES), 2), dtype=np.int64)

    def sweep(self) -> np.ndarray:
        """One backfitting sweep; returns the (move, [proposed, accepted]) counts."""
        counts = np.zeros((len(MOVE_NAMES), 2), dtype=np.int64)
        mh_bart_sweep(self.rng, self.forest, self.state, self.data, Moves(self.move_probs,
        *move_flags(self.move_probs, self.chv)), self.scratch, counts)
        return counts

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the store grows on demand).

        With DART, s and theta are updated from iteration ``tune // 2`` on, as BART3 and bartz
        switch it on: the first sweeps grow trees from stumps with splits close to uniformly
        placed, and counts from them would pull s towards whichever variables came first.
        """
        args = (self.rng, self.forest, self.state, self.data,
                Moves(self.move_probs, *move_flags(self.move_probs, self.chv)), self.scratch)
        if self.sparse_conf is None:
            self.run_kernel(run_bart_chain, args, (self.counts,), first_iter, n_iter, tune, thin)
            return
        self.sparse_conf[S_START] = tune // 2
        dart = Dart(self.sparse_conf, self.split_count, self.out["split_probs"], self.out["sparse_alpha"])
        self.run_kernel(run_sparse_bart_chain, (*args, dart, MhBartOut(self.out["sigma"], self.counts)), (),
                        first_iter, n_iter, tune, thin, in_args=("sigma", "split_probs", "sparse_alpha"))

    def sampler_stats(self, kept: int) -> dict:
        """Proposals and acceptances per move type over the trees of each kept sweep."""
        return {"n_proposed": self.counts[:kept, :, 0].copy(), "n_accepted": self.counts[:kept, :, 1].copy()}


class MultinomialMHChain(MultinomialChain):
    """One log-linear (multinomial) BART chain with an MH move per tree.

    Parameters
    ----------
    problem : MultinomialBartProblem
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    """

    def __init__(self, problem: MultinomialBartProblem, moves: dict, rng: np.random.Generator,
                 change_of_variable: float = 0.0, perturb_sweep: bool = False):
        super().__init__(problem, rng)
        self.move_probs = move_vector(moves)
        self.chv = chv_table(problem.codes, problem.is_categorical, problem.nbins, self.move_probs, change_of_variable,
                             perturb_sweep)

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the moves' statistics)."""
        super().allocate(draws)
        self.counts = np.zeros((draws, len(MOVE_NAMES), 2), dtype=np.int64)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the store grows on demand)."""
        self.run_kernel(run_multinomial_chain, (self.rng, self.forest, self.state, self.data, Moves(self.move_probs,
                        *move_flags(self.move_probs, self.chv)),
                                                self.scratch),
                        (self.counts,), first_iter, n_iter, tune, thin)

    sampler_stats = BartChain.sampler_stats


def _check_moves(defaults: dict, sampler: str, name: str, value) -> dict:
    missing = [k for k in CGM_MOVES if k not in defaults and isinstance(value, Mapping) and k in value]
    if missing:
        raise ArgumentError(
            f"sampler {sampler!r} has no {' or '.join(missing)} move ({name} got {', '.join(map(repr, missing))}): "
            f"use sampler='cgm' for grow/prune/change/swap moves, or leave them out"
        )
    # the defaults first, in their order, so a default mix normalises to the same numbers
    return check.check_moves(value, {**defaults, **{k: v for k, v in EXTRA_MOVES.items() if k not in defaults}},
                             paired=[("grow", "prune")], required=["grow"], name=name)


def _build_cart(problem: CartProblem, options: dict, rng) -> CartChain:
    p = problem
    return CartChain(p.codes, p.is_categorical, p.nbins, p.y, p.ycls, p.prior, options["moves"], rng,
                     sparse=p.sparse, change_of_variable=options["change_of_variable"],
                     perturb_sweep=options["perturb_sweep"])


def _build_bart(problem: BartProblem, options: dict, rng) -> BartChain:
    return BartChain(problem, options["moves"], rng, change_of_variable=options["change_of_variable"],
                     perturb_sweep=options["perturb_sweep"])


def _build_multinomial(problem: MultinomialBartProblem, options: dict, rng) -> MultinomialMHChain:
    return MultinomialMHChain(problem, options["moves"], rng, change_of_variable=options["change_of_variable"],
                              perturb_sweep=options["perturb_sweep"])


def _build_ordinal(problem: OrdinalBartProblem, options: dict, rng) -> OrdinalMHChain:
    chv = chv_table(problem.codes, problem.is_categorical, problem.nbins, move_vector(options["moves"]),
                    options["change_of_variable"], options["perturb_sweep"])
    return OrdinalMHChain(problem, options["moves"], rng, move_vector, partial(move_flags, chv=chv))


_STATISTICS = {
    "cart": (
        Statistic("move", (), "move type tried at the kept iteration (index into the move coordinate; -1: none)"),
        Statistic("accepted", (), "1 if that move was accepted"),
    ),
    "bart": (
        Statistic("n_proposed", ("move",), "proposals of each move type over the trees of the sweep"),
        Statistic("n_accepted", ("move",), "acceptances of each move type over the trees of the sweep"),
    ),
}
_STATISTICS["bart_multinomial"] = _STATISTICS["bart"]
_STATISTICS["bart_ordinal"] = _STATISTICS["bart"] + (
    Statistic("cutpoint_accepted", (), "share of the sweep's cutpoint MH steps accepted (ordinal BART)"),)


def _mh_spec(name: str, description: str, defaults: dict) -> SamplerSpec:
    moves = Option("moves", dict(defaults), partial(_check_moves, defaults, name),
                   f"move probabilities by name (default {defaults}); the models' moves= keyword sets the same")
    return SamplerSpec(
        name=name, family="mh", description=description,
        builders={"cart": _build_cart, "bart": _build_bart, "bart_multinomial": _build_multinomial,
                  "bart_ordinal": _build_ordinal},
        options=(moves, Option("change_of_variable", CHANGE_OF_VARIABLE, _check_change_of_variable,
                               "probability that a perturb move at a numeric rule is a change-of-variable proposal "
                               f"between correlated predictors (Pratola 2016; default {CHANGE_OF_VARIABLE}, OpenBT's "
                               "probchv; 0: plain perturb)"),
                 Option("perturb_sweep", False, _check_sweep,
                        "True: each perturb move visits every internal node in turn (OpenBT's sweep), instead of "
                        "one node drawn uniformly")),
        statistics=_STATISTICS, coords={"move": MOVE_NAMES}, missing_split=_mh_missing_split,
    )


def _mh_missing_split(options) -> str | None:
    """The four CGM moves draw the missing-value bit of na_action='split'; rotate and perturb
    (``_kernels/rotate.py``) do not, so they must be off."""
    moves = options.get("moves") or {}
    if any(moves.get(name, 0.0) > 0.0 for name in EXTRA_MOVES):
        return ("its 'rotate' and 'perturb' moves do not carry the missing-value bit of a rule; "
                "leave them out of moves=")
    return None


CGM = register(_mh_spec("cgm", "grow/prune/change/swap Metropolis-Hastings (thesis 3.3.4; CGM 1998)", CGM_MOVES))
GROW_PRUNE = register(_mh_spec("grow_prune", "the grow/prune subset of cgm", GROW_PRUNE_MOVES))
