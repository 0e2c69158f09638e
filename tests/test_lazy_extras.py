"""The extras stay optional: importing the package pulls in neither scikit-learn nor arviz-plots.

(matplotlib and pyarrow are not checked: when they are installed, arviz-base's rcParams and
pandas 3 import them on their own, whatever this package does.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bartpy_suite


def test_import_does_not_load_the_extras():
    root = Path(bartpy_suite.__file__).resolve().parents[1]
    code = ("import sys, bartpy_suite; "
            "print(sorted(m for m in ('sklearn', 'arviz_plots') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]"
