"""Law of the ``smc`` one-step optimal node proposal over whole trees, by enumeration.

A plain-Python reference (it imports only ``enumerate.py``, never ``bartpy_suite``): a particle
grown from the root without resampling reaches a tree with probability q(T), the product over
its stages of the proposal's probability of the decision taken, and carries the log weight
sum of log Z_s, the stages' normalisers (spec ``tree_moves.md`` 2.1, "posterior" proposal):

    s_stop = log(1 - p_SPLIT),   s(v, rule) = log p_SPLIT + log p_RULE(v, rule) + L(after) - L(before),
    Z_s = sum over the options of exp(s),

with L the log marginal likelihood of the partial tree (its unprocessed nodes counted as leaves),
nodes processed breadth-first (left child before right). Because the likelihood of the
common-sigma model is not a product over leaves, the order of the children matters, so the law
is computed for *stored representations*: a factor rule is stored with either orientation (the
set of present levels going left, or its complement), each carrying half of the unordered
rule's prior mass. A representation is a nested tuple ``(v, rule, left, right)`` as in
``enumerate.py`` except that a factor rule is the set of present levels sent left, in either
orientation.

The identity q(rep) * exp(sum log Z_s) = p(rep) p(Y | rep) / p(Y | root) (the telescoping of the
stage scores) makes the self-normalised weighted particles an importance sample of the
posterior; ``canonical_identity_error`` checks it against the enumeration.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from .enumerate import ExactResult, Problem, available_rules, log_marginal

__all__ = ["representations", "proposal_path", "canonical_law", "canonical_identity_error"]


def _present(prob: Problem, rows: tuple, v: int) -> frozenset:
    return frozenset(int(prob.codes[r, v]) for r in rows)


def representations(prob: Problem, tree, rows: tuple | None = None) -> list:
    """Every stored representation of a canonical tree (both orientations of each factor rule)."""
    if rows is None:
        rows = tuple(range(prob.n))
    if tree is None:
        return [None]
    v, rule, lt, rt = tree
    if prob.is_cat[v]:
        left = tuple(r for r in rows if int(prob.codes[r, v]) in rule)
    else:
        left = tuple(r for r in rows if int(prob.codes[r, v]) <= rule)
    right = tuple(r for r in rows if r not in set(left))
    out = []
    for a in representations(prob, lt, left):
        for b in representations(prob, rt, right):
            out.append((v, rule, a, b))
            if prob.is_cat[v]:
                out.append((v, _present(prob, rows, v) - rule, b, a))
    return out


def proposal_path(prob: Problem, rep, cache: dict | None = None) -> tuple[float, float]:
    """(log q(rep), sum of the stages' log Z) of a stored representation under the one-step
    optimal proposal without resampling."""
    cache = {} if cache is None else cache

    def lm(leaves):
        key = frozenset(leaves)
        if key not in cache:
            cache[key] = log_marginal(prob, list(leaves))
        return cache[key]

    root = tuple(range(prob.n))
    leaves = [root]
    queue = deque([(rep, root, 0)])
    log_q = 0.0
    log_w = 0.0
    while queue:
        sub, rows, depth = queue.popleft()
        rules = available_rules(prob, rows)
        if not rules:  # never eligible: p_SPLIT = 0, not a stage
            assert sub is None
            continue
        ps = prob.alpha * (1.0 + depth) ** (-prob.beta)
        before = lm(leaves)
        others = [leaf for leaf in leaves if leaf != rows]
        scores = [math.log1p(-ps)]
        chosen = scores[0] if sub is None else None
        target_left = None
        if sub is not None:
            v0, rule0 = sub[0], sub[1]
            if prob.is_cat[v0]:
                target_left = tuple(r for r in rows if int(prob.codes[r, v0]) in rule0)
            else:
                target_left = tuple(r for r in rows if int(prob.codes[r, v0]) <= rule0)
        split = None
        for v, vrules in rules.items():
            base = math.log(ps) - math.log(len(rules)) - math.log(len(vrules))
            for _, left, right in vrules:
                sides = [(left, right), (right, left)] if prob.is_cat[v] else [(left, right)]
                for a, b in sides:
                    s = base - math.log(len(sides)) + lm(others + [a, b]) - before
                    scores.append(s)
                    if sub is not None and v == sub[0] and a == target_left:
                        chosen, split = s, (a, b)
        if chosen is None:
            raise ValueError(f"rule {sub[:2]} is not available at its node")
        top = max(scores)
        log_z = top + math.log(sum(math.exp(s - top) for s in scores))
        log_q += chosen - log_z
        log_w += log_z
        if sub is not None:
            leaves = others + list(split)
            queue.append((sub[2], split[0], depth + 1))
            queue.append((sub[3], split[1], depth + 1))
    return log_q, log_w


def canonical_law(prob: Problem, ex: ExactResult) -> tuple[np.ndarray, dict]:
    """q of every canonical tree of ``ex`` (summed over its representations) and the log weight
    of every representation, {rep: sum of log Z}."""
    cache: dict = {}
    q = np.zeros(len(ex.trees))
    log_w = {}
    for i, tree in enumerate(ex.trees):
        for rep in representations(prob, tree):
            lq, lw = proposal_path(prob, rep, cache)
            q[i] += math.exp(lq)
            log_w[rep] = lw
    return q, log_w


def canonical_identity_error(prob: Problem, ex: ExactResult) -> float:
    """max over canonical trees of |sum_rep q(rep) w(rep) / normaliser - pi(T)|: zero when the
    weighted proposal is an importance sample of the enumerated posterior."""
    cache: dict = {}
    mass = np.zeros(len(ex.trees))
    for i, tree in enumerate(ex.trees):
        for rep in representations(prob, tree):
            lq, lw = proposal_path(prob, rep, cache)
            mass[i] += math.exp(lq + lw)
    return float(np.max(np.abs(mass / mass.sum() - ex.post)))
