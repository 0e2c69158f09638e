"""bartpy_suite: Bayesian tree models (CART, BART) with a formula front-end.

Re-exports the front door (:func:`cart`, :func:`bart`, :func:`load`), the array-level model
classes and :mod:`datasets`. Imports flow one way: this module imports ``api``; nothing
below imports this module.
"""

from __future__ import annotations

__version__ = "0.1.0"
