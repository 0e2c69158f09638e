"""Weights, offsets and a variance forest in a BART fit (``bps.bart(..., weights="w", offset="o",
variance="~ x1")``): what the fit stores and the leaf model ``normal_hetero`` (spec multi_forest.md 5.5-5.6).

The model is ``y_i = o_i + f(x_i) + e_i`` with ``e_i ~ N(0, sigma(x_i)^2 / w_i)``: sigma(x) = sigma (one per
draw, posterior ``sigma``) without a variance forest, ``sigma(x)^2 = exp(sum of the variance trees at x)``
with one (leaf model ``normal_variance``). The fit stores:

* ``config["hetero"]``: the weight and offset column names (None when not given; ``"offset"`` /
  ``"weights"`` for array fits), the variance forest's predictors (``variance``; None: no variance
  forest), the mean trees' predictors when they are not all of them (``mean``) and the variance forest's
  settings (``variance_trees``, the leaf prior ``a``, ``b``, ``a0``, ``sigma0_sq`` on the working scale);
* constant_data ``obs_weight`` and ``obs_offset`` (obs): the training rows' weights (1 when not given) and
  offsets (0 when not given);
* with a variance forest, the group ``variance_trees``: ``tree_nodes`` (chain, draw, variance_tree),
  ``node_var`` (split predictor among all the fit's predictors, -1 at leaves), ``node_cut`` and
  ``node_value`` (leaves: lambda + log(sigma0^2 scale^2) / trees, so that the sum of the trees at x is
  log sigma(x)^2 on the response's scale; NaN at internal nodes). ``variance_activity`` summarises its
  split shares per predictor.

``predict``: ``kind="mean"`` is f(x) + o (posterior mean and credible interval); ``"predictive"`` adds
noise of sd sigma(x) / sqrt(w) per draw (spec 5.6), w the ``weights`` column of ``newdata`` when it has one,
else 1; ``"sigma"`` gives sigma(x) (the noise sd of a row of weight 1) with its credible interval. New rows
need the offset column (a ``DataError`` names it otherwise).

Import rule: numpy, pandas, xarray; this package's ``leaf_models``, ``prediction_table``, ``weighted`` and
``build`` modules and the prediction kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from .. import _validation as check
from .._kernels.predict import sum_of_trees
from .._kernels.record import right_children, tree_roots
from ..errors import ArgumentError, DataError
from ._dask import is_dask_frame, predict_dask
from .leaf_models import PREDICT_KINDS, GaussianMeanShift, TrainingRows, register
from .prediction_table import regression_table, with_missing_rows
from .weighted import weighted_quantiles

if TYPE_CHECKING:
    from .fit import Fit

#: The DataTree group of the variance trees and its tree dim (``samplers/hetero.py`` names them alike).
VARIANCE_GROUP = "variance_trees"
VARIANCE_TREE_DIM = "variance_tree"
#: ``predict`` kinds of a fit with weights, an offset or a variance forest.
HETERO_KINDS = PREDICT_KINDS + ("sigma",)


def attach_hetero(fit: Fit, weights: np.ndarray, offset: np.ndarray, variance: tuple | None) -> None:
    """Write the training rows' weights and offsets and the variance trees into ``fit.idata``.

    Parameters
    ----------
    fit : Fit
        The new fit (its ``config["hetero"]`` and ``config["scale"]`` are read).
    weights, offset : ndarray, shape (n,)
        The training rows' weights and offsets (response scale).
    variance : tuple or None
        ``(nodes, tree_nodes)`` of the stacked variance store (``samplers.draws``; leaf values lambda on
        the working scale), or None without a variance forest.
    """
    const = fit.idata["constant_data"].to_dataset().assign({
        "obs_weight": (("obs",), np.asarray(weights, dtype=np.float64)),
        "obs_offset": (("obs",), np.asarray(offset, dtype=np.float64)),
    })
    attrs = dict(fit.idata["constant_data"].attrs)
    fit.idata["constant_data"] = xr.DataTree(const)
    fit.idata["constant_data"].attrs.update(attrs)
    if variance is None:
        return
    nodes, counts = variance
    spec = fit.config["hetero"]
    scale = float(fit.config["scale"])
    var = np.asarray(nodes["var"])
    value = np.asarray(nodes["value"], dtype=np.float64).copy()
    value += (np.log(float(spec["sigma0_sq"])) + 2.0 * np.log(scale)) / int(spec["variance_trees"])
    value[var >= 0] = np.nan
    fit.idata[VARIANCE_GROUP] = xr.DataTree(xr.Dataset(
        {"tree_nodes": (("chain", "draw", VARIANCE_TREE_DIM), counts), "node_var": (("node",), var),
         "node_cut": (("node",), nodes["cut"]), "node_value": (("node",), value)},
        coords={"chain": np.arange(counts.shape[0]), "draw": np.arange(counts.shape[1]),
                VARIANCE_TREE_DIM: np.arange(counts.shape[2])}))


def variance_activity(fit: Fit, level: float = 0.95) -> pd.DataFrame:
    """Share of the variance trees' split rules on each predictor, per draw, summarised (the variance
    forest's ``Fit.variable_activity``).

    Parameters
    ----------
    fit : Fit
        A BART fit with ``variance=``.
    level : float
        Probability of the equal-tailed interval.

    Returns
    -------
    pandas.DataFrame
        Indexed by predictor (all the fit's; those outside ``variance=`` get 0), columns mean, lower,
        upper.

    Raises
    ------
    ArgumentError
        When the fit has no variance forest.
    """
    from .build import variable_activity  # build imports fit, which imports the leaf models

    level = check.check_open_unit("level", level)
    if VARIANCE_GROUP not in fit.idata.children:
        raise ArgumentError("this fit has no variance forest; fit one with bps.bart(..., variance='~ x1 + x2')")
    group = fit.idata[VARIANCE_GROUP]
    counts = group["tree_nodes"].values
    p = len(fit.predictors)
    act = variable_activity(group["node_var"].values, counts, p).reshape(-1, p)
    w = fit.flat_weights
    q = weighted_quantiles(act, w, [(1 - level) / 2, (1 + level) / 2])
    return pd.DataFrame({"mean": w @ act / w.sum(), "lower": q[0], "upper": q[1]},
                        index=pd.Index(fit.predictors, name="predictor"))


@register
class HeteroNormal(GaussianMeanShift):
    """BART regression with observation weights and / or an offset, one sigma per draw (module docstring).

    ``function_samples`` and ``draws`` of new rows are the trees' f(x) (what SHAP and partial dependence
    read); ``draws`` of the training rows (the pointwise log-likelihood and the mixing check) and
    ``predict`` add the offset."""

    names = ("normal_hetero",)

    # -- rows -----------------------------------------------------------------------------------
    def _const(self, name: str, rows=None) -> np.ndarray:
        values = self.fit.idata["constant_data"][name].values
        return values if rows is None else values[rows]

    def training_inputs(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The training rows' bin codes, marked as training rows so that :meth:`draws` adds their offsets
        and :meth:`noise_sd` divides by their weights."""
        return TrainingRows.of(super().training_inputs(rows), rows)

    def draws(self, x: np.ndarray) -> np.ndarray:
        """f(x) per (sample, row); for training rows (``training_inputs``) f(x) + o."""
        f = self.function_samples(np.asarray(x))
        if isinstance(x, TrainingRows):
            f = f + self._const("obs_offset", x.rows)[None, :]
        return f

    def sigma_samples(self, x: np.ndarray) -> np.ndarray:
        """sigma(x) per (sample, row) (broadcastable): the noise sd of a row of weight 1."""
        return super().noise_sd(np.asarray(x))

    def noise_sd(self, x: np.ndarray) -> np.ndarray:
        """sigma(x) / sqrt(w): the training rows' weights for training rows, 1 otherwise."""
        sd = self.sigma_samples(x)
        if isinstance(x, TrainingRows):
            with np.errstate(divide="ignore"):
                sd = sd / np.sqrt(self._const("obs_weight", x.rows))[None, :]
        return sd

    def pointwise_log_likelihood(self) -> np.ndarray:
        """log N(y_i; o_i + f(x_i), sigma(x_i)^2 / w_i); 0 for rows of weight 0, which are in no
        likelihood term (spec 1.1)."""
        out = super().pointwise_log_likelihood()
        zero = self._const("obs_weight") == 0
        if zero.any():
            out[:, zero] = 0.0
        return out

    # -- new rows -------------------------------------------------------------------------------
    def new_row_columns(self, newdata, ok) -> tuple[np.ndarray, np.ndarray]:
        """The offsets and weights of the rows of ``newdata`` that are predicted (mask ``ok``).

        Raises
        ------
        DataError
            The fit has an offset and ``newdata`` is not a DataFrame holding its column, or an offset or
            weight value is missing, not a number, or (weights) negative.
        """
        spec = self.config["hetero"]
        name, wname = spec.get("offset"), spec.get("weights")
        n = len(newdata)
        offset = np.zeros(n)
        weight = np.ones(n)
        frame = isinstance(newdata, pd.DataFrame)
        if name is not None:
            if not frame or name not in newdata.columns:
                raise DataError(f"this fit has an offset (column {name!r}): predict new rows from a DataFrame that "
                                f"holds the column {name!r} besides the predictors (y = {name} + f(x) + e, so the "
                                "prediction needs each row's offset)")
            offset = _column(newdata, name, "offset", allow_negative=True)
        if wname is not None and frame and wname in newdata.columns:
            weight = _column(newdata, wname, "weights", allow_negative=False)
        if ok is not None:
            offset, weight = offset[ok], weight[ok]
        return offset, weight

    def predict(self, newdata, kind: str, level: float, samples: bool, na_action: str | None, times):
        if times is not None:
            raise ArgumentError("times= is for survival fits; this is a BART regression fit")
        if is_dask_frame(newdata):
            return predict_dask(self.fit, newdata, kind=kind, level=level, samples=samples, na_action=na_action)
        kind = check.check_choice("kind", kind, HETERO_KINDS)
        level = check.check_open_unit("level", level)
        x, index, ok = self.inputs(newdata, na_action)
        if newdata is None:
            x = TrainingRows.of(x, None)
            offset, weight = self._const("obs_offset"), self._const("obs_weight")
        else:
            offset, weight = self.new_row_columns(newdata, ok)
        fit = self.fit
        shape = (fit.posterior.sizes["chain"], fit.posterior.sizes["draw"])
        rows = index if ok is None else index[ok]
        if kind == "sigma":
            sd = np.array(np.broadcast_to(self.sigma_samples(np.asarray(x)), (shape[0] * shape[1], len(rows))))
            out = _sample_table(sd, fit.flat_weights, rows, level, samples, shape, "sigma")
            return with_missing_rows(out, ok, index)
        f = self.function_samples(np.asarray(x)) + offset[None, :]

        def noise_sd() -> np.ndarray:
            with np.errstate(divide="ignore"):
                return self.sigma_samples(np.asarray(x)) / np.sqrt(weight)[None, :]

        with np.errstate(invalid="ignore"):  # a row of weight 0 has infinite noise: its interval is unbounded
            out = regression_table(f, noise_sd, fit.flat_weights, rows, kind, level, samples, shape)
        if kind == "predictive" and not samples and (weight == 0).any():
            out.loc[weight == 0, "lower"] = -np.inf
            out.loc[weight == 0, "upper"] = np.inf
        return with_missing_rows(out, ok, index)

    # -- files ----------------------------------------------------------------------------------
    @classmethod
    def check_file(cls, checker, config: dict) -> None:
        """A loaded fit's settings and training rows: ``config["hetero"]``, ``obs_weight`` (finite, >= 0,
        not all 0) and ``obs_offset`` (finite), so that an edited file fails at ``load`` naming what is
        wrong."""
        spec = config.get("hetero")
        where = "constant_data.attrs: hetero"
        if not isinstance(spec, dict):
            checker.fail(where, "missing: a normal_hetero fit records its weights, offset and variance settings")
        for key in ("weights", "offset"):
            if spec.get(key) is not None and not isinstance(spec.get(key), str):
                checker.fail(where, f"{key} is {spec.get(key)!r}, expected a column name or null")
        w = checker.array("constant_data", "obs_weight", "float", ("obs",))
        if not np.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
            checker.fail("constant_data/obs_weight", "weights must be finite, >= 0 and not all 0")
        o = checker.array("constant_data", "obs_offset", "float", ("obs",))
        if not np.isfinite(o).all():
            checker.fail("constant_data/obs_offset", "holds a value that is not finite")


@register
class VarianceForestNormal(HeteroNormal):
    """BART regression with a variance forest (``normal_variance``): sigma(x)^2 = exp(sum of the variance
    trees at x) per draw (spec 5.6); no posterior ``sigma``."""

    names = ("normal_variance",)
    posterior_variables = ("variance_mean_leaves",)

    def sigma_samples(self, x: np.ndarray) -> np.ndarray:
        """sigma(x) per (sample, row) from the variance trees."""
        store = _variance_store(self.fit)
        codes = np.ascontiguousarray(np.asarray(x))
        out = np.empty((store["roots"].shape[0], codes.shape[1]))
        sum_of_trees(codes, self.fit.binned.is_categorical, store["node_var"], store["node_cut"], store["right"],
                     store["node_value"], store["roots"], out)
        return np.exp(0.5 * out)

    @classmethod
    def check_file(cls, checker, config: dict) -> None:
        """Besides ``HeteroNormal``'s checks: the variance trees group is there and its leaf values are
        finite (its structure and rules are checked with every tree store)."""
        super().check_file(checker, config)
        if VARIANCE_GROUP not in checker.idata.children:
            checker.fail(VARIANCE_GROUP, "group missing (the configuration has a variance forest)")
        var = checker.array(VARIANCE_GROUP, "node_var", "int", ("node",), local=("node",))
        value = checker.array(VARIANCE_GROUP, "node_value", "float", ("node",), local=("node",))
        if value.shape != var.shape:
            checker.fail(f"{VARIANCE_GROUP}/node_value", f"{value.shape[0]} nodes, node_var has {var.shape[0]}")
        if not np.isfinite(value[var < 0]).all():
            checker.fail(f"{VARIANCE_GROUP}/node_value", "a leaf value is not finite")


def _variance_store(fit: Fit) -> dict:
    """The variance trees in the prediction kernels' dtypes (as ``Fit.tree_store``), cached on the fit's
    leaf model."""
    cached = getattr(fit, "_variance_store", None)
    if cached is not None:
        return cached
    group = fit.idata[VARIANCE_GROUP]
    out = {"node_var": np.ascontiguousarray(group["node_var"].values, dtype=np.int32),
           "node_cut": np.ascontiguousarray(group["node_cut"].values, dtype=np.int64),
           "node_value": np.ascontiguousarray(group["node_value"].values, dtype=np.float64)}
    counts = group["tree_nodes"].values
    counts = counts.reshape(counts.shape[0] * counts.shape[1], -1)
    out["right"] = right_children(out["node_var"], counts)
    out["roots"] = tree_roots(counts)
    fit._variance_store = out
    return out


def _column(frame: pd.DataFrame, name: str, what: str, allow_negative: bool) -> np.ndarray:
    """Column ``name`` of ``frame`` as float64, refusing a missing / non-numeric / negative value."""
    values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) if allow_negative else ~np.isfinite(values) | (values < 0)
    if bad.any():
        label = frame.index[int(np.flatnonzero(bad)[0])]
        raise DataError(f"the {what} column {name!r} of newdata holds {frame[name].iloc[int(np.flatnonzero(bad)[0])]!r}"
                        f" at row {label!r}: give a finite number{'' if allow_negative else ' >= 0'} in every row")
    return values


def _sample_table(values: np.ndarray, w: np.ndarray, index, level: float, samples: bool, shape: tuple[int, int],
                  name: str):
    """Posterior mean and equal-tailed interval per row of ``values`` (samples, rows)."""
    if samples:
        return xr.DataArray(values.reshape(*shape, -1), dims=("chain", "draw", "obs"), name=name)
    q = weighted_quantiles(values, w, [(1 - level) / 2, (1 + level) / 2])
    return pd.DataFrame({"mean": (w / w.sum()) @ values, "lower": q[0], "upper": q[1]}, index=index)

