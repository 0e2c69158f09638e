"""The sampler registry: ``{name: SamplerSpec}`` and the protocol every sampler implements.

A sampler is one module that builds ``SamplerSpec`` entries and calls ``register`` on them;
``samplers/__init__.py`` imports that module. The models, the runner and ``build_fit`` use a
sampler only through its spec and the ``Chain`` protocol below, without knowing which it is.

Import rule: this module imports ``_validation`` and ``errors`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._validation import check_choice, suggest
from ..errors import ArgumentError
from .draws import ChainDraws


class Chain(Protocol):
    """One chain of a sampler: its state, its ``Generator`` and its draw buffers.

    The runner calls ``allocate`` once, ``run`` repeatedly (chunks of iterations, from one
    thread per chain), and ``collect`` once at the end.
    """

    def allocate(self, draws: int) -> None:
        """Create the buffers for ``draws`` kept draws."""

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` iterations from global iteration ``first_iter``; iterations
        ``>= tune`` whose offset is a multiple of ``thin`` are kept as draw ``(it - tune) // thin``."""

    def collect(self, kept: int) -> ChainDraws:
        """Hand back the first ``kept`` draws (the buffers may be freed)."""


@dataclass(frozen=True)
class Option:
    """A documented setting of a sampler, passed in ``sampler_options``.

    ``check(name, value)`` validates a user's value and returns the value to use; its error
    names the option.
    """

    name: str
    default: Any
    check: Callable[[str, Any], Any]
    doc: str


@dataclass(frozen=True)
class Statistic:
    """A sampler statistic recorded per kept draw: its name, dims after (chain, draw), meaning."""

    name: str
    dims: tuple[str, ...] = ()
    doc: str = ""


@dataclass(frozen=True)
class SamplerSpec:
    """A registered sampler.

    Attributes
    ----------
    name : str
        The name users pass as ``sampler=``.
    family : str
        Samplers of one family share a module (e.g. "mh" for ``cgm`` and ``grow_prune``).
    description : str
        One line for listings and docstrings.
    builders : mapping of str to callable
        ``builders[model](problem, options, rng) -> Chain`` for each supported model type
        ("cart", "bart", ...); ``problem`` is that model's ``problems`` dataclass.
    options : tuple of Option
        The documented ``sampler_options``.
    statistics : mapping of str to tuple of Statistic
        Per model type, the statistics its chains return in ``ChainDraws.stats``.
    coords : mapping
        Coordinate values of the statistics' dims (e.g. ``{"move": ("grow", ...)}``).
    weighted : bool
        Whether draws carry non-uniform weights (``weight`` statistic).
    ess_method : {"autocorrelation", "kish"}
        How ``Fit.summary`` computes ``ess_bulk``: from the draws' autocorrelation (MCMC; weighted
        by the delta method when weights vary), or as the sum over chains of Kish's ESS of each
        chain's weights (independent weighted particles, e.g. SMC islands).
    missing_split : bool or callable
        Whether the sampler fits ``na_action="split"`` (every rule drawn with its missing-value
        bit, ``_kernels/tree.py``), or ``missing_split(options)`` returning None when it does and
        else the reason. False (the default) for a sampler that has not been checked against
        the enumerated posterior with missing values.
    """

    name: str
    family: str
    description: str
    builders: Mapping[str, Callable[..., Chain]]
    options: tuple[Option, ...] = ()
    statistics: Mapping[str, tuple[Statistic, ...]] = field(default_factory=dict)
    coords: Mapping[str, tuple] = field(default_factory=dict)
    weighted: bool = False
    ess_method: str = "autocorrelation"
    missing_split: bool | Callable[[Mapping], str | None] = False

    @property
    def models(self) -> tuple[str, ...]:
        """Model types this sampler supports."""
        return tuple(self.builders)

    def option_defaults(self) -> dict:
        """Every option at its default."""
        return {opt.name: opt.default for opt in self.options}

    def check_options(self, options: Mapping | None) -> dict:
        """Validated options: defaults overridden by ``options``.

        Raises
        ------
        ArgumentError
            For an unknown key (listing the valid ones) or a bad value.
        """
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise ArgumentError(
                f"sampler_options must be a dict of option -> value; got {type(options).__name__}"
            )
        known = {opt.name: opt for opt in self.options}
        out = self.option_defaults()
        for key, value in options.items():
            if key not in known:
                valid = ", ".join(repr(k) for k in known) or "none"
                close = suggest(str(key), known)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ArgumentError(
                    f"sampler {self.name!r} has no option {key!r}; its options are: {valid}.{hint}"
                )
            out[key] = known[key].check(key, value)
        return out

    def check_missing_split(self, options: Mapping) -> None:
        """Raise unless the sampler fits ``na_action="split"`` with ``options``."""
        if callable(self.missing_split):
            reason = self.missing_split(options)
        else:
            reason = None if self.missing_split else "its rule proposals do not draw the missing-value bit"
        if reason is None:
            return
        able = [name for name, spec in SAMPLERS.items() if spec.missing_split]
        raise ArgumentError(
            f"sampler {self.name!r} does not support na_action='split' ({reason}); use one of "
            f"{', '.join(repr(a) for a in able)}, or na_action='drop'"
        )

    def make_chain(self, problem, options: dict, rng) -> Chain:
        """Build one chain for ``problem`` (whose ``model`` names the model type)."""
        return self.builders[problem.model](problem, options, rng)


SAMPLERS: dict[str, SamplerSpec] = {}


def register(spec: SamplerSpec) -> SamplerSpec:
    """Add ``spec`` to the registry (a name can be registered once)."""
    if spec.name in SAMPLERS:
        raise ValueError(f"sampler {spec.name!r} is already registered")
    SAMPLERS[spec.name] = spec
    return spec


def samplers_for(model: str) -> list[str]:
    """Names of the samplers that support ``model``."""
    return [name for name, spec in SAMPLERS.items() if model in spec.models]


def get_sampler(name: str, model: str) -> SamplerSpec:
    """Look up a sampler for ``model``; an unknown or unsupported name raises listing the valid ones."""
    check_choice("sampler", name, samplers_for(model))
    return SAMPLERS[name]
