"""Copy the two UCI data sets into this folder and check them against their known checksums.

Run from the repository root: ``python3 data/make_uci_sets.py SOURCE`` where SOURCE is a folder
holding ``breast_cancer_wisconsin_original.csv`` and ``raisin.csv`` (the UCI files with a
header row; see README.md). The files are copied byte for byte as ``breast_cancer.csv`` and
``raisin.csv``: nothing is dropped or recoded (the ``?`` of the breast-cancer file are read as
missing values by :func:`bartpy_suite.datasets.load`, which also turns the class codes 2 and 4
into ``benign`` and ``malignant``). A file whose SHA-256 differs from the one below is refused.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

#: source file name -> (shipped name, SHA-256 of the file)
FILES = {
    "breast_cancer_wisconsin_original.csv": (
        "breast_cancer.csv",
        "2c12d7b105ad02a1387d5989ef53dbed1ad0c0bba153309a611cfd1cb252046e",
    ),
    "raisin.csv": ("raisin.csv", "47d7b6ae8b3b89d2349f3794a446e0196b3f9f140917920280273ded3f44dc83"),
}


def main(argv: list[str] | None = None) -> None:
    """Copy the files named in :data:`FILES` from SOURCE into this folder after checking them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder with the UCI files (with header rows)")
    args = parser.parse_args(argv)
    folder = Path(__file__).resolve().parent
    for source_name, (target_name, expected) in FILES.items():
        content = (args.source / source_name).read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        if digest != expected:
            raise SystemExit(f"{args.source / source_name}: SHA-256 {digest} differs from the expected {expected}")
        (folder / target_name).write_bytes(content)
        print(f"{target_name:18} {digest}")


if __name__ == "__main__":
    main()
