"""One object per leaf model: what a fit's draws mean.

``Fit`` holds one :class:`LeafModel`, chosen once from its stored configuration
(``config["leaf_model"]``, and ``config["survival"]`` for the person-period probit), so a loaded
file gets the same object as the fit that wrote it. The leaf model answers everything that
depends on what the trees' leaves hold:

* prediction: :meth:`LeafModel.draws` (f(x) per sample and row, or class probabilities per
  sample, row and class), :meth:`LeafModel.noise_sd` (regression) and :meth:`LeafModel.predict`;
* the pointwise log-likelihood of the training rows (:meth:`LeafModel.pointwise_log_likelihood`);
* its posterior variables: :attr:`LeafModel.posterior_variables` (data variables of the posterior
  group it owns), :attr:`LeafModel.tree_variables` (leaf parameters of the trees group) and
  :meth:`LeafModel.summary_rows` (rows of ``Fit.summary`` beyond the scalar ones);
* what SHAP values add up to (:meth:`LeafModel.shap_outputs`), whether partial dependence applies,
  and the per-class split shares of ``variable_activity(by_class=True)``.

Everything else (binning new rows, the tree store, the prediction kernels) stays in ``Fit`` and is
reached through its public members (``fit.prepare``, ``fit.sum_of_trees``, ``fit.leaf_indices``,
``fit.tree_store``, ``fit.binned``).

A new leaf model is a subclass here with ``names`` (its ``config["leaf_model"]`` values) decorated
with :func:`register`; see "Adding a leaf model" in ``docs/architecture.md``.

Import rule: numpy, scipy, pandas; this package's ``soft``, ``survival``, ``prediction_table``,
``weighted`` modules and the sampler registry (soft routing modes). Not ``fit`` (which imports this
module): the ``Fit`` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
from scipy import special

from .. import _validation as check
from ..errors import ArgumentError
from ._dask import is_dask_frame, predict_dask
from .prediction_table import class_table, regression_table, with_missing_rows

if TYPE_CHECKING:
    from .fit import Fit

#: Dim of ordinal BART's ``cutpoints`` (chain, draw, cutpoint); not ``cut``, which constant_data's
#: cut grids use with another size.
CUTPOINT_DIM = "cutpoint"
#: ``predict`` kinds of every fit, and the kinds that survival fits answer.
PREDICT_KINDS = ("mean", "predictive", "prob", "class")
SURVIVAL_KINDS = ("survival", "hazard", "cumhaz", "median", "rmst")

#: Registered leaf models by their ``config["leaf_model"]`` name.
LEAF_MODELS: dict[str, type[LeafModel]] = {}


def register(cls: type[LeafModel]) -> type[LeafModel]:
    """Class decorator: add ``cls`` under each of its ``names`` (a name can be registered once)."""
    if not cls.names:
        raise ValueError(f"leaf model {cls.__name__} has no names")
    for name in cls.names:
        if name in LEAF_MODELS:
            raise ValueError(f"leaf model {name!r} is already registered (by {LEAF_MODELS[name].__name__})")
        LEAF_MODELS[name] = cls
    return cls


def leaf_model_name(config: dict) -> str:
    """The fit's ``config["leaf_model"]``; for configurations without one (none written by this
    package, but the key is optional in a file) the name the model type and response imply."""
    name = config.get("leaf_model")
    if name is not None:
        return name
    categorical = config.get("response_kind") == "categorical"
    model = config.get("model_type")
    if model == "soft_tree":
        return "soft_dirichlet" if categorical else "soft_normal"
    if model == "bart":
        return "probit" if categorical else "normal"
    return "dirichlet" if categorical else "mean_shift"


def leaf_model_class(config: dict) -> type[LeafModel]:
    """The leaf model class a configuration names (with its variant).

    Raises
    ------
    ArgumentError
        When the configuration names a leaf model that is not registered.
    """
    name = leaf_model_name(config)
    if name not in LEAF_MODELS:
        raise ArgumentError(f"the fit's configuration has leaf_model {name!r}, which this version of bartpy_suite "
                            f"does not know; known: {sorted(LEAF_MODELS)}")
    return LEAF_MODELS[name].variant(config)


def leaf_model_for(fit: Fit) -> LeafModel:
    """The leaf model of ``fit``, from its configuration.

    Raises
    ------
    ArgumentError
        When the configuration names a leaf model that is not registered.
    """
    return leaf_model_class(fit.config)(fit)


class TrainingRows(np.ndarray):
    """Bin codes of training rows (``rows``: their numbers, None for all), as an ndarray view: leaf
    models whose predictions add a per-row term (random effects, a variance forest's weights) tell
    training inputs from new data by this type."""

    rows: np.ndarray | None = None

    @classmethod
    def of(cls, codes: np.ndarray, rows) -> TrainingRows:
        out = codes.view(cls)
        out.rows = rows
        return out


class LeafModel:
    """What the leaves of a fit's trees hold, and what follows from it.

    Subclasses set the class attributes and override what differs; the defaults are those of
    hard-split trees whose leaves hold values summed into f(x) (``node_value``).

    Attributes
    ----------
    names : tuple of str
        The ``config["leaf_model"]`` values this class answers (at least one).
    classification : bool
        Whether :meth:`draws` returns class probabilities (samples, rows, classes) rather than f(x).
    hard_splits : bool
        Whether the rules are hard splits on binned predictors (rpart printouts, partial
        dependence, the binned prediction kernels); False for soft trees.
    posterior_variables : tuple of str
        Data variables of the posterior group that belong to this leaf model.
    tree_variables : tuple of str
        Leaf parameters in the trees group (``node_value``, ``node_sigma``, ``node_prob``).
    shap_scale : str
        What SHAP values of this model add up to (``Fit.shap``'s ``attrs["scale"]``).
    forest_per_class : bool
        Whether a draw holds one sum of ``config["trees"]`` trees per class (``load`` checks the count).
    classes : int or None
        The number of classes the model requires (None: any).
    fit : Fit
        The fit this object answers for.
    config : dict
        The configuration it was chosen from.
    """

    names: ClassVar[tuple[str, ...]] = ()
    classification: ClassVar[bool] = False
    hard_splits: ClassVar[bool] = True
    posterior_variables: ClassVar[tuple[str, ...]] = ()
    tree_variables: ClassVar[tuple[str, ...]] = ("node_value",)
    shap_scale: ClassVar[str] = "response"
    forest_per_class: ClassVar[bool] = False
    classes: ClassVar[int | None] = None

    def __init__(self, fit: Fit):
        self.fit = fit
        self.config = fit.config  # the configuration it was chosen from (Fit.leaf_model checks it)

    @classmethod
    def variant(cls, config: dict) -> type[LeafModel]:
        """The class to build for ``config`` (``cls`` unless a setting picks a subclass)."""
        return cls

    @classmethod
    def check_file(cls, checker, config: dict) -> None:
        """Check what this leaf model reads from a loaded file besides the trees (``file_check``:
        ``checker.array`` reads a variable after checking its dtype and dims, ``checker.fail``
        raises the file error); nothing by default."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} leaf model of {self.fit.config['model_type']!r}>"

    @property
    def kind(self) -> str:
        """The kind of response, as ``repr(fit)`` names it."""
        return "classification" if self.classification else "regression"

    def check_frame(self, newdata: pd.DataFrame) -> None:
        """Raise if new rows of this model cannot be given as a DataFrame of the predictors."""

    # -- rows --------------------------------------------------------------------------------
    def inputs(self, newdata=None, na_action=None) -> tuple[np.ndarray, pd.Index, np.ndarray | None]:
        """The rows of ``newdata`` (None: the training rows) as :meth:`draws` reads them, the index
        of every row, and the mask of the rows predicted (None: all). Hard trees: bin codes (p, m)."""
        return self.fit.prepare(newdata, na_action)

    def training_inputs(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The training rows (all, or those numbered ``rows``) as :meth:`draws` reads them."""
        codes = self.fit.binned.codes
        return codes if rows is None else np.ascontiguousarray(codes[:, rows])

    # -- draws ------------------------------------------------------------------------------
    def function_samples(self, x: np.ndarray) -> np.ndarray:
        """f(x) per (sample, row): the sum of the trees (the latent f of probit models)."""
        return self.fit.sum_of_trees(x)

    def draws(self, x: np.ndarray) -> np.ndarray:
        """What ``predict`` summarises per sample: f(x) (samples, rows), or class probabilities
        (samples, rows, classes) for a classification model."""
        return self.function_samples(x)

    def noise_sd(self, x: np.ndarray) -> np.ndarray:
        """Noise sd per (sample, row) (broadcastable) of a regression model."""
        sigma = self.fit.posterior["sigma"].values.reshape(-1)
        return np.broadcast_to(sigma[:, None], (sigma.size, x.shape[-1]))

    def pointwise_log_likelihood(self) -> np.ndarray:
        """log p(y_i | draw) of each training row, (samples, obs): the normal density with
        :meth:`noise_sd` for regression, the log of the observed class's probability for
        classification."""
        y = self.fit.idata["observed_data"]["y"].values
        x = self.training_inputs()
        if self.classification:
            picked = np.take_along_axis(self.draws(x), y.astype(np.int64)[None, :, None], axis=2)[:, :, 0]
            with np.errstate(divide="ignore"):
                return np.log(picked)
        f = self.draws(x)
        sd = self.noise_sd(x)
        z = (y[None, :] - f) / sd
        return -0.5 * z * z - np.log(sd) - 0.5 * np.log(2.0 * np.pi)

    def predict(self, newdata, kind: str, level: float, samples: bool, na_action: str | None, times):
        """``Fit.predict`` after its common checks (same contract); a dask DataFrame is predicted
        partition by partition (``posterior/_dask.py``)."""
        if kind in SURVIVAL_KINDS or times is not None:
            from . import survival  # refuses these kinds for a fit that is not a survival fit

            return survival.predict(self.fit, newdata, kind, level, samples, na_action, times)
        if is_dask_frame(newdata):
            return predict_dask(self.fit, newdata, kind=kind, level=level, samples=samples, na_action=na_action)
        kind = check.check_choice("kind", kind, PREDICT_KINDS)
        level = check.check_open_unit("level", level)
        x, index, ok = self.inputs(newdata, na_action)
        fit = self.fit
        shape = (fit.posterior.sizes["chain"], fit.posterior.sizes["draw"])
        rows = index if ok is None else index[ok]
        if self.classification:
            out = class_table(self.draws(x), fit.flat_weights, fit.config["class_labels"], rows, kind, level,
                              samples, shape)
        else:
            out = regression_table(self.draws(x), lambda: self.noise_sd(x), fit.flat_weights, rows, kind, level,
                                   samples, shape)
        return with_missing_rows(out, ok, index)

    # -- posterior variables --------------------------------------------------------------------
    def summary_rows(self, row: Callable[[np.ndarray], dict]) -> dict:
        """Rows of ``Fit.summary`` beyond its (chain, draw) scalars: ``{name: row(values)}`` with
        ``row`` the summary's statistics of a (chain, draw) array."""
        return {}

    def class_split_shares(self) -> np.ndarray:
        """(samples, classes, predictors): each draw's share of split rules per class."""
        raise ArgumentError("by_class=True needs a multinomial BART fit, which has one sum of trees per class")

    @classmethod
    def tree_legend(cls, config: dict, tree: int) -> tuple[str, str, str, bool]:
        """How ``Fit.tree`` prints tree ``tree``: (kind, what yval means, the class whose sum of
        trees it belongs to or "", whether its leaf values are terms of a latent function)."""
        if cls.classification:
            return "probabilities", "most probable class; at leaves, each class's probability in class order", "", \
                False
        return "mean", "leaf value; at splits, mean response of the rows", "", False

    def partial_dependence_refusal(self) -> str | None:
        """Why ``plotting.partial_dependence`` does not apply to this model (None: it does)."""
        if self.classification:
            return ("partial dependence is drawn for f of a regression (or probit BART) fit; this fit "
                    f"is a {self.fit.config.get('leaf_model')} classification")
        return None

    def shap_outputs(self) -> tuple[str, list, list[tuple[np.ndarray, slice]]]:
        """(scale, class labels or [], [(leaf values, tree slice) per output]) for TreeSHAP."""
        return self.shap_scale, [], [(self.fit.tree_store["node_value"], slice(None))]

    def _labels(self) -> list[str]:
        return [str(c) for c in self.fit.config["class_labels"]]


@register
class GaussianMeanShift(LeafModel):
    """Regression with one noise sd per draw (posterior ``sigma``): BART's ``normal`` and CART's
    ``mean_shift`` (Chipman, George and McCulloch 1998's mean-shift model)."""

    names = ("normal", "mean_shift")
    posterior_variables = ("sigma",)


@register
class MeanVarianceShift(LeafModel):
    """CART's ``mean_variance_shift``: each leaf has its own mean and noise sd (``node_sigma``)."""

    names = ("mean_variance_shift",)
    tree_variables = ("node_value", "node_sigma")

    def noise_sd(self, x: np.ndarray) -> np.ndarray:
        return self.fit.tree_store["node_sigma"][self.fit.leaf_indices(x)[:, 0, :]]


@register
class Probit(LeafModel):
    """Binary probit BART: P(second class) = Phi(f(x))."""

    names = ("probit",)
    classification = True
    classes = 2
    shap_scale = "probit latent"

    @classmethod
    def variant(cls, config: dict) -> type[LeafModel]:
        survival = config.get("survival")
        if not survival:
            return cls
        return CompetingRiskCause if survival.get("cause") is not None else DiscreteTimeSurvival

    def draws(self, x: np.ndarray) -> np.ndarray:
        p1 = special.ndtr(self.function_samples(x))
        return np.stack([1.0 - p1, p1], axis=-1)

    def partial_dependence_refusal(self) -> str | None:
        return None  # partial dependence of the latent f

    @classmethod
    def tree_legend(cls, config: dict, tree: int) -> tuple[str, str, str, bool]:
        return ("latent probit", f"leaf value on the latent probit scale, this tree's term of f "
                f"(P({config['class_labels'][-1]}) = Phi(sum of the trees)); no class per node", "", True)


class DiscreteTimeSurvival(Probit):
    """Survival BART: the probit of a discrete-time hazard on person-period rows (the time is the
    trees' first predictor); ``predict`` gives S(t | x) and friends (``posterior/survival.py``)."""

    def predict(self, newdata, kind: str, level: float, samples: bool, na_action: str | None, times):
        from . import survival

        return survival.predict(self.fit, newdata, "survival" if kind == "mean" else kind, level, samples,
                                na_action, times)


    kind = "survival"

    def check_frame(self, newdata: pd.DataFrame) -> None:
        # the trees split on the time (predictor 0) and the covariates, the design holds the
        # covariates only; posterior/survival builds the rows at the grid times (an array with
        # the time as its first column is read as the trees' predictors)
        raise ArgumentError("new rows of a survival fit are predicted with predict(newdata, kind='survival', "
                            "times=[...]) (or hazard, cumhaz, median, rmst); f(x) draws, SHAP values and "
                            "importance of its person-period trees take a 2-D array whose first column is "
                            "the time")


class CompetingRiskCause(DiscreteTimeSurvival):
    """One cause's probit fit of competing-risks BART; its ``predict`` refuses survival kinds of its
    own and points to ``CompetingRisksFit`` (``posterior/survival.py``)."""


@register
class Ordinal(LeafModel):
    """Ordinal BART (cumulative probit): P(y <= k) = Phi(c_k - eta), eta = f(x); the posterior
    owns the ``cutpoints`` (chain, draw, cutpoint)."""

    names = ("ordinal",)
    classification = True
    posterior_variables = ("cutpoints",)
    shap_scale = "probit latent"  # the latent eta = mu0 + f; P(y <= k) = Phi(c_k - eta)

    @classmethod
    def tree_legend(cls, config: dict, tree: int) -> tuple[str, str, str, bool]:
        return ("latent probit", "leaf value on the latent probit scale, this tree's term of eta (P(y <= k) = "
                "Phi(c_k - eta), eta the sum of the trees, c the draw's cutpoints); no class per node", "", True)

    def draws(self, x: np.ndarray) -> np.ndarray:
        cut = self.fit.posterior["cutpoints"].values.reshape(-1, len(self.fit.config["class_labels"]) - 1)
        return ordinal_probabilities(self.function_samples(x), cut)

    def summary_rows(self, row: Callable[[np.ndarray], dict]) -> dict:
        rows = {}
        for name in self.posterior_variables:
            da = self.fit.posterior[name]
            for j, label in enumerate(da[CUTPOINT_DIM].values):
                if j == 0:
                    continue  # c_1 = 0 is the model's constraint, not a parameter
                rows[f"{name}[{label}]"] = row(da.values[:, :, j].astype(float))
        return rows


@register
class Multinomial(LeafModel):
    """Log-linear multinomial BART: one sum of ``trees`` trees per class, P = softmax(F)."""

    names = ("multinomial",)
    classification = True
    forest_per_class = True
    shap_scale = "log-linear"

    def _class_slices(self) -> list[slice]:
        m = int(self.fit.config["trees"])
        return [slice(k * m, (k + 1) * m) for k in range(len(self.fit.config["class_labels"]))]

    def draws(self, x: np.ndarray) -> np.ndarray:
        # softmax of the classes' sums of trees F_k (log-linear BART)
        log_fit = np.stack([self.fit.sum_of_trees(x, trees) for trees in self._class_slices()], axis=-1)
        return special.softmax(log_fit, axis=-1)

    @classmethod
    def tree_legend(cls, config: dict, tree: int) -> tuple[str, str, str, bool]:
        labels = config["class_labels"]
        value_class = str(labels[min(tree // int(config["trees"]), len(labels) - 1)])
        return ("log-linear", f"leaf value on the log scale of class {value_class}, this tree's term of its sum of "
                "trees (probabilities: softmax of the classes' sums); no class per node", value_class, True)

    def class_split_shares(self) -> np.ndarray:
        t = self.fit.tree_store
        n_classes, trees_per_class = len(self.fit.config["class_labels"]), int(self.fit.config["trees"])
        counts = t["counts"]
        samples, n_trees = counts.shape
        p = len(self.fit.predictors)
        tree_of_node = np.repeat(np.arange(samples * n_trees), counts.reshape(-1))
        split = t["node_var"] >= 0
        tree_index = tree_of_node[split]
        group = (tree_index // n_trees) * n_classes + (tree_index % n_trees) // trees_per_class
        tally = np.bincount(group * p + t["node_var"][split], minlength=samples * n_classes * p).astype(float)
        tally = tally.reshape(samples, n_classes, p)
        total = tally.sum(axis=-1, keepdims=True)
        return np.divide(tally, total, out=np.zeros_like(tally), where=total > 0)

    def shap_outputs(self):
        value = self.fit.tree_store["node_value"]
        return self.shap_scale, self._labels(), [(value, trees) for trees in self._class_slices()]


@register
class DirichletClasses(LeafModel):
    """Classification CART: each leaf holds a draw of class probabilities from its Dirichlet
    posterior (``node_prob``)."""

    names = ("dirichlet",)
    classification = True
    tree_variables = ("node_prob",)
    shap_scale = "probability"

    def draws(self, x: np.ndarray) -> np.ndarray:
        return self.fit.tree_store["node_prob"][self.fit.leaf_indices(x)[:, 0, :]]

    def shap_outputs(self):
        prob = self.fit.tree_store["node_prob"]
        labels = self._labels()
        return self.shap_scale, labels, [(np.ascontiguousarray(prob[:, k]), slice(None)) for k in range(len(labels))]


@register
class SoftNormal(LeafModel):
    """Soft-tree regression (RJHMC-Tree): rows routed softly at ``h_final``; sigma per draw."""

    names = ("soft_normal",)
    hard_splits = False
    posterior_variables = ("sigma",)

    def inputs(self, newdata=None, na_action=None):
        from . import soft

        return soft.scaled_x(self.fit, newdata, na_action)

    def training_inputs(self, rows=None):
        from . import soft

        x = soft.scaled_x(self.fit, None)[0]
        return x if rows is None else np.ascontiguousarray(x[rows])

    def function_samples(self, x: np.ndarray) -> np.ndarray:
        from . import soft

        return soft.samples(self.fit, x)

    def noise_sd(self, x: np.ndarray) -> np.ndarray:
        return self.fit.posterior["sigma"].values.reshape(-1)[:, None]

    def partial_dependence_refusal(self) -> str | None:
        return ("partial dependence is drawn for hard-split trees; a soft tree routes rows softly, "
                "so average fit.function_samples(newdata) over your own grid instead")

    def shap_outputs(self):
        from . import soft

        return self.shap_scale, [], [(soft.arrays(self.fit)["value"], slice(None))]


@register
class SoftDirichlet(SoftNormal):
    """Soft-tree classification: leaf class probabilities drawn from Dirichlet(soft counts + alpha)."""

    names = ("soft_dirichlet",)
    classification = True
    posterior_variables = ()
    tree_variables = ("node_prob",)
    shap_scale = "probability"

    def draws(self, x: np.ndarray) -> np.ndarray:
        return self.function_samples(x)  # the soft kernel returns class probabilities

    def shap_outputs(self):
        from . import soft

        prob = soft.arrays(self.fit)["prob"]
        labels = self._labels()
        return self.shap_scale, labels, [(np.ascontiguousarray(prob[:, k]), slice(None)) for k in range(len(labels))]


def ordinal_probabilities(eta: np.ndarray, cutpoints: np.ndarray) -> np.ndarray:
    """Cumulative-probit class probabilities, (sample, row, class), from the latent means
    ``eta`` (sample, row) and the finite cutpoints (sample, K - 1).

    P_k = Phi(c_{k+1} - eta) - Phi(c_k - eta) (c_0 = -inf, c_K = +inf), each difference taken on
    the tail that avoids cancellation: Phi(eta - c_k) - Phi(eta - c_{k+1}) where the interval lies
    above eta. The classes sum to 1 up to rounding (telescoping).

    Parameters
    ----------
    eta : ndarray, shape (samples, rows)
    cutpoints : ndarray, shape (samples, K - 1)

    Returns
    -------
    ndarray, shape (samples, rows, K)
    """
    s, n = eta.shape
    k = cutpoints.shape[1] + 1
    cut = np.empty((s, 1, k + 1))
    cut[:, 0, 0], cut[:, 0, k] = -np.inf, np.inf
    cut[:, 0, 1:k] = cutpoints
    lo = cut[:, :, :-1] - eta[:, :, None]
    hi = cut[:, :, 1:] - eta[:, :, None]
    upper = lo + hi > 0  # the interval's middle is above eta: use the upper tail
    with np.errstate(invalid="ignore"):  # inf - inf in the unused branch of np.where
        return np.where(upper, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))
