"""Command line: it keeps its inputs, writes outputs whole, reads other CSV dialects, names file
lines, refuses kinds that do not apply, and ends quietly on Ctrl-C and on a closed pipe.

Most tests stop before any fit (the checks come first); the others share two tiny fits (one
chain of 30 draws: the tests check files and messages, not the posterior). The tests that start
a Python process (SIGINT, a closed pipe) are marked slow where they fit a model.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import run

import bartpy_suite
import bartpy_suite as bps
from bartpy_suite import cli, datasets
from bartpy_suite.cli import main

REPO_ROOT = Path(bartpy_suite.__file__).resolve().parents[1]
TINY = ["--chains", "1", "--draws", "30", "--tune", "30", "--seed", "1", "--no-progress"]
GRID = pd.DataFrame({"x1": [1.5, 4.0, 6.0, 8.5] * 2, "x2": ["A"] * 4 + ["C"] * 4})


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def leftovers(folder: Path) -> list[str]:
    """Temporary files of an atomic write left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_safety")
    paths = {"root": root, "train": root / "train.csv", "grid": root / "grid.csv",
             "fit": root / "fit.nc", "clf_train": root / "clf.csv", "clf_fit": root / "clf.nc"}
    df = datasets.load("cgm1998")
    df.to_csv(paths["train"], index=False)
    GRID.to_csv(paths["grid"], index=False)
    clf = df.assign(label=np.where(df["y"] > 5.0, "high", "low")).drop(columns="y")
    clf.to_csv(paths["clf_train"], index=False)
    status, _, err = run(["fit", "y ~ x1 + x2", str(paths["train"]), *TINY, "--out", str(paths["fit"])])
    assert status == 0, err
    status, _, err = run(["fit", "label ~ x1 + x2", str(paths["clf_train"]), *TINY, "--out", str(paths["clf_fit"])])
    assert status == 0, err
    return paths


# --- --out is never an input ---------------------------------------------------------------------

def test_fit_refuses_out_that_is_the_data(tmp_path):
    data = tmp_path / "data.csv"
    datasets.load("cgm1998").to_csv(data, index=False)
    before = data.read_bytes()
    os.symlink(data, tmp_path / "link.csv")
    os.link(data, tmp_path / "hard.csv")
    sub = tmp_path / "sub"
    sub.mkdir()
    # the same path, a relative path through another folder, a symbolic and a hard link
    for out in (str(data), str(sub / ".." / "data.csv"), str(tmp_path / "link.csv"), str(tmp_path / "hard.csv")):
        status, stdout, err = run(["fit", "y ~ .", str(data), "--out", out, "--force"])
        assert status == 2, (out, err)
        assert f"--out '{out}' is the data file '{data}' (the same file)" in err
        assert stdout == ""
    assert data.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_predict_refuses_out_that_is_the_fit_or_the_new_data(files, tmp_path):
    fit_before, grid_before = files["fit"].read_bytes(), files["grid"].read_bytes()
    os.symlink(files["fit"], tmp_path / "fit_link.nc")
    for out, label, source in ((files["fit"], "fit", files["fit"]), (tmp_path / "fit_link.nc", "fit", files["fit"]),
                               (files["grid"], "new data", files["grid"])):
        status, stdout, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(out)])
        assert status == 2, err
        assert f"is the {label} file '{source}' (the same file)" in err
        assert stdout == ""
    assert files["fit"].read_bytes() == fit_before
    assert files["grid"].read_bytes() == grid_before


# --- --out of another kind needs --force -----------------------------------------------------------

def test_fit_refuses_to_replace_a_csv_without_force(files, tmp_path):
    other = tmp_path / "results.csv"
    other.write_text("a,b\n1,2\n")
    status, stdout, err = run(["fit", "y ~ x1 + x2", str(files["train"]), *TINY, "--out", str(other)])
    assert status == 2
    assert "exists and is a text file (CSV?), not a netCDF fit" in err and "--force" in err
    assert stdout == ""  # refused before fitting
    assert other.read_text() == "a,b\n1,2\n"
    status, _, err = run(["fit", "y ~ x1 + x2", str(files["train"]), *TINY, "--out", str(other), "--force"])
    assert status == 0, err
    assert bps.load(other).posterior.sizes["draw"] == 30
    assert leftovers(tmp_path) == []


def test_predict_refuses_to_replace_binary_files_without_force(files, tmp_path):
    pytest.importorskip("pyarrow")
    netcdf = tmp_path / "old_fit.nc"
    netcdf.write_bytes(files["fit"].read_bytes())
    parquet = tmp_path / "table.parquet"
    GRID.to_parquet(parquet)
    for target, kind in ((netcdf, "a netCDF/HDF5 file"), (parquet, "a Parquet file")):
        before = target.read_bytes()
        status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(target)])
        assert status == 2
        assert f"exists and is {kind}" in err and "refusing to replace it with a CSV" in err
        assert target.read_bytes() == before
    status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(netcdf), "--force"])
    assert status == 0, err
    assert list(pd.read_csv(netcdf).columns) == ["mean", "lower", "upper"]
    # a CSV over an older CSV, and a fit over an older fit, are ordinary overwrites
    old_csv = tmp_path / "old.csv"
    old_csv.write_text("mean,lower,upper\n")
    status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(old_csv)])
    assert status == 0, err
    assert len(pd.read_csv(old_csv)) == len(GRID)


def test_file_kind_sniffs_first_bytes(tmp_path):
    cases = {"empty": b"", "netcdf": b"\x89HDF\r\n\x1a\n rest", "parquet": b"PAR1....",
             "binary": b"ab\x00cd", "text": b"x,y\n1,2\n"}
    for kind, content in cases.items():
        path = tmp_path / kind
        path.write_bytes(content)
        assert cli._file_kind(path) == kind
    classic = tmp_path / "classic"
    classic.write_bytes(b"CDF\x01" + b"\x00" * 8)
    assert cli._file_kind(classic) == "netcdf"


# --- atomic writes ----------------------------------------------------------------------------------

def test_interrupted_save_leaves_the_old_file_and_no_temporary(files, tmp_path, monkeypatch):
    target = tmp_path / "fit.nc"
    target.write_bytes(files["fit"].read_bytes())
    before = target.read_bytes()

    def half_write(self, path):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n half")
        raise KeyboardInterrupt

    monkeypatch.setattr(type(bps.load(files["fit"])), "to_netcdf", half_write)
    status, _, err = run(["fit", "y ~ x1 + x2", str(files["train"]), *TINY, "--out", str(target)])
    assert status == 130
    assert err.endswith("bartpy_suite: interrupted\n")
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_failed_csv_write_leaves_nothing(files, tmp_path, monkeypatch):
    target = tmp_path / "pred.csv"

    def failing(self, path, **kwargs):
        Path(path).write_text("mean,lo")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", failing)
    status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(target)])
    assert status == 2
    assert f"cannot write predictions to '{target}'" in err and "No space left" in err
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_new_output_gets_the_umask_mode(files, tmp_path):
    target = tmp_path / "pred.csv"
    old = os.umask(0o022)
    try:
        status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--out", str(target)])
    finally:
        os.umask(old)
    assert status == 0, err
    assert target.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600


# --- CSV dialects: --sep and --encoding -------------------------------------------------------------

def test_semicolon_and_tab_files_name_the_option(tmp_path):
    df = datasets.load("cgm1998")
    semi, tab = tmp_path / "semi.csv", tmp_path / "tab.tsv"
    df.to_csv(semi, sep=";", index=False)
    df.to_csv(tab, sep="\t", index=False)
    status, _, err = run(["fit", "y ~ .", str(semi)])
    assert status == 2
    assert "fields look separated by ';', not commas; pass --sep ';'" in err
    status, _, err = run(["fit", "y ~ .", str(tab)])
    assert status == 2
    assert "pass --sep tab" in err


def test_sep_and_encoding_read_the_file(files, tmp_path):
    """A semicolon-delimited Latin-1 copy of the grid predicts as the comma UTF-8 one."""
    reference = run(["predict", str(files["fit"]), str(files["grid"])])
    assert reference[0] == 0, reference[2]
    # a column with a non-ASCII name, unused by the fit, makes the encoding matter
    grid = GRID.assign(**{"café": "é"})
    latin = tmp_path / "grid_latin1.csv"
    latin.write_bytes(grid.to_csv(sep=";", index=False).encode("latin-1"))
    status, _, err = run(["predict", str(files["fit"]), str(latin), "--sep", ";"])
    assert status == 2
    assert "it is not valid utf-8 text (byte 0xe9 on line 1" in err
    assert "pass --encoding latin-1" in err
    status, out, err = run(["predict", str(files["fit"]), str(latin), "--sep", ";", "--encoding", "latin-1"])
    assert status == 0, err
    assert out == reference[1]
    tab = tmp_path / "grid.tsv"
    GRID.to_csv(tab, sep="\t", index=False)
    for spelling in ("tab", "\\t", "\t"):
        status, out, err = run(["predict", str(files["fit"]), str(tab), "--sep", spelling])
        assert status == 0, err
        assert out == reference[1]


def test_bad_encoding_and_sep_options(files, tmp_path):
    status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--encoding", "klingon"])
    assert status == 2 and "--encoding 'klingon' is not a known text encoding" in err
    status, _, err = run(["predict", str(files["fit"]), str(files["grid"]), "--sep", ""])
    assert status == 2 and "--sep is empty" in err
    pytest.importorskip("pyarrow")
    GRID.to_parquet(tmp_path / "grid.parquet")
    status, _, err = run(["predict", str(files["fit"]), str(tmp_path / "grid.parquet"), "--sep", ";"])
    assert status == 2 and "--sep and --encoding apply to CSV files" in err


# --- messages name file lines -------------------------------------------------------------------------

def test_missing_values_are_reported_by_file_line(tmp_path):
    # data rows 0..5; row 2 has a quoted field over two lines, a blank line precedes row 4;
    # x1 is missing in rows 1 and 4: file lines 3 and 8 (the header is line 1)
    text = ('x1,x2,y\n'
            '1.0,A,1.0\n'
            ',B,2.0\n'
            '3.0,"C\nC",3.0\n'
            '4.0,D,4.0\n'
            '\n'
            ',A,5.0\n'
            '6.0,B,6.0\n')
    data = tmp_path / "gaps.csv"
    data.write_text(text)
    assert pd.read_csv(data)["x1"].isna().to_numpy().nonzero()[0].tolist() == [1, 4]
    status, _, err = run(["fit", "y ~ x1 + x2", str(data), "--na-action", "raise"])
    assert status == 2
    assert "2 rows (lines 3, 8 of gaps.csv)" in err, err


def test_new_data_rows_are_reported_by_file_line(files, tmp_path):
    grid = GRID.astype({"x1": float})
    grid.loc[[2, 5], "x1"] = np.nan
    path = tmp_path / "grid_na.csv"
    grid.to_csv(path, index=False)
    status, _, err = run(["predict", str(files["fit"]), str(path)])
    assert status == 2
    assert "2 rows (lines 4, 7 of grid_na.csv)" in err, err


def test_row_source_falls_back_when_lines_cannot_be_counted():
    rows = cli._RowSource("data.csv", "::", None, pd.RangeIndex(3), csv_file=True)  # csv cannot parse '::'
    assert rows.name_lines("x in 1 row (index 2)") == (
        "x in 1 row (data rows 2 of data.csv, counted from 0; file line = row + 2 without blank or "
        "multi-line records)")
    own_index = cli._RowSource("data.parquet", None, None, pd.Index([10, 20, 30]), csv_file=False)
    assert own_index.name_lines("x in 1 row (index 20)") == "x in 1 row (index 20)"


# --- --kind applies to the fit's response -------------------------------------------------------------

@pytest.mark.parametrize("kind", ["mean", "predictive", "prob", "class", None])
def test_kind_against_regression_and_classification(files, kind):
    """Every kind on both kinds of fit: the model type does not matter (CART, BART and the soft
    tree all go through the same regression or class table), the response does."""
    extra = [] if kind is None else ["--kind", kind]
    status, out, err = run(["predict", str(files["fit"]), str(files["grid"]), *extra])
    if kind in ("prob", "class"):
        assert status == 2
        assert err == (f"bartpy_suite: error: --kind {kind} does not apply to this fit: it is a regression fit "
                       "(numeric response), whose kinds are mean and predictive\n")
    else:
        assert status == 0, err
        assert list(pd.read_csv(io.StringIO(out)).columns) == ["mean", "lower", "upper"]
    status, out, err = run(["predict", str(files["clf_fit"]), str(files["grid"]), *extra])
    if kind in ("mean", "predictive"):
        assert status == 2
        assert err == (f"bartpy_suite: error: --kind {kind} does not apply to this fit: it is a classification "
                       "fit (categorical response), whose kinds are prob and class\n")
    else:
        assert status == 0, err
        columns = list(pd.read_csv(io.StringIO(out)).columns)
        if kind == "class":
            assert columns == ["class"]
        else:
            assert columns == ["prob_high", "prob_high_lower", "prob_high_upper", "prob_low", "prob_low_lower",
                               "prob_low_upper", "class"]


def test_survival_kinds_on_a_regression_fit_name_the_kinds_that_apply(files):
    status, out, err = run(["predict", str(files["fit"]), str(files["grid"]), "--kind", "survival"])
    assert status == 2 and out == ""
    assert err == ("bartpy_suite: error: --kind survival does not apply to this fit: it is a regression fit "
                   "(numeric response), whose kinds are mean and predictive\n")


def test_na_action_pass_leaves_rows_with_a_missing_predictor_empty(files, tmp_path):
    """Without --na-action a missing predictor stops the command naming the file line; with
    --na-action pass that row's columns are empty and the other rows are predicted as usual."""
    gaps = tmp_path / "gaps.csv"
    GRID.assign(x1=GRID["x1"].where(GRID.index != 2)).to_csv(gaps, index=False)
    status, out, err = run(["predict", str(files["fit"]), str(gaps)])
    assert status == 2 and out == ""
    assert "line 4" in err and "na-action" in err.replace("_", "-"), err
    status, out, err = run(["predict", str(files["fit"]), str(gaps), "--na-action", "pass"])
    assert status == 0, err
    pred = pd.read_csv(io.StringIO(out))
    full = pd.read_csv(io.StringIO(run(["predict", str(files["fit"]), str(files["grid"])])[1]))
    assert pred.loc[2].isna().all()
    pd.testing.assert_frame_equal(pred.drop(index=2), full.drop(index=2))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["bart", "soft_tree"])
def test_kind_against_the_other_models(model, tmp_path):
    """The kind check of BART and soft-tree fits, regression and classification (tiny fits on
    60 rows: only the columns and the messages are checked)."""
    df = datasets.load("cgm1998").iloc[:60]
    sets = {"regression": ("y ~ x1", df, ("mean", "predictive")),  # soft trees split numbers only
            "classification": ("label ~ x1", df.assign(label=np.where(df["y"] > 5.0, "high", "low")),
                               ("prob", "class"))}
    GRID.to_csv(tmp_path / "grid.csv", index=False)
    for name, (formula, data, applies) in sets.items():
        data.to_csv(tmp_path / f"{name}.csv", index=False)
        fit_path = tmp_path / f"{name}.nc"
        status, _, err = run(["fit", formula, str(tmp_path / f"{name}.csv"), "--model", model, "--chains", "1",
                              "--draws", "5", "--tune", "5", "--seed", "1", "--no-progress", "--no-check-mixing",
                              "--out", str(fit_path)])
        assert status == 0, err
        for kind in ("mean", "predictive", "prob", "class"):
            status, out, err = run(["predict", str(fit_path), str(tmp_path / "grid.csv"), "--kind", kind])
            if kind in applies:
                assert status == 0, err
                assert len(pd.read_csv(io.StringIO(out))) == len(GRID)
            else:
                assert status == 2
                assert f"whose kinds are {applies[0]} and {applies[1]}" in err


# --- --no-check-mixing and the help ----------------------------------------------------------------------

def test_no_check_mixing(files):
    # 30 draws of one chain: the check always finds too little ESS
    status, _, err = run(["fit", "y ~ x1 + x2", str(files["train"]), *TINY])
    assert status == 0 and "bartpy_suite: warning: the chains have not mixed" in err
    status, _, err = run(["fit", "y ~ x1 + x2", str(files["train"]), *TINY, "--no-check-mixing"])
    assert status == 0 and "have not mixed" not in err


def test_help_explains_formulas_and_exit_codes(capsys):
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for part in ("Python expressions evaluated by formulaic (as in patsy and R)", "C(x, levels=[...])", "I(...)",
                 "log1p", "sqrt", "abs", "center(x)", "scale(x)", "'.'", "never as code",
                 "0 success", "2 usage or input error", "130 interrupted", "141 standard output closed",
                 "--no-check-mixing", "--sep", "--encoding", "--force"):
        assert part in text, part


# --- processes: a closed pipe, Ctrl-C -----------------------------------------------------------------

def test_closed_pipe_exits_quietly(files, tmp_path):
    """``predict ... | head -1``: exit 141, nothing on standard error (no BrokenPipeError)."""
    big = tmp_path / "big.csv"
    pd.concat([GRID] * 4000, ignore_index=True).to_csv(big, index=False)  # ~600 kB of output, > a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "bartpy_suite", "predict", str(files["fit"]), str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    assert proc.stdout.readline().decode().strip() == "mean,lower,upper"
    proc.stdout.close()  # as head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert err == ""


def _read_until(fd: int, needle: str, timeout: float) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{needle!r} not seen in time; got {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


def _long_fit_on_a_terminal(files, out: Path) -> tuple[subprocess.Popen, int]:
    """A long CLI fit (the tempered sampler: 16 rungs per draw) with its standard error on a
    pseudo-terminal, so that it shows its progress; returned once it has sampled for a second."""
    master, slave = pty.openpty()
    # a pseudo-terminal starts 0 columns wide, and tqdm draws nothing in 0 columns
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "bartpy_suite", "fit", "y ~ x1 + x2", str(files["train"]),
                             "--sampler", "tempered", "--chains", "2", "--draws", "200000", "--tune", "100",
                             "--seed", "1", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=slave, env=child_env())
    os.close(slave)
    _read_until(master, "sampling:", timeout=300)
    time.sleep(1.0)
    return proc, master


@pytest.mark.slow
def test_ctrl_c_keeps_the_draws_and_shows_each_step(files, tmp_path):
    out = tmp_path / "long.nc"
    proc, master = _long_fit_on_a_terminal(files, out)
    try:
        proc.send_signal(signal.SIGINT)
        seen = _read_until(master, "saved the fit", timeout=300)
        stdout = proc.stdout.read().decode()
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert "sampling interrupted: returning the draws made so far" in seen
    assert "building the fit from the kept draws" in seen
    assert "summarising 2 chains x" in seen and "saving the fit to" in seen and ": done in" in seen
    assert "n_leaves" in stdout
    assert 0 < bps.load(out).posterior.sizes["draw"] < 200_000
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_second_ctrl_c_leaves_no_partial_file(files, tmp_path):
    """A second Ctrl-C once the kept draws are being summarised and saved. Where it lands
    depends on timing (building, summarising or writing: usually exit 130; if everything was
    done already, 0), so the test checks what holds either way: no traceback, no temporary
    file, and --out either the old file, byte for byte, or a whole new fit. The deterministic
    check of an interrupted write is test_interrupted_save_leaves_the_old_file_and_no_temporary."""
    out = tmp_path / "long.nc"
    out.write_bytes(files["fit"].read_bytes())
    before = out.read_bytes()
    proc, master = _long_fit_on_a_terminal(files, out)
    try:
        proc.send_signal(signal.SIGINT)
        seen = _read_until(master, "building the fit from the kept draws", timeout=120)
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=300)
        seen += _read_until(master, "\n", timeout=5)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in seen
    assert status in (0, 130), seen
    if status == 130:
        assert out.read_bytes() == before
    else:
        assert bps.load(out).posterior.sizes["draw"] < 200_000
    assert leftovers(tmp_path) == []
