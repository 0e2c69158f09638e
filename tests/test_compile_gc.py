"""``_kernels/compile_gc.py``: the collector's threshold is raised while compiling and the
user's thresholds come back afterwards, with nested and concurrent compilations."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from bartpy_suite._kernels import compile_gc
from bartpy_suite._kernels.jit import kernel


@pytest.fixture
def user_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(900, 7, 5)
    yield (900, 7, 5)
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after_nesting(user_thresholds):
    with compile_gc.fewer_collections():
        assert gc.get_threshold() == (compile_gc.THRESHOLD, 7, 5)
        with compile_gc.fewer_collections():
            assert gc.get_threshold() == (compile_gc.THRESHOLD, 7, 5)
        assert gc.get_threshold() == (compile_gc.THRESHOLD, 7, 5)  # the outer block still runs
    assert gc.get_threshold() == user_thresholds


def test_restored_after_an_error(user_thresholds):
    with pytest.raises(RuntimeError, match="compile failed"):
        with compile_gc.fewer_collections():
            raise RuntimeError("compile failed")
    assert gc.get_threshold() == user_thresholds


def test_collection_switched_off_stays_off(user_thresholds):
    gc.set_threshold(0)
    with compile_gc.fewer_collections():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0


def test_overlapping_blocks_on_two_threads_restore_once(user_thresholds):
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with compile_gc.fewer_collections():
            first_in.set()
            second_in.wait(5)
        seen["after first"] = gc.get_threshold()
        first_out.set()

    def second():
        first_in.wait(5)
        with compile_gc.fewer_collections():
            second_in.set()
            first_out.wait(5)
            seen["second, first done"] = gc.get_threshold()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen["after first"][0] == compile_gc.THRESHOLD  # the second block is still compiling
    assert seen["second, first done"][0] == compile_gc.THRESHOLD
    assert gc.get_threshold() == user_thresholds


def test_a_kernel_compiles_inside_the_block(user_thresholds, monkeypatch):
    """Recorded in numba's own ``compile``, which a kernel's first call reaches whether it compiles
    or loads from the cache (numba's compile event fires only for the former)."""
    seen = []
    numba_compile = CPUDispatcher.compile

    def recording(self, sig):
        seen.append(gc.get_threshold())
        return numba_compile(self, sig)

    monkeypatch.setattr(CPUDispatcher, "compile", recording)

    @kernel
    def total(x):
        s = 0.0
        for v in x:
            s += v
        return s

    assert total(np.arange(4.0)) == 6.0
    assert seen and seen[0] == (compile_gc.THRESHOLD, 7, 5)
    assert gc.get_threshold() == user_thresholds
