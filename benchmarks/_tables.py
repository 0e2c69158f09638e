"""Markdown output shared by the benchmark scripts: a table from rows, and writing the report."""

from __future__ import annotations

import os
from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Lines of a markdown table (cells converted with ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def emit(lines: Sequence[str], out: str | None) -> str:
    """Join the report's lines, print it and write it to ``out`` (if given); returns the text."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        write_atomic(out, text)
    return text


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary name in the same folder, so that an
    interrupted run leaves the previous report (or none), never a half-written one."""
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
