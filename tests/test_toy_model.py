"""The steps of ``docs/architecture.md`` "Adding a model", followed for a toy model.

The toy model ``toy_cart`` is regression Bayesian CART with the mean-shift leaf model written
again in a few lines: it reuses ``CartProblem`` (so ``problem_kind = "cart"``: the samplers that fit
CART fit it, step 2 is not needed) and the ``mean_shift`` leaf model (so nothing in ``posterior/``,
step 5). Step 1 is the class below, steps 3 and 4 are the alias (``api._formula_alias``) and the
scikit-learn estimator (``sklearn._estimator``) built for it; ``models/__init__.py`` would import
its module, here the fixture registers it and takes it out of the registry again.

Check: the toy and ``bps.cart`` with the same settings give bit-identical draws (they are the same
posterior and the same chains), through the alias, after a save and load, and through scikit-learn.
"""

from __future__ import annotations

import contextlib
import inspect
import io

import numpy as np
import pytest

import bartpy_suite as bps
from bartpy_suite import api
from bartpy_suite._validation import NaAction, check_na_action
from bartpy_suite.cli import main
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models import MODELS
from bartpy_suite.models._base import TreeModel
from bartpy_suite.models.registry import register
from bartpy_suite.models.settings import RUN_KEYWORDS, with_run_keywords
from bartpy_suite.priors import NormalLeafPrior, default_lambda, kernel_prior
from bartpy_suite.samplers import CartProblem, samplers_for

pytest.importorskip("sklearn")
from bartpy_suite import sklearn as bsk  # noqa: E402


@with_run_keywords
class ToyCART(TreeModel):
    """Toy regression tree (a test model): Bayesian CART's mean-shift model with its default prior.

    Parameters
    ----------
    alpha, beta : float
        Tree prior p_SPLIT = alpha (1 + depth)^-beta.
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    model_type = "toy_cart"
    problem_kind = "cart"
    run_defaults = {"sampler": "cgm", "draws": 300}

    def __init__(self, *, alpha=0.95, beta=0.5, **run):
        self._init_run(run)
        self._init_tree_prior(alpha, beta, 5, None)

    def fit(self, X, y, *, is_categorical=None, n_levels=None, class_labels=None, predictor_names=None, design=None,
            na_action="raise"):
        """Sample the posterior of trees given ``X`` (n, p) and a numeric ``y``."""
        if class_labels is not None:
            raise ArgumentError("toy_cart fits a numeric response only")
        na_action = check_na_action(na_action, (NaAction.DROP, NaAction.RAISE))
        x, y, is_cat, names, binned = self._prepare(X, y, is_categorical, n_levels, predictor_names, na_action)
        yw = np.asarray(y, dtype=np.float64)
        center, scale = float(np.mean(yw)), float(np.std(yw))
        leaf = NormalLeafPrior(1 / 3, center, 3.0, default_lambda(yw, 3.0))
        config = self._base_config("numeric", names, na_action)
        config.update(leaf_model="mean_shift", center=center, scale=scale, a=leaf.a, mu_bar=leaf.mu_bar, nu=leaf.nu,
                      lam=leaf.lam)
        prior = kernel_prior(self._fit_tree_prior(na_action), leaf, likelihood=self.likelihood, center=center,
                             scale=scale)
        problem = CartProblem(binned.codes, is_cat, binned.nbins, (yw - center) / scale, np.zeros(len(yw), np.int64),
                              prior, predictor_names=tuple(names))
        return self._sample(problem, binned=binned, y=y, config=config, design=design)


@pytest.fixture
def toy():
    """Step 3: the registry entry (``@register``), the alias and the estimator; removed afterwards."""
    register(ToyCART)
    try:
        yield api._formula_alias("toy_cart"), bsk._estimator("ToyRegressor", "toy_cart", bsk._Regressor, "Toy.")
    finally:
        del MODELS["toy_cart"]


RUN = dict(chains=2, tune=200, seed=5, progress=False, check_mixing=False)


def test_toy_model_is_fitted_like_the_model_it_copies(cgm, toy, tmp_path):
    alias, _ = toy
    fit = alias("y ~ x1 + x2", data=cgm, **RUN)
    ref = bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", draws=300, **RUN)
    assert fit.config["model_type"] == "toy_cart" and fit.config["na_action"] == "drop"
    for name in ("node_var", "node_cut", "node_value"):
        np.testing.assert_array_equal(fit.idata["trees"][name].values, ref.idata["trees"][name].values)
    np.testing.assert_array_equal(fit.posterior["sigma"].values, ref.posterior["sigma"].values)
    path = tmp_path / "toy.nc"
    fit.to_netcdf(path)
    np.testing.assert_array_equal(bps.load(path).predict(cgm.head(8))["mean"], ref.predict(cgm.head(8))["mean"])


def test_toy_model_gets_the_run_keywords_docs_and_front_doors(cgm, toy):
    alias, estimator = toy
    params = list(inspect.signature(alias).parameters)
    assert params[:5] == ["formula", "data", "na_action", "alpha", "beta"] and params[5:] == list(RUN_KEYWORDS)
    assert inspect.signature(alias).parameters["draws"].default == 300
    for name in samplers_for("cart"):
        assert f'``"{name}"``' in alias.__doc__
    with pytest.raises(ArgumentError, match=r"unknown sampler 'hmc_df'; valid options: 'cgm', 'grow_prune'"):
        alias("y ~ x1", data=cgm, sampler="hmc_df", **RUN)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["fit", "--help"]) == 0
    fit_help = " ".join(out.getvalue().split())
    assert "toy_cart" in fit_help and "(default cgm)" in fit_help
    x, y = cgm[["x1"]].to_numpy(), cgm["y"].to_numpy()
    sk = estimator(sampler="grow_prune", draws=50, **{**RUN, "tune": 50}).fit(x, y)
    direct = ToyCART(sampler="grow_prune", draws=50, **{**RUN, "tune": 50}).fit(x, y)
    np.testing.assert_allclose(sk.predict(x[:5]), direct.predict(x[:5], kind="mean")["mean"].to_numpy(), rtol=1e-12)


def test_toy_model_unregisters():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["fit", "--help"])
    assert "toy_cart" not in MODELS and "toy_cart" not in out.getvalue()
