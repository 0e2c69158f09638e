"""RJHMC-Tree tables 1 and 2 (Cochrane et al.): ``hmc_df`` and ``hmc_dfi`` soft trees beside the
paper's numbers and our ``cgm`` CART on the same splits; writes ``benchmarks/results/rjhmc_tables.md``.

Settings follow spec table 4 (h, alpha_s, beta_s per data set and sampler) and spec 4 (splits, the
per-draw argmax-leaf metric over the second half of the kept draws, acceptance over the chain).
Chain lengths, chain counts and the NUTS warm-up per intermediate run are environment settings
because the paper's (10 chains x 1,000 iterations x 2 runs of 501 NUTS transitions) do not fit
on a shared 2-core machine:

    RJHMC_CHAINS (default 1), RJHMC_TUNE (60), RJHMC_DRAWS (60), RJHMC_WARMUP (50),
    RJHMC_SETS (comma list; default cgm,iris,wine,breast_cancer,raisin),
    RJHMC_SAMPLERS (default hmc_dfi,hmc_df), RJHMC_MAX_DEPTH (NUTS max tree depth, default 10),
    RJHMC_FAITHFUL (1: also run warmup=500 restart on CGM DFI)

CGM needs a long tune: the topology is found only during tune (eq. 19 compares the endpoints of
the NUTS runs; after tune eq. 18 evaluates a grow at the prior-drawn split and leaf and accepts
almost none), and on the shipped split one chain needed about 110 tune iterations to reach the
true partition while another had not reached it after 150 (``rjhmc_cgm_trace.py``; the paper
tunes 500); so CGM runs ``RJHMC_CGM_TUNE`` (default 150; 500 is the paper's) tune iterations
whatever ``RJHMC_TUNE`` says. The default
against the faithful setting is ``rjhmc_agreement.py``.

Run: ``PYTHONPATH=. python3 benchmarks/rjhmc_tables.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior import soft

OUT = Path(__file__).resolve().parent / "results" / "rjhmc_tables.md"

# spec table 4: (h_init, h_final, alpha_s, beta_s)
HYPER = {
    "hmc_df": {"iris": (.01, .01, .45, 1.0), "breast_cancer": (.025, .025, .45, 2.5), "cgm": (.001, .001, .45, 2.5),
               "wine": (.025, .025, .45, 2.0), "raisin": (.005, .001, .45, 2.0)},
    "hmc_dfi": {"iris": (.01, .01, .7, 1.0), "breast_cancer": (.1, .025, .95, 2.0), "cgm": (.01, .001, .45, 2.5),
                "wine": (.025, .025, .7, 1.5), "raisin": (.05, .001, .7, 2.5)},
}
# the paper's tables (test metric; table 1: MSE, leaves, acceptance %, table 2: accuracy of the best HMC method)
PAPER = {"cgm": {"hmc_df": "MSE 0.041, 8-10 leaves, ~36% accepted", "hmc_dfi": "MSE 0.041, 8-10 leaves, ~36% accepted"},
         "breast_cancer": ".952", "iris": ".917", "wine": ".950", "raisin": ".847"}
RESPONSE = {"cgm": "y", "iris": "Species", "wine": "cultivar", "breast_cancer": "class", "raisin": "Class"}
TRAIN_FRACTION = {"iris": 0.7, "wine": 0.8, "breast_cancer": 0.7, "raisin": 0.7}


def env(name, default):
    return type(default)(os.environ.get(name, default))


def split(name: str):
    """(train, test) frames: the shipped CGM split, else a seeded split with the paper's fractions."""
    if name == "cgm":
        df = bps.datasets.load("cgm_rjhmc")
        train = df[df["split"] == "train"].drop(columns="split").astype({"x0": float, "x1": float})
        test = df[df["split"] == "test"].drop(columns="split").astype({"x0": float, "x1": float})
        return train.reset_index(drop=True), test.reset_index(drop=True)
    df = bps.datasets.load(name)
    if name == "breast_cancer":
        df = df.drop(columns="id").dropna()
    rng = np.random.default_rng(123456789)
    order = rng.permutation(len(df))
    cut = int(round(TRAIN_FRACTION[name] * len(df)))
    return df.iloc[order[:cut]].reset_index(drop=True), df.iloc[order[cut:]].reset_index(drop=True)


def metric(name, fit, test, pred_draws=None):
    """(paper metric: per-draw argmax-leaf, second half of the draws pooled; eq. 3 posterior average)."""
    y = test[RESPONSE[name]]
    draws = soft.paper_metric(fit, test)
    half = draws.reshape(fit.posterior.sizes["chain"], fit.posterior.sizes["draw"], -1)
    half = half[:, half.shape[1] // 2:].reshape(-1, len(test))
    if name == "cgm":
        per_draw = ((half - y.to_numpy()) ** 2).mean(axis=1)
        avg = float(((fit.predict(test)["mean"] - y) ** 2).mean())
        return f"{per_draw.mean():.3f} ± {per_draw.std():.3f}", f"{avg:.3f}"
    labels = np.asarray(fit.config["class_labels"], dtype=object)
    per_draw = (labels[half] == y.astype(str).to_numpy().astype(object)).mean(axis=1)
    avg = float((fit.predict(test, kind="class")["class"].astype(str) == y.astype(str)).mean())
    return f"{per_draw.mean():.3f} ± {per_draw.std():.3f}", f"{avg:.3f}"


def run_soft(name, sampler, train, chains, tune, draws, options):
    h_i, h_f, a_s, b_s = HYPER[sampler][name]
    t0 = time.perf_counter()
    fit = bps.soft_tree(f"{RESPONSE[name]} ~ .", data=train, sampler=sampler, chains=chains, tune=tune, draws=draws,
                        seed=1, h_init=h_i, h_final=h_f, alpha=a_s, beta=b_s, standardize=False,
                        class_constant=False, sampler_options=options, progress=False, threads=1)
    return fit, (time.perf_counter() - t0) / chains


def run_cart(name, train, test):
    t0 = time.perf_counter()
    fit = bps.cart(f"{RESPONSE[name]} ~ .", data=train, sampler="cgm", chains=1, draws=2000, tune=1000, seed=1,
                   progress=False)
    sec = time.perf_counter() - t0
    y = test[RESPONSE[name]]
    if name == "cgm":
        return f"{float(((fit.predict(test)['mean'] - y) ** 2).mean()):.3f}", sec
    return f"{float((fit.predict(test, kind='class')['class'].astype(str) == y.astype(str)).mean()):.3f}", sec


def main():
    chains, tune, draws = env("RJHMC_CHAINS", 1), env("RJHMC_TUNE", 60), env("RJHMC_DRAWS", 60)
    warmup = env("RJHMC_WARMUP", 50)
    sets = os.environ.get("RJHMC_SETS", "cgm,iris,wine,breast_cancer,raisin").split(",")
    samplers = os.environ.get("RJHMC_SAMPLERS", "hmc_dfi,hmc_df").split(",")
    rows = []
    for name in sets:
        train, test = split(name)
        try:
            cart, cart_sec = run_cart(name, train, test)
        except Exception as exc:  # report, do not hide, a failure of the reference
            cart, cart_sec = f"failed: {exc}", float("nan")
        for sampler in samplers:
            depth = env("RJHMC_MAX_DEPTH", 10)
            settings = [(f"default (carry, warmup {warmup}, max depth {depth})",
                         {"warmup": warmup, "max_tree_depth": depth})]
            if env("RJHMC_FAITHFUL", 0) and name == "cgm" and sampler == "hmc_dfi":
                settings.append(("faithful (restart, warmup 500)", {"warmup": 500, "adaptation": "restart"}))
            for label, options in settings:
                n_tune = env("RJHMC_CGM_TUNE", 150) if name == "cgm" else tune
                fit, sec = run_soft(name, sampler, train, chains, n_tune, draws, options)
                paper_metric, averaged = metric(name, fit, test)
                leaves = fit.posterior["n_leaves"].values
                acc = 100 * fit.sample_stats["accepted"].values.mean()
                paper = PAPER[name][sampler] if name == "cgm" else PAPER[name]
                rows.append({"data": name, "sampler": sampler, "setting": label, "tune": n_tune,
                             "test (paper metric)": paper_metric, "test (eq. 3 average)": averaged,
                             "leaves": f"{leaves.mean():.1f} ± {leaves.std():.1f}", "accept %": f"{acc:.0f}",
                             "s / chain": f"{sec:.0f}", "paper": paper, "cgm CART": cart,
                             "CART s": f"{cart_sec:.0f}"})
                print(rows[-1], flush=True)
                write(rows, chains, tune, draws, warmup)


def write(rows, chains, tune, draws, warmup):
    frame = pd.DataFrame(rows)
    table = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n" + "\n".join(
        "| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False))
    text = f"""# RJHMC-Tree tables 1 and 2: replication on a shared machine

Produced by `benchmarks/rjhmc_tables.py`. **Shortened runs**: {chains} chain(s) x ({tune} tune + {draws}
kept) iterations (CGM: the tune column), {warmup} NUTS warm-up transitions per intermediate run with
step size and metric carried across iterations (the default), against the paper's 10 chains x (N_warmup + N = 1,000)
iterations with 500-transition restarts; the machine (2 cores shared by about seven sessions) gives
one process well under one core, so the paper's settings (about 10^6 NUTS transitions per chain) do
not fit. Hyperparameters are those of spec table 4; `standardize=False` and the code's classification
constant (`class_constant=False`), as the paper. Splits: the shipped CGM split (800/800); the others a
seeded 70% (wine 80%) split, not the authors' rows. "test (paper metric)": per-draw argmax-leaf
routing (spec 4) over the second half of the kept draws, mean ± sd across draws; "test (eq. 3
average)": the posterior-averaged soft prediction (`fit.predict`). CGM: MSE; others: accuracy.
"accept %": accepted RJ moves (stays included) over the kept iterations. "cgm CART": `bps.cart`,
sampler `cgm`, 1 chain, 1,000 tune + 2,000 draws, posterior mean / most probable class.

{table}
"""
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
