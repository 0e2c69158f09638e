"""The tiny data sets of the exact-posterior tests (plain numpy; no ``bartpy_suite`` import).

(a) ``grid``: a 3x3 grid of two numeric predictors with two rows per cell (n = 18), m = 2.
(b) ``factor``: one numeric predictor (3 values) and a three-level factor with uneven cell counts
    (two empty cells, one single-row cell; n = 13), m = 2, so the ``min_leaf_size`` filter binds
    and factor levels are absent from some nodes.
(c) ``classes``: the grid of (a) with a three-class response.
(d) ``missing``: the data of (b) with the numeric predictor missing in three rows (one per
    value) and the factor in two, fitted with ``split_missing`` (``na_action="split"``): every
    rule carries its missing-value direction (2,715 trees). The response is shifted up by 1 in
    the rows missing the numeric predictor, so the posterior cares where they go.

The responses are fixed numbers (no random generation), chosen so that the posterior spreads
over a few hundred trees (posterior effective number of trees 10-50) and is far from the prior.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

from .enumerate import ExactResult, Problem, exact_posterior

ALPHA = 0.95
BETA = 1.0
MIN_LEAF = 2
A = 1.0 / 3.0
NU = 3.0
CLASS_ALPHA = 1.0
N_CLASSES = 3

GRID_X = np.array([(i, j) for i in range(3) for j in range(3) for _ in range(2)], dtype=float)
_GRID_NOISE = np.array([0.31, -0.52, 0.12, 0.77, -0.43, -0.05, 0.64, -0.71, 0.22, -0.18, 0.49, -0.36,
                        -0.61, 0.08, 0.27, -0.24, 0.55, -0.40])
GRID_Y = np.round(1.0 * (GRID_X[:, 0] >= 1) + 0.9 * (GRID_X[:, 1] == 2) + _GRID_NOISE, 2)

_FACTOR_COUNTS = np.array([[2, 2, 0], [1, 2, 2], [2, 0, 2]])
FACTOR_X = np.array([(i, j) for i in range(3) for j in range(3) for _ in range(_FACTOR_COUNTS[i, j])], dtype=float)
_FACTOR_NOISE = np.array([0.3, -0.5, 0.1, 0.7, -0.4, -0.1, 0.6, -0.7, 0.2, -0.2, 0.5, -0.3, -0.6])
FACTOR_Y = np.round(1.2 * (FACTOR_X[:, 1] == 1) + 0.6 * (FACTOR_X[:, 0] == 2) + _FACTOR_NOISE, 2)

MISSING_X = FACTOR_X.copy()
MISSING_X[[2, 6, 10], 0] = np.nan
MISSING_X[[4, 11], 1] = np.nan
MISSING_Y = np.round(1.2 * (FACTOR_X[:, 1] == 1) + 1.0 * np.isnan(MISSING_X[:, 0]) + _FACTOR_NOISE, 2)

CLASSES_Y = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 1, 2, 2, 0, 2, 2, 2, 1], dtype=np.int64)

DATASETS = {
    "grid": (GRID_X, np.array([False, False]), np.array([0, 0])),
    "factor": (FACTOR_X, np.array([False, True]), np.array([0, 3])),
    "classes": (GRID_X, np.array([False, False]), np.array([0, 0])),
    "missing": (MISSING_X, np.array([False, True]), np.array([0, 3])),
}


def calibrated_lambda(y: np.ndarray, nu: float = NU, q: float = 0.9) -> float:
    """lam with P(sigma < sd(y)) = q under sigma^2 ~ IG(nu/2, nu lam/2) (sigma^2 ~ nu lam/chi2_nu)."""
    return float(np.var(y, ddof=1) * stats.chi2.ppf(1.0 - q, nu) / nu)


def make_problem(dataset: str, model: str | None) -> Problem:
    """The enumeration problem of ``dataset`` ("grid", "factor", "classes", "missing") under ``model``
    ("mean_shift", "mean_variance_shift", "classification", or None for the prior)."""
    X, is_cat, n_levels = DATASETS[dataset]
    if dataset == "classes":
        return Problem(X, is_cat, n_levels, MIN_LEAF, ALPHA, BETA, model, y=np.zeros(len(X)), ycls=CLASSES_Y,
                       class_alpha=CLASS_ALPHA, n_classes=N_CLASSES)
    y = {"grid": GRID_Y, "factor": FACTOR_Y, "missing": MISSING_Y}[dataset]
    return Problem(X, is_cat, n_levels, MIN_LEAF, ALPHA, BETA, model, y=y, a=A, mu_bar=float(y.mean()), nu=NU,
                   lam=calibrated_lambda(y), split_missing=dataset == "missing")


@functools.cache
def exact(dataset: str, model: str | None) -> ExactResult:
    """Enumerated exact posterior (prior when ``model`` is None) of a data set, cached."""
    return exact_posterior(make_problem(dataset, model))
