"""BART's default move mix (issue 11, section 2): effective draws per CPU second of ``cgm``
(grow, prune, change, swap) against ``grow_prune`` on multimodal data.

Section 2 of issue 11 allows the BART default to change only with evidence that mixing per
second does not suffer on the hypercube or Wu data. This script fits, per data set and sampler,
BART with the package's default priors (200 trees, alpha 0.95, beta 2, k 2, nu 3, q 0.9, 100
cuts), ``--chains`` chains of ``--tune`` burn-in + ``--draws`` kept sweeps each, one after the
other on one thread, after a warm-up fit so that compilation is not timed. Both samplers see the
same data set and the same seeds.

Data sets (``bartpy_suite.datasets``):

* ``hypercube-D``, D = 2..5: 10 points per vertex of [-1, 1]^D, a value per vertex drawn from
  N(0, 3^2), noise sd 0.01 (PG-BART paper, section 4.1): sharp multimodal posteriors over
  partitions.
* ``wu2007``: the Wu, Tjelmeland and West example (300 rows, x1 and x3 confounded, noise
  variance 1), a new data set per seed.
* ``cgm1998``: the CGM (1998) example (800 rows, a factor predictor).
* ``breast_cancer`` and ``raisin``: the shipped UCI data sets as probit BART (binary class; no
  sigma; breast_cancer's 16 rows with a missing score dropped). They are fixed data sets, so
  there the seed changes only the chains' seeds.

Measured per fit: sampling CPU seconds (the chain runner only), bulk ESS over the chains
(split, rank-normalised, arviz-stats) of sigma and of f(x_i) at up to 100 training rows
(median and 5th percentile over the rows), the largest R-hat of f(x_i), and those ESS per CPU
second. The summary table gives, per data set, the ratio ``grow_prune / cgm`` of ESS per second,
as the median over the seeds (with the smallest and largest).

Run from the repository root: ``python3 benchmarks/bart_default_mixing.py --out
benchmarks/results/bart_default_mixing.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.models import _base

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import ess_figures  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402

SAMPLERS = ("cgm", "grow_prune")
PROBIT = {"breast_cancer": "class", "raisin": "Class"}  # data set -> its class column
POINTS = 100


def design(name: str, seed: int) -> pd.DataFrame:
    """Data set ``name`` drawn with ``seed``."""
    if name.startswith("hypercube-"):
        d = int(name.split("-")[1])
        return bps.datasets.simulate_hypercube(d, 10, seed=1000 * d + seed)
    if name == "wu2007":
        return bps.datasets.simulate_wu2007(300, seed=2007 + seed)
    if name == "cgm1998":
        return bps.datasets.simulate_cgm1998(800, seed=1998 + seed)
    if name in PROBIT:
        df = bps.datasets.load(name).drop(columns=["id"], errors="ignore").dropna()
        return df.rename(columns={PROBIT[name]: "y"})
    raise ValueError(f"unknown data set {name!r}")


class SamplingClock:
    """CPU seconds spent in the chain runner (``TreeModel._run``) while active."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def __enter__(self) -> SamplingClock:
        self._original = _base.TreeModel._run
        clock = self

        def timed_run(model, *args, **kwargs):
            c0 = time.process_time()
            try:
                return clock._original(model, *args, **kwargs)
            finally:
                clock.cpu += time.process_time() - c0

        _base.TreeModel._run = timed_run
        return self

    def __exit__(self, *exc) -> None:
        _base.TreeModel._run = self._original


def rhat_max(f: np.ndarray) -> float:
    from arviz_stats.base import array_stats

    r = [float(array_stats.rhat(f[:, :, i], chain_axis=0, draw_axis=1)) for i in range(f.shape[2])]
    return float(np.nanmax(r))


def fit_once(df: pd.DataFrame, sampler: str, chains: int, tune: int, draws: int, seed: int) -> dict:
    with SamplingClock() as clock:
        fit = bps.bart("y ~ .", data=df, sampler=sampler, chains=chains, tune=tune, draws=draws, seed=seed,
                       progress=False, threads=1)
    rows = df.iloc[: min(POINTS, len(df))]
    f = fit.function_samples(rows).reshape(chains, draws, -1)
    # probit: f is on the latent scale and there is no sigma (its ESS is then NaN)
    sigma = (fit.posterior["sigma"].values.reshape(chains, draws) if "sigma" in fit.posterior
             else np.full((chains, draws), np.nan))
    figures = ess_figures(dict(f=f, sigma=sigma, weights=None, sample_cpu_s=clock.cpu, sample_wall_s=float("nan"),
                               timed="the chain runner"))
    return {
        "cpu_s": clock.cpu,
        **{k: figures[k] for k in ("ess_sigma", "ess_f_median", "ess_f_p5", "ess_sigma_per_s", "ess_f_median_per_s",
                                   "ess_f_p5_per_s")},
        "rhat_f_max": rhat_max(f),
        "sigma_mean": figures["sigma_mean"],
        "leaves_mean": float(fit.posterior["n_leaves"].values.mean()),
    }


def ratio_summary(values: list[float]) -> str:
    v = np.asarray(values)
    if np.isnan(v).all():
        return "-"
    return f"{np.median(v):.2f} ({v.min():.2f}-{v.max():.2f})"


def report(records: list[dict], settings: dict) -> list[str]:
    """The markdown lines: ratios per data set, then every fit."""
    by = {(r["data"], r["seed"], r["sampler"]): r for r in records}
    names = list(dict.fromkeys(r["data"] for r in records))
    cols = ["ess_sigma_per_s", "ess_f_median_per_s", "ess_f_p5_per_s"]
    summary = []
    for name in names:
        seeds = sorted({r["seed"] for r in records if r["data"] == name})
        ratios = {c: [by[(name, s, "grow_prune")][c] / by[(name, s, "cgm")][c] for s in seeds]
                  for c in cols + ["cpu_s"]}
        summary.append([name, by[(name, seeds[0], "cgm")]["rows"], ratio_summary(ratios["cpu_s"])]
                       + [ratio_summary(ratios[c]) for c in cols])
    lines = [
        "# BART's default move mix: `cgm` against `grow_prune`, ESS per CPU second (issue 11, section 2)",
        "",
        f"`python3 benchmarks/bart_default_mixing.py` with {settings['chains']} chains x ({settings['tune']} "
        f"burn-in + {settings['draws']} kept sweeps) per fit, {settings['seeds']} data sets (or chain seeds) per "
        f"design, BART's default priors (200 trees). Machine: {platform.machine()}, {os.cpu_count()} logical "
        f"CPUs, Python {platform.python_version()}; one thread.",
        "",
        "Ratio `grow_prune / cgm` per data set: median over the seeds (smallest-largest). Above 1 for an "
        "ESS/s column: `grow_prune` mixes faster per CPU second; for CPU: it takes longer.",
        "",
    ]
    lines += markdown_table(["data", "rows", "CPU s", "ESS/s sigma", "ESS/s f median", "ESS/s f 5%"], summary)
    lines += ["", "Every fit:", ""]
    lines += markdown_table(
        ["data", "seed", "sampler", "CPU s", "ESS sigma", "ESS f median", "ESS f 5%", "max R-hat f",
         "ESS/s sigma", "ESS/s f median", "ESS/s f 5%", "sigma mean", "mean leaves"],
        [[r["data"], r["seed"], r["sampler"], f"{r['cpu_s']:.1f}", f"{r['ess_sigma']:.0f}",
          f"{r['ess_f_median']:.0f}", f"{r['ess_f_p5']:.0f}", f"{r['rhat_f_max']:.2f}",
          f"{r['ess_sigma_per_s']:.1f}", f"{r['ess_f_median_per_s']:.1f}", f"{r['ess_f_p5_per_s']:.1f}",
          f"{r['sigma_mean']:.4f}", f"{r['leaves_mean']:.1f}"] for r in records])
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+",
                        default=["hypercube-2", "hypercube-3", "hypercube-4", "hypercube-5", "wu2007", "cgm1998",
                                 "breast_cancer", "raisin"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--records", nargs="+", default=None,
                        help="write the report from these .json files of earlier runs (same settings) instead")
    parser.add_argument("--out", default=None, help="markdown report; the records go next to it as .json")
    args = parser.parse_args(argv)
    settings = {k: getattr(args, k) for k in ("chains", "tune", "draws", "seeds")}

    records = []
    if args.records:
        for path in args.records:
            with open(path) as fh:
                saved = json.load(fh)
            if {k: saved["args"][k] for k in settings} != settings:
                raise SystemExit(f"{path} was run with {saved['args']}, not {settings}")
            records += saved["records"]
    else:
        warm = design("hypercube-2", 0)
        for sampler in SAMPLERS:
            fit_once(warm, sampler, 1, 2, 2, 0)
        for name in args.data:
            for s in range(args.seeds):
                df = design(name, s)
                for sampler in SAMPLERS:
                    rec = {"data": name, "seed": s, "rows": len(df), "sampler": sampler,
                           **fit_once(df, sampler, args.chains, args.tune, args.draws, seed=100 + s)}
                    records.append(rec)
                    print(json.dumps(rec), flush=True)

    emit(report(records, settings), args.out)
    if args.out:
        with open(os.path.splitext(args.out)[0] + ".json", "w") as fh:
            json.dump({"args": {**vars(args), "data": list(dict.fromkeys(r["data"] for r in records))},
                       "records": records}, fh, indent=1)


if __name__ == "__main__":
    main()
