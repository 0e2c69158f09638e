"""BART with observation weights and a variance forest (``bps.bart(..., weights="w", variance="~ x1")``):
the problem kind ``bart_hetero`` and its chain, run by the MH samplers ``cgm`` and ``grow_prune``.

The chain is an MH BART chain (``mh.BartChain``) whose mean forest has weighted leaves (the basis
leaves of ``_kernels/basis.py`` with b = 1) and whose sweep adds the variance trees
(``_kernels/variance_forest.py``) and the weighted sigma^2 draw (``_kernels/hetero_chain.py``).
Importing this module adds the builder for ``bart_hetero`` to those two samplers' registry entries;
every other sampler refuses the kind in ``TreeModel._sample`` with the list of those that fit it.

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import N_ACC, record_forest_now
from .._kernels.hetero_chain import HeteroPart, run_hetero_chain
from .._kernels.likelihood import MODEL_BASIS_NORMAL, MODEL_LOG_VARIANCE
from .._kernels.record import grow_store, new_store, nodes_of_trees, trim_store
from .._kernels.records import Data, ForestOut, MhBartOut, Moves, make_basis_target, make_target, make_window
from .._kernels.variance_forest import VariancePart, VarianceState
from .forest import BART_MAX_NODES, INITIAL_NODES_PER_TREE, SweepByRun, new_forest
from .mh import CGM, GROW_PRUNE, BartChain, move_flags
from .problems import BartProblem

#: The DataTree group of the variance trees and its tree dim.
VARIANCE_GROUP = "variance_trees"
VARIANCE_TREE_DIM = "variance_tree"


@dataclass(frozen=True)
class HeteroProblem(BartProblem):
    """A BART fit with observation weights and / or a variance forest: a ``BartProblem`` (regression;
    its ``prior.model`` is ``MODEL_BASIS_NORMAL``; ``sigma_mode`` fixed when there are variance trees,
    ``sigma2`` then sigma0^2) and:

    Attributes
    ----------
    weights : ndarray of float64, shape (n,)
        Precision weights w_i >= 0 (Var(e_i) = sigma^2 v(x_i) / w_i).
    var_columns : tuple of int
        The predictors (rows of ``codes``) the variance trees split on.
    var_prior : Prior or None
        The variance trees' prior (``model`` ``MODEL_LOG_VARIANCE``, leaf s ~ IG(lg_shape, lg_rate)).
    var_trees : int
        Number of variance trees (0: none, v = 1).
    mean_columns : tuple of int
        The predictors the mean trees split on (empty: all); with a variance forest only.
    """

    model: ClassVar[str] = "bart_hetero"
    weights: np.ndarray = None
    var_columns: tuple = ()
    var_prior: tuple = None
    var_trees: int = 0
    mean_columns: tuple = ()


def _variance_part(problem: HeteroProblem, codes: np.ndarray, is_cat: np.ndarray, nbins: np.ndarray,
                   sigma0sq: float) -> tuple[VariancePart, int, np.ndarray]:
    """The chain's ``VariancePart`` (a forest of no trees over no rows when ``var_trees`` is 0), its node
    capacity and the map from its predictor index to the problem's."""
    n_trees = int(problem.var_trees)
    cols = np.asarray(problem.var_columns, dtype=np.int64)
    prior = problem.var_prior if n_trees > 0 else problem.prior._replace(model=MODEL_LOG_VARIANCE)
    n = codes.shape[1] if n_trees > 0 else 0
    if n_trees > 0:
        vcodes = np.ascontiguousarray(codes[cols], dtype=np.int32)
        vcat, vbins = is_cat[cols], nbins[cols]
    else:
        cols = np.zeros(1, dtype=np.int64)
        vcodes, vcat, vbins = np.zeros((1, 0), dtype=np.int32), np.zeros(1, dtype=np.bool_), np.ones(1, np.int64)
    capacity = min(_tree.node_capacity(max(n, 1), prior.min_leaf), BART_MAX_NODES)
    forest = new_forest(n_trees, n, capacity)
    w = np.asarray(problem.weights, dtype=np.float64)[:n]
    state = VarianceState(
        logv=np.zeros(n), u=np.zeros(n), rest=np.zeros(n), pos=(w > 0).astype(np.int64),
        leaf_of=np.zeros((n_trees, n), dtype=np.uint8), target=make_target(prior, sigma0sq), fstate=np.zeros(2),
        class_counts=np.zeros(1), cursor=np.zeros(capacity, dtype=np.int64))
    scratch = _tree.new_scratch(vcodes, capacity, np.asarray(vbins, dtype=np.int64), model=MODEL_LOG_VARIANCE)
    data = Data(vcodes, np.asarray(vcat, dtype=np.bool_), np.asarray(vbins, dtype=np.int64), state.u, state.pos)
    out = ForestOut(np.zeros((0, n_trees), dtype=np.int32), np.zeros((0, n_trees), dtype=np.int32),
                    new_store(0, n_trees, 1), np.zeros(capacity, dtype=np.int32), np.empty(capacity, dtype=np.int32))
    return VariancePart(forest, state, data, scratch, out), capacity, cols


class HeteroChain(SweepByRun, BartChain):
    """One weighted / heteroskedastic BART chain with an MH move per tree (mean and variance trees).

    Parameters
    ----------
    problem : HeteroProblem
    moves : dict
        Move probabilities by name (the same mix for both forests).
    rng : numpy.random.Generator

    Starts as BART: mean leaves at the mean response / trees, sigma^2 at ``problem.sigma2``; variance
    leaves at lambda = 0 (v = 1, the noise variance sigma0^2 everywhere).
    """

    def __init__(self, problem: HeteroProblem, moves: dict, rng: np.random.Generator):
        if problem.prior.model != MODEL_BASIS_NORMAL:
            raise ValueError("a bart_hetero problem's mean forest has basis leaves (MODEL_BASIS_NORMAL)")
        codes = np.ascontiguousarray(problem.codes, dtype=np.int32)
        is_cat = np.asarray(problem.is_categorical, dtype=np.bool_)
        nbins = np.asarray(problem.nbins, dtype=np.int64)
        # the mean trees see their own predictors (numbered among them; ``collect`` renumbers the splits)
        self.mean_columns = np.asarray(problem.mean_columns, dtype=np.int64)
        if self.mean_columns.size:
            cols = self.mean_columns
            problem = dataclasses.replace(problem, codes=np.ascontiguousarray(codes[cols]), is_categorical=is_cat[cols],
                                          nbins=nbins[cols])
        super().__init__(problem, moves, rng)
        w = np.ascontiguousarray(problem.weights, dtype=np.float64)
        st = self.state
        # the mean forest's leaves are basis leaves (b = 1, precision w_i / sigma^2): the state's target
        # is a BasisTarget sharing the sigma^2 cell, its sums hold c and A (``basis.py``)
        basis = np.ascontiguousarray(np.stack([np.ones_like(w), w, w]))
        self.state = st._replace(sums=np.zeros((2 * N_ACC, self.capacity)),
                                 target=make_basis_target(st.target.prior, st.target.sigma2, st.target.prior.tau2,
                                                          basis))
        self.variance, self.var_capacity, self.var_columns = _variance_part(problem, codes, is_cat, nbins,
                                                                            float(problem.sigma2))
        self.hetero = HeteroPart(w, self.variance, np.zeros((len(self.move_probs), 2), dtype=np.int64))

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (as BART's, and the variance trees' sizes and store)."""
        super().allocate(draws)
        t = self.variance.forest.var.shape[0]
        cap = self.var_capacity
        self.variance = self.variance._replace(out=ForestOut(
            np.zeros((draws, t), dtype=np.int32), np.zeros((draws, t), dtype=np.int32),
            new_store(draws, t, INITIAL_NODES_PER_TREE * t * min(draws, 256)), np.zeros(cap, dtype=np.int32),
            np.empty(cap, dtype=np.int32)))
        self.hetero = self.hetero._replace(variance=self.variance)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws (the stores grow on demand)."""
        moves = Moves(self.move_probs, *move_flags(self.move_probs))
        done = 0
        while done < n_iter:
            o = self.out
            steps, pending, which = run_hetero_chain(
                self.rng, self.forest, self.state, self.data, moves, self.scratch, self.hetero,
                make_window(first_iter + done, n_iter - done, tune, thin), MhBartOut(o["sigma"], self.counts),
                ForestOut(o["n_leaves"], o["depth"], self.store, self.scratch.nodes, self.order))
            done += steps
            if pending >= 0:
                if which == 0:
                    self.record_pending(pending)
                self._record_variance_pending(pending)

    def _record_variance_pending(self, d: int) -> None:
        part = self.variance
        out = part.out
        store = grow_store(out.store, nodes_of_trees(part.forest.meta[:, _tree.M_N_LEAVES]), d)
        self.variance = part._replace(out=out._replace(store=store))
        self.hetero = self.hetero._replace(variance=self.variance)
        record_forest_now(part.forest, store, d, out.leaves, out.depth, out.nodes, out.order, part.scratch.stack)

    def collect(self, kept: int):
        """BART's draws, plus the variance trees as the extra store ``variance_trees`` (split variables
        numbered among all predictors) and their mean leaf count ``variance_mean_leaves`` per draw."""
        part = self.variance
        t = part.forest.var.shape[0]
        out = super().collect(kept)
        if self.mean_columns.size:
            internal = out.store.var >= 0
            out.store.var[internal] = self.mean_columns[out.store.var[internal]]
        if t > 0:
            store = trim_store(part.out.store, kept)
            internal = store.var >= 0
            store.var[internal] = self.var_columns[store.var[internal]]
            out.extra_stores[VARIANCE_GROUP] = (VARIANCE_TREE_DIM, store)
            out.posterior["variance_mean_leaves"] = part.out.leaves[:kept].mean(axis=1)
        self.variance = part._replace(out=part.out._replace(store=None))
        self.hetero = self.hetero._replace(variance=self.variance)
        return out

    @property
    def logv(self) -> np.ndarray:
        """The current log v(x_i) of the training rows (zeros without variance trees)."""
        return self.variance.state.logv


def _build_hetero(problem: HeteroProblem, options: dict, rng) -> HeteroChain:
    return HeteroChain(problem, options["moves"], rng)


# The MH samplers fit the kind; their statistics are those of BART.
for _spec in (CGM, GROW_PRUNE):
    _spec.builders["bart_hetero"] = _build_hetero
    _spec.statistics["bart_hetero"] = _spec.statistics["bart"]
