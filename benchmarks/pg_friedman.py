"""BART with particle Gibbs (``pg``) beside ``cgm`` on Friedman #1, and pymc-bart's recorded figures.

Same data, priors, tree count and scoring as ``bart_vs_peers.py`` (``_peers.py``: Friedman #1,
200 trees, CGM 2010 priors, 100-cut grid, min_leaf_size 5, 5,000 test rows scored against the
noiseless f). ``pg`` uses 10 particles, pymc-bart's default ``num_particles``. ``cgm`` and ``pg``
are measured in this run, one after the other in this process (one thread each, compilation
excluded by a warm-up fit); s/sweep is the chain runner's time over burn-in + kept sweeps.

pymc-bart (its sampler is particle Gibbs too, 10 particles by default) is measured in the same
run, in its own process through the peers' virtual environment (``--pymc-python``; ``_peers.py
--package pymc-bart``, the same data and priors), at the sizes of ``--pymc-sizes`` with
``--pymc-tune`` + ``--pymc-draws`` sweeps (it takes 0.5-1 s per sweep at n = 1,000 on a quiet
machine). Without that interpreter its row is copied from ``results/bart_vs_peers.json`` and
labelled as recorded (the ratio to it is then across runs).

Run from the repository root: ``python3 benchmarks/pg_friedman.py --out
benchmarks/results/pg_friedman.md`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _peers  # noqa: E402
import _provenance  # noqa: E402
from _tables import emit, markdown_table  # noqa: E402
from _timing import runner_seconds  # noqa: E402

SCHEDULE = {1000: (200, 500), 10000: (50, 100)}


def run_ours(data: dict, prior: dict, tune: int, draws: int, sampler: str) -> dict:
    """Fit with ``sampler`` as ``_peers.run_bartpy_suite`` does (its priors and options); the
    chain runner (``TreeModel._run``) is timed by ``_timing.runner_seconds`` (wall seconds, as
    ``_peers`` times the peers)."""
    import bartpy_suite as bps

    with runner_seconds() as spent:
        df = _peers._frame(data["x"], data["y"])
        kw = dict(trees=_peers.TREES, sampler=sampler, chains=1, alpha=_peers.ALPHA, beta=_peers.BETA, k=_peers.K,
                  max_cuts=_peers.MAX_CUTS, min_leaf_size=_peers.MIN_LEAF, progress=False, threads=1,
                  nu=_peers.NU, q=_peers.Q, sigma_hat=prior["sigma_hat"])
        bps.bart("y ~ .", data=df, draws=2, tune=1, seed=_peers.MCMC_SEED + 1, **kw)  # compile / load the cache
        spent.update(cpu=0.0, wall=0.0)
        fit = bps.bart("y ~ .", data=df, draws=draws, tune=tune, seed=_peers.MCMC_SEED, **kw)
    return {"sample_s": spent["wall"], "f": fit.function_samples(_peers._frame(data["x_test"])),
            "sigma": fit.posterior["sigma"].values.reshape(-1)}


def run_pymc(python: str, n: int, tune: int, draws: int) -> dict:
    """pymc-bart on Friedman #1 in its own process (``_peers.py``); its JSON record."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "r.json")
        subprocess.run([python, os.path.join(here, "_peers.py"), "--package", "pymc-bart", "--task", "friedman",
                        "--n", str(n), "--tune", str(tune), "--draws", str(draws), "--result", result],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(result) as fh:
            return json.load(fh)


def recorded_pymc() -> list[dict]:
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "results", "bart_vs_peers.json")) as fh:
        recorded = json.load(fh)["records"]
    return [dict(r, who="pymc-bart (recorded, bart_vs_peers.json)") for r in recorded
            if r.get("package") == "pymc-bart" and r.get("task") == "friedman"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--pymc-python", default="/work/benchvenv/bin/python")
    # The defaults are the settings of the committed results/pg_friedman.md.
    parser.add_argument("--pymc-sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--pymc-tune", type=int, default=20)
    parser.add_argument("--pymc-draws", type=int, default=30)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        tune, draws = SCHEDULE.get(n, (50, 100))
        data = _peers.friedman_data(n)
        prior = _peers.cgm_prior(data["x"], data["y"], probit=False)
        for sampler in ("cgm", "pg"):
            out = run_ours(data, prior, tune, draws, sampler)
            rec = {"who": f"bartpy_suite {sampler}", "n": n, "schedule": f"{tune}+{draws}",
                   "s_per_sweep": out["sample_s"] / (tune + draws),
                   **_peers.regression_metrics(out["f"], data["f_test"], out["sigma"])}
            rows.append(rec)
            print(json.dumps(rec), flush=True)
    if os.path.exists(args.pymc_python):
        for n in args.pymc_sizes:
            r = run_pymc(args.pymc_python, n, args.pymc_tune, args.pymc_draws)
            rows.append(dict(r, who="pymc-bart (this run)"))
            print(json.dumps({k: v for k, v in rows[-1].items() if k in ("who", "n", "s_per_sweep", "rmse")}),
                  flush=True)
    else:
        rows += recorded_pymc()
    for r in rows:
        r.setdefault("schedule", f"{r.get('tune')}+{r.get('draws')}")
    cgm = {r["n"]: r["s_per_sweep"] for r in rows if r["who"] == "bartpy_suite cgm"}
    pg = {r["n"]: r["s_per_sweep"] for r in rows if r["who"] == "bartpy_suite pg"}

    def ratio(table, r):
        return f"{r['s_per_sweep'] / table[r['n']]:.1f}" if r["n"] in table else "-"

    seeds = (f"training and test data `_peers.friedman_data(n)` (seed {_peers.DATA_SEED}); chains seed "
             f"{_peers.MCMC_SEED} (the warm-up fit {_peers.MCMC_SEED + 1}); pymc-bart: `_peers.py`'s same seeds")
    lines = ["# BART with particle Gibbs on Friedman #1 (`benchmarks/pg_friedman.py`)", "",
             *_provenance.header(seeds),
             "200 trees, CGM 2010 priors, 10 particles; one thread; RMSE and 95% coverage of f on 5,000 test rows.",
             ""]
    lines += markdown_table(
        ["sampler", "n", "burn-in+draws", "s/sweep", "ratio to cgm", "ratio to our pg", "RMSE", "cover95", "width95",
         "sigma"],
        [[r["who"], f"{r['n']:,}", r["schedule"], f"{r['s_per_sweep']:.4f}",
          "-" if r["who"] == "bartpy_suite cgm" else ratio(cgm, r), ratio(pg, r) if "pymc" in r["who"] else "-",
          f"{r['rmse']:.3f}", f"{r['coverage95']:.3f}", f"{r['width95']:.3f}", f"{r['sigma_mean']:.3f}"]
         for r in rows])
    emit(lines, args.out)


if __name__ == "__main__":
    main()
