"""What every tree model shares: MCMC settings, training-data preparation, running the chains
of the chosen sampler, and ``from_formula``."""

from __future__ import annotations

import inspect
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _validation as check
from .._binning import MAX_LEVELS, BinnedPredictors, check_float64_keeps_values
from .._validation import NaAction, check_na_action
from ..errors import ArgumentError, BartpySuiteWarning, DataError
from ..posterior.build import build_fit
from ..posterior.loglik import wants_log_likelihood
from ..posterior.mixing import warn_if_poor_mixing
from ..priors import TreePrior
from ..samplers import samplers_for
from ..samplers.draws import stack_draws
from ._remote import run_on_executor
from ._runner import run_chains
from .settings import check_run_settings, sampler_kind


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


def _user_stacklevel() -> int:
    """Stack level of the first frame outside this package, relative to ``warn_if_poor_mixing``'s
    caller, so that the mixing warning points at the user's line."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("bartpy_suite"):
        frame, level = frame.f_back, level + 1
    return level


#: Samplers whose rule prior takes DART's split-variable weights (``sparse=True``).
SPARSE_SAMPLERS = ("grow_prune", "cgm")

#: Bounds of DART's sparse_rho: at least ``SPARSE_RHO_MIN_PER_P`` times the number of predictors,
#: at most ``SPARSE_RHO_MAX`` (``sparse_settings`` says why).
SPARSE_RHO_MIN_PER_P = 1e-290
SPARSE_RHO_MAX = 1e300

#: numpydoc entries of the DART keywords of ``bps.bart`` and ``bps.cart``.
SPARSE_PARAMETERS_DOC = """    sparse : bool
        DART (Linero 2018): split variables drawn with probabilities s ~ Dirichlet(theta/p, ...)
        instead of uniformly, theta / (theta + rho) ~ Beta(sparse_a, sparse_b); s and theta are
        redrawn by Gibbs after every sweep from iteration ``tune // 2`` on, and recorded as the
        posterior variables ``split_probs`` and ``sparse_alpha``
        (``fit.variable_inclusion()``). s is drawn from Linero's conditional Dirichlet(theta/p +
        split counts), which treats every predictor as available at every split: exact with
        continuous predictors at nodes of at least 2 ``min_leaf_size`` rows, an approximation
        (BART3's and bartz's default) with binary or few-level predictors, where it leans to
        larger theta (less sparsity). Samplers {samplers}; at least two
        predictors (a factor counts as one).
    sparse_a, sparse_b : float
        Beta prior of theta / (theta + rho) (Linero's defaults 0.5 and 1; a = 1 is close to
        the uniform rule prior, smaller a asks for more sparsity).
    sparse_rho : float or None
        Scale of theta (default: the number of predictors p; rho < p asks for more sparsity);
        between 1e-290 p and 1e300, where theta and the weights stay finite.
""".replace("{samplers}", " and ".join(f'``"{name}"``' for name in SPARSE_SAMPLERS))


#: the entry a model's docstring holds where :data:`SPARSE_PARAMETERS_DOC` goes (well-formed
#: numpydoc, as ``RUN_PARAMETERS_PLACEHOLDER``)
SPARSE_PARAMETERS_PLACEHOLDER = ("    **sparse_keywords\n        The DART keywords "
                                 "(``models._base.SPARSE_PARAMETERS_DOC``), put here at import.\n")


def with_sparse_parameters(cls):
    """Class decorator: put :data:`SPARSE_PARAMETERS_DOC` where the model's docstring names it."""
    if SPARSE_PARAMETERS_PLACEHOLDER not in (cls.__doc__ or ""):
        raise ValueError(f"{cls.__name__}'s docstring lacks the DART-keywords placeholder")
    cls.__doc__ = cls.__doc__.replace(SPARSE_PARAMETERS_PLACEHOLDER, SPARSE_PARAMETERS_DOC)
    return cls


def check_sparse(sparse, sparse_a, sparse_b, sparse_rho) -> tuple | None:
    """Validated DART keywords: ``(a, b, rho)`` (rho None: the number of predictors) or None.

    Raises
    ------
    ArgumentError
        A bad value.
    """
    a = check.check_positive("sparse_a", sparse_a)
    b = check.check_positive("sparse_b", sparse_b)
    rho = None if sparse_rho is None else check.check_positive("sparse_rho", sparse_rho)
    return (a, b, rho) if check.check_bool("sparse", sparse) else None


def sparse_settings(sparse: tuple | None, names: list, sampler: str) -> tuple | None:
    """The ``(a, b, rho)`` a problem carries for a fit with these predictors (rho defaulting to
    their number), or None without DART. Checked at fit time, so that a model can be built with
    ``sparse=True`` and its sampler set afterwards (scikit-learn's ``set_params``).

    Raises
    ------
    ArgumentError
        DART with a sampler outside ``SPARSE_SAMPLERS``, with a single predictor (s would be
        the constant 1), or a rho outside ``SPARSE_RHO_MIN_PER_P`` p .. ``SPARSE_RHO_MAX``.
    """
    if sparse is None:
        return None
    if sampler not in SPARSE_SAMPLERS:
        raise ArgumentError(
            f"sparse=True (DART) is not available with sampler {sampler!r}; samplers that support it: "
            f"{', '.join(repr(s) for s in SPARSE_SAMPLERS)}"
        )
    if len(names) < 2:
        raise ArgumentError(
            f"sparse=True (DART) chooses among predictors, but this fit has one ({names[0]!r}); "
            "add predictors or leave sparse=False"
        )
    a, b, rho = sparse
    rho = float(len(names)) if rho is None else rho
    # theta = rho lambda / (1 - lambda) reaches (2 N_GRID - 1) rho on the lambda grid, and the
    # Dirichlet draw divides log U by theta / p >= rho / (p (2 N_GRID - 1)): outside these bounds
    # theta overflows or every Gamma variate of an empty forest underflows (NaN weights)
    if not SPARSE_RHO_MIN_PER_P * len(names) <= rho <= SPARSE_RHO_MAX:
        raise ArgumentError(
            f"sparse_rho={rho!r} is outside {SPARSE_RHO_MIN_PER_P:g} p .. {SPARSE_RHO_MAX:g} (p = {len(names)} "
            "predictors), where theta or the Dirichlet weights under- or overflow; a rho far below p already "
            "asks for the most sparsity, one far above p for none"
        )
    return a, b, rho


def plain(value):
    """JSON-friendly version of a label (numpy scalars to Python scalars)."""
    return value.item() if hasattr(value, "item") else value


def drop_missing_rows(x, *others):
    """``na_action="drop"`` at the array level: the rows of ``x`` and of each array of ``others``
    (the response, or survival times and events) where ``x`` or a float array of ``others`` holds
    NaN are left out, with a ``BartpySuiteWarning`` saying how many (R's ``na.omit``).

    Returns ``(x, *others)``: the inputs themselves when no row is missing (nothing is copied),
    else new arrays (the inputs are never modified). Values that are not numbers are left to
    ``check_training_arrays`` to report.

    Raises
    ------
    DataError
        When every row has a missing value.
    """
    try:
        values = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        return (x, *others)
    if values.ndim not in (1, 2) or values.shape[0] == 0:
        return (x, *others)
    missing = np.isnan(values) if values.ndim == 1 else np.isnan(values).any(axis=1)
    for other in others:
        arr = np.asarray(other)
        if arr.dtype.kind == "f" and arr.shape[:1] == missing.shape:
            missing = missing | (np.isnan(arr) if arr.ndim == 1 else np.isnan(arr).reshape(arr.shape[0], -1).any(1))
    if not missing.any():
        return (x, *others)
    n, k = missing.size, int(missing.sum())
    first = ", ".join(str(i) for i in np.flatnonzero(missing)[:5]) + (", ..." if k > 5 else "")
    if k == n:
        raise DataError(f"every one of the {n} rows has a missing value (NaN), so na_action='drop' leaves "
                        "nothing to fit; impute them, or fit with na_action='split' to let the trees route "
                        "missing predictor values")
    keep = ~missing
    warnings.warn(f"dropped {k} of {n} rows with missing values (na_action='drop'; 0-based rows {first})",
                  BartpySuiteWarning, stacklevel=_user_stacklevel())
    kept_x = x.iloc[keep] if hasattr(x, "iloc") else values[keep]
    return (kept_x, *(np.asarray(o)[keep] for o in others))


def check_training_arrays(x, y, is_categorical, n_levels, min_leaf_size: int, na_action: str = "raise", names=None):
    """Validate array-level training data; return them as float64 arrays and factor metadata.

    A float64 ``x`` is returned as it is, not copied (nothing downstream writes into it: at
    10^7 rows x 20 predictors a copy is 1.6 GB). Under ``na_action="split"`` NaN predictor
    values are allowed (the trees route them). ``names`` (one per column) name the predictors
    in the messages; else "column j"."""
    # Integers that float64 cannot tell apart (int64 near 2**63) are refused before the conversion
    # merges them; a pandas object is checked column by column, each with its own dtype.
    raw = x if hasattr(x, "iloc") else np.asarray(x)
    if hasattr(raw, "iloc") or raw.dtype.kind in "iu":
        if raw.ndim == 1:
            check_float64_keeps_values(np.asarray(raw), f"predictor {_column_name(names, 0)}")
        else:
            for j in range(raw.shape[1]):
                column = raw.iloc[:, j] if hasattr(raw, "iloc") else raw[:, j]
                check_float64_keeps_values(np.asarray(column), f"predictor {_column_name(names, j)}")
    x = np.asarray(x, dtype=np.float64)
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
    bad = np.isinf(x) if na_action == "split" else ~np.isfinite(x)
    if bad.any():
        col, row = np.argwhere(bad.T)[0]
        hint = "" if na_action == "split" else (
            "; or fit with na_action='split' to let the trees route missing values (NaN)")
        raise DataError(f"predictor {_column_name(names, col)} holds a non-finite value (first at row {row}); "
                        f"remove or impute it{hint}")
    is_cat = np.zeros(p, dtype=bool) if is_categorical is None else np.asarray(is_categorical, dtype=bool)
    if is_cat.shape != (p,):
        raise ArgumentError(f"is_categorical must have one entry per predictor ({p}); got {is_cat.shape[0]}")
    levels = np.zeros(p, dtype=np.int64)
    for v in np.flatnonzero(is_cat):
        codes = x[:, v]
        codes = codes[~np.isnan(codes)]
        if codes.size == 0:
            raise DataError(f"categorical predictor column {v} holds only missing values; drop it")
        if np.any(codes < 0) or np.any(codes != np.round(codes)):
            raise DataError(f"categorical predictor {_column_name(names, v)} must hold integer level codes >= 0")
        levels[v] = int(n_levels[v]) if n_levels is not None else int(codes.max()) + 1
        if levels[v] > MAX_LEVELS:
            raise DataError(
                f"categorical predictor {_column_name(names, v)} has {levels[v]} levels; at most {MAX_LEVELS} are "
                "supported (merge rare levels, or treat it as numeric if its values are numbers)"
            )
    return x, y, is_cat, levels


def original_scale(value: float, e: int, what: str | None = None) -> float:
    """``value * 2^e``: a quantity computed on the response divided by 2^e (``priors.response_exponent``)
    brought back to the response's scale (exact; ``value`` itself when e = 0).

    With ``what`` (e.g. "the response's sd"), a result beyond the largest float64 is a ``DataError``
    naming it; without, it becomes inf (a recorded prior setting such as lam ~ y^2 may overflow
    while the fit itself is fine)."""
    if e == 0:
        return value
    try:
        return math.ldexp(value, e)
    except OverflowError:
        if what is None:
            return math.copysign(math.inf, value)
        raise DataError(
            f"the response is too large: {what} ({value!r} x 2^{e}) exceeds the largest float64 (1.8e308); "
            "divide y by a constant (e.g. 1e300) before fitting and multiply the predictions back"
        ) from None


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, or None when the system does not say.

    Linux: ``MemAvailable`` of ``/proc/meminfo`` (free memory plus the caches the kernel can
    drop); elsewhere the free physical pages (``os.sysconf``), a lower bound of it.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.3g} PB"  # pragma: no cover (the loop returns)


def array_bytes(obj, skip: frozenset = frozenset()) -> int:
    """Bytes of the numpy arrays held by ``obj`` (a chain): its attributes, dicts, lists and
    named tuples, followed recursively; each buffer counted once, buffers whose id is in
    ``skip`` (the problem's, which all chains share) not at all."""
    seen: set[int] = set()
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            base = item
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) not in skip and (base is item or id(base) not in seen):
                seen.add(id(base))
                total += base.nbytes
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif type(item).__module__.startswith("bartpy_suite") and hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
    return total


#: How many copies of the kept draws a fit holds at its peak: the chains' buffers, the copies
#: ``collect`` and ``stack_draws`` make while the chains are stacked (``tests/test_input_hardening``
#: measures the estimate against tracemalloc's peak).
DRAW_COPIES = 2
#: How many (chains x draws x rows) float64 arrays the pointwise log-likelihood holds at its peak
#: (``posterior/loglik.py``: f, the standardised residual, its square, log(sd), the result; not all
#: at once: tracemalloc measured 3.5-4 on small CART and BART fits).
LOGLIK_COPIES = 4


def estimate_fit_bytes(chain, problem, *, chains: int, draws: int, rows: int, predictors: int,
                       log_likelihood: bool) -> dict:
    """Estimate the peak memory of a fit from one of its chains, before its buffers are allocated.

    The chain's buffers are measured for 1 and 2 kept draws (``allocate``; the runner allocates
    them again for the real count, and no sampler draws random numbers there): the difference is
    what one kept draw costs (the per-draw arrays, the draw store's initial room, and e.g. SMC's
    particles), the rest is the chain's state (trees, row maps, work arrays).

    Returns
    -------
    dict
        ``total`` bytes and its parts: ``state`` (chains x state), ``per_draw`` (bytes per kept
        draw and chain), ``draws`` (``DRAW_COPIES`` x chains x draws x per_draw), ``activity``
        (the variable-activity array) and ``log_likelihood``.
    """
    skip = frozenset(id(v) for v in vars(problem).values() if isinstance(v, np.ndarray)) if hasattr(
        problem, "__dict__") else frozenset()
    chain.allocate(1)
    one = array_bytes(chain, skip)
    chain.allocate(2)
    two = array_bytes(chain, skip)
    per_draw = max(two - one, 1)
    state = max(one - per_draw, 0)
    parts = {
        "state": chains * state,
        "per_draw": per_draw,
        "draws": DRAW_COPIES * chains * draws * per_draw,
        "activity": chains * draws * predictors * 8,
        "log_likelihood": LOGLIK_COPIES * chains * draws * rows * 8 if log_likelihood else 0,
    }
    parts["total"] = parts["state"] + parts["draws"] + parts["activity"] + parts["log_likelihood"]
    return parts


def _column_name(names, j: int) -> str:
    """``'name' (column j)`` when the predictors have names, else ``column j``."""
    if names is not None and j < len(names):
        return f"{names[j]!r} (column {j})"
    return f"column {j}"


class TreeModel:
    """Base of the array-level tree models: validated MCMC settings, the chain loop and the
    formula entry point.

    A model subclass sets ``model_type`` (its name in the model and sampler registries) and
    implements ``fit(X, y, ...)``; the keywords of its ``__init__`` are the model's whole
    keyword list, which ``from_formula`` and the ``bps.<model>`` aliases take unchanged.
    """

    model_type = ""
    #: the problem kind whose samplers the model takes, when it is not ``model_type`` (a model that
    #: builds another model's problem, e.g. a ``CartProblem``; ``settings.sampler_kind``)
    problem_kind: str | None = None
    #: the model's defaults of run keywords (``settings.RunSettings``), at least its ``sampler``
    run_defaults: Mapping[str, Any] = {}
    #: text appended to a run keyword's docstring entry, by keyword (``settings.run_parameters_doc``)
    run_notes: Mapping[str, str] = {}

    def _init_run(self, run: Mapping[str, Any]) -> None:
        """Validate the run keywords (``settings.check_run_settings``) into ``self.run`` and
        ``self.spec`` (the sampler's registry entry)."""
        self.run, self.spec = check_run_settings(sampler_kind(type(self)), run, type(self).run_defaults,
                                                 owner=f"{type(self).__name__}()")

    def _init_tree_prior(self, alpha, beta, min_leaf_size, max_cuts) -> None:
        """Validate the tree prior's keywords into ``self.tree_prior`` and ``self.max_cuts``."""
        self.tree_prior = TreePrior(
            check.check_open_unit("alpha", alpha),
            check.check_nonnegative("beta", beta),
            check.check_int_at_least("min_leaf_size", min_leaf_size, 1),
        )
        self.max_cuts = None if max_cuts is None else check.check_int_at_least("max_cuts", max_cuts, 1)

    # the validated run settings, read as attributes of the model (``model.draws``, ...)
    sampler = property(lambda self: self.run.sampler, doc="Name of the sampler.")
    chains = property(lambda self: self.run.chains, doc="Number of chains.")
    draws = property(lambda self: self.run.draws, doc="Kept draws per chain.")
    tune = property(lambda self: self.run.tune, doc="Discarded initial iterations per chain.")
    thin = property(lambda self: self.run.thin, doc="Every thin-th iteration after tune is kept.")
    seed = property(lambda self: self.run.seed, doc="Seed of the chains' generators.")
    sampler_options = property(lambda self: self.run.sampler_options, doc="The sampler's validated options.")
    likelihood = property(lambda self: self.run.likelihood, doc="False: the prior is sampled.")
    progress = property(lambda self: self.run.progress, doc="Whether a progress bar is shown.")
    threads = property(lambda self: self.run.threads, doc="Worker threads (None: one per chain).")
    check_mixing = property(lambda self: self.run.check_mixing, doc="Whether the mixing check runs after a fit.")
    log_likelihood = property(lambda self: self.run.log_likelihood, doc="Whether the pointwise "
                              "log-likelihood is stored (None: when small enough).")
    executor = property(lambda self: self.run.executor, doc="Where the chains run (None: local threads).")

    @property
    def moves(self) -> dict | None:
        """Move probabilities of an MH sampler (None for other samplers)."""
        return self.sampler_options.get("moves")

    def _prepare(self, X, y, is_categorical, n_levels, predictor_names, na_action: NaAction):
        """Validated copies of the training data, predictor names and the binned predictors
        (``na_action`` already checked: rows with missing values dropped under ``DROP``)."""
        if na_action is NaAction.SPLIT:
            self.spec.check_missing_split(self.sampler_options)
        given = None if predictor_names is None else [str(n) for n in predictor_names]
        if na_action is NaAction.DROP:
            X, y = drop_missing_rows(X, y)
        x, y, is_cat, levels = check_training_arrays(X, y, is_categorical, n_levels, self.tree_prior.min_leaf_size,
                                                     na_action, names=given)
        p = x.shape[1]
        names = given if given is not None else [f"x{j}" for j in range(p)]
        return x, y, is_cat, names, BinnedPredictors.fit(x, is_cat, levels, self.max_cuts)

    def _fit_tree_prior(self, na_action: NaAction) -> TreePrior:
        """The tree prior of one fit: the model's, with the missing-value bit under 'split'."""
        return replace(self.tree_prior, split_missing=na_action is NaAction.SPLIT)

    def _base_config(self, response_kind: str, names: list, na_action: NaAction) -> dict:
        """Settings every fit records (JSON-serialisable); ``na_action`` is the user's choice, stored
        as its string ("drop", "raise" or "split", as files written before ``NaAction`` hold)."""
        return {
            "na_action": NaAction(na_action).value,
            "model_type": self.model_type,
            "response_kind": response_kind,
            "sampler": self.spec.name,
            "sampler_options": self.sampler_options,
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
            "log_likelihood": self.log_likelihood,
            "predictors": names,
        }

    def _run(self, chains: list, problem=None) -> int:
        """Run all chains (threads, chunks, Ctrl-C); return the number of kept draws per chain.
        ``problem`` is the problem the chains were built for (a model may set up their start from
        it, as BART's ``init="gfr"``)."""
        for chain in chains:
            chain.allocate(self.draws)

        def run_chunk(chain, index, first, n_iter):
            chain.run(first, n_iter, self.tune, self.thin)

        done = run_chains(chains, self.tune + self.draws * self.thin, run_chunk, threads=self.threads,
                          progress=self.progress)
        kept = min(max(0, (d - self.tune + self.thin - 1) // self.thin) for d in done)
        if kept == 0:
            raise KeyboardInterrupt("sampling was interrupted before the first kept draw")
        return min(kept, self.draws)

    def _sample(self, problem, *, binned, y, config: dict, design, derived=None, attach=None):
        """Run ``self.chains`` chains of the sampler on ``problem`` and build the ``Fit``.

        ``derived(posterior)`` may add model quantities computed from the stacked draws;
        ``attach(draws)`` may take model-specific stores out of the draws and returns a function
        that adds them to the built ``Fit`` (before its log-likelihood is computed).
        """
        if problem.model not in self.spec.builders:
            able = samplers_for(problem.model)
            raise ArgumentError(
                f"sampler {self.spec.name!r} cannot fit this model ({problem.model.replace('_', ' ')}); "
                f"samplers that can: {', '.join(repr(a) for a in able)}"
            )
        rngs = spawn_generators(self.seed, self.chains)
        if self.executor is None:
            # Chain 0 first: its buffers tell what the fit will need before any chain allocates them.
            chains = [self._first_chain(problem, rngs[0], y)]
            self._check_memory(chains[0], problem, y)
            chains += [self.spec.make_chain(problem, self.sampler_options, rng) for rng in rngs[1:]]
            kept = self._run(chains, problem)
            draws = stack_draws([chain.collect(kept) for chain in chains])
            del chains
        else:
            # The chains run elsewhere, but their draws are gathered here: measure a local chain.
            probe = self._first_chain(problem, np.random.default_rng(0), y)
            self._check_memory(probe, problem, y)
            del probe
            draws = stack_draws(run_on_executor(self.executor, problem, self.spec.name, self.sampler_options, rngs,
                                                draws=self.draws, tune=self.tune, thin=self.thin,
                                                progress=self.progress))
        if derived is not None:
            derived(draws.posterior)
        finish = attach(draws) if attach is not None else None
        fit = build_fit(draws, statistics=self.spec.statistics.get(problem.model, ()), coords=self.spec.coords,
                        ess_method=self.spec.ess_method,
                        binned=binned, y=np.asarray(y), config=config, design=design, finish=finish)
        if self.check_mixing:
            warn_if_poor_mixing(fit, stacklevel=_user_stacklevel())
        return fit

    def _first_chain(self, problem, rng, y):
        """Build one chain; a state too large to allocate (e.g. ``trees=10**8``) is an ``ArgumentError``
        saying what sizes it, not numpy's bare ``MemoryError``."""
        try:
            return self.spec.make_chain(problem, self.sampler_options, rng)
        except MemoryError as exc:
            trees = getattr(problem, "n_trees", None) or getattr(problem, "trees_per_class", None)
            sizes = f"{int(np.shape(y)[0]):,} rows" + (f" and {trees:,} trees" if trees else "")
            raise ArgumentError(
                f"the state of one chain ({sizes}) does not fit in memory: {exc}. "
                + ("Lower trees, or fit a sample of the rows" if trees else "Fit a sample of the rows")
            ) from None

    def _check_memory(self, chain, problem, y) -> None:
        """Refuse a fit whose estimated peak memory exceeds the memory available, before the chains
        allocate their draw buffers (``estimate_fit_bytes``), with what to lower."""
        available = available_memory()
        if available is None:
            return
        rows = int(np.shape(y)[0])
        loglik = wants_log_likelihood(self.log_likelihood, self.chains, self.draws, rows)
        predictors = problem.x.shape[1] if hasattr(problem, "x") else problem.codes.shape[0]
        need = estimate_fit_bytes(chain, problem, chains=self.chains, draws=self.draws, rows=rows,
                                  predictors=predictors, log_likelihood=loglik)
        if need["total"] <= available:
            return
        advice = ["fewer draws (raise thin to span as many iterations with fewer stored draws: thin costs time, "
                  "not memory)", "fewer chains"]
        if loglik:
            advice.insert(1, "log_likelihood=False (the pointwise log-likelihood alone needs "
                             f"{_format_bytes(need['log_likelihood'])}; fit.add_log_likelihood() adds it later)")
        raise ArgumentError(
            f"this fit would need about {_format_bytes(need['total'])} of memory, but {_format_bytes(available)} "
            f"is available: {self.chains} chains x {self.draws:,} kept draws x {_format_bytes(need['per_draw'])} "
            f"per draw (draws and trees, held about {DRAW_COPIES} times while the chains are collected) = "
            f"{_format_bytes(need['draws'])}, the chains' state {_format_bytes(need['state'])}"
            + (f", the pointwise log-likelihood ({self.chains} x {self.draws:,} x {rows:,} rows x 8 bytes, held "
               f"about {LOGLIK_COPIES} times while computed) {_format_bytes(need['log_likelihood'])}" if loglik else "")
            + f". Lower it: {'; '.join(advice)}."
        )

    @classmethod
    def from_formula(cls, formula: str, data, *, na_action: str | NaAction = "drop", **keywords):
        """Fit the model to a pandas DataFrame described by an R-style formula.

        Parameters
        ----------
        formula : str
            ``"y ~ x1 + x2"``, ``"y ~ ."``, ``"y ~ . - x3"``; transforms (``log(x)``,
            ``I(x**2)``) and ``C(x)`` for factors. A numeric response gives a regression model;
            a bool, string or category response a classification model (labels kept as given).
        data : pandas.DataFrame
            The data; never modified.
        na_action : {"drop", "raise", "split"} or NaAction
            Rows with missing values are dropped with a warning (R's ``na.omit``) or raise; or,
            with ``"split"``, missing predictor values stay and every split rule carries a
            missing-goes-left/right bit sampled with the rule (MIA, as in bartMachine: Kapelner
            & Bleich 2015), used for the training rows and for new data at predict time. Rows
            with a missing response are dropped with a warning. The choice is recorded in
            ``fit.config["na_action"]``.
        **keywords
            The model's keywords (see the class docstring).

        Returns
        -------
        Fit
        """
        from ..formula import build_design  # pandas and formulaic only when a formula is used

        model = cls(**keywords)
        na_action = check_na_action(na_action)
        design, x, y = build_design(formula, data, na_action=na_action)
        # the design dropped (or refused) the rows with missing values; the fit records the choice
        return model.fit(x, y, **design_fit_keywords(design), na_action=na_action)

    @classmethod
    def keyword_parameters(cls) -> list[inspect.Parameter]:
        """The keyword parameters of the model (those of ``__init__``), for aliases and the CLI."""
        return [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]


def design_fit_keywords(design) -> dict:
    """The ``fit`` keywords that carry a formula design's predictor metadata."""
    levels = [len(lv) if lv is not None else 0 for lv in design.levels]
    kwargs = {
        "is_categorical": list(design.is_categorical),
        "n_levels": levels,
        "predictor_names": list(design.predictors),
        "design": design,
    }
    if design.response_kind == "categorical":
        kwargs["class_labels"] = list(design.class_labels)
    return kwargs
