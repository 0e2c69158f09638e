"""The compact draw store: every recorded tree in preorder, concatenated along one node axis.

A chain records its kept draws into a ``DrawStore``. Tree j of draw d occupies
``tree_nodes[d, j]`` consecutive slots of the flat node arrays, in preorder (root first), in
draw-major then tree order; nothing is padded to the largest tree, so memory follows the nodes
actually used. In preorder the left child of internal node i is i + 1, so a tree needs only
``var`` (split variable, ``LEAF`` at leaves), ``cut`` and, at leaves, the leaf parameters;
right children are recomputed when needed (``preorder_right``).

The node arrays grow on demand: a recording kernel that finds no room returns without writing
and the Python side enlarges the store (``grow_store``) and records that draw again.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .tree import LEAF, subtree_nodes


class DrawStore(NamedTuple):
    """Kept trees of one chain in flat preorder arrays (see the module docstring)."""

    var: np.ndarray  # int32[capacity]: split variable or LEAF
    cut: np.ndarray  # int64[capacity]: cut index or level mask (internal nodes)
    value: np.ndarray  # float64[capacity]: leaf value (NaN at internal nodes)
    sigma: np.ndarray  # float64[capacity or 0]: leaf sd (mean-variance model only)
    prob: np.ndarray  # float64[capacity, K or 0]: leaf class probabilities (classification only)
    tree_nodes: np.ndarray  # int32[draws, trees]: nodes of each stored tree
    fill: np.ndarray  # int64[1]: next free slot


def new_store(draws: int, n_trees: int, capacity: int, leaf_sigma: bool = False, n_classes: int = 0) -> DrawStore:
    """An empty store for ``draws`` draws of ``n_trees`` trees with room for ``capacity`` nodes."""
    capacity = max(int(capacity), 1)
    return DrawStore(
        var=np.full(capacity, LEAF, dtype=np.int32),
        cut=np.zeros(capacity, dtype=np.int64),
        value=np.full(capacity, np.nan),
        sigma=np.full(capacity if leaf_sigma else 0, np.nan),
        prob=np.full((capacity, n_classes), np.nan),
        tree_nodes=np.zeros((draws, n_trees), dtype=np.int32),
        fill=np.zeros(1, dtype=np.int64),
    )


def grow_store(store: DrawStore, needed: int) -> DrawStore:
    """A copy of ``store`` with room for at least ``needed`` more nodes (grows by half at least,
    so a long run reallocates O(log draws) times)."""
    used = int(store.fill[0])
    capacity = store.var.shape[0]
    if used + needed <= capacity:
        return store
    new_cap = max(used + needed, capacity + capacity // 2 + 1)

    def enlarge(arr, fill_value):
        if arr.shape[0] == 0:
            return arr
        out = np.full((new_cap,) + arr.shape[1:], fill_value, dtype=arr.dtype)
        out[:used] = arr[:used]
        return out

    return store._replace(
        var=enlarge(store.var, LEAF), cut=enlarge(store.cut, 0), value=enlarge(store.value, np.nan),
        sigma=enlarge(store.sigma, np.nan), prob=enlarge(store.prob, np.nan),
    )


def trim_store(store: DrawStore, kept: int) -> DrawStore:
    """The first ``kept`` draws of ``store`` with the node arrays cut to the slots they use."""
    used = int(store.tree_nodes[:kept].sum())
    return DrawStore(
        var=store.var[:used].copy(), cut=store.cut[:used].copy(), value=store.value[:used].copy(),
        sigma=store.sigma[:used].copy() if store.sigma.shape[0] else store.sigma,
        prob=store.prob[:used].copy(), tree_nodes=store.tree_nodes[:kept].copy(), fill=np.array([used]),
    )


@njit(cache=True, nogil=True)
def record_tree(tree, store, d, j, order, stack):
    """Append tree ``tree`` as tree j of draw d; return False (writing nothing) when the store
    lacks room. ``order`` and ``stack`` are int32 work arrays of the tree's node capacity."""
    count = subtree_nodes(tree, 0, order, stack)
    first = store.fill[0]
    if first + count > store.var.shape[0]:
        return False
    has_sigma = store.sigma.shape[0] > 0
    n_classes = store.prob.shape[1]
    for k in range(count):
        node = order[k]
        slot = first + k
        v = tree.var[node]
        store.var[slot] = v
        if v >= 0:
            store.cut[slot] = tree.cut[node]
            store.value[slot] = np.nan
        else:
            store.cut[slot] = 0
            store.value[slot] = tree.value[node]
            if has_sigma:
                store.sigma[slot] = tree.leaf_sigma[node]
            for c in range(n_classes):
                store.prob[slot, c] = tree.leaf_prob[node, c]
    store.tree_nodes[d, j] = count
    store.fill[0] = first + count
    return True


@njit(cache=True, nogil=True)
def preorder_right(var, offsets, n_nodes, right):
    """``right[i]``: flat index of the right child of internal node i (-1 at leaves), for trees
    stored in preorder starting at ``offsets[k]`` with ``n_nodes[k]`` nodes each."""
    stack = np.empty(max(var.shape[0], 1), dtype=np.int64)
    for k in range(offsets.shape[0]):
        first = offsets[k]
        last = first + n_nodes[k]
        top = 0
        # Walk the preorder sequence; an internal node waits on the stack until its left
        # subtree is complete, and the next node then is its right child.
        for i in range(first, last):
            right[i] = -1
            if i > first and var[i - 1] < 0 and top > 0:
                top -= 1
                right[stack[top]] = i
            if var[i] >= 0:
                stack[top] = i
                top += 1


@njit(cache=True, nogil=True)
def unpack_padded(var, cut, value, right, offsets, n_nodes, out_var, out_cut, out_left, out_right, out_value):
    """Expand trees k = 0..K-1 of the flat store into padded per-tree arrays (K, N) with node
    indices local to each tree (the layout ``split_var``/``left_child``/... of older fits)."""
    for k in range(offsets.shape[0]):
        first = offsets[k]
        for i in range(n_nodes[k]):
            g = first + i
            out_var[k, i] = var[g]
            out_cut[k, i] = cut[g]
            out_value[k, i] = value[g]
            if var[g] >= 0:
                out_left[k, i] = i + 1
                out_right[k, i] = right[g] - first


def tree_roots(tree_nodes: np.ndarray) -> np.ndarray:
    """Flat index of each stored tree's root, shaped like ``tree_nodes`` (int64)."""
    flat = np.asarray(tree_nodes, dtype=np.int64).reshape(-1)
    roots = np.zeros(flat.size, dtype=np.int64)
    np.cumsum(flat[:-1], out=roots[1:])
    return roots.reshape(np.shape(tree_nodes))


def right_children(var: np.ndarray, tree_nodes: np.ndarray) -> np.ndarray:
    """``preorder_right`` over every stored tree."""
    right = np.empty(var.shape[0], dtype=np.int64)
    counts = np.asarray(tree_nodes, dtype=np.int64).reshape(-1)
    preorder_right(np.asarray(var, dtype=np.int32), tree_roots(counts), counts, right)
    return right


def to_padded(var: np.ndarray, cut: np.ndarray, value: np.ndarray, tree_nodes: np.ndarray) -> dict:
    """The stored trees as padded arrays shaped ``tree_nodes.shape + (largest tree,)``:
    ``split_var`` (-2 in padding), ``split_cut``, ``left``, ``right`` (-1 at leaves, local
    indices) and ``leaf_value`` (NaN at internal nodes and padding)."""
    counts = np.asarray(tree_nodes, dtype=np.int64).reshape(-1)
    width = max(int(counts.max()) if counts.size else 1, 1)
    k = counts.size
    out = {
        "split_var": np.full((k, width), -2, dtype=np.int32),
        "split_cut": np.zeros((k, width), dtype=np.int64),
        "left": np.full((k, width), -1, dtype=np.int32),
        "right": np.full((k, width), -1, dtype=np.int32),
        "leaf_value": np.full((k, width), np.nan),
    }
    var = np.ascontiguousarray(var, dtype=np.int32)
    unpack_padded(var, np.ascontiguousarray(cut, dtype=np.int64), np.ascontiguousarray(value, dtype=np.float64),
                  right_children(var, counts), tree_roots(counts), counts, out["split_var"], out["split_cut"],
                  out["left"], out["right"], out["leaf_value"])
    shape = tuple(np.shape(tree_nodes)) + (width,)
    return {key: arr.reshape(shape) for key, arr in out.items()}
