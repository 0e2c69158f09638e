"""The leaf models of ``posterior/leaf_models.py``: one object per model, chosen from the stored
configuration, answering prediction, the pointwise log-likelihood and the model's posterior
variables; and a toy leaf model plugged in from outside the package's modules, touching only what
"Adding a leaf model" in ``docs/architecture.md`` names."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from scipy import special

import bartpy_suite as bps
from bartpy_suite._kernels import soft_tree as st
from bartpy_suite.errors import ArgumentError, FitFileError
from bartpy_suite.posterior import leaf_models as lm
from bartpy_suite.posterior import soft
from bartpy_suite.posterior.fit import CONFIG_ATTR, Fit

FAST = dict(chains=2, draws=40, tune=40, seed=3, progress=False)


class _Config:
    """Just enough of a ``Fit`` for ``leaf_model_for``: the configuration."""

    def __init__(self, **config):
        self.config = {"model_type": "bart", "response_kind": "numeric", **config}


@pytest.mark.parametrize(("config", "cls"), [
    ({"model_type": "bart", "leaf_model": "normal"}, lm.GaussianMeanShift),
    ({"model_type": "cart", "leaf_model": "mean_shift"}, lm.GaussianMeanShift),
    ({"model_type": "cart", "leaf_model": "mean_variance_shift"}, lm.MeanVarianceShift),
    ({"model_type": "cart", "response_kind": "categorical", "leaf_model": "dirichlet"}, lm.DirichletClasses),
    ({"response_kind": "categorical", "leaf_model": "probit"}, lm.Probit),
    ({"response_kind": "categorical", "leaf_model": "probit", "survival": {"grid": [1.0]}}, lm.DiscreteTimeSurvival),
    ({"response_kind": "categorical", "leaf_model": "probit", "survival": {"cause": 1, "causes": 2}},
     lm.CompetingRiskCause),
    ({"response_kind": "categorical", "leaf_model": "multinomial"}, lm.Multinomial),
    ({"response_kind": "categorical", "leaf_model": "ordinal"}, lm.Ordinal),
    ({"model_type": "soft_tree", "leaf_model": "soft_normal"}, lm.SoftNormal),
    ({"model_type": "soft_tree", "response_kind": "categorical", "leaf_model": "soft_dirichlet"}, lm.SoftDirichlet),
    # a configuration without leaf_model (optional in a file): implied by model type and response
    ({"model_type": "cart"}, lm.GaussianMeanShift),
    ({"model_type": "bart", "response_kind": "categorical"}, lm.Probit),
    ({"model_type": "soft_tree", "response_kind": "categorical"}, lm.SoftDirichlet),
])
def test_the_configuration_picks_the_leaf_model(config, cls):
    assert type(lm.leaf_model_for(_Config(**config))) is cls


def test_an_unknown_leaf_model_is_an_error_naming_it():
    with pytest.raises(ArgumentError, match=r"leaf_model 'no_such_model', which this version .* known: \["):
        lm.leaf_model_for(_Config(leaf_model="no_such_model"))


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="'normal' is already registered"):
        lm.register(type("Again", (lm.LeafModel,), {"names": ("normal",)}))


def test_soft_routing_modes_come_from_the_sampler_registry():
    """``posterior/soft.py`` names no sampler: the routing mode is the one the registry's builder binds."""
    assert soft.samplers_with_mode(st.MODE_DF) == ["hmc_df"]
    assert soft.samplers_with_mode(st.MODE_DFI) == ["hmc_dfi"]
    assert soft.routing_mode(_Config(sampler="hmc_dfi")) == st.MODE_DFI
    with pytest.raises(ArgumentError, match="sampler 'cgm' is not a registered soft-tree sampler"):
        soft.routing_mode(_Config(sampler="cgm"))


# -- a toy leaf model plugged in from outside ----------------------------------------------------
class LaplaceNoise(lm.LeafModel):
    """Toy regression leaf model: the same sum of trees, Laplace noise with sd sigma (scale
    b = sigma / sqrt 2). It owns ``sigma`` and adds a summary row for ``b``."""

    names = ("toy_laplace",)
    posterior_variables = ("sigma",)

    def pointwise_log_likelihood(self) -> np.ndarray:
        y = self.fit.idata["observed_data"]["y"].values
        f = self.draws(self.training_inputs())
        b = self.fit.posterior["sigma"].values.reshape(-1, 1) / np.sqrt(2.0)
        return -np.log(2.0 * b) - np.abs(y[None, :] - f) / b

    def summary_rows(self, row) -> dict:
        return {"b": row(self.fit.posterior["sigma"].values / np.sqrt(2.0))}


@pytest.fixture
def toy_registered():
    lm.register(LaplaceNoise)
    try:
        yield LaplaceNoise
    finally:
        del lm.LEAF_MODELS["toy_laplace"]


@pytest.fixture(scope="module")
def bart_fit(cgm):
    return bps.bart("y ~ x1 + x2", data=cgm.head(60), trees=5, log_likelihood=False, **FAST)


def _with_leaf_model(fit: Fit, name: str) -> Fit:
    """``fit``'s DataTree with ``config["leaf_model"] = name``: what a model writing that leaf
    model stores (nothing of ``fit`` modified)."""
    idata = fit.idata.copy()
    const = idata["constant_data"].to_dataset()
    config = dict(fit.config, leaf_model=name)
    const.attrs = {**const.attrs, CONFIG_ATTR: json.dumps(config)}
    idata["constant_data"] = xr.DataTree(const)
    return Fit(idata, design=fit.design)


def test_a_toy_leaf_model_answers_predictions_log_likelihood_and_summary(bart_fit, toy_registered, cgm, tmp_path):
    toy = _with_leaf_model(bart_fit, "toy_laplace")
    assert type(toy.leaf_model) is LaplaceNoise and type(bart_fit.leaf_model) is lm.GaussianMeanShift
    # prediction: the default draws (the sum of trees) and noise sd are inherited, so f(x) equals the
    # normal model's exactly
    new = cgm.tail(7)
    np.testing.assert_array_equal(toy.predict(new).to_numpy(), bart_fit.predict(new).to_numpy())
    # the log-likelihood is the toy's: Laplace densities computed here from f and sigma
    group = toy.add_log_likelihood()
    f = bart_fit.function_samples()
    b = bart_fit.posterior["sigma"].values.reshape(-1, 1) / np.sqrt(2.0)
    y = bart_fit.idata["observed_data"]["y"].values
    expect = (-np.log(2.0 * b) - np.abs(y - f) / b).reshape(group["y"].shape)
    np.testing.assert_allclose(group["y"].values, expect, rtol=1e-13)
    normal = bart_fit.leaf_model.pointwise_log_likelihood()
    assert not np.allclose(normal, expect.reshape(normal.shape))  # and not the normal model's
    # the summary has the toy's own row next to the common ones
    table = toy.summary()
    assert table.index[0] == "sigma" and table.index[-1] == "b"
    assert table.loc["b", "mean"] == pytest.approx(table.loc["sigma", "mean"] / np.sqrt(2.0), rel=1e-12)
    # a saved file builds the same leaf model (chosen from the stored configuration)
    toy.to_netcdf(tmp_path / "toy.nc")
    loaded = bps.load(tmp_path / "toy.nc")
    assert type(loaded.leaf_model) is LaplaceNoise
    np.testing.assert_array_equal(loaded.idata["log_likelihood"]["y"].values, group["y"].values)


def test_a_file_naming_an_unknown_leaf_model_is_refused(bart_fit, toy_registered, tmp_path):
    _with_leaf_model(bart_fit, "toy_laplace").to_netcdf(tmp_path / "toy.nc")
    del lm.LEAF_MODELS["toy_laplace"]  # a version without the toy reads the file
    try:
        with pytest.raises(FitFileError, match=r"leaf_model 'toy_laplace' is not a leaf model of this version"):
            bps.load(tmp_path / "toy.nc")
    finally:
        lm.LEAF_MODELS["toy_laplace"] = LaplaceNoise  # the fixture removes it


def test_a_leaf_model_must_match_the_response(bart_fit, tmp_path):
    """A regression fit whose configuration names a classification leaf model is refused on load."""
    idata = bart_fit.idata.copy()
    const = idata["constant_data"].to_dataset()
    const.attrs = {**const.attrs, CONFIG_ATTR: json.dumps(dict(bart_fit.config, leaf_model="probit"))}
    idata["constant_data"] = xr.DataTree(const)
    Fit(idata).to_netcdf(tmp_path / "bad.nc")
    with pytest.raises(FitFileError, match=r"leaf_model 'probit' does not model a numeric response"):
        bps.load(tmp_path / "bad.nc")


def test_probit_draws_are_phi_of_the_sum_of_trees(cgm):
    """The probit leaf model's class probabilities from its latent f: [1 - Phi(f), Phi(f)]."""
    df = cgm.head(60).assign(yb=(cgm["y"].head(60) > cgm["y"].median()).astype(int))
    fit = bps.bart("C(yb) ~ x1 + x2", data=df, trees=4, **FAST)
    codes = fit.prepare(None)[0]
    p = fit.leaf_model.draws(codes)
    np.testing.assert_array_equal(p[..., 1], special.ndtr(fit.sum_of_trees(codes)))
    np.testing.assert_array_equal(p[..., 0], 1.0 - p[..., 1])
    assert fit.leaf_model.partial_dependence_refusal() is None


def test_a_copy_or_a_replaced_configuration_gets_its_own_leaf_model(bart_fit):
    """The leaf model answers for the fit it belongs to: a copy of the fit gets one of its own,
    and replacing ``config`` chooses again (``Fit.leaf_model``)."""
    import copy

    twin = copy.copy(bart_fit)
    assert twin.leaf_model.fit is twin and bart_fit.leaf_model.fit is bart_fit
    twin.config = dict(bart_fit.config, leaf_model="mean_variance_shift")
    assert type(twin.leaf_model) is lm.MeanVarianceShift and type(bart_fit.leaf_model) is lm.GaussianMeanShift
