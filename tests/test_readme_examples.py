"""Every code block of README.md and of the documentation's pages (``docs/*.md``, ``docs/guide/*.md``) runs.

The test reads the ```python and ```bash blocks of each file and groups them, in the order they
appear, by level-2 section (``## ...``, its ``###`` subsections included) in README.md and
``docs/*.md``, and by page in ``docs/guide/`` (a guide page is one README section moved to a page
of its own, its subsections promoted one level):

* The Python blocks of a section run in order in one namespace, as if pasted one after the other
  into one Python session, in a temporary working directory with matplotlib's Agg backend. A
  block holding ``if __name__ == "__main__":`` (the dask example: dask's worker processes
  re-import the script) runs alone as a script in a subprocess.
* Each command of a bash block (``&&`` separates commands) runs with ``bash -c`` in a temporary
  directory, or is skipped for the reason given in ``SKIPPED_COMMANDS``. A command that matches
  neither ``RUN_COMMANDS`` nor ``SKIPPED_COMMANDS`` fails the test: a new block must be classified
  here.

Everything runs against this checkout (``PYTHONPATH`` is the repository root, also for the
subprocesses and the ``bartpy-suite`` console script).

Size switch: before running a block, the test rewrites the sizes written in it down to at most
``SMALL``: the numbers of the keywords ``draws=``, ``tune=``, ``chains=``, ``trees=`` and of the
soft tree's ``"warmup":`` option in Python, and of the options ``--draws``, ``--tune``,
``--chains`` and ``--trees`` on the command line (``draws=2000`` becomes ``draws=30``). Nothing
else changes, so the whole README runs in about a minute of CPU once the kernels are compiled.
The switch lives here, not in the package.

The README states the cost of its longer examples at their own sizes. Those numbers come from
running this file as a script::

    python3 tests/test_readme_examples.py --costs benchmarks/results/readme_costs.md

which runs each section's examples at the small sizes (so that the numba kernels are compiled
and loaded), then again at the README's sizes, and writes the CPU seconds (user + system, all
threads, and the subprocesses' for the dask script) of every statement that took at least a
second (``--sections "Soft trees" ...`` measures some sections, in that order).
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "guide").glob("*.md"))]

# the size switch: the largest value each size keyword keeps in the test run
SMALL = {"draws": 30, "tune": 30, "chains": 2, "trees": 10, "warmup": 10}
_PY_SIZE = re.compile(r"\b(draws|tune|chains|trees)(\s*=\s*)(\d+)\b")
_PY_WARMUP = re.compile(r"""(["']warmup["']\s*:\s*)(\d+)\b""")
_CLI_SIZE = re.compile(r"(--(draws|tune|chains|trees)(?:\s+|=))(\d+)\b")

# commands of the bash blocks that run (a regular expression matched at the command's start)
RUN_COMMANDS = [
    r"bartpy-suite\b",                # the console script of the installed package
    r"python3 -m bartpy_suite\b",
    r"python3 -c\b",                  # small set-up steps, e.g. writing a shipped data set as CSV
]
# commands that do not run here, and why
SKIPPED_COMMANDS = {
    r"python3 -m pip install\b": "installs packages: CI (.ci/run) installs the package and its test extras first",
    r"python3 -m pytest\b": "runs this test suite, which CI runs itself",
    r"python3 vignettes/run\.py\b": "runs the vignettes: tests/test_vignettes.py runs every one of them in quick mode",
    r"mkdocs\b": "builds or serves the documentation site: CI (.ci/run) builds it with --strict",
    r"python3 benchmarks/": "the benchmarks take minutes to hours and are not part of the test run (README: Benchmarks)",
}


@dataclass
class Block:
    """One fenced code block: the document, its level-2 section, the language, the 1-based line
    of its first code line, and the code."""

    document: Path
    section: str
    language: str
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)} line {self.line} (section {self.section!r})"


def code_blocks(path: Path) -> list[Block]:
    """The ```python and ```bash blocks of a markdown file, with their sections, in file order
    (a guide page's section is its title)."""
    blocks: list[Block] = []
    heading = "# " if path.parent.name == "guide" else "## "
    section, language, start, lines = "(top)", None, 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if language is None:
            if line.startswith(heading):
                section = line[len(heading):].strip()
            fence = re.match(r"^```(\w*)\s*$", line)
            if fence:
                language, start, lines = fence.group(1) or "text", number + 1, []
        elif line.startswith("```"):
            if language in ("python", "bash"):
                blocks.append(Block(path, section, language, start, "\n".join(lines) + "\n"))
            language = None
        else:
            lines.append(line)
    if language is not None:
        raise AssertionError(f"{path.name}: the code block opened on line {start - 1} is never closed")
    return blocks


def small(code: str, language: str) -> str:
    """``code`` with its sizes capped at ``SMALL`` (the test's size switch)."""
    if language == "bash":
        return _CLI_SIZE.sub(lambda m: m.group(1) + str(min(int(m.group(3)), SMALL[m.group(2)])), code)
    code = _PY_SIZE.sub(lambda m: m.group(1) + m.group(2) + str(min(int(m.group(3)), SMALL[m.group(1)])), code)
    return _PY_WARMUP.sub(lambda m: m.group(1) + str(min(int(m.group(2)), SMALL["warmup"])), code)


def is_script(block: Block) -> bool:
    """A block that must run as its own script (``if __name__ == "__main__":``)."""
    return re.search(r"""^if __name__ == ["']__main__["']:""", block.code, re.MULTILINE) is not None


def bash_commands(block: Block) -> list[tuple[int, str]]:
    """(line, command) for every command of a bash block: lines split at ``&&``."""
    commands = []
    for offset, line in enumerate(block.code.splitlines()):
        for command in line.split("&&"):
            if command.strip() and not command.strip().startswith("#"):
                commands.append((block.line + offset, command.strip()))
    return commands


def classify(command: str) -> str | None:
    """None if the command runs, else the reason it is skipped.

    Raises
    ------
    AssertionError
        If the command is in neither list.
    """
    if any(re.match(pattern, command) for pattern in RUN_COMMANDS):
        return None
    for pattern, reason in SKIPPED_COMMANDS.items():
        if re.match(pattern, command):
            return reason
    raise AssertionError(f"the README command {command!r} is neither run nor skipped: add it to RUN_COMMANDS "
                         "or SKIPPED_COMMANDS (with a reason) in tests/test_readme_examples.py")


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _statements(block: Block, code: str) -> list[tuple[int, object]]:
    """The top-level statements of a Python block, compiled with the document's line numbers."""
    tree = ast.parse("\n" * (block.line - 1) + code, filename=str(block.document))
    return [(node.lineno, compile(ast.Module([node], type_ignores=[]), str(block.document), "exec"))
            for node in tree.body]


def run_python_section(blocks: list[Block], workdir: Path, shrink: bool = True,
                       costs: list | None = None) -> None:
    """Run one section's Python blocks in order in one namespace (scripts in a subprocess).

    With ``costs`` (a list), append (document, line, statement's first source line, CPU seconds)
    for every top-level statement, or script, that took at least a second.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict = {"__name__": "__readme__"}
    for block in blocks:
        code = small(block.code, "python") if shrink else block.code
        if is_script(block):
            script = workdir / f"readme_line{block.line}.py"
            script.write_text(code, encoding="utf-8")
            before = time.process_time() + _children_cpu()
            done = subprocess.run([sys.executable, script.name], cwd=workdir, env=_environment(),
                                  capture_output=True, text=True, timeout=900)
            seconds = time.process_time() + _children_cpu() - before
            assert done.returncode == 0, f"{block.where}: the script exited with {done.returncode}\n{done.stderr[-4000:]}"
            if costs is not None and seconds >= 1:
                costs.append((block.document.name, block.line, "(the whole script, with its worker processes)",
                              seconds))
            continue
        for line, statement in _statements(block, code):
            before = time.process_time()
            try:
                exec(statement, namespace)
            except Exception as exc:
                raise AssertionError(f"{block.where}: the statement on line {line} raised "
                                     f"{type(exc).__name__}: {exc}") from exc
            seconds = time.process_time() - before
            if costs is not None and seconds >= 1:
                source = block.document.read_text(encoding="utf-8").splitlines()[line - 1].strip()
                costs.append((block.document.name, line, source, seconds))
        plt.close("all")


def run_bash_block(block: Block, workdir: Path, shrink: bool = True, costs: list | None = None) -> list[str]:
    """Run the runnable commands of a bash block in ``workdir``; return the skipped ones with reasons."""
    skipped = []
    for line, command in bash_commands(block):
        reason = classify(command)
        if reason is not None:
            skipped.append(f"{command}: {reason}")
            continue
        runnable = small(command, "bash") if shrink else command
        if shlex.split(runnable)[0] == "bartpy-suite":
            assert shutil.which("bartpy-suite"), "the console script bartpy-suite is not on PATH: pip install -e ."
        before = _children_cpu()
        done = subprocess.run(["bash", "-c", runnable], cwd=workdir, env=_environment(), capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, (f"{block.document.name} line {line}: {runnable!r} exited with "
                                      f"{done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        if costs is not None and _children_cpu() - before >= 1:
            costs.append((block.document.name, line, command, _children_cpu() - before))
    return skipped


def _sections() -> dict[tuple[str, str], list[Block]]:
    sections: dict[tuple[str, str], list[Block]] = {}
    for path in DOCUMENTS:
        for block in code_blocks(path):
            sections.setdefault((str(path.relative_to(ROOT)), block.section), []).append(block)
    return sections


SECTIONS = _sections()
PYTHON = [key for key, blocks in SECTIONS.items() if any(b.language == "python" for b in blocks)]
BASH = [key for key, blocks in SECTIONS.items() if any(b.language == "bash" for b in blocks)]


def test_the_readme_has_its_examples():
    # the sections that hold code today: losing one (a renamed heading, an unclosed fence) fails here
    assert {("README.md", "A first fit"), ("docs/guide/python.md", "Using it from Python"),
            ("docs/guide/dask.md", "Chains and predictions on a dask cluster"),
            ("docs/guide/missing_values.md", "Missing predictor values inside the trees"),
            ("docs/guide/survival.md", "Survival outcomes"), ("docs/guide/soft_trees.md", "Soft trees")} <= set(PYTHON)
    assert {("README.md", "Quickstart"), ("docs/guide/cli.md", "Command line")} <= set(BASH)


def test_size_switch_caps_sizes_and_nothing_else():
    code = 'bps.bart("y ~ .", data=wu, trees=200, chains=4, draws=1000, tune=5, seed=1, sampler_options={"warmup": 500})'
    assert small(code, "python") == ('bps.bart("y ~ .", data=wu, trees=10, chains=2, draws=30, tune=5, seed=1, '
                                     'sampler_options={"warmup": 10})')
    assert small("x_draws = 5000; n_trees=3", "python") == "x_draws = 5000; n_trees=3"
    assert small("bartpy-suite fit 'y ~ .' d.csv --chains 4 --draws=1000 --seed 1000", "bash") == \
        "bartpy-suite fit 'y ~ .' d.csv --chains 2 --draws=30 --seed 1000"


def test_every_bash_command_is_run_or_skipped_with_a_reason():
    with pytest.raises(AssertionError, match="neither run nor skipped"):
        classify("rm -rf build")
    assert classify("python3 -m pip install .") is not None and classify("bartpy-suite demo") is None
    for key in BASH:
        for block in SECTIONS[key]:
            if block.language == "bash":
                for _, command in bash_commands(block):
                    classify(command)


@pytest.mark.parametrize("key", PYTHON, ids=[f"{d}:{s}" for d, s in PYTHON])
def test_python_examples_run(key, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_python_section([b for b in SECTIONS[key] if b.language == "python"], tmp_path)


@pytest.mark.parametrize("key", BASH, ids=[f"{d}:{s}" for d, s in BASH])
def test_bash_examples_run(key, tmp_path):
    for block in SECTIONS[key]:
        if block.language == "bash":
            run_bash_block(block, tmp_path)


def measure_costs(out: Path, sections: list[str] | None = None) -> None:
    """Run the examples of each section small (to compile), then at the README's sizes; write the
    costs to ``out`` after each section (whole file, renamed into place), so a long run that is
    stopped keeps the sections it finished. ``sections``: section names, in the order to run them
    (default: all, in document order)."""
    keys = list(SECTIONS)
    if sections:
        unknown = [s for s in sections if s not in {section for _, section in keys}]
        if unknown:
            raise SystemExit(f"no section {unknown}; sections: {sorted({section for _, section in keys})}")
        keys = [key for name in sections for key in keys if key[1] == name]
    rows: list = []
    command = "python3 tests/test_readme_examples.py --costs " + (
        str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out))
    if sections:
        command += " --sections " + " ".join(shlex.quote(s) for s in sections)
    for done, key in enumerate(keys, start=1):
        blocks = SECTIONS[key]
        for shrink in (True, False):
            with tempfile.TemporaryDirectory(prefix="readme-") as tmp:
                cwd = os.getcwd()
                os.chdir(tmp)
                try:
                    costs = None if shrink else rows
                    run_python_section([b for b in blocks if b.language == "python"], Path(tmp), shrink, costs)
                    for block in blocks:
                        if block.language == "bash":
                            run_bash_block(block, Path(tmp), shrink, costs)
                finally:
                    os.chdir(cwd)
        print(f"{key[0]} / {key[1]} done", flush=True)
        lines = [
            "# CPU cost of the README's examples at their own sizes",
            "",
            f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
            f"{platform.machine()}, {os.cpu_count()} cores shared with other work (so CPU seconds, not wall "
            f"time), Python {platform.python_version()}. Each section first ran once at the test's small sizes, so "
            "these numbers exclude numba compilation. CPU seconds are user + system of all threads (chains run one "
            "per thread), plus the child processes for the dask script and the command line. Seeds: the README's. "
            "Statements under 1 CPU s are not listed.",
            "",
            "Sections measured: " + ", ".join(section for _, section in keys[:done]) + ".",
            "",
            "| document | line | statement | CPU s |",
            "|---|---|---|---|",
        ]
        lines += [f"| {doc} | {line} | `{source.replace('|', '/')}` | {seconds:.1f} |"
                  for doc, line, source, seconds in rows]
        partial = out.with_name(out.name + ".partial")  # written whole, then renamed: never half a file
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        partial.replace(out)
    print(out.read_text(encoding="utf-8"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Measure the CPU cost of the README's examples at their sizes.")
    parser.add_argument("--costs", type=Path, required=True, help="markdown file to write")
    parser.add_argument("--sections", nargs="*", help="the sections to measure, in this order (default all)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = _environment()["PYTHONPATH"]
    measure_costs(args.costs.resolve(), args.sections)


def test_the_docs_hold_no_merge_leftovers():
    """mkdocs copies every file under docs/ into the site: a merge's backup (samplers.md.orig, an
    older samplers page, was committed once) or a conflict marker would be published."""
    leftovers = sorted(str(p.relative_to(ROOT)) for pattern in ("*.orig", "*.rej", "*.BACKUP.*", "*.LOCAL.*",
                                                                 "*.REMOTE.*", "*.BASE.*")
                       for p in (ROOT / "docs").rglob(pattern))
    assert leftovers == []
    marked = [str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
              if p.is_file() and any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in p.read_text().splitlines())]
    assert marked == []


def test_the_development_guide_quotes_the_compile_time_savings_of_its_table():
    """The guide's range of compile time saved by the link-only overrides is the range of
    (plain - after) / (plain - run) over the rows of benchmarks/results/compile_time.md that have a
    plain-numba figure (run: the fit's own sampling, 2.9 CPU s of the soft tree's). The guide said
    "a quarter to a half", but probit BART saves 18%."""
    lines = (ROOT / "benchmarks" / "results" / "compile_time.md").read_text().splitlines()
    start = lines.index("| model | sampler | before cold CPU s | after cold CPU s | plain numba cold CPU s | "
                        "after warm CPU s | after run CPU s |") + 2  # past the header and its |---| line
    saved = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[4]:
            after, plain, run = float(cells[3]), float(cells[4]), float(cells[6])
            saved.append((plain - after) / (plain - run))
    assert len(saved) == 5
    guide = (ROOT / "docs" / "guide" / "development.md").read_text()
    assert f"saves {round(100 * min(saved))}% to {round(100 * max(saved))}%" in " ".join(guide.split())
