"""``SurvivalBART``: discrete-time probit survival BART (Sparapani, Logan, McCulloch & Laud 2016;
R's ``BART::surv.bart``) for right-censored times.

Each subject is expanded into one row per grid time at which it is at risk (the person-period
table, :func:`expand`); the response of a row is 1 at the subject's event and 0 otherwise, and
probit BART with the time as an extra predictor is fitted to those rows with the existing
Albert-Chib sampler: p(t, x) = Phi(mu0 + f(t, x)) is the discrete hazard at grid time t and
S(t | x) = prod_{g_j <= t} (1 - p(g_j, x)) (``posterior/survival.py``). The rules, defaults and
tags ([code] = read from BART3, [derived] = ours) follow ``/work/shared/specs/outcomes.md``
section 1 (cited below as "spec 1.x").

The expanded predictor codes are built by indexing the subjects' codes (the time column's codes
from the K grid values); the float design matrix of the expanded rows is never formed. The
sampler itself still holds one code per (predictor, expanded row): the index arithmetic of spec
1.6 needs a kernel change and is not done here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from .. import _validation as check
from .._binning import BinnedPredictors
from .._kernels.backfit import SIGMA_PROBIT
from .._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from .._validation import NaAction, check_na_action
from ..errors import ArgumentError, DataError
from ..priors import kernel_prior
from ..samplers import BartProblem
from ._base import check_training_arrays, design_fit_keywords, drop_missing_rows
from .bart import BART
from .settings import with_run_keywords

GRID_RULES = ("events", "observed")
CENSORING_RULES = ("start_of_interval", "end_of_interval")


@dataclass(frozen=True)
class PersonPeriod:
    """The person-period expansion of right-censored data (spec 1.3).

    Attributes
    ----------
    grid : ndarray of float64, shape (K,)
        Increasing grid times g_1 < ... < g_K.
    subject : ndarray of int32, shape (N_exp,)
        Subject (row of the input) of each expanded row; subject-major, periods increasing.
    period : ndarray of int32, shape (N_exp,)
        0-based grid index j of each expanded row (the row's time is ``grid[period]``).
    y : ndarray of uint8, shape (N_exp,)
        1 at a subject's event row, else 0.
    n_rows : ndarray of int64, shape (N,)
        Rows per subject (n_i; 0 for a subject censored before g_1).
    """

    grid: np.ndarray
    subject: np.ndarray
    period: np.ndarray
    y: np.ndarray
    n_rows: np.ndarray


def check_times(time, event) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 times and uint8 event indicators.

    Raises ``DataError`` for a non-finite or non-positive time (BART3 stops on times <= 0
    [code]), an event value other than 0/1/bool, mismatched lengths, or no event at all.
    """
    t = np.asarray(time, dtype=np.float64).reshape(-1)
    e = np.asarray(event)
    if e.ndim != 1:
        raise DataError(f"event must hold one value per subject (a 1-D array); got shape {e.shape}")
    if e.shape[0] != t.shape[0]:
        raise DataError(f"time has {t.shape[0]} values but event has {e.size}; give one of each per subject")
    bad = ~np.isfinite(t)
    if bad.any():
        raise DataError(f"the survival times hold a non-finite value (first at row {int(np.argmax(bad))}); "
                        "remove those subjects or fill the time")
    bad = t <= 0
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"the survival times must be > 0; row {i} has {t[i]!r} ({int(bad.sum())} such rows). "
                        "A subject followed for no time adds nothing: drop it, or shift time 0")
    if e.dtype != bool:
        ef = np.asarray(e, dtype=np.float64) if e.dtype.kind in "iuf" else None
        if ef is None or not np.all((ef == 0) | (ef == 1)):
            values = e if ef is None else ef
            first = next(i for i, v in enumerate(values) if v not in (0, 1))
            raise DataError(f"the event indicator must be 0 (censored) or 1 (event), or bool; row {first} has "
                            f"{e[first]!r}. For competing risks (codes 0 = censored, 1, 2, ... = the cause) use "
                            "bartpy_suite.models.survival.CompetingRisksBART")
    e = e.astype(np.uint8)
    if not e.any():
        raise DataError("every subject is censored (no event): the hazard cannot be estimated; survival BART "
                        "needs at least one event")
    return t, e


def make_grid(time: np.ndarray, event: np.ndarray, grid="events") -> np.ndarray:
    """The time grid g_1 < ... < g_K of spec 1.2.

    Parameters
    ----------
    time, event : ndarray
        Validated times (> 0) and 0/1 events.
    grid : {"events", "observed"}, int or array_like
        "events" (default): the distinct event times. "observed": the distinct times of all
        subjects (BART3's default). An int K: the unique sample quantiles of all times at
        probabilities 1/K, ..., K/K (R's default type 7 = numpy's linear; BART3's ``K=``). An
        array: the user's increasing positive times (BART3's ``events=``).
    """
    if isinstance(grid, str):
        rule = check.check_choice("grid", grid, GRID_RULES)
        return np.unique(time[event == 1] if rule == "events" else time)
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        k = check.check_int_at_least("grid", grid, 1)
        return np.unique(np.quantile(time, np.arange(1, k + 1) / k))
    g = np.asarray(grid, dtype=np.float64).reshape(-1) if not isinstance(grid, bool) else np.zeros(0)
    if g.size == 0 or not np.all(np.isfinite(g)) or np.any(g <= 0) or np.any(np.diff(g) <= 0):
        raise ArgumentError("grid must be 'events', 'observed', an integer number of quantile times, or an array "
                            f"of strictly increasing positive finite times; got {grid!r}")
    return g


def expand(time, event, grid, censoring: str = "start_of_interval") -> PersonPeriod:
    """Person-period table of right-censored data on the grid ``grid`` (spec 1.3).

    Parameters
    ----------
    time, event : array_like
        Observed times (> 0) and event indicators (1 = event, 0 = censored).
    grid : ndarray
        Increasing grid times (see :func:`make_grid`).
    censoring : {"start_of_interval", "end_of_interval"}
        "start_of_interval" (default; [derived]): an event at T <= g_K gets rows 1..J(T) with
        J(T) = min{j : g_j >= T}, y = 1 on the last; a censored subject (or an event after g_K)
        gets the rows with g_j <= T, all 0, so censoring inside (g_{j-1}, g_j] counts as happening
        at the start of the interval and a subject censored before g_1 has no row. On the exact
        grids ("events", "observed") the rows at g_j are the Kaplan-Meier risk set.
        "end_of_interval": BART3's ``surv.pre.bart`` [code]: every time is first rounded up to
        the next grid point (times beyond g_K censored at g_K), then y_ij = delta_i 1[T_i = g_j]
        for g_j <= T_i; a subject censored inside interval j survives it.

    Returns
    -------
    PersonPeriod
    """
    rule = check.check_choice("censoring", censoring, CENSORING_RULES)
    t = np.asarray(time, dtype=np.float64)
    e = np.asarray(event).astype(bool)
    g = np.asarray(grid, dtype=np.float64)
    k = g.size
    first_at_or_after = np.searchsorted(g, t, side="left") + 1  # J(T), 1-based; K+1 beyond g_K
    at_or_before = np.searchsorted(g, t, side="right")  # #{j : g_j <= T}
    inside = t <= g[-1]
    if rule == "start_of_interval":
        event_row = e & inside
        n_rows = np.where(event_row, first_at_or_after, at_or_before)
    else:
        event_row = e & inside
        n_rows = np.where(inside, first_at_or_after, k)
    n_rows = n_rows.astype(np.int64)
    total = int(n_rows.sum())
    subject = np.repeat(np.arange(t.size, dtype=np.int32), n_rows)
    starts = np.cumsum(n_rows) - n_rows
    period = (np.arange(total, dtype=np.int64) - np.repeat(starts, n_rows)).astype(np.int32)
    y = np.zeros(total, dtype=np.uint8)
    last = (starts + n_rows - 1)[event_row & (n_rows > 0)]
    y[last] = 1
    return PersonPeriod(g, subject, period, y, n_rows)


@with_run_keywords
class SurvivalBART(BART):
    """Discrete-time probit survival BART (Sparapani et al. 2016; R's ``BART::surv.bart``).

    ``bps.bart("Surv(time, event) ~ x1 + x2", data=df)`` fits it; ``fit.predict(new,
    kind="survival", times=[...])`` gives S(t | x) with intervals.

    Parameters
    ----------
    grid : {"events", "observed"}, int or array_like
        Time grid (spec 1.2): "events" (default) the distinct event times, which makes the
        no-covariate model's maximum-likelihood curve Kaplan-Meier exactly; "observed" all
        distinct times (BART3's default); an int K the K quantiles of the times (coarsening:
        fewer expanded rows); or an increasing array of times.
    censoring : {"start_of_interval", "end_of_interval"}
        Where censoring inside a grid interval happens (see :func:`expand`); the two agree on
        the exact grids. "end_of_interval" is BART3's rule.
    trees : int
        Number of trees (default 50, BART3's ``ntree``).
    alpha, beta, k, max_cuts, min_leaf_size
        As for :class:`BART` (probit: leaf sd ``3 / (k sqrt(trees))``, offset Phi^-1 of the share
        of event rows among the expanded rows, BART3's ``gbart`` default).
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    run_defaults = {"sampler": "grow_prune", "thin": 10}
    sampler_variants = {}
    run_notes = {"thin": "The default 10 is BART3's ``keepevery``: the expanded rows make the chain more "
                         "autocorrelated."}

    def __init__(self, *, grid="events", censoring="start_of_interval", trees=50, alpha=0.95, beta=2.0, k=2.0,
                 max_cuts=100, min_leaf_size=5, **run):
        super().__init__(trees=trees, alpha=alpha, beta=beta, k=k, max_cuts=max_cuts, min_leaf_size=min_leaf_size,
                         link="probit", **run)
        if isinstance(grid, str):
            check.check_choice("grid", grid, GRID_RULES)
        elif isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
            check.check_int_at_least("grid", grid, 1)
        else:
            make_grid(np.ones(1), np.ones(1, dtype=np.uint8), grid)  # validates the array
        self.grid = grid
        self.censoring = check.check_choice("censoring", censoring, CENSORING_RULES)

    def fit(self, X, time, event, *, is_categorical=None, n_levels=None, predictor_names=None, design=None,
            na_action="raise", time_name="time", event_name="event"):
        """Sample the posterior of survival BART given predictors ``X`` (n, p), observed times
        ``time`` (n,) and event indicators ``event`` (n,; 1 = event, 0 = right-censored).

        Returns
        -------
        bartpy_suite.posterior.Fit
            Its predictors are the time (named ``time_name``) followed by those of ``X``; its
            configuration holds the grid and the survival settings (``fit.config["survival"]``).
        """
        na_action = check_na_action(na_action)
        if na_action is NaAction.DROP:
            X, time, event = drop_missing_rows(X, time, event)
        t, e = check_times(time, event)
        x, is_cat, levels, names = self._covariates(X, t, is_categorical, n_levels, predictor_names, na_action,
                                                    time_name)
        grid = make_grid(t, e, self.grid)
        table = expand(t, e, grid, self.censoring)
        return self._fit_table(x, is_cat, levels, names, time_name, event_name, t, e, table, design, na_action)

    def _covariates(self, X, t, is_categorical, n_levels, predictor_names, na_action, time_name):
        """Checked covariates of the subjects with times ``t``: ``(x, is_cat, levels, names)``
        (``X`` with no columns, from ``Surv(t, d) ~ 1``, leaves the time as the only predictor)."""
        if na_action is NaAction.SPLIT:
            self.spec.check_missing_split(self.sampler_options)
        names = None if predictor_names is None else [str(n) for n in predictor_names]
        if np.ndim(X) == 2 and np.shape(X)[1] == 0:
            if np.shape(X)[0] != t.size:
                raise DataError(f"X has {np.shape(X)[0]} rows but time has {t.size}")
            x, is_cat, levels = np.empty((t.size, 0)), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
        else:
            x, _, is_cat, levels = check_training_arrays(X, t, is_categorical, n_levels,
                                                         self.tree_prior.min_leaf_size, na_action, names=names)
        names = names if names is not None else [f"x{j}" for j in range(x.shape[1])]
        if str(time_name) in names:
            raise ArgumentError(f"time_name {time_name!r} is also a predictor name; rename one of them")
        return x, is_cat, levels, names

    def _fit_table(self, x, is_cat, levels, names, time_name, event_name, t, e, table: PersonPeriod, design,
                   na_action, extra: dict | None = None):
        """Probit BART on the person-period rows ``table`` of the subjects' validated covariates
        ``x`` (N, p); ``extra`` is added to ``config["survival"]``."""
        grid = table.grid
        n_exp = table.y.size
        if not table.y.any():
            raise DataError(f"no event falls at or before the last grid time {grid[-1]!r}: the hazard cannot be "
                            "estimated; extend the grid")
        if table.y.all():
            raise DataError("every expanded row is an event (each subject has its event at its first grid time): "
                            "there is no survival to model; use a finer grid")
        # Bin the subjects' predictors once, and the time on the K grid values each counted once
        # (spec 1.4: binning the expanded rows would weight early times more).
        xb = BinnedPredictors.fit(x, is_cat, levels, self.max_cuts)
        tb = BinnedPredictors.fit(grid[:, None], np.zeros(1, dtype=bool), np.zeros(1, dtype=np.int64),
                                  self.max_cuts)
        codes = np.empty((x.shape[1] + 1, n_exp), dtype=np.int32)
        codes[0] = tb.codes[0][table.period]
        np.take(xb.codes, table.subject, axis=1, out=codes[1:])
        binned = BinnedPredictors(codes, (tb.cuts[0],) + tuple(xb.cuts), np.concatenate([tb.nbins, xb.nbins]),
                                  np.concatenate([[False], is_cat]))
        all_names = [str(time_name)] + names
        # Probit BART on the expanded rows (spec 1.4-1.5): offset Phi^-1(ybar) over the expanded rows
        # (BART3's gbart default [code]), leaf sd 3 / (k sqrt(trees)), sigma = 1.
        center = float(special.ndtri(np.clip(table.y.mean(), 1e-6, 1 - 1e-6)))
        tau = 3.0 / (self.k * np.sqrt(self.trees))
        config = self._base_config("categorical", all_names, na_action)
        config.update(trees=self.trees, k=self.k, class_labels=[0, 1], leaf_model="probit", nu=None, lam=None,
                      center=center, scale=1.0, tau=tau)
        config["survival"] = {
            "grid": [float(v) for v in grid],
            "grid_rule": self.grid if isinstance(self.grid, (str, int)) else "array",
            "censoring": self.censoring,
            "time_name": str(time_name),
            "event_name": str(event_name),
            "max_time": float(t.max()),
            "subjects": int(t.size),
            "events": int(e.sum()),
            "expanded_rows": int(n_exp),
            **(extra or {}),
        }
        prior = kernel_prior(self._fit_tree_prior(na_action), None, likelihood=self.likelihood, tau2=tau * tau,
                             model_code=MODEL_NORMAL_KNOWN_VARIANCE, nu=self.nu, lam=1.0)
        problem = BartProblem(binned.codes, binned.is_categorical, binned.nbins, table.y.astype(np.float64), prior,
                              self.trees, SIGMA_PROBIT, center, predictor_names=tuple(all_names))

        def derived(posterior):
            posterior["mean_leaves"] = posterior["n_leaves"].mean(axis=2)
            posterior["mean_depth"] = posterior.pop("depth").mean(axis=2)
            del posterior["sigma"]

        return self._sample(problem, binned=binned, y=table.y.astype(np.int64), config=config, design=design,
                            derived=derived)

    @classmethod
    def from_formula(cls, formula: str, data, *, na_action: str | NaAction = "drop", **keywords):
        """Fit survival BART to a DataFrame from ``"Surv(time, event) ~ x1 + x2"`` (or ``~ .``).

        ``Surv``'s two arguments are column names (read, never evaluated); the right-hand side is
        an ordinary formula (see ``BART.from_formula``). ``na_action`` as there; a missing time or
        event drops the row (with a warning) or raises under ``"raise"``. :class:`CompetingRisksBART`
        reads the event column as cause codes 0 (censored), 1, 2, ... instead of 0/1.
        """
        from ..formula.surv import build_survival_design

        model = cls(**keywords)
        design, x, time, event, time_name, event_name = build_survival_design(
            formula, data, na_action=na_action, max_code=255 if issubclass(cls, CompetingRisksBART) else 1)
        kwargs = design_fit_keywords(design)
        kwargs.pop("class_labels", None)
        return model.fit(x, time, event, **kwargs, na_action=check_na_action(na_action), time_name=time_name,
                         event_name=event_name)


# --- competing risks (spec 1.8; BART3's crisk.bart) --------------------------------------------------

def check_causes(time, cause) -> tuple[np.ndarray, np.ndarray, int]:
    """Validated float64 times, uint8 cause codes (0 = censored, 1..J) and the number of causes J.

    Raises ``DataError`` for a bad time (as :func:`check_times`), a cause code that is not a
    whole number from 0 to 255, or a cause among 1..J with no event (its hazard cannot be
    estimated: renumber the causes).
    """
    c = np.asarray(cause)
    if c.ndim != 1:
        raise DataError(f"cause must hold one code per subject (a 1-D array); got shape {c.shape}")
    if c.dtype == bool:
        codes = c.astype(np.uint8)
    else:
        cf = np.asarray(c, dtype=np.float64) if c.dtype.kind in "iuf" else None
        ok = None if cf is None else (np.isfinite(cf) & (cf >= 0) & (cf <= 255) & (cf == np.round(cf)))
        if ok is None or not ok.all():
            first = 0 if ok is None else int(np.argmin(ok))
            value = c.reshape(-1)[first]
            value = value.item() if isinstance(value, np.generic) else value  # 1.5, not np.float64(1.5)
            raise DataError(f"the cause codes must be whole numbers: 0 (censored) or 1, 2, ... (the cause of the "
                            f"event); row {first} has {value!r}")
        codes = cf.astype(np.uint8)
    t, _ = check_times(time, codes > 0)
    n_causes = int(codes.max())
    absent = [k for k in range(1, n_causes + 1) if not np.any(codes == k)]
    if absent:
        raise DataError(f"cause(s) {absent} have no event (the codes run from 1 to {n_causes}): their hazard cannot "
                        "be estimated; number the causes that occur 1, 2, ... without gaps")
    return t, codes, n_causes


def expand_competing(time, cause, grid, censoring: str = "start_of_interval") -> list[PersonPeriod]:
    """Person-period tables of the J cause-specific probit models of competing risks (spec 1.8).

    The subjects are expanded once as in :func:`expand` with "event" meaning any cause (a subject
    with an event of any cause gets rows up to its event). Model c keeps the rows with no event
    of causes 1..c-1 (BART3's ``cond = which(y.train == 0)`` for two causes, chained for more), so
    P(cause c at a row at risk) = p_c prod_{c' < c} (1 - p_c'); its response is 1 at the event row
    of a subject whose cause is c.

    Parameters
    ----------
    time : array_like
        Observed times (> 0).
    cause : array_like
        0 = censored, 1..J = the cause of the event.
    grid : ndarray
        Increasing grid times.
    censoring : {"start_of_interval", "end_of_interval"}
        As in :func:`expand`.

    Returns
    -------
    list of PersonPeriod
        One table per cause 1..J; ``n_rows`` counts each subject's rows in that model.
    """
    cause = np.asarray(cause, dtype=np.int64)
    base = expand(time, cause > 0, grid, censoring)
    row_cause = np.where(base.y == 1, cause[base.subject], 0)  # the cause at each event row, 0 elsewhere
    tables = []
    for c in range(1, int(cause.max()) + 1):
        keep = ~((row_cause > 0) & (row_cause < c))
        subject = base.subject[keep]
        tables.append(PersonPeriod(base.grid, subject, base.period[keep], (row_cause[keep] == c).astype(np.uint8),
                                   np.bincount(subject, minlength=cause.size).astype(np.int64)))
    return tables


@with_run_keywords
class CompetingRisksBART(SurvivalBART):
    """Competing-risks BART (Sparapani et al. 2020; R's ``BART::crisk.bart``): one probit BART per cause.

    ``CompetingRisksBART.from_formula("Surv(time, cause) ~ x1 + x2", data=df, ...)`` fits it, with
    ``cause`` holding codes 0 (censored), 1, 2, ... (``bps.bart`` keeps reading the second argument
    of ``Surv`` as a 0/1 event, so that a stray code is an error, not another model);
    ``fit.predict(new, kind="cif", times=[...])`` gives the cumulative incidence of each cause
    with intervals.

    Model c is probit survival BART on the person-period rows with no event of an earlier cause
    at that row (:func:`expand_competing`): p_c(t, x) = P(cause c at t | at risk, no event of
    causes 1..c-1 at t). Given the rows, the likelihood factorises over the causes, so with
    independent priors the posterior is a product: the J fits are independent (each with its own
    offset Phi^-1 of its share of event rows and its own seed, spawned from ``seed``), and draw d
    of one is paired with draw d of the others (spec 1.8). Then, per draw,
    S(g_j) = prod_{l <= j} prod_c (1 - p_c,l) and
    CIF_c(g_j) = sum_{l <= j} S(g_{l-1}) p_c,l prod_{c' < c} (1 - p_c',l), so that
    S + sum_c CIF_c = 1 at every grid time.

    Parameters
    ----------
    grid, censoring, trees, alpha, beta, k, max_cuts, min_leaf_size
        As for :class:`SurvivalBART`; the grid is built from the times with an event of any cause.
    **run_keywords
        The run keywords every model shares (``models.settings.RunSettings``), put here at import.
    """

    def fit(self, X, time, cause, *, is_categorical=None, n_levels=None, predictor_names=None, design=None,
            na_action="raise", time_name="time", event_name="cause"):
        """Sample the posterior of each cause's model given predictors ``X`` (n, p), observed times
        ``time`` (n,) and cause codes ``cause`` (n,; 0 = censored, 1..J).

        Returns
        -------
        bartpy_suite.posterior.survival.CompetingRisksFit
            The J cause fits (``fits``), predicting cumulative incidence (``kind="cif"``) and
            all-cause survival (``kind="survival"``).
        """
        from ..posterior.survival import CompetingRisksFit

        na_action = check_na_action(na_action)
        if na_action is NaAction.DROP:
            X, time, cause = drop_missing_rows(X, time, cause)
        t, codes, n_causes = check_causes(time, cause)
        x, is_cat, levels, names = self._covariates(X, t, is_categorical, n_levels, predictor_names, na_action,
                                                    time_name)
        any_event = (codes > 0).astype(np.uint8)
        grid = make_grid(t, any_event, self.grid)
        tables = expand_competing(t, codes, grid, self.censoring)
        seeds = (self.seed if isinstance(self.seed, np.random.SeedSequence)
                 else np.random.SeedSequence(self.seed)).spawn(n_causes)
        fits = []
        for c, (table, seed) in enumerate(zip(tables, seeds), start=1):
            if not table.y.any():
                raise DataError(f"no event of cause {c} falls at or before the last grid time {grid[-1]!r}: its "
                                "hazard cannot be estimated; extend the grid")
            model = copy.copy(self)
            model.run = replace(self.run, seed=seed)
            fits.append(model._fit_table(x, is_cat, levels, names, time_name, event_name, t, codes == c, table,
                                         design, na_action, extra={"cause": c, "causes": n_causes,
                                                                   "any_events": int(any_event.sum())}))
        return CompetingRisksFit(fits)

