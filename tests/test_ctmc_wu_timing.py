"""The CPU-time measure of ``benchmarks/ctmc_wu.py`` (ESS per CPU second of sampling).

The benchmark wraps the runner's chunk loop to read the sampling thread's CPU time. Checked:
the wrapper leaves the draws bit-identical to a plain fit with the same seed, it is removed again
afterwards (also when the fit fails), and the time it reports is that of the sampling alone:
positive, and equal (to 1 ms plus 5%, clock granularity and the chunk loop's own Python) to
the process CPU time minus the main thread's, the independent measure vignettes 05 and 06 use.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from _benchmarks import load_benchmark

import bartpy_suite as bps
from bartpy_suite.models import _runner


@pytest.fixture(scope="module")
def ctmc_wu():
    return load_benchmark("ctmc_wu")


def test_timed_fit_draws_are_those_of_a_plain_fit(ctmc_wu):
    data = bps.datasets.simulate_wu2007(60, seed=3)
    kw = dict(data=data, sampler="ctmc", chains=1, draws=200, tune=20, seed=5)
    fit, cpu = ctmc_wu.timed_cart(**kw)
    plain = bps.cart("y ~ x1 + x2 + x3", progress=False, threads=1, check_mixing=False, log_likelihood=False, **kw)
    np.testing.assert_array_equal(fit.posterior["sigma"].values, plain.posterior["sigma"].values)
    np.testing.assert_array_equal(fit.weights.values, plain.weights.values)
    assert _runner.advance is ctmc_wu._plain_advance
    assert cpu > 0


def test_sampling_cpu_matches_process_minus_main_thread(ctmc_wu):
    data = bps.datasets.simulate_wu2007(300, seed=1)
    ctmc_wu.timed_cart(data=data, sampler="ctmc", chains=1, draws=20, tune=5, seed=0)  # compiled before timing
    process0, main0 = time.process_time(), time.thread_time()
    _, cpu = ctmc_wu.timed_cart(data=data, sampler="ctmc", chains=1, draws=3000, tune=100, seed=1)
    other_threads = (time.process_time() - process0) - (time.thread_time() - main0)
    assert cpu == pytest.approx(other_threads, rel=0.05, abs=1e-3)


def test_wrapper_removed_when_the_fit_fails(ctmc_wu):
    data = bps.datasets.simulate_wu2007(60, seed=3)
    with pytest.raises(bps.errors.BartpySuiteError):
        ctmc_wu.timed_cart(data=data, sampler="ctmc", chains=1, draws=10, tune=0, seed=0,
                           sampler_options={"no_such_option": 1})
    assert _runner.advance is ctmc_wu._plain_advance
