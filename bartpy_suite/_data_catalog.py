"""The catalog of shipped data sets: names, files, one-line descriptions, dtypes on loading.

The CSV files live in the repository's top-level ``data/`` folder, which a wheel installs as
the package ``bartpy_suite.data`` (``[tool.setuptools.package-dir]`` in pyproject.toml), so
the repository keeps one copy. :func:`data_files` finds them in either place: the installed
package, or ``data/`` next to the ``bartpy_suite`` folder of a source checkout.

Imports: numpy, pandas and :mod:`bartpy_suite.errors` only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import pandas as pd

from bartpy_suite.errors import ArgumentError

__all__ = ["CATALOG", "HYPERCUBE_DIMS", "DataSet", "check_name", "data_files", "read", "sha256"]


@dataclass(frozen=True)
class DataSet:
    """One shipped data set.

    Attributes
    ----------
    name : str
        The name :func:`bartpy_suite.datasets.load` takes; the file is ``<name>.csv``.
    description : str
        One line for :func:`bartpy_suite.datasets.available`.
    simulated : bool
        True when the file is ``simulate_*(seed=SHIPPED_SEEDS[name])`` written by
        :func:`bartpy_suite.datasets.regenerate`.
    categories : dict
        Columns read as unordered categoricals, with their levels in code order.
    relabel : dict
        Columns whose file values are replaced before the categorical is made
        (e.g. the breast-cancer class codes 2 and 4).
    na_values : tuple of str
        Extra strings read as missing values.
    """

    name: str
    description: str
    simulated: bool
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    relabel: dict[str, dict[object, str]] = field(default_factory=dict)
    na_values: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        """The CSV file's name, ``<name>.csv``."""
        return f"{self.name}.csv"


#: Dimensions of the shipped hypercube-D data sets (those of PG-BART tables 1-2).
HYPERCUBE_DIMS: tuple[int, ...] = (2, 3, 4, 5, 7)

_ENTRIES = [
    DataSet(
        "breast_cancer",
        "Breast Cancer Wisconsin (original, UCI): 699 biopsies, 9 cytology scores 1-10, class "
        "benign/malignant; 16 bare_nuclei missing",
        simulated=False,
        categories={"class": ("benign", "malignant")},
        relabel={"class": {2: "benign", 4: "malignant"}},
        na_values=("?",),
    ),
    DataSet(
        "cgm1998",
        "Chipman, George & McCulloch (1998) simulated example: 800 rows, y = f(x1, x2) + 2 eps, "
        "x2 a factor A-D",
        simulated=True,
        categories={"x2": ("A", "B", "C", "D")},
    ),
    DataSet(
        "cgm_rjhmc",
        "CGM data of the RJHMC-Tree paper: integer x0, x1 on 1..10, y = f(x) + N(0, 0.2^2), "
        "800 train + 800 test rows (column split)",
        simulated=True,
        categories={"split": ("train", "test")},
    ),
    *[
        DataSet(
            f"hypercube{d}",
            f"PG-BART hypercube-{d}: 10 points around each of the {2**d} vertices of [-1, 1]^{d}, "
            f"one N(0, 3^2) value per vertex",
            simulated=True,
        )
        for d in HYPERCUBE_DIMS
    ],
    DataSet(
        "iris",
        "Fisher's iris (via scikit-learn): 150 flowers, 4 measurements in cm, Species in 3 classes",
        simulated=False,
        categories={"Species": ("setosa", "versicolor", "virginica")},
    ),
    DataSet(
        "raisin",
        "Raisin (UCI, Cinar et al. 2020): 900 raisins, 7 shape features, Class Kecimen/Besni",
        simulated=False,
        categories={"Class": ("Kecimen", "Besni")},
    ),
    DataSet(
        "wine",
        "Wine (UCI, via scikit-learn): 178 wines, 13 chemical measurements, cultivar in 3 classes",
        simulated=False,
        categories={"cultivar": ("class_0", "class_1", "class_2")},
    ),
    DataSet(
        "wu2007",
        "Wu, Tjelmeland & West (2007) simulated example (CT-MCMC paper eq. 13-16): 300 rows, "
        "x1 and x3 confounded",
        simulated=True,
    ),
]

#: Every shipped data set by name, sorted by name.
CATALOG: dict[str, DataSet] = {entry.name: entry for entry in sorted(_ENTRIES, key=lambda e: e.name)}


def check_name(name: object) -> DataSet:
    """The catalog entry of ``name``; an :class:`ArgumentError` listing the names otherwise."""
    if not isinstance(name, str) or name not in CATALOG:
        raise ArgumentError(
            f"unknown data set name={name!r}; valid names are: {', '.join(CATALOG)}"
        )
    return CATALOG[name]


def data_files() -> Traversable:
    """The folder holding the shipped CSV files.

    In an installed package that is the package ``bartpy_suite.data``; in a source checkout
    (the package imported from the repository, editable install or not) it is the
    repository's ``data/`` folder.

    Raises
    ------
    FileNotFoundError
        If neither place holds the data (a broken installation).
    """
    candidates: list[Traversable] = []
    try:
        candidates.append(resources.files("bartpy_suite.data"))
    except ModuleNotFoundError:
        pass
    candidates.append(Path(__file__).resolve().parent.parent / "data")
    for folder in candidates:
        if folder.joinpath("README.md").is_file():
            return folder
    raise FileNotFoundError(
        "the data files of bartpy_suite are missing (looked in the package bartpy_suite.data and "
        f"in {candidates[-1]}); reinstall the package"
    )


def sha256(entry: DataSet) -> str:
    """Hex SHA-256 of the shipped file of ``entry`` (the checksum listed in data/README.md)."""
    return hashlib.sha256(data_files().joinpath(entry.filename).read_bytes()).hexdigest()


def read(entry: DataSet) -> pd.DataFrame:
    """Read the shipped file of ``entry`` with the dtypes its entry documents."""
    with data_files().joinpath(entry.filename).open("r", encoding="utf-8") as handle:
        df = pd.read_csv(handle, na_values=list(entry.na_values) or None)
    for column, mapping in entry.relabel.items():
        df[column] = df[column].map(mapping)
    for column, levels in entry.categories.items():
        df[column] = pd.Categorical(df[column].astype(str), categories=list(levels), ordered=False)
    return df
