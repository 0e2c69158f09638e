"""Assemble raw sampler output into an ArviZ-layout DataTree and wrap it in a ``Fit``.

Groups: ``posterior`` (per-draw scalars, padded tree arrays with ``tree`` and ``node`` dims,
``variable_activity``), ``sample_stats`` (move, accepted, log_posterior, weight),
``observed_data`` (y) and ``constant_data`` (binned training predictors and cut grids; the
model configuration and the design as JSON attributes: everything ``predict`` needs).
"""

from __future__ import annotations

import json

import arviz_base
import numpy as np

from .._kernels.cart_moves import MOVE_NAMES
from .fit import CONFIG_ATTR, DESIGN_ATTR, Fit


def variable_activity(split_var: np.ndarray, p: int) -> np.ndarray:
    """Share of split rules on each predictor per draw, from (chain, draw, tree, node) arrays.

    A draw without any split gets zeros.
    """
    chains, draws = split_var.shape[:2]
    flat = split_var.reshape(chains * draws, -1)
    counts = np.zeros((flat.shape[0], p))
    for v in range(p):
        counts[:, v] = (flat == v).sum(axis=1)
    total = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)
    return share.reshape(chains, draws, p)


def build_fit(draws: dict, *, binned, x: np.ndarray, y: np.ndarray, config: dict, design=None,
              extra_posterior: dict | None = None, extra_stats: dict | None = None) -> Fit:
    """Build the DataTree of a tree-model fit.

    Parameters
    ----------
    draws : dict of ndarray
        Per-draw arrays with leading (chain, draw) axes; tree arrays (chain, draw, tree, node),
        leaf values on the standardised scale.
    binned : BinnedPredictors
        Training grids.
    x, y : ndarray
        Training predictors (n, p) and response as passed to the model.
    config : dict
        Model configuration (JSON-serialisable); ``center``/``scale`` undo the standardisation.
    design : object, optional
        Formula design with ``to_json``.
    """
    names = list(config["predictors"])
    p = len(names)
    center, scale = float(config["center"]), float(config["scale"])
    classification = config["response_kind"] == "categorical"
    leaf_value = draws["leaf_value"] * scale + center
    posterior = {
        "n_leaves": draws["n_leaves"],
        "depth": draws["depth"],
        "split_var": draws["split_var"],
        "split_cut": draws["split_cut"],
        "left_child": draws["left"],
        "right_child": draws["right"],
        "variable_activity": variable_activity(draws["split_var"], p),
    }
    dims = {
        "split_var": ["tree", "node"],
        "split_cut": ["tree", "node"],
        "left_child": ["tree", "node"],
        "right_child": ["tree", "node"],
        "leaf_value": ["tree", "node"],
        "leaf_sigma": ["tree", "node"],
        "leaf_prob": ["tree", "node", "class"],
        "variable_activity": ["predictor"],
        "move": [],
        "x_codes": ["predictor", "obs"],
        "cuts": ["predictor", "cut"],
        "nbins": ["predictor"],
        "is_categorical": ["predictor"],
        "y": ["obs"],
    }
    coords = {"predictor": names}
    if classification:
        posterior["leaf_prob"] = draws["leaf_prob"]
        coords["class"] = [str(c) for c in config["class_labels"]]
    else:
        posterior["leaf_value"] = leaf_value
        if np.isfinite(draws["sigma"]).any():
            posterior["sigma"] = draws["sigma"] * scale
        if draws["leaf_sigma"].shape[-1] > 0:
            posterior["leaf_sigma"] = draws["leaf_sigma"] * scale
    if extra_posterior:
        posterior.update(extra_posterior)
    n_chains, n_draws = draws["n_leaves"].shape[:2]
    stats = {
        "move": draws["move"],
        "accepted": draws["accepted"],
        "log_posterior": draws["log_posterior"],
        "weight": np.ones((n_chains, n_draws)),
    }
    if extra_stats:
        stats.update(extra_stats)
    max_cuts = max([len(c) for c in binned.cuts] + [1])
    cuts = np.full((p, max_cuts), np.nan)
    for v, grid in enumerate(binned.cuts):
        cuts[v, : len(grid)] = grid
    constant = {
        "x_codes": binned.codes,
        "cuts": cuts,
        "nbins": binned.nbins,
        "is_categorical": binned.is_categorical.astype(np.int8),
    }
    y_obs = np.asarray(y)
    observed = {"y": y_obs.astype(np.int64) if classification else y_obs.astype(np.float64)}
    idata = arviz_base.from_dict(
        {"posterior": posterior, "sample_stats": stats, "observed_data": observed, "constant_data": constant},
        dims=dims,
        coords=coords,
    )
    idata["sample_stats"].attrs["move_names"] = json.dumps(list(MOVE_NAMES))
    attrs = {CONFIG_ATTR: json.dumps(config)}
    if design is not None:
        attrs[DESIGN_ATTR] = design.to_json()
    idata["constant_data"].attrs.update(attrs)
    return Fit(idata, design=design)
