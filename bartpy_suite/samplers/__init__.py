"""Samplers: one module per sampler family, each registering its ``SamplerSpec`` entries.

``SAMPLERS`` maps names to specs; ``get_sampler(name, model)`` looks one up and an unknown or
unsupported name raises an ``ArgumentError`` listing the valid ones. Adding a sampler: write
its module (chain classes implementing ``registry.Chain`` and ``register(SamplerSpec(...))``)
and import it below.

Import rule: samplers import ``_kernels``, ``_validation`` and ``errors`` only (never
``priors``, ``models``, ``posterior``, ``formula`` or ``api``).
"""

from . import mh  # noqa: F401, I001  (registers cgm and grow_prune; first, so they lead the listings)
from . import ctmc  # noqa: F401  (registers ctmc)
from .particle import PG, SMC  # noqa: F401  (registers pg and smc)
from . import hmc  # noqa: F401  (registers hmc_df and hmc_dfi)
from .problems import BartProblem, CartProblem, SoftTreeProblem
from .registry import SAMPLERS, Chain, Option, SamplerSpec, Statistic, get_sampler, register, samplers_for
from .tempered import TEMPERED as _TEMPERED  # noqa: F401  (registers tempered)
from . import gfr  # noqa: F401, E402, I001  (registers gfr)
from . import random_effects  # noqa: F401, E402, I001  (cgm and grow_prune fit bart_re)
from . import hetero  # noqa: F401, E402, I001  (cgm and grow_prune fit bart_hetero)

__all__ = [
    "SAMPLERS", "BartProblem", "CartProblem", "SoftTreeProblem", "Chain", "Option", "SamplerSpec", "Statistic",
    "get_sampler", "register", "samplers_for",
]
