"""Soft-tree fits: the ``soft_trees`` group of the DataTree and soft-routed predictions.

The ``trees`` group holds each kept soft tree's structure in preorder (``node_var``: the split
variable for ``hmc_df``, the largest direction weight for ``hmc_dfi``; -1 at leaves) with leaf
values (regression, original scale) or leaf class probabilities (a draw from Dirichlet(soft
counts + alpha)). The ``soft_trees`` group adds the continuous split parameters on the same
``node`` axis: ``node_tau`` (threshold) and ``node_delta`` (node, predictor) (the direction;
one-hot for ``hmc_df``), and ``x_scaled`` (obs, predictor), the training predictors after
min-max scaling with the training minimum and range kept in the configuration.

Predictions average the soft-routed tree over the draws (paper eq. 3) at h_final (``Fit.predict``
through the soft leaf models of ``posterior/leaf_models.py``, which call ``samples``).
``paper_metric`` gives the paper's per-draw metric (argmax-leaf routing, spec 4).

Import rule: imports ``_kernels``, ``errors``, the sampler registry (each soft sampler's routing
mode) and this package's modules.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from .._kernels import soft_tree as st
from .._kernels.record import right_children, tree_roots
from .._kernels.soft_records import SoftTrees
from ..errors import ArgumentError
from ..samplers.registry import samplers_for
from .prediction_table import missing_rows

SOFT_GROUP = "soft_trees"


def attach(fit, nodes: dict, tree_nodes: np.ndarray, x_scaled: np.ndarray) -> None:
    """Add the ``soft_trees`` group to ``fit.idata`` and set ``variable_activity`` to the mean
    direction weight of each predictor over a draw's internal nodes (the share of splits on it
    for ``hmc_df``)."""
    chains, draws = tree_nodes.shape[:2]
    var = nodes["var"]
    p = x_scaled.shape[1]
    group = xr.Dataset(
        {"tree_nodes": (("chain", "draw", "tree"), tree_nodes), "node_tau": (("node",), nodes["value"]),
         "node_delta": (("node", "predictor"), nodes["prob"]), "x_scaled": (("obs", "predictor"), x_scaled)},
        coords={"chain": np.arange(chains), "draw": np.arange(draws), "predictor": fit.predictors})
    fit.idata[SOFT_GROUP] = xr.DataTree(group)
    counts = tree_nodes.reshape(-1)
    sample = np.repeat(np.arange(counts.size), counts)
    internal = var >= 0
    sums = np.zeros((counts.size, p))
    np.add.at(sums, sample[internal], nodes["prob"][internal])
    n_int = np.bincount(sample[internal], minlength=counts.size)[:, None]
    share = np.divide(sums, n_int, out=np.zeros_like(sums), where=n_int > 0)
    post = fit.idata["posterior"].to_dataset()
    post["variable_activity"] = post["variable_activity"].copy(data=share.reshape(chains, draws, p))
    fit.idata["posterior"] = xr.DataTree(post)


def routing_mode(fit) -> int:
    """The routing mode (``_kernels/soft_tree.MODE_DF`` or ``MODE_DFI``) of the fit's sampler.

    Read from the sampler registry: each soft-tree sampler's builder is a ``functools.partial``
    binding ``mode`` (``samplers/hmc.py``), so a new soft sampler needs no list here.
    """
    from ..samplers.registry import SAMPLERS  # the registry holds each soft sampler's mode

    name = fit.config["sampler"]
    builder = SAMPLERS[name].builders.get("soft_tree") if name in SAMPLERS else None
    mode = getattr(builder, "keywords", {}).get("mode")
    if mode is None:
        raise ArgumentError(f"the soft-tree fit's sampler {name!r} is not a registered soft-tree sampler; known: "
                            f"{samplers_for('soft_tree')}")
    return int(mode)


def samplers_with_mode(mode: int) -> list[str]:
    """Names of the registered soft-tree samplers that route with ``mode``."""
    from ..samplers.registry import SAMPLERS

    return [n for n in samplers_for("soft_tree") if getattr(SAMPLERS[n].builders["soft_tree"], "keywords",
                                                                  {}).get("mode") == mode]


def arrays(fit) -> dict:
    """The soft trees' arrays: ``var``, ``counts``, ``roots``, ``right``, ``tau``, ``delta`` and
    ``value`` (regression) or ``prob`` (classification)."""
    trees = fit.idata["trees"]
    soft = fit.idata[SOFT_GROUP]
    var = np.ascontiguousarray(trees["node_var"].values, dtype=np.int32)
    counts = np.asarray(trees["tree_nodes"].values, dtype=np.int64).reshape(-1)
    out = {"var": var, "counts": counts, "roots": tree_roots(counts), "right": right_children(var, counts),
           "tau": np.ascontiguousarray(soft["node_tau"].values, dtype=np.float64),
           "delta": np.ascontiguousarray(soft["node_delta"].values, dtype=np.float64)}
    if "node_value" in trees.dataset.data_vars:
        out["value"] = np.ascontiguousarray(trees["node_value"].values, dtype=np.float64)
    if "node_prob" in trees.dataset.data_vars:
        out["prob"] = np.ascontiguousarray(trees["node_prob"].values, dtype=np.float64)
    return out


def scaled_x(fit, newdata, na_action=None) -> tuple[np.ndarray, pd.Index, np.ndarray | None]:
    """The rows of ``newdata`` (None: the training rows) to predict, min-max scaled as in
    training, the index of every row, and the mask of the rows predicted (None: all).

    Soft splits have no missing-value rule, so a row with a missing predictor is an error, or
    left out under ``na_action="pass"`` (see ``prediction_table.missing_rows``).
    """
    if newdata is None:
        x = fit.idata[SOFT_GROUP]["x_scaled"].values
        return np.ascontiguousarray(x, dtype=np.float64), pd.RangeIndex(x.shape[0]), None
    x, index = fit.new_x(newdata)
    ok = missing_rows(x, index, fit.predictors, na_action, routes_missing=False)
    if ok is not None:
        x = x[ok]
    low = np.asarray(fit.config["x_min"])
    width = np.asarray(fit.config["x_range"])
    return np.ascontiguousarray((x - low) / width), index, ok


def samples(fit, x: np.ndarray) -> np.ndarray:
    """Soft-routed f(x) (samples, n) for regression or class probabilities (samples, n, K)."""
    a = arrays(fit)
    h = float(fit.config["h_final"])
    mode = routing_mode(fit)
    n_samples = a["counts"].size
    k = a["prob"].shape[1] if "prob" in a else 0
    out_f = np.zeros((n_samples, x.shape[0]) if k == 0 else (0, 0))
    out_p = np.zeros((n_samples, x.shape[0], k) if k else (0, 0, 0))
    value = a.get("value", np.zeros(a["var"].shape[0]))
    prob = a.get("prob", np.zeros((a["var"].shape[0], 0)))
    st.predict_samples(x, SoftTrees(a["var"], a["right"], a["roots"], a["counts"], a["tau"], a["delta"], h, mode),
                       value, prob, out_f, out_p)
    return out_p if k else out_f


def paper_metric(fit, newdata=None) -> np.ndarray:
    """Per-draw predictions by the paper's metric (spec 4): each row goes to its most probable
    leaf; regression returns that leaf's value (samples, n), classification the class code with the
    most soft training counts in that leaf (samples, n)."""
    a = arrays(fit)
    x = scaled_x(fit, newdata)[0]
    h = float(fit.config["h_final"])
    mode = routing_mode(fit)
    leaf = np.zeros((a["counts"].size, x.shape[0]), dtype=np.int64)
    trees = SoftTrees(a["var"], a["right"], a["roots"], a["counts"], a["tau"], a["delta"], h, mode)
    st.argmax_leaves(x, trees, leaf)
    if not fit.is_classification:
        return a["value"][leaf]
    k = len(fit.config["class_labels"])
    xt = np.ascontiguousarray(fit.idata[SOFT_GROUP]["x_scaled"].values, dtype=np.float64)
    ycls = np.ascontiguousarray(fit.idata["observed_data"]["y"].values, dtype=np.int64)
    counts = np.zeros((a["var"].shape[0], k))
    st.soft_class_counts(xt, ycls, k, trees, counts)
    return np.argmax(counts, axis=1)[leaf]
