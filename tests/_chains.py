"""Test helpers: build an MH BART chain from arrays and read its kept draws back as padded
per-tree arrays (the layout the tree-by-tree tests compare against enumerations)."""

from __future__ import annotations

import numpy as np

from bartpy_suite._kernels.record import to_padded
from bartpy_suite.samplers import BartProblem
from bartpy_suite.samplers.mh import BartChain


def bart_chain(codes, is_categorical, nbins, y, prior, moves, rng, n_trees, sigma_mode, offset=0.0,
               sparse=None, sigma2=1.0) -> BartChain:
    """``BartChain`` on the given binned data and prior record (``sparse``: DART's ``(a, b, rho)``,
    or None; ``sigma2``: the starting sigma^2)."""
    return BartChain(BartProblem(codes, is_categorical, nbins, np.asarray(y, dtype=float), prior, n_trees,
                                 sigma_mode, offset, sparse=sparse, sigma2=sigma2), moves, rng)


def run_padded(chain, draws: int, first: int, n_iter: int, tune: int, thin: int) -> dict:
    """Run ``chain`` and return its kept draws: padded ``split_var``, ``split_cut``, ``left``,
    ``right``, ``leaf_value`` (draw, tree, node) and ``n_leaves``, ``depth`` (draw, tree)."""
    chain.allocate(draws)
    chain.run(first, n_iter, tune, thin)
    kept = chain.collect(draws)
    store = kept.store
    out = to_padded(store.var, store.cut, store.value, store.tree_nodes)
    out.update(n_leaves=kept.posterior["n_leaves"], depth=kept.posterior["depth"], sigma=kept.posterior["sigma"])
    return out
