"""Saved fits are small: ``to_netcdf`` leaves out the log-likelihood (which ``load`` recomputes)
and stores the trees' leaf parameters at the leaves only, and both changes lose nothing.

Sizes come from compressed files, so the bounds are ratios with wide margins, each stated with
the measured value it guards (``benchmarks/fit_file_sizes.py`` measures the full-size fits).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import xarray as xr

import bartpy_suite as bps
from bartpy_suite.posterior.netcdf_write import compact_encoding


@pytest.fixture(scope="module")
def cart_fit():
    df = bps.datasets.load("cgm1998")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=2, draws=300, tune=50, seed=1, progress=False,
                        check_mixing=False)


@pytest.fixture(scope="module")
def bart_fit():
    df = bps.datasets.load("wu2007")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bps.bart("y ~ .", data=df, trees=20, chains=2, draws=100, tune=20, seed=1, progress=False,
                        check_mixing=False)


def test_log_likelihood_is_left_out_by_default(cart_fit, tmp_path):
    """2 x 300 x 800 float64 log-likelihood values (3.8 MB raw; the file with them measured 3.4 MB)
    against trees of about 7 nodes per draw: the default file is under a tenth of the file with
    the group (0.046 measured on this fit, seed 1)."""
    small, full = tmp_path / "small.nc", tmp_path / "full.nc"
    cart_fit.to_netcdf(small)
    cart_fit.to_netcdf(full, log_likelihood=True)
    assert os.path.getsize(small) < 0.1 * os.path.getsize(full)
    back = bps.load(small)
    np.testing.assert_array_equal(back.idata["log_likelihood"]["y"].values,
                                  cart_fit.idata["log_likelihood"]["y"].values)
    np.testing.assert_array_equal(back.predict(kind="predictive").to_numpy(),
                                  cart_fit.predict(kind="predictive").to_numpy())


def test_leaf_values_at_leaves_only_save_space(bart_fit, tmp_path):
    """The trees group with node_value over all nodes (NaN at internal nodes, the layout in memory)
    against the file's leaves-only layout: zlib spends a sixth to a quarter of the column on the
    interleaved NaNs (ratio 0.84 measured on this fit, seed 1; 0.76 for node_value of a multinomial
    BART fit), so the leaves-only group is at least 10% smaller."""
    full = bart_fit.idata["trees"].to_dataset()
    full.to_netcdf(tmp_path / "full.nc", engine="netcdf4",
                   encoding=compact_encoding(xr.DataTree(full))["/"])
    bart_fit.to_netcdf(tmp_path / "fit.nc")
    with xr.open_datatree(tmp_path / "fit.nc") as tree:
        leaves = tree["trees"].to_dataset().load()
    assert leaves["node_value"].dims == ("leaf",)
    leaves.to_netcdf(tmp_path / "leaves.nc", engine="netcdf4", encoding=compact_encoding(xr.DataTree(leaves))["/"])
    assert os.path.getsize(tmp_path / "leaves.nc") < 0.9 * os.path.getsize(tmp_path / "full.nc")
    back = bps.load(tmp_path / "fit.nc")
    assert back.idata["trees"]["node_value"].equals(bart_fit.idata["trees"]["node_value"])
    np.testing.assert_array_equal(back.predict().to_numpy(), bart_fit.predict().to_numpy())
