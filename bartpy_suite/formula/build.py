"""Build a :class:`~bartpy_suite.formula.Design` and its X and y from a formula and a DataFrame.

Import rule: this module imports pandas, numpy, :mod:`bartpy_suite.errors` and, inside the
package, ``messages``, ``codecs``, ``terms`` and ``design`` only; it is the top of the
package's import chain (``messages <- codecs <- terms <- design <- build``) and nothing in
the package imports it except ``__init__``.

:func:`build_design` parses and evaluates the terms (``terms``), applies ``na_action``,
codes the response and the factors (``codecs``) and stores the transform state.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .codecs import _check_labels, _dumps
from .design import Design
from .messages import _check_frame, _check_na_action, _list_names, _rows_text, _warn
from .terms import _evaluate_all, _parse

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
        ignored; interaction terms are refused (trees find interactions themselves).
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
        predictors, a term that gives several columns or a constant.
    DataError
        ``data`` not a DataFrame, duplicate column names, no rows, infinite values (always),
        missing values under ``na_action="raise"``, no rows left after dropping, a
        categorical response with a single class, unusable dtypes or labels.
    ArgumentError
        Unknown ``na_action``.

    Warns
    -----
    BartpySuiteWarning
        Rows dropped for missing values (with the count); a constant response; a constant
        predictor (it offers no split).
    """
    na_action = _check_na_action(na_action)
    frame = _check_frame(data, "data")
    if not isinstance(formula, str):
        raise FormulaError(
            f"formula must be a string such as 'y ~ x1 + x2', got {type(formula).__name__}"
        )
    formula = formula.strip()
    if len(frame) == 0:
        raise DataError("data has no rows; a tree model needs data to fit")
    response, predictors = _parse(formula, frame)
    terms = [response] + predictors

    columns, sources, states = _evaluate_all(terms, frame)
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
        for j, (col, src, state) in enumerate(zip(columns, sources, states)):
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
        if na_action == "raise":
            lines = []
            for term, mask, src in zip(terms, masks, sources):
                if mask.any():
                    origin = ""
                    if term.method == "python" and src and not any(
                        current[c].isna().any() for c in src
                    ):
                        origin = " (produced by the transform; check the values' domain)"
                    lines.append(f"{term.label} has missing values in "
                                 f"{_rows_text(current.index, mask)}{origin}")
            raise DataError(
                "; ".join(lines) + ". With na_action='raise' missing values are an error: "
                "fill them, or use na_action='drop' to drop those rows (like R's na.omit)"
            )
        for term, mask, src in zip(terms[:1] if na_action == "split" else terms, masks, sources):
            if mask.any():
                dropped[term.expr] = dropped.get(term.expr, 0) + int(mask.sum())
                if term.method == "python" and src:
                    raw = np.logical_or.reduce([current[c].isna().to_numpy() for c in src])
                    made = int((mask & ~raw).sum())
                    if made:
                        produced[term.expr] = produced.get(term.expr, 0) + made
        keep = ~any_na
        if not keep.any():
            detail = ", ".join(f"{k}: {v}" for k, v in dropped.items())
            raise DataError(
                f"every one of the {n_total} rows has a missing value in the used terms "
                f"({detail}); nothing is left to fit"
            )
        current = current.iloc[np.flatnonzero(keep)]
        if any(states):
            columns, sources, states = _evaluate_all(terms, current)
        else:
            columns = [col.take(keep) for col in columns]
    n_dropped = n_total - len(current)
    if n_dropped:
        if na_action == "split":
            _warn(
                f"dropped {n_dropped} of {n_total} rows with a missing response {response.expr!r} "
                "(na_action='split' keeps missing predictor values, not a missing response)"
            )
        else:
            detail = ", ".join(
                f"{k}: {v}" + (f" ({produced[k]} produced by the transform from values that are present: "
                               "outside its domain, e.g. log of a number <= 0 or sqrt of a negative one)"
                               if k in produced else "")
                for k, v in dropped.items())
            _warn(
                f"dropped {n_dropped} of {n_total} rows with missing values (na_action='drop'); "
                f"missing per term: {detail}"
            )
    n = len(current)

    # Response.
    ycol = columns[0]
    if ycol.kind == "categorical":
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
            _warn_mostly_numeric(term, col)
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

    try:
        state_json = _dumps([states[i] for i in range(1, len(terms))])
    except TypeError as exc:
        stateful = [p.expr for p, s in zip(predictors, states[1:]) if s]
        raise FormulaError(
            f"the state of transform(s) {_list_names(stateful)} cannot be stored ({exc}); "
            "compute the column before fitting and use it directly"
        ) from None

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
        transform_state=state_json,
    )
    if return_index:
        return design, X, y, current.index
    return design, X, y


#: A text column is "mostly numeric" when at least this share of its rows parse as numbers.
MOSTLY_NUMERIC = 0.5


def _warn_mostly_numeric(term, col) -> None:
    """Warn when a text factor (not asked for with ``C()``) mostly holds numbers, as a numeric
    CSV column with one ``"1,000"`` does: it was probably meant to be numeric."""
    if term.method != "lookup" or not col.uniques or not all(isinstance(u, str) for u in col.uniques):
        return

    def parses(label: str) -> bool:
        try:
            float(label)
        except ValueError:
            return False
        return True

    numeric = np.array([parses(u) for u in col.uniques])
    present = col.fcodes >= 0
    share = numeric[col.fcodes[present]].mean() if present.any() else 0.0
    if MOSTLY_NUMERIC <= share < 1:
        others = [u for u, ok in zip(col.uniques, numeric) if not ok]
        shown = ", ".join(repr(u) for u in others[:3]) + (", ..." if len(others) > 3 else "")
        _warn(
            f"{term.label} is text, but {share:.0%} of its rows hold numbers; it is fitted as a factor with "
            f"{len(col.present_levels())} levels. The values that are not numbers: {shown}. If the column is "
            f"numeric, clean them first (e.g. pd.to_numeric(df[{term.expr!r}].str.replace(',', '')), or "
            f"pd.read_csv(..., thousands=',')); to keep it a factor and silence this, write C({term.expr})"
        )
