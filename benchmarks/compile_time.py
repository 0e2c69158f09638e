"""First-use cost (issue 11): numba's cold compile and warm cache load per model and sampler,
with the speed per sweep measured next to it so that neither is bought with the other.

For every source tree given (``--source label=DIR``, default: this checkout as ``current``;
give two to compare a change with its base in one run), and every model in ``--models``:

* cold: a fresh interpreter with ``NUMBA_CACHE_DIR`` pointed at an empty directory imports the
  package and fits the model with each sampler of ``--samplers`` in turn (the model's default
  sampler first), each fit followed by a prediction, as a new user's first session would. The
  first row is the first fit of the model with its default sampler; each further row is what that
  sampler adds on top of the kernels already compiled.
* warm: a second fresh interpreter runs the same calls with that cache filled (the load time).
* run: in the warm interpreter, each call is made a second time. That is the fit's own sampling
  (3-4 CPU s for the soft tree's NUTS runs, hundredths for the others), to subtract from the cold
  and warm times.
* speed: in the warm process, after the fits, CPU seconds per sweep: CART ``cgm`` MH steps per CPU
  second on cgm1998 (one chain, burn-in only, nothing recorded); BART ``cgm`` CPU seconds per
  sweep on Friedman #1, n = 1,000, p = 10, 200 trees, one chain, one thread.

Times are given twice: wall seconds and CPU seconds of the process (``time.process_time``).
Compilation is single-threaded, so on a quiet machine the two agree; on a busy one the wall time
is inflated by other processes and the CPU seconds are the figure to compare.

Each fit: CART ``y ~ x1 + x2`` on cgm1998 (800 rows); on 200 simulated rows with 5 predictors,
BART ``y ~ .`` with 20 trees, the soft tree ``y ~ x0 + x1``, classification CART ``c ~ x0 + x1``
multinomial BART ``c ~ x0 + x1 + x2`` with 20 trees (``c`` has three classes) and probit BART
``b ~ x0 + x1 + x2`` with 20 trees (``b`` has two);
``chains=1, draws=5, tune=5`` and a prediction of 5 rows.

``--separate`` runs each model in a pair of processes of its own (its first fit with nothing
compiled before it); ``model:sampler`` picks a sampler other than the first of ``SAMPLERS``
(``cart:tempered+rp``: with the rotate/perturb move mix ``samplers.mh.ROTATE_PERTURB_MOVES``);
``--plain-numba`` measures the package compiling with numba as shipped (what dropping the overrides
of ``_kernels/link_only.py`` and ``config_hash.py`` would cost).

Run::

    python3 benchmarks/compile_time.py --out benchmarks/results/compile_time.md
    python3 benchmarks/compile_time.py --source before=/tmp/base --source after=. --samplers default
    python3 benchmarks/compile_time.py --models cart:tempered,bart:grow_prune,probit,multiclass,soft --separate \
        --samplers default --no-speed
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import _provenance  # noqa: E402

FIT_SEEDS = ("timings only, no draws are compared; the fits timed use seed 0 (on `cgm1998` and on 200 rows from "
             "`default_rng(0)`)")
SPEED_SEEDS = ("; the speed runs: CART chains `default_rng(r)` for repeat r, BART fits seeds r + 1 on 1,000 Friedman "
               "rows from `default_rng(2010)`")

SAMPLERS = {
    "cart": ("cgm", "grow_prune", "pg", "smc", "ctmc", "tempered"),  # the default first
    "bart": ("grow_prune", "cgm", "pg", "ctmc", "tempered"),  # the default first
    "soft": ("hmc_dfi", "hmc_df"),  # the default first
    "cart_class": ("cgm",),  # classification CART (Dirichlet leaves)
    "probit": ("grow_prune",),  # probit BART (two classes)
    "multiclass": ("grow_prune",),  # multinomial BART (log-linear trees)
}

CHILD = r"""
import json, sys, time

def clock():
    return time.perf_counter(), time.process_time()

def since(t):
    w, c = clock()
    return {"wall": w - t[0], "cpu": c - t[1]}

plan = json.loads(sys.argv[1])
out = {"steps": []}
compiles = []
if plan.get("profile"):
    from numba.core import event

    class Compiles(event.Listener):
        # numba:compile events nest (a kernel compiles its callees while typing): self time is
        # the event's time less its children's.
        stack = []

        def on_start(self, ev):
            self.stack.append([time.process_time(), 0.0])

        def on_end(self, ev):
            c0, child = self.stack.pop()
            spent = time.process_time() - c0
            if self.stack:
                self.stack[-1][1] += spent
            fn = ev.data["dispatcher"].py_func
            compiles.append({"function": f"{fn.__module__}.{fn.__qualname__}", "cpu": spent,
                             "self_cpu": spent - child, "args": str(ev.data["args"])})

    event.register("numba:compile", Compiles())
t = clock()
if plan.get("plain_numba"):
    # an untested numba version as the package sees it: no overrides at all (link_only.TESTED_NUMBA)
    import numba
    numba.__version__ = "0.0.0"
import numpy as np
import pandas as pd
import bartpy_suite as bps
out["import"] = since(t)

cgm1998 = bps.datasets.load("cgm1998")
rng = np.random.default_rng(0)
x = rng.uniform(size=(200, 5))
sim = pd.DataFrame(x, columns=[f"x{j}" for j in range(5)])
sim["y"] = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + rng.standard_normal(200)
sim["c"] = pd.Categorical(np.select([x[:, 0] > 0.6, x[:, 1] > 0.5], ["a", "b"], "c"))
sim["b"] = pd.Categorical(np.where(x[:, 0] + x[:, 1] > 1.0, "yes", "no"))
def fit_and_predict(model, sampler):
    sampler, _, mix = sampler.partition("+")
    common = dict(sampler=sampler, chains=1, draws=5, tune=5, seed=0, progress=False)
    if mix == "rp":  # the rotate/perturb move mix of the MH samplers
        from bartpy_suite.samplers.mh import ROTATE_PERTURB_MOVES
        common["sampler_options"] = {"moves": dict(ROTATE_PERTURB_MOVES)}
    if model == "cart":
        fit, data = bps.cart("y ~ x1 + x2", data=cgm1998, **common), cgm1998
    elif model == "bart":
        fit, data = bps.bart("y ~ .", data=sim.drop(columns="c"), trees=20, threads=1, **common), sim
    elif model == "soft":
        fit, data = bps.soft_tree("y ~ x0 + x1", data=sim, **common), sim
    elif model == "cart_class":
        fit, data = bps.cart("c ~ x0 + x1", data=sim, **common), sim
    elif model == "probit":
        fit, data = bps.bart("b ~ x0 + x1 + x2", data=sim, trees=20, threads=1, **common), sim
    else:
        fit, data = bps.bart("c ~ x0 + x1 + x2", data=sim, trees=20, threads=1, **common), sim
    fit.predict(data.head(5))


for model, sampler in plan["fits"]:
    t = clock()
    fit_and_predict(model, sampler)
    step = {"model": model, "sampler": sampler, **since(t)}
    # the same call again, everything compiled and loaded: the fit's own work, to subtract
    t = clock()
    fit_and_predict(model, sampler)
    step["again"] = since(t)
    out["steps"].append(step)

if plan["speed"]:
    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite.priors import NormalLeafPrior, TreePrior, default_lambda, kernel_prior
    from bartpy_suite.samplers import get_sampler
    from bartpy_suite.samplers.mh import CartChain

    xc = np.column_stack([cgm1998["x1"].to_numpy(), cgm1998["x2"].cat.codes.to_numpy().astype(float)])
    is_cat = np.array([False, True])
    binned = BinnedPredictors.fit(xc, is_cat, np.array([0, 4]), None)
    y = cgm1998["y"].to_numpy()
    ys = (y - y.mean()) / y.std()
    leaf = NormalLeafPrior(1 / 3, 0.0, 3.0, default_lambda(ys, 3.0))
    hyper = kernel_prior(TreePrior(0.95, 0.5, 5), leaf, likelihood=True, center=0.0, scale=1.0)
    moves = get_sampler("cgm", "cart").option_defaults()["moves"]
    best = 0.0
    for r in range(plan["repeats"] + 1):
        chain = CartChain(binned.codes, is_cat, binned.nbins, ys, np.zeros(len(y), dtype=np.int64), hyper, moves,
                          np.random.default_rng(r))
        chain.allocate(1)
        steps = 200 if r == 0 else plan["cart_steps"]
        c0 = time.process_time()
        chain.run(0, steps, steps, 1)
        if r > 0:
            best = max(best, steps / (time.process_time() - c0))
    out["cart_steps_per_cpu_s"] = best

    from bartpy_suite.models import _base
    spent = [0.0]
    original = _base.TreeModel._run

    def timed(self, *args, **kwargs):
        c0 = time.process_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent[0] += time.process_time() - c0

    _base.TreeModel._run = timed
    frng = np.random.default_rng(2010)
    xf = frng.uniform(size=(1000, 10))
    fried = pd.DataFrame(xf, columns=[f"x{j}" for j in range(10)])
    fried["y"] = (10 * np.sin(np.pi * xf[:, 0] * xf[:, 1]) + 20 * (xf[:, 2] - 0.5) ** 2 + 10 * xf[:, 3]
                  + 5 * xf[:, 4] + frng.standard_normal(1000))
    bps.bart("y ~ .", data=fried, chains=1, draws=2, tune=1, seed=0, progress=False, threads=1)
    best = float("inf")
    for r in range(plan["repeats"]):
        spent[0] = 0.0
        sweeps = plan["bart_sweeps"]
        bps.bart("y ~ .", data=fried, chains=1, draws=sweeps // 2, tune=sweeps - sweeps // 2, seed=r + 1,
                 progress=False, threads=1)
        best = min(best, spent[0] / sweeps)
    out["bart_cpu_s_per_sweep"] = best
if plan.get("profile"):
    out["compiles"] = compiles
print("RESULT " + json.dumps(out))
"""


def run_child(source: Path, cache: str, plan: dict, timeout: float) -> dict:
    """One fresh interpreter running ``plan`` with ``source`` first on the path and ``cache`` as numba's cache."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(source), PYTHONWARNINGS="ignore",
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(plan)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=tempfile.gettempdir())
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def plan_fits(models: list[str], which: str) -> list[tuple[str, str]]:
    """(model, sampler) pairs in the order run: ``model:sampler`` as given, a bare model with its
    default sampler (``which="default"``) or every sampler of ``SAMPLERS`` (``which="all"``)."""
    fits = []
    for item in models:
        model, _, sampler = item.partition(":")
        if sampler:
            fits.append((model, sampler))
        else:
            samplers = SAMPLERS[model] if which == "all" else SAMPLERS[model][:1]
            fits += [(model, s) for s in samplers]
    return fits


def measure(label: str, source: Path, models: list[str], which: str, args) -> dict:
    fits = plan_fits(models, which)
    record = {"label": label, "source": str(source)}
    with tempfile.TemporaryDirectory(prefix="numba_cold_") as cache:
        cold = run_child(source, cache, {"fits": fits, "speed": False, "profile": args.profile,
                                         "plain_numba": args.plain_numba}, args.timeout)
        warm = run_child(source, cache, {"fits": fits, "speed": not args.no_speed, "repeats": args.repeats,
                                         "cart_steps": args.cart_steps, "bart_sweeps": args.bart_sweeps,
                                         "plain_numba": args.plain_numba},
                         args.timeout)
    record.update(cold=cold, warm=warm)
    return record


def profile_lines(record: dict, top: int = 25) -> list[str]:
    """Per-kernel compile CPU seconds of the cold run and the functions compiled more than once."""
    from collections import defaultdict

    compiles = record["cold"].get("compiles")
    if not compiles:
        return []
    ours = [c for c in compiles if c["function"].startswith("bartpy_suite.")]
    self_by = defaultdict(float)
    count = defaultdict(int)
    for c in ours:
        self_by[c["function"]] += c["self_cpu"]
        count[c["function"]] += 1
    total = sum(c["self_cpu"] for c in compiles)
    lines = ["", f"## Where the cold compile goes ({record['label']})", "",
             f"{len(compiles)} numba compilations, {len(ours)} of them this package's kernels, "
             f"{total:.1f} CPU s in all (self time: a kernel's compile less its callees' compiles, which "
             "includes optimising and generating the machine code of the callees linked into it).", "",
             "| kernel | compilations | self CPU s |", "|---|---|---|"]
    for name in sorted(self_by, key=self_by.get, reverse=True)[:top]:
        lines.append(f"| {name.removeprefix('bartpy_suite.')} | {count[name]} | {self_by[name]:.1f} |")
    multi = {name: n for name, n in count.items() if n > 1}
    if multi:
        lines += ["", "Kernels compiled for more than one signature (integer widths, literal constants): "
                  + ", ".join(f"{name.removeprefix('bartpy_suite._kernels.')} x{n}"
                              for name, n in sorted(multi.items(), key=lambda kv: -kv[1])) + "."]
    return lines


def report(records: list[dict], header: list[str]) -> str:
    lines = ["# First use: numba cold compile and warm load", ""] + header + [""]
    lines += ["## Cold compile (fresh process, empty NUMBA_CACHE_DIR) and warm load (fresh process, cache filled)",
              "",
              "Seconds of each call in the order run; a row after the first of its model is what that sampler "
              "adds to the kernels already compiled. Each call includes the fit's own sampling; *run CPU s* is "
              "the same call made again in the warm process (nothing left to compile or load), which the cold "
              "and warm figures less it leave as compile and cache-load time.", "",
              "| source | model | sampler | cold wall s | cold CPU s | warm wall s | warm CPU s | run CPU s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['label']} | (import) | | {r['cold']['import']['wall']:.1f} | "
                     f"{r['cold']['import']['cpu']:.1f} | {r['warm']['import']['wall']:.1f} | "
                     f"{r['warm']['import']['cpu']:.1f} |")
        for c, w in zip(r["cold"]["steps"], r["warm"]["steps"]):
            again = w.get("again")
            run = f"{again['cpu']:.2f}" if again else ""
            lines.append(f"| {r['label']} | {c['model']} | {c['sampler']} | {c['wall']:.1f} | {c['cpu']:.1f} | "
                         f"{w['wall']:.2f} | {w['cpu']:.2f} | {run} |")
    if any("cart_steps_per_cpu_s" in r["warm"] for r in records):
        lines += ["", "## Speed per sweep (warm process)", "",
                  "| source | CART cgm MH steps per CPU s (cgm1998) "
                  "| BART cgm CPU s per sweep (n = 1,000, 200 trees) |",
                  "|---|---|---|"]
        for r in records:
            w = r["warm"]
            if "cart_steps_per_cpu_s" in w:
                lines.append(f"| {r['label']} | {w['cart_steps_per_cpu_s']:,.0f} | {w['bart_cpu_s_per_sweep']:.4f} |")
    for r in records:
        lines += profile_lines(r)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", action="append", default=None,
                    help="label=DIR of a source tree to measure (repeatable; default current=this checkout)")
    ap.add_argument("--models", default="cart,bart",
                    help="comma separated, each a model or model:sampler; models: " + ", ".join(SAMPLERS))
    ap.add_argument("--separate", action="store_true",
                    help="each model in fresh processes with an empty cache of its own (its first fit alone)")
    ap.add_argument("--samplers", choices=("default", "all"), default="all",
                    help="default: each model's default sampler only; all: every sampler of the model in turn")
    ap.add_argument("--profile", action="store_true",
                    help="record numba's compile events in the cold run: CPU seconds per kernel, repeated signatures")
    ap.add_argument("--no-speed", action="store_true", help="skip the speed-per-sweep measurement")
    ap.add_argument("--plain-numba", action="store_true",
                    help="make the package see an untested numba version, so that it compiles with numba "
                         "as shipped (no link-only or config_hash overrides): what dropping them would cost")
    ap.add_argument("--repeats", type=int, default=3, help="speed: best of this many runs")
    ap.add_argument("--cart-steps", type=int, default=100_000, help="speed: MH steps per CART timing run")
    ap.add_argument("--bart-sweeps", type=int, default=200, help="speed: sweeps per BART timing run")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per process")
    ap.add_argument("--out", default=None, help="also write the markdown here and the raw records as .json")
    args = ap.parse_args(argv)

    sources = args.source or [f"current={REPO}"]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m.partition(":")[0] not in SAMPLERS]
    if bad:
        ap.error(f"unknown model: {', '.join(bad)}; choose from {', '.join(SAMPLERS)}")
    records = []
    for item in sources:
        label, _, path = item.partition("=")
        if not path:
            ap.error(f"--source wants label=DIR, got {item!r}")
        # --separate: every model in a fresh pair of processes with a cache of its own, so that each
        # row is that model's first fit with nothing compiled before it
        groups = [[m] for m in models] if args.separate else [models]
        for group in groups:
            rec = measure(label, Path(path).resolve(), group, args.samplers, args)
            records.append(rec)
            print(json.dumps(rec), flush=True)
    # After the run, so that its load averages span it.
    seeds = FIT_SEEDS + ("" if args.no_speed else SPEED_SEEDS)
    header = _provenance.header(seeds, argv=[__file__, *(argv if argv is not None else sys.argv[1:])],
                                run_note="the package measured is each --source's, the commit is this script's")
    header = [line for line in header if line]  # report() puts the blank line after it
    text = report(records, header)
    print(text)
    if args.out:
        from _tables import write_atomic

        write_atomic(args.out, text)
        write_atomic(Path(args.out).with_suffix(".json"), json.dumps({"header": header, "records": records},
                                                                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
