"""BART with one tree and sigma fixed against the exact single-tree posterior (issue 3, Correctness).

With ``trees=1`` the partial residual of the only tree is the (standardised) response itself,
so Bayesian backfitting's tree moves form a Metropolis-Hastings chain on trees whose target is
the single-tree posterior with known sigma and leaf values mu ~ N(0, tau2) integrated out:

    p(T | y) ∝ p(T) prod_leaves N(y_leaf; 0, sigma2 I + tau2 11')

The leaf values are then drawn from their normal full conditionals. Here every valid tree of a
tiny data set is enumerated in plain Python with its exact prior (the availability conventions
of ``_kernels/tree.py``: a rule is available iff both children get ``min_leaf_size`` rows,
p_RULE uniform over variables with an available rule and then over that variable's rules,
p_SPLIT = alpha (1 + depth)^-beta on nodes with an available rule, else 0; a factor rule is an
unordered partition of the levels present at the node) and its exact marginal likelihood
(a dense multivariate normal density, independent of the kernel's closed form), and the
sampler's tree distribution is compared with it.

The enumeration, the canonical-tree conversion and the generative prior here are plain Python,
written independently of the package; ``tests/test_bart_prior.py`` and
``tests/test_geweke_bart.py`` reuse them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from _chains import bart_chain, run_padded
from scipy import stats

from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels.backfit import SIGMA_FIXED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.record import right_children, tree_roots
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS


# --------------------------------------------------------------------------------------------
# Plain-Python reference: rules, enumeration, canonical trees
# --------------------------------------------------------------------------------------------
def available_rules(codes, rows, is_cat, nbins, m):
    """Available rules at a node holding ``rows`` (a tuple of row indices).

    Returns ``{v: [(rule, left_rows, right_rows), ...]}`` for the variables with at least one
    available rule. A numeric rule is the cut index k (left iff code <= k); a factor rule is the
    frozenset of present levels going left, oriented so the largest present level goes right
    (one entry per unordered partition).
    """
    rows = np.asarray(rows, dtype=np.int64)
    n = rows.size
    out = {}
    if n < 2 * m:
        return out
    for v in range(codes.shape[0]):
        col = codes[v, rows]
        found = []
        if is_cat[v]:
            present = sorted(int(c) for c in np.unique(col))
            rest = present[:-1]  # subsets without the top level: one of each {S, complement}
            for size in range(1, len(rest) + 1):
                for subset in itertools.combinations(rest, size):
                    go_left = np.isin(col, subset)
                    n_left = int(go_left.sum())
                    if m <= n_left <= n - m:
                        found.append((frozenset(subset), tuple(rows[go_left]), tuple(rows[~go_left])))
        else:
            for k in range(int(nbins[v]) - 1):
                go_left = col <= k
                n_left = int(go_left.sum())
                if m <= n_left <= n - m:
                    found.append((k, tuple(rows[go_left]), tuple(rows[~go_left])))
        if found:
            out[v] = found
    return out


def log_p_split(alpha, beta, depth):
    return math.log(alpha) - beta * math.log1p(depth)


def log_one_minus_p_split(alpha, beta, depth):
    return math.log1p(-alpha * (1.0 + depth) ** (-beta))


def enumerate_trees(codes, is_cat, nbins, m, alpha, beta, leaf_loglik):
    """Every valid tree over all rows with its exact log prior and log likelihood.

    ``leaf_loglik(rows)`` gives the log marginal likelihood of one leaf. Returns a list of
    ``(canonical tree, log prior, log likelihood)``; a leaf is None, an internal node
    ``(v, rule, left, right)``.
    """
    cache = {}

    def enum(rows, depth):
        key = (rows, depth)
        if key in cache:
            return cache[key]
        rules = available_rules(codes, rows, is_cat, nbins, m)
        leaf_lp = log_one_minus_p_split(alpha, beta, depth) if rules else 0.0
        result = [(None, leaf_lp, leaf_loglik(rows))]
        if rules:
            n_vars = len(rules)
            for v, options in rules.items():
                node_lp = log_p_split(alpha, beta, depth) - math.log(n_vars) - math.log(len(options))
                for rule, lrows, rrows in options:
                    for lt, llp, lll in enum(lrows, depth + 1):
                        for rt, rlp, rll in enum(rrows, depth + 1):
                            result.append(((v, rule, lt, rt), node_lp + llp + rlp, lll + rll))
        cache[key] = result
        return result

    return enum(tuple(range(codes.shape[1])), 0)


def n_leaves(tree):
    """Leaves of a canonical tree."""
    if tree is None:
        return 1
    return n_leaves(tree[2]) + n_leaves(tree[3])


def canonical_from_arrays(var, cut, left, right, codes, is_cat, node=0, rows=None):
    """Canonical nested tree from node arrays (recorded preorder buffers or live ``TreeArrays``),
    as ``CartChain.get_tree`` does it: factor rules become the set of present levels going left,
    oriented so the largest present level goes right."""
    if rows is None:
        rows = np.arange(codes.shape[1])
    v = int(var[node])
    if v < 0:
        return None
    c = int(cut[node])
    col = codes[v, rows]
    if is_cat[v]:
        go_left = ((c >> col.astype(np.int64)) & 1) == 1
    else:
        go_left = col <= c
    lt = canonical_from_arrays(var, cut, left, right, codes, is_cat, int(left[node]), rows[go_left])
    rt = canonical_from_arrays(var, cut, left, right, codes, is_cat, int(right[node]), rows[~go_left])
    if not is_cat[v]:
        return (v, c, lt, rt)
    present = sorted(int(x) for x in np.unique(col))
    chosen = frozenset(level for level in present if (c >> level) & 1)
    if present[-1] in chosen:
        chosen = frozenset(present) - chosen
        lt, rt = rt, lt
    return (v, chosen, lt, rt)


def leaves_of(tree, codes, is_cat, rows=None):
    """Rows of each leaf of a canonical tree, left to right."""
    if rows is None:
        rows = np.arange(codes.shape[1])
    if tree is None:
        return [rows]
    v, rule, lt, rt = tree
    col = codes[v, rows]
    go_left = np.isin(col, list(rule)) if is_cat[v] else col <= rule
    return leaves_of(lt, codes, is_cat, rows[go_left]) + leaves_of(rt, codes, is_cat, rows[~go_left])


def normal_leaf_loglik(y, sigma2, tau2):
    """log N(y_leaf; 0, sigma2 I + tau2 11') as a dense multivariate normal density."""

    def loglik(rows):
        r = y[list(rows)]
        cov = sigma2 * np.eye(r.size) + tau2 * np.ones((r.size, r.size))
        return float(stats.multivariate_normal(mean=np.zeros(r.size), cov=cov).logpdf(r))

    return loglik


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------
def g_test(observed: Counter, probs: dict, min_expected: float = 5.0):
    """G-test of counts against probabilities; cells with expected < min_expected are pooled
    (together with any tree outside ``probs``, which would have probability zero)."""
    total = sum(observed.values())
    obs, exp = [], []
    pooled_obs, pooled_exp = 0, 0.0
    for key, p in probs.items():
        e = total * p
        if e < min_expected:
            pooled_obs += observed.get(key, 0)
            pooled_exp += e
        else:
            obs.append(observed.get(key, 0))
            exp.append(e)
    stray = sum(c for key, c in observed.items() if key not in probs)
    pooled_obs += stray
    if pooled_exp > 0 or pooled_obs > 0:
        obs.append(pooled_obs)
        exp.append(pooled_exp)
    obs = np.asarray(obs, dtype=float)
    exp = np.asarray(exp, dtype=float)
    if np.any((obs > 0) & (exp == 0)):
        return math.inf, 0.0, len(obs) - 1
    mask = obs > 0
    g = 2.0 * float(np.sum(obs[mask] * np.log(obs[mask] / exp[mask])))
    dof = len(obs) - 1
    return g, float(stats.chi2.sf(g, dof)), dof


def total_variation(observed: Counter, probs: dict) -> float:
    total = sum(observed.values())
    keys = set(observed) | set(probs)
    return 0.5 * sum(abs(observed.get(k, 0) / total - probs.get(k, 0.0)) for k in keys)


# --------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------
SIGMA2 = 1.0
TAU2 = 0.5
ALPHA = 0.95
BETA = 1.0
MIN_LEAF = 2


def grid_problem(factor: bool):
    """3x3 grid of (x1, x2), two rows per cell; x2 a 3-level factor when ``factor``.

    The response has a step in x1 and a level effect of x2 plus fixed noise, so the posterior
    spreads over many trees of several sizes.
    """
    x1, x2 = np.meshgrid(np.arange(3.0), np.arange(3.0), indexing="ij")
    x = np.column_stack([np.repeat(x1.ravel(), 2), np.repeat(x2.ravel(), 2)])
    rng = np.random.default_rng(314)
    f = 1.2 * (x[:, 0] >= 1) - 1.0 * (x[:, 1] == 1)
    y = f + rng.normal(0.0, 1.0, x.shape[0])
    is_cat = np.array([False, factor])
    binned = BinnedPredictors.fit(x, is_cat, [0, 3 if factor else 0], None)
    return binned, y


def exact_posterior(binned, y):
    trees = enumerate_trees(binned.codes, binned.is_categorical, binned.nbins, MIN_LEAF, ALPHA, BETA,
                            normal_leaf_loglik(y, SIGMA2, TAU2))
    keys = [t for t, _, _ in trees]
    assert len(set(keys)) == len(keys), "enumeration produced a duplicate tree"
    prior = np.array([lp for _, lp, _ in trees])
    logpost = prior + np.array([ll for _, _, ll in trees])
    post = np.exp(logpost - logpost.max())
    post /= post.sum()
    return keys, np.exp(prior), post


def run_bart_one_tree(binned, y, sampler, seed, draws, thin, tune=2000, likelihood=True):
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=likelihood, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, y, hyper,
                       SAMPLERS[sampler].option_defaults()["moves"], np.random.default_rng(seed), 1, SIGMA_FIXED,
                       sigma2=SIGMA2)
    out = run_padded(chain, draws, 0, tune + draws * thin, tune, thin)
    return chain, out


def canonical_draws(out, binned):
    """Canonical tree 0 of every recorded draw (converting each distinct stored tree once)."""
    seen = {}
    result = []
    for d in range(out["split_var"].shape[0]):
        var, cut = out["split_var"][d, 0], out["split_cut"][d, 0]
        left, right = out["left"][d, 0], out["right"][d, 0]
        used = var > -2
        key = (var[used].tobytes(), cut[used].tobytes(), left[used].tobytes(), right[used].tobytes())
        if key not in seen:
            seen[key] = canonical_from_arrays(var, cut, left, right, binned.codes, binned.is_categorical)
        result.append(seen[key])
    return result


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------
def test_enumeration_counts_match_hand_count():
    """The enumerator's tree counts: 1241 trees on the 3x3 numeric grid and 2387 with x2 a
    3-level factor (recursions T(a, b) = 1 + sum over rules of T(left) T(right) done by hand),
    and the exact prior sums to one."""
    for factor, expected in ((False, 1241), (True, 2387)):
        binned, y = grid_problem(factor)
        keys, prior, post = exact_posterior(binned, y)
        assert len(keys) == expected
        assert prior.sum() == pytest.approx(1.0, abs=1e-12)


def test_enumeration_agrees_with_the_cart_reference_enumerator():
    """Cross-check against the independent CART enumerator of ``tests/exact/enumerate.py`` (when
    present): the same set of trees with the same log priors on both grids."""
    ref = pytest.importorskip("exact.enumerate")
    for factor in (False, True):
        binned, y = grid_problem(factor)
        x1, x2 = np.meshgrid(np.arange(3.0), np.arange(3.0), indexing="ij")
        x = np.column_stack([np.repeat(x1.ravel(), 2), np.repeat(x2.ravel(), 2)])
        prob = ref.Problem(X=x, is_cat=np.array([False, factor]), n_levels=np.array([0, 3 if factor else 0]),
                           m=MIN_LEAF, alpha=ALPHA, beta=BETA, model=None)
        theirs = {t: lp for t, lp, _ in ref.enumerate_trees(prob)}
        ours = {t: lp for t, lp, _ in enumerate_trees(binned.codes, binned.is_categorical, binned.nbins, MIN_LEAF,
                                                      ALPHA, BETA, lambda rows: 0.0)}
        assert set(theirs) == set(ours)
        assert all(ours[t] == pytest.approx(theirs[t], abs=1e-12) for t in ours)


def test_kernel_leaf_marginal_matches_dense_normal():
    """The kernel's closed-form leaf marginal differs from the dense N(0, s2 I + t2 11') density
    by a term depending only on the rows' residuals (same for every tree): check the difference
    is exactly -sum r^2/(2 s2) - n/2 log(2 pi s2)."""
    from bartpy_suite._kernels.likelihood import leaf_log_marginal_normal_known_variance

    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 13):
        r = rng.normal(size=n)
        for s2, t2 in ((1.0, 0.5), (0.3, 2.0)):
            dense = normal_leaf_loglik(r, s2, t2)(tuple(range(n)))
            kernel = leaf_log_marginal_normal_known_variance(n, float(r.sum()), s2, t2)
            assert kernel - dense == pytest.approx(float(r @ r) / (2 * s2) + 0.5 * n * math.log(2 * math.pi * s2),
                                                   rel=1e-10, abs=1e-10)


# Draws, thinning: one MH tree move per sweep; the integrated autocorrelation time of the tree
# indicator functions measured here is a few sweeps, so thinning by 10 leaves the draws close to
# independent (checked below through the batch-means variance of the leaf count), and
# 40,000 draws give expected counts >= 5 in every cell holding >= 1.25e-4 of the mass.
DRAWS = 40_000
THIN = 30


@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_one_tree_fixed_sigma_matches_exact_posterior(sampler, factor):
    """Tree distribution of BART (trees=1, sigma fixed) against the enumerated posterior.

    G-test, tiny cells pooled: p > 1e-4 (a fixed seed; a correct sampler fails this with
    probability 1e-4 per case). Total variation: with 40,000 draws spread over ~1,000 trees
    an exact iid sampler already has TV about 0.034 (numeric) / 0.045 (factor) from counting
    noise alone (sd 0.0015), so the bound is the mean TV of 100 iid multinomial samples of the
    same size plus 0.01 (over 6 sd of that noise; a move-ratio error that shifts a few percent
    of mass between tree sizes exceeds it).
    """
    binned, y = grid_problem(factor)
    keys, _, post = exact_posterior(binned, y)
    probs = dict(zip(keys, post))
    _, out = run_bart_one_tree(binned, y, sampler, seed=11 + factor, draws=DRAWS, thin=THIN)
    draws = canonical_draws(out, binned)
    counts = Counter(draws)
    assert set(counts) <= set(probs), "sampler visited a tree outside the valid set"
    g, p, dof = g_test(counts, probs)
    tv = total_variation(counts, probs)
    print(f"\n{sampler} factor={factor}: G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f}")
    rng = np.random.default_rng(0)
    iid_tv = np.mean([0.5 * np.abs(rng.multinomial(len(draws), post) / len(draws) - post).sum() for _ in range(100)])
    print(f"iid reference TV {iid_tv:.4f}")
    assert p > 1e-4, (g, dof, p)
    assert tv < iid_tv + 0.01, (tv, iid_tv)
    # Leaf-count distribution: the same comparison on a coarser statistic.
    exact_leaves = Counter()
    for key, pr in probs.items():
        exact_leaves[n_leaves(key)] += pr
    sampled_leaves = Counter(n_leaves(t) for t in draws)
    g2, p2, _ = g_test(sampled_leaves, dict(exact_leaves))
    assert p2 > 1e-4, (g2, p2)


@pytest.mark.parametrize("factor", [False, True], ids=["numeric", "factor"])
def test_one_tree_fixed_sigma_fitted_values(factor):
    """Posterior mean of f at each of the 9 cells against the exact mixture mean
    sum_T p(T|y) E[mu_leaf(x) | T, y] (normal full conditional prec = n/s2 + 1/t2).

    Each sampled f is an independent draw given the tree and the thinned trees are nearly
    independent, so z = (mean - exact) / sqrt(exact var / draws); |z| < 4.5 for all 9 cells
    (a correct sampler fails with probability < 1e-4)."""
    binned, y = grid_problem(factor)
    keys, _, post = exact_posterior(binned, y)
    cells = np.arange(0, 18, 2)  # first row of each cell
    mean = np.zeros(cells.size)
    second = np.zeros(cells.size)
    for tree, w in zip(keys, post):
        for rows in leaves_of(tree, binned.codes, binned.is_categorical):
            prec = rows.size / SIGMA2 + 1.0 / TAU2
            m = y[rows].sum() / SIGMA2 / prec
            hit = np.isin(cells, rows)
            mean[hit] += w * m
            second[hit] += w * (m * m + 1.0 / prec)
    var = second - mean**2
    _, out = run_bart_one_tree(binned, y, "cgm", seed=21 + factor, draws=DRAWS // 2, thin=THIN)
    f = np.empty((out["split_var"].shape[0], cells.size))
    from bartpy_suite._kernels.predict import sum_of_trees

    # The same draws through the compact store's prediction kernel.
    flat = out["split_var"] > -2
    counts = flat.sum(axis=-1)
    split_var = out["split_var"][flat]
    sum_of_trees(np.ascontiguousarray(binned.codes[:, cells]), binned.is_categorical, split_var,
                 out["split_cut"][flat], right_children(split_var, counts), out["leaf_value"][flat],
                 tree_roots(counts), f)
    z = (f.mean(axis=0) - mean) / np.sqrt(var / f.shape[0])
    print("\nz:", np.round(z, 2))
    assert np.all(np.abs(z) < 4.5), z
    # The draws are close to independent after thinning: batch-means variance of the mean
    # within a factor 2 of the iid one.
    batches = f[: (f.shape[0] // 100) * 100].reshape(100, -1, cells.size).mean(axis=1)
    ratio = batches.var(axis=0, ddof=1) * (f.shape[0] / 100) / var
    assert np.all(ratio < 2.0), ratio


def test_live_forest_matches_recorded_tree():
    """The canonical tree read from the live forest arrays (row 0) equals the one read from the
    recorded preorder buffers of the same sweep."""
    binned, y = grid_problem(True)
    hyper = kernel_prior(TreePrior(ALPHA, BETA, MIN_LEAF), None, likelihood=True, tau2=TAU2,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, y, hyper,
                       SAMPLERS["cgm"].option_defaults()["moves"], np.random.default_rng(5), 1, SIGMA_FIXED,
                       sigma2=SIGMA2)
    for it in range(200):
        out = run_padded(chain, 1, it, 1, it, 1)
        fo = chain.forest
        live = canonical_from_arrays(fo.var[0], fo.cut[0], fo.left[0], fo.right[0], binned.codes,
                                     binned.is_categorical)
        assert live == canonical_draws(out, binned)[0]
