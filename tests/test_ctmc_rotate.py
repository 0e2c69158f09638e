"""Rotate and perturb events of ``ctmc`` (CT-B, CT-C) against the exact posterior.

Each is an MH step of ``_kernels/rotate.py`` fired at a constant rate, so the process is
pi-reversible and its embedded chain (rejected steps included as events) is stationary for
pi * Lambda, Lambda now including those rates. The checks and tolerances are those of
``test_ctmc_exact.py``: exact-start invariance of the jump chain against pi * Lambda (G-test
p > 1e-4, TV below i.i.d. noise + 4.5 sd) and long runs whose 1/Lambda-weighted frequencies must
match pi and raw frequencies pi * Lambda (batch-means z, Bonferroni 1e-4). The MH steps' own
ratios are pinned down by ``test_rotate_perturb.py`` (the same kernels under ``cgm``); a
tree-by-tree detailed-balance table of the rotate events would need every merge outcome
enumerated, which the invariance tests replace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_ctmc_exact import check_exact_start, check_long_run

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError

CT_B = (2.0, 0.0)
CT_C = (2.0, 2.0)


@pytest.mark.slow
def test_jump_chain_exact_start_invariance_ct_c_short():
    check_exact_start("grid", "mean_variance_shift", True, 10_000, rates=CT_C)


@pytest.mark.slow
@pytest.mark.parametrize("rates", [CT_B, CT_C], ids=["ct_b", "ct_c"])
@pytest.mark.parametrize("dataset,model,likelihood", [("grid", "mean_shift", True), ("factor", "mean_shift", True),
                                                      ("classes", "classification", True), ("grid", None, False)])
def test_jump_chain_exact_start_invariance(dataset, model, likelihood, rates):
    check_exact_start(dataset, model, likelihood, 20_000, rates=rates)


def test_long_run_weighted_ct_c_short():
    check_long_run("grid", "mean_shift", True, 20_000, rates=CT_C)


@pytest.mark.slow
@pytest.mark.parametrize("rates", [CT_B, CT_C], ids=["ct_b", "ct_c"])
@pytest.mark.parametrize("dataset,model,likelihood", [("grid", "mean_variance_shift", True),
                                                      ("classes", "classification", True), ("grid", None, False),
                                                      ("factor", None, False)])
def test_long_run_weighted(dataset, model, likelihood, rates):
    check_long_run(dataset, model, likelihood, 200_000, rates=rates)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"x1": rng.uniform(size=60), "x2": rng.uniform(size=60)})
    d["y"] = (d.x1 > 0.5) + (d.x2 > 0.3) + 0.2 * rng.normal(size=60)
    return d


@pytest.mark.parametrize("value", ["yes", -1.0, float("nan")])
def test_bad_event_rate_names_the_option(data, value):
    with pytest.raises(ArgumentError, match=r"sampler option 'rotate' must be True, False or a non-negative number"):
        bps.cart("y ~ x1 + x2", data=data, sampler="ctmc", sampler_options={"rotate": value})


def test_events_recorded_cart_and_bart(data):
    fit = bps.cart("y ~ x1 + x2", data=data, sampler="ctmc", sampler_options={"rotate": True, "perturb": 3.0},
                   chains=1, draws=500, tune=100, seed=2)
    stats = fit.idata["sample_stats"]
    events = stats["event"].values.ravel()
    assert (events == 2).sum() > 0 and (events == 3).sum() > 0
    # Lambda includes the event rates whenever the move is possible (rotate: two splits, rate 1;
    # perturb: one split, rate 3)
    n_int = fit.posterior["n_leaves"].values.ravel() - 1
    floor = 1.0 * (n_int >= 2) + 3.0 * (n_int >= 1)
    assert np.all(stats["total_rate"].values.ravel() >= floor - 1e-12)
    b = bps.bart("y ~ x1 + x2", data=data, trees=5, sampler="ctmc", sampler_options={"rotate": 1.0, "perturb": 1.0},
                 chains=1, draws=20, tune=10, seed=2)
    assert np.isfinite(b.posterior["sigma"].values).all()
