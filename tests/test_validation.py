"""Tests of bartpy_suite._validation: every checker's message names argument, value, range."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bartpy_suite._validation import (
    check_choice,
    check_int_at_least,
    check_moves,
    check_nonnegative,
    check_open_unit,
    check_positive,
    suggest,
)
from bartpy_suite.errors import ArgumentError

DEFAULT_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}


# --- check_positive -------------------------------------------------------------------

@pytest.mark.parametrize("value", [1, 2.5, np.float64(1e-300), np.int32(3)])
def test_check_positive_accepts_and_returns_float(value):
    out = check_positive("lam", value)
    assert isinstance(out, float) and out == float(value)


@pytest.mark.parametrize(
    "value, shown",
    [(0, "0"), (-1.5, "-1.5"), (float("nan"), "nan"), (float("inf"), "inf"),
     ("1", "'1'"), (None, "None"), (True, "True")],
)
def test_check_positive_rejects(value, shown):
    with pytest.raises(ArgumentError, match=rf"^lam must be a positive finite number.*got {shown}"):
        check_positive("lam", value)


def test_check_positive_names_type_of_odd_values():
    with pytest.raises(ArgumentError, match=r"got array\(\[1\]\) \(type ndarray\)"):
        check_positive("a", np.array([1]))


# --- check_nonnegative ----------------------------------------------------------------

def test_check_nonnegative():
    assert check_nonnegative("class_alpha", 0) == 0.0
    assert check_nonnegative("class_alpha", 2) == 2.0
    with pytest.raises(ArgumentError, match=r"class_alpha must be a non-negative finite number \(>= 0\), got -0.1"):
        check_nonnegative("class_alpha", -0.1)
    with pytest.raises(ArgumentError, match=r"class_alpha must be a non-negative finite number, got inf"):
        check_nonnegative("class_alpha", math.inf)


# --- check_open_unit ------------------------------------------------------------------

@pytest.mark.parametrize("value", [1e-9, 0.5, 0.95, np.float32(0.25)])
def test_check_open_unit_accepts(value):
    assert check_open_unit("alpha", value) == pytest.approx(float(value))


@pytest.mark.parametrize("value, shown", [(0, "0"), (1, "1"), (1.5, "1.5"), (-0.2, "-0.2"), ("0.5", "'0.5'")])
def test_check_open_unit_rejects(value, shown):
    with pytest.raises(ArgumentError, match=rf"alpha must be a number in the open interval \(0, 1\), got {shown}"):
        check_open_unit("alpha", value)


# --- check_int_at_least ---------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(1, 1), (1000, 1000), (1e3, 1000), (np.int64(4), 4), (2.0, 2)])
def test_check_int_at_least_accepts(value, expected):
    out = check_int_at_least("draws", value, 1)
    assert out == expected and type(out) is int


@pytest.mark.parametrize("value, shown", [(0, "0"), (-3, "-3"), (2.5, "2.5"), ("10", "'10'"),
                                          (True, "True"), (None, "None"), (math.nan, "nan")])
def test_check_int_at_least_rejects(value, shown):
    with pytest.raises(ArgumentError, match=rf"^draws must be an integer >= 1, got {shown}"):
        check_int_at_least("draws", value, 1)


def test_check_int_at_least_other_bound():
    assert check_int_at_least("thin", 0, 0) == 0
    with pytest.raises(ArgumentError, match=r"min_leaf_size must be an integer >= 1, got 0"):
        check_int_at_least("min_leaf_size", 0, 1)


# --- check_choice / suggest -----------------------------------------------------------

def test_check_choice_accepts():
    assert check_choice("sampler", "cgm", ["cgm", "grow_prune"]) == "cgm"


def test_check_choice_lists_options_and_suggests():
    with pytest.raises(ArgumentError) as info:
        check_choice("sampler", "cmg", ["cgm", "grow_prune", "pg"])
    msg = str(info.value)
    assert msg.startswith("unknown sampler 'cmg'; valid options: 'cgm', 'grow_prune', 'pg'")
    assert msg.endswith("Did you mean 'cgm'?")


def test_check_choice_case_mismatch_suggested():
    with pytest.raises(ArgumentError, match=r"unknown na_action 'DROP'.*Did you mean 'drop'\?"):
        check_choice("na_action", "DROP", ["drop", "raise"])


def test_check_choice_non_string():
    with pytest.raises(ArgumentError, match=r"^unknown model 3; valid options: 'mean_shift', 'mean_variance_shift'$"):
        check_choice("model", 3, ["mean_shift", "mean_variance_shift"])


def test_suggest():
    assert suggest("X1", ["x1", "x2", "y"])[0] == "x1"
    assert suggest("zzz", ["x1", "x2"]) == []
    assert suggest("grwo", ["grow", "prune"]) == ["grow"]


# --- check_moves ----------------------------------------------------------------------

def test_check_moves_defaults_are_normalised_copy():
    out = check_moves(None, DEFAULT_MOVES)
    assert out == pytest.approx(DEFAULT_MOVES)
    assert list(out) == list(DEFAULT_MOVES)
    assert out is not DEFAULT_MOVES
    unnormalised = check_moves(None, {"grow": 1, "prune": 1})
    assert unnormalised == {"grow": 0.5, "prune": 0.5}


def test_check_moves_user_weights_normalised_and_missing_are_zero():
    moves = {"prune": 2, "grow": 2}
    out = check_moves(moves, DEFAULT_MOVES)
    assert out == {"grow": 0.5, "prune": 0.5, "change": 0.0, "swap": 0.0}
    assert list(out) == ["grow", "prune", "change", "swap"]
    assert moves == {"prune": 2, "grow": 2}  # input untouched
    assert math.fsum(check_moves({"grow": 1, "prune": 1, "change": 1}, DEFAULT_MOVES).values()) == 1.0


def test_check_moves_unknown_name():
    with pytest.raises(ArgumentError) as info:
        check_moves({"grwo": 0.5, "prune": 0.5}, DEFAULT_MOVES)
    msg = str(info.value)
    assert "unknown move name(s) in moves: 'grwo' (did you mean 'grow'?)" in msg
    assert msg.endswith("valid names: 'grow', 'prune', 'change', 'swap'")


def test_check_moves_negative_weight():
    with pytest.raises(ArgumentError, match=r"moves must have non-negative weights, got 'swap': -0.1"):
        check_moves({"grow": 0.5, "prune": 0.5, "swap": -0.1}, DEFAULT_MOVES)


def test_check_moves_bad_weight_type():
    with pytest.raises(ArgumentError, match=r"moves\['grow'\] must be a non-negative finite number, got 'a'"):
        check_moves({"grow": "a"}, DEFAULT_MOVES)
    with pytest.raises(ArgumentError, match=r"moves\['grow'\] must be a non-negative finite number, got nan"):
        check_moves({"grow": math.nan}, DEFAULT_MOVES)


def test_check_moves_all_zero():
    with pytest.raises(ArgumentError, match=r"moves must give at least one move a positive weight, got all zero"):
        check_moves({"grow": 0, "prune": 0}, DEFAULT_MOVES)
    with pytest.raises(ArgumentError, match=r"at least one move a positive weight"):
        check_moves({}, DEFAULT_MOVES)


def test_check_moves_not_a_mapping():
    with pytest.raises(ArgumentError, match=r"moves must be a dict mapping move names to weights \(valid names: 'grow'"):
        check_moves(["grow", "prune"], DEFAULT_MOVES)


def test_check_moves_paired():
    pairs = [("grow", "prune")]
    assert check_moves({"grow": 1, "prune": 1}, DEFAULT_MOVES, paired=pairs)["grow"] == 0.5
    assert check_moves({"change": 1}, DEFAULT_MOVES, paired=pairs)["change"] == 1.0
    with pytest.raises(ArgumentError, match=r"moves gives 'grow' a positive weight but 'prune' weight 0"):
        check_moves({"grow": 1, "change": 1}, DEFAULT_MOVES, paired=pairs)


def test_check_moves_required():
    assert check_moves({"grow": 1, "prune": 1}, DEFAULT_MOVES, required=["grow"])["grow"] == 0.5
    with pytest.raises(ArgumentError, match=r"moves must give 'grow' a positive weight: without it the sampler "
                                            r"cannot move away from the starting tree \(a stump\), got \{'change': 1\}"):
        check_moves({"change": 1}, DEFAULT_MOVES, required=["grow"])


def test_models_refuse_a_move_mix_without_grow():
    import bartpy_suite as bps

    df = bps.datasets.load("cgm1998")
    for fit in (bps.cart, bps.bart):
        with pytest.raises(ArgumentError, match=r"moves must give 'grow' a positive weight"):
            fit("y ~ x1 + x2", data=df, sampler="cgm", moves={"change": 1.0}, draws=5, tune=5, chains=1,
                progress=False)
