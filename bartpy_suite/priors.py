"""Frozen prior specifications and the data-based defaults (numpy/scipy only).

The tree prior is thesis eq. 3.1 with the availability conventions of ``_kernels/tree.py``.
Leaf priors are the conjugate ones of thesis section 3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._kernels import likelihood as _lik
from ._kernels import records as _records


@dataclass(frozen=True)
class TreePrior:
    """p_SPLIT = alpha (1 + depth)^-beta on nodes with an available rule; rules need
    ``min_leaf_size`` rows on each side.

    With ``split_missing`` (``na_action="split"``) every rule also says where a missing value of
    its predictor goes (MIA; Kapelner & Bleich 2015). p_RULE then counts that bit: a numeric
    rule is a pair (cut, direction), uniform over the pairs that leave ``min_leaf_size`` rows on
    each side, so at a node without missing rows each rule has half the mass it has without
    the bit; for a factor, "missing" is one more level of the partition (its bit uniform when
    no row at the node is missing). See ``_kernels/tree.py``.
    """

    alpha: float = 0.95
    beta: float = 0.5
    min_leaf_size: int = 5
    split_missing: bool = False


@dataclass(frozen=True)
class NormalLeafPrior:
    """mu_i ~ N(mu_bar, sigma^2 / a), sigma^2 ~ IG(nu/2, nu*lam/2); common or per-leaf sigma."""

    a: float
    mu_bar: float
    nu: float
    lam: float
    per_leaf_sigma: bool = False


@dataclass(frozen=True)
class DirichletLeafPrior:
    """Leaf class probabilities ~ Dirichlet(class_alpha, ..., class_alpha)."""

    class_alpha: float
    n_classes: int


#: Largest magnitude of a response standardised as given. Outside [1 / SAFE_RESPONSE_MAX,
#: SAFE_RESPONSE_MAX] (2^-400 to 2^400, about 4e-121 to 3e120) the squares in a variance can overflow
#: (n (2 max|y|)^2 > 1.8e308) or underflow into subnormals, so the models first divide y by a power
#: of two (``response_exponent``). Inside it nothing changes: draws at ordinary scales stay
#: bit-identical to fits made before this rule.
SAFE_RESPONSE_MAX = 2.0**400


def response_exponent(y: np.ndarray) -> int:
    """The power of two e by which a regression response is divided before it is standardised.

    Dividing by 2^e is exact (it changes only the exponents), and so are the mean, sd, range and
    least-squares residual sd computed from the divided values, multiplied back by 2^e, whenever
    the direct computation neither overflows nor underflows: the result is the same, only safe.

    Parameters
    ----------
    y : ndarray
        Finite response values.

    Returns
    -------
    int
        0 when max |y| lies in [2^-400, 2^400] (or y is all zeros), else the exponent of max |y|
        (``math.frexp``), which brings max |y| / 2^e into [0.5, 1).
    """
    m = float(np.max(np.abs(y))) if y.size else 0.0
    if m == 0.0 or 1.0 / SAFE_RESPONSE_MAX <= m <= SAFE_RESPONSE_MAX:
        return 0
    return math.frexp(m)[1]


def calibrate_lambda(sigma_hat: float, nu: float, q: float = 0.9) -> float:
    """lam such that the IG(nu/2, nu lam/2) prior puts P(sigma < sigma_hat) = q.

    sigma^2 ~ nu lam / chi2_nu, so P(sigma^2 < s^2) = P(chi2_nu > nu lam / s^2) = q gives
    ``lam = s^2 chi2_nu^{-1}(1 - q) / nu`` (CGM 2010, section 2.2.4).
    """
    # special.chdtri(nu, q) is the chi2_nu quantile at 1 - q (its upper-tail inverse).
    return sigma_hat * sigma_hat * float(special.chdtri(nu, q)) / nu


def default_lambda(y: np.ndarray, nu: float, q: float = 0.9) -> float:
    """``calibrate_lambda`` at sigma_hat = sd(y) (1 for a constant response)."""
    s = float(np.std(y, ddof=1)) if y.size > 1 else 0.0
    if not np.isfinite(s) or s == 0.0:
        s = 1.0
    return calibrate_lambda(s, nu, q)


def kernel_prior(tree_prior: TreePrior, leaf_prior, *, likelihood: bool, center: float = 0.0, scale: float = 1.0,
                 tau2: float = 1.0, model_code: int | None = None, nu: float | None = None, lam: float | None = None,
                 lg_shape: float = 0.0, lg_rate: float = 0.0) -> _records.Prior:
    """The typed prior record the kernels read (``_kernels/records.Prior``).

    A normal leaf prior is expressed on the standardised response ``(y - center) / scale``:
    ``mu_bar -> (mu_bar - center)/scale`` and ``lam -> lam/scale^2``; the tree posterior is
    unchanged by this affine map.

    Parameters
    ----------
    tree_prior : TreePrior
        alpha, beta, the minimum leaf size and whether rules carry a missing-value direction.
    leaf_prior : NormalLeafPrior, DirichletLeafPrior or None
        The leaf prior of a single tree; None for the sum-of-trees models, whose leaf prior is
        ``tau2`` (and ``nu``/``lam`` for sigma^2, or ``lg_shape``/``lg_rate`` for log-linear BART).
    likelihood : bool
        False samples the prior.
    center, scale : float
        The standardisation of the response (normal leaf prior only).
    tau2 : float
        Variance of a BART leaf.
    model_code : int or None
        Leaf model (``likelihood.MODEL_*``); by default the one ``leaf_prior`` implies.
    nu, lam : float or None
        sigma^2 ~ IG(nu / 2, nu lam / 2) of the sum-of-trees models (on the scale the kernels
        see); a ``NormalLeafPrior`` gives its own.
    lg_shape, lg_rate : float
        Gamma prior of a log-linear BART leaf factor.

    Returns
    -------
    Prior
        The immutable record; the chain keeps sigma^2 in its state (``records.Target``).
    """
    fields = dict(alpha=tree_prior.alpha, beta=tree_prior.beta, min_leaf=tree_prior.min_leaf_size,
                  na_split=tree_prior.split_missing, likelihood=likelihood, model=0, tau2=tau2,
                  lg_shape=lg_shape, lg_rate=lg_rate)
    if isinstance(leaf_prior, NormalLeafPrior):
        fields.update(a=leaf_prior.a, mu_bar=(leaf_prior.mu_bar - center) / scale, nu=leaf_prior.nu,
                      lam=leaf_prior.lam / (scale * scale),
                      model=_lik.MODEL_MEAN_VARIANCE_SHIFT if leaf_prior.per_leaf_sigma else _lik.MODEL_MEAN_SHIFT)
    elif isinstance(leaf_prior, DirichletLeafPrior):
        fields.update(class_alpha=leaf_prior.class_alpha, n_classes=leaf_prior.n_classes,
                      model=_lik.MODEL_CLASSIFICATION)
    if nu is not None:
        fields["nu"] = nu
    if lam is not None:
        fields["lam"] = lam
    if model_code is not None:
        fields["model"] = model_code
    return _records.make_prior(**fields)
