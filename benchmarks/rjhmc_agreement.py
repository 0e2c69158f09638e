"""RJHMC-Tree: does the cheap default (step size and metric carried across iterations, a short
NUTS warm-up per intermediate run) give the same posterior numbers as the faithful setting
(``warmup=500, adaptation="restart"``, the authors' code)? Writes
``benchmarks/results/rjhmc_agreement.md``.

Both settings run on the same split, with the same chain lengths and the same seeds (chain k
has seed k for both). Each chain is its own fit, so its CPU seconds (``time.process_time``,
one thread) and its numbers are its own; the table gives mean ± Monte Carlo error
(sd / sqrt(chains)) across chains of: the paper's per-draw test metric (argmax-leaf routing,
second half of the kept draws), the eq. 3 posterior-averaged test metric of the chain, the mean
number of leaves over the kept draws and the acceptance rate over the kept iterations.
"agree" compares the two settings' chain means: |difference| / sqrt(se_a^2 + se_b^2) below 2.

Environment settings (the paper's lengths, 10 chains x 1,000 iterations x 1,002 NUTS
transitions, do not fit the shared machine):

    AGREE_SETS (default iris,breast_cancer), AGREE_SAMPLERS (hmc_df,hmc_dfi), AGREE_CHAINS (10),
    AGREE_TUNE (50), AGREE_DRAWS (50), AGREE_WARMUP (default setting's warm-up: the package default, 20),
    AGREE_FAITHFUL_WARMUP (500), AGREE_MAX_DEPTH (10), AGREE_H (cgm only: "h_init,h_final"
    overriding table 4)

Run: ``PYTHONPATH=. python3 benchmarks/rjhmc_agreement.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior import soft

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _provenance  # noqa: E402
from _tables import write_atomic  # noqa: E402
from rjhmc_tables import HYPER, PAPER, RESPONSE, split  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "rjhmc_agreement.md"
ENV = ("AGREE_SETS", "AGREE_SAMPLERS", "AGREE_CHAINS", "AGREE_TUNE", "AGREE_DRAWS", "AGREE_WARMUP",
       "AGREE_FAITHFUL_WARMUP", "AGREE_MAX_DEPTH", "AGREE_H")
SEEDS = ("chain k (k = 1..chains) of either setting seeded k; the iris and breast-cancer splits "
         "`rjhmc_tables.split` (a permutation from `default_rng(123456789)`), CGM the shipped split")


def env(name, default):
    return type(default)(os.environ.get(name, default))


def one_chain(name, sampler, train, test, seed, tune, draws, options, hyper):
    """(paper metric, eq. 3 metric, mean leaves, acceptance %, CPU seconds) of one chain."""
    h_i, h_f, a_s, b_s = hyper
    t0 = time.process_time()
    fit = bps.soft_tree(f"{RESPONSE[name]} ~ .", data=train, sampler=sampler, chains=1, tune=tune, draws=draws,
                        seed=seed, h_init=h_i, h_final=h_f, alpha=a_s, beta=b_s, standardize=False,
                        class_constant=False, sampler_options=options, progress=False, threads=1,
                        check_mixing=False)
    cpu = time.process_time() - t0
    y = test[RESPONSE[name]]
    per_draw = soft.paper_metric(fit, test)
    per_draw = per_draw[per_draw.shape[0] // 2:]
    if name == "cgm":
        paper = float(((per_draw - y.to_numpy()) ** 2).mean())
        avg = float(((fit.predict(test)["mean"] - y) ** 2).mean())
    else:
        labels = np.asarray(fit.config["class_labels"], dtype=object)
        paper = float((labels[per_draw] == y.astype(str).to_numpy().astype(object)).mean())
        avg = float((fit.predict(test, kind="class")["class"].astype(str) == y.astype(str)).mean())
    leaves = float(fit.posterior["n_leaves"].values.mean())
    acc = 100 * float(fit.sample_stats["accepted"].values.mean())
    return {"paper": paper, "eq3": avg, "leaves": leaves, "accept": acc, "cpu": cpu}


def summary(values):
    v = np.asarray(values, dtype=float)
    return v.mean(), v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")


def main():
    sets = os.environ.get("AGREE_SETS", "iris,breast_cancer").split(",")
    samplers = os.environ.get("AGREE_SAMPLERS", "hmc_df,hmc_dfi").split(",")
    chains, tune, draws = env("AGREE_CHAINS", 10), env("AGREE_TUNE", 50), env("AGREE_DRAWS", 50)
    warmup, faithful_warmup, depth = env("AGREE_WARMUP", 20), env("AGREE_FAITHFUL_WARMUP", 500), env(
        "AGREE_MAX_DEPTH", 10)
    settings = [(f"default (carry, warmup {warmup})", {"warmup": warmup, "max_tree_depth": depth}),
                (f"faithful (restart, warmup {faithful_warmup})",
                 {"warmup": faithful_warmup, "adaptation": "restart", "max_tree_depth": depth})]
    rows = []
    for name in sets:
        train, test = split(name)
        for sampler in samplers:
            hyper = HYPER[sampler][name]
            if name == "cgm" and os.environ.get("AGREE_H"):
                h_i, h_f = (float(v) for v in os.environ["AGREE_H"].split(","))
                hyper = (h_i, h_f, hyper[2], hyper[3])
            means = {}
            for label, options in settings:
                res = [one_chain(name, sampler, train, test, k + 1, tune, draws, options, hyper)
                       for k in range(chains)]
                stats = {key: summary([r[key] for r in res]) for key in res[0]}
                means[label] = stats
                print(name, sampler, label, {k: (round(m, 4), round(s, 4)) for k, (m, s) in stats.items()},
                      flush=True)
                paper = PAPER[name][sampler] if name == "cgm" else PAPER[name]
                rows.append({"data": name, "sampler": sampler, "h_init/h_final": f"{hyper[0]}/{hyper[1]}",
                             "setting": label, "chains": chains,
                             **{col: f"{stats[key][0]:.3f} ± {stats[key][1]:.3f}" for key, col in
                                (("paper", "test (paper metric)"), ("eq3", "test (eq. 3 average)"),
                                 ("leaves", "leaves"), ("accept", "accept %"))},
                             "CPU s / chain": f"{stats['cpu'][0]:.0f}", "paper": paper, "agree": ""})
                write(rows, chains, tune, draws)
            a, b = (means[label] for label, _ in settings)
            verdict = []
            for key, short in (("paper", "metric"), ("eq3", "eq.3"), ("leaves", "leaves"), ("accept", "accept")):
                z = abs(a[key][0] - b[key][0]) / max(np.hypot(a[key][1], b[key][1]), 1e-12)
                verdict.append(f"{short} {'yes' if z < 2 else 'NO'} (z={z:.1f})")
            rows[-1]["agree"] = "; ".join(verdict)
            write(rows, chains, tune, draws)


def write(rows, chains, tune, draws):
    frame = pd.DataFrame(rows)
    table = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n" + "\n".join(
        "| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False))
    OUT.parent.mkdir(exist_ok=True)
    head = "\n".join(_provenance.header(SEEDS, env=ENV))
    write_atomic(OUT, f"""# RJHMC-Tree: cheap default against the faithful setting

{head}
Produced by `benchmarks/rjhmc_agreement.py` ({chains} chains x ({tune} tune + {draws} kept) iterations
per setting, chain k seeded k in both settings, same split). Mean ± Monte Carlo error (sd / sqrt(chains))
across chains; CPU seconds per chain by `time.process_time` (one thread, shared machine). "agree":
|difference of the chain means| / combined MC error below 2. Hyperparameters of spec table 4 unless
the h column says otherwise; `standardize=False`, `class_constant=False`, as the paper.

{table}
""")


if __name__ == "__main__":
    main()
