"""The continuous-time birth-death sampler ``ctmc`` (Mohammadi, Pratola & Kaptein, JMLR 2020)
for Bayesian CART and BART.

CART: a weighted jump chain. Every kept draw is a tree the process visited, with the leaf
parameters (and the common sigma) drawn from their full conditionals, and weight
``1 / Lambda(T)``, the expected holding time (CT-MCMC eq. 4, 12): ``fit.weights`` normalises
it and every ``Fit`` summary uses it. The raw frequencies of the jump chain follow
``pi * Lambda``, not pi; never use them unweighted.

BART: inside Bayesian backfitting each tree runs the process for a fixed time against its
partial residual (the state at a fixed time is invariant for the tree's full conditional;
a single jump is not). BART draws are therefore equally weighted.

Options (``sampler_options``): ``time``, the time per tree visit in BART ("auto": during
tuning, set after each sweep to 1 / the sweep's mean total rate, about one jump per visit,
then fixed; or a positive number); ``rotate`` and ``perturb`` (CT-B / CT-C): False (default),
True (rate ``DEFAULT_EVENT_RATE``) or a positive rate at which a rotate (perturb) event fires,
each event one Metropolis-Hastings step of Pratola's move (``_kernels/rotate.py``; see
``_kernels/ctmc.py`` for why the rate is a constant and not the paper's share of Lambda);
``change_of_variable`` (default 0.1, OpenBT's ``probchv``), the probability that a perturb event
at a numeric rule is Pratola's CHANGE-OF-VARIABLE proposal between correlated predictors (the
predictors' Spearman matrix is computed once per fit, only when perturb events fire). Fits with
perturb events draw differently from before this option existed unless it is 0.
``perturb_sweep`` (default False): each perturb event visits every internal node in turn (OpenBT's
schedule; the event kernel is then pi-invariant but not reversible, which stationarity of the
process does not need).

Statistics: CART ``weight`` (1 / Lambda), ``total_rate`` (Lambda) and ``event`` (the jump
that reached the recorded tree); BART ``jumps`` (mean jumps per tree visit), ``total_rate``
(mean Lambda at the start of a visit) and ``time`` (the time per visit used).

Import rule: imports ``_kernels``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._kernels import tree as _tree
from .._kernels.ctmc import (
    EVENT_NAMES,
    MAX_FACTOR_LEVELS,
    FactorLevelsError,
    _leaf_rule_setup,
    _subset_mask,
    _var_birth_rates,
    apply_birth,
    apply_death,
    compute_all_rates,
    factor_partition_rates,
    mh_event_rate,
    new_ctmc_state,
    total_rate,
)
from .._kernels.ctmc_chain import ctmc_bart_sweep, run_ctmc_bart_chain, run_ctmc_cart_chain
from .._kernels.records import CtmcBartOut, CtmcCartOut, CtmcClock, ForestOut, RunOut, make_window
from ..errors import ArgumentError
from .forest import ForestChain
from .mh import CHANGE_OF_VARIABLE, _check_change_of_variable, _check_sweep, perturb_table
from .problems import BartProblem, CartProblem
from .registry import Option, SamplerSpec, Statistic, register
from .single_tree import TreeChain

#: Rate of a rotate or perturb event with ``rotate=True`` / ``perturb=True``: about one event per
#: unit time, against birth and death rates of at most 1 per candidate rule.
DEFAULT_EVENT_RATE = 1.0


def event_rates(rotate: float, perturb: float, chv: np.ndarray | None = None) -> np.ndarray | None:
    """The kernels' ``mh_rates``: the rotate and perturb rates followed by perturb's
    CHANGE-OF-VARIABLE table ``chv`` (``rotate.change_of_variable_table``; ``[0.0, 0.0]``, plain perturb,
    when None), or None when both rates are 0, so that the chain's kernels compile without those
    events (``_kernels/ctmc.py``)."""
    if rotate == 0.0 and perturb == 0.0:
        return None
    return np.concatenate([np.array([float(rotate), float(perturb)]), np.zeros(2) if chv is None else chv])


def _ctmc_state(chain, names: tuple, n_rows: int, capacity: int, n_classes: int):
    """The process' state for ``chain``; a factor with more levels than ``ctmc`` enumerates is
    refused with an error naming its column (``names``: the problem's ``predictor_names``)."""
    try:
        return new_ctmc_state(n_rows, capacity, chain.nbins, chain.is_categorical, n_classes)
    except FactorLevelsError as err:
        name = f"column {names[err.predictor]!r}" if err.predictor < len(names) else f"predictor {err.predictor}"
        raise ArgumentError(
            f"sampler 'ctmc': {name} is a factor with {err.levels} levels, more than the {MAX_FACTOR_LEVELS} it "
            f"supports (every birth rate at a leaf walks the 2^(L-1) - 1 partitions of the L levels present there); "
            f"use sampler='cgm' or 'grow_prune' for this data, or merge levels of {name} down to at most "
            f"{MAX_FACTOR_LEVELS}") from None


class CtmcCartChain(TreeChain):
    """One Bayesian CART chain of the continuous-time birth-death process (weighted draws).

    Parameters
    ----------
    problem : CartProblem
    rng : numpy.random.Generator
    rotate, perturb : float
        Rates of the rotate and perturb events (0: none).
    change_of_variable : float
        Probability that a perturb event at a numeric rule is a CHANGE-OF-VARIABLE proposal.
    """

    def __init__(self, problem: CartProblem, rng: np.random.Generator, capacity: int | None = None,
                 rotate: float = 0.0, perturb: float = 0.0, change_of_variable: float = 0.0,
                 perturb_sweep: bool = False):
        super().__init__(problem, rng, capacity)
        self.mh_rates = event_rates(rotate, perturb, perturb_table(problem.codes, problem.is_categorical,
                                                                   problem.nbins, perturb, change_of_variable,
                                                                   perturb_sweep))
        self.cs = _ctmc_state(self, problem.predictor_names, self.y.shape[0], self.capacity, self.n_classes)

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's, weights, rates and events)."""
        super().allocate(draws)
        self.weight = np.zeros(draws)
        self.rate = np.zeros(draws)
        self.event = np.zeros(draws, dtype=np.int8)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` jumps, recording kept draws (the store grows on demand)."""
        done = 0
        while done < n_iter:
            steps, pending = run_ctmc_cart_chain(
                self.rng, self.tree, self.data, self.target,
                self.fstate, self.scratch, self.cs, make_window(first_iter + done, n_iter - done, tune, thin),
                RunOut(self.cart_out(), CtmcCartOut(self.weight, self.rate, self.event)), self.mh_rates,
            )
            done += steps
            if pending >= 0:
                self.record_pending(pending)

    def sampler_stats(self, kept: int) -> dict:
        """``weight`` (1 / Lambda), ``total_rate`` (Lambda) and ``event`` per kept draw."""
        return {"weight": self.weight[:kept].copy(), "total_rate": self.rate[:kept].copy(),
                "event": self.event[:kept].copy()}

    # -- the rates themselves (tests) ----------------------------------------------------------
    def _kernel_args(self):
        return (self.data, self.target)

    def total_rate(self) -> float:
        """Lambda of the current tree: the sum of all event rates (1 / expected holding time)."""
        compute_all_rates(self.tree, *self._kernel_args(), self.fstate, self.scratch, self.cs)
        return float(total_rate(self.tree, self.cs) + mh_event_rate(self.tree, self.mh_rates))

    def events(self) -> list[tuple[str, object, float]]:
        """Every event of the current tree as ``(kind, canonical tree reached, rate)``.

        The tree is left as it was. Slow (one tree copy per event): for tests.
        """
        data, target = self._kernel_args()
        xt, is_cat, nbins, y, ycls = data
        compute_all_rates(self.tree, data, target, self.fstate, self.scratch, self.cs)
        saved = ([a.copy() for a in self.tree], self.fstate.copy())

        def restore():
            self.tree = type(self.tree)(*[a.copy() for a in saved[0]])
            self.fstate[:] = saved[1]

        out = []
        t = self.tree
        for node in range(t.var.shape[0]):
            if t.var[node] == _tree.LEAF:
                for v in range(xt.shape[0]):
                    if self.cs.rate_var[node, v] <= 0.0:
                        continue
                    if is_cat[v]:
                        size = max((1 << (int(nbins[v]) - 1)) - 1, 1)
                        codes, rates = np.zeros(size, dtype=np.int64), np.zeros(size)
                        n_present = factor_partition_rates(self.tree, node, v, data, target,
                                                           self.fstate, self.scratch, self.cs, codes, rates)
                        n_sub = (1 << (n_present - 1)) - 1
                        rules = [(float(r), int(_subset_mask(self.cs, n_present, g)))
                                 for g, r in zip(codes[:n_sub], rates[:n_sub])]
                    else:
                        n_vars, log_split = _leaf_rule_setup(self.tree, node, data, target, self.scratch)
                        _var_birth_rates(self.tree, node, v, n_vars, log_split, data, target,
                                         self.fstate, self.scratch, self.cs)
                        rules = [(float(self.cs.rates[k]), k) for k in range(int(nbins[v]))]
                    for rate, cut in rules:
                        if rate > 0.0:
                            apply_birth(self.tree, node, v, np.int64(cut), data, target, self.fstate, self.scratch)
                            out.append(("birth", self.get_tree(), rate))
                            restore()
            elif t.var[node] >= 0 and self.cs.rate_death[node] > 0.0:
                rate = float(self.cs.rate_death[node])
                apply_death(self.tree, node, y, ycls, target, self.fstate, self.scratch)
                out.append(("death", self.get_tree(), rate))
                restore()
            t = self.tree
        return out


class CtmcBartChain(ForestChain):
    """One BART chain whose tree update runs the birth-death process for a fixed time.

    Parameters
    ----------
    problem : BartProblem
    time : float or "auto"
        Time per tree visit (see the module docstring).
    rng : numpy.random.Generator
    rotate, perturb : float
        Rates of the rotate and perturb events (0: none).
    change_of_variable : float
        Probability that a perturb event at a numeric rule is a CHANGE-OF-VARIABLE proposal.
    """

    def __init__(self, problem: BartProblem, time, rng: np.random.Generator, rotate: float = 0.0,
                 perturb: float = 0.0, change_of_variable: float = 0.0, perturb_sweep: bool = False):
        super().__init__(problem, rng)
        self.mh_rates = event_rates(rotate, perturb, perturb_table(problem.codes, problem.is_categorical,
                                                                   problem.nbins, perturb, change_of_variable,
                                                                   perturb_sweep))
        self.adapt = time == "auto"
        # The starting time before adaptation: about one jump per visit for a stump with a few
        # hundred available rules at rate ~1 would need ~1e-3; adaptation replaces it.
        self.horizon = np.array([1e-3 if self.adapt else float(time)])
        self.cs = _ctmc_state(self, problem.predictor_names, self.resid.shape[0], self.capacity, 1)

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the process' statistics)."""
        super().allocate(draws)
        self.jumps = np.zeros(draws)
        self.rate = np.zeros(draws)
        self.time = np.zeros(draws)

    def sweep(self) -> tuple[float, float]:
        """One backfitting sweep at the current time per visit; returns (jumps, sum of Lambda)."""
        out = np.zeros(2)
        ctmc_bart_sweep(self.rng, self.forest, self.state, self.data, self.scratch,
                        self.cs, self.horizon[0], out, self.mh_rates)
        return float(out[0]), float(out[1])

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the store grows on demand)."""
        done = 0
        while done < n_iter:
            steps, pending = run_ctmc_bart_chain(
                self.rng, self.forest, self.state, self.data, self.scratch, self.cs,
                CtmcClock(self.horizon, bool(self.adapt)),
                make_window(first_iter + done, n_iter - done, tune, thin),
                RunOut(ForestOut(self.out["n_leaves"], self.out["depth"], self.store, self.scratch.nodes, self.order),
                       CtmcBartOut(self.out["sigma"], self.jumps, self.rate, self.time)),
                self.mh_rates,
            )
            done += steps
            if pending >= 0:
                self.record_pending(pending)

    def sampler_stats(self, kept: int) -> dict:
        """Mean jumps per tree visit, mean starting Lambda and the time per visit, per kept sweep."""
        return {"jumps": self.jumps[:kept].copy(), "total_rate": self.rate[:kept].copy(),
                "time": self.time[:kept].copy()}


def _check_time(name: str, value):
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value) and value > 0:
        return float(value)
    raise ArgumentError(f"sampler option {name!r} must be 'auto' or a positive number (time per tree visit in BART); "
                        f"got {value!r}")


def _check_event_rate(name: str, value) -> float:
    if isinstance(value, bool):
        return DEFAULT_EVENT_RATE if value else 0.0
    if isinstance(value, numbers.Real) and np.isfinite(value) and value >= 0:
        return float(value)
    raise ArgumentError(f"sampler option {name!r} must be True, False or a non-negative number (the rate of "
                        f"{name} events); got {value!r}")


def _build_cart(problem: CartProblem, options: dict, rng) -> CtmcCartChain:
    if options["time"] != "auto":
        raise ArgumentError("sampler option 'time' applies to BART only (a CART fit records every jump with its "
                            "expected holding time); remove it")
    return CtmcCartChain(problem, rng, rotate=options["rotate"], perturb=options["perturb"],
                         change_of_variable=options["change_of_variable"], perturb_sweep=options["perturb_sweep"])


def _build_bart(problem: BartProblem, options: dict, rng) -> CtmcBartChain:
    return CtmcBartChain(problem, options["time"], rng, rotate=options["rotate"], perturb=options["perturb"],
                         change_of_variable=options["change_of_variable"], perturb_sweep=options["perturb_sweep"])


CTMC = register(SamplerSpec(
    name="ctmc",
    family="ctmc",
    description="continuous-time birth-death MCMC with Rao-Blackwellized weights (Mohammadi, Pratola & Kaptein 2020)",
    builders={"cart": _build_cart, "bart": _build_bart},
    options=(Option("time", "auto", _check_time,
                    "BART only: time the process runs per tree visit; 'auto' (default) adapts it during tuning "
                    "to about one jump per visit, then fixes it"),
             Option("rotate", 0.0, _check_event_rate,
                    f"rotate events (CT-B): False (default), True (rate {DEFAULT_EVENT_RATE}) or their rate; each is "
                    "one Metropolis-Hastings rotate step (Pratola 2016)"),
             Option("perturb", 0.0, _check_event_rate,
                    f"perturb events (CT-C): False (default), True (rate {DEFAULT_EVENT_RATE}) or their rate; each is "
                    "one Metropolis-Hastings perturb step of one split rule"),
             Option("change_of_variable", CHANGE_OF_VARIABLE, _check_change_of_variable,
                    "probability that a perturb event at a numeric rule is a change-of-variable proposal between "
                    f"correlated predictors (Pratola 2016; default {CHANGE_OF_VARIABLE}, OpenBT's probchv; 0: plain "
                    "perturb)"),
             Option("perturb_sweep", False, _check_sweep,
                    "True: each perturb event visits every internal node in turn (OpenBT's sweep)")),
    statistics={
        "cart": (
            Statistic("weight", (), "1 / Lambda: expected holding time of the recorded tree (CT-MCMC eq. 4, 12)"),
            Statistic("total_rate", (), "Lambda: total rate of all events (birth, death, rotate, perturb) of the tree"),
            Statistic("event", (), "event that reached the recorded tree (index into the event coordinate)"),
        ),
        "bart": (
            Statistic("jumps", (), "mean number of jumps per tree visit in the sweep"),
            Statistic("total_rate", (), "mean total event rate Lambda of the trees at the start of their visit"),
            Statistic("time", (), "time the process ran per tree visit"),
        ),
    },
    coords={"event": EVENT_NAMES},
    weighted=True,
))
