"""The front door: ``cart()``, ``bart()`` (thin aliases of the registered models'
``from_formula``), ``bcf()`` (Bayesian causal forests, ``models/bcf.py``; not a registered
``TreeModel``: it returns a ``CausalFit``) and ``load()`` (either kind of saved fit).

formula -> Design -> Model(**keywords).fit(X, y) -> Fit. Imports formula, models, posterior
and errors; nothing in the package imports this module except ``__init__``.
"""

from __future__ import annotations

import inspect
import zipfile

from ._validation import NaAction
from .formula import Design
from .models import MODELS
from .models.bcf import bcf
from .posterior import bcf_file, file_check
from .posterior.bcf import CausalFit
from .posterior.fit import Fit

__all__ = ["NaAction", "bart", "bcf", "cart", "load", "soft_tree"]

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

    def fit(formula, data, *, na_action: str | NaAction = "drop", **keywords) -> Fit:
        return model.from_formula(formula, data, na_action=na_action, **keywords)

    positional = [
        inspect.Parameter("formula", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="pandas.DataFrame"),
        inspect.Parameter("na_action", inspect.Parameter.KEYWORD_ONLY, default="drop", annotation="str | NaAction"),
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


def load(path, log_likelihood: bool | None = None) -> Fit | CausalFit:
    """Read a fit written by ``Fit.to_netcdf`` (or a ``bps.bcf`` fit written by ``CausalFit.save``, netCDF, or
    the ``.npz`` archive of the first bcf release).

    Every stored array and attribute is checked before it is used (``posterior/file_check.py``),
    so a damaged or edited file gives an error rather than a crash or wrong predictions.

    Parameters
    ----------
    path : str or os.PathLike
    log_likelihood : bool or None
        Recompute the ``log_likelihood`` group (exactly, from the stored trees): None (default)
        when the saved fit had it (``to_netcdf`` leaves it out of the file by default), True
        always, False never.

    Returns
    -------
    Fit
        Predictions are identical to those of the fit that was saved. Files of bartpy_suite 0.1
        (padded tree arrays in the posterior group) are read into the current layout.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    bartpy_suite.errors.FitFileError
        When the file is truncated, not a fit, or holds a damaged or edited array or attribute;
        the message names the file, the first bad array and what is wrong.
    """
    if zipfile.is_zipfile(path):  # a bcf fit saved by the first release: an .npz archive, not netCDF
        return bcf_file.read_npz(path, Design.from_json, lambda p: file_check.load_fit(p, Design.from_json))
    if bcf_file.is_causal_file(path):  # a bcf fit (``CausalFit.save``)
        return bcf_file.load_causal(path, Design.from_json)
    return file_check.load_fit(path, Design.from_json, log_likelihood=log_likelihood)
