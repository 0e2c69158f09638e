"""Data sets shipped with bartpy_suite and the generators that made them.

Two simulated regression problems from the Bayesian-tree literature are shipped as CSV files
in ``bartpy_suite/data/`` and read with :func:`load`:

``"cgm1998"``
    Chipman, George and McCulloch (1998), "Bayesian CART model search", JASA 93(443),
    935-948, section 6; as restated in Gattiglio, "Tempered stochastic search of Bayesian
    CART models" (MSc thesis), eq. 3.18. 800 rows, columns ``x1`` (numeric on [0, 10]),
    ``x2`` (factor with levels A, B, C, D) and ``y = f(x1, x2) + 2 * eps``.
``"wu2007"``
    Wu, Tjelmeland and West (2007), "Bayesian CART: prior specification and posterior
    simulation", JCGS 16(1), 44-66; as specified in Mohammadi, Pratola and Kaptein (2020),
    "Continuous-time birth-death MCMC for Bayesian regression tree models", JMLR,
    eq. 13-16 (with sigma^2 = 1, the setting of their table 1). 300 rows, columns ``x1``,
    ``x2``, ``x3`` (numeric on (0, 1)) and ``y``.

Each shipped file is exactly ``simulate_<name>(seed=SHIPPED_SEEDS[name])`` written with
:func:`regenerate`; call that function to rebuild the files, or the ``simulate_*``
functions with another seed or size to make more data. The noiseless mean functions are
:func:`f_cgm1998` and :func:`f_wu2007`.

Imports: numpy, pandas and :mod:`bartpy_suite.errors` only.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from bartpy_suite.errors import ArgumentError

__all__ = [
    "CGM1998_LEVELS",
    "SHIPPED_SEEDS",
    "available",
    "f_cgm1998",
    "f_wu2007",
    "load",
    "regenerate",
    "simulate_cgm1998",
    "simulate_hypercube",
    "simulate_wu2007",
]

#: Seeds with which the shipped CSV files were generated (``numpy.random.default_rng(seed)``).
SHIPPED_SEEDS: dict[str, int] = {"cgm1998": 1998, "wu2007": 2007}

#: Levels of the factor ``x2`` of the CGM 1998 example, in code order.
CGM1998_LEVELS: tuple[str, ...] = ("A", "B", "C", "D")

_SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def available() -> list[str]:
    """Names of the data sets that :func:`load` can read.

    Returns
    -------
    list of str
        The names, sorted: ``["cgm1998", "wu2007"]``.
    """
    return sorted(SHIPPED_SEEDS)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or name not in SHIPPED_SEEDS:
        raise ArgumentError(
            f"unknown data set name={name!r}; valid names are: {', '.join(available())}"
        )
    return name


def load(name: str) -> pd.DataFrame:
    """Read a data set shipped with the package.

    Parameters
    ----------
    name : str
        One of :func:`available`: ``"cgm1998"`` or ``"wu2007"``.

    Returns
    -------
    pandas.DataFrame
        A new frame (the caller may modify it freely). For ``"cgm1998"``: ``x1`` float64,
        ``x2`` an unordered ``category`` with levels A, B, C, D, ``y`` float64 (800 rows).
        For ``"wu2007"``: ``x1``, ``x2``, ``x3``, ``y``, all float64 (300 rows).

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``name`` is not a shipped data set; the message lists the valid names.

    Examples
    --------
    >>> from bartpy_suite import datasets
    >>> df = datasets.load("cgm1998")
    >>> df.shape
    (800, 3)
    >>> list(df["x2"].cat.categories)
    ['A', 'B', 'C', 'D']
    """
    name = _check_name(name)
    source = resources.files("bartpy_suite").joinpath("data", f"{name}.csv")
    with source.open("r", encoding="utf-8") as handle:
        df = pd.read_csv(handle)
    return _set_dtypes(name, df)


def _set_dtypes(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """Give a data set the dtypes its simulator returns."""
    out = df.copy()
    for column in out.columns:
        if name == "cgm1998" and column == "x2":
            out[column] = pd.Categorical(
                out[column].astype(str), categories=list(CGM1998_LEVELS), ordered=False
            )
        else:
            out[column] = out[column].astype("float64")
    return out


def _check_n(n: object, low: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < low:
        raise ArgumentError(f"n must be an integer >= {low}, got n={n!r}")
    return int(n)


def f_cgm1998(x1: np.ndarray | float, x2: np.ndarray | str) -> np.ndarray:
    """Noiseless mean function of the CGM 1998 example (thesis eq. 3.18).

    Parameters
    ----------
    x1 : array_like of float
        The numeric predictor.
    x2 : array_like of str
        The factor, with values in A, B, C, D (a pandas Categorical works too).

    Returns
    -------
    numpy.ndarray
        float64 array, broadcast shape of ``x1`` and ``x2``:

        ========================  ==================  =====
        x2                        x1                  f
        ========================  ==================  =====
        A or B                    x1 <= 5             8
        A or B                    x1 > 5              2
        C or D                    x1 <= 3             1
        C or D                    3 < x1 <= 7         5
        C or D                    x1 > 7              8
        ========================  ==================  =====

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``x2`` holds a value outside A, B, C, D.
    """
    x1 = np.asarray(x1, dtype=np.float64)
    x2 = np.asarray(x2, dtype=object).astype(str)
    bad = sorted(set(np.unique(x2).tolist()) - set(CGM1998_LEVELS))
    if bad:
        raise ArgumentError(f"x2 must take values in {list(CGM1998_LEVELS)}, got {bad}")
    x1, x2 = np.broadcast_arrays(x1, x2)
    ab = np.isin(x2, ["A", "B"])
    f_ab = np.where(x1 <= 5.0, 8.0, 2.0)
    f_cd = np.where(x1 <= 3.0, 1.0, np.where(x1 <= 7.0, 5.0, 8.0))
    return np.where(ab, f_ab, f_cd).astype(np.float64)


def simulate_cgm1998(n: int = 800, seed: _SeedLike = SHIPPED_SEEDS["cgm1998"]) -> pd.DataFrame:
    """Simulate the CGM 1998 example, thesis eq. 3.18: ``y = f(x1, x2) + 2 * eps``.

    The thesis (and Chipman, George and McCulloch 1998) only say "800 iid observations"
    with x1 on [0, 10] and x2 in {A, B, C, D}; we draw ``x1 ~ Uniform(0, 10)`` and ``x2``
    uniformly from the four levels, independently, and ``eps ~ N(0, 1)``.

    Parameters
    ----------
    n : int, default 800
        Number of rows (at least 1).
    seed : int, SeedSequence, Generator or None, default 1998
        Passed to :func:`numpy.random.default_rng`. The default is the seed of the shipped
        file, so ``simulate_cgm1998()`` equals ``load("cgm1998")``.

    Returns
    -------
    pandas.DataFrame
        Columns ``x1`` (float64), ``x2`` (unordered category, levels A-D), ``y`` (float64).
        The random numbers are drawn in this order: all of ``x1``
        (``rng.uniform(0, 10, n)``), all of the ``x2`` codes (``rng.integers(0, 4, n)``),
        all of ``eps`` (``rng.standard_normal(n)``).

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``n`` is not an integer >= 1.

    See Also
    --------
    f_cgm1998 : the noiseless mean function.
    """
    n = _check_n(n, 1)
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0.0, 10.0, n)
    codes = rng.integers(0, len(CGM1998_LEVELS), n)
    eps = rng.standard_normal(n)
    x2 = pd.Categorical.from_codes(codes, categories=list(CGM1998_LEVELS), ordered=False)
    y = f_cgm1998(x1, np.asarray(CGM1998_LEVELS, dtype=object)[codes]) + 2.0 * eps
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


def simulate_hypercube(d: int, n: int = 10, seed: _SeedLike = None) -> pd.DataFrame:
    """Simulate the hypercube-D data of the PG-BART paper (Lakshminarayanan et al. 2015, 4.1).

    For each of the ``2**d`` vertices v of [-1, 1]^d, ``n`` points ``x = v + eps`` with
    ``eps ~ N(0, 0.1^2 I_d)``; each vertex has its own value ``f_v ~ N(0, 3^2)`` and
    ``y = f_v + e`` with ``e ~ N(0, 0.01^2)``.

    Parameters
    ----------
    d : int
        Dimension (at least 1; 2**d vertices).
    n : int, default 10
        Points per vertex (the paper's 10).
    seed : int, SeedSequence, Generator or None

    Returns
    -------
    pandas.DataFrame
        Columns ``x1 .. x<d>`` and ``y`` (float64), ``n * 2**d`` rows, vertex by vertex
        (vertices in binary order, coordinate 1 the slowest). The random numbers are drawn in
        this order: the vertex values (``rng.normal(0, 3, 2**d)``), the offsets
        (``rng.normal(0, 0.1, (rows, d))``), the noise (``rng.normal(0, 0.01, rows)``).

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``d`` or ``n`` is not an integer >= 1.
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ArgumentError(f"d must be an integer >= 1, got d={d!r}")
    d = int(d)
    n = _check_n(n, 1)
    rng = np.random.default_rng(seed)
    vertices = np.array([[1.0 if (k >> (d - 1 - j)) & 1 else -1.0 for j in range(d)] for k in range(2**d)])
    values = rng.normal(0.0, 3.0, 2**d)
    vertex = np.repeat(np.arange(2**d), n)
    x = vertices[vertex] + rng.normal(0.0, 0.1, (vertex.size, d))
    y = values[vertex] + rng.normal(0.0, 0.01, vertex.size)
    out = pd.DataFrame({f"x{j + 1}": x[:, j] for j in range(d)})
    out["y"] = y
    return out


def f_wu2007(x1: np.ndarray | float, x2: np.ndarray | float) -> np.ndarray:
    """Noiseless mean function of the Wu et al. (2007) example (CT-MCMC paper eq. 16).

    Parameters
    ----------
    x1, x2 : array_like of float
        The first two predictors (``x3`` does not enter the mean).

    Returns
    -------
    numpy.ndarray
        float64 array: 1 where ``x1 <= 0.5`` and ``x2 <= 0.5``; 3 where ``x1 <= 0.5`` and
        ``x2 > 0.5``; 5 where ``x1 > 0.5``.
    """
    x1 = np.asarray(x1, dtype=np.float64)
    x2 = np.asarray(x2, dtype=np.float64)
    return np.where(x1 <= 0.5, np.where(x2 <= 0.5, 1.0, 3.0), 5.0).astype(np.float64)


def simulate_wu2007(
    n: int = 300, seed: _SeedLike = SHIPPED_SEEDS["wu2007"], sigma2: float = 1.0
) -> pd.DataFrame:
    """Simulate the Wu, Tjelmeland and West (2007) example, CT-MCMC paper eq. 13-16.

    Rows come in three consecutive blocks (for ``n = 300``: rows 1-100, 101-200, 201-300):

    ======  ==================  ==================  ==================
    block   x1                  x2                  x3
    ======  ==================  ==================  ==================
    1       Uniform(0.1, 0.4)   Uniform(0.1, 0.4)   Uniform(0.6, 0.9)
    2       Uniform(0.1, 0.4)   Uniform(0.6, 0.9)   Uniform(0.6, 0.9)
    3       Uniform(0.6, 0.9)   Uniform(0.1, 0.9)   Uniform(0.1, 0.4)
    ======  ==================  ==================  ==================

    and ``y = f(x1, x2) + N(0, sigma2)`` with ``f`` of eq. 16 (:func:`f_wu2007`), so x1 and
    x3 are confounded. The rows are not shuffled (as in the paper).

    Parameters
    ----------
    n : int, default 300
        Number of rows (at least 3). Blocks 1 and 2 get ``n // 3`` rows each, block 3 the
        rest; ``n = 300`` is the paper's design.
    seed : int, SeedSequence, Generator or None, default 2007
        Passed to :func:`numpy.random.default_rng`. The default is the seed of the shipped
        file, so ``simulate_wu2007()`` equals ``load("wu2007")``.
    sigma2 : float, default 1.0
        Noise variance; the paper uses 1 (table 1), 0.1 and 0.01 (appendix C).

    Returns
    -------
    pandas.DataFrame
        Columns ``x1``, ``x2``, ``x3``, ``y``, all float64. The random numbers are drawn in
        this order: ``x1`` (all rows), ``x2``, ``x3``, then the standard normal noise.

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``n`` is not an integer >= 3 or ``sigma2`` is not a finite number >= 0.

    See Also
    --------
    f_wu2007 : the noiseless mean function.
    """
    n = _check_n(n, 3)
    if isinstance(sigma2, bool) or not isinstance(sigma2, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"sigma2 must be a finite number >= 0, got sigma2={sigma2!r}")
    if not np.isfinite(sigma2) or sigma2 < 0:
        raise ArgumentError(f"sigma2 must be a finite number >= 0, got sigma2={sigma2!r}")
    k = n // 3
    sizes = (k, k, n - 2 * k)
    rng = np.random.default_rng(seed)

    def blocks(bounds: tuple[tuple[float, float], ...]) -> np.ndarray:
        low = np.repeat([b[0] for b in bounds], sizes)
        high = np.repeat([b[1] for b in bounds], sizes)
        return rng.uniform(low, high)

    lo, hi, wide = (0.1, 0.4), (0.6, 0.9), (0.1, 0.9)
    x1 = blocks((lo, lo, hi))  # eq. 13
    x2 = blocks((lo, hi, wide))  # eq. 14
    x3 = blocks((hi, hi, lo))  # eq. 15
    y = f_wu2007(x1, x2) + np.sqrt(float(sigma2)) * rng.standard_normal(n)  # eq. 16
    return pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "y": y})


def regenerate(directory: str | os.PathLike[str]) -> list[Path]:
    """Write the shipped CSV files, ``simulate_<name>(seed=SHIPPED_SEEDS[name])``.

    The package's files were made with ``regenerate("bartpy_suite/data")`` run from the
    repository root. Floats are written with Python's shortest round-trip representation,
    so :func:`load` gives back exactly the simulated values.

    Parameters
    ----------
    directory : str or path-like
        An existing directory; ``<name>.csv`` files in it are overwritten.

    Returns
    -------
    list of pathlib.Path
        The files written, one per name of :func:`available`.

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``directory`` is not an existing directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ArgumentError(f"directory={str(directory)!r} is not an existing directory")
    simulators = {"cgm1998": simulate_cgm1998, "wu2007": simulate_wu2007}
    written = []
    for name in available():
        path = directory / f"{name}.csv"
        simulators[name](seed=SHIPPED_SEEDS[name]).to_csv(path, index=False, lineterminator="\n")
        written.append(path)
    return written
