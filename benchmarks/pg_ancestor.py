"""Particle Gibbs with and without ancestor sampling on a single tree (Bayesian CART), n = 200.

Plain ``pg`` with 10 particles mixes poorly on one tree against a strong signal: the particles
grown from the prior rarely beat the clamped reference, so the tree seldom changes (mean log
posterior far below the filter's). ``ancestor_sampling=True`` redraws the reference's ancestry at
every stage. Data: ``simulate_cgm1998(200, seed=1)`` (CGM 1998's example, one numeric and one
factor predictor). Per sampler: ``--chains`` chains (one thread), ``--tune`` + ``--draws``
iterations. Measured per sampler: mean log posterior of the kept draws (log prior + log
integrated likelihood of the tree, the ``log_posterior`` statistic), its ESS per 1,000 updates
(arviz-stats' bulk ESS across the chains), the share of updates that changed the tree (consecutive
draws with different log posteriors; ``kept_reference`` would overstate it, since a redrawn
ancestor may carry the same partial tree) and CPU seconds per update (the fit's process
CPU time over chains x iterations, compilation excluded by a warm-up fit). The reference is the
weighted mean log posterior of ``smc`` (4 islands of ``--smc-particles`` particles) and a long
``cgm`` run, measured in the same run.

Run from the repository root: ``python3 benchmarks/pg_ancestor.py --out
benchmarks/results/pg_ancestor.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import bartpy_suite as bps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402
from _tables import emit  # noqa: E402


def ess_bulk(x: np.ndarray) -> float:
    from arviz_stats.base import array_stats

    return float(array_stats.ess(x, chain_axis=0, draw_axis=1, method="bulk"))


def fit(df, sampler: str, options: dict | None, chains: int, tune: int, draws: int, seed: int):
    c0 = time.process_time()
    out = bps.cart("y ~ .", data=df, sampler=sampler, sampler_options=options, chains=chains, tune=tune,
                   draws=draws, seed=seed, progress=False, threads=1)
    return out, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    # The defaults are the settings of the committed results/pg_ancestor.md.
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1500)
    parser.add_argument("--particles", type=int, default=10)
    parser.add_argument("--smc-particles", type=int, default=5000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    df = bps.datasets.simulate_cgm1998(200, seed=1)
    runs = [("pg", {"particles": args.particles}),
            ("pg", {"particles": args.particles, "ancestor_sampling": True}),
            ("cgm", None)]
    for sampler, options in runs:  # warm-up: compile or load the cache
        fit(df, sampler, options, 1, 2, 2, 0)
    rows = []
    for sampler, options in runs:
        f, cpu = fit(df, sampler, options, args.chains, args.tune, args.draws, 1)
        lp = f.sample_stats["log_posterior"].values
        label = sampler + (" + ancestor sampling" if options and options.get("ancestor_sampling") else "")
        row = {"sampler": label, "mean_logpost": float(lp.mean()),
               "chain_means": [round(float(m), 1) for m in lp.mean(axis=1)],
               "ess_per_1000": 1000 * ess_bulk(lp) / lp.size,
               "changed": float(np.mean(np.diff(lp, axis=1) != 0)),
               "cpu_ms_per_update": 1000 * cpu / (args.chains * (args.tune + args.draws))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    smc, cpu = fit(df, "smc", None, 4, 0, args.smc_particles, 1)
    lp, w = smc.sample_stats["log_posterior"].values, np.asarray(smc.weights)
    ref = float((lp * w).sum() / w.sum())
    print(json.dumps({"smc_weighted_mean_logpost": ref, "cpu_s": cpu}), flush=True)

    seeds = "data `simulate_cgm1998(200, seed=1)`; every sampler's chains seed 1 (smc too), the warm-up fits seed 0"
    lines = ["# Particle Gibbs with ancestor sampling on one tree (`benchmarks/pg_ancestor.py`)", "",
             *_provenance.header(seeds),
             f"Bayesian CART on `simulate_cgm1998(200, seed=1)`; {args.chains} chains x ({args.tune} burn-in + "
             f"{args.draws} kept) updates, {args.particles} particles for pg. Reference: weighted mean log posterior "
             f"of smc, 4 islands x {args.smc_particles} particles = {ref:.1f}. "
             "The host is shared: CPU time, not wall.", "",
             "| sampler | mean log posterior | per chain | ESS of log posterior per 1,000 updates | "
             "updates that changed the tree | CPU ms per update |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        changed = f"{r['changed']:.3f}"
        lines.append(f"| {r['sampler']} | {r['mean_logpost']:.1f} | {r['chain_means']} | {r['ess_per_1000']:.1f} | "
                     f"{changed} | {r['cpu_ms_per_update']:.2f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
