"""A griffe extension for the documentation site: the model classes' docstrings as Python sees them.

Each model class ends its ``Parameters`` section with a placeholder entry that
``models._base.with_run_parameters`` replaces at import with the run keywords every model shares
(written once, in ``RUN_PARAMETERS_DOC``); ``bps.bart`` and ``bps.cart`` hold one more for the
DART keywords (``with_sparse_parameters``, ``SPARSE_PARAMETERS_DOC``). griffe reads the source,
not the live class, so this extension makes the same replacements for the site.
"""

from __future__ import annotations

import textwrap
from typing import Any

import griffe

from bartpy_suite.models._base import (
    RUN_PARAMETERS_DOC,
    RUN_PARAMETERS_PLACEHOLDER,
    SPARSE_PARAMETERS_DOC,
    SPARSE_PARAMETERS_PLACEHOLDER,
)

#: placeholder entry -> the entries it stands for, both as in a docstring
SHARED_ENTRIES = {RUN_PARAMETERS_PLACEHOLDER: RUN_PARAMETERS_DOC, SPARSE_PARAMETERS_PLACEHOLDER: SPARSE_PARAMETERS_DOC}


class RunKeywords(griffe.Extension):
    """Replace the placeholder entries of a class docstring with the shared entries."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Rewrite ``cls``'s docstring where it holds a placeholder."""
        if cls.docstring is None:
            return
        for placeholder, entries in SHARED_ENTRIES.items():
            placeholder = textwrap.dedent(placeholder).rstrip("\n")
            if placeholder in cls.docstring.value:
                cls.docstring.value = cls.docstring.value.replace(placeholder, textwrap.dedent(entries).rstrip("\n"))
