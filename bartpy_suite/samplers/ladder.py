"""Ladder adaptation of the ``tempered`` sampler (during ``tune`` only, then frozen).

A ladder is a path through rung parameters: the piecewise-linear path through the initial
ladder's rows ``(t, 1 - s, alpha, beta)`` at positions ``u = 0, 1/(K-1), ..., 1``. The rungs sit
at positions ``u_0 = 0 < u_1 < ... < u_{K-1} = 1`` along it. After a round of tuning iterations,
the swap rejection rates ``rho_r`` of the pairs give the communication barrier
``Lambda(u_r) = sum_{i < r} rho_i``, interpolated linearly in u (Syed, Bouchard-Cote,
Deligiannidis & Doucet 2019, section 5.1: the non-reversible PT schedule equalises the rejection
rates). The new positions are ``u_r = Lambda^-1(r Lambda(1) / (K - 1))``. The same scheme serves
every ladder kind: for the likelihood and geometric ladders the path is one in t, for the
shrinkage ladder a path in (alpha, beta) through the initial pairs (our own choice: the thesis
tuned its pairs by hand).

Import rule: numpy only.
"""

from __future__ import annotations

import numpy as np

#: Adaptation rounds end at these fractions of ``tune`` (rounds double in length).
ROUND_ENDS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2)
#: Smallest rejection rate counted per pair, so that a path segment never gets zero barrier
#: (its rungs would otherwise be merged into one point).
MIN_REJECTION = 0.01


def round_boundaries(tune: int) -> list[int]:
    """Iterations (within ``tune``) at which the ladder is re-placed."""
    out = sorted({int(tune * f) for f in ROUND_ENDS if int(tune * f) >= 8})
    return [b for b in out if 0 < b < tune]


def new_positions(positions: np.ndarray, rejection: np.ndarray) -> np.ndarray:
    """Positions with equal communication barrier between neighbouring rungs.

    Parameters
    ----------
    positions : ndarray, shape (K,)
        Current rung positions along the path, increasing from 0 to 1.
    rejection : ndarray, shape (K - 1,)
        Swap rejection rate of each adjacent pair over the last round.

    Returns
    -------
    ndarray, shape (K,)
    """
    rho = np.maximum(np.asarray(rejection, dtype=float), MIN_REJECTION)
    barrier = np.concatenate([[0.0], np.cumsum(rho)])
    k = len(positions)
    levels = np.linspace(0.0, barrier[-1], k)
    out = np.interp(levels, barrier, positions)
    out[0], out[-1] = positions[0], positions[-1]
    return out


def path_rows(initial: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Ladder rows at ``positions`` along the piecewise-linear path through ``initial`` (K, q)
    placed at ``0, 1/(K-1), ..., 1``."""
    k = initial.shape[0]
    grid = np.linspace(0.0, 1.0, k)
    return np.column_stack([np.interp(positions, grid, initial[:, j]) for j in range(initial.shape[1])])
