"""Pratola's (2016) ROTATE and PERTURB tree moves as exact Metropolis-Hastings kernels under the
prior of ``tree.py`` (spec ``tree_moves.md`` sections 1.3 and 1.6, with its corrections).

ROTATE picks a non-root internal node N uniformly (``|R(T)|`` = internal nodes - 1); P is its
parent, S its sibling, A and B its children.

* Same variable (v_N = v_P, numeric): the classical rotation, e.g. for N the left child
  ``(v,cP)[(v,cN)[A,B], S] -> (v,cN)[A, (v,cP)[B,S]]``; the partition is unchanged.
* Different variables: lift N's rule above P's and split S on it (``S_L = SplitL(S; vN,cN)``
  keeps the part of S compatible with ``x_vN <= cN``), giving ``(vN,cN)[(vP,cP)[A,S_L],
  (vP,cP)[B,S_R]]`` (mirror when N is the right child); each ``(vP,cP)[X,Y]`` is replaced by a
  uniform draw from the merge set M(X,Y; vP,cP) = {Z : SplitL(Z) = X, SplitR(Z) = Y} (the
  eight cases of the spec; we keep the top option with probability 1/|M| in every case, which
  fixes OpenBT's 1/(1+n1+n2) in the shared-rule case).

MH ratio (spec 1.6 e, with k_fwd counted on both sides, fixing OpenBT's factor-2 bias)::

    log r = [log pi(T'_P) - log pi(T_P)] + [lm(T') - lm(T)]
            + log(k_rev / |R(T')|) - log(k_fwd / |R(T)|) + log(m1 m2) - log(s1 s2)

where m1, m2 are the sizes of the two merge sets drawn from, s1 = |M(S_L,S_R; vN,cN)|,
s2 = |M(A,B; vN,cN)| those of the reverse move, k_fwd = 2 if S carries N's rule (rotating at S
gives the same tree) and k_rev the number of children of the new top carrying P's rule (0: the
move cannot be reversed, rejected). The prior is ``tree.py``'s own (p_SPLIT with the
splittability of each node, p_RULE uniform over the node's available rules), summed over the
rebuilt subtree, not OpenBT's descendant-range prior. A tree with a node whose child gets fewer
than ``min_leaf_size`` rows (which includes every logically redundant rule) has prior 0.

Rotations are offered when P's and N's rules are numeric: the split/merge algebra above needs
an ordered cut. A rotation at a factor rule is the identity (the draw is spent, nothing
changes); since a rotation never creates or removes a factor rule at P's or N's position this
keeps the kernel reversible. Factor rules elsewhere in the subtree are carried along as rules
of "another variable".

Why no factor rotation: neither the spec (1.6) nor CT-MCMC Appendix B defines one. Appendix B
takes the rotation from Pratola (2016) as given and only adds its rate; the spec's rotation
(read from OpenBT, whose rules are all ordered cuts) is built on SplitL(S; v, c), which drops
the nodes (v, c' >= c), and on a merge set M(X, Y; v, c) whose cases 3-7 use that a node
(v, c1) with c1 < c lies wholly on one side of c, so each v-node of X or Y is the restriction of
exactly one node of the merged tree. For a factor rule (v, A) the restriction itself is
well defined (a node (v, B) becomes its left child in {x_v in A} if A is inside B, its right
child if A and B are disjoint, else stays), but the merge sets are not the spec's: a v-node of
X acting as B1 inside A can come from any merged node (v, B1 + C), C any set of levels outside A,
which is itself restricted in Y (kept, or replaced by either child), so the enumeration of
M(X, Y; v, A), its counts (m1, m2, s1, s2 of the MH ratio) and the reverse counts k_rev would
all need a new derivation (with the stored masks' orientation and absent-level bits counted),
which the spec does not give. Exchanging P's and N's rules in place
((vP,AP)[(vN,AN)[A,B],S] -> (vN,AN)[(vP,AP)[A,B],S]) is well defined for factor rules, but it is
CGM's SWAP move (``cart_moves``, ``moves=("swap", ...)`` of ``cgm``, factor rules included), not
a rotation: it moves the rows reaching S and B, where the spec's rotation keeps every region
by duplicating S into both branches. So a factor rule is never rotated: the cgm ``"rotate"``
move and the ctmc rotate events leave the tree unchanged when they pick one.

PERTURB picks an internal node uniformly and proposes a nearby rule on the same variable: a
numeric cut ``c' ~ U{a..b}``, ``[a, b] = [c - h, c + h]`` clipped to the cuts available at the
node, ``h = max(1, floor(width * count / 2))`` (OpenBT's window with ``pertalpha = width``,
not adapted); a factor rule flips the side of one level drawn uniformly. The node's own prior
factor does not change (same rows, same variable), so
``log r = log(b-a+1) - log(b'-a'+1) + Delta log pi(descendants) + Delta lm`` (spec 1.3 with the
descendants' prior term the code omits).

CHANGE-OF-VARIABLE (CHGV, spec 1.4, Pratola 2016): at the chosen node, a numeric rule (v, c) is
replaced, with probability ``chv[0]`` (the ``change_of_variable`` option) instead of the PERTURB
above, by a rule on a variable v' correlated with v. ``chv[2:]`` holds P, the p x p Spearman
correlation matrix of the training predictors (row-major; ``change_of_variable_table``). Weights
from row v: w_v = 1, w_i = |P[v, i]| for every numeric i != v with an available rule at the node
(``var_rule_count`` of the node's rows, our range convention: availability depends on the node's
rows only, so it is the same before and after the move, and a descendant that a new rule leaves
without rows gives the tree prior 0, rejected as every other move), w_i = 0 for a factor. Draw v'
with probability w_v' / sum w, swap the node's children if P[v, v'] < 0 (so that a split on x1
becomes the equivalent split on a negatively correlated x3), draw the cut uniformly over the
n' = count(v') cuts available at the node. The reverse move draws v from row v' and c from the
n = count(v) cuts, so (spec 1.4 [derived], with the node's own prior term in Delta log pi)::

    log r = log q(v' -> v) - log q(v -> v') + log n' - log n
            + Delta log pi(subtree at the node) + Delta lm

where q(a -> b) = w_b / sum_i w_i from row a. The node's own p_RULE factor 1 / (n_vars count)
cancels the cut proposal (same rows, so same n_vars), but is kept in Delta log pi so that DART's
rule prior (``rule_log_prob_s``) is scored as well. OpenBT's two slips (the missing cut-proposal
ratio, and ``getchgv``'s cumulative sum reading |w| of element 1 for element 0) are not repeated.
A mixture of the two pi-reversible kernels with a fixed probability is pi-reversible: the
choice depends only on whether the rule is numeric, which neither move changes. With
``chv[0] == 0`` no extra random number is drawn, so the draws equal those of plain PERTURB.

Sweep (``chv[1] > 0``, the ``perturb_sweep`` option): one perturb move visits every internal node
in turn (by slot index) with the step above, as OpenBT does once per iteration. Each step keeps
pi invariant and neither PERTURB nor CHGV changes which slots are internal nodes, so the sweep
(a fixed composition of pi-invariant kernels) keeps pi invariant; it is not reversible, which an
MH chain does not need, nor a ctmc event (the process stays stationary for pi when
pi K = pi; ``ctmc.py``).

Trees are rebuilt from preorder sequences of (var, cut) (``LEAF`` for a leaf) held in small
arrays allocated per proposal.

Imports numpy, numba and the kernels of this package only.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np

from .cart_moves import _keep_rewired, _pick_node, _restore_subtree, _rewire_and_score, _save_subtree
from .jit import helper
from .tree import (
    F_B_SUM,
    F_LM_SUM,
    FREE,
    LEAF,
    M_N_FREE,
    M_N_INTERNAL,
    M_N_LEAVES,
    M_SPAN,
    alloc_node,
    cached_subtree_log_prior,
    copy_into,
    global_term,
    prior_rule_counts,
    refresh_leaf_terms,
    release_node,
    repartition_subtree,
    sort_segment,
    subtree_log_prior,
    subtree_nodes,
    sum_leaf_terms,
    var_rule_count,
)

#: OpenBT's initial ``pertalpha`` (R default ``stepwpert``): the window's share of the cut range.
PERTURB_WIDTH = 0.1


# -- preorder sequences -----------------------------------------------------------------------------

class Seq(NamedTuple):
    """A preorder sequence of a subtree's rules: split variables (``LEAF`` at leaves) and cuts."""

    var: np.ndarray  # int64
    cut: np.ndarray  # int64


@helper
def seq_end(sv, i):
    """Index just past the subtree starting at ``i`` of a preorder sequence."""
    need = 1
    while need > 0:
        need += 1 if sv[i] >= 0 else -1
        i += 1
    return i


@helper
def _copy(sv, sc, i, ov, oc, pos):
    e = seq_end(sv, i)
    for j in range(i, e):
        ov[pos] = sv[j]
        oc[pos] = sc[j]
        pos += 1
    return pos


@helper
def split_side(sv, sc, i, v, c, left, ov, oc, pos, stack):
    """SplitL (``left``) or SplitR of the subtree at ``i`` on numeric rule (v, c), written at
    ``pos``; returns the end. SplitL replaces every node (v, c' >= c) by its left subtree (all
    of ``x_v <= c`` goes left there), SplitR every node (v, c' <= c) by its right subtree."""
    stack[0] = i
    top = 1
    while top > 0:
        top -= 1
        j = stack[top]
        if sv[j] < 0:
            ov[pos] = LEAF
            oc[pos] = 0
            pos += 1
            continue
        if sv[j] == v:
            if left and sc[j] >= c:
                stack[top] = j + 1
                top += 1
                continue
            if not left and sc[j] <= c:
                stack[top] = seq_end(sv, j + 1)
                top += 1
                continue
        ov[pos] = sv[j]
        oc[pos] = sc[j]
        pos += 1
        stack[top] = seq_end(sv, j + 1)
        top += 1
        stack[top] = j + 1
        top += 1
    return pos


@helper(refcounts=True)
def _ends(sv, start):
    """``seq_end`` of every position of the subtree starting at ``start`` (relative indexing)."""
    e = seq_end(sv, start)
    out = np.empty(e - start, dtype=np.int64)
    for i in range(start, e):
        out[i - start] = seq_end(sv, i)
    return out


@helper(refcounts=True)
def merge_table(xv, xc, x0, yv, yc, y0, v, c):
    """|M(X', Y'; v, c)| for every pair of subtrees X' of X (at ``x0``) and Y' of Y (at ``y0``):
    the trees Z with SplitL(Z; v, c) = X' and SplitR(Z; v, c) = Y' (spec 1.6 b). Entry [i, j]
    is the pair at ``x0 + i``, ``y0 + j``; filled from the ends backwards, since every case
    refers to pairs of later positions. (Numba cannot cache a recursive kernel, so the eight
    cases are a table, not a recursion.) Returns (table, ends of X, ends of Y)."""
    ex = _ends(xv, x0)
    ey = _ends(yv, y0)
    nx = ex.shape[0]
    ny = ey.shape[0]
    t = np.zeros((nx, ny))
    for i in range(nx - 1, -1, -1):
        xi = x0 + i
        x_leaf = xv[xi] < 0
        for j in range(ny - 1, -1, -1):
            yi = y0 + j
            y_leaf = yv[yi] < 0
            if x_leaf and y_leaf:
                t[i, j] = 2.0  # a leaf, or (v, c)[leaf, leaf]
                continue
            if not x_leaf and not y_leaf and xv[xi] != v and xv[xi] == yv[yi] and xc[xi] == yc[yi]:
                # shared rule: (v, c)[X, Y] or the shared rule over merged children
                t[i, j] = 1.0 + t[i + 1, j + 1] * t[ex[i + 1] - x0, ey[j + 1] - y0]
                continue
            total = 1.0
            if not x_leaf and xv[xi] == v:  # (v, c1)[X.l, M(X.r, Y)]
                total += t[ex[i + 1] - x0, j]
            if not y_leaf and yv[yi] == v:  # (v, c2)[M(X, Y.l), Y.r]
                total += t[i, j + 1]
            t[i, j] = total
    return t, ex, ey


@helper(refcounts=True)
def merge_count(xv, xc, xi, yv, yc, yi, v, c):
    """|M(X, Y; v, c)| of the subtrees at ``xi`` and ``yi``."""
    t, _, _ = merge_table(xv, xc, xi, yv, yc, yi, v, c)
    return t[0, 0]


@helper(refcounts=True)
def merge_sample(rng, x, x0, y, y0, v, c, out, pos):
    """Write a uniform draw from M(X, Y; v, c) into ``out`` at ``pos`` (preorder); returns the end.
    X is the subtree of sequence ``x`` at ``x0``, Y that of ``y`` at ``y0`` (each a ``Seq``).

    At each pair the top option (v, c)[X', Y'] is kept with probability 1 / |M|, else a branch
    with probability proportional to its count; pending work is a stack of tasks (0: sample a
    pair, 1: copy a subtree of X, 2: copy a subtree of Y), so the output is written in preorder.
    """
    xv, xc, yv, yc, ov, oc = x.var, x.cut, y.var, y.cut, out.var, out.cut
    t, ex, ey = merge_table(xv, xc, x0, yv, yc, y0, v, c)
    cap = ex.shape[0] + ey.shape[0] + 4
    kind = np.empty(cap, dtype=np.int64)
    ta = np.empty(cap, dtype=np.int64)
    tb = np.empty(cap, dtype=np.int64)
    kind[0] = 0
    ta[0] = 0
    tb[0] = 0
    top = 1
    while top > 0:
        top -= 1
        k = kind[top]
        i = ta[top]
        j = tb[top]
        if k == 1:
            pos = _copy(xv, xc, x0 + i, ov, oc, pos)
            continue
        if k == 2:
            pos = _copy(yv, yc, y0 + j, ov, oc, pos)
            continue
        xi = x0 + i
        yi = y0 + j
        x_leaf = xv[xi] < 0
        y_leaf = yv[yi] < 0
        if x_leaf and y_leaf:
            if rng.random() < 0.5:
                ov[pos] = LEAF
                oc[pos] = 0
                pos += 1
            else:
                ov[pos] = v
                oc[pos] = c
                ov[pos + 1] = LEAF
                oc[pos + 1] = 0
                ov[pos + 2] = LEAF
                oc[pos + 2] = 0
                pos += 3
            continue
        u = rng.random() * t[i, j]
        if u < 1.0:  # the top option
            ov[pos] = v
            oc[pos] = c
            pos = _copy(xv, xc, xi, ov, oc, pos + 1)
            pos = _copy(yv, yc, yi, ov, oc, pos)
            continue
        u -= 1.0
        if not x_leaf and not y_leaf and xv[xi] != v and xv[xi] == yv[yi] and xc[xi] == yc[yi]:
            ov[pos] = xv[xi]
            oc[pos] = xc[xi]
            pos += 1
            kind[top] = 0  # right children, after the left ones
            ta[top] = ex[i + 1] - x0
            tb[top] = ey[j + 1] - y0
            kind[top + 1] = 0
            ta[top + 1] = i + 1
            tb[top + 1] = j + 1
            top += 2
            continue
        x_branch = not x_leaf and xv[xi] == v
        if x_branch and (u < t[ex[i + 1] - x0, j] or y_leaf or yv[yi] != v):
            ov[pos] = xv[xi]
            oc[pos] = xc[xi]
            pos += 1
            kind[top] = 0  # (v, c1)[X.l, M(X.r, Y)]
            ta[top] = ex[i + 1] - x0
            tb[top] = j
            kind[top + 1] = 1
            ta[top + 1] = i + 1
            tb[top + 1] = 0
            top += 2
            continue
        ov[pos] = yv[yi]
        oc[pos] = yc[yi]
        pos += 1
        kind[top] = 2  # (v, c2)[M(X, Y.l), Y.r]
        ta[top] = 0
        tb[top] = ey[j + 1] - y0
        kind[top + 1] = 0
        ta[top + 1] = i
        tb[top + 1] = j + 1
        top += 2
    return pos


@helper
def rotate_sequence(rng, sv, sc, n_left, ov, oc, work_v, work_c, stack):
    """The rotation of ``sv, sc`` (the subtree at P: P at 0, N its left child if ``n_left``)
    into ``ov, oc``. Returns ``(length, log q ratio without |R|, k_fwd, k_rev)``; ``k_rev = 0``
    when the result cannot be rotated back."""
    vp = sv[0]
    cp = sc[0]
    if n_left:
        ni = 1
        si = seq_end(sv, 1)
    else:
        si = 1
        ni = seq_end(sv, 1)
    vn = sv[ni]
    cn = sc[ni]
    ai = ni + 1
    bi = seq_end(sv, ai)
    if vn == vp:
        # classical rotation: the partition is unchanged, one way there and one way back
        ov[0] = vn
        oc[0] = cn
        if n_left:
            pos = _copy(sv, sc, ai, ov, oc, 1)
            ov[pos] = vp
            oc[pos] = cp
            pos = _copy(sv, sc, bi, ov, oc, pos + 1)
            pos = _copy(sv, sc, si, ov, oc, pos)
        else:
            ov[1] = vp
            oc[1] = cp
            pos = _copy(sv, sc, si, ov, oc, 2)
            pos = _copy(sv, sc, ai, ov, oc, pos)
            pos = _copy(sv, sc, bi, ov, oc, pos)
        return pos, 0.0, 1, 1
    # S_L then S_R in the work arrays
    sl = 0
    sr = split_side(sv, sc, si, vn, cn, True, work_v, work_c, 0, stack)
    split_side(sv, sc, si, vn, cn, False, work_v, work_c, sr, stack)
    ov[0] = vn
    oc[0] = cn
    if n_left:
        m1 = merge_count(sv, sc, ai, work_v, work_c, sl, vp, cp)
        m2 = merge_count(sv, sc, bi, work_v, work_c, sr, vp, cp)
        gl = 1
        gr = merge_sample(rng, Seq(sv, sc), ai, Seq(work_v, work_c), sl, vp, cp, Seq(ov, oc), gl)
        end = merge_sample(rng, Seq(sv, sc), bi, Seq(work_v, work_c), sr, vp, cp, Seq(ov, oc), gr)
    else:
        m1 = merge_count(work_v, work_c, sl, sv, sc, ai, vp, cp)
        m2 = merge_count(work_v, work_c, sr, sv, sc, bi, vp, cp)
        gl = 1
        gr = merge_sample(rng, Seq(work_v, work_c), sl, Seq(sv, sc), ai, vp, cp, Seq(ov, oc), gl)
        end = merge_sample(rng, Seq(work_v, work_c), sr, Seq(sv, sc), bi, vp, cp, Seq(ov, oc), gr)
    s1 = merge_count(work_v, work_c, sl, work_v, work_c, sr, vn, cn)
    s2 = merge_count(sv, sc, ai, sv, sc, bi, vn, cn)
    k_fwd = 2 if (sv[si] == vn and sc[si] == cn) else 1
    k_rev = 0
    if ov[gl] == vp and oc[gl] == cp:
        k_rev += 1
    if ov[gr] == vp and oc[gr] == cp:
        k_rev += 1
    return end, math.log(m1) + math.log(m2) - math.log(s1) - math.log(s2), k_fwd, k_rev


# -- rebuilding a subtree ---------------------------------------------------------------------------

@helper
def _build(tree, root, sv, sc, stack):
    """Give ``root`` (whose old descendants were released) the subtree of the sequence; returns
    False when the node capacity runs out (the caller restores the tree)."""
    stack[0] = root
    top = 1
    i = 0
    leaves = 0
    internal = 0
    while top > 0:
        top -= 1
        node = stack[top]
        tree.var[node] = sv[i]
        tree.cut[node] = sc[i]
        tree.lp[node] = np.nan
        i += 1
        if sv[i - 1] < 0:
            tree.left[node] = -1
            tree.right[node] = -1
            leaves += 1
            continue
        internal += 1
        lc = alloc_node(tree)
        rc = alloc_node(tree) if lc >= 0 else -1
        if rc < 0:
            if lc >= 0:
                tree.var[lc] = FREE
            tree.left[node] = -1
            tree.right[node] = -1
            return False, leaves, internal
        for child in (lc, rc):
            tree.var[child] = LEAF  # placeholder until its turn
            tree.parent[child] = node
            tree.depth[child] = tree.depth[node] + 1
        tree.left[node] = lc
        tree.right[node] = rc
        stack[top] = rc
        top += 1
        stack[top] = lc
        top += 1
    return True, leaves, internal


@helper
def _count_internal(sv, n):
    k = 0
    for i in range(n):
        if sv[i] >= 0:
            k += 1
    return k


@helper(refcounts=True)
def rotate_step(rng, tree, data, target, fstate, n_total, scratch, force_accept=False):
    """One ROTATE MH step in place. Returns (accepted, proposal valid, log r); the tree is
    unchanged unless accepted. ``force_accept`` keeps any valid proposal (tests read ratios)."""
    xt, is_cat, y, ycls = data.xt, data.is_cat, data.y, data.ycls
    n_int = tree.meta[M_N_INTERNAL]
    node_n, n_rot = _pick_node(rng, tree, 3)
    if node_n < 0:
        return False, False, -np.inf
    p_node = tree.parent[node_n]
    if is_cat[tree.var[node_n]] or is_cat[tree.var[p_node]]:
        return False, False, -np.inf
    nodes = scratch.nodes
    count = subtree_nodes(tree, p_node, nodes, scratch.stack)
    old_nodes = nodes[:count].copy()
    sv = np.empty(count, dtype=np.int64)
    sc = np.empty(count, dtype=np.int64)
    for i in range(count):
        sv[i] = tree.var[old_nodes[i]]
        sc[i] = tree.cut[old_nodes[i]]
    size = 2 * count + 8
    ov = np.empty(size, dtype=np.int64)
    oc = np.empty(size, dtype=np.int64)
    wv = np.empty(size, dtype=np.int64)
    wc = np.empty(size, dtype=np.int64)
    n_left = tree.left[p_node] == node_n
    length, log_merge, k_fwd, k_rev = rotate_sequence(rng, sv, sc, n_left, ov, oc, wv, wc, scratch.stack)
    log_u = -np.inf if force_accept else math.log(rng.random())
    if k_rev == 0:
        return False, False, -np.inf
    n_int_new = n_int - _count_internal(sv, count) + _count_internal(ov, length)
    log_q = math.log(k_rev) - math.log(n_int_new - 1) - math.log(k_fwd) + math.log(n_rot) + log_merge
    # the old subtree's terms, and everything needed to put it back
    old_prior = cached_subtree_log_prior(tree, old_nodes, count, data, target, scratch)
    old_lm, old_b = sum_leaf_terms(tree, old_nodes, count)
    s = tree.start[p_node]
    e = tree.end[p_node]
    saved_perm = tree.perm[s:e].copy()
    saved_free = tree.free.copy()
    saved_meta = tree.meta.copy()
    f_var = np.empty(count, dtype=np.int32)
    f_left = np.empty(count, dtype=np.int32)
    f_right = np.empty(count, dtype=np.int32)
    f_parent = np.empty(count, dtype=np.int32)
    f_depth = np.empty(count, dtype=np.int32)
    f_cut = np.empty(count, dtype=np.int64)
    f_start = np.empty(count, dtype=np.int64)
    f_end = np.empty(count, dtype=np.int64)
    f_lm = np.empty(count)
    f_b = np.empty(count)
    f_lp = np.empty(count)
    for i in range(count):
        nd = old_nodes[i]
        f_var[i] = tree.var[nd]
        f_left[i] = tree.left[nd]
        f_right[i] = tree.right[nd]
        f_parent[i] = tree.parent[nd]
        f_depth[i] = tree.depth[nd]
        f_cut[i] = tree.cut[nd]
        f_start[i] = tree.start[nd]
        f_end[i] = tree.end[nd]
        f_lm[i] = tree.lm[nd]
        f_b[i] = tree.b[nd]
        f_lp[i] = tree.lp[nd]
    for i in range(1, count):
        release_node(tree, old_nodes[i])
    nf_released = tree.meta[M_N_FREE]
    old_leaves = count - _count_internal(sv, count)
    old_internal = _count_internal(sv, count)
    ok, leaves, internal = _build(tree, p_node, ov, oc, scratch.stack)
    log_r = -np.inf
    new_lm = 0.0
    new_b = 0.0
    if ok:
        tree.meta[M_N_LEAVES] += leaves - old_leaves
        tree.meta[M_N_INTERNAL] += internal - old_internal
        m = target.prior.min_leaf
        new_count = subtree_nodes(tree, p_node, nodes, scratch.stack)
        if repartition_subtree(tree, xt, is_cat, p_node, m, scratch.stack, scratch.part_buf):
            refresh_leaf_terms(tree, nodes, new_count, y, ycls, target, scratch.class_counts, scratch.model)
            new_lm, new_b = sum_leaf_terms(tree, nodes, new_count)
            new_prior = subtree_log_prior(tree, nodes, new_count, data, target, scratch)
            if new_prior > -np.inf:
                b_all = fstate[F_B_SUM] - old_b + new_b
                d_loglik = ((new_lm - old_lm) + global_term(b_all, n_total, target, scratch.model)
                            - global_term(fstate[F_B_SUM], n_total, target, scratch.model))
                log_r = ((1.0 - target.prior.prior_heat) * (new_prior - old_prior) + target.prior.inv_temp * d_loglik
                         + log_q)
    valid = log_r > -np.inf
    if valid and (force_accept or log_u < log_r):
        fstate[F_LM_SUM] += new_lm - old_lm
        fstate[F_B_SUM] += new_b - old_b
        # re-split from sorted rows so every leaf's rows are sorted (same row sets, same caches)
        sort_segment(tree.perm, s, e, scratch.row_flag, scratch.part_buf)
        repartition_subtree(tree, xt, is_cat, p_node, target.prior.min_leaf, scratch.stack, scratch.part_buf)
        return True, True, log_r
    # reject: free the slots the build popped off the stack (the new nodes), then put the old
    # nodes, the free stack and the rows back as they were
    for k in range(tree.meta[M_N_FREE], nf_released):
        nd = tree.free[k]
        tree.var[nd] = FREE
        tree.left[nd] = -1
        tree.right[nd] = -1
    for i in range(count):
        nd = old_nodes[i]
        tree.var[nd] = f_var[i]
        tree.left[nd] = f_left[i]
        tree.right[nd] = f_right[i]
        tree.parent[nd] = f_parent[i]
        tree.depth[nd] = f_depth[i]
        tree.cut[nd] = f_cut[i]
        tree.start[nd] = f_start[i]
        tree.end[nd] = f_end[i]
        tree.lm[nd] = f_lm[i]
        tree.b[nd] = f_b[i]
        tree.lp[nd] = f_lp[i]
    copy_into(tree.free, saved_free)
    copy_into(tree.meta, saved_meta)
    copy_into(tree.perm[s:e], saved_perm)
    return False, valid, log_r


# -- perturb and change of variable ----------------------------------------------------------------

def spearman_matrix(codes: np.ndarray, is_categorical: np.ndarray, nbins: np.ndarray) -> np.ndarray:
    """The Spearman rank correlation matrix of the binned predictors (float64, p x p).

    Ranks are the average ranks of the bin codes (a bin code is monotone in the predictor, so this
    equals the Spearman matrix of the raw columns when every distinct value has its own bin; values
    sharing a bin count as ties). A factor column, and a column constant over the rows used, has
    correlation 0 with every other column; the diagonal is 1. A code ``>= nbins[v]`` is a missing
    value: a pair of columns uses the rows where both are observed (pairwise-complete).
    """
    codes = np.asarray(codes)
    p = codes.shape[0]
    out = np.eye(p)
    numeric = [v for v in range(p) if not is_categorical[v]]
    observed = {v: codes[v] < nbins[v] for v in numeric}

    def ranks(col: np.ndarray) -> np.ndarray:
        counts = np.bincount(col)
        below = np.cumsum(counts) - counts
        return below[col] + (counts[col] + 1) / 2.0  # average rank of tied codes

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        if a.shape[0] < 2:
            return 0.0
        a = ranks(a) - (a.shape[0] + 1) / 2.0
        b = ranks(b) - (b.shape[0] + 1) / 2.0
        den = math.sqrt(float(a @ a) * float(b @ b))
        return float(a @ b) / den if den > 0.0 else 0.0

    complete = [v for v in numeric if observed[v].all()]
    if len(complete) > 1:  # one matrix product for the columns without missing values
        n = codes.shape[1]
        r = np.stack([ranks(codes[v]) - (n + 1) / 2.0 for v in complete])
        norm = np.sqrt(np.einsum("ij,ij->i", r, r))
        live = norm > 0.0
        c = (r @ r.T) / np.where(live, norm, 1.0)[:, None] / np.where(live, norm, 1.0)[None, :]
        c[~live, :] = 0.0
        c[:, ~live] = 0.0
        idx = np.array(complete)
        out[np.ix_(idx, idx)] = c
    for a_pos, v in enumerate(numeric):
        for w in numeric[a_pos + 1:]:
            if v in complete and w in complete:
                continue
            both = observed[v] & observed[w]
            out[v, w] = out[w, v] = corr(codes[v][both], codes[w][both])
    np.fill_diagonal(out, 1.0)
    out = np.clip((out + out.T) / 2.0, -1.0, 1.0)  # exactly symmetric: q(v -> v') uses row v, its reverse row v'
    return out


_SPEARMAN_CACHE: dict = {}


def predictor_correlations(codes: np.ndarray, is_categorical: np.ndarray, nbins: np.ndarray) -> np.ndarray:
    """``spearman_matrix`` of ``codes``, computed once per codes array (the chains of a fit share
    their problem's array; the entry goes when the array does). Treat the result as read-only."""
    key = id(codes)
    hit = _SPEARMAN_CACHE.get(key)
    if hit is not None and hit[0]() is codes:
        return hit[1]
    mat = spearman_matrix(codes, is_categorical, nbins)
    try:
        ref = weakref.ref(codes, lambda _, k=key: _SPEARMAN_CACHE.pop(k, None))
    except TypeError:  # not weak-referenceable: no caching
        return mat
    _SPEARMAN_CACHE[key] = (ref, mat)
    return mat


def change_of_variable_table(codes: np.ndarray, is_categorical: np.ndarray, nbins: np.ndarray,
                             probability: float, sweep: bool = False) -> np.ndarray:
    """The kernels' ``chv`` argument of ``perturb_step``: ``[probability, sweep, P row-major]`` with
    P the predictors' Spearman matrix (``predictor_correlations``), or ``[0.0, sweep]`` (plain
    PERTURB, no matrix built) when ``probability`` is 0; ``sweep`` 1.0 makes a perturb move visit
    every internal node."""
    head = np.array([max(float(probability), 0.0), 1.0 if sweep else 0.0])
    if probability <= 0.0:
        return head
    mat = predictor_correlations(codes, is_categorical, nbins)
    return np.concatenate([head, mat.ravel()])


@helper
def _chv_weight(chv, p, v, i, is_cat, counts):
    """CHGV proposal weight of variable i from row v (see the module docstring)."""
    if i == v:
        return 1.0
    if is_cat[i] or counts[i] <= 0.0:
        return 0.0
    return abs(chv[2 + v * p + i])


@helper
def change_of_variable_step(rng, tree, data, target, fstate, n_total, scratch, chv, root, force_accept):
    """One CHGV MH step at internal node ``root`` (numeric rule). Returns (accepted, proposal
    valid, log r); the tree is unchanged unless accepted."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    m = target.prior.min_leaf
    p = xt.shape[0]
    v = tree.var[root]
    old_cut = tree.cut[root]
    prior_rule_counts(tree.perm, tree.start[root], tree.end[root], is_cat, nbins, m, scratch, False)
    counts = scratch.counts
    total = 0.0
    for i in range(p):
        total += _chv_weight(chv, p, v, i, is_cat, counts)
    u = rng.random() * total
    v_new = v
    acc = 0.0
    for i in range(p):
        w = _chv_weight(chv, p, v, i, is_cat, counts)
        if w > 0.0:
            v_new = i  # the last positive weight catches a u rounded up to the total
            acc += w
            if u < acc:
                break
    total_rev = 0.0
    for i in range(p):
        total_rev += _chv_weight(chv, p, v_new, i, is_cat, counts)
    n_old = counts[v]
    n_new = counts[v_new]
    lo_new = scratch.lows[v_new]
    log_q = (math.log(_chv_weight(chv, p, v_new, v, is_cat, counts)) - math.log(total_rev)
             - math.log(_chv_weight(chv, p, v, v_new, is_cat, counts)) + math.log(total)
             + math.log(n_new) - math.log(n_old))
    new_cut = np.int64(lo_new + int(rng.random() * n_new))
    swap = v_new != v and chv[2 + v * p + v_new] < 0.0
    count = subtree_nodes(tree, root, scratch.nodes, scratch.stack)
    # the node's own prior factor changes with its variable (and DART's weights): whole subtree
    old_prior = cached_subtree_log_prior(tree, scratch.nodes, count, data, target, scratch)
    old_lm, old_b = sum_leaf_terms(tree, scratch.nodes, count)
    log_u = -np.inf if force_accept else math.log(rng.random())
    _save_subtree(tree, scratch, count)
    tree.var[root] = v_new
    tree.cut[root] = new_cut
    lc = tree.left[root]
    rc = tree.right[root]
    if swap:
        tree.left[root] = rc
        tree.right[root] = lc
    log_r, new_lm, new_b, early = _rewire_and_score(
        tree, root, data, target, fstate, n_total, scratch, count, 0, old_prior, old_lm, old_b,
        log_u - log_q,
    )
    log_r += log_q
    valid = log_r > -np.inf
    if valid and not early and (force_accept or log_u < log_r):
        _keep_rewired(tree, fstate, root, new_lm - old_lm, new_b - old_b, xt, is_cat, m, scratch)
        return True, True, log_r
    tree.var[root] = v
    tree.cut[root] = old_cut
    tree.left[root] = lc
    tree.right[root] = rc
    _restore_subtree(tree, scratch, count)
    return False, valid, log_r


@helper
def perturb_step(rng, tree, data, target, fstate, n_total, scratch, chv, force_accept=False):
    """One PERTURB MH step in place at a uniformly chosen internal node; at a numeric rule, with
    probability ``chv[0]`` a CHGV step instead (``change_of_variable_step``; ``chv``: see
    ``change_of_variable_table``). Returns (accepted, proposal valid, log r). With ``chv[1] > 0``
    a sweep: the step at every internal node in turn; returns (any accepted, True, 0.0)."""
    if chv.shape[0] > 1 and chv[1] > 0.0:
        any_accepted = False
        found = False
        # perturb and CHGV leave every slot's internal / leaf / free status as it was
        for node in range(tree.meta[M_SPAN]):
            if tree.var[node] >= 0:
                found = True
                accepted, _, _ = perturb_at(rng, tree, data, target, fstate, n_total, scratch, chv, node,
                                            force_accept)
                any_accepted = any_accepted or accepted
        return any_accepted, found, 0.0
    root, _ = _pick_node(rng, tree, 2)
    if root < 0:
        return False, False, -np.inf
    return perturb_at(rng, tree, data, target, fstate, n_total, scratch, chv, root, force_accept)


@helper
def perturb_at(rng, tree, data, target, fstate, n_total, scratch, chv, root, force_accept):
    """The PERTURB (or CHGV) MH step at internal node ``root`` (see ``perturb_step``), with OpenBT's
    initial window ``PERTURB_WIDTH`` (not adapted)."""
    xt, is_cat, nbins = data.xt, data.is_cat, data.nbins
    m = target.prior.min_leaf
    v = tree.var[root]
    # (a table of another width than 2 + p^2 would be read out of bounds: plain perturb then)
    if not is_cat[v] and chv[0] > 0.0 and chv.shape[0] == 2 + xt.shape[0] ** 2 and rng.random() < chv[0]:
        return change_of_variable_step(rng, tree, data, target, fstate, n_total, scratch, chv, root,
                                       force_accept)
    old_cut = tree.cut[root]
    log_q = 0.0
    if is_cat[v]:
        k = int(rng.random() * nbins[v])
        new_cut = old_cut ^ (np.int64(1) << k)
    else:
        count, lo, _ = var_rule_count(xt, tree.perm, tree.start[root], tree.end[root], v, is_cat, nbins, m,
                                      scratch.hist, scratch.sums, False)
        n_cuts = int(count)
        if n_cuts <= 1:
            return False, False, -np.inf
        hi = lo + n_cuts - 1
        half = max(1, int(PERTURB_WIDTH * n_cuts / 2.0))
        a = max(lo, old_cut - half)
        b = min(hi, old_cut + half)
        new_cut = np.int64(a + int(rng.random() * (b - a + 1)))
        a2 = max(lo, new_cut - half)
        b2 = min(hi, new_cut + half)
        log_q = math.log(b - a + 1) - math.log(b2 - a2 + 1)
    count = subtree_nodes(tree, root, scratch.nodes, scratch.stack)
    # the node's own prior factor is unchanged (same rows, same variable): descendants only
    old_prior = cached_subtree_log_prior(tree, scratch.nodes[1:], count - 1, data, target, scratch)
    old_lm, old_b = sum_leaf_terms(tree, scratch.nodes, count)
    log_u = -np.inf if force_accept else math.log(rng.random())
    _save_subtree(tree, scratch, count)
    tree.cut[root] = new_cut
    log_r, new_lm, new_b, early = _rewire_and_score(
        tree, root, data, target, fstate, n_total, scratch, count, 1, old_prior, old_lm, old_b,
        log_u - log_q,
    )
    log_r += log_q
    valid = log_r > -np.inf
    if valid and not early and (force_accept or log_u < log_r):
        _keep_rewired(tree, fstate, root, new_lm - old_lm, new_b - old_b, xt, is_cat, m, scratch)
        return True, True, log_r
    tree.cut[root] = old_cut
    _restore_subtree(tree, scratch, count)
    return False, valid, log_r
