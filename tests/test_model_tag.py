"""The leaf model as a type (``tree.model_tag``): a compiled function given the tag compiles the
branch of its own model only (issue 11, section 1), and every chain carries the tag of its
``Prior.model``.

The pruning is checked on what numba typed: the functions a compilation calls. A change that
hides the model from numba's constant folding (``code = len(model) + 0``, or reading
``Prior.model`` instead) would type every model's branch and fail here, while every fit still
gave the same draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from _chains import bart_chain
from numba import njit, typeof
from numba.core import types

from bartpy_suite._kernels import cart_draws
from bartpy_suite._kernels import likelihood as L
from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
from bartpy_suite._kernels.records import make_prior, make_target
from bartpy_suite.priors import TreePrior, kernel_prior

LEAF_MARGINALS = {
    L.MODEL_MEAN_SHIFT: "mean_shift_leaf_terms",
    L.MODEL_MEAN_VARIANCE_SHIFT: "leaf_log_marginal_mean_variance",
    L.MODEL_CLASSIFICATION: "leaf_log_marginal_dirichlet",
    L.MODEL_NORMAL_KNOWN_VARIANCE: "leaf_log_marginal_normal_known_variance",
    L.MODEL_LOG_GAMMA: "leaf_log_marginal_log_gamma",
}


def called_functions(py_func, args) -> set[str]:
    """Names of the compiled functions that ``py_func`` calls once typed for ``args`` (a fresh
    ``njit`` dispatcher, so nothing cached or compiled before counts)."""
    dispatcher = njit(py_func)
    dispatcher.compile(tuple(typeof(a) for a in args))
    (cres,) = dispatcher.overloads.values()
    typemap = cres.type_annotation.typemap
    names = set()
    for expr in cres.type_annotation.calltypes:
        if getattr(expr, "op", None) != "call":
            continue
        callee = typemap.get(expr.func.name)
        if isinstance(callee, types.Dispatcher):
            names.add(callee.dispatcher.py_func.__name__)
    return names


def test_model_tag_is_a_tuple_of_code_zeros():
    assert T.model_tag(L.MODEL_MEAN_SHIFT) == ()
    assert T.model_tag(L.MODEL_LOG_GAMMA) == (0, 0, 0, 0)
    codes = np.zeros((2, 10), dtype=np.int32)
    scratch = T.new_scratch(codes, 7, np.array([3, 3]), 3, model=L.MODEL_CLASSIFICATION)
    assert len(scratch.model) == L.MODEL_CLASSIFICATION


@pytest.mark.parametrize("code", sorted(LEAF_MARGINALS))
def test_leaf_terms_types_only_its_own_model(code):
    """``leaf_terms`` compiled for one tag calls that model's leaf marginal and no other."""
    tree = T.new_tree(6, 3)
    args = (tree, 0, np.zeros(6), np.zeros(6, dtype=np.int64), make_target(make_prior()), np.zeros(2),
            T.model_tag(code))
    called = called_functions(T.leaf_terms.py_func, args)
    assert LEAF_MARGINALS[code] in called
    others = {name for c, name in LEAF_MARGINALS.items() if c != code}
    assert not called & others, called & others


@pytest.mark.parametrize("code, has_global", [(L.MODEL_MEAN_SHIFT, True), (L.MODEL_NORMAL_KNOWN_VARIANCE, False)])
def test_global_term_types_only_the_common_sigma_model(code, has_global):
    called = called_functions(T.global_term.py_func, (1.0, 5.0, make_target(make_prior()), T.model_tag(code)))
    assert ("mean_shift_global_term" in called) == has_global


def test_draw_leaf_parameters_of_the_mean_variance_model_draws_no_common_sigma_and_no_classes():
    """The mean-variance model draws one sigma per leaf (``draw_inverse_gamma`` inside the leaf
    loop) and never the common sigma or Dirichlet class probabilities (``rng.gamma``)."""
    tree = T.new_tree(6, 3, 2)
    rng = np.random.default_rng(0)
    args = (rng, tree, np.zeros(6), np.zeros(6, dtype=np.int64), make_target(make_prior()), np.zeros(2), 6.0,
            T.model_tag(L.MODEL_MEAN_VARIANCE_SHIFT))
    mvs = called_functions(cart_draws.draw_leaf_parameters.py_func, args)
    cls = called_functions(cart_draws.draw_leaf_parameters.py_func,
                           args[:-1] + (T.model_tag(L.MODEL_CLASSIFICATION),))
    assert "draw_inverse_gamma" in mvs and "draw_inverse_gamma" not in cls


def test_chains_carry_the_tag_of_their_model():
    """A BART chain's scratch holds the known-variance tag its hyperparameters name."""
    rng = np.random.default_rng(1)
    n = 20
    codes = rng.integers(0, 4, size=(2, n)).astype(np.int32)
    y = rng.normal(size=n)
    hyper = kernel_prior(TreePrior(0.95, 2.0, 2), None, likelihood=True, model_code=L.MODEL_NORMAL_KNOWN_VARIANCE)
    chain = bart_chain(codes, np.array([False, False]), np.array([4, 4]), y, hyper, {"grow": 0.5, "prune": 0.5},
                       rng, 3, SIGMA_SAMPLED)
    assert chain.scratch.model == T.model_tag(L.MODEL_NORMAL_KNOWN_VARIANCE)
