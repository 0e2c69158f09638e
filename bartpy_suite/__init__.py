"""bartpy_suite: Bayesian tree models (CART, BART) with a formula front-end.

Re-exports the front door (:func:`cart`, :func:`bart`, :func:`bcf`, :func:`soft_tree`, :func:`load`), the
array-level model classes, the posterior ``Fit``, :mod:`datasets` and :mod:`samplers` (the sampler registry).
Imports flow one way: this module imports ``api``; nothing below imports this module.
"""

from __future__ import annotations

from . import datasets, samplers
from .api import NaAction, bart, bcf, cart, load, soft_tree
from .errors import BartpySuiteWarning, MixingWarning, StrongMixingWarning
from .models import BART, BayesianCART, SoftTree
from .posterior import Fit
from .posterior.bcf import CausalFit

__version__ = "0.1.0"

__all__ = ["BART", "BartpySuiteWarning", "BayesianCART", "CausalFit", "Fit", "MixingWarning", "NaAction", "SoftTree",
           "StrongMixingWarning",
           "bart", "bcf", "cart", "datasets", "load", "samplers", "soft_tree", "__version__"]
