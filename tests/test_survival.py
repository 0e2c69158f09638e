"""Survival BART (discrete-time probit, Sparapani et al. 2016): the person-period expansion,
the formula front end, prediction of S(t | x), hazard, cumulative hazard and median survival,
save/load and bad input. Spec: /work/shared/specs/outcomes.md section 1 (checks (a), (b), (g))."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from scipy import special

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning, DataError, FormulaError
from bartpy_suite.formula.surv import parse_surv
from bartpy_suite.models.survival import SurvivalBART, check_times, expand, make_grid

TINY = dict(trees=10, chains=2, draws=30, tune=30, thin=1, seed=3, progress=False)


# -- (a) expansion against hand-computed person-period tables ---------------------------------------
def test_expansion_bart3_toy_observed_grid():
    # BART3's vignette toy (spec 1.3): times (2.5, 1.5, 3.0), delta (1, 1, 0), grid "observed"
    t, e = np.array([2.5, 1.5, 3.0]), np.array([1, 1, 0])
    grid = make_grid(t, e, "observed")
    assert grid.tolist() == [1.5, 2.5, 3.0]
    table = expand(t, e, grid)
    assert table.subject.tolist() == [0, 0, 1, 2, 2, 2]
    assert grid[table.period].tolist() == [1.5, 2.5, 1.5, 1.5, 2.5, 3.0]
    assert table.y.tolist() == [0, 1, 1, 0, 0, 0]
    # BART3's rule coincides on an exact grid
    bart3 = expand(t, e, grid, "end_of_interval")
    assert bart3.y.tolist() == table.y.tolist() and bart3.period.tolist() == table.period.tolist()


def test_expansion_bart3_toy_events_grid():
    t, e = np.array([2.5, 1.5, 3.0]), np.array([1, 1, 0])
    table = expand(t, e, make_grid(t, e, "events"))
    assert table.y.size == 5  # subject 3 (censored at 3.0 > g_K = 2.5) has rows at 1.5 and 2.5 only
    assert table.n_rows.tolist() == [2, 1, 2]
    assert table.y.tolist() == [0, 1, 1, 0, 0]


def test_expansion_coarse_grid_both_censoring_rules():
    # grid (2, 4); subjects: event at 3 (inside (2,4]), censored at 3, censored at 1 (before g_1),
    # event at 5 (after g_K: censored at g_K), event at 2 (on a grid point), censored at 4
    t = np.array([3.0, 3.0, 1.0, 5.0, 2.0, 4.0])
    e = np.array([1, 0, 0, 1, 1, 0])
    g = np.array([2.0, 4.0])
    ours = expand(t, e, g)  # start of interval: censoring at 3 counts as before g_2 = 4
    assert ours.n_rows.tolist() == [2, 1, 0, 2, 1, 2]
    assert ours.y.tolist() == [0, 1, 0, 0, 0, 1, 0, 0]
    bart3 = expand(t, e, g, "end_of_interval")  # rounds every time up: censored at 3 -> 4, at 1 -> 2
    assert bart3.n_rows.tolist() == [2, 2, 1, 2, 1, 2]
    assert bart3.y.tolist() == [0, 1, 0, 0, 0, 0, 0, 1, 0, 0]


def test_grid_rules():
    t = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 7.0])
    e = np.array([1, 0, 1, 0, 1, 0])
    assert make_grid(t, e, "events").tolist() == [1.0, 2.0, 4.0]
    assert make_grid(t, e, "observed").tolist() == [1.0, 2.0, 3.0, 4.0, 7.0]
    # R's quantile type 7 (numpy's linear) at 1/2, 2/2
    assert make_grid(t, e, 2).tolist() == [np.quantile(t, 0.5), 7.0]
    assert make_grid(t, e, [1.5, 5.0]).tolist() == [1.5, 5.0]
    with pytest.raises(ArgumentError, match="strictly increasing"):
        make_grid(t, e, [3.0, 2.0])
    with pytest.raises(ArgumentError, match="grid"):
        make_grid(t, e, "weeks")


def _km(t, e):
    """Kaplan-Meier at the distinct event times (reference written out, no library)."""
    times = np.unique(t[e == 1])
    s, out = 1.0, []
    for g in times:
        at_risk = np.sum(t >= g)
        d = np.sum((t == g) & (e == 1))
        s *= 1 - d / at_risk
        out.append(s)
    return times, np.array(out)


def test_km_identity_from_expanded_rows():
    # check (b): on the exact grids, the rows at g_j are the risk set and their y sum to d_j,
    # so prod (1 - d_j / |R_j|) is Kaplan-Meier exactly (1e-12)
    rng = np.random.default_rng(7)
    t = np.ceil(rng.exponential(8.0, 300))
    c = np.ceil(rng.exponential(12.0, 300))
    time, event = np.minimum(t, c), (t <= c).astype(int)
    times, km = _km(time, event)
    for rule in ("events", "observed"):
        grid = make_grid(time, event, rule)
        table = expand(time, event, grid)
        at_risk = np.bincount(table.period, minlength=grid.size)
        deaths = np.bincount(table.period, weights=table.y, minlength=grid.size)
        assert np.array_equal(at_risk, [np.sum(time >= g) for g in grid])
        assert table.y.sum() == event.sum()  # every event is at or before g_K here
        s = np.cumprod(1 - deaths / at_risk)
        np.testing.assert_allclose(s[np.isin(grid, times)], km, rtol=0, atol=1e-12)
    lifelines = pytest.importorskip("lifelines", reason="lifelines (extra 'survival') not installed")
    fitter = lifelines.KaplanMeierFitter().fit(time, event)
    np.testing.assert_allclose(fitter.survival_function_at_times(times).to_numpy(), km, rtol=0, atol=1e-12)


def test_rossi_expansion_size():
    datasets = pytest.importorskip("lifelines.datasets", reason="lifelines (extra 'survival') not installed")
    rossi = datasets.load_rossi()
    t, e = check_times(rossi["week"], rossi["arrest"])
    grid = make_grid(t, e, "events")
    assert grid.size == 49 and e.sum() == 114
    assert expand(t, e, grid).y.size == 18766  # spec 1.3
    assert np.array_equal(grid, make_grid(t, e, "observed"))


# -- the formula ------------------------------------------------------------------------------------
def test_parse_surv_structurally():
    assert parse_surv("Surv(time, status) ~ x1 + x2") == ("time", "status", "x1 + x2")
    assert parse_surv("Surv(`my time`, d)~.") == ("my time", "d", ".")
    with pytest.raises(FormulaError, match="two columns"):
        parse_surv("Surv(time) ~ x")
    with pytest.raises(FormulaError, match="two columns"):
        parse_surv("Surv(a, b, c) ~ x")
    with pytest.raises(FormulaError, match="column names"):
        parse_surv("Surv(log(t), d) ~ x")
    with pytest.raises(FormulaError, match="column names"):
        parse_surv("Surv(__import__('os'), d) ~ x")


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=n)
    g = rng.choice(["a", "b"], size=n)
    t = np.ceil(rng.exponential(1 / np.where(x > 0.5, 0.3, 0.1)))
    c = np.ceil(rng.exponential(15.0, n))
    return pd.DataFrame({"time": np.minimum(t, c), "status": (t <= c).astype(int), "x": x, "g": g})


@pytest.fixture(scope="module")
def surv_fit():
    df = _data()
    original = df.copy()
    fit = bps.bart("Surv(time, status) ~ .", data=df, **TINY)
    pd.testing.assert_frame_equal(df, original)  # the data are not modified
    return fit, df


def test_fit_records_the_survival_settings(surv_fit):
    fit, df = surv_fit
    cfg = fit.config["survival"]
    t, e = df["time"].to_numpy(), df["status"].to_numpy()
    assert fit.predictors == ["time", "x", "g"]
    assert cfg["grid"] == make_grid(t, e, "events").tolist()
    assert cfg["expanded_rows"] == expand(t, e, np.array(cfg["grid"])).y.size
    assert cfg["events"] == e.sum() and cfg["max_time"] == t.max()
    # offset: Phi^-1 of the share of event rows (BART3's gbart default)
    assert fit.config["center"] == pytest.approx(special.ndtri(e.sum() / cfg["expanded_rows"]))
    assert {"mean_leaves", "mean_depth"} <= set(fit.summary().index)
    assert set(fit.variable_activity().index) == {"time", "x", "g"}


def _eta_reference(fit, new):
    """eta = mu0 + f(g_j, x) per (sample, row, j) through the ordinary array prediction path."""
    grid = np.asarray(fit.config["survival"]["grid"])
    codes = {"a": 0.0, "b": 1.0}
    x = np.column_stack([new["x"].to_numpy(), new["g"].map(codes).to_numpy()])
    full = np.column_stack([np.tile(grid, len(new)), np.repeat(x, grid.size, axis=0)])
    return fit.function_samples(full).reshape(-1, len(new), grid.size)


def test_survival_equals_product_formula(surv_fit):
    # check (g): S from predict = prod (1 - Phi(eta)) from the stored trees, at the grid (1e-12)
    fit, df = surv_fit
    new = df.iloc[:7]
    grid = np.asarray(fit.config["survival"]["grid"])
    s = fit.predict(new, kind="survival", samples=True)
    assert s.dims == ("chain", "draw", "obs", "time") and np.array_equal(s["time"], grid)
    s = s.values.reshape(-1, len(new), grid.size)
    reference = np.cumprod(1 - special.ndtr(_eta_reference(fit, new)), axis=-1)
    np.testing.assert_allclose(s, reference, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(s, axis=-1) <= 0)  # non-increasing per draw
    # the table's mean and interval are the weighted mean and quantiles of those draws
    table = fit.predict(new, times=grid[:3])
    np.testing.assert_allclose(table[f"S({grid[1]:g})_mean"], s[:, :, 1].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(table[f"S({grid[2]:g})_lower"], np.quantile(s[:, :, 2], 0.025, axis=0), rtol=1e-12)
    assert list(table.columns[:3]) == [f"S({grid[0]:g})_mean", f"S({grid[0]:g})_lower", f"S({grid[0]:g})_upper"]
    # mean and every quantile are non-increasing in t too
    wide = fit.predict(new)
    for part in ("mean", "lower", "upper"):
        block = wide[[c for c in wide.columns if c.endswith(part)]].to_numpy()
        assert np.all(np.diff(block, axis=1) <= 1e-15)


def test_survival_is_a_step_function(surv_fit):
    fit, df = surv_fit
    new = df.iloc[:4]
    grid = np.asarray(fit.config["survival"]["grid"])
    max_time = fit.config["survival"]["max_time"]
    on = fit.predict(new, samples=True).values
    between = 0.5 * (grid[2] + grid[3])
    off = fit.predict(new, times=[0.0, 0.5 * grid[0], between, grid[-1], max_time], samples=True).values
    np.testing.assert_array_equal(off[..., 0], 1.0)  # before g_1
    np.testing.assert_array_equal(off[..., 1], 1.0)
    np.testing.assert_array_equal(off[..., 2], on[..., 2])  # S(g_{J*(t)})
    np.testing.assert_array_equal(off[..., 4], on[..., -1])  # carried from g_K to the last observed time
    with pytest.warns(BartpySuiteWarning, match="does not extrapolate"):
        beyond = fit.predict(new, times=[grid[0], max_time + 1])
    assert beyond.filter(like=f"S({max_time + 1:g})").isna().all().all()
    assert beyond.filter(like=f"S({grid[0]:g})").notna().all().all()


def test_hazard_cumhaz_and_median_agree_with_survival(surv_fit):
    fit, df = surv_fit
    new = df.iloc[:6]
    grid = np.asarray(fit.config["survival"]["grid"])
    s = fit.predict(new, samples=True).values
    eta = _eta_reference(fit, new).reshape(s.shape)
    h = fit.predict(new, kind="hazard", samples=True).values
    np.testing.assert_allclose(h, special.ndtr(eta), rtol=1e-12, atol=1e-15)
    big_h = fit.predict(new, kind="cumhaz", samples=True).values
    np.testing.assert_allclose(np.exp(-big_h), s, rtol=1e-12)
    median = fit.predict(new, kind="median", samples=True).values
    below = s <= 0.5
    expected = np.where(below.any(axis=-1), grid[np.argmax(below, axis=-1)], np.inf)
    np.testing.assert_array_equal(median, expected)
    table = fit.predict(new, kind="median")
    assert list(table.columns) == ["median", "median_lower", "median_upper", "p_undefined"]
    np.testing.assert_allclose(table["p_undefined"], np.isinf(expected).reshape(-1, len(new)).mean(axis=0))
    # RMST: the integral of the step function S, at grid times and between them
    knots = np.concatenate([[0.0], grid])
    before = np.concatenate([np.ones(s.shape[:-1] + (1,)), s[..., :-1]], axis=-1)
    area = np.cumsum(before * np.diff(knots), axis=-1)
    tau = [0.5 * grid[0], grid[3], 0.5 * (grid[3] + grid[4])]
    rmst = fit.predict(new, kind="rmst", times=tau, samples=True).values
    np.testing.assert_allclose(rmst[..., 0], tau[0], rtol=1e-12)
    np.testing.assert_allclose(rmst[..., 1], area[..., 3], rtol=1e-12)
    np.testing.assert_allclose(rmst[..., 2], area[..., 3] + s[..., 3] * (tau[2] - grid[3]), rtol=1e-12)
    with pytest.raises(ArgumentError, match="grid times only"):
        fit.predict(new, kind="hazard", times=[0.5 * (grid[0] + grid[1])])


def test_save_and_load_predict_identically(surv_fit, tmp_path):
    fit, df = surv_fit
    path = tmp_path / "surv.nc"
    fit.to_netcdf(path)
    loaded = bps.load(path)
    assert loaded.config["survival"] == fit.config["survival"]
    new = df.iloc[5:15]
    for kind in ("survival", "hazard", "median"):
        pd.testing.assert_frame_equal(loaded.predict(new, kind=kind), fit.predict(new, kind=kind))


def test_prediction_refusals(surv_fit):
    fit, df = surv_fit
    with pytest.raises(ArgumentError, match="kind='survival', 'hazard'"):
        fit.predict(df, kind="prob")
    with pytest.raises(ArgumentError, match="pass newdata"):
        fit.predict(kind="survival")
    with pytest.raises(ArgumentError, match="finite and >= 0"):
        fit.predict(df, times=[-1.0])
    with pytest.raises(FormulaError, match=r"'x'.*Surv\(time, status\) ~ x \+ g"):
        fit.predict(df.drop(columns="x"))
    plain = copy.copy(fit)  # the same trees, configured as an ordinary probit fit
    plain.config = {k: v for k, v in fit.config.items() if k != "survival"}
    with pytest.raises(ArgumentError, match="needs a survival fit"):
        plain.predict(df, kind="survival", times=[1.0])
    with pytest.raises(ArgumentError, match="times= applies to survival fits"):
        plain.predict(df, times=[1.0])
    assert "bart survival" in repr(fit)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda d: d.assign(time=d["time"].where(d.index != 3, -2.0)), DataError, r"must be > 0; row 3"),
        (lambda d: d.assign(time=d["time"].where(d.index != 4, np.inf)), DataError, "infinite"),
        (lambda d: d.assign(status=d["status"].where(d.index != 5, 2)), DataError, r"'status'.*1 \(event\) or 0"),
        (lambda d: d.assign(status="yes"), DataError, r"'status'.*1 \(event\) or 0"),
        (lambda d: d.assign(status=0), DataError, "every subject is censored"),
    ],
)
def test_bad_survival_data(change, error, match):
    df = change(_data(40))
    with pytest.raises(error, match=match):
        bps.bart("Surv(time, status) ~ x + g", data=df, **TINY)


def test_bad_survival_formulas():
    df = _data(40)
    with pytest.raises(FormulaError, match="two columns"):
        bps.bart("Surv(time) ~ x", data=df, **TINY)
    with pytest.raises(FormulaError, match="event column 'status'.*predictors"):
        bps.bart("Surv(time, status) ~ x + status", data=df, **TINY)
    with pytest.raises(FormulaError, match="'time'.*predictors"):
        bps.bart("Surv(time, status) ~ x + time", data=df, **TINY)
    with pytest.raises(FormulaError, match="'stat' of Surv"):
        bps.bart("Surv(time, stat) ~ x", data=df, **TINY)
    with pytest.raises(ArgumentError, match="censoring"):
        bps.bart("Surv(time, status) ~ x", data=df, censoring="middle", **TINY)


def test_bool_event_and_array_level_fit_agree():
    # a bool event column is read as 0/1; the array-level class takes the same arrays
    df = _data(60, seed=4)
    settings = dict(TINY, trees=5, draws=10, tune=10)
    by_formula = bps.bart("Surv(time, status) ~ x", data=df.assign(status=df["status"].astype(bool)), **settings)
    by_arrays = SurvivalBART(**settings).fit(df[["x"]].to_numpy(), df["time"], df["status"], predictor_names=["x"])
    new = df.iloc[:3]
    pd.testing.assert_frame_equal(by_formula.predict(new), by_arrays.predict(new))


# -- command line -------------------------------------------------------------------------------------
def _main(argv):
    import contextlib
    import io

    from bartpy_suite.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def test_cli_fit_and_predict_survival(tmp_path):
    df = _data(60, seed=5)
    data, new, fit_path = tmp_path / "d.csv", tmp_path / "new.csv", tmp_path / "fit.nc"
    df.to_csv(data, index=False)
    df.iloc[:4][["x", "g"]].to_csv(new, index=False)
    status, _, err = _main(["fit", "Surv(time, status) ~ x + g", str(data)])
    assert status == 2 and "--model bart" in err
    status, out, _ = _main(["fit", "Surv(time, status) ~ x + g", str(data), "--model", "bart", "--trees", "5",
                            "--chains", "1", "--draws", "10", "--tune", "10", "--seed", "2", "--no-progress",
                            "--out", str(fit_path)])
    assert status == 0 and "mean_leaves" in out
    status, out, _ = _main(["predict", str(fit_path), str(new), "--times", "1", "3"])
    assert status == 0
    table = pd.read_csv(__import__("io").StringIO(out))
    expected = bps.load(fit_path).predict(df.iloc[:4], times=[1.0, 3.0])
    assert list(table.columns) == list(expected.columns)
    np.testing.assert_allclose(table.to_numpy(), expected.to_numpy(), rtol=1e-12)
    status, out, _ = _main(["predict", str(fit_path), str(new), "--kind", "median"])
    assert status == 0 and out.splitlines()[0] == "median,median_lower,median_upper,p_undefined"


# -- statistical check on data with known S(t | x) --------------------------------------------------------
@pytest.mark.slow
def test_interval_coverage_of_known_survival():
    """Exponential times with rate 0.04 exp(1.5 x), rounded up to integer weeks, administrative
    censoring uniform on 10..40 weeks: the true discrete S(t | x) at integer t is exp(-rate t)
    exactly (P(ceil T > t) = P(T > t)). Fixed seeds; about 10 CPU s.

    Tolerances: the 25 (x, t) points share one posterior, so their coverage is not 25
    independent trials; we ask for >= 80% of them inside the pointwise 95% intervals (runs at
    n = 400 and 2000 covered all 25). The posterior mean is within 0.12 of the truth at every
    point (0.14 at n = 400, 0.06 at n = 2000: BART shrinks the x effect), and the population
    average of S within 0.03 of Kaplan-Meier (KM's own sd at S = 1/2 is about 0.016 at n = 1000).
    """
    rng = np.random.default_rng(20161)
    n = 1000
    x, z = rng.uniform(size=n), rng.uniform(size=n)
    t = np.ceil(rng.exponential(1 / (0.04 * np.exp(1.5 * x))))
    c = np.ceil(rng.uniform(10, 40, n))
    df = pd.DataFrame({"time": np.minimum(t, c), "status": (t <= c).astype(int), "x": x, "z": z})
    fit = bps.bart("Surv(time, status) ~ x + z", data=df, chains=2, draws=400, tune=500, thin=5, seed=11,
                   progress=False)
    xs, ts = np.array([0.1, 0.3, 0.5, 0.7, 0.9]), np.array([2.0, 5.0, 10.0, 15.0, 20.0])
    table = fit.predict(pd.DataFrame({"x": xs, "z": 0.5}), times=ts)
    truth = np.exp(-np.outer(0.04 * np.exp(1.5 * xs), ts))

    def part(name):
        return np.column_stack([table[f"S({v:g})_{name}"] for v in ts])

    covered = (part("lower") <= truth) & (truth <= part("upper"))
    assert covered.mean() >= 0.8, covered
    assert np.abs(part("mean") - truth).max() <= 0.12
    _, km = _km(df["time"].to_numpy(), df["status"].to_numpy())
    times = np.unique(df["time"][df["status"] == 1])
    population = fit.predict(df, times=ts)
    for v in ts:
        km_v = km[np.searchsorted(times, v, side="right") - 1]
        assert abs(population[f"S({v:g})_mean"].mean() - km_v) <= 0.03


@pytest.mark.slow
def test_model_based_concordance_two_groups():
    """Spec check (d) (BART3's demo/concord.surv.bart.R): x ~ Bernoulli(1/2), exponential times
    with rate 0.1 (x = 0) or 0.3 (x = 1) rounded up to integers, no censoring. Per draw,
    kappa = 1/2 [1 + sum_j S_1(g_{j-1}) S_2(g_{j-1}) (p_1j - p_2j)] (the vignette's symmetrised
    formula, = P(T1 < T2) + P(tie)/2 on the grid); the truth is the same formula with the true
    discrete hazards 1 - S(g_j)/S(g_{j-1}), S(t) = exp(-rate t), on the fit's grid (about 0.25,
    the continuous-time 0.1 / (0.1 + 0.3), less the ties). Tolerance 0.03 on the posterior mean
    (spec 1.9 (d), [derived]). Fixed seeds; about 10 CPU s."""
    rng = np.random.default_rng(2016)
    n = 500
    x = rng.integers(0, 2, n)
    rate = np.where(x == 1, 0.3, 0.1)
    df = pd.DataFrame({"time": np.ceil(rng.exponential(1 / rate)), "status": 1, "x": x.astype(float)})
    fit = bps.bart("Surv(time, status) ~ x", data=df, chains=2, draws=400, tune=500, thin=5, seed=5, progress=False)
    grid = np.asarray(fit.config["survival"]["grid"])
    new = pd.DataFrame({"x": [0.0, 1.0]})
    p = fit.predict(new, kind="hazard", samples=True).values.reshape(-1, 2, grid.size)
    s = fit.predict(new, samples=True).values.reshape(-1, 2, grid.size)
    before = np.concatenate([np.ones((s.shape[0], 2, 1)), s[:, :, :-1]], axis=-1)  # S(g_{j-1})
    kappa = 0.5 * (1 + np.sum(before[:, 0] * before[:, 1] * (p[:, 0] - p[:, 1]), axis=-1))
    true_s = np.exp(-np.outer([0.1, 0.3], np.concatenate([[0.0], grid])))
    true_p = 1 - true_s[:, 1:] / true_s[:, :-1]
    truth = 0.5 * (1 + np.sum(true_s[0, :-1] * true_s[1, :-1] * (true_p[0] - true_p[1])))
    assert abs(kappa.mean() - truth) <= 0.03, (kappa.mean(), truth)


def test_time_only_model():
    # 'Surv(t, d) ~ 1': the time is the only predictor; any frame of m rows predicts m equal curves
    df = _data(60, seed=6)
    fit = bps.bart("Surv(time, status) ~ 1", data=df, **dict(TINY, trees=5, draws=10, tune=10))
    assert fit.predictors == ["time"]
    table = fit.predict(pd.DataFrame(index=[10, 11]), times=[1.0, 4.0])
    assert list(table.index) == [10, 11]
    np.testing.assert_array_equal(table.iloc[0].to_numpy(), table.iloc[1].to_numpy())
    with pytest.warns(BartpySuiteWarning, match="missing time"):
        bps.bart("Surv(time, status) ~ 1", data=df.assign(time=df["time"].where(df.index != 0)),
                 **dict(TINY, trees=5, draws=10, tune=10))


@pytest.mark.slow
def test_time_only_model_tracks_kaplan_meier():
    """Spec check (c): N = 500 Weibull(shape 1.5, scale 20) times rounded up to integer weeks,
    independent censoring uniform on 1..55 weeks (30% censored, K = 39 event weeks). Require the
    posterior mean of S within 0.05 of KM at every g_j and KM inside the 95% band at >= 90% of the
    g_j (spec 1.9 (c): KM's own sd at S = 1/2 is about 0.022 at N = 500; this seed gave 0.005 and
    100%). Fixed seeds; about 10 CPU s."""
    rng = np.random.default_rng(2016)
    n = 500
    t = np.ceil(20 * rng.weibull(1.5, n))
    c = np.ceil(rng.uniform(0, 55, n))
    df = pd.DataFrame({"time": np.minimum(t, c), "status": (t <= c).astype(int)})
    assert 0.25 <= 1 - df["status"].mean() <= 0.35
    fit = bps.bart("Surv(time, status) ~ 1", data=df, chains=2, draws=400, tune=500, thin=5, seed=7, progress=False)
    grid = np.asarray(fit.config["survival"]["grid"])
    times, km = _km(df["time"].to_numpy(), df["status"].to_numpy())
    assert np.array_equal(times, grid)
    table = fit.predict(df.iloc[:1])
    mean, lower, upper = (table.filter(like=f"_{part}").to_numpy()[0] for part in ("mean", "lower", "upper"))
    assert np.abs(mean - km).max() <= 0.05
    assert np.mean((lower <= km) & (km <= upper)) >= 0.9


def test_missing_covariates_split():
    # na_action="split": missing covariate values stay and are routed by the rules, in training
    # and at prediction (a row with x missing gets a curve; under "drop" the row would be gone)
    df = _data(80, seed=8)
    df.loc[[2, 9, 30], "x"] = np.nan
    fit = bps.bart("Surv(time, status) ~ x + g", data=df, na_action="split", **dict(TINY, trees=5, draws=10, tune=10))
    assert fit.config["survival"]["subjects"] == 80
    table = fit.predict(df.iloc[[2, 3]], times=[2.0])
    assert table.notna().all().all()
    with pytest.warns(BartpySuiteWarning, match="dropped 3 of 80 rows"):
        dropped = bps.bart("Surv(time, status) ~ x + g", data=df, **dict(TINY, trees=5, draws=10, tune=10))
    assert dropped.config["survival"]["subjects"] == 77


def test_median_quantiles_with_undefined_draws_are_infinite_not_nan():
    # a median survival time is +inf in a draw whose S never reaches 1/2; numpy's linear
    # interpolation between two such draws gives inf - inf = NaN (and a RuntimeWarning)
    import warnings

    from bartpy_suite.posterior.survival import quantiles_with_infinity

    values = np.array([[3.0, 1.0], [np.inf, 2.0], [np.inf, 3.0], [np.inf, 4.0], [5.0, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = quantiles_with_infinity(values, np.ones(5), [0.0, 0.5, 0.9, 1.0])
    # column 0 sorted: 3, 5, inf, inf, inf: the 0.0 quantile 3; the median lies among the infs;
    # 0.9 too; a finite column is numpy's quantile exactly
    assert q[0, 0] == 3.0 and np.all(np.isposinf(q[1:, 0]))
    np.testing.assert_array_equal(q[:, 1], np.quantile(values[:, 1], [0.0, 0.5, 0.9, 1.0]))
    # interpolating from a finite draw towards an infinite one by a non-zero fraction is +inf;
    # at fraction 0 it is the finite draw (the 0.25 quantile of 5 values is the second exactly)
    q = quantiles_with_infinity(values[:, :1], np.ones(5), [0.25, 0.3])
    assert q[0, 0] == 5.0 and np.isposinf(q[1, 0])
    # weighted (inverted-CDF) path: the draw whose cumulative weight reaches p (weights 1/2 on 3,
    # 1/8 on 5 and on each inf: cumulative 0.5, 0.625, 0.75, ...)
    q = quantiles_with_infinity(values[:, :1], np.array([4.0, 1, 1, 1, 1]), [0.4, 0.6, 0.7])
    assert q[0, 0] == 3.0 and q[1, 0] == 5.0 and np.isposinf(q[2, 0])
