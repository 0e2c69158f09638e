"""``na_action="split"``: missing predictor values routed by a missing-goes-left/right bit of every
split rule (MIA, Twala et al. 2008, as in bartMachine: Kapelner & Bleich 2015).

* The enumerated posterior of ``tests/exact/problems.py``'s "missing" data set (2,715 trees: the
  enumeration counts the bit of every numeric rule and treats "missing" as one more factor level)
  against the kernels tree by tree (log prior, log marginal likelihood; 1e-9) and by the
  exact-start invariance check of every kernel (G-test p > 1e-4, TV within 4.5 noise sd; see
  ``test_exact_posterior.py``). The default run holds the tree-by-tree check of every 4th tree
  and short exact starts of ``cgm`` (posterior, 4,000 draws) and ``grow_prune`` (prior, 3,000);
  the full tree-by-tree check, the 20,000-draw checks of every kernel, tempered and pg, and the
  long runs are marked slow.
* Prediction on new data with missing values follows the stored bits: checked against a walk of
  each stored tree written here on the raw values and the cut grid (exact equality), also after a
  save/load round trip.
* The user contract: the formula front end, the CLI, the missing-response warning, the samplers
  that refuse ``split`` with a message naming them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import test_exact_posterior as TE
from exact import harness as H
from exact.problems import MISSING_X, exact, make_problem

import bartpy_suite as bps
from bartpy_suite._kernels import tree as T
from bartpy_suite.errors import ArgumentError, BartpySuiteWarning, DataError

DATASET = "missing"


# -- kernels: representation ---------------------------------------------------------------------

def test_goes_left_numeric_bit_and_factor_missing_level():
    """The stored rule decides alone: cut index in the low word, missing code in the high word
    when missing values go left; a factor's missing code is one more mask bit."""
    nbins = 4  # codes 0..3 observed, 4 missing
    for k in range(nbins):
        for na_left in (False, True):
            cut = T.numeric_cut(k, na_left, nbins)
            assert [T.goes_left(c, cut, False) for c in range(nbins)] == [c <= k for c in range(nbins)]
            assert T.goes_left(nbins, cut, False) == na_left
    mask = np.int64((1 << 1) | (1 << 3))  # levels {1} and the missing code 3 of a 3-level factor
    assert [T.goes_left(c, mask, True) for c in range(4)] == [False, True, False, True]
    # bit 63: the missing level of a 63-level factor
    assert T.goes_left(63, np.int64(-(2**63)), True)


def test_binning_gives_missing_the_reserved_code():
    from bartpy_suite._binning import BinnedPredictors

    x = np.array([[1.0, 0.0], [np.nan, 1.0], [3.0, np.nan], [2.0, 2.0]])
    before = x.copy()
    bp = BinnedPredictors.fit(x, [False, True], [0, 3], None)
    assert np.array_equal(x, before, equal_nan=True)  # the input is not modified
    assert bp.nbins.tolist() == [3, 3]
    assert bp.codes.tolist() == [[0, 3, 2, 1], [0, 1, 3, 2]]


@pytest.mark.parametrize("stride", [pytest.param(1, marks=pytest.mark.slow), 4], ids=["every-tree", "every-4th"])
def test_chain_agrees_with_enumeration_tree_by_tree(stride):
    """log prior (with the bit counted), log marginal likelihood and the nested form of the
    enumerated trees agree with the kernels' (1e-9), as for the data sets without missing values
    (``test_exact_posterior``); the default run checks every 4th tree."""
    prob = make_problem(DATASET, "mean_shift")
    ex = exact(DATASET, "mean_shift")
    chain = H.make_chain(prob, H.CGM_MOVES, 0)
    for tree, lp, ll in list(zip(ex.trees, ex.log_prior, ex.log_lik))[::stride]:
        chain.set_tree(tree)
        assert chain.get_tree() == tree
        assert chain.log_marginal_likelihood() == pytest.approx(ll, rel=1e-9, abs=1e-9)
        assert chain.log_prior() == pytest.approx(lp - TE.representation_log_count(prob, tree), rel=1e-9, abs=1e-9)


def test_enumeration_counts_the_bit():
    """The reference itself: a proper prior over 2,715 trees; at the root x1 offers the pairs
    (k, na_left) by hand: observed x1 counts 3, 4, 3 and 3 missing rows, m = 2, so
    (0, F), (1, F), (2, F) (the split on missingness), (0, T), (1, T) (not (2, T): nothing right);
    each has the same p_RULE; the factor's partitions include "missing" as a fourth level."""
    from exact.enumerate import available_rules, rule_log_prob

    prob = make_problem(DATASET, None)
    ex = exact(DATASET, None)
    assert abs(ex.prior.sum() - 1.0) < 1e-12
    assert len(ex.trees) == 2715
    root = tuple(range(prob.n))
    rules = available_rules(prob, root)
    assert sorted(r[0] for r in rules[0]) == [(0, False), (0, True), (1, False), (1, True), (2, False)]
    assert (0, (2, False), None, None) in ex.index
    assert rule_log_prob(prob, root, 0, (0, True)) == pytest.approx(-math.log(2) - math.log(5), abs=1e-12)
    # factor counts 4, 4, 3 and 2 missing: the 2^3 - 1 partitions of four levels (3 without "missing")
    assert len(rules[1]) == 7


# -- exact-start invariance ----------------------------------------------------------------------

def check(model, label, moves, move, n_draws, likelihood=True):
    prob = make_problem(DATASET, model)
    ex = exact(DATASET, model)
    seed = TE.seed_of(DATASET, model, label, n_draws)
    stepper = H.Stepper(lambda mv: H.make_chain(prob, mv, seed, likelihood=likelihood), move, moves)
    observed = H.exact_start_run(stepper, ex.trees, ex.post, n_draws, TE.N_STEPS, seed + 1)
    fit = H.fit_trees(observed, ex.index, ex.post)
    print(f"\nexact-start {DATASET}/{model}/{label} ({n_draws}): {fit.line()}")
    assert fit.unknown == 0
    assert fit.p_value > 1e-4, fit.line()
    assert fit.tv < fit.tv_null_mean + 4.5 * fit.tv_null_sd, fit.line()


def test_exact_start_cgm_short():
    check("mean_shift", "cgm", H.CGM_MOVES, None, 4_000)


def test_prior_exact_start_grow_prune_short():
    check(None, "grow_prune", H.GROW_PRUNE_MOVES, None, 3_000, likelihood=False)


@pytest.mark.slow
@pytest.mark.parametrize("label,moves,move", TE.KERNELS, ids=[k[0] for k in TE.KERNELS])
@pytest.mark.parametrize("model", ["mean_shift", None], ids=["posterior", "prior"])
def test_exact_start_every_kernel(model, label, moves, move):
    check(model, label, moves, move, TE.N_DRAWS, likelihood=model is not None)


@pytest.mark.slow
def test_tempered_full_iteration_exact_start():
    """Three tempered iterations (a geometric rung, whose move ratios need p_RULE with the bit
    since the prior is tempered) keep both rungs' targets."""
    from test_tempered import Rung, assert_fit, exact_start_tempered

    rungs = [Rung(), Rung(0.3, 0.3)]
    out, probs, ex, _ = exact_start_tempered(DATASET, "mean_shift", rungs, H.CGM_MOVES, TE.N_STEPS, 7301, 8_000)
    for r in range(len(rungs)):
        assert_fit(H.fit_trees(out[r], ex.index, probs[r]), f"tempered missing rung {r}")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mean_shift", None], ids=["posterior", "prior"])
def test_pg_exact_start(model):
    from test_particle import pg_exact_start

    pg_exact_start(DATASET, model, {"particles": 10}, 20_000, likelihood=model is not None)


# grow_prune is left out of the long run for the reason given in test_exact_posterior for the
# "factor" data this set is built from: a bottleneck between factor-only trees, not a bug. Measured
# (seeded as below): TV(trees) 0.142, worst z = 33.6 on P((1, {0}, None, (1, {1}, None, None))),
# while its exact-start invariance passes (20,000 draws: p = 0.86; 100,000 draws x 5 steps:
# p = 0.60, TV 0.0253 against the noise floor 0.0258). cgm's change and swap moves remove it.
@pytest.mark.slow
def test_long_run_from_stump():
    TE.check_long_run(DATASET, "mean_shift", "cgm", H.CGM_MOVES, n_draws=200_000, thin=5, burn=2_000)


# -- prediction follows the bits -----------------------------------------------------------------

def _hand_walk(arrays, cuts, nbins, is_cat, x):
    """Leaf value reached by raw row ``x`` in one padded tree, decoding the stored rules here."""
    node = 0
    while arrays["split_var"][node] >= 0:
        v = int(arrays["split_var"][node])
        cut = int(arrays["split_cut"][node])
        if is_cat[v]:
            code = int(nbins[v]) if math.isnan(x[v]) else int(x[v])
            left = (cut >> code) & 1 == 1
        else:
            k, na_left = cut & (2**32 - 1), (cut >> 32) != 0
            if math.isnan(x[v]):
                left = na_left
            else:
                left = k >= len(cuts[v]) or x[v] <= cuts[v][k]  # k = len(cuts): every observed value
        node = int(arrays["left_child"][node] if left else arrays["right_child"][node])
    return float(arrays["leaf_value"][node])


def _missing_data(n=120, seed=3):
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0, 10, n)
    g = rng.integers(0, 3, n).astype(float)
    y = np.where(x1 > 5, 2.0, 0.0) + 1.5 * (g == 1) + 0.2 * rng.normal(size=n)
    miss1 = rng.random(n) < 0.25
    y[miss1] += 3.0  # a missing x1 carries signal: the trees should learn where it goes
    x1[miss1] = np.nan
    g[rng.random(n) < 0.15] = np.nan
    return np.column_stack([x1, g]), y


@pytest.fixture(scope="module")
def cart_fit():
    X, y = _missing_data()
    model = bps.BayesianCART(sampler="cgm", chains=2, draws=60, tune=200, seed=5, progress=False, min_leaf_size=3)
    return model.fit(X, y, is_categorical=[False, True], n_levels=[0, 3], na_action="split")


def test_predict_follows_the_bits_of_every_stored_tree(cart_fit, tmp_path):
    new = np.array([[np.nan, 0.0], [np.nan, np.nan], [7.0, np.nan], [2.0, 1.0], [np.nan, 2.0], [5.0, 0.0]])
    arrays = cart_fit.tree_arrays()
    const = cart_fit.idata["constant_data"]
    nbins = const["nbins"].values
    is_cat = const["is_categorical"].values.astype(bool)
    cuts = [const["cuts"].values[v, : nbins[v] - 1] for v in range(2)]
    chains, draws = arrays.sizes["chain"], arrays.sizes["draw"]
    expected = np.empty((chains * draws, len(new)))
    for c in range(chains):
        for d in range(draws):
            one = {name: arrays[name].values[c, d, 0] for name in ("split_var", "split_cut", "left_child",
                                                                 "right_child", "leaf_value")}
            expected[c * draws + d] = [_hand_walk(one, cuts, nbins, is_cat, row) for row in new]
    np.testing.assert_array_equal(cart_fit.function_samples(new), expected)
    # The trees use missing values: both directions occur among the rules on x1.
    var = arrays["split_var"].values
    cut = arrays["split_cut"].values
    bits = (cut[var == 0] >> 32) != 0
    assert bits.any() and not bits.all()
    path = tmp_path / "fit.nc"
    cart_fit.to_netcdf(path)
    again = bps.load(path)
    np.testing.assert_array_equal(again.function_samples(new), expected)
    assert again.predict(new).shape == (len(new), 3)


def test_split_learns_the_missing_signal(cart_fit):
    """Rows missing x1 carry +3: E[y | x1 missing, g = 0] = 3 + 2 P(x1 > 5) = 4, against about 0
    at x1 = 2, g = 0. Tolerance 1.0: about 9 training rows are missing x1 with g = 0, whose mean
    has sd 1.0 / 3 (the hidden x1 adds sd 1 to the noise), plus the pooling of a leaf with
    neighbouring rows; dropping those rows (or a wrong routing at predict time) cannot reach it."""
    pred = cart_fit.predict(np.array([[np.nan, 0.0], [2.0, 0.0]]))["mean"].to_numpy()
    assert abs(pred[0] - 4.0) < 1.0
    assert abs(pred[1] - 0.0) < 1.0


# -- the user contract ---------------------------------------------------------------------------

def _frame():
    X, y = _missing_data(n=80, seed=8)
    df = pd.DataFrame({"x1": X[:, 0], "g": pd.Categorical.from_codes(
        np.where(np.isnan(X[:, 1]), -1, X[:, 1]).astype(int), ["a", "b", "c"]), "y": y})
    df.loc[[3, 9], "y"] = np.nan
    return df


def test_formula_split_keeps_rows_and_warns_for_a_missing_response():
    df = _frame()
    before = df.copy()
    with pytest.warns(BartpySuiteWarning, match=r"dropped 2 of 80 rows with a missing response 'y'"):
        fit = bps.cart("y ~ x1 + g", data=df, na_action="split", sampler="cgm", chains=1, draws=20, tune=20, seed=1,
                       progress=False)
    pd.testing.assert_frame_equal(df, before)
    assert fit.idata["observed_data"]["y"].size == 78
    assert fit.config["na_action"] == "split"
    new = pd.DataFrame({"x1": [np.nan, 4.0], "g": pd.Categorical([None, "b"], categories=["a", "b", "c"])})
    pred = fit.predict(new)
    assert pred["mean"].notna().all()
    text = str(fit.map_tree())
    assert "NA" in text


def test_formula_drop_is_unchanged():
    df = _frame()
    with pytest.warns(BartpySuiteWarning, match=r"na_action='drop'"):
        fit = bps.cart("y ~ x1 + g", data=df, sampler="cgm", chains=1, draws=10, tune=10, seed=1, progress=False)
    n_complete = int(df.notna().all(axis=1).sum())
    assert fit.idata["observed_data"]["y"].size == n_complete
    with pytest.raises(DataError, match="newdata has missing values"):
        fit.predict(pd.DataFrame({"x1": [np.nan], "g": pd.Categorical(["a"], categories=["a", "b", "c"])}))


@pytest.mark.parametrize("kind", ["regression", "probit", "multinomial"])
def test_bart_split_every_model(kind):
    df = _frame().dropna(subset=["y"])
    if kind == "probit":
        df = df.assign(y=np.where(df["y"] > 2.5, "hi", "lo"))
    elif kind == "multinomial":
        df = df.assign(y=pd.cut(df["y"], [-np.inf, 1.5, 3.5, np.inf], labels=["lo", "mid", "hi"]).astype(str))
    fit = bps.bart("y ~ .", data=df, na_action="split", trees=10, chains=1, draws=30, tune=30, seed=2,
                   progress=False)
    new = pd.DataFrame({"x1": [np.nan, 8.0], "g": pd.Categorical(["a", None], categories=["a", "b", "c"])})
    pred = fit.predict(new, kind="prob" if kind != "regression" else "mean")
    assert len(pred) == 2 and pred.notna().all().all()
    var = fit.tree_arrays()["split_var"].values
    cut = fit.tree_arrays()["split_cut"].values
    assert ((cut[var == 0] >> 32) != 0).any()  # some x1 rules send missing values left


def test_array_level_nan_needs_split():
    X, y = _missing_data(n=40)
    with pytest.raises(DataError, match="na_action='split'"):
        bps.BayesianCART(sampler="cgm", chains=1, draws=5, tune=5, progress=False).fit(X, y, is_categorical=[False, True])
    with pytest.raises(ArgumentError, match="na_action"):
        bps.BayesianCART(sampler="cgm", chains=1, draws=5, tune=5, progress=False).fit(X, y, na_action="omit")


@pytest.mark.parametrize("sampler,options,what", [
    ("ctmc", None, "'ctmc' does not support na_action='split'"),
    ("smc", {"proposal": "optimal"}, "'smc' does not support na_action='split'.*'proposal': 'prior'"),
    ("pg", {"ancestor_sampling": True}, "'pg' does not support na_action='split'.*'ancestor_sampling': False"),
    ("grow_prune", {"moves": {"grow": 0.4, "prune": 0.4, "perturb": 0.2}},
     "'grow_prune' does not support na_action='split'.*'rotate' and 'perturb'"),
])
def test_unsupported_samplers_refuse_split(sampler, options, what):
    X, y = _missing_data(n=40)
    model = bps.BayesianCART(sampler=sampler, sampler_options=options, chains=1, draws=5, tune=5, progress=False)
    with pytest.raises(ArgumentError, match=what) as info:
        model.fit(X, y, is_categorical=[False, True], n_levels=[0, 3], na_action="split")
    assert "'cgm'" in str(info.value)


def test_pg_and_smc_prior_proposal_fit_split():
    X, y = _missing_data(n=60)
    for sampler in ("pg", "smc"):
        fit = bps.BayesianCART(sampler=sampler, chains=1, draws=10, tune=5, seed=1, progress=False).fit(
            X, y, is_categorical=[False, True], n_levels=[0, 3], na_action="split")
        assert np.isfinite(fit.predict(np.array([[np.nan, np.nan]]))["mean"]).all()


def test_cli_na_action_split(tmp_path, capsys):
    from bartpy_suite.cli import main

    df = _frame().dropna(subset=["y"])
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    new = tmp_path / "new.csv"
    pd.DataFrame({"x1": [np.nan, 3.0], "g": ["a", None]}).to_csv(new, index=False)
    out = tmp_path / "fit.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", "y ~ x1 + g", str(data), "--na-action", "split", "--chains", "1", "--draws", "10",
                     "--tune", "10", "--seed", "1", "--out", str(out), "--no-progress"]) == 0
        assert main(["predict", str(out), str(new)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3].startswith("mean") and len(lines[-2].split(",")) == 3
    assert bps.load(out).config["na_action"] == "split"


def test_training_codes_hold_missing(cart_fit):
    codes = cart_fit.idata["constant_data"]["x_codes"].values
    X, _ = _missing_data()
    nbins = cart_fit.idata["constant_data"]["nbins"].values
    assert np.array_equal(codes[0] == nbins[0], np.isnan(X[:, 0]))
    assert np.array_equal(codes[1] == nbins[1], np.isnan(X[:, 1]))


def test_missing_x_of_the_exact_problem_has_missing_values():
    # guards the exact tests above against an edit of the data set that drops the missing values
    assert np.isnan(MISSING_X[:, 0]).sum() == 3 and np.isnan(MISSING_X[:, 1]).sum() == 2


def test_stateful_transform_of_a_column_with_missing_values_is_refused_under_split():
    df = pd.DataFrame({"x": [1.0, np.nan] + list(np.arange(3.0, 13.0)), "y": np.arange(12.0)})
    with pytest.raises(DataError, match=r"'scale\(x\)' is a stateful transform .* na_action='split'"):
        bps.cart("y ~ scale(x)", data=df, na_action="split", sampler="cgm", chains=1, draws=5, tune=5, progress=False)
