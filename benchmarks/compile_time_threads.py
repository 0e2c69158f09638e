"""First-fit compile time with and without the row-block passes in the kernels (issue 32, "One
chain on all cores"): does a fit that does not use the blocks pay for them?

Two source trees are extracted with ``git archive`` (``--base``, default the merge base of ``main``
and the head, so that only the head's own changes are compared while main moves on, and
``--head``, default ``HEAD``) into temporary directories, and each model's first fit is measured with
``benchmarks/compile_time.py``'s child process (a fresh interpreter, an empty ``NUMBA_CACHE_DIR``,
``NUMBA_NUM_THREADS=1``; the fit is ``chains=1, draws=5, tune=5`` on 200 simulated rows, 20 trees,
then a prediction of 5 rows, and is made again in a warm process to subtract the sampling). The
sources alternate, base then head, ``--pairs`` times per model, because the machine is shared
and its load drifts: the difference within a pair is the figure to read. The load average is
recorded before each measurement.

``--forced-blocks`` adds one cold fit of the head's BART with the row blocks forced
(``BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS=1``), what the block passes cost at compile time in a fit that
uses them (a fit above ``samplers/forest.ROW_BLOCKS_MIN_ROWS`` rows).

Run::

    python3 benchmarks/compile_time_threads.py --forced-blocks --out benchmarks/results/compile_time_threads.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import _provenance  # noqa: E402
import compile_time  # noqa: E402  (a sibling script, not a package)
from _tables import write_atomic  # noqa: E402

MODELS = ("bart", "probit", "cart:tempered")
BLOCKS_ENV = "BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS"


def extract(ref: str, into: str) -> str:
    """``git archive ref`` unpacked into ``into``; returns the commit's short hash."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return commit


def one(label: str, source: str, model: str, timeout: float) -> dict:
    """One cold + warm measurement of ``model``'s first fit from ``source`` (compile_time.measure)."""
    args = argparse.Namespace(profile=False, plain_numba=False, timeout=timeout, no_speed=True, repeats=1,
                              cart_steps=0, bart_sweeps=0)
    load = os.getloadavg()
    record = compile_time.measure(label, Path(source), [model], "default", args)
    record["load_before"] = load
    record["model"] = model
    step, again = record["cold"]["steps"][0], record["warm"]["steps"][0]["again"]
    record["compile_cpu"] = step["cpu"] - again["cpu"]
    print(json.dumps({k: record[k] for k in ("label", "model", "compile_cpu", "load_before")}), flush=True)
    return record


def report(records: list, forced: list, header: list) -> str:
    lines = ["# First-fit compile time: base against the row-block branch", ""] + header + [""]
    lines += ["## Cold compile CPU s of each model's first fit, in alternation", "",
              "*compile CPU s*: the cold fit's process CPU seconds less the same call in the warm process (its "
              "sampling and prediction). Each pair is base then head, run back to back.", "",
              "| model | pair | load before base / head | base compile CPU s | head compile CPU s | head - base |",
              "|---|---:|---|---:|---:|---:|"]
    summary = []
    for model in MODELS:
        base = [r for r in records if r["model"] == model and r["label"] == "base"]
        head = [r for r in records if r["model"] == model and r["label"] == "head"]
        diffs = []
        for k, (b, h) in enumerate(zip(base, head), 1):
            d = h["compile_cpu"] - b["compile_cpu"]
            diffs.append(d)
            lines.append(f"| {model} | {k} | {b['load_before'][0]:.1f} / {h['load_before'][0]:.1f} | "
                         f"{b['compile_cpu']:.1f} | {h['compile_cpu']:.1f} | {d:+.1f} |")
        summary.append((model, statistics.mean(diffs), min(diffs), max(diffs)))
    lines += ["", "| model | mean head - base CPU s | range over pairs |", "|---|---:|---|"]
    for model, mean, lo, hi in summary:
        lines.append(f"| {model} | {mean:+.2f} | {lo:+.1f} .. {hi:+.1f} |")
    if forced:
        lines += ["", "## A fit that uses the row blocks (head, `BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS=1`)", "",
                  "| model | load before | compile CPU s |", "|---|---:|---:|"]
        for r in forced:
            lines.append(f"| {r['model']} (row blocks) | {r['load_before'][0]:.1f} | {r['compile_cpu']:.1f} |")
    lines += ["", "## Every call (compile_time.py's table)", ""]
    table = compile_time.report(records + forced, []).split("\n")
    start = next(i for i, line in enumerate(table) if line.startswith("| source"))
    lines += [line for line in table[start:] if line]
    return "\n".join(lines) + "\n"


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=None, help="git ref of the base source tree (default: git merge-base main HEAD)")
    ap.add_argument("--head", default="HEAD", help="git ref of the changed source tree")
    ap.add_argument("--pairs", type=int, default=2, help="base/head pairs per model")
    ap.add_argument("--forced-blocks", action="store_true", help="also a head BART fit with the row blocks forced")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", default=None, help="write the markdown here and the records as .json beside it")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ct_base_") as base_dir, \
            tempfile.TemporaryDirectory(prefix="ct_head_") as head_dir:
        if args.base is None:
            args.base = subprocess.run(["git", "-C", str(REPO), "merge-base", "main", args.head], capture_output=True,
                                       text=True, check=True).stdout.strip()[:7]
        base_commit = extract(args.base, base_dir)
        head_commit = extract(args.head, head_dir)
        load = os.getloadavg()
        records, forced = [], []
        for model in MODELS:
            for _ in range(args.pairs):
                records.append(one("base", base_dir, model, args.timeout))
                records.append(one("head", head_dir, model, args.timeout))
        if args.forced_blocks:
            os.environ[BLOCKS_ENV] = "1"  # inherited by compile_time's child processes
            try:
                forced.append(one("head", head_dir, "bart", args.timeout))
            finally:
                del os.environ[BLOCKS_ENV]
    header = [line for line in _provenance.header(compile_time.FIT_SEEDS, argv=[__file__, *argv]) if line]
    header += ["", f"Sources: base = `{args.base}` at {base_commit}, head = `{args.head}` at {head_commit} "
               "(`git archive`).", "",
               f"Load average (1, 5, 15 minutes) {', '.join(f'{v:.1f}' for v in load)} at the start, "
               f"{', '.join(f'{v:.1f}' for v in os.getloadavg())} at the end; the machine is shared with other "
               "work. Compilation is single-threaded, so CPU seconds are the figure to compare on a busy machine."]
    text = report(records, forced, header)
    print(text)
    if args.out:
        out = Path(args.out)
        write_atomic(out, text)
        write_atomic(out.with_suffix(".json"), json.dumps({"header": header, "records": records, "forced": forced},
                                                          indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
