"""Prediction speed: 5,000 new rows from 1,000 posterior draws of 200 trees (issue 11, section 4).

Friedman #1 (n = 1,000 training rows, p = 10), BART with 200 trees and the CGM (2010) priors
of ``_peers.py``, one chain of 200 + 1,000 sweeps; then the 5,000 test rows are predicted.
Every package runs in its own process with all of the machine's threads for prediction (the
fits themselves are single-threaded, as in ``bart_vs_peers.py``).

Measured, for bartpy_suite (median of 3 calls after one warm-up call, wall and process CPU
seconds):

- ``f draws``: ``fit.function_samples(test)``, the (draws, rows) matrix of f;
- ``predict``: ``fit.predict(test)``, posterior mean and 95% interval of f (what a user calls);
- ``predictive``: ``fit.predict(test, kind="predictive")``, with the noise draws;
- ``row walk (before)``: the traversal this package used before (each row walks each tree
  from the root, one branch per split rule), kept here as the reference of the same run.

stochtree (``BARTModel.predict(..., type="posterior")``) and bartz (``gbart.predict``) give
the (draws, rows) matrix of f; their times are one call (bartz after a warm-up call on the
same shapes, so JAX's compilation is not counted), from ``_peers.py``'s runners.

Run from the root of the repository; ``--peer-python`` is the interpreter of the benchmark
environment that has the peers (see README.md). bartpy_suite runs under the interpreter that
runs this script, so that its numba cache is the one the package uses::

    python3 benchmarks/predict_speed.py --peer-python /work/benchvenv/bin/python \
        --out benchmarks/results/predict_speed.md

Without the peers installed, ``--packages bartpy_suite`` runs ours alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUNE, DRAWS, N_TRAIN = 200, 1000, 1000
PACKAGES = ("bartpy_suite", "stochtree", "bartz")


def _threads_env() -> None:
    """All threads for prediction (``_peers`` defaults everything to one thread)."""
    n = str(os.cpu_count() or 1)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[name] = n
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=true"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _timed(fn, repeat: int = 3) -> dict:
    fn()  # warm-up: loads the compiled kernels, builds the cached tree store
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}


def _row_walk_reference():
    """The traversal used before: every row walks every tree from the root."""
    from numba import njit, prange

    from bartpy_suite._kernels.tree import goes_left

    @njit(nogil=True)
    def find_leaf(codes, i, is_cat, var, cut, right, root):
        node = root
        v = var[node]
        while v >= 0:
            node = node + 1 if goes_left(codes[v, i], cut[node], is_cat[v]) else right[node]
            v = var[node]
        return node

    @njit(parallel=True)
    def sum_of_trees(codes, is_cat, var, cut, right, value, roots, out):
        n_samples, n_trees = roots.shape
        for s in prange(n_samples):
            row = out[s]
            row[:] = 0.0
            for t in range(n_trees):
                root = roots[s, t]
                for i in range(codes.shape[1]):
                    row[i] += value[find_leaf(codes, i, is_cat, var, cut, right, root)]

    return sum_of_trees


def child_bartpy_suite(data, prior) -> dict:
    import numpy as np
    from _peers import ALPHA, BETA, MAX_CUTS, MIN_LEAF, NU, TREES, K, Q, _frame

    import bartpy_suite as bps

    df = _frame(data["x"], data["y"])
    test = _frame(data["x_test"])
    kw = dict(trees=TREES, chains=1, alpha=ALPHA, beta=BETA, k=K, max_cuts=MAX_CUTS, min_leaf_size=MIN_LEAF, nu=NU,
              q=Q, sigma_hat=prior["sigma_hat"], progress=False, threads=1)
    fit = bps.bart("y ~ .", data=df, draws=DRAWS, tune=TUNE, seed=1, **kw)
    out = {
        "f draws": _timed(lambda: fit.function_samples(test)),
        "predict": _timed(lambda: fit.predict(test)),
        "predictive": _timed(lambda: fit.predict(test, kind="predictive")),
    }
    walk = _row_walk_reference()
    codes = fit.prepare(test)[0]
    store = fit.tree_store
    f_old = np.empty((store["roots"].shape[0], codes.shape[1]))

    def old():
        walk(codes, fit.binned.is_categorical, store["node_var"], store["node_cut"], store["right"],
             store["node_value"], store["roots"], f_old)

    out["row walk (before)"] = _timed(old)
    out["identical to before"] = bool(np.array_equal(f_old, fit.sum_of_trees(codes)))
    out["draws x trees"] = [int(fit.posterior.sizes["draw"]), TREES]
    out["stored nodes"] = int(store["node_var"].shape[0])
    return out


def child(package: str, result: str) -> None:
    _threads_env()
    sys.path.insert(0, str(HERE))
    from _peers import cgm_prior, friedman_data, run_bartz, run_stochtree

    data = friedman_data(N_TRAIN)
    prior = cgm_prior(data["x"], data["y"], probit=False)
    if package == "bartpy_suite":
        record = child_bartpy_suite(data, prior)
    else:
        runner = run_stochtree if package == "stochtree" else run_bartz
        got = runner("friedman", data, prior, TUNE, DRAWS)
        record = {"f draws": {"wall": got["predict_s"], "cpu": None}, "draws x trees": list(got["f"].shape)}
    record["threads"] = os.cpu_count()
    Path(result).write_text(json.dumps(record, indent=1))


def table(records: dict) -> str:
    ours = records.get("bartpy_suite", {})
    lines = ["| package | what | wall s | cpu s | wall / bartpy_suite predict |", "|---|---|---|---|---|"]
    ref = ours.get("predict", {}).get("wall")
    for package, rec in records.items():
        if "error" in rec:
            lines.append(f"| {package} | failed: {rec['error']} | | | |")
            continue
        for what, t in rec.items():
            if not isinstance(t, dict):
                continue
            cpu = "" if t["cpu"] is None else f"{t['cpu']:.3f}"
            ratio = f"{t['wall'] / ref:.2f}" if ref else ""
            lines.append(f"| {package} | {what} | {t['wall']:.3f} | {cpu} | {ratio} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", default=",".join(PACKAGES))
    ap.add_argument("--peer-python", default=sys.executable, help="interpreter for stochtree and bartz")
    ap.add_argument("--out", help="write the table here as markdown (and the records as .json)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.result)
        return 0
    records = {}
    for package in args.packages.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "r.json"
            python = sys.executable if package == "bartpy_suite" else args.peer_python
            run = subprocess.run([python, __file__, "--child", package, "--result", str(result)],
                                 capture_output=True, text=True)
            if run.returncode != 0 or not result.exists():
                records[package] = {"error": (run.stderr.strip().splitlines() or ["no output"])[-1]}
            else:
                records[package] = json.loads(result.read_text())
        print(package, json.dumps(records[package]), flush=True)
    text = table(records)
    print(text)
    if args.out:
        sys.path.insert(0, str(HERE))
        import _provenance
        from _peers import DATA_SEED, MCMC_SEED, N_TEST, TREES
        from _tables import write_atomic

        seeds = (f"training and test data `_peers.friedman_data({N_TRAIN})` (seed {DATA_SEED}); every package's fit "
                 f"seed {MCMC_SEED} (through `_peers`; ours directly)")
        settings = (f"Friedman #1, n = {N_TRAIN:,}, {N_TEST:,} rows predicted, {TREES} trees, 1 chain of {TUNE} + "
                    f"{DRAWS:,} sweeps; each package in its own process with all {os.cpu_count()} threads; "
                    "each timing the median of 3 calls after a warm-up call")
        lines = [f"# Prediction speed: {N_TEST:,} rows from {DRAWS:,} draws x {TREES} trees", "",
                 *_provenance.header(seeds, settings=settings,
                                     argv=[__file__, *(sys.argv[1:] if argv is None else argv)]),
                 text, ""]
        write_atomic(args.out, "\n".join(lines))
        write_atomic(Path(args.out).with_suffix(".json"), json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
