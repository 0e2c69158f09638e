"""Row-block passes of one BART chain on several threads (``_kernels/row_parallel.py``, issue 32).

The passes are checked against numpy on random data, on 1 and 2 threads (bit-identical to each
other; the leaf sums and the sum of squares equal to numpy's to 1e-12 relative: both add the
same ~10^3 numbers of order 1 in different orders, so they agree to a few ulps of the total,
far inside 1e-12); then whole fits: the same seed gives the same posterior on 1 and 2 threads per
chain with the block layout forced on small data (``BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS``), and
with a shared row permutation the same draws as with one permutation per tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numba
import numpy as np
import pytest

import bartpy_suite as bps
from bartpy_suite._kernels import backfit, row_parallel, tree
from bartpy_suite._kernels.row_parallel import (
    block_layout,
    exchange_fits_blocks,
    map_leaves_blocks,
    n_blocks,
    set_threads,
    sum_squares_blocks,
)
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models import _runner
from bartpy_suite.samplers import forest as forest_module

CAPACITY = 15


@pytest.fixture
def threads():
    """Set this thread's numba thread count; restored afterwards."""
    before = numba.get_num_threads()
    yield set_threads
    numba.set_num_threads(before)


def _leaf_layout(rng, n, n_leaves):
    """A tree-like node layout: node 0 internal, nodes 1..n_leaves leaves whose segments
    ``start``/``end`` partition [0, n) in node order; ``leaf_in`` a random leaf per row."""
    var = np.full(CAPACITY, 0, dtype=np.int32)
    var[1:n_leaves + 1] = tree.LEAF
    leaf_in = rng.integers(1, n_leaves + 1, size=n).astype(np.uint8)
    counts = np.bincount(leaf_in, minlength=CAPACITY)
    end = np.cumsum(counts).astype(np.int32)
    start = (end - counts).astype(np.int32)
    return var, start, end, leaf_in


def test_constants_match_the_backfitting_module():
    assert row_parallel._N_ACC == backfit.N_ACC
    assert row_parallel._LEAF == tree.LEAF


def test_blocks_depend_on_rows_only():
    assert n_blocks(1) == 1
    assert n_blocks(40) == 10
    assert n_blocks(10 ** 6) == row_parallel.MAX_BLOCKS
    sums, cursor = block_layout(1000, CAPACITY)
    assert sums.shape == (backfit.N_ACC * (1 + n_blocks(1000)), CAPACITY)
    assert cursor.shape == (CAPACITY * (1 + n_blocks(1000)),)


@pytest.mark.parametrize("rebuild", [False, True], ids=["own_perm", "shared_perm"])
@pytest.mark.parametrize("n", [7, 1003])
def test_exchange_matches_numpy_on_one_and_two_threads(threads, n, rebuild):
    rng = np.random.default_rng(n)
    var, start, end, leaf_in = _leaf_layout(rng, n, 5)
    leaf_out = rng.integers(1, 4, size=n).astype(np.uint8)
    value_out = rng.normal(size=CAPACITY)
    value_in = rng.normal(size=CAPACITY)
    resid0 = rng.normal(size=n)
    expected_resid = resid0 - value_out[leaf_out] + value_in[leaf_in]
    expected_sums = np.bincount(leaf_in, weights=expected_resid, minlength=CAPACITY)
    results = []
    for count in (1, 2):
        threads(count)
        resid = resid0.copy()
        sums, cursor = block_layout(n, CAPACITY)
        sums[:] = np.nan  # every entry read must have been written
        cursor[:CAPACITY] = np.where(var == tree.LEAF, start, 0)  # backfit.leaf_cursors
        perm = np.full(n if rebuild else 0, -1, dtype=np.int32)
        exchange_fits_blocks(resid, leaf_out, value_out, leaf_in, value_in, CAPACITY, sums, perm, cursor)
        np.testing.assert_array_equal(resid, expected_resid)  # the same operations per row
        total = sums[:backfit.N_ACC].sum(axis=0)
        np.testing.assert_allclose(total, expected_sums, rtol=1e-12, atol=1e-12 * np.abs(expected_resid).sum())
        if rebuild:
            for leaf in range(1, 6):
                np.testing.assert_array_equal(perm[start[leaf]:end[leaf]], np.flatnonzero(leaf_in == leaf))
        results.append((resid, sums[:backfit.N_ACC].copy(), perm))
    for a, b in zip(results[0], results[1]):
        np.testing.assert_array_equal(a, b)  # bit-identical on 1 and 2 threads


def test_exchange_without_incoming_tree_only_subtracts(threads):
    rng = np.random.default_rng(3)
    n = 50
    leaf_out = rng.integers(0, 3, size=n).astype(np.uint8)
    value_out = rng.normal(size=CAPACITY)
    resid = rng.normal(size=n)
    expected = resid - value_out[leaf_out]
    sums, cursor = block_layout(n, CAPACITY)
    threads(2)
    exchange_fits_blocks(resid, leaf_out, value_out, leaf_out[:0], value_out[:0], 0, sums, np.zeros(0, np.int32),
                         cursor)
    np.testing.assert_array_equal(resid, expected)


@pytest.mark.parametrize("n", [5, 999])
def test_map_leaves_matches_numpy(threads, n):
    rng = np.random.default_rng(n)
    var, start, end, _ = _leaf_layout(rng, n, 4)
    perm = rng.permutation(n).astype(np.int32)
    expected = np.zeros(n, dtype=np.uint8)
    for leaf in range(1, 5):
        expected[perm[start[leaf]:end[leaf]]] = leaf
    for count in (1, 2):
        threads(count)
        leaf_of = np.zeros(n, dtype=np.uint8)
        map_leaves_blocks(var, start, end, perm, CAPACITY, leaf_of, n_blocks(n))
        np.testing.assert_array_equal(leaf_of, expected)


def test_sum_of_squares_matches_numpy(threads):
    resid = np.random.default_rng(4).normal(size=2001)
    got = []
    for count in (1, 2):
        threads(count)
        got.append(sum_squares_blocks(resid, n_blocks(resid.size)))
    assert got[0] == got[1]
    assert got[0] == pytest.approx(float(np.sum(resid * resid)), rel=1e-12)


def test_threshold_setting(monkeypatch):
    monkeypatch.delenv(forest_module.ROW_BLOCKS_ENV, raising=False)
    assert not forest_module.uses_row_blocks(forest_module.ROW_BLOCKS_MIN_ROWS - 1)
    assert forest_module.uses_row_blocks(forest_module.ROW_BLOCKS_MIN_ROWS)
    monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, "10")
    assert forest_module.uses_row_blocks(10) and not forest_module.uses_row_blocks(9)
    monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, "many")
    with pytest.raises(ArgumentError, match="BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS='many'"):
        forest_module.uses_row_blocks(10)


def test_threads_per_chain(monkeypatch):
    monkeypatch.setattr(_runner, "available_threads", lambda: 8)
    assert _runner.threads_per_chain(1) == (1, 8)
    assert _runner.threads_per_chain(4) == (4, 2)
    assert _runner.threads_per_chain(16) == (16, 1)
    assert _runner.threads_per_chain(2, 5) == (2, 2)
    assert _runner.threads_per_chain(3, 1) == (1, 1)
    assert _runner.threads_per_chain(1, 1) == (1, 1)
    # numba's workqueue layer aborts when two threads enter it: one thread per chain then
    monkeypatch.setattr(_runner, "running_layer", lambda: "workqueue")
    assert _runner.threads_per_chain(4) == (4, 1)
    assert _runner.threads_per_chain(1) == (1, 8)
    monkeypatch.setattr(_runner, "running_layer", lambda: "omp")
    assert _runner.threads_per_chain(4) == (4, 2)


def test_runner_sets_the_count_in_each_worker_only():
    main_before = numba.get_num_threads()
    seen = {}

    def run_chunk(chain, index, first, n_iter):
        seen[index] = (numba.get_num_threads(), threading.get_ident())

    _runner.run_chains([None], 1, run_chunk, threads=2, progress=False)
    assert seen[0][0] == min(2, numba.config.NUMBA_NUM_THREADS)
    assert seen[0][1] != threading.get_ident()
    _runner.run_chains([None, None], 1, run_chunk, threads=2, progress=False)
    assert [seen[i][0] for i in (0, 1)] == [1, 1]
    assert numba.get_num_threads() == main_before


def _fit(threads, **kw):
    rng = np.random.default_rng(11)
    n = 120
    x = rng.uniform(size=(n, 3))
    y = 2 * x[:, 0] + np.sin(4 * x[:, 1]) + rng.normal(0, 0.3, n)
    model = bps.BART(trees=8, sampler=kw.pop("sampler", "grow_prune"), chains=1, draws=15, tune=15, seed=7,
                     threads=threads, progress=False, check_mixing=False, log_likelihood=False, **kw)
    return model.fit(x, y)


def _arrays(fit):
    out = {}
    for group in ("posterior", "sample_stats", "trees"):
        if group in fit.idata.children:
            ds = fit.idata[group].to_dataset()
            out.update({f"{group}/{k}": np.asarray(ds[k].values) for k in ds.data_vars})
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs numba to allow 2 threads")
@pytest.mark.parametrize("sampler", ["grow_prune", "cgm"])
def test_same_draws_on_one_and_two_threads(monkeypatch, sampler):
    monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, "1")  # 120 rows: 30 blocks
    one = _arrays(_fit(1, sampler=sampler))
    two = _arrays(_fit(2, sampler=sampler))
    _assert_same(one, two)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs numba to allow 2 threads")
def test_shared_perm_gives_the_same_draws_by_blocks(monkeypatch):
    """The block rebuild of a shared row permutation equals each tree's own (module docstring of
    ``backfit.py``), so forcing the shared layout leaves the draws unchanged."""
    monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, "1")
    own = _arrays(_fit(2))
    monkeypatch.setattr(forest_module, "PER_TREE_PERM_BYTES", 0)
    shared = _arrays(_fit(2))
    _assert_same(own, shared)


def test_layout_follows_the_threshold(monkeypatch):
    """Below the threshold a chain keeps the sequential layout (and today's draws)."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=40)
    problem_sums = {}
    for setting in ("1", "1000"):
        monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, setting)
        chains = []

        def capture(self, built, problem=None, chains=chains):
            chains.extend(built)
            raise KeyboardInterrupt

        monkeypatch.setattr(bps.BART, "_run", capture)
        with pytest.raises(KeyboardInterrupt):
            bps.BART(trees=2, chains=1, progress=False).fit(rng.uniform(size=(40, 2)), y)
        problem_sums[setting] = chains[0].state.sums.shape[0], chains[0].state.blocks
    assert problem_sums == {"1": (backfit.N_ACC * (1 + n_blocks(40)), n_blocks(40)), "1000": (backfit.N_ACC, None)}


_FRESH_PROCESS = """
import os, sys
import numpy as np
from numba.np.ufunc import parallel
from bartpy_suite._kernels import backfit, row_parallel

blocked = (row_parallel.exchange_fits_blocks, row_parallel.map_leaves_blocks, row_parallel.sum_squares_blocks)
before = sys.argv[1] or None  # the user's OMP_WAIT_POLICY ("" for unset)
assert os.environ.get("OMP_WAIT_POLICY") == before, "importing the kernels changed OMP_WAIT_POLICY"
# the backfitting passes of a chain without row blocks (BackfitState.blocks None)
resid = np.arange(6.0)
assert backfit.sum_of_squares(resid, None) == 55.0
backfit.exchange_fits(resid, np.zeros(6, np.uint8), np.zeros(4), np.zeros(6, np.uint8), np.ones(4), 2,
                      np.zeros((4, 4)), np.zeros(0, np.int32), np.zeros(4, np.int64), None)
assert resid.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
assert [d.signatures for d in blocked] == [[], [], []], "a chain without row blocks compiled the block passes"
assert not parallel._is_initialized, "a chain without row blocks started numba's threading layer"
from bartpy_suite.models import _runner
assert _runner.threads_per_chain(2, 4) == (2, 2)
assert not parallel._is_initialized, "sharing threads among chains started numba's threading layer"
# running chains (each worker sets its thread count) must not start it either: numba's own
# thread-count calls would start it without the waiting policy of start_threads
_runner.run_chains([0, 1], 3, lambda chain, index, first, n: None, threads=4, progress=False)
assert not parallel._is_initialized, "running chains without row blocks started numba's threading layer"
# the first chain with row blocks starts the threading layer; the environment is left as it was
row_parallel.block_layout(100, 4)
assert parallel._is_initialized
assert os.environ.get("OMP_WAIT_POLICY") == before, os.environ.get("OMP_WAIT_POLICY")
assert backfit.sum_of_squares(resid, 2) == 91.0
print("OK", row_parallel.threading_layer())
"""


@pytest.mark.parametrize("policy", [None, "ACTIVE"], ids=["unset", "user_set"])
def test_fresh_process_compiles_and_starts_nothing_without_row_blocks(policy):
    """In a fresh process (nothing compiled or started by other tests): the passes of a chain
    without row blocks are compiled without the block passes (numba prunes the ``blocks is None``
    branches), no thread pool is started, and the first block layout leaves ``OMP_WAIT_POLICY``
    as the user had it (unset, or set)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_FRESH_PROCESS), policy or ""], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("OK")


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2])
def test_exact_bart_posterior_by_row_blocks(monkeypatch, threads, count):
    """One tree, sigma fixed, 18 rows in 4 row blocks: the tree distribution still matches the
    enumerated posterior (``test_bart_exact``'s test and tolerances), with the serial block
    driver (1 thread) and the parallel one (2 threads)."""
    import test_bart_exact

    monkeypatch.setenv(forest_module.ROW_BLOCKS_ENV, "1")
    threads(count)
    assert n_blocks(18) == 4
    test_bart_exact.test_one_tree_fixed_sigma_matches_exact_posterior("grow_prune", False)
