"""The posterior of a Bayesian causal forest fit (``bps.bcf``; issue 30, "Causal"; spec
multi_forest.md 3.7): treatment effects computed draw by draw from the two forests' stored trees.

Per kept draw s, on the original scale (spec 3.7, bcf's ``tau`` and ``mu``):

    CATE_i = s_y (b_1 - b_0) t(x_i),    mu_0(x_i) = ybar + s_y (s_m m(x_i) + b_0 t(x_i))

and ``ATE = mean_i CATE_i``, ``ATT`` over the treated rows, ``ATC`` over the controls; a summary is the
mean over draws with equal-tailed quantile intervals. Only these identified functions are reported:
t, m, b_k and s_m alone flip sign and drift (spec 7).

Import rule: imports numpy, pandas, ``_kernels``, ``errors`` and ``_binning`` only (the propensity
model is a ``Fit`` held by duck typing).
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from .._binning import BinnedPredictors
from .._kernels.predict import sum_of_trees
from .._kernels.record import right_children, tree_roots
from ..errors import ArgumentError, BartpySuiteWarning, DataError, FitFileError
from .file_check import preorder_problem

#: Propensity bounds of the common-support diagnostic (rows outside are counted and warned about).
SUPPORT_LOW = 0.05
SUPPORT_HIGH = 0.95


class CommonSupportWarning(BartpySuiteWarning):
    """Rows whose estimated propensity is near 0 or 1: their treatment effect rests on extrapolation."""


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise ArgumentError(f"level must be a number strictly between 0 and 1 (got {level!r})")
    return float(level)


class ForestStore:
    """One forest's kept trees over all chains, in the prediction kernels' dtypes (draws chain-major)."""

    def __init__(self, stores: list, binned, names: list[str]):
        self.var = np.ascontiguousarray(np.concatenate([s.var for s in stores]), dtype=np.int32)
        self.cut = np.ascontiguousarray(np.concatenate([s.cut for s in stores]), dtype=np.int64)
        self.value = np.ascontiguousarray(np.concatenate([s.value for s in stores]), dtype=np.float64)
        counts = np.concatenate([s.tree_nodes for s in stores]).astype(np.int64)
        self._finish(counts, binned, names)

    @classmethod
    def from_arrays(cls, var, cut, value, counts, binned, names) -> ForestStore:
        """A store from its flat node arrays and node counts (samples, trees), e.g. read from a file."""
        store = cls.__new__(cls)
        store.var = np.ascontiguousarray(var, dtype=np.int32)
        store.cut = np.ascontiguousarray(cut, dtype=np.int64)
        store.value = np.ascontiguousarray(value, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.int64)
        if counts.ndim != 2 or int(counts.sum()) != store.var.shape[0] or store.cut.shape != store.var.shape \
                or store.value.shape != store.var.shape or (counts < 1).any():
            raise ValueError("the node arrays do not match the node counts")
        if store.var.size and (store.var.max() >= binned.nbins.shape[0] or store.var.min() < -1):
            raise ValueError("a split variable is out of range")
        problem = preorder_problem(store.var, counts.reshape(-1))
        if problem:  # the prediction kernels would walk into another tree's nodes or past the array
            raise ValueError(f"a stored tree is not a whole binary tree in preorder ({problem})")
        store._finish(counts, binned, names)
        return store

    def _finish(self, counts, binned, names) -> None:
        self.counts = counts
        self.right = right_children(self.var, counts)
        self.roots = tree_roots(counts)
        self.binned = binned
        self.names = list(names)

    def raw_sum(self, codes: np.ndarray) -> np.ndarray:
        """The forest's raw sum of leaf values (samples, rows) at binned rows ``codes`` (p, m)."""
        out = np.zeros((self.roots.shape[0], codes.shape[1]))
        sum_of_trees(np.ascontiguousarray(codes, dtype=np.int32), np.asarray(self.binned.is_categorical, dtype=bool),
                     self.var, self.cut, self.right, self.value, self.roots, out)
        return out


class CausalFit:
    """A fitted Bayesian causal forest (``bps.bcf``).

    Attributes
    ----------
    params : pandas.DataFrame
        Per kept draw (chain-major, column ``chain``): ``sigma`` (original scale) and the working
        parameters ``b0``, ``b1``, ``mu_scale`` (s_m), ``delta_mu``.
    propensity : numpy.ndarray
        The propensity of each training row used by the mu forest (clipped to [0.01, 0.99] when
        estimated).
    propensity_fit : Fit or None
        The probit BART fit of the treatment that estimated it (None for a user column).
    treatment : str
        The treatment column.
    config : dict
        The settings of the fit.
    """

    def __init__(self, *, params: np.ndarray, chains: int, mu: ForestStore, tau: ForestStore, n_leaves: dict,
                 counts: np.ndarray, center: float, scale: float, y: np.ndarray, z: np.ndarray,
                 propensity: np.ndarray, propensity_fit, designs: dict, config: dict, index):
        self._params = params  # (samples, 5) on the working scale
        self.chains = int(chains)
        self.mu = mu
        self.tau = tau
        self.n_leaves = n_leaves
        self.move_counts = counts
        self.center = float(center)
        self.scale = float(scale)
        self.y = y
        self.z = z
        self.propensity = propensity
        self.propensity_fit = propensity_fit
        self.designs = designs
        self.config = config
        self.treatment = config["treatment"]
        self.index = index
        self._train = None

    # -- draws -----------------------------------------------------------------------------------
    @property
    def params(self) -> pd.DataFrame:
        """The kept scalar draws (module docstring); ``sigma`` on the response's scale."""
        p = self._params
        per_chain = p.shape[0] // self.chains
        return pd.DataFrame({"chain": np.repeat(np.arange(self.chains), per_chain), "sigma": p[:, 0] * self.scale,
                             "b0": p[:, 1], "b1": p[:, 2], "mu_scale": p[:, 3], "delta_mu": p[:, 4]})

    def _draws_at(self, mu_codes: np.ndarray, tau_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(CATE, mu_0) per sample and row (samples, rows) at binned rows."""
        p = self._params
        b0, b1, sm = p[:, 1:2], p[:, 2:3], p[:, 3:4]
        t = self.tau.raw_sum(tau_codes)
        m = self.mu.raw_sum(mu_codes)
        return self.scale * (b1 - b0) * t, self.center + self.scale * (sm * m + b0 * t)

    def _training_draws(self) -> tuple[np.ndarray, np.ndarray]:
        if self._train is None:
            self._train = self._draws_at(self.mu.binned.codes, self.tau.binned.codes)
        return self._train

    def cate_draws(self, new=None) -> np.ndarray:
        """CATE per sample (chain-major) and row: the training rows, or the rows of ``new``."""
        if new is None:
            return self._training_draws()[0]
        return self._draws_at(*self._codes(new))[0]

    def _codes(self, new) -> tuple[np.ndarray, np.ndarray]:
        """The binned mu and tau predictors of new rows (the propensity from the stored model or the
        user's column)."""
        if not isinstance(new, pd.DataFrame):
            raise ArgumentError(f"new rows must be a pandas DataFrame (got {type(new).__name__})")
        x_mu = self.designs["mu"].transform(new)
        pi = self._new_propensity(new)
        x_mu = np.column_stack([x_mu, pi])
        x_tau = self.designs["tau"].transform(new)
        return self.mu.binned.transform(x_mu), self.tau.binned.transform(x_tau)

    def _new_propensity(self, new: pd.DataFrame) -> np.ndarray:
        column = self.config.get("propensity_column")
        if column is not None:
            if column not in new.columns:
                raise DataError(f"new rows lack the propensity column {column!r} the fit was given")
            pi = np.asarray(new[column], dtype=np.float64)
            if not np.all((pi > 0) & (pi < 1)):
                raise DataError(f"propensity column {column!r} of the new rows must lie strictly between 0 and 1")
            return pi
        prob = self.propensity_fit.predict(new.assign(**{self.treatment: False}) if self.treatment in new.columns
                                           else new)
        return np.clip(prob["prob_True"].to_numpy(dtype=np.float64), *self.config["propensity_clip"])

    # -- summaries -------------------------------------------------------------------------------
    @staticmethod
    def _interval(draws: np.ndarray, level: float) -> tuple[float, float, float]:
        a = (1.0 - level) / 2.0
        return float(np.mean(draws)), float(np.quantile(draws, a)), float(np.quantile(draws, 1.0 - a))

    def _average_effect(self, rows: np.ndarray, name: str, level) -> pd.Series:
        level = _check_level(level)
        if not rows.any():
            raise DataError(f"no training rows for the {name}: treatment column {self.treatment!r} has none")
        per_draw = self._training_draws()[0][:, rows].mean(axis=1)
        mean, lower, upper = self._interval(per_draw, level)
        return pd.Series({"mean": mean, "sd": float(np.std(per_draw, ddof=1)), "lower": lower, "upper": upper,
                          "level": level}, name=name)

    def ate_draws(self) -> np.ndarray:
        """The sample ATE per kept draw (chain-major): the mean of the training rows' CATE."""
        return self._training_draws()[0].mean(axis=1)

    def ate(self, level: float = 0.95) -> pd.Series:
        """The (sample-conditional) average treatment effect: posterior mean, sd and equal-tailed interval
        of mean_i CATE_i over the training rows, draw by draw (spec 3.7).

        Parameters
        ----------
        level : float
            Interval probability.

        Returns
        -------
        pandas.Series
            ``mean``, ``sd``, ``lower``, ``upper``, ``level``.
        """
        return self._average_effect(np.ones(self.z.shape[0], dtype=bool), "ATE", level)

    def att(self, level: float = 0.95) -> pd.Series:
        """The average treatment effect on the treated (the CATE averaged over rows with z = 1); as ``ate``."""
        return self._average_effect(self.z == 1, "ATT", level)

    def atc(self, level: float = 0.95) -> pd.Series:
        """The average treatment effect on the controls (rows with z = 0); as ``ate``."""
        return self._average_effect(self.z == 0, "ATC", level)

    def cate(self, new=None, level: float = 0.95) -> pd.DataFrame:
        """The conditional average treatment effect per row: posterior mean and equal-tailed interval.

        Parameters
        ----------
        new : pandas.DataFrame, optional
            New rows (the predictors of the formula, and of ``tau_formula``; the treatment column is not
            needed). None: the training rows.
        level : float
            Interval probability.

        Returns
        -------
        pandas.DataFrame
            ``mean``, ``lower``, ``upper`` per row (indexed like the rows).
        """
        level = _check_level(level)
        draws = self.cate_draws(new)
        a = (1.0 - level) / 2.0
        index = self.index if new is None else new.index
        return pd.DataFrame({"mean": draws.mean(axis=0), "lower": np.quantile(draws, a, axis=0),
                             "upper": np.quantile(draws, 1.0 - a, axis=0)}, index=index)

    def predict(self, new=None, level: float = 0.95) -> pd.DataFrame:
        """E[y | x, z] = mu_0(x) + z CATE(x) per row with its interval; ``new`` must hold the treatment
        column (0/1). None: the training rows.

        Returns
        -------
        pandas.DataFrame
            ``mean``, ``lower``, ``upper`` per row.
        """
        level = _check_level(level)
        if new is None:
            cate, mu0 = self._training_draws()
            z = self.z
            index = self.index
        else:
            if not isinstance(new, pd.DataFrame) or self.treatment not in new.columns:
                raise DataError(f"predict needs the treatment column {self.treatment!r} in the new rows "
                                "(use cate(new) for the treatment effect alone)")
            z = treatment_codes(new[self.treatment], self.treatment, allow_constant=True)
            cate, mu0 = self._draws_at(*self._codes(new))
            index = new.index
        f = mu0 + z[None, :] * cate
        a = (1.0 - level) / 2.0
        return pd.DataFrame({"mean": f.mean(axis=0), "lower": np.quantile(f, a, axis=0),
                             "upper": np.quantile(f, 1.0 - a, axis=0)}, index=index)

    def common_support(self) -> dict:
        """Rows whose propensity lies below ``SUPPORT_LOW`` or above ``SUPPORT_HIGH`` (their count, and
        the share of rows)."""
        pi = self.propensity
        low = int(np.sum(pi < SUPPORT_LOW))
        high = int(np.sum(pi > SUPPORT_HIGH))
        return {"below": low, "above": high, "share": (low + high) / pi.shape[0], "low": SUPPORT_LOW,
                "high": SUPPORT_HIGH}

    def warn_common_support(self, stacklevel: int = 3) -> None:
        """Warn (``CommonSupportWarning``) when some rows lie outside the common-support bounds."""
        cs = self.common_support()
        if cs["below"] + cs["above"]:
            warnings.warn(
                f"{cs['below'] + cs['above']} of {self.propensity.shape[0]} rows have an estimated propensity "
                f"below {SUPPORT_LOW} ({cs['below']}) or above {SUPPORT_HIGH} ({cs['above']}): their treatment "
                "effects extrapolate from the other arm; check overlap before trusting the CATE there",
                CommonSupportWarning, stacklevel=stacklevel)

    def summary(self, level: float = 0.95) -> pd.DataFrame:
        """ATE, ATT, ATC and sigma: mean, sd, equal-tailed interval and split R-hat over the chains."""
        level = _check_level(level)
        rows = {"ATE": self.ate_draws(), "ATT": self._training_draws()[0][:, self.z == 1].mean(axis=1),
                "ATC": self._training_draws()[0][:, self.z == 0].mean(axis=1), "sigma": self._params[:, 0] * self.scale}
        out = {}
        for name, d in rows.items():
            if not np.all(np.isfinite(d)):
                continue
            mean, lower, upper = self._interval(d, level)
            out[name] = {"mean": mean, "sd": float(np.std(d, ddof=1)), "lower": lower, "upper": upper,
                         "r_hat": split_r_hat(d.reshape(self.chains, -1))}
        return pd.DataFrame(out).T

    # -- files -----------------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fit to one file (a NumPy ``.npz`` archive: the draws, both forests' trees and cut
        grids, the designs and settings as JSON, and the propensity model's netCDF bytes), read back by
        ``bps.load``. Written to a temporary name in the same folder and renamed, so a failure leaves
        nothing half-written.

        Parameters
        ----------
        path : str or os.PathLike
        """
        path = Path(path)
        arrays = {"params": self._params, "move_counts": self.move_counts, "y": self.y, "z": self.z,
                  "propensity": self.propensity, "index": np.asarray(self.index)}
        for name, forest in (("mu", self.mu), ("tau", self.tau)):
            b = forest.binned
            arrays.update({f"{name}_var": forest.var, f"{name}_cut": forest.cut, f"{name}_value": forest.value,
                           f"{name}_counts": forest.counts, f"{name}_codes": b.codes, f"{name}_nbins": b.nbins,
                           f"{name}_is_cat": b.is_categorical, f"{name}_n_leaves": self.n_leaves[name],
                           f"{name}_cuts": np.concatenate([np.asarray(c, float) for c in b.cuts] or [np.zeros(0)]),
                           f"{name}_cut_sizes": np.array([len(c) for c in b.cuts], dtype=np.int64)})
        meta = {"format": "bartpy_suite.bcf/1", "config": self.config, "center": self.center, "scale": self.scale,
                "chains": self.chains, "designs": {k: d.to_json() for k, d in self.designs.items()},
                "names": {"mu": self.mu.names, "tau": self.tau.names}}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        with tempfile.TemporaryDirectory(dir=path.parent or ".") as tmp:
            if self.propensity_fit is not None:
                nc = Path(tmp) / "propensity.nc"
                self.propensity_fit.to_netcdf(nc)
                arrays["propensity_fit"] = np.frombuffer(nc.read_bytes(), dtype=np.uint8)
            part = Path(tmp) / "fit.npz"
            with open(part, "wb") as fh:
                np.savez_compressed(fh, **arrays)
            os.replace(part, path)

    @classmethod
    def read(cls, path, design_from_json, fit_loader) -> CausalFit:
        """Read a file written by ``save`` (``bps.load`` calls this with the formula's
        ``Design.from_json`` and its own loader of the propensity model's netCDF).

        Raises
        ------
        FitFileError
            A file that is not a bcf fit or holds inconsistent arrays, naming the file and what is wrong.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            meta = json.loads(bytes(arrays.pop("meta")).decode())
            if meta.get("format") != "bartpy_suite.bcf/1":
                raise ValueError(f"unknown format {meta.get('format')!r}")
            forests = {}
            for name in ("mu", "tau"):
                sizes = arrays[f"{name}_cut_sizes"]
                flat = arrays[f"{name}_cuts"]
                cuts = tuple(np.split(flat, np.cumsum(sizes)[:-1])) if sizes.size else ()
                binned = BinnedPredictors(arrays[f"{name}_codes"].astype(np.int32), cuts,
                                          arrays[f"{name}_nbins"].astype(np.int64),
                                          arrays[f"{name}_is_cat"].astype(bool))
                forests[name] = ForestStore.from_arrays(arrays[f"{name}_var"], arrays[f"{name}_cut"],
                                                        arrays[f"{name}_value"], arrays[f"{name}_counts"], binned,
                                                        meta["names"][name])
            params = arrays["params"]
            if params.ndim != 2 or params.shape[1] != 5 or params.shape[0] != forests["mu"].counts.shape[0] \
                    or forests["tau"].counts.shape[0] != params.shape[0]:
                raise ValueError("the scalar draws do not match the stored trees")
        except (OSError, ValueError, KeyError, TypeError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
            raise FitFileError(f"{path} is not a readable bcf fit: {exc}") from None
        propensity_fit = None
        if "propensity_fit" in arrays:
            with tempfile.TemporaryDirectory() as tmp:
                nc = Path(tmp) / "propensity.nc"
                nc.write_bytes(arrays["propensity_fit"].tobytes())
                propensity_fit = fit_loader(nc)
                propensity_fit.idata.load()  # the temporary file goes away
        return cls(params=params, chains=int(meta["chains"]), mu=forests["mu"], tau=forests["tau"],
                   n_leaves={"mu": arrays["mu_n_leaves"], "tau": arrays["tau_n_leaves"]},
                   counts=arrays["move_counts"], center=meta["center"], scale=meta["scale"], y=arrays["y"],
                   z=arrays["z"], propensity=arrays["propensity"], propensity_fit=propensity_fit,
                   designs={k: design_from_json(v) for k, v in meta["designs"].items()}, config=meta["config"],
                   index=pd.Index(arrays["index"]))

    def variable_activity(self) -> pd.DataFrame:
        """Per forest, each predictor's share of the split rules, averaged over the kept draws (draws
        without a split count as 0); the mu forest's predictors include ``propensity``.

        Returns
        -------
        pandas.DataFrame
            One column per forest (``mu``, ``tau``), one row per predictor of either forest (NaN where a
            forest does not have the predictor).
        """
        out = {}
        for name, forest in (("mu", self.mu), ("tau", self.tau)):
            per_draw = forest.counts.sum(axis=1)
            draw_of_node = np.repeat(np.arange(per_draw.shape[0]), per_draw)
            split = forest.var >= 0
            p = len(forest.names)
            counts = np.zeros((per_draw.shape[0], p))
            np.add.at(counts, (draw_of_node[split], forest.var[split]), 1.0)
            totals = counts.sum(axis=1, keepdims=True)
            shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
            out[name] = pd.Series(shares.mean(axis=0), index=forest.names)
        return pd.DataFrame(out)

    def mean_leaves(self) -> pd.DataFrame:
        """Mean leaf count per tree of each forest, per draw (a forest-level diagnostic only: the forests
        can trade the control-arm surface, spec 7)."""
        return pd.DataFrame({k: v.mean(axis=1) for k, v in self.n_leaves.items()})


def split_r_hat(draws: np.ndarray) -> float:
    """Split R-hat (Gelman et al. 2013) of draws shaped (chains, draws); NaN with fewer than 4 draws."""
    d = np.asarray(draws, dtype=np.float64)
    half = d.shape[1] // 2
    if half < 2:
        return float("nan")
    parts = np.concatenate([d[:, :half], d[:, half:2 * half]], axis=0)
    w = parts.var(axis=1, ddof=1).mean()
    b = half * parts.mean(axis=1).var(ddof=1)
    if w <= 0:
        return float("nan")
    return float(np.sqrt(((half - 1) / half * w + b / half) / w))


def treatment_codes(column, name: str, allow_constant: bool = False) -> np.ndarray:
    """A treatment column as int64 0/1 codes.

    Raises
    ------
    DataError
        Values other than 0/1 (or False/True), missing values, or (unless ``allow_constant``) a
        treatment constant over the rows, naming the column and the values found.
    """
    values = pd.Series(column)
    if values.isna().any():
        raise DataError(f"treatment column {name!r} has {int(values.isna().sum())} missing values; bcf needs a 0/1 "
                        "treatment in every row (drop those rows)")
    found = pd.unique(values)
    ok = values.dtype == bool or (pd.api.types.is_numeric_dtype(values) and set(np.asarray(found, float)) <= {0.0, 1.0})
    if not ok:
        shown = ", ".join(map(repr, list(found[:6]))) + (", ..." if len(found) > 6 else "")
        raise DataError(f"treatment column {name!r} must be binary 0/1 (or False/True); found the values {shown}. "
                        "Recode it to 0 (control) and 1 (treated); a continuous treatment is not supported yet")
    codes = np.asarray(values, dtype=np.float64).astype(np.int64)
    if not allow_constant and np.unique(codes).size < 2:
        raise DataError(f"treatment column {name!r} is constant ({int(codes[0])} in every row): a treatment effect "
                        "needs treated and control rows")
    return codes
