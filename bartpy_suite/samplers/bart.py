"""BART chains (``cgm`` and ``grow_prune`` tree moves inside Bayesian backfitting)."""

from __future__ import annotations

import numpy as np

from .._kernels import tree as _tree
from .._kernels.bart_chain import SIGMA_PROBIT, bart_sweep, forest_max_nodes, record_forest, run_bart_chain
from .cart import move_vector

# Most nodes one BART tree may hold (128 leaves). Under BART's prior (beta = 2) a tree this large
# has negligible probability; a grow beyond it is rejected, i.e. the prior is truncated there.
BART_MAX_NODES = 255
INITIAL_STORED_NODES = 15


def new_forest(n_trees: int, n_rows: int, capacity: int) -> _tree.TreeArrays:
    """A forest of ``n_trees`` stumps: ``TreeArrays`` fields stacked along a first tree axis."""
    trees = [_tree.new_tree(n_rows, capacity) for _ in range(n_trees)]
    return _tree.TreeArrays(*[np.ascontiguousarray(np.stack([getattr(t, k) for t in trees])) for k in _tree.TreeArrays._fields])


class BartChain:
    """State of one BART chain.

    Parameters
    ----------
    codes, is_categorical, nbins
        Binned predictors.
    y : ndarray
        Standardised response (regression) or 0/1 codes (probit).
    hyper : ndarray
        Kernel hyperparameters (``H_SIGMA2`` holds the current sigma^2, ``H_TAU2`` the leaf variance).
    moves : dict
    rng : numpy.random.Generator
    n_trees : int
    sigma_mode : int
        ``SIGMA_SAMPLED``, ``SIGMA_FIXED`` or ``SIGMA_PROBIT``.
    offset : float
        Fixed part of f outside the trees (the probit offset Phi^-1(mean y)); the residual is
        taken against it, so the trees model f - offset.
    """

    def __init__(self, codes, is_categorical, nbins, y, hyper, moves, rng, n_trees, sigma_mode, offset=0.0):
        self.codes = np.ascontiguousarray(codes, dtype=np.int32)
        self.is_categorical = np.asarray(is_categorical, dtype=np.bool_)
        self.nbins = np.asarray(nbins, dtype=np.int64)
        self.hyper = np.array(hyper, dtype=np.float64)
        self.move_probs = move_vector(moves)
        self.rng = rng
        self.sigma_mode = int(sigma_mode)
        n = len(y)
        m = int(self.hyper[_tree.H_MIN_LEAF])
        self.capacity = min(_tree.node_capacity(n, m), BART_MAX_NODES)
        self.forest = new_forest(n_trees, n, self.capacity)
        # Leaf of every row in every tree, as uint8 node ids (capacity <= 255); all rows start
        # in the root of a stump.
        self.leaf_of = np.zeros((n_trees, n), dtype=np.uint8)
        self.scratch = _tree.new_scratch(self.codes, self.capacity, self.nbins)
        self.fstate = np.zeros(2)
        self.ycls = np.zeros(n, dtype=np.int64)
        y = np.asarray(y, dtype=np.float64)
        if self.sigma_mode == SIGMA_PROBIT:
            self.ybin = y.astype(np.int64)
            # Start the latents at +-1 around a zero fit.
            self.z = np.where(self.ybin == 1, 1.0, -1.0)
            start = 0.0
        else:
            self.ybin = np.zeros(n, dtype=np.int64)
            self.z = np.zeros(n)
            start = float(np.mean(y))
        self.forest.value[:, 0] = start / n_trees
        target = self.z if self.sigma_mode == SIGMA_PROBIT else y
        self.resid = np.ascontiguousarray(target - start - offset)

    def sweep(self) -> np.ndarray:
        """One backfitting sweep; returns the (move, [proposed, accepted]) counts."""
        counts = np.zeros((4, 2), dtype=np.int64)
        bart_sweep(self.rng, self.forest, self.leaf_of, self.codes, self.is_categorical, self.nbins, self.resid,
                   self.hyper, self.move_probs, self.fstate, self.scratch, self.ycls, self.z, self.ybin,
                   self.sigma_mode, counts)
        return counts

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int, out: dict) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws; enlarges the node axis of the tree
        buffers in ``out`` when a tree outgrows it."""
        done = 0
        while done < n_iter:
            steps, pending = run_bart_chain(
                self.rng, self.forest, self.leaf_of, self.codes, self.is_categorical, self.nbins, self.resid, self.hyper,
                self.move_probs, self.fstate, self.scratch, self.ycls, self.z, self.ybin, self.sigma_mode,
                first_iter + done, n_iter - done, tune, thin,
                out["sigma"], out["counts"], out["split_var"], out["split_cut"], out["left"], out["right"],
                out["leaf_value"], out["leaf_sigma"], out["leaf_prob"], out["n_leaves"], out["depth"],
            )
            done += steps
            if pending >= 0:
                grow_node_axis(out, forest_max_nodes(self.forest))
                order = np.empty(self.capacity, dtype=np.int32)
                record_forest(self.forest, pending, out["split_var"], out["split_cut"], out["left"], out["right"],
                              out["leaf_value"], out["leaf_sigma"], out["leaf_prob"], self.scratch, order,
                              out["n_leaves"], out["depth"])


TREE_KEYS = ("split_var", "split_cut", "left", "right", "leaf_value", "leaf_sigma", "leaf_prob")
FILL = {"split_var": -2, "split_cut": 0, "left": -1, "right": -1, "leaf_value": np.nan, "leaf_sigma": np.nan, "leaf_prob": np.nan}


def allocate_bart_outputs(draws: int, n_trees: int, nodes: int = INITIAL_STORED_NODES) -> dict:
    """Per-chain draw buffers; the node axis starts small and grows on demand."""
    return {
        "sigma": np.full(draws, np.nan),
        "counts": np.zeros((draws, 4, 2), dtype=np.int64),
        "n_leaves": np.zeros((draws, n_trees), dtype=np.int32),
        "depth": np.zeros((draws, n_trees), dtype=np.int32),
        "split_var": np.full((draws, n_trees, nodes), -2, dtype=np.int32),
        "split_cut": np.zeros((draws, n_trees, nodes), dtype=np.int64),
        "left": np.full((draws, n_trees, nodes), -1, dtype=np.int32),
        "right": np.full((draws, n_trees, nodes), -1, dtype=np.int32),
        "leaf_value": np.full((draws, n_trees, nodes), np.nan),
        "leaf_sigma": np.zeros((draws, n_trees, 0)),
        "leaf_prob": np.zeros((draws, n_trees, nodes, 0)),
    }


def grow_node_axis(out: dict, needed: int) -> None:
    """Enlarge the node axis of the tree buffers in place (in the dict) to hold ``needed`` nodes."""
    current = out["split_var"].shape[2]
    if needed <= current:
        return
    new = max(needed, current + current // 4 + 1)  # modest steps: the buffers dominate memory
    for key in TREE_KEYS:
        old = out[key]
        if old.ndim < 3 or (key == "leaf_sigma" and old.shape[2] == 0):
            continue
        shape = list(old.shape)
        shape[2] = new
        arr = np.full(shape, FILL[key], dtype=old.dtype)
        arr[:, :, :current] = old
        out[key] = arr
