"""Random-effect terms in a formula, lme4's syntax: ``y ~ x1 + x2 + (1 | g)`` (a random intercept per
level of ``g``) and ``y ~ x1 + (x1 | g)`` (a random intercept and a random slope on ``x1``;
``(0 + x1 | g)`` the slope alone).

Import rule: this module imports pandas, numpy, :mod:`bartpy_suite.errors` and, inside the
package, ``messages``, ``codecs`` and ``build`` only; nothing in the package imports it except
``__init__``.

The bar terms are taken out of the formula before formulaic sees it; the rest is an ordinary
design (:func:`~bartpy_suite.formula.build_design`), so the grouping factor is a tree predictor
only when it also appears as a term of its own (with ``.``, which would include it, it is left
out). One grouping factor is supported: ``(1 | g) + (1 | h)`` is refused with a clear error.
Rows with a missing group or slope value are dropped with a warning under ``na_action="drop"``
and are an error otherwise (``"split"`` routes missing predictor values down the trees, but a
row without a group has no effect to add).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .build import build_design
from .codecs import _check_labels, _decode, _encode
from .design import Design
from .messages import _check_frame, _check_na_action, _did_you_mean, _rows_text, _warn

__all__ = ["RandomEffectsData", "RandomEffectsSpec", "build_random_effects_design", "has_random_effects",
           "split_random_effects"]

#: Name of the random intercept among the random-effect terms.
INTERCEPT = "(Intercept)"


@dataclass(frozen=True)
class RandomEffectsSpec:
    """What a fit needs to add group effects to new rows (stored as JSON in its configuration).

    Attributes
    ----------
    group : str
        The data column holding the grouping factor.
    terms : tuple of str
        The random-effect terms in basis order: ``"(Intercept)"`` (when present), then the slope
        columns.
    levels : tuple
        The group labels in code order (the levels present in the fitted rows).
    """

    group: str
    terms: tuple[str, ...]
    levels: tuple

    @property
    def slopes(self) -> tuple[str, ...]:
        """The slope columns (the terms besides the intercept)."""
        return tuple(t for t in self.terms if t != INTERCEPT)

    def to_config(self) -> dict:
        """The JSON-serialisable form (labels encoded losslessly, ``codecs._encode``)."""
        return {"group": self.group, "terms": list(self.terms), "levels": [_encode(v) for v in self.levels]}

    @classmethod
    def from_config(cls, config: dict) -> RandomEffectsSpec:
        """The inverse of :meth:`to_config`."""
        return cls(config["group"], tuple(config["terms"]), tuple(_decode(v) for v in config["levels"]))


@dataclass(frozen=True)
class RandomEffectsData:
    """The random effects of the fitted rows: the spec, each row's group code and basis row."""

    spec: RandomEffectsSpec
    group: np.ndarray  # int64[n], codes into spec.levels
    basis: np.ndarray  # float64[n, K]


def _strip_quotes(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == "`":
        return name[1:-1]
    return name


def _top_level_split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses and backquotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == sep:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _one_parenthesis(text: str) -> bool:
    """Whether ``text`` is one parenthesised group: ``(`` first, closed by its last character."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
            if depth == 0 and i < len(text) - 1:
                return False
    return True


def _has_bar(text: str) -> bool:
    return "|" in re.sub(r"`[^`]*`", "", text)


def has_random_effects(formula: str) -> bool:
    """Whether ``formula`` has a ``|`` (outside backquoted names) on its right-hand side."""
    return isinstance(formula, str) and "~" in formula and _has_bar(formula.split("~", 1)[1])


def split_random_effects(formula: str) -> tuple[str, list[tuple[str, str]]]:
    """The formula without its bar terms, and each bar term as ``(left text, group text)``.

    Raises
    ------
    FormulaError
        A ``|`` outside a parenthesised ``(terms | group)`` term, or a bar term combined with
        other operators than ``+``.
    """
    lhs, rhs = formula.split("~", 1)
    fixed, bars = [], []
    for chunk in _top_level_split(rhs, "+"):
        text = chunk.strip()
        if not _has_bar(text):
            fixed.append(chunk)
            continue
        pieces = _top_level_split(text[1:-1], "|") if _one_parenthesis(text) else []
        if len(pieces) != 2 or not pieces[0].strip() or not pieces[1].strip():
            raise FormulaError(
                f"cannot read the random-effect term {text!r} in {formula!r}: write it as lme4 does, in parentheses "
                "and joined to the other terms by '+', e.g. 'y ~ x1 + (1 | g)' (a random intercept per level of g) "
                "or 'y ~ x1 + (x1 | g)' (a random intercept and slope)"
            )
        bars.append((pieces[0].strip(), pieces[1].strip()))
    rest = "+".join(fixed).strip()
    return f"{lhs.strip()} ~ {rest}" if rest else "", bars


def _parse_left(left: str, term: str, frame: pd.DataFrame) -> tuple[bool, list[str]]:
    """The intercept flag and slope columns of a bar term's left side (``1``, ``x1``, ``0 + x1``)."""
    intercept, slopes = True, []
    text = left.replace(" ", "")
    if text.startswith("-1+") or text.endswith("-1"):
        intercept = False
        text = text[3:] if text.startswith("-1+") else text[:-2]
    for piece in _top_level_split(text, "+"):
        piece = piece.strip()
        if piece == "1":
            continue
        if piece == "0":
            intercept = False
            continue
        name = _strip_quotes(piece)
        if not piece or (piece[0] != "`" and not name.isidentifier()):
            raise FormulaError(
                f"the random-effect term {term!r} has {piece!r} on the left of '|'; give 1 (an intercept), column "
                "names (slopes) and 0 (no intercept), e.g. (1 | g), (x1 | g) or (0 + x1 | g); compute a transformed "
                "slope variable as a column first"
            )
        if name not in frame.columns:
            raise FormulaError(f"the random-effect term {term!r} names the slope column {name!r}, which data does "
                               f"not have{_did_you_mean(name, [c for c in frame.columns if isinstance(c, str)])}")
        col = frame[name]
        if not pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
            raise FormulaError(
                f"the random slope {name!r} in {term!r} is not numeric (dtype {col.dtype}); a random slope multiplies "
                "a number: convert the column to numbers, or use a random intercept (1 | g)"
            )
        if name in slopes:
            raise FormulaError(f"the random-effect term {term!r} names {name!r} twice")
        slopes.append(name)
    if not intercept and not slopes:
        raise FormulaError(f"the random-effect term {term!r} has neither an intercept nor a slope")
    return intercept, slopes


def _parse_group(group: str, term: str, frame: pd.DataFrame) -> str:
    """The data column of a bar term's grouping factor (``g``, ```my g```, ``C(g)``)."""
    wrapped = re.fullmatch(r"C\((.*)\)", group.replace(" ", ""))
    name = _strip_quotes(wrapped.group(1) if wrapped else group)
    if "|" in name or "/" in name or ":" in name or (not name.isidentifier() and not group.strip().startswith("`")
                                                     and not wrapped):
        raise FormulaError(
            f"the grouping factor of {term!r} must be one column (g, `my group` or C(g)); nested or crossed "
            "groupings (g/h, g:h) are not supported: build the combined factor as a column first, e.g. "
            "df['gh'] = df['g'].astype(str) + ':' + df['h'].astype(str)"
        )
    if name not in frame.columns:
        raise FormulaError(f"the grouping factor {name!r} of {term!r} is not a column of data"
                           f"{_did_you_mean(name, [c for c in frame.columns if isinstance(c, str)])}")
    col = frame[name]
    numeric = pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)
    if numeric and not wrapped:
        raise FormulaError(
            f"the grouping factor {name!r} of {term!r} is numeric (dtype {col.dtype}); a grouping factor is a set of "
            f"labels: write ({term.split('|')[0].strip().lstrip('(')} | C({name})) to use its values as labels, or "
            f"convert the column to strings or a categorical (df[{name!r}].astype(str) or .astype('category'))"
        )
    return name


def _group_levels(col: pd.Series) -> list:
    """The group labels present, in code order: the categories' order for a pandas categorical,
    sorted labels otherwise (as factors in the design)."""
    present = [v.item() if isinstance(v, np.generic) else v for v in pd.unique(col.dropna())]
    if isinstance(col.dtype, pd.CategoricalDtype):
        keep = set(present)
        return [c.item() if isinstance(c, np.generic) else c for c in col.cat.categories if c in keep]
    try:
        return sorted(present)
    except TypeError:
        return sorted(present, key=lambda v: (type(v).__name__, str(v)))


def build_random_effects_design(formula: str, data: pd.DataFrame, na_action: str = "drop"
                                ) -> tuple[Design, np.ndarray, np.ndarray, RandomEffectsData]:
    """:func:`~bartpy_suite.formula.build_design` for a formula with one random-effect term.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + x2 + (1 | g)"``, ``"y ~ x1 + (x1 | g)"``, ``"y ~ x1 + (0 + x1 | C(g))"``.
    data : pandas.DataFrame
        The data; never modified.
    na_action : {"drop", "raise", "split"}
        As in ``build_design``; a missing group or slope value drops the row under ``"drop"``
        (with a warning) and is an error otherwise.

    Returns
    -------
    design, X, y
        As ``build_design`` returns them for the formula without the bar term.
    random_effects : RandomEffectsData
        The spec (group column, terms, levels) and each row's group code and basis row.

    Raises
    ------
    FormulaError
        A malformed bar term, several of them, a grouping factor that is numeric (wrap it in
        ``C()`` or convert it) or not a column, a slope that is not a numeric column, no
        predictor besides the bar term.
    DataError
        A grouping factor with one level in the rows used, missing group or slope values under
        ``na_action`` "raise" or "split", and the errors of ``build_design``.
    """
    na_action = _check_na_action(na_action).value
    frame = _check_frame(data, "data")
    if not isinstance(formula, str) or "~" not in formula:
        raise FormulaError(f"formula must be a string such as 'y ~ x1 + (1 | g)', got {formula!r}")
    fixed, bars = split_random_effects(formula.strip())
    if not bars:
        raise FormulaError(f"formula {formula!r} has no random-effect term such as (1 | g)")
    if len(bars) > 1:
        shown = " + ".join(f"({a} | {b})" for a, b in bars)
        raise FormulaError(
            f"formula {formula!r} has {len(bars)} random-effect terms ({shown}); one grouping factor is supported: "
            "keep one, or combine the factors into one column (crossed or nested effects are not fitted yet)"
        )
    left, group_text = bars[0]
    term = f"({left} | {group_text})"
    if not fixed:
        raise FormulaError(f"formula {formula!r} has no predictor besides {term}; the trees need at least one, "
                           "e.g. 'y ~ x1 + (1 | g)'")
    group = _parse_group(group_text, term, frame)
    intercept, slopes = _parse_left(left, term, frame)
    if re.search(r"(?<![\w.`])\.(?![\w.])", re.sub(r"`[^`]*`", "", fixed.split("~", 1)[1])):
        # '.' takes every column: the grouping factor is a predictor only when named as one
        fixed = f"{fixed} - {group if group.isidentifier() else f'`{group}`'}"

    used = [group] + slopes
    missing = np.logical_or.reduce([frame[c].isna().to_numpy() for c in used])
    if missing.any():
        where = "; ".join(f"{c!r} in {_rows_text(frame.index, frame[c].isna().to_numpy())}" for c in used
                          if frame[c].isna().any())
        if na_action != "drop":
            raise DataError(
                f"the random-effect term {term} has missing values ({where}); with na_action={na_action!r} they are "
                "an error (a row without a group has no effect to add): fill them, or use na_action='drop'"
            )
        _warn(f"dropped {int(missing.sum())} of {len(frame)} rows with a missing value in the random-effect "
              f"term {term} ({where})")
        frame = frame.iloc[np.flatnonzero(~missing)]
        if len(frame) == 0:
            raise DataError(f"every row has a missing value in the random-effect term {term}; nothing is left to fit")
    if not frame.index.is_unique:
        frame = frame.reset_index(drop=True)  # rows are matched back by index label below
    design, x, y, index = build_design(fixed, frame, na_action=na_action, return_index=True)
    rows = frame.index.get_indexer(index)
    labels = frame[group].iloc[rows]
    levels = _group_levels(labels)
    _check_labels(levels, f"the grouping factor {group!r}")
    if len(levels) < 2:
        raise DataError(
            f"the grouping factor {group!r} of {term} has a single level ({levels[0]!r}) in the {len(rows)} rows used; "
            "random effects need at least two groups: drop the term, or check the column"
        )
    lookup = {lab: i for i, lab in enumerate(levels)}
    codes = np.array([lookup[v.item() if isinstance(v, np.generic) else v] for v in labels], dtype=np.int64)
    columns = ([np.ones(len(rows))] if intercept else []) + [
        frame[s].iloc[rows].to_numpy(dtype=np.float64) for s in slopes]
    basis = np.ascontiguousarray(np.column_stack(columns))
    if not np.isfinite(basis).all():
        raise DataError(f"the random slope(s) {slopes} of {term} hold infinite values; replace or remove them")
    spec = RandomEffectsSpec(group, ((INTERCEPT,) if intercept else ()) + tuple(slopes), tuple(levels))
    return design, x, y, RandomEffectsData(spec, codes, basis)
