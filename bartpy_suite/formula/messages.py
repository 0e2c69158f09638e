"""Wording of the formula front-end's errors and warnings, and its two input checks.

Import rule: this module imports pandas, numpy, :mod:`bartpy_suite.errors` and
:mod:`bartpy_suite._validation` only (plus the standard library); no other module of
:mod:`bartpy_suite.formula`. Every other module of the package may import it.

It holds the pieces of text more than one step of the front-end writes: close-name hints
("did you mean ..."), shortened lists of names and of row labels, formulaic's syntax errors
cleaned of terminal colour codes, warnings that point at the user's code, and the checks of
``na_action`` and of the data frame shared by :func:`~bartpy_suite.formula.build_design` and
:meth:`~bartpy_suite.formula.Design.transform`.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bartpy_suite._validation import NaAction, check_na_action, suggest
from bartpy_suite.errors import BartpySuiteWarning, DataError

#: Valid values of ``na_action``.
NA_ACTIONS: tuple[str, ...] = tuple(str(action) for action in NaAction)

_MAX_SHOWN = 5

# Frames in files below this folder (the whole bartpy_suite package, not only formula/)
# are skipped when a warning looks for the user's line.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _stacklevel() -> int:
    """Stack level of the first frame outside this package, counted from the caller."""
    frame = sys._getframe(1)  # the function that will call warnings.warn
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR
    ):
        frame = frame.f_back
        level += 1
    return level


def _warn(message: str) -> None:
    warnings.warn(message, BartpySuiteWarning, stacklevel=_stacklevel())


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    """``" (did you mean 'a' or 'b'?)"`` for the options close to ``word``, else ``""``."""
    close = suggest(word, options)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _list_names(names: Sequence[Any], limit: int = 20) -> str:
    shown = ", ".join(repr(n) for n in list(names)[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names)} in all)"
    return shown


def _rows_text(index: pd.Index, mask: np.ndarray) -> str:
    """'3 rows (index 0, 4, 7)' for the rows of ``index`` where ``mask`` holds."""
    count = int(mask.sum())
    labels = index[np.flatnonzero(mask)[:_MAX_SHOWN]].tolist()
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in labels)
    noun = "row" if count == 1 else "rows"
    first = "first " if count > _MAX_SHOWN else ""
    return f"{count} {noun} ({first}index {shown}{', ...' if count > _MAX_SHOWN else ''})"


def _clean_formulaic_message(exc: BaseException) -> str:
    """formulaic's syntax errors carry ANSI colour codes and marker glyphs: strip them."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    text = text.replace("\u29db", ">>").replace("\u29da", "<<")
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _check_na_action(na_action: object) -> NaAction:
    return check_na_action(na_action)  # one check and one type for every entry point (_validation.NaAction)


def _check_frame(data: object, name: str) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        hint = "build one with pd.DataFrame(...)"
        if isinstance(data, np.ndarray):
            hint = (
                "wrap the array as pd.DataFrame(array, columns=[...]) to use a formula, or "
                "use the array-level model classes, which take X and y directly"
            )
        elif isinstance(data, pd.Series):
            hint = "use series.to_frame() or pass the whole DataFrame"
        elif isinstance(data, Mapping):
            hint = "convert it with pd.DataFrame(data)"
        raise DataError(f"{name} must be a pandas DataFrame, got {type(data).__name__}; {hint}")
    duplicated = data.columns[data.columns.duplicated()].unique().tolist()
    if duplicated:
        counts = ", ".join(
            f"{c!r} ({int((data.columns == c).sum())} times)" for c in duplicated
        )
        raise DataError(
            f"{name} has duplicate column names: {counts}; rename the columns so that each "
            "name is unique"
        )
    return data
