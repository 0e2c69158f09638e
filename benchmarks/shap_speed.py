"""Posterior SHAP: speed, agreement with the shap library, and importance against variable activity.

1. Speed (the issue's target: 1,000 rows x 1,000 draws x 200 trees in under a minute on 2 cores).
   Friedman #1 (n = 1,000 training rows, p = 10, the data of ``_peers.py``), BART with 200 trees,
   one chain of 200 + 1,000 sweeps, seed 1; then ``fit.shap()`` explains the 1,000 training rows
   in every draw (threads: ``NUMBA_NUM_THREADS``, set here to the machine's cores). Process CPU seconds
   (``time.process_time``, all threads) and wall seconds, median of ``--repeats`` calls after one
   warm-up call (which loads or compiles the kernel), next to ``fit.function_samples()`` (the
   (draws, rows) matrix of f) in the same run. The machine is shared with other work, so the CPU
   time is the figure to read.
2. Agreement with the ``shap`` library (when importable; not a dependency): its TreeExplainer
   (path-dependent, ``feature_perturbation="tree_path_dependent"``) reads a whole draw of 200
   trees as a dict model on the bin codes (left iff code <= cut + 0.5, covers from the training
   rows), for draws 0, 500 and 999 and the first 200 rows; maximum absolute difference of the
   values and its CPU time per draw.
3. Importance on real data: the shipped ``breast_cancer`` (probit BART, 9 cytology scores,
   ``class ~ . - id``, latent scale) and scikit-learn's bundled diabetes data (regression, 10
   predictors, 442 rows): ``fit.variable_activity()`` (share of split rules) against
   ``fit.importance()`` (posterior of the mean |SHAP| over the training rows), 200 trees, 2
   chains of 500 + 500 sweeps, seed 1, 90% intervals. Sharpness: the top predictor's share, the
   ratio of the largest to the smallest share, the normalised entropy of the shares (1 = uniform),
   and how many predictors' intervals lie wholly below the top predictor's interval.

Run from the root of the repository (about 5 minutes of CPU on 2 cores)::

    python3 benchmarks/shap_speed.py --out benchmarks/results/shap_speed.md

shap is not a dependency: section 2 runs where it imports (e.g. ``pip install --no-deps --target
/tmp/shaplib shap slicer`` and ``PYTHONPATH=/tmp/shaplib``, which leaves the environment's numba
alone). ``--quick`` runs a smaller version of everything (100 draws) to check the script.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# every core for the threads of shap and prediction, as benchmarks/predict_speed.py (set before numba loads)
os.environ["NUMBA_NUM_THREADS"] = str(os.cpu_count() or 1)

from _peers import friedman_data  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402

import bartpy_suite as bps  # noqa: E402

warnings.filterwarnings("ignore", category=bps.BartpySuiteWarning)  # breast_cancer: 16 rows dropped (said below)
QUIET = {"progress": False, "check_mixing": False, "log_likelihood": False}


def _machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numba

    return (f"{model}, {os.cpu_count()} CPUs, NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}, "
            f"numba {numba.__version__}, Python {platform.python_version()}")


def _timed(fn, repeats: int) -> tuple[float, float]:
    """Median (cpu, wall) seconds of ``repeats`` calls after one warm-up call."""
    fn()
    cpus, walls = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return statistics.median(cpus), statistics.median(walls)


def speed(draws: int, repeats: int) -> tuple[list[str], object, np.ndarray]:
    data = friedman_data(1000)
    df = pd.DataFrame(data["x"], columns=[f"x{j}" for j in range(data["x"].shape[1])])
    df["y"] = data["y"]
    fit = bps.bart("y ~ .", data=df, trees=200, chains=1, draws=draws, tune=200, seed=1, **QUIET)
    nodes = int(fit.idata["trees"]["node_var"].size)
    shap_cpu, shap_wall = _timed(lambda: fit.shap(), repeats)
    f_cpu, f_wall = _timed(lambda: fit.function_samples(), repeats)
    ds = fit.shap()
    err = float(np.abs(ds["base"].values[..., None] + ds["shap"].values.sum(-1)
                       - fit.function_samples().reshape(1, draws, -1)).max())
    size_mb = ds["shap"].values.nbytes / 2**20
    lines = [f"## 1. Speed: 1,000 rows x {draws:,} draws x 200 trees", "",
             f"Friedman #1, n = 1,000, p = 10, 1 chain of 200 + {draws:,} sweeps, seed 1 ({nodes:,} stored nodes). "
             f"Median of {repeats} calls after a warm-up call.", ""]
    lines += markdown_table(["call", "cpu s", "wall s"], [
        ["`fit.shap()` (1,000 rows, every draw)", f"{shap_cpu:.2f}", f"{shap_wall:.2f}"],
        ["`fit.function_samples()` (same rows and draws)", f"{f_cpu:.2f}", f"{f_wall:.2f}"],
    ])
    lines += ["", f"The values take {size_mb:.0f} MB (draws x rows x predictors x 8 bytes). Local accuracy: "
              f"max |base + sum of values - f(x)| over every draw and row = {err:.1e}.", ""]
    return lines, fit, ds, shap_cpu / draws


def _shap_model(fit, sample: int) -> dict:
    """One draw's trees as a dict model of the shap library, on the bin codes."""
    t = fit.tree_store
    codes = fit.binned.codes
    trees = []
    for root, count in zip(t["roots"][sample], t["counts"][sample]):
        nodes = np.arange(int(root), int(root + count))
        var = t["node_var"][nodes]
        right = np.where(var >= 0, t["right"][nodes] - root, -1)
        left = np.where(var >= 0, np.arange(count) + 1, -1)
        cover = np.zeros(count)
        for i in range(codes.shape[1]):  # walk every training row down the tree
            k = 0
            cover[k] += 1
            while var[k] >= 0:
                k = k + 1 if codes[var[k], i] <= t["node_cut"][root + k] else right[k]
                cover[k] += 1
        trees.append({"children_left": left, "children_right": right, "children_default": left,
                      "features": np.where(var >= 0, var, -2),
                      "thresholds": np.where(var >= 0, t["node_cut"][nodes] + 0.5, 0.0),
                      "values": t["node_value"][nodes][:, None], "node_sample_weight": cover})
    return {"trees": trees}


def against_shap_library(fit, ours, draws: int, per_draw: float) -> list[str]:
    lines = ["## 2. Against the shap library", ""]
    try:
        import shap
    except ImportError:
        return lines + ["shap is not installed here: section skipped (`pip install shap` to run it).", ""]
    rows = 200
    codes = fit.binned.codes[:, :rows].T.astype(float)
    table = []
    for d in sorted({0, draws // 2, draws - 1}):
        explainer = shap.TreeExplainer(_shap_model(fit, d), feature_perturbation="tree_path_dependent")
        c0 = time.process_time()
        theirs = explainer.shap_values(codes)
        cpu = time.process_time() - c0
        diff = float(np.abs(theirs - ours["shap"].values[0, d, :rows]).max())
        table.append([d, f"{diff:.1e}", f"{float(np.abs(theirs).max()):.2f}", f"{cpu:.3f}"])
    where = Path(shap.__file__).resolve().parent.parent
    lines += [f"shap {shap.__version__} (imported from `{where}`), TreeExplainer(tree_path_dependent) on one draw "
              f"of 200 trees, the first {rows} training rows. For scale: section 1's `fit.shap()` took "
              f"{per_draw * rows / 1000:.4f} CPU s per draw and {rows} rows (covers included).", ""]
    lines += markdown_table(["draw", "max abs difference", "max abs value", "shap cpu s (one draw)"], table)
    return lines + [""]


def _sharpness(share: pd.Series, lower: pd.Series, upper: pd.Series) -> dict:
    s = share / share.sum()
    top = s.idxmax()
    entropy = float(-(s * np.log(s.clip(lower=1e-300))).sum() / np.log(len(s)))
    below = int((upper < lower[top]).sum())
    return {"top": top, "top share": f"{s.max():.3f}", "max/min": f"{s.max() / s.min():.1f}",
            "entropy": f"{entropy:.3f}", "below top": f"{below} of {len(s) - 1}"}


def importance(draws: int) -> list[str]:
    from sklearn.datasets import load_diabetes

    diabetes = load_diabetes(as_frame=True).frame  # bundled with scikit-learn, no download
    sets = {
        "breast_cancer (probit BART, latent scale; the 16 rows missing bare_nuclei dropped)":
            ("class ~ . - id", bps.datasets.load("breast_cancer")),
        "diabetes (regression)": ("target ~ .", diabetes),
    }
    lines = ["## 3. Importance: variable activity against mean |SHAP|", "",
             f"200 trees, 2 chains of 500 + {draws} sweeps, seed 1, 90% intervals; importance over the training "
             "rows. Shares are each measure's means normalised to sum to one.", ""]
    summary = []
    for name, (formula, df) in sets.items():
        c0 = time.process_time()
        fit = bps.bart(formula, data=df, trees=200, chains=2, draws=draws, tune=500, seed=1, **QUIET)
        fit_cpu = time.process_time() - c0
        act = fit.variable_activity(level=0.9)
        c0 = time.process_time()
        imp = fit.importance(level=0.9)
        imp_cpu = time.process_time() - c0
        table = []
        for v in imp.index:
            table.append([v, f"{act.loc[v, 'mean']:.3f} [{act.loc[v, 'lower']:.3f}, {act.loc[v, 'upper']:.3f}]",
                          f"{imp.loc[v, 'mean']:.3f} [{imp.loc[v, 'lower']:.3f}, {imp.loc[v, 'upper']:.3f}]",
                          f"{imp.loc[v, 'share']:.3f}", int(imp.loc[v, "rank"]), f"{imp.loc[v, 'p_top']:.2f}"])
        lines += [f"### {name}", "", f"`{formula}`, {fit.idata['observed_data']['y'].size} rows; fit {fit_cpu:.0f} "
                  f"CPU s, importance {imp_cpu:.1f} CPU s. Ranked by mean |SHAP|.", ""]
        lines += markdown_table(["predictor", "variable activity", "mean abs SHAP", "SHAP share", "rank", "P(top)"],
                                table)
        lines.append("")
        for measure, frame in (("variable activity", act), ("mean abs SHAP", imp)):
            row = _sharpness(frame["mean"], frame["lower"], frame["upper"])
            summary.append([name.split(" ")[0], measure] + list(row.values()))
    lines += ["### Sharpness", "",
              "entropy: normalised entropy of the shares (1 = all equal); below top: predictors whose interval "
              "lies wholly below the top predictor's.", ""]
    lines += markdown_table(["data", "measure", "top", "top share", "max/min share", "entropy", "below top"], summary)
    return lines + [""]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100 draws everywhere, one repeat")
    args = parser.parse_args(argv)
    draws = 100 if args.quick else 1000
    repeats = 1 if args.quick else args.repeats
    load = os.getloadavg()[0]
    lines = ["# Posterior SHAP: speed, agreement with shap, importance", "",
             f"`python3 benchmarks/shap_speed.py{' --quick' if args.quick else ''}"
             f"{f' --out {args.out}' if args.out else ''}`, {datetime.date.today()}, {_machine()}. "
             f"Load average at the start {load:.1f}.", ""]
    part, fit, ours, per_draw = speed(draws, repeats)
    lines += part
    lines += against_shap_library(fit, ours, draws, per_draw)
    lines += importance(100 if args.quick else 500)
    lines.append(f"Load average at the end {os.getloadavg()[0]:.1f} (other engineers' work shares the 2 cores).")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
