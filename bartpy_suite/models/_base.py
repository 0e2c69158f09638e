"""What every tree model shares: MCMC settings, training-data preparation, running the chains
of the chosen sampler, and ``from_formula``."""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np

from .. import _validation as check
from .._binning import MAX_LEVELS, BinnedPredictors
from ..errors import ArgumentError, DataError
from ..posterior.build import build_fit
from ..posterior.mixing import warn_if_poor_mixing
from ..priors import TreePrior
from ..samplers import SAMPLERS, get_sampler
from ..samplers.draws import stack_draws
from ._remote import check_executor, run_on_executor
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


def _user_stacklevel() -> int:
    """Stack level of the first frame outside this package, relative to ``warn_if_poor_mixing``'s
    caller, so that the mixing warning points at the user's line."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("bartpy_suite"):
        frame, level = frame.f_back, level + 1
    return level


#: numpydoc entries of the run keywords every model takes (``_init_mcmc``), appended to each
#: model's class docstring by :func:`with_run_parameters`.
RUN_PARAMETERS_DOC = """    likelihood : bool
        False samples the prior (the test of last resort for a sampler).
    progress : bool
        Progress bar in an interactive terminal.
    threads : int or None
        Worker threads (default one per chain); the draws do not depend on it.
    check_mixing : bool
        After the fit, check how well the chains mixed on f(x) at 24 training rows (class
        probabilities for a classifier) and sigma (default True): past r_hat 1.01 or bulk ESS 100
        per chain a note on standard error, past 1.05 or 50 a ``bartpy_suite.MixingWarning``, past
        1.2 or 5 a ``bartpy_suite.StrongMixingWarning`` (``posterior.mixing.mixing_report``).
    log_likelihood : bool or None
        Store the pointwise log-likelihood of the training rows in ``idata["log_likelihood"]``
        (for ``arviz_stats.loo``): True, False, or None (default) when chains x draws x rows
        is at most 10 million (``fit.add_log_likelihood()`` adds it later).
    executor : dask.distributed.Client, concurrent.futures.Executor or None
        Where the chains run. None (default): one thread per chain in this process. A dask
        ``Client`` or an ``Executor`` (e.g. ``ProcessPoolExecutor``) runs each chain as one task:
        the data and the chain's seed are shipped, the chain is built, run and collected there,
        and its draws are gathered. The same seed gives the same draws as the threaded run.
"""


def with_run_parameters(cls):
    """Class decorator: end the ``Parameters`` section of the model's docstring with
    :data:`RUN_PARAMETERS_DOC` (the placeholder line names it in the source)."""
    doc = cls.__doc__ or ""
    marker = "    (and the run keywords shared by every model: ``models._base.RUN_PARAMETERS_DOC``)\n"
    if marker not in doc:
        raise ValueError(f"{cls.__name__}'s docstring lacks the run-keywords placeholder")
    cls.__doc__ = doc.replace(marker, RUN_PARAMETERS_DOC)
    return cls


def plain(value):
    """JSON-friendly version of a label (numpy scalars to Python scalars)."""
    return value.item() if hasattr(value, "item") else value


#: Valid ``na_action`` values of the array-level ``fit``.
FIT_NA_ACTIONS = ("raise", "split")


def check_training_arrays(x, y, is_categorical, n_levels, min_leaf_size: int, na_action: str = "raise", names=None):
    """Validate array-level training data; return them as float64 arrays and factor metadata.

    A float64 ``x`` is returned as it is, not copied (nothing downstream writes into it: at
    10^7 rows x 20 predictors a copy is 1.6 GB). Under ``na_action="split"`` NaN predictor
    values are allowed (the trees route them). ``names`` (one per column) name the predictors
    in the messages; else "column j"."""
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

    def _init_mcmc(self, *, sampler, chains, draws, tune, thin, seed, alpha, beta, min_leaf_size, max_cuts, moves,
                   sampler_options, likelihood, progress, threads, check_mixing=True, log_likelihood=None,
                   executor=None) -> None:
        self.spec = get_sampler(sampler, self.model_type)
        self.chains = check.check_int_at_least("chains", chains, 1)
        self.draws = check.check_int_at_least("draws", draws, 1)
        self.tune = check.check_int_at_least("tune", tune, 0)
        self.thin = check.check_int_at_least("thin", thin, 1)
        self.seed = check.check_seed("seed", seed)
        self.tree_prior = TreePrior(
            check.check_open_unit("alpha", alpha),
            check.check_nonnegative("beta", beta),
            check.check_int_at_least("min_leaf_size", min_leaf_size, 1),
        )
        self.max_cuts = None if max_cuts is None else check.check_int_at_least("max_cuts", max_cuts, 1)
        options = dict(sampler_options) if isinstance(sampler_options, dict) else sampler_options
        if moves is not None:
            if not any(opt.name == "moves" for opt in self.spec.options):
                raise ArgumentError(
                    f"moves= sets the move probabilities of the Metropolis-Hastings samplers; sampler "
                    f"{self.spec.name!r} has no moves (its options: "
                    f"{', '.join(repr(o.name) for o in self.spec.options) or 'none'})"
                )
            if options and "moves" in options:
                raise ArgumentError("moves is given twice, as moves= and in sampler_options; give it once")
            options = {**(options or {}), "moves": moves}
        self.sampler_options = self.spec.check_options(options)
        self.likelihood = bool(likelihood)
        self.progress = bool(progress)
        self.threads = None if threads is None else check.check_int_at_least("threads", threads, 1)
        self.check_mixing = check.check_bool("check_mixing", check_mixing)
        self.log_likelihood = None if log_likelihood is None else check.check_bool("log_likelihood", log_likelihood)
        self.executor = check_executor(executor)
        if self.executor is not None and self.threads is not None:
            raise ArgumentError("threads= sets the threads of the default run; with executor= the executor decides "
                                "where chains run: give one of them")

    @property
    def moves(self) -> dict | None:
        """Move probabilities of an MH sampler (None for other samplers)."""
        return self.sampler_options.get("moves")

    def _prepare(self, X, y, is_categorical, n_levels, predictor_names, na_action="raise"):
        """Validated copies of the training data, predictor names and the binned predictors."""
        check.check_choice("na_action", na_action, FIT_NA_ACTIONS)
        if na_action == "split":
            self.spec.check_missing_split(self.sampler_options)
        given = None if predictor_names is None else [str(n) for n in predictor_names]
        x, y, is_cat, levels = check_training_arrays(X, y, is_categorical, n_levels, self.tree_prior.min_leaf_size,
                                                     na_action, names=given)
        p = x.shape[1]
        names = given if given is not None else [f"x{j}" for j in range(p)]
        return x, y, is_cat, names, BinnedPredictors.fit(x, is_cat, levels, self.max_cuts)

    def _fit_tree_prior(self, na_action: str) -> TreePrior:
        """The tree prior of one fit: the model's, with the missing-value bit under 'split'."""
        return replace(self.tree_prior, split_missing=na_action == "split")

    def _base_config(self, response_kind: str, names: list, na_action: str = "raise") -> dict:
        """Settings every fit records (JSON-serialisable)."""
        return {
            "na_action": na_action,
            "model_type": self.model_type,
            "response_kind": response_kind,
            "sampler": self.spec.name,
            "sampler_options": self.sampler_options,
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
            "log_likelihood": self.log_likelihood,
            "predictors": names,
        }

    def _run(self, chains: list) -> int:
        """Run all chains (threads, chunks, Ctrl-C); return the number of kept draws per chain."""
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
            able = [name for name, spec in SAMPLERS.items() if problem.model in spec.builders]
            raise ArgumentError(
                f"sampler {self.spec.name!r} cannot fit this model ({problem.model.replace('_', ' ')}); "
                f"samplers that can: {', '.join(repr(a) for a in able)}"
            )
        rngs = spawn_generators(self.seed, self.chains)
        if self.executor is None:
            chains = [self.spec.make_chain(problem, self.sampler_options, rng) for rng in rngs]
            kept = self._run(chains)
            draws = stack_draws([chain.collect(kept) for chain in chains])
            del chains
        else:
            draws = stack_draws(run_on_executor(self.executor, problem, self.spec.name, self.sampler_options, rngs,
                                                draws=self.draws, tune=self.tune, thin=self.thin,
                                                progress=self.progress))
        if derived is not None:
            derived(draws.posterior)
        finish = attach(draws) if attach is not None else None
        fit = build_fit(draws, statistics=self.spec.statistics[problem.model], coords=self.spec.coords,
                        ess_method=self.spec.ess_method,
                        binned=binned, y=np.asarray(y), config=config, design=design, finish=finish)
        if self.check_mixing:
            warn_if_poor_mixing(fit, stacklevel=_user_stacklevel())
        return fit

    @classmethod
    def from_formula(cls, formula: str, data, *, na_action: str = "drop", **keywords):
        """Fit the model to a pandas DataFrame described by an R-style formula.

        Parameters
        ----------
        formula : str
            ``"y ~ x1 + x2"``, ``"y ~ ."``, ``"y ~ . - x3"``; transforms (``log(x)``,
            ``I(x**2)``) and ``C(x)`` for factors. A numeric response gives a regression model;
            a bool, string or category response a classification model (labels kept as given).
        data : pandas.DataFrame
            The data; never modified.
        na_action : {"drop", "raise", "split"}
            Rows with missing values are dropped with a warning (R's ``na.omit``) or raise; or,
            with ``"split"``, missing predictor values stay and every split rule carries a
            missing-goes-left/right bit sampled with the rule (MIA, as in bartMachine: Kapelner
            & Bleich 2015), used for the training rows and for new data at predict time. Rows
            with a missing response are dropped with a warning.
        **keywords
            The model's keywords (see the class docstring).

        Returns
        -------
        Fit
        """
        from ..formula import build_design  # pandas and formulaic only when a formula is used

        model = cls(**keywords)
        design, x, y = build_design(formula, data, na_action=na_action)
        return model.fit(x, y, **design_fit_keywords(design), na_action="split" if na_action == "split" else "raise")

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
