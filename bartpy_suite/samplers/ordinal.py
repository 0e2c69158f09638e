"""``OrdinalMHChain``: a cumulative-probit (ordinal) BART chain with an MH move per tree, its
cutpoints and latents updated by ``_kernels/ordinal.py``.

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import numpy as np

from .._kernels.cart_moves import MOVE_NAMES
from .._kernels.ordinal import N_SETTINGS, O_GIBBS, O_PRIOR_SD, O_STEP, O_STEPS, OrdinalState, run_ordinal_chain
from .._kernels.records import Moves, OrdinalOut
from .forest import ForestChain
from .problems import OrdinalBartProblem


def initial_latents(ycls: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """A latent inside every row's class interval (cut[y], cut[y + 1]]: one below the upper end
    of the first class, one above the lower end of the last, the midpoint otherwise (two classes:
    -1 and +1, probit BART's start)."""
    lo, hi = cut[ycls], cut[ycls + 1]
    return np.where(np.isinf(lo), hi - 1.0, np.where(np.isinf(hi), lo + 1.0, 0.5 * (lo + hi)))


class OrdinalMHChain(ForestChain):
    """One ordinal BART chain.

    Parameters
    ----------
    problem : OrdinalBartProblem
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    move_vector, move_flags : callable
        ``mh.move_vector`` and ``mh.move_flags`` (passed in: ``mh`` imports this module).
    """

    def __init__(self, problem: OrdinalBartProblem, moves: dict, rng: np.random.Generator, move_vector, move_flags):
        super().__init__(problem, rng)  # probit mode: a zero forest, latents and resid = z - mu0 reset below
        self.move_probs = move_vector(moves)
        self._flags = move_flags(self.move_probs)
        ycls = np.ascontiguousarray(np.asarray(problem.y), dtype=np.int64)
        k = int(problem.n_classes)
        cut = np.empty(k + 1)
        cut[0], cut[k] = -np.inf, np.inf
        cut[1:k] = problem.cutpoints
        settings = np.zeros(N_SETTINGS)
        settings[O_PRIOR_SD] = problem.cutpoint_sd
        settings[O_STEP] = problem.cutpoint_step
        settings[O_STEPS] = problem.cutpoint_steps
        settings[O_GIBBS] = float(bool(problem.gibbs))
        self.ordinal = OrdinalState(ycls=ycls, cut=cut, proposal=cut.copy(), settings=settings,
                                    tally=np.zeros(2, dtype=np.int64))
        z = self.state.z
        z[:] = initial_latents(ycls, cut)
        self.state.resid[:] = z - problem.offset

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the moves' statistics)."""
        super().allocate(draws)
        self.counts = np.zeros((draws, len(MOVE_NAMES), 2), dtype=np.int64)
        self.cut_accepted = np.zeros(draws)

    def model_buffers(self, draws: int) -> dict:
        """Per-draw model quantities besides the trees' sizes: the K - 1 finite cutpoints."""
        return {"cutpoints": np.full((draws, self.ordinal.cut.shape[0] - 2), np.nan)}

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the store grows on demand)."""
        stats = OrdinalOut(self.out["cutpoints"], self.counts, self.cut_accepted)
        self.run_kernel(run_ordinal_chain, (self.rng, self.forest, self.state, self.ordinal, self.data,
                        Moves(self.move_probs, *self._flags), self.scratch, stats),
                        (), first_iter, n_iter, tune, thin, in_args=("cutpoints",))

    def sampler_stats(self, kept: int) -> dict:
        """Proposals and acceptances per move type, and the share of cutpoint MH steps accepted."""
        return {"n_proposed": self.counts[:kept, :, 0].copy(), "n_accepted": self.counts[:kept, :, 1].copy(),
                "cutpoint_accepted": self.cut_accepted[:kept].copy()}
