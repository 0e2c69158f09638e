"""DART (``sparse=True``) against the default rule prior on Friedman #1 with 95 noise predictors.

Command (from the repository root; bartz runs too when it is importable, e.g. installed with
``pip install bartz``, or with its install folder appended to PYTHONPATH):

    PYTHONPATH=$PWD python3 benchmarks/dart_friedman.py

writes ``benchmarks/results/dart_friedman.md``. Data: x ~ U(0, 1)^100, y = 10 sin(pi x0 x1) +
20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1) (Friedman 1991; Linero 2018, section 5), 1000 training
and 1000 test rows, data seeds 0, 1, 2 (``numpy.random.default_rng([2018, seed])``). Every fit:
200 trees, BART's default priors, one chain of ``--tune`` (default 1000) + ``--draws`` (default
1000) sweeps, MCMC seed = data seed. This package: ``bps.BART`` with its default sampler
``grow_prune``, without and with ``sparse=True`` (a = 0.5, b = 1, rho = p; s updated from sweep
tune // 2 on). bartz (if importable): ``gbart`` with ``sparse=False`` / ``sparse=True`` (its
defaults a = 0.5, b = 1, rho = p, ``augment=False``; it switches DART on at nskip // 2 too),
``ntree=200``, ``nskip``/``ndpost`` as above (one chain), ``keepevery=1``.

Reported per fit: test RMSE of the posterior mean against the noiseless f (and against the noisy
test y), the share of split rules on x0-x4 (posterior mean of ``variable_activity`` summed over
them; bartz: of its ``varcount``), the number of noise predictors whose posterior inclusion
probability (share of draws with at least one split on it) exceeds 0.5, the smallest PIP among
x0-x4, and the wall time of the fit (first bartz fit includes its JAX compile).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

P, N_TRAIN, N_TEST, SIGNAL = 100, 1000, 1000, 5
SEEDS = (0, 1, 2)
OUT = Path(__file__).parent / "results" / "dart_friedman.md"


def friedman(seed: int) -> dict:
    """Training and test rows of Friedman #1 with P - 5 noise predictors."""
    rng = np.random.default_rng([2018, seed])
    x = rng.uniform(size=(N_TRAIN + N_TEST, P))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    y = f + rng.standard_normal(len(f))
    return {"x": x[:N_TRAIN], "y": y[:N_TRAIN], "x_test": x[N_TRAIN:], "f_test": f[N_TRAIN:],
            "y_test": y[N_TRAIN:]}


def summarise(pred: np.ndarray, share: np.ndarray, pip: np.ndarray, data: dict, seconds: float) -> dict:
    """The reported figures of one fit (``share``: per-draw share of splits on each predictor)."""
    return {
        "rmse_f": float(np.sqrt(np.mean((pred - data["f_test"]) ** 2))),
        "rmse_y": float(np.sqrt(np.mean((pred - data["y_test"]) ** 2))),
        "share_signal": float(share[:, :SIGNAL].sum(axis=1).mean()),
        "noise_pip_over_half": int((pip[SIGNAL:] > 0.5).sum()),
        "min_signal_pip": float(pip[:SIGNAL].min()),
        "seconds": seconds,
    }


def run_ours(data: dict, seed: int, sparse: bool, tune: int, draws: int) -> dict:
    import bartpy_suite as bps

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one chain: the mixing check has no r_hat to offer
        fit = bps.BART(trees=200, chains=1, tune=tune, draws=draws, seed=seed, sparse=sparse, progress=False,
                       check_mixing=False, log_likelihood=False).fit(data["x"], data["y"])
    seconds = time.perf_counter() - start
    pred = fit.predict(data["x_test"])["mean"].to_numpy()
    share = fit.posterior["variable_activity"].values.reshape(-1, P)
    pip = fit.variable_inclusion()["inclusion"].to_numpy()
    return summarise(pred, share, pip, data, seconds)


def run_bartz(data: dict, seed: int, sparse: bool, tune: int, draws: int) -> dict:
    from bartz.BART import gbart

    start = time.perf_counter()
    model = gbart(data["x"], data["y"], x_test=data["x_test"], sparse=sparse, ntree=200, nskip=tune, ndpost=draws,
                  keepevery=1, printevery=None, seed=seed)
    pred = np.asarray(model.yhat_test_mean)
    seconds = time.perf_counter() - start
    count = np.asarray(model.varcount, dtype=float)
    total = count.sum(axis=1, keepdims=True)
    share = np.divide(count, total, out=np.zeros_like(count), where=total > 0)
    pip = (count > 0).mean(axis=0)
    return summarise(pred, share, pip, data, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    have_bartz = importlib.util.find_spec("bartz") is not None
    methods = [("bartpy_suite", "default", run_ours, False), ("bartpy_suite", "sparse", run_ours, True)]
    if have_bartz:
        methods += [("bartz", "default", run_bartz, False), ("bartz", "sparse", run_bartz, True)]
    rows = []
    for seed in SEEDS:
        data = friedman(seed)
        for package, prior, run, sparse in methods:
            res = run(data, seed, sparse, args.tune, args.draws)
            rows.append({"seed": seed, "package": package, "prior": prior, **res})
            print(rows[-1], flush=True)
    write(rows, args, have_bartz)


def write(rows: list, args, have_bartz: bool) -> None:
    import bartpy_suite

    version = ""
    if have_bartz:
        from importlib.metadata import version as _version

        import bartz

        version = f"{_version('bartz')} (imported from {Path(bartz.__file__).parent.parent})"
    cols = ["rmse_f", "rmse_y", "share_signal", "noise_pip_over_half", "min_signal_pip", "seconds"]
    lines = [
        "# DART on Friedman #1 with 95 noise predictors",
        "",
        f"Generated by `PYTHONPATH=$PWD python3 benchmarks/dart_friedman.py --tune {args.tune} --draws {args.draws}` "
        f"on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{os.cpu_count()} logical CPUs shared with other jobs (times are wall seconds under that load), "
        f"Python {platform.python_version()}, bartpy_suite {getattr(bartpy_suite, '__version__', '?')}"
        + (f", bartz {version}" if have_bartz else ", bartz not importable (its rows are absent)") + ".",
        "",
        f"Data: p = {P} (x0-x4 signal, 95 noise), {N_TRAIN} training and {N_TEST} test rows, data and MCMC seeds "
        f"{', '.join(map(str, SEEDS))}. Every fit: 200 trees, one chain, tune {args.tune}, draws {args.draws}. "
        "sparse: a = 0.5, b = 1, rho = p, switched on at tune // 2 (both packages). See the script's docstring.",
        "",
        "Columns: `rmse_f` test RMSE of the posterior mean against the noiseless f; `rmse_y` against the noisy test y "
        "(noise sd 1); `share_signal` posterior mean share of split rules on x0-x4; `noise_pip_over_half` noise "
        "predictors with posterior inclusion probability > 0.5; `min_signal_pip` smallest inclusion probability "
        "among x0-x4; `seconds` wall time of the fit (bartz's first fit includes its compile).",
        "",
        "| seed | package | prior | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---|" * len(cols),
    ]
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        lines.append(f"| {r['seed']} | {r['package']} | {r['prior']} | " + " | ".join(cells) + " |")
    lines += ["", "Means over the seeds:", "", "| package | prior | " + " | ".join(cols) + " |",
              "|---|---|" + "---|" * len(cols)]
    for package, prior in dict.fromkeys((r["package"], r["prior"]) for r in rows):
        sel = [r for r in rows if r["package"] == package and r["prior"] == prior]
        cells = [f"{np.mean([r[c] for r in sel]):.3f}" for c in cols]
        lines.append(f"| {package} | {prior} | " + " | ".join(cells) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(args.out)  # nothing half-written is left at the destination
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
