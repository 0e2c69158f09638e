"""scikit-learn estimators over the registered tree models: ``CARTRegressor``,
``CARTClassifier``, ``BARTRegressor`` and ``BARTClassifier`` (and the soft trees'); and
``BCFRegressor``, Bayesian causal forests (``bps.bcf``) fitted with ``fit(X, y, treatment=z)``, whose
``predict`` is the conditional average treatment effect.

Each takes the keywords of its model (``bps.BayesianCART`` or ``bps.BART``: ``sampler``,
``sampler_options``, ``draws``, ``seed``, ...) with the same defaults, fits numeric arrays (or
DataFrames, e.g. the output of a ``ColumnTransformer``) and keeps the posterior ``Fit`` as
``posterior_``. Regressors: ``predict(X)`` is the posterior mean of f(x),
``predict(X, return_std=True)`` adds its posterior sd, ``predict_interval(X, level)`` the
equal-tailed credible (or, with ``kind="predictive"``, posterior predictive) interval.
Classifiers: ``predict_proba(X)`` the posterior mean class probabilities, ``predict(X)`` the
most probable class, ``predict_interval(X, level)`` credible intervals of the probabilities.

Predictors are all treated as numeric; encode factors first (``OrdinalEncoder`` keeps one
column per factor, which a tree splits on the level order; ``OneHotEncoder`` one column per
level). ``seed`` plays the part of scikit-learn's ``random_state``.

Requires scikit-learn (``pip install "bartpy-suite[sklearn]"``); the package itself never
imports this module. Import rule: front-door level; imports ``models``, ``errors`` and
scikit-learn.
"""

from __future__ import annotations

import inspect

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "bartpy_suite.sklearn needs scikit-learn: pip install 'bartpy-suite[sklearn]'"
    ) from exc

from ._validation import check_choice, check_open_unit
from .errors import ArgumentError, DataError
from .models import MODELS
from .models.bcf import bcf
from .models.settings import RUN_RESOURCES

__all__ = ["BARTClassifier", "BARTRegressor", "BCFRegressor", "CARTClassifier", "CARTRegressor", "SoftTreeClassifier",
           "SoftTreeRegressor"]

INTERVAL_KINDS = ("mean", "predictive")


class _TreeEstimator(BaseEstimator):
    """Common part: keyword parameters read from the model class, ``fit`` through the model."""

    _model_name = ""

    def __init__(self, **params):
        for name, value in params.items():
            setattr(self, name, value)

    def _model(self):
        params = self.get_params(deep=False)
        return MODELS[self._model_name](**params)

    def _validate_x(self, X, reset: bool):
        return validate_data(self, X, reset=reset, dtype=np.float64, ensure_min_samples=1)

    def _check_rows(self, n: int, min_leaf_size: int) -> None:
        if n < 2 * min_leaf_size:
            raise DataError(
                f"n_samples={n} is too few for min_leaf_size={min_leaf_size}: a split needs at least "
                f"2*min_leaf_size={2 * min_leaf_size} samples; lower min_leaf_size or supply more data"
            )

    def _fit_model(self, X, y, class_labels=None):
        model = self._model()
        self._check_rows(X.shape[0], model.tree_prior.min_leaf_size)
        names = [str(c) for c in getattr(self, "feature_names_in_", [])] or None
        self.posterior_ = model.fit(X, y, class_labels=class_labels, predictor_names=names)
        self.model_ = model
        return self

    def _samples_weights(self):
        w = self.posterior_.weights.values.reshape(-1)
        return w / w.sum()

    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters. The run keywords that name a resource
        (``models.settings.RUN_RESOURCES``: ``executor``, a dask ``Client`` or an ``Executor``) are
        where the chains run, not settings: the copy shares them, as they cannot be deep-copied."""
        params = self.get_params(deep=False)
        return type(self)(**{k: v if k in RUN_RESOURCES else clone(v, safe=False) for k, v in params.items()})

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # deterministic for a given seed
        return tags


class _Regressor(RegressorMixin, _TreeEstimator):
    def fit(self, X, y):
        """Sample the posterior given predictors ``X`` (n_samples, n_features) and response ``y``.

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        return self._fit_model(X, y)

    def predict(self, X, return_std: bool = False):
        """Posterior mean of f(x); with ``return_std`` also its posterior sd.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool
            Also return the posterior standard deviation of f(x) (the credible spread of the
            function, not of a new observation: use ``predict_interval(kind="predictive")``).

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), when ``return_std``
        """
        check_is_fitted(self, "posterior_")
        X = self._validate_x(X, reset=False)
        f = self.posterior_.function_samples(X)
        w = self._samples_weights()
        mean = w @ f
        if not return_std:
            return mean
        return mean, np.sqrt(np.maximum(w @ (f - mean) ** 2, 0.0))

    def predict_interval(self, X, level: float = 0.95, kind: str = "mean"):
        """Equal-tailed posterior interval of f(x) (``kind="mean"``) or of a new y
        (``kind="predictive"``).

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Lower and upper bounds.
        """
        check_is_fitted(self, "posterior_")
        level = check_open_unit("level", level)
        kind = check_choice("kind", kind, INTERVAL_KINDS)
        X = self._validate_x(X, reset=False)
        frame = self.posterior_.predict(X, kind=kind, level=level)
        return frame[["lower", "upper"]].to_numpy()


class _WeightedRegressor(_Regressor):
    def fit(self, X, y, sample_weight=None):
        """Sample the posterior given predictors ``X`` (n_samples, n_features), response ``y`` and, optionally,
        observation (precision) weights ``sample_weight`` >= 0: Var(e_i) = sigma^2 / w_i (``bps.BART``'s
        ``weights``; the weighted kernels run whenever it is given, also for weights all 1).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if sample_weight is None:
            return self._fit_model(X, y)
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        model = self._model()
        self._check_rows(X.shape[0], model.tree_prior.min_leaf_size)
        names = [str(c) for c in getattr(self, "feature_names_in_", [])] or None
        self.posterior_ = model.fit(X, y, predictor_names=names, sample_weight=w)
        self.model_ = model
        return self


class _Classifier(ClassifierMixin, _TreeEstimator):
    def fit(self, X, y):
        """Sample the posterior given predictors ``X`` and class labels ``y`` (any labels).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise DataError(f"y has 1 class ({self.classes_[0]!r}); a classifier needs at least two classes")
        labels = [c.item() if hasattr(c, "item") else c for c in self.classes_]
        if not all(isinstance(c, (bool, int, float, str)) for c in labels):
            labels = [str(c) for c in labels]  # the Fit stores labels as JSON
        return self._fit_model(X, codes, class_labels=labels)

    def _prob_samples(self, X) -> np.ndarray:
        return self.posterior_.predict(X, kind="prob", samples=True).values.reshape(
            -1, X.shape[0], self.classes_.size)

    def predict_proba(self, X):
        """Posterior mean probability of each class, columns in the order of ``classes_``.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "posterior_")
        X = self._validate_x(X, reset=False)
        return np.tensordot(self._samples_weights(), self._prob_samples(X), axes=(0, 0))

    def predict(self, X):
        """The most probable class (largest posterior mean probability).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "posterior_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def predict_interval(self, X, level: float = 0.95):
        """Equal-tailed credible intervals of the class probabilities.

        Returns
        -------
        ndarray of shape (n_samples, n_classes, 2)
            Lower and upper bounds per class (order of ``classes_``).
        """
        check_is_fitted(self, "posterior_")
        level = check_open_unit("level", level)
        X = self._validate_x(X, reset=False)
        frame = self.posterior_.predict(X, kind="prob", level=level)
        labels = self.posterior_.config["class_labels"]  # in the order of classes_
        lower = frame[[f"prob_{c}_lower" for c in labels]].to_numpy()
        upper = frame[[f"prob_{c}_upper" for c in labels]].to_numpy()
        return np.stack([lower, upper], axis=-1)


def _estimator(name: str, model_name: str, base: type, doc: str) -> type:
    """An estimator class whose parameters are the keyword list of ``MODELS[model_name]``."""
    model = MODELS[model_name]
    params = model.keyword_parameters()

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - {p.name for p in params})
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword arguments {unknown}")
        for p in params:
            setattr(self, p.name, kwargs.get(p.name, p.default))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
    model_doc = inspect.getdoc(model)
    parameters = model_doc.split("Parameters\n----------\n", 1)[1] if "Parameters\n" in model_doc else ""
    cls = type(name, (base,), {
        "__init__": __init__, "_model_name": model_name, "__module__": __name__,
        "__doc__": f"{doc}\n\nParameters\n----------\n{parameters}\n\nAttributes\n----------\n"
                   "posterior_ : Fit\n    The posterior (``summary()``, ``predict()``, ``idata``, ...).\n"
                   "model_ : the array-level model that was fitted.\n"
                   "n_features_in_ : int\nfeature_names_in_ : ndarray, when X had column names\n"
                   + ("classes_ : ndarray\n    The class labels.\n" if base is _Classifier else ""),
    })
    cls.__qualname__ = name
    return cls


CARTRegressor = _estimator("CARTRegressor", "cart", _Regressor,
                           "Bayesian CART regression (``bps.BayesianCART``) as a scikit-learn regressor.")
CARTClassifier = _estimator("CARTClassifier", "cart", _Classifier,
                            "Bayesian CART classification (``bps.BayesianCART``) as a scikit-learn classifier.")
BARTRegressor = _estimator("BARTRegressor", "bart", _WeightedRegressor,
                           "BART regression (``bps.BART``) as a scikit-learn regressor.")
BARTClassifier = _estimator("BARTClassifier", "bart", _Classifier,
                            "BART classification (``bps.BART``: probit for two classes, multinomial for more) "
                            "as a scikit-learn classifier.")
SoftTreeRegressor = _estimator("SoftTreeRegressor", "soft_tree", _Regressor,
                               "Soft decision tree regression (``bps.SoftTree``, RJHMC-Tree) as a scikit-learn "
                               "regressor.")
SoftTreeClassifier = _estimator("SoftTreeClassifier", "soft_tree", _Classifier,
                                "Soft decision tree classification (``bps.SoftTree``, RJHMC-Tree) as a scikit-learn "
                                "classifier.")


# -- Bayesian causal forests ---------------------------------------------------------------------

#: ``bps.bcf`` keywords that ``BCFRegressor.fit`` takes as arrays (or that arrays make moot) rather than
#: as constructor parameters.
_BCF_FIT_ARGUMENTS = ("formula", "data", "treatment", "tau_formula", "propensity", "weights", "na_action",
                      "likelihood")


def _bcf_parameters() -> list[inspect.Parameter]:
    params = [p for p in inspect.signature(bcf).parameters.values() if p.name not in _BCF_FIT_ARGUMENTS]
    tau = inspect.Parameter("tau_features", inspect.Parameter.KEYWORD_ONLY, default=None)
    return [tau] + params


def _bcf_parameter_doc(names: set) -> str:
    """The entries of ``bps.bcf``'s Parameters section for ``names`` (an entry naming several keeps all)."""
    doc = inspect.getdoc(bcf)
    block = doc.split("Parameters\n----------\n", 1)[1].split("\n\nReturns", 1)[0]
    entries, current = [], None
    for line in block.splitlines():
        if line and not line.startswith(" "):
            current = [line]
            entries.append(current)
        elif current is not None:
            current.append(line)
    keep = [e for e in entries if {n.strip() for n in e[0].split(":")[0].split(",")} & names]
    return "\n".join("\n".join(e) for e in keep)


class BCFRegressor(BaseEstimator):
    """Bayesian causal forests (``bps.bcf``; Hahn, Murray & Carvalho 2020) as a scikit-learn estimator of the
    conditional average treatment effect.

    ``fit(X, y, treatment=z)`` fits y = mu(x, pihat) + tau(x) z + e with a 0/1 treatment ``z``;
    ``predict(X)`` is the posterior mean of the CATE tau(x) (not of y: use ``predict_outcome`` for
    E[y | x, z]), ``predict_interval(X, level)`` its equal-tailed credible interval. The propensity is
    estimated by probit BART of z on X unless ``fit`` is given ``propensity=``; then ``predict`` needs it for
    new rows too. The fitted ``CausalFit`` is ``posterior_`` (``ate()``, ``att()``, ``summary()``, ...).
    There is no ``score``: the CATE has no observed target to score against.

    Parameters
    ----------
    tau_features : list of int or str, optional
        The columns of X the treatment forest may split on (default: all); the prognostic forest uses all.
    {parameters}

    Attributes
    ----------
    posterior_ : CausalFit
        The posterior.
    n_features_in_ : int
    feature_names_in_ : ndarray, when X had column names
    """

    def __init__(self, **params):
        names = {p.name for p in _bcf_parameters()}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"BCFRegressor() got unexpected keyword arguments {unknown}")
        for p in _bcf_parameters():
            setattr(self, p.name, params.get(p.name, p.default))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # deterministic for a given seed
        return tags

    def _frame(self, X, propensity=None):
        """X as the DataFrame ``bps.bcf`` reads: columns ``x0``, ``x1``, ... (and ``pi``)."""
        import pandas as pd

        df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
        if propensity is not None:
            df["pi"] = self._vector(propensity, X.shape[0], "propensity")
        return df

    @staticmethod
    def _vector(values, n: int, name: str) -> np.ndarray:
        arr = np.asarray(values, dtype=np.float64) if not isinstance(values, np.ndarray) or values.dtype != bool \
            else values.astype(np.float64)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise DataError(f"{name} must be a 1-D array with one value per row of X ({n}); got shape {arr.shape}")
        return arr

    def _tau_columns(self, n_features: int) -> list[int]:
        if self.tau_features is None:
            return list(range(n_features))
        names = [str(c) for c in getattr(self, "feature_names_in_", [])]
        out = []
        for f in self.tau_features:
            if isinstance(f, str):
                if f not in names:
                    raise ArgumentError(f"tau_features names {f!r}, which is not a column of X (columns: "
                                    f"{names or 'none'})")
                out.append(names.index(f))
            elif isinstance(f, (int, np.integer)) and not isinstance(f, bool) and 0 <= f < n_features:
                out.append(int(f))
            else:
                raise ArgumentError(f"tau_features holds {f!r}: give column indices 0..{n_features - 1} or column "
                                    "names")
        if not out:
            raise ArgumentError("tau_features is empty: the treatment forest needs at least one column")
        return out

    def fit(self, X, y, treatment=None, propensity=None, sample_weight=None):
        """Sample the posterior of the causal forest.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric covariates (encode factors first).
        y : array-like of shape (n_samples,)
            The outcome.
        treatment : array-like of shape (n_samples,)
            The 0/1 (or False/True) treatment; required.
        propensity : array-like of shape (n_samples,), optional
            P(z = 1 | x) per row, strictly between 0 and 1 (default: estimated by probit BART).
        sample_weight : array-like of shape (n_samples,), optional
            Precision weights w_i >= 0 (``bps.bcf``'s ``weights``).

        Returns
        -------
        self
        """
        import pandas as pd

        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if treatment is None:
            raise ArgumentError("BCFRegressor.fit needs treatment=: the 0/1 treatment of each row of X")
        n = X.shape[0]
        if np.ndim(treatment) != 1:
            raise DataError(f"treatment must be a 1-D array with one value per row of X ({n}); got "
                            f"{np.ndim(treatment)} dimensions")
        z = pd.Series(treatment).reset_index(drop=True) if not isinstance(treatment, np.ndarray) else \
            pd.Series(treatment)
        if z.shape != (n,):
            raise DataError(f"treatment must hold one value per row of X ({n}); got {z.shape[0]}")
        df = self._frame(X, propensity).assign(y=y, z=z.to_numpy())
        if sample_weight is not None:
            df["w"] = self._vector(sample_weight, n, "sample_weight")
        predictors = " + ".join(f"x{j}" for j in range(X.shape[1]))
        tau = " + ".join(f"x{j}" for j in self._tau_columns(X.shape[1]))
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "tau_features"}
        self.posterior_ = bcf(f"y ~ {predictors}", df, treatment="z", tau_formula=f"~ {tau}",
                              propensity="pi" if propensity is not None else None,
                              weights="w" if sample_weight is not None else None, na_action="raise", **params)
        return self

    def _new(self, X, propensity):
        check_is_fitted(self, "posterior_")
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_min_samples=1)
        fitted_with = self.posterior_.config.get("propensity_column") is not None
        if propensity is not None and not fitted_with:
            raise ArgumentError("this BCFRegressor estimated the propensity itself (fit without propensity=): leave "
                                "propensity out of predict, or refit with propensity=")
        if fitted_with and propensity is None:
            raise DataError("this BCFRegressor was fitted with propensity=: give the propensity of the new rows too "
                            "(predict(X, propensity=...))")
        return self._frame(X, propensity if self.posterior_.config.get("propensity_column") else None)

    def predict(self, X, propensity=None, return_std: bool = False):
        """The posterior mean of the conditional average treatment effect tau(x) per row (not of y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        propensity : array-like, optional
            The rows' propensities, needed when ``fit`` was given them.
        return_std : bool
            Also return the CATE's posterior sd.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,), when ``return_std``
        """
        new = self._new(X, propensity)  # checks that the estimator is fitted
        draws = self.posterior_.cate_draws(new)
        mean = draws.mean(axis=0)
        return (mean, draws.std(axis=0)) if return_std else mean

    def predict_interval(self, X, level: float = 0.95, propensity=None):
        """Equal-tailed posterior interval of the CATE per row.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Lower and upper bounds.
        """
        level = check_open_unit("level", level)
        new = self._new(X, propensity)
        frame = self.posterior_.cate(new, level=level)
        return frame[["lower", "upper"]].to_numpy()

    def predict_outcome(self, X, treatment, level: float = 0.95, propensity=None):
        """E[y | x, z] = mu_0(x) + z tau(x) per row with its interval (``CausalFit.predict``).

        Returns
        -------
        ndarray of shape (n_samples, 3)
            Mean, lower and upper bound.
        """
        level = check_open_unit("level", level)
        df = self._new(X, propensity)
        df["z"] = self._vector(treatment, df.shape[0], "treatment")
        return self.posterior_.predict(df, level=level)[["mean", "lower", "upper"]].to_numpy()


BCFRegressor.__init__.__signature__ = inspect.Signature(
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + _bcf_parameters())
BCFRegressor.__doc__ = BCFRegressor.__doc__.replace(
    "{parameters}", _bcf_parameter_doc({p.name for p in _bcf_parameters()}).replace("\n", "\n    "))
