"""Bayesian CART chains (``cgm`` and ``grow_prune`` samplers) around the numba kernels.

``CartChain`` owns the state of one chain (tree arrays, work arrays, running sums, its
``Generator``) and advances it in chunks with ``run_cart_chain``. It also exposes single moves
and nested-tuple tree conversion, which the exact-posterior tests use.

Nested trees: a leaf is ``None``; an internal node is ``(v, rule, left, right)`` where ``rule``
is the cut index k for a numeric variable (left iff ``x <= cuts[k]``) and, for a categorical
variable, a ``frozenset`` of the level codes present at the node that go left, oriented so the
largest present level goes right (``get_tree`` returns this canonical form).
"""

from __future__ import annotations

import numpy as np

from .._kernels import tree as _tree
from .._kernels.cart_chain import cart_step, run_cart_chain
from .._kernels.cart_moves import (
    F_B_SUM,
    F_LM_SUM,
    MOVE_NAMES,
    accept_prune,
    change_or_swap,
    undo_grow,
    propose_grow,
    propose_prune,
)

MOVE_INDEX = {name: k for k, name in enumerate(MOVE_NAMES)}
#: Returned by ``CartChain.propose`` in place of a tree when the drawn proposal is impossible
#: (``None`` is a valid tree: the stump).
NO_PROPOSAL = "no proposal"


def move_vector(moves: dict) -> np.ndarray:
    """Move probabilities as the kernel's (grow, prune, change, swap) vector."""
    return np.array([float(moves.get(name, 0.0)) for name in MOVE_NAMES], dtype=np.float64)


class CartChain:
    """State of one Bayesian CART chain.

    Parameters
    ----------
    codes : ndarray of int32, shape (p, n)
        Binned predictors (``BinnedPredictors.codes``).
    is_categorical, nbins : ndarray, shape (p,)
    y : ndarray of float64, shape (n,)
        Standardised response (regression) or zeros.
    ycls : ndarray of int64, shape (n,)
        Class codes (classification) or zeros.
    hyper : ndarray
        Kernel hyperparameter vector (``priors.hyper_vector``).
    moves : dict
        Move probabilities by name.
    rng : numpy.random.Generator
    """

    def __init__(self, codes, is_categorical, nbins, y, ycls, hyper, moves, rng, capacity=None):
        self.codes = np.ascontiguousarray(codes, dtype=np.int32)
        self.is_categorical = np.asarray(is_categorical, dtype=np.bool_)
        self.nbins = np.asarray(nbins, dtype=np.int64)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.ycls = np.ascontiguousarray(ycls, dtype=np.int64)
        self.hyper = np.asarray(hyper, dtype=np.float64)
        self.move_probs = move_vector(moves)
        self.rng = rng
        n = self.y.shape[0]
        m = int(self.hyper[_tree.H_MIN_LEAF])
        self.n_classes = int(self.hyper[_tree.H_N_CLASSES])
        self.capacity = capacity or _tree.node_capacity(n, m)
        self.tree = _tree.new_tree(n, self.capacity, self.n_classes)
        self.scratch = _tree.new_scratch(self.codes, self.capacity, self.nbins, self.n_classes)
        self.fstate = np.zeros(2)
        self.refresh()

    # -- state ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Recompute every cached leaf term and the running sums from the current tree."""
        t = self.tree
        for node in np.flatnonzero(t.var == _tree.LEAF):
            lm, b = _tree.leaf_terms(t, int(node), self.y, self.ycls, self.hyper, self.scratch.class_counts)
            t.lm[node] = lm
            t.b[node] = b
        leaves = t.var == _tree.LEAF
        self.fstate[F_LM_SUM] = t.lm[leaves].sum()
        self.fstate[F_B_SUM] = t.b[leaves].sum()

    def log_marginal_likelihood(self) -> float:
        """log p(Y | X, T) of the current tree (0 with the likelihood switched off)."""
        return self.fstate[F_LM_SUM] + _tree.global_term(self.fstate[F_B_SUM], float(self.y.shape[0]), self.hyper)

    def log_prior(self) -> float:
        """log prior of the stored tree representation (see ``_kernels/tree.py``)."""
        s = self.scratch
        count = _tree.subtree_nodes(self.tree, 0, s.nodes, s.stack)
        return _tree.subtree_log_prior(
            self.tree, s.nodes, count, self.codes, self.is_categorical, self.nbins, self.hyper, s,
        )

    # -- moves -----------------------------------------------------------------------------
    def step(self, move: str | None = None) -> tuple[str, bool]:
        """One MH transition: of the sampler's move mix (``move=None``) or of one move type.

        A forced move type is run as its own MH kernel: same proposal and ratio, with the move
        mix set to that type and its reverse (so each is invariant on its own).
        """
        if move is None:
            probs = self.move_probs
        else:
            probs = np.zeros(4)
            probs[MOVE_INDEX[move]] = 1.0
            if move in ("grow", "prune"):
                probs[:2] = 0.5
        k, accepted = cart_step(
            self.rng, self.tree, self.codes, self.is_categorical, self.nbins, self.y, self.ycls,
            self.hyper, probs, self.fstate, self.scratch,
        )
        return (MOVE_NAMES[k] if k >= 0 else "none"), bool(accepted)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int, out: dict) -> int:
        """Advance ``n_iter`` iterations, recording into the buffers of ``out`` (see
        ``allocate_outputs``). Returns the largest number of nodes recorded."""
        return run_cart_chain(
            self.rng, self.tree, self.codes, self.is_categorical, self.nbins, self.y, self.ycls,
            self.hyper, self.move_probs, self.fstate, self.scratch, first_iter, n_iter, tune, thin,
            out["n_leaves"], out["depth"], out["sigma"], out["move"], out["accepted"], out["log_posterior"],
            out["split_var"], out["split_cut"], out["left"], out["right"], out["leaf_value"],
            out["leaf_sigma"], out["leaf_prob"],
        )

    # -- nested-tuple conversion (tests and reporting) -----------------------------------------
    def set_tree(self, nested, rng: np.random.Generator | None = None) -> None:
        """Replace the tree by a nested-tuple tree.

        Categorical rules given as frozensets get a random orientation and random bits for the
        levels absent from the node, as the sampler's own representation would.
        """
        rng = rng or self.rng
        n = self.y.shape[0]
        self.tree = _tree.new_tree(n, self.capacity, self.n_classes)
        stack = [(0, nested)]
        while stack:
            node, sub = stack.pop()
            if sub is None:
                continue
            v, rule, left, right = sub
            if self.is_categorical[v]:
                present = np.unique(self.codes[v, self.tree.perm[self.tree.start[node]:self.tree.end[node]]])
                mask = 0
                for level in rule:
                    mask |= 1 << int(level)
                if rng.random() < 0.5:
                    mask = 0
                    for level in present:
                        if int(level) not in rule:
                            mask |= 1 << int(level)
                    left, right = right, left
                for level in range(int(self.nbins[v])):
                    if level not in present and rng.random() < 0.5:
                        mask |= 1 << level
                cut = np.int64(mask)
            else:
                cut = np.int64(rule)
            lc, rc = _tree.split_leaf(self.tree, self.codes, self.is_categorical, node, v, cut, self.scratch.part_buf)
            stack.append((rc, right))
            stack.append((lc, left))
        self.refresh()

    def get_tree(self):
        """The current tree as a canonical nested tuple."""
        t = self.tree

        def build(node):
            v = int(t.var[node])
            if v < 0:
                return None
            left, right = build(int(t.left[node])), build(int(t.right[node]))
            if not self.is_categorical[v]:
                return (v, int(t.cut[node]), left, right)
            rows = t.perm[t.start[node]:t.end[node]]
            present = [int(level) for level in np.unique(self.codes[v, rows])]
            chosen = frozenset(lv for lv in present if (int(t.cut[node]) >> lv) & 1)
            if max(present) in chosen:
                chosen = frozenset(present) - chosen
                left, right = right, left
            return (v, chosen, left, right)

        return build(0)

    def propose(self, move: str) -> tuple[float, object]:
        """Draw one proposal of ``move`` and return ``(log acceptance ratio, proposed tree)``
        without keeping it (the proposed tree is ``NO_PROPOSAL`` when the proposal is impossible).

        The chain's tree is left as it was. Ratios use the chain's move probabilities.
        """
        before = self.get_tree()
        fstate = self.fstate.copy()
        n_total = float(self.y.shape[0])
        args = (self.tree, self.codes, self.is_categorical, self.nbins, self.y, self.ycls, self.hyper)
        if move == "grow":
            log_r, node = propose_grow(self.rng, *args, self.move_probs, self.fstate, n_total, self.scratch)
            proposed = self.get_tree() if node >= 0 else NO_PROPOSAL
            if node >= 0:
                undo_grow(self.tree, node, self.hyper, self.scratch)
            return float(log_r), proposed
        if move == "prune":
            log_r, node = propose_prune(self.rng, *args, self.move_probs, self.fstate, n_total, self.scratch)
            if node < 0:
                return float(log_r), NO_PROPOSAL
            accept_prune(self.tree, node, self.fstate, self.scratch, self.hyper)
        else:
            accepted, valid, log_r = change_or_swap(self.rng, *args, self.fstate, n_total, self.scratch,
                                                    MOVE_INDEX[move], True)
            if not accepted:
                return float(log_r), NO_PROPOSAL
        proposed = self.get_tree()
        self.set_tree(before)
        self.fstate[:] = fstate
        return float(log_r), proposed
