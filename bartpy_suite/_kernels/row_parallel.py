"""Row-parallel versions of the O(n) passes of a BART sweep (issue 32, "One chain on all cores").

A backfitting sweep (``backfit.py``) makes three kinds of pass over all n rows: ``exchange_fits``
once per tree (the residual moves from tree j to tree j + 1 and tree j + 1's leaf sums are
collected; with a shared ``perm`` also its rows are written back leaf by leaf), ``map_leaves`` for
each tree whose partition changed, and the sum of squared residuals of ``draw_noise``. Here each is
split over a fixed number of contiguous row blocks, ``n_blocks(n)``, a function of n alone:

* every block collects its own leaf sums (``N_ACC`` accumulators per leaf, by the row's index
  within the block, as ``backfit.exchange_fits`` does by row index) and its own squared
  residuals; the blocks' partial sums are then added in block order by one thread. The rounding
  therefore depends on n only, never on how many threads ran the blocks or in what order they
  finished: **the same seed gives the same draws with 1, 2 or 64 threads**. (They differ from
  the one-block pass of ``backfit.py`` in the last bits of the leaf sums, hence a different but
  equally valid chain; that is why the block layout is chosen by the row count,
  ``samplers/forest.py``, and small problems keep the old pass.)
* the rebuild of a shared ``perm`` is count per block and leaf, a prefix over blocks (in block
  order) from each leaf's ``start``, then a scatter of each block's rows: the same permutation as
  the sequential rebuild (each leaf's rows in row order), whatever the thread count.
* ``map_leaves`` writes every row's leaf once; split by blocks of perm positions it gives the same
  map.

Each pass exists twice, from one block body: a serial driver (``range`` over blocks, compiled
without numba's parallel machinery) and a parallel driver (``prange``, ``parallel=True``).
The public functions here (which ``backfit.py`` calls) take the parallel one when
``numba.get_num_threads()`` (thread-local, set per chain by ``models/_runner.py``) is above 1, so
a chain on one thread enters no parallel region. Both give bit-identical results
(``tests/test_row_parallel.py``).

The block layout travels in the shapes of arrays the backfitting state already has: ``sums`` has
``N_ACC * (1 + B)`` rows instead of ``N_ACC`` (rows ``N_ACC (1 + b)`` to ``N_ACC (2 + b) - 1`` are
block b's accumulators, rows 0 to ``N_ACC - 1`` the combined sums ``set_leaf_terms`` reads), and
``cursor`` has ``capacity (1 + B)`` entries (block b's counts and then its write places for leaf
``v`` at ``capacity (1 + b) + v``). What switches the passes is ``BackfitState.blocks``: None for a
chain without blocks, else B. ``backfit.py`` tests it in functions that take it as an argument
(``exchange_fits``, ``leaf_map``, ``sum_of_squares``), where numba removes a ``blocks is None``
branch before typing when the argument's type is None: a chain without blocks never types,
compiles or links anything of this module, nor starts a thread pool, and its kernels are the ones
it had before this module existed (``benchmarks/results/compile_time_threads.md``: first-fit
compile CPU s against main). A chain with blocks gets kernels of its own signature, which compile
the block passes too.

Waiting threads: numba's threading layer is process-wide and chosen once per process, in the
order ``tbb``, ``omp``, ``workqueue`` (``numba.config.THREADING_LAYER_PRIORITY``); ``tbb`` is not
installed here, so numba takes ``omp`` (GNU OpenMP). libgomp's default lets the threads of a
finished parallel loop spin a while before they sleep, and a sweep starts one parallel loop per
tree (and one more per accepted move). On a machine whose cores are busy with other work, the
spinning thread holds a core that the thread it waits for needs. One exchange pass over 10^5 rows
on 2 threads took 17,920 us of wall time (7,914 us of CPU) with libgomp's default, against 242 us
(102) with ``OMP_WAIT_POLICY=PASSIVE`` and 356 us (136) on ``workqueue``, which does not spin
either; at 10^6 rows 20,068 us against 2,223 and 2,246 (load average 12-13 on 2 cores;
``benchmarks/results/threads_one_chain.md``, "One exchange pass"). Choosing ``workqueue`` would
need ``numba.config.THREADING_LAYER`` set for the whole process, and that layer aborts the process
when two threads enter it at once (the user's own parallel numba code, or two chains: the runner
then gives each chain one thread). So ``start_threads`` sets ``OMP_WAIT_POLICY=PASSIVE`` only
when the block passes are first used (``block_layout``), only if numba has not started its layer
yet and the user has not set the variable, and only while numba loads libgomp (which reads it
then); it removes it right after, so the environment the user and child processes see is
unchanged. What stays is that libgomp in this process waits passively, also for any other library
that uses the same libgomp later (a libgomp loaded earlier by another library has read its
environment already and keeps its policy). Nothing is set at import, nor by a fit without row
blocks.

Compilation: the drivers are plain ``numba.njit(cache=True, nogil=True)`` functions (the parallel
ones with ``parallel=True``), not the package's ``kernel``/``helper``: numba's parallel loops are
lowered into a separate gufunc called through numba's threading layer, which needs that
function's machine code, whereas a ``helper`` is kept as IR only (``link_only.py``). They are
cached by numba's own cache, keyed on this file; they call nothing from other modules of
``_kernels/`` (the constants below are copies of ``backfit.N_ACC`` and ``tree.LEAF``, checked
equal by the tests), so a change elsewhere cannot leave a stale copy of them.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["MAX_BLOCKS", "MIN_BLOCK_ROWS", "n_blocks", "block_layout", "exchange_fits_blocks", "map_leaves_blocks",
           "sum_squares_blocks", "set_threads", "start_threads", "running_layer",
           "threading_layer"]

#: Most row blocks: enough for 64 threads, few enough that adding the blocks' leaf sums (one
#: thread, blocks x leaves) stays small next to the rows.
MAX_BLOCKS = 64
#: Fewest rows per block (below MAX_BLOCKS * MIN_BLOCK_ROWS rows there are fewer blocks).
MIN_BLOCK_ROWS = 4

_WAIT_POLICY = "OMP_WAIT_POLICY"
_N_ACC = 4  # = backfit.N_ACC (checked by the tests): leaf-sum accumulators per leaf and block
_LEAF = -1  # = tree.LEAF (checked by the tests)

# Reference counting stated, not inherited from a borrowing caller (as ``jit.kernel`` does).
_OPTIONS = {"cache": True, "nogil": True, "_nrt": True}


def n_blocks(n_rows: int) -> int:
    """The number of row blocks for ``n_rows`` rows: a function of the row count only, so that the
    sums (and the draws) do not depend on the threads."""
    return max(1, min(MAX_BLOCKS, n_rows // MIN_BLOCK_ROWS))


def block_layout(n_rows: int, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed ``sums`` (float64[N_ACC (1 + B), capacity]) and ``cursor`` (int64[capacity (1 + B)])
    of a backfitting state that uses the block passes (module docstring), B = ``n_blocks(n_rows)``.

    Also starts numba's threading layer, which registers the symbols the block passes call
    (``get_num_threads``, ``numba_parallel_for``...). A kernel compiled in this process, or one
    loaded from the cache whose entry asks for it, starts it too; but a kernel compiled against
    helpers that were themselves loaded from the cache (``link_only.py``) does not record that
    request, and loaded later in a fresh process it would call unresolved symbols (a
    segmentation fault was seen in tempered BART on 2 threads)."""
    start_threads()
    blocks = n_blocks(n_rows)
    return np.zeros((_N_ACC * (1 + blocks), capacity)), np.zeros(capacity * (1 + blocks), dtype=np.int64)


def set_threads(count: int) -> int:
    """Let compiled code started from this thread use ``count`` threads (numba's
    ``set_num_threads``, which is thread-local: another chain's thread keeps its own count);
    returns the count it replaces. ``count`` is capped at numba's pool size (``NUMBA_NUM_THREADS``).

    Before numba's threading layer runs (no chain with row blocks has started it: ``start_threads``)
    nothing is set and ``count`` is returned: numba's thread-count calls would start the layer
    themselves, without the waiting policy ``start_threads`` gives it, and a chain without row blocks
    enters no parallel region whatever its count."""
    if running_layer() is None:
        return int(count)
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(count), numba.config.NUMBA_NUM_THREADS)))
    return previous


def start_threads() -> None:
    """Start numba's threading layer (once per process), with waiting OpenMP threads asleep.

    If numba has not started its layer yet and the user has not set ``OMP_WAIT_POLICY``, the
    variable is set to ``PASSIVE`` while numba starts it (GNU OpenMP reads it when numba loads it)
    and removed again right after, so the environment the user and child processes see is
    unchanged (module docstring, "Waiting threads")."""
    from numba.np.ufunc import parallel

    if parallel._is_initialized:
        return
    ours = _WAIT_POLICY not in os.environ
    if ours:
        os.environ[_WAIT_POLICY] = "PASSIVE"
    try:
        parallel._launch_threads()
    finally:
        if ours:
            os.environ.pop(_WAIT_POLICY, None)


def running_layer() -> str | None:
    """The name of numba's threading layer if it has been started in this process, else None
    (without starting it: a process whose chains have no row blocks never starts it)."""
    from numba.np.ufunc import parallel

    return numba.threading_layer() if parallel._is_initialized else None


def threading_layer() -> str:
    """The name of numba's threading layer (``"tbb"``, ``"omp"`` or ``"workqueue"``), starting
    it if needed (``start_threads``). ``workqueue`` must not be entered from two threads at once
    (numba aborts the process), so the runner gives chains more than one thread only on the other two."""
    start_threads()
    return numba.threading_layer()


@intrinsic
def _threads(typingctx):
    """``numba.get_num_threads()`` for compiled code that numba can cache: numba's own overload
    calls the threading layer through a ctypes pointer, a run-time address that disables the
    disk cache of every function linking it. This calls the symbol ``get_num_threads`` that numba
    registers when it starts its thread pool, as numba's parallel loops do (declared with their
    type; the C function returns an int, hence the truncation)."""
    start_threads()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(types.intp.bitwidth), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "get_num_threads")
        return builder.sext(builder.trunc(builder.call(fn, []), ir.IntType(32)), ir.IntType(64))

    return types.int64(), codegen


@njit(**_OPTIONS)
def _bounds(b, blocks, n):
    return b * n // blocks, (b + 1) * n // blocks


@njit(**_OPTIONS)
def _exchange_rows(resid, leaf_out, value_out, leaf_in, value_in, acc, counts, counting):
    """The rows of one block (views): ``backfit.exchange_fits``'s loop, the leaf sums into the
    block's accumulators ``acc`` (N_ACC, nodes) by the row's index within the block and, if
    ``counting``, its rows per leaf into ``counts``. (The loop over views is as fast as the
    sequential pass; indexing the whole arrays with block offsets was 10-35% slower.)"""
    n = resid.shape[0]
    has_out = leaf_out.shape[0] == n
    has_in = leaf_in.shape[0] == n
    for i in range(n):
        r = resid[i]
        if has_out:
            r -= value_out[leaf_out[i]]
        if has_in:
            leaf = leaf_in[i]
            r += value_in[leaf]
            acc[i & (_N_ACC - 1), leaf] += r
            if counting:
                counts[leaf] += 1
        resid[i] = r


@njit(**_OPTIONS)
def _exchange_block(b, blocks, resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, cursor, counting):
    """Block b of the exchange pass: its accumulators (and counts) zeroed, then its rows."""
    lo, hi = _bounds(b, blocks, resid.shape[0])
    base = _N_ACC * (b + 1)
    cap = sums.shape[1]
    acc = sums[base:base + _N_ACC]
    counts = cursor[cap * (b + 1):cap * (b + 2)]
    for k in range(_N_ACC):
        for node in range(span_in):
            acc[k, node] = 0.0
    if counting:
        for node in range(span_in):
            counts[node] = 0
    _exchange_rows(resid[lo:hi], leaf_out[lo:hi], value_out, leaf_in[lo:hi], value_in, acc, counts, counting)


@njit(**_OPTIONS)
def _combine(blocks, span_in, sums, cursor, counting):
    """One thread, block order: the blocks' leaf sums into rows 0..N_ACC-1 of ``sums``; if
    ``counting``, each block's counts into its first write place per leaf (from ``cursor[leaf]``,
    the leaf's ``start``)."""
    for k in range(_N_ACC):
        for node in range(span_in):
            s = 0.0
            for b in range(blocks):
                s += sums[_N_ACC * (b + 1) + k, node]
            sums[k, node] = s
    if counting:
        cap = sums.shape[1]
        for node in range(span_in):
            place = cursor[node]
            for b in range(blocks):
                count = cursor[cap * (b + 1) + node]
                cursor[cap * (b + 1) + node] = place
                place += count


@njit(**_OPTIONS)
def _scatter_block(b, blocks, leaf_in, perm, cursor, cap):
    """Block b's rows into the shared ``perm`` at its write places (``_combine``), in row order."""
    lo, hi = _bounds(b, blocks, leaf_in.shape[0])
    slot = cap * (b + 1)
    for i in range(lo, hi):
        leaf = leaf_in[i]
        perm[cursor[slot + leaf]] = i
        cursor[slot + leaf] += 1


@njit(**_OPTIONS)
def _exchange_serial(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor):
    blocks = sums.shape[0] // _N_ACC - 1
    n = resid.shape[0]
    counting = leaf_in.shape[0] == n and perm.shape[0] == n
    for b in range(blocks):
        _exchange_block(b, blocks, resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, cursor, counting)
    _combine(blocks, span_in, sums, cursor, counting)
    if counting:
        for b in range(blocks):
            _scatter_block(b, blocks, leaf_in, perm, cursor, sums.shape[1])


@njit(parallel=True, **_OPTIONS)
def _exchange_parallel(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor):
    blocks = sums.shape[0] // _N_ACC - 1
    n = resid.shape[0]
    counting = leaf_in.shape[0] == n and perm.shape[0] == n
    for b in prange(blocks):
        _exchange_block(b, blocks, resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, cursor, counting)
    _combine(blocks, span_in, sums, cursor, counting)
    if counting:
        cap = sums.shape[1]
        for b in prange(blocks):
            _scatter_block(b, blocks, leaf_in, perm, cursor, cap)


@njit(**_OPTIONS)
def exchange_fits_blocks(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor):
    """``backfit.exchange_fits`` by row blocks (module docstring): ``resid -= f_out``, ``resid +=
    f_in``, the incoming tree's leaf sums into ``sums[:N_ACC, :span_in]`` and, given a shared
    ``perm`` (else an empty one), its rows leaf by leaf into it from ``cursor[leaf]`` on. The
    residual and ``perm`` come out exactly as from the sequential pass; the sums are added by
    block, then blocks in order. On more than one thread (``numba.get_num_threads()``, read as ``_threads``) the blocks
    run in parallel, with the same result."""
    if _threads() > 1:
        _exchange_parallel(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor)
    else:
        _exchange_serial(resid, leaf_out, value_out, leaf_in, value_in, span_in, sums, perm, cursor)


@njit(**_OPTIONS)
def _map_block(b, blocks, var, start, end, perm, span, leaf_of):
    lo, hi = _bounds(b, blocks, perm.shape[0])
    for node in range(span):
        if var[node] != _LEAF:
            continue
        first = max(start[node], lo)
        last = min(end[node], hi)
        for i in range(first, last):
            leaf_of[perm[i]] = node


@njit(parallel=True, **_OPTIONS)
def _map_parallel(var, start, end, perm, span, leaf_of, blocks):
    for b in prange(blocks):
        _map_block(b, blocks, var, start, end, perm, span, leaf_of)


@njit(**_OPTIONS)
def map_leaves_blocks(var, start, end, perm, span, leaf_of, blocks):
    """``backfit.map_leaves`` over ``blocks`` blocks of perm positions (``leaf_of[perm[i]] = leaf``
    for every leaf segment), in parallel on more than one thread; the map is the same either way,
    so on one thread this is the sequential pass."""
    if _threads() > 1:
        _map_parallel(var, start, end, perm, span, leaf_of, blocks)
    else:
        for b in range(blocks):
            _map_block(b, blocks, var, start, end, perm, span, leaf_of)


@njit(**_OPTIONS)
def _squares_block(b, blocks, resid):
    lo, hi = _bounds(b, blocks, resid.shape[0])
    s = 0.0
    for i in range(lo, hi):
        s += resid[i] * resid[i]
    return s


@njit(parallel=True, **_OPTIONS)
def _squares_parallel(resid, partial):
    blocks = partial.shape[0]
    for b in prange(blocks):
        partial[b] = _squares_block(b, blocks, resid)


@njit(**_OPTIONS)
def sum_squares_blocks(resid, blocks):
    """Sum of ``resid[i]**2`` by ``blocks`` row blocks, then the blocks' sums in block order: the
    same rounding on any number of threads (in parallel on more than one)."""
    partial = np.empty(blocks)
    if _threads() > 1:
        _squares_parallel(resid, partial)
    else:
        for b in range(blocks):
            partial[b] = _squares_block(b, blocks, resid)
    total = 0.0
    for b in range(blocks):
        total += partial[b]
    return total
