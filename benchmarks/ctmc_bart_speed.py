"""BART speed of ``ctmc`` against ``grow_prune`` and ``cgm`` in the same run: Friedman #1, 200 trees.

Data: p = 10, x ~ U(0, 1), f = 10 sin(pi x1 x2) + 20 (x3 - .5)^2 + 10 x4 + 5 x5, y = f + N(0, 1),
n = 1,000 and 10,000 training rows (``--sizes``), a test set of 500 rows. One chain, one thread,
package defaults (``ctmc``: ``time="auto"``, about one jump per tree visit after tuning; its
rotate/perturb events off unless ``--events``). Kernels are compiled by a small warm-up fit.

Measured: ``CPU s/sweep`` = CPU seconds of the whole fit (``time.process_time``, one thread; the
machine is shared, so CPU time, not wall time) / (tune + draws) (sampling and building the
posterior; the same overhead for every sampler); ``ESS f`` = median over the test rows of the
bulk ESS (arviz) of f(x) over the kept draws; ``ESS f / CPU s`` = that over the fit's CPU seconds;
``RMSE`` of the posterior mean of f against the noiseless f; ``jumps/visit`` (ctmc, mean over
the kept sweeps). Output: a markdown table (``--out``).

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/ctmc_bart_speed.py --out
benchmarks/results/ctmc_bart_speed.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import arviz_stats
import numpy as np
import pandas as pd

import bartpy_suite as bps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402
from _tables import emit  # noqa: E402

SEEDS = ("data from one `default_rng(0)` stream (the warm-up rows, then per size the training and test rows); "
         "every fit seed 1, the warm-up fits seed 0")


def friedman(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    X = rng.uniform(size=(n, 10))
    f = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    df = pd.DataFrame(X, columns=[f"x{k + 1}" for k in range(10)])
    df["y"] = f + rng.normal(size=n)
    return df, f


def one(sampler: str, options: dict, train, test, f_test, tune: int, draws: int) -> dict:
    t0 = time.process_time()
    w0 = time.perf_counter()
    fit = bps.bart("y ~ .", data=train, trees=200, sampler=sampler, sampler_options=options or None, chains=1,
                   tune=tune, draws=draws, seed=1, progress=False, threads=1)
    sec = time.process_time() - t0
    wall = time.perf_counter() - w0
    fs = fit.function_samples(test)  # (draws, rows)
    ess = np.array([float(arviz_stats.ess(fs[None, :, j], method="bulk")) for j in range(fs.shape[1])])
    row = {"s/sweep": sec / (tune + draws), "ESS f": float(np.median(ess)), "seconds": sec, "wall": wall,
           "RMSE": float(np.sqrt(np.mean((fs.mean(axis=0) - f_test) ** 2)))}
    row["ESS f / s"] = row["ESS f"] / sec
    stats = fit.idata["sample_stats"]
    row["jumps/visit"] = float(stats["jumps"].values.mean()) if "jumps" in stats else float("nan")
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--iters", default="100+200,50+100", help="tune+draws per size")
    ap.add_argument("--events", action="store_true", help="also ctmc with rotate and perturb events (rate 1 each)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    cli = list(argv if argv is not None else sys.argv[1:])
    rng = np.random.default_rng(0)
    runs = [("grow_prune", "grow_prune", {}), ("cgm", "cgm", {}), ("ctmc", "ctmc", {})]
    if args.events:
        runs.append(("ctmc", "ctmc + rotate + perturb", {"rotate": 1.0, "perturb": 1.0}))
    warm, _ = friedman(200, rng)
    for sampler, _, options in runs:
        bps.bart("y ~ .", data=warm, trees=20, sampler=sampler, sampler_options=options or None, chains=1, tune=2,
                 draws=2, seed=0, progress=False, threads=1)
    lines = ["# BART speed: ctmc against grow_prune and cgm (Friedman #1, 200 trees, one chain, one thread)", "",
             *_provenance.header(SEEDS, argv=[__file__, *cli]),
             "| n | tune+draws | sampler | CPU s/sweep | ESS f (median) | ESS f / CPU s | RMSE | jumps/visit | CPU s "
             "| wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n, iters in zip([int(s) for s in args.sizes.split(",")], args.iters.split(",")):
        tune, draws = (int(k) for k in iters.split("+"))
        train, _ = friedman(n, rng)
        test, f_test = friedman(500, rng)
        for sampler, label, options in runs:
            r = one(sampler, options, train, test, f_test, tune, draws)
            lines.append(f"| {n} | {tune}+{draws} | {label} | {r['s/sweep']:.3f} | {r['ESS f']:.0f} | "
                         f"{r['ESS f / s']:.2f} | {r['RMSE']:.3f} | {r['jumps/visit']:.2f} | {r['seconds']:.0f} | "
                         f"{r['wall']:.0f} |")
            print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
