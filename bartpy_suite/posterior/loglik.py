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

Import rule: numpy, scipy, xarray; the ``Fit`` is duck-typed (its prediction helpers).
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
    """log p(y_i | draw) of each training row, shape (chain, draw, obs)."""
    chains, draws = fit.posterior.sizes["chain"], fit.posterior.sizes["draw"]
    y = fit.idata["observed_data"]["y"].values
    if fit.config["model_type"] == "soft_tree":
        return _soft_pointwise(fit, y).reshape(chains, draws, -1)
    codes = fit._binned.codes
    if fit.is_classification:
        p = fit._class_prob_samples(codes)
        picked = np.take_along_axis(p, y.astype(np.int64)[None, :, None], axis=2)[:, :, 0]
        with np.errstate(divide="ignore"):
            out = np.log(picked)
    else:
        f = fit._f_samples(codes)
        sd = fit._noise_sd(codes)
        z = (y[None, :] - f) / sd
        out = -0.5 * z * z - np.log(sd) - 0.5 * np.log(2.0 * np.pi)
    return out.reshape(chains, draws, -1)


def log_likelihood_group(fit) -> xr.DataTree:
    """The ArviZ ``log_likelihood`` group: variable ``y`` (chain, draw, obs)."""
    values = pointwise_log_likelihood(fit)
    post = fit.posterior
    ds = xr.Dataset({"y": (("chain", "draw", "obs"), values)},
                    coords={"chain": post["chain"].values, "draw": post["draw"].values,
                            "obs": np.arange(values.shape[2])})
    return xr.DataTree(ds)


def _soft_pointwise(fit, y: np.ndarray) -> np.ndarray:
    """Soft trees: the training rows routed softly (RJHMC-Tree eq. 3's per-draw term)."""
    from . import soft

    values = soft.samples(fit, soft.scaled_x(fit, None)[0])
    if fit.is_classification:
        picked = np.take_along_axis(values, y.astype(np.int64)[None, :, None], axis=2)[:, :, 0]
        with np.errstate(divide="ignore"):
            return np.log(picked)
    sd = fit.posterior["sigma"].values.reshape(-1)[:, None]
    z = (y[None, :] - values) / sd
    return -0.5 * z * z - np.log(sd) - 0.5 * np.log(2.0 * np.pi)
