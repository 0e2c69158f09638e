"""Plots of a fit with matplotlib: variable activity, partial dependence, predicted versus
observed (training or new rows; a calibration plot for classifiers), one tree (with yes/no
edges and leaf intervals), and trace / rank plots of the scalar quantities (through
arviz-plots).

Every function returns the matplotlib objects it drew (an ``Axes``, or arviz-plots'
``PlotCollection``) so they can be restyled; pass ``ax=`` to draw into an existing axes.
Every summary honours ``fit.weights``.

Requires matplotlib (``pip install "bartpy-suite[plot]"``, which also installs arviz-plots);
imported inside the functions, so ``import bartpy_suite`` never pulls it in. Import rule:
front-door level; imports ``posterior`` (the ``Fit`` and its weighted summaries),
``_kernels`` (the compiled predictor and the rule encoding, for partial dependence),
``_validation``, ``errors``, numpy, pandas and scipy (intervals of the calibration plot).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import _validation as check
from ._kernels.predict import sum_of_trees
from ._kernels.tree import CUT_MASK, NA_SHIFT
from .errors import ArgumentError
from .posterior.bcf import CausalFit
from .posterior.weighted import weighted_quantiles

__all__ = ["plot_partial_dependence", "plot_predicted_vs_observed", "plot_rank", "plot_trace", "plot_tree",
           "plot_variable_activity", "partial_dependence"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("bartpy_suite.plotting needs matplotlib: pip install 'bartpy-suite[plot]'") from exc
    return plt


def _axes(ax):
    return _pyplot().subplots()[1] if ax is None else ax


def _interval_bars(ax, table, color: str):
    """Horizontal bars of ``table["mean"]`` with ``lower``/``upper`` error bars, the first row on
    top, labelled by the table's index."""
    y = np.arange(len(table))
    mean = table["mean"].to_numpy()
    err = np.vstack([mean - table["lower"].to_numpy(), table["upper"].to_numpy() - mean])
    ax.barh(y, mean, xerr=err, color=color, ecolor="0.2", capsize=3)
    ax.set_yticks(y, table.index.astype(str))
    ax.invert_yaxis()
    return ax


def _refuse_causal(fit, what: str) -> None:
    """A bcf fit (``CausalFit``) has two forests and a treatment: these plots read one forest's f(x)."""
    if isinstance(fit, CausalFit):
        raise ArgumentError(f"{what} draws a CART, BART or soft-tree fit; a bcf fit has two forests: print one tree "
                            "with fit.tree(forest='mu' or 'tau'), plot fit.cate(new) or fit.predict(new), or use "
                            "plot_trace and plot_variable_activity(fit, forest=...)")


def plot_variable_activity(fit, level: float = 0.95, ax=None, forest: str | None = None):
    """Horizontal bars of each predictor's posterior mean share of split rules, with the
    equal-tailed interval as error bars (``fit.variable_activity(level)``).

    ``forest`` ("mu" or "tau") picks the forest of a bcf fit (``CausalFit.variable_activity(level,
    forest=...)``; default "mu"); other fits have one forest and take no ``forest``.

    Returns
    -------
    matplotlib.axes.Axes
        Bar i (``ax.patches[i]``) is predictor i of ``fit.predictors`` (of the forest's predictors).
    """
    if forest is not None and not isinstance(fit, CausalFit):
        raise ArgumentError("forest= picks one forest of a bcf fit; this fit has one forest: leave forest out")
    if isinstance(fit, CausalFit):  # a bcf fit: one forest at a time
        forest = "mu" if forest is None else forest
        table = fit.variable_activity(level=level, forest=forest)
    else:
        table = fit.variable_activity(level=level)
    ax = _interval_bars(_axes(ax), table, "C0")
    ax.set_xlabel(f"share of split rules (mean, {level:.0%} interval)")
    ax.set_title("Variable activity" if forest is None else f"Variable activity, {forest} forest")
    return ax


def _grid_bins(fit, v: int, grid: int) -> np.ndarray:
    """Bins of predictor ``v`` to evaluate: every level of a factor; for a numeric predictor
    up to ``grid`` bins at evenly spaced quantiles of the training rows with a value."""
    binned = fit.binned
    if binned.is_categorical[v]:
        return np.arange(int(binned.nbins[v]))
    codes = binned.codes[v]
    codes = codes[codes < binned.nbins[v]]  # a na_action="split" fit codes missing values as nbins
    return np.unique(np.quantile(codes, np.linspace(0, 1, grid), method="nearest").astype(codes.dtype))


def _bin_values(fit, v: int, bins: np.ndarray) -> np.ndarray:
    """A representative predictor value per numeric bin: the median training value in it."""
    binned = fit.binned
    cuts = np.asarray(binned.cuts[v], dtype=float)
    lo = np.concatenate([[-np.inf], cuts])[bins]
    hi = np.concatenate([cuts, [np.inf]])[bins]
    # training values are not stored; the bin's cut points bound them: midpoint, or the one
    # finite cut (+/- half the neighbouring gap) at the two ends of the grid
    gap = np.diff(cuts).mean() if cuts.size > 1 else 1.0
    return np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2,
                    np.where(np.isfinite(lo), lo + gap / 2, hi - gap / 2))


def _level_labels(fit, v: int, bins: np.ndarray) -> list[str]:
    levels = fit.design.levels[v] if fit.design is not None else None
    return [str(levels[b]) if levels is not None else str(b) for b in bins]


#: Default grid points per numeric predictor: one predictor, and each of two (10 x 10 cells).
PD_GRID = {1: 20, 2: 10}
#: Tree-row evaluations above which ``partial_dependence`` shows a progress bar by default
#: (a few CPU s with the compiled predictor).
PD_PROGRESS_WORK = 5e9
#: Cost of one call of the compiled predictor, in tree-row evaluations (for the progress bar).
PD_CALL_WORK = 1e5


def _rule_groups(fit, index: list[int]) -> tuple[dict, np.ndarray]:
    """The stored trees that split on a predictor of ``index``, grouped by the set of those
    rules (predictor, cut) they hold: ``{rules: flat tree numbers}``; and whether each flat tree
    (sample * trees + tree) is in a group."""
    t = fit.tree_store
    counts = t["counts"].reshape(-1)
    tree_of_node = np.repeat(np.arange(counts.size), counts)
    on_s = np.flatnonzero(np.isin(t["node_var"], index))
    trees, var, cut = tree_of_node[on_s], t["node_var"][on_s].astype(np.int64), t["node_cut"][on_s]
    order = np.lexsort((cut, var, trees))
    trees, var, cut = trees[order], var[order], cut[order]
    starts = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]])
    ends = np.r_[starts[1:], trees.size]
    groups: dict = {}
    pairs = list(zip(var.tolist(), cut.tolist()))
    for lo, hi, tree in zip(starts.tolist(), ends.tolist(), trees[starts].tolist()):
        groups.setdefault(tuple(sorted(set(pairs[lo:hi]))), []).append(tree)
    varies = np.zeros(counts.size, dtype=bool)
    varies[trees] = True
    return groups, varies


def _cell_classes(rules, index: list[int], grid_codes: list[np.ndarray], is_cat) -> tuple[np.ndarray, np.ndarray]:
    """Grid cells that every rule of ``rules`` sends the same way: a class number per cell and
    one representative cell per class (the rules' ``goes_left`` of ``_kernels/tree.py``)."""
    sides = np.empty((grid_codes[0].size, len(rules)), dtype=bool)
    for r, (v, cut) in enumerate(rules):
        code = grid_codes[index.index(v)]
        if is_cat[v]:
            sides[:, r] = (cut >> code) & 1 == 1
        else:
            sides[:, r] = (code <= (cut & CUT_MASK)) | (code == (cut >> NA_SHIFT))
    _, first, klass = np.unique(sides, axis=0, return_index=True, return_inverse=True)
    return klass.reshape(-1), first


def _pd_bar(progress, work: float, total: int):
    """A tqdm bar over ``total`` steps: always with ``progress=True``, never with False, and with
    None when the work (tree-row evaluations) is large enough to take several seconds."""
    if progress is False or (progress is None and work < PD_PROGRESS_WORK) or total < 2:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="partial dependence", unit="rule set")


def partial_dependence(fit, predictors, grid: int | None = None, level: float = 0.95,
                       progress: bool | None = None) -> dict:
    """Posterior of the partial dependence of f on one or two predictors.

    For each grid point, every training row gets the grid value(s) and f is averaged over the
    rows, per posterior draw (Friedman's partial dependence, one curve per draw); the curves
    are then summarised by their weighted mean and equal-tailed interval.

    The average is computed exactly, but only once per distinct case: training rows that agree
    on every other predictor (their binned codes) are evaluated once and weighted by their count;
    the trees of a draw that never split on the chosen predictors add the same value to every
    grid point (their mean over the rows, computed once); and a tree that does depends on the
    grid point only through the sides of its rules on those predictors, so the trees holding the
    same such rules are evaluated together by the compiled predictor, once per class of grid
    points the rules send the same way (usually 2-4 classes, not every grid point).

    Parameters
    ----------
    fit : Fit
        A regression fit (or probit BART, where f is the latent probit scale).
    predictors : str or sequence of one or two str
    grid : int, optional
        Largest number of grid points per numeric predictor (quantiles of the training rows);
        factors use every level. Default 20 for one predictor, 10 each for two.
    level : float
    progress : bool, optional
        Show a tqdm progress bar; None (default) shows it when the computation is large
        (more than ``PD_PROGRESS_WORK`` tree-row evaluations).

    Returns
    -------
    dict
        ``values`` (one array of grid values per predictor: numbers, or level labels),
        ``bins``, ``mean``, ``lower``, ``upper`` (shape (n1,) or (n1, n2)) and ``samples``
        (draws, n1[, n2]).
    """
    _refuse_causal(fit, "partial_dependence")
    names = [predictors] if isinstance(predictors, str) else list(predictors)
    if not 1 <= len(names) <= 2:
        raise ArgumentError(f"predictors must name one or two predictors, got {len(names)}")
    for name in names:
        if name not in fit.predictors:
            raise ArgumentError(f"predictor {name!r} is not in the model; its predictors: {fit.predictors}")
    refusal = fit.leaf_model.partial_dependence_refusal()
    if refusal is not None:
        raise ArgumentError(refusal)
    grid = PD_GRID[len(names)] if grid is None else check.check_int_at_least("grid", grid, 2)
    level = check.check_open_unit("level", level)
    if progress is not None and not isinstance(progress, bool):
        raise ArgumentError(f"progress must be True, False or None, got {progress!r}")
    index = [fit.predictors.index(n) for n in names]
    bins = [_grid_bins(fit, v, grid) for v in index]
    shape = tuple(len(b) for b in bins)
    w = fit.flat_weights
    binned = fit.binned
    base = binned.codes
    n = base.shape[1]
    # rows equal on every other predictor give f the same values at every grid point
    others = [v for v in range(base.shape[0]) if v not in index]
    if others:
        _, first, counts = np.unique(base[others].T, axis=0, return_index=True, return_counts=True)
    else:
        first, counts = np.zeros(1, dtype=np.int64), np.array([n])
    rows = base[:, first]
    share = counts / n
    t = fit.tree_store
    is_cat = binned.is_categorical
    groups, varies = _rule_groups(fit, index)
    # the trees that never split on the chosen predictors add the same to every grid point
    tree_of_node = np.repeat(np.arange(varies.size), t["counts"].reshape(-1))
    rest_value = np.where(varies[tree_of_node], 0.0, t["node_value"])
    rest = np.empty((w.size, rows.shape[1]))
    sum_of_trees(np.ascontiguousarray(rows), is_cat, t["node_var"], t["node_cut"], t["right"], rest_value,
                 t["roots"], rest)
    cells = np.array(list(np.ndindex(*shape))).reshape(-1, len(index))
    grid_codes = [np.asarray(bins[j], dtype=np.int64)[cells[:, j]] for j in range(len(index))]
    flat = np.repeat((rest @ share)[:, None], len(cells), axis=1)
    # each other tree depends on the grid point only through the sides of its rules on the chosen
    # predictors: evaluate the trees holding one set of such rules together, once per class of
    # cells those rules do not tell apart
    plan = [(rules, trees) + _cell_classes(rules, index, grid_codes, is_cat) for rules, trees in groups.items()]
    u = rows.shape[1]
    work = sum(len(trees) * first.size * u + PD_CALL_WORK for _, trees, _, first in plan)
    bar = _pd_bar(progress, work, len(plan))
    flat_roots = t["roots"].reshape(-1)
    n_trees = t["counts"].shape[1]
    try:
        for _, trees, klass, first in plan:
            trees = np.asarray(trees)
            codes = np.tile(rows, (1, first.size))  # class-major: class c's rows are columns c*u..(c+1)*u-1
            for j, v in enumerate(index):
                codes[v] = np.repeat(grid_codes[j][first], u)
            out = np.empty((trees.size, codes.shape[1]))
            sum_of_trees(np.ascontiguousarray(codes, dtype=np.int32), is_cat, t["node_var"], t["node_cut"],
                         t["right"], t["node_value"], np.ascontiguousarray(flat_roots[trees][:, None]), out,
                         threads=None if out.size > 200_000 else 1)
            per_class = out.reshape(trees.size, first.size, u) @ share
            np.add.at(flat, trees // n_trees, per_class[:, klass])
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    samples = flat.reshape((w.size,) + shape)
    q = weighted_quantiles(flat, w, [(1 - level) / 2, (1 + level) / 2])
    values = [np.asarray(_level_labels(fit, v, b)) if binned.is_categorical[v] else _bin_values(fit, v, b)
              for v, b in zip(index, bins)]
    return {"predictors": names, "values": values, "bins": bins, "mean": ((w / w.sum()) @ flat).reshape(shape),
            "lower": q[0].reshape(shape), "upper": q[1].reshape(shape), "samples": samples}


def plot_partial_dependence(fit, predictors, grid: int | None = None, level: float = 0.95, ax=None,
                            progress: bool | None = None):
    """Partial dependence of f on one predictor (mean line and credible band) or two (three
    heat maps: lower bound, mean, upper bound).

    Parameters
    ----------
    fit, predictors, grid, level, progress
        As for :func:`partial_dependence` (default grid: 20 points for one predictor, 10 x 10
        for two; a progress bar when the computation is large).
    ax : matplotlib Axes, optional
        One axes for one predictor, three for two.

    Returns
    -------
    matplotlib.axes.Axes (one predictor) or numpy array of three Axes (two predictors)
        One predictor: ``ax.lines[0]`` is the mean curve, ``ax.collections[0]`` the band
        (numeric) or error bars (factor). Two predictors: each axes holds one ``QuadMesh``.
    """
    pd_ = partial_dependence(fit, predictors, grid=grid, level=level, progress=progress)
    if len(pd_["predictors"]) == 1:
        ax = _axes(ax)
        x = pd_["values"][0]
        name = pd_["predictors"][0]
        if x.dtype.kind in "fi":
            ax.plot(x, pd_["mean"], color="C0", drawstyle="steps-mid")
            ax.fill_between(x, pd_["lower"], pd_["upper"], color="C0", alpha=0.3, step="mid", linewidth=0)
        else:
            pos = np.arange(len(x))
            ax.plot(pos, pd_["mean"], "o", color="C0")
            ax.vlines(pos, pd_["lower"], pd_["upper"], color="C0")
            ax.set_xticks(pos, list(x))
        ax.set_xlabel(name)
        ax.set_ylabel(f"partial dependence of f (mean, {level:.0%} interval)")
        return ax
    plt = _pyplot()
    if ax is None:
        _, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharex=True, sharey=True)
    else:
        axes = np.asarray(ax)
        if axes.size != 3:
            raise ArgumentError("ax must be three axes (lower, mean, upper) for two predictors")
    lo, hi = float(np.min(pd_["lower"])), float(np.max(pd_["upper"]))
    xs = [np.arange(len(v)) for v in pd_["values"]]
    for a, key in zip(axes.ravel(), ("lower", "mean", "upper")):
        mesh = a.pcolormesh(xs[0], xs[1], pd_[key].T, vmin=lo, vmax=hi, shading="nearest")
        a.set_title(key)
        a.set_xlabel(pd_["predictors"][0])
        for setter, vals in ((a.set_xticks, pd_["values"][0]), (a.set_yticks, pd_["values"][1])):
            step = max(1, -(-len(vals) // 5))  # at most 5 labels: three panels share the width
            ticks = np.arange(len(vals))[::step]
            setter(ticks, [v if isinstance(v, str) else f"{v:.3g}" for v in np.asarray(vals)[::step]])
    axes.ravel()[0].set_ylabel(pd_["predictors"][1])
    axes.ravel()[-1].figure.colorbar(mesh, ax=list(axes.ravel()))
    return axes


def _observed(fit, newdata, y) -> np.ndarray:
    """The observed response: the training rows' (``newdata`` None), or ``y`` for ``newdata``
    (a column name of ``newdata`` or values, one per row; default: the response column when
    ``newdata`` has it). Classification: class codes in ``fit.config["class_labels"]`` order."""
    if newdata is None:
        if y is not None:
            raise ArgumentError("y= gives the observed response of newdata; without newdata the plot uses the "
                                "training rows and their response")
        return np.asarray(fit.idata["observed_data"]["y"].values)
    n = len(newdata)
    response = getattr(fit.design, "response", None)
    if y is None:
        if response is None or not hasattr(newdata, "columns") or response not in newdata.columns:
            raise ArgumentError("with newdata, pass y=: the name of the column of newdata with the observed response, "
                                f"or an array of {n} observed values" + (f" (newdata has no column {response!r})"
                                                                         if response else ""))
        y = response
    if isinstance(y, str):
        if not hasattr(newdata, "columns") or y not in newdata.columns:
            raise ArgumentError(f"y={y!r} is not a column of newdata; pass the column name of the observed response or "
                                f"an array of {n} values")
        name, values = f"column {y!r}", newdata[y].to_numpy()
    else:
        name, values = "y", np.asarray(y)
        if values.ndim != 1 or values.shape[0] != n:
            raise ArgumentError(f"y must hold one observed value per row of newdata ({n}); got shape {values.shape}")
    index = newdata.index if hasattr(newdata, "index") else np.arange(n)
    missing = np.asarray(pd.isna(values))
    if missing.any():
        shown = ", ".join(map(str, np.asarray(index)[missing][:5]))
        raise ArgumentError(f"{name} has {int(missing.sum())} missing observed value(s) (rows {shown}); drop "
                            "those rows of newdata and y")
    if not fit.is_classification:
        try:
            return values.astype(float)
        except (TypeError, ValueError):
            raise ArgumentError(f"{name} must hold numbers for a regression fit; got {values.dtype}") from None
    labels = [str(c) for c in fit.config["class_labels"]]
    code = {label: k for k, label in enumerate(labels)}
    unknown = sorted({str(v) for v in values} - set(code))
    if unknown:
        raise ArgumentError(f"{name} holds classes the fit does not know: {unknown[:5]}; its classes: {labels}")
    return np.array([code[str(v)] for v in values])


def plot_predicted_vs_observed(fit, level: float = 0.95, kind: str = "mean", ax=None, newdata=None, y=None,
                               bins: int = 10, na_action: str | None = None):
    """Predicted against observed, for the training rows or for ``newdata``.

    Regression: the posterior mean prediction of each row against its observed response, with
    the credible (``kind="mean"``) or posterior predictive (``"predictive"``) interval, and the
    line y = x. Classification: a calibration (reliability) plot: rows binned by their
    predicted probability of a class (posterior mean; ``bins`` equal-width bins on [0, 1]), the
    mean predicted probability of each bin against the observed frequency of the class in it,
    with Jeffreys' equal-tailed ``level`` interval (Beta(k + 1/2, m - k + 1/2) for k of m rows)
    and the diagonal. Two classes: the second class (the one probit BART's f predicts); more:
    one curve per class, one-vs-rest.

    Parameters
    ----------
    fit : Fit
    level : float
        Interval probability.
    kind : {"mean", "predictive"}
        Regression only: interval of f(x) or of a new y.
    ax : matplotlib Axes, optional
    newdata : DataFrame or array, optional
        Rows to predict (None: the training rows).
    y : str or array-like, optional
        Observed response of ``newdata``: the name of one of its columns, or one value per row
        (class labels for classification; on the scale the model was fitted on, e.g. ``log(y)``
        for ``"log(y) ~ ..."``). Default: newdata's column named like the model's response.
    bins : int
        Classification: number of probability bins.
    na_action : {None, "raise", "pass"}
        Passed to ``fit.predict``; rows predicted NaN (``"pass"``) are left out of the plot.

    Returns
    -------
    matplotlib.axes.Axes
        Regression: ``ax.lines[0]`` holds the points (x observed, y predicted mean),
        ``ax.collections[0]`` the interval bars, ``ax.lines[1]`` the diagonal. Classification:
        ``ax.lines[0]`` is the diagonal, then one line per class plotted (x mean predicted
        probability, y observed frequency, one point per non-empty bin, labelled with the class),
        and ``ax.collections[k]`` the intervals of curve k.
    """
    _refuse_causal(fit, "plot_predicted_vs_observed")
    kind = check.check_choice("kind", kind, ("mean", "predictive"))
    level = check.check_open_unit("level", level)
    bins = check.check_int_at_least("bins", bins, 1)
    observed = _observed(fit, newdata, y)
    where = "training rows" if newdata is None else "new rows"
    ax = _axes(ax)
    if fit.is_classification:
        pred = fit.predict(newdata, kind="prob", level=level, na_action=na_action)
        return _calibration(fit, pred, observed, level, bins, where, ax)
    pred = fit.predict(newdata, kind=kind, level=level, na_action=na_action)
    ok = pred["mean"].notna().to_numpy()
    obs = observed[ok]
    mean, lower, upper = (pred[c].to_numpy()[ok] for c in ("mean", "lower", "upper"))
    ax.plot(obs, mean, "o", color="C0", markersize=3)
    ax.vlines(obs, lower, upper, color="C0", alpha=0.3)
    lo, hi = float(min(obs.min(), lower.min())), float(max(obs.max(), upper.max()))
    ax.plot([lo, hi], [lo, hi], color="0.3", linestyle="--", linewidth=1)
    ax.set_xlabel(f"observed ({where}, n={ok.sum()})")
    ax.set_ylabel(f"predicted ({'f(x)' if kind == 'mean' else 'new y'}: mean, {level:.0%} interval)")
    return ax


def _calibration(fit, pred, observed: np.ndarray, level: float, bins: int, where: str, ax):
    """The calibration plot of ``plot_predicted_vs_observed`` for class probabilities ``pred``."""
    from scipy import stats

    labels = [str(c) for c in fit.config["class_labels"]]
    ok = pred["class"].notna().to_numpy()
    classes = [1] if len(labels) == 2 else list(range(len(labels)))
    edges = np.linspace(0.0, 1.0, bins + 1)
    ax.plot([0, 1], [0, 1], color="0.3", linestyle="--", linewidth=1)
    for j, k in enumerate(classes):
        p = pred[f"prob_{labels[k]}"].to_numpy(dtype=float)[ok]
        hit = observed[ok] == k
        which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
        m = np.bincount(which, minlength=bins)
        filled = m > 0
        hits = np.bincount(which, weights=hit, minlength=bins)[filled]
        m = m[filled]
        x = (np.bincount(which, weights=p, minlength=bins)[filled]) / m
        freq = hits / m
        lower = stats.beta.ppf((1 - level) / 2, hits + 0.5, m - hits + 0.5)
        upper = stats.beta.ppf((1 + level) / 2, hits + 0.5, m - hits + 0.5)
        color = f"C{j}"
        ax.plot(x, freq, "o-", color=color, markersize=4, linewidth=1, label=labels[k])
        ax.vlines(x, lower, upper, color=color, alpha=0.5)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    what = f"P({labels[1]})" if len(labels) == 2 else "P(class)"
    ax.set_xlabel(f"predicted {what}\n(posterior mean, averaged in {bins} equal-width bins)")
    ax.set_ylabel(f"observed frequency ({level:.0%} Jeffreys interval)")
    ax.set_title(f"Calibration ({where}, n={int(ok.sum())})")
    if len(classes) > 1:
        ax.legend(title="class", fontsize=8)
    return ax


def _tree_layout(nodes) -> dict:
    """x (leaves 0, 1, 2, ... left to right; a split at the mean of its children) and y (minus
    the depth) of each rpart node number."""
    numbers = [n.number for n in nodes]
    leaves = [n.number for n in nodes if n.leaf]  # preorder visits leaves left to right
    x = {num: float(i) for i, num in enumerate(leaves)}
    for num in sorted(numbers, key=lambda k: -int(np.log2(k))):
        if num not in x:
            x[num] = (x[2 * num] + x[2 * num + 1]) / 2
    return x


def _leaf_posteriors(fit, sample: int, tree: int, nodes, level: float) -> dict:
    """Per leaf of tree ``tree`` of ``sample`` (keyed by rpart number): the draws whose tree
    ``tree`` has the same leaf, meaning a leaf holding exactly the same training rows, their
    weighted share of the posterior (``share``), and the weighted mean and equal-tailed interval
    of that leaf's value (``mean``, ``lower``, ``upper``; per class for class probabilities).
    Leaves without training rows are left out."""
    t = fit.tree_store
    root = int(t["roots"][sample, tree])
    leaf_of = fit.leaf_indices(fit.binned.codes, trees=slice(tree, tree + 1))[:, 0, :]  # (samples, rows)
    w = fit.flat_weights
    probs = [(1 - level) / 2, (1 + level) / 2]
    out = {}
    for k, node in enumerate(nodes):  # nodes are in the store's preorder: node k is root + k
        if not node.leaf:
            continue
        rows = leaf_of[sample] == root + k
        if not rows.any():
            continue
        first = int(np.argmax(rows))
        same = ((leaf_of == leaf_of[:, [first]]) == rows).all(axis=1)
        where = leaf_of[same, first]
        if "node_prob" in t:
            values = t["node_prob"][where]  # (draws, classes)
        else:
            values = t["node_value"][where][:, None]
        ws = w[same]
        q = weighted_quantiles(values, ws, probs)
        out[node.number] = {"share": float(ws.sum() / w.sum()), "draws": int(same.sum()),
                            "mean": (ws / ws.sum()) @ values, "lower": q[0], "upper": q[1]}
    return out


def _leaf_label(node, post, value_kind: str, class_labels) -> str:
    """A leaf's text: the posterior mean of its value (most probable class and per-class
    probabilities for a classification leaf) with the interval over the draws with the same leaf,
    then its training rows and the share of draws; without ``post``, the plotted draw's value."""
    if post is None or post["draws"] < 2:
        return f"{node.yval}\nn={node.n}" + ("" if post is None else ", 1 draw")
    if value_kind == "probabilities":
        lines = [str(class_labels[int(np.argmax(post["mean"]))])]
        lines += [f"{label} {post['mean'][c]:.2f} [{post['lower'][c]:.2f}, {post['upper'][c]:.2f}]"
                  for c, label in enumerate(class_labels)]
    else:
        prefix = "latent " if value_kind != "mean" else ""
        lines = [f"{prefix}{post['mean'][0]:.3g} [{post['lower'][0]:.3g}, {post['upper'][0]:.3g}]"]
    lines.append(f"n={node.n}, {post['share']:.0%} of draws")
    return "\n".join(lines)


def plot_tree(fit, chain: int | None = None, draw: int | None = None, tree: int = 0, ax=None,
              level: float = 0.95, intervals: bool = True):
    """Draw one tree: the MAP tree of a single-tree fit (default), or tree ``tree`` of draw
    ``draw`` of chain ``chain`` (BART needs them).

    Splits show their rule; the edge to the left child is labelled "yes" (rule true), the edge
    to the right child "no". Leaves show their value and training rows and, with
    ``intervals``, their uncertainty: among the posterior draws whose tree ``tree`` has the same
    leaf (a leaf holding exactly the same training rows), the weighted share of draws, and the
    weighted posterior mean and equal-tailed ``level`` interval of that leaf's value
    (regression, or a probit / multinomial BART tree's latent-scale term) or of each class's
    probability (classification CART, listed in class order, headed by the class of largest mean
    probability). These are draws of the posterior, not the conjugate interval given one tree. A
    BART leaf's value in those draws is conditional on the other trees of each draw, so its
    interval is that of the tree's term given its partition, not of f. A leaf found in one draw
    only (or ``intervals=False``) shows the plotted draw's value.

    Parameters
    ----------
    fit : Fit
    chain, draw : int, optional
        Which kept draw (default: the MAP draw of a single-tree fit).
    tree : int
        Which tree of the draw.
    ax : matplotlib Axes, optional
    level : float
        Probability of the leaf intervals.
    intervals : bool
        Show the leaf intervals and shares of draws.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.lines``: one line per edge, from parent to child; texts with gid ``"node"``: one
        label per node in preorder; gid ``"edge"``: "yes"/"no" at the middle of each edge;
        gid ``"note"``: what the leaf numbers are.
    """
    _refuse_causal(fit, "plot_tree")
    level = check.check_open_unit("level", level)
    if chain is None and draw is None:
        text = fit.map_tree(tree=tree)
        sample = int(np.argmax(fit.sample_stats["log_posterior"].values.reshape(-1)))
    else:
        chain, draw = 0 if chain is None else chain, 0 if draw is None else draw
        text = fit.tree(chain=chain, draw=draw, tree=tree)
        sample = chain * fit.posterior.sizes["draw"] + draw
    nodes = text.nodes
    posts = _leaf_posteriors(fit, sample, tree, nodes, level) if intervals else {}
    x = _tree_layout(nodes)
    by_number = {n.number: n for n in nodes}
    classes = [str(c) for c in fit.config.get("class_labels", [])]
    labels = {n.number: _leaf_label(n, posts.get(n.number), text.value_kind, classes) if n.leaf
              else by_number[2 * n.number].label for n in nodes}
    if ax is None:
        leaves = sum(n.leaf for n in nodes)
        depth = max(n.depth for n in nodes)
        # leaves sit one unit apart: make a unit as wide as the longest leaf line (7.5 pt text)
        chars = max(len(line) for n in nodes if n.leaf for line in labels[n.number].splitlines())
        lines = max(labels[n.number].count("\n") + 1 for n in nodes if n.leaf)
        ax = _pyplot().subplots(figsize=(max(6.4, (0.065 * chars + 0.3) * leaves),
                                         max(3.0, (0.75 + 0.14 * lines) * (depth + 1))))[1]
    for n in nodes:
        if not n.leaf:
            for child, word in ((2 * n.number, "yes"), (2 * n.number + 1, "no")):
                ax.plot([x[n.number], x[child]], [-n.depth, -n.depth - 1], color="0.4", linewidth=1)
                ax.text((x[n.number] + x[child]) / 2, -n.depth - 0.5, word, ha="center", va="center",
                        fontsize=7, color="0.25", gid="edge",
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    for n in nodes:
        style = ({"boxstyle": "round", "fc": "#dbe9f6", "ec": "C0"} if n.leaf else
                 {"boxstyle": "square", "fc": "white", "ec": "0.4"})
        ax.text(x[n.number], -n.depth, labels[n.number], ha="center", va="center", fontsize=7.5, bbox=style,
                gid="node")
    scale = {"mean": "value", "probabilities": "class probabilities",
             "latent probit": "value on the latent probit scale (no class per leaf)",
             "log-linear": f"value on the log scale of class {text.value_class} (no class per leaf)"}[text.value_kind]
    note = f"leaf: {scale}"
    if intervals:
        note += (f": posterior mean [{level:.0%} interval] over the draws whose tree {tree} has the same leaf "
                 "(same training rows), and their share")
    ax.text(0.5, 0.0, note, transform=ax.transAxes, ha="center", va="top", fontsize=7, color="0.3", gid="note")
    ax.set_title(text.header.splitlines()[0])
    width = max(x.values()) if x else 0.0
    ax.set_xlim(-0.7, width + 0.7)
    ax.set_ylim(-max(n.depth for n in nodes) - 0.6, 0.6)
    ax.set_axis_off()
    return ax


def _scalar_names(fit, var_names) -> list[str]:
    if var_names is not None:
        names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [n for n in names if n not in fit.posterior.data_vars]
        if missing:
            raise ArgumentError(f"var_names {missing} are not in fit.posterior; it has {list(fit.posterior.data_vars)}")
        return names
    wanted = ("n_leaves", "mean_leaves", "sigma")
    return [n for n in wanted if n in fit.posterior.data_vars and fit.posterior[n].dims == ("chain", "draw")]


def _arviz_plots():
    _pyplot()
    try:
        import arviz_plots
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("trace and rank plots need arviz-plots: pip install 'bartpy-suite[plot]'") from exc
    return arviz_plots


def plot_trace(fit, var_names=None, **kwargs):
    """Trace plot of the scalar quantities (default ``n_leaves`` or BART's ``mean_leaves``,
    and ``sigma``), one line per chain: ``arviz_plots.plot_trace`` on ``fit.idata``.

    Returns
    -------
    arviz_plots.PlotCollection
        ``pc.viz["trace"][name].sel(chain=c).item()`` is the ``Line2D`` of chain c;
        ``pc.viz["figure"]`` the figure.
    """
    return _arviz_plots().plot_trace(fit.idata, var_names=_scalar_names(fit, var_names), backend="matplotlib",
                                     **kwargs)


def plot_rank(fit, var_names=None, **kwargs):
    """Rank plot (fractional-rank ECDF per chain, with the uniform band) of the scalar
    quantities: ``arviz_plots.plot_rank`` on ``fit.idata``.

    Returns
    -------
    arviz_plots.PlotCollection
    """
    return _arviz_plots().plot_rank(fit.idata, var_names=_scalar_names(fit, var_names), backend="matplotlib",
                                    **kwargs)


# -- SHAP (posterior/shap.py) ----------------------------------------------------------------------
__all__ += ["plot_importance", "plot_shap"]


def _shap_class(importance, cls):
    """The class whose importance to draw: ``cls``, or "all" (summed over the classes)."""
    if "class" not in (importance.index.names or []):
        if cls is not None:
            raise ArgumentError("cls applies to classification CART and multinomial BART fits, which explain one "
                                "quantity per class; this fit explains a single one")
        return importance
    classes = list(dict.fromkeys(importance.index.get_level_values("class")))
    cls = "all" if cls is None else str(cls)
    if cls not in classes:
        raise ArgumentError(f"cls must be one of {classes}; got {cls!r}")
    return importance.xs(cls, level="class")


def plot_importance(fit, data=None, level: float = 0.9, max_draws: int | None = None, cls=None, ax=None):
    """Horizontal bars of each predictor's posterior mean |SHAP| (the mean over the rows of
    ``data``), with the equal-tailed interval as error bars, ranked from the top.

    Unlike :func:`plot_variable_activity` (shares of split rules, nearly uniform for BART), this
    shows how much each predictor moves f(x), on the scale of ``fit.shap`` (``fit.importance``).

    Parameters
    ----------
    fit : bartpy_suite.Fit
        A hard-tree fit (CART or BART).
    data : DataFrame or array, optional
        Rows to average over; None: the training rows.
    level : float
        Probability of the interval.
    max_draws : int or None
        Draws kept per chain (evenly spaced) to save time; None: all.
    cls : str or None
        Classification CART and multinomial BART: the class to show; None shows ``"all"`` (|SHAP|
        summed over the classes).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Bar i (``ax.patches[i]``) is the predictor ranked i + 1 (the top bar).
    """
    _refuse_causal(fit, "plot_importance")
    table = _shap_class(fit.importance(data, level=level, max_draws=max_draws), cls)
    ax = _interval_bars(_axes(ax), table, "C1")
    ax.set_xlabel(f"mean |SHAP| over the rows (posterior mean, {level:.0%} interval)")
    ax.set_title("Importance" + (f" (class {cls})" if cls is not None else ""))
    return ax


def _swarm_offsets(x: np.ndarray, width: float = 0.4, bins: int = 60) -> np.ndarray:
    """Vertical offsets that spread points with close x values (a beeswarm): within each of
    ``bins`` bins of x, points alternate above and below the line, scaled so the fullest bin
    spans +-``width``."""
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    cell = np.zeros(x.size, dtype=np.int64) if hi == lo else np.minimum(((x - lo) / (hi - lo) * bins).astype(int),
                                                                      bins - 1)
    order = np.argsort(x, kind="stable")
    seen = np.zeros(bins, dtype=np.int64)
    rank = np.empty(x.size, dtype=np.int64)
    for i in order:
        rank[i] = seen[cell[i]]
        seen[cell[i]] += 1
    steps = np.where(rank % 2 == 1, (rank + 1) // 2, -(rank // 2)).astype(float)
    fullest = max(1, int(seen.max()) // 2)
    return steps * (width / fullest)


def plot_shap(fit, new=None, level: float = 0.9, max_draws: int | None = None, cls=None, intervals: bool = True,
              ax=None):
    """Beeswarm of the SHAP values: one row of points per predictor (ranked by importance, top
    first), each point a row of ``new`` at its posterior mean SHAP value, with its credible
    interval as a thin horizontal bar, coloured by the predictor's value at that row (its rank
    among the rows, low blue to high red; a factor by its level order).

    Parameters
    ----------
    fit : bartpy_suite.Fit
        A hard-tree fit (CART or BART).
    new : DataFrame or array, optional
        Rows to explain; None: the training rows.
    level : float
        Probability of the intervals.
    max_draws : int or None
        Draws kept per chain (evenly spaced); None: all.
    cls : str or None
        Classification CART and multinomial BART: the class whose values to show (default the
        last class).
    intervals : bool
        Draw the intervals.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.collections[0]`` holds the points (x: the posterior mean SHAP value; y: the predictor's
        slot, 0 for the top one, plus the swarm offset within +-0.4), predictors in the order of the
        y tick labels; with ``intervals``, ``ax.collections[1]`` the interval bars.
    """
    _refuse_causal(fit, "plot_shap")
    summary = fit.shap_summary(new, level=level, max_draws=max_draws)
    rows = summary.rows
    importance = summary.importance
    if "class" in rows.columns:
        classes = list(dict.fromkeys(rows["class"]))
        cls = classes[-1] if cls is None else str(cls)
        if cls not in classes:
            raise ArgumentError(f"cls must be one of {classes}; got {cls!r}")
        rows = rows[rows["class"] == cls]
        importance = importance.xs(cls, level="class")
    elif cls is not None:
        raise ArgumentError("cls applies to classification CART and multinomial BART fits, which explain one "
                            "quantity per class; this fit explains a single one")
    from .posterior.shap import row_values

    values = row_values(fit, new)[0]  # (rows, predictors): bin codes or scaled values, ordered as the data
    order = list(importance.index)
    xs, ys, colours, lowers, uppers = [], [], [], [], []
    for slot, name in enumerate(order):
        part = rows[rows["predictor"] == name]
        x = part["mean"].to_numpy()
        xs.append(x)
        ys.append(slot + _swarm_offsets(x))
        c = values[:, fit.predictors.index(name)]
        ranks = np.argsort(np.argsort(c, kind="stable"), kind="stable")
        colours.append(ranks / max(1, c.size - 1))
        lowers.append(part["lower"].to_numpy())
        uppers.append(part["upper"].to_numpy())
    x, y, colour = np.concatenate(xs), np.concatenate(ys), np.concatenate(colours)
    ax = _axes(ax)
    points = ax.scatter(x, y, c=colour, cmap="coolwarm", vmin=0.0, vmax=1.0, s=10, zorder=3)
    if intervals:
        ax.hlines(y, np.concatenate(lowers), np.concatenate(uppers), color="0.6", alpha=0.4, linewidth=0.8, zorder=2)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_yticks(np.arange(len(order)), [str(v) for v in order])
    ax.invert_yaxis()
    scale = {"response": "f(x)", "probit latent": "latent f(x) (probit)", "log-linear": f"F_{cls}(x) (log scale)",
             "probability": f"P({cls})"}[summary.scale]
    ax.set_xlabel(f"SHAP value on {scale}: posterior mean" + (f", {level:.0%} interval" if intervals else ""))
    colorbar = ax.figure.colorbar(points, ax=ax)
    colorbar.set_label("predictor value (rank among the rows)")
    return ax
