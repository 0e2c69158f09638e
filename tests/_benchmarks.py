"""Test helper: import a script of ``benchmarks/`` as a module, so that tests can check the
functions a results file is computed with (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """The module of ``benchmarks/<name>.py``, registered in ``sys.modules`` under
    ``<name>_benchmark`` (dataclasses look their module up there)."""
    module_name = f"{name}_benchmark"
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
