"""BART with particle Gibbs (``pg``) beside ``cgm`` on Friedman #1, and pymc-bart's recorded figures.

Same data, priors, tree count and scoring as ``bart_vs_peers.py`` (``_peers.py``: Friedman #1,
200 trees, CGM 2010 priors, 100-cut grid, min_leaf_size 5, 5,000 test rows scored against the
noiseless f). ``pg`` uses 10 particles, pymc-bart's default ``num_particles``. ``cgm`` and ``pg``
are measured in this run, one after the other in this process (one thread each, compilation
excluded by a warm-up fit); s/sweep is the chain runner's time over burn-in + kept sweeps.

pymc-bart (its sampler is particle Gibbs too) is not installed in the development environment,
so its row is copied from ``results/bart_vs_peers.json`` (an earlier run of ``bart_vs_peers.py``
on this machine, n = 1,000 only, 50 + 100 sweeps) and labelled as such; the ratio to it is
therefore across runs.

Run from the repository root: ``python3 benchmarks/pg_friedman.py --out
benchmarks/results/pg_friedman.md`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _peers  # noqa: E402

SCHEDULE = {1000: (200, 500), 10000: (50, 100)}


def run_ours(data: dict, prior: dict, tune: int, draws: int, sampler: str) -> dict:
    """Fit with ``sampler`` as ``_peers.run_bartpy_suite`` does (its priors and options); the
    chain runner (``TreeModel._run``) is timed by a wrapper (``_peers``' own hook predates the
    runner's current signature)."""
    import time

    import bartpy_suite as bps
    from bartpy_suite.models import _base

    spent = [0.0]
    original = _base.TreeModel._run

    def timed(self, chains):
        t0 = time.perf_counter()
        try:
            return original(self, chains)
        finally:
            spent[0] += time.perf_counter() - t0

    _base.TreeModel._run = timed
    try:
        df = _peers._frame(data["x"], data["y"])
        kw = dict(trees=_peers.TREES, sampler=sampler, chains=1, alpha=_peers.ALPHA, beta=_peers.BETA, k=_peers.K,
                  max_cuts=_peers.MAX_CUTS, min_leaf_size=_peers.MIN_LEAF, progress=False, threads=1,
                  nu=_peers.NU, q=_peers.Q, sigma_hat=prior["sigma_hat"])
        bps.bart("y ~ .", data=df, draws=2, tune=1, seed=_peers.MCMC_SEED + 1, **kw)  # compile / load the cache
        spent[0] = 0.0
        fit = bps.bart("y ~ .", data=df, draws=draws, tune=tune, seed=_peers.MCMC_SEED, **kw)
    finally:
        _base.TreeModel._run = original
    return {"sample_s": spent[0], "f": fit.function_samples(_peers._frame(data["x_test"])),
            "sigma": fit.posterior["sigma"].values.reshape(-1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
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
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "results", "bart_vs_peers.json")) as fh:
        recorded = json.load(fh)["records"]
    for r in recorded:
        if r.get("package") == "pymc-bart" and r.get("task") == "friedman":
            rows.append({"who": "pymc-bart (recorded, bart_vs_peers.json)", "n": r["n"],
                         "schedule": f"{r['tune']}+{r['draws']}", "s_per_sweep": r["s_per_sweep"],
                         "rmse": r["rmse"], "coverage95": r["coverage95"], "width95": r["width95"],
                         "sigma_mean": r["sigma_mean"]})
    lines = ["# BART with particle Gibbs on Friedman #1 (`benchmarks/pg_friedman.py`)", "",
             "200 trees, CGM 2010 priors, 10 particles; one thread; RMSE and 95% coverage of f on 5,000 test rows.",
             "", "| sampler | n | burn-in+draws | s/sweep | ratio to cgm | RMSE | cover95 | width95 | sigma |",
             "|---|---|---|---|---|---|---|---|---|"]
    cgm = {r["n"]: r["s_per_sweep"] for r in rows if r["who"] == "bartpy_suite cgm"}
    for r in rows:
        ratio = f"{r['s_per_sweep'] / cgm[r['n']]:.1f}" if r["n"] in cgm and r["who"] != "bartpy_suite cgm" else "-"
        lines.append(f"| {r['who']} | {r['n']:,} | {r['schedule']} | {r['s_per_sweep']:.4f} | {ratio} | "
                     f"{r['rmse']:.3f} | {r['coverage95']:.3f} | {r['width95']:.3f} | {r['sigma_mean']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
