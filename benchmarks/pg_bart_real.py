"""PG-BART tables 4-5 protocol on a real data set that a registry package ships: ESS of the
log-likelihood of default BART (m = 200) with ``pg``, ``cgm`` and ``grow_prune``.

Command (the committed results, from the repository root; about 20 minutes on a shared 2-core host):

    PYTHONPATH=$PWD python3 benchmarks/pg_bart_real.py --out benchmarks/results/pg_bart_real.md

The paper (Lakshminarayanan, Roy & Teh 2015, section 4.2) used CaliforniaHouses (D = 6),
YearPredictionMSD (D = 90) and CTslices (D = 384), three training sets of 2,000 rows each, default
BART (m = 200, alpha 0.95, beta 2, k 2, nu 3, q 0.9), 1,000 + 1,000 iterations and R-CODA's ESS of
the log-likelihood averaged over the training sets. None of those files is available offline here;
the stand-in is ``statsmodels.datasets.randhie`` (RAND Health Insurance Experiment, 20,190 rows,
9 predictors, public domain; see ``data/README.md``), response ``log1p(mdvis)`` (doctor visits; the
log tames the count's long tail). Three disjoint training sets of 2,000 rows and one test set of
2,000 rows are drawn with ``numpy.random.default_rng(2015)``. Settings as in
``pg_bart_hypercube.py``: the paper's split-point prior (evenly spaced grid of 100 cut points),
``min_leaf_size=1``, ``pg`` with 10 particles and multinomial resampling at every stage; one chain
per training set (seed = training-set index). ESS by ``posterior.coda_ess`` (CODA) and the bulk ESS;
test RMSE of the posterior mean.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np

import bartpy_suite as bps
from bartpy_suite.posterior.coda_ess import coda_ess
from bartpy_suite.posterior.weighted import weighted_ess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tables import emit, markdown_table  # noqa: E402
from pg_bart_hypercube import N_CUTS, paper_grid  # noqa: E402

# PG-BART table 4 (ESS, mean over three training sets): CGM, GrowPrune, PG.
PAPER_ESS = {"CaliforniaHouses (D = 6)": (18.956, 34.849, 76.819),
             "YearPredictionMSD (D = 90)": (29.215, 21.656, 76.766),
             "CTslices (D = 384)": (2.511, 5.025, 11.838)}


def load_randhie():
    """(predictors DataFrame, response log1p(mdvis)) of statsmodels' randhie data."""
    from statsmodels.datasets import randhie

    data = randhie.load_pandas().data
    return data.drop(columns="mdvis"), np.log1p(data["mdvis"].to_numpy(dtype=float))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samplers", nargs="+", default=["pg", "cgm", "grow_prune"],
                        choices=["pg", "cgm", "grow_prune"])
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    x, y = load_randhie()
    order = np.random.default_rng(2015).permutation(len(y))
    test = order[args.sets * args.rows:(args.sets + 1) * args.rows]
    x_test = x.iloc[test]
    rows, records = [], []
    for sampler in args.samplers:
        runs = []
        for s in range(args.sets):
            idx = order[s * args.rows:(s + 1) * args.rows]
            df = x.iloc[idx].assign(y=y[idx])
            options = {"particles": 10, "resampling": "multinomial"} if sampler == "pg" else None
            t0 = time.perf_counter()
            with paper_grid("uniform"):
                fit = bps.bart("y ~ .", data=df, trees=args.trees, sampler=sampler, chains=1, draws=args.draws,
                               tune=args.tune, seed=s, min_leaf_size=1, max_cuts=N_CUTS, sampler_options=options,
                               progress=False, check_mixing=False)
            wall = time.perf_counter() - t0
            f = fit.function_samples()
            sigma = fit.posterior["sigma"].values.reshape(-1)
            yt = y[idx]
            loglik = (-0.5 * ((yt[None, :] - f) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]).sum(axis=1)
            pred = np.asarray(fit.predict(x_test)["mean"], dtype=float)
            rec = {"sampler": sampler, "set": s, "ess_coda": coda_ess(loglik),
                   "ess_bulk": weighted_ess(loglik[None, :], np.ones((1, loglik.size))),
                   "test_rmse": float(np.sqrt(np.mean((pred - y[test]) ** 2))), "wall": wall,
                   "leaves": float(fit.posterior["mean_leaves"].values.mean())}
            print(json.dumps(rec), flush=True)
            runs.append(rec)
            records.append(rec)
        rows.append((sampler, {k: float(np.mean([r[k] for r in runs])) for k in ("ess_coda", "ess_bulk",
                                                                                  "test_rmse", "wall", "leaves")}))

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# PG-BART tables 4-5 protocol on randhie (`benchmarks/pg_bart_real.py`)",
        "",
        f"Command: `PYTHONPATH=$PWD python3 {' '.join(sys.argv)}` (settings: statsmodels' randhie, "
        f"response log1p(mdvis), 9 predictors, {args.sets} training sets of {args.rows} rows and a test set of "
        f"{args.rows} rows drawn with seed 2015, BART m = {args.trees} with the default priors, {args.tune} + "
        f"{args.draws} iterations, one chain per training set (seed = set index), min_leaf_size 1, {N_CUTS} evenly "
        f"spaced cut points, pg with 10 particles and multinomial resampling). Machine: {platform.machine()}, "
        f"Python {platform.python_version()}, shared 2-core host; run {now}.",
        "",
        "Means over the training sets: ESS of the log-likelihood by CODA and the bulk ESS, test RMSE of the "
        "posterior mean, seconds per fit, mean leaves per tree.",
        "",
    ]
    lines += markdown_table(["sampler", "ESS coda", "ESS bulk", "test RMSE", "s per fit", "leaves per tree"],
                            [[s, f"{a['ess_coda']:.1f}", f"{a['ess_bulk']:.1f}", f"{a['test_rmse']:.4f}",
                              f"{a['wall']:.0f}", f"{a['leaves']:.2f}"] for s, a in rows])
    lines += ["", "Per training set:", ""]
    lines += markdown_table(["sampler", "set", "ESS coda", "ESS bulk", "test RMSE"],
                            [[r["sampler"], r["set"], f"{r['ess_coda']:.1f}", f"{r['ess_bulk']:.1f}",
                              f"{r['test_rmse']:.4f}"] for r in records])
    lines += ["", "The paper's table 4 (ESS, mean over three training sets; CGM, GrowPrune, PG) for comparison:", ""]
    lines += markdown_table(["data set", "CGM", "GrowPrune", "PG"], [[k, *v] for k, v in PAPER_ESS.items()])
    emit(lines, args.out)


if __name__ == "__main__":
    main()
