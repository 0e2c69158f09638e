"""The run settings every model takes, declared once: :class:`RunSettings`, its one validation
function :func:`check_run_settings`, and the numpydoc entries and ``__init__`` signature built
from them (:func:`with_run_keywords`).

A model's ``__init__`` lists only its own keywords and takes the run keywords as ``**run``;
``with_run_keywords`` gives it the signature with all of them (the model's ``run_defaults``
override the defaults here), which ``TreeModel.keyword_parameters`` hands to the ``bps.<model>``
aliases, the scikit-learn estimators and the command line. The sampler entry of each model's
docstring lists the samplers the registry holds for it (``samplers.samplers_for``).

Import rule: a ``models`` module (samplers, ``_validation``, ``errors``).
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _validation as check
from ..errors import ArgumentError
from ..samplers import SAMPLERS, get_sampler, samplers_for
from ..samplers.forest import ROW_BLOCKS_MIN_ROWS
from ..samplers.registry import SamplerSpec
from ._remote import check_executor


@dataclass(frozen=True)
class RunSettings:
    """How a model's chains run: the keywords every model shares (validated values).

    Built by :func:`check_run_settings`; each field is a keyword of every model (documented in
    the model's docstring, with that model's default). ``sampler`` has no default here: each
    model names its own (``TreeModel.run_defaults``).
    """

    sampler: str
    chains: int = 4
    draws: int | str = 1000  # "auto" only where a model's run_defaults say so (BART: models/bart.py)
    tune: int | str = 1000
    thin: int = 1
    seed: Any = None  # None, an int >= 0 or a numpy SeedSequence
    moves: Mapping | None = None
    sampler_options: Mapping | None = None
    likelihood: bool = True
    progress: bool = True
    threads: int | None = None
    check_mixing: bool = True
    log_likelihood: bool | None = None
    #: where the chains run, not a setting of the draws: shared, never copied (scikit-learn's clone)
    executor: Any = None


#: The run keywords, in the order of the dataclass (and of every model's signature and docstring).
RUN_KEYWORDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings))

#: Run keywords that name a resource rather than a setting: copies of a model share them.
RUN_RESOURCES: tuple[str, ...] = ("executor",)


def sampler_kind(model: type) -> str:
    """The problem kind whose samplers ``model`` takes (``samplers_for`` of it): the model's
    ``problem_kind`` when it sets one (a model that builds another model's problem, e.g. a
    ``CartProblem``), else its ``model_type``."""
    return getattr(model, "problem_kind", None) or model.model_type


def run_defaults(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default of every run keyword, with a model's ``overrides`` (e.g. its sampler)."""
    out = {f.name: f.default for f in dataclasses.fields(RunSettings) if f.default is not dataclasses.MISSING}
    out.update(overrides or {})
    return out


def check_run_settings(kind: str, keywords: Mapping[str, Any],
                       overrides: Mapping[str, Any] | None = None, *,
                       owner: str = "the model") -> tuple[RunSettings, SamplerSpec]:
    """Validate a model's run keywords; the one place they are checked.

    Parameters
    ----------
    kind : str
        The problem kind the sampler must fit (``sampler_kind(model)``: "cart", "bart",
        "soft_tree", ...).
    keywords : mapping
        The run keywords the user gave (the others take their defaults).
    overrides : mapping, optional
        The model's own defaults (``TreeModel.run_defaults``).
    owner : str
        Named in the message for an unknown keyword (e.g. ``"BART()"``).

    Returns
    -------
    (RunSettings, SamplerSpec)
        The validated settings (``sampler_options`` complete: the sampler's defaults overridden
        by ``sampler_options`` and ``moves``) and the sampler's registry entry.

    Raises
    ------
    TypeError
        For a keyword that is not a run keyword (as Python does for an unknown keyword).
    ArgumentError
        For a bad value: the message names the keyword and what to give instead.
    """
    unknown = [k for k in keywords if k not in RUN_KEYWORDS]
    if unknown:
        raise TypeError(f"{owner} got an unexpected keyword argument {unknown[0]!r}")
    given = {**run_defaults(overrides), **keywords}
    if "sampler" not in given:
        raise ArgumentError(f"{owner} names no default sampler; pass sampler= (one of "
                            f"{', '.join(map(repr, samplers_for(kind)))})")
    spec = get_sampler(given["sampler"], kind)
    chains = check.check_int_at_least("chains", given["chains"], 1)
    draws = _count_or_auto("draws", given["draws"], 1, overrides)
    tune = _count_or_auto("tune", given["tune"], 0, overrides)
    thin = check.check_int_at_least("thin", given["thin"], 1)
    seed = check.check_seed("seed", given["seed"])
    moves, options = given["moves"], given["sampler_options"]
    options = dict(options) if isinstance(options, dict) else options
    if moves is not None:
        if not any(opt.name == "moves" for opt in spec.options):
            raise ArgumentError(
                f"moves= sets the move probabilities of the Metropolis-Hastings samplers; sampler "
                f"{spec.name!r} has no moves (its options: "
                f"{', '.join(repr(o.name) for o in spec.options) or 'none'})"
            )
        if options and "moves" in options:
            raise ArgumentError("moves is given twice, as moves= and in sampler_options; give it once")
        options = {**(options or {}), "moves": moves}
    options = spec.check_options(options)
    threads = None if given["threads"] is None else check.check_int_at_least("threads", given["threads"], 1)
    log_likelihood = given["log_likelihood"]
    settings = RunSettings(
        sampler=spec.name, chains=chains, draws=draws, tune=tune, thin=thin, seed=seed,
        moves=options.get("moves") if moves is not None else None, sampler_options=options,
        likelihood=check.check_bool("likelihood", given["likelihood"]),
        progress=check.check_bool("progress", given["progress"]),
        threads=threads,
        check_mixing=check.check_bool("check_mixing", given["check_mixing"]),
        log_likelihood=None if log_likelihood is None else check.check_bool("log_likelihood", log_likelihood),
        executor=check_executor(given["executor"]),
    )
    if settings.executor is not None and settings.threads is not None:
        raise ArgumentError("threads= sets the threads of the default run; with executor= the executor decides "
                            "where chains run: give one of them")
    return settings, spec


def _count_or_auto(name: str, value: Any, low: int, overrides: Mapping[str, Any] | None) -> int | str:
    """An iteration count >= ``low``, or ``"auto"`` where the model's defaults have it (the model
    then picks the count when it sees the data, e.g. BART from the number of rows)."""
    if isinstance(value, str) and value == "auto" and (overrides or {}).get(name) == "auto":
        return value
    return check.check_int_at_least(name, value, low)


# --- documentation ---------------------------------------------------------------------------------

#: numpydoc type and text of each run keyword; ``{default}`` is the model's default.
_ENTRIES: dict[str, tuple[str, str]] = {
    "chains": ("int", "Number of chains (default {default}), each with its own ``Generator`` spawned from "
                      "``seed``; they run in parallel threads (or on ``executor``)."),
    "draws": ("int", "Kept draws per chain (default {default})."),
    "tune": ("int", "Initial iterations of each chain that are discarded (default {default})."),
    "thin": ("int", "Keep every ``thin``-th iteration after ``tune`` (default {default})."),
    "seed": ("int, SeedSequence or None", "Seed of the chains' generators: the same seed gives the same draws."),
    "moves": ("dict or None", "Move probabilities by name, for the samplers that have a ``moves`` option "
                              "(default: the sampler's), e.g. ``{{\"grow\": .25, \"prune\": .25, \"change\": .4, "
                              "\"swap\": .1}}``; the same as ``sampler_options={{\"moves\": ...}}`` (give one)."),
    "sampler_options": ("dict or None", "Settings of the sampler: its documented options "
                                        "(``bps.samplers.SAMPLERS[name].options``); an unknown key is an error "
                                        "listing the valid ones."),
    "likelihood": ("bool", "False samples the prior (the test of last resort for a sampler)."),
    "progress": ("bool", "Progress bar in an interactive terminal."),
    "threads": ("int or None", "Threads the chains use: ``min(chains, threads)`` chains run at once, each with "
                               f"``threads // that`` threads for the row passes of a BART fit of "
                               f"{ROW_BLOCKS_MIN_ROWS:,} rows or more "
                               "(default: every chain at once, with the cores numba may use, ``NUMBA_NUM_THREADS``, "
                               "shared among them); the draws do not depend on it."),
    "check_mixing": ("bool", "After the fit, check how well the chains mixed on f(x) at 24 training rows (class "
                             "probabilities for a classifier) and sigma (default True): past r_hat 1.01 or bulk ESS "
                             "100 per chain a note on standard error, past 1.05 or 50 a "
                             "``bartpy_suite.MixingWarning``, past 1.2 or 5 a ``bartpy_suite.StrongMixingWarning`` "
                             "(``posterior.mixing.mixing_report``)."),
    "log_likelihood": ("bool or None", "Store the pointwise log-likelihood of the training rows in "
                                       "``idata[\"log_likelihood\"]`` (for ``arviz_stats.loo``): True, False, or None "
                                       "(default) when chains x draws x rows is at most 10 million "
                                       "(``fit.add_log_likelihood()`` adds it later)."),
    "executor": ("dask.distributed.Client, concurrent.futures.Executor or None",
                 "Where the chains run. None (default): one thread per chain in this process. A dask ``Client`` "
                 "or an ``Executor`` (e.g. ``ProcessPoolExecutor``) runs each chain as one task: the data and the "
                 "chain's seed are shipped, the chain is built, run and collected there, and its draws are "
                 "gathered. The same seed gives the same draws as the threaded run."),
}


def _entry(name: str, kind: str, text: str) -> str:
    body = textwrap.fill(text, width=96, initial_indent=" " * 8, subsequent_indent=" " * 8,
                         break_long_words=False, break_on_hyphens=False)
    return f"    {name} : {kind}\n{body}\n"


def sampler_entry_text(kind: str, default: str, variants: Mapping[str, str] | None = None) -> str:
    """The sampler entry's text: the samplers the registry holds for ``kind``, with their
    one-line descriptions, the default first; and for each problem variant (e.g.
    ``{"bart_multinomial": "multinomial (logit) BART"}``) the samplers that fit it."""
    names = samplers_for(kind)
    names = [default] + [n for n in names if n != default] if default in names else names

    def quoted(n):
        return f'``"{n}"``'

    listed = "; ".join(f"{quoted(n)}{' (default)' if n == default else ''}: {SAMPLERS[n].description}"
                       for n in names)
    text = (f"A sampler of the registry that fits this model (``bps.samplers.samplers_for({kind!r})``): "
            f"{listed}.")
    for problem, label in (variants or {}).items():
        text += f" {label[0].upper()}{label[1:]}: {', '.join(quoted(n) for n in samplers_for(problem))}."
    return text


def run_parameters_doc(model: type) -> str:
    """The numpydoc entries of ``model``'s run keywords: its defaults, the samplers the registry
    holds for it, and its notes (``model.run_notes``, appended to an entry's text)."""
    defaults = run_defaults(model.run_defaults)
    notes = getattr(model, "run_notes", {})
    out = []
    for name in RUN_KEYWORDS:
        if name == "sampler":
            kind, text = "str", sampler_entry_text(sampler_kind(model), defaults["sampler"],
                                                   getattr(model, "sampler_variants", None))
        else:
            kind, text = _ENTRIES[name]
            if defaults.get(name) == "auto":  # the model picks the count from the data (see its note)
                kind, text = f'{kind} or "auto"', text.format(default='"auto"')
            else:
                text = text.format(default=defaults.get(name))
        if name in notes:
            text += " " + notes[name]
        out.append(_entry(name, kind, text))
    return "".join(out)


#: The entry each model's docstring ends its ``Parameters`` with, replaced by
#: :func:`run_parameters_doc` at import (a well-formed numpydoc entry, so that tools reading the
#: source parse the docstring too; ``docs/griffe_run_keywords.py`` makes the same replacement).
RUN_PARAMETERS_PLACEHOLDER = ("    **run_keywords\n        The run keywords every model shares "
                              "(``models.settings.RunSettings``), put here at import.\n")


def with_run_keywords(cls):
    """Class decorator of a model: its ``__init__`` signature gets the run keywords after its own
    (defaults: ``cls.run_defaults`` over :class:`RunSettings`'), and its docstring's placeholder
    entry becomes :func:`run_parameters_doc`.

    The model's ``__init__`` takes the run keywords as ``**run`` and passes them to
    ``TreeModel._init_run``.
    """
    doc = cls.__doc__ or ""
    if RUN_PARAMETERS_PLACEHOLDER not in doc:
        raise ValueError(f"{cls.__name__}'s docstring lacks the run-keywords placeholder")
    cls.__doc__ = doc.replace(RUN_PARAMETERS_PLACEHOLDER, run_parameters_doc(cls))
    init = cls.__dict__.get("__init__")
    if init is not None:  # a subclass without its own __init__ has its parent's signature
        own = [p for p in inspect.signature(init).parameters.values() if p.kind is not p.VAR_KEYWORD]
        clash = {p.name for p in own} & set(RUN_KEYWORDS)
        if clash:
            raise ValueError(f"{cls.__name__}.__init__ lists run keywords {sorted(clash)}; take them as **run")
        defaults = run_defaults(cls.run_defaults)
        run = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name])
               for name in RUN_KEYWORDS]
        init.__signature__ = inspect.Signature(own + run)
    return cls
