"""BART speed and accuracy against stochtree, bartz and pymc-bart (issue 3), side by side in one run.

Run (about 15 minutes at the default sizes on a quiet 2-core machine, a third of it pymc-bart;
see benchmarks/README.md):

    python -m pip install -e ".[bench]"
    python benchmarks/bart_vs_peers.py --out results.md
    python benchmarks/bart_vs_peers.py --sizes 1000 --packages bartpy_suite,bartz   # a quick look

What runs
---------
* Friedman #1 regression: p = 10, x ~ U(0, 1), f = 10 sin(pi x1 x2) + 20 (x3 - .5)^2 + 10 x4 + 5 x5,
  y = f + N(0, 1), at n = 1,000, 10,000 and 100,000 training rows (``--sizes``), scored on one
  test set of 5,000 rows against the noiseless f.
* Probit BART on sklearn's breast cancer data (569 rows, 30 predictors; fixed stratified 70/30
  split, random_state 0; y = 1 for benign): accuracy and log loss of the posterior mean P(y = 1).
* Packages (``--packages``): ``bartpy_suite`` (this package with its default BART sampler,
  ``"grow_prune"``: the same move set as bartz and stochtree), ``bartpy_suite-cgm`` (this
  package, ``sampler="cgm"``: grow, prune, change and swap; the default before issue 11),
  ``stochtree``, ``bartz`` (JAX on the CPU) and ``pymc-bart``.
* Iterations: the same burn-in + kept draws for every package at a given n: 200 + 500 at
  n = 1,000 (and for breast cancer), 100 + 200 at 10,000, 20 + 50 at 100,000 (``--tune`` and
  ``--draws`` replace them for every size). pymc-bart, at 0.5-1 s per sweep at n = 1,000,
  runs only up to ``--pymc-max-n`` (1,000) with ``--pymc-tune`` + ``--pymc-draws`` (50 + 100)
  iterations; the output says so. One chain everywhere.
* One thread each: OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS and NUMBA_NUM_THREADS
  are 1, JAX runs on the CPU with XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
  intra_op_parallelism_threads=1", stochtree gets ``num_threads=1``, this package
  ``chains=1, threads=1``. On top of that every run is pinned to one logical CPU
  (``--pin-cpu``), so a library that starts helper threads anyway (XLA does, a little, in the
  probit fit) shares that core. The ``cpu/wall`` column (process CPU seconds / wall seconds of
  the timed fit) is about 1 for one busy core; below 1 the process waited for the CPU (a busy
  machine), above 1 it used more than one core (only possible with ``--pin-cpu none``).

What is measured
----------------
Each package x size runs in its own subprocess (``benchmarks/_peers.py``), one after the other.

* ``s/sweep``: sampling seconds / (burn-in + draws); one sweep updates all 200 trees and sigma.
  Sampling seconds: this package, the chain runner alone (the fit's formula, binning and
  posterior building excluded); pymc-bart, PyMC's ``sampling_time``; stochtree and bartz, the
  whole fit call, which also bins the predictors and initialises (no finer hook; small next to
  the sampling). Compilation is excluded: this package and pymc-bart first fit the same data with
  1 + 2 iterations; bartz first runs the whole fit and prediction on the same shapes (its traces
  have the burn-in and draw counts as lengths, so a shorter warm-up would compile another
  program; the timed run is checked to compile nothing).
* ``ratio``: bartpy_suite's s/sweep / this row's s/sweep at the same n (above 1: ours is slower).
* ``compile s``: bartz, warm-up minus timed run (fit + prediction); this package and pymc-bart,
  the warm-up's wall time less its 3 sweeps at the measured rate. This package's kernels are
  cached on disk by numba: its rows show the first call with a warm cache, and the line above the
  table gives the cold compile (empty cache) measured once at the start. pymc-bart keeps
  PyTensor's compiled C in its own cache. stochtree compiles nothing.
* ``fit s``: wall time of the timed fit call; ``total s``: wall time of the whole subprocess
  (start-up, imports, data, warm-up, fit, prediction); ``predict s``: posterior draws of f at the
  5,000 test rows (this package's ``Fit.function_samples``, stochtree's ``predict(type=
  "posterior")``, bartz's ``predict``, pymc-bart's ``set_data`` + ``sample_posterior_predictive``
  of ``mu``); ``peak MB``: the subprocess's own ``ru_maxrss`` at its end (pymc-bart's tree store,
  a ``multiprocessing.Manager`` process, is not included).
* ``RMSE``: posterior mean of f against the noiseless f on the test set; ``cover95`` and
  ``width95``: coverage of f and mean width of the equal-tailed 95% credible intervals of f(x)
  (quantiles of the draws); ``sigma``: posterior mean of the noise sd (true value 1).

ESS per second (``--tasks friedman_ess``)
----------------------------------------
Friedman #1 at each size of ``--sizes``: every BART sampler of ours (``bartpy_suite`` =
grow_prune, the default, ``-cgm``, ``-pg``, ``-ctmc``, ``-tempered``) and every peer runs
``--chains`` (4) chains from their own seeds, one after the other on one thread, with the priors
below and the iterations above. The record holds the ESS of sigma and of f(x) at the first 100
test rows over the chains together (``bartpy_suite.posterior.weighted.weighted_ess``:
arviz-stats' bulk ESS for equal weights, the delta-method ESS of the weighted mean for ctmc's
Rao-Blackwellized weights), the median and 5th percentile over the points, and each divided by
the CPU seconds of sampling (compilation excluded; this package's chain runner, stochtree's and
bartz's fit calls, pymc-bart's ``pm.sample``).

Priors (CGM 2010) and how each package gets them
------------------------------------------------
Common: 200 trees, p(split at depth d) = 0.95 (1 + d)^-2; the response mapped to [-0.5, 0.5]
(midrange to 0, range to 1) with leaf values ~ N(0, (0.5 / (k sqrt(200)))^2), k = 2; sigma^2 ~
nu lam / chi2_nu with nu = 3 and lam such that P(sigma < sigma_hat) = 0.9, sigma_hat the residual
sd of an OLS fit of y on an intercept and all predictors (n - p - 1 df), computed once in
``_peers.py`` and passed to every package; at most 100 cut points per predictor at quantiles;
leaves of at least 5 training rows. Probit: leaf sd 3 / (k sqrt(200)) on the latent scale, offset
Phi^-1(mean y), sigma = 1.

* bartpy_suite: these are its own defaults (trees, alpha, beta, k, nu, q, max_cuts=100,
  min_leaf_size=5); sigma_hat is passed so that it is the very same number.
* bartz 0.13 (``bartz.BART.gbart``, its BART3-style interface): ntree=200, base=.95, power=2,
  k=2, sigdf=3, sigquant=.9, sigest=sigma_hat, offset=midrange of y (its default is the mean; the
  leaf sd, tau_num / (k sqrt(T)) with tau_num = range / 2, is the same as above),
  usequants=True, numcut=100, min_points_per_leaf=5, keepevery=1. Probit: type="pbart",
  ntree=200 and keepevery=1 (its pbart defaults are 50 and 10), tau_num 3, offset
  Phi^-1(mean y).
* stochtree 0.4.5 (``BARTModel.sample``): the scaled response with standardize=False,
  num_gfr=0 (plain MCMC from single-leaf trees, no grow-from-root warm start),
  sigma2_global_shape = nu / 2 and sigma2_global_scale = nu lam / 2 (the same inverse gamma),
  sigma2_init = sigma_hat^2, sigma2_leaf_init = (0.5 / (2 sqrt(200)))^2 with
  sample_sigma2_leaf=False (its default samples the leaf scale), cutpoint_grid_size=100,
  min_samples_leaf=5, max_depth=-1 (no limit, as CGM), num_threads=1. Probit: the binary probit
  outcome model, sigma2_leaf_init = (3 / (2 sqrt(200)))^2, its offset Phi^-1(mean y).
* pymc-bart 0.11 (``pmb.BART`` + ``PGBART``): mu = BART("mu", X, scaled y, m=200, alpha=.95,
  beta=2); sigma^2 ~ InverseGamma(nu / 2, nu lam / 2) on the scaled response, started at
  sigma_hat^2; ``PGBART(batch=(1.0, 1.0))`` so that one PyMC iteration updates all 200 trees
  (its default updates 10% of them per iteration). Probit: y ~ Bernoulli(Phi(mu)).

Priors and settings that could not be matched exactly:

* Tree moves: bartz, stochtree and this package's default (``grow_prune``) propose grow/prune
  only; the ``bartpy_suite-cgm`` rows add change and swap; pymc-bart uses particle Gibbs
  (10 particles), a different sampler altogether.
* bartz: trees are at most 6 levels deep (fixed-size heaps; maxdepth=6 as in its gbart), a
  truncation of the CGM prior that has little prior mass (a node at depth 5 splits with
  probability .95 / 36); float32 arithmetic; sigma starts at sqrt(lam) rather than sigma_hat
  (a start value, not a prior); its quantile binner places cut points its own way.
* stochtree: its cut-point grid (up to 100 candidate values per predictor) is built its own way.
* pymc-bart: no conjugate N(0, tau^2) leaf prior: leaf values are drawn around the leaf mean of
  the residual with an sd that starts at sd(y) / sqrt(m) (3 / sqrt(m) for a 0/1 response) and
  is adapted during tuning; the split-variable probabilities are adapted during tuning too; any
  observed value can be a split value (no 100-cut grid); no minimum leaf size; sigma is updated
  by NUTS (PyMC's choice), not by a Gibbs draw; for the probit model there is no Phi^-1(mean y)
  offset and no latent-variable augmentation (PGBART uses the Bernoulli likelihood directly).
  It also runs fewer iterations (above), so its accuracy figures are not comparable one to one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RUNNER = HERE / "_peers.py"
sys.path.insert(0, str(HERE))
import _provenance  # noqa: E402
from _tables import write_atomic  # noqa: E402

PACKAGES = ("bartpy_suite", "bartpy_suite-cgm", "stochtree", "bartz", "pymc-bart")
# ESS per second (task friedman_ess): every BART sampler of ours, then the peers.
ESS_PACKAGES = ("bartpy_suite", "bartpy_suite-cgm", "bartpy_suite-pg", "bartpy_suite-ctmc", "bartpy_suite-tempered",
                "stochtree", "bartz", "pymc-bart")
ESS_SAMPLER = {"bartpy_suite": "grow_prune (default)", "bartpy_suite-cgm": "cgm", "bartpy_suite-pg": "pg",
               "bartpy_suite-ctmc": "ctmc", "bartpy_suite-tempered": "tempered"}
TASKS = ("friedman", "breast_cancer", "friedman_ess")
OURS = "bartpy_suite"
SCHEDULE = {1_000: (200, 500), 10_000: (100, 200), 100_000: (20, 50)}
DISTRIBUTIONS = {"bartpy_suite": "bartpy-suite", "bartpy_suite-cgm": "bartpy-suite", "bartpy_suite-pg": "bartpy-suite",
                 "bartpy_suite-ctmc": "bartpy-suite", "bartpy_suite-tempered": "bartpy-suite", "stochtree": "stochtree",
                 "bartz": "bartz", "pymc-bart": "pymc-bart"}
EXTRA_DISTRIBUTIONS = ("jax", "jaxlib", "pymc", "pytensor", "numba", "numpy", "scikit-learn")
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}

COLD_COMPILE = r"""
import json, time
import numpy as np, pandas as pd
t0 = time.perf_counter()
import bartpy_suite as bps
t1 = time.perf_counter()
rng = np.random.default_rng(0)
df = pd.DataFrame(rng.uniform(size=(200, 3)), columns=["a", "b", "c"])
df["y"] = df["a"] + rng.standard_normal(200)
out = {"import": t1 - t0}
for sampler in ("cgm", "grow_prune"):
    t = time.perf_counter()
    fit = bps.bart("y ~ .", data=df, trees=200, sampler=sampler, chains=1, draws=2, tune=1, seed=0,
                   progress=False, threads=1)
    fit.function_samples(df)
    out[sampler] = time.perf_counter() - t
df["y"] = df["y"] > 0
t = time.perf_counter()
probit = bps.bart("y ~ .", data=df, trees=200, chains=1, draws=2, tune=1, seed=0, progress=False, threads=1)
probit.predict(df, kind="prob")
out["probit"] = time.perf_counter() - t
print(json.dumps(out))
"""


def schedule_for(n: int) -> tuple[int, int]:
    """Default (burn-in, draws) at n: the entry of SCHEDULE nearest in log n."""
    key = min(SCHEDULE, key=lambda m: abs(math.log(m) - math.log(max(n, 1))))
    return SCHEDULE[key]


def child_env(numba_cache: str | None) -> dict:
    env = dict(os.environ)
    env.update(THREAD_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONWARNINGS"] = "ignore"
    if numba_cache:
        env["NUMBA_CACHE_DIR"] = numba_cache
    return env


def versions() -> dict:
    out = {}
    for name in dict.fromkeys(list(DISTRIBUTIONS.values()) + list(EXTRA_DISTRIBUTIONS)):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def cold_compile(env: dict, timeout: float, cpu: int) -> dict | None:
    """First bartpy_suite calls (cgm, grow_prune, probit) in a fresh process with numba's cache empty."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu >= 0 else None
    try:
        out = subprocess.run([sys.executable, "-c", COLD_COMPILE], env=env, capture_output=True, text=True,
                             timeout=timeout, check=True, preexec_fn=pin)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        print(f"cold-compile probe failed: {exc}", file=sys.stderr)
        return None


def run_one(package: str, task: str, n: int, tune: int, draws: int, env: dict, log_dir: Path,
            timeout: float, cpu: int, chains: int = 1, seed: int = 1) -> dict:
    """One subprocess; returns its JSON record plus the wall time of the whole process."""
    tag = f"{task}-{package}-{n}"
    result = log_dir / f"{tag}.json"
    log = log_dir / f"{tag}.log"
    cmd = [sys.executable, str(RUNNER), "--package", package, "--task", task, "--n", str(n), "--tune", str(tune),
           "--draws", str(draws), "--result", str(result), "--cpu", str(cpu), "--chains", str(chains),
           "--seed", str(seed)]
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        try:
            proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    total = time.perf_counter() - t0
    try:
        record = json.loads(result.read_text())
    except (OSError, ValueError):
        record = {"package": package, "task": task, "n": n, "ok": False,
                  "error": f"exit {code}; see {log}"}
    record["total_s"] = total
    record.setdefault("tune", tune)
    record.setdefault("draws", draws)
    if not record.get("ok"):
        record["log"] = str(log)
    return record


# -- tables -------------------------------------------------------------------------------------------
def _fmt(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def _ratio(value) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def add_ratios(records: list[dict]) -> None:
    ours = {(r["task"], r["n"]): r["s_per_sweep"] for r in records
            if r["package"] == OURS and r.get("ok") and "s_per_sweep" in r}
    for r in records:
        if r["task"] == "friedman_ess":
            continue
        base = ours.get((r["task"], r["n"]))
        r["ratio"] = base / r["s_per_sweep"] if base and r.get("ok") and r.get("s_per_sweep") else None


COMMON_HEAD = ["package", "burn-in+draws", "s/sweep", "ratio ours/peer", "cpu/wall", "compile s", "fit s",
               "total s", "peak MB", "predict s"]


def _table(records: list[dict], size_label: str, scores: list[tuple[str, str]]) -> list[str]:
    """Markdown rows: the columns every task shares, then ``scores`` as (header, record key)."""
    head = COMMON_HEAD[:1] + [size_label] + COMMON_HEAD[1:] + [label for label, _ in scores]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in records:
        if not r.get("ok"):
            lines.append(f"| {r['package']} | {r['n']:,} | {r['tune']}+{r['draws']} | failed: {r.get('error', '?')} |"
                         + " |" * (len(head) - 4))
            continue
        cells = [r["package"], f"{r['n']:,}", f"{r['tune']}+{r['draws']}", _fmt(r["s_per_sweep"], ".4f"),
                 _ratio(r["ratio"]), _fmt(r["fit_cpu_s"] / r["fit_s"], ".2f"), _fmt(r.get("compile_s"), ".1f"),
                 _fmt(r["fit_s"], ".1f"), _fmt(r["total_s"], ".1f"), _fmt(r["peak_rss_mb"], ".0f"),
                 _fmt(r["predict_s"], ".2f")] + [_fmt(r[key], ".3f") for _, key in scores]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def regression_table(records: list[dict]) -> list[str]:
    return _table(records, "n", [("RMSE", "rmse"), ("cover95", "coverage95"), ("width95", "width95"),
                                 ("sigma", "sigma_mean")])


def probit_table(records: list[dict]) -> list[str]:
    return _table(records, "n train", [("accuracy", "accuracy"), ("log loss", "log_loss")])


def ess_table(records: list[dict]) -> list[str]:
    """Markdown rows of the ESS-per-second task, with each row's ratio to our default (grow_prune) at that n."""
    head = ["package", "sampler", "n", "chains x (burn-in+draws)", "sampling CPU s", "CPU s/sweep", "ESS sigma",
            "ESS f median", "ESS f 5%", "ESS/s sigma", "ESS/s f median", "ESS/s f 5%",
            "default/row: sigma", "default/row: f median", "default/row: f 5%", "sigma mean"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    ours = {r["n"]: r for r in records if r["package"] == OURS and r.get("ok")}
    for r in records:
        if not r.get("ok"):
            lines.append(f"| {r['package']} | {ESS_SAMPLER.get(r['package'], '-')} | {r['n']:,} | failed: "
                         f"{r.get('error', '?')} |" + " |" * (len(head) - 4))
            continue
        base = ours.get(r["n"])
        ratios = [_ratio(base[key] / r[key]) if base and r[key] > 0 else "-"
                  for key in ("ess_sigma_per_s", "ess_f_median_per_s", "ess_f_p5_per_s")]
        cells = [r["package"], ESS_SAMPLER.get(r["package"], "-"), f"{r['n']:,}",
                 f"{r['chains']} x ({r['tune']}+{r['draws']})", _fmt(r["sample_cpu_s"], ".1f"),
                 _fmt(r["cpu_s_per_sweep"], ".4f"), _fmt(r["ess_sigma"], ".0f"), _fmt(r["ess_f_median"], ".0f"),
                 _fmt(r["ess_f_p5"], ".0f"), _fmt(r["ess_sigma_per_s"], ".1f"), _fmt(r["ess_f_median_per_s"], ".1f"),
                 _fmt(r["ess_f_p5_per_s"], ".1f")] + ratios + [_fmt(r["sigma_mean"], ".3f")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def report(records: list[dict], header: list[str], notes: list[str]) -> str:
    out = ["# BART: bartpy_suite vs stochtree, bartz and pymc-bart", ""] + header + [""]
    reg = [r for r in records if r["task"] == "friedman"]
    bc = [r for r in records if r["task"] == "breast_cancer"]
    ess = [r for r in records if r["task"] == "friedman_ess"]
    if ess:
        out += ["## ESS per second: Friedman #1, sigma and f(x) at 100 test points", ""] + ess_table(ess) + [""]
    if reg:
        out += ["## Friedman #1 regression (p = 10, noise sd 1, 5,000 test rows)", ""] + regression_table(reg) + [""]
    if bc:
        out += ["## Breast cancer, probit BART (stratified 70/30 split)", ""] + probit_table(bc) + [""]
    out += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(out)


def parse_list(text: str, cast=str) -> list:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return [cast(part.replace("_", "") if cast is int else part) for part in parts]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="BART speed and accuracy: bartpy_suite vs stochtree, bartz, pymc-bart "
                                 "(one thread each, same data, priors and iterations).")
    ap.add_argument("--sizes", default="1000,10000,100000", help="training rows of Friedman #1, comma separated")
    ap.add_argument("--packages", default=None,
                    help=f"comma separated, from {', '.join(ESS_PACKAGES)} (default: {', '.join(PACKAGES)}; "
                    "for friedman_ess alone, all of them)")
    ap.add_argument("--tasks", default="friedman,breast_cancer",
                    help="comma separated, from friedman, breast_cancer, friedman_ess (ESS per second)")
    ap.add_argument("--chains", type=int, default=4, help="chains per package in friedman_ess (default 4)")
    ap.add_argument("--seed", type=int, default=1,
                    help="MCMC seed of every package (default 1; chain c of friedman_ess uses seed + c). Another "
                         "seed, more than --chains away, is an independent replicate: it shows how noisy ESS is")
    ap.add_argument("--tune", type=int, default=None, help="burn-in for every size (default: by n, see docstring)")
    ap.add_argument("--draws", type=int, default=None, help="kept draws for every size (default: by n)")
    ap.add_argument("--pymc-max-n", type=int, default=1000, help="largest n at which pymc-bart runs (default 1000)")
    ap.add_argument("--pymc-tune", type=int, default=50, help="pymc-bart burn-in (default 50)")
    ap.add_argument("--pymc-draws", type=int, default=100, help="pymc-bart kept draws (default 100)")
    ap.add_argument("--out", default=None, help="also write the tables as markdown here (and the raw records "
                    "next to it as .json)")
    ap.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds allowed per run (default 4 h)")
    ap.add_argument("--log-dir", default=None, help="keep each run's log and JSON here (default: a temporary folder)")
    ap.add_argument("--numba-cache", choices=("fresh", "default"), default="fresh",
                    help="fresh: one empty numba cache for this run, the cold compile is measured first "
                    "(default); default: numba's usual cache next to the package's sources")
    ap.add_argument("--pin-cpu", default="auto",
                    help="logical CPU every run is pinned to (auto: the last one this process may use; none: "
                    "no pinning)")
    args = ap.parse_args(argv)

    sizes = parse_list(args.sizes, int)
    tasks = parse_list(args.tasks)
    default_packages = ESS_PACKAGES if tasks == ["friedman_ess"] else PACKAGES
    packages = parse_list(args.packages) if args.packages else list(default_packages)
    bad = [p for p in packages if p not in ESS_PACKAGES] + [t for t in tasks if t not in TASKS]
    if bad:
        ap.error(f"unknown package or task: {', '.join(bad)}")

    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="bart_vs_peers_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    cache = None
    if args.numba_cache == "fresh":
        cache = str(log_dir / "numba_cache")
        os.makedirs(cache, exist_ok=True)
    env = child_env(cache)

    if args.pin_cpu == "none" or not hasattr(os, "sched_getaffinity"):
        cpu = -1
    elif args.pin_cpu == "auto":
        cpu = max(os.sched_getaffinity(0))
    else:
        cpu = int(args.pin_cpu)
    vers = versions()
    seeds = (f"Friedman #1 rows from `default_rng([2010, n])`, its 5,000 test rows from `default_rng([2010, 0])` "
             f"(`_peers.friedman_data`); breast cancer split `train_test_split(random_state=0)`; every package's MCMC "
             f"seed {args.seed} (chain c of friedman_ess: {args.seed} + c; warm-up fits other seeds, see `_peers.py`)")
    run_argv = [__file__, *(sys.argv[1:] if argv is None else argv)]
    header = [
        f"Command (from the repository root): `{_provenance.command(run_argv)}`",
        f"Seeds: {seeds}.",
        f"Run: {_provenance.now_utc()}, commit {_provenance.commit()}.",
        f"Machine: {_provenance.cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()) + ".",
        "One thread per package: " + ", ".join(f"{k}={v}" for k, v in THREAD_ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL")
        + "; one chain" + (f"; every run pinned to logical CPU {cpu}." if cpu >= 0 else "."),
    ]
    print("\n".join(header), flush=True)
    notes: list[str] = []

    if any(p.startswith(OURS) for p in packages) and cache and tasks != ["friedman_ess"]:
        cold = cold_compile(env, args.timeout, cpu)
        if cold:
            line = (f"bartpy_suite cold compile (empty numba cache, first calls in a fresh process): "
                    f"cgm {cold['cgm']:.1f} s, then grow_prune {cold['grow_prune']:.1f} s, then probit "
                    f"{cold['probit']:.1f} s (import {cold['import']:.1f} s). Its 'compile s' column below is the "
                    "first call with that cache filled.")
            print(line, flush=True)
            notes.append(line)

    jobs = []
    if "friedman" in tasks:
        for n in sizes:
            tune, draws = schedule_for(n)
            tune = args.tune if args.tune is not None else tune
            draws = args.draws if args.draws is not None else draws
            for package in packages:
                if package == "pymc-bart":
                    if n > args.pymc_max_n:
                        continue
                    jobs.append((package, "friedman", n, args.pymc_tune, args.pymc_draws))
                else:
                    jobs.append((package, "friedman", n, tune, draws))
    if "friedman_ess" in tasks:
        for n in sizes:
            tune, draws = schedule_for(n)
            tune = args.tune if args.tune is not None else tune
            draws = args.draws if args.draws is not None else draws
            for package in packages:
                if package == "pymc-bart":
                    if n <= args.pymc_max_n:
                        jobs.append((package, "friedman_ess", n, args.pymc_tune, args.pymc_draws))
                else:
                    jobs.append((package, "friedman_ess", n, tune, draws))
    if "breast_cancer" in tasks:
        tune = args.tune if args.tune is not None else SCHEDULE[1_000][0]
        draws = args.draws if args.draws is not None else SCHEDULE[1_000][1]
        for package in packages:
            if package == "pymc-bart":
                jobs.append((package, "breast_cancer", 0, args.pymc_tune, args.pymc_draws))
            else:
                jobs.append((package, "breast_cancer", 0, tune, draws))

    if "pymc-bart" in packages:
        skipped = [n for n in sizes if n > args.pymc_max_n] if "friedman" in tasks else []
        notes.append(f"pymc-bart ran {args.pymc_tune} burn-in + {args.pymc_draws} draws (not the schedule of the "
                     "other packages: its sweeps are a few hundred times slower), so its RMSE, coverage and "
                     "log loss rest on fewer draws"
                     + (f"; it was not run at n = {', '.join(f'{n:,}' for n in skipped)} (--pymc-max-n "
                        f"{args.pymc_max_n})." if skipped else "."))
    notes += [
        "s/sweep excludes compilation and prediction; for stochtree and bartz it is the whole fit call "
        "(binning and set-up included), for bartpy_suite the chain runner, for pymc-bart PyMC's sampling_time.",
        "ratio ours/peer = bartpy_suite (default, grow_prune) s/sweep / the row's s/sweep at the same n: above 1, "
        "ours is slower.",
        "bartz and stochtree propose grow/prune moves only, as our default (grow_prune) does; bartpy_suite-cgm adds "
        "change and swap.",
        "Priors that could not be matched exactly are listed in the docstring of benchmarks/bart_vs_peers.py.",
        f"Logs and raw records: {log_dir}.",
    ]

    if "friedman_ess" in tasks:
        notes += [
            f"ESS per second: {args.chains} chains per package, each from its own seed (--seed {args.seed}), run "
            "one after the other on one thread; ESS over the chains together (bulk ESS: split chains, "
            "rank-normalised, as arviz-stats; the "
            "delta-method ESS of the weighted mean for ctmc's Rao-Blackwellized weights); f(x) at the first 100 "
            "rows of the Friedman test set, median and 5th percentile of the 100 ESS; per CPU second of sampling "
            "(compilation excluded): for bartpy_suite the chain runner, for stochtree and bartz the fit calls, for "
            "pymc-bart pm.sample.",
            "default/row: our default's (grow_prune) ESS per second over the row's (above 1: our default is ahead).",
        ]
    records = []
    t_start = time.perf_counter()
    for i, (package, task, n, tune, draws) in enumerate(jobs, 1):
        label = f"{task} n={n:,}" if task.startswith("friedman") else task
        print(f"[{i}/{len(jobs)}] {package:16s} {label:20s} {tune}+{draws} ...", end=" ", flush=True)
        chains = args.chains if task == "friedman_ess" else 1
        record = run_one(package, task, n, tune, draws, env, log_dir, args.timeout, cpu, chains, args.seed)
        records.append(record)
        if record.get("ok") and task == "friedman_ess":
            print(f"ESS/s sigma {record['ess_sigma_per_s']:.1f}, f median {record['ess_f_median_per_s']:.1f}, "
                  f"f 5% {record['ess_f_p5_per_s']:.1f}; {record['total_s']:.0f} s in all", flush=True)
        elif record.get("ok"):
            extra = (f"RMSE {record['rmse']:.3f}" if task == "friedman"
                     else f"accuracy {record['accuracy']:.3f}")
            print(f"{record['s_per_sweep']:.4f} s/sweep, {extra}, {record['total_s']:.0f} s in all", flush=True)
            if record.get("compile_in_timed_run_s", 0.0) > 0.5:
                notes.append(f"{package} at {label} compiled {record['compile_in_timed_run_s']:.1f} s inside the "
                             "timed run.")
        else:
            print(f"FAILED ({record.get('error')}); log: {record.get('log')}", flush=True)
    notes.append(f"The whole benchmark took {time.perf_counter() - t_start:.0f} s.")

    add_ratios(records)
    text = report(records, header, notes)
    print()
    print(text)
    if args.out:
        out = Path(args.out)
        write_atomic(out, text)
        write_atomic(out.with_suffix(".json"), json.dumps({"header": header, "notes": notes, "records": records},
                                                          indent=1))
        print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0 if all(r.get("ok") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
