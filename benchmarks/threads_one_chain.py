"""One BART chain on one and two threads (issue 32, "One chain on all cores"): seconds per sweep,
and where a sweep's time goes.

Data: Friedman #1 (``10 sin(pi x1 x2) + 20 (x3 - .5)^2 + 10 x4 + 5 x5``) with 5 pure-noise
columns (p = 10 predictors ~ U(0, 1)), noise sd 1, data seed ``DATA_SEED``. The chain is BART's
default set-up (200 trees, ``max_cuts=100``) with the ``grow_prune`` sampler, chain seed
``CHAIN_SEED``, built exactly as ``bps.BART(...).fit`` builds it (the fit is stopped where it would
run the chains) and advanced with ``chain.run`` directly, nothing kept.

For each n, after ``warm`` sweeps (trees grown from stumps), the rounds run in alternation on the
same chain: ``sweeps`` sweeps on 1 thread, then ``sweeps`` on 2 threads (``numba.set_num_threads``,
thread-local, as ``models/_runner.py`` sets it), ``rounds`` times. The draws do not depend on the
threads, so both settings advance one chain. A second chain built with the row-block passes
switched off (``BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS`` above n: the sequential passes of
``_kernels/backfit.py``, today's code below the threshold) runs ``sweeps`` sweeps in each round too,
on 1 thread, to show what the block layout costs on one thread. CPU seconds are the process's
(all threads, ``time.process_time``), wall seconds ``time.perf_counter``; each cell is the median
over rounds of seconds per sweep.

The split of a sweep (``--profile``, at the first n): numba has no profiler, so variants of the
sweep are timed on the same chain: the full sweep; the sweep without the MH tree moves (the
``T + 1`` residual exchanges, leaf terms, leaf draws and sigma); sigma's draw alone (one pass for
the sum of squares); ``map_leaves`` of every tree (charged per accepted move, the trees whose
partition changed). The MH moves' share is the rest.

The cost of one exchange pass (``--pass-calls``, or ``--pass-calls-only``): ``row_parallel.exchange_fits_blocks``
called from Python on 7 leaves over n rows (random leaves and values, seed 0), ``reps`` calls per
round, 1 and 2 threads in alternation, 3 rounds, median per call; in child processes on numba's
``omp`` layer with ``OMP_WAIT_POLICY`` unset (``row_parallel.start_threads`` then sets PASSIVE
while numba loads libgomp) and with ``OMP_WAIT_POLICY=`` (an empty value, which counts as the
user's and which libgomp rejects with a warning and then uses its default: threads spin a while
before they sleep), and on the ``workqueue`` layer (``NUMBA_THREADING_LAYER``).

The machine has 2 cores shared with other work: the load average (``os.getloadavg``) is recorded
at the start and the end of each n.

Usage::

    PYTHONPATH=. python3 benchmarks/threads_one_chain.py --out benchmarks/results/threads_one_chain.md
    PYTHONPATH=. python3 benchmarks/threads_one_chain.py --sizes 100000 --rounds 2 --out /tmp/x.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from unittest import mock

import numba
import numpy as np

from bartpy_suite._kernels.backfit import begin_sweep, draw_noise, finish_tree, map_leaves, prepare_tree, tree_view
from bartpy_suite._kernels.jit import kernel
from bartpy_suite._kernels.row_parallel import block_layout, exchange_fits_blocks, set_threads
from bartpy_suite.models.bart import BART
from bartpy_suite.samplers.forest import ROW_BLOCKS_ENV

DATA_SEED = 2010
CHAIN_SEED = 1
TREES = 200
P = 10
#: n: (warm-up sweeps, sweeps per round)
SWEEPS = {100_000: (20, 5), 300_000: (8, 3), 1_000_000: (3, 2)}


def friedman(n: int, seed: int = DATA_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Friedman #1 with ``P - 5`` noise columns, noise sd 1."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, P))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    return x, f + rng.normal(size=n)


class _Built(Exception):
    def __init__(self, chains):
        super().__init__("chains built")
        self.chains = chains


def build_chain(x: np.ndarray, y: np.ndarray, blocks: bool):
    """The chain ``bps.BART(trees=200, sampler="grow_prune", chains=1, seed=CHAIN_SEED).fit(x, y)``
    would run: with the row-block passes (``blocks``) or the sequential ones."""
    def capture(self, chains, problem=None):
        raise _Built(chains)

    saved = os.environ.get(ROW_BLOCKS_ENV)
    os.environ[ROW_BLOCKS_ENV] = "1" if blocks else str(10 ** 15)
    try:
        with mock.patch.object(BART, "_run", capture):
            BART(trees=TREES, sampler="grow_prune", chains=1, seed=CHAIN_SEED, progress=False).fit(x, y)
    except _Built as built:
        chain = built.chains[0]
    finally:
        if saved is None:
            del os.environ[ROW_BLOCKS_ENV]
        else:
            os.environ[ROW_BLOCKS_ENV] = saved
    chain.allocate(1)
    chain.done = 0
    return chain


def advance(chain, sweeps: int) -> None:
    """``sweeps`` sweeps, none kept."""
    chain.run(chain.done, sweeps, 10 ** 12, 1)
    chain.done += sweeps


def timed(fn) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


# -- the profile's variants of a sweep --------------------------------------------------------------
@kernel
def sweeps_without_moves(rng, forest, state, n_iter):
    """``n_iter`` sweeps with every tree left as it is: the residual exchanges, leaf terms, leaf
    draws and sigma of a sweep, without the MH moves."""
    for _ in range(n_iter):
        begin_sweep(state, forest)
        for j in range(forest.var.shape[0]):
            prepare_tree(state, forest, j)
            finish_tree(rng, state, forest, j, False)
        draw_noise(rng, state)


@kernel
def noise_draws(rng, state, n_iter):
    """``n_iter`` draws of sigma (the sum of squares pass)."""
    for _ in range(n_iter):
        draw_noise(rng, state)


@kernel
def map_every_tree(forest, state, n_iter):
    """``n_iter`` times ``map_leaves`` of every tree (the sequential pass)."""
    for _ in range(n_iter):
        for j in range(forest.var.shape[0]):
            map_leaves(tree_view(forest, j), state.leaf_of[j])


def profile(chain, sweeps: int, threads: int) -> dict:
    """CPU and wall seconds per sweep of each variant on ``threads`` threads."""
    set_threads(threads)
    sweeps_without_moves(chain.rng, chain.forest, chain.state, 0)  # compile or load them first
    noise_draws(chain.rng, chain.state, 0)
    map_every_tree(chain.forest, chain.state, 0)
    out = {"full": timed(lambda: advance(chain, sweeps))}
    chain.run(0, 1, 0, 1)  # one more sweep, kept as draw 0: its moves' statistics
    chain.done += 1
    accepted = float(chain.counts[0, :, 1].sum())
    out["without moves"] = timed(lambda: sweeps_without_moves(chain.rng, chain.forest, chain.state, sweeps))
    out["sigma"] = timed(lambda: noise_draws(chain.rng, chain.state, sweeps))
    maps = timed(lambda: map_every_tree(chain.forest, chain.state, sweeps))
    out["map_leaves"] = tuple(accepted * v / chain.n_trees for v in maps)
    out = {k: tuple(v / sweeps for v in t) for k, t in out.items()}
    out["accepted"] = accepted
    return out


PASS_CALLS = {100_000: 200, 1_000_000: 30}  # n: calls per round
#: --pass-calls: numba's threading layer and OMP_WAIT_POLICY of each child (None: not set)
LAYERS = (("omp", None), ("omp", ""), ("workqueue", None))


def pass_calls_child(n: int) -> dict:
    """Per-call CPU and wall microseconds of the exchange pass on 1 and 2 threads (median of 3
    rounds), in this process."""
    cap = 31
    rng = np.random.default_rng(0)
    leaf_in = rng.integers(1, 8, n).astype(np.uint8)
    leaf_out = rng.integers(1, 8, n).astype(np.uint8)
    value_in, value_out, resid = rng.normal(size=cap), rng.normal(size=cap), rng.normal(size=n)
    sums, cursor = block_layout(n, cap)
    perm = np.zeros(0, np.int32)
    reps = PASS_CALLS.get(n, 30)
    times = {1: [], 2: []}
    for _ in range(3):
        for count in (1, 2):
            set_threads(count)
            exchange_fits_blocks(resid, leaf_out, value_out, leaf_in, value_in, 8, sums, perm, cursor)
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(reps):
                exchange_fits_blocks(resid, leaf_out, value_out, leaf_in, value_in, 8, sums, perm, cursor)
            times[count].append(((time.process_time() - c0) / reps * 1e6, (time.perf_counter() - w0) / reps * 1e6))
    out = {str(k): (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in times.items()}
    out["layer"] = numba.threading_layer()
    return out


def pass_calls(sizes: list) -> list:
    """``pass_calls_child`` in child processes, under both wait policies (module docstring)."""
    rows = []
    for n in sizes:
        for layer, policy in LAYERS:
            env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
            env.pop("OMP_WAIT_POLICY", None)
            if policy is not None:
                env["OMP_WAIT_POLICY"] = policy
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-pass-calls", str(n)], env=env,
                                 capture_output=True, text=True, check=True)
            child = json.loads(out.stdout.strip().splitlines()[-1])
            name = "unset (row_parallel sets PASSIVE)" if policy is None else (policy or "empty: libgomp default")
            rows.append({"n": n, "layer": child.pop("layer"), "policy": name if layer == "omp" else "-",
                         "load": load, "times": child})
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def measure(n: int, rounds: int, warm: int, sweeps: int, do_profile: bool) -> dict:
    x, y = friedman(n)
    load0 = os.getloadavg()[0]
    blocks = build_chain(x, y, True)
    seq = build_chain(x, y, False)
    for chain in (blocks, seq):
        set_threads(1)
        advance(chain, 1)  # compile / load the kernel
    set_threads(2)
    advance(blocks, 1)
    for chain in (blocks, seq):
        set_threads(2 if chain is blocks else 1)
        advance(chain, warm)
    cells = {"sequential, 1 thread": [], "blocks, 1 thread": [], "blocks, 2 threads": []}
    for _ in range(rounds):
        set_threads(1)
        cells["sequential, 1 thread"].append(timed(lambda: advance(seq, sweeps)))
        cells["blocks, 1 thread"].append(timed(lambda: advance(blocks, sweeps)))
        set_threads(2)
        cells["blocks, 2 threads"].append(timed(lambda: advance(blocks, sweeps)))
    result = {"n": n, "load_start": load0, "rounds": rounds, "warm": warm, "sweeps": sweeps,
              "cells": {k: (statistics.median(c for c, _ in v) / sweeps, statistics.median(w for _, w in v) / sweeps,
                            min(w for _, w in v) / sweeps)
                        for k, v in cells.items()}}
    if do_profile:
        result["profile"] = {f"blocks, {t} thread{'s' if t > 1 else ''}": profile(blocks, sweeps, t) for t in (1, 2)}
        set_threads(1)
        result["profile"]["sequential, 1 thread"] = profile(seq, sweeps, 1)
    result["load_end"] = os.getloadavg()[0]
    return result


def _layer() -> str:
    """numba's threading layer in this process, or a dash when nothing here started it."""
    try:
        return numba.threading_layer()
    except ValueError:
        return "-"


def report(results: list, argv: list, calls: list | None = None) -> str:
    lines = [
        "# One BART chain on 1 and 2 threads (row-block passes, issue 32)",
        "",
        f"Command: `PYTHONPATH=. python3 benchmarks/threads_one_chain.py {' '.join(argv)}`  ",
        f"Settings: Friedman #1, p = {P} (5 noise columns), noise sd 1, data seed {DATA_SEED}; BART, {TREES} trees, "
        f"`grow_prune`, chain seed {CHAIN_SEED}, max_cuts 100; nothing kept.  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work: see the load), "
        f"Python {platform.python_version()}, numba {numba.__version__} (threading layer of the sweeps: "
        f"{_layer()}), numpy {np.__version__}.",
        "",
        "Seconds per sweep, median over rounds (each round: `sweeps` sweeps of each row in turn). CPU is the "
        "process's over all threads. `sequential` is today's pass (the layout below "
        "`ROW_BLOCKS_MIN_ROWS`), `blocks` the row-block passes of `_kernels/row_parallel.py` (the same "
        "draws on 1 and 2 threads).",
        "",
        "| n | load start / end | rounds x sweeps | pass, threads | CPU s / sweep | wall s / sweep (median) "
        "| wall speed-up (median) | wall s / sweep (fastest round) | wall speed-up (fastest) |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        base, fastest = r["cells"]["blocks, 1 thread"][1:3]
        for name, (cpu, wall, low) in r["cells"].items():
            lines.append(f"| {r['n']:,} | {r['load_start']:.1f} / {r['load_end']:.1f} | {r['rounds']} x {r['sweeps']} "
                         f"| {name} | {cpu:.3f} | {wall:.3f} | {base / wall:.2f} | {low:.3f} | {fastest / low:.2f} |")
    lines += ["", "`wall speed-up`: wall of `blocks, 1 thread` over the row's wall (median over rounds, or the "
              "fastest round of each row: the round least slowed by other processes). On 2 cores at a load "
              "average far above 2 the scheduler, not the code, sets most of the wall time: a process with 2 "
              "runnable threads gets up to twice the CPU share of one with 1, so a wall speed-up above 2 measures "
              "that share; CPU seconds are the steadier figure of what the passes cost.", ""]
    for r in results:
        if "profile" not in r:
            continue
        lines += [f"## Where a sweep's time goes (n = {r['n']:,}, {r['sweeps']} sweeps per variant, after the "
                  "rounds above)", "",
                  "| pass, threads | full sweep CPU / wall | MH moves (rest) | exchanges + leaf terms + leaf draws "
                  "| sigma (sum of squares) | map_leaves (accepted moves) | accepted moves / sweep |",
                  "|---|---|---|---|---|---|---:|"]
        for name, p in r["profile"].items():
            full, nomove, sigma, maps = p["full"], p["without moves"], p["sigma"], p["map_leaves"]
            rest = tuple(full[i] - nomove[i] - maps[i] for i in range(2))
            exch = tuple(nomove[i] - sigma[i] for i in range(2))

            def cell(v, full=full):
                return f"{v[0]:.3f} / {v[1]:.3f} ({100 * v[1] / full[1]:.0f}%)"

            lines.append(f"| {name} | {full[0]:.3f} / {full[1]:.3f} | {cell(rest)} | {cell(exch)} | {cell(sigma)} | "
                         f"{cell(maps)} | {p['accepted']:.0f} |")
        lines += ["", "Seconds per sweep, CPU / wall (share of the full sweep's wall). `map_leaves` is the "
                  "sequential pass of every tree timed separately, times the accepted moves of one sweep; the "
                  "blocks' parallel `map_leaves` runs inside the full sweep only, so on 2 threads that column "
                  "over-states it.", ""]
    if calls:
        lines += ["## One exchange pass (`--pass-calls`)", "",
                  "| n | threading layer | OMP_WAIT_POLICY | load at start | threads | CPU us / call "
                  "| wall us / call |",
                  "|---:|---|---|---:|---:|---:|---:|"]
        for row in calls:
            for count, (cpu, wall) in row["times"].items():
                lines.append(f"| {row['n']:,} | {row['layer']} | {row['policy']} | {row['load']:.1f} | {count} "
                             f"| {cpu:.0f} | {wall:.0f} |")
        lines += ["", "CPU is the process's over all threads (a spinning thread counts).", ""]
    return "\n".join(lines) + "\n"


def main(argv: list | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--pass-calls", action="store_true", help="also time one exchange pass per wait policy")
    parser.add_argument("--pass-calls-only", action="store_true", help="only time the exchange pass (no sweeps)")
    parser.add_argument("--child-pass-calls", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.child_pass_calls is not None:
        print(json.dumps(pass_calls_child(args.child_pass_calls)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    calls = pass_calls(sizes) if args.pass_calls or args.pass_calls_only else None
    results = []
    for i, n in enumerate([] if args.pass_calls_only else sizes):
        warm, sweeps = SWEEPS.get(n, (5, 2))
        results.append(measure(n, args.rounds, warm, sweeps, do_profile=i == 0 and not args.no_profile))
        print(results[-1], file=sys.stderr, flush=True)
    text = report(results, argv, calls)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, args.out)
    print(text)


if __name__ == "__main__":
    main()
