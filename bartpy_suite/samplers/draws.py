"""What a chain hands back (``ChainDraws``) and the stacking of chains into (chain, draw, ...)
arrays with one compact tree store (``StackedDraws``).

Import rule: imports numpy and ``_kernels.record`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """

    posterior: dict
    stats: dict
    store: DrawStore


@dataclass
class StackedDraws:
    """All chains' draws: ``posterior`` and ``stats`` as (chain, draw, ...) arrays, the trees
    as flat node arrays (``nodes``: ``NODE_FIELDS``) in chain, draw, tree order with
    ``tree_nodes`` (chain, draw, tree) node counts."""

    posterior: dict
    stats: dict
    nodes: dict
    tree_nodes: np.ndarray


def stack_draws(draws: list[ChainDraws]) -> StackedDraws:
    """Stack the chains' draws; each chain's arrays are released as they are copied."""
    posterior = {key: np.stack([d.posterior.pop(key) for d in draws]) for key in list(draws[0].posterior)}
    stats = {key: np.stack([d.stats.pop(key) for d in draws]) for key in list(draws[0].stats)}
    tree_nodes = np.stack([d.store.tree_nodes for d in draws])
    nodes = {}
    for k, name in enumerate(NODE_FIELDS):
        parts = [d.store[k] for d in draws]
        nodes[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    for d in draws:
        d.store = None
    return StackedDraws(posterior, stats, nodes, tree_nodes)
