"""Array-level estimators: ``BayesianCART``, ``BART`` and ``SoftTree`` fit numpy arrays and return a ``Fit``;
``Model.from_formula(formula, data, ...)`` fits a DataFrame. ``MODELS`` is the registry.

Import rule: models import ``_kernels``, ``samplers``, ``priors``, ``posterior``, ``_binning``,
``_validation`` and ``errors``; ``formula`` only inside ``from_formula`` (so array-level use
needs neither pandas nor formulaic); never ``api`` or ``cli``.
"""

from .bart import BART
from .cart import BayesianCART
from .registry import MODELS, get_model
from .soft_tree import SoftTree
from .survival import SurvivalBART

__all__ = ["BART", "MODELS", "BayesianCART", "SoftTree", "SurvivalBART", "get_model"]
