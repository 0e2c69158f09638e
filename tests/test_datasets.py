"""Tests of bartpy_suite.datasets: shipped files, simulators and mean functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bartpy_suite import datasets
from bartpy_suite.errors import ArgumentError


def test_available_lists_every_set_with_a_description():
    listed = datasets.available()
    assert list(listed) == [
        "breast_cancer", "cgm1998", "cgm_rjhmc", "hypercube2", "hypercube3", "hypercube4",
        "hypercube5", "hypercube7", "iris", "raisin", "wine", "wu2007",
    ]
    # iterating gives the names (callers that treated it as a list keep working)
    assert "cgm1998" in listed and sorted(listed) == list(listed)
    for name, text in listed.items():
        assert isinstance(text, str) and 20 < len(text) < 160 and "\n" not in text, name


def test_load_cgm1998_shape_and_dtypes():
    df = datasets.load("cgm1998")
    assert df.shape == (800, 3)
    assert list(df.columns) == ["x1", "x2", "y"]
    assert df["x1"].dtype == np.float64
    assert df["y"].dtype == np.float64
    assert isinstance(df["x2"].dtype, pd.CategoricalDtype)
    assert list(df["x2"].cat.categories) == ["A", "B", "C", "D"]
    assert not df["x2"].cat.ordered
    assert df["x1"].between(0.0, 10.0).all()
    assert set(df["x2"]) == {"A", "B", "C", "D"}
    assert not df.isna().any().any()


def test_load_wu2007_shape_and_dtypes():
    df = datasets.load("wu2007")
    assert df.shape == (300, 4)
    assert list(df.columns) == ["x1", "x2", "x3", "y"]
    assert (df.dtypes == np.float64).all()
    assert not df.isna().any().any()


@pytest.mark.parametrize("name", ["cgm1998", "wu2007", "cgm_rjhmc"])
def test_shipped_csv_equals_simulation_with_documented_seed(name):
    simulate = getattr(datasets, f"simulate_{name}")
    expected = simulate(seed=datasets.SHIPPED_SEEDS[name])
    pd.testing.assert_frame_equal(datasets.load(name), expected, check_exact=True)
    # the defaults are the documented seed and the paper's size
    pd.testing.assert_frame_equal(simulate(), expected, check_exact=True)


@pytest.mark.parametrize("d", [2, 3, 4, 5, 7])
def test_shipped_hypercubes_equal_simulation_with_documented_seed(d):
    expected = datasets.simulate_hypercube(d, 10, seed=datasets.SHIPPED_SEEDS[f"hypercube{d}"])
    assert datasets.SHIPPED_SEEDS[f"hypercube{d}"] == 1000 * d
    pd.testing.assert_frame_equal(datasets.load(f"hypercube{d}"), expected, check_exact=True)
    assert len(expected) == 10 * 2**d


def test_regenerate_writes_the_shipped_bytes(tmp_path):
    from bartpy_suite._data_catalog import data_files

    paths = datasets.regenerate(tmp_path)
    assert [p.name for p in paths] == [
        "cgm1998.csv", "cgm_rjhmc.csv", "hypercube2.csv", "hypercube3.csv", "hypercube4.csv",
        "hypercube5.csv", "hypercube7.csv", "wu2007.csv",
    ]
    for path in paths:
        assert path.read_bytes() == data_files().joinpath(path.name).read_bytes(), path.name
    assert datasets.regenerate(tmp_path, names=["wu2007"]) == [tmp_path / "wu2007.csv"]
    with pytest.raises(ArgumentError, match=r"names=\['iris'\] are not simulated data sets; valid names are: cgm1998, "):
        datasets.regenerate(tmp_path, names=["iris"])


def test_load_returns_a_fresh_copy():
    a = datasets.load("cgm1998")
    a.loc[0, "y"] = 1e9
    assert datasets.load("cgm1998").loc[0, "y"] != 1e9


def test_unknown_name_lists_valid_names():
    with pytest.raises(ArgumentError, match=r"unknown data set name='irises'; valid names are: breast_cancer, cgm1998, .*, wu2007$"):
        datasets.load("irises")
    with pytest.raises(ArgumentError, match="valid names are"):
        datasets.load(None)  # type: ignore[arg-type]


# --- CGM 1998 (thesis eq. 3.18) -------------------------------------------------------------

@pytest.mark.parametrize(
    "x1, x2, f",
    [
        # x2 in {A, B}: 8 if x1 <= 5 else 2
        (0.0, "A", 8.0), (5.0, "A", 8.0), (5.0001, "A", 2.0), (10.0, "B", 2.0), (2.5, "B", 8.0),
        # x2 in {C, D}: 1 if x1 <= 3, 5 if 3 < x1 <= 7, 8 if x1 > 7
        (0.0, "C", 1.0), (3.0, "C", 1.0), (3.0001, "D", 5.0), (7.0, "D", 5.0),
        (7.0001, "C", 8.0), (10.0, "D", 8.0),
    ],
)
def test_f_cgm1998_at_known_points(x1, x2, f):
    assert datasets.f_cgm1998(x1, x2) == f


def test_f_cgm1998_vectorised_and_rejects_unknown_levels():
    out = datasets.f_cgm1998(np.array([1.0, 6.0, 4.0]), np.array(["A", "B", "C"]))
    np.testing.assert_array_equal(out, [8.0, 2.0, 5.0])
    with pytest.raises(ArgumentError, match=r"x2 must take values in \['A', 'B', 'C', 'D'\], got \['E'\]"):
        datasets.f_cgm1998(1.0, "E")


def test_simulate_cgm1998_follows_eq_3_18():
    df = datasets.simulate_cgm1998(n=5000, seed=7)
    assert df.shape == (5000, 3)
    resid = (df["y"] - datasets.f_cgm1998(df["x1"], df["x2"])) / 2.0
    # resid should be N(0, 1): with n = 5000 the sd of the mean is 0.014 and of the sd 0.01;
    # 5 standard errors leave room for nothing but a wrong noise scale or offset.
    assert abs(resid.mean()) < 5 * 0.0142
    assert abs(resid.std() - 1.0) < 5 * 0.0101
    # levels drawn uniformly: each count ~ Binomial(5000, 1/4), sd 30.6
    counts = df["x2"].value_counts()
    assert ((counts - 1250).abs() < 5 * 30.7).all()
    assert df["x1"].between(0, 10).all()


def test_simulate_cgm1998_reproducible_and_seed_dependent():
    a = datasets.simulate_cgm1998(n=50, seed=3)
    pd.testing.assert_frame_equal(a, datasets.simulate_cgm1998(n=50, seed=3))
    pd.testing.assert_frame_equal(a, datasets.simulate_cgm1998(n=50, seed=np.random.default_rng(3)))
    assert not a["y"].equals(datasets.simulate_cgm1998(n=50, seed=4)["y"])


# --- Wu et al. 2007 (CT-MCMC paper eq. 13-16) -------------------------------------------------

@pytest.mark.parametrize(
    "x1, x2, f",
    [(0.2, 0.2, 1.0), (0.5, 0.5, 1.0), (0.3, 0.7, 3.0), (0.5, 0.5001, 3.0),
     (0.5001, 0.2, 5.0), (0.8, 0.8, 5.0)],
)
def test_f_wu2007_at_known_points(x1, x2, f):
    assert datasets.f_wu2007(x1, x2) == f


def test_simulate_wu2007_blocks_follow_eq_13_to_15():
    df = datasets.simulate_wu2007()
    b1, b2, b3 = df.iloc[:100], df.iloc[100:200], df.iloc[200:]
    assert b1["x1"].between(0.1, 0.4).all() and b2["x1"].between(0.1, 0.4).all()
    assert b3["x1"].between(0.6, 0.9).all()
    assert b1["x2"].between(0.1, 0.4).all() and b2["x2"].between(0.6, 0.9).all()
    assert b3["x2"].between(0.1, 0.9).all()
    # block 3's x2 covers the wide interval, including values in the gap (0.4, 0.6)
    assert b3["x2"].between(0.4, 0.6).any()
    assert b1["x3"].between(0.6, 0.9).all() and b2["x3"].between(0.6, 0.9).all()
    assert b3["x3"].between(0.1, 0.4).all()


def test_simulate_wu2007_noise_follows_eq_16():
    df = datasets.simulate_wu2007(n=6000, seed=11, sigma2=0.25)
    assert df.shape == (6000, 4)
    resid = df["y"] - datasets.f_wu2007(df["x1"], df["x2"])
    # resid ~ N(0, 0.25): sd of the mean 0.0065, of the sd about 0.0046; 5 standard errors
    assert abs(resid.mean()) < 5 * 0.0065
    assert abs(resid.std() - 0.5) < 5 * 0.0046
    noiseless = datasets.simulate_wu2007(n=9, seed=1, sigma2=0.0)
    np.testing.assert_array_equal(noiseless["y"], datasets.f_wu2007(noiseless["x1"], noiseless["x2"]))
    # block 1: x1, x2 <= 0.4 -> 1; block 2: x1 <= 0.4 < 0.6 <= x2 -> 3; block 3: x1 >= 0.6 -> 5
    np.testing.assert_array_equal(noiseless["y"], [1.0] * 3 + [3.0] * 3 + [5.0] * 3)


def test_simulate_wu2007_block_sizes_for_other_n():
    df = datasets.simulate_wu2007(n=10, seed=0, sigma2=0.0)
    # blocks of 3, 3 and 4 rows
    assert (df["x3"].iloc[:6] >= 0.6).all() and (df["x3"].iloc[6:] <= 0.4).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: datasets.simulate_cgm1998(n=0), r"n must be an integer >= 1, got n=0"),
        (lambda: datasets.simulate_cgm1998(n=2.5), r"n must be an integer >= 1, got n=2.5"),
        (lambda: datasets.simulate_wu2007(n=2), r"n must be an integer >= 3, got n=2"),
        (lambda: datasets.simulate_wu2007(sigma2=-1.0), r"sigma2 must be a finite number >= 0, got sigma2=-1.0"),
        (lambda: datasets.simulate_wu2007(sigma2=float("nan")), r"sigma2 must be a finite number >= 0"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ArgumentError, match=message):
        call()


def test_regenerate_needs_an_existing_directory(tmp_path):
    with pytest.raises(ArgumentError, match="is not an existing directory"):
        datasets.regenerate(tmp_path / "nope")


def test_simulate_hypercube_layout_and_moments():
    """Hypercube-D (PG-BART 4.1): 10 points per vertex of [-1, 1]^3, offsets with sd 0.1 and
    noise sd 0.01 within a vertex. With 80 offsets per coordinate the sample sd of the offsets
    is within 0.1 +- 0.025 (about 3 standard errors); the within-vertex sd of y is the noise
    sd 0.01 within a factor 2 (9 df per vertex, 8 vertices pooled: 72 df)."""
    from bartpy_suite.datasets import simulate_hypercube

    df = simulate_hypercube(3, 10, seed=5)
    assert list(df.columns) == ["x1", "x2", "x3", "y"] and len(df) == 80
    x = df[["x1", "x2", "x3"]].to_numpy()
    vertex = np.repeat(np.arange(8), 10)
    signs = np.sign(x.reshape(8, 10, 3).mean(axis=1))
    assert len({tuple(s) for s in signs}) == 8
    offsets = x - signs[vertex]
    assert abs(offsets.std() - 0.1) < 0.025
    within = df.groupby(vertex)["y"].std(ddof=1).pow(2).mean() ** 0.5
    assert 0.005 < within < 0.02
    assert simulate_hypercube(3, 10, seed=5).equals(df)
    with pytest.raises(ArgumentError, match="d must be an integer >= 1"):
        simulate_hypercube(0)


# --- CGM data of the RJHMC-Tree paper (its figure 2, rjhmc spec section 4) ---------------------

@pytest.mark.parametrize(
    "x0, x1, f",
    [
        # x1 <= 4: 1 for x0 <= 3, 5 for 4 <= x0 <= 7, 8 otherwise ("<" of the figure read as "<=")
        (1, 1, 1.0), (3, 4, 1.0), (4, 4, 5.0), (7, 1, 5.0), (8, 4, 8.0), (10, 2, 8.0),
        # x1 >= 5: 8 for x0 <= 5, 2 otherwise
        (1, 5, 8.0), (5, 10, 8.0), (6, 5, 2.0), (10, 10, 2.0),
    ],
)
def test_f_cgm_rjhmc_at_known_points(x0, x1, f):
    assert datasets.f_cgm_rjhmc(x0, x1) == f


def test_simulate_cgm_rjhmc_layout_and_noise():
    df = datasets.simulate_cgm_rjhmc(n_train=3000, n_test=1000, seed=9)
    assert list(df.columns) == ["split", "x0", "x1", "y"]
    assert list(df["split"].cat.categories) == ["train", "test"]
    assert (df["split"].iloc[:3000] == "train").all() and (df["split"].iloc[3000:] == "test").all()
    for column in ("x0", "x1"):
        assert df[column].dtype == np.int64
        # integers uniform on 1..10: every value present, each count ~ Binomial(4000, 0.1), sd 19
        counts = df[column].value_counts()
        assert sorted(counts.index) == list(range(1, 11))
        assert ((counts - 400).abs() < 5 * 19).all()
    resid = df["y"] - datasets.f_cgm_rjhmc(df["x0"], df["x1"])
    # resid ~ N(0, 0.2^2), n = 4000: sd of the mean 0.0032, of the sd 0.0022; 5 standard errors
    assert abs(resid.mean()) < 5 * 0.0032
    assert abs(resid.std() - 0.2) < 5 * 0.0023
    shipped = datasets.load("cgm_rjhmc")
    assert shipped["split"].value_counts().to_dict() == {"train": 800, "test": 800}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_train": 0}, r"n_train must be an integer >= 1, got n_train=0"),
        ({"n_test": -1}, r"n_test must be an integer >= 0, got n_test=-1"),
        ({"noise_sd": -0.1}, r"noise_sd must be a finite number >= 0, got noise_sd=-0.1"),
        ({"noise_sd": "0.2"}, r"noise_sd must be a finite number >= 0, got noise_sd='0.2'"),
    ],
)
def test_simulate_cgm_rjhmc_bad_arguments(kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        datasets.simulate_cgm_rjhmc(**kwargs)


def test_simulate_hmc20_follows_the_design():
    """HMC20 section 6: the columns, the effect functions, the propensity's range
    [0.05, 0.95] (0.8 Phi + 0.05 + U/10) and targeted selection (the treated have the larger
    prognostic function); the same seed gives the same data."""
    df, tau, pi = datasets.simulate_hmc20(500, 3, heterogeneous=True, linear=False)
    assert list(df.columns) == ["y", "x1", "x2", "x3", "x4", "x5", "z"]
    assert set(df.x4) == {0, 1} and set(df.x5) == {1, 2, 3} and set(df.z) <= {0, 1}
    np.testing.assert_allclose(tau, 1 + 2 * df.x2 * df.x4)
    assert pi.min() >= 0.05 and pi.max() <= 0.95
    g = df.x5.map({1: 2.0, 2: -1.0, 3: -4.0})
    mu = -6 + g + 6 * np.abs(df.x3 - 1)
    assert mu[df.z == 1].mean() > mu[df.z == 0].mean()
    again, _, _ = datasets.simulate_hmc20(500, 3, heterogeneous=True, linear=False)
    pd.testing.assert_frame_equal(df, again)
    _, tau3, _ = datasets.simulate_hmc20(20, 1, heterogeneous=False)
    assert (tau3 == 3.0).all()
    with pytest.raises(ArgumentError):
        datasets.simulate_hmc20(1)
