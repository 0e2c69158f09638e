"""Execute the vignettes cell by cell and write their output as markdown with PNG figures.

Usage, from the repository root::

    python3 vignettes/run.py                 # every vignette, full size, into vignettes/output/
    python3 vignettes/run.py --quick 01 04   # vignettes whose names start with 01 or 04, few draws,
                                             # into vignettes/output-quick/ (ignored by git)
    python3 vignettes/run.py --quick --out /tmp/vig   # somewhere else

A vignette is a jupytext "percent" script ``vignettes/NN_name.py``: cells start with a line
``# %%`` (code) or ``# %% [markdown]`` (markdown, each line commented with ``# ``). Dropping
such a file into ``vignettes/`` is all it takes to add one: the runner, the index it writes and
the quick-mode test find it by its name. The scripts also open as notebooks in Jupyter with
jupytext (``jupytext --to notebook vignettes/01_getting_started.py``), and run as plain Python.

The command line puts the repository root first on ``sys.path``, so the vignettes run against
the checkout they belong to. Every code cell runs in one namespace per vignette (like a
notebook kernel), with matplotlib's Agg backend. The output file ``<out>/<name>.md`` holds the
markdown cells, the code, what the code printed, warnings, the value of a cell's last
expression (DataFrames as markdown tables; a trailing ``;`` hides it, as in Jupyter) and every
figure left open by the cell, saved as ``<out>/<name>_files/cell<k>_<j>.png``. ``display(obj)``
shows an object mid-cell, as in Jupyter. A cell that raises stops the vignette: the runner
prints the traceback with the vignette's own line numbers and exits with status 1 after the
other vignettes.

``--quick`` sets the environment variable ``BARTPY_SUITE_VIGNETTE_QUICK=1``; each vignette reads
it (``QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"``) and cuts its draws and
repetitions, running the same code. The test suite runs every vignette that way into a
temporary directory. The outputs committed in ``vignettes/output/`` come from full runs, so a
quick run writes to ``vignettes/output-quick/`` by default (a folder with its own ``.gitignore``
of ``*``) and refuses ``--out vignettes/output``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
FULL_OUTPUT = "output"  # the committed outputs of full runs, under the vignettes' folder
QUICK_OUTPUT = "output-quick"  # quick runs' default, never committed
QUICK_ENV = "BARTPY_SUITE_VIGNETTE_QUICK"
_MARKER = re.compile(r"^# %%(.*)$")


class VignetteError(RuntimeError):
    """A vignette's cell raised; the message names the file, the cell and the line."""


@dataclass
class Cell:
    """One cell of a percent script: ``kind`` is "code" or "markdown"; ``line`` is the
    1-based line of its first source line in the file."""

    kind: str
    source: str
    line: int


def vignette_paths(names: list[str] | None = None, folder: Path = HERE) -> list[Path]:
    """The vignettes ``NN_*.py`` of ``folder``, sorted; with ``names``, those whose file name
    starts with one of them (``"01"``, ``"04_choosing"``).

    Raises
    ------
    SystemExit
        If a name matches no vignette (the message lists them).
    """
    paths = sorted(p for p in folder.glob("[0-9][0-9]_*.py"))
    if not names:
        return paths
    chosen = []
    for name in names:
        hits = [p for p in paths if p.stem.startswith(name) or p.name == name]
        if not hits:
            raise SystemExit(f"no vignette matches {name!r}; vignettes: {', '.join(p.stem for p in paths)}")
        chosen += [p for p in hits if p not in chosen]
    return sorted(chosen)


def parse_cells(text: str) -> list[Cell]:
    """Split a percent script into cells. Lines before the first ``# %%`` form a code cell
    unless they are blank or comments only; markdown lines lose their ``# `` prefix."""
    cells: list[Cell] = []
    kind, start, lines = "code", 1, []

    def close() -> None:
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", line) if line.startswith("#") else line
                             for line in body.splitlines()).strip("\n")
        elif all(not line.strip() or line.lstrip().startswith("#") for line in body.splitlines()) and not cells:
            return  # a header of comments before the first marker
        if body.strip():
            first = start + next(i for i, line in enumerate(lines) if line.strip())
            cells.append(Cell(kind, body, first))

    for number, line in enumerate(text.splitlines(), start=1):
        match = _MARKER.match(line)
        if match:
            close()
            kind = "markdown" if "[markdown]" in match.group(1) else "code"
            start, lines = number + 1, []
        else:
            lines.append(line)
    close()
    return cells


def markdown_table(frame) -> str:
    """A pandas DataFrame (or Series) as a GitHub markdown table, index included; floats with
    4 significant digits."""
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame(frame.name if frame.name is not None else "value")

    def fmt(value) -> str:
        if isinstance(value, float):
            if value != value:
                return "nan"
            if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
                return f"{value:.3e}"
            return f"{value:.4g}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    index_names = [str(n) if n is not None else "" for n in frame.index.names]
    header = index_names + [str(c) for c in frame.columns]
    rows = []
    for key, values in zip(frame.index, frame.itertuples(index=False)):
        keys = key if isinstance(key, tuple) else (key,)
        rows.append([fmt(k) for k in keys] + [fmt(v.item() if hasattr(v, "item") else v) for v in values])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class _Output:
    """What one cell produced, in order: ("text", str) and ("markdown", str) items."""

    items: list[tuple[str, str]] = field(default_factory=list)
    _pending: list[str] = field(default_factory=list)

    def write(self, text: str) -> int:
        self._pending.append(text)
        return len(text)

    def flush(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        if text.strip():
            self.items.append(("text", text.rstrip("\n")))

    def show(self, obj) -> None:
        self.flush()
        rendered = render(obj)
        if rendered is not None:
            self.items.append(rendered)


def render(obj) -> tuple[str, str] | None:
    """How the runner shows a value: a markdown table for pandas objects, nothing for None and
    matplotlib artists, the ``repr`` (``str`` for strings) otherwise."""
    import pandas as pd

    if obj is None:
        return None
    module = type(obj).__module__ or ""
    if module.startswith("matplotlib") or (isinstance(obj, list) and obj and
                                           (type(obj[0]).__module__ or "").startswith("matplotlib")):
        return None
    if isinstance(obj, (pd.DataFrame, pd.Series)):
        return ("markdown", markdown_table(obj))
    return ("text", str(obj) if isinstance(obj, str) else repr(obj))


def _split_last_expression(source: str, filename: str, first_line: int):
    """Compile a cell as (statements, last expression or None), with the file's line numbers."""
    padded = "\n" * (first_line - 1) + source
    tree = ast.parse(padded, filename=filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not source.rstrip().endswith(";"):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec")
    return body, (compile(last, filename, "eval") if last is not None else None)


def _save_figures(out_dir: Path, stem: str, cell_number: int) -> list[str]:
    import matplotlib.pyplot as plt

    links = []
    numbers = plt.get_fignums()
    if numbers:
        (out_dir / f"{stem}_files").mkdir(parents=True, exist_ok=True)
    for j, number in enumerate(numbers, start=1):
        relative = f"{stem}_files/cell{cell_number}_{j}.png"
        plt.figure(number).savefig(out_dir / relative, dpi=90, bbox_inches="tight")
        links.append(relative)
    plt.close("all")
    return links


def run_vignette(path: Path, out_dir: Path, quick: bool = False) -> Path:
    """Execute one vignette and write ``out_dir/<stem>.md`` (and its figures).

    Raises
    ------
    VignetteError
        If a cell raises; the partial output is written first.
    """
    import matplotlib

    matplotlib.use("Agg")
    import bartpy_suite

    path = Path(path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = parse_cells(path.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__main__", "__file__": str(path)}
    parts: list[str] = []
    failure = None
    previous = os.environ.get(QUICK_ENV)
    os.environ[QUICK_ENV] = "1" if quick else "0"
    started = time.perf_counter()
    try:
        for number, cell in enumerate(cells, start=1):
            if cell.kind == "markdown":
                parts.append(cell.source)
                continue
            parts.append(f"```python\n{cell.source}\n```")
            output = _Output()
            namespace["display"] = output.show
            try:
                with warnings.catch_warnings(record=True) as caught, \
                        contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                    warnings.simplefilter("default")
                    body, last = _split_last_expression(cell.source, str(path), cell.line)
                    exec(body, namespace)
                    if last is not None:
                        output.show(eval(last, namespace))
            except Exception as exc:  # noqa: BLE001 - reported with the cell and line
                output.flush()
                stack = traceback.extract_tb(exc.__traceback__)
                lines = [frame.lineno for frame in stack if frame.filename == str(path)]
                where = f"line {lines[-1]}" if lines else f"the cell starting on line {cell.line}"
                failure = VignetteError(
                    f"{path.name}: cell {number} ({where}) raised {type(exc).__name__}: {exc}\n"
                    + "".join(traceback.format_exception(exc))
                )
                output.items.append(("text", f"{type(exc).__name__}: {exc}"))
            output.flush()
            for warning in caught:
                output.items.append(("text", f"{warning.category.__name__}: {warning.message}"))
            for kind, text in output.items:
                parts.append(f"```text\n{text}\n```" if kind == "text" else text)
            parts += [f"![figure {j}]({link})" for j, link in enumerate(_save_figures(out_dir, path.stem, number), 1)]
            if failure is not None:
                break
    finally:
        if previous is None:
            os.environ.pop(QUICK_ENV, None)
        else:
            os.environ[QUICK_ENV] = previous
    seconds = time.perf_counter() - started
    mode = "quick mode (`--quick`)" if quick else "full mode"
    header = (f"<!-- Generated by `python3 vignettes/run.py` from `vignettes/{path.name}`; edit that file, "
              f"not this one. -->\n\n*Executed in {mode} with bartpy_suite {bartpy_suite.__version__} "
              f"in {seconds:.0f} s.*")
    target = out_dir / f"{path.stem}.md"
    target.write_text(header + "\n\n" + "\n\n".join(parts) + "\n", encoding="utf-8")
    if failure is not None:
        raise failure
    return target


def title_and_question(path: Path) -> tuple[str, str]:
    """The first markdown heading of a vignette and the paragraph after it (its question)."""
    cells = [c for c in parse_cells(path.read_text(encoding="utf-8")) if c.kind == "markdown"]
    paragraphs = [" ".join(line.strip() for line in block.splitlines())
                  for block in re.split(r"\n\s*\n", cells[0].source if cells else "") if block.strip()]
    title = paragraphs[0].lstrip("# ").strip() if paragraphs else path.stem
    return title, (paragraphs[1] if len(paragraphs) > 1 else "")


def write_index(out_dir: Path, paths: list[Path]) -> Path:
    """``out_dir/README.md``: a link to each executed vignette of ``out_dir`` with its question."""
    lines = ["# Executed vignettes", "", "Generated by `python3 vignettes/run.py`; the sources are the "
             "`.py` files one folder up.", ""]
    for path in paths:
        if (out_dir / f"{path.stem}.md").is_file():
            title, question = title_and_question(path)
            lines.append(f"- [{title}]({path.stem}.md): {question}")
    target = out_dir / "README.md"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def output_folder(out: Path | None, quick: bool, folder: Path | None = None) -> Path:
    """Where a run writes: ``out`` if given, else ``<folder>/output`` (full runs) or
    ``<folder>/output-quick`` (quick runs), ``folder`` being the vignettes' folder.

    A quick run's default folder gets a ``.gitignore`` of ``*`` so that git never sees it.

    Raises
    ------
    SystemExit
        If a quick run is pointed at ``<folder>/output``: it would replace the committed outputs
        of the full runs (and their test would fail).
    """
    folder = HERE if folder is None else folder
    if out is None:
        out = folder / (QUICK_OUTPUT if quick else FULL_OUTPUT)
        if quick:
            out.mkdir(parents=True, exist_ok=True)
            ignore = out / ".gitignore"
            if not ignore.is_file():
                ignore.write_text("# quick runs of vignettes/run.py: never committed\n*\n", encoding="utf-8")
    elif quick and Path(out).resolve() == (folder / FULL_OUTPUT).resolve():
        raise SystemExit(f"--quick --out {out}: that folder holds the committed full-run outputs, which a quick run "
                         f"would replace; leave --out out (quick runs write to {folder / QUICK_OUTPUT}) or choose "
                         "another folder")
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the chosen vignettes; return 1 if one failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="vignettes to run (file-name prefixes, e.g. 01 04); default all")
    parser.add_argument("--quick", action="store_true", help=f"few draws ({QUICK_ENV}=1), for checks")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default vignettes/{FULL_OUTPUT}, with --quick vignettes/{QUICK_OUTPUT})")
    args = parser.parse_args(argv)
    paths = vignette_paths(args.names, HERE)
    out = output_folder(args.out, args.quick)
    print(f"writing to {out}", flush=True)
    # the vignettes document the checkout they live in (not another installed copy)
    sys.path.insert(0, str(HERE.parent))
    failed = []
    for path in paths:
        started = time.perf_counter()
        try:
            target = run_vignette(path, out, quick=args.quick)
        except VignetteError as exc:
            print(exc, file=sys.stderr)
            failed.append(path.name)
            continue
        print(f"{path.name}: {time.perf_counter() - started:.0f} s -> {target}", flush=True)
    write_index(out, vignette_paths(folder=HERE))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
