"""One exception hierarchy for bartpy_suite.

Imports nothing from the package. Every error a user can trigger with bad input is a
``BartpySuiteError``; the subclasses also derive from the matching builtin so that
``except ValueError`` keeps working for callers who do not know this package.
"""

from __future__ import annotations


class BartpySuiteError(Exception):
    """Base class of every error raised on purpose by bartpy_suite."""


class FormulaError(BartpySuiteError, ValueError):
    """The formula cannot be applied to the data (missing column, bad term, ...)."""


class DataError(BartpySuiteError, ValueError):
    """The data are unusable as given (empty, inf, NaN under ``na_action='raise'``, ...)."""


class ArgumentError(BartpySuiteError, ValueError):
    """A keyword argument has an invalid value; the message names it and the valid range."""


class FitFileError(BartpySuiteError, ValueError):
    """A saved fit cannot be used: the file is truncated, not a netCDF file written by
    ``Fit.to_netcdf``, or one of its arrays or attributes is damaged or edited (the message names
    the file, the first bad array and what is wrong with it)."""


class NotFittedError(BartpySuiteError, RuntimeError):
    """A model was used before ``fit`` was called."""


class BartpySuiteWarning(UserWarning):
    """Base class of warnings issued by bartpy_suite (dropped rows, constant columns, ...)."""


class MixingWarning(BartpySuiteWarning):
    """The chains of a fit have not mixed on what users consume: f(x) at the monitored training
    rows, class probabilities or sigma (``bartpy_suite.posterior.mixing`` gives the grades).

    Silence it with the model keyword ``check_mixing=False`` or
    ``warnings.filterwarnings("ignore", category=bartpy_suite.MixingWarning)``.
    """


class StrongMixingWarning(MixingWarning):
    """The chains of a fit disagree about what users consume (f(x) at the monitored training
    rows, class probabilities or sigma: r_hat > 1.2 or bulk ESS < 5 per chain): do not use the
    predictions yet. A ``MixingWarning``, so the same filter and ``check_mixing=False`` silence it.
    """
