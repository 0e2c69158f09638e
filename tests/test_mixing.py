"""The post-fit mixing check: graded by what users consume (f(x) at monitored training rows, class
probabilities, sigma; tree sizes as supporting evidence), a note / ``MixingWarning`` /
``StrongMixingWarning`` by severity with advice that fits the sampler, silent on a fit that mixes,
off with ``check_mixing=False``, printed by the CLI, and its own message (no foreign warnings)
for runs too short to diagnose."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError
from bartpy_suite.posterior import mixing
from bartpy_suite.posterior.mixing import (
    ESS_PER_CHAIN_MIN,
    RHAT_MAX,
    MixingReport,
    diagnose,
    grade_quantity,
    mixing_problems,
    mixing_report,
    monitored_rows,
    severity_of,
)

# 2 chains x 100 draws after 50 tuning steps of single-tree MH (cgm) on the 800 rows of cgm1998:
# the chains are still climbing from the stump to the five-region tree, so they disagree about
# f(x) at most rows (r_hat 1.3-2.1 at seed 1) with a few effective draws.
SHORT = {"sampler": "cgm", "chains": 2, "draws": 100, "tune": 50, "seed": 1, "progress": False}


def caught_mixing(fn):
    """Run ``fn()`` recording every warning; return the result and the MixingWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if issubclass(w.category, bps.MixingWarning)]


def test_short_cart_fit_warns_once_strongly_naming_what_disagrees_and_remedies():
    df = bps.datasets.load("cgm1998")
    with pytest.warns(bps.MixingWarning) as record:
        fit = bps.cart("y ~ x1 + x2", data=df, **SHORT)
    mixing_warnings = [w for w in record if issubclass(w.category, bps.MixingWarning)]
    assert len(mixing_warnings) == 1 and mixing_warnings[0].category is bps.StrongMixingWarning
    message = str(mixing_warnings[0].message)
    report = mixing_report(fit)
    assert report.severity == "strong"
    f_rows = report.table[report.table["kind"] == "f"]
    assert len(f_rows) == mixing.MONITOR_ROWS and f_rows["r_hat"].max() > 1.3
    worst = f_rows["r_hat"].idxmax()
    assert f"worst r_hat: {worst} (r_hat {f_rows.loc[worst, 'r_hat']:.3f}" in message
    assert "f(x) at" in message and "monitored training rows" in message
    assert "Tree size, as supporting evidence: n_leaves" in message
    assert "tune=50 now" in message and "draws=100 now" in message and "sampler='tempered'" in message
    assert "check_mixing=False" in message and "MixingWarning" in message
    assert mixing_warnings[0].filename == __file__  # points at the user's line, not into the package
    assert issubclass(bps.StrongMixingWarning, bps.MixingWarning)
    assert issubclass(bps.MixingWarning, bps.BartpySuiteWarning)
    problems = mixing_problems(fit)
    assert "n_leaves" in problems.index and problems.loc["n_leaves", "grade"] == "supporting"
    assert worst in problems.index


def test_check_mixing_false_silences_the_check(caplog):
    df = bps.datasets.load("cgm1998")
    with caplog.at_level(logging.INFO, logger="bartpy_suite"):
        _, caught = caught_mixing(lambda: bps.cart("y ~ x1 + x2", data=df, check_mixing=False, **SHORT))
    assert caught == [] and not caplog.records


def test_warnings_filter_silences_the_check():
    df = bps.datasets.load("cgm1998")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=bps.MixingWarning)
        bps.cart("y ~ x1 + x2", data=df, **SHORT)
    assert not [w for w in caught if issubclass(w.category, bps.MixingWarning)]


def test_a_fit_that_mixes_is_silent():
    # Pure noise on 40 rows with a shallow tree prior (alpha 0.5, beta 2): the posterior is
    # nearly all stumps and two-leaf trees, which single-tree MH explores quickly. At seed 3 every
    # monitored quantity passes the bar for final inferences (measured: largest r_hat of f 1.004,
    # smallest ESS per chain several hundred), so neither a note nor a warning.
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(size=40), "y": rng.normal(size=40)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bps.cart("y ~ x", data=df, sampler="cgm", chains=2, draws=2000, tune=500, seed=3, alpha=0.5,
                       beta=2.0, progress=False)
    assert not [w for w in caught if issubclass(w.category, bps.MixingWarning)]
    report = mixing_report(fit)
    assert report.severity == "ok" and report.message == ""
    graded = report.graded
    assert (graded["r_hat"] <= RHAT_MAX).all() and (graded["ess_per_chain"] >= ESS_PER_CHAIN_MIN).all()
    assert mixing_problems(fit).empty


def test_monitored_rows_are_deterministic_evenly_spaced_and_match_the_fits_predictions():
    assert monitored_rows(10).tolist() == list(range(10))
    rows = monitored_rows(800)
    assert len(rows) == mixing.MONITOR_ROWS and rows[0] == 0 and rows[-1] == 799
    assert np.all(np.diff(rows) >= 34) and np.all(np.diff(rows) <= 35)
    df = bps.datasets.load("cgm1998")
    fit = bps.cart("y ~ x1 + x2", data=df, check_mixing=False, **SHORT)
    samples = mixing._consumed_samples(fit, rows)
    f = fit.function_samples()  # (samples, rows), chain-major
    for r in rows:
        kind, arr = samples[f"f[{r}]"]
        assert kind == "f" and arr.shape == (2, 100)
        np.testing.assert_array_equal(arr.reshape(-1), f[:, r])


def test_grades_follow_the_thresholds_and_nan_passes():
    assert grade_quantity(1.005, 300.0) == "ok"
    assert grade_quantity(RHAT_MAX + 1e-6, 300.0) == "note"
    assert grade_quantity(1.0, ESS_PER_CHAIN_MIN - 1) == "note"
    assert grade_quantity(mixing.RHAT_WARN + 1e-6, 300.0) == "warning"
    assert grade_quantity(1.0, mixing.ESS_WARN - 1) == "warning"
    assert grade_quantity(mixing.RHAT_STRONG + 1e-6, 300.0) == "strong"
    assert grade_quantity(1.0, mixing.ESS_STRONG - 1) == "strong"
    assert grade_quantity(float("nan"), 300.0) == "ok"  # one chain: no r_hat, the ESS still counts
    assert grade_quantity(float("nan"), 3.0) == "strong"


def test_tree_sizes_are_supporting_evidence_and_never_set_the_severity():
    # f at one row: 4 independent N(0, 1) chains of 1000 draws (seed 0), which agree (r_hat
    # about 1.00, ESS about 4000). n_leaves: 4 chains stuck at 3, 4, 5 and 6 leaves with a
    # little noise, r_hat far above 1.2. The severity stays "ok".
    rng = np.random.default_rng(0)
    f = rng.normal(size=(4, 1000))
    leaves = np.arange(3, 7)[:, None] + rng.integers(0, 2, size=(4, 1000))
    table = diagnose({"f[0]": ("f", f), "n_leaves": ("tree size", leaves)}, np.ones((4, 1000)), kish=False)
    assert table.loc["n_leaves", "r_hat"] > 2 and table.loc["n_leaves", "grade"] == "supporting"
    assert table.loc["f[0]", "grade"] == "ok"
    assert severity_of(table) == "ok"
    # the same disagreement on f(x) itself is strong
    table = diagnose({"f[0]": ("f", leaves.astype(float))}, np.ones((4, 1000)), kish=False)
    assert severity_of(table) == "strong"


def test_constant_quantities_are_left_out():
    table = diagnose({"f[0]": ("f", np.ones((2, 50)))}, np.ones((2, 50)), kish=False)
    assert table.empty and severity_of(table) == "ok"


class _StubFit:
    """The part of a Fit that ``_message`` reads: its config."""

    def __init__(self, sampler, model="cart", **options):
        self.config = {"sampler": sampler, "model_type": model, "tune": 1000, "draws": 1000,
                       "sampler_options": options}


def _stub_report(severity):
    table = pd.DataFrame({"kind": ["f", "sigma", "tree size"], "r_hat": [1.3, 1.0, 2.0],
                          "ess_bulk": [20.0, 900.0, 8.0], "ess_per_chain": [5.0, 225.0, 2.0],
                          "grade": [severity, "ok", "supporting"]}, index=["f[3]", "sigma", "n_leaves"])
    return MixingReport(severity, table, chains=4, draws_per_chain=1000)


@pytest.mark.parametrize("sampler, model, wanted, unwanted", [
    ("cgm", "cart", ["tune=1000 now", "sampler='tempered'"], ["sampler='cgm'"]),
    ("grow_prune", "bart", ["tune=1000 now", "sampler='pg'"], ["sampler='grow_prune'"]),
    ("tempered", "cart", ["tune=1000 now", "'rotate': 0.1", "'perturb': 0.1"], ["sampler='tempered'", "more rungs"]),
    ("tempered", "bart", ["more rungs", "'rungs': 16", "8 now"], ["sampler='tempered'", "'rotate'"]),
    ("pg", "bart", ["more particles", "'particles': 20", "ancestor_sampling"], ["sampler='pg'"]),
    ("smc", "cart", ["smc has no tune", "more particles per island (draws=1000 now", "more islands (chains)"],
     ["tune="]),
    ("ctmc", "cart", ["tune=1000 now", "sampler='tempered'"], ["sampler='ctmc'"]),
    ("hmc_dfi", "soft_tree", ["topology is found during tune"], ["sampler="]),
])
def test_advice_fits_the_sampler_in_use(sampler, model, wanted, unwanted):
    message = mixing._message(_StubFit(sampler, model), _stub_report("strong"))
    assert message.startswith("the chains have not mixed: they disagree about f(x) at 1 of 1 monitored training rows")
    for text in wanted:
        assert text in message, (sampler, text)
    for text in unwanted:
        assert text not in message, (sampler, text)


def test_tempered_cart_with_pratolas_moves_is_advised_more_rungs():
    fit = _StubFit("tempered", "cart", moves={"grow": 0.4, "prune": 0.4, "rotate": 0.1, "perturb": 0.1})
    message = mixing._message(fit, _stub_report("strong"))
    assert "more rungs (sampler_options={'rungs': 32}; 16 now)" in message and "Pratola" not in message


def test_a_note_is_logged_not_warned(caplog, capsys):
    report = _stub_report("note")
    message = mixing._message(_StubFit("cgm"), report)
    assert message.startswith("borderline mixing on f(x) at 1 of 1 monitored training rows")
    assert "fine for exploring" in message and "more draws (draws=1000 now)" in message
    with caplog.at_level(logging.INFO, logger="bartpy_suite"):
        mixing.emit_note(message)
    assert [r.levelno for r in caplog.records] == [logging.INFO] and caplog.records[0].getMessage() == message
    # with logging unconfigured the note goes to standard error, unless that logger is quieted
    logger = logging.getLogger("bartpy_suite")
    root_handlers, logging.root.handlers = logging.root.handlers, []
    propagate, logger.propagate = logger.propagate, False
    try:
        capsys.readouterr()
        mixing.emit_note("hello")
        assert capsys.readouterr().err == "bartpy_suite: note: hello\n"
        level = logger.level
        logger.setLevel(logging.WARNING)
        mixing.emit_note("hello")
        logger.setLevel(level)
        assert capsys.readouterr().err == ""
    finally:
        logging.root.handlers, logger.propagate = root_handlers, propagate


def test_too_few_draws_give_the_packages_message_and_no_foreign_warnings():
    df = bps.datasets.load("cgm1998")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=4, draws=1, tune=10, seed=1, progress=False)
        summary = fit.summary()
    assert [w.category for w in caught] == [bps.MixingWarning]
    assert "need at least 4 draws per chain and this fit has 1" in str(caught[0].message)
    assert summary[["ess_bulk", "r_hat"]].isna().all().all()
    assert mixing_report(fit).severity == "undefined" and mixing_problems(fit).empty


@pytest.mark.parametrize("sampler", ["ctmc", "smc"])
def test_weighted_samplers_are_diagnosed_with_their_weights(sampler):
    # The report's sigma diagnostics are the summary's, which honours fit.weights (ctmc: 1/Lambda
    # holding times, delta-method ESS and weighted split R-hat; smc: Kish's ESS per island).
    df = bps.datasets.load("cgm1998")
    fit = bps.cart("y ~ x1 + x2", data=df, sampler=sampler, chains=2, draws=200, tune=100, seed=2, progress=False,
                   check_mixing=False)
    weights = fit.weights.values
    assert np.ptp(weights) > 0  # really weighted
    table = mixing_report(fit).table
    summary = fit.summary()
    for name in ("sigma", "n_leaves"):
        assert table.loc[name, "r_hat"] == pytest.approx(summary.loc[name, "r_hat"], rel=1e-12, nan_ok=True)
        assert table.loc[name, "ess_bulk"] == pytest.approx(summary.loc[name, "ess_bulk"], rel=1e-12)
    if sampler == "smc":  # every quantity has the islands' Kish ESS
        f_rows = table[table["kind"] == "f"]
        assert np.allclose(f_rows["ess_bulk"], summary.loc["sigma", "ess_bulk"])


def test_classifiers_are_graded_on_class_probabilities():
    iris = bps.datasets.load("iris")
    fit = bps.cart("Species ~ .", data=iris, sampler="cgm", chains=2, draws=100, tune=50, seed=1, progress=False,
                   check_mixing=False)
    table = mixing_report(fit).table
    assert set(table["kind"]) <= {"prob", "tree size"} and "sigma" not in table.index
    labels = [str(c) for c in fit.config["class_labels"]]
    names = [n for n in table.index if table.loc[n, "kind"] == "prob"]
    assert names and all(any(n.startswith(f"prob_{c}[") for c in labels) for n in names)


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
            status = main(["fit", "y ~ x1 + x2", str(path), "--sampler", "cgm", "--chains", "2", "--draws", "100",
                           "--tune", "50", "--seed", "1", "--no-progress"])
    assert status == 0
    lines = [line for line in err.getvalue().splitlines() if "have not mixed" in line]
    assert len(lines) == 1 and lines[0].startswith("bartpy_suite: warning: the chains have not mixed: ")
    assert "n_leaves" in out.getvalue()  # the summary is still printed
