"""Assemble the stacked draws of a sampler into an ArviZ-layout DataTree and wrap it in a ``Fit``.

Groups:

- ``posterior``: per-draw model quantities (``sigma``, ``n_leaves``, ``depth``, ordinal BART's
  ``cutpoints`` (chain, draw, cutpoint), ...), ``variable_activity`` (chain, draw, predictor) and,
  for DART fits (``sparse=True``), the split-variable weights ``split_probs`` (chain, draw,
  predictor) and their concentration ``sparse_alpha`` (chain, draw);
- ``sample_stats``: the sampler's statistics, named and dimensioned by its schema, plus
  ``log_posterior`` where the model records it and ``weight`` (uniform unless the sampler
  records one);
- ``trees``: the compact tree store (``_kernels/record.py``): flat preorder node arrays
  ``node_var``, ``node_cut``, ``node_value`` (original scale), ``node_sigma``, ``node_prob``
  over a ``node`` dimension, and ``tree_nodes`` (chain, draw, tree), the node count of each
  stored tree. Nothing is padded to the largest tree. The leaf parameters are NaN at internal
  nodes; files keep them at the leaves only (``Fit.to_netcdf``), and ``load`` restores them;
- one group per further store a sampler keeps (``StackedDraws.extra_stores``, e.g. the
  ``tempered`` sampler's ``rung_trees``): the structure only, ``node_var`` and ``node_cut`` over
  ``node`` and ``tree_nodes`` (chain, draw, <the store's tree dim>); ``Fit.tree_arrays(group)``
  pads it;
- ``log_likelihood``: ``y`` (chain, draw, obs), the pointwise log-likelihood of the training
  rows (``posterior/loglik.py``), unless the model's ``log_likelihood`` keyword leaves it out.
  ``Fit.to_netcdf`` leaves it out of the file by default and marks that the fit had it;
  ``bartpy_suite.load`` then recomputes it, bit-identical;
- ``observed_data`` (y) and ``constant_data`` (binned training predictors and cut grids; the
  model configuration and the design as JSON attributes: everything ``predict`` needs).
"""

from __future__ import annotations

import json
import warnings

import arviz_base
import numpy as np
import xarray as xr

from .._kernels.record import split_shares
from .fit import CONFIG_ATTR, DESIGN_ATTR, TREES_GROUP, Fit
from .leaf_models import CUTPOINT_DIM
from .loglik import wants_log_likelihood

#: Model quantities recorded per draw that belong in ``sample_stats`` (ArviZ's ``lp``-like).
MODEL_STATISTICS = ("log_posterior",)


def variable_activity(var: np.ndarray, tree_nodes: np.ndarray, p: int) -> np.ndarray:
    """Share of split rules on each predictor per draw, from the flat store.

    ``var`` holds the split variables of all stored nodes in (chain, draw, tree) order and
    ``tree_nodes`` (chain, draw, tree) the node counts. A draw without any split gets zeros.
    """
    chains, draws = tree_nodes.shape[:2]
    share = np.empty((chains * draws, p))
    split_shares(np.ascontiguousarray(var, dtype=np.int32), tree_nodes.reshape(chains * draws, -1), p, share)
    return share.reshape(chains, draws, p)


def build_fit(draws, *, statistics, coords: dict, binned, y: np.ndarray, config: dict, design=None,
              ess_method: str = "autocorrelation", finish=None) -> Fit:
    """Build the DataTree of a tree-model fit.

    Parameters
    ----------
    draws : StackedDraws
        ``posterior`` (chain, draw[, tree]) model quantities on the working scale (``sigma``
        is rescaled here), ``stats`` sampler statistics, ``nodes`` the flat tree store and
        ``tree_nodes`` its node counts (``samplers.draws``).
    statistics : sequence of Statistic
        The sampler's schema: name and extra dims of each statistic in ``draws.stats``.
    coords : dict
        Coordinate values of the statistics' extra dims.
    binned : BinnedPredictors
        Training grids and codes.
    y : ndarray
        Training response as passed to the model.
    config : dict
        Model configuration (JSON-serialisable); ``center``/``scale`` undo the standardisation.
    design : object, optional
        Formula design with ``to_json``.
    ess_method : {"autocorrelation", "kish"}
        The sampler's ``SamplerSpec.ess_method``, kept in ``sample_stats.attrs["ess_method"]``
        for ``Fit.summary``.
    finish : callable, optional
        ``finish(fit)`` adds model-specific groups (soft trees' split parameters) before the
        log-likelihood is computed from the fit.

    Raises
    ------
    ValueError
        When the sampler's statistics do not match its declared schema (a sampler bug).
    """
    names = list(config["predictors"])
    p = len(names)
    scale = float(config["scale"])
    classification = config["response_kind"] == "categorical"
    tree_nodes = draws.tree_nodes
    n_chains, n_draws, n_trees = tree_nodes.shape
    schema = {s.name: list(s.dims) for s in statistics}
    recorded = set(draws.stats)
    if recorded != set(schema):
        raise ValueError(f"sampler statistics {sorted(recorded)} differ from its schema {sorted(schema)}")

    posterior = dict(draws.posterior)
    stats = dict(draws.stats)
    for name in MODEL_STATISTICS:
        if name in posterior:
            stats[name] = posterior.pop(name)
    sigma = posterior.pop("sigma", None)
    if sigma is not None and not classification and np.isfinite(sigma).any():
        posterior["sigma"] = sigma * scale
    posterior["variable_activity"] = variable_activity(draws.nodes["var"], tree_nodes, p)
    stats.setdefault("weight", np.ones((n_chains, n_draws)))
    dims = {"variable_activity": ["predictor"], "split_probs": ["predictor"], "x_codes": ["predictor", "obs"],
            "cuts": ["predictor", "cut"],
            "nbins": ["predictor"], "is_categorical": ["predictor"], "y": ["obs"], **schema}
    for name, arr in posterior.items():
        if arr.ndim == 3 and name not in ("variable_activity", "split_probs"):
            dims[name] = ["tree"]
    used_coords = {"predictor": names}
    if "cutpoints" in posterior:  # ordinal BART: (chain, draw, cutpoint), labelled "a|b"
        dims["cutpoints"] = [CUTPOINT_DIM]
        used_coords[CUTPOINT_DIM] = list(config["cutpoint_labels"])
    for dim_list in schema.values():
        for dim in dim_list:
            if dim in coords:  # dims sized by the sampler's options (e.g. rungs) get integer labels
                used_coords[dim] = list(coords[dim])

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
    with warnings.catch_warnings():
        # arviz-base guesses that more chains than draws means misnamed dims; ours are named, and a
        # short run (draws < chains) would otherwise print this once per variable
        warnings.filterwarnings("ignore", message="Found chain dimension to be longer than draw", category=UserWarning)
        idata = arviz_base.from_dict(
            {"posterior": posterior, "sample_stats": stats, "observed_data": observed, "constant_data": constant},
            dims=dims,
            coords=used_coords,
        )
    idata[TREES_GROUP] = xr.DataTree(_tree_store(draws.nodes, tree_nodes, config, classification, n_trees))
    for group, (tree_dim, nodes, counts) in getattr(draws, "extra_stores", {}).items():
        idata[group] = xr.DataTree(xr.Dataset(
            {"tree_nodes": (("chain", "draw", tree_dim), counts), "node_var": (("node",), nodes["var"]),
             "node_cut": (("node",), nodes["cut"])},
            coords={"chain": np.arange(counts.shape[0]), "draw": np.arange(counts.shape[1]),
                    tree_dim: np.arange(counts.shape[2])}))
    for dim, values in coords.items():
        idata["sample_stats"].attrs[f"{dim}_names"] = json.dumps(list(values))
    idata["sample_stats"].attrs["ess_method"] = ess_method
    attrs = {CONFIG_ATTR: json.dumps(config)}
    if design is not None:
        attrs[DESIGN_ATTR] = design.to_json()
    idata["constant_data"].attrs.update(attrs)
    fit = Fit(idata, design=design)
    if finish is not None:
        finish(fit)
    if wants_log_likelihood(config.get("log_likelihood"), n_chains, n_draws, len(y_obs)):
        fit.add_log_likelihood()
    return fit


def _tree_store(nodes: dict, tree_nodes: np.ndarray, config: dict, classification: bool, n_trees: int) -> xr.Dataset:
    """The ``trees`` group: flat node arrays with leaf parameters on the original scale."""
    center, scale = float(config["center"]), float(config["scale"])
    data = {
        "tree_nodes": (("chain", "draw", "tree"), tree_nodes),
        "node_var": (("node",), nodes["var"]),
        "node_cut": (("node",), nodes["cut"]),
    }
    if classification and nodes["prob"].shape[1] > 0:
        data["node_prob"] = (("node", "class"), nodes["prob"])
    else:
        # Every tree contributes one leaf value per row, so the offset is spread over the trees.
        value = nodes["value"]  # the sampler's buffer, no longer used elsewhere: rescaled in place
        value *= scale
        value += center / n_trees
        data["node_value"] = (("node",), value)
        if nodes["sigma"].shape[0] > 0:
            data["node_sigma"] = (("node",), nodes["sigma"] * scale)
    coords = {"chain": np.arange(tree_nodes.shape[0]), "draw": np.arange(tree_nodes.shape[1])}
    if "node_prob" in data:
        coords["class"] = [str(c) for c in config["class_labels"]]
    return xr.Dataset(data, coords=coords)
