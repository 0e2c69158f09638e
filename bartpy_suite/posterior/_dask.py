"""``Fit.predict`` on a dask DataFrame: a dask DataFrame computed partition by partition.

The fit enters the task graph once, as one delayed object that every partition's task
refers to, so a cluster ships it to each worker once rather than with every partition. The
shipped copy carries only the posterior and the design (no cached prediction arrays); each
worker rebuilds those once per process and reuses them across its partitions.

Import rule: dask is imported inside ``predict_dask`` only (the ``[dask]`` extra).
"""

from __future__ import annotations

import uuid

from ..errors import ArgumentError


def is_dask_frame(obj) -> bool:
    """Whether ``obj`` is a dask DataFrame (checked without importing dask)."""
    return type(obj).__module__.split(".")[0] in ("dask", "dask_expr") and hasattr(obj, "map_partitions")


def _predict_partition(frame, fit, kind: str, level: float, na_action):
    return fit.predict(frame, kind=kind, level=level, na_action=na_action)


def predict_dask(fit, ddf, *, kind: str, level: float, samples: bool, na_action=None):
    """Lazy predictions of ``fit`` for the dask DataFrame ``ddf``: a dask DataFrame with the
    columns of ``fit.predict`` and the index and partitions of ``ddf``."""
    if samples:
        raise ArgumentError(
            "samples=True returns every draw for every row in memory, which a dask DataFrame is meant to avoid; "
            "call predict(ddf) for intervals, or predict(ddf.compute(), samples=True) on a small frame"
        )
    import dask

    # validates kind and level, and gives the output columns and dtypes
    meta = fit.predict(ddf._meta, kind=kind, level=level, na_action=na_action)
    shipped = dask.delayed(type(fit)(fit.idata, fit.design), name=f"bartpy-suite-fit-{uuid.uuid4().hex}")
    return ddf.map_partitions(_predict_partition, shipped, kind, level, na_action, meta=meta)
