"""Saving and reading a bcf fit (``CausalFit``): the package's netCDF format, checked at load like a BART
fit's (``posterior/file_check.py``), and the ``.npz`` archives of the first bcf release.

A file holds the fit's DataTree (``posterior/bcf.py``) with each forest's leaf values kept at its
leaves only (``fit._leaves_only``, over a ``leaf`` dim) and, when the propensity was estimated, the
probit BART propensity fit's own groups under ``/propensity`` (written as ``Fit.to_netcdf`` writes
them, without their log-likelihood). Nothing is evaluated while reading: ``load_causal`` checks every
stored array the package reads before any kernel sees it, and an edited or damaged file is one
``FitFileError`` naming the file, the first bad array (``group/variable``) and what is wrong:

* the configuration (model type ``bcf``, the treatment, ``center``/``scale``, tree counts, the
  propensity's clipping) and both designs (their predictors are the forests' less ``propensity``);
* ``posterior``: the scalar draws finite (sigma > 0, delta > 0), the activity shares in [0, 1];
* each forest group as a BART fit's trees and constant data (``file_check._Checker``: node counts,
  whole preorder trees, split variables and cut indices inside the forest's predictors and grids,
  codes inside their bins), leaf values finite, trees per draw as the configuration says;
* ``constant_data``: z 0/1, propensities in (0, 1), weights finite and >= 0; the random effects'
  arrays when the configuration has them (``NormalRandomEffects.check_file``);
* the propensity fit: ``file_check.check_fit_tree``, the whole check of a BART file.

``.npz`` archives (``"bartpy_suite.bcf/1"``) written before the netCDF format are read into the same
DataTree and pass the same check; they are read without pickle.

Import rule: numpy, pandas, xarray, netCDF4 (only to list a file's groups) and this package's
``errors``, ``_binning`` and ``posterior`` modules; the design reader is passed in.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .._binning import BinnedPredictors
from ..errors import FitFileError
from . import file_check
from .bcf import DESIGN_ATTRS, FOREST_GROUPS, FORESTS, PARAM_VARS, CausalFit, build_causal_idata
from .file_check import _Bad, _Checker, _error, _fail, _finite_number
from .fit import CONFIG_ATTR, LEAF_DIM, LOG_LIKELIHOOD_ATTR, _leaves_only, _tree_to_write
from .netcdf_write import write_tree_atomically

#: The group holding the propensity fit's groups in a file.
PROPENSITY_GROUP = "propensity"
#: The legacy ``.npz`` format's name.
NPZ_FORMAT = "bartpy_suite.bcf/1"


def is_causal_file(path) -> bool:
    """Whether ``path`` is a netCDF file with the groups of a bcf fit (read from the file's metadata only);
    False for anything else, which ``file_check.load_fit`` then reads or refuses."""
    try:
        import netCDF4

        with netCDF4.Dataset(os.fspath(path), "r") as ds:
            return all(FOREST_GROUPS[name] in ds.groups for name in FORESTS)
    except Exception:  # not netCDF, missing, a folder: load_fit gives the error
        return False


def save_causal(fit: CausalFit, path) -> None:
    """Write ``fit`` to ``path`` (module docstring) with :func:`.netcdf_write.write_tree_atomically`: a
    temporary name in the same folder, then a rename, so a failure leaves nothing half-written and an existing
    file untouched. It raises what that function raises (a folder or a missing folder, a file that cannot be
    written), documented there once.
    """
    groups = {}
    for node in fit.idata.subtree:
        if node.path == "/":
            continue
        ds = node.to_dataset(inherit=False)
        if node.name in FOREST_GROUPS.values():
            ds = _leaves_only(ds)
        groups[node.path] = ds
    if fit.propensity_fit is not None:
        for node in _tree_to_write(fit.propensity_fit.idata, False).subtree:
            if node.path == "/":
                continue
            ds = node.to_dataset(inherit=False)
            if node.path == "/constant_data":  # it is not recomputed: the propensity fit only predicts
                ds = ds.copy(deep=False)
                ds.attrs = {k: v for k, v in ds.attrs.items() if k != LOG_LIKELIHOOD_ATTR}
            groups[f"/{PROPENSITY_GROUP}{node.path}"] = ds
    write_tree_atomically(xr.DataTree.from_dict(groups), path, "effects.nc")


def load_causal(path, design_from_json: Callable[[str], object]) -> CausalFit:
    """Read, check and rebuild a bcf fit written by ``CausalFit.save``.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    FitFileError
        When the file is unreadable or fails the checks (module docstring), naming the first bad array.
    """
    path = os.fspath(path)
    tree = file_check.open_fit_file(path)
    propensity_fit = None
    if PROPENSITY_GROUP in tree.children:
        sub = xr.DataTree.from_dict({node.path[len(PROPENSITY_GROUP) + 1:]: node.to_dataset(inherit=False)
                                     for node in tree[PROPENSITY_GROUP].subtree if node.path != f"/{PROPENSITY_GROUP}"})
        propensity_fit = file_check.check_fit_tree(sub, path, design_from_json, where=PROPENSITY_GROUP)
        tree = tree.copy()
        del tree[PROPENSITY_GROUP]
    return _finish(tree, path, design_from_json, propensity_fit)


def _finish(tree: xr.DataTree, path: str, design_from_json, propensity_fit) -> CausalFit:
    """Check the bcf groups of ``tree`` and build the fit."""
    try:
        config = check_causal_tree(tree)
        tree = _expand_forest_leaves(tree)
    except _Bad as bad:
        raise _error(path, bad.where, bad.what) from None
    if config.get("propensity_column") is None and propensity_fit is None:
        raise _error(path, PROPENSITY_GROUP, "group missing (the propensity was estimated: its model predicts new "
                                             "rows)")
    attrs = tree["constant_data"].attrs
    designs = {}
    for name in FORESTS:
        where = f"constant_data.attrs[{DESIGN_ATTRS[name]!r}]"
        try:
            designs[name] = design_from_json(attrs[DESIGN_ATTRS[name]])
        except Exception as exc:  # whatever the reader makes of a damaged design, the file is at fault
            raise _error(path, where, str(exc)) from None
        expected = list(tree["posterior"][f"{name}_predictor"].values.astype(str))
        if name == "mu":
            expected = expected[:-1]  # the propensity is the mu forest's last predictor, not the design's
        if list(designs[name].predictors) != expected:
            raise _error(path, where, f"predictors {list(designs[name].predictors)} differ from the forest's "
                                      f"{expected}")
        levels = designs[name].n_levels
        nbins = tree[FOREST_GROUPS[name]]["nbins"].values
        is_cat = tree[FOREST_GROUPS[name]]["is_categorical"].values.astype(bool)
        for v, (cat, k) in enumerate(zip(designs[name].is_categorical, levels)):
            if bool(cat) != bool(is_cat[v]) or (cat and k != nbins[v]):
                raise _error(path, where, f"predictor {v} does not match {FOREST_GROUPS[name]}/nbins and "
                                          "is_categorical")
    return CausalFit(tree, designs, propensity_fit)


def _expand_forest_leaves(tree: xr.DataTree) -> xr.DataTree:
    """Each forest's ``node_value`` back on the node axis (NaN at internal nodes) when the file keeps it
    over the ``leaf`` dim (``fit._leaves_only``)."""
    out = tree.copy()
    for name in FORESTS:
        group = FOREST_GROUPS[name]
        ds = tree[group].to_dataset(inherit=False)
        if ds["node_value"].dims != (LEAF_DIM,):
            continue
        leaf = np.asarray(ds["node_var"].values) < 0
        full = np.full(leaf.shape, np.nan)
        full[leaf] = ds["node_value"].values
        out[group] = xr.DataTree(ds.drop_vars("node_value").assign(node_value=(("node",), full)))
    return out


def check_causal_tree(tree: xr.DataTree) -> dict:
    """Check a bcf DataTree (module docstring) as read from a file, leaf values over ``leaf`` or ``node``.

    Returns
    -------
    dict
        The parsed configuration.

    Raises
    ------
    file_check._Bad
        The first failed check (``where``, ``what``); callers turn it into a ``FitFileError``.
    """
    for name in ("posterior", "sample_stats", "observed_data", "constant_data") + tuple(FOREST_GROUPS.values()):
        if name not in tree.children:
            _fail(name, "group missing")
    checker = _Checker(tree)
    checker.coordinates()
    config = _config(checker)
    for name in PARAM_VARS:
        v = checker.array("posterior", name, "float", ("chain", "draw"))
        if not np.isfinite(v).all() or (name in ("sigma", "delta_mu") and not (v > 0).all()):
            _fail(f"posterior/{name}", "holds a value that is not finite" + (" and > 0" if name in ("sigma", "delta_mu")
                                                                             else ""))
    sizes = checker.sizes
    if sizes["chain"] < 1 or sizes["draw"] < 1:
        _fail("posterior", "no draws")
    y = checker.array("observed_data", "y", "float", ("obs",))
    if not np.isfinite(y).all():
        _fail("observed_data/y", f"row {checker.first(~np.isfinite(y))} is not finite")
    z = checker.array("constant_data", "z", "int", ("obs",))
    if ((z != 0) & (z != 1)).any():
        _fail("constant_data/z", f"row {checker.first((z != 0) & (z != 1))} is not 0/1")
    pi = checker.array("constant_data", "propensity", "float", ("obs",))
    if not ((pi > 0) & (pi < 1)).all():
        _fail("constant_data/propensity", f"row {checker.first(~((pi > 0) & (pi < 1)))} is not strictly between 0 "
                                          "and 1")
    w = checker.array("constant_data", "w", "float", ("obs",))
    if not (np.isfinite(w) & (w >= 0)).all():
        _fail("constant_data/w", "holds a weight that is not finite and >= 0")
    rows = tree["constant_data"].dataset
    if "row_index" not in rows.data_vars or rows["row_index"].dims != ("obs",) or \
            rows["row_index"].dtype.kind not in ("i", "U", "O", "S"):
        _fail("constant_data/row_index", "missing, or not integers or text over obs")
    stats = tree["sample_stats"].dataset
    for name in ("n_proposed", "n_accepted"):
        checker.array("sample_stats", name, "int", ("chain", "draw", "move"))
    weight = checker.array("sample_stats", "weight", "float", ("chain", "draw"))
    if not (np.isfinite(weight) & (weight >= 0)).all() or not weight.sum() > 0:
        _fail("sample_stats/weight", "holds a weight that is not finite and >= 0, or every weight is 0")
    del stats
    for name in FORESTS:
        _check_forest(tree, checker, config, name)
    if config.get("random_effects") is not None:
        from .random_effects import NormalRandomEffects

        NormalRandomEffects.check_file(checker, config)
    return config


def _config(checker: _Checker) -> dict:
    where = f"constant_data.attrs[{CONFIG_ATTR!r}]"
    config = checker.attr_json("constant_data", CONFIG_ATTR, required=True)
    if not isinstance(config, dict):
        _fail(where, f"a JSON {type(config).__name__}, expected an object")
    if config.get("model_type") != "bcf":
        _fail(where, f"model_type is {config.get('model_type')!r}, expected 'bcf'")
    for key in ("treatment", "sampler"):
        if not isinstance(config.get(key), str):
            _fail(where, f"{key} is {config.get(key)!r}, expected a string")
    for key in ("center", "scale"):
        if not _finite_number(config.get(key)):
            _fail(where, f"{key} is {config.get(key)!r}, expected a finite number")
    if not config["scale"] > 0:
        _fail(where, "scale must be > 0")
    for key in ("mu_trees", "tau_trees"):
        if isinstance(config.get(key), bool) or not isinstance(config.get(key), int) or config[key] < 1:
            _fail(where, f"{key} is {config.get(key)!r}, expected an integer >= 1")
    clip = config.get("propensity_clip")
    if not (isinstance(clip, list) and len(clip) == 2 and all(_finite_number(c) for c in clip)
            and 0 < clip[0] < clip[1] < 1):
        _fail(where, f"propensity_clip is {clip!r}, expected [low, high] with 0 < low < high < 1")
    if config.get("propensity_column") is not None and not isinstance(config["propensity_column"], str):
        _fail(where, "propensity_column must be a column name or null")
    if config.get("index_kind") not in ("int", "str"):
        _fail(where, f"index_kind is {config.get('index_kind')!r}, expected 'int' or 'str'")
    for name in FORESTS:
        if not isinstance(checker.idata["constant_data"].attrs.get(DESIGN_ATTRS[name]), str):
            _fail(f"constant_data.attrs[{DESIGN_ATTRS[name]!r}]", "missing, or not JSON text")
    return config


def _check_forest(tree: xr.DataTree, main: _Checker, config: dict, name: str) -> None:
    """A forest group: its predictors (the posterior's ``<name>_predictor`` labels), constant data and tree
    store through a ``file_check._Checker`` of its own (its predictor, tree and cut dims are the forest's),
    its leaf values finite and its trees per draw those of the configuration."""
    group = FOREST_GROUPS[name]
    act = main.array("posterior", f"variable_activity_{name}", "float", ("chain", "draw", f"{name}_predictor"))
    if not ((act >= 0) & (act <= 1)).all():
        _fail(f"posterior/variable_activity_{name}", "holds a share outside [0, 1]")
    coords = tree["posterior"].dataset.coords
    if f"{name}_predictor" not in coords:
        _fail(f"posterior/{name}_predictor", "the forest's predictor names are missing")
    p = act.shape[2]
    sub = _Checker(tree)
    sub.sizes.update({k: main.sizes[k] for k in ("chain", "draw", "obs")})
    sub.sizes["predictor"] = p
    binned = sub.constant({"na_action": None}, group=group)
    trees = sub.tree_store(group, "tree", binned, False, p)
    n_trees = trees["counts"].shape[2]
    if n_trees != config[f"{name}_trees"]:
        _fail(f"{group}/tree_nodes", f"{n_trees} trees per draw, the configuration gives {config[f'{name}_trees']}")
    ds = tree[group].dataset
    if "node_value" not in ds.data_vars:
        _fail(f"{group}/node_value", "variable missing")
    leaf = ~trees["internal"]
    dims = ds["node_value"].dims
    if dims == (LEAF_DIM,):
        value = sub.array(group, "node_value", "float", (LEAF_DIM,), local=(LEAF_DIM,))
        if value.shape[0] != int(leaf.sum()):
            _fail(f"{group}/node_value", f"{value.shape[0]} leaf entries, but node_var has {int(leaf.sum())} leaves")
    else:
        value = sub.array(group, "node_value", "float", ("node",), local=("node",))[leaf]
    if not np.isfinite(value).all():
        _fail(f"{group}/node_value", "a leaf holds a non-finite value")


# -- the first release's .npz archives --------------------------------------------------------------

def read_npz(path, design_from_json: Callable[[str], object], fit_loader: Callable) -> CausalFit:
    """Read a ``.npz`` archive written by the first bcf release (``"bartpy_suite.bcf/1"``) into the current
    DataTree, checked as a netCDF file is (``bps.load`` calls this; ``fit_loader`` reads the propensity
    model's netCDF bytes).

    Raises
    ------
    FitFileError
        A file that is not a bcf fit or holds inconsistent arrays, naming the file and what is wrong.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        meta = json.loads(bytes(arrays.pop("meta")).decode())
        if meta.get("format") != NPZ_FORMAT:
            raise ValueError(f"unknown format {meta.get('format')!r}")
        chains = int(meta["chains"])
        forests = {}
        for name in FORESTS:
            sizes = arrays[f"{name}_cut_sizes"]
            flat = arrays[f"{name}_cuts"]
            cuts = tuple(np.split(flat, np.cumsum(sizes)[:-1])) if sizes.size else ()
            binned = BinnedPredictors(arrays[f"{name}_codes"].astype(np.int32), cuts,
                                      arrays[f"{name}_nbins"].astype(np.int64), arrays[f"{name}_is_cat"].astype(bool))
            counts = np.asarray(arrays[f"{name}_counts"], dtype=np.int64)
            if counts.ndim != 2 or int(counts.sum()) != arrays[f"{name}_var"].shape[0]:
                raise ValueError(f"the {name} forest's node counts do not match its node arrays")
            forests[name] = (arrays[f"{name}_var"], arrays[f"{name}_cut"], arrays[f"{name}_value"], counts, binned,
                             meta["names"][name])
        params = arrays["params"]
        if params.ndim != 2 or params.shape[1] != 5 or params.shape[0] != forests["mu"][3].shape[0] \
                or forests["tau"][3].shape[0] != params.shape[0]:
            raise ValueError("the scalar draws do not match the stored trees")
        designs = {k: design_from_json(v) for k, v in meta["designs"].items()}
        y = arrays["y"]
        config = {**meta["config"], "center": meta["center"], "scale": meta["scale"]}
        tree = build_causal_idata(params=params, chains=chains, forests=forests, counts=arrays["move_counts"], y=y,
                                  z=arrays["z"], w=np.ones(y.shape[0]), propensity=arrays["propensity"],
                                  index=pd.Index(arrays["index"]), designs=designs, config=config)
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise FitFileError(f"{path} is not a readable bcf fit: {exc}") from None
    propensity_fit = None
    if "propensity_fit" in arrays:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            nc = Path(tmp) / "propensity.nc"
            nc.write_bytes(arrays["propensity_fit"].tobytes())
            propensity_fit = fit_loader(nc)
            propensity_fit.idata.load()  # the temporary file goes away
    return _finish(tree, path, design_from_json, propensity_fit)
