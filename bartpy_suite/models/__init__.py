"""Array-level estimators: ``BayesianCART`` and ``BART`` fit numpy arrays and return a ``Fit``.

Import rule: models import ``_kernels``, ``samplers``, ``priors``, ``posterior``, ``_binning``,
``_validation`` and ``errors``; never ``formula`` or ``api``.
"""

from .bart import BART
from .cart import BayesianCART

__all__ = ["BART", "BayesianCART"]
