"""Terms: parse a formula into terms (formulaic's parser), evaluate them on a frame (``expr``).

Import rule: this module imports formulaic (its formula parser only: ``Formula``,
``SimpleFormula``, ``DefaultFormulaParser``), pandas, numpy, :mod:`bartpy_suite.errors` and,
inside the package, ``messages``, ``codecs`` and ``expr`` only. ``design`` and ``build`` import
it. It is the one module of :mod:`bartpy_suite.formula` that depends on formulaic beyond
``formulaic.__version__``, so a formulaic upgrade that moves those internals is fixed here.

:func:`_parse` turns the formula into one response :class:`_Term` and the predictor terms
(dropping the intercept, refusing interactions and names that are not columns);
:func:`_tree_of` turns a term into its expression tree (``expr.parse_term``: a whitelist, no
Python evaluation); :func:`_evaluate_all` evaluates the trees on the training rows and
:func:`_classify` turns a value into a numeric or categorical
:class:`~bartpy_suite.formula.codecs._Column`. formulaic never evaluates a term.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pandas as pd
from formulaic import Formula, SimpleFormula
from formulaic.parser import DefaultFormulaParser

from bartpy_suite._binning import check_float64_keeps_values
from bartpy_suite.errors import DataError, FormulaError

from .codecs import _Column, _label_list
from .expr import (
    ALLOWED,
    FUNCTION_NAMES,
    ExpressionRefused,
    Factor,
    MissingName,
    NotNumbers,
    columns_of,
    evaluate,
    is_stateful,
    parse_term,
)
from .messages import _clean_formulaic_message, _did_you_mean, _list_names

# ----------------------------------------------------------------------------------------
# terms and their trees
# ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Term:
    expr: str
    method: str  # "lookup" (a column) or "python" (an expression, parsed by expr.parse_term)
    role: str  # "response" or "predictor"

    @property
    def label(self) -> str:
        return f"{self.role} {self.expr!r}"


def _tree_of(term: _Term) -> dict:
    """The expression tree of a term typed by the user; refuse what a formula may not contain."""
    if term.method == "lookup":
        return {"col": term.expr}
    try:
        return parse_term(term.expr)
    except ExpressionRefused as exc:
        raise FormulaError(f"{term.label} {exc.reason}. {ALLOWED}") from None


def _constant_text(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return repr(value)
    return repr(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)


def _as_series(value: Any, n: int, term: _Term) -> pd.Series:
    if isinstance(value, pd.Series):
        series = pd.Series(value.array, copy=False)
    else:
        if not isinstance(value, (pd.Categorical, pd.api.extensions.ExtensionArray)):
            value = np.asarray(value)
            if value.ndim == 2 and value.shape[1] == 1:
                value = value[:, 0]
            if value.ndim == 0:
                raise FormulaError(
                    f"{term.label} evaluates to the single value {_constant_text(value.item())}, not one "
                    "value per row; a constant term carries no information for a tree"
                )
            if value.ndim != 1:
                raise FormulaError(
                    f"{term.label} produces an array of shape {value.shape}; each term must "
                    "give one column"
                )
        series = pd.Series(value, copy=False)
    if len(series) != n:
        raise FormulaError(f"{term.label} gives {len(series)} values for {n} rows of data")
    return series


def _classify(value: Any, n: int, term: _Term, *, categorical: bool | None = None
              ) -> _Column:
    """Turn an evaluated term into a :class:`_Column`.

    ``categorical=None`` infers the kind from the dtype (training); ``True``/``False``
    forces it (new data must match the training kind).
    """
    explicit = None
    forced = False
    if isinstance(value, Factor):
        forced, explicit, value = True, value.levels, value.values
    series = _as_series(value, n, term)
    dtype = series.dtype
    is_cat_dtype = (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_bool_dtype(dtype)
        or pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
    )
    is_numeric_dtype = pd.api.types.is_numeric_dtype(dtype) and not is_cat_dtype
    training = categorical is None
    if categorical is None:
        categorical = forced or is_cat_dtype
        if not categorical and (not is_numeric_dtype or dtype.kind == "c"):
            if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
                # No silent conversion: days since which date, or the year, is the user's choice.
                raise FormulaError(
                    f"{term.label} has dtype {dtype} (dates or times), which is neither numeric nor "
                    "categorical; convert it to numbers first, e.g. "
                    f"df['days'] = (df[{term.expr!r}] - df[{term.expr!r}].min()).dt.days or "
                    f"df['year'] = df[{term.expr!r}].dt.year, or leave it out of the formula "
                    f"(e.g. '... - {term.expr}')"
                )
            raise FormulaError(
                f"{term.label} has dtype {dtype}, which is neither numeric nor categorical; "
                "convert it to numbers (e.g. days since a date) or to strings (a factor), or "
                f"leave it out of the formula (e.g. '... - {term.expr}')"
            )
    if categorical:
        fcodes, uniques = pd.factorize(series, sort=False)
        categories = None
        if isinstance(dtype, pd.CategoricalDtype):
            categories = _label_list(dtype.categories)
        return _Column("categorical", fcodes=np.asarray(fcodes, dtype=np.int64),
                       uniques=_label_list(uniques), categories=categories,
                       explicit=None if explicit is None else _label_list(explicit))
    # numeric expected
    if not is_numeric_dtype or dtype.kind == "c":
        converted = None
        if pd.api.types.is_object_dtype(dtype) and not forced:
            try:
                converted = pd.to_numeric(series, errors="raise")
            except (ValueError, TypeError):
                converted = None
        if converted is None or not pd.api.types.is_numeric_dtype(converted.dtype):
            example = series.dropna().iloc[:1].tolist()
            shown = f" (e.g. {example[0]!r})" if example else ""
            raise DataError(
                f"{term.label} was numeric in the training data, but newdata gives values "
                f"of dtype {dtype}{shown}; convert the column to numbers"
            )
        series = converted
    if training and term.role == "predictor" and series.dtype.kind in "iu":  # e.g. int64 near 2**63
        check_float64_keeps_values(series.dropna().to_numpy(), term.label)
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    return _Column("numeric", values=values)


# ----------------------------------------------------------------------------------------
# parsing the formula, evaluating all its terms
# ----------------------------------------------------------------------------------------

def _uses_dot(formula: str) -> bool:
    without_quoted = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "", formula)
    return re.search(r"(?<![\w.])\.(?![\w.])", without_quoted) is not None


def _parse(formula: str, frame: pd.DataFrame) -> tuple[_Term, list[_Term]]:
    available = [c for c in frame.columns if isinstance(c, str)]
    others = [c for c in frame.columns if not isinstance(c, str)]
    if others and _uses_dot(formula):
        raise DataError(
            f"'.' in the formula needs string column names, but data has column(s) "
            f"{_list_names(others, 10)}; rename them, e.g. df.columns = df.columns.astype(str)"
        )
    try:
        tokens = DefaultFormulaParser().get_tokens(formula)
        parsed = Formula(formula, _context={"__formulaic_variables_available__": available})
    except Exception as exc:  # formulaic's syntax errors
        raise FormulaError(
            f"cannot parse formula {formula!r}: {_clean_formulaic_message(exc)}"
        ) from None
    if not hasattr(parsed, "lhs") or not hasattr(parsed, "rhs"):
        raise FormulaError(
            f"formula {formula!r} has no response; write it as 'response ~ predictors', "
            "e.g. 'y ~ x1 + x2' or 'y ~ .'"
        )
    if not isinstance(parsed.rhs, SimpleFormula) or not isinstance(parsed.lhs, SimpleFormula):
        raise FormulaError(
            f"formula {formula!r} has several parts; write one 'response ~ predictors' "
            "formula (no '|')"
        )
    # Every bare name must be a column (catches typos in '. - x3' that formulaic ignores).
    missing = []
    for token in tokens:
        if token.kind.value == "name" and token.token not in available:
            if token.token not in missing:
                missing.append(token.token)
    if missing:
        details = [f"{m!r}{_did_you_mean(m, available)}" for m in missing]
        raise FormulaError(
            f"formula {formula!r} names column(s) not in data: {'; '.join(details)}. "
            f"Columns of data: {_list_names(available)}"
        )
    lhs = [t for t in parsed.lhs if t.factors]
    if len(lhs) != 1 or len(lhs[0].factors) != 1 or (
        lhs[0].factors[0].eval_method.value == "literal"
    ):
        raise FormulaError(
            f"formula {formula!r} must have exactly one response term on the left of '~', "
            f"got {str(parsed.lhs)!r}"
        )
    response = _Term(lhs[0].factors[0].expr, lhs[0].factors[0].eval_method.value, "response")
    predictors: list[_Term] = []
    for term in parsed.rhs:
        factors = list(term.factors)
        literal = [f for f in factors if f.eval_method.value == "literal"]
        if len(literal) == len(factors):
            continue  # the intercept: trees need none
        if len(factors) > 1:
            if literal:
                raise FormulaError(
                    f"term {str(term)!r} in {formula!r} scales a term by a constant; trees "
                    "are invariant to scaling, remove the constant"
                )
            mains = list(dict.fromkeys(
                f.expr for t in parsed.rhs for f in t.factors if f.eval_method.value != "literal"
            ))
            raise FormulaError(
                f"interaction term {str(term)!r} in {formula!r} is not supported: trees find "
                "interactions themselves, so list main effects only, e.g. "
                f"'{response.expr} ~ {' + '.join(mains)}'"
            )
        factor = factors[0]
        predictors.append(_Term(factor.expr, factor.eval_method.value, "predictor"))
    if not predictors:
        raise FormulaError(
            f"formula {formula!r} has no predictors; name at least one column on the right "
            "of '~', e.g. 'y ~ x1' or 'y ~ .'"
        )
    return response, predictors


def _evaluate_all(terms: list[_Term], trees: list[dict], frame: pd.DataFrame
                  ) -> tuple[list[_Column], list[list[str]], list[dict]]:
    """Evaluate the terms' trees on the training rows ``frame``.

    Returns each term's column, the data columns it reads and its fitted tree (the constants
    of ``center``/``scale`` fitted on these rows).
    """
    columns, sources, fitted, missing = [], [], [], []
    available = [c for c in frame.columns if isinstance(c, str)]
    for term, tree in zip(terms, trees):
        try:
            value, done = evaluate(tree, frame, fit=True)
        except MissingName as exc:
            missing.append((term, exc.name))
            continue
        except NotNumbers as exc:
            raise FormulaError(f"cannot evaluate {term.label}: {exc.message}") from None
        columns.append(_classify(value, len(frame), term))
        sources.append(columns_of(done))
        fitted.append(done)
    if missing:
        candidates = available + list(FUNCTION_NAMES)
        details = [
            f"{term.label} uses {name!r}, which is neither a column of data nor a known "
            f"transform{_did_you_mean(name, candidates)}"
            for term, name in missing
        ]
        raise FormulaError("; ".join(details) + f". Columns of data: {_list_names(available)}")
    return columns, sources, fitted


def _stateful(trees: list[dict]) -> list[bool]:
    return [is_stateful(tree) for tree in trees]
