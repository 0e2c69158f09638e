"""Build a :class:`~bartpy_suite.formula.Design` and its X and y from a formula and a DataFrame.

Import rule: this module imports pandas, numpy, :mod:`bartpy_suite.errors` and, inside the
package, ``messages``, ``codecs``, ``expr``, ``terms`` and ``design`` only; it is the top of
the package's import chain (``messages <- codecs <- expr <- terms <- design <- build``) and
nothing in the package imports it except ``__init__``.

:func:`build_design` parses the terms into expression trees and evaluates them (``terms``,
``expr``), applies ``na_action``, codes the response and the factors (``codecs``) and stores
the fitted trees.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .codecs import _check_labels
from .design import Design
from .expr import domain_text, to_text
from .messages import _check_frame, _check_na_action, _list_names, _rows_text, _warn
from .terms import _evaluate_all, _parse, _stateful, _tree_of

__all__ = ["build_design"]


def build_design(formula: str, data: pd.DataFrame, na_action: str = "drop", *,
                 return_index: bool = False
                 ) -> tuple[Design, np.ndarray, np.ndarray] | tuple[
                     Design, np.ndarray, np.ndarray, pd.Index]:
    """Parse ``formula`` against ``data`` and build the design matrix for a tree model.

    Parameters
    ----------
    formula : str
        R-style formula, e.g. ``"y ~ x1 + x2"``, ``"y ~ ."``, ``"y ~ . - x3"``,
        ``"log(y) ~ log(x1) + I(x2**2) + C(g)"``. The intercept, ``-1`` and ``+0`` are
        ignored; interaction terms are refused (trees find interactions themselves). A term
        may contain only what :data:`bartpy_suite.formula.expr.ALLOWED` lists (columns,
        numbers, arithmetic, ``I``, ``C``, ``center``/``scale``/``standardize`` and a few
        numpy functions), computed in float64.
    data : pandas.DataFrame
        The data; never modified.
    na_action : {"drop", "raise", "split"}, default "drop"
        ``"drop"`` (R's ``na.omit``): drop rows with a missing value in any used term and
        warn with the count. ``"raise"``: missing values are an error naming the column.
        ``"split"``: keep missing predictor values (NaN in ``X``) for the trees to route
        (MIA; Kapelner & Bleich 2015); rows with a missing response are still dropped with a
        warning giving the count. Missing values produced by a transform (``log(-1)``) count
        as missing.
    return_index : bool, default False
        Also return ``data.index`` of the rows used (after dropping missing values).

    Returns
    -------
    design : Design
        The specification, to transform new data and to save with the fit.
    X : numpy.ndarray
        float64 array (n, p): numeric predictors as float64, factors as level codes
        ``0..L-1`` (floats), in :attr:`Design.predictors` order.
    y : numpy.ndarray
        float64 (numeric response) or int64 class codes ``0..K-1`` (categorical response:
        ``bool``, ``object``, string or ``category`` dtype, or ``C(y)``), indexing
        :attr:`Design.class_labels`.
    index : pandas.Index
        Only if ``return_index``.

    Raises
    ------
    FormulaError
        Unparsable formula, a name that is not a column (with close names suggested),
        interaction terms, no response or no predictors, the response among the
        predictors, a term that gives several columns or a constant, a term outside the
        whitelist (named, with what a term may contain), arithmetic on text or dates, a
        ``datetime64`` column (convert it to numbers first: the message says how).
    DataError
        ``data`` not a DataFrame, duplicate column names, no rows, infinite values (always),
        missing values under ``na_action="raise"``, no rows left after dropping, a
        categorical response with a single class, unusable dtypes or labels.
    ArgumentError
        Unknown ``na_action``.

    Warns
    -----
    BartpySuiteWarning
        Rows dropped for missing values (with the count, and how many a transform or ``C()``'s
        ``levels=`` made missing); under ``na_action="split"``, values a transform made
        missing; a constant response; a constant predictor (it offers no split); a numeric
        response holding only 0 and 1; a text response or predictor that mostly holds numbers
        or dates (fitted as classes or levels).
    """
    na_action = _check_na_action(na_action)
    frame = _check_frame(data, "data")
    if not isinstance(formula, str):
        raise FormulaError(
            f"formula must be a string such as 'y ~ x1 + x2', got {type(formula).__name__}"
        )
    formula = formula.strip()
    if "~" in formula and re.search(r"\([^()|]*\|", re.sub(r"`[^`]*`", "", formula.split("~", 1)[1])):
        raise FormulaError(
            f"formula {formula!r} has a random-effect term (... | g); random effects are fitted by bps.bart "
            "(sampler 'grow_prune' or 'cgm'), e.g. bps.bart('y ~ x1 + (1 | g)', data=df), and by bps.bcf; other "
            "models and build_design take the formula without it"
        )
    if len(frame) == 0:
        raise DataError("data has no rows; a tree model needs data to fit")
    response, predictors = _parse(formula, frame)
    terms = [response] + predictors
    # Each term becomes a tree of whitelisted operations (anything else is refused here, with
    # the list of what a formula may contain); the trees, not Python text, are evaluated and saved.
    trees = [_tree_of(term) for term in terms]
    stateful = _stateful(trees)

    columns, sources, fitted = _evaluate_all(terms, trees, frame)
    # The response column must not reappear as a predictor ('y ~ log(y)', 'log(y) ~ y');
    # a response built from several columns ('I(b - a) ~ a') may share one with a predictor.
    response_src = set(sources[0]) if len(sources[0]) == 1 else set()
    clash = [p.expr for p, src in zip(predictors, sources[1:])
             if p.expr == response.expr or response_src & set(src)]
    if clash:
        raise FormulaError(
            f"the response {response.expr!r} also appears among the predictors "
            f"({_list_names(clash)}); remove it from the right-hand side of '~'"
        )

    # Infinite values are always an error; missing values are dropped or raised.
    n_total = len(frame)
    current = frame
    dropped: dict[str, int] = {}
    produced: dict[str, int] = {}  # of which: missing made by a transform from present values
    outside: dict[str, list] = {}  # of which: labels outside C()'s levels= (count, labels)
    domains = {term.expr: domain_text(tree) for term, tree in zip(terms, trees)}
    while True:
        for term, col in zip(terms, columns):
            if col.kind == "numeric":
                bad = np.isinf(col.values)
                if bad.any():
                    raise DataError(
                        f"{term.label} has infinite values in {_rows_text(current.index, bad)}"
                        "; replace or remove them (na_action does not apply to inf)"
                    )
        masks = []
        for j, (col, src, state) in enumerate(zip(columns, sources, stateful)):
            mask = col.na_mask()
            if state and src:
                # A stateful transform fitted on data with NaN is NaN everywhere: blame the
                # raw column and refit the transform on the rows kept.
                raw = np.logical_or.reduce([current[c].isna().to_numpy() for c in src])
                if raw.any():
                    mask = raw
                    if na_action == "split" and j > 0:
                        raise DataError(
                            f"{terms[j].label} is a stateful transform of a column with missing values "
                            f"({_rows_text(current.index, raw)}); under na_action='split' it cannot be "
                            "fitted: compute the column before fitting (NaN where missing) and use it "
                            "directly"
                        )
            masks.append(mask)
        # Under 'split' the trees take missing predictor values; only a missing response drops a row.
        any_na = masks[0] if na_action == "split" else np.logical_or.reduce(masks)
        if not any_na.any():
            break
        causes = [_causes(term, col, mask, src, current) for term, col, mask, src
                  in zip(terms, columns, masks, sources)]
        if na_action == "raise":
            lines = []
            for term, mask, (made, out, labels) in zip(terms, masks, causes):
                if mask.any():
                    origin = ""
                    count = int(mask.sum())
                    if made.any():
                        share = "" if made.sum() == count else f"{int(made.sum())} of them "
                        origin += (f" ({share}produced by the transform from values that are present: "
                                   f"{domains[term.expr]})")
                    if out.any():
                        share = "" if out.sum() == count else f"{int(out.sum())} of them "
                        origin += f" ({share}{_outside_text(labels)})"
                    lines.append(f"{term.label} has missing values in "
                                 f"{_rows_text(current.index, mask)}{origin}")
            raise DataError(
                "; ".join(lines) + ". With na_action='raise' missing values are an error: "
                "fill them, or use na_action='drop' to drop those rows (like R's na.omit)"
            )
        for term, mask, (made, out, labels) in zip(terms[:1] if na_action == "split" else terms,
                                                   masks, causes):
            if mask.any():
                dropped[term.expr] = dropped.get(term.expr, 0) + int(mask.sum())
                if made.any():
                    produced[term.expr] = produced.get(term.expr, 0) + int(made.sum())
                if out.any():
                    count, seen = outside.get(term.expr, (0, []))
                    outside[term.expr] = (count + int(out.sum()),
                                          seen + [lab for lab in labels if lab not in seen])
        keep = ~any_na
        if not keep.any():
            detail = _dropped_detail(dropped, produced, outside, domains)
            raise DataError(
                f"every one of the {n_total} rows has a missing value in the used terms "
                f"({detail}); nothing is left to fit"
            )
        current = current.iloc[np.flatnonzero(keep)]
        if any(stateful):
            columns, sources, fitted = _evaluate_all(terms, trees, current)
        else:
            columns = [col.take(keep) for col in columns]
    if na_action == "split":
        # Kept as missing values and routed by the trees: say when a transform, not the data,
        # made them, so that log(x) of a column of negative numbers does not pass unnoticed.
        for term, col, src in zip(predictors, columns[1:], sources[1:]):
            made, out, labels = _causes(term, col, col.na_mask(), src, current)
            if made.any() or out.any():
                reasons = []
                if made.any():
                    reasons.append(f"{int(made.sum())} produced by the transform from values that are "
                                   f"present: {domains[term.expr]}")
                if out.any():
                    reasons.append(f"{int(out.sum())} with a {_outside_text(labels)}")
                _warn(f"{term.label} is missing in {_rows_text(current.index, made | out)} although the data "
                      f"have values there ({'; '.join(reasons)}); na_action='split' routes them as missing values")
    n_dropped = n_total - len(current)
    if n_dropped:
        if na_action == "split":
            _warn(
                f"dropped {n_dropped} of {n_total} rows with a missing response {response.expr!r} "
                "(na_action='split' keeps missing predictor values, not a missing response)"
            )
        else:
            detail = _dropped_detail(dropped, produced, outside, domains)
            _warn(
                f"dropped {n_dropped} of {n_total} rows with missing values (na_action='drop'); "
                f"missing per term: {detail}"
            )
    n = len(current)

    # Response.
    ycol = columns[0]
    if ycol.kind == "categorical":
        _warn_text_column(response, ycol)
        class_labels = ycol.present_levels()
        _check_labels(class_labels, response.label)
        if len(class_labels) < 2:
            raise DataError(
                f"the categorical response {response.expr!r} has a single class "
                f"{class_labels[0]!r} in the {n} rows used; classification needs at least "
                "two classes"
            )
        y = ycol.codes(class_labels)
        response_kind = "categorical"
    else:
        y = np.array(ycol.values, dtype=np.float64, copy=True)
        class_labels = []
        response_kind = "numeric"
        if n > 0 and np.all(y == y[0]):
            _warn(f"the response {response.expr!r} is constant ({float(y[0])!r}); the fit is "
                  "trivial")
        elif n > 0 and np.all((y == 0) | (y == 1)):
            _warn(f"the response {response.expr!r} holds only the numbers 0 and 1, so it is fitted as a "
                  f"regression; for a classifier write the formula as 'C({response.expr}) ~ ...' or "
                  f"convert the column first (df[{response.expr!r}].astype(bool) or .astype('category'))")

    # Predictors.
    X = np.empty((n, len(predictors)), dtype=np.float64)
    levels: list[tuple | None] = []
    for j, (term, col) in enumerate(zip(predictors, columns[1:])):
        if col.kind == "categorical":
            lv = col.present_levels()
            _check_labels(lv, term.label)
            _warn_text_column(term, col)
            codes = col.codes(lv)
            X[:, j] = np.where(codes < 0, np.nan, codes) if na_action == "split" else codes
            levels.append(tuple(lv))
            if len(lv) == 1:
                _warn(f"{term.label} is constant (every row has level {lv[0]!r}); it offers "
                      "no split")
        else:
            X[:, j] = col.values
            levels.append(None)
            if np.all(col.values == col.values[0]):
                _warn(f"{term.label} is constant (every row is {float(col.values[0])!r}); it "
                      "offers no split")

    design = Design(
        formula=formula,
        response=response.expr,
        response_kind=response_kind,
        class_labels=tuple(class_labels),
        predictors=tuple(p.expr for p in predictors),
        is_categorical=tuple(lv is not None for lv in levels),
        levels=tuple(levels),
        methods=tuple(p.method for p in predictors),
        sources=tuple(tuple(s) for s in sources[1:]),
        terms=to_text(fitted[1:]),
    )
    if return_index:
        return design, X, y, current.index
    return design, X, y


def _causes(term, col, mask: np.ndarray, src: list[str], current: pd.DataFrame
            ) -> tuple[np.ndarray, np.ndarray, list]:
    """Why the rows in ``mask`` are missing, besides a missing value in the data.

    Returns ``made`` (a transform made NaN from values that are present, e.g. ``log(-1)``),
    ``out`` (a label outside ``C(x, levels=[...])``) and the labels outside the levels.
    """
    none = np.zeros(len(mask), dtype=bool)
    if not mask.any() or term.method != "python":
        return none, none, []
    out, labels = none, []
    if col.kind == "categorical" and col.explicit is not None:
        out = mask & (col.fcodes >= 0)
        if out.any():
            labels = list(dict.fromkeys(col.uniques[i] for i in np.unique(col.fcodes[out])))
    raw = (np.logical_or.reduce([current[c].isna().to_numpy() for c in src]) if src else none)
    made = mask & ~raw & ~out
    return made, out, labels


def _outside_text(labels: list) -> str:
    return (f"value(s) not among the levels given to C(): {_list_names(labels, 5)}; add them to "
            "levels=[...] or remove those rows")


def _dropped_detail(dropped: dict, produced: dict, outside: dict, domains: dict) -> str:
    """'log(x): 6 (all produced by the transform ...), x1: 2' for the drop warning and error."""
    parts = []
    for expr, count in dropped.items():
        text = f"{expr}: {count}"
        if expr in produced:
            text += (f" ({produced[expr]} produced by the transform from values that are present: "
                     f"{domains[expr]})")
        if expr in outside:
            number, labels = outside[expr]
            text += f" ({number} with a {_outside_text(labels)})"
        parts.append(text)
    return ", ".join(parts)


#: A text column is "mostly numeric" when at least this share of its rows parse as numbers
#: (and "mostly dates" when at least this share look like dates).
MOSTLY_NUMERIC = 0.5

# Dates written as text: 2021-03-04, 2021/3/4, 04.03.2021, 3/4/21, optionally with a time.
_DATE = re.compile(
    r"\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})"
    r"([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}:?\d{2})?)?\s*"
)


def _share(col, flags: np.ndarray) -> float:
    present = col.fcodes >= 0
    return float(flags[col.fcodes[present]].mean()) if present.any() else 0.0


def _warn_text_column(term, col) -> None:
    """Warn when a text column (not asked for with ``C()``) probably is not meant as a factor.

    A column that mostly holds numbers (a numeric CSV column with one ``"1,000"``), or dates
    written as text (one level per day), becomes a factor or, as the response, a classifier.
    """
    if term.method != "lookup" or not col.uniques or not all(isinstance(u, str) for u in col.uniques):
        return

    def parses(label: str) -> bool:
        try:
            float(label)
        except ValueError:
            return False
        return True

    n_levels = len(col.present_levels())
    fitted_as = (f"fitted as a classifier with {n_levels} classes" if term.role == "response"
                 else f"fitted as a factor with {n_levels} levels")
    keep = (f"to keep it {'categorical' if term.role == 'response' else 'a factor'} and silence this, "
            f"write C({term.expr})")
    dates = np.array([_DATE.fullmatch(u) is not None for u in col.uniques])
    share = _share(col, dates)
    if share >= MOSTLY_NUMERIC:
        examples = ", ".join(repr(u) for u, ok in zip(col.uniques, dates) if ok)
        examples = examples if len(examples) < 60 else examples[:56] + ", ..."
        _warn(
            f"{term.label} is text, but {share:.0%} of its rows hold dates ({examples}); it is "
            f"{fitted_as}, one per distinct date. To use the time, convert the column first, "
            f"e.g. d = pd.to_datetime(df[{term.expr!r}]) and then df['days'] = (d - d.min()).dt.days "
            f"or df['year'] = d.dt.year; {keep}"
        )
        return
    numeric = np.array([parses(u) for u in col.uniques])
    share = _share(col, numeric)
    if MOSTLY_NUMERIC <= share < 1:
        others = [u for u, ok in zip(col.uniques, numeric) if not ok]
        shown = ", ".join(repr(u) for u in others[:3]) + (", ..." if len(others) > 3 else "")
        _warn(
            f"{term.label} is text, but {share:.0%} of its rows hold numbers; it is {fitted_as}. "
            f"The values that are not numbers: {shown}. If the column is "
            f"numeric, clean them first (e.g. pd.to_numeric(df[{term.expr!r}].str.replace(',', '')), or "
            f"pd.read_csv(..., thousands=',')); {keep}"
        )
