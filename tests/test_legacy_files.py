"""Fits saved by bartpy_suite 0.1 (before the compact draw store; files in tests/data written by
commit 81212aa, with the predictions that version made) load and predict as before, to the last
bits that depend on the CPU's vector width."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import bartpy_suite as bps
from bartpy_suite import datasets

DATA = Path(__file__).parent / "data"
EXPECTED = np.load(DATA / "v0_1_predictions.npz")
# Predictions are means and quantiles over draws, and numpy blocks the sums of its reductions by
# the vector width of the CPU (AVX-512 or not), so their last bit differs between machines (1 ulp,
# seen on an AMD EPYC). Any change of a draw moves them by orders of magnitude more than RTOL.
RTOL = 1e-12


def assert_same(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=0)


def test_mean_variance_cart(cgm):
    fit = bps.load(DATA / "v0_1_cart_mvs.nc")
    assert "trees" in fit.idata.children and "split_var" not in fit.posterior
    assert_same(fit.predict(cgm.head(20), kind="predictive").to_numpy(), EXPECTED["cart_mvs"])
    assert str(fit.map_tree()).startswith("MAP tree")


def test_classification_cart(cgm):
    fit = bps.load(DATA / "v0_1_cart_classification.nc")
    assert_same(fit.predict(cgm.head(20), kind="prob").iloc[:, :-1].to_numpy(), EXPECTED["classification"])


def test_bart_and_resave(tmp_path):
    wu = datasets.load("wu2007")
    fit = bps.load(DATA / "v0_1_bart.nc")
    assert_same(fit.predict(wu.head(20)).to_numpy(), EXPECTED["bart"])
    fit.to_netcdf(tmp_path / "new.nc")
    assert_same(bps.load(tmp_path / "new.nc").predict(wu.head(20)).to_numpy(), EXPECTED["bart"])
