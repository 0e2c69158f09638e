"""PG-BART tables 1-2 on hypercube-D: ESS and ESS per second of ``cgm``, ``grow_prune`` and ``pg``.

Set-up of the paper (Lakshminarayanan, Roy & Teh 2015, section 4.1): hypercube-D data
(``datasets.simulate_hypercube``: 10 points per vertex of [-1, 1]^D), BART with a single tree
(m = 1), alpha = 0.95 and beta = 1.0, 0.5, 0.4, 0.3 for D = 2, 3, 4, 5; the rest BART's
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
samplers). Run from the repository root: ``python3 benchmarks/pg_hypercube.py --out
benchmarks/results/pg_hypercube.md`` (a few minutes with the defaults).
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

import bartpy_suite as bps

BETA = {2: 1.0, 3: 0.5, 4: 0.4, 5: 0.3, 7: 0.25}
SAMPLERS = ("cgm", "grow_prune", "pg")
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


def fit_once(df, d: int, sampler: str, tune: int, draws: int, seed: int) -> dict:
    options = {"particles": 10} if sampler == "pg" else None
    t0 = time.perf_counter()
    fit = bps.bart("y ~ .", data=df, trees=1, sampler=sampler, chains=1, draws=draws, tune=tune, seed=seed,
                   alpha=0.95, beta=BETA[d], min_leaf_size=1, max_cuts=100, sampler_options=options,
                   progress=False)
    wall = time.perf_counter() - t0
    y = df["y"].to_numpy()
    f = fit.function_samples()
    sigma = fit.posterior["sigma"].values.reshape(-1)
    loglik = (-0.5 * ((y[None, :] - f) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]).sum(axis=1)
    loglik -= 0.5 * y.size * np.log(2 * np.pi)
    ess_f = np.array([ess(f[:, i]) for i in range(f.shape[1])])
    return {"ess_loglik": ess(loglik), "ess_f": float(np.nanmedian(ess_f)), "wall": wall,
            "leaves": float(fit.posterior["n_leaves"].values.mean()), "loglik": float(loglik.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    warm = bps.datasets.simulate_hypercube(2, 10, seed=0)
    for sampler in SAMPLERS:
        fit_once(warm, 2, sampler, 5, 5, 0)

    rows = {}
    for d in args.dims:
        for sampler in SAMPLERS:
            runs = [fit_once(bps.datasets.simulate_hypercube(d, 10, seed=1000 * d + s), d, sampler, args.tune,
                             args.draws, s) for s in range(args.seeds)]
            agg = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
            agg["ess_s"] = float(np.mean([r["ess_loglik"] / r["wall"] for r in runs]))
            agg["ess_f_s"] = float(np.mean([r["ess_f"] / r["wall"] for r in runs]))
            rows[(d, sampler)] = agg
            print(json.dumps({"D": d, "sampler": sampler, **agg}), flush=True)

    lines = [
        "# PG-BART tables 1-2 on hypercube-D (`benchmarks/pg_hypercube.py`)",
        "",
        f"Single tree (m = 1), alpha = 0.95, beta by D as in the paper, min_leaf_size = 1, 100-cut grid; "
        f"{args.tune} burn-in + {args.draws} kept iterations, one chain, mean over {args.seeds} data sets "
        f"(seeds 1000 D + 0..{args.seeds - 1}); pg with 10 particles, systematic resampling. "
        f"Machine: {platform.machine()}, {platform.python_version()}, one thread per fit, shared 2-core host.",
        "",
        "ESS of the log-likelihood (1,000 kept draws) and ESS per second; paper = PG-BART tables 1 and 2.",
        "",
        "| D | sampler | ESS loglik | paper ESS | ESS/s | paper ESS/s | median ESS f(x_i) | ESS f/s | s per fit "
        "| mean leaves (true 2^D) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (d, sampler), a in rows.items():
        k = SAMPLERS.index(sampler)
        pe = PAPER_ESS.get(d, (float("nan"),) * 3)[k]
        ps = PAPER_ESS_S.get(d, (float("nan"),) * 3)[k]
        lines.append(f"| {d} | {sampler} | {a['ess_loglik']:.1f} | {pe} | {a['ess_s']:.2f} | {ps} | "
                     f"{a['ess_f']:.1f} | {a['ess_f_s']:.2f} | {a['wall']:.2f} | {a['leaves']:.1f} ({2 ** d}) |")
    lines += ["", "Ratios pg / cgm (ours; paper in brackets):", "",
              "| D | ESS loglik | ESS/s |", "|---|---|---|"]
    for d in args.dims:
        pg, cgm = rows[(d, "pg")], rows[(d, "cgm")]
        pe, ps = PAPER_ESS.get(d), PAPER_ESS_S.get(d)
        lines.append(f"| {d} | {pg['ess_loglik'] / cgm['ess_loglik']:.2f} ({pe[2] / pe[0]:.2f}) | "
                     f"{pg['ess_s'] / cgm['ess_s']:.3f} ({ps[2] / ps[0]:.3f}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
