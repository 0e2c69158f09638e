"""Does ``python -m bartpy_suite demo`` mix? Its fit over three seeds: r_hat, bulk ESS, CPU time.

Command: ``PYTHONPATH=$PWD python3 benchmarks/demo_mixing.py [--seeds 1 2 3] [--out benchmarks/results/demo_mixing.md]``

Runs :func:`bartpy_suite.cli.demo_fit` (the demo's own settings: sampler, chains, draws, tune and
tree prior, read from ``bartpy_suite/cli.py``) once per seed after one small fit that compiles
the sampler, and writes a Markdown table of each scalar quantity's r_hat and bulk ESS, whether
the package's post-fit mixing check warned, and the CPU seconds of the fit (all threads; the
compilation excluded). CPU time, not wall time: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

from bartpy_suite import cli
from bartpy_suite.errors import MixingWarning

TARGET_RHAT = 1.01
TARGET_ESS = 400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "demo_mixing.md"))
    args = parser.parse_args()
    cli.demo_fit(seed=0, draws=20, tune=20, progress=False, check_mixing=False)  # compile
    rows = []
    for seed in args.seeds:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.process_time()
            fit = cli.demo_fit(seed=seed, progress=False)
            cpu = time.process_time() - start
        summary = fit.summary()
        warned = any(issubclass(w.category, MixingWarning) for w in caught)
        for name, row in summary.iterrows():
            rows.append((seed, name, row["mean"], row["r_hat"], row["ess_bulk"], warned, cpu))
        print(f"seed {seed}: {cpu:.1f} CPU s, mixing warning: {warned}")
        print(summary[["mean", "r_hat", "ess_bulk"]].to_string(), flush=True)
    passed = all(r[3] < TARGET_RHAT and r[4] > TARGET_ESS for r in rows if r[1] in ("sigma", "n_leaves"))
    lines = [
        "# Mixing of `python -m bartpy_suite demo` (`benchmarks/demo_mixing.py`)",
        "",
        f"`PYTHONPATH=$PWD python3 benchmarks/demo_mixing.py --seeds {' '.join(map(str, args.seeds))}`. "
        f"The demo's settings (`bartpy_suite/cli.py`): `bps.cart({cli.DEMO_FORMULA!r})` on `cgm1998` (800 rows), "
        f"sampler `{cli.DEMO_SAMPLER}` (its default options), {cli.DEMO_CHAINS} chains x {cli.DEMO_DRAWS} draws "
        f"after {cli.DEMO_TUNE} tuning draws, tree prior {cli.DEMO_PRIOR}. "
        f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end (a shared machine: CPU seconds, not wall). "
        f"CPU s: the fit after compilation (all threads).",
        "",
        f"Target: r_hat < {TARGET_RHAT} and bulk ESS > {TARGET_ESS} for `sigma` and `n_leaves` on every seed: "
        f"{'met' if passed else 'NOT met'}.",
        "",
        "| seed | quantity | mean | r_hat | bulk ESS | mixing warning | CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {s} | {n} | {m:.3f} | {r:.4f} | {e:.0f} | {'yes' if w else 'no'} | {c:.1f} |"
              for s, n, m, r, e, w, c in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
