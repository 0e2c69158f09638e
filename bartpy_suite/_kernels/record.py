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

from .jit import helper, kernel
from .tree import subtree_nodes


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
    """An empty store for ``draws`` draws of ``n_trees`` trees with room for ``capacity`` nodes.

    The node arrays are left uninitialised (``np.empty``): every slot is written when a tree is
    recorded, and the operating system commits a page of a large buffer only when it is first
    written, so unused room costs address space, not memory.
    """
    capacity = max(int(capacity), 1)
    return DrawStore(
        var=np.empty(capacity, dtype=np.int32),
        cut=np.empty(capacity, dtype=np.int64),
        value=np.empty(capacity),
        sigma=np.empty(capacity if leaf_sigma else 0),
        prob=np.empty((capacity, n_classes)),
        tree_nodes=np.zeros((draws, n_trees), dtype=np.int32),
        fill=np.zeros(1, dtype=np.int64),
    )


def nodes_of_trees(leaf_counts) -> int:
    """Nodes of binary trees with these leaf counts (2 leaves - 1 each): the room their draw needs.

    Parameters
    ----------
    leaf_counts : int or array_like of int
        Leaf count of each tree (``meta[M_N_LEAVES]``).

    Returns
    -------
    int
        Total node count.
    """
    counts = np.asarray(leaf_counts, dtype=np.int64)
    return int(2 * counts.sum() - counts.size)


def grow_store(store: DrawStore, needed: int, recorded: int) -> DrawStore:
    """A copy of ``store`` with room for at least ``needed`` more nodes, after ``recorded`` of
    its draws were recorded.

    The new room is the larger of half as much again and 5% more than the nodes the remaining
    draws would take at the average so far, so a long run reallocates a few times rather than
    O(log draws) times and the buffer ends close to the size it needs.
    """
    used = int(store.fill[0])
    capacity = store.var.shape[0]
    if used + needed <= capacity:
        return store
    draws = store.tree_nodes.shape[0]
    projected = int(1.05 * used / max(recorded, 1) * draws) + needed
    new_cap = max(used + needed, capacity + capacity // 2 + 1, projected)

    def enlarge(arr):
        if arr.shape[0] == 0:
            return arr
        out = np.empty((new_cap,) + arr.shape[1:], dtype=arr.dtype)  # pages committed as written
        out[:used] = arr[:used]
        return out

    return store._replace(var=enlarge(store.var), cut=enlarge(store.cut), value=enlarge(store.value),
                          sigma=enlarge(store.sigma), prob=enlarge(store.prob))


def trim_store(store: DrawStore, kept: int) -> DrawStore:
    """The first ``kept`` draws of ``store`` with the node arrays cut to the slots they use.

    The buffers are shrunk in place (``ndarray.resize``: the allocator returns the tail without
    copying the head), so trimming never holds two copies of the store. The store's buffers
    must not be referenced elsewhere; the store is not usable afterwards.
    """
    used = int(store.tree_nodes[:kept].sum())

    def cut_to(arr):
        if arr.shape[0] == 0:
            return arr
        if arr.base is None and arr.flags.c_contiguous:
            arr.resize((used,) + arr.shape[1:], refcheck=False)
            return arr
        return arr[:used].copy()

    return DrawStore(
        var=cut_to(store.var), cut=cut_to(store.cut), value=cut_to(store.value), sigma=cut_to(store.sigma),
        prob=cut_to(store.prob), tree_nodes=store.tree_nodes[:kept], fill=np.array([used]),
    )


@kernel
def record_tree_now(tree, store, d, j, order, stack):
    """``record_tree`` called from Python: a draw left pending when the store was full. A kernel of
    its own, so that the chains, which call the helper, compile no wrapper or machine code for a
    call they never make from Python (issue 11, section 1)."""
    return record_tree(tree, store, d, j, order, stack)


@helper
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
        # every field of every slot is written: the buffers start uninitialised
        if v >= 0:
            store.cut[slot] = tree.cut[node]
            store.value[slot] = np.nan
            if has_sigma:
                store.sigma[slot] = np.nan
            for c in range(n_classes):
                store.prob[slot, c] = np.nan
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


@kernel
def split_shares(var, tree_nodes, n_vars, out):
    """``out[s, v]``: share of the split rules of sample s (``tree_nodes[s]`` holds the node
    counts of its trees, samples consecutive in the store) on variable v; 0 without splits."""
    node = 0
    for s in range(tree_nodes.shape[0]):
        total = 0
        for v in range(n_vars):
            out[s, v] = 0.0
        for t in range(tree_nodes.shape[1]):
            for _ in range(tree_nodes[s, t]):
                v = var[node]
                if v >= 0:
                    out[s, v] += 1.0
                    total += 1
                node += 1
        if total > 0:
            for v in range(n_vars):
                out[s, v] /= total


@kernel
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


class Padded(NamedTuple):
    """Trees as padded per-tree arrays (K, N) with node indices local to each tree (``to_padded``)."""

    var: np.ndarray  # int32[K, N]
    cut: np.ndarray  # int64[K, N]
    left: np.ndarray  # int32[K, N]
    right: np.ndarray  # int32[K, N]
    value: np.ndarray  # float64[K, N]


@kernel
def unpack_padded(var, cut, value, right, offsets, n_nodes, out):
    """Expand trees k = 0..K-1 of the flat store into the padded arrays of ``out`` (a ``Padded``)
    (the layout ``split_var``/``left_child``/... of older fits)."""
    out_var, out_cut, out_left, out_right, out_value = out.var, out.cut, out.left, out.right, out.value
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
                  right_children(var, counts), tree_roots(counts), counts,
                  Padded(out["split_var"], out["split_cut"], out["left"], out["right"], out["leaf_value"]))
    shape = tuple(np.shape(tree_nodes)) + (width,)
    return {key: arr.reshape(shape) for key, arr in out.items()}
