"""Run settings declared once (``models/settings.py``), ``na_action`` as one ``NaAction`` from the
keyword to the saved configuration, and sampler lists read from the registry (issue 29)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite._validation import NaAction, check_na_action
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning, DataError
from bartpy_suite.models import MODELS
from bartpy_suite.models.settings import (
    RUN_KEYWORDS,
    RUN_PARAMETERS_PLACEHOLDER,
    RunSettings,
    check_run_settings,
    run_defaults,
    with_run_keywords,
)
from bartpy_suite.models.survival import CompetingRisksBART, SurvivalBART
from bartpy_suite.samplers import samplers_for

FAST = dict(chains=1, draws=30, tune=30, seed=3, progress=False, check_mixing=False, log_likelihood=False)
MODEL_CLASSES = [*MODELS.values(), SurvivalBART, CompetingRisksBART]


# -- declared once -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_every_model_takes_every_run_keyword_with_its_defaults(cls):
    params = {p.name: p for p in inspect.signature(cls).parameters.values()}
    defaults = run_defaults(cls.run_defaults)
    for name in RUN_KEYWORDS:
        assert params[name].default == defaults[name], (cls.__name__, name)
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    # ... and its own __init__ does not list them again: they arrive as **run
    own = cls.__dict__.get("__init__")
    if own is not None:
        listed = inspect.signature(own, follow_wrapped=False).parameters
        code_names = own.__code__.co_varnames[:own.__code__.co_kwonlyargcount + 1]
        assert not set(RUN_KEYWORDS) & set(code_names), cls.__name__
        assert list(listed)[-len(RUN_KEYWORDS):] == list(RUN_KEYWORDS)


def test_model_defaults_differ_where_declared():
    assert bps.BayesianCART().run == RunSettings(sampler="tempered", sampler_options=bps.BayesianCART().sampler_options)
    assert (bps.SoftTree().draws, bps.SoftTree().tune, bps.SoftTree().sampler) == (500, 200, "hmc_dfi")
    assert (SurvivalBART().thin, bps.BART().thin, bps.BART().sampler) == (10, 1, "grow_prune")


def test_settings_are_frozen_and_read_as_model_attributes():
    model = bps.BART(chains=2, draws=7, seed=np.int64(5), threads=np.int32(1))
    assert (model.chains, model.draws, model.seed, model.threads) == (2, 7, 5, 1)
    assert type(model.seed) is int and type(model.threads) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.run.draws = 3
    with pytest.raises(AttributeError):
        model.draws = 3  # a property of the validated settings: build a new model instead


def test_one_validation_names_the_argument():
    with pytest.raises(ArgumentError, match=r"^chains must be an integer >= 1, got 0"):
        check_run_settings("cart", {"chains": 0}, {"sampler": "cgm"})
    with pytest.raises(ArgumentError, match=r"unknown sampler 'hmc_df'; valid options: .*'tempered'"):
        check_run_settings("bart", {"sampler": "hmc_df"})
    with pytest.raises(TypeError, match=r"^BART\(\) got an unexpected keyword argument 'chain'$"):
        bps.BART(chain=2)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool, pytest.raises(ArgumentError, match=r"threads= sets the threads of the "
                                                                          r"default run; with executor="):
        check_run_settings("cart", {"sampler": "cgm", "threads": 2, "executor": pool})


def test_moves_merge_into_sampler_options_once():
    settings, spec = check_run_settings("cart", {"sampler": "cgm", "moves": {"grow": 1, "prune": 1}})
    # the checked options hold every option with its default (cgm: change_of_variable, perturb_sweep too)
    assert settings.sampler_options == spec.check_options({"moves": {"grow": 1, "prune": 1}})
    assert set(settings.sampler_options) == {"moves", "change_of_variable", "perturb_sweep"}
    assert settings.moves == settings.sampler_options["moves"]


def test_a_model_listing_a_run_keyword_itself_is_refused():
    class Bad(bps.BayesianCART):
        __doc__ = "Bad.\n\n    Parameters\n    ----------\n" + RUN_PARAMETERS_PLACEHOLDER

        def __init__(self, *, chains=2, **run):
            super().__init__(chains=chains, **run)

    with pytest.raises(ValueError, match=r"Bad.__init__ lists run keywords \['chains'\]; take them as \*\*run"):
        with_run_keywords(Bad)


# -- sampler lists from the registry -------------------------------------------------------------------
@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_docstrings_list_the_registrys_samplers(cls):
    doc = inspect.getdoc(cls)
    entry = doc.split("\nsampler : str\n", 1)[1].split("\nchains : int\n", 1)[0]
    for name in samplers_for(cls.model_type):
        assert f'``"{name}"``' in entry, (cls.__name__, name)
    assert f'``"{cls.run_defaults["sampler"]}"`` (default)' in entry
    for problem in getattr(cls, "sampler_variants", {}):
        assert all(f'``"{name}"``' in entry for name in samplers_for(problem))


def test_cli_sampler_and_model_options_come_from_the_registries():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["fit", "--help"]) == 0
    text = " ".join(out.getvalue().split())
    for name, cls in MODELS.items():
        assert f"{name}: {', '.join(samplers_for(cls.model_type))} (default {cls.run_defaults['sampler']})" in text
    assert "--trees TREES number of trees (--model bart only)" in text
    assert "{drop,raise,split}" in text


def test_cli_checks_run_settings_with_the_models_validation(tmp_path, cgm):
    data = tmp_path / "d.csv"
    cgm.to_csv(data, index=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["fit", "y ~ x1", str(data), "--chains", "0", "--no-progress"])
    assert status == 2 and "chains must be an integer >= 1, got 0" in err.getvalue()
    with contextlib.redirect_stderr(err):
        status = main(["fit", "y ~ x1", str(data), "--model", "soft_tree", "--sampler", "cgm", "--no-progress"])
    assert status == 2 and "unknown sampler 'cgm'; valid options: 'hmc_df', 'hmc_dfi'" in err.getvalue()


# -- na_action: one enum end to end --------------------------------------------------------------------
def test_check_na_action():
    assert check_na_action("drop") is NaAction.DROP
    assert check_na_action(NaAction.SPLIT) is NaAction.SPLIT
    assert NaAction.RAISE == "raise" and str(NaAction.DROP) == "drop"
    with pytest.raises(ArgumentError, match=r"unknown na_action 'omit'.*use 'drop' for R's na.omit"):
        check_na_action("omit")
    with pytest.raises(ArgumentError, match=r"na_action='split' is not available here; valid options: 'drop', "
                                            r"'raise'"):
        check_na_action("split", (NaAction.DROP, NaAction.RAISE))
    assert bps.NaAction is NaAction


@pytest.fixture(scope="module")
def gappy(cgm):
    data = cgm.copy()
    data.loc[[3, 17], "x1"] = np.nan
    return data


@pytest.mark.parametrize("na_action", ["drop", NaAction.DROP, "split", NaAction.SPLIT])
def test_config_records_the_users_choice(gappy, na_action):
    with pytest.warns(BartpySuiteWarning, match="dropped 2 of") if na_action == "drop" else contextlib.nullcontext():
        fit = bps.cart("y ~ x1 + x2", data=gappy, sampler="grow_prune", na_action=na_action, **FAST)
    assert fit.config["na_action"] == str(na_action) and type(fit.config["na_action"]) is str


def test_drop_is_recorded_and_draws_are_those_of_the_complete_rows(gappy, tmp_path):
    """The formula's "drop" used to be recorded as "raise"; the draws are those of a fit to the
    complete rows (and were so before: the design drops the rows, the fit sees none missing)."""
    with pytest.warns(BartpySuiteWarning, match="dropped 2 of"):
        dropped = bps.cart("y ~ x1 + x2", data=gappy, sampler="grow_prune", **FAST)
    complete = bps.cart("y ~ x1 + x2", data=gappy.dropna(), sampler="grow_prune", na_action="raise", **FAST)
    assert (dropped.config["na_action"], complete.config["na_action"]) == ("drop", "raise")
    np.testing.assert_array_equal(dropped.idata["trees"]["node_value"].values,
                                  complete.idata["trees"]["node_value"].values)
    path = tmp_path / "fit.nc"
    dropped.to_netcdf(path)
    assert bps.load(path).config["na_action"] == "drop"


def test_array_level_drop_leaves_rows_out_like_the_formula(gappy):
    x = gappy[["x1"]].to_numpy()
    y = gappy["y"].to_numpy()
    before = x.copy()
    model = bps.BayesianCART(sampler="grow_prune", **FAST)
    with pytest.warns(BartpySuiteWarning, match=r"dropped 2 of 800 rows with missing values \(na_action='drop'; "
                                                r"0-based rows 3, 17\)"):
        fit = model.fit(x, y, na_action="drop")
    keep = ~np.isnan(x[:, 0])
    ref = bps.BayesianCART(sampler="grow_prune", **FAST).fit(x[keep], y[keep])
    np.testing.assert_array_equal(fit.idata["trees"]["node_value"].values, ref.idata["trees"]["node_value"].values)
    assert fit.config["na_action"] == "drop" and ref.config["na_action"] == "raise"
    np.testing.assert_array_equal(x, before)  # the caller's array is untouched
    with pytest.raises(DataError, match=r"predictor column 0 holds a non-finite value \(first at row 3\)"):
        model.fit(x, y)
    with pytest.raises(DataError, match=r"every one of the 4 rows has a missing value"):
        model.fit(np.full((4, 1), np.nan), np.zeros(4), na_action="drop")


def test_soft_tree_takes_drop_and_refuses_split(gappy):
    with pytest.raises(ArgumentError, match="na_action='split' is not supported by soft trees"):
        bps.soft_tree("y ~ x1", data=gappy, na_action=NaAction.SPLIT, **FAST)


def test_survival_drop_leaves_out_rows_with_a_missing_time_or_covariate():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 1))
    time = rng.exponential(1.0, 40)
    event = (rng.uniform(size=40) < 0.7).astype(float)
    x[5, 0], time[9], event[11] = np.nan, np.nan, np.nan
    model = SurvivalBART(trees=5, grid=5, **FAST)
    with pytest.warns(BartpySuiteWarning, match=r"dropped 3 of 40 rows .*0-based rows 5, 9, 11\)"):
        fit = model.fit(x, time, event, na_action="drop")
    keep = np.ones(40, dtype=bool)
    keep[[5, 9, 11]] = False
    ref = SurvivalBART(trees=5, grid=5, **FAST).fit(x[keep], time[keep], event[keep])
    assert fit.config["survival"]["subjects"] == 37 and fit.config["na_action"] == "drop"
    np.testing.assert_array_equal(fit.idata["trees"]["node_value"].values, ref.idata["trees"]["node_value"].values)


def test_cli_na_action_is_recorded(tmp_path, gappy):
    data, out = tmp_path / "d.csv", tmp_path / "fit.nc"
    gappy.to_csv(data, index=False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(["fit", "y ~ x1 + x2", str(data), "--sampler", "grow_prune", "--chains", "1", "--draws", "30",
                       "--tune", "30", "--thin", "2", "--seed", "3", "--no-progress", "--no-check-mixing",
                       "--out", str(out)])
    assert status == 0
    fit = bps.load(out)
    assert fit.config["na_action"] == "drop" and fit.config["thin"] == 2


def test_frames_are_not_modified(gappy):
    before = gappy.copy()
    with pytest.warns(BartpySuiteWarning):
        bps.BayesianCART(sampler="grow_prune", **FAST).fit(gappy[["x1"]], gappy["y"].to_numpy(), na_action="drop")
    pd.testing.assert_frame_equal(gappy, before)


def test_files_written_before_the_enum_still_load():
    """Files of earlier versions hold the same strings (a formula's "drop" stored as "raise" then, or
    nothing in 0.1 files); they load, and the stored value is a valid NaAction."""
    from pathlib import Path

    folder = Path(__file__).parent / "data"
    old = bps.load(folder / "v1_transforms_cart.nc", log_likelihood=False)
    assert NaAction(old.config["na_action"]) is NaAction.RAISE
    assert bps.load(folder / "v0_1_bart.nc", log_likelihood=False).config.get("na_action") is None
