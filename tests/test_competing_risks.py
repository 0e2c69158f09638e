"""Competing-risks BART (``CompetingRisksBART``, ``posterior.survival.CompetingRisksFit``; spec 1.8-1.9f).

The expansion is checked by hand on a toy; the per-draw identity S + sum_c CIF_c = 1 exactly; and the
posterior mean CIF without covariates against the Aalen-Johansen estimator (computed here, and
checked against lifelines' ``AalenJohansenFitter`` on data without ties, which lifelines would
jitter) and against the known CIF of simulated discrete-time data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, DataError
from bartpy_suite.models.survival import CompetingRisksBART, expand_competing
from bartpy_suite.posterior.survival import CompetingRisksFit

QUIET = dict(progress=False, check_mixing=False)
H1, H2 = 0.04, 0.02  # the simulation's weekly hazards: cause 1 w.p. H1, else cause 2 w.p. H2


def aalen_johansen(time: np.ndarray, cause: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """CIF_c(g_j) = sum_{l <= j} S_KM(g_{l-1}) d_cl / n_l at the grid times, (causes, K)."""
    n_causes = int(cause.max())
    out = np.zeros((n_causes, grid.size))
    surv, total = 1.0, np.zeros(n_causes)
    for j, g in enumerate(grid):
        at_risk = np.sum(time >= g)
        d = np.array([np.sum((time == g) & (cause == c)) for c in range(1, n_causes + 1)])
        total += surv * d / at_risk
        out[:, j] = total
        surv *= 1 - d.sum() / at_risk
    return out


def simulate(n: int, seed: int, weeks: int = 30) -> pd.DataFrame:
    """Discrete weekly competing risks with constant hazards and uniform censoring: the true
    CIF_1(w) = sum_{v <= w} q^(v-1) H1 and CIF_2(w) = sum_{v <= w} q^(v-1) (1 - H1) H2, q = (1 - H1)(1 - H2)."""
    rng = np.random.default_rng(seed)
    time = np.full(n, float(weeks))
    cause = np.zeros(n, dtype=np.int64)
    censor = rng.integers(5, weeks + 1, size=n)
    for i in range(n):
        for week in range(1, weeks + 1):
            u = rng.uniform()
            if u < H1 or u < H1 + (1 - H1) * H2:
                time[i], cause[i] = week, 1 if u < H1 else 2
                break
            if week >= censor[i]:
                time[i] = week
                break
    return pd.DataFrame({"t": time, "c": cause})


def true_cif(grid: np.ndarray) -> np.ndarray:
    """The true CIFs at the grid's whole weeks (a week without an event is not on the grid)."""
    weeks = np.arange(1, int(grid.max()) + 1)
    before = ((1 - H1) * (1 - H2)) ** (weeks - 1)  # S(w - 1) of the discrete model
    cif = np.vstack([np.cumsum(before * H1), np.cumsum(before * (1 - H1) * H2)])
    return cif[:, grid.astype(int) - 1]


def test_expansion_by_hand():
    # times (2.5, 1.5, 3.0, 2.5), causes (1, 2, 0, 2), grid {1.5, 2.5, 3.0}
    first, second = expand_competing([2.5, 1.5, 3.0, 2.5], [1, 2, 0, 2], np.array([1.5, 2.5, 3.0]))
    # model 1: every at-risk row; y = 1 at subject 0's event row only
    assert first.subject.tolist() == [0, 0, 1, 2, 2, 2, 3, 3]
    assert first.period.tolist() == [0, 1, 0, 0, 1, 2, 0, 1]
    assert first.y.tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
    # model 2: without subject 0's cause-1 event row; y = 1 at the cause-2 event rows
    assert second.subject.tolist() == [0, 1, 2, 2, 2, 3, 3]
    assert second.y.tolist() == [0, 1, 0, 0, 0, 0, 1]
    assert second.n_rows.tolist() == [1, 1, 3, 2]


def test_bad_cause_codes_are_named():
    model = CompetingRisksBART(draws=2, tune=2, chains=1, **QUIET)
    with pytest.raises(DataError, match="row 1 has 1.5"):
        model.fit(np.empty((3, 0)), [1.0, 2.0, 3.0], [0, 1.5, 2])
    with pytest.raises(DataError, match=r"cause\(s\) \[2\] have no event"):
        model.fit(np.empty((3, 0)), [1.0, 2.0, 3.0], [0, 1, 3])


@pytest.fixture(scope="module")
def crisk():
    df = simulate(500, seed=1)
    fit = CompetingRisksBART.from_formula("Surv(t, c) ~ 1", data=df, trees=20, chains=2, draws=150, tune=150, thin=1,
                                          seed=3, **QUIET)
    return df, fit


def test_formula_with_cause_codes_fits_competing_risks(crisk):
    df, fit = crisk
    # bps.bart reads Surv's second argument as a 0/1 event: a code 2 is an error pointing here
    with pytest.raises(DataError, match="CompetingRisksBART.from_formula"):
        bps.bart("Surv(t, c) ~ 1", data=df, chains=1, draws=2, tune=2, **QUIET)
    assert isinstance(fit, CompetingRisksFit) and fit.causes == 2
    assert [f.config["survival"]["cause"] for f in fit.fits] == [1, 2]
    assert [f.config["survival"]["events"] for f in fit.fits] == [int((df["c"] == 1).sum()), int((df["c"] == 2).sum())]
    np.testing.assert_array_equal(fit.grid, np.unique(df.loc[df["c"] > 0, "t"]))  # the "events" grid of any cause


def test_survival_and_incidences_add_up_to_one_per_draw(crisk):
    _, fit = crisk
    times = np.concatenate([[0.5], fit.grid, [fit.grid[-1] - 0.5]])
    surv, cif = fit.draws(np.empty((1, 0)), times)
    np.testing.assert_allclose(surv + cif.sum(axis=2), 1.0, rtol=0, atol=1e-12)
    assert np.all(np.diff(cif[..., : fit.grid.size + 1], axis=-1) >= -1e-15)  # each draw's CIF is non-decreasing
    assert np.all(cif[..., 0] == 0) and np.all(surv[..., 0] == 1)  # before the first grid time


def test_cif_against_aalen_johansen_and_the_truth(crisk):
    """Against Aalen-Johansen on the same data, tolerance 0.03: both read the same 500 subjects, so
    their gap is the prior's smoothing of the hazard over time plus Monte Carlo error (0.013 seen with
    these seeds). Against the truth, tolerance 0.08: that gap also holds the data's own sampling error,
    which Aalen-Johansen shows to be 0.04 here (few subjects remain at risk in the late weeks: 23 at the
    last grid time), i.e. about 2 sd; 0.08 leaves room for the model's share (0.047 seen)."""
    df, fit = crisk
    grid = fit.grid
    table = fit.predict(pd.DataFrame(index=[0]), kind="cif")
    ours = np.vstack([table[[f"CIF{c}({g:g})_mean" for g in grid]].to_numpy().ravel() for c in (1, 2)])
    aj = aalen_johansen(df["t"].to_numpy(), df["c"].to_numpy(), grid)
    assert np.abs(ours - aj).max() < 0.03
    assert np.abs(ours - true_cif(grid)).max() < 0.08
    lower = np.vstack([table[[f"CIF{c}({g:g})_lower" for g in grid]].to_numpy().ravel() for c in (1, 2)])
    upper = np.vstack([table[[f"CIF{c}({g:g})_upper" for g in grid]].to_numpy().ravel() for c in (1, 2)])
    assert np.all(lower <= ours) and np.all(ours <= upper)
    survival = fit.predict(pd.DataFrame(index=[0]), kind="survival", times=[grid[-1]])
    assert survival.iloc[0, 0] == pytest.approx(1 - ours[:, -1].sum(), abs=1e-12)


def test_our_aalen_johansen_is_lifelines_without_ties():
    lifelines = pytest.importorskip("lifelines")
    rng = np.random.default_rng(5)
    time = np.round(rng.exponential(10.0, size=60), 6)
    cause = rng.choice([0, 1, 2], size=60, p=[0.3, 0.4, 0.3])
    assert np.unique(time).size == time.size  # lifelines jitters tied times: keep none
    grid = np.unique(time[cause > 0])
    ours = aalen_johansen(time, cause, grid)
    for c in (1, 2):
        aj = lifelines.AalenJohansenFitter(calculate_variance=False).fit(time, cause, event_of_interest=c)
        theirs = aj.cumulative_density_.iloc[:, 0].reindex(grid, method="ffill").to_numpy()
        np.testing.assert_allclose(ours[c - 1], theirs, rtol=0, atol=1e-12)


def test_covariate_rows_and_samples(crisk):
    df = simulate(200, seed=2)
    df["x"] = np.random.default_rng(4).uniform(size=len(df))
    fit = CompetingRisksBART.from_formula("Surv(t, c) ~ x", data=df, trees=10, chains=1, draws=20, tune=20, thin=1,
                                          seed=6, **QUIET)
    new = pd.DataFrame({"x": [0.2, 0.8]}, index=["a", "b"])
    draws = fit.predict(new, kind="cif", times=[5, 10], samples=True)
    assert draws.dims == ("chain", "draw", "obs", "cause", "time") and draws.shape == (1, 20, 2, 2, 2)
    table = fit.predict(new, kind="cif", times=[5, 10], level=0.9)
    assert list(table.index) == ["a", "b"]
    np.testing.assert_allclose(table["CIF2(10)_mean"], draws.sel(cause=2, time=10).mean(("chain", "draw")), rtol=1e-12)
    with pytest.warns(bps.errors.BartpySuiteWarning, match="largest observed time"):
        beyond = fit.predict(new, times=[df["t"].max() + 1])
    assert beyond.isna().all().all()


@pytest.fixture(scope="module")
def two_small_fits():
    """Two tiny 2-cause fits of the same covariate, on different times (so different grids)."""
    rng = np.random.default_rng(8)
    x = rng.uniform(size=(60, 1))
    time = rng.integers(1, 8, 60).astype(float)
    cause = np.tile([0, 1, 2], 20)
    kw = dict(trees=3, chains=1, draws=4, tune=4, seed=2, **QUIET)
    return CompetingRisksBART(**kw).fit(x, time, cause), CompetingRisksBART(**kw).fit(x, time + 0.5, cause)


def test_the_cause_fits_must_come_in_cause_order_from_one_model(two_small_fits, tmp_path):
    """``CompetingRisksFit(fits)`` is how saved cause fits come back together (the survival guide):
    cause c's fit conditions on no event of causes 1..c-1, so a swapped, repeated, missing or
    foreign fit gives wrong incidences. Before the check each case below predicted numbers."""
    first, other = two_small_fits
    new = pd.DataFrame({"x0": [0.5]})
    paths = []
    for c, f in enumerate(first.fits, start=1):
        paths.append(tmp_path / f"cause{c}.nc")
        f.to_netcdf(paths[-1])
    back = CompetingRisksFit([bps.load(p) for p in paths])
    pd.testing.assert_frame_equal(back.predict(new, kind="cif"), first.predict(new, kind="cif"))
    with pytest.raises(ArgumentError, match=r"fits\[0\] is the fit of cause 2 of 2, expected cause 1"):
        CompetingRisksFit(first.fits[::-1])
    with pytest.raises(ArgumentError, match=r"fits\[1\] is the fit of cause 1 of 2, expected cause 2"):
        CompetingRisksFit([first.fits[0], first.fits[0]])
    with pytest.raises(ArgumentError, match="1 fit given for 2 causes"):
        CompetingRisksFit(first.fits[:1])
    with pytest.raises(ArgumentError, match=r"fits\[1\] .*grid"):
        CompetingRisksFit([first.fits[0], other.fits[1]])
    plain = bps.bart("y ~ x1", data=pd.DataFrame({"y": np.arange(20.0), "x1": np.arange(20.0) % 7}), trees=2,
                     chains=1, draws=4, tune=4, seed=1, **QUIET)
    with pytest.raises(ArgumentError, match=r"fits\[0\] is not a cause fit of CompetingRisksBART"):
        CompetingRisksFit([plain, plain])


@pytest.mark.parametrize("cause, causes", [("1", 2), (0, 2), (3, 2), (1, 0), (True, 2)])
def test_the_file_check_reads_the_cause_settings(two_small_fits, tmp_path, cause, causes):
    import json

    import xarray as xr

    from bartpy_suite.errors import FitFileError
    from bartpy_suite.posterior.fit import CONFIG_ATTR

    first, _ = two_small_fits
    path, edited = tmp_path / "cause.nc", tmp_path / "edited.nc"
    first.fits[0].to_netcdf(path)
    with xr.open_datatree(path, engine="netcdf4") as tree:
        tree = tree.load()
    config = json.loads(tree["constant_data"].attrs[CONFIG_ATTR])
    config["survival"].update(cause=cause, causes=causes)
    tree["constant_data"].attrs[CONFIG_ATTR] = json.dumps(config)
    tree.to_netcdf(edited, engine="netcdf4")
    with pytest.raises(FitFileError, match="survival.cause"):
        bps.load(edited)


def test_a_single_cause_fit_does_not_predict_survival_on_its_own(two_small_fits):
    """A cause fit's trees model P(cause c | at risk, no earlier cause at that time): its own
    "survival" prod(1 - p_c) is not the survival of any outcome (for c > 1 not even cause-specific),
    yet Fit.predict returned it as S(t). It now points to CompetingRisksFit."""
    first, _ = two_small_fits
    new = pd.DataFrame({"x0": [0.5]})
    for c, f in enumerate(first.fits, start=1):
        for kind in ("survival", "hazard", "median"):
            with pytest.raises(ArgumentError, match=rf"cause {c} of 2 of competing-risks BART.*CompetingRisksFit"):
                f.predict(new, kind=kind)
    assert np.isfinite(first.predict(new, kind="survival").to_numpy(dtype=float)).all()


def test_a_cause_column_of_the_wrong_shape_is_named():
    """A (n, 1) cause array was reported as "time has 80 values but event has 80"; it now says
    what is wrong with which argument (and the same for survival BART's event)."""
    from bartpy_suite.models.survival import SurvivalBART

    time = np.arange(1.0, 11.0)
    with pytest.raises(DataError, match=r"cause must hold one code per subject \(a 1-D array\); got shape \(10, 1\)"):
        CompetingRisksBART(draws=2, tune=2, chains=1, **QUIET).fit(np.empty((10, 0)), time, np.ones((10, 1)))
    with pytest.raises(DataError, match=r"event must hold one value per subject \(a 1-D array\); got shape \(10, 1\)"):
        SurvivalBART(draws=2, tune=2, chains=1, **QUIET).fit(np.empty((10, 0)), time, np.ones((10, 1)))
