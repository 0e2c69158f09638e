"""Formula front-end: DataFrame + R-style formula -> design matrix for tree models.

Import rule: this package imports pandas, numpy, formulaic, :mod:`bartpy_suite.errors` and
:mod:`bartpy_suite._validation` only (plus the standard library). Within the package the
imports go one way, ``messages <- codecs <- terms <- design <- build`` (``codecs`` needs
nothing from ``messages``; formulaic's internals are used in ``terms`` alone), and each
module's docstring states its own rule. Only :mod:`bartpy_suite.api` imports this package;
``cli`` and the top-level ``bartpy_suite`` reach it through ``api``. ``_kernels``,
``samplers``, ``models`` and ``posterior`` do not import it: ``models`` pass on the
:class:`Design` they are given, and ``posterior`` duck-types it (``to_json`` when a fit is
built, ``transform`` in ``predict``, ``levels`` when a tree is printed).

Modules:

* ``messages``: wording of errors and warnings ("did you mean", lists of names and rows),
  the ``na_action`` and data-frame checks;
* ``codecs``: factor labels to level codes, lossless JSON of labels and transform state;
* ``terms``: parsing the formula into terms and evaluating them (formulaic internals);
* ``design``: :class:`Design` (``transform``, ``to_json`` / ``from_json``);
* ``build``: :func:`build_design`.

formulaic (tested with 1.2) parses the formula and evaluates the terms, so ``y ~ x1 + x2``,
``y ~ .``, ``y ~ . - x3``, ``log(x)``, ``I(x**2)``, ``np.sqrt(x)``, ``center(x)`` and ``C(x)``
mean what they mean in formulaic. Two things differ from a linear-model design matrix,
because trees need neither:

* factors stay factors. A categorical predictor (pandas ``category``, ``object``, string or
  ``bool`` column, or any ``C(x)`` term) becomes *one* column of integer level codes
  ``0..L-1`` (stored as float64), never dummy columns. ``Design.levels`` records the level
  labels in code order: the categories order for a pandas ``category`` column, the order of
  ``levels=`` for ``C(x, levels=[...])``, sorted labels otherwise. Only levels that occur in
  the rows used for fitting are kept, so every code ``0..L-1`` occurs in the training ``X``
  (``C``'s ``contrasts`` argument is accepted and ignored).
* the intercept (and ``-1`` / ``+0``) is ignored, and interaction terms (``a:b``, ``a*b``)
  are refused: trees find interactions themselves.

Terms are evaluated with the data columns, formulaic's transforms (``log``, ``exp``, ``I``,
``C``, ``center``, ``scale``, ``np``, ...) and Python's builtins in scope; the caller's
variables are not, so that a saved :class:`Design` can transform new data anywhere.
Stateful transforms (``center(x)``, ``scale(x)``) keep their training state in the design.
"""

from __future__ import annotations

from .build import build_design
from .design import Design
from .messages import NA_ACTIONS

__all__ = ["Design", "build_design", "NA_ACTIONS"]

# Before the split these lived in the module bartpy_suite.formula: keep the public path
# in reprs, documentation and pickles (a pickle names the class by module and name).
Design.__module__ = __name__
build_design.__module__ = __name__
