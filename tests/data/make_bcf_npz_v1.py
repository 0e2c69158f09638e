"""Write ``bcf_v1.npz`` and ``bcf_v1_expected.npz``: a ``bps.bcf`` fit saved in the first bcf file
format (a NumPy ``.npz`` archive, ``"bartpy_suite.bcf/1"``, with the propensity model's netCDF bytes
inside), and the ATE draws and CATE (mean, lower, upper) that fit gave on its training rows and on
three new rows.

The committed files were written by this script at commit 51bdabc (the last commit whose
``CausalFit.save`` wrote ``.npz``), with::

    PYTHONPATH=$PWD python3 tests/data/make_bcf_npz_v1.py

Run with later code it fails (``save`` writes netCDF); keep the committed files as they are.
``tests/test_bcf_post.py`` checks that the current code reads the archive into the netCDF-backed
``CausalFit`` and gives the same effects.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

import bartpy_suite as bps

HERE = Path(__file__).parent


def frame():
    """60 rows of HMC20's design (``datasets.simulate_hmc20``, seed 4) with x4, x5 as xb, xc."""
    df, _, _ = bps.datasets.simulate_hmc20(60, 4)
    return df.rename(columns={"x4": "xb", "x5": "xc"})


def main() -> None:
    df = frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bps.bcf("y ~ x1 + x2 + C(xc)", df, treatment="z", mu_trees=6, tau_trees=3, chains=2, draws=8, tune=8,
                      seed=2, propensity_options={"trees": 10, "draws": 20, "tune": 20})
    fit.save(HERE / "bcf_v1.npz")
    new = df.drop(columns=["y", "z"]).tail(3)
    np.savez(HERE / "bcf_v1_expected.npz", ate_draws=fit.ate_draws(), cate=fit.cate().to_numpy(),
             cate_new=fit.cate(new).to_numpy(), predict=fit.predict(df.head(4)).to_numpy())


if __name__ == "__main__":
    main()
