"""Pratola's rotate and perturb as MH moves of ``cgm`` (``_kernels/rotate.py``) against the exact
posterior and prior of the tiny data sets of ``tests/exact``.

* Exact-start invariance of each move run as its own kernel (20,000 trees drawn from pi, three
  transitions each; G-test p > 1e-4 and TV below the i.i.d. noise TV + 4.5 sd, the tolerances of
  ``test_exact_posterior.py`` and for the same reason: tail bounds of order 1e-5 for a correct
  kernel) with the likelihood on (numeric, factor, classification data) and off (the prior).
  Rotate needs a numeric grid to do anything; on "factor" it also meets factor rules (the
  identity there) and rules of the other variable carried through the merge.
* A long run of the RJ-C mix (all six moves) from a stump (batch-means z, Bonferroni 1e-4).
* The default move mixes give bit-identical draws to those recorded before the new moves
  existed (``tests/data/default_moves_draws.npz``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from exact import harness as H
from test_exact_posterior import check_exact_start, check_long_run

import bartpy_suite as bps

KERNEL_CASES = [
    ("grid", "mean_shift"),
    ("factor", "mean_variance_shift"),
    ("classes", "classification"),
]
# default run: rotate on the numeric grid (about 8 s); the others are marked slow (perturb runs in
# the default run through the CT-C long run of test_ctmc_rotate.py and the front-door test)
FAST_KERNEL_CASES = {("grid", "mean_shift", "rotate")}
KERNEL_PARAMS = [
    pytest.param(ds, model, move, marks=() if (ds, model, move) in FAST_KERNEL_CASES else pytest.mark.slow,
                 id=f"{ds}-{model}-{move}")
    for ds, model in KERNEL_CASES for move in ("rotate", "perturb")
]


@pytest.mark.parametrize("dataset,model,move", KERNEL_PARAMS)
def test_exact_start_invariance(dataset, model, move):
    fit = check_exact_start(dataset, model, move, H.PERTURB_MOVES, move)
    assert fit.n == 20_000


@pytest.mark.slow
@pytest.mark.parametrize("move", ["rotate", "perturb"])
@pytest.mark.parametrize("dataset", ["grid", "factor"])
def test_prior_exact_start_invariance(dataset, move):
    check_exact_start(dataset, None, move, H.PERTURB_MOVES, move, likelihood=False)


@pytest.mark.slow
def test_exact_start_invariance_rj_c_mix():
    check_exact_start("grid", "mean_variance_shift", "rj_c", H.PERTURB_MOVES, None)


def test_rotate_moves_something():
    """The rotate kernel is not the identity: on the grid posterior it changes many trees (a
    kernel that always rejected would pass the invariance tests)."""
    from exact.problems import exact, make_problem

    prob = make_problem("grid", "mean_shift")
    ex = exact("grid", "mean_shift")
    chain = H.make_chain(prob, {"grow": 0.0, "prune": 0.0, "rotate": 1.0}, 5)
    moved = tried = 0
    for tree in ex.trees:
        if H.n_internal(tree) < 2:
            continue
        for _ in range(3):
            chain.set_tree(tree)
            _, accepted = H.step(chain, "rotate")
            tried += 1
            moved += chain.get_tree() != tree
    # not a statistical bound: rotations are often accepted here (measured ~0.3 of the tries)
    assert moved > 0.05 * tried


@pytest.mark.slow
def test_long_run_rj_c_short():
    check_long_run("grid", "mean_shift", "rj_c", H.PERTURB_MOVES, n_draws=10_000, thin=5, burn=500)


@pytest.mark.slow
@pytest.mark.parametrize("dataset,model", [("grid", "mean_variance_shift"), ("factor", "mean_shift"),
                                           ("classes", "classification")])
def test_long_run_rj_b_c(dataset, model):
    check_long_run(dataset, model, "rj_b", H.ROTATE_MOVES, n_draws=200_000, thin=5, burn=2_000)
    check_long_run(dataset, model, "rj_c", H.PERTURB_MOVES, n_draws=200_000, thin=5, burn=2_000)


def _default_draws() -> dict:
    """The fits whose draws were recorded before rotate/perturb existed (same code, same seeds)."""
    rng = np.random.default_rng(0)
    n = 120
    X = rng.uniform(size=(n, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n)
    d = pd.DataFrame(X, columns=["a", "b", "c"])
    d["g"] = pd.Categorical(rng.integers(0, 4, n).astype(str))
    d["y"] = y + (d["g"] == "1")
    out = {}
    for sampler in ["cgm", "grow_prune"]:
        f = bps.cart("y ~ a + b + c + g", data=d, sampler=sampler, chains=1, draws=300, tune=100, seed=3)
        out[f"cart_{sampler}_sigma"] = f.posterior["sigma"].values.ravel()
        out[f"cart_{sampler}_leaves"] = f.posterior["n_leaves"].values.ravel()
        b = bps.bart("y ~ a + b + c + g", data=d, trees=10, sampler=sampler, chains=1, draws=40, tune=20, seed=4)
        out[f"bart_{sampler}_sigma"] = b.posterior["sigma"].values.ravel()
        out[f"bart_{sampler}_pred"] = b.predict(d)["mean"].values
    return out


def test_default_move_mixes_unchanged():
    recorded = np.load(Path(__file__).parent / "data" / "default_moves_draws.npz")
    now = _default_draws()
    for key in recorded.files:
        if key.endswith("_pred"):
            # A mean over draws: numpy blocks its sum by the CPU's vector width, so the last bit
            # differs between machines (1 ulp on an AMD EPYC); a changed draw moves it by far more.
            np.testing.assert_allclose(now[key], recorded[key], rtol=1e-12, atol=0, err_msg=key)
        else:
            np.testing.assert_array_equal(now[key], recorded[key], err_msg=key)


def test_rotate_and_perturb_through_the_front_door():
    rng = np.random.default_rng(2)
    d = pd.DataFrame({"x1": rng.uniform(size=80), "x2": rng.uniform(size=80)})
    d["y"] = (d.x1 > 0.5) + (d.x2 > 0.5) + 0.1 * rng.normal(size=80)
    moves = {"grow": 1, "prune": 1, "rotate": 1, "perturb": 1}
    fit = bps.cart("y ~ x1 + x2", data=d, sampler="cgm", sampler_options={"moves": moves}, chains=1, draws=400,
                   tune=100, seed=1)
    move = fit.idata["sample_stats"]["move"].values.ravel()
    acc = fit.idata["sample_stats"]["accepted"].values.ravel()
    for k in (4, 5):  # rotate, perturb: tried and sometimes accepted
        assert (move == k).sum() > 30
        assert acc[move == k].sum() > 0
    b = bps.bart("y ~ x1 + x2", data=d, trees=5, sampler="grow_prune", sampler_options={"moves": moves}, chains=1,
                 draws=20, tune=10, seed=1)
    assert b.idata["sample_stats"]["n_proposed"].sizes["move"] == 6
    with pytest.raises(bps.errors.ArgumentError, match="rotat"):
        bps.cart("y ~ x1 + x2", data=d, sampler="cgm", sampler_options={"moves": {"grow": 1, "prune": 1,
                                                                                  "rotation": 1}})


def test_merge_sets_against_their_definition():
    """The merge set M(X, Y; v, c) of the rotate move is every Z with SplitL(Z) = X and
    SplitR(Z) = Y, sampled uniformly: on 60 random small trees Z (two variables, five cuts, some
    with redundant rules), X and Y are Z's splits; every draw satisfies the definition, the draws
    reach exactly ``merge_count`` distinct trees (30 |M| draws: a missed tree has probability
    < |M| e^-30), and their frequencies pass a chi-square test of uniformity (p > 1e-4 each)."""
    from scipy import stats

    from bartpy_suite._kernels.rotate import Seq, merge_count, merge_sample, seq_end, split_side

    rng = np.random.default_rng(0)

    def rand_tree(depth):
        if depth == 0 or rng.random() < 0.4:
            return [(-1, 0)]
        return [(int(rng.integers(0, 2)), int(rng.integers(1, 6)))] + rand_tree(depth - 1) + rand_tree(depth - 1)

    def splits(sv, sc, v, c):
        stack = np.zeros(100, dtype=np.int32)
        w = np.zeros(100, dtype=np.int64)
        wc = np.zeros(100, dtype=np.int64)
        e1 = split_side(sv, sc, 0, v, c, True, w, wc, 0, stack)
        e2 = split_side(sv, sc, 0, v, c, False, w, wc, e1, stack)
        return w[:e1].copy(), wc[:e1].copy(), w[e1:e2].copy(), wc[e1:e2].copy()

    worst = 1.0
    for _ in range(60):
        z = rand_tree(4)
        zv = np.array([a for a, _ in z], dtype=np.int64)
        zc = np.array([b for _, b in z], dtype=np.int64)
        xv, xc, yv, yc = splits(zv, zc, 0, 3)
        n = int(merge_count(xv, xc, 0, yv, yc, 0, 0, 3))
        seen = {}
        for _ in range(30 * n):
            ov = np.zeros(100, dtype=np.int64)
            oc = np.zeros(100, dtype=np.int64)
            end = merge_sample(rng, Seq(xv, xc), 0, Seq(yv, yc), 0, 0, 3, Seq(ov, oc), 0)
            assert end == seq_end(ov, 0)
            got = splits(ov[:end], oc[:end], 0, 3)
            assert all(np.array_equal(a, b) for a, b in zip(got, (xv, xc, yv, yc)))
            key = (tuple(ov[:end]), tuple(oc[:end]))
            seen[key] = seen.get(key, 0) + 1
        assert len(seen) == n
        if n > 1:
            worst = min(worst, stats.chisquare(list(seen.values())).pvalue)
    assert worst > 1e-4
