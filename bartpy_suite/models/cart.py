"""``BayesianCART``: single-tree Bayesian CART on numpy arrays (thesis chapter 3)."""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as check
from .._validation import check_na_action
from ..errors import ArgumentError, DataError
from ..priors import DirichletLeafPrior, NormalLeafPrior, default_lambda, kernel_prior, response_exponent
from ..samplers import CartProblem
from ._base import (
    TreeModel,
    check_sparse,
    original_scale,
    plain,
    sparse_settings,
    with_sparse_parameters,
)
from .registry import register
from .settings import with_run_keywords

CART_MODELS = ("mean_shift", "mean_variance_shift")


@register
@with_run_keywords
@with_sparse_parameters
class BayesianCART(TreeModel):
    """Bayesian CART (Chipman, George & McCulloch 1998) sampled by MCMC over trees.

    Parameters
    ----------
    alpha, beta : float
        Tree prior p_SPLIT = alpha (1 + depth)^-beta (thesis eq. 3.1).
    min_leaf_size : int
        A split rule is available only if both children get at least this many rows.
    max_cuts : int or None
        Largest number of cut points per numeric predictor (None: every midpoint).
    model : {"mean_shift", "mean_variance_shift"}
        Regression leaf model: a common sigma or one sigma per leaf (thesis eq. 3.3).
    a : float
        mu_i ~ N(mu_bar, sigma^2 / a).
    mu_bar : float or None
        Prior mean of the leaf means; default the mean of y.
    nu, lam : float
        sigma^2 ~ IG(nu/2, nu*lam/2); default ``lam`` puts P(sigma < sd(y)) = 0.9.
    class_alpha : float
        Symmetric Dirichlet parameter of leaf class probabilities (classification).
    **sparse_keywords
        The DART keywords (``models._base.SPARSE_PARAMETERS_DOC``), put here at import.
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    model_type = "cart"
    run_defaults = {"sampler": "tempered"}
    run_notes = {"sampler": (
        "``tempered`` is the default: on seven real data sets (``benchmarks/results/first_hour.md``) its best "
        "tree was within 0.5 nats of the best log posterior any run found in 9 of 14 fits (``cgm`` 2, ``pg`` 4, "
        "``smc`` 5; ``cgm``'s median gap 11.7 nats, largest 156), its chains disagreed least about f(x) (median "
        "largest r_hat 1.24 against 1.84), and its held-out error beat ``cgm``'s on 4 of 7 data sets, for about "
        "15x ``cgm``'s CPU time (0.4-4.6 s per default fit there).")}

    def __init__(self, *, alpha=0.95, beta=0.5, min_leaf_size=5, max_cuts=None, model="mean_shift", a=1 / 3,
                 mu_bar=None, nu=3.0, lam=None, class_alpha=1.0, sparse=False, sparse_a=0.5, sparse_b=1.0,
                 sparse_rho=None, **run):
        self._init_run(run)
        self._init_tree_prior(alpha, beta, min_leaf_size, max_cuts)
        self.model = check.check_choice("model", model, CART_MODELS)
        self.a = check.check_positive("a", a)
        self.mu_bar = None if mu_bar is None else float(mu_bar)
        if self.mu_bar is not None and not np.isfinite(self.mu_bar):
            raise ArgumentError(f"mu_bar must be a finite number; got {mu_bar!r}")
        self.nu = check.check_positive("nu", nu)
        self.lam = None if lam is None else check.check_positive("lam", lam)
        self.class_alpha = check.check_positive("class_alpha", class_alpha)
        # DART: (a, b, rho or None) when on (rho defaults to p, known at fit time), else None
        self._sparse = check_sparse(sparse, sparse_a, sparse_b, sparse_rho)
        self.sparse, self.sparse_a, self.sparse_b, self.sparse_rho = (self._sparse is not None, sparse_a, sparse_b,
                                                                      sparse_rho)

    def fit(self, X, y, *, is_categorical=None, n_levels=None, class_labels=None, predictor_names=None, design=None,
            na_action="raise"):
        """Sample the posterior of trees given predictors ``X`` (n, p) and response ``y``.

        Parameters
        ----------
        X : array_like, shape (n, p)
            Predictors; categorical columns hold level codes 0..L-1.
        y : array_like, shape (n,)
            Numeric response, or class codes 0..K-1 when ``class_labels`` is given.
        is_categorical : array_like of bool, optional
        n_levels : array_like of int, optional
            Number of levels of each categorical predictor.
        class_labels : sequence, optional
            Class labels in code order; makes this a classification tree.
        predictor_names : sequence of str, optional
        design : object with ``to_json()``, optional
            The formula design, stored so that ``Fit.predict`` accepts data frames.
        na_action : {"raise", "drop", "split"} or NaAction
            ``"raise"``: NaN in ``X`` is an error. ``"drop"``: rows with NaN in ``X`` (or in a
            numeric ``y``) are left out, with a warning. ``"split"``: NaN predictor values stay
            and every rule carries a missing-goes-left/right bit sampled with it (MIA; Kapelner &
            Bleich 2015), also used for NaN in new data at predict time (``TreePrior``). Recorded
            in ``fit.config["na_action"]``.

        Returns
        -------
        bartpy_suite.posterior.Fit
        """
        na_action = check_na_action(na_action)
        x, y, is_cat, names, binned = self._prepare(X, y, is_categorical, n_levels, predictor_names, na_action)
        sparse = sparse_settings(self._sparse, names, self.spec.name)
        n = x.shape[0]
        classification = class_labels is not None
        config = self._base_config("categorical" if classification else "numeric", names, na_action)
        if classification:
            ycls = np.asarray(y, dtype=np.int64)
            k = len(class_labels)
            if k < 2 or np.unique(ycls).size < 2:
                raise DataError("the response has a single class; classification needs at least two")
            leaf_prior = DirichletLeafPrior(self.class_alpha, k)
            yreg = np.zeros(n)
            center, scale = 0.0, 1.0
            hyper_center, hyper_scale = center, scale
            config.update(class_alpha=self.class_alpha, class_labels=[plain(c) for c in class_labels],
                          leaf_model="dirichlet")
        else:
            yreg = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(yreg)):
                raise DataError("the response holds non-finite values; remove or impute them")
            ycls = np.zeros(n, dtype=np.int64)
            k = 1
            # Standardise on y / 2^e (e = 0 at ordinary scales, so nothing changes there): at
            # |y| ~ 1e200 the variance overflows, at 1e-200 it underflows (response_exponent).
            e = response_exponent(yreg)
            yw = np.ldexp(yreg, -e) if e else yreg
            center = float(np.mean(yw))
            sd = float(np.std(yw))
            scale = sd if sd > 0 else 1.0
            mu_bar = center if self.mu_bar is None else math.ldexp(self.mu_bar, -e)
            lam = default_lambda(yw, self.nu) if self.lam is None else math.ldexp(self.lam, -2 * e)
            leaf_prior = NormalLeafPrior(self.a, mu_bar, self.nu, lam,
                                         per_leaf_sigma=self.model == "mean_variance_shift")
            yreg = (yw - center) / scale
            # The recorded prior is on the original scale (lam ~ y^2 overflows to inf beyond ~1e154).
            config.update(a=self.a, mu_bar=original_scale(mu_bar, e), nu=self.nu, lam=original_scale(lam, 2 * e),
                          leaf_model=self.model)
            hyper_center, hyper_scale = center, scale  # the kernels work on (y / 2^e - center) / scale
            center, scale = original_scale(center, e, "the response's mean"), original_scale(scale, e, "its sd")
        config.update(center=center, scale=scale)
        if sparse is not None:
            config.update(sparse=dict(zip(("a", "b", "rho"), sparse)))
        prior = kernel_prior(self._fit_tree_prior(na_action), leaf_prior, likelihood=self.likelihood,
                             center=hyper_center, scale=hyper_scale)
        problem = CartProblem(binned.codes, is_cat, binned.nbins, yreg, ycls, prior, predictor_names=tuple(names),
                              sparse=sparse)
        return self._sample(problem, binned=binned, y=y, config=config, design=design)
