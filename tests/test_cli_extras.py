"""Command line: Parquet input (when pyarrow is installed) and the progress bar on a terminal."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.cli import main

ARGS = ["--chains", "1", "--draws", "50", "--tune", "50", "--seed", "1"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(argv, err=None):
    out, err = io.StringIO(), err or io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def test_parquet_data_and_newdata(tmp_path):
    pytest.importorskip("pyarrow")
    df = bps.datasets.load("cgm1998")
    df.to_parquet(tmp_path / "train.parquet")
    df.to_csv(tmp_path / "train.csv", index=False)
    grid = pd.DataFrame({"x1": [1.5, 8.5], "x2": pd.Categorical(["A", "C"], categories=list("ABCD"))})
    grid.to_parquet(tmp_path / "grid.pq")
    status, out_parquet, _ = run(["fit", "y ~ x1 + x2", str(tmp_path / "train.parquet"), *ARGS, "--no-progress",
                                  "--out", str(tmp_path / "fit.nc")])
    assert status == 0
    status, out_csv, _ = run(["fit", "y ~ x1 + x2", str(tmp_path / "train.csv"), *ARGS, "--no-progress"])
    assert out_parquet == out_csv  # same data, same seed: the same summary
    status, pred, _ = run(["predict", str(tmp_path / "fit.nc"), str(tmp_path / "grid.pq")])
    assert status == 0
    got = pd.read_csv(io.StringIO(pred))
    expected = bps.load(tmp_path / "fit.nc").predict(grid)
    np.testing.assert_allclose(got["mean"].to_numpy(), expected["mean"].to_numpy(), rtol=1e-12)


def test_unreadable_parquet_is_a_one_line_error(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "bad.parquet").write_text("not parquet")
    status, _, err = run(["fit", "y ~ .", str(tmp_path / "bad.parquet")])
    assert status == 2 and err.startswith("bartpy_suite: error: cannot read data file") and "as Parquet" in err


def test_progress_bar_on_a_terminal_only(tmp_path):
    bps.datasets.load("cgm1998").to_csv(tmp_path / "train.csv", index=False)
    status, _, err = run(["fit", "y ~ x1 + x2", str(tmp_path / "train.csv"), *ARGS], err=FakeTerminal())
    assert status == 0 and "sampling: 100%" in err and "100/100" in err
    status, _, err = run(["fit", "y ~ x1 + x2", str(tmp_path / "train.csv"), *ARGS, "--no-progress"],
                         err=FakeTerminal())
    assert "sampling" not in err
    status, _, err = run(["fit", "y ~ x1 + x2", str(tmp_path / "train.csv"), *ARGS])  # not a terminal
    assert "sampling" not in err
