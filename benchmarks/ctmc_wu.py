"""CT-MCMC table 1 (and appendix tables 2-3) on the Wu et al. (2007) data: ``ctmc`` against
``grow_prune`` and ``cgm`` on the same data in the same run, under two tree priors.

Noise levels: the paper labels them "sigma^2 = 1, 0.1, 0.01", but its MSE column (about 1.02,
0.01, 1.02e-4 on the noisy test y) shows that the stated number is the noise *standard
deviation*; here the levels are ``--sd 1,0.1,0.01`` (variances 1, 0.01, 1e-4).

Priors: the paper does not state its tree prior. Its code base (OpenBT) defaults to
p_SPLIT = 0.95 (1 + depth)^-2 (power 2); the package default is beta = 0.5. Both are run
(``--beta 0.5,2``), alpha 0.95, min_leaf_size 5, the common-sigma normal model, because the
conclusions below depend on the prior (a deeper-penalising prior keeps trees small).

For each prior, noise sd and replication r: training data ``simulate_wu2007(300, seed=r,
sigma2=sd**2)`` and a fresh test set (``seed=10_000 + r``); one single-tree chain per sampler
(seed r), ``--iters`` kept iterations after ``--burn`` (paper: 20,000 after 1,000; one
iteration = one MH proposal for grow_prune/cgm, one jump for ctmc). Measured per run:

* MSE: mean squared error of the (weighted) posterior mean prediction on the noisy test y, as
  the paper;
* ESS of sigma^2 and of each predictor's activity (share of split rules on it per draw, 0 for
  a stump): arviz bulk ESS for equally weighted draws, the delta-method ESS of the
  self-normalised weighted mean for ctmc (``posterior.weighted.weighted_ess``), never the
  number of jumps;
* activity of x1, x2, x3 (weighted for ctmc): the paper derives about 0.3, 0.4, 0.3;
* unique trees: distinct trees among the kept draws;
* ESS/CPU-s: ESS over the CPU time of the sampling itself: ``time.thread_time()`` of the
  thread that runs the chain, summed over the runner's chunks (the script wraps
  ``bartpy_suite.models._runner.advance``; the fit records no CPU time of its own), after a
  warm-up fit per sampler so no compilation is counted. It includes recording the kept draws
  and excludes building the posterior, the mixing check and prediction (fixed costs per fit
  that inflated the earlier wall-time figures). CPU time, unlike wall time, is nearly
  insensitive to other processes on the machine;
* CPU us per iteration and mean leaves, to see how the cost grows with the tree.

The paper's RJ-B / RJ-C are ``cgm`` with rotate (and perturb) added to its move mix
(``RJ_B_MOVES``, ``RJ_C_MOVES``); CT-B / CT-C are ``ctmc`` with rotate (and perturb) events at
rate ``EVENT_RATE`` each; ``(cgm)`` is our default cgm mix and has no row in the paper. Perturb
includes Pratola's change-of-variable proposal with the sampler's default probability 0.1
(OpenBT's ``probchv``); the rows ``RJ-C no-chv`` / ``CT-C no-chv`` switch it off
(``change_of_variable=0``: perturb as before the proposal existed), to measure what it adds;
``chv1`` rows make every perturb a change of variable, ``sweep`` rows visit every internal node
per perturb move (``perturb_sweep``, OpenBT's schedule). The ``grid100`` rows (RJ-A, RJ-C, RJ-C no-chv;
only by ``--only``) run on OpenBT's grid of 100 evenly spaced cuts per predictor instead of ours.

Run from the repository root (``PYTHONPATH=.`` makes this checkout the imported package); the
defaults are the committed settings:
``PYTHONPATH=. python3 benchmarks/ctmc_wu.py --out benchmarks/results/ctmc_wu.md``
(``--jobs 2`` runs replications in two processes; the CPU-time measure is per thread, so the
results do not depend on it). The per-run rows are written next to ``--out`` as JSON. Text in
``--out`` after the line ``NOTES_MARKER`` (the hand-written reading) is kept on regeneration.
``--only 'RJ-C,CT-C'`` reruns only those rows and merges them into that JSON and the tables (the
other rows kept, a header line per rerun saying which rows ran when and at which commit; the JSON's
``_provenance`` says the same per label).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.models import _runner
from bartpy_suite.posterior.weighted import weighted_ess

RJ_B_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.2, "swap": 0.1, "rotate": 0.2}
RJ_C_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.1, "swap": 0.1, "rotate": 0.15, "perturb": 0.15}
EVENT_RATE = 2.0
# (sampler, label, sampler_options)
SAMPLERS = [("grow_prune", "RJ-A", {}), ("cgm", "(cgm)", {}), ("ctmc", "CT-A", {})]
ROTATE_SAMPLERS = [
    ("cgm", "RJ-B", {"moves": RJ_B_MOVES}),
    ("cgm", "RJ-C", {"moves": RJ_C_MOVES}),
    ("ctmc", "CT-B", {"rotate": EVENT_RATE}),
    ("ctmc", "CT-C", {"rotate": EVENT_RATE, "perturb": EVENT_RATE}),
]
# RJ-C and CT-C with perturb's change-of-variable proposal switched off (its default probability is
# 0.1, OpenBT's probchv): perturb as it was before CHGV existed (same draws), to measure what CHGV adds.
# "chv1": every perturb at a numeric rule is a change of variable (probability 1), ten times the
# default's CHGV proposals per iteration: does the rate of CHGV proposals matter?
NO_CHGV_SAMPLERS = [
    ("cgm", "RJ-C no-chv", {"moves": RJ_C_MOVES, "change_of_variable": 0.0}),
    ("ctmc", "CT-C no-chv", {"rotate": EVENT_RATE, "perturb": EVENT_RATE, "change_of_variable": 0.0}),
    ("cgm", "RJ-C chv1", {"moves": RJ_C_MOVES, "change_of_variable": 1.0}),
    ("ctmc", "CT-C chv1", {"rotate": EVENT_RATE, "perturb": EVENT_RATE, "change_of_variable": 1.0}),
    # OpenBT's schedule: each perturb move (event) visits every internal node, CHGV 0.1 at each
    ("cgm", "RJ-C sweep", {"moves": RJ_C_MOVES, "perturb_sweep": True}),
    ("ctmc", "CT-C sweep", {"rotate": EVENT_RATE, "perturb": EVENT_RATE, "perturb_sweep": True}),
]
# OpenBT's cut grid (numcut = 100 cuts evenly spaced over each predictor's range, as
# ``pg_bart_hypercube.paper_grid("uniform")``) instead of one cut between each pair of distinct values:
# on it about a quarter of x3's cuts fall in the gap between the blocks, against 1 of 291 on ours, so
# these rows measure whether the grid is why change of variable does not lift x1 and x3 here. Only
# by --only (not in the default run).
GRID_KEY = "_grid"
GRID100_SAMPLERS = [
    ("grow_prune", "RJ-A grid100", {GRID_KEY: "uniform"}),
    ("cgm", "RJ-C grid100", {"moves": RJ_C_MOVES, GRID_KEY: "uniform"}),
    ("cgm", "RJ-C no-chv grid100", {"moves": RJ_C_MOVES, "change_of_variable": 0.0, GRID_KEY: "uniform"}),
]
ALL_SAMPLERS = SAMPLERS + ROTATE_SAMPLERS + NO_CHGV_SAMPLERS + GRID100_SAMPLERS
PAPER_LABEL = {"RJ-C no-chv": "RJ-C", "CT-C no-chv": "CT-C", "RJ-C chv1": "RJ-C", "CT-C chv1": "CT-C",
               "RJ-C sweep": "RJ-C", "CT-C sweep": "CT-C", "RJ-A grid100": "RJ-A", "RJ-C grid100": "RJ-C",
               "RJ-C no-chv grid100": "RJ-C"}
JUMP_HEADER = "## CPU time per ctmc jump against tree size (noise sd 1, prior beta varied)"
NOTES_MARKER = ("<!-- hand-written reading below (kept by ctmc_wu.py on regeneration); "
                "numbers quoted from the tables above -->")

# CT-MCMC paper, tables 1-3 (averages over 100 replications): MSE, ESS sigma^2, ESS x1, x2, x3,
# activity x1, x2, x3, unique trees, ESS/s sigma^2, x1, x2, x3. Keyed by the noise standard
# deviation: the paper labels its levels "sigma^2 = 1, 0.1, 0.01", but its MSE column (about
# 1.02, 0.01, 1.02e-4 on the noisy test y) is the square of that number, so the stated number is
# the standard deviation. (ESS/s: the paper's own timing, not comparable in level with ours.)
PAPER = {
    1.0: {
        "RJ-A": [1.02, 19758, 1037, 2370, 1265, 0.27, 0.45, 0.28, 1.83, 26344, 1382, 3160, 1686],
        "RJ-B": [1.02, 19774, 1419, 2899, 1482, 0.25, 0.49, 0.26, 3.07, 21971, 1576, 3221, 1646],
        "RJ-C": [1.02, 19625, 13134, 1306, 13144, 0.25, 0.5, 0.25, 8.29, 11410, 7636, 759, 7642],
        "CT-A": [1.02, 19282, 14160, 32374, 14128, 0.28, 0.43, 0.28, 11.44, 5371, 3944, 9018, 3935],
        "CT-B": [1.02, 19577, 40041, 74608, 37925, 0.27, 0.48, 0.25, 3.82, 5515, 11279, 21016, 10683],
        "CT-C": [1.02, 20474, 14452, 51557, 14518, 0.26, 0.47, 0.26, 11.71, 4611, 3255, 11612, 3270],
    },
    0.1: {
        "RJ-A": [0.01, 19735, 1279, 2275, 996, 0.29, 0.45, 0.26, 1.67, 26669, 1729, 3074, 1346],
        "RJ-B": [0.01, 19707, 1203, 3021, 1818, 0.23, 0.47, 0.30, 2.68, 21656, 1322, 3319, 1997],
        "RJ-C": [0.01, 19660, 13247, 2141, 13255, 0.25, 0.5, 0.25, 7.98, 11702, 7885, 1274, 7890],
        "CT-A": [0.01, 24759, 14276, 39968, 14333, 0.28, 0.44, 0.28, 10.24, 6897, 3977, 11133, 3993],
        "CT-B": [0.01, 19703, 36275, 75526, 39250, 0.25, 0.48, 0.27, 3.00, 5582, 10276, 21395, 11119],
        "CT-C": [0.01, 29061, 14470, 55343, 14467, 0.26, 0.47, 0.26, 10.0, 6590, 3281, 12550, 3280],
    },
    0.01: {
        "RJ-A": [1.02e-4, 19739, 1410, 3029, 1620, 0.25, 0.44, 0.31, 1.61, 26675, 1905, 4094, 2189],
        "RJ-B": [1.02e-4, 19742, 2687, 5290, 2603, 0.29, 0.49, 0.22, 2.80, 22434, 3053, 6011, 2958],
        "RJ-C": [1.02e-4, 19719, 13315, 3602, 13319, 0.25, 0.5, 0.25, 7.71, 11738, 7926, 2144, 7928],
        "CT-A": [1.03e-4, 15230, 14095, 21063, 14131, 0.28, 0.43, 0.28, 15.8, 4290, 3971, 5933, 3981],
        "CT-B": [1.02e-4, 19713, 34644, 75182, 40538, 0.24, 0.48, 0.28, 3.00, 5585, 9814, 21298, 11484],
        "CT-C": [1.04e-4, 19254, 14308, 43675, 14283, 0.27, 0.46, 0.27, 10.0, 4269, 3173, 9684, 3167],
    },
}
COLUMNS = ["MSE", "ESS s2", "ESS x1", "ESS x2", "ESS x3", "act x1", "act x2", "act x3", "unique trees",
           "ESS/s s2", "ESS/s x1", "ESS/s x2", "ESS/s x3"]


COLUMNS = ["MSE", "ESS s2", "ESS x1", "ESS x2", "ESS x3", "act x1", "act x2", "act x3", "unique trees",
           "ESS/s s2", "ESS/s x1", "ESS/s x2", "ESS/s x3"]
ACT = ("x1", "x2", "x3")

# -- CPU time of the sampling itself ---------------------------------------------------------------

_SAMPLING_CPU = [0.0]
_plain_advance = _runner.advance


def _timed_advance(run_chunk, total_iter, stopped, report=None):
    # runs in the chain's worker thread: thread_time() counts that thread's CPU time only
    t0 = time.thread_time()
    try:
        return _plain_advance(run_chunk, total_iter, stopped, report)
    finally:
        _SAMPLING_CPU[0] += time.thread_time() - t0


def timed_cart(**kwargs):
    """``bps.cart(**kwargs)`` and the CPU seconds its chains spent sampling."""
    _runner.advance = _timed_advance
    _SAMPLING_CPU[0] = 0.0
    try:
        fit = bps.cart("y ~ x1 + x2 + x3", progress=False, threads=1, check_mixing=False, log_likelihood=False,
                       **kwargs)
    finally:
        _runner.advance = _plain_advance
    return fit, _SAMPLING_CPU[0]


def unique_trees(fit) -> int:
    arr = fit.tree_arrays()
    var = arr["split_var"].values.reshape(-1, arr.sizes["node"])
    cut = arr["split_cut"].values.reshape(-1, arr.sizes["node"])
    return len({(v.tobytes(), c.tobytes()) for v, c in zip(var, cut)})


def x1_x3_flips(act1: np.ndarray, act3: np.ndarray) -> int:
    """How often the variable with more splits among the confounded x1 and x3 changes along the
    chain (draws where they tie, e.g. neither is used, are skipped): the switches between the x1
    and the x3 form of the tree that change of variable exists to make."""
    side = np.sign(act1 - act3)
    side = side[side != 0]
    return int(np.count_nonzero(side[1:] != side[:-1]))


def one_run(sampler: str, train: pd.DataFrame, test: pd.DataFrame, iters: int, burn: int, seed: int, beta: float,
            options: dict | None = None) -> dict:
    options = dict(options or {})
    grid = options.pop(GRID_KEY, "quantile")
    from pg_bart_hypercube import paper_grid  # the benchmarks folder is on sys.path when run as a script

    with paper_grid(grid):
        fit, cpu = timed_cart(data=train, sampler=sampler, chains=1, draws=iters, tune=burn, seed=seed, beta=beta,
                              sampler_options=options or None)
        pred = fit.predict(test)["mean"].to_numpy()
    w = fit.weights.values
    s2 = fit.posterior["sigma"].values ** 2
    act = fit.posterior["variable_activity"].values  # (chain, draw, predictor)
    row = {"MSE": float(np.mean((pred - test["y"].to_numpy()) ** 2)), "ESS s2": weighted_ess(s2, w)}
    for k in range(3):
        row[f"ESS x{k + 1}"] = weighted_ess(act[..., k], w)
        row[f"act x{k + 1}"] = float((w * act[..., k]).sum() / w.sum())
    row["unique trees"] = unique_trees(fit)
    row["x1/x3 flips"] = x1_x3_flips(act[..., 0].ravel(), act[..., 2].ravel())
    for name in ("s2",) + ACT:
        row[f"ESS/s {name}"] = row[f"ESS {name}"] / cpu
    row["cpu seconds"] = cpu
    row["leaves"] = float((w * fit.posterior["n_leaves"].values).sum() / w.sum())
    row["us per iter"] = 1e6 * cpu / (iters + burn)
    return row


def warm_up(samplers) -> None:
    """Compile (or load from numba's cache) every kernel used, so no timing counts compilation."""
    warnings.filterwarnings("ignore", category=bps.MixingWarning)
    warm = bps.datasets.simulate_wu2007(300, seed=0)
    for sampler, _, options in samplers:
        options = {k: v for k, v in (options or {}).items() if k != GRID_KEY}
        timed_cart(data=warm, sampler=sampler, chains=1, draws=20, tune=5, seed=0, sampler_options=options or None)


def replication(task: tuple) -> tuple:
    """All samplers on replication ``r`` of noise sd ``sd`` under prior ``beta``."""
    beta, sd, r, iters, burn, samplers = task
    train = bps.datasets.simulate_wu2007(300, seed=r, sigma2=sd ** 2)
    test = bps.datasets.simulate_wu2007(300, seed=10_000 + r, sigma2=sd ** 2)
    rows = {label: one_run(sampler, train, test, iters, burn, seed=r, beta=beta, options=options)
            for sampler, label, options in samplers}
    print(f"beta={beta} sd={sd} rep {r}: " + "; ".join(
        f"{label} ESS x1 {rows[label]['ESS x1']:.0f} cpu {rows[label]['cpu seconds']:.1f}s" for label in rows),
        flush=True)
    return beta, sd, r, rows


def fmt(x) -> str:
    if isinstance(x, str):
        return x
    if x != x:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def rng_of(values) -> str:
    """'a-b' with two decimals (or one value)."""
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def level_tables(rows: dict, sd: float, labels: list) -> tuple[list, dict]:
    """Markdown table and ratio lines for one prior and noise level; the means per label."""
    lines = ["| method | source | " + " | ".join(COLUMNS) + " | leaves | CPU us/iter |",
             "|---|---|" + "---|" * (len(COLUMNS) + 2)]
    means = {}
    for label in labels:
        means[label] = pd.DataFrame(rows[label]).mean()
        if label in PAPER[sd]:  # (the no-chv rows share their method's paper row, shown once)
            lines.append(f"| {label} | paper | " + " | ".join(fmt(v) for v in PAPER[sd][label]) + " | - | - |")
        lines.append(f"| {label} | ours | " + " | ".join(fmt(means[label][c]) for c in COLUMNS)
                     + f" | {fmt(means[label]['leaves'])} | {fmt(means[label]['us per iter'])} |")
    ratio = {c: means["CT-A"][c] / means["RJ-A"][c] for c in COLUMNS if c.startswith("ESS")}
    paper_ratio = {c: PAPER[sd]["CT-A"][COLUMNS.index(c)] / PAPER[sd]["RJ-A"][COLUMNS.index(c)] for c in ratio}
    lines += ["", "CT-A / RJ-A ratios of the means (ours, paper; ESS/s: ours per CPU second of sampling, the "
              "paper's own timing): " + "; ".join(f"{c} {ratio[c]:.2f} ({paper_ratio[c]:.2f})" for c in ratio), ""]
    per_rep = np.array([[a[f"ESS/s {x}"] / b[f"ESS/s {x}"] for x in ACT] for a, b in zip(rows["CT-A"], rows["RJ-A"])])
    lines += [f"Per-replication ratio CT-A / RJ-A of ESS per CPU second on the activities: median "
              f"{np.median(per_rep):.2f}, range {per_rep.min():.2f}-{per_rep.max():.2f}", ""]
    for a, b in (("CT-B", "RJ-B"), ("CT-C", "RJ-C"), ("RJ-B", "RJ-A"), ("RJ-C", "RJ-A"), ("CT-B", "CT-A"),
                 ("CT-C", "CT-A"), ("RJ-C no-chv", "RJ-A"), ("CT-C no-chv", "CT-A"), ("RJ-C chv1", "RJ-A"),
                 ("CT-C chv1", "CT-A"), ("RJ-C sweep", "RJ-A"), ("CT-C sweep", "CT-A"), ("RJ-C", "RJ-C no-chv"),
                 ("CT-C", "CT-C no-chv"), ("RJ-C grid100", "RJ-A grid100"), ("RJ-C no-chv grid100", "RJ-A grid100")):
        if a not in means or b not in means:
            continue
        ours = {c: means[a][c] / means[b][c] for c in ("ESS x1", "ESS x2", "ESS x3", "ESS/s x2", "unique trees")}
        pa, pb = PAPER_LABEL.get(a, a), PAPER_LABEL.get(b, b)
        paper = {c: PAPER[sd][pa][COLUMNS.index(c)] / PAPER[sd][pb][COLUMNS.index(c)] for c in ours}
        lines.append(f"{a} / {b} (ours, paper): " + "; ".join(f"{c} {ours[c]:.2f} ({paper[c]:.2f})" for c in ours))
    lines.append("")
    return lines, means


def summary_table(all_means: dict, labels: list) -> list:
    """One row per prior and noise level: the ratios the paper's conclusions rest on."""
    lines = ["## The conclusions under both priors", "",
             "Ratios of the means over replications (ranges over x1, x2, x3 for the activities); ESS/CPU-s is per "
             "CPU second of sampling.", "",
             "| beta | noise sd | CT-A / RJ-A ESS act | CT-A / RJ-A ESS/CPU-s act | CT-A / RJ-A ESS/CPU-s s2 "
             "| RJ-C / RJ-A ESS x1, x3 | RJ-C no-chv / RJ-A ESS x1, x3 | CT-B / CT-A ESS act | CT-C / CT-A ESS act "
             "| CT-C no-chv / CT-A ESS act | mean leaves RJ-A, CT-A, RJ-C, CT-C | test MSE RJ-A, (cgm), CT-A, RJ-C, "
             "CT-C |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (beta, sd), m in all_means.items():
        def r(a, b, cols, m=m):
            return [m[a][c] / m[b][c] for c in cols]
        ess = [f"ESS {x}" for x in ACT]
        esss = [f"ESS/s {x}" for x in ACT]
        rot = "rotate" if "CT-B" in m else None
        cells = [f"{beta:g}", f"{sd:g}", rng_of(r("CT-A", "RJ-A", ess)), rng_of(r("CT-A", "RJ-A", esss)),
                 f"{m['CT-A']['ESS/s s2'] / m['RJ-A']['ESS/s s2']:.2f}"]
        if rot:
            no_chv = "RJ-C no-chv" in m and "CT-C no-chv" in m
            cells += [", ".join(f"{v:.2f}" for v in r("RJ-C", "RJ-A", ["ESS x1", "ESS x3"])),
                      ", ".join(f"{v:.2f}" for v in r("RJ-C no-chv", "RJ-A", ["ESS x1", "ESS x3"])) if no_chv else "-",
                      rng_of(r("CT-B", "CT-A", ess)), rng_of(r("CT-C", "CT-A", ess)),
                      rng_of(r("CT-C no-chv", "CT-A", ess)) if no_chv else "-",
                      ", ".join(f"{m[k]['leaves']:.1f}" for k in ("RJ-A", "CT-A", "RJ-C", "CT-C")),
                      ", ".join(f"{m[k]['MSE']:.3g}" for k in ("RJ-A", "(cgm)", "CT-A", "RJ-C", "CT-C"))]
        else:
            cells += ["-"] * 6 + [", ".join(f"{m[k]['MSE']:.3g}" for k in ("RJ-A", "(cgm)", "CT-A"))]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


MEDIAN_LABELS = ("RJ-A", "CT-A", "RJ-C", "RJ-C no-chv", "RJ-C chv1", "RJ-C sweep", "CT-C", "CT-C no-chv", "CT-C chv1",
                 "CT-C sweep")


def flips_table(runs: dict, iters: int) -> list:
    """The x1 / x3 switches per run (``x1_x3_flips``), for the rows that recorded them."""
    labels = [label for _, label, _ in ALL_SAMPLERS
              if any(label in rows and rows[label][0] is not None and "x1/x3 flips" in rows[label][0]
                     for rows in runs.values())]
    if not labels:
        return []
    lines = ["## Switches between the x1 and the x3 form of the tree", "",
             "x1 and x3 are confounded (Spearman about -0.67; the rows with x1 < 0.5 are those with x3 > 0.5), so "
             "a split on one has an almost equivalent split on the other. Per run: how often the variable with "
             f"more splits among x1 and x3 changes along the {iters:,} kept iterations (jumps for ctmc); median "
             "over replications, and the number of runs with at least one switch. A chain that never switches "
             "can still have a high within-chain ESS of the activities.", "",
             "| beta | noise sd | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for (beta, sd), rows in runs.items():
        cells = [f"{beta:g}", f"{sd:g}"]
        for label in labels:
            got = [r["x1/x3 flips"] for r in rows.get(label, []) if r is not None and "x1/x3 flips" in r]
            cells.append(f"{np.median(got):g} ({sum(g > 0 for g in got)} of {len(got)})" if got else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def median_table(runs: dict, iters: int) -> list:
    """Medians over replications, and how often a weighted ESS exceeds the number of draws."""
    lines = ["## Medians over replications", "",
             "Means over replications are dominated by a few replications. Medians of the ESS of the activities "
             "(x1 / x2 / x3), the median per-replication ratio CT-A / RJ-A of ESS per CPU second of sampling on "
             f"the activities, and the number of runs whose ESS of some activity exceeds the {iters:,} draws "
             "(possible for the delta-method ESS of a weighted mean when the jump chain oscillates between "
             "neighbouring trees; it measures the within-chain average's variance, not exploration):", "",
             "| beta | noise sd | " + " | ".join(f"median ESS {k}" for k in MEDIAN_LABELS)
             + " | median CT-A / RJ-A ESS/CPU-s | CT-A runs with ESS > draws |",
             "|---|---|" + "---|" * (len(MEDIAN_LABELS) + 2)]
    for (beta, sd), rows in runs.items():
        cells = [f"{beta:g}", f"{sd:g}"]
        for label in MEDIAN_LABELS:
            if label not in rows:
                cells.append("-")
                continue
            cells.append(" / ".join(fmt(float(np.median([r[f"ESS {x}"] for r in rows[label]]))) for x in ACT))
        per_rep = [a[f"ESS/s {x}"] / b[f"ESS/s {x}"] for a, b in zip(rows["CT-A"], rows["RJ-A"]) for x in ACT]
        over = sum(max(r[f"ESS {x}"] for x in ACT) > iters for r in rows["CT-A"])
        cells += [f"{np.median(per_rep):.2f}", f"{over} of {len(rows['CT-A'])}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def gap_cut_table(reps: int, min_leaf: int = 5, numcut: int = 100) -> list:
    """Why a uniform change-of-variable cut rarely lands on the split equivalent to x1's block split:
    at the root of replication r's training data, the x3 cuts available (both children >= min_leaf
    rows) on the package's grid (a cut between consecutive distinct values) and on OpenBT's
    (``numcut`` cuts evenly spaced over the range), and how many of them separate the x3 blocks
    (the rows with x3 > 0.5 are exactly those with x1 < 0.5). No sampling."""
    from bartpy_suite._binning import BinnedPredictors

    rows = []
    for r in range(reps):
        d = bps.datasets.simulate_wu2007(300, seed=r)
        x = d[["x1", "x2", "x3"]].to_numpy()
        bp = BinnedPredictors.fit(x, np.zeros(3, dtype=bool), np.zeros(3, dtype=int), None)
        x3 = x[:, 2]
        n_low = int(np.count_nonzero(x3 < 0.5))
        for name, grid in (("ours", bp.cuts[2]), ("OpenBT", np.linspace(x3.min(), x3.max(), numcut + 2)[1:-1])):
            left = np.array([np.count_nonzero(x3 <= t) for t in grid])
            avail = (left >= min_leaf) & (left <= len(x3) - min_leaf)
            rows.append((r, name, int(avail.sum()), int(np.count_nonzero(avail & (left == n_low)))))
    lines = ["## Cuts between the x3 blocks (why change of variable rarely finds the equivalent split)", "",
             "At the root of each replication's training data: the x3 cuts available with min_leaf_size "
             f"{min_leaf} on our grid (a cut between consecutive distinct values) and on OpenBT's ({numcut} cuts "
             "evenly spaced over the range), and how many of them give the split equivalent to x1's block split "
             "(x3 > 0.5 holds exactly the rows with x1 < 0.5). A change-of-variable proposal draws its cut "
             "uniformly among the available ones.", "",
             "| grid | available x3 cuts (min-max over replications) | block-separating cuts | share |",
             "|---|---|---|---|"]
    for name in ("ours", "OpenBT"):
        got = [(a, b) for _, nm, a, b in rows if nm == name]
        avail = [a for a, _ in got]
        sep = [b for _, b in got]
        share = [b / a for a, b in got]
        lines.append(f"| {name} | {min(avail)}-{max(avail)} | {min(sep)}-{max(sep)} | "
                     f"{min(share):.4f}-{max(share):.4f} |")
    return lines + [""]


def jump_cost(sizes=(300, 3000), iters=3000) -> list[tuple]:
    """CPU microseconds of sampling per ctmc jump (and per grow_prune iteration, same run)
    against the mean number of leaves: wu2007 data with noise sd 1, n rows, beta in
    (2, 1, 0.5, 0.25) so the posterior trees grow from a few leaves to several tens."""
    out = []
    for n in sizes:
        df = bps.datasets.simulate_wu2007(n, seed=1)
        for beta in (2.0, 1.0, 0.5, 0.25):
            row = [n, beta]
            for sampler in ("ctmc", "grow_prune"):
                fit, cpu = timed_cart(data=df, sampler=sampler, chains=1, draws=iters, tune=500, seed=1, beta=beta)
                w = fit.weights.values
                row += [float((w * fit.posterior["n_leaves"].values).sum() / w.sum()), 1e6 * cpu / (iters + 500)]
            out.append(tuple(row))
    return out


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def write_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20_000)
    ap.add_argument("--burn", type=int, default=1_000)
    ap.add_argument("--sd", default="1,0.1,0.01", help="noise standard deviations (the paper's levels)")
    ap.add_argument("--beta", default="0.5,2", help="tree prior powers: 0.5 the package default, 2 OpenBT's")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for the replications")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-jump-cost", action="store_true", help="skip the time-per-jump table")
    ap.add_argument("--no-rotate", action="store_true", help="leave out the RJ-B, RJ-C, CT-B and CT-C rows")
    ap.add_argument("--no-chv-rows", action="store_true",
                    help="leave out the RJ-C / CT-C rows without perturb's change of variable")
    ap.add_argument("--only", default=None,
                    help="comma-separated labels (e.g. 'RJ-C,CT-C'): run only these samplers and merge their rows into "
                         "the JSON next to --out (same --reps/--iters/--burn/--sd/--beta as that run); the other rows "
                         "are kept as they are and the header says which rows ran when")
    ap.add_argument("--from-json", default=None,
                    help="re-render the tables from the per-run JSON of an earlier run (same settings) instead of "
                         "sampling; the CPU-time-per-jump section of --out is kept as it is")
    args = ap.parse_args(argv)
    samplers = SAMPLERS + ([] if args.no_rotate else ROTATE_SAMPLERS) + (
        [] if args.no_rotate or args.no_chv_rows else NO_CHGV_SAMPLERS)
    sds = [float(x) for x in args.sd.split(",")]
    betas = [float(x) for x in args.beta.split(",")]
    for sd in sds:
        if sd not in PAPER:
            raise SystemExit(f"--sd: {sd} is not one of the paper's levels {sorted(PAPER)}")
    saved, json_path = None, (os.path.splitext(args.out)[0] + ".json" if args.out else None)
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        known = {label: (sampler, label, opts) for sampler, label, opts in ALL_SAMPLERS}
        unknown = [x for x in wanted if x not in known]
        if unknown:
            raise SystemExit(f"--only: unknown label(s) {unknown}; labels are {list(known)}")
        if args.from_json or not args.out or not os.path.exists(json_path):
            raise SystemExit("--only merges into the JSON next to --out: give --out of an earlier full run "
                             "(and no --from-json)")
        with open(json_path) as fh:
            saved = json.load(fh)
        run_samplers = [known[x] for x in wanted]
    else:
        run_samplers = samplers
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = commit()  # at the start: the code that samples
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    tasks = [(beta, sd, r, args.iters, args.burn, run_samplers) for beta in betas for sd in sds
             for r in range(args.reps)]
    if args.from_json:
        with open(args.from_json) as fh:
            saved = json.load(fh)
    if args.from_json or args.only:
        # the labels the saved run has, in the script's order, then the ones being added
        labels = [label for _, label, _ in ALL_SAMPLERS
                  if label in saved[f"beta={betas[0]:g} sd={sds[0]:g}"] or (args.only and label in wanted)]
    else:
        labels = [label for _, label, _ in samplers]
    if args.from_json:
        results = [(beta, sd, r, {label: saved[f"beta={beta:g} sd={sd:g}"][label][r] for label in labels})
                   for beta, sd, r, *_ in tasks]
        args.no_jump_cost = True
    elif args.jobs > 1:
        warm_up(run_samplers)
        with ProcessPoolExecutor(args.jobs, initializer=warm_up, initargs=(run_samplers,)) as pool:
            results = list(pool.map(replication, tasks))
    else:
        warm_up(run_samplers)
        results = [replication(t) for t in tasks]
    runs = {(beta, sd): {label: [None] * args.reps for label in labels} for beta in betas for sd in sds}
    if args.only:  # start from the saved rows (their own replication count), then put the new ones in
        for beta in betas:
            for sd in sds:
                old = saved[f"beta={beta:g} sd={sd:g}"]
                for label in labels:
                    if label in old and label not in wanted:
                        runs[(beta, sd)][label] = old[label]
    for beta, sd, r, rows in results:
        for label, row in rows.items():
            runs[(beta, sd)][label][r] = row
    title_reps = args.reps
    if args.only:
        title_reps = len(runs[(betas[0], sds[0])]["RJ-A"])
        if title_reps != args.reps:
            title_reps = f"{title_reps} (rows {', '.join(wanted)}: {args.reps})"
    shown_argv = argv if argv is not None else sys.argv[1:]
    command = " ".join(["PYTHONPATH=. python3 benchmarks/ctmc_wu.py", *shown_argv])
    lines = [f"<!-- Generated by `{command}` at commit "
             f"{head}, started {started}, {time.perf_counter() - t0:.0f} s wall; machine: {machine()}; load "
             f"average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (CPU times are per thread, "
             f"little affected by load). Seeds: training data seed r, test data 10,000 + r, chain seed r, "
             f"r = 0..{args.reps - 1}. -->", "",
             f"# CT-MCMC tables 1-3 replication (Wu et al. 2007 data): {title_reps} replications, {args.iters} "
             f"iterations after {args.burn}, noise sd {', '.join(f'{s:g}' for s in sds)}, tree prior alpha 0.95 "
             f"with beta {' and '.join(f'{b:g}' for b in betas)}", ""]
    provenance = dict(saved.get("_provenance", {})) if saved else {}
    if args.from_json or args.only:  # the sampling run's header stays; say how these tables were made
        header = "<!-- (header of the sampling run missing) -->"
        if args.out and os.path.exists(args.out):
            with open(args.out) as fh:
                old_lines = fh.read().split("\n")
            # the first line and the notes of earlier partial reruns and re-renderings
            kept = [old_lines[0]] + [x for x in old_lines[1:6] if x.startswith("<!-- Rows ") and (
                not args.only or set(x[len("<!-- Rows "):x.index(" rerun by")].split(", ")) - set(wanted))]
            header = "\n".join(kept)
        if args.from_json:
            note = (f"<!-- Tables re-rendered without sampling from {args.from_json} by `{command}` at "
                    f"commit {commit()}. -->")
        else:
            note = (f"<!-- Rows {', '.join(wanted)} rerun by `{command}` at commit {head}, started {started}, "
                    f"{time.perf_counter() - t0:.0f} s wall, load average {load0:.1f} at the start, "
                    f"{os.getloadavg()[0]:.1f} at the end; every other row is from the run(s) named above. -->")
            for label in wanted:
                provenance[label] = f"rerun at commit {head}, started {started}, by `{command}`"
        lines[0] = f"{header}\n{note}"
    all_means = {}
    for beta in betas:
        for sd in sds:
            lines += [f"## beta = {beta:g}, noise sd = {sd:g} (variance {sd ** 2:g}; the paper's "
                      f"\"sigma^2 = {sd:g}\")", ""]
            body, all_means[(beta, sd)] = level_tables(runs[(beta, sd)], sd, labels)
            lines += body
    lines += summary_table(all_means, labels)
    lines += median_table(runs, args.iters)
    lines += flips_table(runs, args.iters)
    lines += gap_cut_table(args.reps)
    if args.only:
        args.no_jump_cost = True
    if not args.no_jump_cost:
        lines += [JUMP_HEADER, "",
                  "| n | beta | ctmc mean leaves | CPU us per jump | grow_prune mean leaves | CPU us per iteration "
                  "| ratio |", "|---|---|---|---|---|---|---|"]
        for n, beta, leaves, us, gp_leaves, gp_us in jump_cost():
            lines.append(f"| {n} | {beta} | {leaves:.1f} | {us:.0f} | {gp_leaves:.1f} | {gp_us:.0f} | "
                         f"{us / gp_us:.1f} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        notes = ""
        if os.path.exists(args.out):
            with open(args.out) as fh:
                old = fh.read()
            if (args.from_json or args.only) and JUMP_HEADER in old:  # keep the measured section, not re-run
                notes = old[old.index(JUMP_HEADER):]
            elif NOTES_MARKER in old:
                notes = old[old.index(NOTES_MARKER):]
        write_atomically(args.out, text + ("\n" + notes if notes else ""))
        if not args.from_json:
            raw = {f"beta={beta:g} sd={sd:g}": runs[(beta, sd)] for beta, sd in runs}
            if args.only:
                raw["_provenance"] = provenance
            write_atomically(json_path, json.dumps(raw, indent=1) + "\n")


if __name__ == "__main__":
    main()
