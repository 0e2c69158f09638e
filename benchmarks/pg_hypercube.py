"""PG-BART tables 1-2 on hypercube-D: ESS and ESS per second of ``cgm``, ``grow_prune``, ``pg``,
``pg`` with ancestor sampling and pymc-bart's particle Gibbs.

Set-up of the paper (Lakshminarayanan, Roy & Teh 2015, section 4.1): hypercube-D data
(``datasets.simulate_hypercube``: 10 points per vertex of [-1, 1]^D), BART with a single tree
(m = 1), alpha = 0.95 and beta = 1.0, 0.5, 0.4, 0.3, 0.25 for D = 2, 3, 4, 5, 7; the rest BART's
defaults (CGM 2010 priors, sigma sampled). The paper's pgbart uses min_size 1 and a split prior
uniform on the node's data range; here ``min_leaf_size=1`` and our 100-cut quantile grid
(``max_cuts=100``). PG with 10 particles (the paper's C = 10), systematic resampling (ours; the
paper's code resamples multinomially).

Per sampler, D and seed: one chain, ``--tune`` burn-in + ``--draws`` kept iterations (the paper:
1,000 + 1,000), after a warm-up fit so that compilation is not timed. Measured:

* ESS of the log-likelihood ``sum_i log N(y_i; f(x_i), sigma^2)`` of each kept draw (the
  paper's statistic), by arviz-stats' ``ess(method="mean")`` (autocorrelation-based, not rank
  normalised; the paper used R-CODA's spectral ``effectiveSize``);
* the median over training points of the ESS of f(x_i);
* ESS per second of the fit's wall time (sampling, recording and building the posterior);
* the mean number of leaves of the kept draws (the true tree has 2^D).

Each figure is the mean over ``--seeds`` data sets (one data set per seed, shared by the
samplers). ``pg_as`` is ``pg`` with ``ancestor_sampling=True``. pymc-bart (``--samplers`` entry
``pymc-bart``, run with ``--pymc-python``, the peers' virtual environment) fits the same data
set in its own process (``_pymc_hypercube.py``: m = 1, the same alpha and beta, 10 particles,
every tree at every iteration) and hands back f and sigma per kept draw, so its log-likelihood
and ESS are computed here exactly as ours; its time is pymc's ``sampling_time`` (compilation of
its functions excluded, as the warm-up excludes ours).

Run from the repository root: ``python3 benchmarks/pg_hypercube.py --out
benchmarks/results/pg_hypercube.md`` (the defaults take long: pymc-bart needs minutes per fit
on a busy machine; ``--samplers`` and ``--pymc-seeds`` narrow the run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bartpy_suite as bps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402

BETA = {2: 1.0, 3: 0.5, 4: 0.4, 5: 0.3, 7: 0.25}
SAMPLERS = ("cgm", "grow_prune", "pg", "pg_as", "pymc-bart")
OPTIONS = {"pg": {"particles": 10}, "pg_as": {"particles": 10, "ancestor_sampling": True}}
PAPER_COLUMN = {"cgm": 0, "grow_prune": 1, "pg": 2}
# PG-BART tables 1 and 2 (ESS of the log-likelihood over 1,000 kept iterations; ESS/s).
PAPER_ESS = {2: (751.66, 473.57, 259.11), 3: (762.96, 285.2, 666.71), 4: (14.01, 11.76, 686.79),
             5: (2.92, 1.35, 667.27), 7: (1.16, 1.78, 422.96)}
PAPER_ESS_S = {2: (157.67, 114.81, 7.69), 3: (93.01, 26.94, 11.025), 4: (0.961, 0.569, 5.394),
               5: (0.130, 0.071, 1.673), 7: (0.027, 0.039, 0.273)}


def ess(x: np.ndarray) -> float:
    from arviz_stats.base import array_stats

    if np.ptp(x) == 0:
        return float("nan")
    return float(array_stats.ess(x[None, :], chain_axis=0, draw_axis=1, method="mean"))


def loglik_stats(y: np.ndarray, f: np.ndarray, sigma: np.ndarray) -> dict:
    """The paper's statistic per kept draw, sum_i log N(y_i; f(x_i), sigma^2), and ESS figures."""
    loglik = (-0.5 * ((y[None, :] - f) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]).sum(axis=1)
    loglik -= 0.5 * y.size * np.log(2 * np.pi)
    ess_f = np.array([ess(f[:, i]) for i in range(f.shape[1])])
    return {"ess_loglik": ess(loglik), "ess_f": float(np.nanmedian(ess_f)), "loglik": float(loglik.mean())}


def fit_once(df, d: int, sampler: str, tune: int, draws: int, seed: int) -> dict:
    t0 = time.perf_counter()
    fit = bps.bart("y ~ .", data=df, trees=1, sampler=sampler.replace("pg_as", "pg"), chains=1, draws=draws,
                   tune=tune, seed=seed, alpha=0.95, beta=BETA[d], min_leaf_size=1, max_cuts=100,
                   sampler_options=OPTIONS.get(sampler), progress=False)
    wall = time.perf_counter() - t0
    out = loglik_stats(df["y"].to_numpy(), fit.function_samples(), fit.posterior["sigma"].values.reshape(-1))
    return {**out, "wall": wall, "leaves": float(fit.posterior["n_leaves"].values.mean())}


def fit_pymc(df, d: int, tune: int, draws: int, seed: int, python: str) -> dict:
    """pymc-bart on the same data in its own process (``_pymc_hypercube.py``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        data, result = os.path.join(tmp, "d.npz"), os.path.join(tmp, "r.json")
        np.savez(data, x=df.drop(columns="y").to_numpy(), y=df["y"].to_numpy())
        subprocess.run([python, os.path.join(here, "_pymc_hypercube.py"), "--data", data, "--beta", str(BETA[d]),
                        "--tune", str(tune), "--draws", str(draws), "--seed", str(seed), "--result", result],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(result) as fh:
            rec = json.load(fh)
    out = loglik_stats(df["y"].to_numpy(), np.array(rec["f"]), np.array(rec["sigma"]))
    return {**out, "wall": rec["sample_s"], "leaves": float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 3, 4, 5, 7])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pymc-seeds", type=int, default=None, help="data sets for pymc-bart (default --seeds)")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--pymc-python", default="/work/benchvenv/bin/python")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    warm = bps.datasets.simulate_hypercube(2, 10, seed=0)
    for sampler in args.samplers:
        if sampler != "pymc-bart":
            fit_once(warm, 2, sampler, 5, 5, 0)

    rows = {}
    for d in args.dims:
        for sampler in args.samplers:
            seeds = range(args.pymc_seeds or args.seeds) if sampler == "pymc-bart" else range(args.seeds)
            runs = []
            for s in seeds:
                df = bps.datasets.simulate_hypercube(d, 10, seed=1000 * d + s)
                runs.append(fit_pymc(df, d, args.tune, args.draws, s, args.pymc_python) if sampler == "pymc-bart"
                            else fit_once(df, d, sampler, args.tune, args.draws, s))
            agg = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
            agg["ess_s"] = float(np.mean([r["ess_loglik"] / r["wall"] for r in runs]))
            agg["ess_f_s"] = float(np.mean([r["ess_f"] / r["wall"] for r in runs]))
            agg["seeds"] = len(runs)
            rows[(d, sampler)] = agg
            print(json.dumps({"D": d, "sampler": sampler, **agg}), flush=True)

    def paper(table, d, sampler):
        k = PAPER_COLUMN.get(sampler)
        return "-" if k is None or d not in table else table[d][k]

    seeds = ("data set s of dimension D: `simulate_hypercube(D, 10, seed=1000 D + s)`, s = 0, 1, ...; its "
             "chain (and pymc-bart's) seed s; the warm-up fits `simulate_hypercube(2, 10, seed=0)`, seed 0")
    lines = [
        "# PG-BART tables 1-2 on hypercube-D (`benchmarks/pg_hypercube.py`)",
        "",
        *_provenance.header(seeds),
        f"Single tree (m = 1), alpha = 0.95, beta by D as in the paper, min_leaf_size = 1, 100-cut grid; "
        f"{args.tune} burn-in + {args.draws} kept iterations, one chain, mean over the data sets (seeds "
        f"1000 D + 0, 1, ...; column 'sets'); pg with 10 particles, systematic resampling; pg_as the same with "
        f"ancestor sampling; pymc-bart 10 particles in its own process; one thread per fit.",
        "",
        "ESS of the log-likelihood (1,000 kept draws) and ESS per second; paper = PG-BART tables 1 and 2.",
        "",
    ]
    lines += markdown_table(
        ["D", "sampler", "sets", "ESS loglik", "paper ESS", "ESS/s", "paper ESS/s", "median ESS f(x_i)", "ESS f/s",
         "s per fit", "mean leaves (true 2^D)", "mean loglik"],
        [[d, sampler, int(a["seeds"]), f"{a['ess_loglik']:.1f}", paper(PAPER_ESS, d, sampler), f"{a['ess_s']:.2f}",
          paper(PAPER_ESS_S, d, sampler), f"{a['ess_f']:.1f}", f"{a['ess_f_s']:.2f}", f"{a['wall']:.2f}",
          f"{a['leaves']:.1f} ({2 ** d})", f"{a['loglik']:.1f}"] for (d, sampler), a in rows.items()])
    ratio_rows = []
    for d in args.dims:
        if (d, "pg") in rows and (d, "cgm") in rows:
            pg, cgm = rows[(d, "pg")], rows[(d, "cgm")]
            pe, ps = PAPER_ESS.get(d), PAPER_ESS_S.get(d)
            ratio_rows.append([d, f"{pg['ess_loglik'] / cgm['ess_loglik']:.2f} ({pe[2] / pe[0]:.2f})",
                               f"{pg['ess_s'] / cgm['ess_s']:.3f} ({ps[2] / ps[0]:.3f})"])
    lines += ["", "Ratios pg / cgm (ours; paper in brackets):", ""]
    lines += markdown_table(["D", "ESS loglik", "ESS/s"], ratio_rows)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
