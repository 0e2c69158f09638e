"""The :class:`Design`: apply a fitted formula to new data, save it as JSON, load it back.

Import rule: this module imports formulaic (for ``formulaic.__version__`` only), pandas,
numpy, :mod:`bartpy_suite.errors` and, inside the package, ``messages``, ``codecs`` and
``terms`` only. ``build`` imports it.

The JSON written by :meth:`Design.to_json` is stored with every saved fit: keep its fields,
``_JSON_FORMAT`` and ``_JSON_VERSION`` as they are, or saved fits stop loading.
"""

from __future__ import annotations

import dataclasses
import json

import formulaic
import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError, FormulaError

from .codecs import _decode, _encode
from .messages import (
    _check_frame,
    _check_na_action,
    _did_you_mean,
    _list_names,
    _rows_text,
    _warn,
)
from .terms import _classify, _environment, _evaluate, _MissingName, _Term

__all__ = ["Design"]

_JSON_FORMAT = "bartpy_suite.Design"
_JSON_VERSION = 1


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
                if na_action == "split":
                    pass  # the fit routes them down each rule's missing-value branch
                elif na_action == "raise":
                    lines = [
                        f"{term.label}: {_rows_text(frame.index, m)}"
                        for term, m in zip(self._terms(), na_masks) if m.any()
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
    def from_json(cls, text: str) -> Design:
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
