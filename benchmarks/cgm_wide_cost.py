"""Why ``cgm`` BART cost 17x ``grow_prune`` on grants (D = 1,497), before and after the fix.

Command (the committed results, from the repository root):

    PYTHONPATH=$PWD python3 benchmarks/cgm_wide_cost.py --out benchmarks/results/cgm_wide_cost.md

Protocol of ``pg_bart_real.py`` (``benchmarks/results/pg_bart_real_grants.md``) with fewer
iterations: training set 0 (2,000 rows) of ``grants`` (1,497 numeric predictors, mostly 0/1) and,
for contrast, of ``ames`` (73 predictors), BART with m = 200 trees and the default priors,
``min_leaf_size=1``, the paper's grid of 100 evenly spaced cuts, one chain, seed 0,
``--tune`` + ``--draws`` sweeps (default 100 + 100). Four move mixes: ``cgm`` (grow .25, prune
.25, change .4, swap .1), ``grow_prune`` (.5, .5), and two that isolate a move (grow .25, prune
.25 and change .5, or swap .5).

Each data set runs in a worker process (``--worker``) twice: "before" on the package at
``--before-cgm`` (default ``BEFORE_CGM``, main before the fix: a git revision, exported with ``git
archive`` to a temporary folder, or a checkout, read only: its numba cache goes to a temporary
folder and no bytecode is written there) and "after" on this checkout. A worker
reports, per mix, a hash of the whole fit (``draw_fingerprints.py``'s; before and after must
agree, so that both columns time the same chain), the CPU seconds of the sweeps alone
(``TreeModel._run``, after a warm-up fit has loaded the kernels; CPU rather than wall time on the
shared host), the mean leaves per tree, the proposals and acceptance rate of each move type. From
the four mixes' proposals per sweep it solves CPU ms per sweep = a + b (grow + prune) + c change +
d swap (four equations, four unknowns; a is the per-sweep work every mix does: leaf draws,
residuals, sigma), the cost of one proposal of each move type.

The "after" worker also times the helper that changed, ``tree.node_rule_counts`` (one histogram
pass over rows x predictors, the old path of the tree prior's rule counts) against
``tree.prior_rule_counts`` (the same counts from each predictor's exceptions to its most common
code), on the fit's own binned codes at random row subsets of 2,000 / 1,000 / 300 / 100 rows
(sorted, as a node's rows are; 200 calls each, data seed 0).

Second part, the other samplers whose kernels counted rules with ``node_rule_counts``
(``SAMPLER_CASES``: ``pg`` as a control, ``pg`` with ancestor sampling, ``ctmc`` with and without
rotate / perturb events, ``cgm`` with grow / prune / rotate / perturb): the same data, priors and
grid, CPU ms per sweep and a hash of the fit, "before" on the package at ``--before`` (default
``BEFORE_SAMPLERS``, main with the cgm fix) and "after" on this checkout; ``pg`` and ``ctmc`` run
fewer sweeps (``--pg-tune`` / ``--pg-draws``, ``--ctmc-tune`` / ``--ctmc-draws``). Hand-written
sections at the end of an existing ``--out`` file (a ``## `` heading saying "written by hand" and
all after it) are kept below the regenerated tables.
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

MIXES = {
    "cgm": {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1},
    "grow_prune": {"grow": 0.5, "prune": 0.5},
    "grow_prune+change": {"grow": 0.25, "prune": 0.25, "change": 0.5},
    "grow_prune+swap": {"grow": 0.25, "prune": 0.25, "swap": 0.5},
}
#: The other samplers whose kernels counted a node's rules with ``node_rule_counts`` (``--part
#: samplers``): name -> (sampler, sampler options). ``pg`` with the prior proposal never counts them
#: (a control); ancestor sampling scores the reference's rules at every stage (``_rule_log_prior``),
#: CT-MCMC every leaf's birth rates and nog's death rate, CHANGE-OF-VARIABLE (a tenth of the
#: perturb moves / events) the rules at its node.
SAMPLER_CASES = {
    "pg": ("pg", {}),
    "pg ancestor_sampling": ("pg", {"ancestor_sampling": True}),
    "ctmc": ("ctmc", {}),
    "ctmc rotate+perturb": ("ctmc", {"rotate": True, "perturb": True}),
    "cgm grow/prune/rotate/perturb": ("cgm", {"moves": {"grow": 0.25, "prune": 0.25, "rotate": 0.25,
                                                        "perturb": 0.25}}),
}
MOVES = ("grow", "prune", "change", "swap")
#: tune + kept sweeps of the pg and ctmc cases (slower per sweep than the others: ctmc about 5 CPU s
#: per sweep on grants)
PG_SWEEPS = (20, 20)
CTMC_SWEEPS = (5, 5)
#: main before the cgm fix (the first parent of its merge) and main with it (the merge)
BEFORE_CGM = "0c781de"
BEFORE_SAMPLERS = "40e9e1f"
SIZES = (2000, 1000, 300, 100)
HELPER_CALLS = 200


def training_set(data: str):
    """(DataFrame of training set 0 with response column y, number of predictors)."""
    from pg_bart_real import DATASETS, splits

    loader, _, scheme, _ = DATASETS[data]
    x, y = loader()
    train, _ = splits(len(y), 3, 2000, scheme)[0]
    return x.iloc[train].assign(y=y[train]), x.shape[1]


def helper_times(chain, rng) -> list[dict]:
    """CPU ms per call of ``node_rule_counts`` and ``prior_rule_counts`` at random sorted row
    subsets of the chain's data, and whether both gave the same counts."""
    from numba import njit

    from bartpy_suite._kernels import tree as T

    @njit
    def repeat(fused, perm, n, is_cat, nbins, scratch, calls):
        total = 0
        for _ in range(calls):
            if fused:
                total += T.node_rule_counts(perm, 0, n, is_cat, nbins, 1, scratch, False)
            else:
                total += T.prior_rule_counts(perm, 0, n, is_cat, nbins, 1, scratch, False)
        return total

    scratch, is_cat, nbins = chain.scratch, chain.is_categorical, chain.nbins
    n_rows = chain.codes.shape[1]
    out = []
    for n in SIZES:
        rows = np.sort(rng.choice(n_rows, n, replace=False)).astype(np.int32)
        perm = np.concatenate([rows, np.setdiff1d(np.arange(n_rows), rows)]).astype(np.int32)
        rec = {"rows": n}
        counts = []
        for name, fused in (("fused", True), ("exceptions", False)):
            repeat(fused, perm, n, is_cat, nbins, scratch, 1)  # compile
            counts.append(scratch.counts.copy())
            c0 = time.process_time()
            repeat(fused, perm, n, is_cat, nbins, scratch, HELPER_CALLS)
            rec[name + "_ms"] = 1000 * (time.process_time() - c0) / HELPER_CALLS
        rec["same"] = bool(np.array_equal(counts[0], counts[1]))
        out.append(rec)
    return out


def worker(args) -> None:
    """Fit every mix on one data set with the package on ``sys.path``; print one JSON line each."""
    from draw_fingerprints import _hash_fit
    from pg_bart_hypercube import N_CUTS, paper_grid

    import bartpy_suite as bps
    from bartpy_suite.models import _base
    from bartpy_suite.samplers.registry import SamplerSpec

    df, n_predictors = training_set(args.data)
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

    def fit(data, moves, tune, draws, trees, sampler="cgm", options=None):
        options = {"moves": moves} if options is None else options
        with paper_grid("uniform"):
            return bps.bart("y ~ .", data=data, trees=trees, sampler=sampler, chains=1, draws=draws, tune=tune, seed=0,
                            min_leaf_size=1, max_cuts=N_CUTS, sampler_options=options, progress=False,
                            check_mixing=False, log_likelihood=False)

    if args.part == "samplers":
        for name, (sampler, options) in SAMPLER_CASES.items():
            fit(df.iloc[:200], None, 2, 2, 3, sampler, options)  # load or compile outside the timed fit
            tune, draws = {"pg": (args.pg_tune, args.pg_draws), "ctmc": (args.ctmc_tune, args.ctmc_draws)}.get(
                sampler, (args.tune, args.draws))
            f = fit(df, None, tune, draws, args.trees, sampler, options)
            rec = {"data": args.data, "predictors": n_predictors, "case": name, "sweeps": tune + draws,
                   "kept": draws, "cpu_s": sweeps["cpu"], "leaves": float(f.posterior["mean_leaves"].values.mean()),
                   "draws_sha1": _hash_fit(f)}
            print(json.dumps(rec), flush=True)
        return
    for moves in MIXES.values():  # load or compile each mix's kernels outside the timed fits
        fit(df.iloc[:200], moves, 2, 2, 3)
    for name, moves in MIXES.items():
        f = fit(df, moves, args.tune, args.draws, args.trees)
        stats = f.sample_stats
        proposed = stats["n_proposed"].sel(move=list(MOVES)).sum(("chain", "draw")).values
        accepted = stats["n_accepted"].sel(move=list(MOVES)).sum(("chain", "draw")).values
        rec = {"data": args.data, "predictors": n_predictors, "mix": name, "sweeps": args.tune + args.draws,
               "kept": args.draws, "cpu_s": sweeps["cpu"], "leaves": float(f.posterior["mean_leaves"].values.mean()),
               "proposed_per_sweep": (proposed / args.draws).tolist(),
               "acceptance": [float(a / p) if p else None for a, p in zip(accepted, proposed)],
               "draws_sha1": _hash_fit(f)}
        print(json.dumps(rec), flush=True)
    from bartpy_suite._kernels import tree as T
    if hasattr(T, "prior_rule_counts"):
        chain = chains[-1]
        rec = {"data": args.data, "helper": helper_times(chain, np.random.default_rng(0)),
               "exceptions": int(chain.scratch.ex_ptr[-1]) if chain.scratch.ex_ptr.size else None,
               "codes": int(chain.codes.size)}
        print(json.dumps(rec), flush=True)


def run_worker(code_root: str, data: str, args, cache: str, part: str = "cgm") -> list[dict]:
    """Run ``--worker`` for ``data`` and ``part`` with the package at ``code_root``; its JSON records."""
    env = dict(os.environ, PYTHONPATH=code_root)
    if os.path.realpath(code_root) != os.path.realpath(ROOT):
        # another checkout (read only): numba's cache and Python's bytecode stay out of it
        env.update(NUMBA_CACHE_DIR=cache, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--worker", "--data", data,
           "--tune", str(args.tune), "--draws", str(args.draws), "--trees", str(args.trees),
           "--pg-tune", str(args.pg_tune), "--pg-draws", str(args.pg_draws), "--ctmc-tune", str(args.ctmc_tune),
           "--ctmc-draws", str(args.ctmc_draws), "--part", part]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {data} on {code_root} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def move_costs(recs: list[dict]) -> list[float]:
    """(a, b, c, d) of CPU ms per sweep = a + b (grow + prune) + c change + d swap per sweep."""
    rows, rhs = [], []
    for r in recs:
        g, p, c, s = r["proposed_per_sweep"]
        rows.append([1.0, g + p, c, s])
        rhs.append(1000 * r["cpu_s"] / r["sweeps"])
    return np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0].tolist()


def report(results: dict, args) -> list[str]:
    lines = ["# Why `cgm` BART costs 17x `grow_prune` at D = 1,497 (`benchmarks/cgm_wide_cost.py`)", ""]
    lines += _provenance.header(
        "sampler seed 0 for every fit; training set 0 of pg_bart_real.py's splits (permutation seed 2015); "
        "helper timing row subsets from default_rng(0)",
        settings=(f"BART m = {args.trees}, {args.tune} + {args.draws} sweeps "
                  f"({args.pg_tune} + {args.pg_draws} for pg, {args.ctmc_tune} + {args.ctmc_draws} for ctmc), "
                  "min_leaf_size 1, 100 evenly spaced cuts, one chain; before = the package at "
                  f"{args.before_cgm} (cgm move mixes) or {args.before} (other samplers), git revisions exported "
                  "to a temporary folder; after = this checkout"))
    lines += ["CPU ms per sweep of the sweeps alone (no binning, no posterior), mean leaves per tree, proposals per "
              "sweep and acceptance of grow / prune / change / swap (the same before and after). \"same draws\": the "
              "fit's whole posterior hashes the same before and after (`draw_fingerprints.py`'s hash), so the "
              "two columns time the same chain.", ""]
    rows = []
    for data in args.data:
        before = {r["mix"]: r for r in results[("before", data, "cgm")] if "mix" in r}
        after = {r["mix"]: r for r in results[("after", data, "cgm")] if "mix" in r}
        for mix in MIXES:
            b, a = before[mix], after[mix]
            ms_b, ms_a = 1000 * b["cpu_s"] / b["sweeps"], 1000 * a["cpu_s"] / a["sweeps"]
            rows.append([data, b["predictors"], mix, f"{ms_b:.1f}", f"{ms_a:.1f}", f"{ms_b / ms_a:.2f}",
                         f"{a['leaves']:.2f}", " / ".join(f"{x:.0f}" for x in a["proposed_per_sweep"]),
                         " / ".join("-" if x is None else f"{x:.2f}" for x in a["acceptance"]),
                         "yes" if b["draws_sha1"] == a["draws_sha1"] else "NO"])
    lines += markdown_table(["data", "D", "moves", "ms/sweep before", "ms/sweep after", "speed-up", "leaves/tree",
                             "proposals/sweep g/p/c/s", "acceptance g/p/c/s", "same draws"], rows)
    lines += ["", "Cost per proposal of each move type (CPU ms; least squares of ms per sweep on the proposals per "
              "sweep of the four mixes, four equations in four unknowns, so a rough split):", ""]
    rows = []
    for data in args.data:
        for side in ("before", "after"):
            a, gp, c, s = move_costs([r for r in results[(side, data, "cgm")] if "mix" in r])
            rows.append([data, side, f"{a:.2f}", f"{gp:.4f}", f"{c:.4f}", f"{s:.4f}"])
    lines += markdown_table(["data", "code", "per sweep (a)", "per grow or prune", "per change", "per swap"], rows)
    lines += ["", "The helper that changed, per call (CPU ms; the fit's own binned codes, min_leaf_size 1, "
              f"{HELPER_CALLS} calls at each row count): `node_rule_counts` histograms every (row, predictor) pair "
              "of the node, `prior_rule_counts` only each predictor's exceptions to its most common code.", ""]
    rows = []
    for data in args.data:
        (h,) = [r for r in results[("after", data, "cgm")] if "helper" in r]
        share = "-" if h["exceptions"] is None else f"{100 * h['exceptions'] / h['codes']:.1f}%"
        for t in h["helper"]:
            rows.append([data, share, t["rows"], f"{t['fused_ms']:.3f}", f"{t['exceptions_ms']:.3f}",
                         f"{t['fused_ms'] / t['exceptions_ms']:.1f}", "yes" if t["same"] else "NO"])
    lines += markdown_table(["data", "exceptions / codes", "node rows", "fused ms", "exceptions ms", "ratio",
                             "same counts"], rows)
    lines += ["", f"## The other samplers' rule counts (before = the package at {args.before}, after = this checkout)",
              "", "CPU ms per sweep of the sweeps alone and mean leaves per tree of the other samplers whose kernels "
              "counted a node's rules with `node_rule_counts` (now `prior_rule_counts`): `pg` with the prior proposal "
              "(a control: it never counts them), `pg` with ancestor sampling (the reference's rule priors at every "
              "stage), `ctmc` (every leaf's birth rates, each nog's death rate), with rotate and perturb events, and "
              "`cgm` with grow / prune / rotate / perturb (a tenth of the perturbs are CHANGE-OF-VARIABLE, which "
              f"counts the rules at its node). BART m = {args.trees}, {args.tune} + {args.draws} sweeps "
              f"({args.pg_tune} + {args.pg_draws} for the `pg` cases, {args.ctmc_tune} + {args.ctmc_draws} "
              "for `ctmc`), "
              "otherwise as above.", ""]
    rows = []
    for data in args.sampler_data:
        before = {r["case"]: r for r in results[("before", data, "samplers")]}
        after = {r["case"]: r for r in results[("after", data, "samplers")]}
        for case in SAMPLER_CASES:
            b, a = before[case], after[case]
            ms_b, ms_a = 1000 * b["cpu_s"] / b["sweeps"], 1000 * a["cpu_s"] / a["sweeps"]
            rows.append([data, b["predictors"], case, a["sweeps"], f"{ms_b:.1f}", f"{ms_a:.1f}", f"{ms_b / ms_a:.2f}",
                         f"{a['leaves']:.2f}", "yes" if b["draws_sha1"] == a["draws_sha1"] else "NO"])
    lines += markdown_table(["data", "D", "sampler", "sweeps", "ms/sweep before", "ms/sweep after", "speed-up",
                             "leaves/tree", "same draws"], rows)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", default=["grants", "ames"])
    parser.add_argument("--sampler-data", nargs="+", default=["grants"],
                        help="data sets of the other samplers' part (ames has a 24-level factor, which ctmc refuses)")
    parser.add_argument("--tune", type=int, default=100)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--pg-tune", type=int, default=PG_SWEEPS[0], help="tune sweeps of the pg cases")
    parser.add_argument("--pg-draws", type=int, default=PG_SWEEPS[1], help="kept sweeps of the pg cases")
    parser.add_argument("--ctmc-tune", type=int, default=CTMC_SWEEPS[0], help="tune sweeps of the ctmc cases")
    parser.add_argument("--ctmc-draws", type=int, default=CTMC_SWEEPS[1], help="kept sweeps of the ctmc cases")
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--before-cgm", default=BEFORE_CGM,
                        help="git revision (or checkout) before the cgm fix: 'before' of the cgm move mixes")
    parser.add_argument("--before", default=BEFORE_SAMPLERS,
                        help="git revision (or checkout) before the other samplers' switch: their 'before'")
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=("cgm", "samplers"), default="cgm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.data = args.data[0]
        worker(args)
        return
    results = {}
    keep = hand_written(args.out)
    with tempfile.TemporaryDirectory(prefix="cgm_wide_cost_") as cache:
        roots = {"cgm": checkout(args.before_cgm, cache), "samplers": checkout(args.before, cache)}
        for part, datasets in (("cgm", args.data), ("samplers", args.sampler_data)):
            for data in datasets:
                for side, root in (("before", roots[part]), ("after", ROOT)):
                    results[(side, data, part)] = run_worker(root, data, args, cache, part)
                    print(side, data, part, *results[(side, data, part)], sep="\n", flush=True)
    emit(report(results, args) + keep, args.out)


if __name__ == "__main__":
    main()
