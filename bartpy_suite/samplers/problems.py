"""What a model hands a sampler: the binned data, the working response and the prior
(``_kernels/records.Prior``) of one fit. Every chain of the fit is built from the same problem.

Import rule: imports numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class CartProblem:
    """A single-tree (Bayesian CART) fit.

    Attributes
    ----------
    codes : ndarray of int32, shape (p, n)
        Binned predictors.
    is_categorical, nbins : ndarray, shape (p,)
    y : ndarray of float64, shape (n,)
        Standardised response (regression) or zeros.
    ycls : ndarray of int64, shape (n,)
        Class codes (classification) or zeros.
    prior : Prior
        The kernels' prior record (``priors.kernel_prior``).
    predictor_names : tuple of str
        The predictors' names, for a sampler's messages about one of them (empty: by index).
    sparse : tuple of float or None
        DART's ``(a, b, rho)`` (``_kernels/sparse.py``), or None for the uniform rule prior.
    """

    model: ClassVar[str] = "cart"
    codes: np.ndarray
    is_categorical: np.ndarray
    nbins: np.ndarray
    y: np.ndarray
    ycls: np.ndarray
    prior: tuple
    predictor_names: tuple = ()
    sparse: tuple | None = None


@dataclass(frozen=True)
class BartProblem:
    """A sum-of-trees (BART) fit.

    Attributes
    ----------
    codes, is_categorical, nbins
        Binned predictors.
    y : ndarray of float64
        Scaled response (regression) or 0/1 codes (probit).
    prior : Prior
        The kernels' prior record (``tau2`` the leaf variance).
    n_trees : int
    sigma_mode : int
        ``SIGMA_SAMPLED``, ``SIGMA_FIXED`` or ``SIGMA_PROBIT`` (``_kernels.backfit``).
    offset : float
        Fixed part of f outside the trees (the probit offset Phi^-1(mean y)).
    predictor_names : tuple of str
        The predictors' names, for a sampler's messages about one of them (empty: by index).
    sparse : tuple of float or None
        DART's ``(a, b, rho)`` (``_kernels/sparse.py``), or None for the uniform rule prior.
    sigma2 : float
        The starting sigma^2 (the fixed one with ``SIGMA_FIXED``; 1 for probit).
    """

    model: ClassVar[str] = "bart"
    codes: np.ndarray
    is_categorical: np.ndarray
    nbins: np.ndarray
    y: np.ndarray
    prior: tuple
    n_trees: int
    sigma_mode: int
    offset: float = 0.0
    predictor_names: tuple = ()
    sparse: tuple | None = None
    sigma2: float = 1.0


@dataclass(frozen=True)
class OrdinalBartProblem(BartProblem):
    """A cumulative-probit (ordinal) BART fit (``_kernels/ordinal.py``): a ``BartProblem`` with
    ``y`` the class codes 0..K-1 (as floats), ``sigma_mode`` probit and ``offset`` mu0.

    Attributes
    ----------
    n_classes : int
        K >= 2.
    cutpoints : tuple of float
        Initial finite cutpoints c_1 = 0 < c_2 < ... < c_{K-1}.
    cutpoint_sd : float
        Prior sd of the free cutpoints (normal, restricted to the order).
    cutpoint_step : float
        Initial sd of the random walk on the log increments (adapted during tuning).
    cutpoint_steps : int
        MH steps on the cutpoints per sweep.
    gibbs : bool
        Albert & Chib's Gibbs step for the cutpoints instead (a cross-check; mixes slowly).
    """

    model: ClassVar[str] = "bart_ordinal"
    n_classes: int = 3
    cutpoints: tuple = (0.0, 1.0)
    cutpoint_sd: float = 10.0
    cutpoint_step: float = 0.1
    cutpoint_steps: int = 2
    gibbs: bool = False


@dataclass(frozen=True)
class MultinomialBartProblem:
    """A log-linear (multinomial logistic) BART fit: one forest per class.

    Attributes
    ----------
    codes, is_categorical, nbins
        Binned predictors.
    ycls : ndarray of int64
        Class codes 0..K-1.
    prior : Prior
        The kernels' prior record (``lg_shape``/``lg_rate`` the leaf factor's Gamma prior).
    n_classes : int
    trees_per_class : int
    """

    model: ClassVar[str] = "bart_multinomial"
    codes: np.ndarray
    is_categorical: np.ndarray
    nbins: np.ndarray
    ycls: np.ndarray
    prior: tuple
    n_classes: int
    trees_per_class: int


@dataclass(frozen=True)
class SoftTreeProblem:
    """A soft decision tree fit (RJHMC-Tree).

    Attributes
    ----------
    x : ndarray of float64, shape (n, p)
        Predictors min-max scaled with the training minimum and range (spec 1.3).
    y : ndarray of float64, shape (n,)
        Working response (regression) or zeros.
    ycls : ndarray of int64, shape (n,)
        Class codes (classification) or zeros.
    n_classes : int
        0 for regression.
    conf : ndarray
        The soft-tree density settings (``_kernels.soft_tree`` ``C_*`` slots: priors,
        likelihood switch, DF/DFI is set by the sampler).
    alpha_s, beta_s : float
        Topology prior p_s(d) = alpha_s (1 + d)^-beta_s (eqs. 14-15).
    h_init, h_final : float
        Routing bandwidth at the start and end of each intermediate NUTS warm-up (eq. 20).
    """

    model: ClassVar[str] = "soft_tree"
    x: np.ndarray
    y: np.ndarray
    ycls: np.ndarray
    n_classes: int
    conf: np.ndarray
    alpha_s: float
    beta_s: float
    h_init: float
    h_final: float
