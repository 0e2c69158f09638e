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
