"""``BART``: sum-of-trees regression and probit classification (Chipman, George & McCulloch 2010)
sampled by Bayesian backfitting (PG-BART paper, Algorithm 1)."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pandas as pd
from scipy import optimize, special

from .. import _validation as check
from .._kernels.backfit import SIGMA_FIXED, SIGMA_PROBIT, SIGMA_SAMPLED
from .._kernels.likelihood import MODEL_BASIS_NORMAL, MODEL_LOG_GAMMA, MODEL_LOG_VARIANCE, MODEL_NORMAL_KNOWN_VARIANCE
from .._validation import NaAction, check_na_action
from ..errors import ArgumentError, DataError
from ..priors import calibrate_lambda, kernel_prior, response_exponent
from ..samplers import BartProblem, samplers_for
from ..samplers.gfr import SUPPORTED, WARM_STARTABLE, check_init_options, check_problem, warm_start
from ..samplers.problems import MultinomialBartProblem
from ._base import (
    TreeModel,
    check_sparse,
    design_fit_keywords,
    original_scale,
    plain,
    sparse_settings,
    spawn_generators,
    with_sparse_parameters,
)
from .ordinal import check_link_for_response, fit_ordinal, ordered_response_labels, warn_unused_levels
from .registry import register
from .settings import with_run_keywords

LINKS = ("auto", "probit", "logit", "ordinal")
#: The default run of regression BART (``init``, ``tune`` and ``draws`` "auto", issue 32): from this many
#: rows on, the chains start from GFR forests (``init="gfr"``) and run ``AUTO_WARM_TUNE`` tuning and
#: ``AUTO_WARM_DRAWS`` kept sweeps; below it, or for a fit a warm start does not support, they start from
#: stumps with ``AUTO_TUNE`` + ``AUTO_DRAWS``. The numbers come from ``benchmarks/calibration.py``
#: (``benchmarks/results/calibration.md``: coverage of f, RMSE and CPU time against n).
AUTO_WARM_MIN_ROWS = 10_000
AUTO_WARM_TUNE = 100
AUTO_WARM_DRAWS = 500
AUTO_TUNE = 1000
AUTO_DRAWS = 1000

#: Prior sd of log v(x) of a variance forest (stochtree's ``leaf_prior_calibration_param``, spec multi_forest.md 5.2).
VARIANCE_A0 = 1.5


def _column_keyword(keyword: str, value):
    """A column-name keyword (``weights``, ``offset``): None or a non-empty string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"{keyword} must name a data column (a string), got {value!r}; array fits pass the values "
                            f"to fit(..., sample_{'weight' if keyword == 'weights' else 'offset'}=)")
    return value


def check_row_values(name: str, values, n_rows: int, *, weights: bool, labels=None) -> np.ndarray:
    """The rows' weights (``weights=True``: finite, >= 0, not all 0) or offsets (finite) as float64.

    Raises
    ------
    DataError
        Naming the column ``name`` and the first bad row (its label in ``labels``, else its position).
    """
    what = "weights" if weights else "offset"
    try:
        arr = np.array(values, dtype=np.float64)  # a copy: the fit keeps it, the caller may change theirs
    except (TypeError, ValueError):
        raw = np.asarray(values, dtype=object).reshape(-1)
        bad = [i for i, v in enumerate(raw) if not _is_number(v)]
        row = bad[0] if bad else 0
        where = labels[row] if labels is not None else row
        raise DataError(f"the {what} column {name!r} is not numeric: row {where!r} holds {raw[row]!r}; give numbers"
                        ) from None
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise DataError(f"the {what} column {name!r} has shape {arr.shape}, expected one value per row ({n_rows})")
    bad = ~np.isfinite(arr) | ((arr < 0) if weights else False)
    if np.any(bad):
        row = int(np.flatnonzero(bad)[0])
        where = labels[row] if labels is not None else row
        need = "a finite number >= 0" if weights else "a finite number"
        raise DataError(f"the {what} column {name!r} holds {float(arr[row])!r} at row {where!r}: every row needs "
                        f"{need} ({int(np.sum(bad))} bad row(s))")
    if weights and not (arr > 0).any():
        raise DataError(f"the weights column {name!r} is 0 in every row: at least one row needs a positive weight")
    return arr


def _numeric_column(column, name: str, what: str, labels, rows: np.ndarray) -> np.ndarray:
    """The values of a weights / offset column at ``rows`` as float64 (NaN where missing).

    Raises
    ------
    DataError
        A value that is not a number (a string, a date), naming the column and the row's label.
    """
    values = column.to_numpy()[rows]
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    missing = pd.isna(values)
    for k, v in enumerate(values):
        if not missing[k] and (isinstance(v, (str, bytes)) or not _is_number(v)):
            raise DataError(f"the {what} column {name!r} is not numeric: row {labels[k]!r} holds {v!r}; give numbers")
    return np.array([np.nan if missing[k] else float(v) for k, v in enumerate(values)], dtype=np.float64)


def _known_predictors(keyword: str, given, names: list) -> list:
    """``given`` (predictor names) checked against the fit's ``names``: a non-empty list of known names."""
    given = [given] if isinstance(given, str) else list(given)
    absent = [c for c in given if c not in names]
    if not given or absent:
        raise ArgumentError(f"{keyword}={given!r}: expected a non-empty list of the fit's predictors {names}"
                            + (f"; unknown: {absent}" if absent else ""))
    return list(dict.fromkeys(given))


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _variance_terms(formula: str) -> list:
    """The terms of a ``variance="~ x1 + x2"`` formula, in order, without repeats."""
    rhs = formula.strip()[1:].strip()
    terms = [t.strip() for t in rhs.split("+")]
    if not rhs or any(not t for t in terms):
        raise ArgumentError(f"variance={formula!r} has an empty term; write '~ x1 + x2' or '~ .'")
    return list(dict.fromkeys(terms))


def variance_columns(formula: str, names: list) -> list:
    """The predictors a ``variance="~ x1 + x2"`` formula names (``"~ ."``: all), each one of ``names``.

    Raises
    ------
    ArgumentError
        A term that is not a predictor of the fit (it must be in the mean formula too), or no term.
    """
    if formula.strip()[1:].strip() == ".":
        return list(names)
    terms = _variance_terms(formula)
    absent = [t for t in terms if t not in names]
    if absent:
        raise ArgumentError(f"variance={formula!r} names {absent}, which are not predictors of the fit ({names}); "
                            "give them in the predictors X (fit's mean_predictors= keeps them out of the mean trees)")
    return terms
#: Prior sd of each class's log-intensity F_k(x) at k = 2 (log-linear BART).
LOGLINEAR_SD = 3.5 / np.sqrt(2.0)


def log_gamma_prior(trees: int, k: float) -> tuple[float, float]:
    """Shape and rate (c, d) of the Gamma prior of a leaf factor gamma = exp(mu) in log-linear BART.

    Each of the ``trees`` trees adds mu ~ log-Gamma(c, d) to F_k(x), with E[mu] = psi(c) - log d
    and Var[mu] = psi'(c). We centre mu (d = exp(psi(c))) and give the sum of the trees the sd
    ``a0 = LOGLINEAR_SD * 2 / k``: psi'(c) = a0^2 / trees. At k = 2 the log-odds between two
    classes then have prior sd 3.5, the scale of probit BART's 3 / (k sqrt(trees)) per tree;
    larger ``k`` shrinks as in BART. This follows the moment-matching calibration of Murray
    (2021) for the log-gamma leaf prior; the constant 3.5 / sqrt(2) is our reading of his default.
    """
    a0 = LOGLINEAR_SD * 2.0 / k
    target = a0 * a0 / trees
    # psi'(c) decreases from +inf to 0: bracket and solve
    c = optimize.brentq(lambda c: float(special.polygamma(1, c)) - target, 1e-8, 1e12)
    return c, float(np.exp(special.digamma(c)))


def residual_sd(x: np.ndarray, y: np.ndarray, is_categorical: np.ndarray, weights: np.ndarray | None = None) -> float:
    """sigma_hat of CGM (2010): residual sd of an OLS fit of y on the design, with factors as
    indicator columns; ``sd(y)`` when there are at least as many columns as rows.

    With precision ``weights`` (Var(e_i) = sigma^2 / w_i) it is bcf's sigma_hat (spec multi_forest.md
    3.3): the residual sd of the weighted least-squares fit, sqrt(sum w_i e_i^2 / (n+ - rank)) over the
    n+ rows with w_i > 0 (the weighted sd of y when there are too few of them).

    The least-squares fit is numpy's (the same estimate as statsmodels' ``OLS(y, X).fit()``:
    residual sum of squares over n - rank(X) degrees of freedom; the tests compare the two),
    which spares every BART fit the ~40 MB of importing statsmodels.
    """
    n, p = x.shape
    # The design is written column by column into one array (a list of columns stacked at the
    # end would hold it twice: 3.4 GB at 10^7 rows and 20 predictors).
    width = [1]
    levels = {}  # a factor's levels (missing: one more level, -1); all but the first get an indicator
    for v in range(p):
        if is_categorical[v]:
            levels[v] = np.unique(np.where(np.isnan(x[:, v]), -1, x[:, v]).astype(int))
            width.append(levels[v].size - 1)
        else:
            width.append(1 + int(np.isnan(x[:, v]).any()))
    if weights is not None:
        n_pos = int((weights > 0).sum())
        if sum(width) >= n_pos:
            mean = float(np.average(y, weights=weights))
            return float(np.sqrt(np.sum(weights * (y - mean) ** 2) / max(n_pos - 1, 1)))
    elif sum(width) >= len(y):
        return float(np.std(y, ddof=1))
    design = np.empty((n, sum(width)))
    design[:, 0] = 1.0
    col = 1
    for v in range(p):
        missing = np.isnan(x[:, v])
        if is_categorical[v]:
            codes = np.where(missing, -1, x[:, v]).astype(int)
            for level in levels[v][1:]:
                design[:, col] = codes == level
                col += 1
        else:
            # na_action="split": a missing value contributes the column mean plus an indicator.
            design[:, col] = np.where(missing, np.nanmean(x[:, v]) if not missing.all() else 0.0, x[:, v])
            col += 1
            if missing.any():
                design[:, col] = missing
                col += 1
    if weights is not None:
        root = np.sqrt(weights)
        design *= root[:, None]
        coef, _, rank, _ = np.linalg.lstsq(design, y * root, rcond=None)
        resid = y * root - design @ coef
        return float(np.sqrt(resid @ resid / (int((weights > 0).sum()) - rank)))
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    return float(np.sqrt(resid @ resid / (len(y) - rank)))


@register
@with_run_keywords
@with_sparse_parameters
class BART(TreeModel):
    """Bayesian additive regression trees.

    Parameters
    ----------
    trees : int
        Number of trees.
    alpha, beta : float
        Tree prior ``p_SPLIT = alpha (1 + depth)^-beta`` (BART defaults 0.95, 2).
    k : float
        Leaf prior sd ``0.5 / (k sqrt(trees))`` on the response scaled to [-0.5, 0.5]
        (``3 / (k sqrt(trees))`` for probit).
    nu, q : float
        sigma^2 ~ nu lam / chi2_nu with lam such that ``P(sigma < sigma_hat) = q``.
    sigma_hat : float or None
        Default: residual sd of an OLS fit of y on the design (sd(y) when p >= n), computed on the
        original scale.
    max_cuts : int
        Cut points per numeric predictor (quantile midpoints).
    min_leaf_size : int
        Rows each child of a split must get.
    sigma : float or None
        Fix sigma at this value (original scale) instead of sampling it (used by tests).
    link : {"auto", "probit", "logit"}
        Classification model. "probit": probit BART (Albert & Chib latents; binary responses
        only). "logit": log-linear multinomial BART (Murray 2021), one sum of trees per class on
        the log scale, P(y = k | x) = exp(F_k(x)) / sum_l exp(F_l(x)), leaf factors
        exp(mu) ~ Gamma(c, d) calibrated by ``k`` (``log_gamma_prior``), ``trees`` trees per
        class. "ordinal": cumulative-probit BART for ordered classes (``models/ordinal.py``):
        one sum of trees f, P(y <= k | x) = Phi(c_k - mu0 - f(x)) with K - 1 cutpoints
        c_1 = 0 < c_2 < ... (posterior variable ``cutpoints``), classes in the order of the
        response's levels. "auto" (default): probit for two classes; for more, ordinal when the
        formula's response is an ordered pandas Categorical (``pd.Categorical(..., ordered=True)``),
        logit otherwise (an unordered factor stays multinomial).
    init : {"auto", None, "gfr"}
        How the chains start. "auto" (default): ``"gfr"`` for a fit it supports (below) with at
        least ``AUTO_WARM_MIN_ROWS`` (10,000) rows, else None. None: every tree a stump, sigma at
        ``sigma_hat``.
        ``"gfr"``: warm start (Krantsevich, He & Hahn 2023; stochtree's default): k grow-from-root
        sweeps (the ``gfr`` sampler, run with a generator of its own spawned from ``seed``) under
        the same prior, and chain c starts from the forest and sigma of sweep k - 1 - c; those
        sweeps are not kept as draws. The chains' sampler is unchanged, so they target the same
        posterior; they need far fewer tuning sweeps (``tune``). Regression BART with
        ``sampler`` "grow_prune", "cgm" or "gfr", without ``executor``, ``sparse`` and
        ``na_action="split"`` ("auto" also needs ``likelihood=True``, ``sigma=None`` and no random
        effects, and never warm-starts the ``gfr`` sampler itself).
    init_options : dict or None
        Settings of the warm start (``init="gfr"``, or ``"auto"`` when it warm-starts): ``sweeps``
        (k, default ``max(5, chains)``, at least
        ``chains``) and the ``gfr`` sampler's options (``weights``, ``max_depth``,
        ``sigma_update``; see ``docs/guide/samplers.md``).
    cutpoint_sd : float
        Ordinal BART: the free cutpoints c_2 < ... < c_{K-1} have the prior i.i.d.
        N(0, cutpoint_sd^2) restricted to 0 < c_2 < ... < c_{K-1} (default 10: nearly flat on
        the probit scale, where f has prior sd about 1.5).
    weights : str or None
        A numeric response only. The data column of observation (precision) weights w_i >= 0, finite,
        not all 0: Var(e_i) = sigma^2 / w_i, as dbarts and bcf define them (given sigma, a row of integer
        weight k informs f as k copies of it would; sigma's own posterior counts the row once; weight 0
        leaves the row out of the likelihood). stochtree's ``observation_weights``
        act differently (as variance multipliers, spec multi_forest.md 5.5). sigma^2's prior is calibrated
        on sigma_hat from the weighted least-squares fit (bcf's choice). The chains run the weighted
        leaf model (samplers ``grow_prune`` and ``cgm``; no ``sparse``, ``init`` or random effects).
        Array fits: pass the weights as ``fit(..., sample_weight=)``. ``predict(kind="predictive")``
        of new rows uses their ``weights`` column when ``newdata`` has one, else weight 1.
    offset : str or None
        A numeric response only. The data column of a known offset o_i: y_i = o_i + f(x_i) + e_i (the
        trees fit y - o). Predictions of new rows add their offset, so ``newdata`` must hold the column
        (a ``DataError`` names it otherwise). Array fits: ``fit(..., sample_offset=)``, and new rows as a
        DataFrame with an ``"offset"`` column.
    variance : str or None
        A numeric response only. ``"~ x1 + x2"`` (``"~ ."``: the formula's predictors) adds a
        variance forest (heteroskedastic BART; Murray 2021's log-linear variance trees, as stochtree)
        whose trees split on these terms (a term that is not a predictor of the formula is added to the
        design for the variance trees only; new rows then need it too): Var(e_i) = sigma0^2 v(x_i) / w_i
        with v(x) the product of ``variance_trees`` tree factors, each leaf's s ~ IG(a, b) with
        stochtree's calibration a = M/1.5^2 + 1/2, b = M/1.5^2 (a priori log v(x) has mean 0 and sd
        1.5), sigma0^2 fixed at the variance of the standardised response
        (no sigma draw; posterior ``sigma`` is left out). ``predict(kind="predictive")`` then uses sigma(x)
        per row, ``predict(kind="sigma")`` gives sigma(x) with its interval and
        ``bartpy_suite.posterior.variance.variance_activity(fit)`` the variance trees' split shares.
        Samplers ``grow_prune`` and ``cgm``.
    variance_trees : int
        Number of variance trees (default 50, stochtree's); used with ``variance``.
    **sparse_keywords
        The DART keywords (``models._base.SPARSE_PARAMETERS_DOC``), put here at import.
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    model_type = "bart"
    run_defaults = {"sampler": "grow_prune", "tune": "auto", "draws": "auto"}
    #: problem kinds of this model whose samplers the docstring lists besides ``bart``'s
    sampler_variants = {"bart_multinomial": "multinomial (logit) BART", "bart_ordinal": "ordinal BART",
                        "bart_re": "BART with random effects"}
    run_notes = {"sampler": (
        "The sampler is the single-tree update inside Bayesian backfitting. ``grow_prune`` is the default "
        "because it gave more effective draws of sigma and f(x) per CPU second than ``cgm`` on Friedman #1, the "
        "hypercube, Wu and CGM data (``benchmarks/results/bart_default_mixing.md``); a single tree "
        "(``bps.cart``) defaults to ``tempered``."),
        "tune": "\"auto\": 100 when the chains start from GFR forests (``init``), else 1000.",
        "draws": "\"auto\": 500 when the chains start from GFR forests and the data have 10,000 rows or more, else "
                 "1000. What this default costs and gives against 1000 + 1000 sweeps from stumps (coverage of f's "
                 "95% intervals, RMSE, CPU time at 10^3 to 10^6 rows): ``benchmarks/results/calibration.md`` and "
                 "the samplers guide.",
    }

    def __init__(self, *, trees=200, alpha=0.95, beta=2.0, k=2.0, nu=3.0, q=0.9, sigma_hat=None, max_cuts=100,
                 min_leaf_size=5, sigma=None, link="auto", sparse=False, sparse_a=0.5, sparse_b=1.0,
                 sparse_rho=None, cutpoint_sd=10.0, init="auto", init_options=None, weights=None, offset=None,
                 variance=None, variance_trees=50, **run):
        self._init_run(run)
        self._init_tree_prior(alpha, beta, min_leaf_size, max_cuts)
        self.trees = check.check_int_at_least("trees", trees, 1)
        self.k = check.check_positive("k", k)
        self.nu = check.check_positive("nu", nu)
        self.q = check.check_open_unit("q", q)
        self.sigma_hat = None if sigma_hat is None else check.check_positive("sigma_hat", sigma_hat)
        self.sigma = None if sigma is None else check.check_positive("sigma", sigma)
        self.link = check.check_choice("link", link, LINKS)
        self.cutpoint_sd = check.check_positive("cutpoint_sd", cutpoint_sd)
        # DART: (a, b, rho or None) when on (rho defaults to p, known at fit time), else None
        self._sparse = check_sparse(sparse, sparse_a, sparse_b, sparse_rho)
        self.sparse, self.sparse_a, self.sparse_b, self.sparse_rho = (self._sparse is not None, sparse_a, sparse_b,
                                                                      sparse_rho)
        self.init, self.init_options = self._check_init(init, init_options)
        self.weights = _column_keyword("weights", weights)
        self.offset = _column_keyword("offset", offset)
        if variance is not None and (not isinstance(variance, str) or not variance.strip().startswith("~")):
            raise ArgumentError(f"variance must be a one-sided formula of predictors such as '~ x1 + x2' (or '~ .'), "
                                f"got {variance!r}")
        self.variance = variance
        self.variance_trees = check.check_int_at_least("variance_trees", variance_trees, 1)
        if variance is not None and self.sigma is not None:
            raise ArgumentError("sigma= fixes one noise sd, variance= models it per row; give one of them")
        able = samplers_for("bart_hetero")
        if (self.weights is not None or variance is not None) and self.spec.name not in able:
            raise ArgumentError(f"weights= and variance= are fitted by the samplers {', '.join(map(repr, able))}; "
                                f"sampler={self.spec.name!r} is not one of them")
        if (self.weights is not None or variance is not None) and (self._sparse is not None or self.init == "gfr"):
            raise ArgumentError("weights= and variance= are not available with sparse=True (DART) or init='gfr' yet; "
                                "leave those out")

    def _check_init(self, init, init_options):
        """Validated ``init`` and ``init_options`` (``samplers/gfr.py``)."""
        if isinstance(init, str) and init == "auto":
            return init, None if init_options is None else check_init_options(init_options, self.chains)
        if init is None:
            if init_options is not None:
                raise ArgumentError("init_options= sets the warm start of init='gfr'; give init='gfr' or leave "
                                    "init_options out")
            return None, None
        init = check.check_choice("init", init, ("auto", "gfr"))
        if self.spec.name not in WARM_STARTABLE:
            raise ArgumentError(f"init='gfr' starts chains of the samplers {', '.join(map(repr, WARM_STARTABLE))}; "
                                f"sampler={self.spec.name!r} is not one of them (use init=None with it)")
        if self.executor is not None:
            raise ArgumentError("init='gfr' runs the warm-start sweeps where the chains are built, which executor= "
                                "does not allow; give one of them")
        if self._sparse is not None:
            raise ArgumentError("init='gfr' does not support sparse=True (DART): the GFR sweeps do not draw DART's "
                                "split weights; leave sparse=False or init=None")
        return init, check_init_options(init_options, self.chains)

    def _run(self, chains: list, problem=None) -> int:
        """Warm-start the chains of ``problem`` (``init="gfr"``) and run them. The problem is passed
        in, not kept on the model, so that fits of one model in several threads stay apart."""
        if self.init == "gfr" and isinstance(problem, BartProblem):
            rng = spawn_generators(self.seed, self.chains + 1)[self.chains]  # after the chains' own
            warm_start(chains, problem, rng, self.init_options)
        return super()._run(chains, problem)

    def fit(self, X, y, *, is_categorical=None, n_levels=None, class_labels=None, predictor_names=None, design=None,
            na_action="raise", random_effects=None, sample_weight=None, sample_offset=None, mean_predictors=None,
            variance_predictors=None):
        """Sample the BART posterior given predictors ``X`` (n, p) and response ``y``.

        A categorical response (``class_labels`` given, ``y`` codes 0..K-1) gives probit BART for
        two classes and log-linear multinomial BART for more (see ``link``). The keywords are
        those of ``BayesianCART.fit``; ``na_action="split"`` lets NaN predictor values through,
        routed by a missing-goes-left/right bit of every rule (Kapelner & Bleich 2015), and
        ``"drop"`` leaves the rows with NaN out. ``random_effects`` (what
        ``formula.build_random_effects_design`` returns for ``y ~ x1 + (x1 | g)``: the spec and
        each row's group code and basis row) adds Gaussian random effects
        (``_fit_random_effects``). ``sample_weight`` and ``sample_offset`` (arrays of n values) are the
        rows' weights and offsets (the ``weights`` and ``offset`` keywords: what ``from_formula`` reads
        from their columns). With ``variance``, ``mean_predictors`` (names among the predictors; default all)
        are those the mean trees split on and ``variance_predictors`` (default: the terms of ``variance``)
        those the variance trees split on.

        Returns
        -------
        bartpy_suite.posterior.Fit
        """
        na_action = check_na_action(na_action)
        if "auto" in (self.init, self.tune, self.draws):
            warm_ok = (class_labels is None and random_effects is None and na_action is not NaAction.SPLIT
                       and self.likelihood and self.sigma is None and sample_weight is None
                       and self.weights is None and self.variance is None)  # an offset alone: BART's kernels
            return self._resolved(np.shape(y)[0], warm_ok).fit(
                X, y, is_categorical=is_categorical, n_levels=n_levels, class_labels=class_labels,
                predictor_names=predictor_names, design=design, na_action=na_action, random_effects=random_effects,
                sample_weight=sample_weight, sample_offset=sample_offset, mean_predictors=mean_predictors,
                variance_predictors=variance_predictors)
        if self.variance is None and (mean_predictors is not None or variance_predictors is not None):
            raise ArgumentError("mean_predictors= and variance_predictors= split the predictors between the mean and "
                                "the variance trees: give variance= too")
        if random_effects is not None:
            self._check_random_effects(random_effects, class_labels, np.shape(y)[0])
        weights, offset, wname, oname = self._check_hetero(sample_weight, sample_offset, class_labels,
                                                           random_effects, np.shape(y)[0])
        x, y, is_cat, names, binned = self._prepare(X, y, is_categorical, n_levels, predictor_names, na_action)
        if weights is not None and np.shape(y)[0] != weights.shape[0]:
            raise ArgumentError(f"sample_weight / sample_offset have {weights.shape[0]} rows but {np.shape(y)[0]} rows "
                                "are fitted (na_action='drop' dropped rows with missing values): drop them first")
        if random_effects is not None and np.shape(y)[0] != random_effects.group.shape[0]:
            raise ArgumentError(f"random_effects has {random_effects.group.shape[0]} rows but {np.shape(y)[0]} rows "
                                "are fitted (na_action='drop' dropped rows with missing predictors): drop them first")
        check_link_for_response(self.link, class_labels)
        sparse = sparse_settings(self._sparse, names, self.spec.name)
        if self.init == "gfr" and (self.link == "ordinal" or (class_labels is not None and (
                self.link == "logit" or (self.link == "auto" and len(class_labels) > 2)))):
            raise ArgumentError(f"init='gfr' fits {SUPPORTED} only, not ordinal or multinomial BART; use init=None")
        if self.link == "ordinal":
            if sparse is not None:
                raise ArgumentError("sparse=True (DART) is not available for ordinal BART yet; fit it without sparse, "
                                    "or use sparse=True with a numeric or binary response")
            return fit_ordinal(self, y, class_labels, is_cat, names, binned, design, na_action)
        if class_labels is not None and (self.link == "logit" or (self.link == "auto" and len(class_labels) > 2)):
            if sparse is not None:
                raise ArgumentError("sparse=True (DART) is not available for multinomial (logit) BART; use a binary "
                                    "response with link='probit', or leave sparse=False")
            return self._fit_multinomial(y, class_labels, is_cat, names, binned, design, na_action)
        probit = class_labels is not None
        config = self._base_config("categorical" if probit else "numeric", names, na_action)
        config.update(trees=self.trees, k=self.k)
        if sparse is not None:
            config.update(sparse=dict(zip(("a", "b", "rho"), sparse)))
        if probit:
            ycodes = np.asarray(y, dtype=np.int64)
            if len(class_labels) != 2:
                raise ArgumentError(
                    f"probit BART needs a binary response; this one has {len(class_labels)} classes "
                    f"({', '.join(map(str, class_labels))}). Use link='logit' (multinomial BART) or 'auto'."
                )
            if np.unique(ycodes).size < 2:
                raise DataError("the response has a single class; classification needs at least two")
            center = float(special.ndtri(np.clip(ycodes.mean(), 1e-6, 1 - 1e-6)))
            scale = 1.0
            ywork = ycodes.astype(np.float64)
            tau = 3.0 / (self.k * np.sqrt(self.trees))
            sigma2, lam, mode = 1.0, 1.0, SIGMA_PROBIT
            config.update(class_labels=[plain(c) for c in class_labels], leaf_model="probit", nu=None, lam=None)
        else:
            yreg = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(yreg)):
                raise DataError("the response holds non-finite values; remove or impute them")
            if offset is not None:
                yreg = yreg - offset  # y = o + f(x) + e: the trees fit y - o
            # Scale on y / 2^e (e = 0 at ordinary scales, so nothing changes there): at |y| ~ 1e200
            # the residual sum of squares of sigma_hat overflows, at 1e-200 it underflows.
            e = response_exponent(yreg)
            yw = np.ldexp(yreg, -e) if e else yreg
            lo, hi = float(yw.min()), float(yw.max())
            scale = hi - lo if hi > lo else 1.0
            center = 0.5 * (lo + hi)
            ywork = (yw - center) / scale
            tau = 0.5 / (self.k * np.sqrt(self.trees))
            s_hat = math.ldexp(self.sigma_hat, -e) if self.sigma_hat is not None else residual_sd(
                x, yw, is_cat, None if wname is None else weights)
            if not np.isfinite(s_hat) or s_hat <= 0:
                s_hat = scale
            lam = calibrate_lambda(s_hat / scale, self.nu, self.q)
            if self.sigma is not None:
                sigma2, mode = (math.ldexp(self.sigma, -e) / scale) ** 2, SIGMA_FIXED
            else:
                sigma2, mode = (s_hat / scale) ** 2, SIGMA_SAMPLED
            # The recorded settings are on the original scale (lam ~ y^2 overflows to inf beyond ~1e154).
            config.update(leaf_model="normal", nu=self.nu, q=self.q, sigma_hat=original_scale(s_hat, e),
                          lam=original_scale(lam * scale * scale, 2 * e), sigma_fixed=self.sigma)
            center, scale = original_scale(center, e, "the response's mid-range"), original_scale(scale, e,
                                                                                                 "its range")
        config.update(center=center, scale=scale, tau=tau * scale)
        prior = kernel_prior(self._fit_tree_prior(na_action), None, likelihood=self.likelihood, tau2=tau * tau,
                             model_code=MODEL_NORMAL_KNOWN_VARIANCE, nu=self.nu, lam=lam)
        problem = BartProblem(binned.codes, is_cat, binned.nbins, ywork, prior, self.trees, mode,
                              center if probit else 0.0, predictor_names=tuple(names), sparse=sparse, sigma2=sigma2)
        attach = None
        if random_effects is not None:
            problem, attach = self._with_random_effects(problem, random_effects, config)
        if weights is not None:
            problem, attach = self._with_hetero(problem, weights, offset, (wname, oname), names, na_action, config,
                                                (mean_predictors, variance_predictors))
        if self.init == "gfr":
            check_problem(problem)  # a probit response: say what init='gfr' fits
            config.update(init=self.init, init_options=self.init_options)

        def derived(posterior):
            posterior["mean_leaves"] = posterior["n_leaves"].mean(axis=2)
            posterior["mean_depth"] = posterior.pop("depth").mean(axis=2)
            if probit or (weights is not None and self.variance is not None):
                del posterior["sigma"]  # a variance forest's sigma0 is fixed: sigma(x) is the variance trees'

        return self._sample(problem, binned=binned, y=y, config=config, design=design, derived=derived, attach=attach)

    def _resolved(self, n_rows: int, warm_ok: bool) -> BART:
        """A copy of this model with the "auto" run settings decided for a fit of ``n_rows`` rows
        (``AUTO_*`` above); ``warm_ok``: the response and options allow a GFR warm start. The
        model itself is not changed (fits of one model may run in several threads)."""
        warm = self.init == "gfr" or (
            self.init == "auto" and warm_ok and n_rows >= AUTO_WARM_MIN_ROWS and self.spec.name in ("grow_prune", "cgm")
            and self._sparse is None and self.executor is None)
        model = copy.copy(self)
        model.run = dataclasses.replace(
            self.run,
            tune=(AUTO_WARM_TUNE if warm else AUTO_TUNE) if self.tune == "auto" else self.tune,
            draws=(AUTO_WARM_DRAWS if warm and n_rows >= AUTO_WARM_MIN_ROWS else AUTO_DRAWS) if self.draws == "auto"
            else self.draws)
        model.init = "gfr" if warm else None
        model.init_options = check_init_options(self.init_options, self.chains) if warm else None
        return model

    def _check_hetero(self, sample_weight, sample_offset, class_labels, random_effects, n_rows: int):
        """The rows' weights and offsets as float64 arrays (None, None when the fit has neither; weights 1
        or offsets 0 when only the other is given); refuses what weights, offsets and variance forests do
        not fit, and bad values (``check_row_values``)."""
        wanted = self.weights is not None or self.offset is not None or self.variance is not None
        if not wanted and sample_weight is None and sample_offset is None:
            return None, None, None, None
        if class_labels is not None:
            raise ArgumentError("weights=, offset= and variance= are for a numeric response (Gaussian BART); this "
                                "response is categorical (probit, multinomial and ordinal BART do not support them)")
        if random_effects is not None:
            raise ArgumentError("weights=, offset= and variance= are not available with random effects (1 | g) yet; "
                                "leave one of them out")
        for keyword, name, given, column in (("sample_weight", "weights", sample_weight, self.weights),
                                             ("sample_offset", "offset", sample_offset, self.offset)):
            if column is not None and given is None:
                raise ArgumentError(f"{name}={column!r} names a data column: fit with bps.bart(formula, data, "
                                    f"{name}={column!r}), or give the values to fit(..., {keyword}=)")
        wname = self.weights if self.weights is not None else ("weights" if sample_weight is not None else None)
        oname = self.offset if self.offset is not None else ("offset" if sample_offset is not None else None)
        w = np.ones(n_rows) if sample_weight is None else check_row_values(wname, sample_weight, n_rows, weights=True)
        o = np.zeros(n_rows) if sample_offset is None else check_row_values(oname, sample_offset, n_rows, weights=False)
        return w, o, wname, oname

    def _with_hetero(self, problem: BartProblem, weights: np.ndarray, offset: np.ndarray, columns_of: tuple,
                     names: list, na_action, config: dict, predictors: tuple = (None, None)):
        """The problem of a fit with weights, an offset or a variance forest and the ``attach`` that stores
        the rows' weights and offsets and the variance trees (``posterior/variance.py``).

        Only an offset: the plain BART problem on y - o (the unweighted kernels, their draws unchanged).
        Weights or a variance forest: a ``bart_hetero`` problem (``samplers/hetero.py``) whose mean
        forest has weighted leaves; with a variance forest sigma0^2 is fixed at the variance of the working
        response (1 on the response standardised by its sd, spec multi_forest.md 5.4) and each variance
        leaf's s ~ IG(a, b), a = M / a0^2 + 1/2, b = M / a0^2, a0 = 1.5 (stochtree's calibration,
        spec 5.2: log v(x) has prior mean ~0 and sd ~a0).
        """
        from ..posterior.variance import attach_hetero
        from ..samplers.hetero import VARIANCE_GROUP, HeteroProblem

        mean_predictors, variance_predictors = predictors
        columns = None
        if self.variance is not None:
            columns = (variance_columns(self.variance, names) if variance_predictors is None
                       else _known_predictors("variance_predictors", variance_predictors, names))
        mean_cols = () if mean_predictors is None else tuple(
            names.index(c) for c in _known_predictors("mean_predictors", mean_predictors, names))
        spec = {"weights": columns_of[0], "offset": columns_of[1], "variance": None, "variance_trees": None}
        weighted = columns_of[0] is not None or columns is not None
        if weighted:
            fields = {f.name: getattr(problem, f.name) for f in dataclasses.fields(problem)}
            fields["prior"] = problem.prior._replace(model=MODEL_BASIS_NORMAL)
            extra = {"weights": weights}
            if columns is not None:
                m = self.variance_trees
                a = m / VARIANCE_A0 ** 2 + 0.5
                b = m / VARIANCE_A0 ** 2
                sigma0_sq = float(np.var(problem.y))
                if not sigma0_sq > 0:
                    raise DataError("the response is constant: a variance forest needs a response that varies")
                fields.update(sigma_mode=SIGMA_FIXED, sigma2=sigma0_sq)
                var_prior = kernel_prior(self._fit_tree_prior(na_action), None, likelihood=self.likelihood,
                                         model_code=MODEL_LOG_VARIANCE, lg_shape=a, lg_rate=b)
                extra.update(var_columns=tuple(names.index(c) for c in columns), var_prior=var_prior, var_trees=m,
                             mean_columns=mean_cols)
                spec.update(variance=list(columns), variance_trees=m, a=a, b=b, a0=VARIANCE_A0, sigma0_sq=sigma0_sq,
                            mean=None if mean_predictors is None else [names[j] for j in mean_cols])
            problem = HeteroProblem(**fields, **extra)
        config.update(leaf_model="normal_hetero" if columns is None else "normal_variance", hetero=spec)

        def attach(draws):
            store = None
            if VARIANCE_GROUP in draws.extra_stores:
                _, nodes, counts = draws.extra_stores.pop(VARIANCE_GROUP)
                store = (nodes, counts)
            return lambda fit: attach_hetero(fit, weights, offset, store)

        return problem, attach

    def _check_random_effects(self, random_effects, class_labels, n_rows: int) -> None:
        """Refuse what BART with random effects does not fit, naming what does."""
        if class_labels is not None:
            raise ArgumentError("random effects (1 | g) are fitted for a numeric response only (Gaussian BART); this "
                                "response is categorical")
        if self._sparse is not None or self.init == "gfr":
            raise ArgumentError("random effects (1 | g) are not available with sparse=True (DART) or init='gfr' yet; "
                                "leave those out")
        if random_effects.group.shape[0] != n_rows:
            raise ArgumentError(f"random_effects has {random_effects.group.shape[0]} rows, y has {n_rows}")

    def _with_random_effects(self, problem: BartProblem, random_effects, config: dict):
        """The ``bart_re`` problem of Gaussian random effects (``samplers/random_effects.py``) and the
        ``attach`` that stores their draws (``posterior/random_effects.py``).

        Prior (``_kernels/random_effects.py``, spec multi_forest.md 4.1): beta_g = alpha * xi_g,
        alpha ~ N(0, I), xi_g ~ N(0, diag(sigma_k^2)), sigma_k^2 ~ IG(1, 1), on the working response
        (the response scaled to [-0.5, 0.5]), so each term's sd across groups, |alpha_k| sigma_k, is a
        priori half-t_2 with scale 1, the response's range: weakly informative, mode at 0.
        """
        from ..posterior.random_effects import attach_random_effects
        from ..samplers.random_effects import RE_VARIABLES, BartReProblem

        re = random_effects
        spec = re.spec.to_config()
        config.update(leaf_model="normal_re", random_effects={**spec, "a": 1.0, "b": 1.0, "alpha_var": 1.0})
        fields = {f.name: getattr(problem, f.name) for f in dataclasses.fields(problem)}
        problem = BartReProblem(**fields, group=np.asarray(re.group, dtype=np.int64),
                                basis=np.asarray(re.basis, dtype=np.float64), n_groups=len(spec["levels"]),
                                intercept=spec["terms"].index("(Intercept)") if "(Intercept)" in spec["terms"] else -1)

        def attach(draws):
            taken = {name: draws.posterior.pop(name) for name in RE_VARIABLES}
            return lambda fit: attach_random_effects(fit, taken, problem.group, problem.basis)

        return problem, attach

    @classmethod
    def from_formula(cls, formula: str, data, *, na_action: str | NaAction = "drop", **keywords):
        from ..formula.random_effects import build_random_effects_design, has_random_effects
        from ..formula.surv import is_surv_formula

        hetero = {k: keywords[k] for k in ("weights", "offset", "variance") if keywords.get(k) is not None}
        if cls is BART and hetero and (has_random_effects(formula) or is_surv_formula(formula)):
            raise ArgumentError(f"{', '.join(f'{k}=' for k in hetero)} are for Gaussian BART; they are not available "
                                "with random effects (1 | g) or a Surv(time, event) response yet: leave them out")
        if cls is BART and hetero:
            return cls._from_formula_hetero(formula, data, na_action, keywords)
        if cls is BART and has_random_effects(formula) and not is_surv_formula(formula):
            # 'y ~ x1 + (x1 | g)': Gaussian random effects beside the trees
            model = cls(**keywords)
            na_action = check_na_action(na_action)
            design, x, y, re = build_random_effects_design(formula, data, na_action=na_action)
            return model.fit(x, y, **design_fit_keywords(design), na_action=na_action, random_effects=re)

        if cls is BART and is_surv_formula(formula):
            # 'Surv(time, event) ~ ...': discrete-time survival BART (models/survival.py)
            from .survival import SurvivalBART

            dart = {key: keywords[key] for key in ("sparse", "sparse_a", "sparse_b", "sparse_rho") if key in keywords}
            if dart and dart != {"sparse": False}:  # SurvivalBART has no DART keywords: say so, not TypeError
                raise ArgumentError("sparse=True (DART) is not available for survival BART (a 'Surv(time, event) ~ "
                                    f"...' formula; got {', '.join(f'{k}={v!r}' for k, v in dart.items())}); leave "
                                    "the sparse keywords out")
            keywords.pop("sparse", None)
            if keywords.pop("init", None) not in (None, "auto") or keywords.pop("init_options", None) is not None:
                raise ArgumentError(f"init='gfr' fits {SUPPORTED} only, not survival BART (a 'Surv(time, event) ~ "
                                    "...' formula); leave init out")
            return SurvivalBART.from_formula(formula, data, na_action=na_action, **keywords)
        ordered, unused = ordered_response_labels(formula, data)
        if cls is BART and ordered and keywords.get("link", "auto") in ("auto", "ordinal"):
            # an ordered pandas Categorical with three or more levels in use: cumulative-probit BART
            # (two levels: probit BART, the same model)
            n_used = data[formula.split("~", 1)[0].strip().strip("`")].dropna().nunique()
            if keywords.get("link", "auto") == "ordinal" or n_used > 2:
                keywords = {**keywords, "link": "ordinal"}
                warn_unused_levels(formula.split("~", 1)[0].strip(), unused, stacklevel=3)
        return super().from_formula(formula, data, na_action=na_action, **keywords)

    @classmethod
    def _from_formula_hetero(cls, formula: str, data, na_action, keywords: dict):
        """``from_formula`` with ``weights`` / ``offset`` columns or a ``variance`` formula: the columns are
        read for the rows the design keeps (checked: numeric, finite, weights >= 0, naming the column and the
        first bad row's label) and left out of a ``y ~ .`` formula's predictors; terms of ``variance`` that
        are not predictors of the formula are added to the design for the variance trees only."""
        from ..formula import build_design

        model = cls(**keywords)
        na_action = check_na_action(na_action)
        if not hasattr(data, "columns"):
            raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}")
        used = [c for c in (model.weights, model.offset) if c is not None]
        absent = [c for c in used if c not in data.columns]
        if absent:
            keyword = "weights" if absent[0] == model.weights else "offset"
            raise DataError(f"data has no column {absent[0]!r} (given as {keyword}=); columns: {list(data.columns)}")
        lhs, _, rhs = formula.partition("~")
        if rhs.strip() == "." or rhs.strip().startswith(". ") or rhs.strip().startswith(".-"):
            # 'y ~ .' would take the weight and offset columns as predictors
            formula = f"{lhs}~{rhs}" + "".join(f" - {c}" for c in used)
        positions = data.copy(deep=False)  # a new index on a shallow copy: the caller's frame is untouched
        positions.index = pd.RangeIndex(len(data))
        design, x, y, index = build_design(formula, positions, na_action=na_action, return_index=True)
        split = {}
        if model.variance is not None and model.variance.strip()[1:].strip() != ".":
            terms = _variance_terms(model.variance)
            extra = [t for t in terms if t not in design.predictors]
            if extra:
                # the variance trees' own predictors: one design for both forests, the mean trees split on
                # the formula's predictors only
                n_mean = len(design.predictors)
                both, x, y, index = build_design(f"{formula} + {' + '.join(extra)}", positions, na_action=na_action,
                                                 return_index=True)
                added = list(both.predictors[n_mean:])
                if list(both.predictors[:n_mean]) != list(design.predictors) or len(added) != len(extra):
                    raise ArgumentError(f"variance={model.variance!r}: its terms {extra} could not be added to the "
                                        f"design of {formula!r} one predictor each; write them as plain columns")
                split = {"mean_predictors": list(design.predictors),
                         "variance_predictors": [added[extra.index(t)] if t in extra else t for t in terms]}
                design = both
        rows = np.asarray(index, dtype=np.int64)
        labels = data.index[rows]
        n = rows.shape[0]
        w = None if model.weights is None else check_row_values(
            model.weights, _numeric_column(data[model.weights], model.weights, "weights", labels, rows), n,
            weights=True, labels=labels)
        o = None if model.offset is None else check_row_values(
            model.offset, _numeric_column(data[model.offset], model.offset, "offset", labels, rows), n,
            weights=False, labels=labels)
        return model.fit(x, y, **design_fit_keywords(design), na_action=na_action, sample_weight=w, sample_offset=o,
                         **split)

    from_formula.__func__.__doc__ = TreeModel.from_formula.__doc__.replace(
        "a bool, string or category response a classification model (labels kept as given).",
        "a bool, string or category response a classification model (labels kept as given).\n"
        "            ``Surv(time, event) ~ x1 + x2`` (two column names: the observed time and a 0/1 or\n"
        "            bool event indicator) gives discrete-time survival BART (``SurvivalBART``: extra\n"
        "            keywords ``grid`` and ``censoring``; defaults ``trees=50``, ``thin=10``). An ordered\n"
        "            pandas Categorical response with three or more levels gives ordinal (cumulative-probit)\n"
        "            BART (``link``). ``y ~ x1 + x2 + (1 | g)`` adds a Gaussian random intercept per level of\n"
        "            ``g`` and ``y ~ x1 + (x1 | g)`` a random intercept and slope (lme4's syntax; ``(0 + x1 | g)``\n"
        "            the slope alone; one grouping factor, a string or categorical column or ``C(g)``): the\n"
        "            grouping factor is not a tree predictor unless it is also a term; samplers ``grow_prune``\n"
        "            and ``cgm``; posterior ``re_sd`` and ``re_effect``, ``summary()`` rows ``sd[term | g]``,\n"
        "            ``predict`` adds a known group's effect and gives a new group the population mean (with\n"
        "            the group variance in ``kind='predictive'`` intervals): see\n"
        "            ``bartpy_suite.posterior.random_effects``.")

    def _fit_multinomial(self, y, class_labels, is_cat, names, binned, design, na_action):
        """Log-linear multinomial BART (Murray 2021): one forest of ``trees`` trees per class."""
        ycodes = np.asarray(y, dtype=np.int64)
        k = len(class_labels)
        if k < 2 or np.unique(ycodes).size < 2:
            raise DataError("the response has a single class; classification needs at least two")
        shape, rate = log_gamma_prior(self.trees, self.k)
        config = self._base_config("categorical", names, na_action)
        config.update(trees=self.trees, k=self.k, class_labels=[plain(c) for c in class_labels],
                      leaf_model="multinomial", link="logit", leaf_shape=shape, leaf_rate=rate, center=0.0, scale=1.0,
                      nu=None, lam=None)
        prior = kernel_prior(self._fit_tree_prior(na_action), None, likelihood=self.likelihood,
                             model_code=MODEL_LOG_GAMMA, lg_shape=shape, lg_rate=rate)
        problem = MultinomialBartProblem(binned.codes, is_cat, binned.nbins, ycodes, prior, k, self.trees)

        def derived(posterior):
            posterior["mean_leaves"] = posterior["n_leaves"].mean(axis=2)
            posterior["mean_depth"] = posterior.pop("depth").mean(axis=2)

        return self._sample(problem, binned=binned, y=y, config=config, design=design, derived=derived)
