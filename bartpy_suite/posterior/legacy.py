"""Reading fits saved by bartpy_suite 0.1 before the compact draw store: their trees are padded
(chain, draw, tree, node) arrays in the posterior group, nodes in preorder. ``upgrade`` moves
them into the ``trees`` group of the current layout, so old files load and predict as before.

Import rule: imports numpy, xarray and this package's ``fit`` module.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .fit import TREES_GROUP

#: Padded tree variables of the old posterior group and their names in the trees group.
PADDED = {"split_var": "node_var", "split_cut": "node_cut", "leaf_value": "node_value", "leaf_sigma": "node_sigma",
          "leaf_prob": "node_prob"}
DROPPED = ("left_child", "right_child")


def needs_upgrade(idata: xr.DataTree) -> bool:
    """Whether ``idata`` holds padded trees in its posterior instead of a trees group."""
    return TREES_GROUP not in idata.children and "split_var" in idata["posterior"].data_vars


def upgrade(idata: xr.DataTree) -> xr.DataTree:
    """A copy of an old-layout DataTree with its trees moved into a compact trees group.

    The padded arrays hold each tree's nodes in preorder followed by padding (``split_var ==
    -2``), so the stored nodes in (chain, draw, tree, node) order are exactly the flat store.
    """
    posterior = idata["posterior"].to_dataset()
    var = posterior["split_var"].values
    used = var > -2
    data = {"tree_nodes": (("chain", "draw", "tree"), used.sum(axis=-1).astype(np.int32))}
    for old, new in PADDED.items():
        if old in posterior:
            values = posterior[old].values
            data[new] = (("node", "class"), values[used]) if values.ndim == 5 else (("node",), values[used])
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    if "class" in posterior.coords:
        coords["class"] = posterior["class"].values
    out = idata.copy()
    out["posterior"] = xr.DataTree(posterior.drop_vars([k for k in (*PADDED, *DROPPED) if k in posterior]))
    out[TREES_GROUP] = xr.DataTree(xr.Dataset(data, coords=coords))
    return out
