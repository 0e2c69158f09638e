"""Parallel tempering on cgm1998 (thesis chapter 5, table 5.1 settings) against plain ``cgm``.

Settings of the thesis: 800 rows of eq. 3.18, alpha = 0.95, beta = 1, a = 1/3, mu_bar = 4.85,
nu = 10, lambda = 4, min leaf size 5, equal move weights; its geometric ladder of 8 inverse
temperatures and its shrinkage ladder of 15 (alpha, beta) pairs; 8 independent runs per scheme
(here: 8 chains of one fit, each with its own Generator). Every scheme gets the same number of
MH steps per run (iterations x rungs), ``STEPS`` (the thesis: 1.2 M; here 1/10 of that, to keep
the run to minutes on a shared machine). A quarter of the iterations is tuning (discarded).

Reported per scheme: MH steps per second (one thread per run, all runs in one process, so the
ratio to ``cgm`` measured in the same run is the comparable number; the thesis' iters/min beside
it), R-hat across the 8 runs of n_leaves and of the log posterior (ArviZ rank-normalised split
R-hat), final swap acceptance rate per adjacent pair, round trips per run, and the most common
root split of each run. Writes ``results/tempered_cgm.md`` and ``.json``.

Run: ``python3 benchmarks/tempered_cgm.py [--steps N]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

import bartpy_suite as bps
from bartpy_suite.posterior.weighted import weighted_rhat
from bartpy_suite.samplers.tempered import THESIS_TEMPERATURES

RESULTS = Path(__file__).parent / "results"
PRIORS = dict(alpha=0.95, beta=1.0, a=1 / 3, mu_bar=4.85, nu=10.0, lam=4.0, min_leaf_size=5,
              moves={"grow": 0.25, "prune": 0.25, "change": 0.25, "swap": 0.25})
RUNS = 8
# (label, sampler options or None for cgm, rungs, thesis iters/min of table 5.1)
SCHEMES = [
    ("no tempering (cgm)", None, 1, 9898),
    ("geometric SEO (thesis ladder)",
     {"ladder": "geometric", "temperatures": THESIS_TEMPERATURES, "swaps": "seo", "adapt": False}, 8, 3814),
    ("geometric DEO (thesis ladder)",
     {"ladder": "geometric", "temperatures": THESIS_TEMPERATURES, "swaps": "deo", "adapt": False}, 8, 4034),
    ("shrinkage SEO (thesis pairs)", {"ladder": "shrinkage", "swaps": "seo", "adapt": False}, 15, 25589),
    ("shrinkage DEO (thesis pairs)", {"ladder": "shrinkage", "swaps": "deo", "adapt": False}, 15, 30282),
    ("likelihood DEO (8 rungs)", {"ladder": "likelihood", "swaps": "deo", "rungs": 8, "adapt": False}, 8, None),
    ("likelihood DEO (16 rungs)", {"ladder": "likelihood", "swaps": "deo", "rungs": 16, "adapt": False}, 16, None),
    ("geometric DEO adapted (from thesis ladder)",
     {"ladder": "geometric", "temperatures": THESIS_TEMPERATURES, "swaps": "deo", "adapt": True}, 8, None),
    ("shrinkage DEO adapted (from thesis pairs)", {"ladder": "shrinkage", "swaps": "deo", "adapt": True}, 15, None),
    ("likelihood DEO adapted (8 rungs)", {"ladder": "likelihood", "swaps": "deo", "rungs": 8, "adapt": True}, 8,
     None),
    ("likelihood DEO adapted (16 rungs, the default)", {}, 16, None),
]


def root_splits(fit) -> list[str]:
    """Most common root split (variable, cut index) of each chain."""
    trees = fit.idata["trees"]
    counts = trees["tree_nodes"].values[:, :, 0]
    offsets = np.concatenate([[0], np.cumsum(counts.ravel())[:-1]]).reshape(counts.shape)
    var = trees["node_var"].values
    cut = trees["node_cut"].values
    const = fit.idata["constant_data"]
    names = list(const["predictor"].values)
    is_cat = const["is_categorical"].values.astype(bool)
    nbins = const["nbins"].values.astype(int)

    def canonical(v: int, k: int) -> int:
        # A factor rule and its complement are the same split: keep the smaller mask.
        if v < 0 or not is_cat[v]:
            return k
        full = (1 << int(nbins[v])) - 1
        return min(k & full, ~k & full)

    out = []
    for c in range(counts.shape[0]):
        roots = Counter((int(var[o]), canonical(int(var[o]), int(cut[o]))) for o in offsets[c])
        (v, k), n = roots.most_common(1)[0]
        label = "stump" if v < 0 else f"{names[v]}#{k}"
        out.append(f"{label} ({n / counts.shape[1]:.0%})")
    return out


def rhat(fit, name: str) -> float:
    """Rank-normalised split R-hat across the runs (``weighted_rhat`` with uniform weights)."""
    group = "posterior" if name in fit.idata["posterior"] else "sample_stats"
    values = fit.idata[group][name].values.astype(float)
    return float(weighted_rhat(values, np.ones_like(values)))


def run_scheme(df, label, options, rungs, steps, seed):
    iters = steps // rungs
    tune = iters // 4
    draws = iters - tune
    thin = max(draws // 2000, 1)
    sampler = "cgm" if options is None else "tempered"
    t0 = time.perf_counter()
    fit = bps.cart("y ~ x1 + x2", data=df, sampler=sampler, sampler_options=options, chains=RUNS,
                   draws=draws // thin, tune=tune, thin=thin, seed=seed, progress=False, threads=1, **PRIORS)
    wall = time.perf_counter() - t0
    out = {"label": label, "rungs": rungs, "iterations": iters, "mh_steps": iters * rungs, "wall_s": wall,
           "mh_steps_per_s": RUNS * iters * rungs / wall,
           "rhat_n_leaves": rhat(fit, "n_leaves"), "rhat_log_posterior": rhat(fit, "log_posterior"),
           "mean_n_leaves": [float(x) for x in fit.posterior["n_leaves"].mean("draw").values],
           "mean_log_posterior": [float(x) for x in fit.idata["sample_stats"]["log_posterior"].mean("draw").values],
           "root_split": root_splits(fit)}
    if options is not None:
        ss = fit.idata["sample_stats"]
        last = ss.isel(draw=-1)
        out["swap_rate"] = [float(x) for x in np.nanmean(last["swap_rate"].values, axis=0)]
        out["round_trips"] = [int(x) for x in last["round_trips"].values]
        ladder = last["ladder"].values[0]  # (rung, param) of run 0 (adapted ladders differ per run)
        out["ladder_run0"] = [[round(float(v), 5) for v in row] for row in ladder]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120_000, help="MH steps per run (thesis: 1.2 M)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schemes", default=None,
                        help="comma-separated indices into SCHEMES to run (default: all; 0 is cgm, always run)")
    parser.add_argument("--name", default="tempered_cgm", help="results file stem")
    args = parser.parse_args()
    chosen = list(range(len(SCHEMES))) if args.schemes is None else sorted({0, *map(int, args.schemes.split(","))})
    df = bps.datasets.load("cgm1998")
    # Compile every kernel first so that no scheme's time carries compilation.
    bps.cart("y ~ x1 + x2", data=df, sampler="tempered", chains=1, draws=5, tune=5, progress=False, **PRIORS)
    bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=1, draws=5, tune=5, progress=False, **PRIORS)
    rows = []
    for label, options, rungs, thesis in [SCHEMES[i] for i in chosen]:
        row = run_scheme(df, label, options, rungs, args.steps, args.seed)
        row["thesis_iters_per_min"] = thesis
        rows.append(row)
        print(json.dumps(row))
    base = rows[0]["mh_steps_per_s"]
    base_thesis = SCHEMES[0][3]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"steps_per_run": args.steps, "runs": RUNS, "rows": rows},
                                                          indent=1))
    lines = [
        "# Parallel tempering on cgm1998 (thesis table 5.1 settings)",
        "",
        f"{RUNS} independent runs per scheme, {args.steps:,} MH steps per run (thesis: 1.2 M), a quarter tuning; "
        "one thread per run. R-hat: rank-normalised split R-hat across the 8 runs.",
        "",
        "| scheme | rungs | iters/run | MH steps/s | ratio to cgm | thesis iters/min | thesis ratio | "
        "R-hat n_leaves | R-hat log post | swap rate per pair | round trips per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        thesis = r["thesis_iters_per_min"]
        rates = " ".join(f"{x:.2f}" for x in r.get("swap_rate", [])) or "-"
        trips = " ".join(str(x) for x in r.get("round_trips", [])) or "-"
        lines.append(
            f"| {r['label']} | {r['rungs']} | {r['iterations']:,} | {r['mh_steps_per_s']:,.0f} | "
            f"{r['mh_steps_per_s'] / base:.2f} | {thesis if thesis else '-'} | "
            f"{(thesis / base_thesis) if thesis else float('nan'):.2f} | {r['rhat_n_leaves']:.3f} | "
            f"{r['rhat_log_posterior']:.3f} | {rates} | {trips} |"
        )
    lines += ["", "Most common root split per run (share of the run's kept draws):", ""]
    for r in rows:
        lines.append(f"- {r['label']}: " + "; ".join(r["root_split"]))
    lines += ["", "Final ladder of run 0 (t, s, alpha, beta per rung) of the adapted schemes:", ""]
    for r in rows:
        if "adapted" in r["label"]:
            lines.append(f"- {r['label']}: " + "; ".join("(" + ", ".join(f"{v:.3g}" for v in row) + ")"
                                                      for row in r["ladder_run0"]))
    lines += ["", "Mean n_leaves per run:", ""]
    for r in rows:
        lines.append(f"- {r['label']}: " + " ".join(f"{x:.1f}" for x in r["mean_n_leaves"]))
    lines += ["", "Mean log posterior per run:", ""]
    for r in rows:
        lines.append(f"- {r['label']}: " + " ".join(f"{x:.1f}" for x in r["mean_log_posterior"]))
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
