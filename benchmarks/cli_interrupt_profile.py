"""Where the time goes after Ctrl-C on a long fit: profile the steps after sampling.

Command: ``PYTHONPATH=$PWD python3 benchmarks/cli_interrupt_profile.py [--model bart] [--seconds 60]
[--draws 100000] [--chains 4]``

Fits ``y ~ .`` to the shipped ``cgm1998`` data (800 rows) with the model's defaults (seed 1,
tune 100), sends this process SIGINT after ``--seconds`` of wall time (as Ctrl-C does), lets the
model keep the draws made so far, then does what ``python -m bartpy_suite fit ... --out`` does
(print the summary, save the fit), all under cProfile. Prints the kept draws, the CPU and wall
seconds of each step and the functions with the largest cumulative time. The numbers depend on
the machine and its load: the header of the output says both.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import signal
import tempfile
import threading
import time
import warnings

import bartpy_suite as bps
from bartpy_suite import datasets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bart", choices=("cart", "bart"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}; model {args.model}, {args.chains} chains, "
          f"SIGINT after {args.seconds:.0f} s wall")
    df = datasets.load("cgm1998")
    fit_fn = getattr(bps, args.model)
    fit_fn("y ~ .", data=df, chains=1, draws=5, tune=5, seed=0, progress=False)  # compile first
    timer = threading.Timer(args.seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    profile = cProfile.Profile()
    steps = {}

    def step(name, fn):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        steps[name] = (time.process_time() - c0, time.perf_counter() - w0)
        return out

    with warnings.catch_warnings(record=True) as caught, tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("always")
        timer.start()
        profile.enable()
        fit = step("fit (sampling until SIGINT, then building the Fit)",
                   lambda: fit_fn("y ~ .", data=df, chains=args.chains, draws=args.draws, tune=100, seed=1,
                                  progress=False))
        step("summary", fit.summary)
        step("to_netcdf", lambda: fit.to_netcdf(os.path.join(tmp, "fit.nc")))
        profile.disable()
        timer.cancel()
    print(f"kept draws per chain: {fit.posterior.sizes['draw']}; log_likelihood group: "
          f"{'log_likelihood' in fit.idata.children}")
    for w in caught:
        print(f"warning: {str(w.message)[:160]}")
    for name, (cpu, wall) in steps.items():
        print(f"{name}: {cpu:.1f} CPU s, {wall:.1f} wall s")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
