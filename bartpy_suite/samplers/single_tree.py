"""``TreeChain``: the state every single-tree (CART) sampler's chain holds, and what they share.

A ``TreeChain`` owns one tree (``_kernels.tree.TreeArrays``), its work arrays, the running sums
of its cached leaf terms (``fstate``) and its ``Generator``; it records kept draws into a
``CartDraws`` and a compact ``DrawStore``. A sampler subclasses it and implements ``run``.

It also converts trees to and from nested tuples, which the exact-posterior tests use.
Nested trees: a leaf is ``None``; an internal node is ``(v, rule, left, right)`` where ``rule``
is the cut index k for a numeric variable (left iff ``x <= cuts[k]``) and, for a categorical
variable, a ``frozenset`` of the level codes present at the node that go left, oriented so the
largest present level goes right (``get_tree`` returns this canonical form). Under
``na_action="split"`` (``Prior.na_split``) a numeric rule is the pair ``(k, na_left)`` and a
factor's missing code ``nbins[v]`` is one more level (``_kernels/tree.py``).

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import numpy as np

from .._kernels import tree as _tree
from .._kernels.cart_draws import CartOut, new_cart_draws
from .._kernels.likelihood import MODEL_CLASSIFICATION, MODEL_MEAN_VARIANCE_SHIFT
from .._kernels.record import grow_store, new_store, nodes_of_trees, record_tree_now, trim_store
from .._kernels.records import Data, Prior, make_target
from .draws import ChainDraws
from .problems import CartProblem

#: First node room of a chain's draw store, in nodes per kept draw (it grows on demand).
INITIAL_NODES_PER_DRAW = 8


class TreeChain:
    """State of one single-tree chain (see the module docstring).

    Parameters
    ----------
    problem : CartProblem
    rng : numpy.random.Generator
    capacity : int, optional
        Node capacity of the tree (default: the most nodes a valid tree can have).
    """

    def __init__(self, problem: CartProblem, rng: np.random.Generator, capacity: int | None = None):
        self.codes = np.ascontiguousarray(problem.codes, dtype=np.int32)
        self.is_categorical = np.asarray(problem.is_categorical, dtype=np.bool_)
        self.nbins = np.asarray(problem.nbins, dtype=np.int64)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.ycls = np.ascontiguousarray(problem.ycls, dtype=np.int64)
        # What the tree updates condition on: the prior and a sigma^2 cell (1: a single tree has no
        # known-variance leaf model).
        self.target = make_target(problem.prior)
        self.data = Data(self.codes, self.is_categorical, self.nbins, self.y, self.ycls)
        self.rng = rng
        n = self.y.shape[0]
        m = self.prior.min_leaf
        self.n_classes = self.prior.n_classes
        self.capacity = capacity or _tree.node_capacity(n, m)
        self.tree = _tree.new_tree(n, self.capacity, self.n_classes)
        self.scratch = _tree.new_scratch(self.codes, self.capacity, self.nbins, self.n_classes,
                                         model=self.prior.model,
                                         sparse=getattr(problem, "sparse", None) is not None)
        self.order = np.empty(self.capacity, dtype=np.int32)
        self.fstate = np.zeros(2)
        self.draws = None
        self.store = None
        self.refresh()

    @property
    def prior(self) -> Prior:
        """The chain's prior record (``_kernels/records.Prior``)."""
        return self.target.prior

    @property
    def split_missing(self) -> bool:
        """Whether rules carry a missing-value direction (``na_action="split"``)."""
        return self.prior.na_split

    # -- draw buffers (the chain protocol) ----------------------------------------------------
    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws; the node store starts small and grows on demand."""
        model = self.prior.model
        self.draws = new_cart_draws(draws)
        self.store = new_store(
            draws, 1, INITIAL_NODES_PER_DRAW * min(draws, 4096),
            leaf_sigma=model == MODEL_MEAN_VARIANCE_SHIFT,
            n_classes=self.n_classes if model == MODEL_CLASSIFICATION else 0,
        )

    def cart_out(self) -> CartOut:
        """Where the chain's runner records kept draws (``store`` is replaced when it grows)."""
        return CartOut(self.draws, self.store, self.order)

    def record_pending(self, d: int) -> None:
        """Grow the store and record the current tree as draw d (after a kernel found no room)."""
        self.store = grow_store(self.store, nodes_of_trees(self.tree.meta[_tree.M_N_LEAVES]), d)
        record_tree_now(self.tree, self.store, d, 0, self.order, self.scratch.stack)

    def model_draws(self, kept: int) -> dict:
        """The per-draw model quantities of the first ``kept`` draws."""
        return {name: getattr(self.draws, name)[:kept].copy() for name in self.draws._fields}

    def collect(self, kept: int) -> ChainDraws:
        """The first ``kept`` draws; sampler statistics come from ``sampler_stats``."""
        out = ChainDraws(self.model_draws(kept), self.sampler_stats(kept), trim_store(self.store, kept))
        self.draws = self.store = None
        return out

    def sampler_stats(self, kept: int) -> dict:
        """Sampler statistics of the first ``kept`` draws (none by default)."""
        return {}

    # -- state -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Recompute every cached leaf term and the running sums from the current tree."""
        t = self.tree
        _tree.refresh_all_leaf_terms(t, self.y, self.ycls, self.target, self.scratch.class_counts, self.scratch.model)
        leaves = t.var == _tree.LEAF
        self.fstate[_tree.F_LM_SUM] = t.lm[leaves].sum()
        self.fstate[_tree.F_B_SUM] = t.b[leaves].sum()

    def log_marginal_likelihood(self) -> float:
        """log p(Y | X, T) of the current tree (0 with the likelihood switched off)."""
        return self.fstate[_tree.F_LM_SUM] + _tree.global_term(self.fstate[_tree.F_B_SUM], float(self.y.shape[0]),
                                                                self.target, self.scratch.model)

    def log_prior(self) -> float:
        """log prior of the stored tree representation (see ``_kernels/tree.py``)."""
        s = self.scratch
        count = _tree.subtree_nodes(self.tree, 0, s.nodes, s.stack)
        return _tree.subtree_log_prior(
            self.tree, s.nodes, count, self.data, self.target, s,
        )

    # -- nested-tuple conversion (tests and reporting) ------------------------------------------
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
                for level in range(int(self.nbins[v]) + (1 if self.split_missing else 0)):
                    if level not in present and rng.random() < 0.5:
                        mask |= 1 << level
                cut = np.int64(mask - 2**64 if mask >= 2**63 else mask)  # bit 63: a 63-level factor's missing level
            elif self.split_missing:
                cut = _tree.numeric_cut(int(rule[0]), bool(rule[1]), int(self.nbins[v]))
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
                cut = int(t.cut[node])
                if self.split_missing:
                    return (v, (cut & _tree.CUT_MASK, bool(cut >> _tree.NA_SHIFT)), left, right)
                return (v, cut, left, right)
            rows = t.perm[t.start[node]:t.end[node]]
            present = [int(level) for level in np.unique(self.codes[v, rows])]
            chosen = frozenset(lv for lv in present if (int(t.cut[node]) >> lv) & 1)
            if max(present) in chosen:
                chosen = frozenset(present) - chosen
                left, right = right, left
            return (v, chosen, left, right)

        return build(0)
