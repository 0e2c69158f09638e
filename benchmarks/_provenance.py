"""The provenance header every benchmark report starts with (issue 28, "Every claim from one command").

A results file in ``benchmarks/results/`` must say, in its first lines, the one command that
regenerates it, the seeds, the machine, and the date and commit of the run
(``tests/test_results_headers.py`` checks the command, seeds and machine). The scripts build that
header here, from what they were actually run with, so that it cannot drift from the run:

* the command is rebuilt from ``sys.argv`` (the script's path made relative to the repository
  root, every argument quoted for the shell), so the flags in the header are the settings of the run;
* the machine is read from this process (architecture, CPU model, logical CPUs, OS, Python and the
  versions of numpy and numba) with the 1-minute load average when the script started and when the
  header was written, since the host is shared and timings depend on it;
* the commit is ``git rev-parse --short HEAD`` of the checkout holding the script, marked when the
  package or the benchmark scripts have uncommitted changes (the results folder does not count: it
  is what the scripts write).

The seeds cannot be read from outside the run: each script states them in words.

A results file written before its script wrote this header carries one added by hand, in the same
form, from the facts of the run that made it (the commit that added the file and its message, the
JSON beside it, its own text), ending with a line such as "Header added on 2026-11-27 from the
run's record (commit X, ...); the numbers below are that run's." A fact the record does not give
is written "not recorded", never guessed.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _load() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# Taken when a script imports this module, i.e. when its run starts: the header is written at the
# end, and both loads say how much the timings in between can be trusted on a shared host.
LOAD_AT_START = _load()


def _version(package: str) -> str:
    """Installed version of ``package`` without importing it ('not installed' when absent)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``, else '?'."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine(extra: Sequence[str] = (), load: bool = True) -> str:
    """One line naming this machine and the software versions that set its speed.

    Parameters
    ----------
    extra
        Further installed packages whose versions matter to the report (peers such as
        ``"stochtree"``); each is listed as ``name version``.
    load
        Whether to append the load averages (leave it out for a header written before the run).

    Returns
    -------
    str
        E.g. ``"x86_64, AMD EPYC 9B14, 2 logical CPUs, Linux 6.1, Python 3.11.7, numpy 2.4.6,
        numba 0.68.1; 1-minute load average 3.2 at the start, 4.0 at the end"`` (start: when the
        script imported this module; end: now).
    """
    packages = ["numpy", "numba", *extra]
    versions = ", ".join(f"{name} {_version(name)}" for name in packages)
    text = (f"{platform.machine()}, {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, {versions}")
    now = _load()
    if load and LOAD_AT_START is not None and now is not None:
        text += f"; 1-minute load average {LOAD_AT_START:.1f} at the start, {now:.1f} at the end"
    return text


def commit() -> str:
    """Short hash of the checkout's HEAD, marked when the package or the benchmark scripts differ from it.

    Returns ``"not recorded (not a git checkout)"`` when git cannot tell.
    """
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=REPO, check=True).stdout.strip()
        # benchmarks/results/ is what the scripts write; a change there is not a change of the code run.
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "bartpy_suite", "benchmarks",
                                ":!benchmarks/results"], capture_output=True, text=True, cwd=REPO,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not recorded (not a git checkout)"
    return head + (" with uncommitted changes in bartpy_suite/ or benchmarks/" if dirty else "")


def command(argv: Sequence[str] | None = None, env: Sequence[str] = ()) -> str:
    """The shell command that reruns this script with the arguments it was given.

    Parameters
    ----------
    argv
        The script's path and arguments (default ``sys.argv``). The path is made relative to the
        repository root when it lies inside it, so the command works from any checkout.
    env
        Names of environment variables that set the script's options; those set in this process
        are put before the command as ``NAME=value``.

    Returns
    -------
    str
        E.g. ``"PYTHONPATH=$PWD python3 benchmarks/pg_friedman.py --sizes 1000"``, to be run from the
        repository root (``PYTHONPATH=$PWD`` makes the checkout's own package the one imported).
    """
    args = list(sys.argv if argv is None else argv)
    script = Path(args[0]).resolve()
    try:
        shown = script.relative_to(REPO).as_posix()
    except ValueError:
        shown = args[0]
    settings = [f"{name}={shlex.quote(os.environ[name])}" for name in env if name in os.environ]
    return " ".join([*settings, "PYTHONPATH=$PWD python3", shlex.join([shown, *args[1:]])])


def now_utc() -> str:
    """The current UTC time as ``YYYY-MM-DD HH:MM UTC``."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def header(seeds: str, settings: str | None = None, argv: Sequence[str] | None = None,
           extra_packages: Sequence[str] = (), run_note: str | None = None, env: Sequence[str] = ()) -> list[str]:
    """The provenance lines that follow a report's title (a markdown list, then a blank line).

    Parameters
    ----------
    seeds
        The seeds of the run in words, e.g. ``"data seeds 1000 D + 0..4, sampler seed 1"``, or
        ``"no random draws are compared (timings only)"`` where that is the truth.
    settings
        The settings the command line does not show (the script's fixed values), if any.
    argv
        The command line to report (default ``sys.argv``).
    env
        Environment variables that set the script's options (see `command`).
    extra_packages
        Further packages whose versions belong in the machine line.
    run_note
        Anything else about the run (e.g. that it resumed earlier runs' records).

    Returns
    -------
    list of str
        Lines starting ``- Command:``, ``- Settings:`` (if given), ``- Seeds:``, ``- Machine:`` and
        ``- Run:``, then an empty line.
    """
    lines = [f"- Command (from the repository root): `{command(argv, env)}`"]
    if settings:
        lines.append(f"- Settings: {settings}")
    lines.append(f"- Seeds: {seeds}")
    lines.append(f"- Machine: {machine(extra_packages)}")
    run = f"- Run: {now_utc()}, commit {commit()}"
    if run_note:
        run += f"; {run_note}"
    lines += [run, ""]
    return lines
