"""The survival response ``Surv(time, event) ~ ...`` (R's ``survival`` syntax).

``Surv(a, b)`` on the left of ``~`` is parsed structurally: its two arguments must be plain
column names (or backquoted names), never expressions, and nothing is evaluated. The right-hand
side is built by :func:`build_design` exactly as for any other model, with the time column as the
design's response (so ``~ .`` expands to every column except the time and the event), and the
event column is read and checked here.

Import rule: imports ``build``, ``messages`` and the package's errors only.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .build import build_design
from .design import Design
from .messages import _check_frame, _check_na_action, _rows_text, _warn

__all__ = ["is_surv_formula", "parse_surv", "build_survival_design"]

_NAME = r"(?:`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)"
_SURV = re.compile(r"^\s*Surv\s*\((?P<args>[^()]*)\)\s*~(?P<rhs>.*)$", re.DOTALL)


def is_surv_formula(formula) -> bool:
    """Whether ``formula`` is a string whose left-hand side is a call of ``Surv``."""
    return isinstance(formula, str) and re.match(r"^\s*Surv\s*\(", formula) is not None


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith("`") else name


def parse_surv(formula: str) -> tuple[str, str, str]:
    """Split ``"Surv(time, event) ~ rhs"`` into ``(time, event, rhs)`` column names and text.

    Raises
    ------
    FormulaError
        The left side is not ``Surv(`` two column names ``)``: one argument, three, an expression
        (``Surv(log(t), d)``), or no ``~``.
    """
    match = _SURV.match(formula)
    if match is None:
        raise FormulaError(
            f"cannot read the survival formula {formula!r}: write it as 'Surv(time, event) ~ x1 + x2' with two "
            "column names inside Surv() (no nested calls) and a right-hand side after '~'"
        )
    args = [a.strip() for a in match.group("args").split(",")]
    if len(args) != 2 or not all(args):
        raise FormulaError(
            f"Surv() takes two columns, the observed time and the event indicator (1 = event, 0 = censored), as in "
            f"'Surv(time, status) ~ x1 + x2'; got {len(args) if all(args) else 'an empty argument among'} "
            f"argument(s): Surv({match.group('args').strip()})"
        )
    for arg in args:
        if re.fullmatch(_NAME, arg) is None:
            raise FormulaError(
                f"Surv() arguments must be column names, got {arg!r}: compute the column first "
                "(e.g. df['weeks'] = df['days'] / 7) and name it in Surv()"
            )
    rhs = match.group("rhs").strip()
    if not rhs:
        raise FormulaError(f"the survival formula {formula!r} has no predictors after '~'")
    return _unquote(args[0]), _unquote(args[1]), rhs


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"


def event_codes(values, name: str, index: pd.Index, max_code: int = 1) -> np.ndarray:
    """The event column as uint8 0/1 (or, with ``max_code`` > 1, whole-number cause codes 0 to
    ``max_code``: competing risks); anything else is a ``DataError`` naming the column and the
    first offending rows."""
    series = pd.Series(values, index=index)
    if series.dtype == bool:
        return series.to_numpy().astype(np.uint8)
    numeric = pd.to_numeric(series, errors="coerce")
    bad = ~(numeric.isin(range(max_code + 1)).to_numpy())
    if bad.any():
        shown = ", ".join(repr(v) for v in pd.unique(series[bad])[:5])
        raise DataError(
            f"the event column {name!r} of Surv() must hold 1 (event) or 0 (censored), or booleans"
            + (" (or, for competing risks, 0 = censored and whole-number cause codes 1, 2, ...)" if max_code > 1
               else "")
            + f"; {_rows_text(index, bad)} hold(s) {shown}"
            + ("" if max_code > 1 else ". For competing risks (0 = censored, 1, 2, ... = the cause) fit "
               "bartpy_suite.models.survival.CompetingRisksBART.from_formula")
        )
    return numeric.to_numpy().astype(np.uint8)


def build_survival_design(formula: str, data: pd.DataFrame, na_action: str = "drop", max_code: int = 1
                          ) -> tuple[Design, np.ndarray, np.ndarray, np.ndarray, str, str]:
    """Design and arrays of a survival formula.

    Parameters
    ----------
    formula : str
        ``"Surv(time, event) ~ x1 + x2"`` (or ``~ .``).
    data : pandas.DataFrame
        Never modified.
    na_action : {"drop", "raise", "split"}
        As in :func:`build_design`; a missing time or event drops the row with a warning
        (``"drop"``, ``"split"``) or raises (``"raise"``).
    max_code : int
        Largest event code accepted: 1 (default) for 0/1 events, more for competing-risk cause
        codes 0 (censored), 1, 2, ...

    Returns
    -------
    design : Design
        The right-hand side's design (its response is the time column).
    X : numpy.ndarray
        (n, p) predictors.
    time : numpy.ndarray
        float64 (n,) observed times.
    event : numpy.ndarray
        uint8 (n,) event indicators.
    time_name, event_name : str
    """
    na_action = _check_na_action(na_action)
    frame = _check_frame(data, "data")
    time_name, event_name, rhs = parse_surv(formula)
    for name, what in ((time_name, "time"), (event_name, "event")):
        if name not in frame.columns:
            raise FormulaError(f"the {what} column {name!r} of Surv() is not a column of data "
                               f"(columns: {', '.join(map(str, frame.columns[:20]))})")
    if time_name == event_name:
        raise FormulaError(f"Surv() names the column {time_name!r} twice; give the time and the event columns")
    if re.search(r"(?<![A-Za-z0-9_.`])" + re.escape(event_name) + r"(?![A-Za-z0-9_.`])", rhs):
        raise FormulaError(f"the event column {event_name!r} of Surv() also appears among the predictors; "
                           "remove it from the right-hand side of '~'")
    missing_event = frame[event_name].isna().to_numpy()
    if missing_event.any():
        if na_action == "raise":
            raise DataError(f"the event column {event_name!r} has missing values in "
                            f"{_rows_text(frame.index, missing_event)}; fill them or use na_action='drop'")
        _warn(f"dropped {int(missing_event.sum())} of {len(frame)} rows with a missing event indicator "
              f"{event_name!r}")
    # Selecting columns makes a new frame; the caller's is never modified.
    keep = frame.columns != event_name
    used = frame.loc[~missing_event, keep]
    if len(used) == 0:
        raise DataError(f"every row has a missing event indicator {event_name!r}; nothing is left to fit")
    events = frame.loc[~missing_event, event_name]
    if rhs == "1":
        return _time_only(formula, used, events, time_name, event_name, na_action, max_code)
    if not used.index.is_unique:
        # rows are matched to their event by label below: fall back to positions
        used, events = used.reset_index(drop=True), events.reset_index(drop=True)
    design, x, time, index = build_design(f"{_quote(time_name)} ~ {rhs}", used, na_action=na_action,
                                          return_index=True)
    if design.response_kind != "numeric":
        raise DataError(f"the time column {time_name!r} of Surv() must be numeric (a duration such as days or "
                        f"weeks); it holds {frame[time_name].dtype} values")
    event = event_codes(events.loc[index].to_numpy(), event_name, index, max_code)
    # the saved design names the survival response, so messages quote the user's formula
    design = replace(design, formula=formula.strip(),
                     response=f"Surv({_quote(time_name)}, {_quote(event_name)})")
    return design, x, np.asarray(time, dtype=np.float64), event, time_name, event_name


def _time_only(formula: str, used: pd.DataFrame, events: pd.Series, time_name: str, event_name: str,
               na_action: str, max_code: int = 1) -> tuple[Design, np.ndarray, np.ndarray, np.ndarray, str, str]:
    """``Surv(time, event) ~ 1``: no covariates; the time is the model's only predictor (the
    one-sample model, whose curve is compared with Kaplan-Meier)."""
    column = used[time_name]
    if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        raise DataError(f"the time column {time_name!r} of Surv() must be numeric (a duration such as days or "
                        f"weeks); it holds {column.dtype} values")
    time = column.to_numpy(dtype=np.float64)
    missing = np.isnan(time)
    if missing.any():
        if na_action == "raise":
            raise DataError(f"the time column {time_name!r} has missing values in "
                            f"{_rows_text(used.index, missing)}; fill them or use na_action='drop'")
        _warn(f"dropped {int(missing.sum())} of {len(used)} rows with a missing time {time_name!r}")
    index = used.index[~missing]
    design = Design(formula=formula.strip(), response=f"Surv({_quote(time_name)}, {_quote(event_name)})",
                    response_kind="numeric", class_labels=(), predictors=(), is_categorical=(), levels=(),
                    methods=(), sources=(), terms="[]")
    event = event_codes(events.to_numpy()[~missing], event_name, index, max_code)
    return design, np.empty((index.size, 0)), time[~missing], event, time_name, event_name
