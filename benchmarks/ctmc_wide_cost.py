"""Where CT-MCMC (``ctmc``) BART's CPU goes on grants (D = 1,497), before and after the sparse paths.

Command (the committed results, from the repository root):

    PYTHONPATH=$PWD python3 benchmarks/ctmc_wide_cost.py --out benchmarks/results/ctmc_wide_cost.md

Protocol of ``cgm_wide_cost.py``: training set 0 (2,000 rows) of ``grants`` (1,497 numeric
predictors, mostly 0/1 indicators and small counts), BART with m = 200 trees and the default priors,
``min_leaf_size=1``, the paper's grid of 100 evenly spaced cuts, one chain, seed 0, ``--tune`` +
``--draws`` sweeps (default 5 + 5); and for contrast a dense data set, Friedman's function with D =
10 uniform predictors (2,000 rows from ``default_rng(0)``, noise sd 1), ``--dense-tune`` +
``--dense-draws`` sweeps (default 20 + 20). Two cases each: ``ctmc`` with its defaults (birth and
death events, time per tree visit adapted during tuning) and with rotate and perturb events.

Each data set runs in a worker process (``--worker``) twice: "before" on the package at
``--before`` (default ``BEFORE``, the commit this work started from: a git revision, exported with
``git archive`` to a temporary folder, or a checkout, read only: its numba cache goes to a temporary
folder and no bytecode is written there) and "after" on this checkout. A worker reports, per case, a
hash of the whole fit (``draw_fingerprints.py``'s; before and after must agree, so that both columns
time the same chain), the CPU seconds of the sweeps alone (``TreeModel._run``, after a warm-up fit
has loaded the kernels; CPU rather than wall time on the shared host), the mean leaves per tree and
jumps per tree visit, and where the package counts them (``CtmcState.walk_stats``, after only) the
leaves whose birth rates were computed, their rows and their (leaf, predictor) pairs with a rule,
and the availability checks. It also times ``ctmc.leaf_birth_rates`` alone (every birth rate of one
leaf) at leaves of 2,000 / 1,000 / 300 / 30 random rows (``default_rng(0)``; 5 calls each, the
chain's own data and state after its fit; at least 5 calls, more for fast leaves, about 0.5 CPU s
each).

Hand-written sections at the end of an existing ``--out`` file (a ``## `` heading saying "written by
hand" and all after it) are kept below the regenerated tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import _provenance  # noqa: E402
from _revisions import checkout, hand_written  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402

#: name -> sampler options of ``ctmc``
CASES = {
    "ctmc": {},
    "ctmc rotate+perturb": {"rotate": True, "perturb": True},
}
#: the commit this work started from (main before the sparse paths)
BEFORE = "bf6e444"
LEAF_SIZES = (2000, 1000, 300, 30)
#: calls of the per-leaf timing: at least LEAF_CALLS, else about LEAF_SECONDS of CPU (at most 1,000)
LEAF_CALLS = 5
LEAF_SECONDS = 0.5
DENSE_ROWS = 2000


def friedman_frame(n: int, seed: int = 0):
    """Friedman's function of 10 uniform predictors (5 inert) plus N(0, 1) noise, as a DataFrame."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 10))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    df = pd.DataFrame(x, columns=[f"x{k + 1}" for k in range(10)])
    df["y"] = f + rng.normal(size=n)
    return df


def frame(data: str):
    """(training DataFrame with response y, number of predictors)."""
    if data == "friedman":
        return friedman_frame(DENSE_ROWS), 10
    from cgm_wide_cost import training_set

    return training_set(data)


def leaf_times(chain, rng) -> list[dict]:
    """CPU ms per call of ``ctmc.leaf_birth_rates`` at a leaf holding random rows of the chain's data,
    and of its parts: the rule counts (``_leaf_rule_setup``), the binning of every predictor with a
    rule (``_bin_rows``; after: ``_prepare_leaf`` and ``_bin_leaf_var``), and the binning plus the
    bisections of ``_numeric_rates`` for the cuts whose children can split (``has_available_rule``;
    after: ``_rows_available``)."""
    from numba import njit

    from bartpy_suite._kernels import ctmc as C
    from bartpy_suite._kernels import tree as T

    after = hasattr(C, "_bin_leaf_var")
    # The parts' wrappers below are inlined into ``parts``, as their bodies are into
    # ``leaf_birth_rates``: a call passing the chain's records would add its own cost.

    @njit
    def full(tree, data, target, fstate, scratch, cs, calls):
        total = 0.0
        for _ in range(calls):
            C.leaf_birth_rates(tree, 0, data, target, fstate, scratch, cs)
            total += cs.rate_var[0].sum()
        return total

    @njit
    def setup(tree, data, target, fstate, scratch, cs, calls):
        total = 0
        for _ in range(calls):
            total += C._leaf_rule_setup(tree, 0, data, target, scratch)[0]
        return total

    if after:
        @njit(inline="always")
        def binning(tree, data, target, scratch, cs, v):
            C._bin_leaf_var(tree, 0, data, v, target, scratch, cs)

        @njit(inline="always")
        def available(data, rows, start, end, m, scratch, cs):
            return C._rows_available(data, rows, start, end, m, scratch, cs)

        @njit(inline="always")
        def prepare(tree, data, target, scratch, cs):
            C._set_bin_modes(data, scratch, cs)
            C._prepare_leaf(tree, 0, data, target, scratch, cs, scratch.model)

        @njit(inline="always")
        def unprepare(cs):
            C._unprepare(cs)
    else:
        @njit(inline="always")
        def binning(tree, data, target, scratch, cs, v):
            C._bin_rows(tree, 0, data.xt, v, data.nbins[v], data.y, data.ycls, target, cs, scratch.model)

        @njit(inline="always")
        def available(data, rows, start, end, m, scratch, cs):
            return T.has_available_rule(data.xt, rows, start, end, data.is_cat, data.nbins, m, scratch.hist,
                                        scratch.sums, False)

        @njit(inline="always")
        def prepare(tree, data, target, scratch, cs):
            pass

        @njit(inline="always")
        def unprepare(cs):
            pass

    @njit
    def parts(tree, data, target, fstate, scratch, cs, calls, bisect):
        # the loop of leaf_birth_rates and the bisections of _numeric_rates, without the rates
        n = tree.end[0] - tree.start[0]
        m = target.prior.min_leaf
        k = 0
        for _ in range(calls):
            C._leaf_rule_setup(tree, 0, data, target, scratch)
            prepare(tree, data, target, scratch, cs)
            for v in range(data.xt.shape[0]):
                if scratch.counts[v] <= 0.0:
                    continue
                binning(tree, data, target, scratch, cs, v)
                if not bisect or data.is_cat[v]:
                    continue
                lo, count = scratch.lows[v], int(scratch.counts[v])
                a, b = lo, lo + count
                while a < b:
                    mid = (a + b) // 2
                    if available(data, cs.sorted_rows, 0, cs.bin_n[mid + 1], m, scratch, cs):
                        b = mid
                    else:
                        a = mid + 1
                k += a
                a, b = lo - 1, lo + count - 1
                while a < b:
                    mid = (a + b + 1) // 2
                    if available(data, cs.sorted_rows, cs.bin_n[mid + 1], n, m, scratch, cs):
                        a = mid
                    else:
                        b = mid - 1
                k += a
            unprepare(cs)
        return k

    def timed(fn, *args) -> float:
        """CPU ms per call of ``fn(*args, calls)``: at least LEAF_CALLS, about LEAF_SECONDS in all."""
        c0 = time.process_time()
        fn(*args, 1)  # compiles, and sizes the timed run
        calls = int(min(max(LEAF_SECONDS / max(time.process_time() - c0, 1e-6), LEAF_CALLS), 1000))
        c0 = time.process_time()
        fn(*args, calls)
        return 1000 * (time.process_time() - c0) / calls

    n_rows = chain.codes.shape[1]
    args = (chain.data, chain.state.target, chain.state.fstate, chain.scratch, chain.cs)
    out = []
    for n in LEAF_SIZES:
        if n > n_rows:
            continue
        rows = np.sort(rng.choice(n_rows, n, replace=False)).astype(np.int32)
        tree = T.new_tree(n_rows, chain.capacity)
        tree.perm[:] = np.concatenate([rows, np.setdiff1d(np.arange(n_rows), rows)]).astype(np.int32)
        tree.end[0] = n
        rec = {"rows": n, "ms": timed(full, tree, *args), "setup_ms": timed(setup, tree, *args)}
        rec["bin_ms"] = timed(lambda *a: parts(*a[:-1], a[-1], False), tree, *args)
        rec["bin_avail_ms"] = timed(lambda *a: parts(*a[:-1], a[-1], True), tree, *args)
        out.append(rec)
    return out


def worker(args) -> None:
    """Fit every case on one data set with the package on ``sys.path``; print one JSON line each."""
    from draw_fingerprints import _hash_fit
    from pg_bart_hypercube import N_CUTS, paper_grid

    import bartpy_suite as bps
    from bartpy_suite.models import _base
    from bartpy_suite.samplers.registry import SamplerSpec

    df, n_predictors = frame(args.data)
    tune, draws = (args.dense_tune, args.dense_draws) if args.data == "friedman" else (args.tune, args.draws)
    sweeps = {"cpu": 0.0}
    chains = []
    run, make_chain = _base.TreeModel._run, SamplerSpec.make_chain

    def timed_run(self, *a, **k):
        c0 = time.process_time()
        try:
            return run(self, *a, **k)
        finally:
            sweeps["cpu"] = time.process_time() - c0

    def kept_chain(self, *a, **k):
        chain = make_chain(self, *a, **k)
        chains.append(chain)
        return chain

    _base.TreeModel._run = timed_run
    SamplerSpec.make_chain = kept_chain

    def fit(data, tune, draws, trees, options):
        with paper_grid("uniform"):
            return bps.bart("y ~ .", data=data, trees=trees, sampler="ctmc", chains=1, draws=draws, tune=tune, seed=0,
                            min_leaf_size=1, max_cuts=N_CUTS, sampler_options=options, progress=False,
                            check_mixing=False, log_likelihood=False)

    for name, options in CASES.items():
        fit(df.iloc[:200], 2, 2, 3, options)  # load or compile outside the timed fit
        f = fit(df, tune, draws, args.trees, options)
        chain = chains[-1]
        stats = chain.cs.walk_stats
        rec = {"data": args.data, "predictors": n_predictors, "case": name, "sweeps": tune + draws,
               "cpu_s": sweeps["cpu"], "leaves": float(f.posterior["mean_leaves"].values.mean()),
               "jumps": float(f.sample_stats["jumps"].values.mean()), "draws_sha1": _hash_fit(f),
               "counts": stats[2:7].tolist() if stats.shape[0] >= 7 else None,
               "exceptions_kept": bool(chain.scratch.ex_ptr.size)}
        if name == "ctmc":
            rec["leaf"] = leaf_times(chain, np.random.default_rng(0))
        print(json.dumps(rec), flush=True)


def run_worker(code_root: str, data: str, args, cache: str) -> list[dict]:
    """Run ``--worker`` for ``data`` with the package at ``code_root``; its JSON records."""
    env = dict(os.environ, PYTHONPATH=code_root)
    if os.path.realpath(code_root) != os.path.realpath(ROOT):
        # another checkout (read only): numba's cache and Python's bytecode stay out of it
        env.update(NUMBA_CACHE_DIR=cache, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--worker", "--data", data,
           "--tune", str(args.tune), "--draws", str(args.draws), "--dense-tune", str(args.dense_tune),
           "--dense-draws", str(args.dense_draws), "--trees", str(args.trees)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {data} on {code_root} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def report(results: dict, args) -> list[str]:
    lines = ["# CT-MCMC (`ctmc`) BART's cost at D = 1,497 (`benchmarks/ctmc_wide_cost.py`)", ""]
    lines += _provenance.header(
        "sampler seed 0 for every fit; grants: training set 0 of pg_bart_real.py's splits (permutation seed 2015); "
        "Friedman data from default_rng(0); leaf rows for the per-call timing from default_rng(0)",
        settings=(f"BART m = {args.trees}, min_leaf_size 1, 100 evenly spaced cuts, one chain; grants "
                  f"{args.tune} + {args.draws} sweeps, Friedman (D = 10, {DENSE_ROWS} rows) {args.dense_tune} + "
                  f"{args.dense_draws} sweeps; ctmc time per tree visit 'auto'; before = the package at "
                  f"{args.before} (git revision exported to a temporary folder), after = this checkout"))
    lines += ["CPU ms per sweep of the sweeps alone (no binning, no posterior), mean leaves per tree and jumps per "
              "tree visit (the same before and after). \"same draws\": the fit's whole posterior hashes the same "
              "before and after (`draw_fingerprints.py`'s hash), so the two columns time the same chain.", ""]
    rows = []
    for data in args.data:
        before = {r["case"]: r for r in results[("before", data)]}
        after = {r["case"]: r for r in results[("after", data)]}
        for case in CASES:
            b, a = before[case], after[case]
            ms_b, ms_a = 1000 * b["cpu_s"] / b["sweeps"], 1000 * a["cpu_s"] / a["sweeps"]
            rows.append([data, a["predictors"], case, a["sweeps"], f"{ms_b:.1f}", f"{ms_a:.1f}", f"{ms_b / ms_a:.2f}",
                         f"{a['leaves']:.2f}", f"{a['jumps']:.2f}",
                         "yes" if b["draws_sha1"] == a["draws_sha1"] else "NO"])
    lines += markdown_table(["data", "D", "case", "sweeps", "ms/sweep before", "ms/sweep after", "speed-up",
                             "leaves/tree", "jumps/visit", "same draws"], rows)
    lines += ["", "Where the work is (after; the same chain before): per sweep, the leaves whose birth rates were "
              "computed (every leaf at each tree visit, then the two children of a birth or the merged leaf of a "
              "death), their mean rows and mean predictors with an available rule, and the availability checks "
              "(`has_available_rule` before, `_rows_available` after: the bisection for the cuts whose children can "
              "split again, the children of a nog, a factor's levels); CPU per (leaf, predictor) pair is the "
              "sweep's CPU over those pairs.", ""]
    rows = []
    for data in args.data:
        before = {r["case"]: r for r in results[("before", data)]}
        for a in results[("after", data)]:
            if a["counts"] is None:
                continue
            leaves, leaf_rows, pairs, checks, rowwise = a["counts"]
            sw = a["sweeps"]
            us_b = 1e6 * before[a["case"]]["cpu_s"] / pairs if pairs else float("nan")
            us_a = 1e6 * a["cpu_s"] / pairs if pairs else float("nan")
            rows.append([data, a["case"], f"{leaves / sw:.0f}", f"{leaf_rows / max(leaves, 1):.0f}",
                         f"{pairs / max(leaves, 1):.0f}", f"{pairs / sw:.0f}", f"{checks / sw:.0f}",
                         f"{rowwise / sw:.0f}", "yes" if a["exceptions_kept"] else "no", f"{us_b:.2f}", f"{us_a:.2f}"])
    lines += markdown_table(["data", "case", "leaves rated / sweep", "rows / leaf", "predictors / leaf",
                             "(leaf, predictor) / sweep", "availability checks / sweep", "decided row-wise / sweep",
                             "exceptions kept", "CPU us / pair before", "CPU us / pair after"], rows)
    lines += ["", "`ctmc.leaf_birth_rates` alone, per call (CPU ms; a leaf of random rows of the fit's data, the "
              f"chain's state after its fit, at least {LEAF_CALLS} calls and about {LEAF_SECONDS} CPU s each): every "
              "birth rate of one leaf, and its parts, timed by running the function's loop without the rates: the rule "
              "counts (`_leaf_rule_setup`), the binning of every predictor with a rule (`_bin_rows`; after: "
              "`_prepare_leaf`, `_bin_leaf_var`), the bisections for the cuts whose children can split again "
              "(`has_available_rule`; after: `_rows_available`) and the rest (the rates themselves: leaf terms per "
              "distinct cut, `exp`), each the difference of two timings, so +- a few tenths of a ms. After, the "
              "availability checks are not split from the rest: timed outside the kernel, `_rows_available` (which "
              "takes the chain's records) cost more than the whole function, so that split would be wrong.", ""]
    rows = []
    for data in args.data:
        before = {r["case"]: r for r in results[("before", data)]}["ctmc"]["leaf"]
        after = {r["case"]: r for r in results[("after", data)]}["ctmc"]["leaf"]
        for b, a in zip(before, after):
            split = (f"{b['setup_ms']:.2f} / {b['bin_ms'] - b['setup_ms']:.2f} / "
                     f"{b['bin_avail_ms'] - b['bin_ms']:.2f} / {b['ms'] - b['bin_avail_ms']:.2f}")
            rows.append([data, a["rows"], f"{b['ms']:.2f}", f"{a['ms']:.2f}", f"{b['ms'] / a['ms']:.2f}", split,
                         f"{a['setup_ms']:.2f} / {a['bin_ms'] - a['setup_ms']:.2f} / {a['ms'] - a['bin_ms']:.2f}"])
    lines += markdown_table(["data", "leaf rows", "ms before", "ms after", "speed-up",
                             "before: counts / binning / availability / rest", "after: counts / binning / the rest"],
                            rows)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", default=["grants", "friedman"], choices=("grants", "friedman"))
    parser.add_argument("--tune", type=int, default=5, help="tune sweeps on grants")
    parser.add_argument("--draws", type=int, default=5, help="kept sweeps on grants")
    parser.add_argument("--dense-tune", type=int, default=20, help="tune sweeps on the Friedman data")
    parser.add_argument("--dense-draws", type=int, default=20, help="kept sweeps on the Friedman data")
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--before", default=BEFORE, help="git revision (or checkout) of the 'before' column")
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.data = args.data[0]
        worker(args)
        return
    results = {}
    keep = hand_written(args.out)
    with tempfile.TemporaryDirectory(prefix="ctmc_wide_cost_") as cache:
        before = checkout(args.before, cache)
        for data in args.data:
            for side, root in (("before", before), ("after", ROOT)):
                results[(side, data)] = run_worker(root, data, args, cache)
                print(side, data, *results[(side, data)], sep="\n", flush=True)
    emit(report(results, args) + keep, args.out)


if __name__ == "__main__":
    main()
