"""Exact Bayesian CART posterior of a tiny data set by brute-force enumeration.

A slow, plain-Python/numpy/scipy reference written from the model conventions of issue 2, not
from the kernels (it imports nothing from ``bartpy_suite``). Every valid tree is listed in the
nested-tuple form of ``CartChain.get_tree()``:

* a leaf is ``None``; an internal node is ``(v, rule, left, right)``;
* numeric variable: ``rule`` is a cut index ``k`` into the grid of midpoints between consecutive
  distinct training values; a row goes left iff its value is ``<= cut_k``, i.e. iff the rank of
  its value among the distinct training values is ``<= k``;
* categorical variable: ``rule`` is the frozenset of level codes present at the node that go
  left, oriented so the largest level present at the node goes right.

Tree prior (thesis eq. 3.1 with the availability conventions): a rule is available at a node iff
both children get at least ``m`` rows; ``p_SPLIT = alpha (1 + depth)^-beta`` if the node has an
available rule, else 0; ``p_RULE`` is uniform over the variables with an available rule, then
uniform over that variable's available rules, where a categorical rule is an unordered
partition of the levels present at the node into two non-empty groups (``2^(L-1) - 1`` before
the ``m`` filter).

Missing predictor values (``split_missing``, the ``na_action="split"`` convention; MIA as in
Kapelner & Bleich 2015): a missing value (NaN in ``X``) of variable v gets the code one past the
others (the number of distinct values of a numeric variable, ``n_levels[v]`` of a factor).

* numeric: a rule is the pair ``(k, na_left)`` with ``k`` in ``0 .. n_distinct - 1``; observed rows
  go left iff their rank is ``<= k``, missing rows iff ``na_left``. p_RULE is uniform over the
  available pairs (the bit is counted; ``k = n_distinct - 1, na_left = False`` splits on
  missingness alone);
* factor: "missing" is one more level, present at a node iff some row there is missing.

Marginal likelihoods (written independently of the kernels' closed forms):

* ``mean_shift``: y | sigma ~ N(mu_bar 1, sigma^2 (I + B/a)) with B the same-leaf indicator
  matrix, sigma^2 ~ IG(nu/2, nu lam/2), hence Y ~ multivariate t_nu(mu_bar 1, lam (I + B/a));
* ``mean_variance_shift``: the same per leaf with its own sigma, a product of multivariate t
  densities (thesis eq. 3.3);
* ``classification``: Dirichlet(class_alpha) leaf probabilities integrated out, computed as a
  sequential Polya urn (thesis eq. 3.4).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = [
    "Problem",
    "ExactResult",
    "value_ranks",
    "available_rules",
    "enumerate_trees",
    "log_marginal",
    "exact_posterior",
    "tree_depth",
    "tree_n_leaves",
    "tree_leaves",
    "split_rows",
    "tree_partition",
    "tree_log_prior",
    "rule_log_prob",
    "leaf_posterior_mean",
    "posterior_mean_predictions",
]


@dataclass
class Problem:
    """A tiny Bayesian CART problem.

    ``X`` is (n, p) float; categorical columns hold level codes 0..L-1 and ``n_levels[v]`` is L
    (levels may be absent from the data). ``model`` is "mean_shift", "mean_variance_shift",
    "classification" or None (likelihood off: the posterior is the prior).
    """

    X: np.ndarray
    is_cat: np.ndarray
    n_levels: np.ndarray
    m: int
    alpha: float
    beta: float
    model: str | None = "mean_shift"
    y: np.ndarray | None = None
    ycls: np.ndarray | None = None
    a: float = 1.0 / 3.0
    mu_bar: float = 0.0
    nu: float = 3.0
    lam: float = 1.0
    class_alpha: float = 1.0
    n_classes: int = 2
    split_missing: bool = False
    codes: np.ndarray = field(init=False)

    def __post_init__(self):
        self.X = np.asarray(self.X, dtype=float)
        self.is_cat = np.asarray(self.is_cat, dtype=bool)
        if np.isnan(self.X).any() and not self.split_missing:
            raise ValueError("missing values need split_missing=True")
        self.codes = value_ranks(self.X, self.is_cat, self.n_levels)

    @property
    def n(self) -> int:
        return self.X.shape[0]


def value_ranks(X: np.ndarray, is_cat, n_levels=None) -> np.ndarray:
    """(n, p) integer codes: the rank of each value among the column's distinct values (numeric),
    or the level code itself (categorical); a missing value gets the code after the others."""
    X = np.asarray(X, dtype=float)
    out = np.empty(X.shape, dtype=np.int64)
    for v in range(X.shape[1]):
        col = X[:, v].tolist()
        if is_cat[v]:
            na_code = int(n_levels[v]) if n_levels is not None else None
            out[:, v] = [na_code if math.isnan(val) else int(val) for val in col]
        else:
            distinct = sorted(set(val for val in col if not math.isnan(val)))
            rank = {val: i for i, val in enumerate(distinct)}
            out[:, v] = [len(distinct) if math.isnan(val) else rank[val] for val in col]
    return out


def _n_distinct(prob: Problem, v: int) -> int:
    return len(set(val for val in prob.X[:, v].tolist() if not math.isnan(val)))


def _n_numeric_cuts(prob: Problem, v: int) -> int:
    return _n_distinct(prob, v) - 1


def available_rules(prob: Problem, rows: tuple) -> dict:
    """Available rules at a node holding ``rows``: {v: [(rule, left_rows, right_rows), ...]}
    (only variables with at least one available rule appear)."""
    m = prob.m
    n = len(rows)
    out = {}
    for v in range(prob.X.shape[1]):
        col = {r: int(prob.codes[r, v]) for r in rows}
        rules = []
        if prob.is_cat[v]:
            present = sorted(set(col.values()))
            others = present[:-1]
            # Unordered partitions {S, complement}: S a non-empty subset not holding the top level.
            for size in range(1, len(others) + 1):
                for subset in itertools.combinations(others, size):
                    s = frozenset(subset)
                    left = tuple(r for r in rows if col[r] in s)
                    right = tuple(r for r in rows if col[r] not in s)
                    if len(left) >= m and len(right) >= m:
                        rules.append((s, left, right))
        elif prob.split_missing:
            na_code = _n_distinct(prob, v)
            for k in range(na_code):
                for na_left in (False, True):
                    left = tuple(r for r in rows if col[r] <= k or (col[r] == na_code and na_left))
                    right = tuple(r for r in rows if r not in left)
                    if len(left) >= m and len(right) >= m:
                        rules.append(((k, na_left), left, right))
        else:
            for k in range(_n_numeric_cuts(prob, v)):
                left = tuple(r for r in rows if col[r] <= k)
                right = tuple(r for r in rows if col[r] > k)
                if len(left) >= m and len(right) >= m:
                    rules.append((k, left, right))
        if rules:
            out[v] = rules
    del n
    return out


def enumerate_trees(prob: Problem) -> list:
    """Every valid tree with its exact log prior.

    Returns a list of ``(tree, log_prior, leaves)`` where ``leaves`` is a tuple of row tuples
    (one per leaf, left to right).
    """
    memo = {}

    def sub(rows: tuple, depth: int):
        key = (rows, depth)
        if key in memo:
            return memo[key]
        rules = available_rules(prob, rows)
        if not rules:
            result = [(None, 0.0, (rows,))]
        else:
            ps = prob.alpha * (1.0 + depth) ** (-prob.beta)
            result = [(None, math.log1p(-ps), (rows,))]
            n_vars = len(rules)
            for v, vrules in rules.items():
                log_rule = math.log(ps) - math.log(n_vars) - math.log(len(vrules))
                for rule, left, right in vrules:
                    for lt, llp, lleaves in sub(left, depth + 1):
                        for rt, rlp, rleaves in sub(right, depth + 1):
                            result.append(((v, rule, lt, rt), log_rule + llp + rlp, lleaves + rleaves))
        memo[key] = result
        return result

    return sub(tuple(range(prob.n)), 0)


def tree_leaves(tree) -> int:
    """Number of leaves of a nested tree."""
    if tree is None:
        return 1
    return tree_leaves(tree[2]) + tree_leaves(tree[3])


tree_n_leaves = tree_leaves


def tree_depth(tree, depth: int = 0) -> int:
    """Largest node depth of a nested tree (a stump has depth 0)."""
    if tree is None:
        return depth
    return max(tree_depth(tree[2], depth + 1), tree_depth(tree[3], depth + 1))


def _polya_log(ycls_leaf, n_classes: int, class_alpha: float) -> float:
    counts = [0] * n_classes
    out = 0.0
    for j, c in enumerate(ycls_leaf):
        out += math.log((counts[c] + class_alpha) / (j + n_classes * class_alpha))
        counts[c] += 1
    return out


def log_marginal(prob: Problem, leaves) -> float:
    """log p(Y | X, partition into ``leaves``) with the leaf parameters integrated out."""
    if prob.model is None:
        return 0.0
    if prob.model == "classification":
        return sum(_polya_log([int(prob.ycls[r]) for r in leaf], prob.n_classes, prob.class_alpha) for leaf in leaves)
    y = np.asarray(prob.y, dtype=float)
    if prob.model == "mean_shift":
        n = len(y)
        group = np.empty(n, dtype=np.int64)
        for i, leaf in enumerate(leaves):
            group[list(leaf)] = i
        shape = prob.lam * (np.eye(n) + (group[:, None] == group[None, :]) / prob.a)
        return float(stats.multivariate_t(loc=np.full(n, prob.mu_bar), shape=shape, df=prob.nu).logpdf(y))
    if prob.model == "mean_variance_shift":
        total = 0.0
        for leaf in leaves:
            k = len(leaf)
            shape = prob.lam * (np.eye(k) + np.ones((k, k)) / prob.a)
            total += float(stats.multivariate_t(loc=np.full(k, prob.mu_bar), shape=shape, df=prob.nu).logpdf(y[list(leaf)]))
        return total
    raise ValueError(f"unknown model {prob.model!r}")


@dataclass
class ExactResult:
    """Enumerated trees with exact log prior, log marginal likelihood and posterior."""

    trees: list
    log_prior: np.ndarray
    log_lik: np.ndarray
    post: np.ndarray
    prior: np.ndarray
    n_leaves: np.ndarray
    depth: np.ndarray
    index: dict

    def posterior_of(self, attr: np.ndarray) -> dict:
        """Distribution of an integer tree statistic under the posterior."""
        out = {}
        for val, p in zip(attr.tolist(), self.post.tolist()):
            out[val] = out.get(val, 0.0) + p
        return out


def exact_posterior(prob: Problem) -> ExactResult:
    """Enumerate every tree of ``prob`` and normalise prior x marginal likelihood."""
    listing = enumerate_trees(prob)
    trees = [t for t, _, _ in listing]
    log_prior = np.array([lp for _, lp, _ in listing])
    cache = {}
    log_lik = np.empty(len(listing))
    for i, (_, _, leaves) in enumerate(listing):
        key = frozenset(leaves)
        if key not in cache:
            cache[key] = log_marginal(prob, leaves)
        log_lik[i] = cache[key]
    lpost = log_prior + log_lik
    post = np.exp(lpost - lpost.max())
    post /= post.sum()
    prior = np.exp(log_prior)
    return ExactResult(
        trees=trees,
        log_prior=log_prior,
        log_lik=log_lik,
        post=post,
        prior=prior,
        n_leaves=np.array([tree_leaves(t) for t in trees]),
        depth=np.array([tree_depth(t) for t in trees]),
        index={t: i for i, t in enumerate(trees)},
    )


def split_rows(prob: Problem, rows: tuple, v: int, rule) -> tuple[tuple, tuple]:
    """Rows of a node going left and right under a canonical rule."""
    if prob.is_cat[v]:
        left = tuple(r for r in rows if int(prob.codes[r, v]) in rule)
    elif prob.split_missing:
        k, na_left = rule
        na_code = _n_distinct(prob, v)
        left = tuple(r for r in rows if int(prob.codes[r, v]) <= k
                     or (int(prob.codes[r, v]) == na_code and na_left))
    else:
        left = tuple(r for r in rows if int(prob.codes[r, v]) <= rule)
    chosen = set(left)
    return left, tuple(r for r in rows if r not in chosen)


def tree_partition(prob: Problem, tree, rows: tuple | None = None) -> tuple:
    """The leaves of a nested tree as row tuples, left to right."""
    if rows is None:
        rows = tuple(range(prob.n))
    if tree is None:
        return (rows,)
    left, right = split_rows(prob, rows, tree[0], tree[1])
    return tree_partition(prob, tree[2], left) + tree_partition(prob, tree[3], right)


def tree_log_prior(prob: Problem, tree, rows: tuple | None = None, depth: int = 0) -> float:
    """Exact log prior of a nested tree (``-inf`` if some rule is not available or if a
    categorical rule is not in canonical orientation)."""
    if rows is None:
        rows = tuple(range(prob.n))
    rules = available_rules(prob, rows)
    ps = prob.alpha * (1.0 + depth) ** (-prob.beta)
    if tree is None:
        return math.log1p(-ps) if rules else 0.0
    v, rule, lt, rt = tree
    if v not in rules:
        return -math.inf
    match = [r for r in rules[v] if r[0] == rule]
    if not match:
        return -math.inf
    _, left, right = match[0]
    return (math.log(ps) - math.log(len(rules)) - math.log(len(rules[v]))
            + tree_log_prior(prob, lt, left, depth + 1) + tree_log_prior(prob, rt, right, depth + 1))


def rule_log_prob(prob: Problem, rows: tuple, v: int, rule) -> float:
    """log p_RULE of a canonical rule at a node holding ``rows`` (``-inf`` if unavailable)."""
    rules = available_rules(prob, rows)
    if v not in rules or not any(r[0] == rule for r in rules[v]):
        return -math.inf
    return -math.log(len(rules)) - math.log(len(rules[v]))


def leaf_posterior_mean(prob: Problem, leaf: tuple) -> np.ndarray:
    """E[leaf parameter | T, Y] for the rows of one leaf: the leaf mean
    ``(n ybar + a mu_bar) / (n + a)`` (both normal models: mu | sigma, T, Y is normal with that
    mean whatever sigma) or the Dirichlet posterior mean ``(n_k + alpha) / (n + K alpha)``."""
    if prob.model == "classification":
        counts = np.bincount(np.asarray(prob.ycls)[list(leaf)], minlength=prob.n_classes)
        return (counts + prob.class_alpha) / (len(leaf) + prob.n_classes * prob.class_alpha)
    y = np.asarray(prob.y, dtype=float)[list(leaf)]
    return np.array((y.sum() + prob.a * prob.mu_bar) / (len(leaf) + prob.a))


def posterior_mean_predictions(prob: Problem, result: ExactResult) -> np.ndarray:
    """Exact posterior mean of the leaf parameter reaching each training row: shape (n,) for
    regression, (n, K) for classification."""
    k = prob.n_classes if prob.model == "classification" else None
    out = np.zeros((prob.n, k)) if k else np.zeros(prob.n)
    for tree, w in zip(result.trees, result.post):
        if w == 0.0:
            continue
        for leaf in tree_partition(prob, tree):
            out[list(leaf)] += w * leaf_posterior_mean(prob, leaf)
    return out
