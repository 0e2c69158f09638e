"""The :class:`Design`: apply a fitted formula to new data, save it as JSON, load it back.

Import rule: this module imports formulaic (for ``formulaic.__version__`` only), pandas,
numpy, :mod:`bartpy_suite.errors` and, inside the package, ``messages``, ``codecs``, ``expr``
and ``terms`` only. ``build`` imports it.

The JSON written by :meth:`Design.to_json` is stored with every saved fit: keep its fields,
``_JSON_FORMAT`` and the reading of every ``_JSON_VERSION`` so far, or saved fits stop loading.

* Version 2 (this one) stores each predictor as an expression tree (``terms``, see
  :mod:`bartpy_suite.formula.expr`) with the constants of ``center``/``scale`` in it.
  :meth:`Design.from_json` checks every node against the whitelist and refuses anything else,
  naming the term; ``transform`` evaluates the trees with numpy and pandas only.
* Version 1 (bartpy_suite before the trees) stored each predictor as formulaic's expression
  text (``methods``: ``"lookup"`` or ``"python"``) and the state of formulaic's stateful
  transforms (``transform_state``). It is read by parsing that text with
  :func:`~bartpy_suite.formula.expr.parse_term` (``ast.parse`` and a whitelist walk; nothing is
  evaluated) and putting the saved state into the trees.
"""

from __future__ import annotations

import dataclasses
import json

import formulaic
import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .codecs import _decode, _encode
from .expr import (
    ALLOWED,
    ExpressionRefused,
    MissingName,
    NotNumbers,
    check_tree,
    columns_of,
    domain_text,
    evaluate,
    fill_legacy_state,
    parse_term,
    to_text,
)
from .messages import (
    _check_frame,
    _check_na_action,
    _did_you_mean,
    _list_names,
    _rows_text,
    _warn,
)
from .terms import _classify, _Term

__all__ = ["Design"]

_JSON_FORMAT = "bartpy_suite.Design"
_JSON_VERSION = 2


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
        ``"lookup"`` (a column taken as is) or ``"python"`` (an expression), per predictor.
    sources : tuple of tuple of str
        The data columns each predictor is computed from.
    terms : str
        JSON text of each predictor's expression tree (:mod:`bartpy_suite.formula.expr`),
        with the constants of stateful transforms (``center(x)``) fitted on the training rows.
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
    terms: str = dataclasses.field(default="[]", repr=False)

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

    def _trees(self) -> list[dict]:
        trees = _decode(json.loads(self.terms))
        return trees if trees else [{"col": p} for p in self.predictors]

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
        na_action : {"raise", "drop", "split"}, default "raise"
            ``"raise"``: missing values are an error naming the column and the first rows.
            ``"drop"``: rows with missing values in the used columns are dropped with a
            :class:`~bartpy_suite.errors.BartpySuiteWarning` giving the count.
            ``"split"``: missing values are kept as NaN (for a fit with ``na_action="split"``,
            whose rules route them).
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
        X = np.empty((n, self.n_predictors), dtype=np.float64)
        na_masks: list[np.ndarray] = []
        trees = self._trees()
        for j, (term, tree) in enumerate(zip(self._terms(), trees)):
            try:
                value, _ = evaluate(tree, frame)  # numpy and pandas operations only, no eval
            except MissingName as exc:
                raise FormulaError(
                    f"newdata lacks column {exc.name!r} needed by {term.label}"
                    f"{_did_you_mean(exc.name, available)}"
                ) from None
            except NotNumbers as exc:
                raise DataError(f"cannot compute {term.label} on newdata: {exc.message}") from None
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
                if na_action == "split":
                    pass  # the fit routes them down each rule's missing-value branch
                elif na_action == "raise":
                    lines = [
                        f"{term.label}: {_rows_text(frame.index, m)}"
                        + self._made_text(frame, tree, src, m)
                        for term, tree, src, m in zip(self._terms(), trees, self.sources, na_masks)
                        if m.any()
                    ]
                    raise DataError(
                        "newdata has missing values: " + "; ".join(lines)
                        + ". Fill them or remove those rows before predicting"
                    )
                else:
                    keep = ~any_na
                    _warn(
                        f"dropped {int(any_na.sum())} of {n} rows of newdata with missing values "
                        "(na_action='drop')"
                    )
                    X = X[keep]
        if return_index:
            return X, frame.index[keep]
        return X

    @staticmethod
    def _made_text(frame: pd.DataFrame, tree: dict, src: tuple, mask: np.ndarray) -> str:
        """' (produced by the transform ...)' when a transform made missing values from values
        that are present in ``frame`` (``log`` of a negative number)."""
        if "col" in tree or not src:
            return ""
        raw = np.logical_or.reduce([frame[c].isna().to_numpy() for c in src])
        made = int((mask & ~raw).sum())
        if not made:
            return ""
        share = "" if made == int(mask.sum()) else f"{made} of them "
        return f" ({share}produced by the transform from values that are present: {domain_text(tree)})"

    # ---- storage ------------------------------------------------------------------------

    def to_json(self) -> str:
        """Serialise the design to a JSON string (ASCII; safe in a netCDF attribute).

        Returns
        -------
        str
            A JSON object with keys ``format``, ``version`` (2), ``formulaic_version``,
            ``formula``, ``response``, ``response_kind``, ``class_labels``, ``predictors``,
            ``is_categorical``, ``levels``, ``methods``, ``sources`` and ``terms`` (one
            expression tree per predictor). Labels keep their JSON type (str, int, float,
            bool).
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
            "terms": json.loads(self.terms),
        }
        return json.dumps(payload, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> Design:
        """Rebuild a design from :meth:`to_json` output (version 2, or version 1 of earlier releases).

        Nothing read from ``text`` is evaluated as Python: each predictor's expression tree
        (version 2) or expression text (version 1, parsed by
        :func:`~bartpy_suite.formula.expr.parse_term`) is checked against the whitelist of
        :data:`~bartpy_suite.formula.expr.ALLOWED`.

        Parameters
        ----------
        text : str
            JSON text written by :meth:`to_json`.

        Returns
        -------
        Design
            Equal to the design that was saved (a version-1 design: the same design matrix).

        Raises
        ------
        FormulaError
            If ``text`` is not a saved design, comes from a newer format version, or a predictor
            holds anything outside the whitelist (the message names the predictor and says what
            is allowed).
        """
        try:
            payload = json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise FormulaError(f"not a saved bartpy_suite design (invalid JSON: {exc})") from None
        if not isinstance(payload, dict) or payload.get("format") != _JSON_FORMAT:
            raise FormulaError("not a saved bartpy_suite design (no 'format' marker)")
        version = payload.get("version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FormulaError(f"not a saved bartpy_suite design (format version {version!r})")
        if version > _JSON_VERSION:
            raise FormulaError(
                f"the design was saved by a newer bartpy_suite (format version "
                f"{payload.get('version')}, this one reads {_JSON_VERSION}); upgrade bartpy_suite"
            )
        try:
            predictors = tuple(payload["predictors"])
            if not all(isinstance(p, str) for p in predictors):
                raise TypeError("predictor names must be text")
            trees = (_legacy_trees(payload, predictors) if version == 1
                     else _stored_trees(payload, predictors))
            levels = tuple(None if lv is None else tuple(_decode(lv)) for lv in payload["levels"])
            is_categorical = tuple(bool(v) for v in payload["is_categorical"])
            methods = tuple(payload["methods"])
            for predictor, method, tree in zip(predictors, methods, trees):
                if method not in ("lookup", "python") or (method == "lookup" and tree != {"col": predictor}):
                    raise ValueError(f"method {method!r} of predictor {predictor!r}")
            if not len(levels) == len(is_categorical) == len(methods) == len(predictors):
                raise ValueError(
                    f"{len(predictors)} predictors, {len(is_categorical)} kinds and {len(levels)} "
                    "level lists"
                )
            return cls(
                formula=str(payload["formula"]),
                response=str(payload["response"]),
                response_kind=str(payload["response_kind"]),
                class_labels=tuple(_decode(payload["class_labels"])),
                predictors=predictors,
                is_categorical=is_categorical,
                levels=levels,
                methods=methods,
                sources=tuple(tuple(columns_of(tree)) for tree in trees),
                terms=to_text(trees),
            )
        except FormulaError:
            raise
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise FormulaError(f"not a saved bartpy_suite design (bad field: {exc})") from None


def _refused(predictor: str, reason: str) -> FormulaError:
    return FormulaError(
        f"the saved design's predictor {predictor!r} {reason}; it was refused and nothing in it was "
        f"evaluated. Only fits whose terms fit this whitelist can be loaded: {ALLOWED}"
    )


def _stored_trees(payload: dict, predictors: tuple) -> list[dict]:
    """The checked expression trees of a version-2 design."""
    stored = _decode(payload["terms"])
    if not isinstance(stored, list) or len(stored) != len(predictors):
        raise ValueError(f"'terms' must hold one tree per predictor ({len(predictors)})")
    trees = []
    for predictor, tree in zip(predictors, stored):
        try:
            trees.append(check_tree(tree))
        except ExpressionRefused as exc:
            raise _refused(predictor, exc.reason) from None
    return trees


def _legacy_trees(payload: dict, predictors: tuple) -> list[dict]:
    """Expression trees of a version-1 design: its formulaic text parsed by our whitelist parser
    (never evaluated), with formulaic's saved state of center()/scale() as constants."""
    methods = list(payload["methods"])
    states = _decode(payload.get("transform_state") or [])
    if not states:
        states = [{} for _ in predictors]
    if len(methods) != len(predictors) or len(states) != len(predictors):
        raise ValueError(f"'methods' and 'transform_state' must have one entry per predictor "
                         f"({len(predictors)})")
    trees = []
    for predictor, method, state in zip(predictors, methods, states):
        if method == "lookup":
            trees.append({"col": predictor})
            continue
        if method != "python":
            raise _refused(predictor, f"has the method {method!r} (not 'lookup' or 'python')")
        try:
            trees.append(check_tree(fill_legacy_state(parse_term(predictor), state)))
        except ExpressionRefused as exc:
            raise _refused(predictor, exc.reason) from None
    return trees
