"""Pointwise log-likelihood of the training rows per draw, the ``log_likelihood`` group that
``arviz_stats.loo`` and ``arviz_stats.compare`` read.

Regression: ``log N(y_i | f(x_i), sigma^2)`` with the draw's sigma (CART's
``mean_variance_shift``: the sigma of the leaf of row i). Classification: the log of the draw's
probability of the observed class (CART: the leaf's Dirichlet draw; probit BART: ``Phi(f)``;
multinomial BART: the softmax of the class forests; ordinal BART: Phi(c_{y+1} - eta) - Phi(c_y - eta)
with the draw's cutpoints).

Saved files leave the group out by default (``Fit.to_netcdf``: it is chains x draws x rows
float64 values, most of a typical file) and ``bartpy_suite.load`` recomputes it with this module
from the restored trees: the same code on the same float64 arrays, so the values are identical.

The values come from the fit's leaf model (``posterior/leaf_models.py``); this module builds the
group and decides when a fit stores it.

Import rule: numpy, xarray; the ``Fit`` is duck-typed (its ``leaf_model`` and ``posterior``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

#: Default size limit (chains x draws x rows) under which a fit stores its log-likelihood
#: (``log_likelihood=None``): 10 million float64 values, 80 MB.
AUTO_MAX_VALUES = 10_000_000
GROUP = "log_likelihood"


def wants_log_likelihood(option, chains: int, draws: int, rows: int) -> bool:
    """Whether a fit stores its log-likelihood: ``option`` True/False, or None = below ``AUTO_MAX_VALUES``."""
    if option is None:
        return chains * draws * rows <= AUTO_MAX_VALUES
    return bool(option)


def pointwise_log_likelihood(fit) -> np.ndarray:
    """log p(y_i | draw) of each training row, shape (chain, draw, obs), from the fit's leaf model
    (``LeafModel.pointwise_log_likelihood``)."""
    chains, draws = fit.posterior.sizes["chain"], fit.posterior.sizes["draw"]
    return fit.leaf_model.pointwise_log_likelihood().reshape(chains, draws, -1)


def log_likelihood_group(fit) -> xr.DataTree:
    """The ArviZ ``log_likelihood`` group: variable ``y`` (chain, draw, obs)."""
    values = pointwise_log_likelihood(fit)
    post = fit.posterior
    ds = xr.Dataset({"y": (("chain", "draw", "obs"), values)},
                    coords={"chain": post["chain"].values, "draw": post["draw"].values,
                            "obs": np.arange(values.shape[2])})
    return xr.DataTree(ds)
