"""CT-MCMC section 4: Rao-Blackwellized against unweighted estimates, by their MSE against the
exact posterior.

A ``ctmc`` chain visits trees T_1, T_2, ... (the jump chain) with total rates Lambda_i. Three
estimators of a posterior mean E[g(T)] from the same visited trees:

* **Rao-Blackwellized** (``ctmc``'s ``fit.weights``): weights 1 / Lambda_i, the expected holding
  time in T_i (the paper's eq. 12);
* **holding time**: weights tau_i ~ Exponential(Lambda_i), the time the continuous-time process
  actually spends in T_i (drawn here with a fixed seed per run; the estimator the
  Rao-Blackwellization improves on, unbiased as a time average but noisier);
* **unweighted**: the plain mean over the jump chain, which targets pi(T) Lambda(T), not pi(T),
  so it is biased.

The reference is the exact posterior of the package's tiny enumeration data sets
(``tests/exact``: every tree of "grid", 18 rows, two predictors, is enumerated; alpha 0.95, beta
1, min_leaf_size 2). Quantities g: P(n_leaves = k) for every k with exact probability >= 0.001,
E[n_leaves], and P(T = t) for every tree t with exact probability >= 0.02. Each of ``--runs``
independent chains (seed ``crc32(case, run)``) starts from a stump, makes ``--burn`` jumps, then
records ``--jumps`` jumps. Per quantity: bias, sd over the runs and MSE of each estimator; the
table gives the MSE summed over the quantities of each kind and the ratio of MSEs.

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/ctmc_rao_blackwell.py --out
benchmarks/results/ctmc_rao_blackwell.md`` (the defaults are the committed settings).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))  # the enumeration helpers of the exact tests

from exact import harness as H  # noqa: E402
from exact.problems import exact, make_problem  # noqa: E402

CASES = [("grid", "mean_shift", True), ("grid", "mean_variance_shift", True), ("grid", None, False)]
ESTIMATORS = ("Rao-Blackwellized 1/Lambda", "holding time tau", "unweighted jump chain")


def visited_trees(dataset: str, model: str | None, likelihood: bool, seed: int, burn: int, jumps: int,
                  index: dict) -> np.ndarray:
    """Labels (indices into the enumeration) of the trees a ctmc chain visits, jump by jump."""
    chain = H.make_ctmc_chain(make_problem(dataset, model), seed, likelihood=likelihood)
    chain.set_tree(None)
    chain.allocate(burn)
    chain.run(0, burn, burn, 1)
    labels = np.empty(jumps, dtype=np.int64)
    for d in range(jumps):  # one jump at a time, to read the canonical tree reached
        chain.allocate(1)
        chain.run(0, 1, 0, 1)
        labels[d] = index[chain.get_tree()]
    return labels


def total_rates(dataset: str, model: str | None, likelihood: bool, trees: list) -> np.ndarray:
    """Lambda(T) of every enumerated tree, from the sampler's own rate computation."""
    chain = H.make_ctmc_chain(make_problem(dataset, model), 0, likelihood=likelihood)
    out = np.empty(len(trees))
    for i, tree in enumerate(trees):
        chain.set_tree(tree)
        out[i] = chain.total_rate()
    return out


def run_case(dataset, model, likelihood, runs, burn, jumps) -> tuple[list, dict]:
    ex = exact(dataset, model)
    lam = total_rates(dataset, model, likelihood, ex.trees)
    nl = np.bincount(ex.n_leaves, weights=ex.post)
    names, g = [], []  # g: (quantity, tree) values
    for k, pk in enumerate(nl):
        if pk >= 1e-3:
            names.append(("P(n_leaves)", f"P(n_leaves = {k})"))
            g.append((ex.n_leaves == k).astype(float))
    names.append(("E[n_leaves]", "E[n_leaves]"))
    g.append(ex.n_leaves.astype(float))
    for i in np.flatnonzero(ex.post >= 0.02):
        names.append(("P(tree)", f"P(tree {i})"))
        g.append((np.arange(len(ex.trees)) == i).astype(float))
    g = np.array(g)
    truth = g @ ex.post
    est = np.empty((len(ESTIMATORS), runs, len(truth)))
    for r in range(runs):
        seed = zlib.crc32(f"rb/{dataset}/{model}/{r}".encode())
        labels = visited_trees(dataset, model, likelihood, seed, burn, jumps, ex.index)
        gv = g[:, labels]  # (quantity, jump)
        tau = np.random.default_rng(seed).exponential(1.0 / lam[labels])
        for e, w in enumerate((1.0 / lam[labels], tau, np.ones(jumps))):
            est[e, r] = gv @ w / w.sum()
    err = est - truth
    stats = {"names": names, "truth": truth, "bias": err.mean(axis=1), "sd": est.std(axis=1, ddof=1),
             "mse": (err ** 2).mean(axis=1)}
    return names, stats


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--burn", type=int, default=1_000)
    ap.add_argument("--jumps", type=int, default=2_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "?"
    shown = " ".join(["PYTHONPATH=. python3 benchmarks/ctmc_rao_blackwell.py",
                      *(argv if argv is not None else sys.argv[1:])])
    summary = ["| case | quantities | " + " | ".join(f"MSE {e}" for e in ESTIMATORS)
               + " | MSE ratio holding time / RB | MSE ratio unweighted / RB |", "|---|---|---|---|---|---|---|"]
    detail = ["| case | quantity | exact | " + " | ".join(f"{e}: bias, sd" for e in ESTIMATORS) + " |",
              "|---|---|---|---|---|---|"]
    for dataset, model, likelihood in CASES:
        case = f"{dataset}/{model or 'prior only'}"
        names, s = run_case(dataset, model, likelihood, args.runs, args.burn, args.jumps)
        kinds = [k for k, _ in names]
        for kind in dict.fromkeys(kinds):
            cols = [i for i, k in enumerate(kinds) if k == kind]
            mse = s["mse"][:, cols].sum(axis=1)
            summary.append(f"| {case} | {kind} ({len(cols)}) | " + " | ".join(f"{m:.3g}" for m in mse)
                           + f" | {mse[1] / mse[0]:.2f} | {mse[2] / mse[0]:.2f} |")
        for q, (_, name) in enumerate(names):
            detail.append(f"| {case} | {name} | {s['truth'][q]:.4f} | " + " | ".join(
                f"{s['bias'][e, q]:+.4f}, {s['sd'][e, q]:.4f}" for e in range(len(ESTIMATORS))) + " |")
        print(f"{case} done", flush=True)
    lines = [f"<!-- Generated by `{shown}` at commit {rev}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.perf_counter() - t0:.0f} s wall; machine: "
             f"{machine()}. Seeds: chain r of a case uses crc32('rb/<dataset>/<model>/<r>'), also for its holding "
             "times. Deterministic for the seeds. -->", "",
             f"# Rao-Blackwellized against unweighted `ctmc` estimates (CT-MCMC section 4): {args.runs} runs of "
             f"{args.jumps} jumps after {args.burn}, against the exact posterior", "",
             "MSE over the runs of each estimator, summed over the quantities of each kind (their number in "
             "brackets):", "", *summary, "",
             "Per quantity: bias and sd over the runs.", "", *detail, ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
