"""Which iterations of a chain are kept as draws: one rule for every chain runner.

Iteration ``it`` (counted from 0 over tuning and sampling) is kept when ``it >= tune`` and its
offset ``it - tune`` is a multiple of ``thin``; it is then draw ``(it - tune) // thin``. A draw
index past the store (``n_out``) is not kept: a runner asked for more iterations than it has room
for records what fits. ``samplers/registry.py`` states the same rule for samplers written in Python.
"""

from __future__ import annotations

from .jit import helper

__all__ = ["kept_draw"]


@helper
def kept_draw(it, tune, thin, n_out):
    """Draw index of iteration ``it`` if it is kept and there is room (``< n_out``), else -1."""
    if it < tune or (it - tune) % thin != 0:
        return -1
    d = (it - tune) // thin
    return d if d < n_out else -1
