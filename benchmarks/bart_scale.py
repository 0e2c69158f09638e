"""BART from ten thousand to ten million rows: time per sweep, peak memory and the cost of each
step of a fit, next to stochtree and bartz (issue 11, section 3).

Data: Friedman #1 (``10 sin(pi x1 x2) + 20 (x3 - .5)^2 + 10 x4 + 5 x5``) with 15 pure-noise
columns, p = 20 predictors ~ U(0, 1), noise sd 1; a held-out set of 5,000 rows, the same at every
n, scored against the noiseless f (RMSE of the posterior mean, coverage of the 95% equal-tailed
credible interval of f(x)). 200 trees, the CGM (2010) priors of ``_peers.py``, the default
sampler (``cgm``), ``max_cuts=100``, ``min_leaf_size=5``.

Every size and configuration runs in its own fresh subprocess (``--worker``), so each peak is
that process's alone; the parent runs them one after the other and writes the table:

* ``ours-1``: one chain on one thread (``chains=1, threads=1``);
* ``ours-2``: two chains on two threads (``chains=2, threads=2``); its speed-up over ``ours-1``
  is ``2 * wall(1 chain) / wall(2 chains)`` per sweep (2 = perfect scaling on 2 cores);
* ``stochtree`` and ``bartz`` (run from ``/work/benchvenv`` through ``_peers.py``'s runners, one
  thread each).

Our fit goes through the formula front door (``bps.bart("y ~ .", data=df)``), as a user's would,
and each step of it is timed (wall and CPU seconds) with the resident memory after it and the
peak during it: the formula (DataFrame -> float64 X), the validation copy, binning, sigma_hat,
building the chain state, the sweeps, collecting and stacking the draws, building the posterior
(``build_fit``), the mixing check, and prediction of the test rows. The peak during a step is
``VmHWM`` of ``/proc/self/status`` after resetting it (``/proc/self/clear_refs``) at the step's
start; the process's peak is the largest of these and of the stretches between steps. Peak
memory includes the interpreter, the libraries and the user's own data (the DataFrame, about
8 (p + 1) n bytes); ``before MB`` is the resident memory once the data are made, before the
package is imported.

The peers do not expose a sampling-only hook: their seconds per sweep are the fit call's over the
sweeps, set-up included (bartz's after a warm-up fit on the same shapes, which compiles).

Usage::

    PYTHONPATH=. python3 benchmarks/bart_scale.py --out benchmarks/results/bart_scale.md
    PYTHONPATH=. python3 benchmarks/bart_scale.py --sizes 10000,100000 --configs ours-1 --out /tmp/x.md

The machine is shared: the table reports CPU seconds next to wall seconds, and the load average
when each run started and ended.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import _provenance
from _subprocess import run_measured
from _tables import write_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER_PYTHON = "/work/benchvenv/bin/python"

P_SIGNAL = 5
P_NOISE = 15
N_TEST = 5000
DATA_SEED = 2010
MCMC_SEED = 1
#: (tune, draws) by n: fewer sweeps where one sweep takes long
SWEEPS = {10_000: (100, 200), 100_000: (50, 100), 1_000_000: (10, 20), 10_000_000: (3, 5)}
CONFIGS = ("ours-1", "ours-2", "stochtree", "bartz")


# -- memory and time ---------------------------------------------------------------------------
def _status(field: str) -> float:
    """A ``/proc/self/status`` field in MB (VmRSS, VmHWM)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class PeakTracker:
    """Per-step peaks from VmHWM, reset at each step's start; keeps the process's overall peak."""

    def __init__(self):
        self.overall = 0.0
        self.can_reset = True

    def reset(self) -> None:
        self.overall = max(self.overall, _status("VmHWM"))
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.can_reset = False

    def peak(self) -> float:
        hwm = _status("VmHWM")
        self.overall = max(self.overall, hwm)
        return hwm


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


# -- data ----------------------------------------------------------------------------------------
def friedman_f(x):
    import numpy as np

    return 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]


def make_data(n: int) -> dict:
    """Training rows (x ~ U(0,1)^20, y = f + N(0,1)) and the 5,000 test rows with their noiseless f."""
    import numpy as np

    p = P_SIGNAL + P_NOISE
    test_rng = np.random.default_rng([DATA_SEED, 0])
    x_test = test_rng.uniform(size=(N_TEST, p))
    rng = np.random.default_rng([DATA_SEED, n])
    x = rng.uniform(size=(n, p))
    y = friedman_f(x) + rng.standard_normal(n)
    return {"x": x, "y": y, "x_test": x_test, "f_test": friedman_f(x_test)}


def frame(x, y=None):
    """A DataFrame built column by column (pandas would otherwise keep a second copy of x)."""
    import pandas as pd

    df = pd.DataFrame({f"x{j}": x[:, j].copy() for j in range(x.shape[1])})
    if y is not None:
        df["y"] = y
    return df


def chunked_prior(x, y) -> dict:
    """``_peers.cgm_prior`` for the peers, with the OLS of sigma_hat from normal equations
    accumulated over row blocks (so the prior does not add an (n, p + 1) design to their peak)."""
    import numpy as np
    from scipy import stats

    sys.path.insert(0, HERE)
    import _peers

    n, p = x.shape
    xtx = np.zeros((p + 1, p + 1))
    xty = np.zeros(p + 1)
    block = 1 << 18
    for s in range(0, n, block):
        d = np.column_stack([np.ones(min(block, n - s)), x[s:s + block]])
        xtx += d.T @ d
        xty += d.T @ y[s:s + block]
    coef = np.linalg.solve(xtx, xty)
    rss = 0.0
    for s in range(0, n, block):
        d = np.column_stack([np.ones(min(block, n - s)), x[s:s + block]])
        r = y[s:s + block] - d @ coef
        rss += float(r @ r)
    sigma_hat = float(np.sqrt(rss / (n - p - 1)))
    lo, hi = float(np.min(y)), float(np.max(y))
    center, scale = 0.5 * (lo + hi), hi - lo
    lam = sigma_hat ** 2 * float(stats.chi2.ppf(1.0 - _peers.Q, _peers.NU)) / _peers.NU
    return {"center": center, "scale": scale, "sigma_hat": sigma_hat, "lam": lam, "sigma_hat_scaled": sigma_hat / scale,
            "lam_scaled": lam / scale ** 2, "leaf_sd_scaled": 0.5 / (_peers.K * np.sqrt(_peers.TREES))}


def metrics(f, f_test) -> dict:
    import numpy as np

    mean = f.mean(axis=0)
    lo, hi = np.quantile(f, [0.025, 0.975], axis=0)
    return {"rmse": float(np.sqrt(np.mean((mean - f_test) ** 2))),
            "coverage95": float(np.mean((lo <= f_test) & (f_test <= hi))), "width95": float(np.mean(hi - lo))}


# -- our fit, step by step -----------------------------------------------------------------------
STEPS = ("formula", "validation", "binning", "sigma_hat", "chain_setup", "sweeps", "collect", "stack_draws",
         "build_fit", "mixing_check", "predict")


def run_ours(n: int, tune: int, draws: int, chains: int) -> dict:
    import numpy as np

    tracker = PeakTracker()
    tracker.reset()
    data = make_data(n)
    df = frame(data["x"], data["y"])
    test = frame(data["x_test"])
    x_test_f = data["f_test"]
    del data
    data_mb = _status("VmRSS")

    import bartpy_suite as bps
    import bartpy_suite.formula as formula_pkg
    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite.models import _base
    from bartpy_suite.models import bart as bart_mod
    from bartpy_suite.samplers.forest import ForestBuffers
    from bartpy_suite.samplers.registry import SamplerSpec

    steps: dict[str, dict] = {}
    depth = [0]

    def record(name, fn):
        def wrapped(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            tracker.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                rec = steps.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0, "peak_mb": 0.0, "calls": 0})
                rec["wall_s"] += wall
                rec["cpu_s"] += cpu
                rec["calls"] += 1
                rec["peak_mb"] = max(rec["peak_mb"], tracker.peak())
                rec["rss_after_mb"] = _status("VmRSS")
                depth[0] -= 1
        return wrapped

    formula_pkg.build_design = record("formula", formula_pkg.build_design)
    _base.check_training_arrays = record("validation", _base.check_training_arrays)
    bin_fit = BinnedPredictors.fit.__func__
    BinnedPredictors.fit = classmethod(record("binning", bin_fit))
    bart_mod.residual_sd = record("sigma_hat", bart_mod.residual_sd)
    SamplerSpec.make_chain = record("chain_setup", SamplerSpec.make_chain)
    _base.TreeModel._run = record("sweeps", _base.TreeModel._run)
    ForestBuffers.collect = record("collect", ForestBuffers.collect)
    _base.stack_draws = record("stack_draws", _base.stack_draws)
    _base.build_fit = record("build_fit", _base.build_fit)
    _base.warn_if_poor_mixing = record("mixing_check", _base.warn_if_poor_mixing)

    kw = dict(trees=200, chains=chains, threads=chains, draws=draws, tune=tune, seed=MCMC_SEED, max_cuts=100,
              min_leaf_size=5, progress=False, log_likelihood=False)
    # warm-up on a small frame: loads (or compiles) the kernels outside the timed fit
    small = df.iloc[:200]
    bps.bart("y ~ .", data=small, **{**kw, "draws": 2, "tune": 1, "chains": 1, "threads": 1}).function_samples(
        test.iloc[:10])
    steps.clear()
    tracker.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    load_start = loadavg()
    fit = bps.bart("y ~ .", data=df, **kw)
    fit_wall, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    predict = record("predict", fit.function_samples)
    f = predict(test)
    out = metrics(f, x_test_f)
    out.update(sigma_mean=float(np.nanmean(fit.posterior["sigma"].values)))
    sweeps = steps["sweeps"]
    n_sweeps = tune + draws
    out.update(
        fit_wall_s=fit_wall, fit_cpu_s=fit_cpu, sweep_wall_s=sweeps["wall_s"] / n_sweeps,
        sweep_cpu_s=sweeps["cpu_s"] / n_sweeps / chains, steps=steps, data_mb=data_mb,
        other_fit_wall_s=fit_wall - sum(v["wall_s"] for k, v in steps.items() if k != "predict"),
        load_start=load_start,
    )
    out["peak_mb"] = max(tracker.peak(), tracker.overall)
    out["peak_reset_ok"] = tracker.can_reset
    return out


# -- peers ---------------------------------------------------------------------------------------
def run_peer(package: str, n: int, tune: int, draws: int) -> dict:
    import numpy as np

    sys.path.insert(0, HERE)
    import _peers

    tracker = PeakTracker()
    data = make_data(n)
    data_mb = _status("VmRSS")
    prior = chunked_prior(data["x"], data["y"])
    load_start = loadavg()
    runner = _peers.run_stochtree if package == "stochtree" else _peers.run_bartz
    out = runner("friedman", data, prior, tune, draws)
    rec = metrics(out["f"], data["f_test"])
    rec.update(sigma_mean=float(np.mean(out["sigma"])), fit_wall_s=out["fit_s"], fit_cpu_s=out["fit_cpu_s"],
               sweep_wall_s=out["fit_s"] / (tune + draws), sweep_cpu_s=out["fit_cpu_s"] / (tune + draws),
               predict_s=out["predict_s"], data_mb=data_mb, load_start=load_start,
               timed="the fit call over the sweeps, set-up included"
               + (" (after a warm-up fit that compiles)" if package == "bartz" else ""))
    rec["peak_mb"] = tracker.peak()
    return rec


def worker(args) -> int:
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    tune, draws = args.tune, args.draws
    try:
        if args.config.startswith("ours"):
            rec = run_ours(args.n, tune, draws, 2 if args.config == "ours-2" else 1)
        else:
            rec = run_peer(args.config, args.n, tune, draws)
        rec["ok"] = True
    except MemoryError as exc:
        rec = {"ok": False, "error": f"MemoryError: {exc}"}
    rec.update(config=args.config, n=args.n, tune=tune, draws=draws, load_end=loadavg())
    with open(args.result, "w") as fh:
        json.dump(rec, fh, indent=1)
    return 0


# -- parent ----------------------------------------------------------------------------------------
def run_one(config: str, n: int, tune: int, draws: int, timeout: float, log_dir: str) -> dict:
    result = os.path.join(log_dir, f"{config}-{n}.json")
    python = sys.executable if config.startswith("ours") else PEER_PYTHON
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    env["NUMBA_NUM_THREADS"] = "2" if config == "ours-2" else "1"
    if not config.startswith("ours"):
        env.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "bart_scale_benchvenv_numba"))
        env["JAX_PLATFORMS"] = "cpu"
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    cmd = [python, os.path.abspath(__file__), "--worker", "--config", config, "--n", str(n), "--tune", str(tune),
           "--draws", str(draws), "--result", result]
    run = run_measured(cmd, env, os.path.join(log_dir, f"{config}-{n}.log"))
    rec = {"config": config, "n": n, "ok": False}
    if os.path.exists(result):
        with open(result) as fh:
            rec = json.load(fh)
    elif run.code < 0:
        rec["error"] = f"killed by signal {-run.code} (out of memory?)"
    else:
        with open(os.path.join(log_dir, f"{config}-{n}.log")) as fh:
            rec["error"] = fh.read()[-400:]
    rec["process_wall_s"] = run.wall_s
    rec["ru_maxrss_mb"] = run.peak_mb
    del timeout
    return rec


def exponent(ns, values):
    """Slope of log(value) on log(n) (least squares)."""
    import numpy as np

    pairs = [(n, v) for n, v in zip(ns, values) if v is not None and v > 0]
    if len(pairs) < 2:
        return None
    a = np.log([p[0] for p in pairs])
    b = np.log([p[1] for p in pairs])
    return float(np.polyfit(a, b, 1)[0])


def _fmt(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v)


def tables(records: list[dict]) -> str:
    lines = ["| config | n | tune+draws | s/sweep wall | s/sweep CPU | peak MB | before MB | fit s | RMSE | cover95 | "
             "width95 | sigma | load start | load end |", "|" + "---|" * 14]
    for r in records:
        if not r.get("ok"):
            lines.append(f"| {r['config']} | {r['n']:,} | | {r.get('error', 'failed')} |" + " |" * 10)
            continue
        lines.append(
            f"| {r['config']} | {r['n']:,} | {r['tune']}+{r['draws']} | {_fmt(r['sweep_wall_s'])} | "
            f"{_fmt(r['sweep_cpu_s'])} | {_fmt(r['peak_mb'])} | {_fmt(r['data_mb'])} | {_fmt(r['fit_wall_s'])} | "
            f"{_fmt(r['rmse'])} | {_fmt(r['coverage95'])} | {_fmt(r['width95'])} | {_fmt(r['sigma_mean'])} | "
            f"{r['load_start']} | {r['load_end']} |")
    out = ["## Per sweep, peak memory and accuracy", "", *lines, ""]
    ours = [r for r in records if r.get("ok") and r["config"] == "ours-1"]
    if ours:
        out += ["## Each step of our fit (one chain, one thread): wall s / CPU s / peak MB during the step", "",
                "| step | " + " | ".join(f"n = {r['n']:,}" for r in ours) + " | exponent (CPU s) |",
                "|---|" + "---|" * (len(ours) + 1)]
        for step in STEPS:
            cells, cpus = [], []
            for r in ours:
                s = r["steps"].get(step)
                if s is None:
                    cells.append("-")
                    cpus.append(None)
                    continue
                per = s["cpu_s"] / (r["tune"] + r["draws"]) if step == "sweeps" else s["cpu_s"]
                cells.append(f"{_fmt(s['wall_s'])} / {_fmt(s['cpu_s'])} / {_fmt(s['peak_mb'])}")
                cpus.append(per)
            out.append(f"| {step} | " + " | ".join(cells) + f" | {_fmt(exponent([r['n'] for r in ours], cpus))} |")
        out += ["", "(sweeps: totals over all sweeps; the exponent of the sweeps is that of CPU s per sweep)", ""]
        ns = [r["n"] for r in ours]
        out += [f"Exponent of n, ours-1: CPU s per sweep {_fmt(exponent(ns, [r['sweep_cpu_s'] for r in ours]))}, "
                f"peak MB {_fmt(exponent(ns, [r['peak_mb'] for r in ours]))}, "
                f"peak MB minus before MB {_fmt(exponent(ns, [r['peak_mb'] - r['data_mb'] for r in ours]))}.", ""]
    two = {r["n"]: r for r in records if r.get("ok") and r["config"] == "ours-2"}
    if ours and two:
        out += ["## Two chains on two threads", "", "| n | wall s/sweep, 1 chain | wall s/sweep, 2 chains | speed-up "
                "(2 x 1-chain / 2-chain) | peak MB, 2 chains | load start |", "|---|---|---|---|---|---|"]
        for r in ours:
            t = two.get(r["n"])
            if t:
                out.append(f"| {r['n']:,} | {_fmt(r['sweep_wall_s'])} | {_fmt(t['sweep_wall_s'])} | "
                           f"{_fmt(2 * r['sweep_wall_s'] / t['sweep_wall_s'])} | {_fmt(t['peak_mb'])} | "
                           f"{t['load_start']} |")
        out.append("")
    return "\n".join(out)


SEEDS = ("held-out rows `default_rng([2010, 0])`, training rows `default_rng([2010, n])`; every fit seed 1 (ours "
         "directly, its warm-up fit too; stochtree and bartz through `_peers`)")


def write_report(out: str, text: str, argv: list[str], from_json: str | None = None) -> None:
    """The markdown report at ``out``: title, provenance header, then the tables."""
    note = (f"rendered from the records in {from_json} (each row's load average is its run's; the machine line "
            "is this rendering's)" if from_json else None)
    lines = ["# BART from 10^4 to 10^7 rows (issue 11, section 3)", "",
             *_provenance.header(SEEDS, argv=argv, extra_packages=("bartz", "stochtree"), run_note=note), text]
    write_atomic(out, "\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", choices=CONFIGS)
    ap.add_argument("--n", type=int)
    ap.add_argument("--tune", type=int)
    ap.add_argument("--draws", type=int)
    ap.add_argument("--result")
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--skip", default="", help="comma separated config:n pairs not to run (e.g. stochtree:10000000)")
    ap.add_argument("--out", help="markdown file to write (and the records as .json beside it)")
    ap.add_argument("--log-dir")
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--from-json", help="comma separated record files of earlier runs: write their tables, run nothing")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    run_argv = [__file__, *(sys.argv[1:] if argv is None else argv)]
    if args.from_json:
        records = []
        for path in args.from_json.split(","):
            with open(path) as fh:
                records += json.load(fh)
        records.sort(key=lambda r: (r["n"], CONFIGS.index(r["config"])))
        text = tables(records)
        print(text)
        if args.out:
            write_report(args.out, text, run_argv, from_json=args.from_json)
            write_atomic(os.path.splitext(args.out)[0] + ".json", json.dumps(records, indent=1))
        return 0
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="bart_scale_")
    os.makedirs(log_dir, exist_ok=True)
    skip = {tuple(s.split(":")) for s in args.skip.split(",") if s}
    records = []
    for n in [int(s) for s in args.sizes.split(",")]:
        tune, draws = SWEEPS.get(n, (10, 20))
        for config in args.configs.split(","):
            if (config, str(n)) in skip:
                records.append({"config": config, "n": n, "ok": False, "error": "not run (--skip)"})
                continue
            rec = run_one(config, n, tune, draws, args.timeout, log_dir)
            records.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "steps"}), flush=True)
            if args.out:
                write_atomic(os.path.splitext(args.out)[0] + ".json", json.dumps(records, indent=1))
    text = tables(records)
    print(text)
    if args.out:
        write_report(args.out, text, run_argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
