"""CT-MCMC table 1 (and appendix tables 2-3) on the Wu et al. (2007) data: ``ctmc`` against
``grow_prune`` and ``cgm`` on the same data in the same run.

For each noise variance sigma^2 in {1, 0.1, 0.01} and each replication r: training data
``simulate_wu2007(300, seed=r, sigma2)`` and a fresh test set (``seed=10_000 + r``); one single
tree chain per sampler, ``--iters`` kept iterations after ``--burn`` (paper: 20,000 after 1,000;
one iteration = one MH proposal for grow_prune/cgm, one jump for ctmc), package default priors
(alpha 0.95, beta 0.5, min_leaf_size 5, the common-sigma normal model). Measured per run:

* MSE: mean squared error of the (weighted) posterior mean prediction on the noisy test y, as
  the paper;
* ESS of sigma^2 and of each predictor's activity (share of split rules on it per draw, 0 for
  a stump): arviz bulk ESS for equally weighted draws, the delta-method ESS of the
  self-normalised weighted mean for ctmc (``posterior.weighted.weighted_ess``), never the
  number of jumps;
* activity of x1, x2, x3 (weighted for ctmc): the paper derives about 0.3, 0.4, 0.3;
* unique trees: distinct trees among the kept draws;
* ESS/s: ESS over the sampling wall time (compiled kernels, one thread, draws recorded,
  posterior built), and its ratio to grow_prune's in the same replication;
* time per jump (ctmc) and mean leaves, to see how the cost grows with the tree.

The paper's RJ-B / RJ-C are ``cgm`` with rotate (and perturb) added to its move mix
(``RJ_B_MOVES``, ``RJ_C_MOVES``); CT-B / CT-C are ``ctmc`` with rotate (and perturb) events at
rate ``EVENT_RATE`` each (``--rotate`` adds these four rows; ``(cgm)`` is our default cgm mix).

Run from the repository root (``PYTHONPATH=.`` makes this checkout the imported package):
``PYTHONPATH=. python3 benchmarks/ctmc_wu.py --reps 20 --out benchmarks/results/ctmc_wu.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import bartpy_suite as bps
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

# CT-MCMC paper, tables 1-3 (averages over 100 replications): MSE, ESS sigma^2, ESS x1, x2, x3,
# activity x1, x2, x3, unique trees, ESS/s sigma^2, x1, x2, x3.
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


def unique_trees(fit) -> int:
    arr = fit.tree_arrays()
    var = arr["split_var"].values.reshape(-1, arr.sizes["node"])
    cut = arr["split_cut"].values.reshape(-1, arr.sizes["node"])
    return len({(v.tobytes(), c.tobytes()) for v, c in zip(var, cut)})


def one_run(sampler: str, train: pd.DataFrame, test: pd.DataFrame, iters: int, burn: int, seed: int,
            options: dict | None = None) -> dict:
    t0 = time.perf_counter()
    fit = bps.cart("y ~ x1 + x2 + x3", data=train, sampler=sampler, chains=1, draws=iters, tune=burn, seed=seed,
                   progress=False, threads=1, sampler_options=options or None)
    seconds = time.perf_counter() - t0
    w = fit.weights.values
    s2 = fit.posterior["sigma"].values ** 2
    act = fit.posterior["variable_activity"].values  # (chain, draw, predictor)
    pred = fit.predict(test)["mean"].to_numpy()
    row = {"MSE": float(np.mean((pred - test["y"].to_numpy()) ** 2)), "ESS s2": weighted_ess(s2, w)}
    for k in range(3):
        row[f"ESS x{k + 1}"] = weighted_ess(act[..., k], w)
        row[f"act x{k + 1}"] = float((w * act[..., k]).sum() / w.sum())
    row["unique trees"] = unique_trees(fit)
    for name in ("s2", "x1", "x2", "x3"):
        row[f"ESS/s {name}"] = row[f"ESS {name}"] / seconds
    row["seconds"] = seconds
    row["leaves"] = float((w * fit.posterior["n_leaves"].values).sum() / w.sum())
    row["us per iter"] = 1e6 * seconds / (iters + burn)
    return row


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


def jump_cost(sizes=(300, 3000), iters=3000) -> list[tuple]:
    """Microseconds per ctmc jump (and per grow_prune iteration, same run) against the mean
    number of leaves: wu2007 data with sigma^2 = 1, n rows, beta in (2, 1, 0.5, 0.25) so the
    posterior trees grow from a few leaves to several tens."""
    out = []
    for n in sizes:
        df = bps.datasets.simulate_wu2007(n, seed=1)
        for beta in (2.0, 1.0, 0.5, 0.25):
            row = [n, beta]
            for sampler in ("ctmc", "grow_prune"):
                t0 = time.perf_counter()
                fit = bps.cart("y ~ x1 + x2 + x3", data=df, sampler=sampler, chains=1, draws=iters, tune=500, seed=1,
                               beta=beta, progress=False, threads=1)
                sec = time.perf_counter() - t0
                w = fit.weights.values
                row += [float((w * fit.posterior["n_leaves"].values).sum() / w.sum()), 1e6 * sec / (iters + 500)]
            out.append(tuple(row))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--iters", type=int, default=20_000)
    ap.add_argument("--burn", type=int, default=1_000)
    ap.add_argument("--sigma2", default="1,0.1,0.01")
    ap.add_argument("--out", default=None)
    ap.add_argument("--jump-cost-only", action="store_true", help="only the time-per-jump table (appended to --out)")
    ap.add_argument("--no-jump-cost", action="store_true", help="skip the time-per-jump table")
    ap.add_argument("--rotate", action="store_true", help="add the RJ-B, RJ-C, CT-B and CT-C rows")
    args = ap.parse_args(argv)
    samplers = SAMPLERS + (ROTATE_SAMPLERS if args.rotate else [])
    warm = bps.datasets.simulate_wu2007(300, seed=0)
    for sampler, _, options in samplers:  # compile before timing
        bps.cart("y ~ x1 + x2 + x3", data=warm, sampler=sampler, chains=1, draws=20, tune=5, seed=0, progress=False,
                 sampler_options=options or None)
    lines = [f"# CT-MCMC table 1-3 replication (Wu et al. 2007 data), {args.reps} replications, "
             f"{args.iters} iterations after {args.burn}", ""]
    if args.jump_cost_only:
        lines = []
    for s2 in [] if args.jump_cost_only else [float(x) for x in args.sigma2.split(",")]:
        rows = {label: [] for _, label, _ in samplers}
        for r in range(args.reps):
            train = bps.datasets.simulate_wu2007(300, seed=r, sigma2=s2)
            test = bps.datasets.simulate_wu2007(300, seed=10_000 + r, sigma2=s2)
            for sampler, label, options in samplers:
                rows[label].append(one_run(sampler, train, test, args.iters, args.burn, seed=r, options=options))
            print(f"sigma2={s2} rep {r}: " + "; ".join(
                f"{label} ESS x1 {rows[label][-1]['ESS x1']:.0f} trees {rows[label][-1]['unique trees']}"
                for _, label, _ in samplers), flush=True)
        lines += [f"## sigma^2 = {s2}", "",
                  "| method | source | " + " | ".join(COLUMNS) + " | leaves | us/iter |",
                  "|---|---|" + "---|" * (len(COLUMNS) + 2)]
        means = {}
        for _, label, _ in samplers:
            df = pd.DataFrame(rows[label])
            means[label] = df.mean()
            if label in PAPER[s2]:
                lines.append(f"| {label} | paper | " + " | ".join(fmt(v) for v in PAPER[s2][label]) + " | - | - |")
            lines.append(f"| {label} | ours | " + " | ".join(fmt(means[label][c]) for c in COLUMNS)
                         + f" | {fmt(means[label]['leaves'])} | {fmt(means[label]['us per iter'])} |")
        ratio = {c: means["CT-A"][c] / means["RJ-A"][c] for c in COLUMNS if c.startswith("ESS")}
        paper_ratio = {c: PAPER[s2]["CT-A"][COLUMNS.index(c)] / PAPER[s2]["RJ-A"][COLUMNS.index(c)] for c in ratio}
        lines += ["", "CT-A / RJ-A ratios (ours, paper): " + "; ".join(
            f"{c} {ratio[c]:.2f} ({paper_ratio[c]:.2f})" for c in ratio), ""]
        # per-replication ratio of ESS/s (same data, same run): median and range
        per_rep = np.array([[a[c] / b[c] for c in ("ESS/s x1", "ESS/s x2", "ESS/s x3")]
                            for a, b in zip(rows["CT-A"], rows["RJ-A"])])
        lines += [f"Per-replication ESS/s ratio CT-A / RJ-A on the activities: median {np.median(per_rep):.2f}, "
                  f"range {per_rep.min():.2f}-{per_rep.max():.2f}", ""]
        for a, b in (("CT-B", "RJ-B"), ("CT-C", "RJ-C"), ("RJ-B", "RJ-A"), ("CT-B", "CT-A"), ("CT-C", "CT-A")):
            if a not in means or b not in means:
                continue
            ours = {c: means[a][c] / means[b][c] for c in ("ESS x1", "ESS x2", "ESS x3", "ESS/s x2", "unique trees")}
            paper = {c: PAPER[s2][a][COLUMNS.index(c)] / PAPER[s2][b][COLUMNS.index(c)] for c in ours}
            lines.append(f"{a} / {b} (ours, paper): " + "; ".join(f"{c} {ours[c]:.2f} ({paper[c]:.2f})"
                                                                  for c in ours))
        lines.append("")
    if args.jump_cost_only:
        lines = []
    if args.no_jump_cost:
        text = "\n".join(lines) + "\n"
        print(text)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text)
        return
    lines += ["## Time per ctmc jump against tree size (sigma^2 = 1, prior beta varied)", "",
              "| n | beta | ctmc mean leaves | us per jump | grow_prune mean leaves | us per iteration | ratio |",
              "|---|---|---|---|---|---|---|"]
    for n, beta, leaves, us, gp_leaves, gp_us in jump_cost():
        lines.append(f"| {n} | {beta} | {leaves:.1f} | {us:.0f} | {gp_leaves:.1f} | {gp_us:.0f} | {us / gp_us:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a" if args.jump_cost_only else "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
