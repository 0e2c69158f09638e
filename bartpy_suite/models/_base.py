"""What every tree model shares: MCMC settings, training-data preparation, chain running."""

from __future__ import annotations

import numpy as np

from .. import _validation as check
from .._binning import MAX_LEVELS, BinnedPredictors
from ..errors import ArgumentError, DataError
from ..priors import TreePrior
from ..samplers import get_sampler
from ._runner import run_chains


def spawn_generators(seed, chains: int) -> list[np.random.Generator]:
    """One independent ``Generator`` per chain, the children of one ``SeedSequence``.

    Chain c gets child c (spawn key ``(c,)`` under the seed's own key) whatever the number of
    chains, so chain c of a run equals chain 0 of a run seeded with
    ``SeedSequence(seed, n_children_spawned=c)``. A ``SeedSequence`` passed in is not advanced:
    passing it again gives the same draws.
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    first = ss.n_children_spawned
    children = [
        np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (first + c,), pool_size=ss.pool_size)
        for c in range(chains)
    ]
    return [np.random.default_rng(child) for child in children]


def plain(value):
    """JSON-friendly version of a label (numpy scalars to Python scalars)."""
    return value.item() if hasattr(value, "item") else value


def check_training_arrays(x, y, is_categorical, n_levels, min_leaf_size: int):
    """Validate array-level training data; return float64 copies and factor metadata."""
    x = np.array(x, dtype=np.float64, copy=True)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataError(f"X must be a 2-d array of shape (n_rows, n_predictors); got shape {x.shape}")
    n, p = x.shape
    if n == 0:
        raise DataError("the data have no rows: nothing to fit")
    if p == 0:
        raise DataError("there are no predictors: a tree needs at least one")
    if n < 2 * min_leaf_size:
        raise DataError(
            f"{n} rows are too few for min_leaf_size={min_leaf_size}: a split needs at least "
            f"2*min_leaf_size={2 * min_leaf_size} rows; lower min_leaf_size or supply more data"
        )
    y = np.asarray(y)
    if y.shape[0] != n:
        raise DataError(f"X has {n} rows but y has {y.shape[0]}")
    bad = ~np.isfinite(x)
    if bad.any():
        col, row = np.argwhere(bad.T)[0]
        raise DataError(f"predictor column {col} holds a non-finite value (first at row {row}); remove or impute it")
    is_cat = np.zeros(p, dtype=bool) if is_categorical is None else np.asarray(is_categorical, dtype=bool)
    if is_cat.shape != (p,):
        raise ArgumentError(f"is_categorical must have one entry per predictor ({p}); got {is_cat.shape[0]}")
    levels = np.zeros(p, dtype=np.int64)
    for v in np.flatnonzero(is_cat):
        codes = x[:, v]
        if np.any(codes < 0) or np.any(codes != np.round(codes)):
            raise DataError(f"categorical predictor column {v} must hold integer level codes >= 0")
        levels[v] = int(n_levels[v]) if n_levels is not None else int(codes.max()) + 1
        if levels[v] > MAX_LEVELS:
            raise DataError(
                f"categorical predictor column {v} has {levels[v]} levels; at most {MAX_LEVELS} are supported "
                "(merge rare levels or treat it as numeric)"
            )
    return x, y, is_cat, levels


class TreeModel:
    """Base of the array-level tree models: validated MCMC settings and the chain loop."""

    model_type = ""

    def _init_mcmc(self, *, sampler, chains, draws, tune, thin, seed, alpha, beta, min_leaf_size, max_cuts, moves,
                   likelihood, progress, threads) -> None:
        self.spec = get_sampler(sampler, self.model_type)
        self.chains = check.check_int_at_least("chains", chains, 1)
        self.draws = check.check_int_at_least("draws", draws, 1)
        self.tune = check.check_int_at_least("tune", tune, 0)
        self.thin = check.check_int_at_least("thin", thin, 1)
        self.seed = seed
        self.tree_prior = TreePrior(
            check.check_open_unit("alpha", alpha),
            check.check_nonnegative("beta", beta),
            check.check_int_at_least("min_leaf_size", min_leaf_size, 1),
        )
        self.max_cuts = None if max_cuts is None else check.check_int_at_least("max_cuts", max_cuts, 1)
        self.moves = check.check_moves(moves, self.spec.default_moves, paired=[("grow", "prune")],
                                      required=["grow"])
        self.likelihood = bool(likelihood)
        self.progress = bool(progress)
        self.threads = None if threads is None else check.check_int_at_least("threads", threads, 1)

    def _prepare(self, X, y, is_categorical, n_levels, predictor_names):
        """Validated copies of the training data, predictor names and the binned predictors."""
        x, y, is_cat, levels = check_training_arrays(X, y, is_categorical, n_levels, self.tree_prior.min_leaf_size)
        p = x.shape[1]
        names = list(predictor_names) if predictor_names is not None else [f"x{j}" for j in range(p)]
        return x, y, is_cat, names, BinnedPredictors.fit(x, is_cat, levels, self.max_cuts)

    def _base_config(self, response_kind: str, names: list) -> dict:
        """Settings every fit records (JSON-serialisable)."""
        return {
            "model_type": self.model_type,
            "response_kind": response_kind,
            "sampler": self.spec.name,
            "moves": self.moves,
            "chains": self.chains,
            "draws": self.draws,
            "tune": self.tune,
            "thin": self.thin,
            "seed": None if self.seed is None or isinstance(self.seed, np.random.SeedSequence) else int(self.seed),
            "alpha": self.tree_prior.alpha,
            "beta": self.tree_prior.beta,
            "min_leaf_size": self.tree_prior.min_leaf_size,
            "max_cuts": self.max_cuts,
            "likelihood": self.likelihood,
            "predictors": names,
        }

    def _run(self, chains: list, run_chunk) -> int:
        """Run all chains (threads, chunks, Ctrl-C); return the number of kept draws per chain."""
        done = run_chains(chains, self.tune + self.draws * self.thin, run_chunk, threads=self.threads,
                          progress=self.progress)
        kept = min(max(0, (d - self.tune + self.thin - 1) // self.thin) for d in done)
        if kept == 0:
            raise KeyboardInterrupt("sampling was interrupted before the first kept draw")
        return min(kept, self.draws)
