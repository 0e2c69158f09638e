"""``pg`` with ``ess_threshold`` < 1 (resample only when the weights' Kish ESS is low): exact-start
invariance against the enumerated posteriors of ``tests/exact``, the same checks and tolerances as
``test_particle.py`` (G-test p > 1e-4, TV within 4.5 null standard deviations), and the options."""

import pytest

from bartpy_suite.errors import ArgumentError

try:
    from test_particle import pg_exact_start
except ImportError:  # run from the repository root
    from tests.test_particle import pg_exact_start


@pytest.mark.parametrize("dataset,model,options", [
    ("grid", "mean_shift", {"particles": 10, "ess_threshold": 0.5}),
    ("factor", "mean_variance_shift", {"particles": 5, "resampling": "multinomial", "ess_threshold": 0.3}),
])
def test_pg_ess_threshold_exact_start_invariance(dataset, model, options):
    pg_exact_start(dataset, model, options, 5_000)


def test_pg_ess_threshold_prior_exact_start_invariance():
    pg_exact_start("grid", None, {"particles": 10, "ess_threshold": 0.5}, 5_000, likelihood=False)


def test_pg_ess_threshold_refuses_ancestor_sampling():
    import bartpy_suite as bps

    df = bps.datasets.simulate_hypercube(2, 5, seed=0)
    with pytest.raises(ArgumentError, match="ancestor_sampling.*ess_threshold"):
        bps.cart("y ~ .", data=df, sampler="pg", chains=1, draws=2, tune=0, seed=0, progress=False,
                 sampler_options={"ess_threshold": 0.5, "ancestor_sampling": True})
    with pytest.raises(ArgumentError, match="ess_threshold"):
        bps.cart("y ~ .", data=df, sampler="pg", chains=1, draws=2, tune=0, seed=0, progress=False,
                 sampler_options={"ess_threshold": 1.5})


@pytest.mark.slow
def test_pg_bart_geweke_ess_threshold(monkeypatch):
    """Geweke joint-distribution test of a pg BART sweep with ``ess_threshold=0.5`` (sigma
    sampled, so the BART path of the option is checked with the likelihood on), exactly as
    ``test_particle.test_pg_bart_geweke``: |z_k| < 4 for each of 8 functions (Bonferroni level
    about 5e-4), 20,000 MC draws, 50,000 SC sweeps after 2,000 burn-in."""
    import numpy as np

    from bartpy_suite.samplers.particle import PgBartChain
    from bartpy_suite.samplers.problems import BartProblem

    try:
        import test_geweke_bart as G
    except ImportError:  # tests/ imported as a package
        from tests import test_geweke_bart as G

    def pg_chain(codes, is_cat, nbins, y, hyper, moves, rng, n_trees, sigma_mode, offset=0.0):
        return PgBartChain(BartProblem(codes, is_cat, nbins, np.asarray(y, dtype=float), hyper, n_trees, sigma_mode,
                                       offset), 5, "systematic", rng, ess_threshold=0.5)

    monkeypatch.setattr(G, "bart_chain", pg_chain)
    binned = G.problem()
    mc = G.marginal_conditional(binned, 20_000, np.random.default_rng(1))
    sc = G.successive_conditional(binned, "cgm", 50_000, 2_000, np.random.default_rng(2))
    G.assert_joint_agrees(mc, sc, G.NAMES, "pg ess_threshold=0.5")
