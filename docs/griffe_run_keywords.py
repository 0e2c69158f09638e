"""A griffe extension for the documentation site: the model classes' docstrings as Python sees them.

Each model class ends its ``Parameters`` section with a placeholder entry that
``models._base.with_run_parameters`` replaces at import with the run keywords every model shares
(written once, in ``RUN_PARAMETERS_DOC``). griffe reads the source, not the live class, so this
extension makes the same replacement for the site.
"""

from __future__ import annotations

import textwrap
from typing import Any

import griffe

from bartpy_suite.models._base import RUN_PARAMETERS_DOC, RUN_PARAMETERS_PLACEHOLDER


class RunKeywords(griffe.Extension):
    """Replace the run-keywords placeholder of a class docstring with the shared entries."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Rewrite ``cls``'s docstring if it holds the placeholder."""
        placeholder = textwrap.dedent(RUN_PARAMETERS_PLACEHOLDER).rstrip("\n")
        if cls.docstring is not None and placeholder in cls.docstring.value:
            entries = textwrap.dedent(RUN_PARAMETERS_DOC).rstrip("\n")
            cls.docstring.value = cls.docstring.value.replace(placeholder, entries)
