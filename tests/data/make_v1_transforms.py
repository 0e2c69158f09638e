"""Write ``v1_transforms_cart.nc`` and ``v1_transforms_predictions.npz``: a CART fit whose design
was saved in version 1 of the design JSON (each predictor stored as a formulaic expression string,
stateful transforms as formulaic's state), with the design matrix and predictions that version made.

The committed files were written by this script at commit 4c428a3 (the last commit before the
version 2 design JSON), with::

    PYTHONPATH=$PWD python3 tests/data/make_v1_transforms.py

Run with later code it writes a version 2 file instead; keep the committed files as they are.
``tests/test_formula_safety.py`` checks that the current code loads the file, builds the same
design matrix and makes the same predictions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import bartpy_suite as bps

HERE = Path(__file__).parent
FORMULA = ("y ~ log(x1) + I(x1**2 - 3*x1) + np.sqrt(x1) + center(x1) + scale(`x b`) "
           "+ C(x2, levels=['D', 'C', 'B', 'A']) + exp(-x1/4) + log2(x1) + standardize(x1)")


def frame():
    """The training rows: 200 rows of cgm1998 with a column whose name needs backquotes."""
    cgm = bps.datasets.load("cgm1998").head(200)
    return cgm.assign(**{"x b": cgm["x1"] * 2.5 - 1.0})


def new_rows():
    """Rows to predict: 30 training rows and 3 made up (x1 outside the training range too)."""
    cgm = frame()
    extra = cgm.head(3).assign(x1=[0.25, 5.0, 12.0], x2=["A", "D", "B"])
    extra["x b"] = extra["x1"] * 2.5 - 1.0
    return pd.concat([cgm.head(30), extra], ignore_index=True)


def main():
    fit = bps.cart(FORMULA, data=frame(), sampler="cgm", chains=1, draws=60, tune=40, seed=7,
                   log_likelihood=False, check_mixing=False)
    fit.to_netcdf(HERE / "v1_transforms_cart.nc")
    new = new_rows()
    np.savez(HERE / "v1_transforms_predictions.npz",
             design_matrix=fit.design.transform(new),
             predictions=fit.predict(new, level=0.9).to_numpy())


if __name__ == "__main__":
    main()
