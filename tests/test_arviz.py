"""ArviZ round trip on ``fit.idata``: arviz-stats' summary, ESS, R-hat, LOO and comparison, and
arviz-plots' trace, rank and forest plots (their drawn data checked against the draws)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import bartpy_suite as bps

azs = pytest.importorskip("arviz_stats")
pytest.importorskip("xarray_einstats")

QUIET = {"progress": False, "check_mixing": False}


@pytest.fixture(scope="module")
def cart_fit():
    df = bps.datasets.load("cgm1998")
    return bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=2, draws=200, tune=200, seed=1, **QUIET)


@pytest.fixture(scope="module")
def bart_fit():
    df = bps.datasets.load("cgm1998")
    return bps.bart("y ~ x1 + x2", data=df, trees=10, chains=2, draws=100, tune=50, seed=1, **QUIET)


def test_arviz_summary_runs_silently_and_agrees_with_fit_summary(cart_fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = azs.summary(cart_fit.idata)
        ess = cart_fit.idata.azstats.ess()
        rhat = azs.rhat(cart_fit.idata)
    ours = cart_fit.summary()
    for name in ("sigma", "n_leaves", "depth"):
        # both are arviz-stats' rank-normalised bulk ESS and split R-hat of the same draws
        assert ess[name].item() == pytest.approx(ours.loc[name, "ess_bulk"], rel=1e-9)
        assert rhat[name].item() == pytest.approx(ours.loc[name, "r_hat"], rel=1e-9)
        assert table.loc[name, "mean"] == pytest.approx(ours.loc[name, "mean"], abs=0.01)  # rounded to 2 digits
    assert "variable_activity[x1]" in table.index
    assert not any(name.startswith(("node_", "tree_nodes")) for name in table.index)


def test_arviz_summary_of_bart_and_of_an_old_file_is_silent(bart_fit):
    from pathlib import Path

    old = bps.load(Path(__file__).parent / "data" / "v0_1_cart_mvs.nc")  # padded trees in its posterior
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bart_table = azs.summary(bart_fit.idata)
        old_table = azs.summary(old.idata)
    assert "sigma" in bart_table.index and "mean_leaves" in bart_table.index
    assert not any(name.startswith(("split_", "leaf_", "left_", "right_")) for name in old_table.index)
    assert "n_leaves" in old_table.index


def test_log_likelihood_group_is_the_pointwise_normal_density(cart_fit):
    ll = cart_fit.idata["log_likelihood"]["y"]
    assert ll.dims == ("chain", "draw", "obs")
    f = cart_fit.predict(samples=True).values  # (chain, draw, obs) draws of f(x_i)
    sigma = cart_fit.posterior["sigma"].values[:, :, None]
    y = cart_fit.idata["observed_data"]["y"].values
    np.testing.assert_allclose(ll.values, stats.norm.logpdf(y, loc=f, scale=sigma), rtol=1e-10)


def test_log_likelihood_of_classification_is_log_prob_of_observed_class():
    df = bps.datasets.load("cgm1998")
    df = df.assign(high=np.where(df["y"] > 5, "yes", "no"))
    fit = bps.cart("high ~ x1 + x2", data=df, sampler="cgm", chains=1, draws=50, tune=50, seed=2, **QUIET)
    prob = fit.predict(kind="prob", samples=True)  # (chain, draw, obs, class)
    codes = fit.idata["observed_data"]["y"].values
    expected = np.log(np.take_along_axis(prob.values, codes[None, None, :, None], axis=3)[..., 0])
    np.testing.assert_allclose(fit.idata["log_likelihood"]["y"].values, expected, rtol=1e-12)


def test_loo_and_compare(cart_fit, bart_fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto k warnings of short chains; a pandas deprecation inside compare
        loo = azs.loo(cart_fit.idata)
        table = azs.compare({"cart": cart_fit.idata, "bart": bart_fit.idata})
    # elpd_loo is at most the log pointwise predictive density (p_loo >= 0 up to noise)
    lppd = np.log(np.exp(cart_fit.idata["log_likelihood"]["y"].values).mean(axis=(0, 1))).sum()
    assert np.isfinite(loo.elpd) and loo.elpd < lppd
    assert loo.n_data_points == 800
    assert set(table.index) == {"cart", "bart"}
    assert table["rank"].min() == 0


def test_log_likelihood_keyword_and_saved_files(cart_fit, tmp_path):
    df = bps.datasets.load("cgm1998")
    off = bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=1, draws=20, tune=10, seed=1, log_likelihood=False,
                   **QUIET)
    assert "log_likelihood" not in off.idata.children
    added = off.add_log_likelihood()
    assert added["y"].shape == (1, 20, 800)
    cart_fit.to_netcdf(tmp_path / "fit.nc")
    loaded = bps.load(tmp_path / "fit.nc")
    np.testing.assert_array_equal(loaded.idata["log_likelihood"]["y"].values,
                                  cart_fit.idata["log_likelihood"]["y"].values)


def test_auto_log_likelihood_follows_the_size_limit(monkeypatch):
    from bartpy_suite.posterior import loglik

    assert loglik.wants_log_likelihood(None, 4, 1000, 2500)
    assert not loglik.wants_log_likelihood(None, 4, 1000, 2501)
    assert loglik.wants_log_likelihood(True, 4, 10**6, 10**6)
    assert not loglik.wants_log_likelihood(False, 1, 1, 1)


def test_arviz_plots_trace_rank_forest(cart_fit):
    pytest.importorskip("matplotlib")
    azp = pytest.importorskip("arviz_plots")
    import matplotlib.pyplot as plt

    idata = cart_fit.idata
    sigma = cart_fit.posterior["sigma"].values
    trace = azp.plot_trace(idata, var_names=["sigma", "n_leaves"], backend="matplotlib")
    for chain in (0, 1):
        line = trace.viz["trace"]["sigma"].sel(chain=chain).item()
        np.testing.assert_allclose(line.get_ydata(), sigma[chain])
        line = trace.viz["trace"]["n_leaves"].sel(chain=chain).item()
        np.testing.assert_allclose(line.get_ydata(), cart_fit.posterior["n_leaves"].values[chain])
    rank = azp.plot_rank(idata, var_names=["sigma"], backend="matplotlib")
    assert rank.viz["ecdf_lines"]["sigma"].sizes["chain"] == 2
    forest = azp.plot_forest(idata, var_names=["sigma"], backend="matplotlib")
    for chain in (0, 1):
        point = forest.viz["point_estimate"]["sigma"].sel(chain=chain).item().get_offsets()[0, 0]
        assert point == pytest.approx(sigma[chain].mean())
        trunk = forest.viz["trunk"]["sigma"].sel(chain=chain).item().get_xdata()
        np.testing.assert_allclose(trunk, np.quantile(sigma[chain], [0.25, 0.75]))
    plt.close("all")
