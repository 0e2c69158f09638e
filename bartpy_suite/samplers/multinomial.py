"""``MultinomialChain``: the state every sampler's chain of log-linear (multinomial) BART holds
(K forests of m trees in one stacked forest, the augmentation state of ``_kernels.loglinear``)
and its draw buffers. A sampler subclasses it and implements ``run`` with its own sweep.

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import numpy as np

from .._kernels.loglinear import LoglinearState
from .._kernels.records import Data, make_target
from .forest import ForestBuffers
from .problems import MultinomialBartProblem


class MultinomialChain(ForestBuffers):
    """State of one log-linear BART chain.

    Parameters
    ----------
    problem : MultinomialBartProblem
    rng : numpy.random.Generator
    """

    def __init__(self, problem: MultinomialBartProblem, rng: np.random.Generator):
        ycls = np.ascontiguousarray(problem.ycls, dtype=np.int64)
        n = ycls.shape[0]
        k, m = int(problem.n_classes), int(problem.trees_per_class)
        prior = problem.prior
        self.init_forest(problem, rng, k * m, n)  # stumps with mu = 0: every lambda_k = 1
        self.state = LoglinearState(
            log_fit=np.zeros((k, n)),
            phi=np.full(n, 1.0 / k),  # E[phi] at the start, where sum_k lambda_k = K
            weight=np.zeros(n),
            rest=np.zeros(n),
            is_class=np.zeros(n, dtype=np.int64),
            ycls=ycls,
            leaf_of=np.zeros((k * m, n), dtype=np.uint8),
            target=make_target(prior),
            fstate=np.zeros(2),
            class_counts=np.zeros(1),
            cursor=np.zeros(self.capacity, dtype=np.int64),
            trees_per_class=m,
        )
        # The tree updates read the rate weights and class indicators of the class being updated.
        self.data = Data(self.codes, self.is_categorical, self.nbins, self.state.weight, self.state.is_class)
        self.out = None
        self.store = None
