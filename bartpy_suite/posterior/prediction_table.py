"""The tables and sample arrays that ``Fit.predict`` returns, from posterior samples.

Shared by the hard-tree path (``fit.py``) and the soft-tree path (``soft.py``): both compute
samples of f(x) or of the class probabilities per (sample, row) and hand them here.

Import rule: numpy, pandas, xarray, ``errors`` and ``weighted`` only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import ArgumentError
from .weighted import weighted_quantiles

#: Seed of the noise draws behind ``kind="predictive"``, so that a prediction repeats exactly.
PREDICTIVE_SEED = 20_061_998


def class_table(p: np.ndarray, w: np.ndarray, labels, index, kind: str, level: float, samples: bool,
                shape: tuple[int, int]):
    """Class probabilities ``p`` (samples, rows, classes) as ``predict`` returns them."""
    if samples:
        return xr.DataArray(p.reshape(*shape, -1, len(labels)), dims=("chain", "draw", "obs", "class"),
                            coords={"class": [str(c) for c in labels]}, name="prob")
    probs = [(1 - level) / 2, (1 + level) / 2]
    mean = np.tensordot(w / w.sum(), p, axes=(0, 0))
    out = {}
    for k, label in enumerate(labels):
        out[f"prob_{label}"] = mean[:, k]
        if kind != "class":
            q = weighted_quantiles(p[:, :, k], w, probs)
            out[f"prob_{label}_lower"] = q[0]
            out[f"prob_{label}_upper"] = q[1]
    frame = pd.DataFrame(out, index=index)
    frame["class"] = pd.Series(np.asarray(labels, dtype=object)[np.argmax(mean, axis=1)], index=index)
    return frame[["class"]] if kind == "class" else frame


def regression_table(f: np.ndarray, noise_sd, w: np.ndarray, index, kind: str, level: float, samples: bool,
                     shape: tuple[int, int]):
    """Samples of f(x) (samples, rows) as ``predict`` returns them; ``noise_sd()`` gives the
    noise sd per (sample, row), broadcastable, for ``kind="predictive"``."""
    if kind in ("prob", "class"):
        raise ArgumentError(f"kind={kind!r} needs a categorical response; use 'mean' or 'predictive' for regression")
    values = f
    if kind == "predictive":
        rng = np.random.default_rng(PREDICTIVE_SEED)
        values = f + noise_sd() * rng.standard_normal(f.shape)
    if samples:
        return xr.DataArray(values.reshape(*shape, -1), dims=("chain", "draw", "obs"), name=kind)
    q = weighted_quantiles(values, w, [(1 - level) / 2, (1 + level) / 2])
    return pd.DataFrame({"mean": (w / w.sum()) @ f, "lower": q[0], "upper": q[1]}, index=index)
