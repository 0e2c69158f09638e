"""Damaged or edited fit files give one ``FitFileError`` naming the file, the array and the fault,
never a crash (``posterior/file_check.py``); ``to_netcdf`` writes atomically, names the path when
it cannot, and leaves the log-likelihood out of the file for ``load`` to recompute exactly.

Every model type (CART regression / mean-variance shift / classification, BART, probit and
multinomial BART, soft trees, ``tempered`` with its ``rung_trees`` group, ``ctmc``, a fit with
``na_action="split"``) is saved once with tiny settings; each test edits one array or attribute of
a copy with plain xarray (as an attacker or a careless edit would) and loads it.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, BartpySuiteError, FitFileError
from bartpy_suite.posterior import file_check
from bartpy_suite.posterior.fit import CONFIG_ATTR, DESIGN_ATTR, LOG_LIKELIHOOD_ATTR

KW = dict(chains=2, draws=4, tune=4, seed=1, progress=False, check_mixing=False)


def _data() -> pd.DataFrame:
    df = bps.datasets.load("cgm1998").head(120).reset_index(drop=True)
    rng = np.random.default_rng(0)
    df["u"] = rng.uniform(size=len(df))
    df["c"] = pd.Categorical(np.where(df["y"] > df["y"].median(), "hi", "lo"))
    df["k"] = pd.Categorical(np.array(["a", "b", "c"])[rng.integers(0, 3, len(df))])
    return df


def _fit(kind: str, df: pd.DataFrame):
    na = df.copy()
    na.loc[:9, "x1"] = np.nan
    makers = {
        "cart": lambda: bps.cart("y ~ x1 + x2", data=df, **KW),
        "cart_mvs": lambda: bps.cart("y ~ x1 + x2", data=df, model="mean_variance_shift", **KW),
        "cart_class": lambda: bps.cart("k ~ x1 + x2", data=df, **KW),
        "bart": lambda: bps.bart("y ~ x1 + x2", data=df, trees=3, **KW),
        "probit": lambda: bps.bart("c ~ x1 + x2", data=df, trees=3, **KW),
        "multinomial": lambda: bps.bart("k ~ x1 + x2", data=df, trees=2, **KW),
        "soft": lambda: bps.soft_tree("y ~ x1 + u", data=df, **KW),
        "soft_class": lambda: bps.soft_tree("k ~ x1 + u", data=df, sampler="hmc_dfi", **KW),
        "tempered": lambda: bps.cart("y ~ x1 + x2", data=df, sampler="tempered",
                                     sampler_options={"store_rungs": True, "rungs": 3}, **KW),
        "ctmc": lambda: bps.cart("y ~ x1 + x2", data=df, sampler="ctmc", **KW),
        "split": lambda: bps.bart("y ~ x1 + x2", data=na, trees=3, na_action="split", **KW),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return makers[kind]()


KINDS = ("cart", "cart_mvs", "cart_class", "bart", "probit", "multinomial", "soft", "soft_class", "tempered", "ctmc",
         "split")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """kind -> (fit, path of its saved file), built on first use."""
    folder = tmp_path_factory.mktemp("fits")
    df = _data()
    cache = {}

    def get(kind):
        if kind not in cache:
            fit = _fit(kind, df)
            path = folder / f"{kind}.nc"
            fit.to_netcdf(path)
            cache[kind] = (fit, path)
        return cache[kind]

    return get


_READ: dict = {}  # saved fits read once per session; _edit works on deep copies


def _edit(src, dst, group=None, name=None, change=None, attrs=None):
    """Copy the saved fit ``src`` with ``change(values) -> values`` applied to ``group/name`` (or
    ``change(dataset) -> dataset`` without a name) and ``attrs(dict)`` applied to the group's
    attributes. Integers reach ``change`` as int64 (files hold the smallest type). With a path
    ``dst`` the copy is written there with plain xarray and ``dst`` returned; with ``dst=None`` the
    edited DataTree is returned, for ``_refused`` to check in memory (what ``load`` checks after
    reading, without the file's write and read)."""
    key = os.fspath(src)
    if key not in _READ:
        with xr.open_datatree(src, engine="netcdf4") as tree:
            _READ[key] = tree.load()
    tree = _READ[key].copy(deep=True)
    if change is not None:
        ds = tree[group].to_dataset()
        if name is None:
            ds = change(ds)
        else:
            old = ds[name]
            values = change(old.values.astype(np.int64) if old.dtype.kind in "iu" else old.values.copy())
            # a netCDF group has one size per dim name: a resized axis that other variables of the
            # group share gets a dim of its own
            others = {d for k, v in ds.variables.items() if k != name for d in v.dims}
            if np.ndim(values) != old.ndim:
                dims = tuple(f"edited{i}" for i in range(np.ndim(values)))
            else:
                dims = tuple(d if values.shape[i] == old.shape[i] or d not in others else f"{d}_edited"
                             for i, d in enumerate(old.dims))
            ds = ds.drop_vars(name).assign({name: (dims, values)})
        tree[group] = xr.DataTree(ds)
    if attrs is not None:
        attrs(tree[group].attrs)
    if dst is None:
        return tree
    tree.to_netcdf(dst, engine="netcdf4")
    return dst


def _predict(fit):
    kind = "prob" if fit.is_classification else "mean"
    return fit.predict(kind=kind, samples=True).values


def _refused(target, *patterns):
    """``bps.load(target)`` (a path) or the check ``load`` runs (a DataTree from ``_edit(src, None, ...)``)
    raises ``FitFileError`` naming the file and each pattern."""
    path = "edited.nc" if isinstance(target, xr.DataTree) else os.fspath(target)
    with pytest.raises(FitFileError) as info:
        if isinstance(target, xr.DataTree):
            file_check.check_fit(target, path)
        else:
            bps.load(target)
    message = str(info.value)
    assert repr(path) in message
    for pattern in patterns:
        assert pattern in message, message
    assert isinstance(info.value, BartpySuiteError) and isinstance(info.value, ValueError)
    return message


# --- valid files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_every_model_type_passes_the_check_and_predicts_identically(saved, kind):
    fit, path = saved(kind)
    back = bps.load(path)
    np.testing.assert_array_equal(_predict(back), _predict(fit))
    assert back.config == fit.config


def test_old_files_pass_the_check():
    data = os.path.join(os.path.dirname(__file__), "data")
    for name in ("v0_1_bart.nc", "v0_1_cart_mvs.nc", "v0_1_cart_classification.nc"):
        assert bps.load(os.path.join(data, name)).posterior.sizes["chain"] >= 1


# --- the tree store, every model type --------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_no_leaves_is_refused(saved, kind, tmp_path):
    """The issue's segfault: every node_var set to 0, so no tree ever closes."""
    _, path = saved(kind)
    bad = _edit(path, tmp_path / "f.nc", "trees", "node_var", lambda v: np.zeros_like(v))
    _refused(bad, "trees/node_var", "not a complete preorder tree")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["inflate", "negate", "zero"])
def test_bad_node_counts_are_refused(saved, kind, how, tmp_path):
    _, path = saved(kind)
    change = {"inflate": lambda c: c * 1000, "negate": lambda c: -c, "zero": lambda c: c * 0}[how]
    bad = _edit(path, None, "trees", "tree_nodes", change)
    _refused(bad, "trees/tree_nodes")


@pytest.mark.parametrize("kind", KINDS)
def test_predictor_index_past_the_model_is_refused(saved, kind, tmp_path):
    _, path = saved(kind)

    def past(v):
        v[np.flatnonzero(v >= 0)[0]] = 2  # two predictors: 0 and 1
        return v

    bad = _edit(path, tmp_path / "f.nc", "trees", "node_var", past)
    _refused(bad, "trees/node_var", "splits on 2, expected -1 (leaf) or a predictor 0..1")


def test_node_counts_summing_short_of_the_node_axis_are_refused(saved, tmp_path):
    _, path = saved("bart")

    def short(c):
        c.reshape(-1)[-1] = 0 if c.reshape(-1)[-1] == 1 else 1
        return c

    _refused(_edit(path, None, "trees", "tree_nodes", short), "trees/tree_nodes")


def test_preorder_that_closes_early_is_refused(saved, tmp_path):
    """Same number of leaves and splits per tree, wrong order: a leaf first ends the tree early."""
    _, path = saved("cart")
    with xr.open_datatree(path) as tree:
        counts = tree["trees"]["tree_nodes"].values.reshape(-1)
    s = int(np.flatnonzero(counts >= 3)[0])
    start = int(counts[:s].sum())

    def swap(v):
        v[start], v[start + counts[s] - 1] = v[start + counts[s] - 1], v[start]
        return v

    _refused(_edit(path, None, "trees", "node_var", swap), "trees/node_var", "preorder")


@pytest.mark.parametrize("kind", ["cart", "bart", "split"])
def test_numeric_cut_outside_its_grid_is_refused(saved, kind, tmp_path):
    fit, path = saved(kind)
    var = fit.idata["trees"]["node_var"].values
    on_x1 = int(np.flatnonzero(var == 0)[0])  # x1 is numeric

    def far(c):
        c[on_x1] = 10**6
        return c

    _refused(_edit(path, None, "trees", "node_cut", far), "trees/node_cut", f"node {on_x1} has cut")


def test_missing_value_bits_must_name_the_missing_code(saved, tmp_path):
    fit, path = saved("split")
    var = fit.idata["trees"]["node_var"].values
    on_x1 = int(np.flatnonzero(var == 0)[0])

    def wrong_code(c):
        c[on_x1] = (c[on_x1] & 0xFFFFFFFF) | (7 << 32)
        return c

    _refused(_edit(path, None, "trees", "node_cut", wrong_code), "trees/node_cut")
    # without na_action="split" the high word must be 0
    fit, path = saved("bart")
    on_x1 = int(np.flatnonzero(fit.idata["trees"]["node_var"].values == 0)[0])
    nbins = int(fit.idata["constant_data"]["nbins"].values[0])

    def na_bits(c):
        c[on_x1] = c[on_x1] | (nbins << 32)
        return c

    _refused(_edit(path, None, "trees", "node_cut", na_bits), "trees/node_cut")


def test_factor_mask_outside_the_levels_is_refused(saved, tmp_path):
    fit, path = saved("cart")
    var = fit.idata["trees"]["node_var"].values
    if not (var == 1).any():
        pytest.skip("no split on the factor in this tiny fit")
    node = int(np.flatnonzero(var == 1)[0])  # x2: 4 levels, masks 1..15

    def wide(c):
        c[node] = 1 << 20
        return c

    _refused(_edit(path, None, "trees", "node_cut", wide), "trees/node_cut", "factor level mask")
    _refused(_edit(path, None, "trees", "node_cut", lambda c: np.where(np.arange(c.size) == node, 0, c)),
             "trees/node_cut")


@pytest.mark.parametrize("kind,name", [("cart", "node_value"), ("bart", "node_value"), ("multinomial", "node_value"),
                                       ("probit", "node_value"), ("soft", "node_value")])
def test_non_finite_leaf_values_are_refused(saved, kind, name, tmp_path):
    fit, path = saved(kind)
    leaf = int(np.flatnonzero(fit.idata["trees"]["node_var"].values < 0)[1])  # the file holds leaves only

    def nan(v):
        v[1] = np.nan
        return v

    _refused(_edit(path, None, "trees", name, nan), f"trees/{name}", f"leaf node {leaf}")


def test_leaf_sigma_and_probabilities_are_checked(saved, tmp_path):
    _, path = saved("cart_mvs")
    _refused(_edit(path, None, "trees", "node_sigma", lambda s: -np.abs(s)), "trees/node_sigma")
    _, path = saved("cart_class")
    _refused(_edit(path, None, "trees", "node_prob", lambda p: p * 5), "trees/node_prob")
    _refused(_edit(path, None, "trees", "node_prob", lambda p: p[:, :2]), "trees/node_prob", "dims")
    _refused(_edit(path, None, "trees", "node_prob", lambda p: p[:-1]), "trees/node_prob", "leaf entries")


@pytest.mark.parametrize("kind", ["cart", "multinomial"])
def test_wrong_dtype_and_dims_are_refused(saved, kind, tmp_path):
    _, path = saved(kind)
    _refused(_edit(path, None, "trees", "node_var", lambda v: v + 0.5), "trees/node_var",
             "expected an integer type")
    _refused(_edit(path, None, "trees", "node_var", lambda v: v[:, None]), "trees/node_var", "dims")
    _refused(_edit(path, None, "trees", "node_value", lambda v: v[:-1]), "trees/node_value",
             "leaf entries, but node_var has")


def test_leaf_arrays_shorter_than_the_node_axis_are_refused(saved, tmp_path):
    _, path = saved("bart")
    _refused(_edit(path, None, "trees", "node_cut", lambda c: c[:-3]), "trees/node_cut")


# --- per model ----------------------------------------------------------------------------------------

def test_multinomial_needs_its_trees_per_class(saved, tmp_path):
    _, path = saved("multinomial")

    def fewer(attrs):
        config = json.loads(attrs[CONFIG_ATTR])
        config["trees"] = 3
        attrs[CONFIG_ATTR] = json.dumps(config)

    _refused(_edit(path, None, "constant_data", attrs=fewer), "trees/tree_nodes", "configuration gives 9")

    def two_labels(attrs):  # configuration and design edited alike
        config, design = json.loads(attrs[CONFIG_ATTR]), json.loads(attrs[DESIGN_ATTR])
        config["class_labels"], design["class_labels"] = config["class_labels"][:2], design["class_labels"][:2]
        attrs[CONFIG_ATTR], attrs[DESIGN_ATTR] = json.dumps(config), json.dumps(design)

    _refused(_edit(path, None, "constant_data", attrs=two_labels), "observed_data/y")


def test_probit_needs_two_classes(saved, tmp_path):
    _, path = saved("probit")

    def three(attrs):  # configuration and design edited alike
        config, design = json.loads(attrs[CONFIG_ATTR]), json.loads(attrs[DESIGN_ATTR])
        config["class_labels"] = design["class_labels"] = ["hi", "lo", "mid"]
        attrs[CONFIG_ATTR], attrs[DESIGN_ATTR] = json.dumps(config), json.dumps(design)

    _refused(_edit(path, None, "constant_data", attrs=three), "probit BART with 3 class labels")


@pytest.mark.parametrize("kind", ["soft", "soft_class"])
def test_soft_tree_groups_are_checked(saved, kind, tmp_path):
    _, path = saved(kind)
    _refused(_edit(path, None, "soft_trees", change=lambda ds: ds.isel(predictor=[0])), "soft_trees/",
             "predictor has size 1, but 2 elsewhere")
    _refused(_edit(path, None, "soft_trees", change=lambda ds: ds.isel(node=slice(0, -1))),
             "soft_trees/node_tau", "node has size")
    _refused(_edit(path, None, "soft_trees", "tree_nodes", lambda c: c[:, ::-1]),
             "soft_trees/tree_nodes")
    _refused(_edit(path, None, "soft_trees", "x_scaled", lambda x: x * np.nan), "soft_trees/x_scaled")
    _refused(_edit(path, None, "soft_trees", change=lambda ds: ds.drop_vars("node_tau")),
             "soft_trees/node_tau", "variable missing")

    def no_scale(attrs):
        config = json.loads(attrs[CONFIG_ATTR])
        config["x_range"] = [0.0, 1.0]
        attrs[CONFIG_ATTR] = json.dumps(config)

    _refused(_edit(path, None, "constant_data", attrs=no_scale), "x_range")


def test_rung_trees_are_checked_like_the_trees(saved, tmp_path):
    fit, path = saved("tempered")
    assert "rung_trees" in fit.idata.children
    _refused(_edit(path, None, "rung_trees", "node_var", lambda v: v * 0), "rung_trees/node_var")
    _refused(_edit(path, None, "rung_trees", "tree_nodes", lambda c: c * 7), "rung_trees/tree_nodes")
    _refused(_edit(path, None, "rung_trees", "node_var", lambda v: np.where(v >= 0, 5, v)),
             "rung_trees/node_var", "splits on 5")


def test_missing_value_codes_only_with_split(saved, tmp_path):
    fit, path = saved("split")
    assert (fit.idata["constant_data"]["x_codes"].values[0] == fit.idata["constant_data"]["nbins"].values[0]).any()
    _refused(_edit(path, None, "constant_data", "x_codes", lambda x: x + 2), "constant_data/x_codes")
    fit, path = saved("bart")
    nbins = int(fit.idata["constant_data"]["nbins"].values[0])

    def missing(x):
        x[0, 0] = nbins  # the missing code, which a fit without na_action="split" never has
        return x

    _refused(_edit(path, None, "constant_data", "x_codes", missing), "constant_data/x_codes")


# --- binned predictors, response, weights ---------------------------------------------------------------

def test_binned_predictors_are_checked(saved, tmp_path):
    _, path = saved("cart")
    _refused(_edit(path, None, "constant_data", "cuts", lambda c: c[:, ::-1]), "constant_data/cuts",
             "not strictly increasing")
    _refused(_edit(path, None, "constant_data", "nbins", lambda n: n + 1000), "constant_data/nbins")
    _refused(_edit(path, None, "constant_data", "is_categorical", lambda c: c + 2),
             "constant_data/is_categorical")
    _refused(_edit(path, None, "constant_data", "x_codes", lambda x: x - 1), "constant_data/x_codes")
    _refused(_edit(path, None, "observed_data", change=lambda ds: ds.isel(obs=slice(0, -1))),
             "observed_data/y", "obs has size 119, but 120 elsewhere")


def test_response_is_checked(saved, tmp_path):
    _, path = saved("cart_class")
    _refused(_edit(path, None, "observed_data", "y", lambda y: y + 3), "observed_data/y",
             "class code outside 0..2")
    _, path = saved("cart")
    _refused(_edit(path, None, "observed_data", "y", lambda y: y * np.inf), "observed_data/y")


@pytest.mark.parametrize("change,pattern", [(lambda w: -w, "expected finite and >= 0"),
                                            (lambda w: w * np.nan, "expected finite and >= 0"),
                                            (lambda w: w * 0, "every weight is 0")])
def test_weights_are_checked(saved, tmp_path, change, pattern):
    _, path = saved("ctmc")
    _refused(_edit(path, None, "sample_stats", "weight", change), "sample_stats/weight", pattern)


def test_draw_counts_must_agree_across_groups(saved, tmp_path):
    _, path = saved("bart")
    _refused(_edit(path, None, "trees", change=lambda ds: ds.isel(draw=slice(0, 2))), "trees/tree_nodes",
             "draw has size 2, but 4 elsewhere")
    _refused(_edit(path, None, "posterior", "sigma", lambda s: -s), "posterior/sigma")


# --- attributes: configuration and design JSON -------------------------------------------------------------

@pytest.mark.parametrize("edit,pattern", [
    (lambda a: a.update({CONFIG_ATTR: "{not json"}), "not valid JSON"),
    (lambda a: a.update({CONFIG_ATTR: "[1, 2]"}), "expected an object"),
    (lambda a: a.pop(CONFIG_ATTR), "no model configuration"),
    (lambda a: a.update({CONFIG_ATTR: json.dumps({**json.loads(a[CONFIG_ATTR]), "model_type": 3})}), "model_type"),
    (lambda a: a.update({CONFIG_ATTR: json.dumps({**json.loads(a[CONFIG_ATTR]), "predictors": ["x1"]})}),
     "differ from the configuration's ['x1']"),
    (lambda a: a.update({CONFIG_ATTR: json.dumps({**json.loads(a[CONFIG_ATTR]), "response_kind": "ordinal"})}),
     "response_kind"),
    (lambda a: a.update({CONFIG_ATTR: json.dumps({**json.loads(a[CONFIG_ATTR]), "trees": -1})}), "trees"),
])
def test_configuration_json_is_checked(saved, tmp_path, edit, pattern):
    _, path = saved("bart")
    _refused(_edit(path, None, "constant_data", attrs=edit), pattern)


@pytest.mark.parametrize("edit,pattern", [
    (lambda d: "{truncated", "not valid JSON"),
    (lambda d: json.dumps([d]), "expected an object"),
    (lambda d: json.dumps({k: v for k, v in json.loads(d).items() if k != "levels"}), "key 'levels' missing"),
    (lambda d: json.dumps({**json.loads(d), "predictors": ["a", "b"]}), "differ from the configuration"),
    (lambda d: json.dumps({**json.loads(d), "levels": 7}), "key 'levels' is a int"),
    (lambda d: json.dumps({**json.loads(d), "format": "other"}), "not a saved bartpy_suite design"),
    (lambda d: json.dumps({**json.loads(d), "levels": [None, ["A", "B"]]}), "predictor 1 has 2 levels in the design"),
    (lambda d: json.dumps({**json.loads(d), "is_categorical": [False, False]}), "predictor 1 is numeric in the design"),
    (lambda d: json.dumps({**json.loads(d), "class_labels": ["a"]}), "1 class labels, the configuration has 0"),
])
def test_design_json_is_checked(saved, tmp_path, edit, pattern):
    _, path = saved("cart")
    bad = _edit(path, tmp_path / "f.nc", "constant_data",
                attrs=lambda a: a.update({DESIGN_ATTR: edit(a[DESIGN_ATTR])}))
    _refused(bad, f"constant_data.attrs[{DESIGN_ATTR!r}]", pattern)


def test_missing_group_is_refused(saved, tmp_path):
    _, path = saved("cart")
    with xr.open_datatree(path) as tree:
        tree = tree.load()
    del tree["trees"]
    tree.to_netcdf(tmp_path / "f.nc")
    _refused(tmp_path / "f.nc", "trees: group missing")


# --- files that are not fits ---------------------------------------------------------------------------

def test_truncated_file_is_refused(saved, tmp_path):
    _, path = saved("bart")
    data = open(path, "rb").read()
    for n, name in ((len(data) // 2, "half.nc"), (100, "head.nc"), (0, "empty.nc")):
        (tmp_path / name).write_bytes(data[:n])
        _refused(tmp_path / name, "truncated, damaged or not a file written by Fit.to_netcdf")


def test_foreign_files_are_refused(tmp_path):
    (tmp_path / "text.nc").write_text("hello")
    _refused(tmp_path / "text.nc", "cannot be read as a netCDF fit file")
    xr.Dataset({"a": ("x", np.arange(3))}).to_netcdf(tmp_path / "plain.nc")
    _refused(tmp_path / "plain.nc", "constant_data: group missing")
    tree = xr.DataTree.from_dict({"/constant_data": xr.Dataset({"a": ("x", np.arange(3))}),
                                  "/posterior": xr.Dataset()})
    tree.to_netcdf(tmp_path / "tree.nc")
    _refused(tmp_path / "tree.nc", "no model configuration")
    with pytest.raises(FitFileError, match="is a folder"):
        bps.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        bps.load(tmp_path / "nope.nc")


def test_damaged_old_file_is_refused(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "data", "v0_1_bart.nc")
    bad = _edit(src, tmp_path / "f.nc", "posterior", "split_var", lambda v: np.where(v == -1, 0, v))
    _refused(bad, "trees/node_var")


def test_check_is_callable_on_a_datatree(saved):
    fit, _ = saved("cart")
    assert file_check.check_fit(fit.idata)["model_type"] == "cart"
    broken = fit.idata.copy()
    broken["sample_stats"] = xr.DataTree(broken["sample_stats"].to_dataset().drop_vars("weight"))
    with pytest.raises(FitFileError, match="sample_stats/weight: variable missing"):
        file_check.check_fit(broken, "x.nc")


# --- writing ---------------------------------------------------------------------------------------------

def test_to_netcdf_into_a_folder_names_the_path(saved, tmp_path):
    fit, _ = saved("cart")
    with pytest.raises(ArgumentError, match=f"cannot write the fit to {str(tmp_path)!r}: it is a folder"):
        fit.to_netcdf(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_old_file(saved, tmp_path, monkeypatch):
    fit, src = saved("cart")
    target = tmp_path / "fit.nc"
    target.write_bytes(open(src, "rb").read())
    before = target.read_bytes()

    def broken(self, path, **kw):
        with open(path, "wb") as handle:
            handle.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.DataTree, "to_netcdf", broken)
    with pytest.raises(KeyboardInterrupt):
        fit.to_netcdf(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.nc"]


def test_os_errors_name_the_path(saved, tmp_path, monkeypatch):
    fit, _ = saved("cart")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", dst)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError, match=f"cannot write the fit to {str(tmp_path / 'f.nc')!r}"):
        fit.to_netcdf(tmp_path / "f.nc")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["cart", "multinomial", "soft_class"])
def test_log_likelihood_is_recomputed_exactly_on_load(saved, kind, tmp_path):
    fit, path = saved(kind)
    assert "log_likelihood" in fit.idata.children  # tiny fits store it (under the size limit)
    with xr.open_datatree(path) as tree:
        assert "log_likelihood" not in tree.children
        assert tree["constant_data"].attrs[LOG_LIKELIHOOD_ATTR] == "recompute"
    back = bps.load(path)
    np.testing.assert_array_equal(back.idata["log_likelihood"]["y"].values, fit.idata["log_likelihood"]["y"].values)
    assert LOG_LIKELIHOOD_ATTR not in back.idata["constant_data"].attrs
    assert "log_likelihood" not in bps.load(path, log_likelihood=False).idata.children
    # stored on request, and read back as stored
    fit.to_netcdf(tmp_path / "with.nc", log_likelihood=True)
    with xr.open_datatree(tmp_path / "with.nc") as tree:
        assert "log_likelihood" in tree.children
    np.testing.assert_array_equal(bps.load(tmp_path / "with.nc").idata["log_likelihood"]["y"].values,
                                  fit.idata["log_likelihood"]["y"].values)


def test_loo_works_after_load_and_to_netcdf_modifies_nothing(saved, tmp_path):
    import arviz_stats as azs

    fit = bps.cart("y ~ x1 + x2", data=_data(), **{**KW, "draws": 40})  # PSIS needs a few more draws
    attrs = dict(fit.idata["constant_data"].attrs)
    groups = list(fit.idata.children)
    fit.to_netcdf(tmp_path / "f.nc")
    assert dict(fit.idata["constant_data"].attrs) == attrs and list(fit.idata.children) == groups
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PSIS warns about k-hat on 8 draws
        assert float(azs.loo(bps.load(tmp_path / "f.nc").idata).elpd) == float(azs.loo(fit.idata).elpd)


def test_fit_without_log_likelihood_loads_without_it(saved, tmp_path):
    fit, path = saved("cart")
    no = bps.load(path, log_likelihood=False)
    no.to_netcdf(tmp_path / "f.nc")
    assert "log_likelihood" not in bps.load(tmp_path / "f.nc").idata.children
    assert "log_likelihood" in bps.load(tmp_path / "f.nc", log_likelihood=True).idata.children


# --- leaf parameters stored at the leaves only ---------------------------------------------------------------

@pytest.mark.parametrize("kind", ["cart_mvs", "cart_class", "multinomial", "soft"])
def test_leaf_parameters_are_stored_at_leaves_and_restored_exactly(saved, kind):
    fit, path = saved(kind)
    with xr.open_datatree(path) as tree:
        stored = {k: tree["trees"][k].dims for k in tree["trees"].data_vars}
    names = [k for k in ("node_value", "node_sigma", "node_prob") if k in fit.idata["trees"]]
    assert names and all(stored[k][0] == "leaf" for k in names)
    back = bps.load(path)
    for name in fit.idata["trees"].data_vars:
        assert back.idata["trees"][name].equals(fit.idata["trees"][name]), name  # NaN at internal nodes too


def test_leaf_count_must_match_the_leaves(saved, tmp_path):
    _, path = saved("bart")
    _refused(_edit(path, tmp_path / "a.nc", "trees", "node_value", lambda v: v[:-1]), "trees/node_value",
             "leaf entries, but node_var has")
    # a split turned into a leaf: the structure is checked first
    _refused(_edit(path, tmp_path / "b.nc", "trees", "node_var", lambda v: np.where(np.arange(v.size) == 0, -1, v)),
             "trees/node_var", "preorder")
    _refused(_edit(path, tmp_path / "c.nc", "trees", "node_value", lambda v: v.astype(np.int64)), "trees/node_value",
             "expected a floating-point type")


def test_saved_file_gets_the_usual_permissions(saved, tmp_path):
    """The temporary file is created with mode 0o666 minus the umask, not mkstemp's 0o600."""
    fit, _ = saved("cart")
    old = os.umask(0o022)
    try:
        fit.to_netcdf(tmp_path / "f.nc")
    finally:
        os.umask(old)
    assert (os.stat(tmp_path / "f.nc").st_mode & 0o777) == 0o644


def test_load_checks_its_log_likelihood_argument(saved):
    _, path = saved("cart")
    with pytest.raises(ArgumentError, match="log_likelihood must be True or False"):
        bps.load(path, log_likelihood="yes")


# --- variables hidden as coordinates, structures where none belongs, survival settings ---------

def test_variables_hidden_as_coordinates_are_refused(saved, tmp_path):
    """The readers look variables up by name, which also finds a coordinate: a node_value of one
    entry stored as a coordinate (a 754-node store) made tree_arrays read past its end, and an extra
    group whose tree_nodes was a coordinate of 10^7 crashed the preorder kernel."""
    _, path = saved("cart_class")

    def as_coordinate(ds):
        return ds.drop_vars("node_prob").assign_coords(node_value=("one", [0.5]))

    _refused(_edit(path, None, "trees", change=as_coordinate), "trees/node_value", "stored as a coordinate")

    def extra_group(tree):
        trees = tree["trees"].to_dataset()
        evil = xr.Dataset({"node_var": trees["node_var"], "node_cut": trees["node_cut"]},
                          coords={"tree_nodes": ("k", [10**7])})
        tree["evil"] = xr.DataTree(evil)
        return tree

    _refused(extra_group(_edit(path, None)), "evil/tree_nodes", "stored as a coordinate")


def test_a_structure_in_the_soft_trees_group_is_refused(saved):
    """tree_arrays("soft_trees") would read a node_var stored there (heap corruption before)."""
    _, path = saved("soft")
    _refused(_edit(path, None, "soft_trees", change=lambda ds: ds.assign(node_var=("k", np.zeros(1, np.int64)))),
             "soft_trees/node_var", "lives in the trees group")
    fit, _ = saved("soft")
    with pytest.raises(ArgumentError, match="no tree store 'soft_trees'"):
        fit.tree_arrays("soft_trees")


def test_a_store_with_node_var_but_no_counts_is_refused(saved):
    _, path = saved("cart")

    def extra_group(tree):
        tree["evil"] = xr.DataTree(xr.Dataset({"node_var": tree["trees"].to_dataset()["node_var"]}))
        return tree

    _refused(extra_group(_edit(path, None)), "evil/tree_nodes", "variable missing")


@pytest.fixture(scope="module")
def survival_file(tmp_path_factory):
    rng = np.random.default_rng(4)
    x = rng.uniform(size=40)
    weeks = np.ceil(rng.exponential(1 / (0.05 * np.exp(x))))
    df = pd.DataFrame({"x": x, "time": np.minimum(weeks, 20), "event": weeks <= 20})
    fit = bps.bart("Surv(time, event) ~ x", data=df, trees=5, **KW)
    path = tmp_path_factory.mktemp("survival") / "surv.nc"
    fit.to_netcdf(path)
    return fit, path, df


@pytest.mark.parametrize("edit, pattern", [
    (lambda s: "abc", "survival is a str"),
    (lambda s: {**s, "grid": "abc"}, "survival.grid"),
    (lambda s: {**s, "grid": [[1, 2], [3, 4]]}, "survival.grid"),
    (lambda s: {**s, "grid": s["grid"][::-1]}, "survival.grid"),
    (lambda s: {**s, "grid": [float("nan")] + s["grid"][1:]}, "survival.grid"),
    (lambda s: {**s, "max_time": "x"}, "survival.max_time"),
    (lambda s: {**s, "time_name": 3}, "survival.time_name"),
])
def test_survival_settings_are_checked(survival_file, edit, pattern):
    """posterior/survival.py searches the grid and compares with max_time: a grid that is not an
    increasing list of times gave numpy errors (exit 1 at the command line) or silent wrong answers."""
    _, path, _ = survival_file

    def change(attrs):
        config = json.loads(attrs[CONFIG_ATTR])
        config["survival"] = edit(config["survival"])
        attrs[CONFIG_ATTR] = json.dumps(config)

    _refused(_edit(path, None, "constant_data", attrs=change), pattern)


def test_survival_fit_loads_and_new_rows_go_through_predict_only(survival_file):
    """A survival fit's trees split on the time and the covariates: f(x) draws and SHAP values of
    new rows (covariates only) are refused rather than binned on the wrong predictors."""
    fit, path, df = survival_file
    again = bps.load(path)
    new = df.head(3).drop(columns=["time", "event"])
    pd.testing.assert_frame_equal(again.predict(new, times=[2.0, 5.0]), fit.predict(new, times=[2.0, 5.0]))
    for call in (lambda: again.function_samples(new), lambda: again.shap(new), lambda: again.importance(new)):
        with pytest.raises(ArgumentError, match=r"predict\(newdata, kind='survival'"):
            call()


@pytest.mark.parametrize("kind", ("cart", "cart_mvs", "cart_class", "bart", "probit", "multinomial", "soft",
                                  "soft_class"))
def test_leaf_model_edited_to_any_other_name_is_refused_or_loads_identically(saved, tmp_path, kind):
    """config["leaf_model"] set to every registered name, or removed: the file is refused with a
    FitFileError or loads to the same predictions (e.g. BART's "normal" and CART's "mean_shift"
    are one leaf model). A soft leaf model on hard trees crashed on load, a hard one on soft trees
    predicted the soft tree with the hard kernels (other values)."""
    from bartpy_suite.posterior.leaf_models import LEAF_MODELS

    fit, path = saved(kind)
    expected = _predict(fit)
    for name in [*sorted(LEAF_MODELS), None]:
        if name == fit.config.get("leaf_model"):
            continue

        def edit(a, name=name):
            config = json.loads(a[CONFIG_ATTR])
            if name is None:
                config.pop("leaf_model", None)
            else:
                config["leaf_model"] = name
            a[CONFIG_ATTR] = json.dumps(config)

        dst = _edit(path, tmp_path / f"{name}.nc", "constant_data", attrs=edit)
        try:
            back = bps.load(dst)
        except FitFileError:
            continue
        np.testing.assert_array_equal(_predict(back), expected, err_msg=f"leaf_model {name!r}")


@pytest.mark.parametrize("kind,name", [("cart", "soft_normal"), ("cart_class", "soft_dirichlet"),
                                       ("soft", "normal"), ("soft_class", "dirichlet")])
def test_leaf_model_of_the_other_split_kind_names_the_model_type(saved, kind, name):
    _, path = saved(kind)
    edit = lambda a: a.update({CONFIG_ATTR: json.dumps({**json.loads(a[CONFIG_ATTR]), "leaf_model": name})})  # noqa: E731
    _refused(_edit(path, None, "constant_data", attrs=edit), f"leaf_model {name!r}", "split trees, not of a")


def test_survival_settings_on_a_leaf_model_other_than_probit_are_refused(saved, survival_file):
    """Survival BART is the probit leaf model on person-period rows: survival settings (copied from
    a real survival fit) added to a three-class multinomial fit loaded, and its predict(kind=
    'survival') returned numbers computed from the multinomial trees as if they were one probit."""
    _, multinomial_path = saved("multinomial")
    survival = survival_file[0].config["survival"]

    def change(attrs):
        config = json.loads(attrs[CONFIG_ATTR])
        config["survival"] = {**survival, "time_name": config["predictors"][0]}
        attrs[CONFIG_ATTR] = json.dumps(config)
        attrs.pop(DESIGN_ATTR, None)  # the design of a survival fit leaves the time out

    _refused(_edit(multinomial_path, None, "constant_data", attrs=change), "a survival fit is", "probit")


@pytest.mark.parametrize("leaf_model", ["mean_shift", None])
def test_soft_trees_group_in_a_hard_split_fit_is_refused(saved, leaf_model):
    """A soft tree's file with model_type edited to 'cart' (and leaf_model to a hard one, or
    removed) passed the check and would be predicted with the hard kernels (other values)."""
    _, path = saved("soft")

    def change(attrs):
        config = json.loads(attrs[CONFIG_ATTR])
        config["model_type"] = "cart"
        if leaf_model is None:
            config.pop("leaf_model", None)
        else:
            config["leaf_model"] = leaf_model
        attrs[CONFIG_ATTR] = json.dumps(config)

    _refused(_edit(path, None, "constant_data", attrs=change), "soft_trees", "hard-split")
