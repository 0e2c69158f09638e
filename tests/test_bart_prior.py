"""BART with the likelihood switched off must sample its prior (issue 3, Correctness).

* per-tree tree distribution and leaf counts against the exact prior enumerated on tiny data;
* on larger data, per-tree leaf counts and depths against trees simulated directly from the
  generative tree prior in plain Python (same availability conventions);
* sigma draws against the scaled inverse chi-square prior (KS test) and leaf values against
  N(0, tau^2) on the standardised scale (KS test), read back from the ``Fit`` on the original
  scale: ``sigma_orig = sigma_std * scale`` and ``leaf_orig = leaf_std * scale + center / trees``
  (``posterior/build.py``), with ``config["lam"]`` and ``config["tau"]`` on the original scale.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from _chains import bart_chain, run_padded
from scipy import stats

import bartpy_suite as bps
from bartpy_suite._kernels.backfit import SIGMA_FIXED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS

try:
    from test_bart_exact import canonical_from_arrays, enumerate_trees, g_test, grid_problem, n_leaves, total_variation
except ImportError:  # tests/ imported as a package
    from tests.test_bart_exact import (
        canonical_from_arrays,
        enumerate_trees,
        g_test,
        grid_problem,
        n_leaves,
        total_variation,
    )

BART_ALPHA = 0.95
BART_BETA = 2.0


# --------------------------------------------------------------------------------------------
# Generative tree prior in plain Python
# --------------------------------------------------------------------------------------------
def rule_choices(codes, rows, is_cat, nbins, m):
    """Available rules per variable at a node with ``rows`` (ndarray): ``{v: [rule, ...]}``.

    Numeric: cut indices k with m <= #(code <= k) <= n - m. Factor: one entry per unordered
    partition of the present levels (the set going left, largest present level right) with
    both sides holding >= m rows.
    """
    n = rows.size
    out = {}
    if n < 2 * m:
        return out
    for v in range(codes.shape[0]):
        col = codes[v, rows]
        if is_cat[v]:
            hist = np.bincount(col, minlength=int(nbins[v]))
            present = np.flatnonzero(hist)
            rest = present[:-1]
            found = []
            for mask in range(1, 2 ** rest.size):
                subset = [int(rest[j]) for j in range(rest.size) if (mask >> j) & 1]
                if m <= hist[subset].sum() <= n - m:
                    found.append(frozenset(subset))
        else:
            cum = np.cumsum(np.bincount(col, minlength=int(nbins[v])))[:-1]
            found = [int(k) for k in np.flatnonzero((cum >= m) & (cum <= n - m))]
        if found:
            out[v] = found
    return out


def simulate_prior_tree(rng, codes, is_cat, nbins, m, alpha, beta, rows=None, depth=0):
    """One canonical tree drawn from the generative prior: a node with an available rule splits
    with probability alpha (1 + depth)^-beta, on a variable drawn uniformly among those with an
    available rule and a rule drawn uniformly among that variable's rules."""
    if rows is None:
        rows = np.arange(codes.shape[1])
    choices = rule_choices(codes, rows, is_cat, nbins, m)
    if not choices or rng.random() >= alpha * (1.0 + depth) ** (-beta):
        return None
    variables = sorted(choices)
    v = variables[int(rng.integers(len(variables)))]
    rule = choices[v][int(rng.integers(len(choices[v])))]
    col = codes[v, rows]
    go_left = np.isin(col, list(rule)) if is_cat[v] else col <= rule
    return (v, rule,
            simulate_prior_tree(rng, codes, is_cat, nbins, m, alpha, beta, rows[go_left], depth + 1),
            simulate_prior_tree(rng, codes, is_cat, nbins, m, alpha, beta, rows[~go_left], depth + 1))


def tree_depth(tree):
    if tree is None:
        return 0
    return 1 + max(tree_depth(tree[2]), tree_depth(tree[3]))


def two_sample_g_test(a: Counter, b: Counter, min_expected: float = 5.0):
    """G-test of homogeneity of two count tables; categories (sorted) whose smaller expected
    count is below ``min_expected`` are pooled with their neighbour toward the middle."""
    keys = sorted(set(a) | set(b))
    table = np.array([[a.get(k, 0) for k in keys], [b.get(k, 0) for k in keys]], dtype=float)
    # Pool from both tails until every column's expected counts are >= min_expected.
    def expected(t):
        return t.sum(axis=1, keepdims=True) * t.sum(axis=0, keepdims=True) / t.sum()

    while table.shape[1] > 2 and expected(table).min() < min_expected:
        col = int(np.argmin(expected(table).min(axis=0)))
        target = col + 1 if col < table.shape[1] // 2 else col - 1
        table[:, target] += table[:, col]
        table = np.delete(table, col, axis=1)
    g, p, dof, _ = stats.chi2_contingency(table, lambda_="log-likelihood", correction=False)
    return float(g), float(p), int(dof)


# --------------------------------------------------------------------------------------------
# Tiny data: exact prior
# --------------------------------------------------------------------------------------------
def exact_prior(binned, alpha, beta, m):
    trees = enumerate_trees(binned.codes, binned.is_categorical, binned.nbins, m, alpha, beta, lambda rows: 0.0)
    return {t: math.exp(lp) for t, lp, _ in trees}


def test_generative_simulator_matches_enumerated_prior():
    """The plain-Python prior simulator (used below and by the Geweke test) reproduces the
    enumerated prior on the 3x3 grid with a factor: G-test p > 1e-4 on 20,000 iid trees."""
    binned, _ = grid_problem(True)
    probs = exact_prior(binned, BART_ALPHA, 1.0, 2)
    rng = np.random.default_rng(2)
    draws = Counter(simulate_prior_tree(rng, binned.codes, binned.is_categorical, binned.nbins, 2, BART_ALPHA, 1.0)
                    for _ in range(20_000))
    g, p, dof = g_test(draws, probs)
    print(f"\nsimulator vs enumeration: G={g:.1f} dof={dof} p={p:.3g}")
    assert p > 1e-4


@pytest.mark.parametrize("sampler", ["cgm", "grow_prune"])
def test_prior_only_trees_match_exact_prior(sampler):
    """BART (5 trees, likelihood off, BART's alpha=0.95, beta=2) on the tiny factor grid: each
    tree's canonical distribution, pooled over trees and thinned draws, against the exact prior.

    Trees are independent under the prior, so 4,000 kept sweeps (thin 10) give 20,000 tree
    draws. G-test p > 1e-4 (fixed seed) on trees and on leaf counts; TV within 0.01 of an iid
    sampler's mean TV at the same size (sd of that TV about 0.002).
    """
    binned, y = grid_problem(True)
    probs = exact_prior(binned, BART_ALPHA, BART_BETA, 2)
    hyper = kernel_prior(TreePrior(BART_ALPHA, BART_BETA, 2), None, likelihood=False, tau2=0.1,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    n_trees, draws, thin = 5, 4000, 10
    chain = bart_chain(binned.codes, binned.is_categorical, binned.nbins, y, hyper,
                       SAMPLERS[sampler].option_defaults()["moves"], np.random.default_rng(41), n_trees, SIGMA_FIXED)
    out = run_padded(chain, draws, 0, 500 + draws * thin, 500, thin)
    sampled = Counter()
    for d in range(draws):
        for j in range(n_trees):
            sampled[canonical_from_arrays(out["split_var"][d, j], out["split_cut"][d, j], out["left"][d, j],
                                          out["right"][d, j], binned.codes, binned.is_categorical)] += 1
    g, p, dof = g_test(sampled, probs)
    tv = total_variation(sampled, probs)
    keys = list(probs)
    pv = np.array([probs[k] for k in keys])
    rng = np.random.default_rng(0)
    total = draws * n_trees
    iid_tv = np.mean([0.5 * np.abs(rng.multinomial(total, pv) / total - pv).sum() for _ in range(100)])
    exact_leaves = Counter()
    for key, pr in probs.items():
        exact_leaves[n_leaves(key)] += pr
    leaves = Counter(out["n_leaves"].ravel().tolist())
    g2, p2, dof2 = g_test(leaves, dict(exact_leaves))
    print(f"\n{sampler}: trees G={g:.1f} dof={dof} p={p:.3g} TV={tv:.4f} (iid {iid_tv:.4f}); "
          f"leaf counts G={g2:.1f} dof={dof2} p={p2:.3g}")
    assert p > 1e-4
    assert tv < iid_tv + 0.01
    assert p2 > 1e-4
    # Recorded leaf counts agree with the recorded trees.
    assert sum(n_leaves(k) * c for k, c in sampled.items()) == int(out["n_leaves"].sum())


# --------------------------------------------------------------------------------------------
# Larger data through the API: trees, sigma and leaf values
# --------------------------------------------------------------------------------------------
def prior_data(n=80, seed=3):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "x1": rng.uniform(size=n),
        "x2": rng.integers(0, 6, size=n).astype(float),
        "g": rng.choice(["a", "b", "c", "d"], size=n),
        "y": 1000.0 + 50.0 * rng.normal(size=n),
    })


@pytest.fixture(scope="module")
def prior_fit():
    # 10 trees x 2 chains x 2,000 draws kept every 5th sweep: 40,000 tree draws, a few seconds.
    return bps.bart("y ~ .", data=prior_data(), trees=10, chains=2, draws=2000, tune=200, thin=5, seed=17,
                    likelihood=False, progress=False)


def test_prior_only_leaf_counts_and_depths_match_generative_prior(prior_fit):
    """Per-tree leaf counts and depths of the prior-only fit (BART defaults: alpha=0.95, beta=2,
    min_leaf_size=5) against 20,000 trees simulated from the generative prior on the same binned
    data. Two-sample G-tests, sparse tails pooled: p > 1e-4 each (fixed seeds)."""
    const = prior_fit.idata["constant_data"]
    codes = const["x_codes"].values.astype(np.int64)
    is_cat = const["is_categorical"].values.astype(bool)
    nbins = const["nbins"].values.astype(np.int64)
    rng = np.random.default_rng(8)
    sim = [simulate_prior_tree(rng, codes, is_cat, nbins, 5, BART_ALPHA, BART_BETA) for _ in range(20_000)]
    sim_leaves = Counter(n_leaves(t) for t in sim)
    sim_depth = Counter(tree_depth(t) for t in sim)
    fit_leaves = Counter(prior_fit.posterior["n_leaves"].values.ravel().tolist())
    split_var = prior_fit.tree_arrays()["split_var"].values
    left = prior_fit.tree_arrays()["left_child"].values
    right = prior_fit.tree_arrays()["right_child"].values
    fit_depth = Counter()
    flat = split_var.reshape(-1, split_var.shape[-1])
    lflat = left.reshape(flat.shape)
    rflat = right.reshape(flat.shape)
    for s in range(flat.shape[0]):
        depth = {0: 0}
        best = 0
        for node in range(flat.shape[1]):  # preorder: parents before children
            if flat[s, node] >= 0:
                depth[lflat[s, node]] = depth[rflat[s, node]] = depth[node] + 1
                best = max(best, depth[node] + 1)
            elif flat[s, node] == -2:
                break
        fit_depth[best] += 1
    g1, p1, d1 = two_sample_g_test(fit_leaves, sim_leaves)
    g2, p2, d2 = two_sample_g_test(fit_depth, sim_depth)
    print(f"\nleaves: fit {sorted(fit_leaves.items())} sim {sorted(sim_leaves.items())} G={g1:.1f} p={p1:.3g}")
    print(f"depth: fit {sorted(fit_depth.items())} sim {sorted(sim_depth.items())} G={g2:.1f} p={p2:.3g}")
    assert p1 > 1e-4
    assert p2 > 1e-4
    mean_leaves = prior_fit.posterior["mean_leaves"].values
    assert np.allclose(mean_leaves, prior_fit.posterior["n_leaves"].values.mean(axis=-1))


def test_prior_only_sigma_matches_inverse_chi_square(prior_fit):
    """sigma^2 ~ nu lam / chi2_nu (lam on the original scale in ``config["lam"]``): sigma is
    redrawn from its prior every sweep, so the 4,000 kept draws are iid. KS p > 1e-4."""
    cfg = prior_fit.config
    sigma = prior_fit.posterior["sigma"].values.ravel()
    prior = stats.invgamma(a=cfg["nu"] / 2, scale=cfg["nu"] * cfg["lam"] / 2)
    ks = stats.kstest(sigma**2, prior.cdf)
    print(f"\nsigma KS D={ks.statistic:.4f} p={ks.pvalue:.3g}")
    assert ks.pvalue > 1e-4
    # lam matches P(sigma < sigma_hat) = q.
    assert prior.cdf(cfg["sigma_hat"] ** 2) == pytest.approx(cfg["q"], abs=1e-9)


def test_prior_only_leaf_values_are_normal(prior_fit):
    """Leaf values ~ N(0, tau^2) on the standardised scale, tau = 0.5 / (k sqrt(trees)); on the
    original scale ``leaf - center/trees ~ N(0, config['tau']^2)``. Leaf values are redrawn from
    the prior every sweep, so they are iid: KS p > 1e-4."""
    cfg = prior_fit.config
    assert cfg["tau"] == pytest.approx(0.5 / (2.0 * math.sqrt(10)) * cfg["scale"])
    values = prior_fit.tree_arrays()["leaf_value"].values
    is_leaf = prior_fit.tree_arrays()["split_var"].values == -1
    leaves = values[is_leaf] - cfg["center"] / cfg["trees"]
    ks = stats.kstest(leaves / cfg["tau"], "norm")
    print(f"\nleaf KS n={leaves.size} D={ks.statistic:.4f} p={ks.pvalue:.3g}")
    assert np.all(np.isfinite(leaves))
    assert ks.pvalue > 1e-4


def test_prior_only_probit_leaf_values():
    """Probit BART prior: leaf sd 3 / (k sqrt(trees)) on the latent scale, offset
    ``center = Phi^-1(mean(y))`` spread over the trees. KS p > 1e-4 on iid prior draws."""
    df = prior_data()
    df["yes"] = np.where(df["y"] > 1000.0, "yes", "no")
    df = df.drop(columns="y")
    fit = bps.bart("yes ~ .", data=df, trees=8, chains=1, draws=1500, tune=50, seed=4, likelihood=False,
                   progress=False, k=1.5)
    cfg = fit.config
    assert cfg["tau"] == pytest.approx(3.0 / (1.5 * math.sqrt(8)))
    assert cfg["center"] == pytest.approx(stats.norm.ppf((df["yes"] == "yes").mean()))
    values = fit.tree_arrays()["leaf_value"].values
    leaves = values[fit.tree_arrays()["split_var"].values == -1] - cfg["center"] / 8
    ks = stats.kstest(leaves / cfg["tau"], "norm")
    print(f"\nprobit leaf KS n={leaves.size} p={ks.pvalue:.3g}")
    assert ks.pvalue > 1e-4
