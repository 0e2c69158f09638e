"""Random effects of a BART fit (``y ~ x1 + (x1 | g)``): their draws in the DataTree, their summary
rows and their part of ``predict`` (the leaf model ``normal_re``).

The fit stores (spec multi_forest.md 4):

* posterior ``re_alpha`` (chain, draw, re_term), ``re_xi`` (chain, draw, re_group, re_term) and
  ``re_sigma_xi`` (chain, draw, re_term): the sampler's alpha, xi and sqrt(diag Sigma_xi) on the
  working (standardised) response scale;
* posterior ``re_effect`` = alpha * xi * scale (chain, draw, re_group, re_term), each group's
  coefficients beta_g on the response scale, and ``re_sd`` = |alpha| sigma_xi * scale (chain,
  draw, re_term), the sd of each random-effect term across groups;
* constant_data ``re_group_code`` (obs) and ``re_basis`` (obs, re_term): each training row's
  group and basis row;
* ``config["random_effects"]``: the grouping column, the terms and the group labels.

``summary()`` gets a row ``sd[<term> | <group>]`` per term. Sigma_xi is diagonal, so no
correlation between a group's intercept and slope is modelled and there are no correlation rows.

``predict``: a row of a known group adds W' (alpha * xi_g) per draw; a row whose group was not
seen in training (or is missing) gets the population mean 0, and under ``kind="predictive"`` its
interval adds the group variance of the draw, W' diag(alpha^2 sigma_xi^2) W, to sigma^2
(spec 4.3 b). A label is matched against the training labels only through a dictionary, so an
unseen label never reaches an index (spec 4.3).

Import rule: numpy, pandas, xarray; this package's ``leaf_models`` and ``prediction_table``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from .. import _validation as check
from ..errors import ArgumentError, DataError
from ._dask import is_dask_frame, predict_dask
from .leaf_models import PREDICT_KINDS, GaussianMeanShift, TrainingRows, register
from .prediction_table import regression_table, with_missing_rows

if TYPE_CHECKING:
    from .fit import Fit

TERM_DIM = "re_term"
GROUP_DIM = "re_group"


def attach_random_effects(fit: Fit, draws: dict, group: np.ndarray, basis: np.ndarray) -> None:
    """Write the random effects' draws and training rows into ``fit.idata`` (module docstring).

    Parameters
    ----------
    fit : Fit
        The new fit (its ``config["random_effects"]`` and ``config["scale"]`` are read).
    draws : dict
        ``re_alpha`` (chain, draw, K), ``re_xi`` (chain, draw, G, K), ``re_sigma_xi``
        (chain, draw, K) on the working scale.
    group, basis : ndarray
        The training rows' group codes (n,) and basis (n, K).
    """
    spec = fit.config["random_effects"]
    scale = float(fit.config["scale"])
    terms, labels = list(spec["terms"]), [str(v) for v in spec["levels"]]
    coords = {"chain": fit.posterior["chain"].values, "draw": fit.posterior["draw"].values, TERM_DIM: terms,
              GROUP_DIM: labels}
    alpha, xi, sigma_xi = draws["re_alpha"], draws["re_xi"], draws["re_sigma_xi"]
    ds = fit.idata["posterior"].to_dataset().assign({
        "re_alpha": (("chain", "draw", TERM_DIM), alpha),
        "re_xi": (("chain", "draw", GROUP_DIM, TERM_DIM), xi),
        "re_sigma_xi": (("chain", "draw", TERM_DIM), sigma_xi),
        "re_effect": (("chain", "draw", GROUP_DIM, TERM_DIM), alpha[:, :, None, :] * xi * scale),
        "re_sd": (("chain", "draw", TERM_DIM), np.abs(alpha) * sigma_xi * scale),
    }).assign_coords({k: coords[k] for k in (TERM_DIM, GROUP_DIM)})
    fit.idata["posterior"] = xr.DataTree(ds)
    const = fit.idata["constant_data"].to_dataset().assign({
        "re_group_code": (("obs",), np.asarray(group, dtype=np.int64)),
        "re_basis": (("obs", TERM_DIM), np.asarray(basis, dtype=np.float64)),
    })
    attrs = dict(fit.idata["constant_data"].attrs)
    fit.idata["constant_data"] = xr.DataTree(const.assign_coords({TERM_DIM: terms}))
    fit.idata["constant_data"].attrs.update(attrs)


def new_group_rows(spec: dict, newdata, na_action: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group codes (-1: a group not seen in training, or missing), basis rows of ``newdata`` and
    the mask of rows whose slope values are all present.

    Raises
    ------
    DataError
        ``newdata`` is not a DataFrame, lacks the group or a slope column, or (unless ``na_action``
        is "pass") a slope value is missing or not finite.
    """
    group, terms = spec["group"], list(spec["terms"])
    slopes = [t for t in terms if t != "(Intercept)"]
    if not isinstance(newdata, pd.DataFrame):
        raise DataError(f"this fit has random effects (... | {group}): predict new rows from a DataFrame with the "
                        f"column(s) {[group] + slopes} besides the predictors, not from a {type(newdata).__name__}")
    absent = [c for c in [group] + slopes if c not in newdata.columns]
    if absent:
        raise DataError(f"newdata lacks the column(s) {absent} of the random-effect term (... | {group}); give them "
                        f"(a group not seen in training, or a missing one, gets the population mean)")
    lookup = {label: code for code, label in enumerate(spec["levels"])}
    codes = np.array([-1 if _missing(v) else lookup.get(v.item() if isinstance(v, np.generic) else v, -1)
                      for v in newdata[group].tolist()], dtype=np.int64)
    columns = [np.ones(len(newdata)) if t == "(Intercept)" else
               pd.to_numeric(newdata[t], errors="coerce").to_numpy(dtype=np.float64) for t in terms]
    basis = np.column_stack(columns) if columns else np.zeros((len(newdata), 0))
    bad = ~np.isfinite(basis).all(axis=1)
    if bad.any() and na_action != "pass":
        rows = ", ".join(map(str, newdata.index[np.flatnonzero(bad)[:5]].tolist()))
        raise DataError(f"the random slope(s) {slopes} are missing or not numbers in {int(bad.sum())} row(s) of "
                        f"newdata (index {rows}{', ...' if bad.sum() > 5 else ''}); fill them, drop those rows, or "
                        "pass na_action='pass' (NaN predictions for them)")
    return codes, basis, ~bad


def _missing(value) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


@register
class NormalRandomEffects(GaussianMeanShift):
    """BART regression with Gaussian random effects: y = f(x) + W' beta_g + e (module docstring).

    ``function_samples`` and ``draws`` of new rows are the trees' f(x) (what SHAP and partial
    dependence read); ``predict``, and ``draws`` of the training rows (the pointwise
    log-likelihood and the mixing check) add the group effects."""

    names = ("normal_re",)
    posterior_variables = ("sigma", "re_alpha", "re_xi", "re_sigma_xi", "re_effect", "re_sd")

    def _effects(self) -> np.ndarray:
        """beta_g per (sample, group, term) on the response scale."""
        eff = self.fit.posterior["re_effect"].values
        return eff.reshape(-1, *eff.shape[2:])

    def group_effects(self, codes: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """W' beta_g per (sample, row); 0 for rows whose code is -1 (a new or missing group)."""
        beta = self._effects()
        known = codes >= 0
        out = np.zeros((beta.shape[0], codes.size))
        if known.any():
            out[:, known] = np.einsum("smk,mk->sm", beta[:, codes[known], :], basis[known])
        return out

    def _training_gamma(self, rows=None) -> np.ndarray:
        const = self.fit.idata["constant_data"]
        codes, basis = const["re_group_code"].values, const["re_basis"].values
        if rows is not None:
            codes, basis = codes[rows], basis[rows]
        return self.group_effects(codes, basis)

    def training_inputs(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The training rows' bin codes, marked as training rows (``TrainingRows``) so that
        :meth:`draws` adds their group effects: the pointwise log-likelihood and the mixing check
        then read f(x) + gamma, the identified sum (the forest's level and the random intercepts
        trade off, spec 4.2)."""
        return TrainingRows.of(super().training_inputs(rows), rows)

    def draws(self, x: np.ndarray) -> np.ndarray:
        """f(x) per (sample, row); for training rows (``training_inputs``) f(x) + W' beta_g."""
        f = self.function_samples(np.asarray(x))
        if isinstance(x, TrainingRows):
            f = f + self._training_gamma(x.rows)
        return f

    def predict(self, newdata, kind: str, level: float, samples: bool, na_action: str | None, times):
        if times is not None:
            raise ArgumentError("times= is for survival fits; this is a BART fit with random effects")
        if is_dask_frame(newdata):  # partition by partition, each a pandas frame predicted here
            return predict_dask(self.fit, newdata, kind=kind, level=level, samples=samples, na_action=na_action)
        kind = check.check_choice("kind", kind, PREDICT_KINDS)
        level = check.check_open_unit("level", level)
        spec = self.fit.config["random_effects"]
        present = None
        if newdata is None:
            const = self.fit.idata["constant_data"]
            codes, basis = const["re_group_code"].values, const["re_basis"].values
        else:
            codes, basis, present = new_group_rows(spec, newdata, na_action)
        x, index, ok = self.inputs(newdata, na_action)
        if present is not None and not present.all():
            # na_action="pass": a row without its slope values gets NaN, as one without a predictor
            keep = present if ok is None else present[ok]
            x = np.ascontiguousarray(x[:, keep])
            ok = present if ok is None else ok & present
        if ok is not None:
            codes, basis = codes[ok], basis[ok]
        fit = self.fit
        shape = (fit.posterior.sizes["chain"], fit.posterior.sizes["draw"])
        rows = index if ok is None else index[ok]
        f = self.function_samples(np.asarray(x)) + self.group_effects(codes, basis)

        def noise_sd() -> np.ndarray:
            sd = np.array(self.noise_sd(x))
            new = codes < 0
            if new.any():
                # a new group's effect W' (alpha * xi*), xi* ~ N(0, Sigma_xi): variance sum_k W_k^2 re_sd_k^2
                re_sd = fit.posterior["re_sd"].values.reshape(-1, len(spec["terms"]))
                var = (basis[new] ** 2) @ (re_sd ** 2).T  # (rows, samples)
                sd[:, new] = np.sqrt(sd[:, new] ** 2 + var.T)
            return sd

        out = regression_table(f, noise_sd, fit.flat_weights, rows, kind, level, samples, shape)
        return with_missing_rows(out, ok, index)

    @classmethod
    def check_file(cls, checker, config: dict) -> None:
        """A loaded fit's random effects: the specification in the configuration, the effect draws
        (finite, one per group and term of it) and the training rows' group codes and basis, so
        that an edited file fails at ``load`` with the file error naming what is wrong rather than
        predicting with effects of the wrong groups."""
        where = "constant_data.attrs: random_effects"
        spec = config.get("random_effects")
        if not isinstance(spec, dict) or not isinstance(spec.get("group"), str):
            checker.fail(where, "missing, or without the name of its grouping column")
        terms, levels = spec.get("terms"), spec.get("levels")
        if not isinstance(terms, list) or not terms or not all(isinstance(t, str) for t in terms) \
                or len(set(terms)) != len(terms):
            checker.fail(where, f"terms is {terms!r}, expected a non-empty list of distinct names")
        if not isinstance(levels, list) or len(levels) < 2 or \
                not all(isinstance(v, (str, int, float, bool)) for v in levels) or len(set(levels)) != len(levels):
            checker.fail(where, "levels must be a list of at least 2 distinct group labels")
        checker.sizes.setdefault(TERM_DIM, len(terms))
        checker.sizes.setdefault(GROUP_DIM, len(levels))
        for dim, size in ((TERM_DIM, len(terms)), (GROUP_DIM, len(levels))):
            if checker.sizes[dim] != size:
                checker.fail(where, f"{size} {dim}s in the configuration, {checker.sizes[dim]} in the arrays")
        effect = checker.array("posterior", "re_effect", "float", ("chain", "draw", GROUP_DIM, TERM_DIM))
        sd = checker.array("posterior", "re_sd", "float", ("chain", "draw", TERM_DIM))
        for name, values in (("re_effect", effect), ("re_sd", sd)):
            if not np.isfinite(values).all():
                checker.fail(f"posterior/{name}", "holds a value that is not finite")
        if (sd < 0).any():
            checker.fail("posterior/re_sd", "holds a negative standard deviation")
        codes = checker.array("constant_data", "re_group_code", "int", ("obs",))
        if ((codes < 0) | (codes >= len(levels))).any():
            checker.fail("constant_data/re_group_code", f"holds a code outside 0..{len(levels) - 1}")
        basis = checker.array("constant_data", "re_basis", "float", ("obs", TERM_DIM))
        if not np.isfinite(basis).all():
            checker.fail("constant_data/re_basis", "holds a value that is not finite")

    def summary_rows(self, row: Callable[[np.ndarray], dict]) -> dict:
        spec = self.fit.config["random_effects"]
        sd = self.fit.posterior["re_sd"].values
        return {f"sd[{term} | {spec['group']}]": row(sd[:, :, k]) for k, term in enumerate(spec["terms"])}
