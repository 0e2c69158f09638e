"""The front door: ``cart()``, ``bart()`` (thin aliases of the registered models'
``from_formula``) and ``load()``.

formula -> Design -> Model(**keywords).fit(X, y) -> Fit. Imports formula, models, posterior
and errors; nothing in the package imports this module except ``__init__``.
"""

from __future__ import annotations

import inspect
import json
import os

import xarray as xr

from .errors import ArgumentError
from .formula import Design
from .models import MODELS
from .posterior import legacy
from .posterior.fit import CONFIG_ATTR, DESIGN_ATTR, Fit

_ALIAS_INTRO = {
    "cart": "Fit a single-tree Bayesian CART model (Chipman, George & McCulloch 1998) from a formula.",
    "bart": (
        "Fit BART (sum of trees; Chipman, George & McCulloch 2010) from a formula: regression, or probit for "
        "a binary response."
    ),
    "soft_tree": (
        "Fit a soft decision tree by RJHMC-Tree (reversible-jump grow/prune with NUTS on the continuous "
        "parameters; Cochrane et al.) from a formula: regression or classification."
    ),
}


def _formula_alias(name: str):
    """``bps.<name>(formula, data, ...)``: ``MODELS[name].from_formula`` with the model's keyword
    list as its signature and the model's docstring, written once on the class."""
    model = MODELS[name]

    def fit(formula, data, *, na_action="drop", **keywords) -> Fit:
        return model.from_formula(formula, data, na_action=na_action, **keywords)

    positional = [
        inspect.Parameter("formula", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="pandas.DataFrame"),
        inspect.Parameter("na_action", inspect.Parameter.KEYWORD_ONLY, default="drop", annotation=str),
    ]
    fit.__signature__ = inspect.Signature(positional + model.keyword_parameters(), return_annotation=Fit)
    fit.__name__ = fit.__qualname__ = name
    fit.__module__ = __name__
    formula_doc = inspect.getdoc(model.from_formula).split("Parameters\n----------\n", 1)[1]
    formula_params = formula_doc.split("**keywords", 1)[0].rstrip()
    class_doc = inspect.getdoc(model)
    class_params = class_doc.split("Parameters\n----------\n", 1)[1] if "Parameters\n" in class_doc else ""
    fit.__doc__ = (
        f"{_ALIAS_INTRO.get(name, class_doc.splitlines()[0])}\n\n"
        f"Alias of ``{model.__name__}.from_formula``; the array-level class is ``bps.{model.__name__}``.\n\n"
        f"Parameters\n----------\n{formula_params}\n{class_params.rstrip()}\n\n"
        "Returns\n-------\nFit\n"
    )
    return fit


cart = _formula_alias("cart")
bart = _formula_alias("bart")
soft_tree = _formula_alias("soft_tree")


def load(path) -> Fit:
    """Read a fit written by ``Fit.to_netcdf``.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Fit
        Predictions are identical to those of the fit that was saved. Files of bartpy_suite 0.1
        (padded tree arrays in the posterior group) are read into the current layout.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    with xr.open_datatree(path, engine="netcdf4") as tree:
        idata = tree.load()
    const = idata["constant_data"].attrs if "constant_data" in idata.children else {}
    if CONFIG_ATTR not in const:
        raise ArgumentError(f"{path!r} is not a bartpy_suite fit (no model configuration found)")
    design = Design.from_json(const[DESIGN_ATTR]) if DESIGN_ATTR in const else None
    json.loads(const[CONFIG_ATTR])
    if legacy.needs_upgrade(idata):
        idata = legacy.upgrade(idata)
    return Fit(idata, design=design)
