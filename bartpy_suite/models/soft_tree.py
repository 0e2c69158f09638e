"""``SoftTree``: a single soft decision tree sampled by RJHMC-Tree (Cochrane et al.)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .. import _validation as check
from .._kernels import soft_tree as st
from .._validation import NaAction, check_na_action
from ..errors import ArgumentError, BartpySuiteWarning, DataError
from ..posterior import soft
from ..priors import response_exponent
from ..samplers.problems import SoftTreeProblem
from ._base import TreeModel, _user_stacklevel, original_scale, plain
from .registry import register
from .settings import with_run_keywords

# A threshold receives gradient only from rows within about 20-40 h of it (spec 5, pitfall 2), so
# with predictors whose values lie more than GRID_GAP_RATIO * h_init apart a threshold between two
# values has none at the start of each NUTS run. On the RJHMC-Tree paper's CGM data (values 0.111
# apart once scaled) hmc_df trapped at h_init = 0.001 (gap / h = 111) and found the partition in 9
# of 10 chains at h_init = 0.01 (gap / h = 11): benchmarks/results/rjhmc_tables.md.
GRID_GAP_RATIO = 20.0


def warn_if_bandwidth_below_grid(xs: np.ndarray, names: Sequence[str], h_init: float) -> None:
    """Warn when ``h_init`` is small against the spacing of a gridded predictor's values.

    Parameters
    ----------
    xs : ndarray of shape (n, p)
        The predictors, min-max scaled to [0, 1].
    names : sequence of str
        The predictors' names, for the message.
    h_init : float
        The routing bandwidth at the start of each NUTS run.

    Warns
    -----
    BartpySuiteWarning
        Naming the predictors whose median gap between consecutive distinct values exceeds
        ``GRID_GAP_RATIO * h_init`` (the median, so one outlying value does not count).
    """
    gaps = {}
    for j, name in enumerate(names):
        values = np.unique(xs[:, j])
        if values.size > 1:
            gap = float(np.median(np.diff(values)))
            if gap > GRID_GAP_RATIO * h_init:
                gaps[name] = gap
    if gaps:
        listed = ", ".join(f"{name!r} ({gap:.3g})" for name, gap in gaps.items())
        widest = max(gaps.values())
        warnings.warn(
            f"h_init={h_init:g} is small against the spacing of the values of {listed} (median gap between "
            f"distinct values, predictors scaled to [0, 1]): a threshold between two such values gets no gradient, "
            f"so a chain can keep a threshold within h of a value (its rows split between leaves) and stay in a "
            f"poor tree. Anneal from a larger bandwidth, e.g. h_init={widest / 10:.2g} (h_final can stay as it is), "
            f"and check that chains agree; see docs/guide/soft_trees.md",
            BartpySuiteWarning, stacklevel=_user_stacklevel())


@register
@with_run_keywords
class SoftTree(TreeModel):
    """Soft decision tree (RJHMC-Tree: reversible-jump grow/prune with NUTS on the continuous parameters).

    Each internal node routes a row right with probability expit((x[kappa] - tau) / h)
    (``hmc_df``) or expit((x . Delta - tau) / h) (``hmc_dfi``), on predictors min-max scaled
    with the training minimum and range; a leaf's weight is the product along its path.
    Regression: y ~ N(sum_k phi_k mu_k, sigma^2) (eq. 12); classification: Dirichlet-multinomial
    soft counts per leaf (eq. 10).

    Parameters
    ----------
    alpha, beta : float
        Topology prior p_split(d) = alpha (1 + d)^-beta (eqs. 14-15).
    h_init, h_final : float
        Routing bandwidth (in scaled-x units) at the start and end of each intermediate NUTS
        warm-up (eq. 20); predictions use ``h_final``.
    mu_mean, mu_scale : float
        Leaf values mu_k ~ N(mu_mean, mu_scale^2), on the working scale of y (see ``standardize``).
    sigma_a, sigma_b : float
        sigma ~ InverseGamma(sigma_a, sigma_b) on sigma itself (the authors' code; spec 1.2).
    class_alpha : float
        Symmetric Dirichlet parameter of the leaf class probabilities (classification).
    class_constant : bool
        Keep the per-leaf constant lnGamma(A) - sum lnGamma(alpha) of eq. 10 (default); False is
        the authors' code, which drops it (spec 1.4).
    standardize : bool
        Regression: centre and scale y to mean 0 and sd 1 before fitting, so the default leaf
        prior suits any scale (default). False fits y as given, as the paper does.
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    model_type = "soft_tree"
    run_defaults = {"sampler": "hmc_dfi", "draws": 500, "tune": 200}
    run_notes = {
        "sampler": "``hmc_dfi`` puts split directions on the simplex; ``hmc_df`` has one split variable per "
                   "node, updated by Metropolis-within-Gibbs.",
        "tune": "These are the warm-up iterations (eq. 19 acceptance and the warm-up move probabilities). The "
                "topology is found during the warm-up (after it, eq. 18 rarely accepts a grow), so give ``tune`` "
                "room: the paper uses 500.",
        "sampler_options": "For the HMC samplers: the NUTS and transition settings ``warmup``, ``adaptation``, "
                           "``max_tree_depth``, ``target_accept``, ``init_stepsize``, ``h_schedule``, "
                           "``code_quirks``, ``keep_first_run``, ``moves_tune``, ``moves``.",
    }

    def __init__(self, *, alpha=0.95, beta=1.0, h_init=0.1, h_final=0.005, mu_mean=0.0, mu_scale=1.0, sigma_a=1.5,
                 sigma_b=1.5, class_alpha=1.0, class_constant=True, standardize=True, **run):
        self._init_run(run)
        # the topology prior; soft splits have no minimum leaf size nor cut grid
        self._init_tree_prior(alpha, beta, 1, None)
        self.h_init = check.check_positive("h_init", h_init)
        self.h_final = check.check_positive("h_final", h_final)
        self.mu_mean = float(mu_mean)
        if not np.isfinite(self.mu_mean):
            raise ArgumentError(f"mu_mean must be a finite number; got {mu_mean!r}")
        self.mu_scale = check.check_positive("mu_scale", mu_scale)
        self.sigma_a = check.check_positive("sigma_a", sigma_a)
        self.sigma_b = check.check_positive("sigma_b", sigma_b)
        self.class_alpha = check.check_positive("class_alpha", class_alpha)
        self.class_constant = check.check_bool("class_constant", class_constant)
        self.standardize = check.check_bool("standardize", standardize)

    def fit(self, X, y, *, is_categorical=None, n_levels=None, class_labels=None, predictor_names=None, design=None,
            na_action="raise"):
        """Sample the posterior of soft trees given predictors ``X`` (n, p) and response ``y``.

        Parameters
        ----------
        X : array_like, shape (n, p)
            Numeric predictors (soft splits need an order: encode factors as numbers first).
        y : array_like, shape (n,)
            Numeric response, or class codes 0..K-1 when ``class_labels`` is given.
        is_categorical, n_levels : array_like, optional
            Factor metadata from a formula; a factor is an error.
        class_labels : sequence, optional
            Class labels in code order; makes this a classification tree.
        predictor_names : sequence of str, optional
        design : object with ``to_json()``, optional
            The formula design, stored so that ``Fit.predict`` accepts data frames.
        na_action : {"raise", "drop"} or NaAction
            "raise": NaN in ``X`` is an error; "drop": rows with NaN are left out, with a warning.
            Soft splits have no missing-value rule: ``na_action="split"`` is refused.

        Returns
        -------
        bartpy_suite.posterior.Fit
        """
        na_action = check_na_action(na_action)
        if na_action is NaAction.SPLIT:
            raise ArgumentError(
                f"na_action={na_action.value!r} is not supported by soft trees (their splits have no missing-value "
                f"rule); use na_action='drop', or impute the missing values first"
            )
        x, y, is_cat, names, binned = self._prepare(X, y, is_categorical, n_levels, predictor_names, na_action)
        if is_cat.any():
            col = names[int(np.flatnonzero(is_cat)[0])]
            raise DataError(
                f"predictor {col!r} is a factor; a soft tree splits numeric predictors only: encode it as numbers "
                f"(e.g. one indicator column per level) or drop it"
            )
        n = x.shape[0]
        low = x.min(axis=0)
        with np.errstate(over="ignore"):
            width = x.max(axis=0) - low
        if not np.all(np.isfinite(width)):
            col = names[int(np.flatnonzero(~np.isfinite(width))[0])]
            raise DataError(
                f"predictor {col!r} spans more than the largest float64 (its max - min overflows), so it "
                f"cannot be min-max scaled for the soft splits; divide it by a constant (e.g. 1e10) first"
            )
        width[width == 0] = 1.0
        xs = (x - low) / width
        warn_if_bandwidth_below_grid(xs, names, self.h_init)
        classification = class_labels is not None
        config = self._base_config("categorical" if classification else "numeric", names, na_action)
        conf = np.zeros(st.N_CONF)
        conf[st.C_LIK] = 1.0 if self.likelihood else 0.0
        conf[st.C_MU_MEAN], conf[st.C_MU_SCALE] = self.mu_mean, self.mu_scale
        conf[st.C_SIG_A], conf[st.C_SIG_B] = self.sigma_a, self.sigma_b
        conf[st.C_CLASS_ALPHA] = self.class_alpha
        conf[st.C_CLASS_CONST] = 1.0 if self.class_constant else 0.0
        if classification:
            ycls = np.asarray(y, dtype=np.int64)
            k = len(class_labels)
            if k < 2 or np.unique(ycls).size < 2:
                raise DataError("the response has a single class; classification needs at least two")
            yreg = np.zeros(n)
            center, scale = 0.0, 1.0
            config.update(class_labels=[plain(c) for c in class_labels], leaf_model="soft_dirichlet")
        else:
            yreg = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(yreg)):
                raise DataError("the response holds non-finite values; remove or impute them")
            ycls = np.zeros(n, dtype=np.int64)
            k = 0
            center, scale = 0.0, 1.0
            if self.standardize:
                # On y / 2^e (e = 0 at ordinary scales, so nothing changes there): at |y| ~ 1e200
                # the variance overflows, at 1e-200 it underflows (priors.response_exponent).
                e = response_exponent(yreg)
                yw = np.ldexp(yreg, -e) if e else yreg
                center = float(np.mean(yw))
                sd = float(np.std(yw))
                scale = sd if sd > 0 else 1.0
                yreg = (yw - center) / scale
                center = original_scale(center, e, "the response's mean")
                scale = original_scale(scale, e, "its sd")
            else:
                yreg = (yreg - center) / scale
            config.update(leaf_model="soft_normal")
        config.update(center=center, scale=scale, x_min=low.tolist(), x_range=width.tolist(), h_init=self.h_init,
                      h_final=self.h_final, mu_mean=self.mu_mean, mu_scale=self.mu_scale, sigma_a=self.sigma_a,
                      sigma_b=self.sigma_b, class_alpha=self.class_alpha, class_constant=self.class_constant,
                      standardize=self.standardize)
        problem = SoftTreeProblem(xs, yreg, ycls, k, conf, self.tree_prior.alpha, self.tree_prior.beta, self.h_init,
                                  self.h_final)
        return self._sample_soft(problem, binned=binned, y=y, xs=xs, config=config, design=design)

    def _sample_soft(self, problem, *, binned, y, xs, config, design):
        """Run the chains and build the Fit with the soft split parameters attached."""

        def attach(draws):
            _, nodes, counts = draws.extra_stores.pop(soft.SOFT_GROUP)
            return lambda fit: soft.attach(fit, nodes, counts, xs)

        return self._sample(problem, binned=binned, y=y, config=config, design=design, attach=attach)

