"""The front door: ``cart()``, ``bart()`` and ``load()``.

formula -> Design -> model(**keywords).fit(X, y) -> Fit. Imports formula, models, posterior
and errors; nothing in the package imports this module except ``__init__``.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import xarray as xr

from .errors import ArgumentError
from .formula import Design, build_design
from .models.bart import BART
from .models.cart import BayesianCART
from .posterior.fit import CONFIG_ATTR, DESIGN_ATTR, Fit


def _fit_kwargs(design: Design) -> dict:
    levels = [len(lv) if lv is not None else 0 for lv in design.levels]
    kwargs = {
        "is_categorical": list(design.is_categorical),
        "n_levels": levels,
        "predictor_names": list(design.predictors),
        "design": design,
    }
    if design.response_kind == "categorical":
        kwargs["class_labels"] = list(design.class_labels)
    return kwargs


def cart(formula: str, data: pd.DataFrame, *, sampler: str = "cgm", chains: int = 4, draws: int = 1000,
         tune: int = 1000, thin: int = 1, seed=None, alpha: float = 0.95, beta: float = 0.5,
         min_leaf_size: int = 5, max_cuts: int | None = None, model: str = "mean_shift", a: float = 1 / 3,
         mu_bar: float | None = None, nu: float = 3.0, lam: float | None = None, class_alpha: float = 1.0,
         moves: dict | None = None, likelihood: bool = True, progress: bool = True, na_action: str = "drop",
         threads: int | None = None) -> Fit:
    """Fit a single-tree Bayesian CART model from a formula.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + x2"``, ``"y ~ ."``, ``"y ~ . - x3"``; transforms (``log(x)``, ``I(x**2)``)
        and ``C(x)`` for factors. A numeric response gives a regression tree; a bool, string or
        category response a classification tree (labels kept as given).
    data : pandas.DataFrame
        The data; never modified.
    sampler : {"cgm", "grow_prune"}
        ``cgm``: grow/prune/change/swap MH (thesis 3.3.4); ``grow_prune``: its grow/prune subset.
    chains, draws, tune, thin, seed
        MCMC settings: chains run in parallel threads; ``tune`` iterations are discarded; one
        ``Generator`` per chain is spawned from ``seed`` (same seed, same draws).
    alpha, beta : float
        Tree prior ``p_SPLIT = alpha (1 + depth)^-beta``.
    min_leaf_size : int
        Rows each child of a split must get.
    max_cuts : int or None
        Cut points per numeric predictor (None: all midpoints of distinct values).
    model : {"mean_shift", "mean_variance_shift"}
        Regression leaves: common sigma, or one sigma per leaf (thesis eq. 3.3).
    a : float
        ``mu_i ~ N(mu_bar, sigma^2 / a)``.
    mu_bar : float or None
        Default: mean of the response (data-based, as in CGM 1998).
    nu, lam : float
        ``sigma^2 ~ IG(nu/2, nu lam/2)``. Default ``lam``: the value giving
        ``P(sigma < sd(y)) = 0.9`` under the prior (data-based).
    class_alpha : float
        Dirichlet parameter of the leaf class probabilities.
    moves : dict or None
        Move probabilities, e.g. ``{"grow": .25, "prune": .25, "change": .4, "swap": .1}``.
    likelihood : bool
        False samples the prior (checks a sampler against the exact prior).
    progress : bool
        Progress bar in an interactive terminal; Ctrl-C returns the draws made so far.
    na_action : {"drop", "raise"}
        Rows with missing values are dropped with a warning (R's na.omit) or raise.
    threads : int or None
        Worker threads (default one per chain); results do not depend on it.

    Returns
    -------
    Fit
    """
    model_obj = BayesianCART(
        sampler=sampler, chains=chains, draws=draws, tune=tune, thin=thin, seed=seed, alpha=alpha, beta=beta,
        min_leaf_size=min_leaf_size, max_cuts=max_cuts, model=model, a=a, mu_bar=mu_bar, nu=nu, lam=lam,
        class_alpha=class_alpha, moves=moves, likelihood=likelihood, progress=progress, threads=threads,
    )
    design, x, y = build_design(formula, data, na_action=na_action)
    return model_obj.fit(x, y, **_fit_kwargs(design))


def load(path) -> Fit:
    """Read a fit written by ``Fit.to_netcdf``.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Fit
        Predictions are identical to those of the fit that was saved.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    with xr.open_datatree(path, engine="netcdf4") as tree:
        idata = tree.load()
    const = idata["constant_data"].attrs if "constant_data" in idata.children else {}
    if CONFIG_ATTR not in const:
        raise ArgumentError(f"{path!r} is not a bartpy_suite fit (no model configuration found)")
    design = Design.from_json(const[DESIGN_ATTR]) if DESIGN_ATTR in const else None
    json.loads(const[CONFIG_ATTR])
    return Fit(idata, design=design)


def bart(formula: str, data: pd.DataFrame, *, trees: int = 200, sampler: str = "cgm", chains: int = 4,
         draws: int = 1000, tune: int = 1000, thin: int = 1, seed=None, alpha: float = 0.95, beta: float = 2.0,
         k: float = 2.0, nu: float = 3.0, q: float = 0.9, sigma_hat: float | None = None, max_cuts: int = 100,
         min_leaf_size: int = 5, moves: dict | None = None, sigma: float | None = None, likelihood: bool = True,
         progress: bool = True, na_action: str = "drop", threads: int | None = None) -> Fit:
    """Fit BART (sum of trees) from a formula: regression, or probit for a binary response.

    Priors follow Chipman, George & McCulloch (2010), the convention of BART, dbarts and
    BayesTree: the response is scaled to [-0.5, 0.5], leaf values ~ N(0, (0.5/(k sqrt(trees)))^2)
    (probit: sd 3/(k sqrt(trees)) on the latent scale, sigma fixed at 1), sigma^2 ~ nu lam/chi2_nu
    with ``P(sigma < sigma_hat) = q``; predictions come back on the original scale.

    Parameters
    ----------
    formula, data, na_action
        As in :func:`cart`. A binary (two-class) non-numeric or bool response gives probit BART.
    trees : int
        Number of trees.
    sampler : {"cgm", "grow_prune"}
        Tree moves inside Bayesian backfitting (PG-BART paper, Algorithm 1).
    chains, draws, tune, thin, seed, progress, threads
        MCMC settings, as in :func:`cart`.
    alpha, beta : float
        Tree prior ``p_SPLIT = alpha (1 + depth)^-beta``.
    k, nu, q, sigma_hat : float
        Leaf and noise priors; ``sigma_hat`` defaults to the residual sd of an OLS fit of y on
        the design (statsmodels), or sd(y) when predictors outnumber rows.
    max_cuts : int
        Cut points per numeric predictor (quantile midpoints).
    min_leaf_size : int
        Rows each child of a split must get.
    moves : dict or None
        Move probabilities.
    sigma : float or None
        Fix sigma instead of sampling it (tests, known-noise problems).
    likelihood : bool
        False samples the prior.

    Returns
    -------
    Fit
    """
    model_obj = BART(
        trees=trees, sampler=sampler, chains=chains, draws=draws, tune=tune, thin=thin, seed=seed, alpha=alpha,
        beta=beta, k=k, nu=nu, q=q, sigma_hat=sigma_hat, max_cuts=max_cuts, min_leaf_size=min_leaf_size,
        moves=moves, sigma=sigma, likelihood=likelihood, progress=progress, threads=threads,
    )
    design, x, y = build_design(formula, data, na_action=na_action)
    return model_obj.fit(x, y, **_fit_kwargs(design))
