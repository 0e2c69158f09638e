"""``BayesianCART``: single-tree Bayesian CART on numpy arrays (thesis chapter 3)."""

from __future__ import annotations

import numpy as np

from .. import _validation as check
from .._binning import MAX_LEVELS, BinnedPredictors
from ..errors import ArgumentError, DataError
from ..posterior.build import build_fit
from ..priors import DirichletLeafPrior, NormalLeafPrior, TreePrior, default_lambda, hyper_vector
from ..samplers import get_sampler
from ..samplers.cart import CartChain
from ._runner import run_chains

CART_MODELS = ("mean_shift", "mean_variance_shift")


def spawn_generators(seed, chains: int) -> list[np.random.Generator]:
    """One independent ``Generator`` per chain, spawned from one ``SeedSequence``.

    Chain c gets the same stream whatever the number of chains, so chain c of a run equals
    chain 0 of a run seeded with ``SeedSequence(seed).spawn(c + 1)[c]``.
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [np.random.default_rng(child) for child in ss.spawn(chains)]


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


class BayesianCART:
    """Bayesian CART (Chipman, George & McCulloch 1998) sampled by MCMC over trees.

    Parameters
    ----------
    sampler : {"cgm", "grow_prune"}
        Tree-move sampler.
    chains, draws, tune, thin : int
        Number of chains; kept draws per chain; discarded initial iterations; keep every
        ``thin``-th iteration after ``tune``.
    seed : int, SeedSequence or None
        Seed of the chains' generators.
    alpha, beta : float
        Tree prior p_SPLIT = alpha (1 + depth)^-beta (thesis eq. 3.1).
    min_leaf_size : int
        A split rule is available only if both children get at least this many rows.
    max_cuts : int or None
        Largest number of cut points per numeric predictor (None: every midpoint).
    model : {"mean_shift", "mean_variance_shift"}
        Regression leaf model: a common sigma or one sigma per leaf (thesis eq. 3.3).
    a : float
        mu_i ~ N(mu_bar, sigma^2 / a).
    mu_bar : float or None
        Prior mean of the leaf means; default the mean of y.
    nu, lam : float
        sigma^2 ~ IG(nu/2, nu*lam/2); default ``lam`` puts P(sigma < sd(y)) = 0.9.
    class_alpha : float
        Symmetric Dirichlet parameter of leaf class probabilities (classification).
    moves : dict or None
        Move probabilities by name (default: the sampler's).
    likelihood : bool
        False samples the prior (the test of last resort for a sampler).
    progress : bool
        Progress bar in an interactive terminal.
    threads : int or None
        Worker threads (default one per chain); the draws do not depend on it.
    """

    def __init__(self, *, sampler="cgm", chains=4, draws=1000, tune=1000, thin=1, seed=None, alpha=0.95, beta=0.5,
                 min_leaf_size=5, max_cuts=None, model="mean_shift", a=1 / 3, mu_bar=None, nu=3.0, lam=None,
                 class_alpha=1.0, moves=None, likelihood=True, progress=True, threads=None):
        self.spec = get_sampler(sampler, "cart")
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
        self.model = check.check_choice("model", model, CART_MODELS)
        self.a = check.check_positive("a", a)
        self.mu_bar = None if mu_bar is None else float(mu_bar)
        if self.mu_bar is not None and not np.isfinite(self.mu_bar):
            raise ArgumentError(f"mu_bar must be a finite number; got {mu_bar!r}")
        self.nu = check.check_positive("nu", nu)
        self.lam = None if lam is None else check.check_positive("lam", lam)
        self.class_alpha = check.check_positive("class_alpha", class_alpha)
        self.moves = check.check_moves(moves, self.spec.default_moves, paired=[("grow", "prune")])
        self.likelihood = bool(likelihood)
        self.progress = bool(progress)
        self.threads = None if threads is None else check.check_int_at_least("threads", threads, 1)

    def fit(self, X, y, *, is_categorical=None, n_levels=None, class_labels=None, predictor_names=None, design=None):
        """Sample the posterior of trees given predictors ``X`` (n, p) and response ``y``.

        Parameters
        ----------
        X : array_like, shape (n, p)
            Predictors; categorical columns hold level codes 0..L-1.
        y : array_like, shape (n,)
            Numeric response, or class codes 0..K-1 when ``class_labels`` is given.
        is_categorical : array_like of bool, optional
        n_levels : array_like of int, optional
            Number of levels of each categorical predictor.
        class_labels : sequence, optional
            Class labels in code order; makes this a classification tree.
        predictor_names : sequence of str, optional
        design : object with ``to_json()``, optional
            The formula design, stored so that ``Fit.predict`` accepts data frames.

        Returns
        -------
        bartpy_suite.posterior.Fit
        """
        x, y, is_cat, levels = check_training_arrays(X, y, is_categorical, n_levels, self.tree_prior.min_leaf_size)
        n, p = x.shape
        names = list(predictor_names) if predictor_names is not None else [f"x{j}" for j in range(p)]
        binned = BinnedPredictors.fit(x, is_cat, levels, self.max_cuts)
        classification = class_labels is not None
        config = {
            "model_type": "cart",
            "response_kind": "categorical" if classification else "numeric",
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
        if classification:
            ycls = np.asarray(y, dtype=np.int64)
            k = len(class_labels)
            if k < 2 or np.unique(ycls).size < 2:
                raise DataError("the response has a single class; classification needs at least two")
            leaf_prior = DirichletLeafPrior(self.class_alpha, k)
            yreg = np.zeros(n)
            center, scale = 0.0, 1.0
            config.update(class_alpha=self.class_alpha, class_labels=[_plain(c) for c in class_labels], leaf_model="dirichlet")
        else:
            yreg = np.asarray(y, dtype=np.float64)
            if not np.all(np.isfinite(yreg)):
                raise DataError("the response holds non-finite values; remove or impute them")
            ycls = np.zeros(n, dtype=np.int64)
            k = 1
            center = float(np.mean(yreg))
            sd = float(np.std(yreg))
            scale = sd if sd > 0 else 1.0
            mu_bar = center if self.mu_bar is None else self.mu_bar
            lam = default_lambda(yreg, self.nu) if self.lam is None else self.lam
            leaf_prior = NormalLeafPrior(self.a, mu_bar, self.nu, lam, per_leaf_sigma=self.model == "mean_variance_shift")
            yreg = (yreg - center) / scale
            config.update(a=self.a, mu_bar=mu_bar, nu=self.nu, lam=lam, leaf_model=self.model)
        config.update(center=center, scale=scale)
        hyper = hyper_vector(self.tree_prior, leaf_prior, likelihood=self.likelihood, center=center, scale=scale)
        rngs = spawn_generators(self.seed, self.chains)
        chains = [CartChain(binned.codes, is_cat, binned.nbins, yreg, ycls, hyper, self.moves, rng) for rng in rngs]
        capacity = chains[0].capacity
        per_leaf_sigma = (not classification) and self.model == "mean_variance_shift"
        outputs = [allocate_outputs(self.draws, capacity, k if classification else 0, per_leaf_sigma) for _ in chains]
        max_nodes = [1] * self.chains
        total = self.tune + self.draws * self.thin

        def run_chunk(chain, index, first, n_iter):
            used = chain.run(first, n_iter, self.tune, self.thin, outputs[index])
            max_nodes[index] = max(max_nodes[index], used)

        done = run_chains(chains, total, run_chunk, threads=self.threads, progress=self.progress)
        kept = min(max(0, (d - self.tune + self.thin - 1) // self.thin) for d in done)
        if kept == 0:
            raise KeyboardInterrupt("sampling was interrupted before the first kept draw")
        draws = stack_outputs(outputs, kept, max(max_nodes))
        return build_fit(
            draws,
            scalars={"n_leaves": draws["n_leaves"], "depth": draws["depth"], "sigma": draws["sigma"]},
            stats={"move": draws["move"], "accepted": draws["accepted"], "log_posterior": draws["log_posterior"]},
            binned=binned, y=np.asarray(y), config=config, design=design,
        )


def _plain(value):
    """JSON-friendly version of a class label (numpy scalars to Python scalars)."""
    return value.item() if hasattr(value, "item") else value


def allocate_outputs(draws: int, capacity: int, n_classes: int, per_leaf_sigma: bool) -> dict:
    """Preallocated per-chain draw buffers (nothing grows while sampling)."""
    return {
        "n_leaves": np.zeros(draws, dtype=np.int32),
        "depth": np.zeros(draws, dtype=np.int32),
        "sigma": np.full(draws, np.nan),
        "move": np.zeros(draws, dtype=np.int8),
        "accepted": np.zeros(draws, dtype=np.int8),
        "log_posterior": np.zeros(draws),
        "split_var": np.full((draws, capacity), -2, dtype=np.int32),
        "split_cut": np.zeros((draws, capacity), dtype=np.int64),
        "left": np.full((draws, capacity), -1, dtype=np.int32),
        "right": np.full((draws, capacity), -1, dtype=np.int32),
        "leaf_value": np.full((draws, capacity), np.nan),
        "leaf_sigma": np.full((draws, capacity if per_leaf_sigma else 0), np.nan),
        "leaf_prob": np.full((draws, capacity, n_classes), np.nan),
    }


def stack_outputs(outputs: list[dict], kept: int, n_nodes: int) -> dict:
    """Stack per-chain buffers into (chain, draw, ...) arrays, keeping ``kept`` draws and
    ``n_nodes`` node slots, with a ``tree`` axis of length 1 for tree arrays."""
    out = {}
    for key in outputs[0]:
        arrays = [o[key][:kept] for o in outputs]
        arr = np.stack(arrays)
        if arr.ndim >= 3:
            arr = arr[:, :, None, :n_nodes] if arr.shape[2] > 0 else arr[:, :, None, :0]
        out[key] = arr
    return out
