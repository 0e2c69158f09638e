"""Chains and predictions on a dask cluster against the threaded run (issue 12).

Friedman #1 (n rows, p = 10), BART with ``--trees`` trees, ``--chains`` chains of
``--tune`` + ``--draws`` sweeps. Three ways to run the same fit with the same seed:

- ``threads``: the default (``executor=None``), one thread per chain in this process;
- ``dask 1 worker`` / ``dask 2 workers``: a ``LocalCluster`` of worker processes with one
  thread each (``executor=client``), so one worker runs one chain at a time.

For each: chains per second (chains / wall seconds of the whole fit call: shipping the data,
building, running and gathering the chains, building the Fit) and whether the draws are
bit-identical to the threaded run. A warm-up fit on every cluster first loads the compiled
kernels in the workers; its time is reported apart (``worker warm-up s``).

Prediction: ``--rows`` new rows, the posterior mean and 95% interval of f.
``threads`` is ``fit.predict(frame)`` on a pandas frame (numba's threads over the draws);
the dask lines are ``fit.predict(ddf).compute()`` on a dask DataFrame of ``--partitions``
partitions. Rows per second = rows / wall seconds.

The timings are wall-clock: the cluster's work happens in other processes. Other load on the
machine changes them; the threaded line is measured in the same run as the reference.

    python3 benchmarks/dask_scaling.py --out benchmarks/results/dask_scaling.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402
from _tables import write_atomic  # noqa: E402

SEEDS = ("training rows `friedman(n, 1)`, new rows `friedman(rows, 2)` (`default_rng` of that seed); every fit "
         "seed 3 (the threaded reference, the dask fits and the warm-up fits)")


def friedman(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 10))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    df = pd.DataFrame(x, columns=[f"x{j}" for j in range(10)])
    df["y"] = f + rng.normal(size=n)
    return df


def same_draws(a, b) -> bool:
    for group in ("posterior", "sample_stats", "trees"):
        left, right = a.idata[group].to_dataset(), b.idata[group].to_dataset()
        if sorted(left.data_vars) != sorted(right.data_vars):
            return False
        if not all(np.array_equal(left[k].values, right[k].values, equal_nan=True) for k in left.data_vars):
            return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--tune", type=int, default=100)
    ap.add_argument("--draws", type=int, default=200)
    # The default is the committed results/dask_scaling.md's setting.
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import bartpy_suite as bps

    df = friedman(args.n, 1)
    new = friedman(args.rows, 2).drop(columns="y")
    kw = dict(trees=args.trees, chains=args.chains, tune=args.tune, draws=args.draws, seed=3, progress=False)
    bps.bart("y ~ .", data=df.head(200), **{**kw, "tune": 2, "draws": 2}).predict(new.head(10))  # warm-up

    records = []
    t0 = time.perf_counter()
    reference = bps.bart("y ~ .", data=df, **kw)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference.predict(new)
    pred_s = time.perf_counter() - t0
    records.append(dict(run="threads", fit_s=fit_s, chains_per_s=args.chains / fit_s, predict_s=pred_s,
                        rows_per_s=args.rows / pred_s, identical=True, warmup_s=0.0))
    print(records[-1], flush=True)

    for workers in (int(w) for w in args.workers.split(",")):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            t0 = time.perf_counter()
            bps.bart("y ~ .", data=df.head(200), executor=client,
                     **{**kw, "tune": 2, "draws": 2}).predict(dd.from_pandas(new.head(100), npartitions=workers)
                                                              ).compute()
            warm_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            fit = bps.bart("y ~ .", data=df, executor=client, **kw)
            fit_s = time.perf_counter() - t0
            ddf = dd.from_pandas(new, npartitions=args.partitions)
            t0 = time.perf_counter()
            fit.predict(ddf).compute()
            pred_s = time.perf_counter() - t0
            records.append(dict(run=f"dask {workers} worker{'s' if workers > 1 else ''}", fit_s=fit_s,
                                chains_per_s=args.chains / fit_s, predict_s=pred_s, rows_per_s=args.rows / pred_s,
                                identical=same_draws(fit, reference), warmup_s=warm_s))
            print(records[-1], flush=True)

    ref = records[0]
    lines = [
        "# Chains and predictions on a dask cluster (issue 12)",
        "",
        *_provenance.header(SEEDS, argv=[__file__, *(sys.argv[1:] if argv is None else argv)]),
        f"Friedman #1, n = {args.n}, {args.trees} trees, {args.chains} chains of {args.tune} + {args.draws} sweeps; "
        f"prediction of {args.rows:,} rows ({args.partitions} partitions for dask); {os.cpu_count()} CPUs.",
        "",
        "| run | fit s | chains/s | vs threads | draws identical | predict s | rows/s | vs threads "
        "| worker warm-up s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['run']} | {r['fit_s']:.2f} | {r['chains_per_s']:.3f} "
            f"| {r['chains_per_s'] / ref['chains_per_s']:.2f} "
            f"| {r['identical']} | {r['predict_s']:.2f} | {r['rows_per_s']:,.0f} | "
            f"{r['rows_per_s'] / ref['rows_per_s']:.2f} | {r['warmup_s']:.1f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_atomic(args.out, text + "\n")
        write_atomic(Path(args.out).with_suffix(".json"), json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
