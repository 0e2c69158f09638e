"""Grow / prune / change / swap Metropolis-Hastings moves on one tree (thesis section 3.3.4).

Every move returns its log acceptance ratio ``log r`` computed for the conventions in
``tree.py``; the caller accepts with probability ``min(1, exp(log r))``. The ratios:

* Move types are chosen with the user's probabilities restricted to the moves possible in the
  current tree (prune and change need an internal node, swap two), renormalised. Grow and
  prune change which moves are possible, so their ratios carry ``P(move | T)``.
* grow at leaf eta with rule rho (q = P(grow|T)/b * p_RULE(rho)), reverse prune
  (q = P(prune|T')/n_nog(T')):
  ``r = p_SPLIT(d) (1-p_SPLIT*(l)) (1-p_SPLIT*(r)) / (1-p_SPLIT(d)) * q_rev/q_fwd * L(T')/L(T)``
  with p_RULE cancelling; ``p_SPLIT*`` is zero for a child without an available rule.
* change and swap alter the rows reaching every descendant, and with them the descendants'
  available rules and split probabilities, so the prior ratio is taken over the whole subtree
  (the thesis' ratio of 1 ignores this). A descendant left with fewer than ``min_leaf_size``
  rows makes the proposed tree impossible (prior 0): rejected.

Tempered targets (parallel tempering, thesis ch. 4): ``target.prior.inv_temp`` = t multiplies the
log-likelihood difference and ``target.prior.prior_heat`` = 1 - s makes the target
``L(T)^t p(T)^s`` (geometric tempering, eq. 4.2, is t = s). With s < 1 the rule prior no longer
cancels against the proposal that draws from it: grow carries ``-(1-s) log p_RULE(rho)``, prune
``+(1-s) log p_RULE`` and change ``-(1-s) [log p_RULE(new) - log p_RULE(old)]`` (the thesis'
"computed in full", Algorithm 6); the structure terms are multiplied by s. The proposal terms
(move probabilities, node counts) are never tempered.

BART's known-variance shortcuts (leaf terms from row counts and residual sums) are guarded by
``len(model) == MODEL_NORMAL_KNOWN_VARIANCE and target.prior.likelihood`` written out in each
move, not by a predicate helper: numba folds the ``len`` of the tag only where the tag is the
function's own argument (``tree.model_tag``), so a helper's result would leave the shortcut
compiled into every CART chain.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import helper
from .likelihood import (
    MODEL_BASIS_NORMAL,
    MODEL_NORMAL_KNOWN_VARIANCE,
    leaf_log_marginal_basis,
    leaf_log_marginal_normal_known_variance,
)
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    LEAF,
    M_N_FREE,
    M_N_INTERNAL,
    M_N_LEAVES,
    M_SPAN,
    MAX_CELL_RULES,
    cached_subtree_log_prior,
    collapse_node,
    global_term,
    goes_left,
    has_available_rule,
    leaf_left_count_sum,
    leaf_terms,
    merge_sorted_halves,
    p_split,
    prior_rule_counts,
    refresh_leaf_terms,
    repartition_subtree,
    rule_log_prob,
    sample_rule_s,
    sort_segment,
    split_leaf,
    subtree_log_prior,
    subtree_nodes,
    sum_leaf_terms,
)

MOVE_GROW = 0
MOVE_PRUNE = 1
MOVE_CHANGE = 2
MOVE_SWAP = 3
# Pratola's moves, implemented in ``rotate.py``; probability 0 in the default mixes.
MOVE_ROTATE = 4
MOVE_PERTURB = 5
MOVE_NAMES = ("grow", "prune", "change", "swap", "rotate", "perturb")
N_MOVES = 6
# propose_grow bounds a grow by a pass over all rows of the leaf map when the leaf holds at least
# 1/SCAN_SHARE of them: per row, that sequential pass costs a sixth or less of a partition.
SCAN_SHARE = 6



@helper
def _prob(move_probs, k):
    """Probability of move k; 0 for a move past the end of a shorter (four-move) vector."""
    return move_probs[k] if k < move_probs.shape[0] else 0.0


@helper
def move_normaliser(move_probs, n_internal):
    """Sum of the probabilities of the moves possible in a tree with ``n_internal`` splits."""
    z = move_probs[MOVE_GROW]
    if n_internal >= 1:
        z += move_probs[MOVE_PRUNE] + move_probs[MOVE_CHANGE] + _prob(move_probs, MOVE_PERTURB)
    if n_internal >= 2:
        z += move_probs[MOVE_SWAP] + _prob(move_probs, MOVE_ROTATE)
    return z


@helper
def choose_move(rng, move_probs, n_internal):
    """Draw a move type among the possible ones; -1 when none has positive probability (the
    transition is then the identity)."""
    z = move_normaliser(move_probs, n_internal)
    if z <= 0.0:
        return -1
    u = rng.random() * z
    last = -1
    for k in range(min(N_MOVES, move_probs.shape[0])):
        needs = 2 if k == MOVE_SWAP or k == MOVE_ROTATE else (0 if k == MOVE_GROW else 1)
        possible = n_internal >= needs
        if not possible or move_probs[k] == 0.0:
            continue
        last = k
        if u < move_probs[k]:
            return k
        u -= move_probs[k]
    return last


@helper
def _pick_node(rng, tree, kind):
    """Uniform draw of a node: kind 0 leaf, 1 nog (both children leaves), 2 internal,
    3 internal non-root. Returns (node, number of candidates)."""
    span = tree.meta[M_SPAN]
    count = 0
    for pass_ in range(2):
        target = int(rng.random() * count) if pass_ == 1 else 0
        seen = 0
        for node in range(span):
            v = tree.var[node]
            if kind == 0:
                ok = v == LEAF
            elif v < 0:
                ok = False
            elif kind == 1:
                ok = tree.var[tree.left[node]] == LEAF and tree.var[tree.right[node]] == LEAF
            elif kind == 2:
                ok = True
            else:
                ok = node != 0
            if ok:
                if pass_ == 0:
                    count += 1
                else:
                    if seen == target:
                        return node, count
                    seen += 1
        if count == 0:
            return -1, 0
    return -1, count


@helper
def count_nog(tree):
    """Number of internal nodes whose children are both leaves."""
    total = 0
    for node in range(tree.meta[M_SPAN]):
        if tree.var[node] >= 0 and tree.var[tree.left[node]] == LEAF and tree.var[tree.right[node]] == LEAF:
            total += 1
    return total


@helper
def _leaf_split_log_one_minus(tree, node, data, target, scratch):
    """log(1 - p_SPLIT*) of a leaf: 0 when it has no available rule."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    m = target.prior.min_leaf
    start, end = tree.start[node], tree.end[node]
    if has_available_rule(xt, tree.perm, start, end, is_cat, nbins, m, scratch.hist, scratch.sums,
                          target.prior.na_split):
        return math.log1p(-p_split(target.prior.alpha, target.prior.beta, tree.depth[node]))
    return 0.0


@helper
def _rule_log_probs(tree, node, v_a, v_b, is_cat, nbins, target, scratch):
    """log p_RULE at ``node`` (its current rows) of a stored rule on variable ``v_a`` and on
    ``v_b`` (the mass of a rule depends on its variable only, see ``tree.rule_log_prob``)."""
    n_vars = prior_rule_counts(tree.perm, tree.start[node], tree.end[node], is_cat, nbins, target.prior.min_leaf,
                               scratch, target.prior.na_split)
    a = rule_log_prob(n_vars, scratch.counts[v_a], scratch.extras[v_a], is_cat[v_a])
    b = rule_log_prob(n_vars, scratch.counts[v_b], scratch.extras[v_b], is_cat[v_b])
    return a, b


@helper
def _known_variance_n_lm(n, r_sum, target):
    """Known-variance leaf log marginal of n rows with residual sum ``r_sum``."""
    return leaf_log_marginal_normal_known_variance(n, r_sum, target.sigma2[0], target.prior.tau2)


@helper
def _known_variance_lm(tree, node, r_sum, target):
    return _known_variance_n_lm(tree.end[node] - tree.start[node], r_sum, target)


@helper
def _cell_scores_known_variance(tree, root, xt, is_cat, y, target, scratch, count):
    """Leaf terms of the subtree at ``root`` under its current (proposed) rules, without moving a
    row: one read-only pass evaluates all k rules of the subtree on each row and accumulates
    counts and residual sums per outcome code (2^k cells); each cell then goes down the new
    subtree to its leaf. Known-variance normal leaves (BART) only.

    Returns (status, sum of leaf log marginals): status 1 scored, 0 the new subtree has a leaf
    with fewer than ``min_leaf_size`` rows (prior zero; then no internal node has fewer either),
    -1 more than ``MAX_CELL_RULES`` rules (not scored).
    """
    nodes = scratch.nodes
    k = 0
    for i in range(count):
        node = nodes[i]
        if tree.var[node] >= 0:
            if k == MAX_CELL_RULES:
                return -1, 0.0  # the row moves of the general path are cheaper than 2^k cells
            scratch.node_bit[node] = k
            scratch.rule_var[k] = tree.var[node]
            scratch.rule_cut[k] = tree.cut[node]
            k += 1
        else:
            scratch.leaf_n[node] = 0
            scratch.leaf_sum[node] = 0.0
    n_cells = 1 << k
    perm = tree.perm
    start = tree.start[root]
    end = tree.end[root]
    # Register accumulators (branch-free): a per-cell array would chain every row's update to
    # the previous row's through memory, and consecutive rows mostly share a cell. One rule gets
    # its own loop: running it through the two-rule loop with the second rule switched off made
    # the whole n = 100k cgm sweep 30% slower (72 -> 94 ms).
    v0 = scratch.rule_var[0]
    c0 = scratch.rule_cut[0]
    cat0 = is_cat[v0]
    if k == 1:
        n1 = 0
        s1 = 0.0
        total = 0.0
        for i in range(start, end):
            r = perm[i]
            g = 1 if goes_left(xt[v0, r], c0, cat0) else 0
            n1 += g
            s1 += g * y[r]
            total += y[r]
        scratch.cell_n[0] = (end - start) - n1
        scratch.cell_sum[0] = total - s1
        scratch.cell_n[1] = n1
        scratch.cell_sum[1] = s1
    else:
        v1 = scratch.rule_var[1]
        c1 = scratch.rule_cut[1]
        cat1 = is_cat[v1]
        n1 = 0
        n2 = 0
        n3 = 0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        total = 0.0
        for i in range(start, end):
            r = perm[i]
            g0 = 1 if goes_left(xt[v0, r], c0, cat0) else 0
            g1 = 1 if goes_left(xt[v1, r], c1, cat1) else 0
            yr = y[r]
            both = g0 * g1
            n1 += g0 - both
            n2 += g1 - both
            n3 += both
            s1 += (g0 - both) * yr
            s2 += (g1 - both) * yr
            s3 += both * yr
            total += yr
        scratch.cell_n[0] = (end - start) - n1 - n2 - n3
        scratch.cell_sum[0] = total - s1 - s2 - s3
        scratch.cell_n[1] = n1
        scratch.cell_sum[1] = s1
        scratch.cell_n[2] = n2
        scratch.cell_sum[2] = s2
        scratch.cell_n[3] = n3
        scratch.cell_sum[3] = s3
    for c in range(n_cells):
        if scratch.cell_n[c] == 0:
            continue
        node = root
        while tree.var[node] >= 0:
            if (c >> scratch.node_bit[node]) & 1:
                node = tree.left[node]
            else:
                node = tree.right[node]
        scratch.leaf_n[node] += scratch.cell_n[c]
        scratch.leaf_sum[node] += scratch.cell_sum[c]
    m = target.prior.min_leaf
    lm = 0.0
    for i in range(count):
        node = nodes[i]
        if tree.var[node] >= 0:
            continue
        if scratch.leaf_n[node] < m:
            return 0, 0.0
        lm += _known_variance_n_lm(scratch.leaf_n[node], scratch.leaf_sum[node], target)
    return 1, lm


@helper(fastmath={"reassoc"})
def _leaf_left_basis_sums(leaf_of, node, codes, cut, is_cat, y, basis):
    """Rows i with ``leaf_of[i] == node``: over those rule ``cut`` sends left, sum w b y and sum w b^2, and
    over all of them sum w b^2 (``basis`` rows 1 and 2, ``records.BasisTarget``); one branch-free pass,
    reassociated as ``tree.leaf_left_count_sum`` (for a bound with a margin only)."""
    c_left = 0.0
    a_left = 0.0
    a_all = 0.0
    wb = basis[1]
    wbb = basis[2]
    for i in range(y.shape[0]):
        here = leaf_of[i] == node
        go = here & goes_left(codes[i], cut, is_cat)
        c_left += wb[i] * y[i] if go else 0.0
        a_left += wbb[i] if go else 0.0
        a_all += wbb[i] if here else 0.0
    return c_left, a_left, a_all


@helper
def propose_grow(rng, tree, data, target, move_probs, fstate, n_total, scratch, leaf_of, model):
    """Propose a grow; the tree is modified. Returns ``(log r, node, log u)``: node -1 when no
    grow was possible or the bound below rejected it (tree unchanged), ``log u`` the log uniform
    of the MH test when the bound drew it, else NaN (the caller draws it).

    The caller keeps the split on acceptance and calls ``undo_grow(tree, node, target, scratch)``
    otherwise.

    ``leaf_of`` is the tree's row-to-leaf map when the caller keeps one current (BART), else
    empty; ``model`` is the chain's ``model_tag``. With the map, when the leaf terms are
    functions of (rows, residual sum) (BART's known-variance leaves with the likelihood on) and
    the leaf holds at least 1 / ``SCAN_SHARE`` of the rows, one sequential pass over the map
    (``leaf_left_count_sum``) gives the children's counts and residual sums, hence log r but for
    the children's factors ``1 - p_SPLIT*``, which lie in (0, 1]: taking them as 1 bounds log r
    from above. The uniform is drawn there (the same random number the caller would draw next),
    and a proposal it rejects against the bound is rejected without touching the leaf's row
    segment: no copy, partition, child sums or restore, which cost a read of the tree's row
    permutation from far caches (issue 11, section 2). The tree is then left as ``undo_grow``
    leaves it, down to the order of the free node slots, so the chain is the same.
    """
    xt, is_cat, nbins, y, ycls = data.xt, data.is_cat, data.nbins, data.y, data.ycls
    node, n_leaves = _pick_node(rng, tree, 0)
    m = target.prior.min_leaf
    v, cut = sample_rule_s(rng, data, tree.perm, tree.start[node], tree.end[node], m, scratch, target.prior.na_split)
    if v < 0:
        return -np.inf, -1, np.nan
    n_internal = tree.meta[M_N_INTERNAL]
    par = tree.parent[node]
    parent_was_nog = False
    if par >= 0:
        sib = tree.right[par] if tree.left[par] == node else tree.left[par]
        parent_was_nog = tree.var[sib] == LEAF
    n_nog_before = count_nog(tree)
    heat = target.prior.prior_heat
    log_rule = 0.0
    if heat != 0.0:
        log_rule, _ = _rule_log_probs(tree, node, v, v, is_cat, nbins, target, scratch)
    n_nog_after = n_nog_before + 1 - (1 if parent_was_nog else 0)
    log_q = (
        math.log(move_probs[1] / move_normaliser(move_probs, n_internal + 1))
        - math.log(n_nog_after)
        - math.log(move_probs[0] / move_normaliser(move_probs, n_internal))
        + math.log(n_leaves)
    )
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    s = tree.start[node]
    e = tree.end[node]
    log_u = np.nan
    if (len(model) == MODEL_NORMAL_KNOWN_VARIANCE and target.prior.likelihood and leaf_of.shape[0] == y.shape[0]
            and (e - s) * SCAN_SHARE >= y.shape[0] and tree.meta[M_N_FREE] >= 2 and heat <= 1.0):
        n_l, b_l = leaf_left_count_sum(leaf_of, node, xt[v], cut, is_cat[v], y)
        b_r = tree.b[node] - b_l
        lm_l = _known_variance_n_lm(n_l, b_l, target)
        lm_r = _known_variance_n_lm(e - s - n_l, b_r, target)
        log_r_max = _grow_log_r(math.log(ps) - math.log1p(-ps), log_q, log_rule, lm_l, lm_r, b_l, b_r, tree, node,
                                fstate, n_total, target, model)
        log_u = math.log(rng.random())
        # The margin covers rounding (the sums here run in another order), relative to the
        # magnitudes that enter the ratio; within it the exact log r decides.
        if log_u > log_r_max + 1e-7 * (1.0 + abs(log_r_max) + abs(lm_l) + abs(lm_r) + abs(tree.lm[node])):
            _as_if_split_undone(tree, node, cut, target)
            return -np.inf, -1, log_u
    elif (len(model) == MODEL_BASIS_NORMAL and target.prior.likelihood and leaf_of.shape[0] == y.shape[0]
            and (e - s) * SCAN_SHARE >= y.shape[0] and tree.meta[M_N_FREE] >= 2 and heat <= 1.0):
        # The same bound for basis leaves (``basis.py``): one pass gives the left child's c and A and the
        # leaf's A (not cached); the right child's c is the leaf's cached c minus the left's.
        c_l, a_l, a_all = _leaf_left_basis_sums(leaf_of, node, xt[v], cut, is_cat[v], y, target.basis)
        c_r = tree.b[node] - c_l
        lm_l = leaf_log_marginal_basis(a_l, c_l, target.sigma2[0], target.tau2[0])
        lm_r = leaf_log_marginal_basis(a_all - a_l, c_r, target.sigma2[0], target.tau2[0])
        log_r_max = _grow_log_r(math.log(ps) - math.log1p(-ps), log_q, log_rule, lm_l, lm_r, c_l, c_r, tree, node,
                                fstate, n_total, target, model)
        log_u = math.log(rng.random())
        if log_u > log_r_max + 1e-7 * (1.0 + abs(log_r_max) + abs(lm_l) + abs(lm_r) + abs(tree.lm[node])):
            _as_if_split_undone(tree, node, cut, target)
            return -np.inf, -1, log_u
    # Keep the leaf's row order so that undo_grow leaves the segment exactly as it was.
    for i in range(s, e):
        scratch.saved_perm[i] = tree.perm[i]
    lc, rc = split_leaf(tree, xt, is_cat, node, v, cut, scratch.part_buf)
    if lc < 0:
        return -np.inf, -1, np.nan
    tree.lp[lc] = _leaf_split_log_one_minus(tree, lc, data, target, scratch)
    tree.lp[rc] = _leaf_split_log_one_minus(tree, rc, data, target, scratch)
    log_prior = math.log(ps) + tree.lp[lc] + tree.lp[rc] - math.log1p(-ps)
    lm_l, b_l = leaf_terms(tree, lc, y, ycls, target, scratch.class_counts, model)
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE and target.prior.likelihood:
        # The children's residual sums add up to the parent's: skip a pass over the right rows.
        b_r = tree.b[node] - b_l
        lm_r = _known_variance_lm(tree, rc, b_r, target)
    else:
        lm_r, b_r = leaf_terms(tree, rc, y, ycls, target, scratch.class_counts, model)
    tree.lm[lc] = lm_l
    tree.b[lc] = b_l
    tree.lm[rc] = lm_r
    tree.b[rc] = b_r
    log_r = _grow_log_r(log_prior, log_q, log_rule, lm_l, lm_r, b_l, b_r, tree, node, fstate, n_total, target, model)
    return log_r, node, log_u


@helper(inline=True)
def _grow_log_r(log_prior, log_q, log_rule, lm_l, lm_r, b_l, b_r, tree, node, fstate, n_total, target, model):
    """log r of a grow at ``node`` from its parts (``log_prior``: log p_SPLIT - log(1 - p_SPLIT)
    at the node plus the children's log(1 - p_SPLIT*))."""
    heat = target.prior.prior_heat
    b_new = fstate[F_B_SUM] - tree.b[node] + b_l + b_r
    d_global = global_term(b_new, n_total, target, model) - global_term(fstate[F_B_SUM], n_total, target, model)
    d_loglik = (lm_l + lm_r - tree.lm[node]) + d_global
    return (1.0 - heat) * log_prior - heat * log_rule + log_q + target.prior.inv_temp * d_loglik


@helper(inline=True)
def _as_if_split_undone(tree, node, cut, target):
    """The traces a split of ``node`` and ``undo_grow`` leave on a tree: the node keeps the
    rule's cut, and the top two free slots trade places (popped left, right; pushed back left,
    right)."""
    nf = tree.meta[M_N_FREE]
    top = tree.free[nf - 1]
    tree.free[nf - 1] = tree.free[nf - 2]
    tree.free[nf - 2] = top
    tree.cut[node] = cut
    tree.lp[node] = math.log1p(-p_split(target.prior.alpha, target.prior.beta, tree.depth[node]))


@helper
def undo_grow(tree, node, target, scratch):
    """Collapse a rejected grow; the node is a leaf with an available rule again, its rows in
    their order before the grow."""
    collapse_node(tree, node)
    for i in range(tree.start[node], tree.end[node]):
        tree.perm[i] = scratch.saved_perm[i]
    tree.lp[node] = math.log1p(-p_split(target.prior.alpha, target.prior.beta, tree.depth[node]))


@helper
def accept_grow(tree, node, fstate):
    """Update the running leaf-term sums after an accepted grow at ``node``."""
    lc = tree.left[node]
    rc = tree.right[node]
    fstate[F_LM_SUM] += tree.lm[lc] + tree.lm[rc] - tree.lm[node]
    fstate[F_B_SUM] += tree.b[lc] + tree.b[rc] - tree.b[node]


@helper
def propose_prune(rng, tree, data, target, move_probs, fstate, n_total, scratch, model):
    """Propose pruning a uniformly chosen nog node. Returns (log r, node); tree unchanged.

    The node's would-be leaf terms are left in ``scratch.saved_lm[0]``, ``scratch.saved_b[0]``.
    """
    is_cat, nbins, y, ycls = data.is_cat, data.nbins, data.y, data.ycls
    node, n_nog = _pick_node(rng, tree, 1)
    if node < 0:
        return -np.inf, -1
    n_internal = tree.meta[M_N_INTERNAL]
    n_leaves = tree.meta[M_N_LEAVES]
    lc = tree.left[node]
    rc = tree.right[node]
    ps = p_split(target.prior.alpha, target.prior.beta, tree.depth[node])
    log_prior = (
        math.log1p(-ps)
        - math.log(ps)
        - _leaf_split_log_one_minus(tree, lc, data, target, scratch)
        - _leaf_split_log_one_minus(tree, rc, data, target, scratch)
    )
    log_q = (
        math.log(move_probs[0] / move_normaliser(move_probs, n_internal - 1))
        - math.log(n_leaves - 1)
        - math.log(move_probs[1] / move_normaliser(move_probs, n_internal))
        + math.log(n_nog)
    )
    heat = target.prior.prior_heat
    if heat != 0.0:
        v = tree.var[node]
        log_rule, _ = _rule_log_probs(tree, node, v, v, is_cat, nbins, target, scratch)
        log_prior = (1.0 - heat) * log_prior + heat * log_rule
    # Leaf terms of the merged node: the node's segment is the union of its children's.
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE and target.prior.likelihood:
        b_p = tree.b[lc] + tree.b[rc]
        lm_p = _known_variance_lm(tree, node, b_p, target)
    else:
        saved_var = tree.var[node]
        tree.var[node] = LEAF
        lm_p, b_p = leaf_terms(tree, node, y, ycls, target, scratch.class_counts, model)
        tree.var[node] = saved_var
    scratch.saved_lm[0] = lm_p
    scratch.saved_b[0] = b_p
    b_new = fstate[F_B_SUM] - tree.b[lc] - tree.b[rc] + b_p
    d_global = global_term(b_new, n_total, target, model) - global_term(fstate[F_B_SUM], n_total, target, model)
    d_loglik = (lm_p - tree.lm[lc] - tree.lm[rc]) + d_global
    return log_prior + log_q + target.prior.inv_temp * d_loglik, node


@helper
def accept_prune(tree, node, fstate, scratch, target):
    """Collapse ``node`` after an accepted prune and update the running sums."""
    lc = tree.left[node]
    rc = tree.right[node]
    fstate[F_LM_SUM] += scratch.saved_lm[0] - tree.lm[lc] - tree.lm[rc]
    fstate[F_B_SUM] += scratch.saved_b[0] - tree.b[lc] - tree.b[rc]
    merge_sorted_halves(tree.perm, tree.start[node], tree.end[lc], tree.end[node], scratch.part_buf)
    collapse_node(tree, node)
    tree.lm[node] = scratch.saved_lm[0]
    tree.b[node] = scratch.saved_b[0]
    # The old rule is available at the node, so it is a splittable leaf.
    tree.lp[node] = math.log1p(-p_split(target.prior.alpha, target.prior.beta, tree.depth[node]))


@helper
def _save_subtree(tree, scratch, count):
    """Save the cached terms, segments and rows of the subtree listed in ``scratch.nodes``."""
    root = scratch.nodes[0]
    for i in range(tree.start[root], tree.end[root]):
        scratch.saved_perm[i] = tree.perm[i]
    for i in range(count):
        node = scratch.nodes[i]
        scratch.saved_start[i] = tree.start[node]
        scratch.saved_end[i] = tree.end[node]
        scratch.saved_lm[i] = tree.lm[node]
        scratch.saved_b[i] = tree.b[node]
        scratch.saved_lp[i] = tree.lp[node]


@helper
def _restore_subtree(tree, scratch, count):
    """Undo a rejected change or swap: rows, segments and cached terms of the subtree."""
    root = scratch.nodes[0]
    for i in range(tree.start[root], tree.end[root]):
        tree.perm[i] = scratch.saved_perm[i]
    for i in range(count):
        node = scratch.nodes[i]
        tree.start[node] = scratch.saved_start[i]
        tree.end[node] = scratch.saved_end[i]
        tree.lm[node] = scratch.saved_lm[i]
        tree.b[node] = scratch.saved_b[i]
        tree.lp[node] = scratch.saved_lp[i]


@helper
def _prior_upper_bound(tree, nodes, count, target):
    """An upper bound of ``subtree_log_prior`` over ``nodes[:count]`` that needs no rows: each
    internal node contributes log p_SPLIT(depth) (its p_RULE <= 1), each leaf at most log 1."""
    total = 0.0
    for i in range(count):
        node = nodes[i]
        if tree.var[node] != LEAF:
            total += math.log(p_split(target.prior.alpha, target.prior.beta, tree.depth[node]))
    return total


@helper
def _log_r_upper_bound(tree, nodes, count, target, old_prior, d_loglik):
    """log r of a change/swap with the new subtree prior at ``_prior_upper_bound``: a proposal
    whose MH uniform exceeds it is rejected without the prior's rule counts."""
    return ((1.0 - target.prior.prior_heat) * (_prior_upper_bound(tree, nodes, count, target) - old_prior)
            + target.prior.inv_temp * d_loglik)


@helper
def _keep_rewired(tree, fstate, root, d_lm, d_b, xt, is_cat, m, scratch):
    """Keep an accepted rule change below ``root`` scored by ``_rewire_and_score``: the forest sums
    move by the change of the leaves' terms, and the subtree is re-split from sorted rows so every
    leaf's rows are sorted again (same row sets, same cached leaf terms)."""
    fstate[F_LM_SUM] += d_lm
    fstate[F_B_SUM] += d_b
    sort_segment(tree.perm, tree.start[root], tree.end[root], scratch.row_flag, scratch.part_buf)
    repartition_subtree(tree, xt, is_cat, root, m, scratch.stack, scratch.part_buf)


@helper
def _rewire_and_score(tree, root, data, target, fstate, n_total, scratch, count, first,
                      old_prior, old_lm, old_b, log_u):
    """After rules in the subtree at ``root`` changed: re-partition and score.

    The prior is summed over ``scratch.nodes[first:count]``. Returns (log r, new leaf-term sums,
    decided) where log r is the log prior ratio plus the tempered log likelihood ratio, or -inf
    when the new tree has prior zero.

    The likelihood is scored first. When ``log_u`` (the log uniform of the MH test) already
    exceeds the ratio with the new prior replaced by its upper bound, the proposal is rejected
    without the prior's per-node rule counts (``decided`` True, log r then only an upper bound):
    the MH decision is the same, and most proposals of large nodes end here. ``log_u = -inf``
    forces the full ratio.
    """
    xt, is_cat, y, ycls = data.xt, data.is_cat, data.y, data.ycls
    m = target.prior.min_leaf
    if not repartition_subtree(tree, xt, is_cat, root, m, scratch.stack, scratch.part_buf):
        return -np.inf, 0.0, 0.0, True
    refresh_leaf_terms(tree, scratch.nodes, count, y, ycls, target, scratch.class_counts, scratch.model)
    new_lm, new_b = sum_leaf_terms(tree, scratch.nodes, count)
    b_all = fstate[F_B_SUM] - old_b + new_b
    d_loglik = ((new_lm - old_lm) + global_term(b_all, n_total, target, scratch.model)
                - global_term(fstate[F_B_SUM], n_total, target, scratch.model))
    bound = _log_r_upper_bound(tree, scratch.nodes[first:], count - first, target, old_prior, d_loglik)
    if log_u >= bound:
        return bound, new_lm, new_b, True
    new_prior = subtree_log_prior(
        tree, scratch.nodes[first:], count - first, data, target, scratch,
    )
    if new_prior == -np.inf:
        return -np.inf, 0.0, 0.0, True
    prior = target.prior
    return (1.0 - prior.prior_heat) * (new_prior - old_prior) + prior.inv_temp * d_loglik, new_lm, new_b, False


@helper
def _put_rules(tree, move, root, root_var, root_cut, child, other, child_var, child_cut, both):
    """Set the rules a change or swap touches: the root's and, for a swap, the child's (and the
    other child's when both children carried the child's rule)."""
    tree.var[root] = root_var
    tree.cut[root] = root_cut
    if move == MOVE_SWAP:
        tree.var[child] = child_var
        tree.cut[child] = child_cut
        if both:
            tree.var[other] = child_var
            tree.cut[other] = child_cut


@helper
def change_or_swap(rng, tree, data, target, fstate, n_total, scratch, move, model,
                   force_accept=False):
    """Run one change or swap MH step in place. Returns (accepted, proposal valid, log r).

    ``model`` is the chain's ``model_tag`` (``scratch.model``).

    ``force_accept`` keeps any valid proposal whatever its ratio (tests read the ratio).
    """
    xt, is_cat, nbins, y = data.xt, data.is_cat, data.nbins, data.y
    m = target.prior.min_leaf
    child = -1
    other = -1
    if move == MOVE_CHANGE:
        root, _ = _pick_node(rng, tree, 2)
    else:
        child, _ = _pick_node(rng, tree, 3)
        if child < 0:
            return False, False, -np.inf
        root = tree.parent[child]
        other = tree.right[root] if tree.left[root] == child else tree.left[root]
    if root < 0:
        return False, False, -np.inf
    count = subtree_nodes(tree, root, scratch.nodes, scratch.stack)
    # Prior of the subtree, leaving out the root's own factor for a change: its p_SPLIT is
    # unchanged (same rows) and its p_RULE cancels against the proposal (rule drawn from p_RULE).
    first = 1 if move == MOVE_CHANGE else 0
    old_prior = cached_subtree_log_prior(
        tree, scratch.nodes[first:], count - first, data, target, scratch,
    )
    old_lm, old_b = sum_leaf_terms(tree, scratch.nodes, count)
    old_var = tree.var[root]
    old_cut = tree.cut[root]
    log_k = 0.0
    if move == MOVE_CHANGE:
        v, cut = sample_rule_s(rng, data, tree.perm, tree.start[root], tree.end[root], m, scratch,
                               target.prior.na_split)
        c_var = 0
        c_cut = np.int64(0)
        both = False
        if target.prior.prior_heat != 0.0 and v >= 0 and v != old_var:
            # The root's p_RULE no longer cancels against the proposal (module docstring).
            lr_new, lr_old = _rule_log_probs(tree, root, v, old_var, is_cat, nbins, target, scratch)
            log_k = -target.prior.prior_heat * (lr_new - lr_old)
        _put_rules(tree, move, root, v, cut, child, other, c_var, c_cut, both)
    else:
        c_var = tree.var[child]
        c_cut = tree.cut[child]
        both = tree.var[other] == c_var and tree.cut[other] == c_cut
        _put_rules(tree, move, root, c_var, c_cut, child, other, old_var, old_cut, both)
        # k_fwd: choices of pair giving T'; k_rev: the same count in T' (children equal rules).
        both_after = tree.var[other] == tree.var[child] and tree.cut[other] == tree.cut[child]
        log_k = math.log(2.0 if both_after else 1.0) - math.log(2.0 if both else 1.0)
    # The MH uniform is drawn before scoring so that _rewire_and_score can stop early; with
    # force_accept (tests read the exact ratio) it never stops early.
    log_u = -np.inf if force_accept else math.log(rng.random())
    if len(model) == MODEL_NORMAL_KNOWN_VARIANCE and target.prior.likelihood:
        # BART: score the proposal's likelihood from rule-outcome cells (one read-only pass) and
        # reject it on the prior's upper bound (see _rewire_and_score) before moving any row;
        # most proposals end here.
        status, new_lm = _cell_scores_known_variance(tree, root, xt, is_cat, y, target, scratch, count)
        if status == 0:
            _put_rules(tree, move, root, old_var, old_cut, child, other, c_var, c_cut, both)
            return False, False, -np.inf
        if status == 1:
            bound = _log_r_upper_bound(tree, scratch.nodes[first:], count - first, target, old_prior,
                                       new_lm - old_lm) + log_k
            if log_u >= bound:
                _put_rules(tree, move, root, old_var, old_cut, child, other, c_var, c_cut, both)
                return False, True, bound
    _save_subtree(tree, scratch, count)
    log_r, new_lm, new_b, early = _rewire_and_score(
        tree, root, data, target, fstate, n_total, scratch,
        count, first, old_prior, old_lm, old_b, log_u - log_k,
    )
    log_r += log_k
    valid = log_r > -np.inf
    if valid and not early and (force_accept or log_u < log_r):
        if move == MOVE_CHANGE:
            tree.lp[root] = np.nan  # its rule changed; descendants were refreshed when scored
        _keep_rewired(tree, fstate, root, new_lm - old_lm, new_b - old_b, xt, is_cat, m, scratch)
        return True, True, log_r
    # Reject: restore the rules, the partition and the cached leaf terms.
    _put_rules(tree, move, root, old_var, old_cut, child, other, c_var, c_cut, both)
    _restore_subtree(tree, scratch, count)
    return False, valid, log_r
