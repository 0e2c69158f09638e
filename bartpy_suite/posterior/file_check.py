"""Reading a saved fit safely: every stored array and attribute is checked before any kernel sees it.

The prediction kernels (``_kernels/predict.py``, ``_kernels/soft_tree.py``, ``_kernels/record.py``)
trust the tree store: node counts that sum past the node axis, a preorder that does not close, a
split variable past the predictor axis or a leaf-parameter array shorter than the node axis make
them read or write outside their arrays (a segmentation fault or a corrupted heap, not a Python
error). :func:`check_fit` therefore checks, with vectorised numpy over whole arrays (no Python loop
over nodes or trees), everything the package reads from a file:

* the groups and their variables: dtype kind, dims and sizes that agree across groups (chain and
  draw of ``posterior``, ``sample_stats``, ``trees`` and every further store; predictor count from
  the configuration; rows of ``observed_data``, ``constant_data`` and ``soft_trees``);
* the configuration and design JSON: a JSON object with the keys and value types the package reads
  (the design's content is then read by ``Design.from_json``, which the caller passes in);
* the binned predictors: codes inside their bins, cut grids finite and increasing, factor level
  counts at most 63;
* each tree store (``trees``, ``soft_trees`` and structure-only stores such as ``tempered``'s
  ``rung_trees``): node counts >= 1 summing to the node axis, every tree a complete preorder
  (internal nodes have two children, nothing left over), ``-1 <= node_var < p``, numeric cut indices
  inside their grid (with the missing-value bits of ``na_action="split"``), factor masks inside the
  predictor's levels, leaf values finite, leaf sigmas positive, leaf probabilities in [0, 1];
* per model: tree counts (one for CART and soft trees, ``trees`` for BART, ``trees`` per class for
  multinomial BART), class counts, draw weights finite, >= 0 and not all 0; ordinal BART's
  ``cutpoints``: K - 1 per draw, the first 0, finite and strictly increasing, their ``cutpoint``
  labels "a|b" of consecutive class labels; DART's ``split_probs`` and ``sparse_alpha``; a survival
  fit's grid and names, and a competing-risks cause fit's ``cause`` (1..``causes``).

Any failure raises one :class:`~bartpy_suite.errors.FitFileError` naming the file, the first bad
array (``group/variable``) and what is wrong. Files that netCDF cannot read (truncated, not netCDF)
and netCDF files that are not fits raise the same error.

Files keep the trees' leaf parameters at the leaves only (``Fit.to_netcdf``); the check puts them
back on the node axis once the structure they hang on has passed. The cost is a few vectorised
passes over the node axis, less than reading the file takes (``benchmarks/fit_file_sizes.py``
measures both).

Import rule: numpy, xarray and this package's ``errors``, ``_validation``, ``_binning``,
``_kernels.tree`` (two constants), ``posterior.fit`` and ``posterior.legacy``; the design reader
is passed in (posterior does not import formula).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np
import xarray as xr

from .. import _validation as check
from .._binning import MAX_LEVELS
from .._kernels.tree import CUT_MASK, NA_SHIFT
from ..errors import FitFileError
from . import legacy
from .fit import CONFIG_ATTR, DESIGN_ATTR, LEAF_DIM, LEAF_VARS, LOG_LIKELIHOOD_ATTR, TREES_GROUP, Fit
from .leaf_models import LEAF_MODELS, leaf_model_name
from .loglik import GROUP as LOG_LIKELIHOOD_GROUP

#: Groups every fit has (after the 0.1 layout is upgraded).
REQUIRED_GROUPS = ("posterior", "sample_stats", "observed_data", "constant_data", TREES_GROUP)
SOFT_GROUP = "soft_trees"
#: Variables the package reads by name: none of them may hide as a coordinate.
READ_NAMES = frozenset({"tree_nodes", "node_var", "node_cut", "node_value", "node_sigma", "node_prob", "node_tau",
                        "node_delta", "x_scaled", "x_codes", "cuts", "nbins", "is_categorical", "y", "weight",
                        "sigma", "variable_activity", "cutpoints", "split_probs", "sparse_alpha"})
#: Keys of the configuration the package reads, with the JSON types they must have.
CONFIG_TYPES = {"model_type": str, "response_kind": str, "sampler": str, "predictors": list}
#: Keys of the design JSON (``Design.to_json``) and their JSON types.
DESIGN_TYPES = {"format": str, "version": int, "formula": str, "response": str, "response_kind": str,
                "class_labels": list, "predictors": list, "is_categorical": list, "levels": list, "methods": list,
                "sources": list}
_INT64_MAX = np.iinfo(np.int64).max


class _Bad(Exception):
    """One failed check: where (``group/variable`` or ``group.attrs[...]``) and what is wrong."""

    def __init__(self, where: str, what: str):
        super().__init__(where, what)
        self.where, self.what = where, what


def _fail(where: str, what: str):
    raise _Bad(where, what)


def _error(path: str, where: str, what: str) -> FitFileError:
    return FitFileError(f"{path!r} is not a usable bartpy_suite fit: {where}: {what}. The file is damaged or was "
                        "edited; save the fit again from the model (Fit.to_netcdf) or refit it")


def open_fit_file(path) -> xr.DataTree:
    """Read a netCDF file into memory as a DataTree, turning read errors into ``FitFileError``.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    FitFileError
        When the file is a folder, truncated, or not a netCDF4/HDF5 file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    if os.path.isdir(path):
        raise FitFileError(f"{path!r} is a folder, not a fit file written by Fit.to_netcdf")
    try:
        with xr.open_datatree(path, engine="netcdf4") as tree:
            return tree.load()
    except MemoryError:
        raise
    except Exception as exc:  # netCDF/HDF5 report damage as OSError, RuntimeError, ValueError, KeyError, ...
        raise FitFileError(f"{path!r} cannot be read as a netCDF fit file ({type(exc).__name__}: {exc}); it is "
                           "truncated, damaged or not a file written by Fit.to_netcdf") from None


def load_fit(path, design_from_json: Callable[[str], object] | None = None,
             log_likelihood: bool | None = None) -> Fit:
    """Read, check and rebuild a fit written by ``Fit.to_netcdf`` (``bartpy_suite.load``).

    Parameters
    ----------
    path : str or os.PathLike
        The netCDF file.
    design_from_json : callable, optional
        Rebuilds the formula design from its JSON text (``Design.from_json``); without it the
        design is left out.
    log_likelihood : bool or None
        Recompute the ``log_likelihood`` group: None (default) when the saved fit had it
        (``to_netcdf`` leaves it out of the file and marks that it was there), True always, False
        never. A file that stores the group keeps it.

    Returns
    -------
    Fit

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    FitFileError
        When the file is unreadable, not a fit, or fails :func:`check_fit`.
    ArgumentError
        When ``log_likelihood`` is not None, True or False.
    """
    path = os.fspath(path)
    if log_likelihood is not None:
        log_likelihood = check.check_bool("log_likelihood", log_likelihood)
    idata = open_fit_file(path)
    try:
        const = _group(idata, "constant_data")
        if CONFIG_ATTR not in const.attrs:
            _fail("constant_data.attrs", f"no model configuration ({CONFIG_ATTR!r}): not a bartpy_suite fit")
        _group(idata, "posterior")
        if legacy.needs_upgrade(idata):
            try:
                idata = legacy.upgrade(idata)
            except Exception as exc:  # numpy's shape and index errors on damaged padded arrays
                _fail("posterior/split_var", f"padded trees of a 0.1 file cannot be read ({exc})")
        checker = _Checker(idata)
        checker.run()
        idata = checker.idata  # leaf parameters back on the node axis
    except _Bad as bad:
        raise _error(path, bad.where, bad.what) from None
    attrs = idata["constant_data"].attrs
    design = None
    if DESIGN_ATTR in attrs and design_from_json is not None:
        try:
            design = design_from_json(attrs[DESIGN_ATTR])
        except Exception as exc:  # whatever the reader makes of a damaged design, the file is at fault
            raise _error(path, f"constant_data.attrs[{DESIGN_ATTR!r}]", str(exc)) from None
    marked = attrs.pop(LOG_LIKELIHOOD_ATTR, None) is not None
    fit = Fit(idata, design=design)
    has = LOG_LIKELIHOOD_GROUP in idata.children
    if not has and (log_likelihood or (log_likelihood is None and marked)):
        fit.add_log_likelihood()
    return fit


def check_fit_tree(idata: xr.DataTree, path, design_from_json: Callable[[str], object] | None = None,
                   where: str = "") -> Fit:
    """Check and rebuild a fit from a DataTree already in memory, as ``load_fit`` does from a file (a bcf
    file holds its propensity model's fit as the groups under ``/propensity``); the error names ``path``
    and the bad array under ``where``. The log-likelihood group is not recomputed.

    Raises
    ------
    FitFileError
        When the tree fails :func:`check_fit` (or its design cannot be read).
    """
    prefix = f"{where}/" if where else ""
    try:
        const = _group(idata, "constant_data")
        if CONFIG_ATTR not in const.attrs:
            _fail("constant_data.attrs", f"no model configuration ({CONFIG_ATTR!r}): not a bartpy_suite fit")
        checker = _Checker(idata)
        checker.run()
        idata = checker.idata
    except _Bad as bad:
        raise _error(os.fspath(path), prefix + bad.where, bad.what) from None
    attrs = idata["constant_data"].attrs
    attrs.pop(LOG_LIKELIHOOD_ATTR, None)
    design = None
    if DESIGN_ATTR in attrs and design_from_json is not None:
        try:
            design = design_from_json(attrs[DESIGN_ATTR])
        except Exception as exc:  # whatever the reader makes of a damaged design, the file is at fault
            raise _error(os.fspath(path), f"{prefix}constant_data.attrs[{DESIGN_ATTR!r}]", str(exc)) from None
    return Fit(idata, design=design)


def _expand_leaves(idata: xr.DataTree, leaf: np.ndarray) -> xr.DataTree:
    """The DataTree with the trees group's leaf parameters back on the node axis (NaN at internal
    nodes), as ``Fit.to_netcdf`` stores them over the leaves only (``leaf``: which nodes are
    leaves, from the checked ``node_var``); the same DataTree without such variables."""
    ds = idata[TREES_GROUP].to_dataset()
    names = [n for n in LEAF_VARS if n in ds.data_vars and ds[n].dims[:1] == (LEAF_DIM,)]
    if not names:
        return idata
    moved = {}
    for name in names:
        da = ds[name]
        if da.dtype.kind != "f":
            _fail(f"{TREES_GROUP}/{name}", f"dtype {da.dtype}, expected a floating-point type")
        if da.shape[0] != int(leaf.sum()):
            _fail(f"{TREES_GROUP}/{name}", f"{da.shape[0]} leaf entries, but node_var has {int(leaf.sum())} leaves")
        full = np.full(leaf.shape + da.shape[1:], np.nan, dtype=da.dtype)
        full[leaf] = da.values
        moved[name] = (("node",) + da.dims[1:], full)
    idata = idata.copy()
    idata[TREES_GROUP] = xr.DataTree(ds.drop_vars(names).assign(moved))
    return idata


def check_fit(idata: xr.DataTree, path: str = "<in memory>") -> dict:
    """Check every array and attribute of a fit's DataTree that the package reads (in memory, or as
    read from a file, with the leaf parameters over the ``leaf`` dim).

    Parameters
    ----------
    idata : xarray.DataTree
        The fit's tree as read from a file (current layout).
    path : str
        Named in the error.

    Returns
    -------
    dict
        The parsed configuration.

    Raises
    ------
    FitFileError
        Naming ``path``, the first bad array or attribute and what is wrong.
    """
    try:
        return _Checker(idata).run()
    except _Bad as bad:
        raise _error(path, bad.where, bad.what) from None


def _group(idata: xr.DataTree, name: str) -> xr.DataTree:
    if name not in idata.children:
        _fail(name, "group missing")
    return idata[name]



def preorder_problem(var: np.ndarray, flat: np.ndarray) -> str | None:
    """Why the flat preorder store ``var`` (split variable per node, -1 for a leaf) is not one whole
    binary tree per entry of ``flat`` (node counts, each >= 1, summing to the node axis), or None.

    With +1 per internal node and -1 per leaf, the running sum within a tree stays >= 0 before its
    last node and is -1 after it (every internal node gets two subtrees). ``run`` sums over the
    whole store, so within tree s it is offset by ``before[s]``.
    """
    n_nodes = var.shape[0]
    small = np.int32 if n_nodes < 2**31 - 1 else np.int64
    run = np.cumsum(np.where(var >= 0, small(1), small(-1)), dtype=small)
    start = np.cumsum(flat) - flat
    last = start + flat - 1
    before = np.zeros(flat.size, dtype=small)
    before[1:] = run[last[:-1]]
    if (run[last] != before - 1).any():
        s = int(np.flatnonzero(run[last] != before - 1)[0])
        return (f"tree {s} (flat, chain-major; nodes {start[s]}..{last[s]}) is not a complete preorder tree: its "
                "internal nodes and leaves do not match")
    masked = run.copy()
    masked[last] = np.iinfo(small).max  # the last node of each tree is the only one allowed below before
    lowest = np.minimum.reduceat(masked, start)
    if (lowest < before).any():
        s = int(np.flatnonzero(lowest < before)[0])
        i = int(start[s] + np.flatnonzero(masked[start[s]:last[s] + 1] < before[s])[0])
        return f"tree {s} (flat, chain-major) ends before its last node at node {i}: not a preorder tree"
    return None

class _Checker:
    """One pass over a DataTree; ``sizes`` collects the sizes that must agree across groups."""

    def __init__(self, idata: xr.DataTree):
        self.idata = idata
        self.sizes: dict[str, int] = {}
        self.design_payload: dict | None = None
        self.design_offset = 0  # predictors of the trees before the design's (survival: the time)

    # -- helpers ---------------------------------------------------------------------------------
    fail = staticmethod(_fail)

    def array(self, group: str, name: str, kind: str, dims: tuple, required: bool = True, local: tuple = (),
              native: bool = False):
        """The variable as int64 (``kind="int"``; in its own integer type with ``native``, to spare
        a copy of a large array that is only compared) or float64 (``"float"``) after its dtype and
        dims are checked; the size of each dim not in ``local`` must agree with earlier ones (``self.sizes``)."""
        ds = self.idata[group].dataset
        where = f"{group}/{name}"
        if name not in ds.data_vars:
            if required:
                _fail(where, "variable missing")
            return None
        da = ds[name]
        if tuple(da.dims) != tuple(dims):
            _fail(where, f"dims {tuple(da.dims)}, expected {tuple(dims)}")
        for dim, size in zip(da.dims, da.shape):
            known = size if dim in local else self.sizes.setdefault(dim, int(size))
            if known != size:
                _fail(where, f"{dim} has size {size}, but {known} elsewhere in the fit")
        values = np.asarray(da.values)
        dk = values.dtype.kind
        if kind == "int":
            if dk not in "iu":
                _fail(where, f"dtype {values.dtype}, expected an integer type")
            if dk == "u" and values.dtype.itemsize == 8 and values.size and values.max() > _INT64_MAX:
                _fail(where, "values past the int64 range")
            return values if native else values.astype(np.int64, copy=False)
        if dk not in "iuf" or (dk == "f" and values.dtype.itemsize < 4):
            _fail(where, f"dtype {values.dtype}, expected a floating-point type")
        return values.astype(np.float64, copy=False)

    @staticmethod
    def first(mask: np.ndarray) -> int:
        return int(np.flatnonzero(np.ravel(mask))[0])

    def attr_json(self, group: str, key: str, required: bool):
        attrs = self.idata[group].attrs
        where = f"{group}.attrs[{key!r}]"
        if key not in attrs:
            if required:
                _fail(where, "missing")
            return None
        text = attrs[key]
        if not isinstance(text, str):
            _fail(where, f"a {type(text).__name__}, expected JSON text")
        try:
            return json.loads(text)
        except ValueError as exc:
            _fail(where, f"not valid JSON ({exc})")

    # -- the checks ------------------------------------------------------------------------------
    def run(self) -> dict:
        for name in REQUIRED_GROUPS:
            _group(self.idata, name)
        self.coordinates()
        config = self.config()
        self.design(config)
        p = self.sizes["predictor"] = len(config["predictors"])
        self.draw_groups()
        self.sparse_settings(config)
        binned = self.constant(config)
        self.design_levels(binned)
        classes = self.observed(config)
        split = config.get("na_action") == "split"
        # a soft tree's node_cut is unused (its splits are node_tau / node_delta in soft_trees)
        trees = self.tree_store(TREES_GROUP, "tree", binned, split, p, rules=config["model_type"] != "soft_tree")
        self.idata = _expand_leaves(self.idata, ~trees["internal"])
        self.leaves(config, trees, classes)
        LEAF_MODELS[leaf_model_name(config)].check_file(self, config)
        self.model_counts(config, trees["counts"].shape[2], classes)
        for name, node in self.idata.children.items():
            held = node.dataset.data_vars
            if name == SOFT_GROUP:
                # the soft trees' structure is the trees group's; a structure here would be read
                # by tree_arrays("soft_trees") unchecked
                for var in ("node_var", "node_cut"):
                    if var in held:
                        _fail(f"{name}/{var}", "a soft tree's structure lives in the trees group, not here")
                continue
            if name == TREES_GROUP or ("tree_nodes" not in held and "node_var" not in held):
                continue
            if "tree_nodes" not in held:
                _fail(f"{name}/tree_nodes", "variable missing (the group holds node_var)")
            dims = node.dataset["tree_nodes"].dims
            if len(dims) != 3:
                _fail(f"{name}/tree_nodes", f"dims {tuple(dims)}, expected (chain, draw, <tree dim>)")
            self.tree_store(name, dims[2], binned, split, p)
        if SOFT_GROUP in self.idata.children and LEAF_MODELS[leaf_model_name(config)].hard_splits:
            # a soft tree's file with an edited model type would be predicted with the hard kernels
            _fail(SOFT_GROUP, f"a soft tree's group in a {config['model_type']!r} fit, whose leaf model "
                              f"{leaf_model_name(config)!r} has hard-split trees")
        if config["model_type"] == "soft_tree" or SOFT_GROUP in self.idata.children:
            self.soft(config, trees)
        if LOG_LIKELIHOOD_GROUP in self.idata.children:
            self.array(LOG_LIKELIHOOD_GROUP, "y", "float", ("chain", "draw", "obs"))
        if config.get("survival"):
            self.survival(config, binned)
        return config

    def coordinates(self) -> None:
        """The package writes no coordinates but dimension indexes; the readers look variables up
        by name (``name in group``), which also finds a coordinate, so one named like a variable
        would reach the kernels without the checks below."""
        for node in self.idata.subtree:
            ds = node.dataset
            for name in ds.coords:
                if name not in ds.dims or name in READ_NAMES:
                    where = f"{node.path.strip('/') or '/'}/{name}"
                    _fail(where, "stored as a coordinate; a fit file holds no coordinates but its dimension indexes")

    def survival(self, config: dict, binned: dict) -> None:
        """A survival fit is probit BART on person-period rows whose first predictor is the time,
        and its settings give the grid that prediction searches (``posterior/survival.py``)."""
        where = f"constant_data.attrs[{CONFIG_ATTR!r}]"
        s = config["survival"]
        if not isinstance(s, dict):
            _fail(where, f"survival is a {type(s).__name__}, expected an object")
        grid = s.get("grid")
        if not (isinstance(grid, list) and grid and all(_finite_number(v) for v in grid) and grid[0] > 0
                and all(b > a for a, b in zip(grid, grid[1:]))):
            _fail(where, "survival.grid must be a non-empty increasing list of finite times > 0")
        max_time = s.get("max_time")
        if not _finite_number(max_time) or max_time < grid[-1]:
            _fail(where, "survival.max_time must be a finite number >= the last grid time")
        for key in ("time_name", "event_name"):
            if not isinstance(s.get(key), str):
                _fail(where, f"survival.{key} must be a column name (text)")
        if "cause" in s or "causes" in s:  # a cause fit of CompetingRisksBART: cause c of J
            cause, causes = s.get("cause"), s.get("causes")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (cause, causes)) \
                    or not 1 <= cause <= causes:
                _fail(where, f"survival.cause {cause!r} of survival.causes {causes!r}, expected whole numbers "
                             "1 <= cause <= causes")
        if binned["is_cat"][0] or config["response_kind"] != "categorical" or config["model_type"] != "bart":
            _fail(where, "a survival fit is BART of a 0/1 response with the numeric time as predictor 0")
        if leaf_model_name(config) != "probit":  # survival.predict reads the trees as one probit sum
            _fail(where, f"a survival fit is probit BART, not leaf_model {leaf_model_name(config)!r}")

    def config(self) -> dict:
        where = f"constant_data.attrs[{CONFIG_ATTR!r}]"
        if CONFIG_ATTR not in self.idata["constant_data"].attrs:
            _fail("constant_data.attrs", f"no model configuration ({CONFIG_ATTR!r}): not a bartpy_suite fit")
        config = self.attr_json("constant_data", CONFIG_ATTR, required=True)
        if not isinstance(config, dict):
            _fail(where, f"a JSON {type(config).__name__}, expected an object")
        for key, typ in CONFIG_TYPES.items():
            if not isinstance(config.get(key), typ):
                _fail(where, f"key {key!r} is {config.get(key)!r}, expected a {typ.__name__}")
        if config["response_kind"] not in ("numeric", "categorical"):
            _fail(where, f"response_kind {config['response_kind']!r}, expected 'numeric' or 'categorical'")
        names = config["predictors"]
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            _fail(where, "predictors must be a non-empty list of distinct names")
        for key in ("center", "scale"):
            if key in config and not _finite_number(config[key]):
                _fail(where, f"{key} is {config[key]!r}, expected a finite number")
        for key in ("leaf_model", "na_action"):
            if config.get(key) is not None and not isinstance(config[key], str):
                _fail(where, f"{key} is {config[key]!r}, expected a string")
        leaf_model = leaf_model_name(config)
        if leaf_model not in LEAF_MODELS:
            _fail(where, f"leaf_model {leaf_model!r} is not a leaf model of this version; known: "
                         f"{', '.join(sorted(LEAF_MODELS))}")
        if LEAF_MODELS[leaf_model].classification != (config["response_kind"] == "categorical"):
            _fail(where, f"leaf_model {leaf_model!r} does not model a {config['response_kind']} response")
        # the leaf model decides which prediction kernels read the trees (hard splits on bin codes,
        # or soft routing through the soft_trees group): it must be one of the model type's, else
        # a soft tree would be predicted as a hard one (wrong values) or the reverse (a crash)
        soft_model = config["model_type"] == "soft_tree"
        if LEAF_MODELS[leaf_model].hard_splits == soft_model:
            _fail(where, f"leaf_model {leaf_model!r} is a leaf model of {'hard' if soft_model else 'soft'}-split "
                         f"trees, not of a {config['model_type']!r} fit")
        if config["response_kind"] == "categorical":
            labels = config.get("class_labels")
            if not isinstance(labels, list) or len(labels) < 2 or \
                    not all(isinstance(v, (str, int, float, bool)) for v in labels):
                _fail(where, f"class_labels is {labels!r}, expected a list of at least 2 labels")
            if len({str(v) for v in labels}) != len(labels):
                _fail(where, "class_labels are not distinct")
        if "trees" in config and (isinstance(config["trees"], bool) or not isinstance(config["trees"], int)
                                  or config["trees"] < 1):
            _fail(where, f"trees is {config['trees']!r}, expected an integer >= 1")
        return config

    def design(self, config: dict) -> None:
        design = self.attr_json("constant_data", DESIGN_ATTR, required=False)
        if design is None and DESIGN_ATTR not in self.idata["constant_data"].attrs:
            return
        where = f"constant_data.attrs[{DESIGN_ATTR!r}]"
        if not isinstance(design, dict):
            _fail(where, f"a JSON {type(design).__name__}, expected an object")
        for key, typ in DESIGN_TYPES.items():
            if key not in design:
                _fail(where, f"key {key!r} missing")
            if not isinstance(design[key], typ) or (typ is int and isinstance(design[key], bool)):
                _fail(where, f"key {key!r} is a {type(design[key]).__name__}, expected a {typ.__name__}")
        # version 1 kept formulaic's transform state, version 2 the terms' expression trees (whose
        # content Design.from_json checks against the formula whitelist)
        state_key = "transform_state" if design["version"] == 1 else "terms"
        if state_key not in design:
            _fail(where, f"key {state_key!r} missing")
        # a survival fit's trees also split on the time, its first predictor, which the design
        # (the covariates' formula) does not hold
        offset = 1 if config.get("survival") else 0
        expected = config["predictors"][offset:]
        p = len(expected)
        if design["predictors"] != expected:
            _fail(where, f"predictors {design['predictors']!r} differ from the configuration's "
                         f"{expected!r}")
        for key in ("is_categorical", "levels", "methods", "sources"):
            if len(design[key]) != p:
                _fail(where, f"{key} has {len(design[key])} entries for {p} predictors")
        if not all(isinstance(v, bool) for v in design["is_categorical"]):
            _fail(where, "is_categorical must hold true/false per predictor")
        if not all(v is None or isinstance(v, list) for v in design["levels"]):
            _fail(where, "levels must hold a list or null per predictor")
        if not all(isinstance(v, list) for v in design["sources"]):
            _fail(where, "sources must hold a list per predictor")
        if offset:
            pass  # survival: the design's response is the time, the model's the 0/1 person-period event
        elif design["response_kind"] != config["response_kind"]:
            _fail(where, f"response_kind {design['response_kind']!r} differs from the configuration's "
                         f"{config['response_kind']!r}")
        elif len(design["class_labels"]) != len(config.get("class_labels") or []):
            _fail(where, f"{len(design['class_labels'])} class labels, the configuration has "
                         f"{len(config.get('class_labels') or [])}")
        self.design_payload = design
        self.design_offset = offset

    def design_levels(self, binned: dict) -> None:
        """The design's factors are the binned factors, with one level per bin (tree_text and the
        design's transform index the levels by bin code)."""
        design = self.design_payload
        if design is None:
            return
        where = f"constant_data.attrs[{DESIGN_ATTR!r}]"
        for v, (cat, levels) in enumerate(zip(design["is_categorical"], design["levels"]), start=self.design_offset):
            if cat != bool(binned["is_cat"][v]):
                _fail(where, f"predictor {v} is {'a factor' if cat else 'numeric'} in the design but not in "
                             "constant_data/is_categorical")
            if cat and (not isinstance(levels, list) or len(levels) != binned["nbins"][v]):
                _fail(where, f"predictor {v} has {len(levels) if isinstance(levels, list) else levels!r} levels in the "
                             f"design and {binned['nbins'][v]} in constant_data/nbins")

    def draw_groups(self) -> None:
        """posterior and sample_stats: numeric variables over (chain, draw, ...); the weights."""
        for group in ("posterior", "sample_stats"):
            ds = self.idata[group].dataset
            for name, da in ds.data_vars.items():
                if tuple(da.dims[:2]) != ("chain", "draw"):
                    _fail(f"{group}/{name}", f"dims {tuple(da.dims)}, expected (chain, draw, ...)")
                if da.dtype.kind not in "iufb":
                    _fail(f"{group}/{name}", f"dtype {da.dtype}, expected a number type")
                for dim, size in zip(da.dims, da.shape):
                    known = self.sizes.setdefault(dim, int(size))
                    if known != size:
                        _fail(f"{group}/{name}", f"{dim} has size {size}, but {known} elsewhere in the fit")
        if "chain" not in self.sizes:
            _fail("posterior", "no variables over (chain, draw)")
        if self.sizes["chain"] < 1 or self.sizes["draw"] < 1:
            _fail("posterior", "no draws")
        self.array("posterior", "variable_activity", "float", ("chain", "draw", "predictor"))
        self.sparse_weights()
        w = self.array("sample_stats", "weight", "float", ("chain", "draw"))
        ok = np.isfinite(w) & (w >= 0)
        if not ok.all():
            s = self.first(~ok)
            _fail("sample_stats/weight", f"draw {s} (chain-major) has weight {w.reshape(-1)[s]!r}, expected finite "
                                         "and >= 0")
        if not w.sum() > 0:
            _fail("sample_stats/weight", "every weight is 0")
        stats = self.idata["sample_stats"]
        names = self.attr_json("sample_stats", "move_names", required=False)
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                _fail("sample_stats.attrs['move_names']", "expected a JSON list of names")
            for var in ("n_proposed", "n_accepted"):
                if var in stats.dataset.data_vars and stats[var].shape[2:] != (len(names),):
                    _fail(f"sample_stats/{var}", f"shape {stats[var].shape}, expected (chain, draw, {len(names)})")
        if stats.attrs.get("ess_method", "autocorrelation") not in ("autocorrelation", "kish"):
            _fail("sample_stats.attrs['ess_method']", "expected 'autocorrelation' or 'kish'")

    def sparse_weights(self) -> None:
        """DART's ``split_probs`` (finite, in [0, 1], each draw's summing to 1) and
        ``sparse_alpha`` (finite, > 0), when the fit has them."""
        s = self.array("posterior", "split_probs", "float", ("chain", "draw", "predictor"), required=False)
        if s is not None:
            ok = (np.isfinite(s) & (s >= 0) & (s <= 1)).all(axis=2)
            if not ok.all():
                _fail("posterior/split_probs", f"draw {self.first(~ok)} (chain-major) holds a value that is not "
                                               "finite and in [0, 1]")
            # the weights are stored as exp(log s) normalised in log space: their sum is 1 to rounding
            ok = np.abs(s.sum(axis=2) - 1.0) <= 1e-9 * s.shape[2]
            if not ok.all():
                _fail("posterior/split_probs", f"draw {self.first(~ok)} (chain-major) does not sum to 1")
        alpha = self.array("posterior", "sparse_alpha", "float", ("chain", "draw"), required=False)
        if alpha is not None and not (np.isfinite(alpha) & (alpha > 0)).all():
            _fail("posterior/sparse_alpha", "holds a value that is not finite and > 0")

    def sparse_settings(self, config: dict) -> None:
        """DART's prior settings ``config["sparse"]`` ({a, b, rho}, each finite and > 0) go with the
        DART variables: both present or both absent."""
        where = f"constant_data.attrs[{CONFIG_ATTR!r}]"
        held = self.idata["posterior"].dataset.data_vars
        if "sparse" not in config:
            for name in ("split_probs", "sparse_alpha"):
                if name in held:
                    _fail(f"posterior/{name}", "present without config['sparse'] (the DART settings)")
            return
        s = config["sparse"]
        if not isinstance(s, dict) or set(s) != {"a", "b", "rho"} or \
                not all(_finite_number(v) and v > 0 for v in s.values()):
            _fail(where, f"sparse is {s!r}, expected DART's settings {{'a': ..., 'b': ..., 'rho': ...}}, each a "
                         "finite number > 0")
        for name in ("split_probs", "sparse_alpha"):
            if name not in held:
                _fail(f"posterior/{name}", "variable missing (config['sparse'] says the fit is DART)")

    def constant(self, config: dict, group: str = "constant_data") -> dict:
        """Binned training predictors: is_categorical, nbins, cut grids and codes (in ``group``: a bcf fit
        keeps each forest's in its forest group)."""
        split = config.get("na_action") == "split"
        is_cat = self.array(group, "is_categorical", "int", ("predictor",))
        if ((is_cat != 0) & (is_cat != 1)).any():
            _fail(f"{group}/is_categorical", f"predictor {self.first((is_cat != 0) & (is_cat != 1))} is "
                                                  "neither 0 nor 1")
        is_cat = is_cat.astype(bool)
        nbins = self.array(group, "nbins", "int", ("predictor",))
        cuts = self.array(group, "cuts", "float", ("predictor", "cut"))
        bad = (nbins < 1) | (is_cat & (nbins > MAX_LEVELS)) | (~is_cat & (nbins - 1 > cuts.shape[1]))
        if bad.any():
            v = self.first(bad)
            _fail(f"{group}/nbins", f"predictor {v} has {nbins[v]} bins, expected 1..{MAX_LEVELS} levels for a "
                                         f"factor or at most {cuts.shape[1] + 1} for a numeric predictor")
        # numeric grid v: cuts[v, :nbins[v] - 1] finite and strictly increasing (searchsorted needs it)
        inside = np.arange(cuts.shape[1])[None, :] < (nbins - 1)[:, None]
        inside &= ~is_cat[:, None]
        if (inside & ~np.isfinite(cuts)).any():
            _fail(f"{group}/cuts", f"predictor {self.first((inside & ~np.isfinite(cuts)).any(axis=1))} has a "
                                        "non-finite cut point")
        if cuts.shape[1] > 1:
            step = np.diff(np.where(inside, cuts, 0.0), axis=1)
            down = inside[:, 1:] & ~(step > 0)
            if down.any():
                _fail(f"{group}/cuts", f"the cut points of predictor {self.first(down.any(axis=1))} are not "
                                            "strictly increasing")
        codes = self.array(group, "x_codes", "int", ("predictor", "obs"), native=True)
        top = nbins - 1 + (1 if split else 0)  # na_action="split": missing values have code nbins
        bad = (codes < 0) | (codes > top[:, None])
        if bad.any():
            v = self.first(bad.any(axis=1))
            _fail(f"{group}/x_codes", f"predictor {v} holds codes outside 0..{top[v]}")
        if self.sizes["obs"] < 1:
            _fail(f"{group}/x_codes", "no training rows")
        return {"is_cat": is_cat, "nbins": nbins}

    def observed(self, config: dict) -> int:
        """The training response; returns the number of classes (0 for regression)."""
        if config["response_kind"] == "categorical":
            y = self.array("observed_data", "y", "int", ("obs",))
            k = len(config["class_labels"])
            if ((y < 0) | (y >= k)).any():
                _fail("observed_data/y", f"row {self.first((y < 0) | (y >= k))} holds a class code outside 0..{k - 1}")
            return k
        y = self.array("observed_data", "y", "float", ("obs",))
        if not np.isfinite(y).all():
            _fail("observed_data/y", f"row {self.first(~np.isfinite(y))} is not finite")
        return 0

    def tree_store(self, group: str, tree_dim: str, binned: dict, split: bool, p: int, rules: bool = True) -> dict:
        """A flat preorder store: counts, structure, split variables and rules."""
        counts = self.array(group, "tree_nodes", "int", ("chain", "draw", tree_dim))
        flat = counts.reshape(-1)
        if flat.size == 0:
            _fail(f"{group}/tree_nodes", "no trees")
        local = () if group == TREES_GROUP else ("node",)  # another store's node axis is its own
        var = self.array(group, "node_var", "int", ("node",), local=local, native=True)
        cut = self.array(group, "node_cut", "int", ("node",), local=local, native=True)
        n_nodes = var.shape[0]
        if (flat < 1).any() or (flat > n_nodes).any():
            s = self.first((flat < 1) | (flat > n_nodes))
            _fail(f"{group}/tree_nodes", f"tree {s} (flat, chain-major) has {flat[s]} nodes, expected 1..{n_nodes}")
        if flat.size > n_nodes or int(flat.sum()) != n_nodes:  # flat.size <= n_nodes: the sum cannot overflow
            _fail(f"{group}/tree_nodes", f"node counts sum to {int(flat.sum(dtype=np.float64)):d}, but the node axis "
                                         f"has {n_nodes} nodes")
        bad = (var < -1) | (var >= p)
        if bad.any():
            i = self.first(bad)
            _fail(f"{group}/node_var", f"node {i} splits on {var[i]}, expected -1 (leaf) or a predictor 0..{p - 1}")
        internal = var >= 0
        problem = preorder_problem(var, flat)
        if problem:
            _fail(f"{group}/node_var", problem)
        if rules:
            self.rules(group, var, cut, internal, binned, split)
        return {"counts": counts, "var": var, "internal": internal}

    def rules(self, group: str, var, cut, internal, binned: dict, split: bool) -> None:
        """Numeric cut indices inside the predictor's grid, factor masks inside its levels."""
        at = np.flatnonzero(internal)
        v = var[at].astype(np.int64)
        c = cut[at].astype(np.int64)
        nbins, is_cat = binned["nbins"], binned["is_cat"]
        # numeric: cut index k in 0..nbins-2 (0..nbins-1 with split: nbins-1 splits on missingness),
        # the high word 0 or (split) the missing code nbins
        top_k = (nbins - (1 if split else 2))[v]
        if split:
            high = c >> NA_SHIFT
            ok = (c >= 0) & ((c & CUT_MASK) <= top_k) & ((high == 0) | (high == nbins[v]))
        else:
            ok = (c >= 0) & (c <= top_k)  # the high word must be 0: c <= top_k < 2**32
        if is_cat.any():
            # factor: a non-empty mask of the levels (and, with split, the missing bit nbins)
            on_cat = np.flatnonzero(is_cat[v])
            cc = c[on_cat]
            bits = nbins[v[on_cat]] + (1 if split else 0)
            ok[on_cat] = (cc != 0) & ((bits >= 64) | ((cc > 0) & ((cc >> np.minimum(bits, 62)) == 0)))
        if not ok.all():
            k = self.first(~ok)
            cat = bool(is_cat[v[k]])
            kind = "factor level mask" if cat else "cut"
            _fail(f"{group}/node_cut", f"node {int(at[k])} has {kind} {c[k]} on predictor {v[k]}, outside its "
                                       f"{nbins[v[k]]} {'levels' if cat else 'bins'}")

    def leaves(self, config: dict, trees: dict, classes: int) -> None:
        """Leaf parameters over the node axis: finite values, positive sigmas, probabilities."""
        leaf = ~trees["internal"]
        model = LEAF_MODELS[leaf_model_name(config)]  # known: checked with the configuration
        needs_value = "node_value" in model.tree_variables
        value = self.array(TREES_GROUP, "node_value", "float", ("node",), required=needs_value)
        if value is not None and not np.isfinite(value[leaf]).all():
            node = int(np.flatnonzero(leaf)[self.first(~np.isfinite(value[leaf]))])
            _fail(f"{TREES_GROUP}/node_value", f"leaf node {node} holds a non-finite value")
        sigma = self.array(TREES_GROUP, "node_sigma", "float", ("node",), required="node_sigma" in model.tree_variables)
        if sigma is not None:
            ok = np.isfinite(sigma[leaf]) & (sigma[leaf] > 0)
            if not ok.all():
                _fail(f"{TREES_GROUP}/node_sigma", f"leaf node {int(np.flatnonzero(leaf)[self.first(~ok)])} holds a "
                                                   "sigma that is not finite and > 0")
        if "sigma" in model.posterior_variables:
            s = self.array("posterior", "sigma", "float", ("chain", "draw"))
            if not (np.isfinite(s) & (s > 0)).all():
                _fail("posterior/sigma", "holds a value that is not finite and > 0")
        needs_prob = "node_prob" in model.tree_variables
        prob = self.array(TREES_GROUP, "node_prob", "float", ("node", "class"), required=needs_prob)
        if prob is not None:
            if prob.shape[1] != classes:  # a regression has none: the soft kernels would return probabilities
                _fail(f"{TREES_GROUP}/node_prob", f"{prob.shape[1]} classes, the configuration has {classes}")
            ok = (np.isfinite(prob[leaf]) & (prob[leaf] >= 0) & (prob[leaf] <= 1)).all(axis=1)
            if not ok.all():
                _fail(f"{TREES_GROUP}/node_prob", f"leaf node {int(np.flatnonzero(leaf)[self.first(~ok)])} holds a "
                                                  "probability outside [0, 1]")

    def model_counts(self, config: dict, n_trees: int, classes: int) -> None:
        """Trees per draw and classes as the model type has them."""
        where = f"{TREES_GROUP}/tree_nodes"
        model, leaf = config["model_type"], LEAF_MODELS[leaf_model_name(config)]
        if model in ("cart", "soft_tree") and n_trees != 1:
            _fail(where, f"{n_trees} trees per draw; a {model} fit has one")
        if model == "bart":
            m = config.get("trees")
            if not isinstance(m, int):
                _fail(f"constant_data.attrs[{CONFIG_ATTR!r}]", "a BART configuration needs 'trees'")
            expect = m * classes if leaf.forest_per_class else m
            if n_trees != expect:
                _fail(where, f"{n_trees} trees per draw, the configuration gives {expect}")
        if leaf.classes is not None and classes != leaf.classes:
            _fail(f"constant_data.attrs[{CONFIG_ATTR!r}]", f"{leaf.names[0]} BART with {classes} class labels, "
                                                           f"expected {leaf.classes}")
        if "cutpoints" in leaf.posterior_variables:
            self.cutpoints(classes, config["class_labels"])

    def cutpoints(self, classes: int, class_labels: list) -> None:
        """Ordinal BART's cutpoints (chain, draw, cutpoint): K - 1 per draw, the first 0 (the
        model's constraint), finite and strictly increasing along the cutpoint axis (the class
        probabilities are differences of Phi at consecutive cutpoints); the ``cutpoint`` labels,
        which name the summary's rows, ``"a|b"`` for consecutive class labels a, b."""
        where = "posterior/cutpoints"
        cut = self.array("posterior", "cutpoints", "float", ("chain", "draw", "cutpoint"), local=("cutpoint",))
        if cut.shape[2] != classes - 1:
            _fail(where, f"{cut.shape[2]} cutpoints per draw, the configuration's {classes} classes need {classes - 1}")
        coords = self.idata["posterior"].dataset.coords
        if "cutpoint" in coords:
            expected = [f"{a}|{b}" for a, b in zip(map(str, class_labels), map(str, class_labels[1:]))]
            labels = [str(v) for v in coords["cutpoint"].values]
            if labels != expected:
                _fail("posterior/cutpoint", f"labels {labels}, expected {expected} from the class labels")
        flat = cut.reshape(-1, cut.shape[2])
        if not np.isfinite(flat).all():
            _fail(where, f"draw {self.first(~np.isfinite(flat).all(axis=1))} (chain-major) holds a non-finite cutpoint")
        if (flat[:, 0] != 0.0).any():
            _fail(where, f"draw {self.first(flat[:, 0] != 0.0)} (chain-major) has a first cutpoint "
                         f"{flat[self.first(flat[:, 0] != 0.0), 0]!r}, expected 0")
        up = np.diff(flat, axis=1) > 0
        if not up.all():
            _fail(where, f"draw {self.first(~up.all(axis=1))} (chain-major) has cutpoints that are not strictly "
                         "increasing")

    def soft(self, config: dict, trees: dict) -> None:
        """The soft trees' split parameters on the trees' node axis, and their scaling."""
        where = f"constant_data.attrs[{CONFIG_ATTR!r}]"
        _group(self.idata, SOFT_GROUP)
        p = self.sizes["predictor"]
        counts = self.array(SOFT_GROUP, "tree_nodes", "int", ("chain", "draw", "tree"))
        if not np.array_equal(counts, trees["counts"]):
            _fail(f"{SOFT_GROUP}/tree_nodes", "differs from trees/tree_nodes")
        internal = trees["internal"]
        tau = self.array(SOFT_GROUP, "node_tau", "float", ("node",))
        delta = self.array(SOFT_GROUP, "node_delta", "float", ("node", "predictor"))
        x = self.array(SOFT_GROUP, "x_scaled", "float", ("obs", "predictor"))
        if not np.isfinite(tau[internal]).all():
            _fail(f"{SOFT_GROUP}/node_tau", "a split node's threshold is not finite")
        if not np.isfinite(delta[internal]).all():
            _fail(f"{SOFT_GROUP}/node_delta", "a split node's direction is not finite")
        if not np.isfinite(x).all():
            _fail(f"{SOFT_GROUP}/x_scaled", f"row {self.first(~np.isfinite(x).all(axis=1))} is not finite")
        for key in ("x_min", "x_range"):
            values = config.get(key)
            if not isinstance(values, list) or len(values) != p or not all(_finite_number(v) for v in values):
                _fail(where, f"{key} must be a list of {p} finite numbers")
        if not all(v > 0 for v in config["x_range"]):
            _fail(where, "x_range must be > 0 for every predictor")
        h = config.get("h_final")
        if not _finite_number(h) or not h > 0:
            _fail(where, f"h_final is {h!r}, expected a finite number > 0")


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
