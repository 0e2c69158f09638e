"""Chains on an executor (``executor=`` of every model): each chain is built, run and collected
where the executor runs it, and only its draws come back.

A chain holds numba state that does not pickle, so what travels is the recipe: the sampler's
name, the model's problem (frozen arrays), the validated options and the chain's own
``Generator``. The worker builds the chain exactly as the threaded run does, so the same seed
gives bit-identical draws whatever runs it. On a ``dask.distributed.Client`` the problem is
scattered to every worker once and shared by the chains; progress and Ctrl-C travel through a
``distributed.Variable`` per chain and a ``distributed.Event``. A ``ThreadPoolExecutor``
shares a ``threading.Event`` with its chains; other executors (process pools) cannot be
signalled, so Ctrl-C cancels the chains not yet started and re-raises.

Import rule: imports ``samplers`` (the registry), ``_kernels.record`` and ``_runner``; dask only
inside the functions that need it.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Executor, ThreadPoolExecutor

from .._kernels.record import trim_store
from ..errors import ArgumentError
from ..samplers import SAMPLERS
from ..samplers.draws import ChainDraws
from ._runner import advance, interrupted_warning, progress_bar

#: Seconds between two progress reports of a chain on a dask worker.
REPORT_SECONDS = 0.5


def is_dask_client(executor) -> bool:
    """Whether ``executor`` is a ``dask.distributed.Client`` (checked without importing dask)."""
    return type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed")


def check_executor(executor):
    """``executor`` if it is None, a dask ``Client`` or a ``concurrent.futures.Executor``."""
    if executor is None or is_dask_client(executor) or isinstance(executor, Executor):
        return executor
    raise ArgumentError(
        f"executor must be None (threads), a dask.distributed.Client or a concurrent.futures.Executor; "
        f"got {type(executor).__name__}"
    )


class _NoSignals:
    """A chain that cannot be reached while it runs (process pools)."""

    def stopped(self) -> bool:
        return False

    def report(self, index: int, done: int) -> None:
        pass


class _ThreadSignals:
    """Stop flag and progress shared in memory with chains on a ``ThreadPoolExecutor``."""

    def __init__(self, n_chains: int):
        self.stop = threading.Event()
        self.done = [0] * n_chains

    def stopped(self) -> bool:
        return self.stop.is_set()

    def request_stop(self) -> None:
        self.stop.set()

    def report(self, index: int, done: int) -> None:
        self.done[index] = done

    def progress(self) -> int:
        return sum(self.done)


class _DaskSignals:
    """Stop flag (a ``distributed.Event``) and progress (one ``distributed.Variable`` per chain)
    of a run on a dask cluster; pickles as its name and reconnects on the worker."""

    def __init__(self, name: str, n_chains: int):
        self.name = name
        self.n_chains = n_chains
        self._last = 0.0

    def __getstate__(self):
        return {"name": self.name, "n_chains": self.n_chains}

    def __setstate__(self, state):
        self.__init__(state["name"], state["n_chains"])

    def _event(self):
        from distributed import Event

        return Event(f"{self.name}-stop")

    def _variable(self, index: int):
        from distributed import Variable

        return Variable(f"{self.name}-done-{index}")

    def stopped(self) -> bool:
        return self._event().is_set()

    def report(self, index: int, done: int) -> None:
        now = time.monotonic()
        if now - self._last >= REPORT_SECONDS:
            self._last = now
            self._variable(index).set(done)

    def request_stop(self) -> None:
        self._event().set()

    def progress(self) -> int:
        from distributed.utils import TimeoutError as DaskTimeout

        total = 0
        for index in range(self.n_chains):
            try:
                total += int(self._variable(index).get(timeout=0.01))
            except (DaskTimeout, TimeoutError):
                pass
        return total

    def close(self) -> None:
        self._event().clear()
        for index in range(self.n_chains):
            self._variable(index).delete()


def run_chain_task(problem, sampler: str, options: dict, rng, draws: int, tune: int, thin: int, index: int,
                   signals) -> tuple[int, ChainDraws | None]:
    """Build chain ``index`` of ``sampler`` on ``problem``, run it and collect its draws.

    Runs where the executor puts it. Returns the iterations completed and the draws kept
    (None when interrupted before the first kept draw).
    """
    chain = SAMPLERS[sampler].make_chain(problem, options, rng)
    chain.allocate(draws)
    total = tune + draws * thin
    done = advance(lambda first, n: chain.run(first, n, tune, thin), total, signals.stopped,
                   lambda count: signals.report(index, count))
    kept = kept_draws(done, tune, thin, draws)
    return done, (chain.collect(kept) if kept > 0 else None)


def kept_draws(done: int, tune: int, thin: int, draws: int) -> int:
    """Kept draws of a chain that completed ``done`` iterations."""
    return min(max(0, (done - tune + thin - 1) // thin), draws)


def trim_draws(draws: ChainDraws, kept: int) -> ChainDraws:
    """The first ``kept`` draws of one chain's draws (chains stopped at different iterations)."""
    if draws.store.tree_nodes.shape[0] == kept:
        return draws
    return ChainDraws(
        posterior={k: v[:kept] for k, v in draws.posterior.items()},
        stats={k: v[:kept] for k, v in draws.stats.items()},
        store=trim_store(draws.store, kept),
        extra_stores={g: (dim, trim_store(store, kept)) for g, (dim, store) in draws.extra_stores.items()},
    )


def run_on_executor(executor, problem, sampler: str, options: dict, rngs: list, *, draws: int, tune: int, thin: int,
                    progress: bool) -> list[ChainDraws]:
    """Run one chain per generator in ``rngs`` on ``executor``; return their draws, all cut to the
    draws every chain kept (fewer than ``draws`` only after Ctrl-C, with a warning)."""
    n = len(rngs)
    total = tune + draws * thin
    dask = is_dask_client(executor)
    if dask:
        signals = _DaskSignals(f"bartpy-suite-{uuid.uuid4().hex}", n)
        # on every worker once, so the chains spread over the workers instead of queueing where the data is
        shared = executor.scatter(problem, broadcast=True, hash=False)
        futures = [executor.submit(run_chain_task, shared, sampler, options, rng, draws, tune, thin, i, signals,
                                   pure=False) for i, rng in enumerate(rngs)]
    else:
        signals = _ThreadSignals(n) if isinstance(executor, ThreadPoolExecutor) else _NoSignals()
        futures = [executor.submit(run_chain_task, problem, sampler, options, rng, draws, tune, thin, i, signals)
                   for i, rng in enumerate(rngs)]
    can_stop = dask or isinstance(signals, _ThreadSignals)
    bar = progress_bar(progress, total * n, "sampling")
    interrupted = False
    try:
        try:
            while not all(f.done() for f in futures):
                time.sleep(0.2 if dask else 0.05)
                if bar is not None:
                    bar.n = signals.progress() if can_stop else total * sum(f.done() for f in futures)
                    bar.refresh()
        except KeyboardInterrupt:
            if not can_stop:
                for f in futures:
                    f.cancel()
                raise
            interrupted = True
            signals.request_stop()
        results = []
        for f in futures:
            while True:
                try:
                    results.append(f.result())
                    break
                except KeyboardInterrupt:
                    interrupted = True
                    signals.request_stop()
    finally:
        if bar is not None:
            bar.close()
        if dask:
            signals.close()
    done = min(d for d, _ in results)
    kept = kept_draws(done, tune, thin, draws)
    if interrupted or done < total:
        interrupted_warning(done, total, stacklevel=3)
    if kept == 0:
        raise KeyboardInterrupt("sampling was interrupted before the first kept draw")
    return [trim_draws(chain_draws, kept) for _, chain_draws in results]
