"""``bps.bart`` from the user's side: summary, predictions on the original scale, intervals,
variable activity, probit classification, errors, persistence, reproducibility, keywords and
accuracy on Friedman #1 (issue 3). Small fits so the file runs in seconds."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError


def friedman1(n: int, seed: int, p: int = 10, noise: float = 1.0):
    """Friedman #1: f = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5, x ~ U(0, 1)^p."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, p))
    f = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    df = pd.DataFrame(x, columns=[f"x{j + 1}" for j in range(p)])
    df["y"] = f + noise * rng.normal(size=n)
    return df, f


SMALL = dict(trees=20, chains=2, draws=150, tune=150, seed=5, progress=False)


@pytest.fixture(scope="module")
def small():
    df, f = friedman1(120, seed=1, p=6)
    fit = bps.bart("y ~ .", data=df, **SMALL)
    return df, f, fit


def test_summary_has_sigma_and_mean_leaves(small):
    _, _, fit = small
    table = fit.summary()
    assert {"sigma", "mean_leaves"} <= set(table.index)
    assert {"mean", "sd", "2.5%", "97.5%", "ess_bulk", "r_hat"} <= set(table.columns)
    # sigma on the original scale: noise sd is 1; 120 rows and 20 trees put it well inside (0.5, 2).
    assert 0.5 < table.loc["sigma", "mean"] < 2.0
    assert table.loc["mean_leaves", "mean"] >= 1.0
    assert table.loc["sigma", "2.5%"] <= table.loc["sigma", "mean"] <= table.loc["sigma", "97.5%"]


def test_predictions_follow_affine_maps_of_the_response(small):
    """y -> 1000 y + 5000 maps predictions (mean and interval bounds) the same way.

    The model standardises y by its range, so both fits sample the same standardised problem;
    the draws agree up to rounding unless a rounding difference flips one MH decision, after
    which they differ by Monte Carlo error (measured: they agree to 1e-11 with this seed).
    Tolerance: 0.5 on the original scale of the first fit, scaled by 1000 for the second: the
    posterior sd of f is about 0.85 here, so with an effective sample size of at least 50 per
    fit the MC error of a difference of means is at most 0.17 and 0.5 is about 3 of those."""
    df, _, fit = small
    df2 = df.copy()
    df2["y"] = 1000.0 * df["y"] + 5000.0
    fit2 = bps.bart("y ~ .", data=df2, **SMALL)
    new = df.head(25)
    p1 = fit.predict(new)
    p2 = fit2.predict(new)
    for col in ("mean", "lower", "upper"):
        np.testing.assert_allclose(p2[col].to_numpy(), 1000.0 * p1[col].to_numpy() + 5000.0, atol=500.0)
    s1, s2 = fit.summary(), fit2.summary()
    assert s2.loc["sigma", "mean"] == pytest.approx(1000.0 * s1.loc["sigma", "mean"], rel=0.1)
    # Predictions live on the scale of y, not the standardised one.
    assert abs(p2["mean"].mean() - df2["y"].head(25).mean()) < 0.2 * df2["y"].std()


def test_predictive_interval_wider_than_credible(small):
    df, _, fit = small
    cred = fit.predict(df.head(30))
    pred = fit.predict(df.head(30), kind="predictive")
    assert list(cred.columns) == ["mean", "lower", "upper"]
    assert np.all((pred["upper"] - pred["lower"]) > (cred["upper"] - cred["lower"]))
    assert np.all(cred["lower"] <= cred["mean"]) and np.all(cred["mean"] <= cred["upper"])
    # A 95% predictive interval with noise sd ~1 is at least 2 * 1.96 * 0.5 wide.
    assert np.all(pred["upper"] - pred["lower"] > 2.0)


def test_variable_activity(small):
    _, _, fit = small
    act = fit.variable_activity()
    assert list(act.index) == [f"x{j + 1}" for j in range(6)]
    assert list(act.columns) == ["mean", "lower", "upper"]
    assert act["mean"].sum() == pytest.approx(1.0)
    assert np.all(act["lower"] <= act["mean"] + 1e-12) and np.all(act["mean"] <= act["upper"] + 1e-12)
    # x6 is pure noise; x4 enters linearly with coefficient 10 (the largest single effect).
    assert act.loc["x4", "mean"] > act.loc["x6", "mean"]


def classification_data(n=200, seed=3):
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(-2, 2, n)
    x2 = rng.uniform(-2, 2, n)
    latent = 1.5 * x1 - 1.0 * (x2 > 0.5) + 0.5 * rng.normal(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "label": np.where(latent > 0, "malignant", "benign")})


PROBIT = dict(trees=20, chains=2, draws=150, tune=150, seed=9, progress=False)


def test_probit_on_string_response():
    df = classification_data()
    fit = bps.bart("label ~ x1 + x2", data=df, **PROBIT)
    prob = fit.predict(df, kind="prob")
    assert {"prob_benign", "prob_malignant", "class"} <= set(prob.columns)
    np.testing.assert_allclose(prob["prob_benign"] + prob["prob_malignant"], 1.0, atol=1e-12)
    assert set(prob["class"]) <= {"benign", "malignant"}
    assert np.all(prob["prob_malignant_lower"] <= prob["prob_malignant"])
    assert np.all(prob["prob_malignant"] <= prob["prob_malignant_upper"])
    # The latent noise sd 0.5 against a slope of 1.5 on U(-2, 2) makes ~90% of labels
    # predictable; training accuracy above 0.8 leaves room for the small fit.
    accuracy = (prob["class"].to_numpy() == df["label"].to_numpy()).mean()
    assert accuracy > 0.8, accuracy
    assert "sigma" not in fit.summary().index


def test_probit_on_bool_response():
    df = classification_data()
    df["label"] = df["label"] == "malignant"
    fit = bps.bart("label ~ x1 + x2", data=df, **PROBIT)
    prob = fit.predict(df.head(40), kind="prob")
    assert {"prob_False", "prob_True"} <= set(prob.columns)
    np.testing.assert_allclose(prob["prob_False"] + prob["prob_True"], 1.0, atol=1e-12)
    assert set(prob["class"]) <= {False, True}
    assert all(isinstance(c, (bool, np.bool_)) for c in prob["class"])
    accuracy = (prob["class"].to_numpy(dtype=bool) == df["label"].head(40).to_numpy()).mean()
    assert accuracy > 0.75


def test_three_classes_need_the_multinomial_model():
    """Three classes fit log-linear multinomial BART by default (issue 14); asking for probit
    is a clear error."""
    df = classification_data()
    df["label"] = np.where(df["x1"] > 1, "c", df["label"])
    kw = dict(trees=5, chains=1, draws=5, tune=5, progress=False)
    assert bps.bart("label ~ x1 + x2", data=df, **kw).config["leaf_model"] == "multinomial"
    with pytest.raises(ArgumentError, match="probit BART needs a binary response"):
        bps.bart("label ~ x1 + x2", data=df, link="probit", **kw)


def test_save_load_round_trip(small, tmp_path):
    df, _, fit = small
    path = tmp_path / "bart.nc"
    fit.to_netcdf(path)
    back = bps.load(path)
    for kind in ("mean", "predictive"):
        pd.testing.assert_frame_equal(back.predict(df.head(20), kind=kind), fit.predict(df.head(20), kind=kind))
    pd.testing.assert_frame_equal(back.summary(), fit.summary())
    assert back.config == fit.config


def test_same_seed_same_draws_whatever_the_threads():
    df, _ = friedman1(80, seed=2, p=5)
    kw = dict(trees=10, chains=2, draws=60, tune=40, seed=123, progress=False)
    a = bps.bart("y ~ .", data=df, threads=1, **kw)
    b = bps.bart("y ~ .", data=df, threads=2, **kw)
    for name in ("sigma", "n_leaves"):
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    for name in ("leaf_value", "split_var", "split_cut"):
        np.testing.assert_array_equal(a.tree_arrays()[name].values, b.tree_arrays()[name].values)
    c = bps.bart("y ~ .", data=df, threads=1, **{**kw, "seed": 124})
    assert not np.array_equal(a.posterior["sigma"].values, c.posterior["sigma"].values)


def test_keywords_from_the_issue_exist_with_their_defaults():
    params = inspect.signature(bps.bart).parameters
    defaults = {"trees": 200, "alpha": 0.95, "beta": 2.0, "k": 2.0, "nu": 3.0, "q": 0.9, "sigma_hat": None,
                "max_cuts": 100, "min_leaf_size": 5}
    for name in ("trees", "sampler", "chains", "draws", "tune", "thin", "seed", "alpha", "beta", "k", "nu", "q",
                 "sigma_hat", "max_cuts", "min_leaf_size", "moves", "progress", "na_action"):
        assert name in params, name
        assert params[name].kind == inspect.Parameter.KEYWORD_ONLY, name
    for name, value in defaults.items():
        assert params[name].default == value, name


def test_friedman1_accuracy():
    """Friedman #1 (p = 10, noise sd 1), n = 500, 50 trees, 1 chain of 500 kept draws after 500
    tuning sweeps: RMSE of the posterior mean against the noiseless f on 1,000 test points
    below 1.6.

    Reasoning: sd(f) is about 4.9 and OLS on the 10 raw predictors leaves RMSE about 2.4-2.6
    (the sin and quadratic terms); published BART results at n = 500 with 200 trees are around
    1.0-1.3 (CGM 2010, Fig. 6 region). 50 trees and a short run lose a little, so 1.6 is well
    above what a working BART gets here and well below what a broken one (e.g. a prior
    ignoring the data, or predictions off scale) would."""
    train, _ = friedman1(500, seed=11)
    test, f_test = friedman1(1000, seed=12)
    fit = bps.bart("y ~ .", data=train, trees=50, chains=1, draws=500, tune=500, seed=1, progress=False)
    pred = fit.predict(test.drop(columns="y"))
    rmse = float(np.sqrt(np.mean((pred["mean"].to_numpy() - f_test) ** 2)))
    print(f"\nFriedman #1 test RMSE {rmse:.3f}; sigma {fit.summary().loc['sigma', 'mean']:.3f}")
    assert rmse < 1.6


def test_probit_offset_on_imbalanced_response():
    """Pure-noise predictors and a 93% majority class: the average predicted probability of the
    majority class must match the base rate.

    Probit BART uses the offset Phi^-1(mean y) (BART's ``binaryOffset``): P(y=1) = Phi(offset + f).
    With no signal the posterior of f stays near 0, so the average of Phi(offset + f) over the
    rows is about the base rate; its posterior sd is about sqrt(.93 * .07 / 400) = 0.013, and
    0.04 is three of those. A sampler that fits the latent variables without the offset while
    the stored leaves add it double-counts the offset and predicts about 0.998 here."""
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"x1": rng.uniform(size=n), "x2": rng.uniform(size=n)})
    df["y"] = np.where(rng.uniform(size=n) < 0.9, "one", "zero")
    base = float((df["y"] == "one").mean())
    fit = bps.bart("y ~ .", data=df, trees=20, chains=2, draws=200, tune=200, seed=1, progress=False)
    prob = fit.predict(df, kind="prob")
    print(f"\nbase rate {base:.4f}, mean predicted {prob['prob_one'].mean():.4f}")
    assert abs(prob["prob_one"].mean() - base) < 0.04


def test_sigma_hat_is_the_statsmodels_ols_residual_sd():
    """residual_sd (numpy least squares) equals statsmodels' OLS residual sd, factors as
    indicators, including a rank-deficient design (a duplicated column). Tolerance 1e-10
    relative: two least-squares solvers on the same well-conditioned data."""
    import statsmodels.api as sm

    from bartpy_suite.models.bart import residual_sd

    rng = np.random.default_rng(7)
    n = 120
    x = np.column_stack([rng.normal(size=n), rng.integers(0, 4, n), rng.uniform(size=n)])
    y = 1.5 * x[:, 0] - (x[:, 1] == 2) + rng.normal(size=n)
    dummies = np.column_stack([(x[:, 1] == k).astype(float) for k in (1, 2, 3)])
    design = np.column_stack([np.ones(n), x[:, 0], dummies, x[:, 2]])
    expected = np.sqrt(sm.OLS(y, design).fit().scale)
    is_cat = np.array([False, True, False])
    assert residual_sd(x, y, is_cat) == pytest.approx(expected, rel=1e-10)
    x_dup = np.column_stack([x, x[:, 0]])
    with warnings.catch_warnings():  # statsmodels warns that the duplicated column is singular
        warnings.simplefilter("ignore")
        expected_dup = np.sqrt(sm.OLS(y, np.column_stack([design, x[:, 0]])).fit().scale)
    assert residual_sd(x_dup, y, np.array([False, True, False, False])) == pytest.approx(expected_dup, rel=1e-10)
