"""Memory, throughput and file size of the compact draw store (issue 6).

Two measurements, each run in a fresh subprocess so its peak memory is its own:

* a long one-chain CART fit on ``cgm1998`` (``--cart-draws`` kept draws, default 1,000,000, 1,000
  tuning iterations): wall time, end-to-end draws per second (sampling, recording and building the
  posterior), peak resident memory, and the kernel's MH steps per second on the same problem
  (``cart_speed.kernel_steps_per_second``) for the ratio the issue asks about;
* a saved BART fit: 4 chains x 1,000 draws (1,000 tuning), 200 trees, on scikit-learn's diabetes
  data (442 rows, 10 predictors): size of the netCDF file, and that loading it predicts exactly.

``--baseline-src DIR`` runs the same measurements with another checkout's package (e.g. a
``git worktree`` of the commit before the store) so the two are side by side in one run.

Run: ``python3 -m pip install scikit-learn && python3 benchmarks/draw_store.py --out
benchmarks/results/draw_store.md`` (``--baseline-src DIR`` for the baseline column).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CART_RUN = r"""
import json, resource, sys, time
import bartpy_suite as bps
df = bps.datasets.load("cgm1998")
bps.cart("y ~ x1 + x2", data=df, chains=1, draws=5, tune=5, seed=0, progress=False)   # compile / load cache
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0, c0 = time.perf_counter(), time.process_time()
fit = bps.cart("y ~ x1 + x2", data=df, chains=1, draws=DRAWS, tune=1000, seed=1, progress=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "cpu": cpu, "draws": DRAWS, "peak_mb": peak, "before_mb": base,
                  "mean_leaves": float(fit.posterior["n_leaves"].mean())}))
"""

BART_RUN = r"""
import json, os, tempfile, time
import numpy as np
from sklearn.datasets import load_diabetes
import bartpy_suite as bps
df = load_diabetes(as_frame=True).frame.rename(columns={"target": "y"})
t0 = time.perf_counter()
fit = bps.bart("y ~ .", data=df, trees=200, chains=CHAINS, draws=DRAWS, tune=DRAWS, seed=1, progress=False)
wall = time.perf_counter() - t0
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "fit.nc")
    fit.to_netcdf(path)
    size = os.path.getsize(path)
    back = bps.load(path)
    before, after = fit.predict(df.head(50))["mean"].to_numpy(), back.predict(df.head(50))["mean"].to_numpy()
    exact = bool(np.array_equal(before, after))
print(json.dumps({"wall": wall, "file_mb": size / 2**20, "exact": exact, "chains": CHAINS, "draws": DRAWS}))
"""


def run(code: str, src: str | None, **values) -> dict:
    """Run ``code`` (with its upper-case placeholders replaced) in a fresh interpreter that
    imports ``bartpy_suite`` from ``src`` (default: this checkout)."""
    for key, value in values.items():
        code = code.replace(key.upper(), repr(value))
    src = src or os.path.dirname(HERE)
    # ``python -c`` puts the working directory first on sys.path: run there, and put it on
    # PYTHONPATH too, so the package comes from ``src`` whatever is installed
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=src, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


SEEDS = ("CART fit seed 1 on `cgm1998` (its warm-up fit seed 0); kernel rate: chains `default_rng(r)` for repeat r "
         "(`cart_speed.kernel_steps_per_second`); BART fit seed 1 on scikit-learn's diabetes data")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cart-draws", type=int, default=1_000_000)
    parser.add_argument("--bart-chains", type=int, default=4)
    parser.add_argument("--bart-draws", type=int, default=1000)
    parser.add_argument("--baseline-src", help="import bartpy_suite from this folder for a second column")
    parser.add_argument("--out", help="also write the report (a provenance header, then the printed tables) here")
    args = parser.parse_args(argv)

    sys.path.insert(0, HERE)
    import _provenance
    from _tables import write_atomic
    from cart_speed import kernel_steps_per_second

    report: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        report.append(line)

    steps = kernel_steps_per_second("cgm", 200_000, 3)
    sources = [("this checkout", None)] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
    say(f"Kernel (this checkout): {steps:,.0f} MH steps per CPU second on cgm1998 (cgm, one chain, nothing "
        "recorded)")
    say(f"\nLong CART fit: 1 chain x {args.cart_draws:,} draws (+1,000 tuning) on cgm1998")
    say("(draws per CPU second: the chain runs in one thread; CPU time is less disturbed by other load)")
    say(f"{'package':<14} {'wall s':>8} {'cpu s':>7} {'draws/cpu s':>12} {'/ kernel':>9} {'peak MB':>9} "
        f"{'before MB':>10}")
    for label, src in sources:
        r = run(CART_RUN, src, draws=args.cart_draws)
        rate = r["draws"] / r["cpu"]
        say(f"{label:<14} {r['wall']:>8.1f} {r['cpu']:>7.1f} {rate:>12,.0f} {rate / steps:>9.2f} "
            f"{r['peak_mb']:>9,.0f} {r['before_mb']:>10,.0f}")
    say(f"\nSaved BART fit: diabetes (442 rows), 200 trees, {args.bart_chains} chains x {args.bart_draws:,} draws")
    say(f"{'package':<14} {'fit s':>8} {'file MB':>9} {'exact predictions after load':>30}")
    for label, src in sources:
        r = run(BART_RUN, src, chains=args.bart_chains, draws=args.bart_draws)
        say(f"{label:<14} {r['wall']:>8.1f} {r['file_mb']:>9.1f} {str(r['exact']):>30}")
    if args.out:
        baseline = f"; baseline: the package in {args.baseline_src}" if args.baseline_src else ""
        lines = ["# Compact draw store (issue 6)", "",
                 *_provenance.header(SEEDS, argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
                                     run_note="wall times depend on the machine's other load, CPU seconds and "
                                              "memory less" + baseline),
                 "```", *"\n".join(report).splitlines(), "```", ""]
        write_atomic(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
