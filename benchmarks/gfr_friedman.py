"""Grow-from-root (``sampler="gfr"``) and GFR warm starts (``init="gfr"``) against the default BART
sampler on Friedman #1 (issue 32, first part).

Command (from the repository root):

    PYTHONPATH=$PWD python3 benchmarks/gfr_friedman.py

writes ``benchmarks/results/gfr_friedman.md``. Data: x ~ U(0, 1)^10, f = 10 sin(pi x0 x1) +
20 (x2 - 0.5)^2 + 10 x3 + 5 x4 (Friedman 1991; x5-x9 are noise), y = f + N(0, 1); ``--n``
(default 10,000) training rows and 1,000 test rows from ``numpy.random.default_rng([1991,
data seed])``, data seed 0. Every fit: ``bps.BART`` with 200 trees and the default priors, 4
chains on the machine's cores, MCMC seed 1:

* ``grow_prune`` (the default): tune 1000, draws 1000;
* ``gfr`` alone: 40 sweeps per chain of which 15 tuning (XBART's Python defaults, spec 13);
* ``init="gfr"`` + ``grow_prune``: 5 GFR sweeps (the default, max(5, chains)), chain c from
  sweep 4 - c, then tune ``--warm-tune`` (default 100), draws 1000.

Reported per fit: RMSE of the posterior mean of f on the test rows, coverage and mean width of
the 95% credible intervals of f there (``fit.predict(kind="mean")``, equal-tailed), the posterior
mean of sigma (true 1), CPU seconds of the fit (``time.process_time``: all threads of the
process, compile excluded by a small warm-up fit of each configuration first) and wall seconds.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import bartpy_suite as bps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tables import emit, markdown_table  # noqa: E402

OUT = Path(__file__).parent / "results" / "gfr_friedman.md"
N_TEST, P, DATA_SEED, FIT_SEED, CHAINS = 1000, 10, 0, 1, 4


def friedman(n: int, seed: int) -> dict:
    """``n`` training rows and ``N_TEST`` test rows of Friedman #1 with 5 noise predictors."""
    rng = np.random.default_rng([1991, seed])
    x = rng.uniform(size=(n + N_TEST, P))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    y = f + rng.standard_normal(len(f))
    return {"x": x[:n], "y": y[:n], "x_test": x[n:], "f_test": f[n:]}


def configs(warm_tune: int) -> dict:
    """The three fits' keywords (besides trees, chains, seed)."""
    return {
        "grow_prune (default)": dict(sampler="grow_prune", tune=1000, draws=1000),
        "gfr alone": dict(sampler="gfr", tune=15, draws=25),
        f"init='gfr' + grow_prune, tune {warm_tune}": dict(sampler="grow_prune", init="gfr", tune=warm_tune,
                                                            draws=1000),
    }


def run(name: str, kw: dict, data: dict) -> dict:
    """Fit one configuration and summarise it."""
    model = bps.BART(trees=200, chains=CHAINS, seed=FIT_SEED, progress=False, check_mixing=False, **kw)
    cpu, wall = time.process_time(), time.perf_counter()
    fit = model.fit(data["x"], data["y"])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    pred = fit.predict(data["x_test"], kind="mean", level=0.95)
    mean, lo, hi = (pred[c].to_numpy() for c in ("mean", "lower", "upper"))
    f = data["f_test"]
    out = {
        "config": name,
        "rmse_f": float(np.sqrt(np.mean((mean - f) ** 2))),
        "coverage": float(np.mean((lo <= f) & (f <= hi))),
        "width": float(np.mean(hi - lo)),
        "sigma": float(fit.posterior["sigma"].values.mean()),
        "cpu_s": cpu,
        "wall_s": wall,
    }
    print(out, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--warm-tune", type=int, default=100)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    data = friedman(args.n, DATA_SEED)
    small = friedman(300, 99)
    for kw in configs(args.warm_tune).values():  # compile (or load) every kernel outside the timings
        bps.BART(trees=10, chains=1, seed=0, progress=False, check_mixing=False,
                 **{**kw, "tune": 5, "draws": 5}).fit(small["x"], small["y"])
    rows = [run(name, kw, data) for name, kw in configs(args.warm_tune).items()]
    lines = [
        "# GFR and GFR warm starts on Friedman #1 (issue 32)",
        "",
        f"Command: `PYTHONPATH=$PWD python3 benchmarks/gfr_friedman.py --n {args.n} --warm-tune {args.warm_tune}`",
        "",
        f"Settings: Friedman #1 (p = {P}, 5 noise predictors, noise sd 1), n = {args.n:,} training rows, "
        f"{N_TEST:,} test rows (data seed {DATA_SEED}, `default_rng([1991, {DATA_SEED}])`); `bps.BART`, "
        f"200 trees, default priors, {CHAINS} chains, seed {FIT_SEED}. Intervals: 95% equal-tailed credible "
        "intervals of f at the test rows. CPU s: `time.process_time` of the fit (all threads; kernels compiled "
        "before). `gfr alone`: 40 sweeps per chain, 15 of them tuning; `init='gfr'`: 5 GFR sweeps (chain c from "
        "sweep 4 - c), not kept.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}; run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC "
        "(the machine was shared with other jobs: times are indicative).",
        "",
    ]
    lines += markdown_table(
        ["configuration", "RMSE of f", "95% coverage of f", "mean width", "mean sigma", "CPU s", "wall s"],
        [[r["config"], f"{r['rmse_f']:.3f}", f"{r['coverage']:.3f}", f"{r['width']:.3f}", f"{r['sigma']:.3f}",
          f"{r['cpu_s']:.1f}", f"{r['wall_s']:.1f}"] for r in rows])
    emit(lines, args.out)


if __name__ == "__main__":
    main()
