"""Argument checks whose error messages name the argument, the value and the valid range.

Import rule: this module imports the standard library and :mod:`bartpy_suite.errors` only
(no numpy, pandas or other package modules), so every layer may use it.

Every checker returns the validated value in a canonical Python type (``float``, ``int``,
``str`` or ``dict``) and raises :class:`~bartpy_suite.errors.ArgumentError` otherwise. The
messages have the form ``"<name> must be <requirement>, got <value>"`` plus a hint where
one helps (close option names, the valid move names, ...).
"""

from __future__ import annotations

import difflib
import enum
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from bartpy_suite.errors import ArgumentError

__all__ = [
    "check_positive",
    "check_nonnegative",
    "check_open_unit",
    "check_int_at_least",
    "check_choice",
    "check_bool",
    "check_seed",
    "check_moves",
    "check_na_action",
    "NaAction",
    "suggest",
]


class NaAction(enum.StrEnum):
    """What a fit does with missing values (``na_action``), one type from the API to the saved file.

    A ``str`` enum: each member equals its value (``NaAction.DROP == "drop"``), so the strings
    users pass, the choices of the command line and the value a fit's configuration stores
    (``fit.config["na_action"]``, also read back from files written before this type existed) are
    the same three strings.

    Attributes
    ----------
    DROP
        Rows with a missing value are dropped, with a warning (R's ``na.omit``).
    RAISE
        A missing value is an error naming where it is.
    SPLIT
        Missing predictor values stay; every split rule carries a missing-goes-left/right bit
        sampled with the rule (MIA; Kapelner & Bleich 2015), also used at predict time.
    """

    DROP = "drop"
    RAISE = "raise"
    SPLIT = "split"


def check_na_action(value: object, allowed: Iterable[NaAction] = tuple(NaAction), *,
                    name: str = "na_action") -> NaAction:
    """The ``NaAction`` a user's ``na_action`` (a string or a member) names.

    Parameters
    ----------
    value : str or NaAction
        ``"drop"``, ``"raise"`` or ``"split"`` (or the member).
    allowed : iterable of NaAction
        The values the caller supports (all three by default).
    name : str
        Argument name used in the error message.

    Returns
    -------
    NaAction

    Raises
    ------
    ArgumentError
        For another value (R's ``"omit"``/``"na.omit"`` gets a pointer to ``"drop"``, a near miss
        a suggestion), or a value the caller does not support.
    """
    options = [str(a) for a in NaAction]
    if isinstance(value, str) and value in options:
        action = NaAction(value)
        allowed = tuple(allowed)
        if action not in allowed:
            raise ArgumentError(f"{name}={str(action)!r} is not available here; valid options: "
                                + ", ".join(repr(str(a)) for a in allowed))
        return action
    message = (
        f"unknown {name} {value!r}; valid options: 'drop' (drop rows with missing "
        "values and warn, like R's na.omit), 'split' (keep missing predictor values: each split "
        "rule sends them left or right) or 'raise'"
    )
    if isinstance(value, str):
        if value.lower().replace("na.", "") in ("omit", "exclude"):
            message += "; use 'drop' for R's na.omit"
        else:
            close = suggest(value, options)
            if close:
                message += f" (did you mean {' or '.join(repr(c) for c in close)}?)"
    raise ArgumentError(message)


def _show(value: object) -> str:
    """Short ``repr`` of a value with its type when that is not obvious."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if isinstance(value, (bool, int, float, str)) or value is None:
        return text
    return f"{text} (type {type(value).__name__})"


def _as_real(name: str, value: object, requirement: str) -> float:
    """Convert ``value`` to a finite float or raise naming ``name`` and ``requirement``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        # numpy scalars register as numbers.Real; strings, None, arrays do not.
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)}")
    out = float(value)
    if not math.isfinite(out):
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)}")
    return out


def suggest(word: str, options: Iterable[str], n: int = 3) -> list[str]:
    """Return the options closest to ``word`` (case-insensitive), best first.

    Parameters
    ----------
    word : str
        The misspelt name.
    options : iterable of str
        The valid names.
    n : int, default 3
        Maximum number of suggestions.

    Returns
    -------
    list of str
        Up to ``n`` options, exact case-insensitive matches first, then difflib's
        close matches (cutoff 0.6).
    """
    options = [str(o) for o in options]
    lower: dict[str, list[str]] = {}
    for option in options:
        lower.setdefault(option.lower(), []).append(option)
    found: list[str] = list(lower.get(str(word).lower(), []))
    for match in difflib.get_close_matches(str(word).lower(), list(lower), n=n, cutoff=0.6):
        for option in lower[match]:
            if option not in found:
                found.append(option)
    return found[:n]


# The three real-number checkers share all of their docstring but the summary and what is refused.
_REAL_CHECK_DOC = """{summary}

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    value : object
        The value to check (bools are rejected).

    Returns
    -------
    float
        ``float(value)``.

    Raises
    ------
    ArgumentError
        If ``value`` {refused}.
    """

_Checker = TypeVar("_Checker", bound=Callable[[str, object], float])


def _real_check_doc(summary: str, refused: str) -> Callable[[_Checker], _Checker]:
    """Give a real-number checker the numpydoc docstring ``_REAL_CHECK_DOC`` with its own two lines."""

    def document(checker: _Checker) -> _Checker:
        checker.__doc__ = _REAL_CHECK_DOC.format(summary=summary, refused=refused)
        return checker

    return document


def _check_real_in(name: str, value: object, requirement: str, inside: Callable[[float], bool],
                   bound: str = "") -> float:
    """``float(value)`` if it is a finite real number for which ``inside`` holds.

    ``requirement`` names the valid values in both messages (not a finite number / outside);
    ``bound`` (e.g. ``" (> 0)"``) is added to the second one only.
    """
    out = _as_real(name, value, requirement)
    if not inside(out):
        raise ArgumentError(f"{name} must be {requirement}{bound}, got {_show(value)}")
    return out


@_real_check_doc("Check that ``value`` is a finite real number > 0.",
                 "is not a finite number or is <= 0")
def check_positive(name: str, value: object) -> float:
    return _check_real_in(name, value, "a positive finite number", lambda v: v > 0, " (> 0)")


@_real_check_doc("Check that ``value`` is a finite real number >= 0.",
                 "is not a finite number or is < 0")
def check_nonnegative(name: str, value: object) -> float:
    return _check_real_in(name, value, "a non-negative finite number", lambda v: v >= 0, " (>= 0)")


@_real_check_doc("Check that ``value`` lies strictly between 0 and 1 (e.g. ``alpha``, a credible level).",
                 "is not a number in the open interval (0, 1)")
def check_open_unit(name: str, value: object) -> float:
    return _check_real_in(name, value, "a number in the open interval (0, 1)", lambda v: 0.0 < v < 1.0)


def check_int_at_least(name: str, value: object, low: int) -> int:
    """Check that ``value`` is an integer >= ``low``.

    Floats with an integral value (``1e3``) are accepted and converted; ``2.5``, bools,
    strings and ``None`` are rejected.

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    value : object
        The value to check.
    low : int
        Smallest valid value.

    Returns
    -------
    int
        ``int(value)``.

    Raises
    ------
    ArgumentError
        If ``value`` is not an integer or is smaller than ``low``.
    """
    requirement = f"an integer >= {low}"
    if isinstance(value, bool):
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)}")
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(
        value
    ).is_integer():
        out = int(float(value))
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)):
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)} (not a whole number)")
    else:
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)}")
    if out < low:
        raise ArgumentError(f"{name} must be {requirement}, got {_show(value)}")
    return out


def check_bool(name: str, value: object) -> bool:
    """Check that ``value`` is a bool (Python or numpy); return it as ``bool``.

    Only real booleans pass: a string such as ``"False"`` is truthy, so accepting it would
    silently switch the option on; ``1``/``0`` and ``None`` are refused for the same reason
    (say what you mean).

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    value : object
        The value to check.

    Returns
    -------
    bool
        ``bool(value)``.

    Raises
    ------
    ArgumentError
        If ``value`` is anything else (``"yes"``, ``"False"``, ``1``, ``None``).
    """
    kind = type(value)
    # numpy's bool scalar is ``numpy.bool_`` (numpy 1) or ``numpy.bool`` (numpy 2); matched by
    # module and name because this module must not import numpy.
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")):
        return bool(value)
    hint = ""
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
        meant = value.strip().lower() in ("true", "yes", "1")
        hint = f" (the string {value!r} is not a bool: write {meant} without quotes)"
    raise ArgumentError(f"{name} must be True or False, got {_show(value)}{hint}")


def check_seed(name: str, value: object):
    """Check a random seed: None, an integer >= 0 or a ``numpy.random.SeedSequence``.

    Returns
    -------
    None, int or SeedSequence
        ``value`` (integers as ``int``).

    Raises
    ------
    ArgumentError
        For anything else (``"abc"``, ``1.5``, negative integers, a ``Generator``).
    """
    if value is None or hasattr(value, "spawn_key"):  # SeedSequence, duck-typed: no numpy here
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    raise ArgumentError(
        f"{name} must be None, an integer >= 0 or a numpy.random.SeedSequence, got {_show(value)}; "
        "e.g. seed=1 (the same seed gives the same draws)"
    )


def check_choice(name: str, value: object, options: Iterable[str]) -> str:
    """Check that ``value`` is one of ``options`` (exact, case-sensitive match).

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    value : object
        The value to check.
    options : iterable of str
        The valid values, listed in the message in the given order.

    Returns
    -------
    str
        ``value``.

    Raises
    ------
    ArgumentError
        If ``value`` is not among ``options``; the message lists the options and suggests
        close ones.
    """
    options = list(options)
    if isinstance(value, str) and value in options:
        return value
    valid = ", ".join(repr(o) for o in options)
    message = f"unknown {name} {_show(value)}; valid options: {valid}"
    if isinstance(value, str):
        close = suggest(value, options)
        if close:
            message += ". Did you mean " + " or ".join(repr(c) for c in close) + "?"
    raise ArgumentError(message)


def check_moves(
    moves: Mapping[str, object] | None,
    valid: Mapping[str, float],
    *,
    paired: Iterable[tuple[str, str]] = (),
    required: Iterable[str] = (),
    name: str = "moves",
) -> dict[str, float]:
    """Validate and normalise a dictionary of move probabilities.

    Parameters
    ----------
    moves : mapping of str to number, or None
        Relative weights of the proposal moves given by the user, e.g.
        ``{"grow": 1, "prune": 1}``. Moves that are not listed get weight 0. ``None``
        means the defaults ``valid``.
    valid : mapping of str to float
        The valid move names with their default weights (also used for ``moves=None``).
    paired : iterable of (str, str), optional
        Pairs of moves that must both be on or both be off (e.g. ``("grow", "prune")``,
        which are each other's reverse move: one without the other breaks detailed
        balance).
    required : iterable of str, optional
        Moves that must have a positive weight (e.g. ``"grow"``: without it a tree never
        leaves the stump).
    name : str, default "moves"
        Argument name used in error messages.

    Returns
    -------
    dict of str to float
        One entry per valid move, in the order of ``valid``, summing to 1.

    Raises
    ------
    ArgumentError
        If ``moves`` is not a mapping, names an unknown move (the message lists the valid
        names and suggests close ones), has a negative, non-finite or non-numeric weight,
        has weights summing to 0, switches on only one move of a ``paired`` pair, or leaves
        a ``required`` move at weight 0.
    """
    names = list(valid)
    if moves is None:
        weights = {k: _as_real(f"default {name}[{k!r}]", v, "a number") for k, v in valid.items()}
    else:
        if not isinstance(moves, Mapping):
            raise ArgumentError(
                f"{name} must be a dict mapping move names to weights (valid names: "
                f"{', '.join(repr(k) for k in names)}), got {_show(moves)}"
            )
        unknown = [k for k in moves if k not in valid]
        if unknown:
            parts = []
            for k in unknown:
                close = suggest(k, names) if isinstance(k, str) else []
                hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
                parts.append(f"{k!r}{hint}")
            raise ArgumentError(
                f"unknown move name(s) in {name}: {', '.join(parts)}; valid names: "
                f"{', '.join(repr(k) for k in names)}"
            )
        weights = {k: 0.0 for k in names}
        for k, v in moves.items():
            weights[k] = _as_real(f"{name}[{k!r}]", v, "a non-negative finite number")
    negative = {k: v for k, v in weights.items() if v < 0}
    if negative:
        shown = ", ".join(f"{k!r}: {v!r}" for k, v in negative.items())
        raise ArgumentError(f"{name} must have non-negative weights, got {shown}")
    total = math.fsum(weights.values())
    if total <= 0:
        raise ArgumentError(
            f"{name} must give at least one move a positive weight, got all zero "
            f"({dict(moves) if moves is not None else dict(valid)!r}); valid names: "
            f"{', '.join(repr(k) for k in names)}"
        )
    for a, b in paired:
        if (weights.get(a, 0.0) > 0) != (weights.get(b, 0.0) > 0):
            on, off = (a, b) if weights.get(a, 0.0) > 0 else (b, a)
            raise ArgumentError(
                f"{name} gives {on!r} a positive weight but {off!r} weight 0; {a!r} and "
                f"{b!r} reverse each other, so give both a positive weight or neither"
            )
    for k in required:
        if weights.get(k, 0.0) <= 0:
            raise ArgumentError(
                f"{name} must give {k!r} a positive weight: without it the sampler cannot move "
                f"away from the starting tree (a stump), got {dict(moves) if moves is not None else dict(valid)!r}"
            )
    return {k: weights[k] / total for k in names}
