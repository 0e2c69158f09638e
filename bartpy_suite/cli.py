"""Command-line interface: ``python -m bartpy_suite {demo,fit,predict,shap}``.

``demo``
    Fit Bayesian CART to the shipped CGM 1998 example with settings chosen for mixing (parallel
    tempering, tree prior beta = 2), print the summary table, whether the chains mixed, and
    predictions with 90% credible intervals on a small grid of new points.
``fit FORMULA DATA.csv``
    Fit ``--model cart`` (default), ``bart`` or ``soft_tree`` to a CSV file (or a Parquet file,
    ``.parquet``/``.pq``, when pyarrow is installed), print the summary and, with
    ``--out fit.nc``, save the fit (netCDF) for ``predict``. A progress bar is shown on a
    terminal (``--no-progress`` hides it); warnings, such as the post-fit mixing check's, are
    printed as ``bartpy_suite: warning: ...``. ``--model bart`` with ``'Surv(time, event) ~ ...'``
    fits survival BART; with ``--levels low,mid,high`` (the response's classes in order) ordinal
    BART.
``predict FIT.nc NEW.csv``
    Predict new rows from a saved fit; writes a CSV (``--out`` or standard output) with the
    columns of :meth:`Fit.predict`, one row per row of ``NEW.csv``, in order (a survival fit:
    ``--kind survival|hazard|cumhaz|median|rmst`` and ``--times T ...``).
``shap FIT.nc DATA.csv``
    Explain rows with a saved fit: per row and predictor, the posterior mean of the SHAP value
    (exact path-dependent TreeSHAP of every kept draw, :meth:`Fit.shap_summary`) and its
    equal-tailed credible interval (``--level``, default 0.9), one CSV row per row of
    ``DATA.csv``, in order, plus the posterior mean base value; ``--max-draws`` thins the draws.

Files: an ``--out`` that is one of the command's input files (the same path, a symbolic or a
hard link to it) is refused; an existing ``--out`` of another kind (a fit over a CSV file, a CSV
over a netCDF/HDF5 or Parquet file, recognised by its first bytes) is refused unless ``--force``;
outputs are written to a temporary file in the target's folder and renamed over the target, so
an error or Ctrl-C leaves the target as it was and no temporary file behind. Messages name the
input's file lines (line 1 is the header), not 0-based data rows.

Exit statuses (also in ``--help``): 0 success; 2 usage or input error (message on standard error,
no traceback); 130 interrupted by Ctrl-C before anything could be kept; 141 standard output was
closed by its reader (``predict ... | head``), as a process killed by SIGPIPE reports in a shell;
1 an unexpected internal error (a Python traceback: please report it).

Imports: the public package front door (:mod:`bartpy_suite`), :mod:`bartpy_suite.datasets`,
:mod:`bartpy_suite.errors`, the model and sampler registries, pandas and the standard library.
Top of the layer stack: nothing in the package imports this module.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import csv
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite import datasets
from bartpy_suite._validation import NaAction
from bartpy_suite.errors import BartpySuiteError, BartpySuiteWarning
from bartpy_suite.models import MODELS
from bartpy_suite.models._base import SPARSE_SAMPLERS
from bartpy_suite.models.settings import RUN_KEYWORDS, check_run_settings, sampler_kind
from bartpy_suite.samplers import samplers_for

__all__ = ["main", "build_parser", "CommandError"]

PROG = "bartpy_suite"

EXIT_OK = 0
EXIT_INTERNAL = 1  # an uncaught exception: Python prints the traceback and exits with 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a process ended by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as shells report `yes | head`'s yes

#: Settings of ``demo``: the best found for about 30 CPU seconds after compilation
#: (``benchmarks/demo_mixing.py`` writes ``benchmarks/results/demo_mixing.md``). With the demo's
#: seed 1 the chains mix (r_hat <= 1.004, bulk ESS >= 1600 for sigma, n_leaves and depth, no
#: mixing warning); seeds 2 and 3 fall short on n_leaves (bulk ESS 341 and 74, r_hat 1.006 and
#: 1.032), so the demo prints its own verdict from its numbers. The sampler is named here, not
#: left to CART's default, so that this measurement holds when the default changes. Parallel
#: tempering crosses between the posterior's modes (the root split on x1 or on x2), where
#: grow/prune/change/swap MH stays for hundreds of thousands of iterations; the depth penalty
#: beta = 2 (default 0.5) puts most of the posterior on trees of 5-6 leaves, the five regions of
#: eq. 3.18, instead of a slow walk over 8-19 leaves. With the default prior no sampler of the
#: package came near mixing on this example within 30 CPU seconds.
DEMO_SAMPLER = "tempered"
DEMO_CHAINS = 4
DEMO_DRAWS = 48_000
DEMO_TUNE = 2_000
DEMO_PRIOR = {"alpha": 0.95, "beta": 2.0}
DEMO_SEED = 1
DEMO_LEVEL = 0.9
DEMO_FORMULA = "y ~ x1 + x2"

#: ``predict --kind`` values by the fit's response; the first is the default.
REGRESSION_KINDS = ("mean", "predictive")
CLASSIFICATION_KINDS = ("prob", "class")
SURVIVAL_KINDS = ("survival", "hazard", "cumhaz", "median", "rmst")

EXIT_CODES_EPILOG = (
    "exit status: 0 success; 2 usage or input error (a one-line message on standard error); "
    "130 interrupted by Ctrl-C (a first Ctrl-C during sampling keeps the draws made so far and "
    "goes on to summarise and save them; a second one abandons the run, leaving --out untouched); "
    "141 standard output closed by its reader, e.g. 'predict ... | head' (as a shell reports a "
    "process ended by SIGPIPE); 1 an unexpected internal error (a traceback: please report it)"
)

FORMULA_HELP = (
    "model formula, e.g. 'y ~ .' or 'y ~ x1 + C(g)'. Formulas are Python expressions evaluated "
    "by formulaic (as in patsy and R): the response, '~', then column names joined by '+'; '.' "
    "means every other column and '- x' removes x; C(x) makes x a factor, C(x, levels=[...]) "
    "with the given level order; I(...) does arithmetic (I(x1 * x2), I(x / 100)); log, log2, "
    "log10, log1p, exp, sqrt, abs, powers (x**2), center(x) and scale(x) transform a column. "
    "Text columns are factors. A saved fit stores the formula and its transforms' state as data "
    "(JSON), never as code"
)


class CommandError(BartpySuiteError):
    """A problem with the command line's files or options; reported without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``python -m bartpy_suite``.

    Returns
    -------
    argparse.ArgumentParser
        The parser, with the sub-commands ``demo``, ``fit``, ``predict`` and ``shap``.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bayesian tree models (CART, BART, soft trees) with an R-style formula front-end.",
        epilog=EXIT_CODES_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {bps.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="fit Bayesian CART to the shipped CGM 1998 data and print a summary",
        description=(
            f"Fit bps.cart({DEMO_FORMULA!r}, sampler={DEMO_SAMPLER!r}, chains={DEMO_CHAINS}, "
            f"beta={DEMO_PRIOR['beta']}) to the shipped CGM 1998 example (thesis eq. 3.18), print the "
            "summary and predictions with 90%% credible intervals, and whether the chains mixed "
            "(r_hat <= 1.01, bulk ESS >= 400). About 30 CPU seconds after compilation; with the "
            "default seed the chains mix."
        ),
        epilog=EXIT_CODES_EPILOG,
    )
    demo.add_argument("--draws", type=int, default=DEMO_DRAWS,
                      help=f"draws kept per chain (default {DEMO_DRAWS})")
    demo.add_argument("--tune", type=int, default=DEMO_TUNE,
                      help=f"draws discarded per chain (default {DEMO_TUNE})")
    demo.add_argument("--seed", type=int, default=DEMO_SEED, help=f"random seed (default {DEMO_SEED})")
    _add_progress(demo)

    fit = commands.add_parser(
        "fit",
        help="fit a model to a CSV file, print the summary, optionally save it",
        description=(
            "Fit a Bayesian tree model to the rows of a CSV file. Text columns become factors. "
            "Options left out take the defaults of bps.cart / bps.bart / bps.soft_tree."
        ),
        epilog=EXIT_CODES_EPILOG,
    )
    fit.add_argument("formula", help=FORMULA_HELP)
    fit.add_argument("data", help="CSV file with a header row, or a Parquet file (.parquet, .pq; needs pyarrow)")
    fit.add_argument("--model", choices=tuple(MODELS) + ("bcf",), default="cart",
                     help="the model (default cart): " + "; ".join(
                         f"{name}: {cls.__doc__.splitlines()[0].rstrip('.')}" for name, cls in MODELS.items())
                     + "; bcf: Bayesian causal forests (bps.bcf; needs --treatment)")
    fit.add_argument("--treatment", help="--model bcf: the 0/1 treatment column")
    fit.add_argument("--propensity", help="--model bcf: a column holding P(treatment = 1 | x) (default: estimated "
                                          "by probit BART)")
    fit.add_argument("--tau-formula", dest="tau_formula", metavar="'~ x1 + x2'",
                     help="--model bcf: the moderators of the treatment effect (default: the formula's predictors)")
    fit.add_argument("--weights", metavar="COLUMN",
                     help="--model bart, numeric response: a column of observation (precision) weights w >= 0, "
                          "Var(e) = sigma^2 / w")
    fit.add_argument("--offset", metavar="COLUMN",
                     help="--model bart, numeric response: a column of known offsets, y = offset + f(x) + e (predict "
                          "then needs the column in the new data)")
    fit.add_argument("--variance", metavar="'~ x1 + x2'",
                     help="--model bart, numeric response: a variance forest on these predictors (heteroskedastic "
                          "BART: predictive intervals follow sigma(x))")
    fit.add_argument("--sampler", help="sampler name (default: the model's); by model: " + "; ".join(
        f"{name}: {', '.join(samplers_for(sampler_kind(cls)))} (default {cls.run_defaults['sampler']})"
        for name, cls in MODELS.items()))
    fit.add_argument("--sampler-option", dest="sampler_options", action="append", metavar="KEY=VALUE",
                     help="a sampler setting (repeatable); VALUE is read as JSON where it parses "
                          "(numbers, true/false, {...}), else as text, e.g. "
                          "--sampler-option 'moves={\"grow\": 0.5, \"prune\": 0.5}'")
    fit.add_argument("--chains", type=int, help="number of chains")
    fit.add_argument("--draws", type=int, help="draws kept per chain")
    fit.add_argument("--tune", type=int, help="draws discarded per chain")
    fit.add_argument("--thin", type=int, help="keep every THIN-th draw after --tune")
    fit.add_argument("--seed", type=int, help="random seed")
    fit.add_argument("--trees", type=int, help=f"number of trees (--model {_models_taking('trees')} only)")
    fit.add_argument("--sparse", action="store_true", default=None,
                     help="DART: the sparsity-inducing Dirichlet prior on the split variables (Linero 2018; "
                          f"--model {_models_taking('sparse')} with the samplers {' or '.join(SPARSE_SAMPLERS)}); "
                          "the summary and the saved fit then hold split_probs")
    fit.add_argument("--init", choices=("auto", "gfr", "none"),
                     help=f"how the chains start (--model {_models_taking('init')}): 'gfr' runs a few grow-from-root "
                          "sweeps and starts each chain from a different GFR forest (regression, samplers grow_prune, "
                          "cgm, gfr; --tune then defaults to 100); 'none' starts every tree as a stump; 'auto' "
                          "(default) is 'gfr' for a regression fit of 10,000 rows or more, else 'none'")
    fit.add_argument("--init-sweeps", dest="init_sweeps", type=int, metavar="K",
                     help="GFR sweeps of --init gfr (default max(5, chains); at least --chains)")
    fit.add_argument("--level", type=float, help="credible level of the summary intervals")
    fit.add_argument("--levels", help="the response's classes in order, comma-separated (e.g. low,mid,high): the "
                                      "response becomes an ordered categorical, which --model bart fits by ordinal "
                                      "(cumulative-probit) BART when three or more of them occur")
    fit.add_argument("--na-action", dest="na_action", choices=tuple(NaAction),
                     help="rows with missing values: drop them with a warning (default), raise an error, or "
                          "split: keep missing predictor values, each split rule sending them left or right "
                          "(new data at 'predict' may then hold missing values too)")
    fit.add_argument("--no-check-mixing", dest="check_mixing", action="store_false", default=None,
                     help="skip the post-fit mixing check and its warning (the model keyword "
                          "check_mixing=False)")
    _add_csv_options(fit)
    fit.add_argument("--out", help="save the fit to this netCDF file (for 'predict'); never one of the inputs")
    _add_force(fit, "a fit")
    _add_progress(fit)

    predict = commands.add_parser(
        "predict",
        help="predict new rows from a saved fit; writes CSV",
        description=(
            "Predict the rows of a CSV file with a fit saved by 'fit --out'. Writes a CSV with "
            "one row per input row: mean, lower, upper (regression, kind mean or predictive), or "
            "prob_<label>, prob_<label>_lower, prob_<label>_upper per class and class "
            "(classification, kind prob), or class alone (kind class)."
        ),
        epilog=EXIT_CODES_EPILOG,
    )
    predict.add_argument("fit", help="netCDF file written by 'fit --out'")
    predict.add_argument("newdata", help="CSV or Parquet file with the predictor columns")
    predict.add_argument("--kind", choices=REGRESSION_KINDS + CLASSIFICATION_KINDS + SURVIVAL_KINDS,
                         help="regression fits: mean, the interval of f(x) (default), or predictive, "
                              "the interval of a new y; classification fits: prob, class "
                              "probabilities with intervals and the most probable class (default), "
                              "or class, the most probable class only; survival fits: survival (default), "
                              "hazard, cumhaz, median or rmst: S(t | x), the discrete hazard, -log S, the median "
                              "survival time or the restricted mean survival time up to t")
    predict.add_argument("--times", type=float, nargs="+", metavar="T",
                         help="survival fits: the times t of S(t | x), hazard, cumhaz or rmst (default: the fit's "
                              "grid)")
    predict.add_argument("--na-action", dest="na_action", choices=("raise", "pass"),
                         help="rows of new.csv with a missing predictor: raise (default: an error naming their "
                              "lines) or pass (R's na.pass: empty prediction columns for those rows, the others "
                              "predicted as usual); a fit made with --na-action split routes them in its trees")
    predict.add_argument("--level", type=float, help="credible level of the intervals (default 0.95)")
    _add_csv_options(predict)
    predict.add_argument("--out", help="write the CSV here instead of standard output; never one of the inputs")
    _add_force(predict, "a CSV")
    _add_shap_parser(commands)
    return parser


def _models_taking(keyword: str) -> str:
    """The registered models that take ``keyword`` ("bart or cart"), read from their keyword lists."""
    return " or ".join(name for name, cls in MODELS.items() if keyword in {p.name for p in cls.keyword_parameters()})


def _add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                        help="do not show a progress bar (it is shown on a terminal only)")


def _add_csv_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sep", help="field delimiter of the CSV input (default ','), e.g. --sep ';'; "
                                      "--sep tab or --sep '\\t' for tab-separated files")
    parser.add_argument("--encoding", help="text encoding of the CSV input (default utf-8), e.g. "
                                           "--encoding latin-1 for files saved as Latin-1 / Windows-1252")


def _add_force(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--force", action="store_true",
                        help=f"replace an existing --out file even if it is not {what} "
                             "(an input file is never replaced)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when omitted.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for a usage or input error (message on standard
        error, no traceback), 130 when interrupted, 141 when standard output was closed by its
        reader (a broken pipe).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    handlers = {"demo": _demo, "fit": _fit, "predict": _predict, "shap": _shap}
    session = _Session(progress=getattr(args, "progress", None) is not False)
    with warnings.catch_warnings():
        # The command line prints every warning of the package, whatever filters are installed.
        warnings.filterwarnings("always", category=BartpySuiteWarning)
        warnings.showwarning = session.show_warning
        try:
            handlers[args.command](args, session)
            # Flush here, not at interpreter exit, so that a closed pipe is caught below.
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        except BartpySuiteError as exc:
            print(f"{PROG}: error: {session.name_lines(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
    return EXIT_OK


def _silence_stdout() -> None:
    """Point standard output at /dev/null after its reader went away.

    Python flushes ``sys.stdout`` again at exit; with the pipe closed that flush would print
    "Exception ignored ... BrokenPipeError". The recipe of the Python docs (signal module, "Note
    on SIGPIPE"): duplicate /dev/null onto the descriptor.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture into StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Session:
    """What one command knows while it runs: where its rows come from, whether to show progress."""

    def __init__(self, progress: bool) -> None:
        self.progress = progress
        self.rows: _RowSource | None = None
        self.interrupted = False

    def show_warning(self, message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     file: TextIO | None = None, line: str | None = None) -> None:
        text = str(message)
        print(f"{PROG}: warning: {self.name_lines(text)}", file=sys.stderr if file is None else file)
        if text.startswith("sampling interrupted"):
            # The model goes on to build the fit from the kept draws: say so, it can take a while.
            self.interrupted = True
            self.stage("building the fit from the kept draws (log-likelihood of every draw, the "
                       "mixing check); press Ctrl-C again to abandon the run")

    def name_lines(self, text: str) -> str:
        """``text`` with the 0-based data rows of the input named as its file lines."""
        return text if self.rows is None else self.rows.name_lines(text)

    def show_stages(self) -> bool:
        """Stage lines go to standard error on a terminal, unless --no-progress."""
        return self.progress and bool(getattr(sys.stderr, "isatty", lambda: False)())

    def stage(self, what: str) -> None:
        if self.show_stages():
            print(f"{PROG}: {what} ...", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def timed_stage(self, what: str) -> Iterator[None]:
        """Print what is being done before a slow step and how long it took after it (on a
        terminal, unless --no-progress)."""
        shown = self.show_stages()
        start = time.perf_counter()
        if shown:
            print(f"{PROG}: {what} ...", file=sys.stderr, flush=True)
        yield
        if shown:
            print(f"{PROG}: {what}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def _progress_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.progress is None else {"progress": args.progress}


def _format_table(df: pd.DataFrame) -> str:
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.max_rows", None, "display.precision", 3):
        return df.to_string()


# --- input files --------------------------------------------------------------------------------

def _existing_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CommandError(f"{what} file not found: '{path}'")
    if not p.is_file():
        raise CommandError(f"{what} path is not a file: '{path}'")
    return p


PARQUET_SUFFIXES = (".parquet", ".pq")
#: Delimiters that, found in the header of a one-column CSV, mean the file was read with the
#: wrong --sep; shown as the option to pass.
_OTHER_SEPARATORS = {";": "--sep ';'", "\t": "--sep tab", "|": "--sep '|'"}


def _separator(sep: str | None) -> str | None:
    """The --sep value as pandas takes it: 'tab' and a typed backslash-t mean a tab."""
    if sep is None:
        return None
    if sep in ("tab", "\\t", "TAB"):
        return "\t"
    if sep == "":
        raise CommandError("--sep is empty: give the field delimiter, e.g. --sep ';' or --sep tab")
    return sep


def _encoding(encoding: str | None) -> str | None:
    if encoding is None:
        return None
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise CommandError(f"--encoding {encoding!r} is not a known text encoding; e.g. utf-8, latin-1, "
                           "cp1252 (Windows), utf-16") from None


def _read_table(path: str, what: str, args: argparse.Namespace, session: _Session) -> pd.DataFrame:
    """Read a data file: Parquet when its name ends in .parquet or .pq (needs pyarrow), else CSV.

    Sets ``session.rows`` so that messages about rows of this table name its file lines.
    """
    p = _existing_file(path, what)
    sep, encoding = _separator(args.sep), _encoding(args.encoding)
    if p.suffix.lower() in PARQUET_SUFFIXES:
        if sep is not None or encoding is not None:
            raise CommandError(f"--sep and --encoding apply to CSV files; the {what} file '{path}' is read as "
                               "Parquet (its name ends in .parquet or .pq)")
        try:
            import pyarrow  # noqa: F401  (pandas' Parquet engine; an extra)
        except ImportError as exc:
            raise CommandError(f"reading the Parquet {what} file '{path}' needs pyarrow: "
                               "pip install 'bartpy-suite[parquet]', or save the data as CSV") from exc
        try:
            frame = pd.read_parquet(p)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {what} file '{path}' as Parquet: {exc}") from exc
        session.rows = _RowSource(path, None, None, frame.index, csv_file=False)
        return frame
    try:
        frame = pd.read_csv(p, sep=sep if sep is not None else ",", encoding=encoding or "utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(_decode_message(p, what, encoding or "utf-8", explicit=encoding is not None,
                                           error=exc)) from exc
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError) as exc:
        hint = "" if sep is not None else _separator_hint(p, encoding)
        raise CommandError(f"cannot read {what} file '{path}' as CSV: {exc}{hint}") from exc
    if sep is None and frame.shape[1] == 1:
        header = str(frame.columns[0])
        for char, option in _OTHER_SEPARATORS.items():
            if char in header:
                raise CommandError(
                    f"the {what} file '{path}' was read as one column named {header[:60]!r}: its fields "
                    f"look separated by {char!r}, not commas; pass {option} (or --sep ',' if that one "
                    "column is what you mean)")
    session.rows = _RowSource(path, sep, encoding, frame.index, csv_file=True)
    return frame


def _separator_hint(path: Path, encoding: str | None) -> str:
    """' (the header holds ';': pass --sep ';')' when the header line suggests another delimiter."""
    try:
        with open(path, encoding=encoding or "utf-8", errors="replace", newline="") as handle:
            header = handle.readline()
    except OSError:
        return ""
    if "," in header:
        return ""
    for char, option in _OTHER_SEPARATORS.items():
        if char in header:
            return f" (the header line holds {char!r} and no comma: pass {option})"
    return ""


def _decode_message(path: Path, what: str, encoding: str, explicit: bool, error: UnicodeDecodeError) -> str:
    """Say where the first undecodable byte is (file line) and which option to use."""
    where = ""
    decoder = codecs.getincrementaldecoder(encoding)()
    line, offset = 1, 0
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                bad = chunk[max(exc.start, 0):max(exc.start, 0) + 1]
                line += chunk[:max(exc.start, 0)].count(b"\n")
                where = f" (byte 0x{bad.hex()} on line {line}, byte {offset + max(exc.start, 0)} of the file)"
                break
            line += chunk.count(b"\n")
            offset += len(chunk)
    base = f"cannot read {what} file '{path}' as CSV: it is not valid {encoding} text{where}"
    if explicit:
        return base + f"; pass the encoding the file was saved in with --encoding (not {encoding})"
    return (base + "; if it was saved as Latin-1 or Windows-1252 (e.g. by Excel), pass --encoding latin-1 "
            "(or --encoding cp1252)")


class _RowSource:
    """Turns the 0-based data rows named in messages into the input file's line numbers.

    The package's messages list rows as ``3 rows (index 0, 4, 7)``: labels of the DataFrame's
    index, which for a CSV read here are 0-based data rows. The file line of a data row is not
    always row + 2 (quoted fields may span lines; pandas skips blank lines), so the lines are
    counted with the csv module, only when a message needs them.
    """

    # "3 rows (index 0, 4, 7)", "12 rows (first index 0, 1, 2, 3, 4, ...)": formula/messages.py
    _ROWS = re.compile(r"\b(\d+) (rows?) \((first )?index ([^()]*)\)")

    def __init__(self, path: str, sep: str | None, encoding: str | None, index: pd.Index, csv_file: bool) -> None:
        self.path = path
        self.sep = "," if sep is None else sep
        self.encoding = encoding or "utf-8"
        self.csv_file = csv_file
        self.n_rows = len(index)
        self.range_index = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        self._lines: np.ndarray | None = None

    def lines(self) -> np.ndarray | None:
        """File line (1-based) of each data row, or None when they cannot be counted."""
        if self._lines is None and self.csv_file and len(self.sep) == 1:
            starts = []
            try:
                with open(self.path, encoding=self.encoding, newline="") as handle:
                    reader = csv.reader(handle, delimiter=self.sep)
                    previous = 0
                    for record in reader:
                        if record:  # pandas skips blank lines
                            starts.append(previous + 1)
                        previous = reader.line_num
            except (OSError, UnicodeDecodeError, csv.Error):
                return None
            # the first record is the header; pandas' and csv's parses must agree on the count
            if len(starts) == self.n_rows + 1:
                self._lines = np.asarray(starts[1:], dtype=np.int64)
        return self._lines

    def name_lines(self, text: str) -> str:
        if not self.range_index:
            return text  # a Parquet file's own index: its labels are what the user knows
        name = os.path.basename(self.path)

        def replace(match: re.Match) -> str:
            count, noun, first, labels = match.groups()
            items = [item.strip() for item in labels.split(",")]
            if not all(item.isdigit() or item == "..." for item in items):
                return match.group(0)
            lines = self.lines()
            if lines is not None and all(item == "..." or int(item) < len(lines) for item in items):
                shown = ", ".join(item if item == "..." else str(lines[int(item)]) for item in items)
                word = "line" if len([i for i in items if i != "..."]) == 1 else "lines"
                return f"{count} {noun} ({first or ''}{word} {shown} of {name})"
            if self.csv_file:  # lines not countable: say what the numbers are
                return (f"{count} {noun} ({first or ''}data rows {', '.join(items)} of {name}, counted from 0; "
                        "file line = row + 2 without blank or multi-line records)")
            return f"{count} {noun} ({first or ''}rows {', '.join(items)} of {name}, counted from 0)"

        return self._ROWS.sub(replace, text)


# --- output files -------------------------------------------------------------------------------

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _file_kind(path: Path) -> str:
    """What an existing file holds, from its first bytes: 'netcdf', 'parquet', 'binary', 'text'
    or 'empty'."""
    with open(path, "rb") as handle:
        head = handle.read(1024)
    if not head:
        return "empty"
    if head.startswith(_HDF5_SIGNATURE) or head[:4] in (b"CDF\x01", b"CDF\x02", b"CDF\x05"):
        return "netcdf"
    if head.startswith(b"PAR1"):
        return "parquet"
    if b"\x00" in head:
        return "binary"
    return "text"


_KIND_TEXT = {"netcdf": "a netCDF/HDF5 file (a saved fit?)", "parquet": "a Parquet file",
              "binary": "a binary file", "text": "a text file (CSV?)"}


def _output_target(path: str | None, writes: str, inputs: Sequence[tuple[str, Path]], force: bool) -> Path | None:
    """Check ``--out`` before any long computation.

    Parameters
    ----------
    path : str or None
        The ``--out`` argument.
    writes : {"fit", "csv"}
        What will be written there.
    inputs : sequence of (label, path)
        The command's input files: never to be replaced, with or without ``--force``.
    force : bool
        Replace an existing file of another kind.
    """
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise CommandError(f"output path is a directory: '{path}'")
    if not p.parent.is_dir():
        raise CommandError(f"directory of the output file does not exist: '{p.parent}'")
    if not os.access(p.parent, os.W_OK | os.X_OK):
        raise CommandError(f"cannot write in the directory of the output file: '{p.parent}' (permission denied)")
    for label, source in inputs:
        same = p.resolve() == source.resolve()
        if not same and p.exists():
            with contextlib.suppress(OSError):
                same = os.path.samefile(p, source)
        if same:
            raise CommandError(f"--out '{path}' is the {label} file '{source}' (the same file): writing there "
                               "would destroy the input; choose another --out path")
    if p.exists() and not force:
        kind = _file_kind(p)
        if writes == "fit" and kind not in ("netcdf", "empty"):
            raise CommandError(f"--out '{path}' exists and is {_KIND_TEXT[kind]}, not a netCDF fit: refusing to "
                               "replace it with a fit; choose another path, or pass --force to replace it")
        if writes == "csv" and kind in ("netcdf", "parquet", "binary"):
            raise CommandError(f"--out '{path}' exists and is {_KIND_TEXT[kind]}: refusing to replace it with a "
                               "CSV; choose another path, or pass --force to replace it")
    return p


@contextlib.contextmanager
def _atomic_output(target: Path) -> Iterator[Path]:
    """A temporary path in ``target``'s folder, renamed over ``target`` once written.

    On any error, including Ctrl-C, the temporary file is removed and ``target`` is as it was.
    The new file gets the mode of the file it replaces, or the umask's default for a new one
    (``mkstemp`` would leave 0600).
    """
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


# --- demo -----------------------------------------------------------------------------------------

DEMO_RHAT_WARN = 1.01  # the usual threshold of Vehtari et al. (2021)
DEMO_ESS_MIN = 400  # the bulk ESS the demo aims at (benchmarks/demo_mixing.py)


def demo_fit(seed: int = DEMO_SEED, draws: int = DEMO_DRAWS, tune: int = DEMO_TUNE, **keywords: Any):
    """The fit of ``python -m bartpy_suite demo``: Bayesian CART on the shipped CGM 1998 data.

    Parameters
    ----------
    seed, draws, tune : int
        As in :func:`bartpy_suite.cart`; the defaults are the demo's.
    **keywords
        Further keywords of :func:`bartpy_suite.cart` (e.g. ``progress``).

    Returns
    -------
    bartpy_suite.posterior.Fit
    """
    return bps.cart(DEMO_FORMULA, data=datasets.load("cgm1998"), sampler=DEMO_SAMPLER, chains=DEMO_CHAINS,
                    draws=draws, tune=tune, seed=seed, **DEMO_PRIOR, **keywords)


def _demo(args: argparse.Namespace, session: _Session) -> None:
    n_rows = len(datasets.load("cgm1998"))
    print(f"Bayesian CART, formula {DEMO_FORMULA!r}, on the shipped CGM 1998 example "
          f"({n_rows} rows; Chipman, George & McCulloch 1998).")
    print(f"Sampler {DEMO_SAMPLER!r} (parallel tempering of grow/prune/change/swap moves, 16 rungs), "
          f"{DEMO_CHAINS} chains x {args.draws} draws after {args.tune} tuning draws, seed {args.seed}; "
          f"tree prior alpha = {DEMO_PRIOR['alpha']}, beta = {DEMO_PRIOR['beta']}.\n")
    fit = demo_fit(args.seed, args.draws, args.tune, **_progress_kwargs(args))
    print("Posterior summary:")
    summary = fit.summary()
    print(_format_table(summary))
    worst, least = float(summary["r_hat"].max()), float(summary["ess_bulk"].min())
    if worst > DEMO_RHAT_WARN or least < DEMO_ESS_MIN:
        print(f"\nr_hat up to {worst:.3f}, bulk ESS down to {least:.0f} (the demo aims at r_hat <= "
              f"{DEMO_RHAT_WARN} and ESS >= {DEMO_ESS_MIN}): the chains have not mixed yet. With fewer draws "
              f"than the demo's default ({DEMO_DRAWS}) the tempered chains may not have crossed between the "
              "posterior's modes often enough (Gattiglio's thesis, sections 3.5 and 4); run more draws "
              "before trusting the intervals.")
    else:
        print(f"\nThe {DEMO_CHAINS} chains mix: r_hat at most {worst:.3f} (<= {DEMO_RHAT_WARN}), bulk ESS at "
              f"least {least:.0f} (>= {DEMO_ESS_MIN}).")

    levels = list(datasets.CGM1998_LEVELS)
    x1 = [1.5, 4.0, 6.0, 8.5]
    grid = pd.DataFrame({
        "x1": x1 * 2,
        "x2": pd.Categorical(["A"] * len(x1) + ["C"] * len(x1), categories=levels),
    })
    pred = fit.predict(grid, kind="mean", level=DEMO_LEVEL)
    table = pd.concat(
        [grid, pd.DataFrame({"f_true": datasets.f_cgm1998(grid["x1"], grid["x2"])}),
         pred.reset_index(drop=True)],
        axis=1,
    )
    print(f"\nPredictions of f(x1, x2) with {DEMO_LEVEL:.0%} credible intervals "
          "(f_true: the noiseless function of eq. 3.18):")
    print(_format_table(table))


# --- fit ------------------------------------------------------------------------------------------

def _fit(args: argparse.Namespace, session: _Session) -> None:
    data_path = _existing_file(args.data, "data")
    out = _output_target(args.out, "fit", [("data", data_path)], args.force)
    if args.model == "bcf":
        _fit_bcf(args, session, out)
        return
    for option, keyword in (("--treatment", "treatment"), ("--propensity", "propensity"),
                            ("--tau-formula", "tau_formula")):
        if getattr(args, keyword) is not None:
            raise CommandError(f"{option} applies to --model bcf only")
    # options that only some models take: which ones is read from their keywords, not listed here
    for option, keyword in (("--trees", "trees"), ("--sparse", "sparse"), ("--init", "init"),
                            ("--weights", "weights"), ("--offset", "offset"), ("--variance", "variance")):
        if getattr(args, keyword) is not None and keyword not in {p.name for p in
                                                                  MODELS[args.model].keyword_parameters()}:
            raise CommandError(f"{option} applies to --model {_models_taking(keyword)} only")
    # the run settings (sampler, chains, draws, ...) are checked by the models' one validation before the
    # data file is read, so that a bad --chains or --sampler-option does not wait for a large file
    run = {key: getattr(args, key) for key in RUN_KEYWORDS if getattr(args, key, None) is not None}
    if args.sampler_options:
        run["sampler_options"] = _parse_sampler_options(args.sampler_options)
    model = MODELS[args.model]
    settings, _ = check_run_settings(sampler_kind(model), run, model.run_defaults, owner=f"--model {args.model}")
    warm = _warm_start_keywords(args, settings.chains)
    if args.model != "bart" and re.match(r"\s*Surv\s*\(", args.formula):
        raise CommandError("a 'Surv(time, event) ~ ...' formula fits survival BART: add --model bart")
    data = _read_table(args.data, "data", args, session)
    if args.levels is not None:
        if args.model != "bart":
            raise CommandError("--levels makes the response ordered, which only ordinal BART uses: add --model bart "
                               f"(--model {args.model} would fit an unordered classification)")
        data = _ordered_response(data, args.formula, args.levels)
    kwargs: dict[str, Any] = {**run, **{key: getattr(args, key) for key in ("trees", "sparse", "weights", "offset",
                                                                            "variance")
                                        if getattr(args, key) is not None}}
    if args.na_action is not None:
        kwargs["na_action"] = args.na_action
    kwargs.update(warm)
    fit = MODELS[args.model].from_formula(args.formula, data, **kwargs)
    session.rows = None  # from here on, messages are not about the data file's rows
    with session.timed_stage(f"summarising {fit.posterior.sizes['chain']} chains x "
                             f"{fit.posterior.sizes['draw']} draws"):
        summary = fit.summary() if args.level is None else fit.summary(level=args.level)
    print(_format_table(summary), flush=True)
    if out is not None:
        with session.timed_stage(f"saving the fit to '{out}'"), _atomic_output(out) as tmp:
            try:
                fit.to_netcdf(tmp)
            except OSError as exc:
                raise CommandError(f"cannot write the fit to '{out}': {exc}") from exc
        print(f"{PROG}: saved the fit to '{out}'", file=sys.stderr)


def _fit_bcf(args: argparse.Namespace, session: _Session, out) -> None:
    """``fit --model bcf``: ``bps.bcf`` with the run options given; prints its summary (ATE, ATT, ATC, sigma)
    and saves the fit (``CausalFit.save``) with ``--out``."""
    if args.treatment is None:
        raise CommandError("--model bcf needs --treatment, the 0/1 treatment column")
    for option, keyword in (("--trees", "trees"), ("--sparse", "sparse"), ("--init", "init"),
                            ("--init-sweeps", "init_sweeps"), ("--levels", "levels"),
                            ("--sampler-option", "sampler_options"), ("--no-check-mixing", "check_mixing"),
                            ("--weights", "weights"), ("--offset", "offset"), ("--variance", "variance")):
        if getattr(args, keyword) is not None:
            raise CommandError(f"{option} does not apply to --model bcf (its trees are 200 mu and 50 tau, "
                               "as HMC20; set others from Python, bps.bcf)")
    kwargs: dict[str, Any] = {key: getattr(args, key) for key in ("sampler", "chains", "draws", "tune", "thin", "seed",
                                                                 "na_action", "propensity", "tau_formula")
                              if getattr(args, key) is not None}
    kwargs.update(_progress_kwargs(args))
    data = _read_table(args.data, "data", args, session)
    fit = bps.bcf(args.formula, data, treatment=args.treatment, **kwargs)
    session.rows = None
    summary = fit.summary() if args.level is None else fit.summary(level=args.level)
    print(_format_table(summary), flush=True)
    if out is not None:
        with session.timed_stage(f"saving the fit to '{out}'"), _atomic_output(out) as tmp:
            try:
                fit.save(tmp)
            except OSError as exc:
                raise CommandError(f"cannot write the fit to '{out}': {exc}") from exc
        print(f"{PROG}: saved the fit to '{out}'", file=sys.stderr)


def _warm_start_keywords(args: argparse.Namespace, chains: int) -> dict[str, Any]:
    """``init`` / ``init_options`` from ``--init`` and ``--init-sweeps``, checked before the data are read."""
    init = None if args.init == "none" else args.init
    if args.init_sweeps is None:
        return {} if args.init is None else {"init": init}
    if init is None or init == "auto":
        raise CommandError("--init-sweeps sets the number of GFR sweeps of the warm start: add --init gfr, or leave "
                           "--init-sweeps out")
    if args.init_sweeps < chains:
        raise CommandError(f"--init-sweeps {args.init_sweeps} is fewer than the {chains} chains: each chain starts "
                           f"from a different GFR sweep; give --init-sweeps {chains} or more")
    return {"init": init, "init_options": {"sweeps": args.init_sweeps}}


def _ordered_response(data: pd.DataFrame, formula: str, levels: str) -> pd.DataFrame:
    """A copy of ``data`` whose response column (the formula's left side, a column name) is an
    ordered categorical with the ``--levels`` classes in their order; values are matched as text."""
    order = [v.strip() for v in levels.split(",")]
    if len(order) < 2 or any(not v for v in order) or len(set(order)) != len(order):
        raise CommandError(f"--levels takes two or more distinct comma-separated classes, got {levels!r}")
    name = formula.split("~", 1)[0].strip().strip("`")
    if name not in data.columns:
        raise CommandError(f"--levels needs the response to be a column of the data; {name!r} is not one")
    column = data[name]
    text = column.where(column.isna(), column.astype(str))
    unknown = sorted(set(text.dropna()) - set(order))
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (", ..." if len(unknown) > 5 else "")
        raise CommandError(f"the response {name!r} holds {shown}, not among --levels {','.join(order)}")
    return data.assign(**{name: pd.Categorical(text, categories=order, ordered=True)})


def _parse_sampler_options(items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` to a dict; values are JSON where they parse, else strings."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CommandError(f"--sampler-option takes KEY=VALUE, got {item!r}")
        if key in options:
            raise CommandError(f"--sampler-option {key!r} is given twice")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


# --- predict --------------------------------------------------------------------------------------

def _prediction_kind(kind: str | None, fit) -> str:
    """The --kind to use for ``fit``; an error naming the kinds that apply when it does not."""
    if fit.config.get("survival"):
        applies, what = SURVIVAL_KINDS, "a survival fit (Surv(time, event) response)"
    elif fit.is_classification:
        applies, what = CLASSIFICATION_KINDS, "a classification fit (categorical response)"
    else:
        applies, what = REGRESSION_KINDS, "a regression fit (numeric response)"
    if kind is None:
        return applies[0]
    if kind not in applies:
        raise CommandError(f"--kind {kind} does not apply to this fit: it is {what}, whose kinds are "
                           f"{', '.join(applies[:-1])} and {applies[-1]}")
    return kind


def _predict(args: argparse.Namespace, session: _Session) -> None:
    fit_path = _existing_file(args.fit, "fit")
    newdata_path = _existing_file(args.newdata, "new data")
    out = _output_target(args.out, "csv", [("fit", fit_path), ("new data", newdata_path)], args.force)
    try:
        fit = bps.load(str(fit_path), log_likelihood=False)  # predictions do not need it
    except BartpySuiteError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"cannot read fit file '{args.fit}': {exc}") from exc
    if isinstance(fit, bps.CausalFit):  # a bcf fit: the CATE per row (and E[y] where the treatment is given)
        newdata = _read_table(args.newdata, "new data", args, session)
        level = {} if args.level is None else {"level": args.level}
        pred = fit.cate(newdata, **level).add_prefix("cate_")
        if fit.treatment in newdata.columns:
            pred = fit.predict(newdata, **level).join(pred)
        _write_predictions(pred, out)
        return
    kind = _prediction_kind(args.kind, fit)
    newdata = _read_table(args.newdata, "new data", args, session)
    kwargs: dict[str, Any] = {"kind": kind}
    for key in ("level", "times", "na_action"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    pred = fit.predict(newdata, **kwargs)
    _write_predictions(pred, out)


def _write_predictions(pred: pd.DataFrame, out) -> None:
    """The predictions as CSV to standard output or (atomically) to ``out``."""
    if out is None:
        pred.to_csv(sys.stdout, index=False, lineterminator="\n")
        return
    with _atomic_output(out) as tmp:
        try:
            pred.to_csv(tmp, index=False, lineterminator="\n")
        except OSError as exc:
            raise CommandError(f"cannot write predictions to '{out}': {exc}") from exc


# --- shap -----------------------------------------------------------------------------------------

#: Default credible level of ``shap`` (that of :meth:`Fit.shap_summary`).
SHAP_LEVEL = 0.9


def _add_shap_parser(commands) -> None:
    shap = commands.add_parser(
        "shap",
        help="explain rows with a saved fit: SHAP values with intervals; writes CSV",
        description=(
            "Explain the rows of a CSV file with a fit saved by 'fit --out': for each row and predictor, "
            "the posterior mean SHAP value (exact path-dependent TreeSHAP of every kept draw: base + the "
            "values of a row = that draw's f(x)) and its equal-tailed credible interval. Writes a CSV with "
            "one row per input row, in order: shap_<predictor>_mean, shap_<predictor>_lower, "
            "shap_<predictor>_upper per predictor (a factor is one predictor) and base, the posterior mean "
            "of the base value (the mean prediction over the training rows); fits with one explanation "
            "per class (classification CART, multinomial BART) name the columns shap_<predictor>_<class>_... "
            "and base_<class>. Regression fits are explained on the response scale, probit BART on the "
            "latent probit scale, ordinal BART on its latent cumulative-probit scale, multinomial BART on "
            "each class's log-linear scale, classification CART "
            "on each class's probability (a note on standard error says which)."
        ),
        epilog=EXIT_CODES_EPILOG,
    )
    shap.add_argument("fit", help="netCDF file written by 'fit --out'")
    shap.add_argument("data", help="CSV or Parquet file with the predictor columns of the rows to explain")
    shap.add_argument("--level", type=float,
                      help=f"credible level of the intervals (default {SHAP_LEVEL}, as fit.shap_summary)")
    shap.add_argument("--max-draws", dest="max_draws", type=int, metavar="N",
                      help="use N evenly spaced draws per chain (default: every kept draw); fewer is faster")
    _add_csv_options(shap)
    shap.add_argument("--out", help="write the CSV here instead of standard output; never one of the inputs")
    _add_force(shap, "a CSV")


def shap_table(fit, data: pd.DataFrame, level: float = SHAP_LEVEL, max_draws: int | None = None) -> tuple[
        pd.DataFrame, str]:
    """The table ``python -m bartpy_suite shap`` writes: one row per row of ``data``, in order.

    Parameters
    ----------
    fit : bartpy_suite.posterior.Fit
        A hard-tree fit, or a soft tree fitted with ``sampler="hmc_df"``; not a survival fit.
    data : pandas.DataFrame
        The rows to explain (the fit's predictor columns; others are ignored).
    level : float
        Probability of the equal-tailed credible intervals.
    max_draws : int or None
        Draws per chain, evenly spaced (None: all).

    Returns
    -------
    (pandas.DataFrame, str)
        Columns ``shap_<predictor>[_<class>]_{mean,lower,upper}`` in the fit's predictor order and
        ``base[_<class>]`` (the posterior mean base value, the same on every row), indexed like
        ``data``; and the scale the values add up to (:meth:`Fit.shap`).

    Raises
    ------
    CommandError
        For a survival fit.
    """
    from bartpy_suite.posterior import shap as posterior_shap

    _refuse_survival(fit)
    summary = fit.shap_summary(data, level=level, max_draws=max_draws)
    rows = summary.rows
    labels = list(dict.fromkeys(rows["class"])) if "class" in rows.columns else [None]
    # summary.rows is row-major: each explained row, then its predictors, then their classes
    shape = (len(data), len(fit.predictors), len(labels))
    stats = {stat: rows[stat].to_numpy().reshape(shape) for stat in ("mean", "lower", "upper")}
    columns = {}
    for v, predictor in enumerate(fit.predictors):
        for k, label in enumerate(labels):
            stem = f"shap_{predictor}" + ("" if label is None else f"_{label}")
            for stat in ("mean", "lower", "upper"):
                columns[f"{stem}_{stat}"] = stats[stat][:, v, k]
    table = pd.DataFrame(columns, index=data.index)
    # The base value does not depend on the rows: one row's explanation gives it, for the same draws.
    explained = fit.shap(data.iloc[:1], max_draws=max_draws)
    draws = posterior_shap.draw_indices(fit, max_draws)
    w = fit.weights.isel(draw=draws)
    base = (explained["base"] * w).sum(("chain", "draw")) / w.sum()
    if labels == [None]:
        table["base"] = float(base)
    else:
        for label in labels:
            table[f"base_{label}"] = float(base.sel({"class": label}))
    return table, summary.scale


def _refuse_survival(fit) -> None:
    if fit.config.get("survival"):
        raise CommandError("shap does not explain survival fits from the command line: their trees model the "
                           "hazard of person-period rows (time x covariates), not one value per row; in Python, "
                           "fit.importance() ranks the covariates on the latent hazard scale")


_SCALE_TEXT = {
    "response": "on the response scale: base + the values of a row = f(x), the mean response",
    "probit latent": "on the latent probit scale: base + the values of a row = f(x), and P(second class) = Phi(f(x))",
    "log-linear": "on each class's log-linear scale F_k(x), P(class k) = exp(F_k) / sum of exp(F_l)",
    "probability": "on each class's probability scale",
}


#: ordinal BART's values are on the latent probit scale too, but its classes come from the cutpoints
_ORDINAL_SCALE_TEXT = ("on the latent cumulative-probit scale: base + the values of a row = eta(x), "
                       "P(y <= class k) = Phi(c_k - eta(x)) with the fit's cutpoints 0 = c_1 < c_2 < ... "
                       "(posterior variable cutpoints), so P(above the first class) = Phi(eta(x))")


def _shap(args: argparse.Namespace, session: _Session) -> None:
    fit_path = _existing_file(args.fit, "fit")
    data_path = _existing_file(args.data, "data")
    out = _output_target(args.out, "csv", [("fit", fit_path), ("data", data_path)], args.force)
    if args.max_draws is not None and args.max_draws < 1:
        raise CommandError(f"--max-draws must be at least 1 (draws per chain); got {args.max_draws}")
    if args.level is not None and not 0 < args.level < 1:
        raise CommandError(f"--level must be between 0 and 1 (e.g. 0.9); got {args.level}")
    try:
        fit = bps.load(str(fit_path), log_likelihood=False)  # explanations do not need it
    except BartpySuiteError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"cannot read fit file '{args.fit}': {exc}") from exc
    _refuse_survival(fit)  # before the data are read
    data = _read_table(args.data, "data", args, session)
    if len(data) == 0:
        raise CommandError(f"the data file '{args.data}' has no rows to explain")
    with session.timed_stage(f"explaining {len(data)} rows"):
        table, scale = shap_table(fit, data, level=SHAP_LEVEL if args.level is None else args.level,
                                  max_draws=args.max_draws)
    text = _ORDINAL_SCALE_TEXT if fit.config.get("leaf_model") == "ordinal" else _SCALE_TEXT.get(scale, scale)
    print(f"{PROG}: SHAP values {text}", file=sys.stderr)
    if out is None:
        table.to_csv(sys.stdout, index=False, lineterminator="\n")
        return
    with _atomic_output(out) as tmp:
        try:
            table.to_csv(tmp, index=False, lineterminator="\n")
        except OSError as exc:
            raise CommandError(f"cannot write SHAP values to '{out}': {exc}") from exc
