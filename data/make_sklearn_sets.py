"""Write ``iris.csv`` and ``wine.csv`` from the copies bundled with scikit-learn.

Run once from the repository root: ``python3 data/make_sklearn_sets.py`` (needs scikit-learn).
Column names are made formula-friendly (letters, digits and underscores): iris's
``sepal length (cm)`` becomes ``Sepal_Length`` (R's names with ``_`` for ``.``) and the class
column ``Species`` holds the species names; wine's ``od280/od315_of_diluted_wines`` becomes
``od280_od315_of_diluted_wines`` and the class column ``cultivar`` holds scikit-learn's target
names (``class_0`` .. ``class_2``, UCI's cultivars 1-3). Rows keep scikit-learn's order; floats
are written with Python's shortest round-trip representation. Prints each file's SHA-256.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pandas as pd


def _frame(bunch, target: str, rename) -> pd.DataFrame:
    df = pd.DataFrame(bunch.data, columns=[rename(c) for c in bunch.feature_names])
    df[target] = [str(bunch.target_names[k]) for k in bunch.target]
    return df


def iris() -> pd.DataFrame:
    """Iris as a frame: ``Sepal_Length``, ``Sepal_Width``, ``Petal_Length``, ``Petal_Width``, ``Species``."""
    from sklearn.datasets import load_iris

    def rename(name: str) -> str:  # "sepal length (cm)" -> "Sepal_Length"
        return "_".join(word.capitalize() for word in name.replace(" (cm)", "").split())

    return _frame(load_iris(), "Species", rename)


def wine() -> pd.DataFrame:
    """Wine as a frame: 13 measurements and ``cultivar``."""
    from sklearn.datasets import load_wine

    return _frame(load_wine(), "cultivar", lambda name: re.sub(r"[^0-9A-Za-z_]", "_", name))


def main() -> None:
    """Write the two CSV files next to this script and print their checksums."""
    folder = Path(__file__).resolve().parent
    for name, make in (("iris", iris), ("wine", wine)):
        path = folder / f"{name}.csv"
        make().to_csv(path, index=False, lineterminator="\n")
        print(f"{path.name:18} {hashlib.sha256(path.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
