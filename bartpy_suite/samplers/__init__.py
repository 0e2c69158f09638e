"""Sampler registry: ``{name: SamplerSpec}``.

Import rule: samplers import ``_kernels``, ``priors``, ``errors`` and ``_validation`` only.
Unknown names raise an ``ArgumentError`` listing the valid ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._validation import check_choice


@dataclass(frozen=True)
class SamplerSpec:
    """A named sampler: the models it supports and its default move probabilities."""

    name: str
    models: tuple
    default_moves: dict = field(default_factory=dict)
    description: str = ""


SAMPLERS: dict[str, SamplerSpec] = {
    "cgm": SamplerSpec(
        "cgm", ("cart", "bart"), {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1},
        "grow/prune/change/swap Metropolis-Hastings (thesis 3.3.4; CGM 1998)",
    ),
    "grow_prune": SamplerSpec(
        "grow_prune", ("cart", "bart"), {"grow": 0.5, "prune": 0.5},
        "the grow/prune subset of cgm",
    ),
}


def get_sampler(name: str, model: str) -> SamplerSpec:
    """Look up a sampler for ``model`` ("cart" or "bart")."""
    valid = [k for k, s in SAMPLERS.items() if model in s.models]
    check_choice("sampler", name, valid)
    return SAMPLERS[name]
