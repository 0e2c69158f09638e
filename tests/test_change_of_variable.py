"""Pratola's CHANGE-OF-VARIABLE proposal inside perturb (``_kernels/rotate.py``,
``change_of_variable_step``) for ``cgm`` and ``ctmc``.

* The correlation matrix the kernels get (``rotate.spearman_matrix``) against scipy / pandas.
* Exact-start invariance on "corr", a tiny data set whose two numeric predictors are strongly
  negatively correlated (Spearman -0.67, n = 15, m = 2; 109 valid trees, enumerated by
  ``tests/exact``): 20,000 trees drawn from the exact posterior (or prior, likelihood off), three
  transitions each, must still follow it. Tolerances are those of ``test_exact_posterior.py``
  (G-test p > 1e-4, TV below the i.i.d. sampling-noise TV + 4.5 sd) and for the same reason:
  tail bounds of order 1e-5 for a correct kernel, while a wrong ratio (e.g. OpenBT's, without the
  cut-proposal factor, or a missing reverse weight) moves mass between the x1 and x2 trees by far
  more. CHGV forced (``change_of_variable=1``) and mixed with perturb (0.5); for ``ctmc`` the
  jump chain's law is pi * Lambda.
* The ratio itself: every forced CHGV proposal's log r on "corr3" (a third, binary predictor, so
  that the rows of P have different sums) against log pi(T') - log pi(T) + log q ratio computed
  independently from the enumeration and scipy's Spearman matrix (1e-8). Dropping the cut-proposal
  factor fails the exact-start tests (p = 1e-6); dropping the weights' normalising sums fails this
  one (the exact-start test cannot see it: p 0.91 -> 0.73).
* CHGV fires and is accepted on confounded data (Wu et al. 2007: x1 and x3 correlated about
  -0.67): a tree split on x1 reaches x3 at the root, which perturb alone never does.
* Bad option values are refused with an error naming the option.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest
from exact import harness as H
from exact.enumerate import Problem, exact_posterior
from exact.problems import calibrated_lambda
from scipy import stats
from test_ctmc_exact import lambdas

import bartpy_suite as bps
from bartpy_suite._kernels.rotate import change_of_variable_table, spearman_matrix
from bartpy_suite.errors import ArgumentError

N_DRAWS = 20_000
N_STEPS = 3

# two predictors on three values each, mostly on the anti-diagonal
_CELLS = {(0, 2): 3, (1, 1): 3, (2, 0): 3, (0, 1): 2, (2, 1): 2, (1, 0): 2}
CORR_X = np.array([c for c, k in _CELLS.items() for _ in range(k)], dtype=float)
_NOISE = np.array([0.31, -0.52, 0.12, 0.77, -0.43, -0.05, 0.64, -0.71, 0.22, -0.18, 0.49, -0.36, -0.61, 0.08, 0.27])
CORR_Y = np.round(1.0 * (CORR_X[:, 0] >= 1) + 0.5 * (CORR_X[:, 1] == 0) + _NOISE, 2)
# "corr3": a third, binary predictor (Spearman 0.67 with x1, -0.34 with x2), so that the rows of P
# have different sums and the proposal's normalising constants q(v -> .) differ (227 trees)
CORR3_X = np.column_stack([CORR_X, [0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]])


def seed_of(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def corr_problem(model: str | None, three: bool = False) -> Problem:
    X = CORR3_X if three else CORR_X
    p = X.shape[1]
    return Problem(X, np.zeros(p, dtype=bool), np.zeros(p, dtype=int), 2, 0.95, 1.0, model, y=CORR_Y, a=1.0 / 3.0,
                   mu_bar=float(CORR_Y.mean()), nu=3.0, lam=calibrated_lambda(CORR_Y))


_EXACT = {}


def corr_exact(model: str | None, three: bool = False):
    if (model, three) not in _EXACT:
        _EXACT[model, three] = exact_posterior(corr_problem(model, three))
    return _EXACT[model, three]


def make_cgm(prob: Problem, moves: dict, seed: int, chv: float, likelihood: bool = True, sweep: bool = False):
    chain = H.make_chain(prob, moves, seed, likelihood=likelihood)
    chain.chv = change_of_variable_table(chain.codes, chain.is_categorical, chain.nbins, chv, sweep=sweep)
    return chain


def assert_fit(fit: H.FitResult, label: str) -> None:
    print(f"\n{label}: {fit.line()}")
    assert fit.unknown == 0, f"{fit.unknown} trees outside the enumeration (invalid trees reached)"
    assert fit.p_value > 1e-4, fit.line()
    assert fit.tv < fit.tv_null_mean + 4.5 * fit.tv_null_sd, fit.line()


def check_cgm(model: str | None, chv: float, move: str | None = "perturb", moves: dict | None = None,
              three: bool = False, sweep: bool = False) -> None:
    likelihood = model is not None
    prob = corr_problem(model, three)
    ex = corr_exact(model, three)
    seed = seed_of("chgv-cgm", model, chv, move, *(("three",) if three else ()), *(("sweep",) if sweep else ()))
    stepper = H.Stepper(lambda mv: make_cgm(prob, mv, seed, chv, likelihood, sweep), move, moves or {})
    observed = H.exact_start_run(stepper, ex.trees, ex.post, N_DRAWS, N_STEPS, seed + 1)
    assert_fit(H.fit_trees(observed, ex.index, ex.post),
               f"cgm corr{3 if three else ''}/{model} chgv={chv} move={move} sweep={sweep}")


def check_ctmc(model: str | None, chv: float, n_draws: int = N_DRAWS) -> None:
    from bartpy_suite.samplers.ctmc import CtmcCartChain

    likelihood = model is not None
    prob = corr_problem(model)
    ex = corr_exact(model)
    seed = seed_of("chgv-ctmc", model, chv)
    chain = CtmcCartChain(H.cart_problem(prob, likelihood), np.random.default_rng(seed), rotate=2.0, perturb=2.0,
                          change_of_variable=chv)
    target = ex.post * lambdas(chain, ex.trees)
    target /= target.sum()
    stepper = H.Stepper(lambda moves: chain, None, {})
    reached = H.exact_start_run(stepper, ex.trees, target, n_draws, N_STEPS, seed + 1)
    assert_fit(H.fit_trees(reached, ex.index, target), f"ctmc jump chain corr/{model} CT-C chgv={chv}")


# -- the correlation matrix -------------------------------------------------------------------------

def test_spearman_matrix_against_scipy_and_pandas():
    """Bin codes of columns whose every value has its own bin give scipy's Spearman matrix
    (1e-12: two ways of rounding the same sums); a factor and a constant column get 0; missing
    codes (``nbins[v]``) use pairwise-complete rows, as pandas' ``corr(method="spearman")``."""
    rng = np.random.default_rng(0)
    n = 200
    a = rng.integers(0, 30, n)
    b = np.clip(a + rng.integers(-8, 9, n), 0, 40)  # ties in both
    c = rng.integers(0, 5, n)
    codes = np.stack([a, b, c, np.full(n, 3), rng.integers(0, 4, n)]).astype(np.int32)
    is_cat = np.array([False, False, False, False, True])
    nbins = np.array([30, 41, 5, 4, 4])
    got = spearman_matrix(codes, is_cat, nbins)
    want = stats.spearmanr(codes[:3].T).statistic
    np.testing.assert_allclose(got[:3, :3], want, atol=1e-12)
    assert np.all(got[3, :3] == 0) and np.all(got[4, :4] == 0) and np.all(np.diag(got) == 1)
    assert np.array_equal(got, got.T)
    # missing values: the code nbins[v]
    miss = codes[:3].copy()
    miss[0, :17] = 30
    miss[1, 10:40] = 41
    got = spearman_matrix(miss, is_cat[:3], nbins[:3])
    frame = pd.DataFrame({k: np.where(miss[k] < nbins[k], miss[k], np.nan) for k in range(3)})
    np.testing.assert_allclose(got, frame.corr(method="spearman").to_numpy(), atol=1e-12)
    # the table: probability and sweep flag first, then the matrix; nothing built for probability 0
    table = change_of_variable_table(codes, is_cat, nbins, 0.25)
    assert table[:2].tolist() == [0.25, 0.0] and table.shape == (2 + 25,)
    assert change_of_variable_table(codes, is_cat, nbins, 0.0).tolist() == [0.0, 0.0]
    assert change_of_variable_table(codes, is_cat, nbins, 0.0, sweep=True).tolist() == [0.0, 1.0]


def test_corr_data_set_is_confounded():
    # the point of the data set: the two predictors are strongly negatively correlated
    assert stats.spearmanr(CORR_X[:, 0], CORR_X[:, 1]).statistic < -0.6
    assert len(corr_exact("mean_shift").trees) == 109


# -- exact-start invariance -------------------------------------------------------------------------

def test_exact_start_invariance_cgm_chgv_forced():
    check_cgm("mean_shift", 1.0)


@pytest.mark.slow
def test_exact_start_invariance_cgm_chgv_mixed():
    check_cgm("mean_variance_shift", 0.5)


def test_prior_exact_start_invariance_cgm_chgv_forced():
    check_cgm(None, 1.0)


def test_exact_start_invariance_cgm_perturb_sweep():
    """OpenBT's sweep (every internal node once per perturb move, CHGV with probability 0.5 at each):
    a composition of pi-invariant steps."""
    check_cgm("mean_shift", 0.5, sweep=True)


@pytest.mark.slow  # the ratio test below covers this data set in the default run
def test_exact_start_invariance_cgm_chgv_three_predictors():
    check_cgm("mean_shift", 1.0, three=True)


@pytest.mark.slow
def test_exact_start_invariance_cgm_rj_c_mix_with_chgv():
    check_cgm("mean_shift", 0.5, move=None, moves=H.PERTURB_MOVES)


def test_exact_start_invariance_ctmc_chgv_forced():
    check_ctmc("mean_shift", 1.0, n_draws=10_000)


@pytest.mark.slow
@pytest.mark.parametrize("model,chv", [("mean_shift", 0.5), (None, 1.0)])
def test_exact_start_invariance_ctmc_chgv(model, chv):
    check_ctmc(model, chv)


def test_chgv_ratio_against_an_independent_computation():
    """Every forced CHGV proposal's log r (``H.propose``: the kernel's ratio, proposal kept) on
    "corr3" equals log pi(T') - log pi(T) + log q(T' -> T) - log q(T -> T') computed here from the
    enumeration (pi), scipy's Spearman matrix and the rows at the changed node:
    q(T -> T') = w(v -> v') / sum_i w(v -> i) / n_cuts(v'), with w(v -> v) = 1, w(v -> i) = |P[v, i]|
    when i has an available cut at the node (1e-8: rounding of sums of ~20 log terms). Three rows
    of P with different sums make every term count (the exact-start test has little power for the
    normalising sums: dropping them moved its G-test p from 0.91 to 0.73 only)."""
    prob = corr_problem("mean_shift", three=True)
    ex = corr_exact("mean_shift", three=True)
    chain = make_cgm(prob, {"perturb": 1.0}, 11, 1.0)
    codes, m = chain.codes, prob.m
    p, n = codes.shape
    P = np.asarray(stats.spearmanr(codes.T).statistic)

    def n_cuts(rows, v):
        x = codes[v, rows]
        return sum(m <= np.count_nonzero(x <= k) <= len(x) - m for k in range(int(chain.nbins[v]) - 1))

    def weight(a, b, rows):
        return 1.0 if a == b else (abs(P[a, b]) if n_cuts(rows, b) > 0 else 0.0)

    def changed(a, b, rows):
        """The first node (preorder) whose rule differs, with the rows reaching it."""
        if a is None or a[:2] != b[:2]:
            return a, b, rows
        go = codes[a[0], rows] <= a[1]
        out = changed(a[2], b[2], rows[go])
        return out if out[0] is not None else changed(a[3], b[3], rows[~go])

    checked = same = swapped = 0
    for i, tree in enumerate(ex.trees):
        if tree is None:
            continue
        for _ in range(4):
            chain.set_tree(tree)
            log_r, new = H.propose(chain, "perturb")
            assert new is not H.NO_PROPOSAL or log_r == -np.inf
            if new is H.NO_PROPOSAL:
                continue
            j = ex.index[new]
            if new == tree:
                same += 1
                assert abs(log_r) < 1e-8
                continue
            a, b, rows = changed(tree, new, np.arange(n))
            v, v2 = a[0], b[0]
            log_q = (math.log(weight(v2, v, rows)) - math.log(sum(weight(v2, k, rows) for k in range(p)))
                     - math.log(weight(v, v2, rows)) + math.log(sum(weight(v, k, rows) for k in range(p)))
                     + math.log(n_cuts(rows, v2)) - math.log(n_cuts(rows, v)))
            want = ex.log_prior[j] + ex.log_lik[j] - ex.log_prior[i] - ex.log_lik[i] + log_q
            assert log_r == pytest.approx(want, abs=1e-8), (tree, new)
            checked += 1
            swapped += P[v, v2] < 0
    # (measured: 147 proposals checked, the rest had prior 0; some redraw the same rule)
    assert checked > 100 and swapped > 10 and same > 0


# -- it fires ---------------------------------------------------------------------------------------

def _root_share_on(chv: float, seed: int, n: int = 300) -> float:
    """Wu et al. data (n rows, noise sd 1); the chain starts at the stump split on x1 between its two
    blocks (x1 < 0.5: the rows of blocks 1-2, the same rows as x3 > 0.5) and runs perturb moves
    only: the share of 2,000 draws whose root splits on x3."""
    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite.priors import NormalLeafPrior, TreePrior, kernel_prior
    from bartpy_suite.samplers.mh import CartChain

    d = bps.datasets.simulate_wu2007(n, seed=seed)
    X = d[["x1", "x2", "x3"]].to_numpy()
    bp = BinnedPredictors.fit(X, np.zeros(3, dtype=bool), np.zeros(3, dtype=int), None)
    y = ((d["y"] - d["y"].mean()) / d["y"].std()).to_numpy()
    prior = kernel_prior(TreePrior(0.95, 2.0, 5), NormalLeafPrior(1.0 / 3.0, 0.0, 3.0, 0.1), likelihood=True)
    chain = CartChain(bp.codes, bp.is_categorical, bp.nbins, y, np.zeros(len(y), dtype=np.int64), prior,
                      {"perturb": 1.0}, np.random.default_rng(seed), change_of_variable=chv)
    gap = int(np.searchsorted(bp.cuts[0], 0.5)) - 1  # last cut below 0.5: x1 <= it iff x1 < 0.5
    chain.set_tree((0, gap, None, None))
    roots = []
    for _ in range(2_000):
        H.step(chain)
        roots.append(chain.get_tree()[0])
    return float(np.mean(np.array(roots) == 2))


def test_chgv_moves_the_root_between_confounded_predictors():
    """Perturb alone never changes a rule's variable; with CHGV (probability 1) a stump split on x1
    of the Wu et al. data (60 rows; x1 and x3 Spearman about -0.67) reaches x3 and back. The share of
    draws with the root on x3 depends on the data (measured 0.13-0.53 over seeds 0-4 at 60 rows;
    0-0.75 at 300 rows, where one cut in about 290 falls between the blocks); 0.05 is a floor that
    only a CHGV that never fires or is never accepted fails."""
    for seed in (1, 2):
        assert _root_share_on(0.0, seed, 60) == 0.0
        share = _root_share_on(1.0, seed, 60)
        print(f"seed {seed}: share of draws with the root on x3 {share:.3f}")
        assert share > 0.05


@pytest.mark.slow  # about 35 s, mostly compiling the BART ctmc kernel with perturb events
def test_chgv_through_the_front_door():
    d = bps.datasets.simulate_wu2007(200, seed=3)
    moves = {"grow": 0.25, "prune": 0.25, "change": 0.1, "swap": 0.1, "rotate": 0.15, "perturb": 0.15}
    fits = [bps.cart("y ~ x1 + x2 + x3", data=d, sampler="cgm", chains=1, draws=300, tune=50, seed=1,
                     sampler_options={"moves": moves, "change_of_variable": chv}) for chv in (0.0, 0.1)]
    # the default is 0.1: the same draws as asking for it
    default = bps.cart("y ~ x1 + x2 + x3", data=d, sampler="cgm", chains=1, draws=300, tune=50, seed=1,
                       sampler_options={"moves": moves})
    np.testing.assert_array_equal(default.posterior["sigma"].values, fits[1].posterior["sigma"].values)
    assert not np.array_equal(fits[0].posterior["sigma"].values, fits[1].posterior["sigma"].values)
    b = bps.bart("y ~ x1 + x2 + x3", data=d, trees=5, sampler="ctmc", chains=1, draws=20, tune=10, seed=2,
                 sampler_options={"perturb": 2.0, "change_of_variable": 1.0})
    assert np.isfinite(b.posterior["sigma"].values).all()


@pytest.mark.parametrize("sampler", ["cgm", "grow_prune", "ctmc"])
@pytest.mark.parametrize("value", [1.5, -0.1, "often", True, float("nan")])
def test_bad_change_of_variable_names_the_option(sampler, value):
    d = bps.datasets.simulate_wu2007(50, seed=0)
    with pytest.raises(ArgumentError, match=r"sampler option 'change_of_variable' must be a probability in \[0, 1\]"):
        bps.cart("y ~ x1 + x2 + x3", data=d, sampler=sampler, sampler_options={"change_of_variable": value})
    with pytest.raises(ArgumentError, match=r"sampler option 'perturb_sweep' must be True or False"):
        bps.cart("y ~ x1 + x2 + x3", data=d, sampler=sampler, sampler_options={"perturb_sweep": 1})


def test_bcf_ctmc_forests_get_the_table():
    """BCF's ctmc forests (``CausalChain`` options, as ``check_forest_options`` fills them in): each
    forest's ``mh_rates`` carry its own predictors' table when perturb events fire, none without."""
    from test_bcf_samplers import _agreement_problem

    from bartpy_suite.samplers.multi_forest import CausalChain, check_multi_forest_sampler

    problem = _agreement_problem()
    for opts, width in (({"perturb": 2.0, "change_of_variable": 0.3}, None), ({"rotate": 2.0}, 3)):
        chain = CausalChain(problem, check_multi_forest_sampler("ctmc"), np.random.default_rng(0), sampler="ctmc",
                            options=opts)
        for part, spec in ((chain.mu, problem.mu), (chain.tau, problem.tau)):
            rates = part.update.mh_rates
            p = spec.codes.shape[0]
            if width is None:
                assert rates[2] == 0.3 and rates.shape == (4 + p * p,)
                np.testing.assert_allclose(rates[4:].reshape(p, p),
                                           spearman_matrix(spec.codes, spec.is_categorical, spec.nbins))
            else:
                assert rates.tolist() == [2.0, 0.0, 0.0, 0.0]


@pytest.mark.slow  # compiles the random-effect BART kernel with perturb (about half a minute)
def test_option_reaches_random_effect_bart():
    """The option is not silently dropped where it is accepted: with perturb on, the draws with
    change_of_variable 1 differ from those with 0 (same seed) for BART with a random intercept."""
    rng = np.random.default_rng(5)
    n = 80
    x1 = rng.uniform(size=n)
    df = pd.DataFrame({"x1": x1, "x3": 1 - x1 + 0.1 * rng.normal(size=n),
                       "g": [f"s{k}" for k in rng.integers(0, 4, n)]})
    df["y"] = (df.x1 > 0.5) + 0.3 * rng.normal(size=n)
    sigma = {}
    moves = {"grow": 0.3, "prune": 0.3, "change": 0.1, "swap": 0.1, "perturb": 0.2}
    for chv in (0.0, 1.0):
        fit = bps.bart("y ~ x1 + x3 + (1 | g)", data=df, trees=5, chains=1, draws=30, tune=30, seed=1,
                       sampler="cgm", sampler_options={"moves": moves, "change_of_variable": chv})
        sigma[chv] = fit.posterior["sigma"].values
    assert np.isfinite(sigma[1.0]).all()
    assert not np.array_equal(sigma[0.0], sigma[1.0])
