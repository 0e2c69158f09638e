"""Trees as sequences of stage decisions, the state space of the particle samplers (plain
Python; imports only ``enumerate.py``).

A particle grows breadth-first: each stage pops the next *eligible* node (one with an available
rule; others are never queued) and decides to stop or to split it by a stored rule ``(v, cut)``:
a numeric cut index (rows with code <= cut go left) or, for a factor, a bit mask of levels (rows
whose level bit is set go left; bits of levels absent from the node are free). The path's prior
is the product of its decisions' probabilities,

    stop: 1 - p_SPLIT(depth),   split: p_SPLIT(depth) p_RULE(v, cut),

with p_RULE(v, cut) = 1 / (n_vars * count_v) for a numeric cut and
1 / (n_vars * 2 * canonical_count_v * 2^absent_v) for a stored factor mask (both orientations and
the absent levels' bits are representations of one unordered rule). ``apply_decisions`` applies a
list of decisions to the root and returns the partial tree's leaves (pending nodes counted as
leaves), the queue left and the log prior, or ``None`` when a decision is not valid where it
lands. Ancestor sampling in particle Gibbs weighs a particle by
gamma(prefix + reference suffix) / gamma(prefix), gamma = prior x marginal likelihood.
"""

from __future__ import annotations

import math
from collections import deque

from .enumerate import Problem, available_rules, log_marginal

__all__ = ["tree_decisions", "apply_decisions", "log_gamma"]


def _split(prob: Problem, rows: tuple, v: int, cut: int) -> tuple[tuple, tuple]:
    if prob.is_cat[v]:
        left = tuple(r for r in rows if (cut >> int(prob.codes[r, v])) & 1)
    else:
        left = tuple(r for r in rows if int(prob.codes[r, v]) <= cut)
    chosen = set(left)
    return left, tuple(r for r in rows if r not in chosen)


def tree_decisions(prob: Problem, var, cut, left, right) -> list:
    """The stage decisions of a stored tree (node arrays: ``var[k] < 0`` is a leaf): ``None`` for a
    stop, ``(v, cut)`` for a split, in breadth-first order of its eligible nodes."""
    out = []
    queue = deque([(0, tuple(range(prob.n)))])
    while queue:
        node, rows = queue.popleft()
        if not available_rules(prob, rows):
            continue
        v = int(var[node])
        if v < 0:
            out.append(None)
            continue
        c = int(cut[node])
        out.append((v, c))
        a, b = _split(prob, rows, v, c)
        queue.append((int(left[node]), a))
        queue.append((int(right[node]), b))
    return out


def _decision_log_prior(prob: Problem, rows: tuple, depth: int, decision) -> float:
    rules = available_rules(prob, rows)
    ps = prob.alpha * (1.0 + depth) ** (-prob.beta)
    if decision is None:
        return math.log1p(-ps)
    v, c = decision
    if v not in rules:
        return -math.inf
    a, b = _split(prob, rows, v, c)
    if len(a) < prob.m or len(b) < prob.m:
        return -math.inf
    if not prob.is_cat[v]:
        return math.log(ps) - math.log(len(rules)) - math.log(len(rules[v]))
    absent = int(prob.n_levels[v]) - len({int(prob.codes[r, v]) for r in rows})
    return (math.log(ps) - math.log(len(rules)) - math.log(2 * len(rules[v])) - absent * math.log(2.0))


def apply_decisions(prob: Problem, decisions: list):
    """Apply ``decisions`` from the root: ``(leaves, pending, log prior)`` with ``leaves`` the row
    tuples of the partial tree's leaves (pending nodes included) and ``pending`` the number of
    queued nodes left, or ``None`` if some decision meets an empty queue or is not valid."""
    root = tuple(range(prob.n))
    queue = deque([(root, 0)]) if available_rules(prob, root) else deque()
    done = []
    log_prior = 0.0
    for decision in decisions:
        if not queue:
            return None
        rows, depth = queue.popleft()
        lp = _decision_log_prior(prob, rows, depth, decision)
        if lp == -math.inf:
            return None
        log_prior += lp
        if decision is None:
            done.append(rows)
            continue
        for child in _split(prob, rows, *decision):
            if available_rules(prob, child):
                queue.append((child, depth + 1))
            else:
                done.append(child)
    return done + [rows for rows, _ in queue], len(queue), log_prior


def log_gamma(prob: Problem, decisions: list):
    """log prior x marginal likelihood of the path (pending nodes as leaves), or ``None``."""
    out = apply_decisions(prob, decisions)
    if out is None:
        return None
    leaves, pending, log_prior = out
    return log_prior + log_marginal(prob, leaves), pending
