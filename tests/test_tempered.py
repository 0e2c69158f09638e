"""The ``tempered`` sampler (parallel tempering, thesis ch. 4) against enumerated targets.

Rung targets: ``pi_r(T) ∝ L(T)^t p(T)^s`` with the rung's own (alpha, beta). On the stored
representation of categorical rules the geometric rung tempers the representation's prior mass
``p(T) / K(T)`` (``K``: number of stored representations of the canonical tree, see
``_kernels/tree.py``), so its marginal over canonical trees is ``L^t p^s K^(1-s)``; the target
rung (s = 1) is the posterior exactly. ``rung_target`` below computes that from the enumeration.

* Exact-start invariance of every rung's MH kernel (cgm mix and single move types) for the
  geometric, likelihood and shrinkage rungs: 20,000 trees i.i.d. from the rung's target, 3
  transitions, G-test p > 1e-4 and TV below the i.i.d. sampling-noise TV + 4.5 sd (the tolerance
  of ``test_exact_posterior.py``: one-sided tails of order 1e-5 under a correct kernel).
* Swaps: pairs (T_0, T_1) drawn i.i.d. from pi_0 x pi_1, one swap round: both marginals stay
  put (same G/TV tolerance) and the acceptance rate matches its exact expectation
  E[min(1, ratio)] under the product target within 4 binomial standard errors.
* The full tempered iteration (moves on every rung, then swaps, retargeted prior caches) from an
  exact start of all rungs; with the likelihood off (prior only) and on.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from exact import harness as H
from exact.enumerate import exact_posterior
from exact.problems import exact, make_problem
from test_exact_posterior import representation_log_count

import bartpy_suite as bps
from bartpy_suite._kernels.records import Prior, make_prior, make_target, typed_prior
from bartpy_suite.errors import ArgumentError
from bartpy_suite.samplers.problems import CartProblem
from bartpy_suite.samplers.tempered import TemperedCartChain, rung_ladder

N_DRAWS = 20_000
N_STEPS = 3


@dataclasses.dataclass(frozen=True)
class Rung:
    """One rung: likelihood power t, prior power s, and (alpha, beta) (None: the problem's)."""

    t: float = 1.0
    s: float = 1.0
    alpha: float | None = None
    beta: float | None = None


def rung_problem(dataset, model, rung: Rung):
    prob = make_problem(dataset, model)
    if rung.alpha is not None:
        prob = dataclasses.replace(prob, alpha=rung.alpha, beta=rung.beta)
    return prob


def rung_log_target(dataset, model, rung: Rung) -> tuple[np.ndarray, list]:
    """Unnormalised log target of every enumerated tree (canonical), and the tree list."""
    prob = rung_problem(dataset, model, rung)
    ex = exact_posterior(prob) if rung.alpha is not None else exact(dataset, model)
    log_k = np.array([representation_log_count(prob, t) for t in ex.trees])
    return rung.t * ex.log_lik + rung.s * ex.log_prior + (1.0 - rung.s) * log_k, ex


def normalise(log_w: np.ndarray) -> np.ndarray:
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def rung_prior(base: Prior, rung: Rung) -> Prior:
    fields = dict(inv_temp=rung.t, prior_heat=1.0 - rung.s)
    if rung.alpha is not None:
        fields.update(alpha=rung.alpha, beta=rung.beta)
    return typed_prior(base._replace(**fields))


def assert_fit(fit: H.FitResult, label: str) -> None:
    print(f"\n{label}: {fit.line()}")
    assert fit.unknown == 0, f"{fit.unknown} trees outside the enumeration"
    assert fit.p_value > 1e-4, fit.line()
    assert fit.tv < fit.tv_null_mean + 4.5 * fit.tv_null_sd, fit.line()


# -- each rung's MH kernel -----------------------------------------------------------------------

SLOW = pytest.mark.slow
RUNG_CASES = [
    ("grid", "mean_shift", "geometric", Rung(0.3, 0.3), None),
    pytest.param("grid", "mean_shift", "geometric", Rung(0.3, 0.3), "grow", marks=SLOW),
    ("grid", "mean_shift", "geometric", Rung(0.3, 0.3), "change"),
    pytest.param("grid", "mean_shift", "geometric", Rung(0.3, 0.3), "swap", marks=SLOW),
    pytest.param("factor", "mean_shift", "geometric", Rung(0.2, 0.2), None, marks=SLOW),
    pytest.param("factor", "mean_variance_shift", "likelihood", Rung(0.2, 1.0), None, marks=SLOW),
    pytest.param("classes", "classification", "geometric", Rung(0.4, 0.4), None, marks=SLOW),
    pytest.param("factor", "mean_shift", "shrinkage", Rung(1.0, 1.0, 0.5, 2.0), None, marks=SLOW),
    pytest.param("grid", None, "geometric-prior", Rung(0.0, 0.25), None, marks=SLOW),
    # Pratola's moves inside a rung: their ratios must temper the likelihood by t and the prior by s
    ("grid", "mean_shift", "geometric", Rung(0.3, 0.3), "rotate"),
    ("grid", "mean_shift", "geometric", Rung(0.3, 0.3), "perturb"),
    ("factor", "mean_shift", "likelihood", Rung(0.2, 1.0), "perturb"),
    pytest.param("factor", "mean_shift", "shrinkage", Rung(1.0, 1.0, 0.5, 2.0), "perturb", marks=SLOW),
    pytest.param("grid", "mean_shift", "likelihood", Rung(0.2, 1.0), "rotate", marks=SLOW),
]
CASE_IDS = ["grid-geometric-cgm", "grid-geometric-grow", "grid-geometric-change", "grid-geometric-swap",
            "factor-geometric-cgm", "factor-mvs-likelihood-cgm", "classes-geometric-cgm", "factor-shrinkage-cgm",
            "grid-prior-geometric-cgm", "grid-geometric-rotate", "grid-geometric-perturb",
            "factor-likelihood-perturb", "factor-shrinkage-perturb", "grid-likelihood-rotate"]


@pytest.mark.parametrize("dataset,model,label,rung,move", RUNG_CASES, ids=CASE_IDS)
def test_rung_kernel_exact_start(dataset, model, label, rung, move):
    log_w, ex = rung_log_target(dataset, model, rung)
    target = normalise(log_w)
    prob = make_problem(dataset, model)
    seed = 9000 + len(label) + int(100 * rung.t) + int(10 * rung.s) + len(move or "")

    def make(moves):
        chain = H.make_chain(prob, moves, seed, likelihood=model is not None)
        chain.target = make_target(rung_prior(chain.prior, rung))
        return chain

    stepper = H.Stepper(make, move, H.CGM_MOVES)
    observed = H.exact_start_run(stepper, ex.trees, target, N_DRAWS, N_STEPS, seed + 1)
    assert_fit(H.fit_trees(observed, ex.index, target), f"rung {label} {rung} {move}")


# -- swaps and the full tempered iteration -------------------------------------------------------

def tempered_chain(dataset, model, rungs: list[Rung], moves: dict, seed: int) -> TemperedCartChain:
    """A ``TemperedCartChain`` on a tiny problem with the given rungs (row 0 the target)."""
    base = H.make_chain(make_problem(dataset, model), H.CGM_MOVES, seed, likelihood=model is not None)
    priors = [rung_prior(base.prior, r) for r in rungs]
    ladder = np.array([[p.inv_temp, p.prior_heat, p.alpha, p.beta] for p in priors])
    problem = CartProblem(base.codes, base.is_categorical, base.nbins, base.y, base.ycls, base.prior)
    return TemperedCartChain(problem, ladder, moves, "deo", np.random.default_rng(seed))


def exact_start_tempered(dataset, model, rungs, moves, n_iter, seed, n_draws=N_DRAWS):
    """Load every rung with an i.i.d. draw of its target, run ``n_iter`` tempered iterations from
    iteration 0 (DEO: the first round swaps the even pairs) and return the trees reached per rung
    and the number of accepted swaps of pair 0 in the first round."""
    targets = [rung_log_target(dataset, model, r) for r in rungs]
    ex = targets[0][1]
    probs = [normalise(lw) for lw, _ in targets]
    chain = tempered_chain(dataset, model, rungs, moves, seed)
    chain.allocate(1)
    rng = np.random.default_rng(seed + 1)
    draws = [rng.choice(len(ex.trees), size=n_draws, p=p) for p in probs]
    out = [[] for _ in rungs]
    accepted = 0
    for i in range(n_draws):
        chain.slot_of[:] = np.arange(len(rungs))
        for r in range(len(rungs)):
            chain.set_rung_tree(r, ex.trees[draws[r][i]])  # a fresh tree: its prior cache is empty
        chain.counters[:] = 0
        chain.run(0, n_iter, n_iter, 1)
        accepted += int(chain.counters[1, 0] > 0) if n_iter == 1 else 0
        for r in range(len(rungs)):
            out[r].append(chain.get_rung_tree(r))
    return out, probs, ex, accepted


SWAP_CASES = [
    ("grid", "mean_shift", [Rung(), Rung(0.3, 0.3)]),
    pytest.param("factor", "mean_shift", [Rung(), Rung(0.2, 1.0)], marks=SLOW),
    ("factor", "mean_shift", [Rung(), Rung(1.0, 1.0, 0.5, 2.0)]),
]


@pytest.mark.parametrize("dataset,model,rungs", SWAP_CASES, ids=["geometric", "likelihood", "shrinkage"])
def test_swap_keeps_product_target_and_rate(dataset, model, rungs):
    seed = 7100 + len(dataset) + len(rungs) + int(10 * rungs[1].t)
    n = 10_000
    out, probs, ex, accepted = exact_start_tempered(dataset, model, rungs, {"grow": 0.0}, 1, seed, n)
    for r in range(2):
        assert_fit(H.fit_trees(out[r], ex.index, probs[r]), f"swap rung {r} {rungs[r]}")
    # Exact expected acceptance under pi_0 x pi_1 (eq. 4.1 on canonical trees).
    lw0, _ = rung_log_target(dataset, model, rungs[0])
    lw1, _ = rung_log_target(dataset, model, rungs[1])
    log_ratio = (lw0[None, :] + lw1[:, None]) - (lw0[:, None] + lw1[None, :])  # [i at rung 0, j at rung 1]
    expected = float(np.sum(probs[0][:, None] * probs[1][None, :] * np.exp(np.minimum(log_ratio, 0.0))))
    rate = accepted / n
    se = math.sqrt(expected * (1 - expected) / n)
    print(f"\nswap rate {rate:.4f} exact {expected:.4f} z={(rate - expected) / se:.2f}")
    assert abs(rate - expected) < 4 * se


FULL_CASES = [
    ("grid", None, [Rung(), Rung(0.0, 0.5), Rung(0.0, 0.1)], H.CGM_MOVES),
    ("factor", "mean_shift", [Rung(), Rung(1.0, 1.0, 0.6, 1.5), Rung(1.0, 1.0, 0.4, 3.0)], H.CGM_MOVES),
    pytest.param("grid", "mean_shift", [Rung(), Rung(0.3), Rung(0.0)], H.CGM_MOVES, marks=SLOW),
    # the sampler's own path for a user's rotate/perturb mix (move flags built by TemperedCartChain)
    ("grid", "mean_shift", [Rung(), Rung(0.3), Rung(0.0)], H.PERTURB_MOVES),
]


@pytest.mark.parametrize("dataset,model,rungs,moves", FULL_CASES,
                         ids=["prior-geometric", "shrinkage", "likelihood", "likelihood-rotate-perturb"])
def test_full_iteration_exact_start(dataset, model, rungs, moves):
    """Three tempered iterations (moves on every rung, swaps of both parities) keep every rung's
    target; the prior-only case is the sampler with the likelihood switched off."""
    seed = 7200 + len(dataset) + (model is None) + int(10 * rungs[1].s) + (moves is not H.CGM_MOVES)
    out, probs, ex, _ = exact_start_tempered(dataset, model, rungs, moves, N_STEPS, seed, 8_000)
    for r in range(len(rungs)):
        assert_fit(H.fit_trees(out[r], ex.index, probs[r]), f"full rung {r} {rungs[r]}")


@pytest.mark.slow
@pytest.mark.parametrize("ladder", ["likelihood", "geometric", "shrinkage"])
def test_long_run_target_rung(ladder):
    """The target rung of a full run from stumps matches pi(T | Y): Rao-Scott G-test p > 1e-4 (40
    batch means) and E[n_leaves] within the Bonferroni batch-means threshold."""
    dataset, model = "factor", "mean_shift"
    rungs = {"likelihood": [Rung(), Rung(0.3), Rung(0.0)],
             "geometric": [Rung(), Rung(0.3, 0.3), Rung(0.05, 0.05)],
             "shrinkage": [Rung(), Rung(1.0, 1.0, 0.6, 1.5), Rung(1.0, 1.0, 0.4, 3.0)]}[ladder]
    ex = exact(dataset, model)
    chain = tempered_chain(dataset, model, rungs, H.CGM_MOVES, 7300)
    run = H.long_run(chain, 20_000, 5)
    labels = np.array([ex.index[t] for t in run.trees])
    g, df, p, deff = H.rao_scott_g_test(labels, ex.post)
    zmax, thr, _ = H.mean_check(run.n_leaves[:, None], np.array([np.dot(ex.post, ex.n_leaves)]))
    print(f"\nlong run {ladder}: G={g:.1f} df={df} p={p:.3g} deff={deff:.1f} |z| n_leaves={zmax:.2f} (<{thr:.2f})")
    assert p > 1e-4
    assert zmax < thr


# -- the user contract ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_df():
    rng = np.random.default_rng(3)
    x1 = rng.uniform(0, 10, 120)
    x2 = rng.choice(["a", "b", "c"], 120)
    import pandas as pd

    y = np.where(x1 > 5, 2.0, 0.0) + (x2 == "a") + rng.normal(0, 0.3, 120)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


def test_user_contract_statistics(small_df):
    fit = bps.cart("y ~ x1 + x2", data=small_df, sampler="tempered", chains=2, draws=100, tune=50, seed=4,
                   sampler_options={"ladder": "shrinkage", "swaps": "seo", "shrinkage_pairs": [(0.5, 2.0), (0.4, 4.0)]})
    ss = fit.idata["sample_stats"]
    assert ss["swap_rate"].dims == ("chain", "draw", "pair") and ss.sizes["pair"] == 2
    assert ss["rung_n_leaves"].sizes["rung"] == 3
    # Cumulative counts: the last draw holds the totals; SEO proposes each pair about half the time.
    last = ss["swap_proposed"].isel(draw=-1).values
    assert np.all(last > 0) and np.all(last <= 100)
    assert np.all(np.diff(ss["round_trips"].values, axis=1) >= 0)
    np.testing.assert_array_equal(ss["rung_n_leaves"].values[:, :, 0], fit.posterior["n_leaves"].values)
    # The target rung's log target is its log posterior.
    np.testing.assert_allclose(ss["rung_log_target"].values[:, :, 0], ss["log_posterior"].values, rtol=1e-9)


def test_rotate_perturb_moves_reach_the_rungs(small_df):
    """A user's rotate/perturb mix is kept in the fit's options and drives the kernel: the same seed
    with the grow/prune part alone gives other draws (their correctness: the exact-start tests above)."""
    def fit(moves):
        return bps.cart("y ~ x1 + x2", data=small_df, sampler="tempered", chains=1, draws=100, tune=50, seed=5,
                        sampler_options={"moves": moves, "rungs": 4}, check_mixing=False)

    pratola = fit({"grow": 0.3, "prune": 0.3, "rotate": 0.2, "perturb": 0.2})
    kept = pratola.config["sampler_options"]["moves"]
    assert kept["rotate"] == pytest.approx(0.2) and kept["perturb"] == pytest.approx(0.2) and kept["change"] == 0.0
    plain = fit({"grow": 0.3, "prune": 0.3})
    assert not np.array_equal(pratola.idata["sample_stats"]["log_posterior"].values,
                              plain.idata["sample_stats"]["log_posterior"].values)


def test_same_seed_same_draws(small_df):
    kw = dict(data=small_df, sampler="tempered", chains=1, draws=60, tune=20, seed=11,
              sampler_options={"rungs": 4, "ladder": "geometric"})
    a = bps.cart("y ~ .", **kw)
    b = bps.cart("y ~ .", **kw)
    np.testing.assert_array_equal(a.posterior["n_leaves"].values, b.posterior["n_leaves"].values)
    np.testing.assert_array_equal(a.idata["sample_stats"]["swap_accepted"].values,
                                  b.idata["sample_stats"]["swap_accepted"].values)


@pytest.mark.parametrize("options,match", [
    ({"ladder": "hot"}, "unknown ladder 'hot'"),
    ({"swaps": "ring"}, "unknown swaps 'ring'"),
    ({"temperatures": [0.5, 0.2]}, "temperatures must start at 1"),
    ({"temperatures": [1.0, 0.2, 0.4]}, "decrease strictly"),
    ({"rungs": 1}, "rungs must be an integer >= 2"),
    ({"shrinkage_pairs": [(1.5, 2.0)]}, "alpha must be a number in the open interval"),
    ({"ladder": "shrinkage", "temperatures": [1.0, 0.5]}, "give 'shrinkage_pairs'"),
    ({"rungs": 3, "temperatures": [1.0, 0.5]}, "must equal len\\(temperatures\\)"),
    ({"adapt": "yes"}, "'adapt' must be True or False"),
])
def test_bad_options(small_df, options, match):
    with pytest.raises(ArgumentError, match=match):
        bps.cart("y ~ .", data=small_df, sampler="tempered", chains=1, draws=5, tune=5, sampler_options=options)


def test_every_rung_starts_with_its_stumps_leaf_terms(small_df):
    """The hot rungs' stumps carry the same cached log marginal as the target's (a stale zero
    made every grow of a hot rung look like a likelihood loss of the whole data)."""
    chain = tempered_chain("grid", "mean_shift", [Rung(), Rung(0.5, 0.5), Rung(0.1)], H.CGM_MOVES, 1)
    assert chain.trees[0].lm[0] != 0.0
    for k in range(1, 3):
        assert chain.trees[k].lm[0] == chain.trees[0].lm[0]
        np.testing.assert_array_equal(chain.fstates[k], chain.fstates[0])
    assert chain.fstate is not chain.fstates[1]


def test_rung_ladder_layout():
    base = make_prior(alpha=0.95, beta=1.0)  # columns: inv_temp, prior_heat, alpha, beta
    geo = rung_ladder(base, "geometric", np.array([1.0, 0.5]), None)
    assert geo[1, 0] == 0.5 and geo[1, 1] == 0.5 and geo[0, 1] == 0.0
    lik = rung_ladder(base, "likelihood", np.array([1.0, 0.5]), None)
    assert lik[1, 0] == 0.5 and lik[1, 1] == 0.0
    shr = rung_ladder(base, "shrinkage", None, [(0.5, 2.0)])
    assert tuple(shr[1, [2, 3, 0]]) == (0.5, 2.0, 1.0)


# -- ladder adaptation ---------------------------------------------------------------------------

def test_new_positions_equalise_the_barrier():
    """The re-placed rungs split the piecewise-linear communication barrier into equal parts
    (exact arithmetic up to rounding: 1e-12)."""
    from bartpy_suite.samplers.ladder import new_positions

    pos = np.linspace(0.0, 1.0, 5)
    rejection = np.array([0.9, 0.5, 0.1, 0.02])
    new = new_positions(pos, rejection)
    barrier = np.concatenate([[0.0], np.cumsum(rejection)])
    levels = np.interp(new, pos, barrier)
    np.testing.assert_allclose(np.diff(levels), barrier[-1] / 4, rtol=1e-12)
    assert new[0] == 0.0 and new[-1] == 1.0 and np.all(np.diff(new) > 0)
    # Most rungs go where rejection is high (the first segment).
    assert new[2] < 0.5


def test_adapted_ladder_is_frozen_after_tune_and_monotone(small_df):
    fit = bps.cart("y ~ .", data=small_df, sampler="tempered", chains=1, draws=50, tune=400, seed=5,
                   sampler_options={"rungs": 5, "adapt": True})
    ladder = fit.idata["sample_stats"]["ladder"].values[0]  # (draw, rung, param)
    assert np.all(ladder == ladder[0])
    t = ladder[0, :, 0]
    assert t[0] == 1.0 and t[-1] == 0.0 and np.all(np.diff(t) < 0)
    assert not np.allclose(t, [1.0, 0.1, 1e-2, 1e-3, 0.0])  # the default 5-rung ladder moved


def test_cli_sampler_options(small_df, tmp_path):
    """``--sampler tempered --sampler-option key=value`` (JSON values, else strings) gives the same
    fit as ``sampler_options`` in Python (same seed: the same n_leaves mean, printed to 3 decimals)."""
    import contextlib
    import io

    from bartpy_suite.cli import main

    path = tmp_path / "train.csv"
    small_df.to_csv(path, index=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(["fit", "y ~ x1 + x2", str(path), "--chains", "1", "--draws", "50", "--tune", "50", "--seed",
                       "3", "--no-progress", "--sampler", "tempered", "--sampler-option", "ladder=shrinkage",
                       "--sampler-option", "rungs=4", "--sampler-option", "adapt=true"])
    assert status == 0
    same = bps.cart("y ~ x1 + x2", data=small_df, chains=1, draws=50, tune=50, seed=3,
                    sampler="tempered", sampler_options={"ladder": "shrinkage", "rungs": 4, "adapt": True},
                    progress=False)
    assert f"{same.summary().loc['n_leaves', 'mean']:.3f}" in out.getvalue()
