"""scikit-learn estimators: scikit-learn's own estimator checks at tiny settings, predictions
against the wrapped ``Fit``, a ``Pipeline`` with a ``ColumnTransformer``, ``cross_val_score``."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import OrdinalEncoder  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import bartpy_suite as bps  # noqa: E402
from bartpy_suite.sklearn import (  # noqa: E402
    BARTClassifier,
    BARTRegressor,
    CARTClassifier,
    CARTRegressor,
    SoftTreeClassifier,
    SoftTreeRegressor,
)

# One chain of a few dozen draws (BART: 5 trees) keeps scikit-learn's ~50 checks per estimator
# to a few seconds; the checks test the estimator protocol, not the posterior.
TINY = {"chains": 1, "draws": 30, "tune": 30, "seed": 0, "progress": False, "check_mixing": False,
        "log_likelihood": False}
TINY_BART = {**TINY, "trees": 5}
# soft trees: a few RJ iterations, each with a short NUTS warm-up
TINY_SOFT = {**TINY, "draws": 10, "tune": 10, "sampler_options": {"warmup": 10, "max_tree_depth": 5}}


def _expected_failures(estimator):
    """Checks that tiny settings cannot pass, with the reason (the fit itself is tested elsewhere)."""
    if isinstance(estimator, SoftTreeRegressor):
        return {"check_regressors_train": (
            "R^2 > 0.5 on make_regression needs about 50 + 50 RJ iterations with 30 NUTS warm-up steps each "
            "(measured R^2 0.77, about 13 CPU s per fit; -0.80 at the tiny settings); tests/test_soft_tree.py "
            "tests the soft tree's fit")}
    if isinstance(estimator, BARTRegressor):
        return {"check_sample_weight_equivalence_on_dense_data": (
            "integer weights vs repeated rows: other rows make other MCMC draws, and sigma's posterior counts a "
            "weighted row once (precision weights); tests/test_bart_weights.py checks f's posterior given sigma "
            "against the repeated rows")}
    return {}


@parametrize_with_checks([CARTRegressor(sampler="cgm", **TINY), CARTClassifier(sampler="cgm", **TINY), BARTRegressor(**TINY_BART),
                          BARTClassifier(**TINY_BART), SoftTreeRegressor(**TINY_SOFT),
                          SoftTreeClassifier(**TINY_SOFT)], expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_regressor_predictions_are_the_fits(cgm):
    X = cgm[["x1"]].to_numpy()
    est = CARTRegressor(sampler="cgm", chains=2, draws=100, tune=100, seed=4, progress=False,
                        check_mixing=False).fit(X, cgm["y"])
    fit = est.posterior_
    assert isinstance(fit, bps.Fit) and est.n_features_in_ == 1
    new = np.array([[1.5], [4.0], [8.5]])
    f = fit.function_samples(new)  # (samples, rows)
    mean, std = est.predict(new, return_std=True)
    np.testing.assert_allclose(mean, f.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, f.std(axis=0), rtol=1e-9)
    np.testing.assert_allclose(est.predict(new), mean)
    interval = est.predict_interval(new, level=0.9)
    expected = fit.predict(new, level=0.9)[["lower", "upper"]].to_numpy()
    np.testing.assert_allclose(interval, expected)
    wide = est.predict_interval(new, level=0.9, kind="predictive")
    assert (wide[:, 0] < interval[:, 0]).all() and (wide[:, 1] > interval[:, 1]).all()


def test_classifier_keeps_labels_and_probabilities(cgm):
    X = np.column_stack([cgm["x1"], cgm["x2"].cat.codes])
    y = np.where(bps.datasets.f_cgm1998(cgm["x1"], cgm["x2"]) > 5, "high", "low")
    est = BARTClassifier(trees=10, chains=1, draws=60, tune=60, seed=1, progress=False, check_mixing=False).fit(X, y)
    assert list(est.classes_) == ["high", "low"]
    prob = est.predict_proba(X[:5])
    np.testing.assert_allclose(prob.sum(axis=1), 1.0)
    fit_prob = est.posterior_.predict(X[:5], kind="prob")
    np.testing.assert_allclose(prob[:, 1], fit_prob["prob_low"].to_numpy())  # the Fit keeps the labels
    assert list(est.predict(X[:5])) == list(est.classes_[np.argmax(prob, axis=1)])
    bounds = est.predict_interval(X[:5], level=0.8)
    assert bounds.shape == (5, 2, 2)
    assert (bounds[..., 0] <= prob + 1e-12).all() and (prob <= bounds[..., 1] + 1e-12).all()
    # the classes are regions of the noiseless step function: a few splits separate them, so
    # the training accuracy is far above the base rate (0.62)
    assert est.score(X, y) > 0.9


def test_pipeline_with_column_transformer_and_cross_val_score(cgm):
    features = ColumnTransformer([("num", "passthrough", ["x1"]), ("factor", OrdinalEncoder(), ["x2"])])
    features.set_output(transform="pandas")  # keeps the column names, which the fit records
    pipe = Pipeline([("features", features),
                     ("cart", CARTRegressor(sampler="cgm", chains=1, draws=200, tune=300, seed=2, progress=False,
                                            check_mixing=False, log_likelihood=False))])
    scores = cross_val_score(pipe, cgm[["x1", "x2"]], cgm["y"], cv=3)
    # f explains about 3/4 of the variance of y (noise sd 2): every fold's R^2 well above zero
    assert scores.shape == (3,) and (scores > 0.4).all()
    pipe.fit(cgm[["x1", "x2"]], cgm["y"])
    assert pipe.named_steps["cart"].posterior_.predictors == ["num__x1", "factor__x2"]


def test_keywords_are_the_models_and_bad_values_are_named():
    assert set(BARTRegressor().get_params()) == {p.name for p in bps.BART.keyword_parameters()}
    assert CARTClassifier(sampler="pg").get_params()["sampler"] == "pg"
    with pytest.raises(ValueError, match="unknown sampler 'nope'"):
        CARTRegressor(sampler="nope").fit(np.zeros((20, 1)), np.arange(20.0))
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['trees'\]"):
        CARTRegressor(trees=3)
