"""Formula front-end: DataFrame + R-style formula -> design matrix for tree models.

Import rule: this module imports pandas, numpy, formulaic and :mod:`bartpy_suite.errors`
only (plus the standard library). Nothing in ``_kernels``, ``samplers`` or ``models``
imports it; ``api`` and ``posterior`` do.

formulaic (tested with 1.2) parses the formula and evaluates the terms, so ``y ~ x1 + x2``,
``y ~ .``, ``y ~ . - x3``, ``log(x)``, ``I(x**2)``, ``np.sqrt(x)``, ``center(x)`` and ``C(x)``
mean what they mean in formulaic. Two things differ from a linear-model design matrix,
because trees need neither:

* factors stay factors. A categorical predictor (pandas ``category``, ``object``, string or
  ``bool`` column, or any ``C(x)`` term) becomes *one* column of integer level codes
  ``0..L-1`` (stored as float64), never dummy columns. ``Design.levels`` records the level
  labels in code order: the categories order for a pandas ``category`` column, the order of
  ``levels=`` for ``C(x, levels=[...])``, sorted labels otherwise. Only levels that occur in
  the rows used for fitting are kept, so every code ``0..L-1`` occurs in the training ``X``
  (``C``'s ``contrasts`` argument is accepted and ignored).
* the intercept (and ``-1`` / ``+0``) is ignored, and interaction terms (``a:b``, ``a*b``)
  are refused: trees find interactions themselves.

Terms are evaluated with the data columns, formulaic's transforms (``log``, ``exp``, ``I``,
``C``, ``center``, ``scale``, ``np``, ...) and Python's builtins in scope; the caller's
variables are not, so that a saved :class:`Design` can transform new data anywhere.
Stateful transforms (``center(x)``, ``scale(x)``) keep their training state in the design.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import formulaic
import numpy as np
import pandas as pd
from formulaic import Formula, SimpleFormula
from formulaic.parser import DefaultFormulaParser
from formulaic.transforms import TRANSFORMS
from formulaic.utils.layered_mapping import LayeredMapping
from formulaic.utils.stateful_transforms import stateful_eval

from bartpy_suite.errors import (
    ArgumentError,
    BartpySuiteWarning,
    DataError,
    FormulaError,
)

__all__ = ["Design", "build_design", "NA_ACTIONS"]

#: Valid values of ``na_action``.
NA_ACTIONS: tuple[str, ...] = ("drop", "raise")

_JSON_FORMAT = "bartpy_suite.Design"
_JSON_VERSION = 1
_LABEL_TYPES = (bool, int, float, str)
_MAX_SHOWN = 5


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------

def _stacklevel() -> int:
    """Stack level of the first frame outside this package, counted from the caller."""
    package_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)  # the function that will call warnings.warn
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        package_dir
    ):
        frame = frame.f_back
        level += 1
    return level


def _warn(message: str) -> None:
    warnings.warn(message, BartpySuiteWarning, stacklevel=_stacklevel())


def _close(word: str, options: Sequence[str], n: int = 3) -> list[str]:
    """Close matches of ``word`` among ``options`` (case-insensitive first)."""
    lower: dict[str, list[str]] = {}
    for option in options:
        lower.setdefault(option.lower(), []).append(option)
    found = list(lower.get(word.lower(), []))
    for match in difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6):
        found.extend(o for o in lower[match] if o not in found)
    return found[:n]


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    close = _close(word, options)
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


def _check_na_action(na_action: object) -> str:
    if isinstance(na_action, str) and na_action in NA_ACTIONS:
        return na_action
    message = (
        f"unknown na_action {na_action!r}; valid options: 'drop' (drop rows with missing "
        "values and warn, like R's na.omit) or 'raise'"
    )
    if isinstance(na_action, str):
        if na_action.lower().replace("na.", "") in ("omit", "exclude"):
            message += "; use 'drop' for R's na.omit"
        else:
            message += _did_you_mean(na_action, NA_ACTIONS)
    raise ArgumentError(message)


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


def _clean_formulaic_message(exc: BaseException) -> str:
    """formulaic's syntax errors carry ANSI colour codes and marker glyphs: strip them."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    text = text.replace("\u29db", ">>").replace("\u29da", "<<")
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _uses_dot(formula: str) -> bool:
    without_quoted = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "", formula)
    return re.search(r"(?<![\w.])\.(?![\w.])", without_quoted) is not None


# ----------------------------------------------------------------------------------------
# JSON encoding of labels and transform state (tagged, lossless for the types we allow)
# ----------------------------------------------------------------------------------------

_TAG = "__bps__"


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return {_TAG: "float", "value": repr(obj)}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"array of dtype {obj.dtype}")
        return {
            _TAG: "ndarray",
            "dtype": obj.dtype.str,
            "shape": list(obj.shape),
            "data": [_encode(v) for v in obj.ravel().tolist()],
        }
    if isinstance(obj, tuple):
        return {_TAG: "tuple", "items": [_encode(v) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: _encode(v) for k, v in obj.items()}
        return {_TAG: "dict", "items": [[_encode(k), _encode(v)] for k, v in obj.items()]}
    raise TypeError(f"value of type {type(obj).__name__}")


def _decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get(_TAG)
    if tag is None:
        return {k: _decode(v) for k, v in obj.items()}
    if tag == "float":
        return float(obj["value"])
    if tag == "ndarray":
        data = [_decode(v) for v in obj["data"]]
        return np.array(data, dtype=np.dtype(obj["dtype"])).reshape(obj["shape"])
    if tag == "tuple":
        return tuple(_decode(v) for v in obj["items"])
    if tag == "dict":
        return {_hashable(_decode(k)): _decode(v) for k, v in obj["items"]}
    raise ValueError(f"unknown tag {tag!r}")


def _hashable(obj: Any) -> Any:
    return tuple(_hashable(v) for v in obj) if isinstance(obj, list) else obj


def _dumps(obj: Any) -> str:
    return json.dumps(_encode(obj), allow_nan=False)


# ----------------------------------------------------------------------------------------
# term evaluation
# ----------------------------------------------------------------------------------------

class _Factor:
    """What ``C(x)`` returns here: the raw values marked categorical, with optional levels."""

    __slots__ = ("values", "levels")

    def __init__(self, values: Any, levels: list | None):
        self.values = values
        self.levels = levels


def _C(data: Any, contrasts: Any = None, *, levels: Any = None, spans_intercept: bool = True
       ) -> _Factor:
    """Mark ``data`` as categorical (formulaic's signature; contrasts are irrelevant to trees)."""
    if isinstance(data, _Factor):
        return _Factor(data.values, data.levels if levels is None else list(levels))
    return _Factor(data, None if levels is None else list(levels))


class _DataLayer(Mapping):
    """Read-only mapping view of the string-named columns of a DataFrame."""

    def __init__(self, frame: pd.DataFrame):
        self._frame = frame
        self._names = [c for c in frame.columns if isinstance(c, str)]
        self._set = set(self._names)

    def __getitem__(self, key: Any) -> pd.Series:
        if key in self:
            return self._frame[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._set

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _environment(frame: pd.DataFrame) -> LayeredMapping:
    return LayeredMapping(
        LayeredMapping(_DataLayer(frame), name="data"),
        LayeredMapping({"C": _C}, name="bartpy_suite"),
        LayeredMapping(TRANSFORMS, name="transforms"),
    )


@dataclasses.dataclass(frozen=True)
class _Term:
    expr: str
    method: str  # "lookup" (a column) or "python" (an expression)
    role: str  # "response" or "predictor"

    @property
    def label(self) -> str:
        return f"{self.role} {self.expr!r}"


class _MissingName(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _source_columns(variables: set, frame: pd.DataFrame) -> list[str]:
    """Data columns behind formulaic's variables ('x.fillna' -> 'x')."""
    columns = {c for c in frame.columns if isinstance(c, str)}
    out = []
    for var in sorted(variables, key=str):
        if getattr(var, "source", None) != "data":
            continue
        name = str(var)
        while name not in columns and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in columns and name not in out:
            out.append(name)
    return out


def _evaluate(term: _Term, frame: pd.DataFrame, env: LayeredMapping, state: dict
              ) -> tuple[Any, list[str]]:
    """Evaluate one term; return its raw value and the data columns it used."""
    if term.method == "lookup":
        if term.expr not in frame.columns:
            raise _MissingName(term.expr)
        return frame[term.expr], [term.expr]
    variables: set = set()
    try:
        with np.errstate(all="ignore"):
            value = stateful_eval(term.expr, env, {}, state, None, variables=variables)
    except NameError as exc:
        name = getattr(exc, "name", None) or str(exc)
        raise _MissingName(name) from None
    except Exception as exc:  # formulaic / numpy / pandas errors inside the expression
        raise FormulaError(
            f"cannot evaluate {term.label}: {type(exc).__name__}: {exc}"
        ) from exc
    return value, _source_columns(variables, frame)


class _Column:
    """One evaluated term: float values (numeric) or factorized labels (categorical)."""

    def __init__(self, kind: str, *, values: np.ndarray | None = None,
                 fcodes: np.ndarray | None = None, uniques: list | None = None,
                 categories: list | None = None, explicit: list | None = None):
        self.kind = kind
        self.values = values
        self.fcodes = fcodes
        self.uniques = uniques
        self.categories = categories
        self.explicit = explicit

    def na_mask(self) -> np.ndarray:
        if self.kind == "numeric":
            return np.isnan(self.values)
        mask = self.fcodes < 0
        if self.explicit is not None and self.uniques:
            allowed = set(self.explicit)
            outside = np.array([u not in allowed for u in self.uniques])
            mask = mask | (~mask & outside[np.maximum(self.fcodes, 0)])
        return mask

    def take(self, keep: np.ndarray) -> "_Column":
        if self.kind == "numeric":
            return _Column("numeric", values=self.values[keep])
        return _Column("categorical", fcodes=self.fcodes[keep], uniques=self.uniques,
                       categories=self.categories, explicit=self.explicit)

    def present_levels(self) -> list:
        """Level labels occurring in the column, in code order."""
        used = np.unique(self.fcodes[self.fcodes >= 0])
        present = [self.uniques[i] for i in used]
        present_set = set(present)
        if self.explicit is not None:
            return [lab for lab in dict.fromkeys(self.explicit) if lab in present_set]
        if self.categories is not None:
            return [lab for lab in self.categories if lab in present_set]
        try:
            return sorted(present)
        except TypeError:
            return sorted(present, key=lambda v: (type(v).__name__, str(v)))

    def codes(self, levels: Sequence) -> np.ndarray:
        """int64 codes in ``levels`` order; -1 for missing values and labels not in levels."""
        if not self.uniques:
            return np.full(len(self.fcodes), -1, dtype=np.int64)
        lookup = {lab: i for i, lab in enumerate(levels)}
        umap = np.array([lookup.get(u, -1) for u in self.uniques], dtype=np.int64)
        return np.where(self.fcodes >= 0, umap[np.maximum(self.fcodes, 0)], -1)

    def unknown_labels(self, levels: Sequence) -> list:
        known = set(levels)
        used = np.unique(self.fcodes[self.fcodes >= 0])
        return [self.uniques[i] for i in used if self.uniques[i] not in known]


def _label_list(uniques: Any) -> list:
    out = []
    for value in pd.Index(uniques).tolist():
        out.append(value.item() if isinstance(value, np.generic) else value)
    return out


def _as_series(value: Any, n: int, term: _Term) -> pd.Series:
    if isinstance(value, (dict, pd.DataFrame)) or (
        hasattr(value, "__formulaic_metadata__")
        and getattr(value.__formulaic_metadata__, "column_names", None)
    ):
        width = value.shape[1] if isinstance(value, pd.DataFrame) else "several"
        if not (isinstance(value, pd.DataFrame) and value.shape[1] == 1):
            raise FormulaError(
                f"{term.label} produces {width} columns; each term must give one column "
                "(trees need no basis expansions such as poly() or bs(): use the variable itself)"
            )
        value = value.iloc[:, 0]
    if hasattr(value, "__formulaic_metadata__"):
        value = value.__wrapped__
    if isinstance(value, pd.Series):
        series = pd.Series(value.array, copy=False)
    else:
        if not isinstance(value, (pd.Categorical, pd.api.extensions.ExtensionArray)):
            value = np.asarray(value)
            if value.ndim == 2 and value.shape[1] == 1:
                value = value[:, 0]
            if value.ndim == 0:
                raise FormulaError(
                    f"{term.label} evaluates to the single value {value.item()!r}, not one "
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
    if isinstance(value, _Factor):
        forced, explicit, value = True, value.levels, value.values
    meta = getattr(value, "__formulaic_metadata__", None)
    if meta is not None and getattr(meta.kind, "value", None) == "categorical":
        forced = True
    series = _as_series(value, n, term)
    dtype = series.dtype
    is_cat_dtype = (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_bool_dtype(dtype)
        or pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
    )
    is_numeric_dtype = pd.api.types.is_numeric_dtype(dtype) and not is_cat_dtype
    if categorical is None:
        categorical = forced or is_cat_dtype
        if not categorical and (not is_numeric_dtype or dtype.kind == "c"):
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
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    return _Column("numeric", values=values)


def _check_labels(labels: Sequence, term: _Term) -> None:
    bad = [lab for lab in labels if not isinstance(lab, _LABEL_TYPES)]
    if bad:
        raise DataError(
            f"{term.label} has labels of type {type(bad[0]).__name__} (e.g. {bad[0]!r}); "
            "factor labels must be str, int, float or bool so that the design can be saved; "
            "convert the column first (e.g. df['col'].astype(str))"
        )


# ----------------------------------------------------------------------------------------
# the design
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Design:
    """Everything needed to turn a DataFrame into the design matrix of a fitted model.

    Build one with :func:`build_design`; apply it to new data with :meth:`transform`;
    store it with :meth:`to_json` / :meth:`from_json` (plain JSON, no pickle). Instances are
    immutable, hashable, comparable and picklable.

    Attributes
    ----------
    formula : str
        The formula as the user wrote it.
    response : str
        The response term as formulaic normalises it (``"y"``, ``"log(y)"``).
    response_kind : {"numeric", "categorical"}
        Regression or classification.
    class_labels : tuple
        Categorical response: the class labels as given (``True``/``False``, ``"malignant"``),
        in code order (``y == k`` means ``class_labels[k]``); ``()`` otherwise.
    predictors : tuple of str
        Predictor names as formulaic normalises them (``"x1"``, ``"log(x2)"``,
        ``"I(x ** 2)"``, ``"C(g)"``); column ``j`` of ``X`` is ``predictors[j]``.
    is_categorical : tuple of bool
        Whether predictor ``j`` is a factor (its column holds level codes).
    levels : tuple of (tuple or None)
        Level labels of each factor in code order (``X[:, j] == k`` means
        ``levels[j][k]``); ``None`` for numeric predictors.
    methods : tuple of str
        ``"lookup"`` (a column taken as is) or ``"python"`` (an evaluated expression), per
        predictor.
    sources : tuple of tuple of str
        The data columns each predictor is computed from.
    transform_state : str
        JSON text with the state of stateful transforms (e.g. ``center(x)``), one object
        per predictor (``{}`` for stateless terms).
    """

    formula: str
    response: str
    response_kind: str
    class_labels: tuple
    predictors: tuple[str, ...]
    is_categorical: tuple[bool, ...]
    levels: tuple[tuple | None, ...]
    methods: tuple[str, ...]
    sources: tuple[tuple[str, ...], ...]
    transform_state: str = dataclasses.field(default="[]", repr=False)

    # ---- derived ------------------------------------------------------------------------

    @property
    def n_predictors(self) -> int:
        """Number of predictors (columns of ``X``)."""
        return len(self.predictors)

    @property
    def n_levels(self) -> tuple[int, ...]:
        """Number of levels of each predictor (0 for numeric predictors)."""
        return tuple(0 if lv is None else len(lv) for lv in self.levels)

    @property
    def columns(self) -> tuple[str, ...]:
        """Data columns new data must have (the predictors' sources, in order)."""
        return tuple(dict.fromkeys(c for src in self.sources for c in src))

    @property
    def expanded_formula(self) -> str:
        """The formula with ``.`` expanded and the intercept dropped, e.g. ``'y ~ x1 + x2'``."""
        def quote(name: str, method: str) -> str:
            return f"`{name}`" if method == "lookup" and not name.isidentifier() else name
        rhs = " + ".join(quote(p, m) for p, m in zip(self.predictors, self.methods))
        return f"{self.response} ~ {rhs}"

    def __repr__(self) -> str:
        parts = []
        for name, cat, lv in zip(self.predictors, self.is_categorical, self.levels):
            parts.append(f"{name} (factor, {len(lv)} levels)" if cat else f"{name} (numeric)")
        kind = (
            f"categorical, classes {list(self.class_labels)!r}"
            if self.response_kind == "categorical"
            else "numeric"
        )
        return (
            f"Design({self.formula!r}; response {self.response} ({kind}); "
            f"predictors {', '.join(parts)})"
        )

    def _states(self) -> list[dict]:
        states = _decode(json.loads(self.transform_state))
        return states if states else [{} for _ in self.predictors]

    def _terms(self) -> list[_Term]:
        return [_Term(p, m, "predictor") for p, m in zip(self.predictors, self.methods)]

    # ---- new data -----------------------------------------------------------------------

    def transform(self, newdata: pd.DataFrame, *, na_action: str = "raise",
                  return_index: bool = False) -> np.ndarray | tuple[np.ndarray, pd.Index]:
        """Apply the design to new data: same columns, same transforms, same level codes.

        Parameters
        ----------
        newdata : pandas.DataFrame
            Must contain the columns in :attr:`columns` (the response is not needed; other
            columns are ignored). Never modified.
        na_action : {"raise", "drop"}, default "raise"
            ``"raise"``: missing values are an error naming the column and the first rows.
            ``"drop"``: rows with missing values in the used columns are dropped with a
            :class:`~bartpy_suite.errors.BartpySuiteWarning` giving the count.
        return_index : bool, default False
            Also return the index labels of the rows kept (useful with ``na_action="drop"``).

        Returns
        -------
        X : numpy.ndarray
            float64 array of shape (m, n_predictors); factor columns hold level codes
            ``0..L-1`` as floats.
        index : pandas.Index
            Only if ``return_index``: ``newdata.index`` of the rows in ``X``.

        Raises
        ------
        FormulaError
            A column the design needs is missing (the message names it).
        DataError
            Unseen factor levels (named with the column), infinite values, missing values
            under ``na_action="raise"``, a factor column given for a numeric predictor, or
            ``newdata`` not a DataFrame.
        """
        na_action = _check_na_action(na_action)
        frame = _check_frame(newdata, "newdata")
        available = [c for c in frame.columns if isinstance(c, str)]
        missing = [c for c in self.columns if c not in available]
        if missing:
            details = []
            for col in missing:
                users = [p for p, src in zip(self.predictors, self.sources) if col in src]
                need = "" if users == [col] else f" (used by {_list_names(users)})"
                details.append(f"{col!r}{need}{_did_you_mean(col, available)}")
            raise FormulaError(
                f"newdata lacks column(s) needed by the model: {'; '.join(details)}. The "
                f"model was fitted with {self.expanded_formula!r}"
            )
        n = len(frame)
        env = _environment(frame)
        X = np.empty((n, self.n_predictors), dtype=np.float64)
        na_masks: list[np.ndarray] = []
        for j, (term, state) in enumerate(zip(self._terms(), self._states())):
            try:
                value, _ = _evaluate(term, frame, env, state)
            except _MissingName as exc:
                raise FormulaError(
                    f"newdata lacks column {exc.name!r} needed by {term.label}"
                    f"{_did_you_mean(exc.name, available)}"
                ) from None
            col = _classify(value, n, term, categorical=self.is_categorical[j])
            if col.kind == "numeric":
                bad = np.isinf(col.values)
                if bad.any():
                    raise DataError(
                        f"{term.label} has infinite values in newdata: "
                        f"{_rows_text(frame.index, bad)}; replace or remove them"
                    )
                X[:, j] = col.values
                na_masks.append(np.isnan(col.values))
            else:
                levels = self.levels[j]
                unseen = col.unknown_labels(levels)
                if unseen:
                    try:
                        unseen = sorted(unseen)
                    except TypeError:
                        pass
                    raise DataError(
                        f"{term.label} has level(s) not seen in the training data: "
                        f"{_list_names(unseen, 10)}; known levels: {_list_names(levels, 10)}. "
                        "A tree has no rule for an unseen level: recode or remove those rows"
                    )
                codes = col.codes(levels)
                na = col.fcodes < 0
                X[:, j] = np.where(na, np.nan, codes.astype(np.float64))
                na_masks.append(na)
        keep = np.ones(n, dtype=bool)
        if na_masks:
            any_na = np.logical_or.reduce(na_masks)
            if any_na.any():
                if na_action == "raise":
                    lines = [
                        f"{term.label}: {_rows_text(frame.index, m)}"
                        for term, m in zip(self._terms(), na_masks) if m.any()
                    ]
                    raise DataError(
                        "newdata has missing values: " + "; ".join(lines)
                        + ". Fill them or remove those rows before predicting"
                    )
                keep = ~any_na
                _warn(
                    f"dropped {int(any_na.sum())} of {n} rows of newdata with missing values "
                    "(na_action='drop')"
                )
                X = X[keep]
        if return_index:
            return X, frame.index[keep]
        return X

    # ---- storage ------------------------------------------------------------------------

    def to_json(self) -> str:
        """Serialise the design to a JSON string (ASCII; safe in a netCDF attribute).

        Returns
        -------
        str
            A JSON object with keys ``format``, ``version``, ``formulaic_version``,
            ``formula``, ``response``, ``response_kind``, ``class_labels``, ``predictors``,
            ``is_categorical``, ``levels``, ``methods``, ``sources`` and ``transform_state``.
            Labels keep their JSON type (str, int, float, bool).
        """
        payload = {
            "format": _JSON_FORMAT,
            "version": _JSON_VERSION,
            "formulaic_version": formulaic.__version__,
            "formula": self.formula,
            "response": self.response,
            "response_kind": self.response_kind,
            "class_labels": _encode(list(self.class_labels)),
            "predictors": list(self.predictors),
            "is_categorical": list(self.is_categorical),
            "levels": [None if lv is None else _encode(list(lv)) for lv in self.levels],
            "methods": list(self.methods),
            "sources": [list(s) for s in self.sources],
            "transform_state": json.loads(self.transform_state),
        }
        return json.dumps(payload, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> "Design":
        """Rebuild a design from :meth:`to_json` output.

        Parameters
        ----------
        text : str
            JSON text written by :meth:`to_json`.

        Returns
        -------
        Design
            Equal to the design that was saved.

        Raises
        ------
        FormulaError
            If ``text`` is not a saved design (or comes from a newer format version).
        """
        try:
            payload = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise FormulaError(f"not a saved bartpy_suite design (invalid JSON: {exc})") from None
        if not isinstance(payload, dict) or payload.get("format") != _JSON_FORMAT:
            raise FormulaError("not a saved bartpy_suite design (no 'format' marker)")
        if payload.get("version", 0) > _JSON_VERSION:
            raise FormulaError(
                f"the design was saved by a newer bartpy_suite (format version "
                f"{payload.get('version')}, this one reads {_JSON_VERSION}); upgrade bartpy_suite"
            )
        try:
            return cls(
                formula=payload["formula"],
                response=payload["response"],
                response_kind=payload["response_kind"],
                class_labels=tuple(_decode(payload["class_labels"])),
                predictors=tuple(payload["predictors"]),
                is_categorical=tuple(bool(v) for v in payload["is_categorical"]),
                levels=tuple(None if lv is None else tuple(_decode(lv))
                             for lv in payload["levels"]),
                methods=tuple(payload["methods"]),
                sources=tuple(tuple(s) for s in payload["sources"]),
                transform_state=json.dumps(payload["transform_state"], allow_nan=False),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormulaError(f"not a saved bartpy_suite design (bad field: {exc})") from None


# ----------------------------------------------------------------------------------------
# build_design
# ----------------------------------------------------------------------------------------

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


def _evaluate_all(terms: list[_Term], frame: pd.DataFrame
                  ) -> tuple[list[_Column], list[list[str]], list[dict]]:
    env = _environment(frame)
    columns, sources, states, missing = [], [], [], []
    available = [c for c in frame.columns if isinstance(c, str)]
    for term in terms:
        state: dict = {}
        try:
            value, src = _evaluate(term, frame, env, state)
        except _MissingName as exc:
            missing.append((term, exc.name))
            continue
        columns.append(_classify(value, len(frame), term))
        sources.append(src)
        states.append(state)
    if missing:
        candidates = available + [k for k in TRANSFORMS if k.isidentifier()]
        details = [
            f"{term.label} uses {name!r}, which is neither a column of data nor a known "
            f"transform{_did_you_mean(name, candidates)}"
            for term, name in missing
        ]
        raise FormulaError("; ".join(details) + f". Columns of data: {_list_names(available)}")
    return columns, sources, states


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
    na_action : {"drop", "raise"}, default "drop"
        ``"drop"`` (R's ``na.omit``): drop rows with a missing value in any used term and
        warn with the count. ``"raise"``: missing values are an error naming the column.
        Missing values produced by a transform (``log(-1)``) count as missing.
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
        for term, col, src, state in zip(terms, columns, sources, states):
            mask = col.na_mask()
            if state and src:
                # A stateful transform fitted on data with NaN is NaN everywhere: blame the
                # raw column and refit the transform on the rows kept.
                raw = np.logical_or.reduce([current[c].isna().to_numpy() for c in src])
                if raw.any():
                    mask = raw
            masks.append(mask)
        any_na = np.logical_or.reduce(masks)
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
        for term, mask in zip(terms, masks):
            if mask.any():
                dropped[term.expr] = dropped.get(term.expr, 0) + int(mask.sum())
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
        detail = ", ".join(f"{k}: {v}" for k, v in dropped.items())
        _warn(
            f"dropped {n_dropped} of {n_total} rows with missing values (na_action='drop'); "
            f"missing per term: {detail}"
        )
    n = len(current)

    # Response.
    ycol = columns[0]
    if ycol.kind == "categorical":
        class_labels = ycol.present_levels()
        _check_labels(class_labels, response)
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

    # Predictors.
    X = np.empty((n, len(predictors)), dtype=np.float64)
    levels: list[tuple | None] = []
    for j, (term, col) in enumerate(zip(predictors, columns[1:])):
        if col.kind == "categorical":
            lv = col.present_levels()
            _check_labels(lv, term)
            X[:, j] = col.codes(lv)
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
