# %% [markdown]
# # Scale: large data and a dask cluster
#
# *How big can my data be, and can I use a cluster?*
#
# A BART sweep visits every tree once and touches every row for each proposal, so its cost
# grows linearly with the number of rows; the draws are stored per tree, not per row, so the
# memory of a fit is the data plus a small posterior. We measure both on a simulated data set,
# then run the chains on a `dask.distributed` cluster (two worker processes on this machine)
# and predict a dask DataFrame partition by partition.

# %%
import os
import resource
import time
import tracemalloc

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster

import bartpy_suite as bps

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: smaller data, fewer draws
N_ROWS = 5_000 if QUICK else 1_000_000
TREES, DRAWS, TUNE = (20, 5, 5) if QUICK else (50, 20, 10)


def friedman(n, seed):
    """Friedman's first function with 5 noise predictors: y = f(x) + N(0, 1)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 10))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(10)])
    frame["y"] = f + rng.normal(size=n)
    return frame


big = friedman(N_ROWS, seed=1)
# a tiny fit first, so that compiling (or loading) the kernels is not counted in the timings below
bps.bart("y ~ .", data=big.head(200), trees=5, chains=1, draws=2, tune=2, seed=1, progress=False, check_mixing=False)
print(f"{len(big):,} rows, {big.memory_usage(deep=True).sum() / 2**20:.1f} MiB as a pandas frame")

# %% [markdown]
# ## One chain on many rows
#
# One chain, `TREES` trees, `TUNE + DRAWS` sweeps. We time the fit (wall and CPU seconds of this
# process) and trace the peak of Python-visible allocations during it (numpy arrays included),
# beside the process's peak resident memory.

# %%
tracemalloc.start()
wall, cpu = time.perf_counter(), time.process_time()
fit = bps.bart("y ~ .", data=big, trees=TREES, chains=1, draws=DRAWS, tune=TUNE, seed=1, progress=False,
               check_mixing=False)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
sweeps = TUNE + DRAWS
pd.Series({
    "rows": len(big), "trees": TREES, "sweeps": sweeps,
    "wall s per sweep": wall / sweeps, "CPU s per sweep": cpu / sweeps,
    "CPU ns per sweep, row and tree": 1e9 * cpu / (sweeps * len(big) * TREES),
    "peak traced MiB during the fit": peak / 2**20,
    "process peak RSS MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10,
}, name="value").to_frame()

# %% [markdown]
# The last row includes everything the process ever held (Python, numba, the compiled kernels),
# so it is an upper bound. The first-order cost per sweep is linear in rows x trees: multiply
# the nanoseconds per (sweep, row, tree) above by your own n and number of trees to budget a
# run. These are short runs (`TUNE + DRAWS` sweeps) to measure cost, not converged fits; the
# held-out error below, on fresh rows from the same function, is what so few sweeps give.

# %%
test = friedman(2_000, seed=2)
pred = fit.predict(test.drop(columns="y"), level=0.9)
print(f"held-out RMSE {np.sqrt(((pred['mean'] - test['y']) ** 2).mean()):.3f} (noise sd 1, sd of y {test['y'].std():.2f})")

# %% [markdown]
# ## Chains on a dask cluster
#
# `executor=` takes a `dask.distributed.Client` (or any `concurrent.futures.Executor`). Each
# chain is one task: the data are scattered once per worker, the chain runs there and its draws
# come back into the usual fit. The same seed gives the same draws as the default threaded run.
# We use a smaller data set so the comparison is cheap; two worker processes, one thread each.

# %%
small = friedman(1_000 if QUICK else 5_000, seed=3)
settings = dict(trees=TREES, chains=2, draws=DRAWS, tune=TUNE, seed=7, progress=False, check_mixing=False)
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)
client = Client(cluster)
t0 = time.perf_counter()
on_cluster = bps.bart("y ~ .", data=small, executor=client, **settings)
cluster_s = time.perf_counter() - t0
t0 = time.perf_counter()
threaded = bps.bart("y ~ .", data=small, **settings)
threaded_s = time.perf_counter() - t0
same = all(np.array_equal(on_cluster.posterior[v].values, threaded.posterior[v].values)
           for v in threaded.posterior.data_vars)
print(f"posterior variables: {list(threaded.posterior.data_vars)}")
print(f"identical draws on the cluster and in threads: {same}")
print(f"wall seconds: cluster {cluster_s:.1f} (workers compile or load the kernels on first use), threads {threaded_s:.1f}")

# %% [markdown]
# ## Predicting a dask DataFrame
#
# `fit.predict(ddf)` on a dask DataFrame returns a lazy dask DataFrame with the same columns as
# the pandas result, computed partition by partition on the workers (the fit is shipped to each
# worker once). Here we predict the large data set in 4 partitions with the fit on many rows,
# and check it against the in-memory prediction of the same rows.

# %%
ddf = dd.from_pandas(big.drop(columns="y"), npartitions=4)
lazy = fit.predict(ddf, level=0.9)
print(type(lazy).__name__, "with", lazy.npartitions, "partitions and columns", list(lazy.columns))
t0 = time.perf_counter()
computed = lazy.compute()
print(f"computed {len(computed):,} predictions in {time.perf_counter() - t0:.1f} s wall")
eager = fit.predict(big.drop(columns="y"), level=0.9)
print("equal to the pandas prediction:", np.allclose(computed.to_numpy(), eager.to_numpy()))
computed.head()

# %% [markdown]
# Close the client and the cluster when done (a `with` block does it too).

# %%
client.close()
cluster.close()
