"""Survival BART on data sets lifelines ships: Harrell's C on held-out rows against lifelines'
CoxPHFitter fitted in the same run, and calibration of the mean predicted S(t) against the
Kaplan-Meier curve of the same rows.

Data sets (``--data``): ``rossi``, the Rossi recidivism data (432 released prisoners, arrest within
52 weeks); ``gbsg2``, the German Breast Cancer Study Group 2 trial (686 patients, recurrence-free
survival, times in days turned into months rounded up so that the grid of distinct event times
stays short; factors horTh, menostat and tgrade, dummy-coded for Cox).

Usage: PYTHONPATH=. python3 benchmarks/survival_rossi.py [--data rossi|gbsg2]
       [--out benchmarks/results/survival_rossi.md]

Needs lifelines (``pip install -e .[survival]``; the data set ships with it).
Settings (kept small: the machine is shared): one fixed random split, 2/3 train, 1/3 test
(numpy seed 2016); survival BART with trees=50, chains=2, tune=500, draws=500, thin=5, seed=1,
grid "events" (BART3's defaults are ntree=50, nskip=250, ndpost=1000, keepevery=10); Cox with
lifelines' defaults (Breslow baseline, no penalty). Harrell's C is lifelines'
``concordance_index(T, score, E)`` (ties in score count 1/2) with score = S(t* | x) for BART
(larger = longer survival) at t* = 52 (the end of follow-up) and t* = 26, and score = -x'beta
(the partial hazard's log, negated) for Cox.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tables import emit, markdown_table  # noqa: E402

import bartpy_suite as bps  # noqa: E402

SPLIT_SEED = 2016
SETTINGS = dict(trees=50, chains=2, tune=500, draws=500, thin=5, seed=1, progress=False)


def _rossi():
    from lifelines.datasets import load_rossi

    return load_rossi()


def _gbsg2():
    from lifelines.datasets import load_gbsg2

    df = load_gbsg2()
    return df.assign(time=np.ceil(df["time"] / 30.4375)).rename(columns={"time": "month"})


#: name -> (loader, time column, event column, unit, calibration times, C horizons, title)
DATASETS = {
    "rossi": (_rossi, "week", "arrest", "weeks", [4.0, 8.0, 13.0, 17.0, 21.0, 26.0, 30.0, 34.0, 39.0, 43.0, 47.0, 52.0],
              (52.0, 26.0), "the Rossi recidivism data"),
    "gbsg2": (_gbsg2, "month", "cens", "months", [6.0, 12.0, 18.0, 24.0, 30.0, 36.0, 42.0, 48.0, 54.0, 60.0],
              (60.0, 24.0), "the GBSG2 breast cancer trial"),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, load average {load:.1f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=tuple(DATASETS), default="rossi", help="the data set (default rossi)")
    parser.add_argument("--out", default=None, help="write the markdown here (default: print only)")
    args = parser.parse_args(argv)
    import pandas as pd
    from lifelines import CoxPHFitter, KaplanMeierFitter
    from lifelines import __version__ as lifelines_version
    from lifelines.utils import concordance_index

    loader, time_col, event_col, unit, cal_times, horizons, title = DATASETS[args.data]
    data = loader()
    rng = np.random.default_rng(SPLIT_SEED)
    test_idx = rng.permutation(len(data))[: len(data) // 3]
    test = data.iloc[np.sort(test_idx)]
    train = data.drop(index=test.index)
    covariates = [c for c in data.columns if c not in (time_col, event_col)]
    # Cox takes numbers: factors (text columns) dummy-coded, the first level the baseline
    dummies = pd.get_dummies(data[covariates], drop_first=True, dtype=float)
    cox_frame = pd.concat([dummies, data[[time_col, event_col]]], axis=1)

    start = time.process_time()
    wall = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bps.bart(f"Surv({time_col}, {event_col}) ~ " + " + ".join(covariates), data=train, **SETTINGS)
    bart_cpu, bart_wall = time.process_time() - start, time.perf_counter() - wall
    mixing = [str(w.message).split(";")[0] for w in caught if "mixed" in str(w.message)]
    cox = CoxPHFitter().fit(cox_frame.loc[train.index], duration_col=time_col, event_col=event_col)

    s_test = fit.predict(test, times=cal_times)
    c_rows = []
    for horizon in horizons:
        score = s_test[f"S({horizon:g})_mean"].to_numpy()
        c_bart = concordance_index(test[time_col], score, test[event_col])
        c_rows.append([f"survival BART, posterior mean S({horizon:g} \\| x)", f"{c_bart:.4f}"])
    cox_score = -cox.predict_log_partial_hazard(cox_frame.loc[test.index]).to_numpy()
    c_cox = concordance_index(test[time_col], cox_score, test[event_col])
    c_rows.append(["Cox PH (lifelines), -x'beta", f"{c_cox:.4f}"])

    cal_rows = []
    km_test = KaplanMeierFitter().fit(test[time_col], test[event_col]).survival_function_at_times(cal_times).to_numpy()
    s_train = fit.predict(train, times=cal_times)
    km_train = KaplanMeierFitter().fit(train[time_col], train[event_col]).survival_function_at_times(
        cal_times).to_numpy()
    cox_test = cox.predict_survival_function(cox_frame.loc[test.index], times=cal_times).mean(axis=1).to_numpy()
    worst = {"test": 0.0, "train": 0.0, "cox": 0.0}
    for j, t in enumerate(cal_times):
        bart_test = s_test[f"S({t:g})_mean"].mean()
        bart_train = s_train[f"S({t:g})_mean"].mean()
        worst["test"] = max(worst["test"], abs(bart_test - km_test[j]))
        worst["train"] = max(worst["train"], abs(bart_train - km_train[j]))
        worst["cox"] = max(worst["cox"], abs(cox_test[j] - km_test[j]))
        cal_rows.append([f"{t:g}", f"{km_train[j]:.3f}", f"{bart_train:.3f}", f"{km_test[j]:.3f}", f"{bart_test:.3f}",
                         f"{cox_test[j]:.3f}"])

    cfg = fit.config["survival"]
    out_name = "survival_rossi.md" if args.data == "rossi" else f"survival_{args.data}.md"
    lines = [
        f"# Survival BART on {title}",
        "",
        f"Generated by `PYTHONPATH=. python3 benchmarks/survival_rossi.py --data {args.data} "
        f"--out benchmarks/results/{out_name}`.",
        "",
        f"- Machine: {machine()}; Python {platform.python_version()}, lifelines {lifelines_version}, "
        f"bartpy_suite {bps.__version__}.",
        f"- Data: lifelines' `load_{args.data}()` ({len(data)} subjects, {int(data[event_col].sum())} events, "
        f"follow-up up to {data[time_col].max():g} {unit}). One random split (numpy seed {SPLIT_SEED}): "
        f"{len(train)} train, {len(test)} test.",
        f"- Survival BART: `bps.bart('Surv({time_col}, {event_col}) ~ {' + '.join(covariates)}', ...)` with "
        + ", ".join(f"{k}={v}" for k, v in SETTINGS.items() if k != "progress")
        + f"; grid 'events' (K = {len(cfg['grid'])} {unit}), {cfg['expanded_rows']} person-period rows. "
        "A small run because the machine is shared: BART3's defaults are 1000 kept draws at thinning 10.",
        f"- Fit time: {bart_cpu:.1f} CPU s ({bart_wall:.1f} s wall), numba kernels already compiled.",
        f"- Mixing check: {mixing[0] if mixing else 'no warning'}.",
        "- Cox PH: lifelines' `CoxPHFitter()` defaults, same covariates (factors dummy-coded), same training rows.",
        "",
        "## Harrell's C on the held-out rows",
        "",
        "lifelines' `concordance_index(T, score, E)`: comparable pairs have the shorter time an event; ties in "
        "score count 1/2. A larger score means longer predicted survival.",
        "",
        *markdown_table(["model and score", "C (test)"], c_rows),
        "",
        "## Calibration: mean predicted S(t) against Kaplan-Meier",
        "",
        "The average over the rows of the posterior-mean S(t | x) (the model's marginal curve, spec 1.7) "
        "against the Kaplan-Meier estimate of the same rows.",
        "",
        *markdown_table([unit[:-1], "KM train", "BART train", "KM test", "BART test", "Cox test"], cal_rows),
        "",
        f"Largest absolute difference from KM: BART train {worst['train']:.3f}, BART test {worst['test']:.3f}, "
        f"Cox test {worst['cox']:.3f}.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
