"""CPU seconds per RJHMC-Tree iteration before and after the soft-tree speed work (issue 28),
measured side by side in one run; writes ``benchmarks/results/soft_tree_speed.md``.

Setting (the issue's): ``bps.soft_tree("class ~ .")`` with ``hmc_dfi`` and the package's default
options, on the 478 breast-cancer training rows of ``rjhmc_tables.split`` (683 complete rows, a
seeded 70% split), one chain, 50 tune + 50 kept iterations, one thread. Each version runs in its
own subprocess with ``PYTHONPATH`` pointing at it: "before" is the baseline commit
(``SPEED_BASE``, default ac35070, extracted with ``git archive`` into a temporary directory, so
its numba cache is its own), "after" this checkout. In each subprocess a small fit compiles the
kernels first (not timed); then the fit is repeated with seeds 1, 2, 3 (``SPEED_SEEDS``), each
timed with ``time.process_time`` (CPU seconds of the process: the machine is shared, so wall time
would measure the other sessions). The soft tree's size differs between seeds, and with it the
cost, so the seeds are part of the measurement.

Run: ``PYTHONPATH=. python3 benchmarks/soft_tree_speed.py`` (about 7 CPU minutes, mostly the
baseline; ``SPEED_REUSE_BEFORE=1`` reuses the baseline rows stored by the previous run in
``results/soft_tree_speed.json``, which the output then says). numba caches a kernel by its own
source file only: after editing a helper in ``_kernels/soft_tree.py`` or ``nuts.py``, touch
``_kernels/rjhmc.py`` (or clear ``__pycache__``) or the chain keeps the old code.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "soft_tree_speed.md"
TUNE, DRAWS = 50, 50
REUSED = ("; the baseline rows reused from the previous run of this script (SPEED_REUSE_BEFORE=1, "
          "results/soft_tree_speed.json)")

CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, {bench!r})
import bartpy_suite as bps
from rjhmc_tables import split
warnings.simplefilter("ignore")
train, _ = split("breast_cancer")
kw = dict(sampler="hmc_dfi", chains=1, progress=False, threads=1, check_mixing=False)
bps.soft_tree("class ~ .", data=train.iloc[:60], tune=2, draws=2, seed=1, **kw)  # compile, not timed
rows = []
for seed in {seeds!r}:
    t0 = time.process_time()
    fit = bps.soft_tree("class ~ .", data=train, tune={tune}, draws={draws}, seed=seed, **kw)
    cpu = time.process_time() - t0
    ss = fit.sample_stats
    rows.append(dict(seed=seed, cpu_per_iter=cpu / ({tune} + {draws}), rows=len(train),
                     leapfrog_kept=float(ss["n_leapfrog"].values.mean()),
                     depth_kept=float(ss["tree_depth"].values.mean()),
                     leaves=float(fit.posterior["n_leaves"].values.mean())))
print("RESULT" + json.dumps(rows))
"""


def run_version(path: Path, seeds: list[int]) -> list[dict]:
    """Run the timed fits with the package at ``path`` first on the import path."""
    code = CHILD.format(bench=str(ROOT / "benchmarks"), seeds=seeds, tune=TUNE, draws=DRAWS)
    env = dict(os.environ, PYTHONPATH=str(path), NUMBA_NUM_THREADS="1")
    # cwd = the version's own root: ``python -c`` puts the working directory first on the import path
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=str(path))
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def extract(commit: str, dest: Path) -> None:
    """The package (and its data) at ``commit``, without touching any checkout."""
    tar = dest / "base.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit, "bartpy_suite", "data"], stdout=fh, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(dest, filter="data")


def main() -> None:
    base = os.environ.get("SPEED_BASE", "ac35070")
    seeds = [int(s) for s in os.environ.get("SPEED_SEEDS", "1,2,3").split(",")]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    t0 = time.time()
    load0 = os.getloadavg()
    raw = OUT.with_suffix(".json")
    stored = json.loads(raw.read_text()) if raw.exists() else {}
    reuse = os.environ.get("SPEED_REUSE_BEFORE") == "1" and stored.get("base") == base and stored.get("seeds") == seeds
    if reuse:  # the baseline's rows of an earlier run of this script (said in the output)
        before = stored["before"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            extract(base, Path(tmp))
            before = run_version(Path(tmp), seeds)
    after = run_version(ROOT, seeds)
    raw.write_text(json.dumps({"base": base, "seeds": seeds, "head": head, "before": before, "after": after},
                              indent=1))
    load1 = os.getloadavg()
    lines = ["| seed | before: CPU s / iteration | after: CPU s / iteration | speed-up | before: leapfrogs / kept "
             "iteration | after | before: mean leaves | after |", "|---|---|---|---|---|---|---|---|"]
    for b, a in zip(before, after):
        lines.append(f"| {b['seed']} | {b['cpu_per_iter']:.3f} | {a['cpu_per_iter']:.3f} | "
                     f"{b['cpu_per_iter'] / a['cpu_per_iter']:.1f}x | {b['leapfrog_kept']:.0f} | "
                     f"{a['leapfrog_kept']:.0f} | {b['leaves']:.2f} | {a['leaves']:.2f} |")
    mb = sum(r["cpu_per_iter"] for r in before) / len(before)
    ma = sum(r["cpu_per_iter"] for r in after) / len(after)
    lines.append(f"| mean | {mb:.3f} | {ma:.3f} | {mb / ma:.1f}x | | | | |")
    text = f"""# Soft tree (RJHMC-Tree) speed: CPU seconds per iteration, before and after

Produced by `PYTHONPATH=. python3 benchmarks/soft_tree_speed.py` (module docstring: method). Setting:
`bps.soft_tree("class ~ .", sampler="hmc_dfi")` with the package's default options (before: warmup
100 per intermediate NUTS run, two runs every iteration; after: warmup 20, one run for a stay after
tune), on the {before[0]['rows']} breast-cancer training rows of `rjhmc_tables.split`, one chain,
{TUNE} tune + {DRAWS} kept iterations, one thread, seeds {seeds}; CPU seconds per iteration
(`time.process_time` of the fit / {TUNE + DRAWS}), numba compilation excluded. Before: commit
{base} (extracted with `git archive`); after: commit {head} (this checkout, uncommitted changes
included if any). Machine: {platform.machine()}, {os.cpu_count()} logical CPUs shared with other
sessions (load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; {time.time() - t0:.0f}
wall s for the whole run{REUSED if reuse else ""}). The draws differ between the two versions
(the defaults changed), so
the tree sizes differ too: they are reported beside the times.

{chr(10).join(lines)}
"""
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
