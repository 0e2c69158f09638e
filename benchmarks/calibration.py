"""Coverage of f against n: the old BART default, ``gfr``, GFR warm starts, stochtree and bartz in
the same run (issue 32: the benchmark that chooses the new default).

Command (from the repository root; resumable, results already in the JSON are kept)::

    PYTHONPATH=$PWD python3 benchmarks/calibration.py
    PYTHONPATH=$PWD python3 benchmarks/calibration.py --functions friedman --sizes 100000
    PYTHONPATH=$PWD python3 benchmarks/calibration.py --report-only      # table and plot from the JSON

The committed table holds, besides the first command's runs (replicate 0; the step and additive functions
at 10^3 and 10^4 only), the runs of::

    ... --functions friedman,step,additive --sizes 10000 --configs old,warm-500,warm-t300,stochtree --replicates 1,2
    ... --functions friedman --sizes 100000 --configs old,warm-500,warm-t300,stochtree --replicates 1,2
    ... --functions friedman --sizes 10000 --configs warm-c8,warm-k10 --replicates 0,1,2
    ... --functions step --sizes 10000 --configs warm-c8 --replicates 0,1
    ... --functions friedman --sizes 100000 --configs warm-c8
    ... --functions friedman --sizes 1000000 --configs default,warm-500,warm-t300 --allow-million

(replicate 2 of step and additive at 10^4 and stochtree at 10^6 were stopped unfinished to free the
machine).

writes ``benchmarks/results/calibration.json`` (one record per function x n x configuration, written
after each run), ``calibration.md`` (the table) and ``calibration.png`` (coverage against n).

Functions (x ~ U(0, 1)^10, y = f(x) + N(0, 1), noise sd 1 for all three):

* ``friedman``: Friedman #1, ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4`` (x5-x9 noise);
* ``step``: a step function that a sum of axis-aligned trees represents exactly,
  ``3 [x0 > 0.5] + 2 [x1 > 0.3] [x2 > 0.6] - 2 [x3 < 0.25]`` (x4-x9 noise);
* ``additive``: a smooth additive function, ``2 sin(2 pi x0) + 4 (x1 - 0.5)^2 + 2 x2 + 1.5 cos(pi x3)``
  (x4-x9 noise).

Data: training rows from ``numpy.random.default_rng([2032, function index, n])`` (one data seed per
function and n), a held-out set of 2,000 rows from ``default_rng([2032, function index, 0])``, the same
at every n, scored against the noiseless f. Sizes n = 10^3, 10^4, 10^5 (``--sizes``); 10^6 is refused
unless ``--allow-million`` (the machine is shared).

Configurations (ours: ``bps.BART``, 200 trees, default priors, 4 chains on the default threads (one
per chain, so 2 running at a time on 2 cores), MCMC seed 1):

* ``default``: ``bps.BART`` with no run settings, i.e. the package's current default (since issue 32:
  ``init``, ``tune`` and ``draws`` "auto", which is ``warm-500`` from 10,000 rows and ``old`` below;
  the settings a fit resolved are kept in its record);
* ``old``: the default before issue 32, ``grow_prune``, tune 1000, draws 1000, chains from stumps;
* ``gfr``: ``sampler="gfr"`` alone with the guide's settings, tune 15, draws 25 (``docs/guide/samplers.md``);
* ``warm-1000``: ``init="gfr"`` (5 GFR sweeps, chain c from sweep 4 - c) + ``grow_prune``, tune 100,
  draws 1000;
* ``warm-500``: the same with draws 500;
* ``warm-t300``: the same with tune 300, draws 500 (added after ``warm-500`` at n = 10^5 had a higher
  RMSE than the old default: is 100 tuning sweeps after the warm start too few at large n?);
* ``warm-k10``: ``warm-500`` with 10 GFR sweeps instead of 5, so that the chains start from sweeps 6-9
  rather than 1-4 (added after ``warm-500``'s RMSE stayed 5% above the old default's on Friedman #1 at
  n = 10^4 in two replicates: do the chains started from the early, poorer GFR forests cost accuracy?);
* ``warm-c8``: 8 chains of 100 + 250 sweeps from 8 GFR sweeps (as many kept draws as ``warm-500``; added
  because the chains of every configuration disagree (R-hat of f 1.3-1.6 at n >= 10^4), so the error of
  the posterior mean is mostly the spread between chains, which more, shorter chains average down);
* ``stochtree`` (0.4.5): ``BARTModel().sample`` with its defaults (200 trees, 5 GFR sweeps then 100 MCMC
  draws, one chain, outcome standardised, its own priors), ``random_seed`` 1;
* ``bartz`` (0.13.0): ``mc_gbart`` with its defaults (200 trees, 2 chains of 100 burn-in + 500 kept draws
  each (ndpost 1000 in total), numcut 100), seed 1, on JAX's CPU backend.

Every configuration runs in its own subprocess (``--worker``), one after the other. Reported: RMSE of
the posterior mean of f at the held-out rows; coverage and mean width of the 95% equal-tailed credible
intervals of f there; R-hat (rank-normalised split R-hat) and bulk ESS (arviz-stats, over all chains)
of f at each held-out row, median over the rows, and of sigma; the posterior mean of sigma; the CPU
seconds (``time.process_time`` of the worker: all its threads) and wall seconds of the fit call (ours:
after a small warm-up fit of the same configuration that loads the compiled kernels; bartz: its JIT
compilation is inside the fit call, reported apart as ``compile s``); the process's peak resident
memory (``ru_maxrss`` of the child, from ``os.wait4``); the load average at the start and end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _subprocess import run_measured

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
OUT_JSON = RESULTS / "calibration.json"
OUT_MD = RESULTS / "calibration.md"
OUT_PNG = RESULTS / "calibration.png"

P = 10
N_TEST = 2000
DATA_SEED = 2032
MCMC_SEED = 1
TREES = 200
CHAINS = 4
FUNCTIONS = ("friedman", "step", "additive")
SIZES = (1_000, 10_000, 100_000)
MILLION = 1_000_000

#: our configurations: keywords of ``bps.BART`` besides trees, chains and seed
OURS = {
    "default": dict(),
    "old": dict(sampler="grow_prune", init=None, tune=1000, draws=1000),
    "gfr": dict(sampler="gfr", tune=15, draws=25),
    "warm-1000": dict(sampler="grow_prune", init="gfr", tune=100, draws=1000),
    "warm-500": dict(sampler="grow_prune", init="gfr", tune=100, draws=500),
    "warm-t300": dict(sampler="grow_prune", init="gfr", tune=300, draws=500),
    "warm-k10": dict(sampler="grow_prune", init="gfr", init_options={"sweeps": 10}, tune=100, draws=500),
    "warm-c8": dict(sampler="grow_prune", init="gfr", chains=8, tune=100, draws=250),
}
PEERS = ("stochtree", "bartz")
CONFIGS = tuple(OURS) + PEERS
LABELS = {
    "default": "the package's default (init, tune and draws 'auto': warm-500 from 10,000 rows, else old)",
    "old": "old default (grow_prune, 4 x (1000 + 1000))",
    "gfr": "gfr alone (4 x (15 + 25))",
    "warm-1000": "init='gfr' + grow_prune, 4 x (100 + 1000)",
    "warm-500": "init='gfr' + grow_prune, 4 x (100 + 500)",
    "warm-t300": "init='gfr' + grow_prune, 4 x (300 + 500)",
    "warm-k10": "init='gfr' with 10 GFR sweeps (chains from sweeps 6-9) + grow_prune, 4 x (100 + 500)",
    "warm-c8": "init='gfr' + grow_prune, 8 x (100 + 250)",
    "stochtree": "stochtree 0.4.5 defaults (5 GFR + 100 MCMC, 1 chain)",
    "bartz": "bartz 0.13.0 mc_gbart defaults (2 x (100 + 500))",
}


# -- data ------------------------------------------------------------------------------------------
def true_f(name: str, x: np.ndarray) -> np.ndarray:
    """The noiseless regression function ``name`` at the rows of ``x`` (n, 10)."""
    if name == "friedman":
        return 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    if name == "step":
        return 3.0 * (x[:, 0] > 0.5) + 2.0 * ((x[:, 1] > 0.3) & (x[:, 2] > 0.6)) - 2.0 * (x[:, 3] < 0.25)
    if name == "additive":
        return (2 * np.sin(2 * np.pi * x[:, 0]) + 4 * (x[:, 1] - 0.5) ** 2 + 2 * x[:, 2]
                + 1.5 * np.cos(np.pi * x[:, 3]))
    raise ValueError(f"unknown function {name!r}; choose from {', '.join(FUNCTIONS)}")


def make_data(name: str, n: int, replicate: int = 0) -> dict:
    """``n`` training rows and the fixed 2,000 held-out rows (with their noiseless f) of ``name``;
    replicate 0 is the first data set (seed ``[2032, function index, n]``), replicate r > 0 another
    draw of the training rows (seed ``[2032, function index, n, r]``), the held-out rows unchanged."""
    index = FUNCTIONS.index(name)
    test_rng = np.random.default_rng([DATA_SEED, index, 0])
    x_test = test_rng.uniform(size=(N_TEST, P))
    rng = np.random.default_rng([DATA_SEED, index, n] + ([replicate] if replicate else []))
    x = rng.uniform(size=(n, P))
    y = true_f(name, x) + rng.standard_normal(n)
    return {"x": x, "y": y, "x_test": x_test, "f_test": true_f(name, x_test)}


# -- metrics ---------------------------------------------------------------------------------------
def summarise(f: np.ndarray, sigma: np.ndarray, f_test: np.ndarray) -> dict:
    """Accuracy, calibration and mixing figures from draws ``f`` (chains, draws, rows) and ``sigma``
    (chains, draws)."""
    from arviz_stats.base import array_stats

    chains, draws = f.shape[:2]
    flat = f.reshape(-1, f.shape[-1])
    mean = flat.mean(axis=0)
    lo, hi = np.quantile(flat, [0.025, 0.975], axis=0)
    ess_f = array_stats.ess(f, chain_axis=0, draw_axis=1, method="bulk")
    ess_sigma = array_stats.ess(sigma, chain_axis=0, draw_axis=1, method="bulk")
    if f.shape[0] == 1:  # one chain (stochtree's default): R-hat of its two halves, as split R-hat does
        half = f.shape[1] // 2
        f, sigma = f[0, :2 * half].reshape(2, half, -1), sigma[0, :2 * half].reshape(2, half)
    rhat_f = array_stats.rhat(f, chain_axis=0, draw_axis=1, method="rank")
    return {
        "rmse": float(np.sqrt(np.mean((mean - f_test) ** 2))),
        "coverage": float(np.mean((lo <= f_test) & (f_test <= hi))),
        "width": float(np.mean(hi - lo)),
        "rhat_f": float(np.nanmedian(rhat_f)),
        "ess_f": float(np.nanmedian(ess_f)),
        "rhat_sigma": float(array_stats.rhat(sigma, chain_axis=0, draw_axis=1, method="rank")),
        "ess_sigma": float(ess_sigma),
        "sigma_mean": float(np.mean(sigma)),
        "chains": int(chains),
        "draws": int(draws),
    }


# -- runners (in the worker process) ---------------------------------------------------------------
def run_ours(config: str, data: dict, seed: int) -> dict:
    import bartpy_suite as bps

    kw = OURS[config]
    small = make_data("friedman", 300)
    # loads (or compiles) this configuration's kernels outside the timed fit (the default's 'auto' may
    # warm-start: load the GFR kernels too)
    bps.BART(trees=10, seed=0, progress=False, check_mixing=False,
             **{"init": "gfr", **kw, "chains": 1, "tune": 5, "draws": 5, "init_options": None}).fit(small["x"],
                                                                                                  small["y"])
    model = bps.BART(trees=TREES, seed=seed, progress=False, check_mixing=False,
                     **({"chains": CHAINS} | kw))
    cpu, wall = time.process_time(), time.perf_counter()
    fit = model.fit(data["x"], data["y"])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    sigma = fit.posterior["sigma"].transpose("chain", "draw").to_numpy()
    f = fit.function_samples(data["x_test"]).reshape(*sigma.shape, -1)
    return {"f": f, "sigma": sigma, "cpu_s": cpu, "wall_s": wall, "compile_s": None,
            "settings": settings_used(fit)}


def settings_used(fit) -> dict:
    """The run settings a fit resolved (the new default picks them from n)."""
    return {k: fit.config.get(k) for k in ("sampler", "chains", "tune", "draws", "init")}


def run_stochtree(data: dict, seed: int) -> dict:
    import warnings

    from stochtree import BARTModel

    model = BARTModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu, wall = time.process_time(), time.perf_counter()
        model.sample(data["x"], data["y"], general_params={"random_seed": seed})
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        f = np.asarray(model.predict(data["x_test"], type="posterior", terms="y_hat"))  # (rows, draws)
    sigma = np.sqrt(np.asarray(model.global_var_samples)).reshape(1, -1)
    return {"f": f.T[None], "sigma": sigma, "cpu_s": cpu, "wall_s": wall, "compile_s": None}


def run_bartz(data: dict, seed: int) -> dict:
    import jax
    import jax.monitoring
    from bartz.BART import mc_gbart

    compile_secs = [0.0]

    def listener(name, secs, **_):
        if name.startswith("/jax/core/compile/"):
            compile_secs[0] += secs

    jax.monitoring.register_event_duration_secs_listener(listener)
    cpu, wall = time.process_time(), time.perf_counter()
    model = mc_gbart(data["x"], data["y"], printevery=None, seed=seed)
    jax.block_until_ready(model._bart._main_trace)  # noqa: SLF001  (the MCMC runs asynchronously)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    compile_fit = compile_secs[0]
    f = np.asarray(jax.block_until_ready(model.predict(data["x_test"])))  # (chains * draws, rows), chain-major
    chains = np.asarray(model.sigma).shape[1]  # (burn-in + draws per chain, chains)
    sigma = np.asarray(model.sigma_).reshape(chains, -1)  # kept draws, chain-major as predict's
    return {"f": f.reshape(chains, sigma.shape[1], -1), "sigma": sigma, "cpu_s": cpu, "wall_s": wall,
            "compile_s": compile_fit}


def worker(args: argparse.Namespace) -> int:
    """One configuration on one data set; writes one JSON record to ``args.result``."""
    load_start = [round(v, 2) for v in os.getloadavg()]
    data = make_data(args.function, args.n, args.replicate)
    seed = MCMC_SEED + args.replicate
    if args.config in OURS:
        out = run_ours(args.config, data, seed)
    elif args.config == "stochtree":
        out = run_stochtree(data, seed)
    else:
        out = run_bartz(data, seed)
    rec = summarise(out["f"], out["sigma"], data["f_test"])
    rec.update(function=args.function, n=args.n, config=args.config, cpu_s=out["cpu_s"], wall_s=out["wall_s"],
               compile_s=out["compile_s"], replicate=args.replicate, settings=out.get("settings"),
               load_start=load_start,
               load_end=[round(v, 2) for v in os.getloadavg()], ok=True)
    with open(args.result, "w") as fh:
        json.dump(rec, fh, indent=1)
    return 0


# -- parent ----------------------------------------------------------------------------------------
def key(function: str, n: int, config: str, replicate: int = 0) -> str:
    return f"{function}|{n}|{config}" + (f"|r{replicate}" if replicate else "")


def load(path: Path) -> dict:
    if path.exists():
        with open(path) as fh:
            return json.load(fh)
    return {}


def save_record(path: Path, k: str, rec: dict) -> dict:
    """Add one record to the JSON under a lock (two invocations may run at once, e.g. the long
    n = 10^5 runs beside the small ones) and return all the records."""
    import fcntl

    with open(Path(tempfile.gettempdir()) / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = load(path)
        results[k] = rec
        save(results, path)
    return results


def save(results: dict, path: Path) -> None:
    """Write the JSON atomically (a temporary file renamed over it), so an interrupted run leaves the
    previous complete file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run_one(function: str, n: int, config: str, log_dir: str, replicate: int = 0) -> dict:
    """Run one configuration in a fresh subprocess; its record with the child's peak memory."""
    result = os.path.join(log_dir, f"{function}-{n}-{config}-{replicate}.json")
    log_path = os.path.join(log_dir, f"{function}-{n}-{config}-{replicate}.log")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--function", function, "--n", str(n),
           "--configs", config, "--replicate", str(replicate), "--result", result]
    run = run_measured(cmd, env, log_path)
    if os.path.exists(result):
        with open(result) as fh:
            rec = json.load(fh)
    else:
        with open(log_path) as fh:
            tail = fh.read()[-600:]
        rec = {"function": function, "n": n, "config": config, "replicate": replicate, "ok": False,
               "error": f"exit {run.code}: {tail}" if run.code >= 0 else f"killed by signal {-run.code}"}
    rec["process_wall_s"] = run.wall_s
    rec["peak_mb"] = run.peak_mb
    rec["date"] = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    return rec


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def report(results: dict, md_path: Path, png_path: Path, command: str) -> None:
    """The markdown table and the coverage plot from all the records in ``results``."""
    recs = [r for r in results.values() if r.get("ok")]
    failed = [r for r in results.values() if not r.get("ok")]
    order = {c: i for i, c in enumerate(CONFIGS)}
    recs.sort(key=lambda r: (FUNCTIONS.index(r["function"]), r["n"], order.get(r["config"], 99),
                             r.get("replicate", 0)))
    loads = [v for r in recs for v in (r["load_start"][0], r["load_end"][0])]
    lines = [
        "# Coverage of f against n: the old default, gfr, GFR warm starts, stochtree and bartz (issue 32)",
        "",
        f"Command: `{command}` (resumable; `--report-only` rewrites this file and the plot from "
        "`calibration.json`); the other runs in this table: the commands in the script's docstring.",
        "",
        "Settings: three functions of x ~ U(0, 1)^10 with noise sd 1 (`friedman`: Friedman #1; `step`: "
        "3 [x0 > .5] + 2 [x1 > .3] [x2 > .6] - 2 [x3 < .25]; `additive`: 2 sin(2 pi x0) + 4 (x1 - .5)^2 + 2 x2 + "
        "1.5 cos(pi x3)); training rows from `default_rng([2032, function index, n])`, 2,000 held-out rows "
        "from `default_rng([2032, function index, 0])` scored against the noiseless f. Ours: `bps.BART`, 200 "
        "trees, default priors, 4 chains, default threads, seed 1. Peers: their own defaults and priors, seed "
        "1. Coverage / width: 95% equal-tailed credible intervals of f; R-hat (rank-normalised split) and bulk "
        "ESS of f: median over the 2,000 rows; CPU s: all threads of the fit call; peak MB: the worker "
        "process's maximum resident memory. See the script's docstring for each configuration.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
        f"{np.__version__}; shared with other jobs (1-minute load average during the runs "
        f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}): wall times are inflated, CPU times less so. "
        f"Runs dated {min((r['date'] for r in recs), default='-')} to {max((r['date'] for r in recs), default='-')}.",
        "",
        "Configurations: " + "; ".join(f"`{c}` = {LABELS[c]}" for c in CONFIGS) + ".",
        "",
        "Replicate (rep) r: training rows of replicate 0 from `default_rng([2032, function index, n])`, of r > 0 "
        "from `default_rng([2032, function index, n, r])`; MCMC seed 1 + r; the held-out rows are the same.",
        "",
        "| function | n | config | rep | coverage | width | RMSE | R-hat f | ESS f | R-hat sigma | ESS sigma | "
        "sigma | CPU s | wall s | peak MB | load start-end |",
        "|" + "---|" * 16,
    ]
    for r in recs:
        wall = _f(r["wall_s"], ".1f") + (f" (compile {r['compile_s']:.0f})" if r.get("compile_s") else "")
        lines.append(
            f"| {r['function']} | {r['n']:,} | {r['config']} | {r.get('replicate', 0)} | {r['coverage']:.3f} | "
            f"{r['width']:.3f} | "
            f"{r['rmse']:.3f} | {r['rhat_f']:.3f} | {r['ess_f']:.0f} | {r['rhat_sigma']:.3f} | "
            f"{r['ess_sigma']:.0f} | {r['sigma_mean']:.3f} | {r['cpu_s']:.1f} | {wall} | {r['peak_mb']:.0f} | "
            f"{r['load_start'][0]:.1f}-{r['load_end'][0]:.1f} |")
    lines += targets(recs)
    if failed:
        lines += ["", "Failed runs:", ""]
        lines += [f"- {r['function']} n = {r['n']:,} {r['config']}: {r.get('error', '?')[:300]!r}" for r in failed]
    lines.append("")
    fd, tmp = tempfile.mkstemp(dir=md_path.parent, prefix=md_path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines))
    os.replace(tmp, md_path)
    plot(recs, png_path)


def targets(recs: list[dict]) -> list[str]:
    """Issue 32's targets, per function and n where the old default ran: each of our configurations'
    coverage against [0.92, 0.98], its CPU and wall seconds and RMSE relative to the old default's,
    and its coverage minus stochtree's; with several replicates, the mean over the replicates that
    both configurations ran (and the range of the coverage)."""
    by = {(r["function"], r["n"], r["config"], r.get("replicate", 0)): r for r in recs}
    cells = sorted({k[:3] for k in by}, key=lambda k: (FUNCTIONS.index(k[0]), k[1], CONFIGS.index(k[2])
                                                       if k[2] in CONFIGS else 99))
    lines = ["", "## Against issue 32's targets", "",
             "Coverage in [0.92, 0.98]; time at most half the old default's (ratios below: config / old, "
             "same function, n and replicate, same run); RMSE no worse than the old default's (ratio <= 1); "
             "coverage ahead of stochtree's (difference > 0). With several replicates: means over the "
             "replicates both ran, the coverage's range in brackets.", "",
             "| function | n | config | reps | coverage in [0.92, 0.98] | old's coverage | CPU / old | wall / old | "
             "RMSE / old | coverage - stochtree |", "|" + "---|" * 10]
    for name, n, config in cells:
        if config not in OURS or config == "old":
            continue
        reps = [k[3] for k in by if k[:3] == (name, n, config) and (name, n, "old", k[3]) in by]
        if not reps:  # no old default at this n (10^6: about 50 minutes on 2 cores): coverage only
            reps = [k[3] for k in by if k[:3] == (name, n, config)]
        mine = [by[(name, n, config, r)] for r in reps]
        old = [by[(name, n, "old", r)] for r in reps if (name, n, "old", r) in by]
        cov = [r["coverage"] for r in mine]
        mean_cov = float(np.mean(cov))
        band = "yes" if 0.92 <= mean_cov <= 0.98 else "no"
        spread = f" [{min(cov):.3f}-{max(cov):.3f}]" if len(cov) > 1 else ""
        peers = [(by[(name, n, config, r)], by[(name, n, "stochtree", r)]) for r in reps
                 if (name, n, "stochtree", r) in by]
        ahead = (f"{np.mean([a['coverage'] - b['coverage'] for a, b in peers]):+.3f}" if peers else "-")
        ratio = {m: (f"{np.mean([a[m] / b[m] for a, b in zip(mine, old)]):.2f}" if old else "-")
                 for m in ("cpu_s", "wall_s", "rmse")}
        old_cov = f"{np.mean([r['coverage'] for r in old]):.3f}" if old else "not run"
        lines.append(
            f"| {name} | {n:,} | {config} | {len(reps)} | {band} ({mean_cov:.3f}{spread}) | {old_cov} | "
            f"{ratio['cpu_s']} | {ratio['wall_s']} | {ratio['rmse']} | {ahead} |")
    return lines


def plot(recs: list[dict], png_path: Path) -> None:
    """Coverage against n (log x), one panel per function, one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(FUNCTIONS), figsize=(5 * len(FUNCTIONS), 4), sharey=True)
    for ax, name in zip(axes, FUNCTIONS):
        for config in CONFIGS:
            pts = sorted((r["n"], r["coverage"]) for r in recs if r["function"] == name and r["config"] == config)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=config)
        ax.axhspan(0.92, 0.98, color="0.9", zorder=0)
        ax.axhline(0.95, color="0.5", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("training rows n")
    axes[0].set_ylabel("coverage of 95% intervals of f")
    handles = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), fontsize=8, loc="lower center", ncol=len(handles))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fd, tmp = tempfile.mkstemp(dir=png_path.parent, prefix=png_path.name, suffix=".tmp.png")
    os.close(fd)
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, png_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--functions", default=",".join(FUNCTIONS), help="comma-separated subset of "
                        + ", ".join(FUNCTIONS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated training sizes")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ", ".join(CONFIGS))
    parser.add_argument("--allow-million", action="store_true", help="allow n >= 10^6 (long; not on a shared machine)")
    parser.add_argument("--rerun", action="store_true", help="run again configurations already in the JSON")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the table and plot from the JSON")
    parser.add_argument("--out", default=str(OUT_JSON), help="results JSON (the .md and .png go next to it)")
    parser.add_argument("--replicates", default="0", help="comma-separated replicate indices: 0 is the first data "
                        "set and MCMC seed 1, r > 0 another training set and seed 1 + r (default 0)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--replicate", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--function", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.config = args.configs
        return worker(args)
    functions = [s for s in args.functions.split(",") if s]
    configs = [s for s in args.configs.split(",") if s]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for name, chosen, allowed in (("--functions", functions, FUNCTIONS), ("--configs", configs, CONFIGS)):
        bad = [c for c in chosen if c not in allowed]
        if bad:
            parser.error(f"{name}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
    if any(n >= MILLION for n in sizes) and not args.allow_million:
        parser.error("--sizes includes n >= 10^6: that takes hours on a shared 2-core machine; add "
                     "--allow-million to run it anyway")
    out = Path(args.out)
    md, png = out.with_suffix(".md"), out.with_suffix(".png")
    command = "PYTHONPATH=$PWD python3 benchmarks/calibration.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only")
    out.parent.mkdir(parents=True, exist_ok=True)
    results = load(out)
    if not args.report_only:
        with tempfile.TemporaryDirectory(prefix="calibration_") as log_dir:
            for replicate in [int(s) for s in args.replicates.split(",") if s]:
                for name in functions:
                    for n in sizes:
                        for config in configs:
                            k = key(name, n, config, replicate)
                            if k in results and results[k].get("ok") and not args.rerun:
                                continue
                            rec = run_one(name, n, config, log_dir, replicate)
                            print(json.dumps({c: rec.get(c) for c in (
                                "function", "n", "config", "replicate", "coverage", "rmse", "rhat_f", "cpu_s",
                                "wall_s", "peak_mb", "error")}), flush=True)
                            results = save_record(out, k, rec)
    report(results, md, png, command.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
