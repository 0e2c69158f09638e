"""``sampler_options={"store_rungs": True}`` of the ``tempered`` CART sampler: every rung's tree
structure at each kept draw, in the DataTree group ``rung_trees``.

* Rung 0 of the stored rung trees is the fit's own tree at every draw (split variables, cuts
  and shape), and the number of leaves of every stored rung tree is the ``rung_n_leaves``
  statistic the kernel records at the same draw.
* The target rung's draws (trees, leaf values, statistics) are bit-identical with and without
  the option, for the same seed: recording the structures consumes no random numbers.
* The stores start at one node per tree per draw here, so both the target store and the rung
  store grow mid-run (the kernel's "pending draw" path).
* Save/load keeps the group; bad values and BART give errors naming the option.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError
from bartpy_suite.samplers import single_tree, tempered


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(8)
    x1 = rng.uniform(0, 10, 150)
    x2 = rng.choice(["a", "b", "c", "d"], 150)
    y = np.where(x1 > 5, 2.0, 0.0) + (x2 == "a") + rng.normal(0, 0.4, 150)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


def _fit(df, store_rungs: bool, **extra):
    options = {"rungs": 5, "ladder": "geometric", **extra}
    if store_rungs is not None:
        options["store_rungs"] = store_rungs
    return bps.cart("y ~ x1 + x2", data=df, sampler="tempered", chains=2, draws=150, tune=60, seed=21,
                    sampler_options=options)


@pytest.fixture(scope="module")
def fits(df):
    with pytest.MonkeyPatch.context() as mp:  # start tiny so both stores must grow during the run
        mp.setattr(tempered, "INITIAL_NODES_PER_DRAW", 1)
        mp.setattr(single_tree, "INITIAL_NODES_PER_DRAW", 1)
        with_rungs = _fit(df, True)
    return with_rungs, _fit(df, None)


def test_rung_zero_is_the_fits_tree_and_leaves_match_the_statistic(fits):
    fit, _ = fits
    group = fit.idata["rung_trees"]
    assert group["tree_nodes"].dims == ("chain", "draw", "rung")
    assert group["tree_nodes"].shape == (2, 150, 5)
    assert set(group.data_vars) == {"tree_nodes", "node_var", "node_cut"}  # structure only: no leaf values
    rungs = fit.tree_arrays("rung_trees")
    assert rungs["split_var"].dims == ("chain", "draw", "rung", "node")
    assert "leaf_value" not in rungs
    own = fit.tree_arrays().isel(tree=0)
    width = own.sizes["node"]
    rung0 = rungs.isel(rung=0)
    for name in ("split_var", "split_cut", "left_child", "right_child"):
        np.testing.assert_array_equal(rung0[name].values[..., :width], own[name].values, err_msg=name)
    assert np.all(rung0["split_var"].values[..., width:] == -2)
    np.testing.assert_array_equal(group["tree_nodes"].values[..., 0], fit.idata["trees"]["tree_nodes"].values[..., 0])
    # Every rung's stored tree has the leaves the kernel counted at that draw, and hot rungs differ.
    leaves = (rungs["split_var"].values == -1).sum(axis=-1)
    stat = fit.idata["sample_stats"]["rung_n_leaves"].values
    np.testing.assert_array_equal(leaves, stat)
    np.testing.assert_array_equal(group["tree_nodes"].values, 2 * stat - 1)
    assert np.any(leaves[..., -1] != leaves[..., 0])
    # Internal nodes hold a predictor index, leaves -1: the flat store is consistent with the counts.
    var = group["node_var"].values
    assert var.shape[0] == int(group["tree_nodes"].values.sum())
    assert np.all((var == -1) | ((var >= 0) & (var < 2)))


def test_target_draws_identical_without_the_option(fits):
    a, b = fits
    assert "rung_trees" not in b.idata.children
    for name in ("n_leaves", "depth", "sigma"):
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values, err_msg=name)
    for name in ("log_posterior", "swap_accepted", "rung_n_leaves", "rung_log_target"):
        np.testing.assert_array_equal(a.idata["sample_stats"][name].values, b.idata["sample_stats"][name].values,
                                      err_msg=name)
    for name in ("tree_nodes", "node_var", "node_cut", "node_value"):
        np.testing.assert_array_equal(a.idata["trees"][name].values, b.idata["trees"][name].values, err_msg=name)


def test_save_load_keeps_rung_trees(fits, tmp_path):
    fit, _ = fits
    path = tmp_path / "rungs.nc"
    fit.to_netcdf(path)
    loaded = bps.load(path)
    before, after = fit.tree_arrays("rung_trees"), loaded.tree_arrays("rung_trees")
    for name in before.data_vars:
        np.testing.assert_array_equal(before[name].values, after[name].values, err_msg=name)
    assert after["split_var"].dims == ("chain", "draw", "rung", "node")


def test_tree_arrays_unknown_group(fits):
    _, plain = fits
    with pytest.raises(ArgumentError, match="no tree store 'rung_trees'.*stores: \\['trees'\\]"):
        plain.tree_arrays("rung_trees")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_store_rungs_must_be_bool(df, value):
    with pytest.raises(ArgumentError, match="'store_rungs' must be True or False"):
        bps.cart("y ~ .", data=df, sampler="tempered", chains=1, draws=5, tune=5,
                 sampler_options={"store_rungs": value})


def test_store_rungs_is_cart_only(df):
    with pytest.raises(ArgumentError, match="'store_rungs' is for CART"):
        bps.bart("y ~ .", data=df, sampler="tempered", chains=1, draws=5, tune=5, trees=3,
                 sampler_options={"store_rungs": True})
