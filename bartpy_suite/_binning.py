"""Pre-binning of predictors into small integer codes (numpy and the package's errors only).

Numeric variable: a sorted grid of cut points; a value's code is the number of cut points
strictly below it (``searchsorted(cuts, x, 'left')``), so ``x <= cuts[k]`` iff ``code <= k``
and a rule is the index k of a cut point. The grid holds the midpoints between consecutive
distinct training values, or, when there are more than ``max_cuts`` distinct values, the
midpoints between consecutive distinct values of ``max_cuts + 1`` evenly spaced sample quantiles.
Categorical variable: the code is the level index and a rule is a bit mask of levels.
A missing value (NaN; only a fit with ``na_action="split"`` lets one through) gets the reserved
code ``nbins[v]``, one past the variable's last bin or level (see ``_kernels/tree.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DataError

MAX_LEVELS = 63
#: float64 has a 53-bit significand: integers beyond 2^53 in magnitude are rounded to a multiple of
#: a power of two (2048 near 2^63), so distinct int64 values there may become one float64.
FLOAT64_EXACT_INTEGERS = 2**53


def check_float64_keeps_values(raw, name: str) -> None:
    """Refuse integer predictor values that become equal when converted to float64.

    The trees bin predictors as float64. Integers beyond 2^53 in magnitude (e.g. int64 values
    near 2^63, such as identifiers or nanosecond timestamps) are rounded there, and values that
    differ by less than the rounding step merge: a column of distinct values may even look
    constant. Converting is harmless while the distinct values stay distinct (order is kept), so
    only a merge is refused.

    Parameters
    ----------
    raw : array_like
        The column as given (any dtype; only integer dtypes are checked).
    name : str
        How the message names the column, e.g. "predictor 'x'".

    Raises
    ------
    DataError
        If two distinct integers of ``raw`` have the same float64 value; the message gives the
        counts, an example and what to do.
    """
    raw = np.asarray(raw)
    if raw.dtype.kind not in "iu" or raw.size == 0:
        return
    big = raw > FLOAT64_EXACT_INTEGERS
    if raw.dtype.kind == "i":
        big |= raw < -FLOAT64_EXACT_INTEGERS
    if not big.any():
        return
    distinct = np.unique(raw)
    as_float = distinct.astype(np.float64)
    merged = np.flatnonzero(as_float[1:] == as_float[:-1])
    if merged.size == 0:
        return
    a, b = int(distinct[merged[0]]), int(distinct[merged[0] + 1])
    raise DataError(
        f"{name} holds integers beyond 2**53 = {FLOAT64_EXACT_INTEGERS} in magnitude, which float64 (the type "
        f"the trees split on) rounds: its {distinct.size} distinct values become {np.unique(as_float).size} "
        f"(e.g. {a} and {b} both become {float(as_float[merged[0]])!r}), so rows that differ there could not be "
        "split apart. Subtract a reference value in the data first (e.g. df[\"x\"] - df[\"x\"].min(), exact while "
        "the values span less than 2**53; formula arithmetic is float64 and would round too), or, for "
        "identifiers, leave the column out or make it a factor"
    )


def make_cuts(column: np.ndarray, max_cuts: int | None) -> np.ndarray:
    """Cut points of one numeric column.

    Parameters
    ----------
    column : ndarray
        Finite training values.
    max_cuts : int or None
        Largest number of cut points; None keeps every midpoint of distinct values.

    Returns
    -------
    ndarray
        Sorted float64 cut points (empty for a constant column).
    """
    values = np.unique(np.asarray(column, dtype=np.float64))
    if max_cuts is not None and values.size - 1 > max_cuts:
        probs = np.linspace(0.0, 1.0, max_cuts + 2)
        values = np.unique(np.quantile(values, probs, method="inverted_cdf"))
    return midpoints(values)


def midpoints(values: np.ndarray) -> np.ndarray:
    """Midpoints of consecutive sorted values, also between values near the float64 maximum.

    ``0.5 * (a + b)`` overflows to inf when a + b exceeds 1.8e308 (a predictor whose values
    are near the maximum would then never split there); only those midpoints are computed as
    ``0.5 * a + 0.5 * b``, which cannot overflow. Everywhere else the expression is unchanged,
    so the cut grids (and draws) at ordinary scales are bit-identical to earlier releases.

    Parameters
    ----------
    values : ndarray
        Sorted, distinct, finite float64 values.

    Returns
    -------
    ndarray
        ``values.size - 1`` midpoints.
    """
    lo, hi = values[:-1], values[1:]
    with np.errstate(over="ignore"):
        mid = 0.5 * (lo + hi)
    overflow = ~np.isfinite(mid)
    if overflow.any():
        mid[overflow] = 0.5 * lo[overflow] + 0.5 * hi[overflow]
    return mid


def bin_numeric(column: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Codes of a numeric column on a cut grid: number of cut points strictly below each value."""
    return np.searchsorted(cuts, np.asarray(column, dtype=np.float64), side="left").astype(np.int32)


@dataclass(frozen=True)
class BinnedPredictors:
    """Binned training predictors and the grids needed to bin new data the same way.

    Attributes
    ----------
    codes : ndarray of int32, shape (p, n)
        Feature-major codes.
    cuts : tuple of ndarray
        Cut grid per variable (empty for categorical variables).
    nbins : ndarray of int64, shape (p,)
        Number of codes per variable: ``len(cuts) + 1`` or the number of levels.
    is_categorical : ndarray of bool, shape (p,)
    """

    codes: np.ndarray
    cuts: tuple
    nbins: np.ndarray
    is_categorical: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, is_categorical, n_levels, max_cuts: int | None) -> BinnedPredictors:
        """Build grids from training predictors ``x`` (n, p); categorical columns hold codes."""
        x = np.asarray(x, dtype=np.float64)
        n, p = x.shape
        is_cat = np.asarray(is_categorical, dtype=bool).reshape(p)
        cuts = []
        nbins = np.zeros(p, dtype=np.int64)
        for v in range(p):
            if is_cat[v]:
                cuts.append(np.zeros(0))
                nbins[v] = int(n_levels[v])
            else:
                column = x[:, v]
                grid = make_cuts(column[~np.isnan(column)], max_cuts)
                cuts.append(grid)
                nbins[v] = grid.size + 1
        binned = cls(np.zeros((p, 0), dtype=np.int32), tuple(cuts), nbins, is_cat)
        return cls(binned.transform(x), binned.cuts, nbins, is_cat)

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Codes (p, m) of new predictors (m, p) on the training grids (missing: ``nbins[v]``)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((x.shape[1], x.shape[0]), dtype=np.int32)
        for v in range(x.shape[1]):
            column = x[:, v]
            missing = np.isnan(column)
            if self.is_categorical[v]:
                out[v] = np.where(missing, 0, column).astype(np.int32)
            else:
                out[v] = bin_numeric(column, self.cuts[v])
            out[v][missing] = self.nbins[v]
        return out
