"""How large the largest R-hat of many monitored quantities is by chance, for chains that mix.

The mixing check (``bartpy_suite/posterior/mixing.py``) grades f(x) at 24 training rows and
sigma: 25 quantities. For chains that sample the same stationary distribution, each rank-normalised
split R-hat (Vehtari et al. 2021) exceeds 1 by an amount of the order of 1 / (ESS per split chain),
and the largest of 25 exceeds it further. This script measures that: 4 chains x 1000 draws of
stationary Gaussian AR(1) processes with coefficient phi (all chains from the same law, so any
R-hat above 1 is chance), 25 independent quantities per replication, 200 replications, seed 0.
ESS per chain is about 1000 (1 - phi) / (1 + phi).

Run from the repository root::

    python3 benchmarks/first_hour_rhat_chance.py --out benchmarks/results/first_hour_rhat_chance.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
from arviz_stats.base import array_stats
from scipy.signal import lfilter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tables import emit, markdown_table  # noqa: E402

CHAINS, DRAWS, QUANTITIES, REPS, SEED = 4, 1000, 25, 200, 0
PHIS = (0.5, 0.8, 0.9, 0.95, 0.98)


def ar1(rng: np.random.Generator, phi: float, shape: tuple[int, ...]) -> np.ndarray:
    """Stationary AR(1) series with unit innovations along the last axis."""
    e = rng.normal(size=shape)
    e[..., 0] /= np.sqrt(1 - phi**2)  # start in the stationary law
    return lfilter([1.0], [1.0, -phi], e, axis=-1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(SEED)
    rows = []
    for phi in PHIS:
        x = ar1(rng, phi, (REPS, QUANTITIES, CHAINS, DRAWS))
        rhat = np.array(array_stats.rhat(x, chain_axis=-2, draw_axis=-1, method="rank"))
        ess = np.array(array_stats.ess(x, chain_axis=-2, draw_axis=-1, method="bulk")) / CHAINS
        largest = rhat.max(axis=1)
        rows.append([phi, f"{np.median(ess):.0f}", f"{np.median(rhat):.4f}", f"{np.median(largest):.4f}",
                     f"{np.quantile(largest, 0.95):.4f}", f"{largest.max():.4f}",
                     f"{np.mean(largest > 1.01):.2f}", f"{np.mean(largest > 1.05):.2f}"])
    lines = ["# Largest R-hat of 25 quantities by chance (chains that mix)", "",
             "Command: `python3 benchmarks/first_hour_rhat_chance.py"
             + (f" --out {args.out}`" if args.out else "`") + "  ",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"numpy {np.__version__}  ",
             f"Settings: {CHAINS} chains x {DRAWS} draws of stationary AR(1) (coefficient phi), {QUANTITIES} "
             f"independent quantities, {REPS} replications, seed {SEED}; arviz-stats' rank-normalised split R-hat "
             "and bulk ESS.", ""]
    lines += markdown_table(["phi", "median bulk ESS per chain", "median R-hat", "largest of 25: median",
                             "95%", "max", "P(largest > 1.01)", "P(largest > 1.05)"], rows)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
