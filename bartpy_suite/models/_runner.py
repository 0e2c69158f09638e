"""Run chains in parallel threads, in chunks, with a progress bar and Ctrl-C handling.

numba kernels release the GIL, so one thread per chain runs in parallel. Kernels cannot see
SIGINT, hence each chain advances in chunks of about ``CHUNK_SECONDS``; between chunks the
worker checks a stop flag that the main thread sets on KeyboardInterrupt. Every chain owns its
``Generator`` and its state, so the draws do not depend on the thread count or chunk sizes.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from ..errors import BartpySuiteWarning

CHUNK_SECONDS = 0.1


def _use_progress(progress: bool) -> bool:
    if not progress:
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


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
        Worker threads (default: one per chain).
    progress : bool
        Show a tqdm bar when stderr is a terminal.

    Returns
    -------
    list of int
        Iterations completed per chain (less than ``total_iter`` after Ctrl-C).
    """
    done = [0] * len(chains)
    stop = threading.Event()

    def work(index: int) -> None:
        chain = chains[index]
        chunk = 16
        while done[index] < total_iter and not stop.is_set():
            n = min(chunk, total_iter - done[index])
            t0 = time.perf_counter()
            run_chunk(chain, index, done[index], n)
            done[index] += n
            elapsed = time.perf_counter() - t0
            # Aim for chunks of about CHUNK_SECONDS so Ctrl-C is honoured quickly.
            if elapsed < CHUNK_SECONDS / 2:
                chunk = min(chunk * 2, 1 << 20)
            elif elapsed > CHUNK_SECONDS * 2 and chunk > 1:
                chunk //= 2

    bar = None
    if _use_progress(progress):
        from tqdm.auto import tqdm

        bar = tqdm(total=total_iter * len(chains), desc=description, unit="it")
    pool = ThreadPoolExecutor(max_workers=threads or len(chains))
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
        warnings.warn(
            f"sampling interrupted: returning the draws made so far ({min(done)} of {total_iter} iterations per chain)",
            BartpySuiteWarning,
            stacklevel=3,
        )
    return done
