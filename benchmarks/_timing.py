"""Seconds spent sampling: the package's chain runner timed from outside the package."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


@contextlib.contextmanager
def runner_seconds() -> Iterator[dict]:
    """Within the block, add the CPU seconds (``time.process_time``: all threads) and wall seconds of
    every call of the chain runner (``TreeModel._run``) to the yielded ``{"cpu", "wall"}``: the
    sampling alone, without the formula, binning and posterior assembly around it. Reset the
    entries to 0 to drop what a warm-up fit spent."""
    from bartpy_suite.models import _base

    spent = {"cpu": 0.0, "wall": 0.0}
    original = _base.TreeModel._run

    def timed(self, *args, **kwargs):  # whatever the runner's signature is (it has changed before)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent["cpu"] += time.process_time() - cpu
            spent["wall"] += time.perf_counter() - wall

    _base.TreeModel._run = timed
    try:
        yield spent
    finally:
        _base.TreeModel._run = original
