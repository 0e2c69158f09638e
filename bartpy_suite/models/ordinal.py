"""Ordinal (cumulative-probit) BART: the ``link="ordinal"`` branch of ``BART.fit``.

An ordered categorical response y in {0, ..., K-1} (codes in the order of ``class_labels``) gets

    P(y <= k | x) = Phi(c_{k+1} - eta(x)),   eta(x) = mu0 + f(x),   f ~ BART (probit leaf prior),

with one sum of trees and K - 1 cutpoints c_1 = 0 < c_2 < ... < c_{K-1} (Albert & Chib 1993;
sampler in ``_kernels/ordinal.py``).

Identification: the noise sd is 1 (the scale) and c_1 = 0 with a fixed offset mu0 (the location),
Albert & Chib's constraint. Freeing c_1 and centring f instead is not offered: BART cannot
constrain the mean of f, so the location would be held only by the leaf prior and would mix
poorly. mu0 = Phi^-1(share of rows above the first class), so that at f = 0 the model reproduces
the share of the first class (with two classes this is probit BART's offset).

Import rule: a ``models`` module (posterior, priors, samplers, kernels).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

from .._kernels.backfit import SIGMA_PROBIT
from .._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from ..errors import ArgumentError, BartpySuiteWarning, DataError
from ..priors import kernel_prior
from ..samplers.problems import OrdinalBartProblem
from ._base import plain

#: Smallest gap kept between two initial cutpoints.
MIN_INITIAL_GAP = 1e-3


def cutpoint_labels(class_labels) -> list[str]:
    """Coordinate labels of the cutpoints: ``"a|b"`` for the cut between consecutive levels."""
    labels = [str(c) for c in class_labels]
    return [f"{lo}|{hi}" for lo, hi in zip(labels, labels[1:])]


def check_ordinal_codes(ycodes: np.ndarray, class_labels) -> int:
    """The number of classes K of an ordinal response, after checking its codes.

    Raises
    ------
    DataError
        For fewer than two levels, a code outside 0..K-1, or a level no row has (its probability
        and the cutpoints around it would be set by the prior alone).
    """
    k = len(class_labels)
    if k < 2:
        raise DataError(f"the ordinal response has {k} level{'s' if k != 1 else ''} "
                        f"({', '.join(map(repr, class_labels))}); ordinal BART needs at least two")
    if ycodes.size and (ycodes.min() < 0 or ycodes.max() >= k):
        bad = int(np.flatnonzero((ycodes < 0) | (ycodes >= k))[0])
        raise DataError(f"row {bad} of the ordinal response has code {int(ycodes[bad])}, outside 0..{k - 1} "
                        f"(one code per level of class_labels)")
    counts = np.bincount(ycodes, minlength=k)
    empty = [class_labels[j] for j in range(k) if counts[j] == 0]
    if empty:
        raise DataError(
            f"level{'s' if len(empty) > 1 else ''} {', '.join(map(repr, empty))} of the ordinal response "
            f"{'are' if len(empty) > 1 else 'is'} never observed; the model cannot estimate the probability of a "
            "level without rows (its cutpoints would be set by the prior alone). Drop unused levels first "
            "(pandas: Series.cat.remove_unused_categories(); a formula drops them itself, with a warning)")
    return k


def initial_cutpoints(ycodes: np.ndarray, k: int, mu0: float) -> np.ndarray:
    """c_j = mu0 + Phi^-1(share of rows below class j) for j = 1..K-1 (c_1 = 0 exactly), the shares
    clipped to [1/(n+1), n/(n+1)] and each cut kept ``MIN_INITIAL_GAP`` above the previous one: at
    f = 0 they reproduce the observed class shares."""
    n = ycodes.size
    below = np.cumsum(np.bincount(ycodes, minlength=k))[:-1] / n
    cut = mu0 + special.ndtri(np.clip(below, 1.0 / (n + 1), n / (n + 1.0)))
    cut[0] = 0.0
    for j in range(1, k - 1):
        cut[j] = max(cut[j], cut[j - 1] + MIN_INITIAL_GAP)
    return cut


def ordered_response_labels(formula: str, data) -> tuple[bool, list]:
    """Whether the formula's response is a column of ``data`` holding an ordered pandas Categorical,
    and its categories that no row uses (the formula drops them)."""
    lhs = formula.split("~", 1)[0].strip() if isinstance(formula, str) else ""
    if lhs.startswith("`") and lhs.endswith("`"):
        lhs = lhs[1:-1]
    columns = getattr(data, "columns", ())
    if not lhs or lhs not in columns:
        return False, []
    dtype = data[lhs].dtype
    if not getattr(dtype, "ordered", False):
        return False, []
    present = set(data[lhs].dropna().unique())
    return True, [c for c in dtype.categories if c not in present]


def warn_unused_levels(name: str, unused: list, stacklevel: int) -> None:
    """Say which levels of an ordered response no row has: the formula leaves them out."""
    if unused:
        warnings.warn(
            f"the ordinal response {name!r} has level{'s' if len(unused) > 1 else ''} "
            f"{', '.join(map(repr, unused))} that no row has; {'they are' if len(unused) > 1 else 'it is'} left out "
            "of the model (a level without rows has no estimable probability)",
            BartpySuiteWarning, stacklevel=stacklevel)


def fit_ordinal(model, y, class_labels, is_cat, names, binned, design, na_action):
    """Sample ordinal BART for ``model`` (a ``BART`` with ``link="ordinal"``); see the module
    docstring. Returns the ``Fit``."""
    ycodes = np.asarray(y)
    if ycodes.dtype.kind == "f":
        if not np.all(np.isfinite(ycodes)) or np.any(ycodes != np.round(ycodes)):
            raise DataError("the ordinal response codes must be whole numbers 0..K-1 (one per level of class_labels)")
    ycodes = ycodes.astype(np.int64)
    k = check_ordinal_codes(ycodes, class_labels)
    # mu0: at f = 0, P(y = first class) = Phi(0 - mu0) = its share (probit BART's clip)
    mu0 = float(special.ndtri(np.clip((ycodes >= 1).mean(), 1e-6, 1 - 1e-6)))
    cut = initial_cutpoints(ycodes, k, mu0)
    tau = 3.0 / (model.k * np.sqrt(model.trees))
    config = model._base_config("categorical", names, na_action)
    config.update(trees=model.trees, k=model.k, class_labels=[plain(c) for c in class_labels], leaf_model="ordinal",
                  link="ordinal", nu=None, lam=None, center=mu0, scale=1.0, tau=tau, cutpoint_sd=model.cutpoint_sd,
                  cutpoint_labels=cutpoint_labels(class_labels))
    prior = kernel_prior(model._fit_tree_prior(na_action), None, likelihood=model.likelihood, tau2=tau * tau,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE, nu=model.nu, lam=1.0)
    problem = OrdinalBartProblem(binned.codes, is_cat, binned.nbins, ycodes.astype(np.float64), prior, model.trees,
                                 SIGMA_PROBIT, mu0, predictor_names=tuple(names), n_classes=k,
                                 cutpoints=tuple(float(c) for c in cut), cutpoint_sd=model.cutpoint_sd)

    def derived(posterior):
        posterior["mean_leaves"] = posterior["n_leaves"].mean(axis=2)
        posterior["mean_depth"] = posterior.pop("depth").mean(axis=2)

    return model._sample(problem, binned=binned, y=ycodes, config=config, design=design, derived=derived)


def check_link_for_response(link: str, class_labels) -> None:
    """``link="ordinal"`` needs a categorical response."""
    if link == "ordinal" and class_labels is None:
        raise ArgumentError(
            "link='ordinal' needs a categorical response with ordered levels: pass an ordered pandas Categorical "
            "(pd.Categorical(values, categories=[...], ordered=True)) in a formula, or class_labels= to fit(); "
            "a numeric response is fitted as a regression")
