"""Which compiled functions Python code may call (issue 11, section 1; ``_kernels/jit.py``).

Helpers are compiled without numba's Python wrappers, which is most of what a first fit saves in
compile time. A Python call to a helper still works, through an in-memory twin compiled with the
wrappers, but that twin is compiled again in every process (it is not cached), so a fit that
reached one would pay part of the cold compile on every run. These tests pin both halves: the
twin gives the compiled answer, and fitting, prediction and the posterior reach no helper from
Python for any model and sampler.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from kernel_conventions import record_helper_calls

import bartpy_suite as bps
from bartpy_suite._kernels import jit
from bartpy_suite._kernels.tree import p_split


def test_a_helper_called_from_python_runs_its_twin():
    assert isinstance(p_split, jit.HelperDispatcher)
    # p_SPLIT = alpha (1 + depth)^-beta (``_kernels/tree.py``), exact in floating point here
    assert p_split(0.95, 2.0, 1) == 0.95 * 2.0**-2.0
    assert math.isclose(p_split(0.5, 1.5, 3), 0.5 * 4.0**-1.5, rel_tol=1e-15)


@pytest.fixture
def helper_calls(monkeypatch):
    """Names of the helpers called from Python while the fixture is active."""
    return record_helper_calls(monkeypatch)


def _frame(n=60, classes=False):
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(n, 2))
    y = np.where(x[:, 0] > 0.5, 1.0, -1.0) + 0.3 * rng.standard_normal(n)
    df = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y})
    if classes:
        df["y"] = pd.Categorical(np.array(["a", "b", "c"])[(x[:, 0] * 3).astype(int)])
    return df


CART_SAMPLERS = ["cgm", "grow_prune", "pg", "smc", "ctmc", "tempered"]
BART_SAMPLERS = ["cgm", "grow_prune", "pg", "ctmc", "tempered"]


@pytest.mark.parametrize("sampler", CART_SAMPLERS)
def test_cart_fits_call_no_helper_from_python(helper_calls, sampler):
    df = _frame()
    fit = bps.cart("y ~ x1 + x2", data=df, sampler=sampler, chains=1, draws=4, tune=4, seed=1, progress=False)
    fit.predict(df.head(5))
    fit.summary()
    assert helper_calls == []


@pytest.mark.parametrize("sampler", BART_SAMPLERS)
def test_bart_fits_call_no_helper_from_python(helper_calls, sampler):
    df = _frame()
    fit = bps.bart("y ~ x1 + x2", data=df, sampler=sampler, trees=3, chains=1, draws=4, tune=4, seed=1,
                   progress=False, threads=1)
    fit.predict(df.head(5), kind="predictive")
    fit.summary()
    assert helper_calls == []


def test_multiclass_and_soft_tree_fits_call_no_helper_from_python(helper_calls):
    df = _frame(classes=True)
    bps.bart("y ~ x1 + x2", data=df, trees=3, chains=1, draws=4, tune=4, seed=1, progress=False,
             threads=1).predict(df.head(5), kind="prob")
    soft = bps.soft_tree("y ~ x1 + x2", data=_frame(), chains=1, draws=3, tune=3, seed=1, progress=False)
    soft.predict(_frame().head(5))
    assert helper_calls == []


def test_move_flags_mark_move_mixes_with_change_swap_or_rotate_perturb():
    # None lets numba drop a branch of cart_step: change/swap for grow_prune, rotate/perturb unless
    # the mix uses them
    from bartpy_suite.samplers.mh import move_flags, move_vector

    assert move_flags(move_vector({"grow": 0.5, "prune": 0.5})) == (None, None)
    assert move_flags(move_vector({"grow": 0.3, "prune": 0.3, "change": 0.2, "swap": 0.2})) == (True, None)
    assert move_flags(move_vector({"grow": 0.3, "prune": 0.3, "swap": 0.4})) == (True, None)
    # with rotate or perturb, ``rotation`` carries perturb's change-of-variable table ([0.0, 0.0]: none)
    cs, rot = move_flags(move_vector({"grow": 0.4, "prune": 0.4, "rotate": 0.2}))
    assert cs is None and rot.tolist() == [0.0, 0.0]
    table = np.array([0.1, 1.0, 0.5, 0.5, 1.0])
    cs, rot = move_flags(move_vector({"grow": 0.4, "prune": 0.2, "change": 0.2, "perturb": 0.2}), table)
    assert cs is True and rot is table
    assert move_flags(np.zeros(4)) == (None, None)  # a four-move vector (plug-ins may pass one)
