"""bartpy_suite: Bayesian tree models (CART, BART) with a formula front-end.

Re-exports the front door (:func:`cart`, :func:`load`), the array-level model classes, the
posterior ``Fit`` and :mod:`datasets`. Imports flow one way: this module imports ``api``;
nothing below imports this module.
"""

from __future__ import annotations

from . import datasets
from .api import bart, cart, load
from .models import BART, BayesianCART
from .posterior import Fit

__version__ = "0.1.0"

__all__ = ["BART", "BayesianCART", "Fit", "bart", "cart", "datasets", "load", "__version__"]
