"""Text rendering of one stored tree, laid out like R's ``print.rpart``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels.tree import CUT_MASK, NA_SHIFT
from .leaf_models import leaf_model_class


@dataclass(frozen=True)
class TreeText:
    """A rendered tree; ``str()`` gives the rpart-like listing."""

    lines: tuple
    header: str
    #: One ``TreeNode`` per node in preorder (the structure behind ``lines``, for drawing).
    nodes: tuple = ()
    #: What a leaf's value is: "mean" (regression: CART's leaf mean, or a BART tree's term of
    #: f), "probabilities" (classification leaves with class probabilities), "latent probit"
    #: (a probit BART tree's term of the latent f) or "log-linear" (a multinomial BART tree's
    #: term of its class's log-linear sum, the class in ``value_class``).
    value_kind: str = "mean"
    value_class: str = ""

    def __str__(self) -> str:
        return "\n".join((self.header,) + self.lines)

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class TreeNode:
    """One node of a rendered tree: rpart number (children of n are 2n, 2n+1), depth, the rule
    that leads to it (``"root"`` for the root), training rows, fitted value text, leaf or not."""

    number: int
    depth: int
    label: str
    n: int
    yval: str
    leaf: bool


def _levels_text(mask: int, labels, present) -> tuple[str, str]:
    """Level sets of each side, listing only the levels present among the node's rows (the
    mask bits of absent levels are arbitrary; rpart shows present levels too)."""
    left = [str(lab) for k, lab in enumerate(labels) if k in present and (mask >> k) & 1]
    right = [str(lab) for k, lab in enumerate(labels) if k in present and not (mask >> k) & 1]
    return "{" + ",".join(left) + "}", "{" + ",".join(right) + "}"


def format_tree(arrays: dict, binned, predictors, config: dict, design, y: np.ndarray, title: str,
                tree: int = 0) -> TreeText:
    """Render a stored tree (preorder node arrays) with training row counts per node.

    A leaf shows its value: a regression tree's leaf value; a classification leaf's most
    probable class and every class's probability, labelled, in class order; a probit BART
    tree's leaf value on the latent probit scale, and a multinomial BART tree's on its class's
    log-linear scale (these trees have no classes of their own: the header says so, and their
    splits show "-"). A split shows the mean response (regression) or the most frequent class
    of its training rows.

    Parameters
    ----------
    arrays : dict
        ``split_var``, ``split_cut``, ``left_child``, ``right_child`` and leaf arrays of one tree.
    binned : BinnedPredictors
        Training codes and cut grids.
    predictors : list of str
    config : dict
        Fit configuration (response kind, class labels).
    design : object or None
        Formula design, for factor level labels.
    y : ndarray
        Training response (class codes for classification).
    title : str
        First line of the listing (which tree this is).
    tree : int
        Which tree of the draw (multinomial BART: tree ``t`` belongs to class
        ``t // config["trees"]``).
    """
    classification = config["response_kind"] == "categorical"
    class_labels = config.get("class_labels", [])
    kind, what, value_class, latent = leaf_model_class(config).tree_legend(config, tree)
    var, cut = arrays["split_var"], arrays["split_cut"]
    left, right = arrays["left_child"], arrays["right_child"]
    codes = binned.codes
    lines = []
    nodes = []

    split_missing = config.get("na_action") == "split"

    def level_labels(v):
        if design is not None and getattr(design, "levels", None) is not None and design.levels[v] is not None:
            labels = list(design.levels[v])
        else:
            labels = list(range(int(binned.nbins[v])))
        return labels + ["NA"] if split_missing else labels  # missing: code nbins[v], one more level

    def yval(node, rows):
        if latent:
            # a tree of probit / multinomial BART adds a term to a latent function: no classes
            return f"{arrays['leaf_value'][node]:.4g}" if var[node] < 0 else "-"
        if classification:
            if "leaf_prob" in arrays and var[node] < 0:
                probs = arrays["leaf_prob"][node]
                listed = ", ".join(f"{lab} {p:.3f}" for lab, p in zip(class_labels, probs))
                return f"{class_labels[int(np.argmax(probs))]} ({listed})"
            counts = np.bincount(y[rows].astype(int), minlength=len(class_labels))
            return str(class_labels[int(np.argmax(counts))])
        if var[node] < 0 and "leaf_value" in arrays:
            return f"{arrays['leaf_value'][node]:.4g}"
        return f"{np.mean(y[rows]):.4g}" if rows.size else "nan"

    def walk(node, number, depth, label, rows):
        leaf = var[node] < 0
        value = yval(node, rows)
        lines.append(f"{'  ' * depth}{number}) {label} {rows.size} {value}{' *' if leaf else ''}")
        nodes.append(TreeNode(number, depth, label, int(rows.size), value, bool(leaf)))
        if leaf:
            return
        v = int(var[node])
        name = predictors[v]
        if binned.is_categorical[v]:
            goes_left = (int(cut[node]) >> codes[v, rows]) & 1 == 1
            present = set(np.unique(codes[v, rows]).tolist())
            if split_missing:
                present.add(int(binned.nbins[v]))  # where missing values go matters at predict time
            ltext, rtext = _levels_text(int(cut[node]), level_labels(v), present)
            lab_l, lab_r = f"{name} in {ltext}", f"{name} in {rtext}"
        else:
            # The high word of a numeric cut is the missing code when missing values go left
            # (na_action="split"; _kernels/tree.py).
            k, na_code = int(cut[node]) & CUT_MASK, int(cut[node]) >> NA_SHIFT
            goes_left = (codes[v, rows] <= k) | (codes[v, rows] == na_code)
            if k >= len(binned.cuts[v]):
                lab_l, lab_r = f"{name} not NA", f"{name} is NA"
            else:
                c = binned.cuts[v][k]
                lab_l, lab_r = f"{name} <= {c:.6g}", f"{name} > {c:.6g}"
                if split_missing:
                    if na_code:
                        lab_l += " or NA"
                    else:
                        lab_r += " or NA"
        walk(int(left[node]), 2 * number, depth + 1, lab_l, rows[goes_left])
        walk(int(right[node]), 2 * number + 1, depth + 1, lab_r, rows[~goes_left])

    walk(0, 1, 0, "root", np.arange(codes.shape[1]))
    header = f"{title}\nnode), split, n, yval\n      yval: {what}\n      * denotes terminal node\n"
    return TreeText(tuple(lines), header, tuple(nodes), kind, value_class)
