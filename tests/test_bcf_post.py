"""A bcf fit's posterior as a DataTree like BART's (issue 30, "Engine", second bullet): each forest's trees
in its own group, the scalar parameters as posterior variables, netCDF save/load checked like a BART file
(``posterior/bcf_file.py``), ``variable_activity`` and ``tree`` per forest, the trace and activity plots,
and the ``.npz`` archives of the first release still read.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, FitFileError
from bartpy_suite.posterior.bcf import CommonSupportWarning

DATA = Path(__file__).parent / "data"


def _frame(n=50, seed=4):
    df, _, pi = bps.datasets.simulate_hmc20(n, seed)
    return df.rename(columns={"x4": "xb", "x5": "xc"}).assign(ps=pi)


@pytest.fixture(scope="module")
def estimated():
    """A small fit whose propensity is estimated (so the file holds the propensity model's groups)."""
    df = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CommonSupportWarning)
        fit = bps.bcf("y ~ x1 + x2 + C(xc)", df.drop(columns=["ps"]), treatment="z", mu_trees=6, tau_trees=3,
                      chains=2, draws=8, tune=8, seed=2, propensity_options={"trees": 10, "draws": 20, "tune": 20})
    return df, fit


def test_the_datatree_holds_each_forest_and_the_scalars(estimated):
    """Groups mu_forest and tau_forest (trees and binned predictors), the scalars and per-forest activity in
    the posterior; ``to_arviz`` is the DataTree, which arviz-stats summarises."""
    _, fit = estimated
    idata = fit.to_arviz()
    assert {"posterior", "sample_stats", "observed_data", "constant_data", "mu_forest", "tau_forest"} <= \
        set(idata.children)
    post = idata["posterior"]
    for name in ("sigma", "b0", "b1", "mu_scale", "delta_mu"):
        assert post[name].dims == ("chain", "draw") and post[name].shape == (2, 8)
    assert list(post["mu_predictor"].values) == ["x1", "x2", "C(xc)", "propensity"]
    assert list(post["tau_predictor"].values) == ["x1", "x2", "C(xc)"]
    assert idata["mu_forest"]["tree_nodes"].shape == (2, 8, 6) and idata["tau_forest"]["tree_nodes"].shape == (2, 8, 3)
    np.testing.assert_array_equal(fit.params["sigma"].to_numpy(), post["sigma"].values.reshape(-1))
    from arviz_stats import summary

    table = summary(idata, var_names=["sigma"])
    assert float(table.loc["sigma", "mean"]) == pytest.approx(float(post["sigma"].mean()), abs=0.01)  # rounded


def test_netcdf_round_trip_is_exact_and_leaves_nothing_behind(estimated, tmp_path):
    """``save`` writes one netCDF file (no partial file left); ``bps.load`` gives the same effects, CATE on new
    rows (through the stored propensity model), predictions, activity and summary, exactly."""
    df, fit = estimated
    path = tmp_path / "effects.nc"
    fit.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["effects.nc"]
    back = bps.load(path)
    assert isinstance(back, bps.CausalFit) and back.propensity_fit is not None
    new = df.drop(columns=["y", "z"]).tail(5)
    pd.testing.assert_series_equal(back.ate(), fit.ate())
    pd.testing.assert_frame_equal(back.cate(new), fit.cate(new))
    pd.testing.assert_frame_equal(back.predict(df.head(4)), fit.predict(df.head(4)))
    pd.testing.assert_frame_equal(back.summary(), fit.summary())
    pd.testing.assert_frame_equal(back.variable_activity(forest="tau"), fit.variable_activity(forest="tau"))
    pd.testing.assert_index_equal(back.index, fit.index)
    assert str(back.tree(1, 3, 2, forest="tau")) == str(fit.tree(1, 3, 2, forest="tau"))


def test_text_index_and_user_propensity_round_trip(tmp_path):
    """Rows labelled by text keep their labels through a file; a user propensity column needs no stored model."""
    df = _frame(40, 5)
    df.index = [f"unit{i}" for i in range(40)]
    fit = bps.bcf("y ~ x1 + x2", df, treatment="z", propensity="ps", mu_trees=4, tau_trees=2, chains=1, draws=5,
                  tune=5, seed=0)
    fit.save(tmp_path / "f.nc")
    back = bps.load(tmp_path / "f.nc")
    assert back.propensity_fit is None and list(back.cate().index) == list(df.index)
    pd.testing.assert_frame_equal(back.cate(df.head(3)), fit.cate(df.head(3)))


def test_files_of_the_first_release_are_read():
    """``tests/data/bcf_v1.npz`` was written by the first release's ``CausalFit.save`` (``.npz``; see
    ``tests/data/make_bcf_npz_v1.py``): it is read into the DataTree and gives exactly the ATE draws, CATE and
    predictions that fit gave."""
    expected = np.load(DATA / "bcf_v1_expected.npz")
    fit = bps.load(DATA / "bcf_v1.npz")
    df, _, _ = bps.datasets.simulate_hmc20(60, 4)
    df = df.rename(columns={"x4": "xb", "x5": "xc"})
    np.testing.assert_array_equal(fit.ate_draws(), expected["ate_draws"])
    np.testing.assert_array_equal(fit.cate().to_numpy(), expected["cate"])
    np.testing.assert_array_equal(fit.cate(df.drop(columns=["y", "z"]).tail(3)).to_numpy(), expected["cate_new"])
    np.testing.assert_array_equal(fit.predict(df.head(4)).to_numpy(), expected["predict"])
    assert "mu_forest" in fit.idata.children


def _edit(path, out, group, name, change):
    tree = xr.open_datatree(path, engine="netcdf4").load()
    ds = tree[group].to_dataset(inherit=False)
    values = ds[name].values.copy()
    change(values)
    tree[group] = xr.DataTree(ds.assign({name: (ds[name].dims, values)}))
    tree.to_netcdf(out, engine="netcdf4")
    return out


@pytest.mark.parametrize("group, name, change, message", [
    ("posterior", "sigma", lambda v: v.__setitem__((0, 0), -1.0), r"posterior/sigma: holds a value that is not"),
    ("mu_forest", "node_cut", lambda v: v.__setitem__(slice(None), 120), r"mu_forest/node_cut: node \d+ has"),
    ("mu_forest", "node_var", lambda v: v.__setitem__(np.flatnonzero(v >= 0)[0], 9), r"mu_forest/node_var: node \d+ "
                                                                                      r"splits on 9"),
    ("mu_forest", "x_codes", lambda v: v.__setitem__((0, 0), 120), r"mu_forest/x_codes: predictor 0 holds codes"),
    ("constant_data", "z", lambda v: v.__setitem__(0, 2), r"constant_data/z: row 0 is not 0/1"),
    ("constant_data", "propensity", lambda v: v.__setitem__(3, 1.5), r"constant_data/propensity: row 3"),
    ("propensity/trees", "node_var", lambda v: v.__setitem__(np.flatnonzero(v == -1)[0], 0),
     r"propensity/trees/node_var"),
])
def test_edited_files_are_refused_naming_the_variable(estimated, tmp_path, group, name, change, message):
    """Each edit of a stored array the package reads is a ``FitFileError`` naming the file and the variable,
    at load, before any kernel reads it."""
    _, fit = estimated
    path = tmp_path / "f.nc"
    fit.save(path)
    edited = _edit(path, tmp_path / "edited.nc", group, name, change)
    with pytest.raises(FitFileError, match="edited.nc") as err:
        bps.load(edited)
    assert err.match(message)


def test_variable_activity_and_tree_per_forest(estimated):
    """``variable_activity(forest=)`` is BART's table (mean, lower, upper by predictor; the shares of a draw sum
    to 1 unless it has no split); without ``forest`` both forests' means side by side; ``tree(forest=)`` prints
    a tree whose leaves are its term on the response's scale; a bad forest is an ``ArgumentError``."""
    _, fit = estimated
    tau = fit.variable_activity(level=0.9, forest="tau")
    assert list(tau.columns) == ["mean", "lower", "upper"] and list(tau.index) == ["x1", "x2", "C(xc)"]
    assert ((tau["lower"] <= tau["mean"]) & (tau["mean"] <= tau["upper"])).all()
    shares = fit.posterior["variable_activity_mu"].values.reshape(16, -1).sum(axis=1)
    assert np.all(np.isclose(shares, 1.0) | (shares == 0.0))
    wide = fit.variable_activity()
    assert list(wide.columns) == ["mu", "tau"] and np.isnan(wide.loc["propensity", "tau"])
    assert wide.loc["x1", "tau"] == pytest.approx(tau.loc["x1", "mean"])
    text = str(fit.tree(chain=0, draw=2, tree=1, forest="mu"))
    assert text.startswith("mu tree 1 of chain 0, draw 2") and "root 50" in text
    # a stump's one leaf is s_y s_m theta
    store, s = fit.tau, 0 * 8 + 0
    stumps = np.flatnonzero(store.counts[s] == 1)
    if stumps.size:
        t = int(stumps[0])
        p = fit.params.iloc[s]
        value = store.value[store.roots[s, t]] * fit.scale * (p["b1"] - p["b0"])
        assert f"{value:.4g}" in str(fit.tree(0, 0, t, forest="tau"))
    with pytest.raises(ArgumentError, match="forest must be 'mu'"):
        fit.variable_activity(forest="sigma")
    with pytest.raises(ArgumentError, match=r"tree must be an integer in 0..2"):
        fit.tree(0, 0, 3, forest="tau")


def test_plots(estimated):
    """The trace plot reads the posterior group (sigma and the working parameters); the activity plot draws one
    bar per predictor of the chosen forest; the plots of one forest's f(x) refuse a bcf fit, saying what to use."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bartpy_suite.plotting import plot_trace, plot_tree, plot_variable_activity

    _, fit = estimated
    ax = plot_variable_activity(fit, forest="tau")
    assert len(ax.patches) == 3 and "tau forest" in ax.get_title()
    assert len(plot_variable_activity(fit).patches) == 4  # default: the mu forest, propensity included
    pc = plot_trace(fit, var_names=["sigma", "mu_scale"])
    assert pc.viz["trace"]["sigma"].sel(chain=1).item() is not None
    with pytest.raises(ArgumentError, match=r"plot_tree draws a CART, BART or soft-tree fit.*fit.tree\(forest="):
        plot_tree(fit)
    plt.close("all")


def test_random_edits_of_the_tree_arrays_never_reach_a_kernel_unchecked(estimated, tmp_path):
    """10 random single-value edits of the forests' integer arrays (node counts, split variables, cuts, codes;
    fixed seed): each file is refused with a ``FitFileError`` or, when the edit leaves a valid fit (e.g. a cut
    moved inside its grid), loads and predicts finite effects; none crashes or reads past an array."""
    df, fit = estimated
    path = tmp_path / "f.nc"
    fit.save(path)
    base = xr.open_datatree(path, engine="netcdf4").load()
    rng = np.random.default_rng(0)
    names = [(g, v) for g in ("mu_forest", "tau_forest") for v in ("tree_nodes", "node_var", "node_cut", "x_codes")]
    refused = 0
    for k in range(10):
        group, name = names[rng.integers(len(names))]
        tree = base.copy()
        ds = tree[group].to_dataset(inherit=False)
        values = ds[name].values.copy()
        flat = values.reshape(-1)
        info = np.iinfo(values.dtype)
        flat[rng.integers(flat.size)] = rng.integers(max(info.min, -5), min(info.max, 70))
        tree[group] = xr.DataTree(ds.assign({name: (ds[name].dims, values)}))
        edited = tmp_path / f"e{k}.nc"
        tree.to_netcdf(edited, engine="netcdf4")
        try:
            back = bps.load(edited)
        except FitFileError:
            refused += 1
            continue
        assert np.isfinite(back.cate(df.head(3)).to_numpy()).all()
    assert refused > 0
