"""Command line: the GFR warm start of BART (``fit --init gfr``, ``--init-sweeps``)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.cli import main

SETTINGS = dict(trees=10, chains=2, draws=20, tune=10, seed=3)
ARGS = ["--model", "bart", "--trees", "10", "--chains", "2", "--draws", "20", "--tune", "10", "--seed", "3",
        "--no-progress"]


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    rng = np.random.default_rng(7)
    x = rng.uniform(size=(120, 3))
    df = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2],
                       "y": 4 * (x[:, 0] > 0.5) + x[:, 1] + rng.normal(scale=0.3, size=120)})
    path = tmp_path_factory.mktemp("init") / "train.csv"
    df.to_csv(path, index=False)
    return path, pd.read_csv(path)


@pytest.mark.parametrize("extra, keywords", [
    ([], {"init": "gfr"}),
    (["--init-sweeps", "3"], {"init": "gfr", "init_options": {"sweeps": 3}}),
])
def test_init_gfr_fits_what_python_fits(data_csv, tmp_path, extra, keywords):
    path, df = data_csv
    status, _, err = run(["fit", "y ~ .", str(path), *ARGS, "--init", "gfr", *extra, "--out", str(tmp_path / "f.nc")])
    assert status == 0, err
    got = bps.load(tmp_path / "f.nc").posterior["sigma"].to_numpy()
    expected = bps.bart("y ~ .", data=df, progress=False, **SETTINGS, **keywords).posterior["sigma"].to_numpy()
    np.testing.assert_array_equal(got, expected)  # same seed and settings: the same draws
    cold = bps.bart("y ~ .", data=df, progress=False, **SETTINGS).posterior["sigma"].to_numpy()
    assert not np.array_equal(got, cold)  # the warm start was passed on, not dropped


@pytest.mark.parametrize("argv, message", [
    (["--init-sweeps", "5"], "--init-sweeps sets the number of GFR sweeps of the warm start: add --init gfr"),
    (["--init", "gfr", "--init-sweeps", "1"], "--init-sweeps 1 is fewer than the 2 chains"),
    (["--init", "gfr", "--sampler", "pg"], "sampler='pg' is not one of them"),
])
def test_init_errors_name_the_option(data_csv, argv, message):
    path, _ = data_csv
    status, out, err = run(["fit", "y ~ .", str(path), *ARGS, *argv])
    assert status == 2 and out == ""
    assert err.startswith("bartpy_suite: error: ") and message in err


def test_init_is_for_bart_only(data_csv):
    path, _ = data_csv
    status, _, err = run(["fit", "y ~ .", str(path), "--model", "cart", "--init", "gfr"])
    assert status == 2 and "--init applies to --model bart only" in err


def test_init_in_fit_help(capsys):
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--init {auto,gfr,none}" in text and "--init-sweeps K" in text and "at least --chains" in text


def test_init_none_and_auto(data_csv, tmp_path):
    """--init none is init=None (stumps); --init auto, the default, is init='auto' (stumps at 120 rows)."""
    path, df = data_csv
    expected = bps.bart("y ~ .", data=df, progress=False, **SETTINGS, init=None).posterior["sigma"].to_numpy()
    for choice in ("none", "auto"):
        status, _, err = run(["fit", "y ~ .", str(path), *ARGS, "--init", choice, "--out", str(tmp_path / "f.nc")])
        assert status == 0, err
        np.testing.assert_array_equal(bps.load(tmp_path / "f.nc").posterior["sigma"].to_numpy(), expected)
