"""The vignette runner (vignettes/run.py) and every vignette in quick mode.

Each vignette runs in this process (so the compiled kernels are shared with the rest of the
suite) into a temporary directory; a cell that raises fails the test with the vignette's own
line number. Nothing is written into the repository.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("vignette_runner", ROOT / "vignettes" / "run.py")
runner = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = runner  # dataclasses look their module up
_spec.loader.exec_module(runner)

SCRIPT = '''# A header comment, not a cell
# %% [markdown]
# # Title
#
# *The question.*

# %%
import warnings
import matplotlib.pyplot as plt
import pandas as pd
print("hello")
x = 41 + 1
x

# %%
display(pd.DataFrame({"a": [1.5, 2.0]}, index=pd.Index(["u", "v"], name="k")))
warnings.warn("careful", UserWarning)
fig, ax = plt.subplots()
ax.plot([0, 1], [1, 0])
"hidden";

# %%
y = x * 2
raise ValueError(f"bad value {y}")

# %%
print("never reached")
'''


def test_parse_cells_kinds_lines_and_markdown_prefix():
    cells = runner.parse_cells(SCRIPT)
    assert [c.kind for c in cells] == ["markdown", "code", "code", "code", "code"]
    assert cells[0].source == "# Title\n\n*The question.*"
    assert cells[1].line == 8 and cells[1].source.startswith("import warnings")
    assert cells[3].line == 23


def test_markdown_table_formats_index_and_floats():
    import pandas as pd

    table = runner.markdown_table(pd.DataFrame({"m": [1.23456, 1e-5], "s": ["a|b", "c"]},
                                               index=pd.Index([1, 2], name="i")))
    assert table.splitlines() == ["| i | m | s |", "|---|---|---|", "| 1 | 1.235 | a\\|b |", "| 2 | 1.000e-05 | c |"]


def test_run_vignette_writes_output_and_reports_the_failing_line(tmp_path):
    path = tmp_path / "01_demo.py"
    path.write_text(SCRIPT, encoding="utf-8")
    before = os.environ.get(runner.QUICK_ENV)
    with pytest.raises(runner.VignetteError, match=r"01_demo.py: cell 4 \(line 24\) raised ValueError: bad value 84"):
        runner.run_vignette(path, tmp_path / "out", quick=True)
    assert os.environ.get(runner.QUICK_ENV) == before
    text = (tmp_path / "out" / "01_demo.md").read_text()
    assert "*Executed in quick mode" in text
    assert "```text\nhello\n```\n\n```text\n42\n```" in text
    assert "| k | a |\n|---|---|\n| u | 1.5 |\n| v | 2 |" in text
    assert "UserWarning: careful" in text
    assert "hidden" not in text.split("```python")[-2].split("```")[-1]  # ';' hides the value
    assert "![figure 1](01_demo_files/cell3_1.png)" in text
    assert (tmp_path / "out" / "01_demo_files" / "cell3_1.png").stat().st_size > 1000
    assert "ValueError: bad value 84" in text and "never reached" not in text


def test_vignette_paths_selects_by_prefix_and_rejects_unknown(tmp_path):
    for name in ("01_a.py", "02_b.py", "run.py", "_helper.py"):
        (tmp_path / name).write_text("# %%\n", encoding="utf-8")
    assert [p.name for p in runner.vignette_paths(folder=tmp_path)] == ["01_a.py", "02_b.py"]
    assert [p.name for p in runner.vignette_paths(["02"], folder=tmp_path)] == ["02_b.py"]
    with pytest.raises(SystemExit, match="no vignette matches '09'; vignettes: 01_a, 02_b"):
        runner.vignette_paths(["09"], folder=tmp_path)


VIGNETTES = runner.vignette_paths()


def test_every_vignette_starts_from_a_question():
    assert len(VIGNETTES) >= 6
    for path in VIGNETTES:
        title, question = runner.title_and_question(path)
        assert title and question.startswith("*") and question.rstrip("*").strip().endswith("?"), path.name


@pytest.mark.slow  # every vignette end to end (28 s); the committed outputs are checked below by default
@pytest.mark.parametrize("path", VIGNETTES, ids=[p.stem for p in VIGNETTES])
def test_vignette_runs_in_quick_mode(path, tmp_path):
    target = runner.run_vignette(path, tmp_path, quick=True)
    text = target.read_text(encoding="utf-8")
    code_cells = [c for c in runner.parse_cells(path.read_text(encoding="utf-8")) if c.kind == "code"]
    assert text.count("```python\n") == len(code_cells)
    for link in re.findall(r"!\[figure \d+\]\(([^)]+)\)", text):
        assert (tmp_path / link).is_file()
    assert "Traceback" not in text


@pytest.mark.parametrize("path", VIGNETTES, ids=[p.stem for p in VIGNETTES])
def test_committed_output_is_from_the_current_source(path):
    """vignettes/output/<name>.md must hold every cell of the current source: re-run
    ``python3 vignettes/run.py <name>`` after editing a vignette."""
    output = ROOT / "vignettes" / "output" / f"{path.stem}.md"
    assert output.is_file(), f"no executed output for {path.name}: run python3 vignettes/run.py {path.stem[:2]}"
    text = output.read_text(encoding="utf-8")
    assert "*Executed in full mode" in text, f"{output.name} comes from a --quick run"
    stale = [cell.line for cell in runner.parse_cells(path.read_text(encoding="utf-8")) if cell.source not in text]
    assert not stale, f"{output.name} is older than {path.name} (cells at lines {stale}): run python3 vignettes/run.py {path.stem[:2]}"


def test_output_folder_keeps_quick_runs_away_from_the_committed_outputs(tmp_path):
    assert runner.output_folder(None, quick=False, folder=tmp_path) == tmp_path / "output"
    assert not (tmp_path / "output").exists()
    quick = runner.output_folder(None, quick=True, folder=tmp_path)
    assert quick == tmp_path / "output-quick"
    assert (quick / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert runner.output_folder(tmp_path / "elsewhere", quick=True, folder=tmp_path) == tmp_path / "elsewhere"
    with pytest.raises(SystemExit, match="committed full-run outputs"):
        runner.output_folder(tmp_path / "x" / ".." / "output", quick=True, folder=tmp_path)


def test_quick_command_line_run_writes_to_output_quick(tmp_path, monkeypatch, capsys):
    # the README's `python3 vignettes/run.py --quick 01 04`, on a folder holding one tiny vignette
    (tmp_path / "01_tiny.py").write_text("# %% [markdown]\n# # Tiny\n#\n# *Does it run?*\n\n# %%\nprint(6 * 7)\n",
                                         encoding="utf-8")
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "01_tiny.md").write_text("committed", encoding="utf-8")
    monkeypatch.setattr(runner, "HERE", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert runner.main(["--quick", "01"]) == 0
    assert str(tmp_path / "output-quick") in capsys.readouterr().out
    assert "```text\n42\n```" in (tmp_path / "output-quick" / "01_tiny.md").read_text(encoding="utf-8")
    assert (tmp_path / "output" / "01_tiny.md").read_text(encoding="utf-8") == "committed"
