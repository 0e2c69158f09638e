"""Hand-computed log acceptance ratios of the grow, prune, change and swap moves on a 4-row data
set, against ``exact.harness.propose(chain, move)`` to 1e-12.

The hand values are written here from the formulas (not from the kernels):

    log r = log pi(T') + log L(T') - log pi(T) - log L(T) + log q(T' -> T) - log q(T -> T')

with the tree prior of issue 2 (``tests/exact/enumerate.tree_log_prior``), the closed-form
marginal likelihoods below, and the proposal probabilities of the moves:

* grow at a leaf eta with rule rho: q = P(grow | T) / b(T) * p_RULE(rho | eta); reverse prune
  q = P(prune | T') / n_nog(T'); prune is the reverse;
* change at an internal node eta to rule rho': q = P(change | T) / n_int(T) * p_RULE(rho' | eta);
* swap of an internal non-root node with its parent: q = k / n_int_nonroot(T), k = 2 when both
  children carry the child's rule (both are swapped) and 1 otherwise;
* P(move | T) is the move probability renormalised over the moves possible in T (prune and change
  need a split, swap two).

The sampler stores a categorical rule as an ordered level mask plus free bits for the levels
absent from the node (prior mass p_RULE / (2 * 2^absent), see ``_kernels/tree.py``), so its
ratios are those of the stored representations: the canonical ratio plus log 2 times the change
in the number of absent levels of every categorical split other than the one the move draws.
That correction is applied below; it is zero for grow and prune.

Tolerance 1e-12 (absolute, on log r of order 1-10): both sides are a few dozen floating-point
operations on the same inputs, so they agree to a few ulps unless a term is wrong.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from exact import harness as H
from exact.enumerate import Problem, available_rules, rule_log_prob, split_rows, tree_log_prior, tree_partition
from scipy.special import gammaln

# x1 numeric (3 cuts), x2 numeric (1 cut), g a three-level factor; min_leaf_size 1.
X4 = np.array([[0.0, 0.0, 0], [1.0, 1.0, 1], [2.0, 0.0, 2], [3.0, 1.0, 0]])
IS_CAT4 = np.array([False, False, True])
N_LEVELS4 = np.array([0, 0, 3])
Y4 = np.array([0.1, 1.3, -0.4, 2.2])
YCLS4 = np.array([0, 1, 1, 0])
MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}
HYPER = dict(a=1.0 / 3.0, mu_bar=0.5, nu=3.0, lam=0.4)


def problem(model):
    kw = dict(y=Y4, ycls=YCLS4, n_classes=2, class_alpha=0.7, **HYPER)
    return Problem(X4, IS_CAT4, N_LEVELS4, 1, 0.95, 0.5, model, **kw)


# -- marginal likelihoods written out from the formulas ------------------------------------------

def log_lik(prob, tree) -> float:
    leaves = tree_partition(prob, tree)
    if prob.model is None:
        return 0.0
    if prob.model == "classification":
        k, al = prob.n_classes, prob.class_alpha
        out = 0.0
        for leaf in leaves:
            counts = np.bincount(np.asarray(prob.ycls)[list(leaf)], minlength=k)
            out += gammaln(k * al) - k * gammaln(al) + gammaln(counts + al).sum() - gammaln(len(leaf) + k * al)
        return float(out)
    a, mu, nu, lam = prob.a, prob.mu_bar, prob.nu, prob.lam
    y = np.asarray(prob.y)

    def scatter(leaf):  # s_i + t_i of paper 003
        yl = y[list(leaf)]
        ni = len(yl)
        return float(((yl - yl.mean()) ** 2).sum() + ni * a / (ni + a) * (yl.mean() - mu) ** 2)

    if prob.model == "mean_shift":
        n = len(y)
        logc = -n / 2 * math.log(math.pi) + nu / 2 * math.log(nu * lam) + gammaln((n + nu) / 2) - gammaln(nu / 2)
        return (logc + sum(0.5 * math.log(a / (len(lf) + a)) for lf in leaves)
                - (n + nu) / 2 * math.log(sum(scatter(lf) for lf in leaves) + nu * lam))
    out = 0.0  # mean_variance_shift: thesis eq. 3.3, leaf by leaf
    for lf in leaves:
        ni = len(lf)
        out += (-ni / 2 * math.log(math.pi) + nu / 2 * math.log(nu * lam) + 0.5 * math.log(a / (ni + a))
                + gammaln((ni + nu) / 2) - gammaln(nu / 2) - (ni + nu) / 2 * math.log(nu * lam + scatter(lf)))
    return float(out)


# -- proposal bookkeeping --------------------------------------------------------------------------

def n_internal(t):
    return 0 if t is None else 1 + n_internal(t[2]) + n_internal(t[3])


def n_leaves(t):
    return n_internal(t) + 1


def n_nog(t):
    if t is None:
        return 0
    if t[2] is None and t[3] is None:
        return 1
    return n_nog(t[2]) + n_nog(t[3])


def p_move(move, t):
    n_int = n_internal(t)
    possible = {"grow": True, "prune": n_int >= 1, "change": n_int >= 1, "swap": n_int >= 2}
    z = sum(p for m, p in MOVES.items() if possible[m])
    return MOVES[move] / z


def rep_log_count(prob, t, rows=None):
    """log of the number of stored representations: log(2 * 2^absent) per categorical split."""
    rows = tuple(range(prob.n)) if rows is None else rows
    if t is None:
        return 0.0
    v, rule, lt, rt = t
    left, right = split_rows(prob, rows, v, rule)
    own = rule_rep_log_count(prob, rows, v)
    return own + rep_log_count(prob, lt, left) + rep_log_count(prob, rt, right)


def rule_rep_log_count(prob, rows, v):
    if not prob.is_cat[v]:
        return 0.0
    present = len({int(prob.codes[r, v]) for r in rows})
    return math.log(2.0) * (1 + int(prob.n_levels[v]) - present)


def first_difference(t, u, rows):
    """(rows, depth-first path) of the first node, in preorder, whose (variable, rule) differ in
    t and u, or None when the trees are equal. Assumes the trees share their structure."""
    if t is None or u is None:
        return None if t is u else (rows, t, u)
    if (t[0], t[1]) != (u[0], u[1]):
        return rows, t, u
    left, right = split_rows(PROB_FOR_DIFF[0], rows, t[0], t[1])
    return first_difference(t[2], u[2], left) or first_difference(t[3], u[3], right)


PROB_FOR_DIFF = [None]


def grown_leaf(t, u, rows):
    """Rows of the leaf of t that is split in u (u = t with one leaf grown) and u's rule there."""
    if t is None:
        return rows, u[0], u[1]
    left, right = split_rows(PROB_FOR_DIFF[0], rows, t[0], t[1])
    if t[2] != u[2]:
        return grown_leaf(t[2], u[2], left)
    return grown_leaf(t[3], u[3], right)


def hand_log_r(prob, move, t, u) -> float:
    """The log acceptance ratio of proposing u from t by ``move`` (see the module docstring)."""
    PROB_FOR_DIFF[0] = prob
    root = tuple(range(prob.n))
    log_target = (tree_log_prior(prob, u) + log_lik(prob, u) - rep_log_count(prob, u)
                  - tree_log_prior(prob, t) - log_lik(prob, t) + rep_log_count(prob, t))
    if move in ("grow", "prune"):
        small, big = (t, u) if move == "grow" else (u, t)
        rows, v, rule = grown_leaf(small, big, root)
        # stored-representation probability of drawing the rule from p_RULE
        log_rule = rule_log_prob(prob, rows, v, rule) - rule_rep_log_count(prob, rows, v)
        log_q_grow = math.log(p_move("grow", small)) - math.log(n_leaves(small)) + log_rule
        log_q_prune = math.log(p_move("prune", big)) - math.log(n_nog(big))
        if move == "grow":
            return log_target + log_q_prune - log_q_grow
        return log_target + log_q_grow - log_q_prune
    if move == "change":
        diff = first_difference(t, u, root)
        if diff is None:
            return 0.0
        rows, old, new = diff
        log_old = rule_log_prob(prob, rows, old[0], old[1]) - rule_rep_log_count(prob, rows, old[0])
        log_new = rule_log_prob(prob, rows, new[0], new[1]) - rule_rep_log_count(prob, rows, new[0])
        # P(change | T) / n_int is the same in t and u (same structure)
        return log_target + log_old - log_new
    if move == "swap":
        # k: children of the parent carrying the rule that moves up (both are swapped when both
        # carry it), before and after. Read on canonical rules, which is exact for the numeric
        # rules of the both-children case used here.
        _, par_t, par_u = first_difference(t, u, root)
        k_fwd = sum(1 for c in (par_t[2], par_t[3]) if c is not None and (c[0], c[1]) == (par_u[0], par_u[1]))
        k_rev = sum(1 for c in (par_u[2], par_u[3]) if c is not None and (c[0], c[1]) == (par_t[0], par_t[1]))
        return log_target + math.log(max(k_rev, 1)) - math.log(max(k_fwd, 1))
    raise ValueError(move)


def make_chain(prob, seed):
    return H.make_chain(prob, MOVES, seed, likelihood=prob.model is not None)


MODELS = ["mean_shift", "mean_variance_shift", "classification", None]

# Starting trees (canonical). Rows: r0 (x1=0, x2=0, g=0), r1 (1, 1, 1), r2 (2, 0, 2), r3 (3, 1, 0).
T_STUMP = None
T_ONE = (0, 1, None, None)                                   # x1 <= cut 1: {r0, r1} | {r2, r3}
T_CAT_ROOT = (2, frozenset({0}), None, None)                 # g = 0: {r0, r3} | {r1, r2}
T_CAT_CHILD = (0, 1, (2, frozenset({0}), None, None), None)  # categorical split below a numeric one
T_TWO_SAME = (0, 1, (1, 0, None, None), (1, 0, None, None))  # both children x2 <= cut 0
T_CHAIN = (0, 0, None, (0, 1, None, (1, 0, None, None)))     # a path of three splits
T_DEEP_LEAF = (0, 0, None, (1, 0, None, None))               # leaf {r1, r3} at depth 2 can grow
CASES = {
    "grow": [T_STUMP, T_ONE, T_CAT_ROOT, T_CAT_CHILD, T_DEEP_LEAF],
    "prune": [T_ONE, T_CAT_ROOT, T_CAT_CHILD, T_TWO_SAME, T_CHAIN],
    "change": [T_ONE, T_CAT_ROOT, T_CAT_CHILD, T_TWO_SAME, T_CHAIN],
    "swap": [T_TWO_SAME, T_CHAIN, T_CAT_CHILD],
}
PARAMS = [(m, model, i) for m in CASES for model in MODELS for i in range(len(CASES[m]))]


@pytest.mark.parametrize("move,model,case", PARAMS,
                         ids=[f"{m}-{model}-{i}" for m, model, i in PARAMS])
def test_log_ratio_matches_hand_value(move, model, case):
    """Every proposal drawn from the case's tree has the hand-computed log ratio (1e-12)."""
    prob = problem(model)
    start = CASES[move][case]
    assert np.isfinite(tree_log_prior(prob, start)), "invalid starting tree"
    chain = make_chain(prob, hash((move, str(model), case)) % 2**32)
    seen = Counter()
    for _ in range(120):
        chain.set_tree(start)
        log_r, proposed = H.propose(chain, move)
        assert chain.get_tree() == start, "propose must leave the chain's tree unchanged"
        if proposed == H.NO_PROPOSAL:
            continue
        assert np.isfinite(tree_log_prior(prob, proposed)), f"invalid proposal {proposed}"
        expected = hand_log_r(prob, move, start, proposed)
        assert log_r == pytest.approx(expected, abs=1e-12, rel=0), (start, proposed)
        seen[proposed] += 1
    assert seen, "no valid proposal drawn"


def test_grow_from_stump_by_hand():
    """One ratio in plain arithmetic. Likelihood off, cgm moves. Grow the stump with x1 <= cut 1:
    children {r0, r1} and {r2, r3} each still have an available rule (m = 1), so
    r = p(0) (1 - p(1))^2 / (1 - p(0)) * [P(prune|T') / 1] / [P(grow|stump) / 1] with
    p(d) = 0.95 (1 + d)^-0.5, P(prune|T') = 0.25 / (0.25 + 0.25 + 0.4), P(grow|stump) = 1."""
    p0 = 0.95
    p1 = 0.95 / math.sqrt(2.0)
    r = p0 * (1 - p1) ** 2 / (1 - p0) * (0.25 / 0.9)
    chain = make_chain(problem(None), 3)
    found = False
    for _ in range(200):
        chain.set_tree(None)
        log_r, proposed = H.propose(chain, "grow")
        if proposed == T_ONE:
            assert log_r == pytest.approx(math.log(r), abs=1e-12, rel=0)
            found = True
    assert found


def test_enumerated_prior_of_the_four_rows():
    """The hand bookkeeping above relies on tree_log_prior; pin it on one tree in plain numbers.
    T_ONE: root p_RULE = 1/3 variables (x1, x2, g all have rules) * 1/3 cuts of x1; each child
    has 2 rows and an available rule."""
    prob = problem(None)
    rules = available_rules(prob, tuple(range(4)))
    assert {v: len(r) for v, r in rules.items()} == {0: 3, 1: 1, 2: 3}
    p0, p1 = 0.95, 0.95 / math.sqrt(2.0)
    expected = math.log(p0 / 9.0) + 2 * math.log(1 - p1)
    assert tree_log_prior(prob, T_ONE) == pytest.approx(expected, abs=1e-14)
