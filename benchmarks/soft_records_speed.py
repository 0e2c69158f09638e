"""CPU seconds per RJHMC-Tree iteration before and after the soft tree's typed kernel records
(issue 29, "Kernel interface": ``_kernels/soft_records.py``), measured side by side in one run;
writes ``benchmarks/results/soft_records_speed.md``.

The setting and the method are those of ``soft_tree_speed.py`` (whose functions this reuses):
``bps.soft_tree("class ~ .")`` with ``hmc_dfi`` and the package's default options on the 478
breast-cancer training rows of ``rjhmc_tables.split``, one chain, 50 tune + 50 kept iterations, one
thread, each version in its own subprocess after an untimed compiling fit, timed with
``time.process_time``. "Before" is the commit ``SPEED_BASE`` (default fe86a37, the base of the
records), extracted with ``git archive``; "after" is this checkout. The draws are bit-identical
between the two (``draw_fingerprints.py``), so the two versions do the same work and the tree
sizes agree.

Run: ``PYTHONPATH=. python3 benchmarks/soft_records_speed.py`` (about 2 CPU minutes per seed and
version; ``SPEED_SEEDS=1,2`` picks the seeds, default 1).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soft_tree_speed import DRAWS, ROOT, TUNE, extract, run_version  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "soft_records_speed.md"


def main() -> None:
    base = os.environ.get("SPEED_BASE", "fe86a37")
    seeds = [int(s) for s in os.environ.get("SPEED_SEEDS", "1").split(",")]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    t0 = time.time()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        extract(base, Path(tmp))
        before = run_version(Path(tmp), seeds)
    after = run_version(ROOT, seeds)
    load1 = os.getloadavg()
    lines = ["| seed | before: CPU s / iteration | after: CPU s / iteration | after / before | leapfrogs / kept "
             "iteration (before, after) | mean leaves (before, after) |", "|---|---|---|---|---|---|"]
    for b, a in zip(before, after):
        lines.append(f"| {b['seed']} | {b['cpu_per_iter']:.3f} | {a['cpu_per_iter']:.3f} | "
                     f"{a['cpu_per_iter'] / b['cpu_per_iter']:.2f} | {b['leapfrog_kept']:.0f}, "
                     f"{a['leapfrog_kept']:.0f} | {b['leaves']:.2f}, {a['leaves']:.2f} |")
    text = f"""# Soft tree speed before and after the typed kernel records (issue 29)

Produced by `PYTHONPATH=. python3 benchmarks/soft_records_speed.py` (module docstring: method).
`bps.soft_tree("class ~ .", sampler="hmc_dfi")` with the default options on the {before[0]['rows']}
breast-cancer training rows of `rjhmc_tables.split`, one chain, {TUNE} tune + {DRAWS} kept
iterations, one thread, seeds {seeds}; CPU seconds per iteration (`time.process_time` of the fit /
{TUNE + DRAWS}), numba compilation excluded. Before: commit {base} (`git archive`); after: commit
{head} (this checkout, uncommitted changes included if any). Machine: {platform.machine()},
{os.cpu_count()} logical CPUs shared with other sessions (load average {load0[0]:.1f} at the start,
{load1[0]:.1f} at the end; {time.time() - t0:.0f} wall s for the whole run). The draws of the two
versions are identical, so the leapfrog counts and tree sizes must agree; a ratio within a few
per cent of 1 is noise on a shared machine.

{chr(10).join(lines)}
"""
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
