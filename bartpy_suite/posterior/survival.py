"""Survival, hazard, cumulative hazard and median survival from the draws of a survival BART fit
(``models/survival.py``; spec ``/work/shared/specs/outcomes.md`` section 1.7).

For draw d and covariates x, eta_j = mu0 + f_d(g_j, x) on the grid g_1 < ... < g_K and
p_j = Phi(eta_j) is the discrete hazard. Then

* S_d(g_j | x) = prod_{l <= j} (1 - p_l), computed as exp(sum_{l <= j} log Phi(-eta_l)) with
  scipy's stable ``log_ndtr`` (never 1 - Phi(eta) by subtraction);
* S is a step function: S(t) = S(g_{J*(t)}) with J*(t) = max{j : g_j <= t}, S = 1 before g_1,
  S(g_K) between g_K and the largest observed time, and NaN (with a warning) beyond the largest
  observed time, where the model does not extrapolate;
* the cumulative hazard is -log S (the same step function), the hazard p_j exists at the grid
  times only (other times are refused), and the median survival time of a draw is
  min{g_j : S(g_j) <= 1/2}, +inf when S never reaches 1/2 on the grid;
* the restricted mean survival time RMST(tau) is the integral of that step function from 0 to
  tau: sum_{j: g_j <= tau} S(g_{j-1}) (g_j - g_{j-1}) + S(g_{J*(tau)}) (tau - g_{J*(tau)}), with
  g_0 = 0 and S(g_0) = 1 (NaN beyond the largest observed time, like S).

Every per-draw S is non-increasing in t, and therefore so are its posterior mean and each
pointwise quantile. Prediction evaluates the stored trees at (g_j, x) for every grid time; the
rows are processed in blocks so that at most about 2^23 (draw, row, time) values are held.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr
from scipy import special

from .. import _validation as check
from ..errors import ArgumentError, BartpySuiteWarning, DataError
from .prediction_table import missing_rows, new_rows, with_missing_rows
from .weighted import weighted_quantiles

KINDS = ("survival", "hazard", "cumhaz", "median", "rmst")
#: (draw, row, grid time) values evaluated at once.
BLOCK_VALUES = 1 << 23
_LABEL = {"survival": "S", "hazard": "h", "cumhaz": "H", "rmst": "RMST"}


def is_survival_fit(fit) -> bool:
    """Whether ``fit`` is a survival BART fit."""
    return bool(fit.config.get("survival"))


def settings(fit) -> dict:
    """The survival settings stored in the fit's configuration."""
    return fit.config["survival"]


def _new_x(fit, newdata) -> tuple[np.ndarray, pd.Index]:
    """The rows of ``newdata`` as float covariates (m, p) (the predictors after the time)."""
    names = fit.predictors[1:]
    if newdata is None:
        raise ArgumentError("a survival fit predicts for given covariates: pass newdata (e.g. the training "
                            "DataFrame); the training subjects are not stored, only their person-period rows")
    if isinstance(newdata, pd.DataFrame):
        if fit.design is not None:
            return fit.design.transform(newdata, na_action="split"), newdata.index
        absent = [c for c in names if c not in newdata.columns]
        if absent:
            raise DataError(f"newdata lacks the predictor column(s) {absent}; the model's covariates are {names}")
        return new_rows(newdata[names], names), newdata.index
    if isinstance(newdata, (dict, pd.Series)):
        raise DataError("newdata must be a DataFrame or a 2-D array of the covariates (not the time)")
    x = new_rows(newdata, names)
    return x, pd.RangeIndex(x.shape[0])


def _check_times(fit, kind: str, times) -> np.ndarray:
    grid = np.asarray(settings(fit)["grid"])
    if times is None:
        return grid.copy()
    t = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if t.ndim != 1 or t.size == 0:
        raise ArgumentError(f"times must be a non-empty list of times; got {times!r}")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ArgumentError(f"times must be finite and >= 0; got {times!r}")
    if kind == "hazard":
        on_grid = np.isin(t, grid)
        if not on_grid.all():
            bad = t[~on_grid][0]
            j = int(np.clip(np.searchsorted(grid, bad), 1, grid.size - 1))
            raise ArgumentError(
                f"the discrete hazard exists at the grid times only; {bad!r} is not one (nearest: "
                f"{grid[j - 1]!r}, {grid[j]!r}). Use times=None for the whole grid (fit.config['survival']['grid']), "
                "or kind='cumhaz' / 'survival', which are step functions defined at every time")
    return t


def eta_blocks(fit, x: np.ndarray):
    """Yield ``(rows, eta)`` per block of rows of ``x`` (m, p): eta = mu0 + f_d(g_j, x) of shape
    (samples, block rows, K), samples chain-major."""
    grid = np.asarray(settings(fit)["grid"])
    k = grid.size
    samples = fit.tree_store["roots"].shape[0]
    block = max(1, BLOCK_VALUES // max(1, samples * k))
    for start in range(0, x.shape[0], block):
        rows = slice(start, min(start + block, x.shape[0]))
        m = rows.stop - rows.start
        full = np.empty((m * k, x.shape[1] + 1))
        full[:, 0] = np.tile(grid, m)
        full[:, 1:] = np.repeat(x[rows], k, axis=0)
        codes = np.ascontiguousarray(fit.binned.transform(full))
        yield rows, fit.sum_of_trees(codes).reshape(samples, m, k)


def log_survival(eta: np.ndarray) -> np.ndarray:
    """log S(g_j) = sum_{l <= j} log Phi(-eta_l) along the last axis (stable for large eta)."""
    return np.cumsum(special.log_ndtr(-eta), axis=-1)


def quantiles_with_infinity(values: np.ndarray, weights: np.ndarray, probs) -> np.ndarray:
    """``weighted_quantiles`` of draws that may be +inf (a median survival time that the draw's S
    never reaches): a quantile that falls among or next to the infinite draws is +inf, never the
    NaN of inf - inf in numpy's linear interpolation.

    Parameters
    ----------
    values : numpy.ndarray
        Draws, shape (S, m), finite or +inf (NaN stays NaN).
    weights : numpy.ndarray
        Non-negative weights, shape (S,).
    probs : array_like
        Probabilities in [0, 1].

    Returns
    -------
    numpy.ndarray
        Shape ``(len(probs), m)``.
    """
    infinite = np.isposinf(values)
    if not infinite.any():
        return weighted_quantiles(values, weights, probs)
    finite_max = np.nanmax(np.where(infinite, -np.inf, values)) if (~infinite).any() else 0.0
    # a finite stand-in above every finite draw, so far above that interpolating towards it by
    # any non-zero fraction lands past finite_max: those quantiles are +inf
    stand_in = np.finfo(float).max / 4
    q = weighted_quantiles(np.where(infinite, stand_in, values), weights, probs)
    return np.where(q > max(finite_max, 0.0), np.inf, q)


def draws(fit, x: np.ndarray, kind: str, times: np.ndarray) -> np.ndarray:
    """Per-draw values (samples, rows, len(times)) of ``kind`` at ``times`` (median: (samples,
    rows, 1)) for covariate rows ``x`` (m, p)."""
    cfg = settings(fit)
    grid = np.asarray(cfg["grid"])
    samples = fit.tree_store["roots"].shape[0]
    width = 1 if kind == "median" else times.size
    out = np.empty((samples, x.shape[0], width))
    where = np.searchsorted(grid, times, side="right") - 1  # J*(t) - 1; -1 before g_1
    beyond = times > cfg["max_time"]
    for rows, eta in eta_blocks(fit, x):
        if kind == "hazard":
            out[:, rows, :] = special.ndtr(eta[:, :, where])
            continue
        logs = log_survival(eta)
        if kind == "median":
            below = logs <= np.log(0.5)
            first = np.argmax(below, axis=-1)
            out[:, rows, 0] = np.where(below.any(axis=-1), grid[first], np.inf)
            continue
        padded = np.concatenate([np.zeros(logs.shape[:2] + (1,)), logs], axis=-1)  # log S = 0 before g_1
        picked = padded[:, :, where + 1]
        if kind == "rmst":
            # integral of the step function: S(g_{j-1}) on (g_{j-1}, g_j], g_0 = 0 and S(g_0) = 1
            surv = np.exp(padded)
            knots = np.concatenate([[0.0], grid])
            area = np.concatenate([np.zeros(surv.shape[:2] + (1,)), np.cumsum(surv[:, :, :-1] * np.diff(knots),
                                                                              axis=-1)], axis=-1)
            out[:, rows, :] = area[:, :, where + 1] + np.exp(picked) * (times - knots[where + 1])
        else:
            out[:, rows, :] = np.exp(picked) if kind == "survival" else -picked
        out[:, rows, beyond] = np.nan
    return out


def predict(fit, newdata, kind: str = "survival", level: float = 0.95, samples: bool = False,
            na_action: str | None = None, times=None):
    """``Fit.predict`` of a survival fit (see there); ``kind`` in ``KINDS``."""
    if not is_survival_fit(fit) and times is not None and kind not in KINDS:
        raise ArgumentError("times= applies to survival fits (a formula 'Surv(time, event) ~ ...'); this fit "
                            "models an ordinary response")
    if not is_survival_fit(fit):
        raise ArgumentError(f"kind={kind!r} needs a survival fit, made from a formula 'Surv(time, event) ~ ...' "
                            "(or SurvivalBART().fit); this fit models an ordinary response")
    cause = settings(fit).get("cause")
    if cause is not None:
        causes = settings(fit).get("causes")
        raise ArgumentError(
            f"this is the fit of cause {cause} of {causes} of competing-risks BART: its trees model the probability "
            f"of cause {cause} at rows with no event of an earlier cause, so a survival curve, hazard or median of "
            f"its own is not that of any outcome; pass all {causes} cause fits, in cause order, to "
            "bartpy_suite.posterior.survival.CompetingRisksFit([...]) and predict kind='cif' or 'survival' there")
    if kind not in KINDS:
        raise ArgumentError(f"a survival fit predicts kind='survival', 'hazard', 'cumhaz', 'median' or 'rmst'; got "
                            f"kind={kind!r} (the probit scale of the person-period rows is not a prediction of "
                            "the response)")
    level = check.check_open_unit("level", level)
    if kind == "median" and times is not None:
        raise ArgumentError("kind='median' takes no times= (it is a time itself)")
    t = _check_times(fit, kind, times)
    cfg = settings(fit)
    if kind != "median" and np.any(t > cfg["max_time"]):
        warnings.warn(
            f"times beyond the largest observed time {cfg['max_time']!r} ({t[t > cfg['max_time']].tolist()}) get "
            "NaN: the model does not extrapolate past the follow-up", BartpySuiteWarning, stacklevel=3)
    x, index = _new_x(fit, newdata)
    names = fit.predictors[1:]
    ok = missing_rows(x, index, names, na_action, fit.routes_missing)
    if ok is not None:
        x = x[ok]
    nbins = fit.binned.nbins
    for v in np.flatnonzero(fit.binned.is_categorical[1:]):
        bad = (x[:, v] < 0) | (x[:, v] >= nbins[v + 1])
        if bad.any():
            raise DataError(f"predictor {names[v]!r} holds level codes unseen in training")
    values = draws(fit, x, kind, t)
    rows = index if ok is None else index[ok]
    shape = (fit.posterior.sizes["chain"], fit.posterior.sizes["draw"])
    if samples:
        coords = {"time": t} if kind != "median" else {}
        dims = ("chain", "draw", "obs", "time")
        out = xr.DataArray(values.reshape(*shape, len(rows), values.shape[-1]), dims=dims, coords=coords,
                           name=kind)
        if kind == "median":
            out = out.isel(time=0, drop=True)
        return with_missing_rows(out, ok, index)
    w = fit.flat_weights
    probs = [(1 - level) / 2, 0.5, (1 + level) / 2]
    flat = values.reshape(values.shape[0], -1)
    q = quantiles_with_infinity(flat, w, probs).reshape((3,) + values.shape[1:])
    table = {}
    if kind == "median":
        table["median"] = q[1, :, 0]
        table["median_lower"] = q[0, :, 0]
        table["median_upper"] = q[2, :, 0]
        table["p_undefined"] = np.tensordot(w / w.sum(), np.isinf(values[:, :, 0]), axes=(0, 0))
    else:
        mean = np.tensordot(w / w.sum(), values, axes=(0, 0))
        for j, tj in enumerate(t):
            name = f"{_LABEL[kind]}({tj:g})"
            table[f"{name}_mean"] = mean[:, j]
            table[f"{name}_lower"] = q[0, :, j]
            table[f"{name}_upper"] = q[2, :, j]
    return with_missing_rows(pd.DataFrame(table, index=rows), ok, index)


# --- competing risks (spec 1.8) --------------------------------------------------------------------

CRISK_KINDS = ("cif", "survival")


class CompetingRisksFit:
    """The J cause-specific fits of competing-risks BART (``models/survival.py``,
    ``CompetingRisksBART``) and their joint predictions.

    Draw d of every cause fit is paired with draw d of the others (the posteriors are independent,
    so any pairing is valid; spec 1.8). Per draw and row, with p_c,l = Phi(eta_c(g_l, x)):
    S(g_j) = prod_{l <= j} prod_c (1 - p_c,l) and
    CIF_c(g_j) = sum_{l <= j} S(g_{l-1}) p_c,l prod_{c' < c} (1 - p_c',l), computed in log space
    (scipy's ``log_ndtr``), so that S + sum_c CIF_c = 1 at every grid time to rounding. Both are
    step functions of t like :func:`draws`: 1 and 0 before g_1, constant between grid times up to
    the largest observed time, NaN beyond it.

    Attributes
    ----------
    fits : tuple of Fit
        ``fits[c - 1]`` is the probit survival fit of cause c (its ``config["survival"]["cause"]``).
    """

    def __init__(self, fits) -> None:
        self.fits = tuple(fits)
        shapes = {(f.posterior.sizes["chain"], f.posterior.sizes["draw"]) for f in self.fits}
        if not self.fits or len(shapes) != 1:
            raise ArgumentError("a competing-risks fit needs one cause fit per cause, all with the same chains and "
                                "draws (they are paired draw by draw)")
        self._check_causes()

    def _check_causes(self) -> None:
        """The fits are CompetingRisksBART's cause fits 1..J of one model, in cause order: cause c's
        model conditions on no event of causes 1..c-1, and the incidences combine the fits on one
        grid, so a swapped, repeated, missing or foreign fit would give wrong numbers silently."""
        hint = ("pass the cause fits of one CompetingRisksBART fit in cause order (its .fits, or those files "
                "loaded with bps.load)")
        first = None
        for c, f in enumerate(self.fits, start=1):
            s = f.config.get("survival")
            if not isinstance(s, dict) or "cause" not in s or "causes" not in s:
                raise ArgumentError(f"fits[{c - 1}] is not a cause fit of CompetingRisksBART; {hint}")
            if s["causes"] != len(self.fits):
                n = len(self.fits)
                raise ArgumentError(f"{n} fit{'s' if n != 1 else ''} given for {s['causes']} causes "
                                    f"(fits[{c - 1}] is the fit of cause {s['cause']} of {s['causes']}); {hint}")
            if s["cause"] != c:
                raise ArgumentError(f"fits[{c - 1}] is the fit of cause {s['cause']} of {s['causes']}, expected "
                                    f"cause {c}; {hint}")
            if first is None:
                first = s
                continue
            for key in ("grid", "max_time", "time_name", "any_events"):
                if s.get(key) != first.get(key):
                    raise ArgumentError(f"fits[{c - 1}] has another survival {key} than fits[0] ({s.get(key)!r} vs "
                                        f"{first.get(key)!r}): it comes from another model; {hint}")
            if f.predictors != self.fits[0].predictors:
                raise ArgumentError(f"fits[{c - 1}] has other predictors than fits[0] ({f.predictors} vs "
                                    f"{self.fits[0].predictors}); {hint}")

    @property
    def causes(self) -> int:
        """The number of causes J."""
        return len(self.fits)

    @property
    def grid(self) -> np.ndarray:
        """The common time grid g_1 < ... < g_K."""
        return np.asarray(settings(self.fits[0])["grid"])

    @property
    def predictors(self) -> list[str]:
        """The covariates (the time, the trees' first predictor, excluded)."""
        return list(self.fits[0].predictors[1:])

    @property
    def weights(self) -> np.ndarray:
        """Flat (chain-major) weight of each paired draw: the product of the causes' draw weights."""
        w = np.ones(self.fits[0].flat_weights.size)
        for f in self.fits:
            w = w * f.flat_weights
        return w

    def __repr__(self) -> str:
        f = self.fits[0]
        return (f"CompetingRisksFit({self.causes} causes, {f.posterior.sizes['chain']} chains x "
                f"{f.posterior.sizes['draw']} draws, grid of {self.grid.size} times, covariates {self.predictors})")

    def draws(self, x: np.ndarray, times) -> tuple[np.ndarray, np.ndarray]:
        """Per-draw all-cause survival (samples, rows, len(times)) and cumulative incidences
        (samples, rows, causes, len(times)) at ``times`` for covariate rows ``x`` (m, p)."""
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        grid = self.grid
        cfg = settings(self.fits[0])
        samples = self.fits[0].tree_store["roots"].shape[0]
        surv = np.empty((samples, x.shape[0], times.size))
        cif = np.empty((samples, x.shape[0], self.causes, times.size))
        where = np.searchsorted(grid, times, side="right") - 1  # -1 before g_1
        beyond = times > cfg["max_time"]
        for blocks in zip(*(eta_blocks(f, x) for f in self.fits)):
            rows = blocks[0][0]
            log_none = np.zeros(blocks[0][1].shape)  # log P(no event of the causes so far at g_l)
            increments = []
            for _, eta in blocks:
                increments.append(log_none + special.log_ndtr(eta))  # log of prod_{c' < c}(1 - p_c') p_c
                log_none = log_none + special.log_ndtr(-eta)
            log_s = np.cumsum(log_none, axis=-1)
            log_s_before = np.concatenate([np.zeros(log_s.shape[:2] + (1,)), log_s[..., :-1]], axis=-1)
            s_padded = np.concatenate([np.ones(log_s.shape[:2] + (1,)), np.exp(log_s)], axis=-1)
            surv[:, rows, :] = s_padded[:, :, where + 1]
            for c, inc in enumerate(increments):
                cum = np.cumsum(np.exp(log_s_before + inc), axis=-1)
                padded = np.concatenate([np.zeros(cum.shape[:2] + (1,)), cum], axis=-1)
                cif[:, rows, c, :] = padded[:, :, where + 1]
        surv[:, :, beyond] = np.nan
        cif[..., beyond] = np.nan
        return surv, cif

    def predict(self, newdata, kind: str = "cif", times=None, level: float = 0.95, samples: bool = False):
        """Cumulative incidence of each cause, or all-cause survival, with credible intervals.

        Parameters
        ----------
        newdata : DataFrame or array
            Covariate rows (as for ``Fit.predict`` of a survival fit; rows with a missing
            covariate are an error unless the fits route them).
        kind : {"cif", "survival"}
            "cif": columns ``CIF<c>(t)_mean``, ``_lower``, ``_upper`` per cause c and time t;
            "survival": the probability of no event of any cause, ``S(t)_mean``, ...
        times : array_like or None
            Times t (default: the grid). Beyond the largest observed time: NaN with a warning.
        level : float
            Probability of the equal-tailed intervals.
        samples : bool
            Return the draws as an ``xarray.DataArray``: (chain, draw, obs, cause, time) for
            "cif", (chain, draw, obs, time) for "survival".

        Returns
        -------
        pandas.DataFrame or xarray.DataArray
            Indexed like ``newdata``. Means and intervals honour the draws' weights.
        """
        kind = check.check_choice("kind", kind, CRISK_KINDS)
        level = check.check_open_unit("level", level)
        samples = check.check_bool("samples", samples)
        t = _check_times(self.fits[0], kind, times)
        max_time = settings(self.fits[0])["max_time"]
        if np.any(t > max_time):
            warnings.warn(f"times beyond the largest observed time {max_time!r} ({t[t > max_time].tolist()}) get "
                          "NaN: the model does not extrapolate past the follow-up", BartpySuiteWarning, stacklevel=2)
        fit = self.fits[0]
        x, index = _new_x(fit, newdata)
        names = fit.predictors[1:]
        # None: the fits decide (a na_action="split" fit routes missing values, any other raises naming the rows)
        missing_rows(x, index, names, None, fit.routes_missing)
        nbins = fit.binned.nbins
        for v in np.flatnonzero(fit.binned.is_categorical[1:]):
            bad = (x[:, v] < 0) | (x[:, v] >= nbins[v + 1])
            if bad.any():
                raise DataError(f"predictor {names[v]!r} holds level codes unseen in training")
        surv, cif = self.draws(x, t)
        shape = (fit.posterior.sizes["chain"], fit.posterior.sizes["draw"])
        if samples:
            if kind == "survival":
                return xr.DataArray(surv.reshape(*shape, *surv.shape[1:]), dims=("chain", "draw", "obs", "time"),
                                    coords={"time": t}, name="survival")
            return xr.DataArray(cif.reshape(*shape, *cif.shape[1:]), dims=("chain", "draw", "obs", "cause", "time"),
                                coords={"cause": np.arange(1, self.causes + 1), "time": t}, name="cif")
        w = self.weights
        w = w / w.sum()
        probs = [(1 - level) / 2, (1 + level) / 2]
        table = {}
        parts = [("S", surv)] if kind == "survival" else [(f"CIF{c + 1}", cif[:, :, c, :]) for c in range(self.causes)]
        for label, values in parts:
            mean = np.tensordot(w, values, axes=(0, 0))
            q = weighted_quantiles(values.reshape(values.shape[0], -1), w, probs).reshape((2,) + values.shape[1:])
            for j, tj in enumerate(t):
                table[f"{label}({tj:g})_mean"] = mean[:, j]
                table[f"{label}({tj:g})_lower"] = q[0, :, j]
                table[f"{label}({tj:g})_upper"] = q[1, :, j]
        return pd.DataFrame(table, index=index)
