"""The kernels' typed records (``_kernels/records.py``) and the prior record the models build
(``priors.kernel_prior``): every field has its declared type whatever the caller passed (a float
field given an int would compile a second copy of every kernel), and the prior says what the
models' settings say. Nothing here compiles."""

from __future__ import annotations

import numpy as np
import pytest

from bartpy_suite._kernels import likelihood as L
from bartpy_suite._kernels.records import Prior, make_prior, make_target, make_window, typed_prior
from bartpy_suite.priors import DirichletLeafPrior, NormalLeafPrior, TreePrior, kernel_prior

FLOATS = ("alpha", "beta", "a", "mu_bar", "nu", "lam", "tau2", "class_alpha", "lg_shape", "lg_rate", "inv_temp",
          "prior_heat")
INTS = ("min_leaf", "model", "n_classes")
BOOLS = ("na_split", "likelihood")


def assert_typed(prior: Prior) -> None:
    assert set(FLOATS + INTS + BOOLS) == set(Prior._fields)
    for name in FLOATS:
        assert type(getattr(prior, name)) is float, name
    for name in INTS:
        assert type(getattr(prior, name)) is int, name
    for name in BOOLS:
        assert type(getattr(prior, name)) is bool, name


def test_make_prior_converts_every_field():
    p = make_prior(alpha=np.float32(0.9), beta=2, min_leaf=np.int32(3), na_split=np.bool_(True), likelihood=1,
                   model=np.int64(L.MODEL_MEAN_SHIFT), n_classes=np.int16(1), tau2=np.float64(0.5))
    assert_typed(p)
    assert (p.beta, p.min_leaf, p.na_split, p.likelihood, p.tau2) == (2.0, 3, True, True, 0.5)


def test_typed_prior_after_replace():
    p = typed_prior(make_prior()._replace(inv_temp=1, prior_heat=np.float32(0.25), likelihood=0))
    assert_typed(p)
    assert (p.inv_temp, p.prior_heat, p.likelihood) == (1.0, 0.25, False)


def test_target_and_window():
    t = make_target(make_prior(), 4)
    assert t.sigma2.dtype == np.float64 and t.sigma2.shape == (1,) and t.sigma2[0] == 4.0
    assert make_target(make_prior()).sigma2[0] == 1.0  # a single tree's chain: no known-variance leaf model
    w = make_window(np.int32(2), np.int64(5), 3.0, True)
    assert tuple(map(type, w)) == (int,) * 4 and tuple(w) == (2, 5, 3, 1)


def test_kernel_prior_standardises_a_normal_leaf_prior():
    """mu_bar and lam are expressed on the standardised response (y - center) / scale."""
    p = kernel_prior(TreePrior(0.9, 1.5, 4, split_missing=True), NormalLeafPrior(0.3, 7.0, 3.0, 8.0),
                     likelihood=True, center=1.0, scale=2.0)
    assert_typed(p)
    assert (p.alpha, p.beta, p.min_leaf, p.na_split, p.likelihood) == (0.9, 1.5, 4, True, True)
    assert (p.a, p.mu_bar, p.nu, p.lam) == (0.3, 3.0, 3.0, 2.0)
    assert p.model == L.MODEL_MEAN_SHIFT and (p.inv_temp, p.prior_heat, p.n_classes) == (1.0, 0.0, 1)
    per_leaf = kernel_prior(TreePrior(), NormalLeafPrior(1.0, 0.0, 3.0, 1.0, per_leaf_sigma=True), likelihood=False)
    assert per_leaf.model == L.MODEL_MEAN_VARIANCE_SHIFT and per_leaf.likelihood is False


@pytest.mark.parametrize("leaf, model", [(DirichletLeafPrior(0.5, 3), L.MODEL_CLASSIFICATION), (None, 0)])
def test_kernel_prior_other_leaf_models(leaf, model):
    p = kernel_prior(TreePrior(), leaf, likelihood=True)
    assert_typed(p)
    assert p.model == model
    if leaf is not None:
        assert (p.class_alpha, p.n_classes) == (0.5, 3)


def test_kernel_prior_of_the_sum_of_trees_models():
    """BART: tau2, nu and lam as given; log-linear BART: the Gamma prior of a leaf factor."""
    p = kernel_prior(TreePrior(), None, likelihood=True, tau2=0.04, model_code=L.MODEL_NORMAL_KNOWN_VARIANCE,
                     nu=3, lam=0.1)
    assert_typed(p)
    assert (p.tau2, p.nu, p.lam, p.model) == (0.04, 3.0, 0.1, L.MODEL_NORMAL_KNOWN_VARIANCE)
    q = kernel_prior(TreePrior(), None, likelihood=True, model_code=L.MODEL_LOG_GAMMA, lg_shape=2.5, lg_rate=1.5)
    assert (q.lg_shape, q.lg_rate, q.model) == (2.5, 1.5, L.MODEL_LOG_GAMMA)


def test_a_prior_is_immutable():
    p = make_prior()
    with pytest.raises(AttributeError):
        p.alpha = 0.5  # type: ignore[misc]
