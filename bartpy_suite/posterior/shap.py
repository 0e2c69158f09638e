"""Posterior SHAP values of a tree fit: exact path-dependent TreeSHAP per kept draw.

Variant: path-dependent TreeSHAP (Lundberg et al. 2020, Algorithm 2; ``_kernels/shap.py``). Its
value function is the tree's expectation over the training rows that reach each node (the covers,
computed here by routing the binned training rows stored in the fit through every stored tree),
so no background sample is needed and the cost per explained row and tree is O(leaves x depth^2),
which for BART's small trees is a few hundred operations. The interventional variant
(Algorithm 3, an "independent" masker) costs that times the size of a background sample, about
100x more for 1,000 rows x 1,000 draws x 200 trees, and answers a different question (the
predictors made independent of each other); the path-dependent one explains the tree as it splits
the training data. Both satisfy local accuracy: per draw, ``base + sum of the values = f(x)``.

What is explained, per model:

* regression CART and BART: f(x) on the response scale (the leaf values, original units);
* probit BART: the latent f(x), ``P(y = second class) = Phi(f(x))`` (the probability is not a
  sum over trees, so it has no additive split);
* multinomial (log-linear) BART: each class's sum of trees F_k(x), the log scale of
  ``P(y = k) = exp(F_k) / sum_l exp(F_l)`` (a ``class`` dim); the probabilities do not change when
  the same function is added to every F_k, so differences between classes (F_k - F_l, whose values
  are the differences of the classes' values) are what the data pin down;
* classification CART: each class's leaf probability (a ``class`` dim), on the probability scale;
* soft trees with one predictor per gate (``sampler="hmc_df"``): f(x) (regression) or each
  class's soft-routed probability. A gate is a probability, so the covers are soft (each training
  row counts with its probability of reaching the node) and a gate on a predictor outside the
  coalition is replaced by its cover fraction; per leaf the game is a product over the path's
  predictors, whose Shapley values have a closed form computed without UNWIND's divisions
  (``_kernels/shap.py``). ``hmc_dfi`` gates split on a weighted sum of all predictors: refused.

Memory: the values take draws x rows x predictors (x classes) x 8 bytes; ``Fit.shap`` refuses
more than ``MAX_BYTES`` and says how to thin. ``shap_summary``/``importance`` compute blocks of
rows at a time (``CHUNK_BYTES`` each) and keep only their summaries.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and this package's modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from .. import _validation as check
from .._kernels.shap import forest_shap, soft_tree_shap
from .._kernels.soft_records import MODE_DF, SoftTrees
from ..errors import ArgumentError, DataError
from .weighted import weighted_quantiles

#: Largest array of values ``Fit.shap`` returns (bytes); thin with ``max_draws`` beyond it.
MAX_BYTES = 4 * 2**30
#: Size of the blocks of values ``shap_summary`` and ``importance`` compute at a time (bytes).
CHUNK_BYTES = 256 * 2**20
VARIANT = "path-dependent TreeSHAP (Lundberg et al. 2020, Algorithm 2), covers from the training rows"
SOFT_VARIANT = "path-dependent SHAP of soft trees, soft covers from the training rows (closed form per leaf)"


@dataclass(frozen=True)
class ShapSummary:
    """What :meth:`Fit.shap_summary` returns.

    Attributes
    ----------
    rows : pandas.DataFrame
        Long table, one row per (row, predictor) (and class): columns ``row``, ``predictor``
        (``class``), ``mean``, ``lower``, ``upper`` (equal-tailed credible interval of the SHAP
        value over the draws).
    importance : pandas.DataFrame
        Global importance per predictor, ranked (:func:`importance_table`).
    scale : str
        What the values add up to (``"response"``, ``"probit latent"``, ``"log-linear"``,
        ``"probability"``).
    """

    rows: pd.DataFrame
    importance: pd.DataFrame
    scale: str


def _outputs(fit) -> tuple[str, list, list[tuple[np.ndarray, slice]]]:
    """(scale, class labels or [], [(leaf values, tree slice) per output]), from the leaf model."""
    if not fit.leaf_model.hard_splits:
        from . import soft

        if soft.routing_mode(fit) != MODE_DF:
            one = soft.samplers_with_mode(MODE_DF)
            raise ArgumentError(
                f"shap() is not supported for soft trees fitted with sampler={fit.config['sampler']!r}: its gates "
                "split on a weighted sum of all predictors (oblique directions), so no gate belongs to one predictor "
                f"and TreeSHAP's path game does not exist; fit the soft tree with sampler={one[0]!r} (one predictor "
                "per gate), or use plotting.partial_dependence")
    return fit.leaf_model.shap_outputs()


def _soft_store(fit) -> dict:
    """The soft trees' arrays (``posterior/soft.py``: var, right, roots, counts, tau, value/prob)."""
    from . import soft

    return soft.arrays(fit)


def row_values(fit, newdata) -> tuple[np.ndarray, pd.Index]:
    """The rows to explain as the kernels read them, (m, p): bin codes (hard trees) or the scaled
    predictors (soft trees); None: the training rows. Both order each numeric predictor's values."""
    x, index, _ = fit.leaf_model.inputs(newdata)  # rows with a missing predictor are an error here
    if fit.leaf_model.hard_splits:
        return np.ascontiguousarray(x.T, dtype=np.int32), index
    return x, index


def draw_indices(fit, max_draws: int | None) -> np.ndarray:
    """Indices of the draws kept per chain: all, or ``max_draws`` evenly spaced ones."""
    n = fit.posterior.sizes["draw"]
    if max_draws is None:
        return np.arange(n)
    if isinstance(max_draws, bool) or not isinstance(max_draws, (int, np.integer)) or max_draws < 1:
        raise ArgumentError(f"max_draws must be None or an integer >= 1 (draws kept per chain); got {max_draws!r}")
    if max_draws >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, int(max_draws))).astype(np.int64))


def _samples(fit, draws: np.ndarray) -> np.ndarray:
    """Flat (chain-major) sample indices of ``draws`` in every chain."""
    n = fit.posterior.sizes["draw"]
    return (np.arange(fit.posterior.sizes["chain"])[:, None] * n + draws[None, :]).reshape(-1)


def _threads(threads):
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ArgumentError(f"threads must be None or an integer >= 1; got {threads!r}")
    return int(threads)


def shap_values(fit, rows: np.ndarray, samples: np.ndarray, threads: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """SHAP values and bases of ``rows`` (m, p) (``row_values``) for the flat ``samples``.

    Returns
    -------
    phi : ndarray, shape (outputs, samples, m, p)
        Output first, so that the kernels write each output's block in place (no second copy of
        the largest array).
    base : ndarray, shape (outputs, samples)
    """
    _, _, outputs = _outputs(fit)
    m, p = rows.shape
    phi = np.empty((len(outputs), samples.size, m, p))
    base = np.empty((len(outputs), samples.size))
    if not fit.leaf_model.hard_splits:
        from . import soft

        store = _soft_store(fit)
        train = soft.scaled_x(fit, None)[0]
        roots = np.ascontiguousarray(store["roots"][samples])
        counts = np.ascontiguousarray(store["counts"][samples])
        for k, (value, _) in enumerate(outputs):
            trees = SoftTrees(store["var"], store["right"], roots, counts, store["tau"], store["delta"],
                              float(fit.config["h_final"]), MODE_DF)
            soft_tree_shap(rows, train, trees, value, phi[k], base[k], threads)
        return phi, base
    t = fit.tree_store
    train = np.ascontiguousarray(fit.binned.codes, dtype=np.int32)
    is_cat = np.ascontiguousarray(fit.binned.is_categorical, dtype=np.bool_)
    for k, (value, trees) in enumerate(outputs):
        roots = np.ascontiguousarray(t["roots"][samples][:, trees])
        forest_shap(rows, train, is_cat, t["node_var"], t["node_cut"], t["right"], value, roots, phi[k], base[k],
                    threads)
    return phi, base


def shap_dataset(fit, newdata=None, max_draws: int | None = None, threads: int | None = None) -> xr.Dataset:
    """``Fit.shap``: the values as an ``xarray.Dataset`` (see there)."""
    scale, labels, _ = _outputs(fit)
    draws = draw_indices(fit, max_draws)
    threads = _threads(threads)
    rows, index = row_values(fit, newdata)
    chains = fit.posterior.sizes["chain"]
    p = len(fit.predictors)
    n_out = max(1, len(labels))
    size = chains * draws.size * rows.shape[0] * p * n_out * 8
    if size > MAX_BYTES:
        raise ArgumentError(
            f"shap() would return {size / 2**30:.1f} GiB ({chains} chains x {draws.size} draws x "
            f"{rows.shape[0]} rows x {p} predictors{f' x {n_out} classes' if labels else ''} x 8 bytes), "
            f"more than {MAX_BYTES / 2**30:.0f} GiB: pass max_draws= (draws kept per chain) or fewer rows, or use "
            "fit.shap_summary() / fit.importance(), which work through the rows in blocks")
    phi, base = shap_values(fit, rows, _samples(fit, draws), threads)
    m = rows.shape[0]
    # views, no copies: (outputs, samples, ...) to (chain, draw, row, predictor[, class])
    phi = phi.reshape(n_out, chains, draws.size, m, p)
    base = base.reshape(n_out, chains, draws.size)
    coords = {"chain": fit.posterior["chain"].values, "draw": fit.posterior["draw"].values[draws],
              "row": np.asarray(index), "predictor": fit.predictors}
    dims = ("chain", "draw", "row", "predictor")
    if labels:
        coords["class"] = labels
        data = {"shap": (dims + ("class",), phi.transpose(1, 2, 3, 4, 0)),
                "base": (("chain", "draw", "class"), base.transpose(1, 2, 0))}
    else:
        data = {"shap": (dims, phi[0]), "base": (("chain", "draw"), base[0])}
    out = xr.Dataset(data, coords=coords)
    out.attrs["scale"] = scale
    out.attrs["variant"] = VARIANT if fit.leaf_model.hard_splits else SOFT_VARIANT
    return out


def _rows_per_chunk(n_samples: int, p: int, n_out: int) -> int:
    return max(1, int(CHUNK_BYTES // max(1, n_samples * p * n_out * 8)))


def summarise(fit, newdata=None, level: float = 0.9, max_draws: int | None = None, rows: bool = True,
              threads: int | None = None) -> ShapSummary:
    """``Fit.shap_summary`` (``rows=False``: importance only, no per-row table)."""
    level = check.check_open_unit("level", level)
    scale, labels, _ = _outputs(fit)
    draws = draw_indices(fit, max_draws)
    threads = _threads(threads)
    rows_x, index = row_values(fit, newdata)
    samples = _samples(fit, draws)
    w = fit.flat_weights[samples]
    w = w / w.sum()
    p = len(fit.predictors)
    n_out = max(1, len(labels))
    m = rows_x.shape[0]
    if m == 0:
        raise DataError("newdata has no rows: the importance is a mean over rows; pass at least one row (or None "
                        "for the training rows)")
    probs = [(1 - level) / 2, (1 + level) / 2]
    abs_sum = np.zeros((samples.size, p, n_out))
    abs_all = np.zeros((samples.size, p))  # |values| summed over the classes, for the "all" importance
    tables = []
    step = _rows_per_chunk(samples.size, p, n_out)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        phi, _ = shap_values(fit, np.ascontiguousarray(rows_x[lo:hi]), samples, threads)
        mag = np.abs(phi)  # (outputs, samples, rows, predictors)
        abs_sum += mag.sum(axis=2).transpose(1, 2, 0)
        abs_all += mag.sum(axis=(0, 2))
        if rows:
            flat = phi.transpose(1, 2, 3, 0).reshape(samples.size, -1)  # (samples, row x predictor x class)
            q = weighted_quantiles(flat, w, probs)
            row_ids = np.repeat(np.asarray(index)[lo:hi], p * n_out)
            block = {"row": row_ids, "predictor": np.tile(np.repeat(np.asarray(fit.predictors, dtype=object), n_out),
                                                          hi - lo)}
            if labels:
                block["class"] = np.tile(np.asarray(labels, dtype=object), (hi - lo) * p)
            block.update({"mean": w @ flat, "lower": q[0], "upper": q[1]})
            tables.append(pd.DataFrame(block))
    per_draw = abs_sum / m  # mean over rows of |value|, per draw, predictor and class
    frames = []
    if labels:
        for k, label in enumerate(labels):
            frames.append(importance_table(per_draw[:, :, k], w, fit.predictors, level).assign(**{"class": label}))
        frames.append(importance_table(abs_all / m, w, fit.predictors, level).assign(**{"class": "all"}))
        importance = pd.concat(frames).reset_index().set_index(["class", "predictor"])
    else:
        importance = importance_table(per_draw[:, :, 0], w, fit.predictors, level)
    columns = ["row", "predictor"] + (["class"] if labels else []) + ["mean", "lower", "upper"]
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=columns)
    return ShapSummary(rows=table, importance=importance, scale=scale)


def importance_table(per_draw: np.ndarray, w: np.ndarray, predictors: list[str], level: float) -> pd.DataFrame:
    """Posterior of the mean |SHAP| per predictor, ranked.

    Parameters
    ----------
    per_draw : ndarray, shape (samples, p)
        Each draw's mean over the rows of the absolute SHAP value of each predictor.
    w : ndarray, shape (samples,)
        Draw weights (normalised to sum to one).
    predictors : list of str
        Names.
    level : float
        Probability of the equal-tailed interval.

    Returns
    -------
    pandas.DataFrame
        Indexed by predictor, sorted by decreasing mean: ``mean``, ``lower``, ``upper``,
        ``share`` (the mean as a share of the sum over predictors) and ``rank`` (1 = largest),
        and ``p_top``, the posterior probability that the predictor has the largest importance in
        a draw (how sure the ranking's head is).
    """
    q = weighted_quantiles(per_draw, w, [(1 - level) / 2, (1 + level) / 2])
    mean = w @ per_draw
    total = mean.sum()
    top = np.bincount(np.argmax(per_draw, axis=1), weights=w, minlength=per_draw.shape[1])
    table = pd.DataFrame({"mean": mean, "lower": q[0], "upper": q[1],
                          "share": mean / total if total > 0 else np.zeros_like(mean), "p_top": top},
                         index=pd.Index(predictors, name="predictor"))
    table = table.sort_values("mean", ascending=False, kind="stable")
    table.insert(4, "rank", np.arange(1, len(table) + 1))
    return table
