"""Posterior objects: ``Fit`` wraps an ArviZ-layout ``xarray.DataTree`` plus the design.

Import rule: posterior imports ``_kernels``, ``_binning``, ``_validation`` and ``errors`` (plus
xarray, arviz-base, arviz-stats, pandas); never ``models``, ``formula`` or ``api``. The design
object is duck-typed (``transform``, ``to_json``).
"""

from . import random_effects  # noqa: F401, E402, I001  (registers the leaf model normal_re)
from . import variance  # noqa: F401, E402, I001  (registers the leaf model normal_hetero)
from .coda_ess import coda_ess
from .fit import Fit

__all__ = ["Fit", "coda_ess"]
