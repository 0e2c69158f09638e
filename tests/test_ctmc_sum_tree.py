"""The O(log nodes) event selection of ``ctmc`` (``_kernels/ctmc.py`` sum tree).

* ``sum_tree_find`` returns the slot a linear scan of the cumulative rates returns
  (``searchsorted``), for 20,000 uniforms over random rate vectors with zero slots; ties are
  only possible within rounding of a boundary (1e-12 relative), none expected.
* After thousands of jumps (with rotate and perturb events, which rebuild it, and births and
  deaths, which update it slot by slot), the maintained sum tree equals one rebuilt from the
  cached rates to 1e-12 relative (only summation order differs): the incremental updates miss
  nothing, so the event law is the linear scan's.
"""

from __future__ import annotations

import numpy as np
from exact import harness as H
from exact.problems import make_problem

from bartpy_suite._kernels.ctmc import _pow2, rebuild_sum_tree, sum_tree_find


def _tree_of(weights: np.ndarray) -> np.ndarray:
    size = _pow2(len(weights))
    st = np.zeros(2 * size)
    st[size:size + len(weights)] = weights
    for j in range(size - 1, 0, -1):
        st[j] = st[2 * j] + st[2 * j + 1]
    return st


def test_find_matches_linear_scan():
    rng = np.random.default_rng(11)
    mismatches = 0
    for _ in range(200):
        n = int(rng.integers(1, 70))
        w = rng.exponential(size=n) * (rng.random(n) < 0.6)
        if w.sum() == 0:
            w[-1] = 1.0
        st = _tree_of(w)
        cum = np.cumsum(w)
        for u in rng.random(100) * w.sum():
            i, rest = sum_tree_find(st, u)
            j = int(np.searchsorted(cum, u, side="right"))
            if i != j:
                mismatches += 1
            assert w[i] > 0.0
            assert -1e-9 <= rest <= w[i] * (1 + 1e-12)
    assert mismatches == 0


def test_maintained_sum_tree_equals_rebuilt():
    # mean_variance_shift: no common-sigma term, so births and deaths update the sum tree slot
    # by slot (with a common sigma every jump refreshes all rates and rebuilds it)
    prob = make_problem("grid", "mean_variance_shift")
    chain = H.make_ctmc_chain(prob, 3, rates=(1.0, 1.0))
    chain.allocate(1)
    for _ in range(40):
        chain.run(0, 100, 100, 1)  # 100 events, nothing recorded
        st = chain.cs.sum_tree.copy()
        rebuild_sum_tree(chain.tree, chain.cs)
        np.testing.assert_allclose(st, chain.cs.sum_tree, rtol=1e-12, atol=1e-300)
