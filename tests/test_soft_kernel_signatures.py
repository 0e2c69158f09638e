"""The soft tree's compiled interface (issue 29, "Kernel interface"): the compiled functions of
``_kernels/soft_tree.py``, ``rjhmc.py``, ``nuts.py`` and the soft functions of ``shap.py`` take at
most ``MAX_PARAMETERS`` parameters (they took up to 22 before the typed records of
``_kernels/soft_records.py``), and no kernel indexes a settings vector: the settings are typed
records read by field name.

Static checks of the source (``ast``), so nothing is compiled here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bartpy_suite._kernels as kernels

MAX_PARAMETERS = 10  # the most any of these functions takes now (nuts.run); the issue allows 16
FILES = ("soft_tree", "rjhmc", "nuts", "shap")
SETTINGS_NAMES = {"conf", "rc", "ad", "settings", "ns", "rj"}  # names a settings record goes by


def _compiled_functions(module: str) -> list[ast.FunctionDef]:
    """The ``@kernel``/``@helper`` functions of ``_kernels/<module>.py`` (of ``shap.py``, the soft ones)."""
    tree = ast.parse((Path(kernels.__file__).parent / f"{module}.py").read_text())
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        if names & {"kernel", "helper"} and (module != "shap" or "soft" in node.name):
            out.append(node)
    return out


def test_the_files_hold_compiled_functions():
    # guards the test below against checking nothing (a renamed decorator, a moved file)
    counts = {m: len(_compiled_functions(m)) for m in FILES}
    assert all(c >= 3 for c in counts.values()), counts


@pytest.mark.parametrize("module", FILES)
def test_no_compiled_function_takes_more_than_the_maximum(module):
    wide = {f.name: len(f.args.args) for f in _compiled_functions(module)
            if len(f.args.args) + len(f.args.kwonlyargs) > MAX_PARAMETERS or f.args.vararg is not None}
    assert not wide, (f"_kernels/{module}.py: compiled functions over {MAX_PARAMETERS} parameters: {wide}; "
                      "bundle what travels together into a record of _kernels/soft_records.py")


@pytest.mark.parametrize("module", FILES)
def test_settings_are_read_by_field_not_by_slot(module):
    # ``conf[C_H]`` was a float vector holding flags and counts, written by the kernels; the
    # settings are now immutable NamedTuples, so a subscript of one is an error waiting to happen
    slots = [f"{f.name}: {ast.unparse(n)}" for f in _compiled_functions(module) for n in ast.walk(f)
             if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in SETTINGS_NAMES]
    assert not slots, slots
