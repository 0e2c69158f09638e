"""Command-line interface: ``python -m bartpy_suite {demo,fit,predict}``.

``demo``
    Fit Bayesian CART to the shipped CGM 1998 example and print the summary table and
    predictions with 90% credible intervals on a small grid of new points.
``fit FORMULA DATA.csv``
    Fit ``--model cart`` (default) or ``--model bart`` to a CSV file (or a Parquet file,
    ``.parquet``/``.pq``, when pyarrow is installed), print the summary and, with
    ``--out fit.nc``, save the fit (netCDF) for ``predict``. A progress bar is shown on a
    terminal (``--no-progress`` hides it); warnings, such as the post-fit mixing check's, are
    printed as ``bartpy_suite: warning: ...``. ``--model bart`` with ``'Surv(time, event) ~ ...'``
    fits survival BART.
``predict FIT.nc NEW.csv``
    Predict new rows from a saved fit; writes a CSV (``--out`` or standard output) with the
    columns of :meth:`Fit.predict`, one row per row of ``NEW.csv``, in order (a survival fit:
    ``--kind survival|hazard|cumhaz|median|rmst`` and ``--times T ...``).

Errors a user can cause (missing files, unreadable CSV, bad formula or arguments) print
``bartpy_suite: error: ...`` on standard error and exit with status 2, without a traceback.

Imports: the public package front door (:mod:`bartpy_suite`), :mod:`bartpy_suite.datasets`,
:mod:`bartpy_suite.errors`, pandas and the standard library. Top of the layer stack: nothing
in the package imports this module.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

import bartpy_suite as bps
from bartpy_suite import datasets
from bartpy_suite.errors import BartpySuiteError
from bartpy_suite.models import MODELS
from bartpy_suite.samplers import SAMPLERS

__all__ = ["main", "build_parser"]

PROG = "bartpy_suite"

#: Settings of ``demo``: small enough to finish in well under 30 seconds.
DEMO_CHAINS = 2
DEMO_DRAWS = 2000
DEMO_TUNE = 1000
DEMO_SEED = 1
DEMO_LEVEL = 0.9


class CommandError(Exception):
    """A problem with the command line's files or options; reported without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``python -m bartpy_suite``.

    Returns
    -------
    argparse.ArgumentParser
        The parser, with the sub-commands ``demo``, ``fit`` and ``predict``.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bayesian tree models (CART, BART) with an R-style formula front-end.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {bps.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="fit Bayesian CART to the shipped CGM 1998 data and print a summary",
        description=(
            "Fit bps.cart('y ~ x1 + x2') with the 'cgm' sampler to the shipped CGM 1998 example "
            "(thesis eq. 3.18), print the summary and predictions with 90%% credible intervals."
        ),
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
            "Options left out take the defaults of bps.cart / bps.bart."
        ),
    )
    fit.add_argument("formula", help="model formula, e.g. 'y ~ .' or 'y ~ x1 + C(g)'")
    fit.add_argument("data", help="CSV file with a header row, or a Parquet file (.parquet, .pq; needs pyarrow)")
    fit.add_argument("--model", choices=tuple(MODELS), default="cart",
                     help="the model (default cart): " + "; ".join(
                         f"{name}: {cls.__doc__.splitlines()[0].rstrip('.')}" for name, cls in MODELS.items()))
    fit.add_argument("--sampler", help="sampler name (default: the model's): " + ", ".join(SAMPLERS))
    fit.add_argument("--sampler-option", dest="sampler_options", action="append", metavar="KEY=VALUE",
                     help="a sampler setting (repeatable); VALUE is read as JSON where it parses "
                          "(numbers, true/false, {...}), else as text, e.g. "
                          "--sampler-option 'moves={\"grow\": 0.5, \"prune\": 0.5}'")
    fit.add_argument("--chains", type=int, help="number of chains")
    fit.add_argument("--draws", type=int, help="draws kept per chain")
    fit.add_argument("--tune", type=int, help="draws discarded per chain")
    fit.add_argument("--seed", type=int, help="random seed")
    fit.add_argument("--trees", type=int, help="number of trees (--model bart only)")
    fit.add_argument("--level", type=float, help="credible level of the summary intervals")
    fit.add_argument("--na-action", dest="na_action", choices=("drop", "raise", "split"),
                     help="rows with missing values: drop them with a warning (default), raise an error, or "
                          "split: keep missing predictor values, each split rule sending them left or right "
                          "(new data at 'predict' may then hold missing values too)")
    fit.add_argument("--out", help="save the fit to this netCDF file (for 'predict')")
    _add_progress(fit)

    predict = commands.add_parser(
        "predict",
        help="predict new rows from a saved fit; writes CSV",
        description=(
            "Predict the rows of a CSV file with a fit saved by 'fit --out'. Writes a CSV with "
            "one row per input row: mean, lower, upper (kind mean or predictive), or "
            "prob_<label> columns and class (kind prob)."
        ),
    )
    predict.add_argument("fit", help="netCDF file written by 'fit --out'")
    predict.add_argument("newdata", help="CSV or Parquet file with the predictor columns")
    predict.add_argument("--kind", choices=("mean", "predictive", "prob", "survival", "hazard", "cumhaz", "median",
                                                   "rmst"),
                         help="mean: interval of f(x) (default); predictive: interval of a new "
                              "y; prob: class probabilities (classification); survival, hazard, cumhaz, "
                              "median, rmst: a survival fit's S(t | x), discrete hazard, -log S, median survival "
                              "time or restricted mean survival time up to t (a survival fit's default is survival)")
    predict.add_argument("--times", type=float, nargs="+", metavar="T",
                         help="survival fits: the times t of S(t | x), hazard or cumhaz (default: the fit's grid)")
    predict.add_argument("--level", type=float, help="credible level of the intervals (default 0.95)")
    predict.add_argument("--out", help="write the CSV here instead of standard output")
    return parser


def _add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                        help="do not show a progress bar")


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
        error, no traceback), 130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return int(exc.code) if isinstance(exc.code, int) else 2
    handlers = {"demo": _demo, "fit": _fit, "predict": _predict}
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            handlers[args.command](args)
        except (CommandError, BartpySuiteError) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
    return 0


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr if file is None else file)


def _progress_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.progress is None else {"progress": args.progress}


def _format_table(df: pd.DataFrame) -> str:
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.max_rows", None, "display.precision", 3):
        return df.to_string()


def _existing_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CommandError(f"{what} file not found: '{path}'")
    if not p.is_file():
        raise CommandError(f"{what} path is not a file: '{path}'")
    return p


def _writable_target(path: str | None, what: str) -> Path | None:
    """Check before any long computation that ``path``'s directory exists."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise CommandError(f"{what} path is a directory: '{path}'")
    if not p.parent.is_dir():
        raise CommandError(f"directory of the {what} file does not exist: '{p.parent}'")
    return p


PARQUET_SUFFIXES = (".parquet", ".pq")


def _read_csv(path: str, what: str) -> pd.DataFrame:
    """Read a data file: Parquet when its name ends in .parquet or .pq (needs pyarrow), else CSV."""
    p = _existing_file(path, what)
    if p.suffix.lower() in PARQUET_SUFFIXES:
        try:
            import pyarrow  # noqa: F401  (pandas' Parquet engine; an extra)
        except ImportError as exc:
            raise CommandError(f"reading the Parquet {what} file '{path}' needs pyarrow: "
                               "pip install 'bartpy-suite[parquet]', or save the data as CSV") from exc
        try:
            return pd.read_parquet(p)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {what} file '{path}' as Parquet: {exc}") from exc
    try:
        return pd.read_csv(p)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise CommandError(f"cannot read {what} file '{path}' as CSV: {exc}") from exc


DEMO_RHAT_WARN = 1.01  # the usual threshold of Vehtari et al. (2021)


def _demo(args: argparse.Namespace) -> None:
    df = datasets.load("cgm1998")
    formula = "y ~ x1 + x2"
    print(f"Bayesian CART, formula {formula!r}, on the shipped CGM 1998 example "
          f"({len(df)} rows; Chipman, George & McCulloch 1998).")
    print(f"Sampler 'cgm', {DEMO_CHAINS} chains x {args.draws} draws after {args.tune} tuning "
          f"draws, seed {args.seed}.\n")
    fit = bps.cart(formula, data=df, sampler="cgm", chains=DEMO_CHAINS, draws=args.draws,
                   tune=args.tune, seed=args.seed, **_progress_kwargs(args))
    print("Posterior summary:")
    summary = fit.summary()
    print(_format_table(summary))
    worst = summary["r_hat"].max()
    if worst > DEMO_RHAT_WARN:
        print(f"\nr_hat up to {worst:.3f} (> {DEMO_RHAT_WARN}): the chains disagree. Grow/prune/change/swap "
              "Metropolis-Hastings is known to stay in local modes of this posterior for long "
              "(Gattiglio's thesis, section 3.5); compare several seeds or run more chains before "
              "trusting the intervals.")

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


def _fit(args: argparse.Namespace) -> None:
    out = _writable_target(args.out, "output")
    if args.trees is not None and "trees" not in {p.name for p in MODELS[args.model].keyword_parameters()}:
        with_trees = [name for name, cls in MODELS.items() if "trees" in {p.name for p in cls.keyword_parameters()}]
        raise CommandError(f"--trees applies to --model {' or '.join(with_trees)} only")
    if args.model != "bart" and re.match(r"\s*Surv\s*\(", args.formula):
        raise CommandError("a 'Surv(time, event) ~ ...' formula fits survival BART: add --model bart")
    data = _read_csv(args.data, "data")
    kwargs: dict[str, Any] = {
        key: getattr(args, key)
        for key in ("sampler", "chains", "draws", "tune", "seed", "trees")
        if getattr(args, key) is not None
    }
    kwargs.update(_progress_kwargs(args))
    if args.sampler_options:
        kwargs["sampler_options"] = _parse_sampler_options(args.sampler_options)
    if args.na_action is not None:
        kwargs["na_action"] = args.na_action
    fit = MODELS[args.model].from_formula(args.formula, data, **kwargs)
    summary = fit.summary() if args.level is None else fit.summary(level=args.level)
    print(_format_table(summary))
    if out is not None:
        try:
            fit.to_netcdf(out)
        except OSError as exc:
            raise CommandError(f"cannot write the fit to '{out}': {exc}") from exc
        print(f"{PROG}: saved the fit to '{out}'", file=sys.stderr)


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


def _predict(args: argparse.Namespace) -> None:
    out = _writable_target(args.out, "output")
    fit_path = _existing_file(args.fit, "fit")
    newdata = _read_csv(args.newdata, "new data")
    try:
        fit = bps.load(str(fit_path))
    except BartpySuiteError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"cannot read fit file '{args.fit}': {exc}") from exc
    kwargs: dict[str, Any] = {
        key: getattr(args, key) for key in ("kind", "level", "times") if getattr(args, key) is not None
    }
    pred = fit.predict(newdata, **kwargs)
    if out is None:
        pred.to_csv(sys.stdout, index=False, lineterminator="\n")
    else:
        try:
            pred.to_csv(out, index=False, lineterminator="\n")
        except OSError as exc:
            raise CommandError(f"cannot write predictions to '{out}': {exc}") from exc
