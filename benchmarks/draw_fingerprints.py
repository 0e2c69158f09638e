"""Fingerprints of the draws of every model and sampler, to check that a refactoring of the
kernels leaves the draws bit-identical.

Command: ``python3 benchmarks/draw_fingerprints.py [--out FILE] [--compare FILE] [--only NAME]``

Each case fits a small data set (2 chains, seeds fixed below) and hashes (sha1) every array of
the posterior DataTree and the predictions on the training rows. Run it once before a change
(``--out before.json``) and once after (``--compare before.json``): the second run prints the
cases whose hash changed and exits with status 1 if any did. Hashes depend on the machine's
floating point (vector width, libm), so compare only runs on one machine; nothing in CI reads
them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import warnings

import numpy as np
import pandas as pd

import bartpy_suite as bps


def _data(seed: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0, 10, n)
    x2 = rng.choice(list("ABCD"), n)
    x3 = rng.normal(size=n)
    f = np.where(x1 < 5, 1.0, 3.0) + (x2 == "B") * 2.0 + 0.5 * x3
    y = f + rng.normal(0, 0.7, n)
    df = pd.DataFrame({"x1": x1, "x2": pd.Categorical(x2), "x3": x3, "y": y})
    df["yb"] = (y > np.median(y)).astype(int)
    df["yc"] = pd.Categorical(np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(str))
    df["yo"] = pd.Categorical(df["yc"].astype(str), categories=["0", "1", "2"], ordered=True)
    df["time"] = np.exp(0.3 * f + rng.normal(0, 0.5, n))
    df["event"] = (rng.uniform(size=n) < 0.8).astype(int)
    return df


def _sparse_data(seed: int, n: int = 150, p: int = 40) -> pd.DataFrame:
    """0/1 predictors, each 1 in about 4% of the rows, and y from three of them: the data on which
    the samplers take their sparse paths (rule counts and bins from each predictor's rows off its
    most common code), which the dense ``_data`` never reaches."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(size=(n, p)) < 0.04).astype(float)
    x[: n // 5, :3] = 1.0 - x[: n // 5, :3]  # three predictors common enough to split on
    df = pd.DataFrame(x, columns=[f"s{j}" for j in range(p)])
    df["y"] = 2.0 * x[:, 0] - 1.5 * x[:, 1] + x[:, 2] + rng.normal(0, 0.5, n)
    return df


@contextlib.contextmanager
def _environ(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _row_blocks_fit(sampler: str, df: pd.DataFrame, **kw):
    """BART with its per-row passes split into row blocks from 50 rows (normally 300,000)."""
    from bartpy_suite.samplers.forest import ROW_BLOCKS_ENV

    with _environ(ROW_BLOCKS_ENV, "50"):
        return bps.bart("y ~ x1 + x2 + x3", data=df, sampler=sampler, **kw)


def _cases():
    df = _data(1)
    na = df.copy()
    na.loc[::7, "x1"] = np.nan
    base = dict(chains=2, seed=3)
    cart = dict(draws=150, tune=150, **base)
    bart = dict(trees=10, draws=60, tune=60, **base)
    yield "cart_cgm", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="cgm", **cart)
    yield "cart_grow_prune_thin", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="grow_prune", thin=3, **cart)
    yield "cart_class", lambda: bps.cart("yc ~ x1 + x2 + x3", data=df, **cart)
    yield "cart_tempered", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="tempered",
                                           sampler_options={"store_rungs": True}, **cart)
    yield "cart_pg", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="pg", **cart)
    yield "cart_smc", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="smc", draws=50, chains=2, seed=3)
    yield "cart_ctmc", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sampler="ctmc",
                                       sampler_options={"rotate": True, "perturb": True}, **cart)
    yield "cart_na_split", lambda: bps.cart("y ~ x1 + x2 + x3", data=na, na_action="split", **cart)
    yield "cart_sparse", lambda: bps.cart("y ~ x1 + x2 + x3", data=df, sparse=True, sampler="grow_prune", **cart)
    for sampler in ("grow_prune", "cgm", "pg", "ctmc", "tempered"):
        yield f"bart_{sampler}", lambda s=sampler: bps.bart("y ~ x1 + x2 + x3", data=df, sampler=s, **bart)
    yield "bart_sparse", lambda: bps.bart("y ~ x1 + x2 + x3", data=df, sparse=True, **bart)
    yield "bart_probit", lambda: bps.bart("yb ~ x1 + x2 + x3", data=df, **bart)
    yield "bart_multinomial", lambda: bps.bart("yc ~ x1 + x2 + x3", data=df, **bart)
    yield "bart_ordinal", lambda: bps.bart("yo ~ x1 + x2 + x3", data=df, **bart)
    yield "bart_survival", lambda: bps.bart("Surv(time, event) ~ x1 + x2 + x3", data=df, **bart)
    yield "cart_tempered_rotate_perturb", lambda: bps.cart(
        "y ~ x1 + x2 + x3", data=df, sampler="tempered",
        sampler_options={"moves": {"grow": .2, "prune": .2, "change": .32, "swap": .08, "rotate": .1, "perturb": .1}},
        **cart)
    yield "cart_cgm_rotate_perturb", lambda: bps.cart(
        "y ~ x1 + x2 + x3", data=df, sampler="cgm",
        sampler_options={"moves": {"grow": .25, "prune": .25, "change": .2, "swap": .1, "rotate": .1, "perturb": .1}},
        **cart)
    grouped = df.assign(g=pd.Categorical((np.arange(len(df)) % 6).astype(str)),
                        w=np.random.default_rng(5).uniform(0.5, 2.0, len(df)),
                        z=(np.random.default_rng(6).uniform(size=len(df)) < 0.5).astype(int))
    yield "bart_random_effects", lambda: bps.bart("y ~ x1 + x2 + x3 + (1 | g)", data=grouped, **bart)
    yield "bart_random_effects_cgm", lambda: bps.bart("y ~ x1 + x2 + x3 + (1 | g)", data=grouped, sampler="cgm",
                                                     **bart)
    yield "bart_hetero", lambda: bps.bart("y ~ x1 + x2 + x3", data=grouped, variance="~ x1", **bart)
    yield "bart_weights", lambda: bps.bart("y ~ x1 + x2 + x3", data=grouped, weights="w", **bart)
    yield "bart_no_likelihood", lambda: bps.bart("y ~ x1 + x2 + x3", data=grouped, weights="w", likelihood=False,
                                                check_mixing=False, **bart)
    yield "bart_row_blocks_grow_prune", lambda: _row_blocks_fit("grow_prune", df, **bart)
    yield "bart_row_blocks_cgm", lambda: _row_blocks_fit("cgm", df, **bart)
    yield "bcf", lambda: bps.bcf("y ~ x1 + x3", data=grouped, treatment="z", draws=40, tune=40, **base)
    yield "bcf_random_effects", lambda: bps.bcf("y ~ x1 + x3 + (1 | g)", data=grouped, treatment="z", draws=40,
                                                tune=40, **base)
    sparse = _sparse_data(2)
    for sampler, options in (("cgm", None), ("pg", {"ancestor_sampling": True}), ("ctmc", None),
                             ("ctmc", {"rotate": True, "perturb": True})):
        name = f"sparse_bart_{sampler}" + ("_rotate_perturb" if options and "rotate" in options else "")
        name += "_ancestor" if options and options.get("ancestor_sampling") else ""
        yield name, lambda s=sampler, o=options: bps.bart("y ~ .", data=sparse, sampler=s, sampler_options=o,
                                                          check_mixing=False, **bart)
    yield "sparse_cart_smc_optimal", lambda: bps.cart("y ~ .", data=sparse, sampler="smc", draws=30, chains=2, seed=3,
                                                      sampler_options={"proposal": "optimal"}, check_mixing=False)
    yield "soft_hmc_dfi", lambda: bps.soft_tree("y ~ x1 + x3", data=df.iloc[:60], draws=8, tune=8, chains=2, seed=3)
    yield "soft_hmc_df", lambda: bps.soft_tree("y ~ x1 + x3", data=df.iloc[:60], sampler="hmc_df", draws=8, tune=8,
                                               chains=2, seed=3)


def _hash_fit(fit) -> str:
    h = hashlib.sha1()
    for node in fit.idata.subtree:
        for name in sorted(node.ds.data_vars):
            arr = np.ascontiguousarray(node.ds[name].values)
            if arr.dtype == object:
                arr = np.asarray([str(v) for v in arr.ravel()])
            h.update(f"{node.path}/{name}{arr.shape}{arr.dtype}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--compare")
    parser.add_argument("--only", action="append", help="run only the cases whose name starts with this")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    result = {}
    for name, build in _cases():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        fit = build()
        result[name] = _hash_fit(fit)
        print(f"{name:24s} {result[name]}", flush=True)
    return save_and_compare(result, args.out, args.compare)


def save_and_compare(result: dict, out: str | None, compare: str | None) -> int:
    """Write ``result`` (case -> hash) to ``out``; with ``compare``, print the cases whose hash
    differs from that file's and return 1 if any does (else 0)."""
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)
    if compare:
        with open(compare) as fh:
            before = json.load(fh)
        new = [k for k in result if k not in before]
        changed = [k for k in result if k in before and before[k] != result[k]]
        if new:
            print("new (no hash in the compared file):", ", ".join(new))
        print("changed:", ", ".join(changed) if changed else "none")
        return 1 if changed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
