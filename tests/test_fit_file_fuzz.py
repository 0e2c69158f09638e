"""Property-based attack on saved fits: hypothesis mutates the arrays and attributes of small saved
fits at random, and ``bps.load`` followed by ``predict`` either works or raises the package's error
(``BartpySuiteError``), never anything else and never a crash.

A crash (segmentation fault, heap-corruption abort) would kill the process running it, so the
mutation loop runs in a child process (this file run as a script) and the test checks the child's
exit code and its last line, ``OK <examples> <loaded> <refused>``. The child prints each mutation
before trying it, so after a crash the last printed mutation is the culprit.

The default run tries ``EXAMPLES`` mutations over six fits (BART regression, multinomial BART,
CART classification with the ``tempered`` sampler's ``rung_trees`` group, a soft classification
tree, ordinal BART, DART BART); the ``slow`` test tries ``SLOW_EXAMPLES`` per seed over several seeds.

Run the child by hand: ``python tests/test_fit_file_fuzz.py <folder of .nc files> <examples> <seed>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

EXAMPLES = 25
SLOW_EXAMPLES = 1000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Values that sit on the edges the checks guard: node counts, predictor and level indices,
#: int32/int64 limits, the missing-value shift (32) and factor mask widths (63, 64).
INTS = (-2**63, -2**31 - 1, -2**31, -3, -2, -1, 0, 1, 2, 3, 4, 7, 31, 32, 62, 63, 64, 127, 128, 255, 1000, 2**31 - 1,
        2**31, 2**32, 2**32 + 1, 2**62, 2**63 - 1)
FLOATS = (float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 0.5, 1.0, 2.0, 1e308, -1e-300)
JSON_VALUES = (None, True, -1, 0, 1, 2, 3, 10**9, -0.5, 1e300, "x", "", "split", "multinomial", "probit", "cart", "bart",
               "soft_tree", "categorical", "numeric", "hmc_dfi", [], [0], ["x1"], ["x1", "x2", "x3"], ["a", "a"],
               [1.0, 0.0], {}, {"a": 1})


def _fits(folder: str) -> None:
    """Save the six small fits the child attacks."""
    import pandas as pd

    import bartpy_suite as bps

    df = bps.datasets.load("cgm1998").head(80).reset_index(drop=True)
    rng = np.random.default_rng(0)
    df["u"] = rng.uniform(size=len(df))
    df["k"] = pd.Categorical(np.array(["a", "b", "c"])[rng.integers(0, 3, len(df))])
    kw = dict(chains=2, draws=3, tune=3, seed=2, progress=False, check_mixing=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bps.bart("y ~ x1 + x2", data=df, trees=3, **kw).to_netcdf(os.path.join(folder, "bart.nc"))
        bps.bart("k ~ x1 + x2", data=df, trees=2, **kw).to_netcdf(os.path.join(folder, "multinomial.nc"))
        bps.cart("k ~ x1 + x2", data=df, sampler="tempered", sampler_options={"store_rungs": True, "rungs": 2},
                 **kw).to_netcdf(os.path.join(folder, "tempered.nc"), log_likelihood=True)
        bps.soft_tree("k ~ x1 + u", data=df, sampler="hmc_dfi", **kw).to_netcdf(os.path.join(folder, "soft.nc"))
        # this session's variables: ordinal BART's cutpoints, DART's split_probs and sparse_alpha
        df["o"] = pd.Categorical(np.array(["lo", "mid", "hi"])[rng.integers(0, 3, len(df))],
                                 categories=["lo", "mid", "hi"], ordered=True)
        bps.bart("o ~ x1 + x2", data=df, trees=2, **kw).to_netcdf(os.path.join(folder, "ordinal.nc"))
        bps.bart("y ~ x1 + x2", data=df, trees=2, sparse=True, **kw).to_netcdf(os.path.join(folder, "dart.nc"))


# --- the child -------------------------------------------------------------------------------------------

def _child(folder: str, examples: int, seed: int) -> None:
    import xarray as xr
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    import bartpy_suite as bps
    from bartpy_suite.errors import BartpySuiteError

    warnings.simplefilter("ignore")
    bases = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".nc"):
            with xr.open_datatree(os.path.join(folder, name), engine="netcdf4") as tree:
                bases[name] = tree.load()
    names = sorted(bases)
    new_rows = np.array([[2.0, 0.0], [6.0, 1.0], [8.5, 2.0]])  # x1 and a factor code, or x1 and u
    counts = {"loaded": 0, "refused": 0, "unwritable": 0}
    work = tempfile.mkdtemp(prefix="fuzz-", dir=folder)

    def variables(tree):
        return [(node.path.strip("/"), v) for node in tree.subtree for v in node.dataset.data_vars]

    def attrs(tree):
        out = []
        for node in tree.subtree:
            for key, value in node.attrs.items():
                if isinstance(value, str) and value[:1] in "{[":
                    out.append((node.path.strip("/"), key))
        return out

    @st.composite
    def mutation(draw):
        name = draw(st.sampled_from(names))
        tree = bases[name]
        kind = draw(st.sampled_from(["set", "set", "set", "scale", "resize", "dtype", "drop", "shuffle", "json",
                                     "json", "json_text", "group", "coord"]))
        if kind in ("json", "json_text"):
            group, key = draw(st.sampled_from(attrs(tree)))
            payload = json.loads(tree[group].attrs[key])
            if kind == "json_text":
                text = tree[group].attrs[key]
                cut = draw(st.integers(0, len(text)))
                return name, (kind, group, key, draw(st.sampled_from([text[:cut], text[cut:], text + "]", "null"])))
            if isinstance(payload, dict) and payload:
                sub = draw(st.sampled_from(sorted(payload)))
                return name, (kind, group, key, sub, draw(st.sampled_from(("<delete>",) + JSON_VALUES)))
            return name, (kind, group, key, None, draw(st.sampled_from(JSON_VALUES)))
        if kind == "group":
            return name, (kind, draw(st.sampled_from([n for n in tree.children])))
        group, var = draw(st.sampled_from(variables(tree)))
        da = tree[group][var]
        if kind == "set":
            k = draw(st.integers(1, 3))
            where = [draw(st.integers(0, max(da.size - 1, 0))) for _ in range(k)]
            pool = INTS if da.dtype.kind in "iub" else FLOATS + tuple(float(v) for v in INTS[3:12])
            return name, (kind, group, var, where, [draw(st.sampled_from(pool)) for _ in range(k)])
        if kind == "scale":
            return name, (kind, group, var, draw(st.sampled_from([-1, 0, 2, 3, 1000, 2**31])))
        if kind == "resize":
            return name, (kind, group, var, draw(st.integers(0, max(da.ndim - 1, 0))), draw(st.integers(-3, 3)))
        if kind == "dtype":
            return name, (kind, group, var, draw(st.sampled_from(["int8", "uint8", "int16", "uint64", "float32",
                                                                  "float64", "bool"])))
        return name, (kind, group, var)

    def apply(tree, m):
        kind = m[0]
        if kind == "group":
            del tree[m[1]]
            return
        if kind in ("json", "json_text"):
            group, key = m[1], m[2]
            if kind == "json_text":
                tree[group].attrs[key] = m[3]
                return
            payload = json.loads(tree[group].attrs[key])
            if m[3] is None:
                payload = m[4]
            elif m[4] == "<delete>":
                payload.pop(m[3])
            else:
                payload[m[3]] = m[4]
            tree[group].attrs[key] = json.dumps(payload)
            return
        group, var = m[1], m[2]
        ds = tree[group].to_dataset()
        da = ds[var]
        values = np.array(da.values, copy=True)
        dims = da.dims
        if kind == "set":
            flat = values.reshape(-1)
            for i, v in zip(m[3], m[4]):
                if flat.size:
                    flat[i % flat.size] = np.array(v).astype(values.dtype) if values.dtype.kind in "iub" else v
        elif kind == "scale":
            with np.errstate(all="ignore"):
                values = (values.astype(np.int64) * m[3]).astype(values.dtype) if values.dtype.kind in "iub" \
                    else values * m[3]
        elif kind == "resize":
            axis, delta = m[3], m[4]
            if values.ndim:
                n = values.shape[axis]
                values = np.take(values, np.arange(max(n + delta, 0)) % max(n, 1), axis=axis) if n else values
                dims = tuple(d if i != axis or values.shape[i] == da.shape[i] else f"{d}_x" for i, d in enumerate(dims))
        elif kind == "dtype":
            with np.errstate(all="ignore"):
                values = np.nan_to_num(values).astype(m[3])
        elif kind == "drop":
            tree[group] = xr.DataTree(ds.drop_vars(var))
            return
        elif kind == "shuffle":
            values = values[::-1].copy()
        elif kind == "coord":  # the same values as a coordinate: readers that look names up find it too
            tree[group] = xr.DataTree(ds.drop_vars(var).assign_coords({var: (dims, values)}))
            return
        ds = ds.drop_vars(var).assign({var: (dims, values)})
        tree[group] = xr.DataTree(ds)

    def attempt(name, m):
        tree = bases[name].copy(deep=True)
        try:
            apply(tree, m)
            path = os.path.join(work, "m.nc")
            tree.to_netcdf(path, engine="netcdf4")
        except Exception:  # xarray or netCDF cannot write this mutation: nothing to load
            counts["unwritable"] += 1
            return
        try:
            fit = bps.load(path)
            kind = "prob" if fit.is_classification else "mean"
            fit.predict(kind=kind)
            fit.predict(new_rows, kind=kind)
            fit.tree_arrays()
            for group, node in fit.idata.children.items():  # every store tree_arrays will read
                if group != "trees" and "tree_nodes" in node:
                    fit.tree_arrays(group)
            counts["loaded"] += 1
        except BartpySuiteError:
            counts["refused"] += 1

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(mutation())
    def run(case):
        name, m = case
        print(name, repr(m)[:300], flush=True)
        attempt(name, m)

    hypothesis_seed(seed)(run)()
    print(f"OK {examples} {counts['loaded']} {counts['refused']} {counts['unwritable']}", flush=True)


# --- the tests ------------------------------------------------------------------------------------------------

def _run_child(folder, examples: int, seed: int) -> tuple[int, list[str]]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, os.path.abspath(__file__), str(folder), str(examples), str(seed)],
                          capture_output=True, text=True, env=env, timeout=3600)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, (f"child exited with {done.returncode} (negative: killed by that signal); last "
                                  f"mutation: {lines[-1:]}\n{done.stderr[-4000:]}")
    assert lines and lines[-1].startswith("OK "), done.stdout[-2000:]
    return done.returncode, lines


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    _fits(str(folder))
    return folder


def test_random_mutations_load_or_raise_the_package_error(fits):
    _, lines = _run_child(fits, EXAMPLES, seed=1)
    _, n, loaded, refused, unwritable = lines[-1].split()
    assert int(n) == EXAMPLES
    assert int(refused) > 0  # the mutations reach the checks (most are refused)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_many_random_mutations(fits, seed):
    _run_child(fits, SLOW_EXAMPLES, seed)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
