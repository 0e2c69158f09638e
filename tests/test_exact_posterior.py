"""The ``cgm`` and ``grow_prune`` CART samplers against the exact posterior of tiny data sets.

Every valid tree of three tiny data sets is enumerated (``tests/exact/enumerate.py``, written from
the model conventions of issue 2, independently of the kernels) and its posterior probability
computed exactly. See ``tests/exact/problems.py`` for the data sets:
"grid" (3x3 numeric grid, 2 rows per cell, m = 2), "factor" (numeric + three-level factor, uneven
cells, m = 2) and "classes" (the grid with a three-class response).

* Exact-start invariance (the backbone): 20,000 trees drawn i.i.d. from pi(T | Y), each loaded
  into a ``CartChain`` and moved by 3 transitions of one kernel, must still be distributed as
  pi(T | Y). This needs no mixing and pins down each move's acceptance ratio. Tolerance: G-test
  p > 1e-4 (cells with expected count < 5 pooled into one), and total variation below the
  sampling-noise TV of an i.i.d. sample of the same size from pi plus 4.5 of its standard
  deviations. Both are one-sided tail bounds of order 1e-5 under a correct kernel, so a seeded
  failure means a wrong transition, not bad luck.
* Long runs from a stump: frequencies of n_leaves, E[n_leaves], the probabilities of the
  likelier trees and the posterior mean of the leaf parameter at every grid cell against their
  exact values; batch-means t statistics (40 batches) with a Bonferroni family level of 1e-4.
  A long run tests mixing as well as invariance, so it is the weaker, slower check; the short
  default version is sized for the CI budget and the long one is marked slow.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from exact import harness as H
from exact.enumerate import posterior_mean_predictions, split_rows
from exact.problems import DATASETS, exact, make_problem

POSTERIOR_CASES = [
    ("grid", "mean_shift"),
    ("grid", "mean_variance_shift"),
    ("factor", "mean_shift"),
    ("factor", "mean_variance_shift"),
    ("classes", "classification"),
]
# (label, moves of the sampler, forced move type). "grow" (the grow/prune pair run as its own
# kernel by ``exact.harness.step(chain, "grow")``) is the ``grow_prune`` sampler's kernel exactly.
KERNELS = [
    ("cgm", H.CGM_MOVES, None),
    ("grow_prune", H.GROW_PRUNE_MOVES, None),
    ("change", H.CGM_MOVES, "change"),
    ("swap", H.CGM_MOVES, "swap"),
]
SAMPLERS = [("cgm", H.CGM_MOVES), ("grow_prune", H.GROW_PRUNE_MOVES)]
N_DRAWS = 20_000
N_STEPS = 3


def seed_of(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def check_exact_start(dataset: str, model, label: str, moves: dict, move, likelihood: bool = True) -> H.FitResult:
    """Run the exact-start invariance check of one kernel and assert it (shared with the
    prior-only tests)."""
    prob = make_problem(dataset, model)
    ex = exact(dataset, model)
    target = ex.post
    seed = seed_of(dataset, model, label)
    stepper = H.Stepper(lambda mv: H.make_chain(prob, mv, seed, likelihood=likelihood), move, moves)
    observed = H.exact_start_run(stepper, ex.trees, target, N_DRAWS, N_STEPS, seed + 1)
    fit = H.fit_trees(observed, ex.index, target)
    print(f"\nexact-start {dataset}/{model}/{label}: {fit.line()}")
    assert fit.unknown == 0, f"{fit.unknown} trees outside the enumeration (invalid trees reached)"
    assert fit.p_value > 1e-4, fit.line()
    assert fit.tv < fit.tv_null_mean + 4.5 * fit.tv_null_sd, fit.line()
    return fit


# -- the reference itself ------------------------------------------------------------------------

@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_enumerated_prior_sums_to_one(dataset):
    # Exact arithmetic up to rounding: the prior is a proper distribution over valid trees.
    ex = exact(dataset, None)
    assert abs(ex.prior.sum() - 1.0) < 1e-12
    assert abs(ex.post.sum() - 1.0) < 1e-12
    assert len(set(ex.trees)) == len(ex.trees)


@pytest.mark.parametrize("dataset,model", POSTERIOR_CASES)
def test_chain_agrees_with_enumeration_tree_by_tree(dataset, model):
    """Every enumerated tree survives ``set_tree``/``get_tree``, and the chain's log marginal
    likelihood and log prior equal the reference's (1e-9: double rounding of sums of ~20 terms).

    ``CartChain.log_prior`` is the prior of the stored representation: the canonical prior
    times 1 / (2 * 2^absent) per categorical split (orientation and bits of the levels absent
    from the node, see ``_kernels/tree.py``)."""
    prob = make_problem(dataset, model)
    ex = exact(dataset, model)
    chain = H.make_chain(prob, H.CGM_MOVES, 0)
    for tree, lp, ll in zip(ex.trees, ex.log_prior, ex.log_lik):
        chain.set_tree(tree)
        assert chain.get_tree() == tree
        assert chain.log_marginal_likelihood() == pytest.approx(ll, rel=1e-9, abs=1e-9)
        assert chain.log_prior() == pytest.approx(lp - representation_log_count(prob, tree), rel=1e-9, abs=1e-9)


def representation_log_count(prob, tree, rows=None) -> float:
    """log of the number of stored representations of a canonical tree."""
    if rows is None:
        rows = tuple(range(prob.n))
    if tree is None:
        return 0.0
    v, rule, lt, rt = tree
    left, right = split_rows(prob, rows, v, rule)
    own = 0.0
    if prob.is_cat[v]:
        present = len(set(int(prob.codes[r, v]) for r in rows))
        # orientation, and bits of the absent levels (with split_missing, "missing" is a level)
        own = np.log(2.0) * (1 + int(prob.n_levels[v]) + int(prob.split_missing) - present)
    return own + representation_log_count(prob, lt, left) + representation_log_count(prob, rt, right)


# -- exact-start invariance ----------------------------------------------------------------------

@pytest.mark.parametrize("label,moves,move", KERNELS, ids=[k[0] for k in KERNELS])
@pytest.mark.parametrize("dataset,model", POSTERIOR_CASES)
def test_exact_start_invariance(dataset, model, label, moves, move):
    check_exact_start(dataset, model, label, moves, move)


@pytest.mark.parametrize("move,tree", [("change", None), ("swap", None), ("swap", (0, 0, None, None))],
                         ids=["change-at-stump", "swap-at-stump", "swap-one-split"])
def test_forced_move_without_candidates_stays(move, tree):
    """A move type with no candidate in the current tree (change at a stump, swap with fewer
    than two splits) is the identity transition of its own kernel; it must not raise."""
    prob = make_problem("grid", "mean_shift")
    chain = H.make_chain(prob, H.CGM_MOVES, 1)
    chain.set_tree(tree)
    H.step(chain, move)
    assert chain.get_tree() == tree


@pytest.mark.parametrize("moves", [{"change": 1.0}, {"change": 0.5, "swap": 0.5}], ids=["change", "change+swap"])
def test_sampler_without_grow_at_stump_does_not_raise(moves):
    """A move mix without grow (which ``bps.cart``/``bps.bart`` refuse, but the kernel may be
    given directly) leaves the stump where it is instead of failing."""
    prob = make_problem("grid", "mean_shift")
    chain = H.make_chain(prob, moves, 1)
    H.step(chain)
    assert chain.get_tree() is None


# -- long runs from a stump ----------------------------------------------------------------------

def check_long_run(dataset, model, label, moves, n_draws, thin, burn):
    prob = make_problem(dataset, model)
    ex = exact(dataset, model)
    chain = H.make_chain(prob, moves, seed_of("long", dataset, model, label, n_draws))
    assert chain.get_tree() is None  # the chain starts from a stump
    run = H.long_run(chain, n_draws + burn, thin)
    trees = run.trees[burn:]
    labels = np.array([ex.index[t] for t in trees])
    n = len(labels)
    # statistics and their exact means
    cols, exact_vals, names = [], [], []
    nl_dist = np.bincount(ex.n_leaves, weights=ex.post)
    for k, p in enumerate(nl_dist):
        if p >= 1e-3:
            cols.append(run.n_leaves[burn:] == k)
            exact_vals.append(p)
            names.append(f"P(n_leaves={k})")
    cols.append(run.n_leaves[burn:])
    exact_vals.append(float(np.sum(ex.n_leaves * ex.post)))
    names.append("E[n_leaves]")
    # Tree probabilities only where a batch (n / 40 draws) expects at least 10 visits: a rarer
    # tree is visited in a few clumps and its batch-means z is far from normal (seen: a tree of
    # posterior 2.6e-4 gave z = 5.9 with one seed, -0.2 and 0.8 with two others). Rare trees are
    # covered by the exact-start tests.
    likely = np.flatnonzero(ex.post * n >= 400)
    for i in likely:
        cols.append(labels == i)
        exact_vals.append(ex.post[i])
        names.append(f"P(tree {ex.trees[i]})")
    cols.append(~np.isin(labels, likely))
    exact_vals.append(1.0 - ex.post[likely].sum())
    names.append("P(other trees)")
    pred_exact = posterior_mean_predictions(prob, ex)
    cells = np.unique(prob.X, axis=0, return_index=True)[1]
    values = run.row_values[burn:]
    for r in cells:
        if values.ndim == 3:
            for c in range(values.shape[2]):
                cols.append(values[:, r, c])
                exact_vals.append(pred_exact[r, c])
                names.append(f"E[p_{c}(x_{r})]")
        else:
            cols.append(values[:, r])
            exact_vals.append(pred_exact[r])
            names.append(f"E[f(x_{r})]")
    samples = np.column_stack([np.asarray(c, dtype=float) for c in cols])
    indicator = [name.startswith("P(") for name in names]
    zmax, threshold, z = H.mean_check(samples, np.array(exact_vals), indicator)
    counts = np.bincount(labels, minlength=len(ex.trees))
    tv_trees = H.tv_distance(counts, ex.post)
    tv_leaves = H.tv_distance(np.bincount(run.n_leaves[burn:], minlength=len(nl_dist)), nl_dist)
    worst = names[int(np.argmax(np.abs(z)))]
    print(f"\nlong run {dataset}/{model}/{label}: N={n} x thin {thin}; E[n_leaves] chain "
          f"{run.n_leaves[burn:].mean():.4f} exact {exact_vals[names.index('E[n_leaves]')]:.4f}; "
          f"TV(trees)={tv_trees:.4f} TV(n_leaves)={tv_leaves:.4f}; max|z|={zmax:.2f} ({worst}) "
          f"threshold {threshold:.2f} over {len(names)} statistics")
    assert zmax < threshold, f"{worst}: z = {zmax:.2f}"


# grow_prune on "factor" is left out of the long runs: there it has a bottleneck, not a bug. The
# tree (x2 in {0,1} ? (x1 <= cut 1 ? (x2 = 0 ? . : .) : .) : .) has posterior 0.012 but its only
# grow/prune neighbours carry ~5e-5, so a run of 10^5-10^6 steps cannot settle the balance
# between that region and the rest (observed TV ~0.15-0.3). Its invariance is pinned down by the
# exact-start tests; cgm's change and swap moves remove the bottleneck and are tested here.
LONG_CASES = [(ds, model, label, moves) for ds, model in POSTERIOR_CASES for label, moves in SAMPLERS
              if not (ds == "factor" and label == "grow_prune")]
LONG_IDS = [f"{ds}-{model}-{label}" for ds, model, label, _ in LONG_CASES]


@pytest.mark.parametrize("dataset,model,label,moves", LONG_CASES, ids=LONG_IDS)
def test_long_run_from_stump_short(dataset, model, label, moves):
    check_long_run(dataset, model, label, moves, n_draws=10_000, thin=5, burn=500)


@pytest.mark.slow
@pytest.mark.parametrize("dataset,model,label,moves", LONG_CASES, ids=LONG_IDS)
def test_long_run_from_stump(dataset, model, label, moves):
    check_long_run(dataset, model, label, moves, n_draws=200_000, thin=5, burn=2_000)
