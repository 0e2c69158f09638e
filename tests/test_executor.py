"""``executor=``: chains on a dask cluster or a ``concurrent.futures`` executor give the same
draws as the threaded run, and ``Fit.predict`` on a dask DataFrame gives the same predictions
as on the pandas frame, computed per partition with the fit in the graph once.

The cluster is one module-scoped ``LocalCluster`` with two worker processes on loopback; its
workers import this checkout (``sys.path`` travels with the spawned processes), which the
first test checks. Equality is exact: the workers build the same chains from the same
generators, so every posterior, statistic and tree array must match bit for bit.
"""

from __future__ import annotations

import _thread
import signal
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")

GROUPS = ("posterior", "sample_stats", "trees")
CART = dict(sampler="cgm", chains=2, draws=40, tune=40, seed=7, progress=False, check_mixing=False)
BART = dict(trees=8, chains=2, draws=15, tune=15, seed=8, progress=False, check_mixing=False)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return bps.datasets.load("cgm1998").head(150)


@pytest.fixture(scope="module")
def threaded(data):
    return {"cart": bps.cart("y ~ x1 + x2", data=data, **CART),
            "bart": bps.bart("y ~ x1 + x2", data=data, **BART)}


def assert_same_draws(a, b) -> None:
    for group in GROUPS:
        left, right = a.idata[group].to_dataset(), b.idata[group].to_dataset()
        assert sorted(left.data_vars) == sorted(right.data_vars), group
        for name in left.data_vars:
            np.testing.assert_array_equal(left[name].values, right[name].values, err_msg=f"{group}/{name}")


def test_workers_import_this_checkout(client):
    paths = client.run(lambda: __import__("bartpy_suite").__file__)
    assert len(paths) == 2
    assert set(paths.values()) == {bps.__file__}


@pytest.mark.parametrize("model", ["cart", "bart"])
def test_chains_on_a_cluster_equal_the_threaded_run(client, data, threaded, model):
    fn, kw = (bps.cart, CART) if model == "cart" else (bps.bart, BART)
    with distributed.get_task_stream(client) as stream:
        remote = fn("y ~ x1 + x2", data=data, executor=client, **kw)
    chain_tasks = [t for t in stream.data if "run_chain_task" in str(t["key"])]
    assert len(chain_tasks) == kw["chains"], "each chain runs as one task on the cluster"
    # ``nthreads`` asks the scheduler each time; ``scheduler_info()`` falls back to a cache
    # without per-worker entries when the scheduler is slow to answer, as on a loaded CI machine.
    assert {t["worker"] for t in chain_tasks} <= set(client.nthreads())
    assert_same_draws(remote, threaded[model])


def test_thread_pool_executor_equals_the_threaded_run(data, threaded):
    with ThreadPoolExecutor(max_workers=2) as pool:
        remote = bps.cart("y ~ x1 + x2", data=data, executor=pool, **CART)
    assert_same_draws(remote, threaded["cart"])


@pytest.mark.slow  # a spawned process imports the package and loads the kernels: ~10 s
def test_process_pool_executor_equals_the_threaded_run(data, threaded):
    import multiprocessing

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = bps.cart("y ~ x1 + x2", data=data, executor=pool, **CART)
    assert_same_draws(remote, threaded["cart"])


def test_array_level_model_takes_an_executor(threaded, data):
    with ThreadPoolExecutor(max_workers=2) as pool:
        x = np.column_stack([data["x1"].to_numpy(), np.zeros(len(data))])
        a = bps.BayesianCART(executor=pool, **CART).fit(x, data["y"].to_numpy())
    b = bps.BayesianCART(**CART).fit(x, data["y"].to_numpy())
    assert_same_draws(a, b)


def test_predict_on_a_dask_frame_is_lazy_per_partition_and_equals_pandas(client, data, threaded):
    fit = threaded["cart"]
    new = data.drop(columns="y").iloc[::-1].reset_index(drop=True)
    ddf = dd.from_pandas(new, npartitions=3)
    lazy = fit.predict(ddf, level=0.9)
    assert isinstance(lazy, dd.DataFrame)
    assert lazy.npartitions == 3
    graph = dict(lazy.__dask_graph__())
    fit_keys = [k for k in graph if str(k if isinstance(k, str) else k[0]).startswith("bartpy-suite-fit-")]
    assert len(fit_keys) == 1, "the fit is in the graph once, shared by the partitions"
    pd.testing.assert_frame_equal(lazy.compute(), fit.predict(new, level=0.9))


def test_predict_class_probabilities_on_a_dask_frame(client, data):
    labelled = data.assign(big=np.where(data["y"] > data["y"].median(), "yes", "no"))
    fit = bps.cart("big ~ x1 + x2", data=labelled, **CART)
    ddf = dd.from_pandas(labelled.drop(columns=["y", "big"]), npartitions=2)
    got = fit.predict(ddf, kind="prob").compute()
    pd.testing.assert_frame_equal(got, fit.predict(labelled.drop(columns=["y", "big"]), kind="prob"))


def test_ctrl_c_on_a_cluster_returns_the_draws_made_so_far(client, data):
    """SIGINT's KeyboardInterrupt in the main thread sets the run's stop event; the workers stop
    at their next chunk and the draws made so far come back with the warning. The interrupt is
    sent once every chain has reported progress (a ``distributed.Variable`` per chain)."""

    def interrupt_once_sampling() -> None:
        deadline = time.monotonic() + 300  # workers may first compile or load the kernels
        while time.monotonic() < deadline:
            variables = client.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.extensions["variables"].variables))
            if sum("-done-" in str(k) for k in variables) == CART["chains"]:  # every chain has run
                _thread.interrupt_main()
                return
            time.sleep(0.1)

    helper = threading.Thread(target=interrupt_once_sampling, daemon=True)
    # 5 x 10^8 iterations (thinned to keep the buffers small): about 15 minutes here (10^8 took
    # 187 s on a loaded 2-core machine), so the interrupt always lands mid-run, also when the
    # workers take a while to start
    long = dict(CART, draws=200_000, tune=0, thin=2_500)
    # interrupt_main does nothing while SIGINT is ignored, as it is in a process started in the
    # background by a non-interactive shell (CI's runner may start the tests so): Python's own
    # handler for the duration of the test
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            helper.start()
            fit = bps.cart("y ~ x1 + x2", data=data, executor=client, **long)
        helper.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    kept = fit.posterior.sizes["draw"]
    assert 0 < kept < long["draws"]
    assert np.isfinite(fit.posterior["sigma"].values).all()
    assert any(issubclass(w.category, BartpySuiteWarning) and "interrupted" in str(w.message) for w in caught)


def test_bad_executor_and_conflicting_threads_are_refused():
    with pytest.raises(ArgumentError, match=r"executor must be None \(threads\), a dask.distributed.Client or a "
                                            r"concurrent.futures.Executor; got str"):
        bps.BayesianCART(executor="localhost:8786")
    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(ArgumentError, match="give one of them"):
        bps.BART(executor=pool, threads=2)


def test_samples_of_a_dask_frame_are_refused(threaded, data):
    ddf = dd.from_pandas(data.drop(columns="y"), npartitions=2)
    with pytest.raises(ArgumentError, match="samples=True"):
        threaded["cart"].predict(ddf, samples=True)


def test_sklearn_clone_shares_the_executor():
    """cross_val_score and pipelines clone the estimator; an executor cannot be deep-copied, so
    the clone shares it and copies the other parameters."""
    from sklearn.base import clone

    from bartpy_suite.sklearn import BARTRegressor

    with ThreadPoolExecutor(max_workers=1) as pool:
        est = BARTRegressor(executor=pool, trees=7, sampler_options={"moves": {"grow": 0.5, "prune": 0.5}})
        copy = clone(est)
    assert copy.executor is pool
    assert copy.trees == 7 and copy.sampler_options == est.sampler_options
    assert copy.sampler_options is not est.sampler_options
