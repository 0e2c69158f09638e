"""Reproducibility of ``bps.cart`` and ``bps.bart`` (issue contract): the same seed gives
bit-identical posterior arrays with 1 and 4 worker threads; chain c of a 4-chain fit equals
chain c run alone; different seeds give different draws.

How "chain c alone" is run: ``models/_base.spawn_generators`` gives chain c the generator of
``SeedSequence(seed).spawn(chains)[c]``, whose spawn key is ``(c,)``. A one-chain fit seeded with
``SeedSequence(seed, n_children_spawned=c)`` spawns exactly that child, so chain c can be rerun
on its own through the public API (``seed`` accepts a ``SeedSequence``).

Fits are small (cgm1998, 50 tuning + 50 kept iterations; BART with 10 trees) and shared
through module-scoped fixtures.
"""

from __future__ import annotations

import numpy as np
import pytest

import bartpy_suite as bps

SEED = 20240
CHAINS = 4
SETTINGS = {
    "cart": dict(sampler="cgm", draws=50, tune=50, progress=False),
    "bart": dict(trees=10, draws=50, tune=50, progress=False),
}
FORMULA = "y ~ x1 + x2"


def run(model: str, data, **kw):
    return getattr(bps, model)(FORMULA, data=data, **{**SETTINGS[model], **kw})


@pytest.fixture(scope="module", params=["cart", "bart"])
def four_chains(request, cgm):
    """(model name, fit with 4 chains on 4 threads, same fit on 1 thread)."""
    model = request.param
    many = run(model, cgm, chains=CHAINS, seed=SEED, threads=4)
    one = run(model, cgm, chains=CHAINS, seed=SEED, threads=1)
    return model, many, one


def arrays(fit) -> dict[str, np.ndarray]:
    """Every array of the posterior, sample_stats and trees groups."""
    out = {}
    for group in ("posterior", "sample_stats", "trees"):
        for name, da in fit.idata[group].data_vars.items():
            out[f"{group}/{name}"] = da.values
    return out


def assert_bit_identical(a: np.ndarray, b: np.ndarray, name: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, name
    # Bytes, not values: NaN padding compares equal and -0.0 differs from 0.0.
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), name


def test_same_seed_bit_identical_with_1_and_4_threads(four_chains):
    model, many, one = four_chains
    a, b = arrays(many), arrays(one)
    assert a.keys() == b.keys()
    for name in a:
        assert_bit_identical(a[name], b[name], name)
    # The check has teeth: the chains did move (different draws within and across chains).
    n_leaves = many.posterior["n_leaves"].values
    assert n_leaves.reshape(CHAINS, -1).std(axis=1).max() > 0
    assert not np.array_equal(many.tree_arrays()["split_var"].values[0], many.tree_arrays()["split_var"].values[1])


@pytest.mark.parametrize("chain", range(CHAINS))
def test_chain_c_equals_chain_c_run_alone(four_chains, cgm, chain):
    model, many, _ = four_chains
    alone = run(model, cgm, chains=1, seed=np.random.SeedSequence(SEED, n_children_spawned=chain))
    trees_many, trees_alone = many.tree_arrays(), alone.tree_arrays()
    for group in ("posterior", "sample_stats", "tree_arrays"):
        source_many = trees_many if group == "tree_arrays" else many.idata[group]
        source_alone = trees_alone if group == "tree_arrays" else alone.idata[group]
        assert set(source_many.data_vars) == set(source_alone.data_vars)
        for name, da in source_alone.data_vars.items():
            mine = source_many[name].isel(chain=[chain])
            if "node" in da.dims:
                # The node axis is padded to the largest stored tree over all chains: the run
                # alone stores as many slots as its own largest tree, the rest must be padding.
                used = da.sizes["node"]
                assert mine.sizes["node"] >= used, name
                if name == "split_var":
                    assert np.all(mine.isel(node=slice(used, None)).values == -2)
                mine = mine.isel(node=slice(0, used))
            assert_bit_identical(mine.values, da.values, f"{group}/{name}")


def test_different_seeds_differ(four_chains, cgm):
    model, many, _ = four_chains
    other = run(model, cgm, chains=CHAINS, seed=SEED + 1, threads=4)
    for name in ("split_var", "split_cut"):
        for c in range(CHAINS):
            assert not np.array_equal(many.tree_arrays()[name].values[c], other.tree_arrays()[name].values[c]), \
                (name, c)
    assert not np.array_equal(many.posterior["sigma"].values, other.posterior["sigma"].values)


def test_no_seed_gives_fresh_draws(cgm):
    a = run("cart", cgm, chains=1)
    b = run("cart", cgm, chains=1)
    assert not np.array_equal(a.posterior["sigma"].values, b.posterior["sigma"].values)


def test_same_seed_sequence_object_twice_gives_the_same_draws(cgm):
    ss = np.random.SeedSequence(SEED)
    a = run("cart", cgm, chains=2, seed=ss)
    b = run("cart", cgm, chains=2, seed=ss)
    np.testing.assert_array_equal(a.posterior["sigma"].values, b.posterior["sigma"].values)
    assert ss.n_children_spawned == 0


def test_spawn_generators_docstring_recipe(cgm):
    """The recipe in spawn_generators' docstring: chain c alone is seeded with
    SeedSequence(seed, n_children_spawned=c)."""
    many = run("cart", cgm, chains=2, seed=SEED)
    alone = run("cart", cgm, chains=1, seed=np.random.SeedSequence(SEED, n_children_spawned=1))
    np.testing.assert_array_equal(many.posterior["sigma"].values[1], alone.posterior["sigma"].values[0])
