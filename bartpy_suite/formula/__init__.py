"""Formula front-end: DataFrame + R-style formula -> design matrix for tree models.

Import rule: this package imports pandas, numpy, formulaic, :mod:`bartpy_suite.errors` and
:mod:`bartpy_suite._validation` only (plus the standard library). Within the package the
imports go one way, ``messages <- codecs <- expr <- terms <- design <- build <- random_effects`` (``codecs``
needs nothing from ``messages``; formulaic's parser is used in ``terms`` alone), and each
module's docstring states its own rule. Only :mod:`bartpy_suite.api` imports this package;
``cli`` and the top-level ``bartpy_suite`` reach it through ``api``. ``_kernels``,
``samplers``, ``models`` and ``posterior`` do not import it: ``models`` pass on the
:class:`Design` they are given, and ``posterior`` duck-types it (``to_json`` when a fit is
built, ``transform`` in ``predict``, ``levels`` when a tree is printed).

Modules:

* ``messages``: wording of errors and warnings ("did you mean", lists of names and rows),
  the ``na_action`` and data-frame checks;
* ``codecs``: factor labels to level codes, lossless JSON of labels and constants;
* ``expr``: a term as a declarative expression tree: parsed from the term's text with
  ``ast.parse`` and a whitelist walk, checked when read from a file, evaluated with numpy
  and pandas (no ``eval``);
* ``terms``: splitting the formula into terms (formulaic's parser) and evaluating them;
* ``design``: :class:`Design` (``transform``, ``to_json`` / ``from_json``);
* ``build``: :func:`build_design`;
* ``random_effects``: lme4-style random-effect terms ``(1 | g)``, ``(x1 | g)``
  (:func:`build_random_effects_design`, for ``bps.bart``).

formulaic (tested with 1.2) parses the formula, so ``y ~ x1 + x2``, ``y ~ .``,
``y ~ . - x3`` and backquoted names mean what they mean in formulaic. Each term is then
parsed into an expression tree of whitelisted operations, and that tree, not Python text, is
evaluated at fit time, stored with a saved fit and evaluated at ``predict``: a fit file never
runs code. A term may contain (:data:`bartpy_suite.formula.expr.ALLOWED`):

* column names (```my column``` or ``Q('my column')`` when not a Python name), numbers,
  ``+ - * / ** // %``, unary ``-`` and parentheses;
* ``I(x)`` (the identity), ``C(x)`` / ``C(x, levels=[...])`` (a factor; ``contrasts`` are
  accepted and ignored);
* ``center(x)``, ``scale(x, center=True, scale=True, ddof=1)`` and ``standardize(x)``, whose
  mean and scale are fitted on the training rows and stored with the design;
* ``log``, ``log2``, ``log10``, ``log1p``, ``exp``, ``exp2``, ``expm1``, ``sqrt``, ``abs``,
  also written ``np.log(x)`` and so on.

Anything else (other functions, attribute access, subscripts, comparisons, lambdas, names
starting with ``__``, basis expansions such as ``poly()`` or ``bs()``) is an error naming the
term. Arithmetic and functions compute in float64 (integer and bool columns are converted
first, so a ``uint8`` column does not wrap). Two things differ from a linear-model design
matrix, because trees need neither:

* factors stay factors. A categorical predictor (pandas ``category``, ``object``, string or
  ``bool`` column, or any ``C(x)`` term) becomes *one* column of integer level codes
  ``0..L-1`` (stored as float64), never dummy columns. ``Design.levels`` records the level
  labels in code order: the categories order for a pandas ``category`` column, the order of
  ``levels=`` for ``C(x, levels=[...])``, sorted labels otherwise. Only levels that occur in
  the rows used for fitting are kept, so every code ``0..L-1`` occurs in the training ``X``.
* the intercept (and ``-1`` / ``+0``) is ignored, and interaction terms (``a:b``, ``a*b``)
  are refused: trees find interactions themselves.

The caller's variables are never in scope, so that a saved :class:`Design` transforms new
data anywhere.
"""

from __future__ import annotations

from .build import build_design
from .design import Design
from .messages import NA_ACTIONS
from .random_effects import build_random_effects_design

__all__ = ["Design", "build_design", "build_random_effects_design", "NA_ACTIONS"]

# Before the split these lived in the module bartpy_suite.formula: keep the public path
# in reprs, documentation and pickles (a pickle names the class by module and name).
Design.__module__ = __name__
build_design.__module__ = __name__
