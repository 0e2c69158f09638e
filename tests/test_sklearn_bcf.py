"""``bartpy_suite.sklearn.BCFRegressor`` (issue 30, "Done when": a ``BCFRegressor`` with ``fit(X, y,
treatment=z)``): the scikit-learn contract (``get_params``/``set_params``/``clone``, ``check_is_fitted``),
``predict`` as the CATE mean, intervals, and the same draws as ``bps.bcf`` on the same data and seed."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

import bartpy_suite as bps  # noqa: E402
from bartpy_suite.errors import ArgumentError, DataError  # noqa: E402
from bartpy_suite.posterior.bcf import CommonSupportWarning  # noqa: E402
from bartpy_suite.sklearn import BCFRegressor  # noqa: E402

SMALL = dict(mu_trees=5, tau_trees=3, chains=1, draws=10, tune=10, seed=3)


def _data(n=40, seed=0):
    df, tau, pi = bps.datasets.simulate_hmc20(n, seed)
    X = df[["x1", "x2", "x3"]].to_numpy()
    return X, df["y"].to_numpy(), df["z"].to_numpy(), pi, tau


def test_predict_is_the_cate_and_matches_bcf():
    """With the same data, propensity and seed the estimator's ``predict`` is ``bps.bcf``'s CATE posterior mean
    (the same draws), ``return_std`` its sd, ``predict_interval`` its interval, ``predict_outcome`` E[y | x, z]."""
    X, y, z, pi, _ = _data()
    est = BCFRegressor(**SMALL).fit(X, y, treatment=z, propensity=pi)
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(y=y, z=z, pi=pi)
    fit = bps.bcf("y ~ x0 + x1 + x2", frame, treatment="z", propensity="pi", **SMALL)
    new = frame.head(6)
    cate = fit.cate(new, level=0.8)
    np.testing.assert_array_equal(est.predict(X[:6], propensity=pi[:6]), cate["mean"].to_numpy())
    mean, sd = est.predict(X[:6], propensity=pi[:6], return_std=True)
    np.testing.assert_allclose(sd, fit.cate_draws(new).std(axis=0))
    np.testing.assert_array_equal(est.predict_interval(X[:6], level=0.8, propensity=pi[:6]),
                                  cate[["lower", "upper"]].to_numpy())
    np.testing.assert_array_equal(est.predict_outcome(X[:6], z[:6], propensity=pi[:6]),
                                  fit.predict(new)[["mean", "lower", "upper"]].to_numpy())
    assert isinstance(est.posterior_, bps.CausalFit) and est.n_features_in_ == 3
    with pytest.raises(DataError, match="give the propensity of the new rows"):
        est.predict(X[:2])


def test_params_clone_and_fitted_check():
    """``get_params``/``set_params`` see the bcf keywords, ``clone`` gives an unfitted copy with the same ones,
    an unknown keyword is a ``TypeError``, predicting before ``fit`` is ``NotFittedError``."""
    est = BCFRegressor(mu_trees=7, propensity_options={"trees": 5})
    params = est.get_params()
    assert params["mu_trees"] == 7 and params["tau_trees"] == 50 and params["tau_features"] is None
    assert params["propensity_options"] == {"trees": 5}
    est.set_params(tau_trees=4, draws=12)
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy is not est
    assert not hasattr(copy, "posterior_")
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        BCFRegressor(trees=10)
    with pytest.raises(NotFittedError):
        copy.predict(np.zeros((2, 3)))


def test_estimated_propensity_tau_features_and_names():
    """Without ``propensity=`` it is estimated (probit BART) and new rows need none; ``tau_features`` by name
    restricts the treatment forest to those columns of a DataFrame."""
    X, y, z, _, _ = _data(50, 1)
    frame = pd.DataFrame(X, columns=["age", "dose", "bmi"])
    est = BCFRegressor(tau_features=["dose"], propensity_options={"trees": 5, "draws": 20, "tune": 20}, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CommonSupportWarning)  # HMC20's targeted selection: some extreme pihat
        est.fit(frame, y, treatment=z.astype(bool))
    assert est.posterior_.tau.names == ["x1"]  # "dose" is column 1
    assert list(est.feature_names_in_) == ["age", "dose", "bmi"]
    pred = est.predict(frame.head(4))
    assert pred.shape == (4,) and np.isfinite(pred).all()


def test_bad_input():
    X, y, z, pi, _ = _data(30, 2)
    est = BCFRegressor(**SMALL)
    with pytest.raises(ArgumentError, match="needs treatment="):
        est.fit(X, y)
    with pytest.raises(DataError, match=r"treatment column 'z' must be binary 0/1"):
        est.fit(X, y, treatment=np.arange(30), propensity=pi)
    with pytest.raises(DataError, match="treatment must hold one value per row"):
        est.fit(X, y, treatment=z[:10], propensity=pi)
    with pytest.raises(DataError, match="propensity must be a 1-D array with one value per row"):
        est.fit(X, y, treatment=z, propensity=pi[:5])
    with pytest.raises(ArgumentError, match="tau_features holds 7"):
        BCFRegressor(tau_features=[7], **SMALL).fit(X, y, treatment=z, propensity=pi)
    with pytest.raises(DataError, match="treatment must be a 1-D array"):
        est.fit(X, y, treatment=np.stack([z, z], axis=1), propensity=pi)
    fitted = BCFRegressor(**SMALL).fit(X, y, treatment=z, propensity=pi)
    with pytest.raises(DataError, match="treatment must be a 1-D array with one value per row"):
        fitted.predict_outcome(X[:2], treatment=[1], propensity=pi[:2])
    estimated = BCFRegressor(**SMALL).fit(X, y, treatment=z)
    with pytest.raises(ArgumentError, match="estimated the propensity itself"):
        estimated.predict(X[:2], propensity=[0.9, 0.9])
