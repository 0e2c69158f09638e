"""Regenerate the simulated data sets of this folder.

Run from the repository root: ``PYTHONPATH=. python3 data/make_simulated.py``. It writes
``cgm1998.csv``, ``cgm_rjhmc.csv``, ``hypercube{2,3,4,5,7}.csv`` and ``wu2007.csv`` with
:func:`bartpy_suite.datasets.regenerate` (each file is ``simulate_<...>(seed=SHIPPED_SEEDS[name])``)
and prints each file's SHA-256 (the checksums listed in README.md).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bartpy_suite import datasets


def main() -> None:
    """Write the simulated CSV files next to this script and print their checksums."""
    folder = Path(__file__).resolve().parent
    for path in datasets.regenerate(folder):
        print(f"{path.name:18} {hashlib.sha256(path.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
