"""``Fit``: the posterior of a tree model with summaries, predictions and persistence."""

from __future__ import annotations

import json
from functools import cached_property

import numpy as np
import pandas as pd
import xarray as xr

from .. import _validation as check
from .._binning import BinnedPredictors
from .._kernels.predict import leaf_indices, sum_of_trees
from .._kernels.record import right_children, to_padded, tree_roots
from ..errors import ArgumentError, DataError
from .leaf_models import LeafModel, leaf_model_for
from .loglik import GROUP as LOG_LIKELIHOOD_GROUP
from .loglik import log_likelihood_group
from .netcdf_write import write_tree_atomically
from .prediction_table import check_na_action, missing_rows, new_rows
from .tree_text import format_tree
from .weighted import kish_ess, weighted_ess, weighted_mean_sd, weighted_quantiles, weighted_rhat

CONFIG_ATTR = "bartpy_suite_config"
DESIGN_ATTR = "bartpy_suite_design"
#: Set in a saved file's constant_data attributes when ``to_netcdf`` left out the fit's
#: log_likelihood group; ``load`` then recomputes it (exactly, from the stored trees).
LOG_LIKELIHOOD_ATTR = "bartpy_suite_log_likelihood"
TREES_GROUP = "trees"
#: In-memory dtypes of the tree store (files may hold smaller ones, see ``Fit.to_netcdf``).
NODE_DTYPES = {"node_var": np.int32, "node_cut": np.int64, "node_value": np.float64, "node_sigma": np.float64,
               "node_prob": np.float64, "tree_nodes": np.int64}
#: Leaf parameters of the trees group: NaN at internal nodes, so files store them over a ``leaf``
#: dim (the leaves in node order) and ``load`` puts the NaNs back (``file_check._expand_leaves``).
LEAF_VARS = ("node_value", "node_sigma", "node_prob")
LEAF_DIM = "leaf"


def interval_labels(level: float) -> tuple[str, str]:
    """Column names of an equal-tailed interval, R style: ``'5%'``, ``'95%'``."""
    lo = 100 * (1 - level) / 2
    return f"{lo:g}%", f"{100 - lo:g}%"


class Fit:
    """Posterior of a Bayesian tree model.

    Wraps an ``xarray.DataTree`` in ArviZ's layout (``idata``) and the formula design. Built by
    the models; use :func:`bartpy_suite.load` to read one back from netCDF.

    Attributes
    ----------
    idata : xarray.DataTree
        Groups posterior, sample_stats, observed_data, constant_data.
    design : object or None
        The formula design (None for array-level fits).
    config : dict
        Model type, priors, sampler settings.
    """

    def __init__(self, idata: xr.DataTree, design=None):
        self.idata = idata
        self.design = design
        self.config = json.loads(idata["constant_data"].attrs[CONFIG_ATTR])
        self._leaf_model = leaf_model_for(self)

    @property
    def leaf_model(self) -> LeafModel:
        """What the leaves hold (``posterior/leaf_models.py``), chosen from ``config`` when the fit
        is built: predictions, the pointwise log-likelihood and the model's own posterior
        variables. Chosen again for a copy of the fit or a replaced ``config``."""
        if self._leaf_model.fit is not self or self._leaf_model.config is not self.config:
            self._leaf_model = leaf_model_for(self)
        return self._leaf_model

    # -- groups --------------------------------------------------------------------------
    @property
    def posterior(self) -> xr.DataTree:
        """The ArviZ posterior group (dims chain, draw, ...)."""
        return self.idata["posterior"]

    @property
    def sample_stats(self) -> xr.DataTree:
        """Sampler statistics per draw (move, accepted, log_posterior, weight, ...)."""
        return self.idata["sample_stats"]

    @property
    def weights(self) -> xr.DataArray:
        """Weight of each draw (chain, draw): Rao-Blackwellized for continuous-time samplers,
        uniform otherwise. Normalised to sum to one."""
        w = self.sample_stats["weight"]
        return w / w.sum()

    @property
    def particle_weighted(self) -> bool:
        """Whether the chains are independent weighted particles (the sampler's ``ess_method``
        is ``"kish"``, as ``smc``), whose ESS is Kish's rather than from autocorrelations."""
        return self.sample_stats.attrs.get("ess_method") == "kish"

    @property
    def is_classification(self) -> bool:
        """Whether the response is categorical."""
        return self.config["response_kind"] == "categorical"

    @property
    def predictors(self) -> list[str]:
        """Predictor names in column order."""
        return list(self.config["predictors"])

    @property
    def routes_missing(self) -> bool:
        """Whether the fit's rules route missing predictor values (``na_action="split"``)."""
        return self.config.get("na_action") == "split"

    @cached_property
    def binned(self) -> BinnedPredictors:
        """The training predictors binned on the fit's cut grids (codes (p, n), grids, levels)."""
        const = self.idata["constant_data"]
        cuts = const["cuts"].values
        nbins = const["nbins"].values.astype(np.int64)
        is_cat = const["is_categorical"].values.astype(bool)
        grids = tuple(cuts[v, : nbins[v] - 1] if not is_cat[v] else np.zeros(0) for v in range(len(nbins)))
        return BinnedPredictors(const["x_codes"].values.astype(np.int32), grids, nbins, is_cat)

    @cached_property
    def tree_store(self) -> dict:
        """The tree store in the prediction kernels' dtypes: flat node arrays, ``right``
        children and ``roots`` (samples, trees), samples in chain-major order."""
        group = self.idata[TREES_GROUP]
        held = group.dataset.data_vars  # variables only: load refuses coordinates of these names too
        out = {name: np.ascontiguousarray(group[name].values, dtype=dtype)
               for name, dtype in NODE_DTYPES.items() if name in held}
        counts = out.pop("tree_nodes")
        counts = counts.reshape(counts.shape[0] * counts.shape[1], -1)
        out["right"] = right_children(out["node_var"], counts)
        out["roots"] = tree_roots(counts)
        out["counts"] = counts
        return out

    @property
    def flat_weights(self) -> np.ndarray:
        """``weights`` as one vector over the samples, chain-major."""
        return self.weights.values.reshape(-1)

    def add_log_likelihood(self) -> xr.DataTree:
        """Compute the pointwise log-likelihood of the training rows and store it as the
        ``log_likelihood`` group of ``idata`` (variable ``y``, dims chain, draw, obs).

        Fits store it when they are built unless ``log_likelihood=False`` was given or, with the
        default ``log_likelihood=None``, chains x draws x rows exceeds 10 million; call this to
        add it afterwards (it is computed exactly from the stored trees; ``bartpy_suite.load`` calls
        this for a saved fit that had the group, which ``to_netcdf`` leaves out). ``arviz_stats.loo``
        and ``arviz_stats.compare`` read it; they treat the draws as equally weighted, so for
        the weighted samplers (``ctmc`` CART, ``smc``) their answer ignores ``fit.weights``.

        Returns
        -------
        xarray.DataTree
            The group added.
        """
        self.idata[LOG_LIKELIHOOD_GROUP] = log_likelihood_group(self)
        return self.idata[LOG_LIKELIHOOD_GROUP]

    # -- summaries ---------------------------------------------------------------------------
    def summary(self, level: float = 0.95) -> pd.DataFrame:
        """Table of the scalar posterior quantities.

        Parameters
        ----------
        level : float
            Probability of the equal-tailed credible interval.

        Returns
        -------
        pandas.DataFrame
            One row per scalar quantity (``sigma`` for regression, ``n_leaves``, ``depth``, ...);
            columns mean, sd, the interval bounds, ess_bulk, ess_tail, r_hat. Every column
            honours ``fit.weights``: mean, sd and the interval are weighted
            (``posterior.weighted``); with equal weights ``ess_bulk``, ``ess_tail`` and ``r_hat``
            are arviz-stats' bulk ESS, tail ESS and rank-normalised split R-hat; with unequal
            weights ``ess_bulk`` is the delta-method ESS of the self-normalised weighted mean
            (Geyer-truncated autocorrelations of the weighted deviations), ``r_hat`` the weighted
            split R-hat with Kish chain lengths, and ``ess_tail`` NaN. Samplers whose chains are
            independent weighted particles (``smc``: ``sample_stats.attrs["ess_method"] ==
            "kish"``) report as ``ess_bulk`` the sum over chains of Kish's ESS of each chain's
            weights.
        """
        level = check.check_open_unit("level", level)
        lo, hi = interval_labels(level)
        w = self.weights.values
        kish = None
        if self.particle_weighted:
            kish = float(sum(kish_ess(w[c]) for c in range(w.shape[0])))

        def row(arr: np.ndarray) -> dict:
            mean, sd = weighted_mean_sd(arr, w)
            q = weighted_quantiles(arr.reshape(-1, 1), w.reshape(-1), [(1 - level) / 2, (1 + level) / 2])[:, 0]
            return {"mean": mean, "sd": sd, lo: q[0], hi: q[1],
                    "ess_bulk": weighted_ess(arr, w) if kish is None else kish,
                    "ess_tail": _tail_ess(arr, w), "r_hat": weighted_rhat(arr, w)}

        rows = {}
        for name, da in self.posterior.data_vars.items():
            if da.dims != ("chain", "draw"):
                continue
            arr = da.values.astype(float)
            if np.isfinite(arr).all():
                rows[name] = row(arr)
        rows.update(self.leaf_model.summary_rows(row))
        first = ("sigma", "n_leaves", "depth")
        order = [k for k in first if k in rows] + [k for k in rows if k not in first]
        return pd.DataFrame.from_dict({k: rows[k] for k in order}, orient="index")

    def acceptance(self) -> pd.DataFrame:
        """Proposals and acceptance rate per move type over the kept draws.

        Available for samplers that propose moves (their statistics have a ``move``
        dimension: ``n_proposed``/``n_accepted`` per draw, or the ``move`` tried and whether
        it was ``accepted``).
        """
        names = json.loads(self.sample_stats.attrs.get("move_names", "[]"))
        stats = self.sample_stats
        if not names or not ({"n_proposed", "n_accepted"} <= set(stats) or {"move", "accepted"} <= set(stats)):
            raise ArgumentError(
                f"acceptance() needs move statistics; sampler {self.config['sampler']!r} records "
                f"{', '.join(k for k in stats if k != 'weight') or 'none'}: see fit.sample_stats"
            )
        if "n_proposed" in stats:
            proposed = stats["n_proposed"].values.reshape(-1, len(names)).sum(axis=0)
            accepted = stats["n_accepted"].values.reshape(-1, len(names)).sum(axis=0)
        else:
            move = stats["move"].values.reshape(-1)
            acc = stats["accepted"].values.reshape(-1).astype(bool)
            proposed = np.array([(move == k).sum() for k in range(len(names))])
            accepted = np.array([acc[move == k].sum() for k in range(len(names))])
        rows = {
            name: {"proposed": int(proposed[k]), "accepted": int(accepted[k]), "rate": accepted[k] / proposed[k]}
            for k, name in enumerate(names)
            if proposed[k] > 0
        }
        return pd.DataFrame.from_dict(rows, orient="index")

    def variable_activity(self, level: float = 0.95, by_class: bool = False) -> pd.DataFrame:
        """Share of split rules on each predictor, per draw, summarised.

        Parameters
        ----------
        level : float
            Probability of the equal-tailed interval.
        by_class : bool
            Multinomial BART only: the shares within each class's sum of trees.

        Returns
        -------
        pandas.DataFrame
            Indexed by predictor (by class and predictor with ``by_class``), columns mean,
            lower, upper (equal-tailed interval).
        """
        level = check.check_open_unit("level", level)
        by_class = check.check_bool("by_class", by_class)
        p = len(self.predictors)
        w = self.flat_weights
        probs = [(1 - level) / 2, (1 + level) / 2]
        if not by_class:
            act = self.posterior["variable_activity"].values.reshape(-1, p)
            q = weighted_quantiles(act, w, probs)
            return pd.DataFrame({"mean": w @ act / w.sum(), "lower": q[0], "upper": q[1]},
                                index=pd.Index(self.predictors, name="predictor"))
        shares = self.leaf_model.class_split_shares()
        labels = [str(c) for c in self.config["class_labels"]]
        frames = []
        for k, label in enumerate(labels):
            act = shares[:, k, :]
            q = weighted_quantiles(act, w, probs)
            frames.append(pd.DataFrame({"class": label, "predictor": self.predictors, "mean": w @ act / w.sum(),
                                        "lower": q[0], "upper": q[1]}))
        return pd.concat(frames).set_index(["class", "predictor"])

    def variable_inclusion(self, level: float = 0.95) -> pd.DataFrame:
        """Posterior probability that each predictor is used, and DART's split probabilities.

        ``inclusion`` is the (weighted) share of draws in which the trees split at least once on
        the predictor, the posterior inclusion probability of Linero (2018); a factor is one
        predictor. For a DART fit (``sparse=True``) the columns ``split_prob``, ``lower`` and
        ``upper`` give the posterior mean of the predictor's split probability s_j and its
        equal-tailed interval; other fits have no such columns (their rule prior is uniform).
        The median-probability model is ``fit.variable_inclusion().query("inclusion > 0.5")``.

        Parameters
        ----------
        level : float
            Probability of the equal-tailed interval of ``split_prob``.

        Returns
        -------
        pandas.DataFrame
            Indexed by predictor: ``inclusion`` (and ``split_prob``, ``lower``, ``upper``).
        """
        level = check.check_open_unit("level", level)
        p = len(self.predictors)
        w = self.flat_weights
        used = (self.posterior["variable_activity"].values.reshape(-1, p) > 0).astype(float)
        out = pd.DataFrame({"inclusion": w @ used / w.sum()}, index=pd.Index(self.predictors, name="predictor"))
        if "split_probs" in self.posterior.dataset.data_vars:
            s = self.posterior["split_probs"].values.reshape(-1, p)
            q = weighted_quantiles(s, w, [(1 - level) / 2, (1 + level) / 2])
            out["split_prob"], out["lower"], out["upper"] = w @ s / w.sum(), q[0], q[1]
        return out

    # -- prediction ----------------------------------------------------------------------------
    def new_x(self, newdata) -> tuple[np.ndarray, pd.Index]:
        """The rows of ``newdata`` as float predictors (m, p), NaN where missing (factors hold
        level codes), and their index; every leaf model reads new rows through this."""
        if isinstance(newdata, dict):
            raise DataError("newdata must be a DataFrame or a 2-D array, got a dict; wrap it in a DataFrame: "
                            "pd.DataFrame({'x1': [2.0, 6.0], ...}) (one list of values per column; for one row, "
                            "lists of one value)")
        if isinstance(newdata, pd.Series):
            raise DataError("newdata must be a DataFrame or a 2-D array, got a pandas Series; "
                            "for one row of a frame pass data.iloc[[i]] (double brackets)")
        if isinstance(newdata, pd.DataFrame):
            self.leaf_model.check_frame(newdata)
        if isinstance(newdata, pd.DataFrame):
            if self.design is not None:
                # "split" keeps missing values as NaN; missing_rows decides what they mean
                return self.design.transform(newdata, na_action="split"), newdata.index
            absent = [c for c in self.predictors if c not in newdata.columns]
            if absent:
                raise DataError(f"newdata lacks the predictor column(s) {absent}; the model's predictors are "
                                f"{self.predictors}")
            return new_rows(newdata[self.predictors], self.predictors), newdata.index
        x = new_rows(newdata, self.predictors)
        return x, pd.RangeIndex(x.shape[0])

    def prepare(self, newdata, na_action=None) -> tuple[np.ndarray, pd.Index, np.ndarray | None]:
        """Bin codes (p, m_ok) of the rows of ``newdata`` to predict (None: the training rows), the
        index of every row, and the mask of the rows predicted (None: all; see
        ``prediction_table.missing_rows``, which ``na_action`` is passed to)."""
        if newdata is None:
            return self.binned.codes, pd.RangeIndex(self.binned.codes.shape[1]), None
        x, index = self.new_x(newdata)
        ok = missing_rows(x, index, self.predictors, na_action, self.routes_missing)
        if ok is not None:
            x = x[ok]
        nbins = self.binned.nbins
        for v in np.flatnonzero(self.binned.is_categorical):
            bad = (x[:, v] < 0) | (x[:, v] >= nbins[v])
            if bad.any():
                raise DataError(f"predictor {self.predictors[v]!r} holds level codes unseen in training")
        return np.ascontiguousarray(self.binned.transform(x)), index, ok

    def leaf_indices(self, codes: np.ndarray, trees: slice = slice(None)) -> np.ndarray:
        """Flat store index of the leaf reached per (sample, tree, row) by the rows ``codes``
        (p, m), for the trees ``trees`` (all by default)."""
        t = self.tree_store
        roots = np.ascontiguousarray(t["roots"][:, trees])
        out = np.empty(roots.shape + (codes.shape[1],), dtype=np.int64)
        leaf_indices(codes, self.binned.is_categorical, t["node_var"], t["node_cut"], t["right"], roots, out)
        return out

    def sum_of_trees(self, codes: np.ndarray, trees: slice = slice(None)) -> np.ndarray:
        """Sum of the leaf values of the trees ``trees`` (all by default) per (sample, row) at the
        rows ``codes`` (p, m)."""
        t = self.tree_store
        roots = np.ascontiguousarray(t["roots"][:, trees])
        out = np.empty((roots.shape[0], codes.shape[1]))
        sum_of_trees(codes, self.binned.is_categorical, t["node_var"], t["node_cut"], t["right"], t["node_value"],
                     roots, out)
        return out

    def function_samples(self, newdata=None) -> np.ndarray:
        """Posterior samples of f(x) (regression) as an array (samples, rows), chain-major."""
        return self.leaf_model.function_samples(self.leaf_model.inputs(newdata)[0])

    def _refuse_soft(self, what: str) -> None:
        if not self.leaf_model.hard_splits:
            raise ArgumentError(
                f"{what} prints a hard tree; a soft tree's splits are soft (thresholds and directions in "
                "fit.idata['soft_trees'], structure in fit.tree_arrays()), so it has no rpart-style printout"
            )

    def predict(self, newdata=None, kind: str = "mean", level: float = 0.95, samples: bool = False,
                na_action: str | None = None, times=None):
        """Predictions with intervals.

        Parameters
        ----------
        newdata : DataFrame, dask DataFrame or array, optional
            New data (goes through the same formula spec); None predicts the training rows. A
            dask DataFrame gives a dask DataFrame of the same columns, computed partition by
            partition (the fit is shipped to the workers once). An array must be 2-D (rows,
            predictors in ``fit.predictors`` order); a 1-D array of that many values is one row.
        kind : {"mean", "predictive", "prob", "class", "survival", "hazard", "cumhaz", "median", "rmst"}
            "mean": posterior mean and credible interval of f(x) (regression) or of the class
            probabilities (classification); "predictive": posterior predictive interval of y;
            "prob": class probabilities with intervals and the most probable class;
            "class": the most probable class only. A survival fit (``Surv(time, event) ~ ...``)
            predicts "survival" (its default: S(t | x), columns ``S(t)_mean``, ``S(t)_lower``,
            ``S(t)_upper`` per time), "hazard" (the discrete hazard at grid times), "cumhaz"
            (-log S), "rmst" (restricted mean survival time up to each t: columns ``RMST(t)_mean``, ...)
            or "median" (median survival time: columns ``median``, ``median_lower``,
            ``median_upper`` and ``p_undefined``, the posterior share of draws whose S stays above
            1/2 on the grid, where the median is +inf); see ``bartpy_suite.posterior.survival``.
        level : float
            Interval probability.
        samples : bool
            Return the draws as an ``xarray.DataArray`` (chain, draw, obs[, class]) instead.
        na_action : {None, "raise", "pass"}
            What a row of ``newdata`` with a missing predictor value gets. None (default): a fit
            made with ``na_action="split"`` routes it down each rule's missing-value branch; any
            other fit raises a ``DataError`` naming the rows (by index label) and predictors.
            "raise": always that error. "pass" (R's ``na.pass``): a ``"split"`` fit routes
            missing values as usual; any other fit returns NaN in every column of those rows
            (``class``: NaN; with ``samples=True`` NaN draws) and predicts the other rows exactly
            as it would without them, in the input's order.

        times : array_like or None
            Survival fits only: the times t (default: the grid, ``fit.config["survival"]["grid"]``).
            S is a step function (1 before the first grid time, constant between grid times and
            up to the largest observed time, NaN with a warning beyond it).

        Returns
        -------
        pandas.DataFrame
            Regression: columns mean, lower, upper. Classification: ``prob_<label>``,
            ``prob_<label>_lower``, ``prob_<label>_upper`` per class and ``class``. Indexed like
            ``newdata``.
        """
        check_na_action(na_action)
        samples = check.check_bool("samples", samples)
        return self.leaf_model.predict(newdata, kind, level, samples, na_action, times)

    # -- trees -----------------------------------------------------------------------------------
    def tree_arrays(self, group: str = TREES_GROUP) -> xr.Dataset:
        """The stored trees padded to the largest one, dims (chain, draw, tree, node).

        Variables ``split_var`` (``-1`` at leaves, ``-2`` in padding), ``split_cut``,
        ``left_child``, ``right_child`` (``-1`` at leaves), and ``leaf_value`` (original scale),
        ``leaf_sigma`` or ``leaf_prob`` (class) as the model has them; nodes in preorder. Built on
        request from the compact store in ``idata["trees"]``; large for long fits. In a fit with
        ``na_action="split"`` a numeric ``split_cut`` holds the cut index in its low 32 bits and,
        when missing values go left, the predictor's missing code (``nbins``) above them; a factor's
        level mask has bit ``nbins`` for "missing" (``_kernels/tree.py``).

        Parameters
        ----------
        group : str
            The DataTree group of the store: ``"trees"`` (default, the fit's trees) or a further
            structure-only store a sampler kept (e.g. ``"rung_trees"`` of ``sampler="tempered"``
            with ``store_rungs``): its third dim replaces ``tree`` and only ``split_var``,
            ``split_cut``, ``left_child`` and ``right_child`` are returned.

        Raises
        ------
        ArgumentError
            When the fit has no such group of trees.
        """
        if group != TREES_GROUP:
            return self._extra_tree_arrays(group)
        t = self.tree_store
        chains, draws = self.posterior.sizes["chain"], self.posterior.sizes["draw"]
        counts = t["counts"].reshape(chains, draws, -1)
        value = t.get("node_value", np.full(t["node_var"].shape, np.nan))
        padded = to_padded(t["node_var"], t["node_cut"], value, counts)
        dims = ("chain", "draw", "tree", "node")
        data = {"split_var": (dims, padded["split_var"]), "split_cut": (dims, padded["split_cut"]),
                "left_child": (dims, padded["left"]), "right_child": (dims, padded["right"])}
        if "node_value" in t:
            data["leaf_value"] = (dims, padded["leaf_value"])
        width = padded["split_var"].shape[-1]
        slot = t["roots"].reshape(chains, draws, -1)[..., None] + np.arange(width)
        leaf = padded["split_var"] == -1
        slot = np.where(leaf, slot, 0)
        if "node_sigma" in t:
            data["leaf_sigma"] = (dims, np.where(leaf, t["node_sigma"][slot], np.nan))
        if "node_prob" in t:
            data["leaf_prob"] = (dims + ("class",), np.where(leaf[..., None], t["node_prob"][slot], np.nan))
        return xr.Dataset(data)

    def _extra_tree_arrays(self, group: str) -> xr.Dataset:
        """``tree_arrays`` of a structure-only store (``node_var``, ``node_cut``, ``tree_nodes``)."""
        if not isinstance(group, str) or group not in self.idata.children or group == "soft_trees" or \
                "tree_nodes" not in self.idata[group].dataset.data_vars or \
                "node_var" not in self.idata[group].dataset.data_vars:
            stores = sorted(name for name, node in self.idata.children.items()
                            if "tree_nodes" in node.dataset.data_vars and name != "soft_trees")
            raise ArgumentError(f"tree_arrays: no tree store {group!r} in this fit; stores: {stores}")
        g = self.idata[group]
        counts = np.asarray(g["tree_nodes"].values, dtype=np.int64)
        var = np.ascontiguousarray(g["node_var"].values, dtype=np.int32)
        padded = to_padded(var, np.asarray(g["node_cut"].values, dtype=np.int64), np.full(var.shape, np.nan),
                           counts)
        dims = tuple(g["tree_nodes"].dims) + ("node",)
        return xr.Dataset({"split_var": (dims, padded["split_var"]), "split_cut": (dims, padded["split_cut"]),
                           "left_child": (dims, padded["left"]), "right_child": (dims, padded["right"])})

    def tree(self, chain: int = 0, draw: int = 0, tree: int = 0):
        """One stored tree, printed like R's rpart.

        Parameters
        ----------
        chain, draw : int
            Which kept draw.
        tree : int
            Which tree of the draw (BART); 0 for single-tree models.

        Returns
        -------
        TreeText
        """
        self._refuse_soft("tree()")
        sizes = {"chain": self.posterior.sizes["chain"], "draw": self.posterior.sizes["draw"],
                 "tree": self.tree_store["counts"].shape[1]}
        for name, value in (("chain", chain), ("draw", draw), ("tree", tree)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < sizes[name]:
                raise ArgumentError(f"{name} must be an integer in 0..{sizes[name] - 1}; got {value!r}")
        title = f"Tree {tree} of chain {chain}, draw {draw}"
        return self._format(chain * sizes["draw"] + draw, tree, title)

    def map_tree(self, tree: int = 0):
        """The most probable visited tree (largest log posterior among the kept draws).

        Available where the model records each draw's log posterior (single-tree models);
        for BART, where the posterior of one tree is not defined apart from the others, use
        :meth:`tree` to print tree j of a draw.

        Returns
        -------
        TreeText
            Prints like R's rpart: node number, split, rows, fitted value; leaves marked ``*``.
        """
        self._refuse_soft("map_tree()")
        if "log_posterior" not in self.sample_stats:
            raise ArgumentError(
                f"map_tree needs the log posterior of each draw, which a {self.config['model_type']} fit does not "
                "record (the posterior of one tree of a sum of trees is not defined apart from the others); "
                "print one tree of a draw with fit.tree(chain=0, draw=0, tree=j)"
            )
        n_trees = self.tree_store["counts"].shape[1]
        if isinstance(tree, bool) or not isinstance(tree, (int, np.integer)) or not 0 <= tree < n_trees:
            raise ArgumentError(f"tree must be an integer in 0..{n_trees - 1}; got {tree!r}")
        lp = self.sample_stats["log_posterior"].values.reshape(-1)
        s = int(np.argmax(lp))
        return self._format(s, tree, f"MAP tree (log posterior {lp[s]:.4f})")

    def _format(self, sample: int, tree: int, title: str):
        t = self.tree_store
        root = int(t["roots"][sample, tree])
        count = int(t["counts"][sample, tree])
        nodes = slice(root, root + count)
        var = t["node_var"][nodes]
        arrays = {"split_var": var, "split_cut": t["node_cut"][nodes],
                  "left_child": np.where(var >= 0, np.arange(count) + 1, -1),
                  "right_child": np.where(var >= 0, t["right"][nodes] - root, -1)}
        for name, key in (("node_value", "leaf_value"), ("node_sigma", "leaf_sigma"), ("node_prob", "leaf_prob")):
            if name in t:
                arrays[key] = t[name][nodes]
        y = self.idata["observed_data"]["y"].values
        return format_tree(arrays, self.binned, self.predictors, self.config, self.design, y, title, tree=tree)

    # -- persistence -------------------------------------------------------------------------------
    def to_netcdf(self, path, log_likelihood: bool = False) -> None:
        """Write the whole posterior (and what ``predict`` needs) to a netCDF file.

        Every variable is compressed (HDF5 shuffle + zlib) and integers are stored in the smallest
        integer type that holds their values; floats keep float64, so a loaded fit predicts
        exactly. The file is written to a temporary name in the same folder and renamed, so a
        failure leaves nothing half-written and an existing file at ``path`` untouched.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (replaced if it exists).
        log_likelihood : bool
            Also store the ``log_likelihood`` group. By default it is left out, because it is
            chains x draws x rows float64 values (most of a typical file) that
            :func:`bartpy_suite.load` recomputes exactly from the stored trees: the file records
            that the fit had the group, and ``load`` adds it back, so ``arviz_stats.loo`` works on
            the loaded fit as on the original. Store it for tools that read the netCDF file
            without bartpy_suite.

        Raises
        ------
        ArgumentError
            When ``path`` is a folder or its folder does not exist.
        OSError
            When the file cannot be written (the message names ``path``).
        """
        write_tree_atomically(_tree_to_write(self.idata, bool(log_likelihood)), path, "fit.nc")

    def __repr__(self) -> str:
        post = self.posterior
        return (
            f"<bartpy_suite.Fit: {self.config['model_type']} {self.leaf_model.kind}, "
            f"sampler={self.config['sampler']!r}, "
            f"{post.sizes['chain']} chains x {post.sizes['draw']} draws, predictors={self.predictors}>"
        )

    def _repr_html_(self) -> str:
        return f"<p>{self.__repr__()[1:-1]}</p>" + self.summary().to_html(float_format="%.4g")

    # -- SHAP values (posterior/shap.py) ---------------------------------------------------------
    def shap(self, newdata=None, max_draws: int | None = None, threads: int | None = None) -> xr.Dataset:
        """Exact SHAP values of every kept draw (path-dependent TreeSHAP).

        For each draw, each tree is explained with path-dependent TreeSHAP (Lundberg et al. 2020,
        Algorithm 2: the value of a coalition averages the tree over the training rows reaching
        each node, the covers) and a forest's values are summed over its trees, so for every draw
        and row ``base + shap.sum("predictor")`` is that draw's f(x) to rounding. A factor is one
        predictor (its rules split level subsets).

        Parameters
        ----------
        newdata : DataFrame or array, optional
            Rows to explain (as for ``predict``); None explains the training rows.
        max_draws : int or None
            Draws kept per chain, evenly spaced (None: all). The values take chains x draws x
            rows x predictors (x classes) x 8 bytes, refused beyond 4 GiB.
        threads : int or None
            Threads to split the draws among (default ``NUMBA_NUM_THREADS``, as prediction).

        Returns
        -------
        xarray.Dataset
            ``shap`` (chain, draw, row, predictor) and ``base`` (chain, draw); classification
            CART and multinomial BART add a ``class`` dim to both. ``attrs["scale"]`` says what
            they add up to: ``"response"`` (regression: f on the response scale), ``"probit
            latent"`` (probit BART: the latent f, P = Phi(f); ordinal BART: the latent eta,
            P(y <= k) = Phi(c_k - eta)), ``"log-linear"`` (multinomial
            BART: each class's F_k, P_k = softmax(F)_k), ``"probability"`` (classification
            CART: the leaf probability of each class). ``base`` is each draw's mean of that
            quantity over the training rows. A soft tree fitted with ``sampler="hmc_df"`` (one
            predictor per gate) is explained with soft covers (each training row counted with its
            probability of reaching a node): f(x), or each class's probability.

        Raises
        ------
        ArgumentError
            For a soft tree fitted with ``hmc_dfi`` (not supported: each gate splits on a weighted
            sum of all predictors), a bad ``max_draws`` or ``threads``, or an output larger than
            4 GiB.
        """
        from .shap import shap_dataset

        return shap_dataset(self, newdata, max_draws=max_draws, threads=threads)

    def shap_summary(self, newdata=None, level: float = 0.9, max_draws: int | None = None,
                     threads: int | None = None):
        """Posterior means and credible intervals of the SHAP values, and a global importance.

        Computed in blocks of rows (at most 256 MB of values at a time), so any number of rows
        fits in memory.

        Parameters
        ----------
        newdata : DataFrame or array, optional
            Rows to explain; None: the training rows.
        level : float
            Probability of the equal-tailed credible intervals.
        max_draws : int or None
            Draws kept per chain, evenly spaced (None: all).
        threads : int or None
            Threads to split the draws among.

        Returns
        -------
        bartpy_suite.posterior.shap.ShapSummary
            ``rows``: long DataFrame (row, predictor[, class], mean, lower, upper) of each SHAP
            value; ``importance``: per predictor the posterior of the mean over the rows of
            |SHAP| (mean, lower, upper, share, rank, p_top), ranked (by class, plus ``"all"``:
            summed over the classes, for classification CART and multinomial BART); ``scale`` as
            in :meth:`shap`. Intervals and means honour ``fit.weights``.
        """
        from .shap import summarise

        return summarise(self, newdata, level=level, max_draws=max_draws, threads=threads)

    def importance(self, newdata=None, level: float = 0.9, max_draws: int | None = None,
                   threads: int | None = None) -> pd.DataFrame:
        """Global importance per predictor: the mean over the rows of |SHAP|, per draw, summarised.

        Unlike :meth:`variable_activity` (the share of split rules, which in BART is spread
        almost evenly by the many small trees), this measures how much each predictor moves
        f(x), on the scale of :meth:`shap`.

        Parameters
        ----------
        newdata : DataFrame or array, optional
            Rows to average over; None: the training rows.
        level : float
            Probability of the equal-tailed credible interval.
        max_draws : int or None
            Draws kept per chain, evenly spaced (None: all).
        threads : int or None
            Threads to split the draws among.

        Returns
        -------
        pandas.DataFrame
            Ranked by decreasing mean: ``mean``, ``lower``, ``upper``, ``share``, ``rank``,
            ``p_top`` (posterior probability of being the most important); indexed by predictor,
            or by (class, predictor) for classification CART and multinomial BART.
        """
        from .shap import summarise

        return summarise(self, newdata, level=level, max_draws=max_draws, rows=False, threads=threads).importance


def _tail_ess(arr: np.ndarray, weights: np.ndarray) -> float:
    """arviz-stats' tail ESS (5% and 95% quantiles) for equally weighted draws; NaN for
    weighted draws, for which no tail ESS is defined here (``ess_bulk`` is weight-aware)."""
    if arr.shape[1] < 4 or np.ptp(arr) == 0 or not np.allclose(weights, weights.flat[0]):
        return float("nan")
    from arviz_stats.base import array_stats  # here: it pulls in scipy.signal (~100 MB)

    with np.errstate(all="ignore"):
        return float(array_stats.ess(arr, chain_axis=0, draw_axis=1, method="tail", prob=0.05))


def _tree_to_write(idata: xr.DataTree, log_likelihood: bool) -> xr.DataTree:
    """The DataTree ``to_netcdf`` writes: ``idata``'s groups (sharing its arrays, nothing of
    ``idata`` modified) without the log_likelihood group unless ``log_likelihood``, and with
    ``LOG_LIKELIHOOD_ATTR`` in constant_data's attributes when the group was left out."""
    has = LOG_LIKELIHOOD_GROUP in idata.children
    groups = {}
    for node in idata.subtree:
        if node.path == f"/{LOG_LIKELIHOOD_GROUP}" and not log_likelihood:
            continue
        ds = node.to_dataset(inherit=False)
        if node.path == f"/{TREES_GROUP}":
            ds = _leaves_only(ds)
        if node.path == "/constant_data":
            attrs = {k: v for k, v in ds.attrs.items() if k != LOG_LIKELIHOOD_ATTR}
            if has and not log_likelihood:
                attrs[LOG_LIKELIHOOD_ATTR] = "recompute"
            ds = ds.copy(deep=False)
            ds.attrs = attrs
        groups[node.path] = ds
    return xr.DataTree.from_dict(groups)


def _leaves_only(ds: xr.Dataset) -> xr.Dataset:
    """The trees group with its leaf parameters (``LEAF_VARS``) kept at the leaves only, over dim
    ``LEAF_DIM``: their internal-node entries are NaN, and the interleaved NaNs cost zlib a quarter
    of the file. Unchanged unless every internal entry is NaN, so ``load`` restores it exactly."""
    if "node_var" not in ds or ds["node_var"].dims != ("node",):
        return ds
    leaf = np.asarray(ds["node_var"].values) < 0
    moved = {}
    for name in LEAF_VARS:
        if name not in ds.data_vars:
            continue
        da = ds[name]
        if da.dims[:1] != ("node",) or da.dtype.kind != "f" or not np.isnan(da.values[~leaf]).all():
            return ds
        moved[name] = ((LEAF_DIM,) + da.dims[1:], da.values[leaf])
    return ds.drop_vars(list(moved)).assign(moved) if moved else ds
