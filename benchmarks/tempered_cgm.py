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

Also written: MH steps per CPU second of the process (all runs share one thread, so CPU time is
the sampling cost also on a loaded machine), and per rung of the tempered schemes the mean
n_leaves and the mean and sd of the rung's log target ``t log L + s log p`` (geometric ladders:
also of the untempered log posterior ``log L + log p`` = log target / t, whose gaps between
neighbouring rungs times their temperature gap set the swap rates).

``--budget-fractions 0.125,0.25,0.5,1`` adds R-hat against budget from the same runs: R-hat of
the kept draws from the end of tuning up to the given fraction of them (the MH steps spent up to
that point are printed beside it). ``--budget-runs 0.125,0.25,0.5`` runs ``cgm`` and the default
again as independent runs of those fractions of ``--steps`` (each with its own quarter of
tuning) and gives their R-hat. ``--resume`` keeps the rows already in ``NAME.json`` that
were run with the same steps and seed and runs only the missing schemes; the report is
rewritten after every scheme (atomically), so a stopped run leaves a whole report of the
schemes it finished.

Run: ``python3 benchmarks/tempered_cgm.py [--steps N]`` from the repository root (the
committed ``tempered_cgm.md``). The full budget (``tempered_cgm_full.md``)::

    python3 benchmarks/tempered_cgm.py --steps 1200000 --schemes 10,4,2,3,1,11 \\
        --budget-fractions 0.125,0.25,0.5,1 --budget-runs 0.125,0.25,0.5 --speed-check \\
        --name tempered_cgm_full

(about 14 CPU minutes; the committed file was run in three invocations, the later ones with
``--resume``, as its header says). ``--speed-check`` adds what an MH step costs (8 runs of
steps / 10 MH steps per setting): ``cgm`` under the shrinkage rungs' tree priors, and tempered
ladders whose rungs all share the model's target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

import bartpy_suite as bps
from bartpy_suite.posterior.weighted import weighted_rhat
from bartpy_suite.samplers.tempered import THESIS_TEMPERATURES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _provenance import command, commit, machine, now_utc  # noqa: E402
from _tables import write_atomic  # noqa: E402

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
    # Opt-in (not in the default run): the geometric target with enough rungs for its barrier
    # (Lambda ~ 18 at the thesis' ladder: about 2 Lambda rungs for swap rates near 0.5).
    ("geometric DEO adapted (40 rungs)", {"ladder": "geometric", "swaps": "deo", "rungs": 40, "adapt": True}, 40,
     None),
]
#: The schemes of the default run (the committed ``tempered_cgm.md``); the others only by --schemes.
DEFAULT_SCHEMES = list(range(11))


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


def rhat_prefix(values: np.ndarray, fraction: float) -> float:
    """R-hat of the first ``fraction`` of each run's kept draws (at least 4)."""
    k = max(int(round(fraction * values.shape[1])), 4)
    part = values[:, :k].astype(float)
    return float(weighted_rhat(part, np.ones_like(part)))


def rung_stats(fit, options: dict) -> dict:
    """Per rung, pooled over runs and kept draws: mean n_leaves, mean and sd of the rung's log
    target; for geometric ladders also of the untempered log posterior (log target / t)."""
    ss = fit.idata["sample_stats"]
    leaves = ss["rung_n_leaves"].values.astype(float)  # (chain, draw, rung)
    lt = ss["rung_log_target"].values.astype(float)
    out = {"rung_mean_n_leaves": [round(float(x), 2) for x in leaves.mean(axis=(0, 1))],
           "rung_log_target_mean": [round(float(x), 2) for x in lt.mean(axis=(0, 1))],
           "rung_log_target_sd": [round(float(x), 2) for x in lt.std(axis=(0, 1))]}
    if options.get("ladder") == "geometric" and not options.get("adapt", True):
        t = np.asarray(options["temperatures"], dtype=float)
        out["temperatures"] = [float(x) for x in t]
        u = lt / t[None, None, :]
        out["rung_log_post_mean"] = [round(float(x), 2) for x in u.mean(axis=(0, 1))]
        out["rung_log_post_sd"] = [round(float(x), 2) for x in u.std(axis=(0, 1))]
        # Expected log swap ratio of pair (r, r+1) under the rungs' own draws:
        # (t_r - t_{r+1}) (E U_{r+1} - E U_r); a large negative value means no swap is accepted.
        mu = u.mean(axis=(0, 1))
        out["pair_dt_times_gap"] = [round(float((t[r] - t[r + 1]) * (mu[r + 1] - mu[r])), 2)
                                    for r in range(len(t) - 1)]
        out["pair_dt_times_sd"] = [round(float((t[r] - t[r + 1]) * 0.5 * (u[..., r].std() + u[..., r + 1].std())), 2)
                                   for r in range(len(t) - 1)]
    return out


def run_scheme(df, label, options, rungs, steps, seed, fractions=(), traces=None, moves=None):
    """Fit one scheme (8 runs) and measure it; ``moves``: the within-rung MH move mix (default the
    thesis' equal weights)."""
    iters = steps // rungs
    tune = iters // 4
    draws = iters - tune
    thin = max(draws // 2000, 1)
    sampler = "cgm" if options is None else "tempered"
    t0 = time.perf_counter()
    c0 = time.process_time()
    fit = bps.cart("y ~ x1 + x2", data=df, sampler=sampler, sampler_options=options, chains=RUNS,
                   draws=draws // thin, tune=tune, thin=thin, seed=seed, progress=False, threads=1,
                   **{**PRIORS, **({"moves": moves} if moves else {})})
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    out = {"label": label, "rungs": rungs, "iterations": iters, "mh_steps": iters * rungs, "wall_s": wall,
           "cpu_s": cpu, "mh_steps_per_s": RUNS * iters * rungs / wall,
           "mh_steps_per_cpu_s": RUNS * iters * rungs / cpu,
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
        out.update(rung_stats(fit, options))
    if fractions:
        kept = fit.posterior["n_leaves"].shape[1]
        n_leaves = fit.posterior["n_leaves"].values
        log_post = fit.idata["sample_stats"]["log_posterior"].values
        out["budget"] = [{"fraction_of_kept": f, "mh_steps": int((tune + f * kept * thin) * rungs),
                          "rhat_n_leaves": rhat_prefix(n_leaves, f), "rhat_log_posterior": rhat_prefix(log_post, f)}
                         for f in fractions]
        if traces is not None:
            traces[label] = {"n_leaves": n_leaves, "log_posterior": log_post}
    return out


#: The speed check's settings: (label, sampler, options or None, tree prior (alpha, beta) of the model).
SPEED_CHECK = [
    ("cgm, prior (0.95, 1)", "cgm", None, (0.95, 1.0)),
    ("cgm, prior (0.35, 0.75) (shrinkage rung 1)", "cgm", None, (0.35, 0.75)),
    ("cgm, prior (0.3, 4.0) (shrinkage rung 5)", "cgm", None, (0.3, 4.0)),
    ("cgm, prior (0.35, 14.3) (shrinkage rung 14, the hottest)", "cgm", None, (0.35, 14.3)),
    ("tempered, 15 shrinkage rungs all at (0.95, 1), DEO", "tempered",
     {"ladder": "shrinkage", "shrinkage_pairs": [(0.95, 1.0)] * 14, "swaps": "deo", "adapt": False}, (0.95, 1.0)),
    ("tempered, thesis shrinkage pairs, DEO", "tempered", {"ladder": "shrinkage", "swaps": "deo", "adapt": False},
     (0.95, 1.0)),
    # Temperatures must decrease strictly: 1 - 1e-6 k is the model's target to within 1e-5 of its log.
    ("tempered, 8 geometric rungs at t = 1 - 1e-6 k (the model's target), DEO", "tempered",
     {"ladder": "geometric", "temperatures": [1.0 - 1e-6 * k for k in range(8)], "swaps": "deo", "adapt": False},
     (0.95, 1.0)),
]


def speed_check(df, steps: int, seed: int) -> list[dict]:
    """What an MH step costs here: ``cgm`` under the tree priors of the shrinkage rungs (small trees),
    and the tempered sampler on ladders whose rungs all share the model's target (same trees as
    ``cgm``, so the difference is the tempering's own work: the swap rounds and bookkeeping).
    8 runs of ``steps`` MH steps each, CPU seconds of the process."""
    rows = []
    for label, sampler, options, (alpha, beta) in SPEED_CHECK:
        rungs = 1 if options is None else (len(options.get("temperatures") or []) or 15)
        iters = steps // rungs
        tune = iters // 4
        draws = iters - tune
        thin = max(draws // 500, 1)
        priors = {**PRIORS, "alpha": alpha, "beta": beta}
        c0 = time.process_time()
        fit = bps.cart("y ~ x1 + x2", data=df, sampler=sampler, sampler_options=options, chains=RUNS,
                       draws=draws // thin, tune=tune, thin=thin, seed=seed, progress=False, threads=1,
                       check_mixing=False, **priors)
        cpu = time.process_time() - c0
        ss = fit.idata["sample_stats"]
        leaves = (ss["rung_n_leaves"].values.mean() if "rung_n_leaves" in ss
                  else fit.posterior["n_leaves"].values.mean())
        rows.append({"label": label, "rungs": rungs, "mh_steps": iters * rungs, "cpu_s": cpu,
                     "mh_steps_per_cpu_s": RUNS * iters * rungs / cpu, "mean_n_leaves_all_rungs": float(leaves)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def independent_budget_runs(df, steps: int, shares: list[float], seed: int) -> list[dict]:
    """R-hat of ``cgm`` and of the default from independent runs of a fraction of ``steps`` each
    (their own quarter of tuning), beside the prefixes of the full runs."""
    out = []
    for share in shares:
        for label, options, rungs, _ in (SCHEMES[0], SCHEMES[10]):
            row = run_scheme(df, label, options, rungs, int(round(share * steps)), seed)
            out.append({"fraction": share, "label": label, "mh_steps": row["mh_steps"], "cpu_s": row["cpu_s"],
                        "rhat_n_leaves": row["rhat_n_leaves"], "rhat_log_posterior": row["rhat_log_posterior"]})
            print(json.dumps(out[-1]), flush=True)
    return out


def resumed_runs(header: dict) -> list[dict]:
    """The invocations that continued a run with --resume (a list; older files stored one dict)."""
    runs = header.get("resumed", [])
    return [runs] if isinstance(runs, dict) else list(runs)


def note_run(header: dict, this_run: dict, what: str) -> None:
    """Record that this --resume invocation ran ``what`` (once per invocation)."""
    runs = resumed_runs(header)
    if not runs or runs[-1] is not this_run:
        runs.append(this_run)
    this_run.setdefault("ran", []).append(what)
    header["resumed"] = runs


def barrier(row: dict) -> float:
    """Syed et al.'s barrier Lambda of a geometric ladder from the rungs' sd of U (normal case)."""
    t = np.asarray(row["temperatures"], dtype=float)
    lam = np.asarray(row["rung_log_post_sd"], dtype=float) / np.sqrt(np.pi)
    return float(np.sum((t[:-1] - t[1:]) * 0.5 * (lam[:-1] + lam[1:])))


def reading(rows: list[dict], header: dict) -> list[str]:
    """Sentences computed from the rows (so that they stay true when the tables are regenerated):
    agreement against budget, why the thesis' geometric pairs do not swap, what the speed ratio of
    the shrinkage ladder is made of. Only the parts whose rows were run are written."""
    by = {r["label"]: r for r in rows}
    base_cpu = rows[0].get("mh_steps_per_cpu_s")
    out = ["", "## Reading (generated from the tables above)", ""]

    def rng(values, fmt="{:.3f}"):
        return fmt.format(min(values)) + "-" + fmt.format(max(values))

    budget_rows = [r for r in rows if "budget" in r]
    if budget_rows:
        parts = []
        for r in budget_rows:
            b = r["budget"]
            parts.append(f"{r['label']}: n_leaves {b[0]['rhat_n_leaves']:.3f} at {b[0]['mh_steps']:,} MH steps per "
                         f"run, {b[-1]['rhat_n_leaves']:.3f} at {b[-1]['mh_steps']:,} (log posterior "
                         f"{b[0]['rhat_log_posterior']:.3f} -> {b[-1]['rhat_log_posterior']:.3f})")
        out.append("- R-hat across the 8 runs against budget: " + "; ".join(parts) + ".")
    if header.get("budget_runs"):
        parts = []
        for label in dict.fromkeys(b["label"] for b in header["budget_runs"]):
            runs = [b for b in header["budget_runs"] if b["label"] == label]
            parts.append(f"{label}: " + ", ".join(f"{b['rhat_n_leaves']:.3f} / {b['rhat_log_posterior']:.3f} at "
                                                  f"{b['mh_steps']:,}" for b in runs))
        out.append("- Independent runs at a fraction of the budget (their own tuning), R-hat of n_leaves / log "
                   "posterior: " + "; ".join(parts) + ".")
    thesis = [r for r in rows if "thesis" in r["label"]]
    if thesis and "no tempering (cgm)" in by:
        c = by["no tempering (cgm)"]
        leaves = rng([r["rhat_n_leaves"] for r in thesis])
        out.append(f"- The thesis' ladders at its budget: R-hat of n_leaves {leaves} "
                   f"and of the log posterior {rng([r['rhat_log_posterior'] for r in thesis])}, against "
                   f"{c['rhat_n_leaves']:.3f} / {c['rhat_log_posterior']:.3f} without tempering; round trips per run "
                   f"{min(min(r['round_trips']) for r in thesis)}-{max(max(r['round_trips']) for r in thesis)}.")
    geo = [r for r in rows if "rung_log_post_mean" in r]
    lik = by.get("likelihood DEO adapted (16 rungs, the default)")
    prior_note = ""
    if lik and "rung_mean_n_leaves" in lik:
        prior_note = (f"; the likelihood ladder, whose prior is not tempered, keeps "
                      f"{rng(lik['rung_mean_n_leaves'], '{:.1f}')} leaves on every rung")
    for r in geo:
        gaps = r["pair_dt_times_gap"]
        t = r["temperatures"]
        worst = [i for i, g in enumerate(gaps) if g <= -15]
        if not worst:
            continue
        pairs = ", ".join(f"{t[i]:g}-{t[i + 1]:g}" for i in worst)
        rates = ", ".join(f"{r['swap_rate'][i]:.3f}" for i in worst)
        exponents = ", ".join(f"{g:.1f}" for g in gaps)
        lam = barrier(r)
        out.append(
            f"- {r['label']}: the rungs' mean n_leaves go from {r['rung_mean_n_leaves'][0]:.1f} (t = 1) to "
            f"{r['rung_mean_n_leaves'][-1]:.1f} (t = {t[-1]:g}), and the mean untempered log posterior U of their "
            f"trees from {r['rung_log_post_mean'][0]:.0f} to {r['rung_log_post_mean'][-1]:.0f}, while its sd within "
            f"a rung is only {rng(r['rung_log_post_sd'], '{:.0f}')}. A swap of pair (r, r+1) is accepted with "
            "probability min(1, exp((t_r - t_r+1)(U_r+1 - U_r))) for the two trees' U; the mean of that exponent is "
            f"{exponents} for the {len(gaps)} pairs, so the pairs t = {pairs} swap at rates {rates}: between "
            f"t = {t[worst[0]]:g} and {t[worst[-1] + 1]:g} the trees' size jumps (from "
            f"{r['rung_mean_n_leaves'][worst[0]]:.1f} to {r['rung_mean_n_leaves'][worst[-1] + 1]:.1f} leaves: "
            "tempering the prior too lets them grow" + prior_note + ") and the ladder has too few rungs there to "
            "bridge it. "
            f"Syed et al.'s barrier is Lambda ~ {lam:.1f}, so {len(t)} rungs leave each pair a rejection rate of about "
            f"Lambda / {len(t) - 1} ~ {lam / (len(t) - 1):.1f} (above 1: swaps fail) and rates near 0.5 need about "
            f"2 Lambda ~ {2 * lam:.0f} rungs. The thesis does not report its swap rates.")
    g40 = by.get("geometric DEO adapted (40 rungs)")
    if g40:
        out.append(f"- With 40 adapted rungs the same geometric target swaps at {rng(g40['swap_rate'], '{:.2f}')} per "
                   f"pair with {min(g40['round_trips'])}-{max(g40['round_trips'])} round trips per run, R-hat "
                   f"{g40['rhat_n_leaves']:.3f} / {g40['rhat_log_posterior']:.3f}.")
    speed = header.get("speed_check")
    shrink = [r for r in rows if r["label"].startswith("shrinkage") and "thesis" in r["label"]]
    if shrink and base_cpu:
        ratios = [r["mh_steps_per_cpu_s"] / base_cpu for r in shrink]
        line = ("- Speed: the thesis' 'iters/min' counts MH moves of all rungs per minute (table 5.1's caption), as "
                "our MH steps per second do (all 8 runs in one thread, so CPU time is the cost). The thesis' "
                f"shrinkage ladder ran at 2.59-3.06 times its untempered MH moves per minute; here "
                f"{rng(ratios, '{:.2f}')} of `cgm`'s MH steps per CPU second.")
        if speed:
            sp = {x["label"]: x for x in speed}
            base_s = speed[0]["mh_steps_per_cpu_s"]
            small = [x for x in speed if x["label"].startswith("cgm, prior (0.3") or
                     x["label"].startswith("cgm, prior (0.35")]
            same = sp.get("tempered, 15 shrinkage rungs all at (0.95, 1), DEO")
            line += (f" What a step costs here (`--speed-check`): `cgm` under the shrinkage rungs' tree priors, whose "
                     f"trees hold {rng([x['mean_n_leaves_all_rungs'] for x in small], '{:.1f}')} leaves against "
                     f"{speed[0]['mean_n_leaves_all_rungs']:.1f}, runs at "
                     f"{rng([x['mh_steps_per_cpu_s'] / base_s for x in small], '{:.2f}')} of `cgm`'s speed under the "
                     "model's prior: small trees make an MH step no cheaper here.")
            if same:
                line += (f" Tempering 15 rungs that all share the model's target (the same trees as `cgm`) runs at "
                         f"{same['mh_steps_per_cpu_s'] / base_s:.2f} of `cgm`'s speed: that is the cost of the swap "
                         "rounds and the per-rung bookkeeping, and it sets our ratio. The thesis' 2.6-3.1x speed-up "
                         "must come from its implementation's cost per move growing with the tree (it calls its "
                         "timing a rough proxy); it does not carry over to our kernels. Where the tempering's "
                         "cost goes (read from `_kernels/tempering.py`, not timed apart): every proposed swap "
                         "recomputes both trees' prior parts, including whether each leaf still has an available "
                         "rule, a pass over the leaf's rows, so a swap round costs about one pass over the data per "
                         "rung; caching that flag per leaf would cut it without changing any draw.")
        out.append(line)
    return out if len(out) > 3 else []


def report(rows: list[dict], args, header: dict) -> list[str]:
    """The markdown report of the rows run so far."""
    base = rows[0]["mh_steps_per_s"]
    base_cpu = rows[0].get("mh_steps_per_cpu_s")
    base_thesis = SCHEMES[0][3]
    lines = [
        "# Parallel tempering on cgm1998 (thesis table 5.1 settings)",
        "",
        f"Written by `{header['command']}` on {header['date']} (commit {header['commit']}); machine: "
        f"{header['machine']}; seed {args.seed} (run c of a scheme draws from seed {args.seed}'s chain c stream); "
        "priors and data: thesis section 5 (module docstring)."
        + (f" Rendered from the stored rows by `{rendered['command']}` (commit {rendered['commit']})."
           if (rendered := getattr(args, "rendered", None)) else "")
        + "".join(f" Continued (`--resume`: the stored rows kept) by `{r['command']}` on {r['date']} (commit "
                  f"{r['commit']}), which ran: {', '.join(r.get('ran', ['?']))}." for r in resumed_runs(header)),
        "",
        f"{RUNS} independent runs per scheme, {args.steps:,} MH steps per run (thesis: 1.2 M), a quarter tuning; "
        "one thread per run. R-hat: rank-normalised split R-hat across the 8 runs.",
        "",
        "| scheme | rungs | iters/run | MH steps/s | ratio to cgm | MH steps/CPU s | ratio to cgm (CPU) | "
        "thesis iters/min | thesis ratio | "
        "R-hat n_leaves | R-hat log post | swap rate per pair | round trips per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        thesis = r["thesis_iters_per_min"]
        rates = " ".join(f"{x:.2f}" for x in r.get("swap_rate", [])) or "-"
        trips = " ".join(str(x) for x in r.get("round_trips", [])) or "-"
        cpu = r.get("mh_steps_per_cpu_s")
        cpu_cells = (f"{cpu:,.0f} | {cpu / base_cpu:.2f}" if cpu and base_cpu else "- | -")
        lines.append(
            f"| {r['label']} | {r['rungs']} | {r['iterations']:,} | {r['mh_steps_per_s']:,.0f} | "
            f"{r['mh_steps_per_s'] / base:.2f} | {cpu_cells} | {thesis if thesis else '-'} | "
            f"{(thesis / base_thesis) if thesis else float('nan'):.2f} | {r['rhat_n_leaves']:.3f} | "
            f"{r['rhat_log_posterior']:.3f} | {rates} | {trips} |"
        )
    if any("budget" in r for r in rows):
        lines += ["", "R-hat against budget (same runs: the kept draws from the end of tuning up to the given share "
                  "of them; MH steps per run spent up to that point, tuning included):", "",
                  "| scheme | share of kept draws | MH steps per run | R-hat n_leaves | R-hat log post |",
                  "|---|---|---|---|---|"]
        for r in rows:
            for b in r.get("budget", []):
                lines.append(f"| {r['label']} | {b['fraction_of_kept']:g} | {b['mh_steps']:,} | "
                             f"{b['rhat_n_leaves']:.3f} | {b['rhat_log_posterior']:.3f} |")
    if header.get("budget_runs"):
        lines += ["", "R-hat of independent runs at a fraction of the budget (`--budget-runs`: 8 new runs each, with "
                  "their own quarter of tuning, same seed):", "",
                  "| scheme | share of the budget | MH steps per run | R-hat n_leaves | R-hat log post |",
                  "|---|---|---|---|---|"]
        for b in header["budget_runs"]:
            lines.append(f"| {b['label']} | {b['fraction']:g} | {b['mh_steps']:,} | {b['rhat_n_leaves']:.3f} | "
                         f"{b['rhat_log_posterior']:.3f} |")
    per_rung = [r for r in rows if "rung_mean_n_leaves" in r]
    if per_rung:
        lines += ["", "Per rung (pooled over the 8 runs' kept draws): mean n_leaves; mean (sd) of the rung's log "
                  "target t log L + s log p:", ""]
        for r in per_rung:
            lines.append(f"- {r['label']}: n_leaves " + " ".join(f"{x:.1f}" for x in r["rung_mean_n_leaves"])
                         + "; log target " + " ".join(f"{m:.0f} ({sd:.0f})" for m, sd in
                                                      zip(r["rung_log_target_mean"], r["rung_log_target_sd"])))
        geo = [r for r in per_rung if "rung_log_post_mean" in r]
        if geo:
            lines += ["", "Lambda is the global communication barrier of Syed et al. (2019), integral over t of "
                      "lambda(t) = E|U - U'| / 2 (U, U' independent draws of rung t; here sd(U) / sqrt(pi), the "
                      "normal case, from the sd pooled over the runs; trapezoid rule over the rungs, which sample "
                      "lambda coarsely: an estimate). A ladder of N rungs placed optimally has a swap "
                      "rejection rate of about Lambda / (N - 1) per pair: swaps need N well above Lambda."]
            lines += ["", "Geometric ladders: temperatures t, mean (sd) of the untempered log posterior U = log L + "
                      "log p of each rung's trees, and per pair (t_r - t_r+1) x (E U_r+1 - E U_r) (the mean log "
                      "swap ratio; swaps need it near 0 or above) and (t_r - t_r+1) x sd(U):", ""]
            for r in geo:
                lines.append(f"- {r['label']}: t " + " ".join(f"{x:g}" for x in r["temperatures"]) + "; U "
                             + " ".join(f"{m:.0f} ({sd:.0f})" for m, sd in
                                        zip(r["rung_log_post_mean"], r["rung_log_post_sd"]))
                             + "; dt x gap " + " ".join(f"{x:.1f}" for x in r["pair_dt_times_gap"])
                             + "; dt x sd " + " ".join(f"{x:.1f}" for x in r["pair_dt_times_sd"])
                             + f"; barrier Lambda ~ {barrier(r):.1f}")
    speed = header.get("speed_check")
    if speed:
        base_s = speed[0]["mh_steps_per_cpu_s"]
        lines += ["", f"What an MH step costs (`--speed-check`: 8 runs of {speed[0]['mh_steps']:,} MH steps per "
                  "setting, CPU seconds of the process; the tempered ladders whose rungs all share the model's "
                  "target hold the same trees as `cgm`, so their ratio is the cost of the swap rounds and "
                  "bookkeeping alone):", "",
                  "| setting | rungs | mean n_leaves (all rungs) | MH steps/CPU s | ratio to the first row |",
                  "|---|---|---|---|---|"]
        for r in speed:
            lines.append(f"| {r['label']} | {r['rungs']} | {r['mean_n_leaves_all_rungs']:.1f} | "
                         f"{r['mh_steps_per_cpu_s']:,.0f} | {r['mh_steps_per_cpu_s'] / base_s:.2f} |")
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
    lines += reading(rows, header)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120_000, help="MH steps per run (thesis: 1.2 M)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schemes", default=None,
                        help="comma-separated indices into SCHEMES, run in this order (default: 0-10; 0 is cgm, "
                             "always run first)")
    parser.add_argument("--name", default="tempered_cgm", help="results file stem")
    parser.add_argument("--budget-fractions", default=None,
                        help="comma-separated shares of the kept draws at which to give R-hat (e.g. 0.125,0.25,0.5,1)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows of NAME.json run with the same --steps and --seed; run the others")
    parser.add_argument("--budget-runs", default=None,
                        help="comma-separated fractions of --steps at which to run cgm and the default again as "
                             "independent runs (own tuning) and give their R-hat (e.g. 0.125,0.25,0.5)")
    parser.add_argument("--speed-check", action="store_true",
                        help="also measure what an MH step costs under the shrinkage rungs' priors and with "
                             "tempering on identical rungs (8 runs of steps / 10 MH steps per setting)")
    parser.add_argument("--traces", default=None,
                        help="also save each scheme's n_leaves / log posterior traces to this .npz (not a result)")
    args = parser.parse_args()
    if args.schemes is None:
        chosen = DEFAULT_SCHEMES
    else:
        picked = [int(i) for i in args.schemes.split(",")]
        bad = [i for i in picked if not 0 <= i < len(SCHEMES)]
        if bad:
            parser.error(f"--schemes: no scheme {bad} (indices 0..{len(SCHEMES) - 1})")
        chosen = [0] + [i for i in dict.fromkeys(picked) if i != 0]
    fractions = tuple(float(f) for f in args.budget_fractions.split(",")) if args.budget_fractions else ()
    if any(not 0 < f <= 1 for f in fractions):
        parser.error("--budget-fractions: each share must be in (0, 1]")
    # Written before the run (it is stored with the rows, so a --resume knows what ran): no load averages.
    header = {"command": command(), "date": now_utc(), "commit": commit(), "machine": machine(load=False)}
    RESULTS.mkdir(exist_ok=True)
    json_path = RESULTS / f"{args.name}.json"
    done: dict[str, dict] = {}
    old_speed = None
    old_budget_runs = None
    if args.resume and json_path.exists():
        old = json.loads(json_path.read_text())
        if old.get("steps_per_run") == args.steps and old.get("seed", 1) == args.seed:
            done = {r["label"]: r for r in old["rows"]}
            old_speed = old.get("header", {}).get("speed_check")
            old_budget_runs = old.get("header", {}).get("budget_runs")
            # The report's header keeps the run's own date/commit/command for the kept rows; what this
            # invocation adds is recorded below once it has run something (else it only renders).
            header, this_run = old.get("header", header), header
    df = bps.datasets.load("cgm1998")
    # Compile every kernel first so that no scheme's time carries compilation.
    bps.cart("y ~ x1 + x2", data=df, sampler="tempered", chains=1, draws=5, tune=5, progress=False, **PRIORS)
    bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=1, draws=5, tune=5, progress=False, **PRIORS)
    rows = []
    traces: dict = {}
    if not done:
        this_run = header
    for label, options, rungs, thesis in [SCHEMES[i] for i in chosen]:
        if label in done and (not fractions or "budget" in done[label]):
            rows.append(done[label])
            continue
        if done:
            note_run(header, this_run, label)
        row = run_scheme(df, label, options, rungs, args.steps, args.seed, fractions,
                         traces if args.traces else None)
        row["thesis_iters_per_min"] = thesis
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_atomic(json_path, json.dumps({"steps_per_run": args.steps, "runs": RUNS, "seed": args.seed,
                                            "header": header, "rows": rows}, indent=1))
        write_atomic(RESULTS / f"{args.name}.md", "\n".join(report(rows, args, header)) + "\n")
        if args.traces:
            with open(args.traces, "wb") as fh:
                np.savez(fh, **{f"{k}|{v}": a for k, d in traces.items() for v, a in d.items()})
    if args.speed_check:
        if not old_speed and done:
            note_run(header, this_run, "the speed check")
        header["speed_check"] = old_speed or speed_check(df, args.steps // 10, args.seed)
        write_atomic(json_path, json.dumps({"steps_per_run": args.steps, "runs": RUNS, "seed": args.seed,
                                            "header": header, "rows": rows}, indent=1))
        write_atomic(RESULTS / f"{args.name}.md", "\n".join(report(rows, args, header)) + "\n")
    if args.budget_runs:
        shares = [float(f) for f in args.budget_runs.split(",")]
        if not old_budget_runs or sorted({b["fraction"] for b in old_budget_runs}) != sorted(set(shares)):
            if done:
                note_run(header, this_run, "the independent budget runs")
            header["budget_runs"] = independent_budget_runs(df, args.steps, shares, args.seed)
        else:
            header["budget_runs"] = old_budget_runs
        write_atomic(json_path, json.dumps({"steps_per_run": args.steps, "runs": RUNS, "seed": args.seed,
                                            "header": header, "rows": rows}, indent=1))
        write_atomic(RESULTS / f"{args.name}.md", "\n".join(report(rows, args, header)) + "\n")
    if done and not any(r is this_run for r in resumed_runs(header)):
        args.rendered = this_run
        write_atomic(RESULTS / f"{args.name}.md", "\n".join(report(rows, args, header)) + "\n")
    print("\n".join(report(rows, args, header)))


if __name__ == "__main__":
    main()
