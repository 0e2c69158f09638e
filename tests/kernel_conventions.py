"""Checks of the compiled code's conventions that several test modules apply to their own fits.

* ``record_helper_calls``: fitting, prediction and the posterior call only ``kernel`` functions from
  Python; a ``helper`` called from Python runs its in-memory twin, which is compiled again in
  every process (``_kernels/jit.py``).
* ``nrt_balance``: numba counts every array (meminfo) it makes or adopts; a borrowed array kept by
  a new reference that is never released (or released twice) leaves the counts unequal once the
  objects that hold them are gone.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from bartpy_suite._kernels import jit


def record_helper_calls(monkeypatch) -> list[str]:
    """Start recording the qualified names of the helpers called from Python (until the
    ``monkeypatch`` fixture undoes it); returns the list the names are appended to."""
    calls: list[str] = []
    original = jit.HelperDispatcher.__call__

    def recording(self, *args, **kwargs):
        calls.append(self.py_func.__qualname__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(jit.HelperDispatcher, "__call__", recording)
    return calls


def nrt_balance(work: Callable[[], None]) -> tuple[int, int]:
    """``(made, released)``: the arrays numba made or adopted while ``work()`` ran and those it
    released by the time a garbage collection after it ends. ``work`` must drop every object it
    creates (return nothing that holds arrays)."""
    from numba.core.runtime import _nrt_python as nrt

    was_enabled = nrt.memsys_stats_enabled()
    nrt.memsys_enable_stats()
    try:
        gc.collect()
        before = (nrt.memsys_get_stats_mi_alloc(), nrt.memsys_get_stats_mi_free())
        work()
        gc.collect()
        return (nrt.memsys_get_stats_mi_alloc() - before[0], nrt.memsys_get_stats_mi_free() - before[1])
    finally:
        if not was_enabled:
            nrt.memsys_disable_stats()
