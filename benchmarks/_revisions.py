"""Before/after runs of the benchmark scripts: the package at an earlier git revision, and the
hand-written sections of a report kept when its tables are regenerated."""

from __future__ import annotations

import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def checkout(revision: str, into: str) -> str:
    """``revision`` if it is a folder, else the package (``bartpy_suite/``) at that git revision of
    this repository exported (``git archive``) into a new folder under ``into``: read only, no work
    tree; put it first on ``PYTHONPATH`` to import the package as it was."""
    if os.path.isdir(revision):
        return revision
    dest = tempfile.mkdtemp(prefix=f"rev_{revision}_", dir=into)
    archive = subprocess.run(["git", "-C", ROOT, "archive", revision, "bartpy_suite"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def hand_written(path: str | None) -> list[str]:
    """The hand-written sections at the end of an existing report (from the first ``## `` heading
    that says "written by hand"), so that regenerating the tables keeps them."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as fh:
        lines = fh.read().rstrip("\n").split("\n")
    for i, line in enumerate(lines):
        if line.startswith("## ") and "written by hand" in line:
            return [""] + lines[i:]
    return []
