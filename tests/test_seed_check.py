"""Bad seeds give a clear error naming the argument before any sampling."""

from __future__ import annotations

import numpy as np
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError


@pytest.mark.parametrize("seed", ["abc", 1.5, -3, True, np.random.default_rng(1)])
def test_bad_seed_is_an_argument_error(seed):
    df = bps.datasets.load("cgm1998")
    with pytest.raises(ArgumentError, match=r"^seed must be None, an integer >= 0 or a numpy.random.SeedSequence, got "):
        bps.cart("y ~ x1", data=df, seed=seed)


def test_numpy_integer_and_seed_sequence_are_accepted():
    assert bps.BayesianCART(seed=np.int64(4)).seed == 4
    ss = np.random.SeedSequence(5)
    assert bps.BART(seed=ss).seed is ss
