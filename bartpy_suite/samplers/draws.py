"""What a chain hands back (``ChainDraws``) and the stacking of chains into (chain, draw, ...)
arrays with one compact tree store (``StackedDraws``).

Import rule: imports numpy and ``_kernels.record`` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._kernels.record import DrawStore

#: Fields of the flat node store, in ``DrawStore`` order.
NODE_FIELDS = ("var", "cut", "value", "sigma", "prob")


@dataclass
class ChainDraws:
    """The kept draws of one chain.

    Attributes
    ----------
    posterior : dict of ndarray
        Model quantities per draw, shaped (draw,) or (draw, tree) (e.g. ``sigma``,
        ``n_leaves``, ``depth``), on the sampler's working scale.
    stats : dict of ndarray
        Sampler statistics per draw, (draw, ...), named as the sampler's schema says.
    store : DrawStore
        The kept trees, trimmed to the draws kept.
    extra_stores : dict
        Further tree stores a sampler keeps beside the model's trees, by DataTree group name:
        ``(tree_dim, store)`` with ``store.tree_nodes`` shaped (draw, len(tree_dim)) (e.g. the
        ``tempered`` sampler's ``rung_trees``, one "tree" per rung). Empty by default.
    """

    posterior: dict
    stats: dict
    store: DrawStore
    extra_stores: dict = field(default_factory=dict)


@dataclass
class StackedDraws:
    """All chains' draws: ``posterior`` and ``stats`` as (chain, draw, ...) arrays, the trees
    as flat node arrays (``nodes``: ``NODE_FIELDS``) in chain, draw, tree order with
    ``tree_nodes`` (chain, draw, tree) node counts; ``extra_stores`` the chains' further stores
    stacked the same way, by group name: ``(tree_dim, nodes, tree_nodes)``."""

    posterior: dict
    stats: dict
    nodes: dict
    tree_nodes: np.ndarray
    extra_stores: dict = field(default_factory=dict)


def _stack_stores(stores: list[DrawStore]) -> tuple[dict, np.ndarray]:
    """Flat node arrays (``NODE_FIELDS``) and stacked ``tree_nodes`` of the chains' stores."""
    tree_nodes = np.stack([s.tree_nodes for s in stores])
    nodes = {}
    for k, name in enumerate(NODE_FIELDS):
        parts = [s[k] for s in stores]
        nodes[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return nodes, tree_nodes


def stack_draws(draws: list[ChainDraws]) -> StackedDraws:
    """Stack the chains' draws; each chain's arrays are released as they are copied."""
    posterior = {key: np.stack([d.posterior.pop(key) for d in draws]) for key in list(draws[0].posterior)}
    stats = {key: np.stack([d.stats.pop(key) for d in draws]) for key in list(draws[0].stats)}
    nodes, tree_nodes = _stack_stores([d.store for d in draws])
    extra = {}
    for group in list(draws[0].extra_stores):
        dims = {d.extra_stores[group][0] for d in draws}
        if len(dims) != 1:
            raise ValueError(f"chains disagree on the tree dimension of store {group!r}: {sorted(dims)}")
        extra[group] = (dims.pop(), *_stack_stores([d.extra_stores.pop(group)[1] for d in draws]))
    for d in draws:
        d.store = None
    return StackedDraws(posterior, stats, nodes, tree_nodes, extra)
