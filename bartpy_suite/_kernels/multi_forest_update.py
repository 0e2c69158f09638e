"""The tree update of one forest of a multi-forest chain, by sampler (issue 30, "Engine": the samplers
that run inside BART update any forest; spec multi_forest.md 1.3, 2.1-2.2).

Every forest of a multi-forest chain (``multi_forest.ForestPart``) is a forest of basis leaves
(``basis.py``, leaf model ``likelihood.MODEL_BASIS_NORMAL``) backfitted against the chain's one
residual. Its sweep is ``basis.py``'s loop with the sampler's update of each tree:

* ``UPDATE_MH`` (``grow_prune``, ``cgm``): one MH move per tree (``basis.mh_basis_forest``);
* ``UPDATE_PG`` (``pg``): a conditional SMC update of each tree (``particle.csmc_update``, PG-BART
  Algorithm 2), as ``particle_chain.pg_bart_sweep`` does for BART;
* ``UPDATE_CTMC`` (``ctmc``): the birth-death process run for a fixed time per tree
  (``ctmc.run_for_time``), as ``ctmc_chain.ctmc_bart_sweep`` does for BART.

Why the same updates are exact here (spec 1.3): each of them touches a leaf's data only through
``tree.leaf_terms`` (the log marginal ``lm`` and the leaf statistic ``b``), which for basis leaves
scores A = sum w b^2 and c = sum w b R against the ``records.BasisTarget`` (the particle weights are
differences of these ``lm``; the CT-MCMC rates come from ``ctmc.stats_leaf_terms`` on per-bin sums,
which accumulate c and A for this model, ``ctmc._bin_rows``), and the leaf values are then drawn by
``basis.finish_basis_tree`` from the basis conditional. The partition-independent per-row terms left
out of ``lm`` cancel in every move ratio, particle weight and rate (spec 1.3).

The sampler of a forest is a type, not a number: ``ForestPart.kind`` is a tuple of ``UPDATE_*`` zeros,
and ``update_forest`` tests ``len(kind)``, which numba folds to a constant (as ``tree.model_tag``), so a
chain compiles the updates of its own samplers only. ``ForestPart.update`` holds the sampler's state
(``PgUpdate``, ``CtmcUpdate``; None for MH, whose move mix is the chain's ``records.Moves``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .basis import begin_basis_sweep, finish_basis_tree, mh_basis_forest, prepare_basis_tree
from .cart_moves import N_MOVES
from .ctmc import run_for_time
from .jit import helper, kernel
from .particle import csmc_update
from .tree import copy_into

UPDATE_MH = 1
UPDATE_PG = 2
UPDATE_CTMC = 3
#: Columns of a forest's per-sweep sampler statistics (``PgUpdate.stats``, ``CtmcUpdate.stats``).
N_UPDATE_STATS = 3


def update_tag(code: int) -> tuple[int, ...]:
    """The forest sampler ``code`` (``UPDATE_*``) as the type ``update_forest`` branches on: a tuple of
    ``code`` zeros (see ``tree.model_tag``)."""
    if code not in (UPDATE_MH, UPDATE_PG, UPDATE_CTMC):
        raise ValueError(f"unknown forest update {code}")
    return (0,) * code


class PgUpdate(NamedTuple):
    """Particle Gibbs state of one forest: its particle systems, settings and statistics."""

    particles: tuple  # records.ParticleSystems
    pg: tuple  # records.PgSettings
    stats: np.ndarray  # float64[3]: the sweep's means over the trees of (last-stage ESS, reference kept, stages)
    out: np.ndarray  # float64[draws, 3]: ``stats`` at each kept draw


class CtmcUpdate(NamedTuple):
    """Continuous-time state of one forest: its rate caches, clock and statistics."""

    cs: tuple  # ctmc.CtmcState
    clock: tuple  # records.CtmcClock: time per tree visit (float64[1]) and whether it adapts in tuning
    mh_rates: object  # float64[4+] rotate / perturb rates and perturb's CHGV table, or None (not compiled)
    stats: np.ndarray  # float64[3]: the sweep's mean jumps per tree, mean starting Lambda, time per visit
    out: np.ndarray  # float64[draws, 3]: ``stats`` at each kept draw


@helper(inline=True)
def pg_basis_forest(rng, forest, state, data, scratch, upd):
    """One backfitting pass over a basis forest with a conditional SMC update of every tree against its
    partial residual (``particle_chain.pg_bart_sweep`` without the noise draw)."""
    particles, pg, stats = upd.particles, upd.pg, upd.stats
    scheme, ancestor, ess_threshold = pg.scheme, pg.ancestor, pg.ess_threshold
    work = particles.work
    n_trees = forest.var.shape[0]
    stats[:] = 0.0
    begin_basis_sweep(state, forest)
    for j in range(n_trees):
        tree = prepare_basis_tree(state, forest, j)
        changed = csmc_update(rng, tree, particles, data, state.target, scratch, scheme, ancestor, state.fstate,
                              ess_threshold)
        stats[0] += work.out[0] / n_trees
        stats[1] += work.out[2] / n_trees
        stats[2] += work.out[1] / n_trees
        finish_basis_tree(rng, state, forest, j, changed)


@helper(inline=True)
def ctmc_basis_forest(rng, forest, state, data, scratch, upd):
    """One backfitting pass over a basis forest, each tree running the birth-death process for the
    clock's time against its partial residual (``ctmc_chain.ctmc_bart_sweep`` without the noise draw)."""
    cs, horizon, mh_rates, stats = upd.cs, upd.clock.horizon, upd.mh_rates, upd.stats
    n_trees = forest.var.shape[0]
    jumps = 0
    lam_sum = 0.0
    begin_basis_sweep(state, forest)
    for j in range(n_trees):
        tree = prepare_basis_tree(state, forest, j)
        n_jumps, lam0 = run_for_time(rng, tree, data, state.target, state.fstate, scratch, cs, horizon[0], mh_rates)
        jumps += n_jumps
        lam_sum += lam0
        finish_basis_tree(rng, state, forest, j, n_jumps > 0)
    stats[0] = jumps / n_trees
    stats[1] = lam_sum / n_trees
    stats[2] = horizon[0]


@helper
def update_forest(rng, part, kind, moves, counts):
    """Update every tree of the forest ``part`` (a ``multi_forest.ForestPart``) by its sampler ``kind``
    (``part.kind``, module docstring). ``moves`` and ``counts`` serve the MH update: the move mix and the
    proposals / acceptances per move type."""
    if len(kind) == UPDATE_MH:
        mh_basis_forest(rng, part.forest, part.state, part.data, moves, part.scratch, counts)
    elif len(kind) == UPDATE_PG:
        pg_basis_forest(rng, part.forest, part.state, part.data, part.scratch, part.update)
    else:
        ctmc_basis_forest(rng, part.forest, part.state, part.data, part.scratch, part.update)


@helper
def after_sweep(part, kind, it, tune):
    """After a sweep: the CT-MCMC clock adapts during tuning to about one jump per tree visit (1 / the
    sweep's mean starting Lambda, as ``ctmc_chain.run_ctmc_bart_chain``); nothing for the others."""
    if len(kind) == UPDATE_CTMC:
        upd = part.update
        if upd.clock.adapt and (it < tune or it == 0) and upd.stats[1] > 0.0:
            upd.clock.horizon[0] = 1.0 / upd.stats[1]


@helper
def record_update(part, kind, d):
    """Kept draw d: the forest's sampler statistics of the sweep (PG, CT-MCMC) into its ``out``."""
    if len(kind) != UPDATE_MH:
        copy_into(part.update.out[d], part.update.stats)


@kernel
def run_lone_forest(rng, part, moves, out_leaf_of):
    """Update the forest ``part`` alone, ``out_leaf_of.shape[0]`` times, against a fixed residual (sigma^2,
    leaf variance and basis held fixed): after sweep s, ``out_leaf_of[s]`` = the leaf of each row in tree 0.
    With one tree the tree's partial residual is the same at every sweep, so the recorded partitions follow
    the tree's exact full conditional: the exact-posterior tests of every forest sampler
    (``tests/test_bcf_samplers.py``). Returns the MH move counts (proposed, accepted)."""
    counts = np.zeros((N_MOVES, 2), dtype=np.int64)
    for s in range(out_leaf_of.shape[0]):
        update_forest(rng, part, part.kind, moves, counts)
        copy_into(out_leaf_of[s], part.state.leaf_of[0])
    return counts
