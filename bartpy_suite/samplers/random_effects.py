"""BART with Gaussian random effects (``bps.bart("y ~ x1 + (1 | g)", ...)``): the problem kind
``bart_re`` and its chain, run by the MH samplers ``cgm`` and ``grow_prune``.

The chain is an MH BART chain (``mh.BartChain``) whose sweep adds the random-effects Gibbs block
(``_kernels/random_effects.py``) between the trees and sigma (``_kernels/bart_re_chain.py``).
Importing this module adds the builder for ``bart_re`` to those two samplers' registry entries;
every other sampler refuses the kind in ``TreeModel._sample`` with the list of those that fit it.

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels.bart_re_chain import ReOut, run_bart_re_chain
from .._kernels.random_effects import new_random_effects
from .._kernels.records import ForestOut, Moves, make_window
from .forest import SweepByRun
from .mh import CGM, GROW_PRUNE, BartChain, move_flags
from .problems import BartProblem

#: The posterior variables of the random effects, per kept draw (on the working scale).
RE_VARIABLES = ("re_alpha", "re_xi", "re_sigma_xi")


@dataclass(frozen=True)
class BartReProblem(BartProblem):
    """A BART fit with Gaussian random effects: a ``BartProblem`` (regression) and the groups.

    Attributes
    ----------
    group : ndarray of int64, shape (n,)
        Group code 0..n_groups-1 of each row.
    basis : ndarray of float64, shape (n, K)
        The random-effects basis W (a column of ones for a random intercept, then the slope
        variables).
    n_groups : int
    re_a, re_b : float
        sigma_k^2 ~ IG(re_a, re_b) (``_kernels/random_effects.py``).
    re_alpha_var : float
        Prior variance of each working parameter alpha_k.
    intercept : int
        The basis column of the random intercept (-1: none), for the level move.
    """

    model: ClassVar[str] = "bart_re"
    group: np.ndarray = None
    basis: np.ndarray = None
    n_groups: int = 0
    re_a: float = 1.0
    re_b: float = 1.0
    re_alpha_var: float = 1.0
    intercept: int = -1


class BartReChain(SweepByRun, BartChain):
    """One BART + random effects chain with an MH move per tree.

    Parameters
    ----------
    problem : BartReProblem
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    """

    def __init__(self, problem: BartReProblem, moves: dict, rng: np.random.Generator, change_of_variable: float = 0.0,
                 perturb_sweep: bool = False):
        super().__init__(problem, moves, rng, change_of_variable=change_of_variable, perturb_sweep=perturb_sweep)
        self.re = new_random_effects(problem.group, problem.basis, int(problem.n_groups), a=float(problem.re_a),
                                     b=float(problem.re_b), alpha_var=float(problem.re_alpha_var),
                                     intercept=int(problem.intercept))

    def model_buffers(self, draws: int) -> dict:
        """sigma and the random effects' alpha, xi and sqrt(diag Sigma_xi)."""
        g, k = self.re.xi.shape
        return {"sigma": np.full(draws, np.nan), "re_alpha": np.full((draws, k), np.nan),
                "re_xi": np.full((draws, g, k), np.nan), "re_sigma_xi": np.full((draws, k), np.nan)}

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the store grows on demand)."""
        moves = Moves(self.move_probs, *move_flags(self.move_probs, self.chv))
        done = 0
        while done < n_iter:
            o = self.out
            steps, pending = run_bart_re_chain(
                self.rng, self.forest, self.state, self.data, moves, self.scratch, self.re,
                make_window(first_iter + done, n_iter - done, tune, thin),
                ReOut(o["sigma"], self.counts, o["re_alpha"], o["re_xi"], o["re_sigma_xi"]),
                ForestOut(o["n_leaves"], o["depth"], self.store, self.scratch.nodes, self.order))
            done += steps
            if pending >= 0:
                self.record_pending(pending)


def _build_bart_re(problem: BartReProblem, options: dict, rng) -> BartReChain:
    return BartReChain(problem, options["moves"], rng, change_of_variable=options["change_of_variable"],
                       perturb_sweep=options["perturb_sweep"])


# The MH samplers fit the kind; their statistics are those of BART.
for _spec in (CGM, GROW_PRUNE):
    _spec.builders["bart_re"] = _build_bart_re
    _spec.statistics["bart_re"] = _spec.statistics["bart"]
