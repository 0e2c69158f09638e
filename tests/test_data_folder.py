"""The top-level data/ folder: checksums, README sections, dtypes of the real data sets, and
that a non-editable build ships every file."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bartpy_suite import _data_catalog, datasets

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "data" / "README.md").read_text(encoding="utf-8")


def _listed_checksums() -> dict[str, str]:
    """name -> sha256 as written in data/README.md (``- sha256: `hex` `` in a section headed by
    the name, or ``- `name`: `hex` `` in a section of several)."""
    found: dict[str, str] = {}
    section = None
    for line in README.splitlines():
        heading = re.match(r"^### (.+)$", line)
        if heading:
            section = re.findall(r"`([a-z0-9_]+)`", heading.group(1))
            continue
        single = re.match(r"^- sha256: `([0-9a-f]{64})`$", line)
        if single and section and len(section) == 1:
            found[section[0]] = single.group(1)
        several = re.match(r"^  - `([a-z0-9_]+)`: `([0-9a-f]{64})`$", line)
        if several:
            found[several.group(1)] = several.group(2)
    return found


def test_readme_lists_the_checksum_of_every_shipped_file():
    listed = _listed_checksums()
    assert sorted(listed) == list(datasets.available())
    for name, expected in listed.items():
        actual = hashlib.sha256((ROOT / "data" / f"{name}.csv").read_bytes()).hexdigest()
        assert actual == expected, f"data/{name}.csv changed: update data/README.md or restore the file"
        assert _data_catalog.sha256(_data_catalog.CATALOG[name]) == expected


def test_data_folder_holds_exactly_the_catalog():
    csvs = sorted(p.stem for p in (ROOT / "data").glob("*.csv"))
    assert csvs == list(datasets.available())
    # one copy in the repository: nothing left in the package folder
    assert not (ROOT / "bartpy_suite" / "data").exists()


def test_breast_cancer_missing_values_and_labels():
    df = datasets.load("breast_cancer")
    assert df.shape == (699, 11)
    assert df.columns[0] == "id" and df.columns[-1] == "class"
    missing = df.isna().sum()
    assert missing["bare_nuclei"] == 16 and missing.sum() == 16
    assert df["bare_nuclei"].dtype == np.float64
    scores = df.drop(columns=["id", "class"])
    values = scores.to_numpy(dtype=float)
    assert np.nanmin(values) == 1 and np.nanmax(values) == 10
    assert list(df["class"].cat.categories) == ["benign", "malignant"]
    assert df["class"].value_counts().to_dict() == {"benign": 458, "malignant": 241}
    raw = pd.read_csv(ROOT / "data" / "breast_cancer.csv", dtype=str)
    assert (raw["bare_nuclei"] == "?").sum() == 16
    assert (raw["class"].map({"2": "benign", "4": "malignant"}) == df["class"].astype(str)).all()


@pytest.mark.parametrize(
    "name, shape, target, counts",
    [
        ("iris", (150, 5), "Species", {"setosa": 50, "versicolor": 50, "virginica": 50}),
        ("wine", (178, 14), "cultivar", {"class_0": 59, "class_1": 71, "class_2": 48}),
        ("raisin", (900, 8), "Class", {"Kecimen": 450, "Besni": 450}),
    ],
)
def test_classification_sets(name, shape, target, counts):
    df = datasets.load(name)
    assert df.shape == shape
    assert df.columns[-1] == target
    assert df[target].value_counts().to_dict() == counts
    assert not df.isna().any().any()
    features = df.drop(columns=target)
    assert all(np.issubdtype(t, np.number) for t in features.dtypes)
    # formula-friendly names
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", c) for c in df.columns)


def test_iris_matches_fisher():
    df = datasets.load("iris")
    means = df.groupby("Species", observed=True)["Petal_Length"].mean().round(3).to_dict()
    assert means == {"setosa": 1.462, "versicolor": 4.26, "virginica": 5.552}


def test_non_editable_build_ships_and_loads_every_data_set(tmp_path):
    """Build the package as a wheel would (setuptools' build_py from a copy of the sources:
    the files build_py writes are the wheel's content) and load every data set from there,
    with the repository off sys.path."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.egg-info")
    shutil.copytree(ROOT / "bartpy_suite", src / "bartpy_suite", ignore=ignore)
    shutil.copytree(ROOT / "data", src / "data", ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    lib = tmp_path / "lib"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)], cwd=src,
                   check=True, capture_output=True)
    shipped = sorted(p.name for p in (lib / "bartpy_suite" / "data").iterdir() if p.suffix == ".csv")
    assert shipped == [f"{name}.csv" for name in datasets.available()]
    assert (lib / "bartpy_suite" / "data" / "README.md").is_file()
    shutil.rmtree(src)  # the built copy must not fall back on a source tree
    script = (
        "import sys, bartpy_suite\n"
        f"assert bartpy_suite.__file__.startswith({str(lib)!r}), bartpy_suite.__file__\n"
        "from bartpy_suite import datasets\n"
        "print(sum(len(datasets.load(n)) for n in datasets.available()))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(lib)!r})\n" + script],
                         cwd=tmp_path, check=True, capture_output=True, text=True)
    assert int(out.stdout) == sum(len(datasets.load(n)) for n in datasets.available())
