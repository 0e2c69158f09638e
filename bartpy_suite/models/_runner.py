"""Run chains in parallel threads, in chunks, with a progress bar and Ctrl-C handling.

numba kernels release the GIL, so one thread per chain runs in parallel. Kernels cannot see
SIGINT, hence each chain advances in chunks of about ``CHUNK_SECONDS``; between chunks the
worker checks a stop flag that the main thread sets on KeyboardInterrupt. Every chain owns its
``Generator`` and its state, so the draws do not depend on the thread count or chunk sizes.

When there are fewer chains than threads, a chain gets the threads left over for its row passes
(``threads_per_chain``): BART chains over enough rows split the O(n) passes of each sweep into
row blocks run in parallel (``_kernels/row_parallel.py``), with the same draws on any number of
threads. The count is set in the chain's worker thread with numba's thread-local
``set_num_threads``, so chains running side by side each keep their own.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from .._kernels.row_parallel import running_layer, set_threads
from ..errors import BartpySuiteWarning

CHUNK_SECONDS = 0.1


def _use_progress(progress: bool) -> bool:
    if not progress:
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def advance(run_chunk, total_iter: int, stopped, report=None) -> int:
    """Advance one chain to ``total_iter`` iterations in chunks of about ``CHUNK_SECONDS``.

    Parameters
    ----------
    run_chunk : callable
        ``run_chunk(first_iter, n_iter)`` advances the chain.
    total_iter : int
        Iterations to run.
    stopped : callable
        ``stopped()`` is checked between chunks; True ends the run early.
    report : callable, optional
        ``report(done)`` after every chunk.

    Returns
    -------
    int
        Iterations completed.
    """
    done = 0
    chunk = 16
    while done < total_iter and not stopped():
        n = min(chunk, total_iter - done)
        t0 = time.perf_counter()
        run_chunk(done, n)
        done += n
        if report is not None:
            report(done)
        elapsed = time.perf_counter() - t0
        # Aim for chunks of about CHUNK_SECONDS so Ctrl-C is honoured quickly.
        if elapsed < CHUNK_SECONDS / 2:
            chunk = min(chunk * 2, 1 << 20)
        elif elapsed > CHUNK_SECONDS * 2 and chunk > 1:
            chunk //= 2
    return done


def progress_bar(progress: bool, total: int, description: str):
    """A tqdm bar when ``progress`` and stderr is a terminal, else None."""
    if not _use_progress(progress):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="it")


def interrupted_warning(done: int, total_iter: int, stacklevel: int = 4) -> None:
    """Warn that sampling stopped early, after ``done`` of ``total_iter`` iterations per chain."""
    warnings.warn(
        f"sampling interrupted: returning the draws made so far ({done} of {total_iter} iterations per chain)",
        BartpySuiteWarning,
        stacklevel=stacklevel,
    )


def available_threads() -> int:
    """The threads numba may use in this process (``NUMBA_NUM_THREADS``: the cores by default)."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def threads_per_chain(chains: int, threads: int | None = None) -> tuple[int, int]:
    """How ``chains`` chains share the threads.

    Parameters
    ----------
    chains : int
        Chains of the run.
    threads : int, optional
        Threads the run may use. None (default): one worker per chain, all of them at once, and
        ``available_threads()`` shared among them.

    Returns
    -------
    (int, int)
        The chains run at once (one worker thread each: ``chains``, or ``min(chains, threads)``)
        and the threads each of them may use for its row passes (``available_threads()`` or
        ``threads``, divided by the workers, at least 1). numba's ``workqueue`` threading layer
        must not be entered from two threads at once, so with it and more than one worker a chain
        gets one thread. The layer is asked only if it is running: a chain with row blocks started
        it when it was built (``row_parallel.block_layout``), and chains without row blocks enter
        no parallel region whatever their thread count, so a run without row blocks starts no
        thread pool.
    """
    workers = max(1, chains if threads is None else min(chains, int(threads)))
    total = available_threads() if threads is None else int(threads)
    each = max(1, total // workers)
    if each > 1 and workers > 1 and running_layer() == "workqueue":
        each = 1
    return workers, each


def run_chains(chains, total_iter: int, run_chunk, *, threads: int | None = None, progress: bool = True,
               description: str = "sampling") -> list[int]:
    """Advance every chain to ``total_iter`` iterations.

    Parameters
    ----------
    chains : list
        Chain states, passed to ``run_chunk``.
    total_iter : int
        Iterations per chain (tune + draws * thin).
    run_chunk : callable
        ``run_chunk(chain, index, first_iter, n_iter)`` advances one chain.
    threads : int, optional
        Threads the run may use: ``min(chains, threads)`` chains run at once, each on ``threads //
        that`` threads. Default: every chain at once, sharing numba's threads (``threads_per_chain``).
    progress : bool
        Show a tqdm bar when stderr is a terminal.

    Returns
    -------
    list of int
        Iterations completed per chain (less than ``total_iter`` after Ctrl-C).
    """
    done = [0] * len(chains)
    stop = threading.Event()

    workers, each = threads_per_chain(len(chains), threads)

    def work(index: int) -> None:
        chain = chains[index]
        set_threads(each)  # thread-local: this worker's kernels only (pool threads are reused)

        def report(count: int) -> None:
            done[index] = count

        advance(lambda first, n: run_chunk(chain, index, first, n), total_iter, stop.is_set, report)

    bar = progress_bar(progress, total_iter * len(chains), description)
    pool = ThreadPoolExecutor(max_workers=workers)
    futures = [pool.submit(work, i) for i in range(len(chains))]
    interrupted = False
    try:
        while not all(f.done() for f in futures):
            time.sleep(0.05)
            if bar is not None:
                bar.n = sum(done)
                bar.refresh()
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    finally:
        for f in futures:
            while True:
                try:
                    f.result()
                    break
                except KeyboardInterrupt:
                    interrupted = True
                    stop.set()
        pool.shutdown(wait=True)
        if bar is not None:
            bar.n = sum(done)
            bar.close()
    if interrupted:
        interrupted_warning(min(done), total_iter)
    return done
