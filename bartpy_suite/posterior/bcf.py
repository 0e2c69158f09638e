"""The posterior of a Bayesian causal forest fit (``bps.bcf``; issue 30, "Causal" and "Engine"; spec
multi_forest.md 1, 3.7, 4): an ArviZ-layout DataTree like a BART ``Fit``'s, with the treatment effects
computed draw by draw from the two forests' stored trees.

Per kept draw s, on the original scale (spec 3.7, bcf's ``tau`` and ``mu``):

    CATE_i = s_y (b_1 - b_0) t(x_i),    mu_0(x_i) = ybar + s_y (s_m m(x_i) + b_0 t(x_i))

and ``ATE = mean_i CATE_i``, ``ATT`` over the treated rows, ``ATC`` over the controls; a summary is the
mean over draws with equal-tailed quantile intervals. Only these identified functions are reported:
t, m, b_k and s_m alone flip sign and drift (spec 7). Random effects (``y ~ x1 + (1 | g)``) are
prognostic: they enter mu_0 (and ``predict``) for a known group, never the CATE.

The DataTree (``CausalFit.idata``):

* ``posterior``: ``sigma`` (original scale), the working parameters ``b0``, ``b1``, ``mu_scale`` (s_m),
  ``delta_mu`` (chain, draw); ``variable_activity_mu`` (chain, draw, mu_predictor) and
  ``variable_activity_tau`` (chain, draw, tau_predictor), each forest's share of split rules per
  predictor; with random effects the ``re_*`` variables of ``posterior/random_effects.py``;
* ``sample_stats``: ``n_proposed``, ``n_accepted`` (chain, draw, move) over both forests, ``weight``;
* ``mu_forest`` and ``tau_forest``, one group per forest: its trees (``tree_nodes`` (chain, draw, tree),
  flat preorder ``node_var``, ``node_cut``, ``node_value`` over ``node``: leaf values on the working
  scale, NaN at internal nodes) and its binned training predictors (``x_codes``, ``cuts``, ``nbins``,
  ``is_categorical`` over ``predictor``); the mu forest's last predictor is ``propensity``;
* ``observed_data``: ``y``; ``constant_data``: ``z``, ``propensity``, ``w`` (precision weights) and
  ``row_index`` (obs), the configuration and both designs as JSON attributes (and the random effects'
  ``re_group_code``, ``re_basis``);
* in a file only, ``propensity``: the probit BART propensity fit's own groups (``posterior/bcf_file.py``).

Import rule: numpy, pandas, xarray, ``_kernels``, ``errors``, ``_binning`` and this package's
``posterior`` modules (the propensity model is a ``Fit`` held by duck typing).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import xarray as xr

from .._binning import BinnedPredictors
from .._kernels.predict import sum_of_trees
from .._kernels.record import right_children, split_shares, tree_roots
from ..errors import ArgumentError, BartpySuiteWarning, DataError
from .fit import CONFIG_ATTR

#: Propensity bounds of the common-support diagnostic (rows outside are counted and warned about).
SUPPORT_LOW = 0.05
SUPPORT_HIGH = 0.95
#: The forests and the DataTree group of each.
FORESTS = ("mu", "tau")
FOREST_GROUPS = {"mu": "mu_forest", "tau": "tau_forest"}
#: The scalar posterior variables (sigma on the response's scale, the others on the working scale).
PARAM_VARS = ("sigma", "b0", "b1", "mu_scale", "delta_mu")
#: constant_data attributes holding each forest's formula design as JSON.
DESIGN_ATTRS = {"mu": "bartpy_suite_design_mu", "tau": "bartpy_suite_design_tau"}
#: Move names of the MH samplers (columns of ``sample_stats/n_proposed``).
MOVE_NAMES = ("grow", "prune", "change", "swap", "rotate", "perturb")


class CommonSupportWarning(BartpySuiteWarning):
    """Rows whose estimated propensity is near 0 or 1: their treatment effect rests on extrapolation."""


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise ArgumentError(f"level must be a number strictly between 0 and 1 (got {level!r})")
    return float(level)


def _check_forest(forest) -> str:
    if forest not in FORESTS:
        raise ArgumentError(f"forest must be 'mu' (the prognostic forest) or 'tau' (the treatment-effect forest); "
                            f"got {forest!r}")
    return forest


def binned_from_group(ds) -> BinnedPredictors:
    """The binned training predictors stored in a forest group (``x_codes``, ``cuts`` padded with NaN,
    ``nbins``, ``is_categorical``), as ``Fit.binned`` reads constant_data."""
    nbins = np.asarray(ds["nbins"].values, dtype=np.int64)
    is_cat = np.asarray(ds["is_categorical"].values).astype(bool)
    cuts = np.asarray(ds["cuts"].values, dtype=np.float64)
    grids = tuple(cuts[v, : nbins[v] - 1] if not is_cat[v] else np.zeros(0) for v in range(len(nbins)))
    return BinnedPredictors(np.asarray(ds["x_codes"].values, dtype=np.int32), grids, nbins, is_cat)


def forest_dataset(var, cut, value, counts: np.ndarray, binned, names: list[str]) -> xr.Dataset:
    """One forest's group: its flat tree store (``counts`` (chain, draw, tree)) and binned predictors."""
    p = len(names)
    max_cuts = max([len(c) for c in binned.cuts] + [1])
    cuts = np.full((p, max_cuts), np.nan)
    for v, grid in enumerate(binned.cuts):
        cuts[v, : len(grid)] = grid
    return xr.Dataset({
        "tree_nodes": (("chain", "draw", "tree"), np.asarray(counts, dtype=np.int64)),
        "node_var": (("node",), np.asarray(var, dtype=np.int32)),
        "node_cut": (("node",), np.asarray(cut, dtype=np.int64)),
        "node_value": (("node",), np.asarray(value, dtype=np.float64)),
        "x_codes": (("predictor", "obs"), np.asarray(binned.codes, dtype=np.int32)),
        "cuts": (("predictor", "cut"), cuts),
        "nbins": (("predictor",), np.asarray(binned.nbins, dtype=np.int64)),
        "is_categorical": (("predictor",), np.asarray(binned.is_categorical).astype(np.int8)),
    })


class ForestStore:
    """One forest's kept trees over all chains, in the prediction kernels' dtypes (draws chain-major),
    read from its DataTree group.

    Attributes
    ----------
    var, cut, value : numpy.ndarray
        Flat preorder node arrays (split variable, -1 at leaves; cut index or level mask; leaf value on
        the working scale).
    counts : numpy.ndarray
        Nodes per (sample, tree).
    binned : BinnedPredictors
        The forest's training predictors on its cut grids.
    names : list of str
        The forest's predictors.
    """

    def __init__(self, ds, names: list[str]):
        self.var = np.ascontiguousarray(ds["node_var"].values, dtype=np.int32)
        self.cut = np.ascontiguousarray(ds["node_cut"].values, dtype=np.int64)
        self.value = np.ascontiguousarray(ds["node_value"].values, dtype=np.float64)
        counts = np.asarray(ds["tree_nodes"].values, dtype=np.int64)
        self.counts = counts.reshape(counts.shape[0] * counts.shape[1], -1)
        self.right = right_children(self.var, self.counts)
        self.roots = tree_roots(self.counts)
        self.binned = binned_from_group(ds)
        self.names = list(names)

    @property
    def n_leaves(self) -> np.ndarray:
        """Leaves per (sample, tree): a binary tree of k nodes has (k + 1) / 2."""
        return (self.counts + 1) // 2

    def raw_sum(self, codes: np.ndarray) -> np.ndarray:
        """The forest's raw sum of leaf values (samples, rows) at binned rows ``codes`` (p, m)."""
        out = np.zeros((self.roots.shape[0], codes.shape[1]))
        sum_of_trees(np.ascontiguousarray(codes, dtype=np.int32), np.asarray(self.binned.is_categorical, dtype=bool),
                     self.var, self.cut, self.right, self.value, self.roots, out)
        return out


def build_causal_idata(*, params: np.ndarray, chains: int, forests: dict, counts: np.ndarray, y: np.ndarray,
                       z: np.ndarray, w: np.ndarray, propensity: np.ndarray, index, designs: dict,
                       config: dict) -> xr.DataTree:
    """The DataTree of a bcf fit (module docstring) from the chains' stacked draws.

    Parameters
    ----------
    params : ndarray
        (samples, 5), chain-major: sigma on the working scale, b_0, b_1, s_m, delta.
    chains : int
    forests : dict
        ``{"mu": (var, cut, value, counts (samples, trees), binned, names), "tau": ...}``.
    counts : ndarray
        Move counts (samples, moves, 2): proposals and acceptances.
    y, z, w, propensity : ndarray
        The training response (original scale), treatment codes, weights and propensities.
    index : pandas.Index
        The training rows' labels (integers or text).
    designs : dict
        ``{"mu": Design, "tau": Design}`` (their ``to_json`` is stored).
    config : dict
        The settings (JSON-serialisable); ``scale`` rescales sigma.
    """
    samples = params.shape[0]
    if samples % chains:
        raise ValueError(f"{samples} draws do not split into {chains} chains")
    draws = samples // chains
    shape = (chains, draws)
    coords = {"chain": np.arange(chains), "draw": np.arange(draws)}
    scale = float(config["scale"])
    post = {"sigma": (("chain", "draw"), (params[:, 0] * scale).reshape(shape))}
    for k, name in enumerate(PARAM_VARS[1:], start=1):
        post[name] = (("chain", "draw"), params[:, k].reshape(shape))
    groups = {}
    for name in FORESTS:
        var, cut, value, tree_counts, binned, names = forests[name]
        tree_counts = np.asarray(tree_counts, dtype=np.int64)
        share = np.empty((samples, len(names)))
        split_shares(np.ascontiguousarray(var, dtype=np.int32), tree_counts, len(names), share)
        post[f"variable_activity_{name}"] = (("chain", "draw", f"{name}_predictor"), share.reshape(shape + (-1,)))
        coords[f"{name}_predictor"] = list(names)
        groups[f"/{FOREST_GROUPS[name]}"] = forest_dataset(var, cut, value, tree_counts.reshape(shape + (-1,)),
                                                           binned, names)
    counts = np.asarray(counts, dtype=np.int64)
    stats = xr.Dataset({"n_proposed": (("chain", "draw", "move"), counts[:, :, 0].reshape(shape + (-1,))),
                        "n_accepted": (("chain", "draw", "move"), counts[:, :, 1].reshape(shape + (-1,))),
                        "weight": (("chain", "draw"), np.ones(shape))},
                       coords={"chain": coords["chain"], "draw": coords["draw"]})
    stats.attrs["move_names"] = json.dumps(list(MOVE_NAMES[: counts.shape[1]]))
    index = pd.Index(index)
    row_index = np.asarray(index, dtype=np.int64) if pd.api.types.is_integer_dtype(index.dtype) else \
        np.asarray(index.astype(str), dtype=str)
    const = xr.Dataset({"z": (("obs",), np.asarray(z, dtype=np.int64)),
                        "propensity": (("obs",), np.asarray(propensity, dtype=np.float64)),
                        "w": (("obs",), np.asarray(w, dtype=np.float64)), "row_index": (("obs",), row_index)})
    const.attrs[CONFIG_ATTR] = json.dumps({**config, "index_kind": "int" if row_index.dtype.kind == "i" else "str"})
    for name in FORESTS:
        const.attrs[DESIGN_ATTRS[name]] = designs[name].to_json()
    groups.update({"/posterior": xr.Dataset(post, coords=coords), "/sample_stats": stats,
                   "/observed_data": xr.Dataset({"y": (("obs",), np.asarray(y, dtype=np.float64))}),
                   "/constant_data": const})
    return xr.DataTree.from_dict(groups)


class CausalFit:
    """A fitted Bayesian causal forest (``bps.bcf``), or one read by ``bps.load``.

    Attributes
    ----------
    idata : xarray.DataTree
        The posterior in ArviZ's layout (module docstring): ``posterior``, ``sample_stats``,
        ``mu_forest``, ``tau_forest``, ``observed_data``, ``constant_data``.
    propensity_fit : Fit or None
        The probit BART fit of the treatment that estimated the propensity (None for a user column).
    designs : dict
        The formula designs of the mu and tau forests.
    treatment : str
        The treatment column.
    config : dict
        The settings of the fit.
    mu, tau : ForestStore
        Each forest's trees, as the prediction kernels read them.
    """

    def __init__(self, idata: xr.DataTree, designs: dict, propensity_fit=None):
        self.idata = idata
        const = idata["constant_data"]
        self.config = json.loads(const.attrs[CONFIG_ATTR])
        self.designs = designs
        self.propensity_fit = propensity_fit
        self.treatment = self.config["treatment"]
        post = idata["posterior"]
        self.chains = int(post.sizes["chain"])
        self.center = float(self.config["center"])
        self.scale = float(self.config["scale"])
        self.y = np.asarray(idata["observed_data"]["y"].values, dtype=np.float64)
        self.z = np.asarray(const["z"].values, dtype=np.int64)
        self.propensity = np.asarray(const["propensity"].values, dtype=np.float64)
        rows = const["row_index"].values
        self.index = pd.Index(rows.astype(np.int64) if self.config.get("index_kind") == "int" else rows.astype(object))
        names = {name: post[f"{name}_predictor"].values.astype(str).tolist() for name in FORESTS}
        self.mu = ForestStore(idata[FOREST_GROUPS["mu"]], names["mu"])
        self.tau = ForestStore(idata[FOREST_GROUPS["tau"]], names["tau"])
        # (samples, 5) chain-major: sigma on the response's scale, then b_0, b_1, s_m, delta
        self._params = np.column_stack([post[v].values.reshape(-1) for v in PARAM_VARS])
        self._train = None

    # -- groups ----------------------------------------------------------------------------------
    @property
    def posterior(self) -> xr.DataTree:
        """The posterior group (dims chain, draw, ...)."""
        return self.idata["posterior"]

    @property
    def sample_stats(self) -> xr.DataTree:
        """The sampler's statistics per draw (moves proposed and accepted, weight)."""
        return self.idata["sample_stats"]

    @property
    def weights(self) -> xr.DataArray:
        """Weight of each draw (chain, draw): uniform, normalised to sum to one."""
        w = self.sample_stats["weight"]
        return w / w.sum()

    @property
    def n_leaves(self) -> dict:
        """Leaves per (sample, tree) of each forest (``{"mu": ..., "tau": ...}``)."""
        return {"mu": self.mu.n_leaves, "tau": self.tau.n_leaves}

    @property
    def move_counts(self) -> np.ndarray:
        """Moves proposed and accepted per (sample, move, 0 proposed / 1 accepted), both forests."""
        s = self.sample_stats
        prop = s["n_proposed"].values.reshape(-1, s.sizes["move"])
        acc = s["n_accepted"].values.reshape(-1, s.sizes["move"])
        return np.stack([prop, acc], axis=2)

    def to_arviz(self) -> xr.DataTree:
        """The DataTree (``idata``), ArviZ's layout: ``arviz_stats.summary(fit.to_arviz(),
        var_names=["sigma"])`` and the ArviZ plots read it."""
        return self.idata

    # -- draws -----------------------------------------------------------------------------------
    @property
    def params(self) -> pd.DataFrame:
        """The kept scalar draws (module docstring); ``sigma`` on the response's scale."""
        p = self._params
        per_chain = p.shape[0] // self.chains
        return pd.DataFrame({"chain": np.repeat(np.arange(self.chains), per_chain), "sigma": p[:, 0],
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
        column (0/1). None: the training rows. With random effects (``y ~ x1 + (1 | g)``) a row of a group
        seen in training adds its effect W' beta_g draw by draw, and needs the group (and slope) columns; a
        row of a new group gets the population mean, 0 (spec 4.3 a).

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
        f = mu0 + z[None, :] * cate + self._group_effects(new)
        a = (1.0 - level) / 2.0
        return pd.DataFrame({"mean": f.mean(axis=0), "lower": np.quantile(f, a, axis=0),
                             "upper": np.quantile(f, 1.0 - a, axis=0)}, index=index)

    def _group_effects(self, new) -> np.ndarray | float:
        """W' beta_g per (sample, row) of the training rows (``new`` None) or of ``new`` on the response's
        scale: 0 without random effects, and for a row whose group was not seen in training (spec 4.3 a)."""
        spec = self.config.get("random_effects")
        if spec is None:
            return 0.0
        from .random_effects import new_group_rows

        if new is None:
            const = self.idata["constant_data"]
            codes, basis = const["re_group_code"].values, const["re_basis"].values
        else:
            codes, basis, _ = new_group_rows(spec, new)
        eff = self.posterior["re_effect"].values
        beta = eff.reshape(-1, *eff.shape[2:])
        out = np.zeros((beta.shape[0], codes.size))
        known = codes >= 0
        if known.any():
            out[:, known] = np.einsum("smk,mk->sm", beta[:, codes[known], :], basis[known])
        return out

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
            source = ("propensity (the column " + repr(self.config["propensity_column"]) + ")"
                      if self.config.get("propensity_column") else "estimated propensity")
            warnings.warn(
                f"{cs['below'] + cs['above']} of {self.propensity.shape[0]} rows have a {source} "
                f"below {SUPPORT_LOW} ({cs['below']}) or above {SUPPORT_HIGH} ({cs['above']}): their treatment "
                "effects extrapolate from the other arm; check overlap before trusting the CATE there",
                CommonSupportWarning, stacklevel=stacklevel)

    def summary(self, level: float = 0.95) -> pd.DataFrame:
        """ATE, ATT, ATC and sigma (and with random effects ``sd[<term> | <group>]``, the sd of each
        random-effect term across groups, as a BART fit's): mean, sd, equal-tailed interval and split R-hat
        over the chains."""
        level = _check_level(level)
        rows = {"ATE": self.ate_draws(), "ATT": self._training_draws()[0][:, self.z == 1].mean(axis=1),
                "ATC": self._training_draws()[0][:, self.z == 0].mean(axis=1), "sigma": self._params[:, 0]}
        out = {}
        for name, d in rows.items():
            if not np.all(np.isfinite(d)):
                continue
            mean, lower, upper = self._interval(d, level)
            out[name] = {"mean": mean, "sd": float(np.std(d, ddof=1)), "lower": lower, "upper": upper,
                         "r_hat": split_r_hat(d.reshape(self.chains, -1))}
        spec = self.config.get("random_effects")
        if spec is not None:  # the sd of each random-effect term across groups, on the response's scale
            sd = self.posterior["re_sd"].values.reshape(-1, len(spec["terms"]))
            for k, term in enumerate(spec["terms"]):
                d = sd[:, k]
                mean, lower, upper = self._interval(d, level)
                out[f"sd[{term} | {spec['group']}]"] = {"mean": mean, "sd": float(np.std(d, ddof=1)), "lower": lower,
                                                        "upper": upper,
                                                        "r_hat": split_r_hat(d.reshape(self.chains, -1))}
        return pd.DataFrame(out).T


    # -- forests ---------------------------------------------------------------------------------
    def variable_activity(self, level: float = 0.95, forest: str | None = None) -> pd.DataFrame:
        """Each predictor's share of a forest's split rules, per draw, summarised (as ``Fit.variable_activity``).

        Parameters
        ----------
        level : float
            Probability of the equal-tailed interval (with ``forest``).
        forest : {None, "mu", "tau"}
            ``"mu"`` (the prognostic forest, whose predictors include ``propensity``) or ``"tau"`` (the
            treatment-effect forest): columns ``mean``, ``lower``, ``upper`` indexed by predictor, as a BART
            fit's. None: both forests' posterior mean shares side by side.

        Returns
        -------
        pandas.DataFrame
            With ``forest``: indexed by that forest's predictors, columns mean, lower, upper. Without: one
            column per forest (``mu``, ``tau``), one row per predictor of either forest (NaN where a forest
            does not have the predictor). Draws without a split count as 0.
        """
        level = _check_level(level)
        if forest is None:
            return pd.DataFrame({name: pd.Series(self._activity(name).mean(axis=0),
                                                 index=getattr(self, name).names) for name in FORESTS})
        forest = _check_forest(forest)
        act = self._activity(forest)
        a = (1.0 - level) / 2.0
        return pd.DataFrame({"mean": act.mean(axis=0), "lower": np.quantile(act, a, axis=0),
                             "upper": np.quantile(act, 1.0 - a, axis=0)},
                            index=pd.Index(getattr(self, forest).names, name="predictor"))

    def _activity(self, forest: str) -> np.ndarray:
        da = self.posterior[f"variable_activity_{forest}"]
        return da.values.reshape(-1, da.shape[2])

    def mean_leaves(self) -> pd.DataFrame:
        """Mean leaf count per tree of each forest, per draw (a forest-level diagnostic only: the forests
        can trade the control-arm surface, spec 7)."""
        return pd.DataFrame({k: v.mean(axis=1) for k, v in self.n_leaves.items()})

    def tree(self, chain: int = 0, draw: int = 0, tree: int = 0, forest: str = "mu"):
        """One stored tree of a forest, printed like R's rpart (as ``Fit.tree``).

        A leaf shows the tree's term in that draw on the response's scale: s_y s_m theta for a mu tree
        (its part of mu_0 before the tau forest's b_0 t), s_y (b_1 - b_0) theta for a tau tree (its part
        of the CATE). A split shows the mean response of its training rows.

        Parameters
        ----------
        chain, draw : int
            Which kept draw.
        tree : int
            Which tree of the forest.
        forest : {"mu", "tau"}

        Returns
        -------
        TreeText
        """
        from .tree_text import format_tree

        forest = _check_forest(forest)
        store = getattr(self, forest)
        draws = self._params.shape[0] // self.chains
        sizes = {"chain": self.chains, "draw": draws, "tree": store.counts.shape[1]}
        for name, value in (("chain", chain), ("draw", draw), ("tree", tree)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < sizes[name]:
                raise ArgumentError(f"{name} must be an integer in 0..{sizes[name] - 1}; got {value!r}")
        sample = chain * draws + draw
        p = self._params[sample]
        factor = self.scale * (p[3] if forest == "mu" else p[2] - p[1])
        root = int(store.roots[sample, tree])
        count = int(store.counts[sample, tree])
        nodes = slice(root, root + count)
        var = store.var[nodes]
        arrays = {"split_var": var, "split_cut": store.cut[nodes],
                  "left_child": np.where(var >= 0, np.arange(count) + 1, -1),
                  "right_child": np.where(var >= 0, store.right[nodes] - root, -1),
                  "leaf_value": store.value[nodes] * factor}
        config = {"response_kind": "numeric", "leaf_model": "normal", "model_type": "bart"}
        what = "s_y s_m theta, its term of mu_0" if forest == "mu" else "s_y (b1 - b0) theta, its term of the CATE"
        title = f"{forest} tree {tree} of chain {chain}, draw {draw} (leaf: {what})"
        return format_tree(arrays, store.binned, store.names, config, self.designs[forest], self.y, title, tree=tree)

    # -- files -----------------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fit to one netCDF file (``posterior/bcf_file.py``): the DataTree, with the propensity
        model's groups under ``propensity``; read back by ``bps.load``. Written to a temporary name in the
        same folder and renamed, so a failure leaves nothing half-written.

        Parameters
        ----------
        path : str or os.PathLike
        """
        from .bcf_file import save_causal

        save_causal(self, path)

    to_netcdf = save

    def __repr__(self) -> str:
        return (f"<bartpy_suite.CausalFit: bcf, treatment={self.treatment!r}, sampler={self.config['sampler']!r}, "
                f"{self.chains} chains x {self._params.shape[0] // self.chains} draws, "
                f"{self.mu.counts.shape[1]} mu and {self.tau.counts.shape[1]} tau trees>")

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
