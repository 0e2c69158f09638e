"""A griffe extension for the documentation site: the model classes' docstrings as Python sees them.

Each model class ends its ``Parameters`` section with a placeholder entry that
``models.settings.with_run_keywords`` replaces at import with the run keywords every model shares
(declared once, in ``models.settings.RunSettings``, with that model's defaults and the samplers the
registry holds for it); ``bps.bart`` and ``bps.cart`` hold one more for the DART keywords
(``models._base.with_sparse_parameters``, ``SPARSE_PARAMETERS_DOC``). griffe reads the source, not
the live class, so this extension makes the same replacements for the site: the run entries are
generated for the live class the griffe class names, and its ``__init__``'s ``**run`` becomes the
run keywords with that class's defaults (the signature ``with_run_keywords`` gives it at import).
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from typing import Any

import griffe

from bartpy_suite.models._base import SPARSE_PARAMETERS_DOC, SPARSE_PARAMETERS_PLACEHOLDER
from bartpy_suite.models.settings import RUN_KEYWORDS, RUN_PARAMETERS_PLACEHOLDER, run_parameters_doc


def _live_class(cls: griffe.Class) -> type:
    """The Python class ``cls`` describes (imported by its module and name)."""
    return getattr(importlib.import_module(cls.module.path), cls.name)


class RunKeywords(griffe.Extension):
    """Replace the placeholder entries of a class docstring with the shared entries."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Rewrite ``cls``'s docstring where it holds a placeholder."""
        if cls.docstring is None:
            return
        run = textwrap.dedent(RUN_PARAMETERS_PLACEHOLDER).rstrip("\n")
        if run in cls.docstring.value:
            entries = run_parameters_doc(_live_class(cls))
            cls.docstring.value = cls.docstring.value.replace(run, textwrap.dedent(entries).rstrip("\n"))
        sparse = textwrap.dedent(SPARSE_PARAMETERS_PLACEHOLDER).rstrip("\n")
        if sparse in cls.docstring.value:
            cls.docstring.value = cls.docstring.value.replace(
                sparse, textwrap.dedent(SPARSE_PARAMETERS_DOC).rstrip("\n"))

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Give a model's ``__init__`` the run keywords in place of its ``**run``."""
        init = cls.members.get("__init__")
        if not isinstance(init, griffe.Function) or "run" not in init.parameters:
            return
        if init.parameters["run"].kind is not griffe.ParameterKind.var_keyword:
            return
        live = inspect.signature(_live_class(cls)).parameters
        if not set(RUN_KEYWORDS) <= set(live):
            return
        del init.parameters["run"]
        for name in RUN_KEYWORDS:
            init.parameters.add(griffe.Parameter(name, kind=griffe.ParameterKind.keyword_only,
                                                 default=repr(live[name].default)))
