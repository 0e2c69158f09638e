"""``MultinomialChain``: the state every sampler's chain of log-linear (multinomial) BART holds
(K forests of m trees in one stacked forest, the augmentation state of ``_kernels.loglinear``)
and its draw buffers. A sampler subclasses it and implements ``run`` with its own sweep.

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import forest_nodes, record_forest
from .._kernels.loglinear import LoglinearState
from .._kernels.record import grow_store, new_store, trim_store
from .draws import ChainDraws
from .forest import BART_MAX_NODES, INITIAL_NODES_PER_TREE, new_forest
from .problems import MultinomialBartProblem


class MultinomialChain:
    """State of one log-linear BART chain.

    Parameters
    ----------
    problem : MultinomialBartProblem
    rng : numpy.random.Generator
    """

    def __init__(self, problem: MultinomialBartProblem, rng: np.random.Generator):
        self.codes = np.ascontiguousarray(problem.codes, dtype=np.int32)
        self.is_categorical = np.asarray(problem.is_categorical, dtype=np.bool_)
        self.nbins = np.asarray(problem.nbins, dtype=np.int64)
        self.rng = rng
        ycls = np.ascontiguousarray(problem.ycls, dtype=np.int64)
        n = ycls.shape[0]
        k, m = int(problem.n_classes), int(problem.trees_per_class)
        hyper = np.array(problem.hyper, dtype=np.float64)
        self.capacity = min(_tree.node_capacity(n, int(hyper[_tree.H_MIN_LEAF])), BART_MAX_NODES)
        self.forest = new_forest(k * m, n, self.capacity)  # stumps with mu = 0: every lambda_k = 1
        self.scratch = _tree.new_scratch(self.codes, self.capacity, self.nbins)
        self.order = np.empty(self.capacity, dtype=np.int32)
        self.state = LoglinearState(
            log_fit=np.zeros((k, n)),
            phi=np.full(n, 1.0 / k),  # E[phi] at the start, where sum_k lambda_k = K
            weight=np.zeros(n),
            rest=np.zeros(n),
            is_class=np.zeros(n, dtype=np.int64),
            ycls=ycls,
            leaf_of=np.zeros((k * m, n), dtype=np.uint8),
            hyper=hyper,
            fstate=np.zeros(2),
            class_counts=np.zeros(1),
            trees_per_class=m,
        )
        self.out = None
        self.store = None

    @property
    def n_trees(self) -> int:
        """Trees over all classes (K m)."""
        return self.forest.var.shape[0]

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws; the node store starts small and grows on demand."""
        t = self.n_trees
        self.out = {"n_leaves": np.zeros((draws, t), dtype=np.int32), "depth": np.zeros((draws, t), dtype=np.int32)}
        self.store = new_store(draws, t, INITIAL_NODES_PER_TREE * t * min(draws, 256))

    def record_pending(self, d: int) -> None:
        """Grow the store and record the current forest as draw d (after a kernel found no room)."""
        self.store = grow_store(self.store, forest_nodes(self.forest), d)
        record_forest(self.forest, self.store, d, self.out["n_leaves"], self.out["depth"], self.scratch.nodes,
                      self.order, self.scratch.stack)

    def collect(self, kept: int) -> ChainDraws:
        """The first ``kept`` draws; sampler statistics come from ``sampler_stats``."""
        posterior = {key: value[:kept].copy() for key, value in self.out.items()}
        out = ChainDraws(posterior, self.sampler_stats(kept), trim_store(self.store, kept))
        self.out = self.store = None
        return out

    def sampler_stats(self, kept: int) -> dict:
        """Sampler statistics of the first ``kept`` draws (none by default)."""
        return {}
