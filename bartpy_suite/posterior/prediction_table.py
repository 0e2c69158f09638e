"""The tables and sample arrays that ``Fit.predict`` returns, from posterior samples, and the
checks of the new rows before them.

Shared by the hard-tree path (``fit.py``) and the soft-tree path (``soft.py``): both read the
new rows with ``new_rows``, decide what to do with missing values with ``missing_rows``, compute
samples of f(x) or of the class probabilities per (sample, row) for the rows they predict and hand
them to ``class_table`` / ``regression_table``; ``with_missing_rows`` puts the rows left out
(``na_action="pass"``) back as NaN, in the input's order.

Import rule: numpy, pandas, xarray, ``errors`` and ``weighted`` only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import ArgumentError, DataError
from .weighted import weighted_quantiles

#: Seed of the noise draws behind ``kind="predictive"``, so that a prediction repeats exactly.
PREDICTIVE_SEED = 20_061_998
#: ``na_action`` of ``predict``: None (the fit decides), "raise", "pass".
NA_ACTIONS = ("raise", "pass")
#: Rows named in a message before "...".
_SHOWN = 5


def rows_text(index: pd.Index, mask: np.ndarray) -> str:
    """'2 rows (index 3, 'b')' for the rows of ``index`` where ``mask`` holds."""
    count = int(mask.sum())
    labels = index[np.flatnonzero(mask)[:_SHOWN]].tolist()
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in labels)
    more = ", ..." if count > _SHOWN else ""
    return f"{count} {'row' if count == 1 else 'rows'} (index {shown}{more})"


def new_rows(newdata, predictors) -> np.ndarray:
    """An array given as ``newdata`` as float rows (m, p), checked for shape.

    A 1-D array of p values is one row. Missing values (NaN) are kept for ``missing_rows``;
    infinite values are an error naming the first row.
    """
    p = len(predictors)
    names = ", ".join(map(str, predictors[:8])) + (", ..." if p > 8 else "")
    try:
        x = np.asarray(newdata, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"newdata must be a DataFrame or a 2-D numeric array, got {type(newdata).__name__} "
                        f"that numpy cannot read as numbers ({exc}); pass a DataFrame with the predictor "
                        "columns") from None
    expected = f"expected a DataFrame or a 2-D array (rows, {p} columns: {names})"
    if x.ndim == 0:
        raise DataError(f"newdata is a single number; {expected}")
    if x.ndim == 1:
        if x.shape[0] != p:
            raise DataError(f"newdata is a 1-D array of {x.shape[0]} values; {expected}. A 1-D array is read as "
                            f"one row, so it needs {p} values; for several rows pass a 2-D array")
        x = x[None, :]
    if x.ndim > 2:
        raise DataError(f"newdata is a {x.ndim}-D array of shape {x.shape}; {expected}. If the leading axes "
                        f"index rows, pass x.reshape(-1, {p})")
    if x.shape[1] != p:
        raise DataError(f"newdata has {x.shape[1]} columns; {expected}")
    inf = np.isinf(x)
    if inf.any():
        row, col = np.argwhere(inf)[0]
        raise DataError(f"newdata holds infinite values (first at row {row}, predictor {predictors[col]!r}); "
                        "replace or remove them")
    return x


def check_na_action(na_action) -> None:
    """Refuse a ``na_action`` of ``predict`` other than None, "raise" or "pass"."""
    if na_action is not None and na_action not in NA_ACTIONS:
        raise ArgumentError(f"na_action must be None, 'raise' or 'pass', got {na_action!r}")


def missing_rows(x: np.ndarray, index: pd.Index, predictors, na_action, routes_missing: bool):
    """What to do with the rows of ``x`` (m, p) holding NaN.

    Parameters
    ----------
    x : ndarray
        The new rows, NaN where a predictor is missing.
    index : pandas.Index
        Their labels (for the message).
    predictors : list of str
    na_action : {None, "raise", "pass"}
        None: the fit decides (route missing values if its rules have a missing-value branch,
        else raise).
    routes_missing : bool
        Whether the fit was made with ``na_action="split"``.

    Returns
    -------
    ndarray of bool or None
        The rows to predict (the others get NaN), or None for every row (as given: NaN is
        routed by the rules of a ``na_action="split"`` fit).

    Raises
    ------
    DataError
        Under "raise" (the default for a fit without missing-value rules), naming the rows by
        index label and the predictors with missing values.
    """
    check_na_action(na_action)
    na = np.isnan(x)
    if not na.any():
        return None
    if routes_missing and na_action != "raise":
        return None
    if na_action == "pass":
        return ~na.any(axis=1)
    where = "; ".join(f"predictor {predictors[v]!r}: {rows_text(index, na[:, v])}"
                      for v in range(x.shape[1]) if na[:, v].any())
    why = ("you asked for na_action='raise'" if routes_missing else
           "the fit was made without na_action='split', so its trees have no rule for a missing value")
    raise DataError(f"newdata has missing values in {rows_text(index, na.any(axis=1))}: {where}. Cannot predict "
                    f"them: {why}. Pass na_action='pass' to get NaN for those rows and predictions for the others, "
                    "or fill or remove them")


def with_missing_rows(result, ok, index: pd.Index):
    """``result`` of the rows ``ok`` (a table indexed by them, or samples with an ``obs`` dim)
    expanded to every row of ``index``, NaN (``class``: NaN) in the rows not predicted."""
    if ok is None:
        return result
    where = np.flatnonzero(ok)
    if isinstance(result, xr.DataArray):
        axis = result.dims.index("obs")
        shape = list(result.shape)
        shape[axis] = ok.size
        full = np.full(shape, np.nan)
        full[(slice(None),) * axis + (where,)] = result.values
        coords = {k: v for k, v in result.coords.items() if "obs" not in v.dims}
        return xr.DataArray(full, dims=result.dims, coords=coords, name=result.name)
    columns = {}
    for name in result.columns:
        col = result[name].to_numpy()
        full = np.full(ok.size, np.nan, dtype=object if col.dtype == object else float)
        full[where] = col
        columns[name] = full
    return pd.DataFrame(columns, index=index)


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
