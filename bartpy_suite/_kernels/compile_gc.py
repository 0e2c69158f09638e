"""Fewer garbage collections while numba compiles.

Compiling allocates millions of small, long-lived objects (numba's IR, types and llvmlite's IR).
With Python's default threshold a young-generation collection runs every 700 net allocations,
and every tenth and hundredth of them traverses the older generations too, which by then hold
all of that. A first CART fit spent 2.2-2.6 of its 17-21 CPU s in the collector (about 2,000
collections, timed with ``gc.callbacks``; issue 11, section 1, ``benchmarks/results/compile_time.md``).
Inside ``fewer_collections`` the young-generation threshold is raised to ``THRESHOLD`` (the older
generations keep their ratios). The whole process then makes about 400 collections, most of them
outside compilation, in 1.0-1.4 s. The user's thresholds are restored when the last compilation
in the process ends. Nothing is disabled: cyclic garbage is
still collected, only in larger batches.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

__all__ = ["THRESHOLD", "fewer_collections"]

#: Young-generation threshold while compiling (Python's default is 700).
THRESHOLD = 50_000

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def fewer_collections():
    """Raise the collector's young-generation threshold for the block (nested and concurrent
    blocks share one raise; the thresholds found on entry to the outermost come back at its end)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            if _saved[0] != 0:  # 0: collection is off already; keep it so
                gc.set_threshold(max(_saved[0], THRESHOLD), *_saved[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
                _saved = None
