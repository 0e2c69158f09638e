"""PG-BART table 1 as the paper ran it: BART with one tree on hypercube-D, ESS of the log-likelihood
by CODA's estimator (the paper's) and by the rank-normalised bulk ESS, with diagnostics of ``pg``.

Command (the committed results, from the repository root; about 5 minutes on a shared 2-core host):

    PYTHONPATH=$PWD python3 benchmarks/pg_bart_hypercube.py --out benchmarks/results/pg_bart_hypercube.md

Protocol (Lakshminarayanan, Roy & Teh 2015, section 4.1, and their code, pgbart):

* data: ``datasets.simulate_hypercube(D, 10, seed=1000 D + s)`` for data sets s = 0, 1, 2 (10 points
  per vertex of [-1, 1]^D, offsets N(0, 0.1^2), vertex values N(0, 3^2), noise N(0, 0.01^2));
* model: BART with m = 1 tree, sigma sampled, BART's default priors (k = 2, nu = 3, q = 0.9),
  alpha = 0.95 and beta = 1.0, 0.5, 0.4, 0.3, 0.25 for D = 2, 3, 4, 5, 7, ``min_leaf_size=1``
  (pgbart's min_size 1);
* split-point prior, column ``grid``: ``uniform`` is the paper's: pgbart draws a split of a node
  with probability proportional to the gap between consecutive training values inside the node,
  i.e. uniform on the node's data range (as BayesTree's evenly spaced grid of numcut = 100 cut
  points). The package has no option for an evenly spaced grid, so this script builds one for the
  run (``evenly_spaced_cuts``: 100 cut points evenly spaced between each predictor's minimum and
  maximum, swapped in for ``_binning.make_cuts`` inside ``paper_grid()``); our kernels draw a cut
  uniformly among those available in the node, which on this grid is uniform on the node's range
  to within one grid step. ``quantile`` is the package's default grid (``max_cuts=100``: 100 cut
  points at evenly spaced *quantiles*, so a split falls between the vertex clusters at +-1 with
  probability about 1/100 per variable instead of about 1/2);
* samplers: ``pg`` with C = 10 particles and multinomial resampling at every stage (the paper's
  Algorithm 2; pgbart's defaults ``--resample multinomial --ess_threshold 1``), ``cgm`` and
  ``grow_prune``;
* 1,000 burn-in + 1,000 kept iterations per chain, ``--chains`` chains per data set (seed s);
* statistic: the log-likelihood sum_i log N(y_i; f(x_i), sigma^2) of each kept draw. ESS per
  chain by ``posterior.coda_ess`` (``coda::effectiveSize``, what the paper used) and by the
  package's ``weighted.weighted_ess`` (arviz-stats' rank-normalised bulk ESS of one chain);
  the table gives the mean over the chains of all data sets and the smallest and largest chain.

Diagnostics of ``pg`` (means over kept iterations, chains and data sets): ``kept ref`` (share of
iterations whose conditional SMC returned the clamped particle itself), ``partition changed``
(share of iterations whose row partition differs from the previous draw's, read from f's equal
values), ``root changed`` (share whose root rule differs), ``stages``, ``last ESS`` (Kish ESS of
the last stage's weights, in particles), leaves and depth of the trees, and the RMSE of f against
the noiseless vertex values (how far the chain is from the true tree, which fits to RMSE ~0).

Two differences from pgbart, as options (defaults = the paper's text and the package's default):
``--y-sd`` (label noise sd; pgbart's ``gen_hypercube_data`` has ``y_sd = 0``) and ``--variance``
(``leastsquares``: sigma_hat the least-squares residual sd, the package's default; ``unconditional``:
sigma_hat = sd(y), pgbart's default, passed as ``bps.bart(..., sigma_hat=)``). Several values of
either run every combination; the table then has columns ``y sd`` and ``sigma_hat``. The committed
run of both (``pg_bart_hypercube_pgbart.md``):

    PYTHONPATH=$PWD nice -n 5 python3 benchmarks/pg_bart_hypercube.py --samplers pg cgm --grids uniform \
        --y-sd 0.01 0 --variance leastsquares unconditional \
        --out benchmarks/results/pg_bart_hypercube_pgbart.md --json benchmarks/results/pg_bart_hypercube_pgbart.json

The header of the output gives the machine, the date and the settings; the defaults are the
committed settings.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time

import numpy as np

import bartpy_suite as bps
from bartpy_suite import _binning
from bartpy_suite.posterior.coda_ess import coda_ess
from bartpy_suite.posterior.weighted import weighted_ess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _revisions import hand_written  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402
from _timing import runner_seconds  # noqa: E402

BETA = {2: 1.0, 3: 0.5, 4: 0.4, 5: 0.3, 7: 0.25}
# PG-BART table 1 (ESS of the log-likelihood over 1,000 kept iterations): CGM, GrowPrune, PG.
PAPER_ESS = {2: (751.66, 473.57, 259.11), 3: (762.96, 285.2, 666.71), 4: (14.01, 11.76, 686.79),
             5: (2.92, 1.35, 667.27), 7: (1.16, 1.78, 422.96)}
PAPER_COLUMN = {"cgm": 0, "grow_prune": 1, "pg": 2}
# PG-BART table 2: PG's ESS per second over CGM's
PAPER_TABLE2 = {2: 0.049, 3: 0.119, 4: 5.6, 5: 12.9, 7: 10.1}
N_CUTS = 100
SIM_Y_SD = 0.01  # the label noise sd of ``datasets.simulate_hypercube``


def evenly_spaced_cuts(column: np.ndarray, max_cuts: int | None) -> np.ndarray:
    """``max_cuts`` (default 100) cut points evenly spaced strictly inside [min, max] of the column."""
    values = np.asarray(column, dtype=np.float64)
    lo, hi = float(values.min()), float(values.max())
    if not hi > lo:
        return np.zeros(0)
    return np.linspace(lo, hi, (max_cuts or N_CUTS) + 2)[1:-1]


@contextlib.contextmanager
def paper_grid(grid: str):
    """Inside the block, fits bin numeric predictors on ``grid`` ("uniform" or "quantile")."""
    if grid == "quantile":
        yield
        return
    original = _binning.make_cuts
    _binning.make_cuts = evenly_spaced_cuts
    try:
        yield
    finally:
        _binning.make_cuts = original


def partitions(f: np.ndarray) -> list:
    """Each draw's row partition as a tuple of group labels in order of first appearance (the
    leaf values of one draw are distinct with probability one)."""
    out = []
    for row in f:
        _, first, inverse = np.unique(row, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        out.append(tuple(rank[inverse].tolist()))
    return out


def rules_by_path(var: np.ndarray, cut: np.ndarray, left: np.ndarray, right: np.ndarray) -> dict:
    """{path: (var, cut)} of a tree's nodes (path "" is the root, then "0"/"1" per left/right step;
    leaves map to (-1, 0))."""
    out, stack = {}, [(0, "")]
    while stack:
        node, path = stack.pop()
        if var[node] < 0:
            out[path] = (-1, 0)
            continue
        out[path] = (int(var[node]), int(cut[node]))
        stack += [(int(left[node]), path + "0"), (int(right[node]), path + "1")]
    return out


def shallowest_change(a: dict, b: dict) -> int:
    """Depth of the shallowest node whose rule (or leaf status) differs between two trees; -1 if
    they are the same tree."""
    depths = [len(p) for p in set(a) | set(b) if a.get(p) != b.get(p)]
    return min(depths) if depths else -1


def chain_stats(y, truth, f, sigma, root_var, root_cut) -> dict:
    loglik = (-0.5 * ((y[None, :] - f) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]).sum(axis=1)
    loglik -= 0.5 * y.size * np.log(2 * np.pi)
    parts = partitions(f)
    return {
        "ess_coda": coda_ess(loglik),
        "ess_bulk": weighted_ess(loglik[None, :], np.ones((1, loglik.size))),
        "partition_changed": float(np.mean([parts[i] != parts[i - 1] for i in range(1, len(parts))])),
        "root_changed": float(np.mean((root_var[1:] != root_var[:-1]) | (root_cut[1:] != root_cut[:-1]))),
        "rmse_truth": float(np.sqrt(((f - truth[None, :]) ** 2).mean())),
        "loglik": float(loglik.mean()),
    }


def true_values(df, d: int, seed: int) -> np.ndarray:
    """The noiseless vertex values f_v of each row (``simulate_hypercube`` draws them first)."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0.0, 3.0, 2 ** d)
    return np.repeat(values, len(df) // 2 ** d)


def hypercube(d: int, s: int, y_sd: float):
    """Data set s of hypercube-D with label noise sd ``y_sd`` and its noiseless vertex values.

    ``simulate_hypercube`` draws N(0, 0.01^2) noise (the paper's text); any other ``y_sd`` rescales
    that same noise draw (``y_sd = 0``: y is the vertex value, as in pgbart's ``gen_hypercube_data``).
    At 0.01 the simulated y is used unchanged (so the committed runs are reproduced bit for bit).
    """
    df = bps.datasets.simulate_hypercube(d, 10, seed=1000 * d + s)
    truth = true_values(df, d, 1000 * d + s)
    if y_sd != SIM_Y_SD:
        y = df["y"].to_numpy()
        df = df.assign(y=truth + (y - truth) * (y_sd / SIM_Y_SD))
    return df, truth


def sigma_hat_of(y: np.ndarray, variance: str) -> float | None:
    """sigma_hat of BART's sigma prior: None (the package's default, the least-squares residual sd,
    pgbart's ``--variance leastsquares``) or sd(y) with ddof 0 (pgbart's default ``--variance
    unconditional``: ``1 / np.var(y_train)`` is its unconditional precision)."""
    return None if variance == "leastsquares" else float(np.std(y))


def fit_chains(d: int, s: int, sampler: str, grid: str, args, y_sd: float = 0.01,
               variance: str = "leastsquares") -> list[dict]:
    df, truth = hypercube(d, s, y_sd)
    options = None
    if sampler in ("pg", "pg_as"):
        options = {"particles": args.particles, "resampling": args.resampling,
                   "ancestor_sampling": sampler == "pg_as"}
        if args.ess_threshold < 1.0:
            options["ess_threshold"] = args.ess_threshold
    t0 = time.perf_counter()
    with paper_grid(grid), runner_seconds() as spent:
        fit = bps.bart("y ~ .", data=df, trees=1, sampler=sampler.replace("pg_as", "pg"), chains=args.chains,
                       draws=args.draws, tune=args.tune, seed=s, alpha=0.95, beta=BETA[d], min_leaf_size=1,
                       max_cuts=N_CUTS, sampler_options=options, progress=False, check_mixing=False,
                       sigma_hat=sigma_hat_of(df["y"].to_numpy(), variance))
    wall, cpu = time.perf_counter() - t0, spent["cpu"]
    y = df["y"].to_numpy()
    f_all = fit.function_samples().reshape(args.chains, args.draws, -1)
    sigma = fit.posterior["sigma"].values
    arrays = fit.tree_arrays()
    var, cut = arrays["split_var"].values[:, :, 0], arrays["split_cut"].values[:, :, 0]
    left, right = arrays["left_child"].values[:, :, 0], arrays["right_child"].values[:, :, 0]
    root_var, root_cut = var[:, :, 0], cut[:, :, 0]
    out = []
    for c in range(args.chains):
        rec = chain_stats(y, truth, f_all[c], sigma[c], root_var[c], root_cut[c])
        rules = [rules_by_path(var[c, k], cut[c, k], left[c, k], right[c, k]) for k in range(args.draws)]
        changes = [shallowest_change(rules[k - 1], rules[k]) for k in range(1, args.draws)]
        moved = [x for x in changes if x >= 0]
        rec["tree_changed"] = len(moved) / len(changes)
        rec["change_depth"] = float(np.mean(moved)) if moved else float("nan")
        rec.update(wall=wall / args.chains, cpu=cpu / args.chains,
                   leaves=float(fit.posterior["n_leaves"].values[c].mean()),
                   depth=float(fit.posterior["mean_depth"].values[c].mean()))
        if sampler in ("pg", "pg_as"):
            st = fit.sample_stats
            rec.update(kept_ref=float(st["kept_reference"].values[c].mean()),
                       stages=float(st["stages"].values[c].mean()), last_ess=float(st["ess"].values[c].mean()))
        out.append(rec)
    return out


def table2(rows, variant_header, variant_cells) -> list[str]:
    """PG-BART table 2: ESS of the log-likelihood per CPU second of sampling (the chain runner's CPU
    over the chains), and pg's against cgm's, beside the paper's ratio (PG / CGM ESS per second)."""
    per_second = {(d, grid, v, sampler): a["ess_coda"] / a["cpu"] for d, grid, sampler, a, v in rows}
    out = ["", "ESS per CPU second (PG-BART table 2): CODA ESS of the log-likelihood (mean over chains) divided by the "
           "mean CPU seconds per chain of sampling (process time of all threads while the chains run, over the chains; "
           "compiled before timing). The paper's column is its ratio of PG's ESS per second to CGM's.", ""]
    table = []
    for d, grid, v in dict.fromkeys((d, grid, v) for d, grid, _, _, v in rows):
        pg, cgm = per_second.get((d, grid, v, "pg")), per_second.get((d, grid, v, "cgm"))
        cells = [per_second.get((d, grid, v, s)) for s in ("pg", "cgm", "grow_prune")]
        table.append([d, *variant_cells(v), grid, *("-" if c is None else f"{c:.1f}" for c in cells),
                      "-" if pg is None or cgm is None else f"{pg / cgm:.3f}", PAPER_TABLE2.get(d, "-")])
    out += markdown_table(["D", *variant_header, "grid", "pg ESS / CPU s", "cgm ESS / CPU s",
                           "grow_prune ESS / CPU s", "pg / cgm", "paper PG / CGM"], table)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 3, 4, 5, 7], choices=sorted(BETA))
    parser.add_argument("--samplers", nargs="+", default=["pg", "cgm", "grow_prune"],
                        choices=["pg", "pg_as", "cgm", "grow_prune"],
                        help="pg_as: pg with ancestor sampling (not in the paper)")
    parser.add_argument("--grids", nargs="+", default=["uniform", "quantile"], choices=["uniform", "quantile"])
    parser.add_argument("--datasets", type=int, default=3)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--particles", type=int, default=10)
    parser.add_argument("--resampling", default="multinomial", choices=["multinomial", "systematic"])
    parser.add_argument("--ess-threshold", type=float, default=1.0,
                        help="pg: resample only when the weights' ESS is at most this fraction of C (1: always)")
    parser.add_argument("--y-sd", type=float, nargs="+", default=[SIM_Y_SD],
                        help="label noise sd (the paper's text: 0.01; pgbart's code: 0); several values run each")
    parser.add_argument("--variance", nargs="+", default=["leastsquares"], choices=["leastsquares", "unconditional"],
                        help="sigma_hat of the sigma prior: least-squares residual sd (the package's default) or "
                             "sd(y) (pgbart's default, 'unconditional'); several values run each")
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", default=None, help="also write the per-chain records here")
    args = parser.parse_args()

    warm = bps.datasets.simulate_hypercube(2, 10, seed=0)  # compile outside the timed fits
    for sampler in args.samplers:
        bps.bart("y ~ .", data=warm, trees=1, sampler=sampler.replace("pg_as", "pg"), chains=1, draws=5, tune=5, seed=0,
                 min_leaf_size=1, progress=False, check_mixing=False)

    if any(v < 0 for v in args.y_sd):
        parser.error(f"--y-sd must be >= 0, got {args.y_sd}")
    variants = [(v, var) for v in args.y_sd for var in args.variance]
    # The data variant's columns appear only when something other than the committed setting runs.
    show_variant = variants != [(SIM_Y_SD, "leastsquares")]
    rows, records = [], []
    for d in args.dims:
        for y_sd, variance in variants:
            for grid in args.grids:
                for sampler in args.samplers:
                    chains = []
                    for s in range(args.datasets):
                        chains += fit_chains(d, s, sampler, grid, args, y_sd, variance)
                    tag = {"D": d, "y_sd": y_sd, "variance": variance, "grid": grid, "sampler": sampler}
                    for rec in chains:
                        records.append({**tag, **rec})
                    agg = {k: float(np.mean([r[k] for r in chains])) for k in chains[0]}
                    agg["coda_min"] = min(r["ess_coda"] for r in chains)
                    agg["coda_max"] = max(r["ess_coda"] for r in chains)
                    agg["bulk_min"] = min(r["ess_bulk"] for r in chains)
                    agg["bulk_max"] = max(r["ess_bulk"] for r in chains)
                    rows.append((d, grid, sampler, agg, (y_sd, variance)))
                    print(json.dumps({**tag, **agg}), flush=True)

    def variant_cells(v):
        return [v[0], "sd(y)" if v[1] == "unconditional" else "least squares"] if show_variant else []

    variant_header = ["y sd", "sigma_hat"] if show_variant else []

    def paper(d, sampler):
        k = PAPER_COLUMN.get(sampler)
        return "-" if k is None else PAPER_ESS[d][k]

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# PG-BART table 1, BART with one tree (`benchmarks/pg_bart_hypercube.py`)",
        "",
        f"Command: `PYTHONPATH=$PWD python3 {' '.join(sys.argv)}` (settings: D = {args.dims}, "
        f"{args.datasets} data sets (seeds 1000 D + 0..{args.datasets - 1}) x {args.chains} chains (fit seed = "
        f"data-set index), {args.tune} + {args.draws} iterations, m = 1, alpha 0.95, beta per D, min_leaf_size 1, "
        f"{N_CUTS} cut points, pg with {args.particles} particles and {args.resampling} resampling "
        + ("at every stage" if args.ess_threshold >= 1 else f"when the ESS is at most {args.ess_threshold} C")
        + (f"; label noise sd {args.y_sd} (columns `y sd`; 0.01 is the paper's text and `simulate_hypercube`, 0 "
           "pgbart's code, the same noise draw rescaled) and sigma_hat of the sigma prior "
           f"{['least squares' if v == 'leastsquares' else 'sd(y)' for v in args.variance]} (column `sigma_hat`: "
           "the package's least-squares residual sd, or sd(y) with ddof 0 as pgbart's default `--variance "
           "unconditional`, given as `sigma_hat=`)" if show_variant else "")
        + f"). Machine: {platform.machine()}, Python {platform.python_version()}, shared 2-core host; "
        f"run {now}.",
        "",
        f"ESS of the log-likelihood of {args.draws} kept draws per chain: mean over the chains (single-chain ESS, "
        "as the paper reports), with the smallest and largest chain; `coda` = coda::effectiveSize (the "
        "paper's estimator), `bulk` = rank-normalised bulk ESS. Paper = PG-BART table 1.",
        "",
    ]
    lines += markdown_table(
        ["D", *variant_header, "grid", "sampler", "ESS coda", "coda min-max", "ESS bulk", "bulk min-max", "paper ESS",
         "sampling CPU s per chain", "leaves (true 2^D)", "depth", "RMSE to truth", "mean loglik"],
        [[d, *variant_cells(v), grid, sampler, f"{a['ess_coda']:.1f}", f"{a['coda_min']:.1f}-{a['coda_max']:.1f}",
          f"{a['ess_bulk']:.1f}", f"{a['bulk_min']:.1f}-{a['bulk_max']:.1f}", paper(d, sampler),
          f"{a['cpu']:.2g}", f"{a['leaves']:.1f} ({2 ** d})", f"{a['depth']:.1f}", f"{a['rmse_truth']:.3f}",
          f"{a['loglik']:.1f}"] for d, grid, sampler, a, v in rows])
    lines += ["", "Where the trees change (means over kept iterations, chains and data sets; the particle "
              "columns for `pg` only):", ""]

    def particle(a, key, fmt):
        return format(a[key], fmt) if key in a else "-"

    lines += markdown_table(
        ["D", *variant_header, "grid", "sampler", "tree changed", "partition changed", "root changed",
         "depth of shallowest change", "kept ref", "stages", "last-stage ESS (of C)"],
        [[d, *variant_cells(v), grid, sampler, f"{a['tree_changed']:.3f}", f"{a['partition_changed']:.3f}",
          f"{a['root_changed']:.3f}", f"{a['change_depth']:.2f}", particle(a, "kept_ref", ".3f"),
          particle(a, "stages", ".1f"), particle(a, "last_ess", ".2f")] for d, grid, sampler, a, v in rows])
    lines += table2(rows, variant_header, variant_cells)
    emit(lines + hand_written(args.out), args.out)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1)


if __name__ == "__main__":
    main()
