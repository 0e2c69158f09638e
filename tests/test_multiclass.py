"""Multiclass BART (issue 14): log-linear multinomial BART (Murray 2021) through ``bps.bart``.

Exact checks: under the prior the class probabilities at any x are a softmax of sums of i.i.d.
log-Gamma leaf values (every tree puts x in exactly one leaf, whose value is a fresh prior draw
each sweep), and with every tree a stump the class probabilities' posterior is
Dirichlet(c + n_1, ..., c + n_K) (i.i.d. Gamma(c, d) factors normalised are Dirichlet(c, ..., c),
and the likelihood depends on the factors only through the probabilities).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models.bart import log_gamma_prior


def three_classes(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.uniform(size=n), rng.uniform(size=n)
    label = np.where(x1 < 0.33, "setosa", np.where(x2 < 0.5, "versicolor", "virginica"))
    flip = rng.uniform(size=n) < 0.1
    label[flip] = rng.choice(["setosa", "versicolor", "virginica"], size=flip.sum())
    return pd.DataFrame({"x1": x1, "x2": x2, "noise": rng.normal(size=n),
                         "Species": pd.Categorical(label, categories=["virginica", "setosa", "versicolor"])})


@pytest.fixture(scope="module")
def data():
    return three_classes()


@pytest.fixture(scope="module")
def fit(data):
    return bps.bart("Species ~ .", data=data, trees=20, chains=2, draws=200, tune=200, seed=3, progress=False)


def test_prior_calibration():
    """Each tree's mu = log gamma has mean 0 and the sum of m trees has sd 3.5/sqrt(2) at k = 2."""
    for trees in (1, 20, 200):
        c, d = log_gamma_prior(trees, 2.0)
        assert special.digamma(c) - np.log(d) == pytest.approx(0.0, abs=1e-9)
        assert np.sqrt(trees * special.polygamma(1, c)) == pytest.approx(3.5 / np.sqrt(2), rel=1e-9)
    c4, _ = log_gamma_prior(20, 4.0)
    assert np.sqrt(20 * special.polygamma(1, c4)) == pytest.approx(3.5 / np.sqrt(2) / 2, rel=1e-9)


def test_probabilities_labels_and_accuracy(fit, data):
    """Labels keep the category order; probabilities sum to one per draw and row; the fit
    recovers the rule (training accuracy at least 0.8 where 10% of labels are random, i.e.
    about 93% are predictable: the margin covers posterior uncertainty on 240 rows)."""
    assert fit.config["class_labels"] == ["virginica", "setosa", "versicolor"]
    assert fit.config["leaf_model"] == "multinomial"
    draws = fit.predict(data.head(30), kind="prob", samples=True)
    assert list(draws["class"].values) == ["virginica", "setosa", "versicolor"]
    np.testing.assert_allclose(draws.values.sum(axis=-1), 1.0, atol=1e-12)
    pred = fit.predict(data, kind="prob", level=0.9)
    assert {"prob_setosa", "prob_setosa_lower", "prob_setosa_upper", "class"} <= set(pred.columns)
    assert (pred["prob_setosa_lower"] <= pred["prob_setosa"]).all()
    assert (pred["class"] == data["Species"].astype(str)).mean() > 0.8
    assert fit.idata["trees"].sizes["node"] > 0 and fit.posterior["n_leaves"].sizes["tree"] == 3 * 20


def test_activity_per_class(fit):
    """x1 decides setosa, x2 separates the other two: within each class's trees the informative
    predictors take more than the noise column's share."""
    act = fit.variable_activity(by_class=True)
    assert act.index.names == ["class", "predictor"]
    np.testing.assert_allclose(act["mean"].groupby(level="class").sum(), 1.0, atol=1e-9)
    overall = fit.variable_activity()
    assert overall.loc["noise", "mean"] < min(overall.loc["x1", "mean"], overall.loc["x2", "mean"])
    with pytest.raises(ArgumentError, match="by_class=True needs a multinomial BART fit"):
        bps.bart("y ~ x1", data=pd.DataFrame({"x1": np.arange(20.0), "y": np.arange(20.0)}), trees=2, chains=1,
                 draws=5, tune=5, progress=False).variable_activity(by_class=True)


def test_save_load_predicts_exactly(fit, data, tmp_path):
    fit.to_netcdf(tmp_path / "mc.nc")
    back = bps.load(tmp_path / "mc.nc")
    pd.testing.assert_frame_equal(back.predict(data.head(25), kind="prob"), fit.predict(data.head(25), kind="prob"))


def test_link_option(data):
    two = data.assign(Species=np.where(data["Species"] == "setosa", "s", "o"))
    kw = dict(trees=5, chains=1, draws=20, tune=20, seed=1, progress=False)
    assert bps.bart("Species ~ .", data=two, **kw).config["leaf_model"] == "probit"
    assert bps.bart("Species ~ .", data=two, link="logit", **kw).config["leaf_model"] == "multinomial"
    with pytest.raises(ArgumentError, match=r"probit BART needs a binary response; this one has 3 classes"):
        bps.bart("Species ~ .", data=data, link="probit", **kw)
    with pytest.raises(ArgumentError, match=r"unknown link 'softmax'; valid options: 'auto', 'probit', 'logit'"):
        bps.bart("Species ~ .", data=data, link="softmax", **kw)


def test_prior_class_probabilities_match_direct_simulation(data):
    """likelihood=False: P(class 0 | x) at two rows is softmax_k(sum_t mu_kt) with mu_kt i.i.d.
    log-Gamma(c, d). Leaf values are redrawn from the prior every sweep, so kept draws are
    independent: a two-sample KS test against 20,000 direct draws, p > 1e-3 per row (fixed
    seeds; the two rows are tested separately)."""
    trees, draws = 4, 2000
    fit = bps.bart("Species ~ .", data=data, trees=trees, chains=1, draws=draws, tune=100, seed=11,
                   likelihood=False, progress=False)
    c, d = log_gamma_prior(trees, 2.0)
    rng = np.random.default_rng(12)
    mu = np.log(rng.gamma(c, 1.0 / d, size=(20000, 3, trees))).sum(axis=-1)
    direct = special.softmax(mu, axis=-1)[:, 0]
    sampled = fit.predict(data.iloc[[0, 7]], kind="prob", samples=True).values[0, :, :, 0]
    for row in range(2):
        p = stats.ks_2samp(sampled[:, row], direct).pvalue
        assert p > 1e-3, (row, p)


def test_stumps_give_the_dirichlet_posterior():
    """With one tree per class that cannot split (alpha ~ 0), the probabilities' posterior is
    Dirichlet(c + n_k): each marginal Beta(c + n_k, K c + n - c - n_k). Draws thinned by 5; the
    lag-1 autocorrelation of the thinned draws measured |r| <= 0.004 (0.026 unthinned), so a KS
    test at p > 1e-3 and a z-test of the mean (batch-means standard error, |z| < 4) apply."""
    rng = np.random.default_rng(21)
    n = 60
    df = pd.DataFrame({"x": rng.uniform(size=n), "y": rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])})
    fit = bps.bart("y ~ x", data=df, trees=1, chains=1, draws=4000, tune=500, thin=5, seed=22, alpha=1e-12,
                   progress=False)
    assert (fit.posterior["n_leaves"].values == 1).all()
    c, _ = log_gamma_prior(1, 2.0)
    probs = fit.predict(df.head(1), kind="prob", samples=True).values[0, :, 0, :]
    labels = fit.config["class_labels"]
    counts = df["y"].value_counts()
    for k, label in enumerate(labels):
        a, b = c + counts[label], 3 * c + n - c - counts[label]
        p = stats.kstest(probs[:, k], stats.beta(a, b).cdf).pvalue
        assert p > 1e-3, (label, p)
        batches = probs[:, k].reshape(40, -1).mean(axis=1)
        z = (probs[:, k].mean() - a / (a + b)) / (batches.std(ddof=1) / np.sqrt(40))
        assert abs(z) < 4.0, (label, z)


def test_multiclass_through_the_cli(data, tmp_path, capsys):
    from bartpy_suite.cli import main

    path = tmp_path / "species.csv"
    data.to_csv(path, index=False)
    out = tmp_path / "fit.nc"
    status = main(["fit", "Species ~ .", str(path), "--model", "bart", "--trees", "5", "--chains", "1", "--draws", "20",
                   "--tune", "20", "--no-progress", "--out", str(out)])
    assert status == 0
    assert "mean_leaves" in capsys.readouterr().out
    assert main(["predict", str(out), str(path), "--kind", "prob"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("prob_setosa,") and len(lines) == len(data) + 1
