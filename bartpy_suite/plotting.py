"""Plots of a fit with matplotlib: variable activity, partial dependence, predicted versus
observed, one tree, and trace / rank plots of the scalar quantities (through arviz-plots).

Every function returns the matplotlib objects it drew (an ``Axes``, or arviz-plots'
``PlotCollection``) so they can be restyled; pass ``ax=`` to draw into an existing axes.
Every summary honours ``fit.weights``.

Requires matplotlib (``pip install "bartpy-suite[plot]"``, which also installs arviz-plots);
imported inside the functions, so ``import bartpy_suite`` never pulls it in. Import rule:
front-door level; imports ``posterior`` (the ``Fit`` and its weighted summaries),
``_validation`` and ``errors``.
"""

from __future__ import annotations

import numpy as np

from . import _validation as check
from .errors import ArgumentError
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


def plot_variable_activity(fit, level: float = 0.95, ax=None):
    """Horizontal bars of each predictor's posterior mean share of split rules, with the
    equal-tailed interval as error bars (``fit.variable_activity(level)``).

    Returns
    -------
    matplotlib.axes.Axes
        Bar i (``ax.patches[i]``) is predictor i of ``fit.predictors``.
    """
    table = fit.variable_activity(level=level)
    ax = _axes(ax)
    y = np.arange(len(table))
    mean = table["mean"].to_numpy()
    err = np.vstack([mean - table["lower"].to_numpy(), table["upper"].to_numpy() - mean])
    ax.barh(y, mean, xerr=err, color="C0", ecolor="0.2", capsize=3)
    ax.set_yticks(y, table.index.astype(str))
    ax.invert_yaxis()
    ax.set_xlabel(f"share of split rules (mean, {level:.0%} interval)")
    ax.set_title("Variable activity")
    return ax


def _grid_bins(fit, v: int, grid: int) -> np.ndarray:
    """Bins of predictor ``v`` to evaluate: every level of a factor; for a numeric predictor
    up to ``grid`` bins at evenly spaced quantiles of the training rows."""
    binned = fit._binned
    if binned.is_categorical[v]:
        return np.arange(int(binned.nbins[v]))
    codes = binned.codes[v]
    return np.unique(np.quantile(codes, np.linspace(0, 1, grid), method="nearest").astype(codes.dtype))


def _bin_values(fit, v: int, bins: np.ndarray) -> np.ndarray:
    """A representative predictor value per numeric bin: the median training value in it."""
    binned = fit._binned
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


def partial_dependence(fit, predictors, grid: int = 20, level: float = 0.95) -> dict:
    """Posterior of the partial dependence of f on one or two predictors.

    For each grid point, every training row gets the grid value(s) and f is averaged over the
    rows, per posterior draw (Friedman's partial dependence, one curve per draw); the curves
    are then summarised by their weighted mean and equal-tailed interval.

    Parameters
    ----------
    fit : Fit
        A regression fit (or probit BART, where f is the latent probit scale).
    predictors : str or sequence of one or two str
    grid : int
        Largest number of grid points per numeric predictor (quantiles of the training rows);
        factors use every level.
    level : float

    Returns
    -------
    dict
        ``values`` (one array of grid values per predictor: numbers, or level labels),
        ``bins``, ``mean``, ``lower``, ``upper`` (shape (n1,) or (n1, n2)) and ``samples``
        (draws, n1[, n2]).
    """
    names = [predictors] if isinstance(predictors, str) else list(predictors)
    if not 1 <= len(names) <= 2:
        raise ArgumentError(f"predictors must name one or two predictors, got {len(names)}")
    for name in names:
        if name not in fit.predictors:
            raise ArgumentError(f"predictor {name!r} is not in the model; its predictors: {fit.predictors}")
    if fit.is_classification and fit.config.get("leaf_model") != "probit":
        raise ArgumentError("partial dependence is drawn for f of a regression (or probit BART) fit; this fit "
                            f"is a {fit.config.get('leaf_model')} classification")
    grid = check.check_int_at_least("grid", grid, 2)
    level = check.check_open_unit("level", level)
    index = [fit.predictors.index(n) for n in names]
    bins = [_grid_bins(fit, v, grid) for v in index]
    base = fit._binned.codes
    shape = tuple(len(b) for b in bins)
    w = fit._flat_weights
    samples = np.empty((w.size,) + shape)
    for cell in np.ndindex(*shape):
        codes = base.copy()
        for v, b, k in zip(index, bins, cell):
            codes[v, :] = b[k]
        samples[(slice(None),) + cell] = fit._f_samples(np.ascontiguousarray(codes)).mean(axis=1)
    flat = samples.reshape(w.size, -1)
    q = weighted_quantiles(flat, w, [(1 - level) / 2, (1 + level) / 2])
    values = [np.asarray(_level_labels(fit, v, b)) if fit._binned.is_categorical[v] else _bin_values(fit, v, b)
              for v, b in zip(index, bins)]
    return {"predictors": names, "values": values, "bins": bins, "mean": ((w / w.sum()) @ flat).reshape(shape),
            "lower": q[0].reshape(shape), "upper": q[1].reshape(shape), "samples": samples}


def plot_partial_dependence(fit, predictors, grid: int = 20, level: float = 0.95, ax=None):
    """Partial dependence of f on one predictor (mean line and credible band) or two (three
    heat maps: lower bound, mean, upper bound).

    Returns
    -------
    matplotlib.axes.Axes (one predictor) or numpy array of three Axes (two predictors)
        One predictor: ``ax.lines[0]`` is the mean curve, ``ax.collections[0]`` the band
        (numeric) or error bars (factor). Two predictors: each axes holds one ``QuadMesh``.
    """
    pd_ = partial_dependence(fit, predictors, grid=grid, level=level)
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
            step = max(1, len(vals) // 6)
            ticks = np.arange(len(vals))[::step]
            setter(ticks, [v if isinstance(v, str) else f"{v:.3g}" for v in np.asarray(vals)[::step]])
    axes.ravel()[0].set_ylabel(pd_["predictors"][1])
    axes.ravel()[-1].figure.colorbar(mesh, ax=list(axes.ravel()))
    return axes


def plot_predicted_vs_observed(fit, level: float = 0.95, kind: str = "mean", ax=None):
    """Posterior mean prediction of each training row against its observed response, with
    the credible (``kind="mean"``) or posterior predictive (``"predictive"``) interval, and
    the line y = x.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.lines[0]`` holds the points (x observed, y predicted mean), ``ax.collections[0]``
        the interval bars, ``ax.lines[1]`` the diagonal.
    """
    if fit.is_classification:
        raise ArgumentError("predicted versus observed needs a numeric response; for a classification fit "
                            "compare fit.predict(kind='prob') with the classes")
    kind = check.check_choice("kind", kind, ("mean", "predictive"))
    pred = fit.predict(kind=kind, level=level)
    y = fit.idata["observed_data"]["y"].values
    ax = _axes(ax)
    mean = pred["mean"].to_numpy()
    ax.plot(y, mean, "o", color="C0", markersize=3)
    ax.vlines(y, pred["lower"].to_numpy(), pred["upper"].to_numpy(), color="C0", alpha=0.3)
    lo, hi = float(min(y.min(), pred["lower"].min())), float(max(y.max(), pred["upper"].max()))
    ax.plot([lo, hi], [lo, hi], color="0.3", linestyle="--", linewidth=1)
    ax.set_xlabel("observed")
    ax.set_ylabel(f"predicted ({'f(x)' if kind == 'mean' else 'new y'}: mean, {level:.0%} interval)")
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


def plot_tree(fit, chain: int | None = None, draw: int | None = None, tree: int = 0, ax=None):
    """Draw one tree: the MAP tree of a single-tree fit (default), or tree ``tree`` of draw
    ``draw`` of chain ``chain`` (BART needs them). Splits show their rule (left branch: rule
    true), leaves their fitted value and training rows.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.lines``: one line per edge, from parent to child; ``ax.texts``: one label per node
        in preorder.
    """
    if chain is None and draw is None:
        text = fit.map_tree(tree=tree)
    else:
        text = fit.tree(chain=0 if chain is None else chain, draw=0 if draw is None else draw, tree=tree)
    nodes = text.nodes
    x = _tree_layout(nodes)
    by_number = {n.number: n for n in nodes}
    if ax is None:
        leaves = sum(n.leaf for n in nodes)
        depth = max(n.depth for n in nodes)
        ax = _pyplot().subplots(figsize=(max(6.4, 1.1 * leaves), max(3.0, 0.9 * (depth + 1))))[1]
    for n in nodes:
        if not n.leaf:
            for child in (2 * n.number, 2 * n.number + 1):
                ax.plot([x[n.number], x[child]], [-n.depth, -n.depth - 1], color="0.4", linewidth=1)
    for n in nodes:
        if n.leaf:
            label, style = f"{n.yval}\nn={n.n}", {"boxstyle": "round", "fc": "#dbe9f6", "ec": "C0"}
        else:
            label, style = by_number[2 * n.number].label, {"boxstyle": "square", "fc": "white", "ec": "0.4"}
        ax.text(x[n.number], -n.depth, label, ha="center", va="center", fontsize=8, bbox=style)
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
    table = _shap_class(fit.importance(data, level=level, max_draws=max_draws), cls)
    ax = _axes(ax)
    y = np.arange(len(table))
    mean = table["mean"].to_numpy()
    err = np.vstack([mean - table["lower"].to_numpy(), table["upper"].to_numpy() - mean])
    ax.barh(y, mean, xerr=err, color="C1", ecolor="0.2", capsize=3)
    ax.set_yticks(y, table.index.astype(str))
    ax.invert_yaxis()
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
