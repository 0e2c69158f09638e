"""Data sets shipped with bartpy_suite and the generators of the simulated ones.

:func:`available` lists the shipped data sets with a one-line description and :func:`load`
reads one as a new DataFrame. The CSV files are in the repository's top-level ``data/``
folder (installed as the package ``bartpy_suite.data``); ``data/README.md`` gives each one's
source, licence, columns, processing and SHA-256 checksum, and the scripts that regenerate
them are kept next to the files. Real data: ``"breast_cancer"`` (Wisconsin, original),
``"iris"``, ``"raisin"``, ``"wine"``. Simulated data:

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
``"hypercube2"``, ``"hypercube3"``, ``"hypercube4"``, ``"hypercube5"``, ``"hypercube7"``
    The hypercube-D data of Lakshminarayanan, Roy and Teh (2015), "Particle Gibbs for
    Bayesian additive regression trees", AISTATS, section 4.1, at the dimensions of their
    tables 1-2 (:func:`simulate_hypercube`).
``"cgm_rjhmc"``
    The CGM data of Cochrane, Wills and Johnson, "RJHMC-Tree for exploration of the Bayesian
    decision tree posterior": integer ``x0``, ``x1`` on 1..10, ``y = f(x0, x1) + N(0, 0.2^2)``,
    800 training and 800 test rows marked by the column ``split``
    (:func:`simulate_cgm_rjhmc`).

Each shipped simulated file is exactly ``simulate_<...>(seed=SHIPPED_SEEDS[name])`` written
with :func:`regenerate`; call that function to rebuild the files, or the ``simulate_*``
functions with another seed or size to make more data. The noiseless mean functions are
:func:`f_cgm1998`, :func:`f_wu2007` and :func:`f_cgm_rjhmc`.

Imports: numpy, pandas, :mod:`bartpy_suite.errors` and :mod:`bartpy_suite._data_catalog` only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from bartpy_suite import _data_catalog
from bartpy_suite.errors import ArgumentError

__all__ = [
    "CGM1998_LEVELS",
    "HYPERCUBE_DIMS",
    "SHIPPED_SEEDS",
    "available",
    "f_cgm1998",
    "f_cgm_rjhmc",
    "f_wu2007",
    "load",
    "regenerate",
    "simulate_cgm1998",
    "simulate_cgm_rjhmc",
    "simulate_hmc20",
    "simulate_hypercube",
    "simulate_wu2007",
]

#: Dimensions of the shipped hypercube-D data sets (those of PG-BART tables 1-2).
HYPERCUBE_DIMS: tuple[int, ...] = _data_catalog.HYPERCUBE_DIMS

#: Seeds with which the shipped simulated CSV files were generated
#: (``numpy.random.default_rng(seed)``); hypercube-D uses ``1000 * D``.
SHIPPED_SEEDS: dict[str, int] = {
    "cgm1998": 1998,
    "cgm_rjhmc": 2022,
    **{f"hypercube{d}": 1000 * d for d in HYPERCUBE_DIMS},
    "wu2007": 2007,
}

#: Levels of the factor ``x2`` of the CGM 1998 example, in code order.
CGM1998_LEVELS: tuple[str, ...] = ("A", "B", "C", "D")

_SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def available() -> dict[str, str]:
    """The data sets that :func:`load` can read, each with a one-line description.

    Returns
    -------
    dict of str to str
        Name to description, sorted by name. Iterating over it (or ``list(available())``)
        gives the names; ``name in available()`` tests a name.

    Examples
    --------
    >>> from bartpy_suite import datasets
    >>> "cgm1998" in datasets.available()
    True
    >>> for name, text in datasets.available().items():  # doctest: +SKIP
    ...     print(f"{name:14} {text}")
    """
    return {name: entry.description for name, entry in _data_catalog.CATALOG.items()}


def load(name: str) -> pd.DataFrame:
    """Read a data set shipped with the package.

    Parameters
    ----------
    name : str
        One of :func:`available`, e.g. ``"cgm1998"``, ``"wu2007"``, ``"breast_cancer"``,
        ``"iris"``, ``"hypercube4"``.

    Returns
    -------
    pandas.DataFrame
        A new frame (the caller may modify it freely). Class labels and factors are unordered
        ``category`` columns with fixed levels; the other columns are numeric as written.

        ``"cgm1998"``: ``x1`` float64, ``x2`` category A-D, ``y`` float64 (800 rows).
        ``"wu2007"``: ``x1``, ``x2``, ``x3``, ``y`` float64 (300 rows).
        ``"hypercube<D>"``: ``x1 .. x<D>``, ``y`` float64 (``10 * 2**D`` rows).
        ``"cgm_rjhmc"``: ``split`` category (train, test), ``x0``, ``x1`` int64, ``y``
        float64 (1600 rows).
        ``"breast_cancer"``: ``id`` int64, nine scores (``bare_nuclei`` float64 with 16
        missing values, the others int64), ``class`` category (benign, malignant); 699 rows.
        Drop ``id`` from a model with ``"class ~ . - id"``.
        ``"iris"``: four float64 measurements, ``Species`` category (150 rows).
        ``"wine"``: 13 float64 measurements, ``cultivar`` category (178 rows).
        ``"raisin"``: seven numeric features, ``Class`` category (Kecimen, Besni; 900 rows).

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
    return _data_catalog.read(_data_catalog.check_name(name))


def _check_n(n: object, low: int, label: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < low:
        raise ArgumentError(f"{label} must be an integer >= {low}, got {label}={n!r}")
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
        Noise variance. The paper's levels, written "sigma^2 = 1, 0.1, 0.01" (table 1,
        appendix C), are noise standard deviations (its test MSE is about 1.02, 0.01, 1e-4),
        so its runs are ``sigma2 = 1, 0.01, 1e-4``.

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


def f_cgm_rjhmc(x0: np.ndarray | float, x1: np.ndarray | float) -> np.ndarray:
    """Noiseless mean function of the RJHMC-Tree paper's CGM data (its figure 2, "<" read as "<=").

    Parameters
    ----------
    x0, x1 : array_like of float
        The two predictors (integers 1..10 in the shipped data).

    Returns
    -------
    numpy.ndarray
        float64 array, broadcast shape of ``x0`` and ``x1``:

        ==========  ==================  =====
        x1          x0                  f
        ==========  ==================  =====
        x1 <= 4     x0 <= 3             1
        x1 <= 4     3 < x0 <= 7         5
        x1 <= 4     x0 > 7              8
        x1 > 4      x0 <= 5             8
        x1 > 4      x0 > 5              2
        ==========  ==================  =====

        On integer inputs these are the published rules (``4 <= x0 <= 7``, ``x1 >= 5``).
    """
    x0 = np.asarray(x0, dtype=np.float64)
    x1 = np.asarray(x1, dtype=np.float64)
    low = np.where(x0 <= 3.0, 1.0, np.where(x0 <= 7.0, 5.0, 8.0))
    high = np.where(x0 <= 5.0, 8.0, 2.0)
    return np.where(x1 <= 4.0, low, high).astype(np.float64)


def simulate_cgm_rjhmc(
    n_train: int = 800,
    n_test: int = 800,
    seed: _SeedLike = SHIPPED_SEEDS["cgm_rjhmc"],
    noise_sd: float = 0.2,
) -> pd.DataFrame:
    """Simulate the CGM data of the RJHMC-Tree paper (Cochrane, Wills and Johnson).

    The paper ships this data set only as a pickle; its generator is not published. We
    follow what that pickle shows: ``x0`` and ``x1`` independent integers uniform on 1..10,
    ``y = f(x0, x1) + N(0, noise_sd^2)`` with ``f`` of :func:`f_cgm_rjhmc` (noise standard
    deviation 0.2; the paper's "0.04" is the variance), 800 training and 800 test rows.

    Parameters
    ----------
    n_train, n_test : int, default 800
        Rows of each split (``n_train`` at least 1, ``n_test`` at least 0).
    seed : int, SeedSequence, Generator or None, default 2022
        Passed to :func:`numpy.random.default_rng`. The default is the seed of the shipped
        file, so ``simulate_cgm_rjhmc()`` equals ``load("cgm_rjhmc")``.
    noise_sd : float, default 0.2
        Standard deviation of the noise (finite, >= 0).

    Returns
    -------
    pandas.DataFrame
        Columns ``split`` (unordered category, levels train and test; the training rows
        first), ``x0``, ``x1`` (int64) and ``y`` (float64). The random numbers are drawn in
        this order, over all rows: ``x0`` (``rng.integers(1, 11, n)``), ``x1``, then the
        standard normal noise.

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If a size is not an integer in range or ``noise_sd`` is not a finite number >= 0.

    See Also
    --------
    f_cgm_rjhmc : the noiseless mean function.
    """
    n_train = _check_n(n_train, 1, "n_train")
    n_test = _check_n(n_test, 0, "n_test")
    if isinstance(noise_sd, bool) or not isinstance(noise_sd, (int, float, np.integer, np.floating)) or not (
        np.isfinite(noise_sd) and noise_sd >= 0
    ):
        raise ArgumentError(f"noise_sd must be a finite number >= 0, got noise_sd={noise_sd!r}")
    n = n_train + n_test
    rng = np.random.default_rng(seed)
    x0 = rng.integers(1, 11, n)
    x1 = rng.integers(1, 11, n)
    y = f_cgm_rjhmc(x0, x1) + float(noise_sd) * rng.standard_normal(n)
    split = pd.Categorical.from_codes(np.repeat([0, 1], [n_train, n_test]), categories=["train", "test"])
    return pd.DataFrame({"split": split, "x0": x0.astype(np.int64), "x1": x1.astype(np.int64), "y": y})


def _shipped_simulation(name: str) -> pd.DataFrame:
    """``simulate_<...>(seed=SHIPPED_SEEDS[name])``: the content of a shipped simulated file."""
    seed = SHIPPED_SEEDS[name]
    if name.startswith("hypercube"):
        return simulate_hypercube(int(name.removeprefix("hypercube")), seed=seed)
    simulators: dict[str, Callable[..., pd.DataFrame]] = {
        "cgm1998": simulate_cgm1998,
        "cgm_rjhmc": simulate_cgm_rjhmc,
        "wu2007": simulate_wu2007,
    }
    return simulators[name](seed=seed)


def regenerate(directory: str | os.PathLike[str], names: list[str] | None = None) -> list[Path]:
    """Write the shipped simulated CSV files, ``simulate_<...>(seed=SHIPPED_SEEDS[name])``.

    The repository's files were made with ``python3 data/make_simulated.py`` (which calls
    ``regenerate("data")``). Floats are written with Python's shortest round-trip
    representation, so :func:`load` gives back exactly the simulated values.

    Parameters
    ----------
    directory : str or path-like
        An existing directory; ``<name>.csv`` files in it are overwritten.
    names : list of str, optional
        Which simulated data sets to write (default: all of :data:`SHIPPED_SEEDS`, sorted).

    Returns
    -------
    list of pathlib.Path
        The files written, in the order of ``names``.

    Raises
    ------
    bartpy_suite.errors.ArgumentError
        If ``directory`` is not an existing directory, or a name is not a simulated data set.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ArgumentError(f"directory={str(directory)!r} is not an existing directory")
    if names is None:
        names = sorted(SHIPPED_SEEDS)
    bad = [name for name in names if name not in SHIPPED_SEEDS]
    if bad:
        raise ArgumentError(
            f"names={bad!r} are not simulated data sets; valid names are: {', '.join(sorted(SHIPPED_SEEDS))}"
        )
    written = []
    for name in names:
        path = directory / f"{name}.csv"
        _shipped_simulation(name).to_csv(path, index=False, lineterminator="\n")
        written.append(path)
    return written


def simulate_hmc20(n: int = 250, seed: _SeedLike = None, *, heterogeneous: bool = True, linear: bool = True,
                   noise: float = 1.0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Simulate the causal design of Hahn, Murray & Carvalho (2020, Bayesian Analysis, section 6).

    x1, x2, x3 ~ N(0, 1), x4 ~ Bernoulli(1/2), x5 uniform on {1, 2, 3}, g(1) = 2, g(2) = -1, g(3) = -4;
    prognostic function ``1 + g(x5) + x1 x3`` (``linear``) or ``-6 + g(x5) + 6 |x3 - 1|``; treatment
    effect ``1 + 2 x2 x4`` (``heterogeneous``) or 3; propensity
    ``0.8 Phi(3 mu / sd(mu) - 0.5 x1) + 0.05 + u / 10`` with u ~ U(0, 1) (targeted selection: the
    treated have larger mu); z ~ Bernoulli(propensity) and ``y = mu + tau z + noise * N(0, 1)``.
    The noise sd of the paper is not certain (replications use 1).

    Parameters
    ----------
    n : int, default 250
        Rows (the paper: 250 and 500).
    seed : int, SeedSequence, Generator or None
        Passed to :func:`numpy.random.default_rng`.
    heterogeneous, linear : bool
        Which treatment effect and prognostic function (the paper's 2 x 2 settings).
    noise : float, default 1.0
        Noise standard deviation.

    Returns
    -------
    data : pandas.DataFrame
        Columns ``y``, ``x1``, ``x2``, ``x3``, ``x4`` (0/1), ``x5`` (1, 2, 3; an integer column: write
        ``C(x5)`` in a formula) and ``z`` (0/1).
    tau : numpy.ndarray
        The true treatment effect of each row.
    propensity : numpy.ndarray
        The true propensity of each row.
    """
    n = _check_n(n, 2)
    from scipy import stats

    rng = np.random.default_rng(seed)
    x1, x2, x3 = rng.normal(size=(3, n))
    x4 = rng.integers(0, 2, n)
    x5 = rng.integers(1, 4, n)
    g = np.select([x5 == 1, x5 == 2, x5 == 3], [2.0, -1.0, -4.0])
    mu = 1 + g + x1 * x3 if linear else -6 + g + 6 * np.abs(x3 - 1)
    tau = 1 + 2 * x2 * x4 if heterogeneous else np.full(n, 3.0)
    pi = 0.8 * stats.norm.cdf(3 * mu / mu.std(ddof=1) - 0.5 * x1) + 0.05 + rng.random(n) / 10
    z = (rng.random(n) < pi).astype(int)
    y = mu + tau * z + noise * rng.normal(size=n)
    return pd.DataFrame({"y": y, "x1": x1, "x2": x2, "x3": x3, "x4": x4, "x5": x5, "z": z}), tau, pi
