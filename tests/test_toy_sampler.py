"""The steps of ``docs/architecture.md`` "Adding a sampler", followed for a toy sampler.

The toy is written in pure Python (step 2, kernels, is skipped: the guide allows a chain whose
``run`` is Python) and touches only what the guide names: a ``TreeChain`` subclass (step 1) and
its registry entry (step 3, here in this module instead of a module of ``samplers/``, which
``samplers/__init__.py`` would import, step 4). It is then fitted through ``bps.cart`` with
``sampler="toy"`` like any other sampler (step 5) and removed from the registry again.

The toy keeps the tree at the stump (one leaf) and draws the leaf's (sigma^2, mu) from their exact
joint posterior under CART's mean-shift prior: sigma^2 ~ IG(nu/2, nu lam/2), mu | sigma ~ N(mu_bar,
sigma^2 / a), y_i ~ N(mu, sigma^2). Its draws are therefore independent draws of the posterior of
the one-leaf model, which the test computes in closed form on the original scale of y, apart from
the package (the model standardises y and the prior before the chain sees them).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import bartpy_suite as bps
from bartpy_suite._kernels.record import record_tree_now
from bartpy_suite.errors import ArgumentError
from bartpy_suite.samplers import SAMPLERS, SamplerSpec, register, samplers_for
from bartpy_suite.samplers.single_tree import TreeChain


class ToyStumpChain(TreeChain):
    """Step 1: a chain is a ``TreeChain`` (CART) with its own ``run``; ``allocate``, ``collect``
    and the draw buffers are the base class's."""

    def __init__(self, problem, rng):
        super().__init__(problem, rng)
        h = self.prior  # _kernels/records.Prior
        n = self.y.shape[0] if h.likelihood else 0  # likelihood=False: the prior
        ybar = float(self.y.mean()) if n else 0.0
        a, mu_bar, nu, lam = h.a, h.mu_bar, h.nu, h.lam
        scatter = float(((self.y - ybar) ** 2).sum()) + n * a / (n + a) * (ybar - mu_bar) ** 2 if n else 0.0
        self.shape, self.rate = 0.5 * (n + nu), 0.5 * (scatter + nu * lam)
        self.mean, self.precision = (a * mu_bar + n * ybar) / (a + n), a + n
        # log p(stump) + log p(y | stump) on the working scale (constant: the tree never changes);
        # the root of these data has split rules, so the stump's prior is 1 - alpha
        log_marginal = (-0.5 * n * math.log(math.pi) + 0.5 * math.log(a / (a + n))
                        + special.gammaln(self.shape) - special.gammaln(0.5 * nu)
                        + 0.5 * nu * math.log(nu * lam) - self.shape * math.log(scatter + nu * lam)) if n else 0.0
        self.log_posterior = math.log1p(-h.alpha) + log_marginal

    def run(self, first_iter, n_iter, tune, thin):
        n_out = self.draws.n_leaves.shape[0]
        for it in range(first_iter, first_iter + n_iter):
            sigma2 = 1.0 / self.rng.gamma(self.shape, 1.0 / self.rate)
            mu = self.rng.normal(self.mean, math.sqrt(sigma2 / self.precision))
            # the kept-iteration rule of every runner (_kernels/kept.py)
            if it < tune or (it - tune) % thin != 0 or (it - tune) // thin >= n_out:
                continue
            d = (it - tune) // thin
            self.tree.value[0] = mu
            self.draws.n_leaves[d], self.draws.depth[d] = 1, 0
            self.draws.sigma[d], self.draws.log_posterior[d] = math.sqrt(sigma2), self.log_posterior
            if not record_tree_now(self.tree, self.store, d, 0, self.order, self.scratch.stack):
                self.record_pending(d)  # the store was full: grow it and record


@pytest.fixture
def toy():
    """Step 3: the registry entry (no options, no statistics of its own); removed afterwards."""
    spec = register(SamplerSpec("toy", "toy", "stump with exact leaf draws (a test)",
                                builders={"cart": lambda problem, options, rng: ToyStumpChain(problem, rng)},
                                statistics={"cart": ()}))
    yield spec
    del SAMPLERS["toy"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20261127)
    return pd.DataFrame({"x": rng.uniform(size=30), "y": rng.normal(3.0, 2.0, size=30)})


PRIOR = dict(a=0.5, mu_bar=1.0, nu=4.0, lam=2.0)
RUN = dict(chains=2, draws=2000, tune=0, seed=11, progress=False, check_mixing=False, log_likelihood=False)


def exact_posterior(y: np.ndarray, a: float, mu_bar: float, nu: float, lam: float):
    """(shape, rate) of sigma^2 | y ~ IG and (mean, precision factor) of mu | sigma^2, y, on y's scale."""
    n, ybar = y.size, y.mean()
    scatter = ((y - ybar) ** 2).sum() + n * a / (n + a) * (ybar - mu_bar) ** 2
    return 0.5 * (n + nu), 0.5 * (scatter + nu * lam), (a * mu_bar + n * ybar) / (a + n), a + n


def test_toy_sampler_fits_through_bps_cart_and_matches_the_exact_posterior(data, toy):
    assert "toy" in samplers_for("cart") and "toy" not in samplers_for("bart")
    fit = bps.cart("y ~ x", data=data, sampler="toy", **PRIOR, **RUN)
    assert fit.config["sampler"] == "toy"
    assert (fit.posterior["n_leaves"].values == 1).all()
    shape, rate, mean, precision = exact_posterior(data["y"].to_numpy(), **PRIOR)
    sigma2 = fit.posterior["sigma"].values.reshape(-1) ** 2
    n_draws = sigma2.size
    # sigma^2: 4000 independent draws against IG(shape, rate). Kolmogorov-Smirnov at the fixed seed;
    # p > 0.001 fails about once in 1000 seeds for a correct sampler, while drawing sigma^2 from the
    # prior (or with the response unstandardised) gives p ~ 0.
    assert stats.kstest(sigma2, stats.invgamma(shape, scale=rate).cdf).pvalue > 1e-3
    # the posterior mean of sigma, E sqrt(X) = sqrt(rate) Gamma(shape - 1/2) / Gamma(shape), within 4
    # Monte Carlo standard errors of independent draws (sd / sqrt(4000))
    e_sigma = math.sqrt(rate) * math.exp(special.gammaln(shape - 0.5) - special.gammaln(shape))
    sd_sigma = math.sqrt(rate / (shape - 1) - e_sigma**2)
    got = float(fit.posterior["sigma"].mean())
    assert abs(got - e_sigma) < 4 * sd_sigma / math.sqrt(n_draws), (got, e_sigma)
    # f(x) is the leaf mean mu at every x: its posterior mean (a mu_bar + n ybar) / (a + n), within 4
    # standard errors (Var mu = E sigma^2 / (a + n)), read through Fit.predict from the stored trees
    predicted = fit.predict(data.head(3), kind="mean")["mean"].to_numpy()
    sd_mu = math.sqrt(rate / (shape - 1) / precision)
    assert np.allclose(predicted, predicted[0])
    assert abs(predicted[0] - mean) < 4 * sd_mu / math.sqrt(n_draws), (predicted[0], mean)


def test_toy_log_posterior_is_the_packages(data, toy):
    """The toy's recorded log posterior (computed above in Python) is the one the kernels compute:
    cgm's draws at the stump carry the same value (alpha = 0.3 keeps most of cgm's draws there)."""
    settings = dict(alpha=0.3, beta=2.0, **PRIOR, **{**RUN, "chains": 1, "draws": 300})
    toy_lp = bps.cart("y ~ x", data=data, sampler="toy", **settings).sample_stats["log_posterior"].values
    cgm = bps.cart("y ~ x", data=data, sampler="cgm", **settings)
    stump = cgm.posterior["n_leaves"].values == 1
    assert stump.sum() > 100
    np.testing.assert_allclose(cgm.sample_stats["log_posterior"].values[stump], toy_lp[0, 0], rtol=1e-12)
    assert np.unique(toy_lp).size == 1


def test_toy_sampler_is_an_ordinary_registry_entry(data, toy):
    # the model's keyword checks reach it: it has no options and no moves
    with pytest.raises(ArgumentError, match=r"sampler 'toy' has no option 'particles'; its options are: none"):
        bps.cart("y ~ x", data=data, sampler="toy", sampler_options={"particles": 5}, **RUN)
    with pytest.raises(ArgumentError, match=r"sampler 'toy' has no moves"):
        bps.cart("y ~ x", data=data, sampler="toy", moves={"grow": 1, "prune": 1}, **RUN)
    # a model it has no builder for names the samplers that do
    with pytest.raises(ArgumentError, match=r"unknown sampler 'toy'; valid options: 'cgm', 'grow_prune'"):
        bps.bart("y ~ x", data=data, sampler="toy", **RUN)
    # the docstring's sampler list is read from the registry when the class is built; the live one
    # is samplers_for
    assert "toy" in samplers_for("cart")


def test_toy_sampler_unregisters():
    # runs after the tests above (file order): the fixture took it out of the registry again
    assert "toy" not in SAMPLERS


def test_statistics_may_be_left_out_of_the_registry_entry(data):
    """A sampler with no statistics of its own may leave ``statistics`` at its default (an empty
    mapping), as the guide's step 3 and ``SamplerSpec`` allow: the fit then has only the draws'
    own statistics (a KeyError 'cart' once the chains had run, before the fix)."""
    register(SamplerSpec("toy_plain", "toy", "stump with exact leaf draws, no statistics entry (a test)",
                         builders={"cart": lambda problem, options, rng: ToyStumpChain(problem, rng)}))
    try:
        fit = bps.cart("y ~ x", data=data, sampler="toy_plain", **{**RUN, "draws": 20})
    finally:
        del SAMPLERS["toy_plain"]
    assert fit.config["sampler"] == "toy_plain" and fit.posterior.sizes["draw"] == 20
    assert "log_posterior" in fit.sample_stats
