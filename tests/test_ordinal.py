"""Ordinal (cumulative-probit) BART (issue 31, "Ordinal responses"; ``_kernels/ordinal.py``,
``models/ordinal.py``).

* kernels: log(Phi(hi) - Phi(lo)) against scipy's ``log_ndtr``, the two-sided truncated normal
  against scipy's ``truncnorm`` in every branch of its rejection sampler (KS);
* prior only (likelihood off): the cutpoints against their prior, i.i.d. N(0, s^2) restricted to
  0 < c_2 < c_3, i.e. the order statistics of two half-normals (KS);
* exact posterior on a problem small enough to integrate: one tree that cannot split (one leaf mu),
  three classes, so p(mu, c_2 | y) is two-dimensional and is integrated on a grid; the MH sampler
  and the Albert-Chib Gibbs cross-check are both compared with it;
* two classes reproduce probit BART draw for draw;
* user contract (formula trigger, predict kinds, probabilities sum to 1, log-likelihood, summary,
  save/load, the file check on cutpoints) and bad input.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from kernel_conventions import nrt_balance, record_helper_calls
from scipy import integrate, special, stats

import bartpy_suite as bps
from bartpy_suite._kernels import ordinal as kern
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning, DataError, FitFileError
from bartpy_suite.posterior import file_check
from bartpy_suite.posterior.leaf_models import ordinal_probabilities

FAST = dict(trees=10, chains=2, draws=60, tune=60, seed=3, progress=False, check_mixing=False)


def _frame(n=160, seed=0, levels=("low", "mid", "high", "top"), ordered=True):
    """Four ordered classes from a nonlinear latent (the cuts give each class about a quarter)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 2))
    z = 1.5 * np.sin(3 * x[:, 0]) + x[:, 1] + rng.standard_normal(n)
    codes = np.digitize(z, [-0.8, 0.2, 1.0])
    y = pd.Categorical.from_codes(codes, categories=list(levels), ordered=ordered)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y})


@pytest.fixture(scope="module")
def ordinal_fit():
    return bps.bart("y ~ x1 + x2", data=_frame(), **FAST)


# --- kernels ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo, hi", [(-np.inf, -40.0), (-np.inf, -3.0), (-50.0, -45.0), (-2.0, -1.9999),
                                    (-0.3, 0.2), (-1e-9, 1e-9), (-8.0, 8.0), (1.0, 1.5), (6.0, 6.1),
                                    (3.0, np.inf), (38.0, np.inf), (-np.inf, np.inf), (-1.0, 0.0), (0.0, 2.0)])
def test_log_interval_matches_scipy(lo, hi):
    """Reference: scipy's log_ndtr on the side of 0 where the interval lies, scipy's erf around 0
    (independent implementations; a plain ndtr difference loses 1e-9 of relative accuracy at
    (-1e-9, 1e-9)); 1e-9 relative (the narrowest interval here, width 1e-4 at -2, loses about
    1e-12 to cancellation)."""
    if hi <= 0 or lo >= 0:
        a, b = (hi, lo) if hi <= 0 else (-lo, -hi)
        ref = special.log_ndtr(a) + np.log1p(-np.exp(special.log_ndtr(b) - special.log_ndtr(a)))
    else:
        ref = np.log(0.5 * (special.erf(hi / np.sqrt(2)) - special.erf(lo / np.sqrt(2))))
    got = kern.log_interval(lo, hi)
    assert math.isclose(got, ref, rel_tol=1e-9, abs_tol=1e-300), (got, ref)


@pytest.mark.parametrize("lo, hi", [(-np.inf, -1.0), (0.3, np.inf), (-0.5, 0.7), (-2.0, 2.0), (1.0, 1.3),
                                    (1.0, 4.0), (-4.0, -1.0), (5.0, 5.5), (0.0, 0.2), (-9.0, -8.99)])
def test_two_sided_truncated_normal_against_scipy(lo, hi):
    """Each branch of ``truncated_normal_between`` (half-infinite, normal rejection, uniform around 0,
    uniform and exponential right of 0, mirrored) against scipy's truncnorm: KS on 3000 independent
    draws (seed 7), p > 1e-3 (a correct sampler fails one case in a thousand)."""
    rng = np.random.default_rng(7)
    draws = np.array([kern.truncated_normal_between(rng, lo, hi) for _ in range(3000)])
    assert np.all(draws > lo) and np.all(draws <= hi)
    p = stats.kstest(draws, stats.truncnorm(lo, hi).cdf).pvalue
    assert p > 1e-3, p


def test_class_probabilities_sum_to_one_and_match_the_direct_formula():
    """``ordinal_probabilities`` (5 classes) against the plain differences of Phi (absolute error
    of a difference of two numbers <= 1: 1e-15) and summing to 1 within 1e-12 for eta far in both
    tails (sd 6)."""
    rng = np.random.default_rng(0)
    eta = rng.normal(0, 6, (5, 40))
    cut = np.sort(np.concatenate([np.zeros((5, 1)), np.abs(rng.normal(0, 3, (5, 3)))], axis=1), axis=1)
    p = ordinal_probabilities(eta, cut)
    assert p.shape == (5, 40, 5)
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-12)
    full = np.concatenate([np.full((5, 1), -np.inf), cut, np.full((5, 1), np.inf)], axis=1)
    direct = special.ndtr(full[:, None, 1:] - eta[:, :, None]) - special.ndtr(full[:, None, :-1] - eta[:, :, None])
    np.testing.assert_allclose(p, direct, atol=1e-15)


# --- prior only ---------------------------------------------------------------------------------------
def test_prior_only_cutpoints_follow_their_ordered_normal_prior():
    """Likelihood off, K = 4, s = cutpoint_sd = 1: (c_2, c_3) has density proportional to
    phi(c_2) phi(c_3) on 0 < c_2 < c_3, the order statistics of two half-normals, so
    P(c_2 <= t) = 1 - (1 - F(t))^2 and P(c_3 <= t) = F(t)^2 with F(t) = 2 Phi(t) - 1.
    4 chains x 2000 draws thinned by 10 after 1000 tuning sweeps (seed 11); KS on the pooled
    draws, p > 1e-3 (the thinned draws' lag-1 autocorrelation is below 0.1, measured)."""
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(40, 1))
    y = np.repeat(np.arange(4), 10)
    fit = bps.BART(trees=3, chains=4, draws=2000, tune=1000, thin=10, seed=11, progress=False, check_mixing=False,
                   likelihood=False, link="ordinal", cutpoint_sd=1.0, log_likelihood=False).fit(
        x, y, class_labels=["a", "b", "c", "d"])
    cut = fit.posterior["cutpoints"].values.reshape(-1, 3)
    assert np.all(cut[:, 0] == 0.0) and np.all(np.diff(cut, axis=1) > 0)
    half = lambda t: np.clip(2 * special.ndtr(t) - 1, 0, 1)  # noqa: E731
    p2 = stats.kstest(cut[:, 1], lambda t: 1 - (1 - half(t)) ** 2).pvalue
    p3 = stats.kstest(cut[:, 2], lambda t: half(t) ** 2).pvalue
    assert p2 > 1e-3 and p3 > 1e-3, (p2, p3)


# --- exact posterior on a tiny problem ---------------------------------------------------------------
TINY_COUNTS = (3, 5, 4)  # rows per class
TINY_TAU = 1.5  # leaf sd 3 / (k sqrt(1)) at k = 2
TINY_SD = 2.0  # cutpoint prior sd


def _tiny_reference():
    """Posterior of (eta, c_2) for one leaf that cannot split: eta = mu0 + mu, mu ~ N(0, tau^2),
    c_2 ~ N(0, s^2) on c_2 > 0, likelihood prod_k P_k(eta, c)^(n_k). Integrated on a grid; returns
    the means of eta and c_2 and the marginal CDFs as callables (trapezoid rule, 1500^2 points:
    the means are exact to about 1e-6)."""
    n0, n1, n2 = TINY_COUNTS
    mu0 = special.ndtri((n1 + n2) / sum(TINY_COUNTS))
    eta = np.linspace(mu0 - 8 * TINY_TAU, mu0 + 8 * TINY_TAU, 1500)
    c2 = np.linspace(1e-6, 8 * TINY_SD, 1500)
    e, c = np.meshgrid(eta, c2, indexing="ij")
    log_p = (n0 * special.log_ndtr(-e) + n1 * np.log(np.maximum(special.ndtr(c - e) - special.ndtr(-e), 1e-300))
             + n2 * special.log_ndtr(e - c) - 0.5 * ((e - mu0) / TINY_TAU) ** 2 - 0.5 * (c / TINY_SD) ** 2)
    dens = np.exp(log_p - log_p.max())
    z = integrate.trapezoid(integrate.trapezoid(dens, c2, axis=1), eta)
    m_eta = integrate.trapezoid(dens, c2, axis=1) / z
    m_c2 = integrate.trapezoid(dens, eta, axis=0) / z
    cdf = lambda grid, m: (lambda t: np.interp(t, grid, integrate.cumulative_trapezoid(m, grid, initial=0)))  # noqa: E731
    return (mu0, integrate.trapezoid(eta * m_eta, eta), integrate.trapezoid(c2 * m_c2, c2), cdf(eta, m_eta),
            cdf(c2, m_c2))


def _tiny_data():
    y = np.repeat(np.arange(3), TINY_COUNTS)
    x = np.zeros((y.size, 1))  # one value: no rule is available, the tree stays one leaf
    return x, y


@pytest.mark.parametrize("gibbs", [False, True])
def test_tiny_posterior_matches_numerical_integration(gibbs):
    """One tree that cannot split, three classes (rows per class 3, 5, 4): the chain's draws of
    eta = mu0 + mu and c_2 against the integrated posterior. The MH sampler (the default) goes
    through ``bps.BART``; the Albert-Chib Gibbs cross-check through its chain directly. 4 chains x
    3000 draws thinned by 5 (seed 5): KS p > 1e-3 on the pooled draws and the means within 4
    Monte-Carlo standard errors (ESS from ``Fit.summary`` / arviz)."""
    mu0, mean_eta, mean_c2, cdf_eta, cdf_c2 = _tiny_reference()
    x, y = _tiny_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BartpySuiteWarning)  # the constant predictor
        model = bps.BART(trees=1, chains=4, draws=3000, tune=500, thin=5, seed=5, progress=False,
                         check_mixing=False, link="ordinal", cutpoint_sd=TINY_SD, log_likelihood=False)
        if not gibbs:
            fit = model.fit(x, y, class_labels=["a", "b", "c"])
            eta = fit.function_samples().reshape(4, -1, y.size)[:, :, 0]
            c2 = fit.posterior["cutpoints"].values[:, :, 1]
            assert fit.config["center"] == pytest.approx(mu0)
        else:
            eta, c2 = _gibbs_draws(x, y, mu0)
    for draws, mean, cdf in ((eta, mean_eta, cdf_eta), (c2, mean_c2, cdf_c2)):
        import arviz_stats  # noqa: F401  (arviz-stats is a test extra)
        from arviz_base import convert_to_dataset
        ess = float(arviz_stats.ess(convert_to_dataset({"v": draws}))["v"])
        se = draws.std() / math.sqrt(ess)
        assert abs(draws.mean() - mean) < 4 * se, (draws.mean(), mean, se)
        p = stats.kstest(draws.reshape(-1), cdf).pvalue
        assert p > 1e-3, p


def _gibbs_draws(x, y, mu0):
    """The same problem with the Albert-Chib Gibbs cutpoint step (``OrdinalBartProblem(gibbs=True)``)."""
    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite._kernels.backfit import SIGMA_PROBIT
    from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
    from bartpy_suite.priors import TreePrior, kernel_prior
    from bartpy_suite.samplers.mh import GROW_PRUNE_MOVES, OrdinalMHChain, move_flags, move_vector
    from bartpy_suite.samplers.problems import OrdinalBartProblem

    binned = BinnedPredictors.fit(x, [False], [0], 100)
    hyper = kernel_prior(TreePrior(), None, likelihood=True, tau2=TINY_TAU ** 2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    etas, cuts = [], []
    for seed in range(4):
        problem = OrdinalBartProblem(binned.codes, binned.is_categorical, binned.nbins, y.astype(float), hyper, 1,
                                     SIGMA_PROBIT, mu0, n_classes=3, cutpoints=(0.0, 1.0), cutpoint_sd=TINY_SD,
                                     gibbs=True)
        chain = OrdinalMHChain(problem, GROW_PRUNE_MOVES, np.random.default_rng(100 + seed), move_vector, move_flags)
        chain.allocate(3000)
        chain.run(0, 500 + 3000 * 5, 500, 5)
        kept = chain.collect(3000)
        cuts.append(kept.posterior["cutpoints"][:, 1])
        assert np.all(kept.store.tree_nodes == 1)  # one leaf per draw: the store's values are mu in draw order
        etas.append(mu0 + kept.store.value[:3000])
    return np.array(etas), np.array(cuts)


# --- two classes: probit BART ------------------------------------------------------------------------
def test_two_classes_reproduce_probit_bart_draw_for_draw():
    """With K = 2 the cutpoint step consumes no random numbers and the latents are drawn by the same
    one-sided sampler, so link="ordinal" and link="probit" give bit-identical trees."""
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(80, 2))
    y = (x[:, 0] + 0.3 * rng.standard_normal(80) > 0.5).astype(int)
    kw = dict(trees=5, chains=1, draws=30, tune=20, seed=9, progress=False, check_mixing=False)
    ordinal = bps.BART(link="ordinal", **kw).fit(x, y, class_labels=["no", "yes"])
    probit = bps.BART(link="probit", **kw).fit(x, y, class_labels=["no", "yes"])
    assert ordinal.config["center"] == probit.config["center"]
    np.testing.assert_array_equal(ordinal.idata["trees"]["node_value"].values, probit.idata["trees"]["node_value"].values)
    np.testing.assert_array_equal(ordinal.idata["trees"]["node_var"].values, probit.idata["trees"]["node_var"].values)
    assert np.all(ordinal.posterior["cutpoints"].values == 0.0)
    np.testing.assert_allclose(ordinal.predict(kind="prob", samples=True).values,
                               probit.predict(kind="prob", samples=True).values, atol=1e-15)


# --- user contract -----------------------------------------------------------------------------------
def test_an_ordered_categorical_response_selects_ordinal_bart(ordinal_fit):
    fit = ordinal_fit
    assert fit.config["leaf_model"] == "ordinal" and fit.config["link"] == "ordinal"
    assert fit.config["class_labels"] == ["low", "mid", "high", "top"]
    cut = fit.posterior["cutpoints"]
    assert cut.dims == ("chain", "draw", "cutpoint") and cut.shape == (2, 60, 3)
    assert list(cut["cutpoint"].values) == ["low|mid", "mid|high", "high|top"]
    values = cut.values.reshape(-1, 3)
    assert np.all(values[:, 0] == 0.0) and np.all(np.diff(values, axis=1) > 0)
    assert "sigma" not in fit.posterior
    assert 0.0 <= float(fit.sample_stats["cutpoint_accepted"].mean()) <= 1.0


def test_predictions_probabilities_and_log_likelihood(ordinal_fit):
    fit = ordinal_fit
    df = _frame()
    table = fit.predict(df.head(7), kind="prob")
    assert list(table.columns[:3]) == ["prob_low", "prob_low_lower", "prob_low_upper"]
    assert table.shape == (7, 13) and set(table["class"]) <= {"low", "mid", "high", "top"}
    means = table[[f"prob_{c}" for c in ("low", "mid", "high", "top")]].to_numpy()
    np.testing.assert_allclose(means.sum(axis=1), 1.0, atol=1e-12)
    assert (table["prob_mid_lower"] <= table["prob_mid"]).all() and (table["prob_mid"] <= table["prob_mid_upper"]).all()
    classes = fit.predict(df.head(7), kind="class")
    assert list(classes["class"]) == list(table["class"])
    draws = fit.predict(df.head(7), kind="prob", samples=True)
    assert draws.shape == (2, 60, 7, 4)
    np.testing.assert_allclose(draws.values.sum(axis=-1), 1.0, atol=1e-12)
    # pointwise log-likelihood: log P(observed class) per draw and row
    ll = fit.idata["log_likelihood"]["y"].values
    train = fit.predict(kind="prob", samples=True).values
    picked = np.take_along_axis(train, fit.idata["observed_data"]["y"].values[None, None, :, None], axis=3)[..., 0]
    np.testing.assert_allclose(ll, np.log(picked), rtol=1e-12)
    # mixing check runs on the class probabilities
    from bartpy_suite.posterior.mixing import mixing_report
    assert mixing_report(fit) is not None


def test_summary_lists_the_free_cutpoints(ordinal_fit):
    table = ordinal_fit.summary()
    assert "cutpoints[mid|high]" in table.index and "cutpoints[high|top]" in table.index
    assert "cutpoints[low|mid]" not in table.index  # fixed at 0
    row = table.loc["cutpoints[mid|high]"]
    assert row["mean"] > 0 and np.isfinite(row["r_hat"])


def test_an_unordered_factor_stays_multinomial_unless_asked():
    df = _frame(ordered=False)
    fit = bps.bart("y ~ x1 + x2", data=df, **FAST)
    assert fit.config["leaf_model"] == "multinomial"
    asked = bps.bart("y ~ x1 + x2", data=df, link="ordinal", **FAST)
    assert asked.config["leaf_model"] == "ordinal"
    # the unordered factor's levels keep the categorical's order
    assert asked.config["class_labels"] == ["low", "mid", "high", "top"]


def test_save_and_load_round_trip_and_the_file_check(ordinal_fit, tmp_path):
    path = tmp_path / "ordinal.nc"
    ordinal_fit.to_netcdf(path)
    back = bps.load(path)
    np.testing.assert_array_equal(back.posterior["cutpoints"].values, ordinal_fit.posterior["cutpoints"].values)
    pd.testing.assert_frame_equal(back.summary(), ordinal_fit.summary())
    pd.testing.assert_frame_equal(back.predict(_frame().head(5), kind="prob"),
                                  ordinal_fit.predict(_frame().head(5), kind="prob"))
    np.testing.assert_array_equal(back.idata["log_likelihood"]["y"].values,
                                  ordinal_fit.idata["log_likelihood"]["y"].values)
    with xr.open_datatree(path, engine="netcdf4") as tree:
        saved = tree.load()

    def edited(change):
        tree = saved.copy(deep=True)
        ds = tree["posterior"].to_dataset()
        values = ds["cutpoints"].values.copy()
        change(values)
        tree["posterior"] = xr.DataTree(ds.assign(cutpoints=(ds["cutpoints"].dims, values)))
        return tree

    def swap(v):
        v[1, 5, 1], v[1, 5, 2] = v[1, 5, 2], v[1, 5, 1]

    def nan(v):
        v[0, 3, 2] = np.nan

    def shift(v):
        v[0, 0, 0] = 0.5

    for change, pattern in ((swap, "not strictly increasing"), (nan, "non-finite"), (shift, "expected 0")):
        with pytest.raises(FitFileError, match="posterior/cutpoints") as info:
            file_check.check_fit(edited(change), "edited.nc")
        assert pattern in str(info.value)
    missing = saved.copy(deep=True)
    missing["posterior"] = xr.DataTree(missing["posterior"].to_dataset().drop_vars("cutpoints"))
    with pytest.raises(FitFileError, match="posterior/cutpoints: variable missing"):
        file_check.check_fit(missing, "edited.nc")


def test_the_file_check_reads_the_cutpoint_labels(ordinal_fit, tmp_path):
    """The summary names each free cutpoint by the file's ``cutpoint`` coordinate: repeated labels
    lost a row of it silently (the later overwrote the earlier) and permuted ones put one cutpoint's
    numbers under another's name."""
    path = tmp_path / "ordinal.nc"
    ordinal_fit.to_netcdf(path)
    with xr.open_datatree(path, engine="netcdf4") as tree:
        saved = tree.load()
    labels = [str(v) for v in saved["posterior"].dataset["cutpoint"].values]
    assert labels == ["low|mid", "mid|high", "high|top"]
    for bad in (["low|mid", "x", "x"], ["low|mid", "high|top", "mid|high"]):
        tree = saved.copy(deep=True)
        tree["posterior"] = xr.DataTree(tree["posterior"].to_dataset().assign_coords(cutpoint=bad))
        with pytest.raises(FitFileError, match="posterior/cutpoint: labels"):
            file_check.check_fit(tree, "edited.nc")


# --- bad input ---------------------------------------------------------------------------------------
def test_bad_input_gets_clear_errors():
    x = np.random.default_rng(0).uniform(size=(30, 1))
    model = bps.BART(link="ordinal", **FAST)
    with pytest.raises(DataError, match="1 level .*at least two"):
        model.fit(x, np.zeros(30, dtype=int), class_labels=["only"])
    with pytest.raises(DataError, match="'b' of the ordinal response is never observed"):
        model.fit(x, np.repeat([0, 2], 15), class_labels=["a", "b", "c"])
    with pytest.raises(DataError, match="row 3 .*code 5, outside 0..2"):
        model.fit(x, np.r_[0, 1, 2, 5, np.zeros(26, dtype=int)], class_labels=["a", "b", "c"])
    with pytest.raises(ArgumentError, match="link='ordinal' needs a categorical response"):
        model.fit(x, np.arange(30.0))
    with pytest.raises(ArgumentError, match="cutpoint_sd"):
        bps.BART(cutpoint_sd=0.0)
    with pytest.raises(ArgumentError, match="sampler 'pg' cannot fit this model"):
        bps.BART(link="ordinal", sampler="pg", **FAST).fit(x, np.repeat([0, 1, 2], 10), class_labels=["a", "b", "c"])


def test_a_formula_drops_a_level_no_row_has_with_a_warning():
    df = _frame()
    df["y"] = df["y"].cat.add_categories(["never"]).cat.reorder_categories(["low", "never", "mid", "high", "top"])
    with pytest.warns(BartpySuiteWarning, match="'never' that no row has"):
        fit = bps.bart("y ~ x1 + x2", data=df, **FAST)
    assert fit.config["class_labels"] == ["low", "mid", "high", "top"]
    one = df.assign(y=pd.Categorical(["low"] * len(df), categories=["low", "mid"], ordered=True))
    with pytest.raises(DataError, match="single class"):
        bps.bart("y ~ x1 + x2", data=one, **FAST)


# --- compiled-code hygiene (as tests/test_kernel_entry_points.py and tests/test_refcounts.py) ----------
def test_an_ordinal_fit_calls_no_helper_from_python_and_releases_every_array(monkeypatch):
    """A fit and its predictions reach only ``kernel`` functions from Python (a helper's twin would
    be compiled again in every process), and numba releases every array it made or adopted."""
    df = _frame(n=60)
    run = lambda: bps.bart("y ~ x1 + x2", data=df, trees=3, chains=1, draws=5, tune=3, seed=1,  # noqa: E731
                           progress=False, check_mixing=False, threads=1)
    calls = record_helper_calls(monkeypatch)
    run().predict(df.head(5), kind="prob")
    assert calls == []

    def fit_and_predict():
        run().predict(df.head(5), kind="prob")

    made, released = nrt_balance(fit_and_predict)
    assert made > 0 and made == released


# --- command line ------------------------------------------------------------------------------------
def test_the_command_line_fits_an_ordinal_response_given_its_levels(tmp_path, capsys):
    from bartpy_suite.cli import main

    df = _frame(n=80)
    df["y"] = df["y"].astype(str)  # a CSV holds text: the order comes from --levels
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "fit.nc"
    common = ["--model", "bart", "--trees", "5", "--chains", "1", "--draws", "20", "--tune", "20", "--seed", "1",
              "--no-progress", "--no-check-mixing"]
    assert main(["fit", "y ~ x1 + x2", str(csv), "--levels", "low,mid,high,top", "--out", str(out), *common]) == 0
    assert "cutpoints[mid|high]" in capsys.readouterr().out
    assert bps.load(out).config["leaf_model"] == "ordinal"
    pred = tmp_path / "pred.csv"
    assert main(["predict", str(out), str(csv), "--out", str(pred)]) == 0
    table = pd.read_csv(pred)
    assert list(table.columns[:3]) == ["prob_low", "prob_low_lower", "prob_low_upper"] and len(table) == 80
    assert main(["predict", str(out), str(csv), "--kind", "class", "--out", str(pred), "--force"]) == 0
    assert list(pd.read_csv(pred).columns) == ["class"]
    capsys.readouterr()
    assert main(["fit", "y ~ x1 + x2", str(csv), "--levels", "low,mid,high", *common]) == 2
    assert "holds 'top', not among --levels low,mid,high" in capsys.readouterr().err
    # only ordinal BART uses the order: CART would fit an unordered classification without a word
    assert main(["fit", "y ~ x1 + x2", str(csv), "--levels", "low,mid,high,top", "--model", "cart"]) == 2
    assert "--levels makes the response ordered, which only ordinal BART uses: add --model bart" in \
        capsys.readouterr().err


def test_tree_printout_and_shap_explain_the_latent(ordinal_fit):
    """A tree prints its leaf values on the latent scale (no class per node), and TreeSHAP explains
    eta: the values plus the base add up to eta = the sum of the trees (1e-9, spec 4.9 item 1)."""
    text = str(ordinal_fit.tree(chain=0, draw=0, tree=0))
    assert "latent probit scale" in text and "Phi(c_k - eta)" in text
    df = _frame().head(6)
    values = ordinal_fit.shap(df, max_draws=10)
    assert values.attrs["scale"] == "probit latent"
    total = values["shap"].sum("predictor") + values["base"]
    eta = ordinal_fit.function_samples(df).reshape(2, 60, 6)
    kept = values["draw"].values  # max_draws picks draws across the chain
    np.testing.assert_allclose(total.values, eta[:, kept], rtol=1e-9, atol=1e-9)


def test_the_mixing_advice_names_no_sampler_that_cannot_fit_ordinal_bart():
    from bartpy_suite.posterior.mixing import _advice

    class Stub:
        config = {"sampler": "grow_prune", "model_type": "bart", "leaf_model": "ordinal", "tune": 10, "draws": 10,
                  "thin": 1}

    advice = _advice(Stub(), "warning")
    assert "pg" not in advice and "thin=1" in advice


def test_the_scikit_learn_classifier_fits_ordinal_bart_on_request():
    """``BARTClassifier(link="ordinal")``: the classes in sorted order (integers 1..4 here), which is
    the natural order of an integer-coded ordinal response."""
    pytest.importorskip("sklearn")
    from bartpy_suite.sklearn import BARTClassifier

    df = _frame()
    x, y = df[["x1", "x2"]].to_numpy(), df["y"].cat.codes.to_numpy() + 1
    clf = BARTClassifier(link="ordinal", trees=5, chains=1, draws=20, tune=20, seed=1, progress=False,
                         check_mixing=False).fit(x, y)
    assert clf.posterior_.config["leaf_model"] == "ordinal" and list(clf.classes_) == [1, 2, 3, 4]
    prob = clf.predict_proba(x[:5])
    assert prob.shape == (5, 4)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, atol=1e-12)


def test_an_executor_gives_the_same_draws(ordinal_fit):
    """The problem and chains travel through ``executor=`` (``models/_remote.py``) unchanged."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        fit = bps.bart("y ~ x1 + x2", data=_frame(), executor=pool, **FAST)
    np.testing.assert_array_equal(fit.posterior["cutpoints"].values, ordinal_fit.posterior["cutpoints"].values)
    np.testing.assert_array_equal(fit.idata["trees"]["node_value"].values, ordinal_fit.idata["trees"]["node_value"].values)
