"""Run one benchmark worker in a child process and measure it from outside: its exit code, its
wall time and its peak resident memory (``ru_maxrss`` of the child, which the parent reads from
``os.wait4``; a worker cannot report its own peak if it is killed for lack of memory)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import NamedTuple


class Measured(NamedTuple):
    """What the parent saw of one child: exit code (negative: killed by that signal), wall
    seconds from start to exit, and peak resident memory in MB."""

    code: int
    wall_s: float
    peak_mb: float


def run_measured(cmd: list[str], env: dict[str, str], log_path: str) -> Measured:
    """Run ``cmd`` with ``env``, its stdout and stderr to ``log_path``; wait for it and measure it.

    A KeyboardInterrupt kills the child before it propagates, so no worker outlives its parent.
    """
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            proc.kill()
            raise
    return Measured(os.waitstatus_to_exitcode(status), time.perf_counter() - t0, usage.ru_maxrss / 1024.0)
