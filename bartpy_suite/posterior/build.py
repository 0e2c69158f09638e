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


def build_fit(trees: dict, *, scalars: dict, stats: dict, binned, y: np.ndarray, config: dict, design=None,
              extra_posterior: dict | None = None, extra_dims: dict | None = None) -> Fit:
    """Build the DataTree of a tree-model fit.

    Parameters
    ----------
    trees : dict of ndarray
        Tree arrays (chain, draw, tree, node): ``split_var``, ``split_cut``, ``left``, ``right``,
        ``leaf_value`` (standardised scale), ``leaf_sigma`` and ``leaf_prob`` (possibly empty).
    scalars : dict of ndarray
        Per-draw (chain, draw) quantities for the posterior group (``sigma`` on the
        standardised scale is rescaled here).
    stats : dict of ndarray
        Sampler statistics (chain, draw[, move]); a uniform ``weight`` is added if absent.
    binned : BinnedPredictors
        Training grids and codes.
    y : ndarray
        Training response as passed to the model.
    config : dict
        Model configuration (JSON-serialisable); ``center``/``scale`` undo the standardisation.
    design : object, optional
        Formula design with ``to_json``.
    extra_posterior, extra_dims : dict, optional
        More posterior variables and their non-sample dims.
    """
    names = list(config["predictors"])
    p = len(names)
    center, scale = float(config["center"]), float(config["scale"])
    classification = config["response_kind"] == "categorical"
    n_trees = trees["split_var"].shape[2]
    posterior = {
        **{k: v for k, v in scalars.items() if k != "sigma"},
        "split_var": trees["split_var"],
        "split_cut": trees["split_cut"],
        "left_child": trees["left"],
        "right_child": trees["right"],
        "variable_activity": variable_activity(trees["split_var"], p),
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
        "n_proposed": ["move"],
        "n_accepted": ["move"],
        "x_codes": ["predictor", "obs"],
        "cuts": ["predictor", "cut"],
        "nbins": ["predictor"],
        "is_categorical": ["predictor"],
        "y": ["obs"],
        **(extra_dims or {}),
    }
    coords = {"predictor": names}
    if classification and trees["leaf_prob"].shape[-1] > 0:
        posterior["leaf_prob"] = trees["leaf_prob"]
        coords["class"] = [str(c) for c in config["class_labels"]]
    else:
        # Every tree contributes one leaf value per row, so the offset is spread over the trees.
        posterior["leaf_value"] = trees["leaf_value"] * scale + center / n_trees
        if "sigma" in scalars and np.isfinite(scalars["sigma"]).any():
            posterior["sigma"] = scalars["sigma"] * scale
        if trees["leaf_sigma"].shape[-1] > 0:
            posterior["leaf_sigma"] = trees["leaf_sigma"] * scale
    if extra_posterior:
        posterior.update(extra_posterior)
    n_chains, n_draws = trees["split_var"].shape[:2]
    stats = dict(stats)
    stats.setdefault("weight", np.ones((n_chains, n_draws)))
    if "n_proposed" in stats:
        coords["move"] = list(MOVE_NAMES)
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
