"""Codes and JSON: factor labels to level codes, and lossless JSON for labels and state.

Import rule: this module imports pandas, numpy and :mod:`bartpy_suite.errors` only (plus
the standard library); no formulaic and no other module of :mod:`bartpy_suite.formula`.
``terms``, ``design`` and ``build`` import it.

:class:`_Column` holds one evaluated term, either float values or factorized labels, and
turns the labels into the codes ``0..L-1`` of a list of levels. ``_encode`` / ``_decode``
write and read the labels and the transform state that :meth:`Design.to_json` stores:
plain JSON where JSON suffices, a tagged object (``{"__bps__": ...}``) for non-finite
floats, arrays, tuples and dicts with non-string keys. Changing the tags breaks saved fits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bartpy_suite.errors import DataError

_LABEL_TYPES = (bool, int, float, str)

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
# factor labels and level codes
# ----------------------------------------------------------------------------------------

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

    def take(self, keep: np.ndarray) -> _Column:
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


def _check_labels(labels: Sequence, term_label: str) -> None:
    """Refuse labels that :func:`_encode` cannot store; ``term_label`` names the term."""
    bad = [lab for lab in labels if not isinstance(lab, _LABEL_TYPES)]
    if bad:
        raise DataError(
            f"{term_label} has labels of type {type(bad[0]).__name__} (e.g. {bad[0]!r}); "
            "factor labels must be str, int, float or bool so that the design can be saved; "
            "convert the column first (e.g. df['col'].astype(str))"
        )
