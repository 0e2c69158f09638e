"""How soon independent runs agree on cgm1998, against CPU seconds: ``tempered`` by rung count and
within-rung move mix, beside ``cgm``.

The thesis' example (``tempered_cgm.py``: 800 rows, its priors, 8 independent runs per fit, a
quarter of each run tuning). A configuration is a sampler (``tempered`` with the default ladder:
likelihood, adapted, DEO, K rungs; or ``cgm``), and a within-rung MH move mix: the thesis' four
moves with equal weights (``thesis``), or those scaled by 0.8 with Pratola's rotate and perturb
at 0.1 each (``rotate_perturb``: perturb without the change of variable, which ``tempered`` does
not offer); and the package's ``cgm`` mix (``cgm_mix``, the sampler's default) without and with the
same rotate/perturb share (``cgm_mix_rotate_perturb``, the mix the mixing advice suggests). For
each configuration and each budget of MH steps per run (iterations x K) the fit is
repeated with several seeds (each seed is a new set of 8 runs), because one R-hat across 8 runs is
a noisy number. Reported per (configuration, budget): CPU seconds of the 8-run fit (one thread,
kernels compiled before the first timed fit), R-hat of n_leaves and of the log posterior across
the runs (rank-normalised split R-hat) per seed and their median, the runs whose most common root
split is the posterior's (x2 {A, B}, ``x2#3``), and round trips per run.

The question is the user's: for a given CPU budget, what makes the runs agree? A configuration is
``sampler:K:moves``, e.g. ``tempered:16:thesis`` or ``cgm:1:rotate_perturb``.

Run (the committed ``results/tempered_agreement.md``, about 45 CPU minutes)::

    python3 benchmarks/tempered_agreement.py

``--configs``, ``--steps`` and ``--seeds`` take comma-separated lists; ``--resume`` keeps the fits
already stored in ``results/tempered_agreement.json`` with the same (configuration, steps, seed)
and runs the missing ones (the JSON and the report are rewritten after every fit, atomically).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tempered_cgm  # noqa: E402
from _provenance import header  # noqa: E402
from _tables import markdown_table, write_atomic  # noqa: E402

import bartpy_suite as bps  # noqa: E402
from bartpy_suite.samplers.mh import CGM_MOVES, ROTATE_PERTURB_MOVES  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
POSTERIOR_ROOT = "x2#3"
THESIS = {"grow": 0.25, "prune": 0.25, "change": 0.25, "swap": 0.25}
MOVES = {"thesis": THESIS,
         "rotate_perturb": {**{k: 0.8 * v for k, v in THESIS.items()}, "rotate": 0.1, "perturb": 0.1},
         "cgm_mix": dict(CGM_MOVES), "cgm_mix_rotate_perturb": dict(ROTATE_PERTURB_MOVES)}
DEFAULT_CONFIGS = ("tempered:6:thesis,tempered:8:thesis,tempered:12:thesis,tempered:16:thesis,"
                   "tempered:8:rotate_perturb,tempered:16:rotate_perturb,cgm:1:thesis,cgm:1:rotate_perturb,"
                   "tempered:16:cgm_mix,tempered:16:cgm_mix_rotate_perturb")


def parse_config(text: str) -> tuple[str, int, str]:
    sampler, rungs, moves = text.split(":")
    if sampler not in ("tempered", "cgm") or moves not in MOVES:
        raise SystemExit(f"unknown configuration {text!r}: sampler tempered or cgm, moves one of {sorted(MOVES)}")
    return sampler, int(rungs), moves


def fit_once(df, config: str, steps: int, seed: int) -> dict:
    """One 8-run fit of ``config`` with ``steps`` MH steps per run."""
    sampler, rungs, moves = parse_config(config)
    options = {"rungs": rungs} if sampler == "tempered" else None
    c0 = time.process_time()
    row = tempered_cgm.run_scheme(df, config, options, rungs, steps, seed, moves=MOVES[moves])
    roots = [r.split(" ")[0] for r in row["root_split"]]
    return {"config": config, "steps": steps, "seed": seed, "iterations": row["iterations"],
            "cpu_s": time.process_time() - c0, "rhat_n_leaves": row["rhat_n_leaves"],
            "rhat_log_posterior": row["rhat_log_posterior"], "runs_at_posterior_root": roots.count(POSTERIOR_ROOT),
            "round_trips": row.get("round_trips", []), "root_split": row["root_split"]}


def key(rec: dict) -> tuple:
    return rec["config"], rec["steps"], rec["seed"]


def _groups(records: list[dict]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["config"], r["steps"]), []).append(r)
    for recs in groups.values():
        recs.sort(key=lambda r: r["seed"])
    return groups


def _median(recs: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in recs)


def table(records: list[dict]) -> list[str]:
    """One row per (configuration, steps), by budget then median R-hat: medians over the seeds, and
    every seed's R-hat."""
    rows = []
    groups = _groups(records)
    for (config, steps), recs in sorted(groups.items(), key=lambda kv: (kv[0][1], _median(kv[1], "rhat_n_leaves"))):
        trips = [t for r in recs for t in r["round_trips"]]
        rows.append([
            f"`{config}`", f"{steps:,}", f"{recs[0]['iterations']:,}", len(recs), f"{_median(recs, 'cpu_s'):.1f}",
            f"{_median(recs, 'rhat_n_leaves'):.3f}", " ".join(f"{r['rhat_n_leaves']:.3f}" for r in recs),
            f"{_median(recs, 'rhat_log_posterior'):.3f}",
            f"{sum(r['runs_at_posterior_root'] for r in recs)} / {8 * len(recs)}",
            f"{statistics.mean(trips):.1f}" if trips else "-",
        ])
    return markdown_table(["configuration", "MH steps per run", "iterations per run", "seeds",
                           "CPU s per fit (median)", "R-hat n_leaves (median)", "R-hat n_leaves per seed",
                           "R-hat log post (median)", "runs at the posterior's root split",
                           "round trips per run (mean)"], rows)


def reading(records: list[dict]) -> list[str]:
    """For each R-hat bound, the least budget at which each configuration's median is below it."""
    groups = _groups(records)
    configs = sorted({c for c, _ in groups}, key=lambda c: DEFAULT_CONFIGS.split(",").index(c)
                     if c in DEFAULT_CONFIGS.split(",") else 99)
    out = []
    for bound in (1.1, 1.05, 1.02):
        parts = []
        for c in configs:
            hits = sorted((s, _median(recs, "cpu_s")) for (cc, s), recs in groups.items()
                          if cc == c and _median(recs, "rhat_n_leaves") < bound)
            parts.append(f"`{c}` {hits[0][0]:,} ({hits[0][1]:.1f} CPU s)" if hits else f"`{c}` not within the budgets")
        out.append(f"- Least MH steps per run with median R-hat of n_leaves below {bound}: " + "; ".join(parts) + ".")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--steps", default="75000,150000,300000,600000")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--name", default="tempered_agreement")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    # the fits are short on purpose: their mixing warnings are the measurement, reported in the table
    warnings.filterwarnings("ignore", category=bps.MixingWarning)
    configs = args.configs.split(",")
    for c in configs:
        parse_config(c)
    steps = [int(x) for x in args.steps.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    store = RESULTS / f"{args.name}.json"
    records = json.loads(store.read_text())["records"] if args.resume and store.exists() else []
    done = {key(r) for r in records}
    df = bps.datasets.load("cgm1998")
    # compile the kernels of every move mix before any timed fit (the first fit of a process carries it)
    for moves in MOVES.values():
        tempered_cgm.run_scheme(df, "warm-up", {"rungs": 4}, 4, 4 * 40, 0, moves=moves)
        tempered_cgm.run_scheme(df, "warm-up", None, 1, 40, 0, moves=moves)
    head = header(seeds=f"seeds {args.seeds}: seed s runs chains 0..7 of `chains=8, seed=s`",
                  settings="thesis section 5 priors and data (tempered_cgm.py); tempered: default ladder "
                           "(likelihood, adapted, DEO) with K rungs; a quarter of each run tuning; one thread; "
                           f"move mixes {json.dumps(MOVES)}",
                  run_note="resumed: fits already in the JSON kept" if args.resume else None)
    for c in configs:
        for s in steps:
            for seed in seeds:
                if (c, s, seed) in done:
                    continue
                records.append(fit_once(df, c, s, seed))
                print(json.dumps(records[-1]), flush=True)
                write_atomic(store, json.dumps({"records": records}, indent=1))
                lines = ["# How soon independent runs agree against CPU seconds: `tempered` by rung count and "
                         "move mix, and `cgm` (cgm1998)", "", *head,
                         "8 independent runs per fit (chains of one fit), R-hat across them. The posterior's root "
                         "split is x2 {A, B} (`x2#3`; every run of the thesis-budget default holds it, "
                         "`tempered_cgm_long.md`). An MH step costs about the same in every configuration (the "
                         "CPU column), so MH steps per run are the budget.", "",
                         *table(records), "", *reading(records)]
                write_atomic(RESULTS / f"{args.name}.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
