"""The post-fit mixing check: one ``MixingWarning`` after a fit whose chains have not mixed,
naming the failing quantities and what to do; silent on a fit that mixes; off with
``check_mixing=False``; printed by the CLI."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior.mixing import ESS_PER_CHAIN_MIN, RHAT_MAX, mixing_problems

# 2 chains x 100 draws after 50 tuning steps of single-tree MH on the 800 rows of cgm1998: the
# chains are still climbing from the stump to the five-region tree, so r_hat of n_leaves is far
# above 1.01 (about 3 at seed 1) and the bulk ESS is a few draws.
SHORT = {"chains": 2, "draws": 100, "tune": 50, "seed": 1, "progress": False}


def no_mixing_warnings(fn):
    """Run ``fn()`` recording every warning; return the result and the MixingWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if issubclass(w.category, bps.MixingWarning)]


def test_short_cart_fit_warns_once_naming_quantities_and_remedies():
    df = bps.datasets.load("cgm1998")
    with pytest.warns(bps.MixingWarning) as record:
        fit = bps.cart("y ~ x1 + x2", data=df, **SHORT)
    mixing = [w for w in record if issubclass(w.category, bps.MixingWarning)]
    assert len(mixing) == 1
    message = str(mixing[0].message)
    problems = mixing_problems(fit)
    assert "n_leaves" in problems.index and problems.loc["n_leaves", "r_hat"] > 1.5
    for name in problems.index:
        assert f"{name} (r_hat" in message
    assert "tune=50 now" in message and "draws=100 now" in message and "sampler='cgm' now" in message
    assert "check_mixing=False" in message and "MixingWarning" in message
    assert mixing[0].filename == __file__  # points at the user's line, not into the package
    assert issubclass(bps.MixingWarning, bps.BartpySuiteWarning)


def test_check_mixing_false_silences_the_check():
    df = bps.datasets.load("cgm1998")
    _, caught = no_mixing_warnings(lambda: bps.cart("y ~ x1 + x2", data=df, check_mixing=False, **SHORT))
    assert caught == []


def test_warnings_filter_silences_the_check():
    df = bps.datasets.load("cgm1998")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=bps.MixingWarning)
        bps.cart("y ~ x1 + x2", data=df, **SHORT)
    assert not [w for w in caught if issubclass(w.category, bps.MixingWarning)]


def test_a_fit_that_mixes_does_not_warn():
    # Pure noise on 40 rows with a shallow tree prior (alpha 0.5, beta 2): the posterior is
    # nearly all stumps and two-leaf trees, which single-tree MH explores quickly. At seed 3,
    # bulk ESS of n_leaves is about 810 (threshold 200 for 2 chains) and r_hat 1.004 (< 1.01).
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(size=40), "y": rng.normal(size=40)})
    fit, caught = no_mixing_warnings(lambda: bps.cart("y ~ x", data=df, chains=2, draws=2000, tune=500, seed=3,
                                                      alpha=0.5, beta=2.0, progress=False))
    assert caught == []
    summary = fit.summary()
    assert (summary["r_hat"] <= RHAT_MAX).all()
    assert (summary["ess_bulk"] >= 2 * ESS_PER_CHAIN_MIN).all()
    assert mixing_problems(fit).empty


def test_check_mixing_must_be_a_bool():
    with pytest.raises(ArgumentError, match=r"check_mixing must be True or False, got 'no'"):
        bps.BayesianCART(check_mixing="no")


def test_cli_prints_the_mixing_warning(tmp_path):
    path = tmp_path / "train.csv"
    bps.datasets.load("cgm1998").to_csv(path, index=False)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always", bps.MixingWarning)  # the test config ignores it
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["fit", "y ~ x1 + x2", str(path), "--chains", "2", "--draws", "100", "--tune", "50",
                           "--seed", "1", "--no-progress"])
    assert status == 0
    lines = [line for line in err.getvalue().splitlines() if "have not mixed" in line]
    assert len(lines) == 1 and lines[0].startswith("bartpy_suite: warning: the chains have not mixed: ")
    assert "n_leaves" in out.getvalue()  # the summary is still printed
