"""The particle samplers: ``pg`` (particle Gibbs: conditional SMC per tree, PG-BART paper
Algorithm 2) for Bayesian CART and BART, and ``smc`` (the top-down particle filter of
Lakshminarayanan, Roy & Teh 2013) for Bayesian CART.

``pg`` options: ``particles`` (N, default 10), ``resampling`` ("systematic", the
conditional systematic scheme, or "multinomial"), ``ess_threshold`` (resample before a stage only
when the weights' Kish ESS is at most this fraction of the particles; default 1, every stage as in
the paper) and ``ancestor_sampling`` (particle Gibbs with
ancestor sampling, Lindsten, Jordan & Schon 2014: at each stage the reference's ancestor is
redrawn among all particles, weighted by how well each partial tree completed with the
reference's remaining decisions explains the data; default False). Statistics per kept draw:
``ess`` (Kish ESS of the particle weights at the last stage, in particles), ``kept_reference``
(1 if the previous tree was returned) and ``stages``; for BART their means over the trees of
the sweep.

``smc``: each chain is an island, an independent filter whose ``draws`` particles become the
chain's draws with their normalised importance weights (``weight``); ``tune`` and ``thin`` do
not apply (the particles are not a Markov chain). Options: ``resampling``, ``ess_threshold``
(resample before a stage when the weights' Kish ESS is at most this fraction of the particles;
default 0.5) and ``proposal`` ("prior" or "optimal", spec 2.1). Statistics: ``weight``,
``island_ess`` (Kish ESS of the island's final weights), ``stages``, ``log_evidence`` (the
island's estimate of log p(Y | X) on the working scale). The fit's ``ess_bulk`` is the sum
over islands of ``island_ess``.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

import functools

import numpy as np

from .._kernels import tree as _tree
from .._kernels.particle import PROPOSAL_NAMES, RESAMPLING_NAMES, Particles, Work, smc_run
from .._kernels.particle_chain import pg_bart_sweep, record_particles, run_pg_bart_chain, run_pg_cart_chain
from .._kernels.particle_proposal import new_proposal
from .._kernels.record import grow_store, nodes_of_trees, record_tree_now
from .._kernels.records import ParticleSystems, PgBartOut, PgSettings, RunOut, make_window
from ..errors import ArgumentError
from .forest import ForestChain
from .problems import BartProblem, CartProblem
from .registry import Option, SamplerSpec, Statistic, register
from .single_tree import TreeChain

DEFAULT_PARTICLES = 10
DEFAULT_ESS_THRESHOLD = 0.5


def new_particles(count: int, n_rows: int, capacity: int, n_classes: int = 1) -> Particles:
    """``count`` root particles over ``n_rows`` rows with room for ``capacity`` nodes each."""
    trees = [_tree.new_tree(n_rows, capacity, n_classes) for _ in range(count)]
    stacked = _tree.TreeArrays(*[np.ascontiguousarray(np.stack([getattr(t, k) for t in trees]))
                                 for k in _tree.TreeArrays._fields])
    return Particles(
        trees=stacked,
        queue=np.zeros((count, capacity), dtype=np.int32),
        head=np.zeros(count, dtype=np.int64),
        tail=np.zeros(count, dtype=np.int64),
        lm_sum=np.zeros(count),
        b_sum=np.zeros(count),
    )


def new_work(count: int, capacity: int) -> Work:
    """Work arrays of an update with ``count`` particles."""
    return Work(np.zeros(count), np.zeros(count), np.zeros(count, dtype=np.int64),
                np.zeros(capacity, dtype=np.int32), np.zeros(3), np.zeros(capacity, dtype=np.int64),
                np.zeros(capacity, dtype=np.int64), np.zeros(count))


class _ParticleSets:
    """The two particle sets (resampling copies from one into the other), a one-particle
    scratch set (ancestor sampling completes partial trees in it) and the work arrays."""

    def _init_particles(self, count: int, n_rows: int, capacity: int, n_classes: int = 1) -> None:
        self.pa = new_particles(count, n_rows, capacity, n_classes)
        self.pb = new_particles(count, n_rows, capacity, n_classes)
        self.pc = new_particles(1, n_rows, capacity, n_classes)
        self.work = new_work(count, capacity)

    def particles(self) -> ParticleSystems:
        """The particle systems as the kernels take them."""
        return ParticleSystems(self.pa, self.pb, self.pc, self.work)


class _PgChain(_ParticleSets):
    """What the particle Gibbs chains of CART and BART share: the settings and the statistics."""

    def _init_pg(self, particles: int, resampling: str, ancestor_sampling: bool, n_rows: int,
                 n_classes: int = 1, ess_threshold: float = 1.0) -> None:
        if ancestor_sampling and ess_threshold < 1.0:
            raise ArgumentError("sampler options 'ancestor_sampling' and 'ess_threshold' < 1 do not combine (ancestor "
                                "sampling redraws the reference's ancestor at every resampling stage); set one of them "
                                "to its default")
        self.scheme = RESAMPLING_NAMES.index(resampling)
        self.ess_threshold = float(ess_threshold)
        # None, not False, without ancestor sampling: the kernels then compile none of it
        self.ancestor = True if ancestor_sampling else None
        self._init_particles(particles, n_rows, self.capacity, n_classes)

    def pg_settings(self) -> PgSettings:
        """The particle Gibbs settings as the kernels take them."""
        return PgSettings(self.scheme, self.ancestor, self.ess_threshold)

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws (the model's and the particle statistics)."""
        super().allocate(draws)
        self.stats = np.zeros((draws, 3))

    def sampler_stats(self, kept: int) -> dict:
        """``ess``, ``kept_reference`` and ``stages`` per draw (BART: means over the trees)."""
        s = self.stats[:kept]
        return {"ess": s[:, 0].copy(), "kept_reference": s[:, 1].copy(), "stages": s[:, 2].copy()}


class PgCartChain(_PgChain, TreeChain):
    """One particle Gibbs chain on a single tree (Bayesian CART).

    Parameters
    ----------
    problem : CartProblem
    particles : int
        Particles per conditional SMC update (the clamped one included).
    resampling : {"systematic", "multinomial"}
    rng : numpy.random.Generator
    ancestor_sampling : bool
        Redraw the reference's ancestor at every stage (particle Gibbs with ancestor sampling).
    """

    def __init__(self, problem: CartProblem, particles: int, resampling: str, rng: np.random.Generator,
                 ancestor_sampling: bool = False, ess_threshold: float = 1.0):
        TreeChain.__init__(self, problem, rng)
        self._init_pg(particles, resampling, ancestor_sampling, self.y.shape[0], self.n_classes, ess_threshold)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` particle Gibbs iterations, recording kept draws."""
        done = 0
        while done < n_iter:
            steps, pending = run_pg_cart_chain(
                self.rng, self.tree, self.particles(), self.data, self.target, self.fstate,
                self.scratch, self.pg_settings(), make_window(first_iter + done, n_iter - done, tune, thin),
                RunOut(self.cart_out(), self.stats),
            )
            done += steps
            if pending >= 0:
                self.record_pending(pending)


class PgBartChain(_PgChain, ForestChain):
    """One BART chain with a conditional SMC update of each tree.

    Parameters
    ----------
    problem : BartProblem
    particles : int
    resampling : {"systematic", "multinomial"}
    rng : numpy.random.Generator
    ancestor_sampling : bool
    """

    def __init__(self, problem: BartProblem, particles: int, resampling: str, rng: np.random.Generator,
                 ancestor_sampling: bool = False, ess_threshold: float = 1.0):
        ForestChain.__init__(self, problem, rng)
        self._init_pg(particles, resampling, ancestor_sampling, self.resid.shape[0], ess_threshold=ess_threshold)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` sweeps, recording kept draws."""
        self.run_kernel(run_pg_bart_chain, (self.rng, self.forest, self.state, self.particles(), self.data,
                                            self.scratch, self.pg_settings(), PgBartOut(self.out["sigma"], self.stats)),
                        (), first_iter, n_iter, tune, thin, in_args=("sigma",))

    def sweep(self) -> np.ndarray:
        """One backfitting sweep (nothing recorded); returns the sweep's (ess, kept_reference,
        stages) means over the trees."""
        stats = np.zeros(3)
        pg_bart_sweep(self.rng, self.forest, self.state, self.particles(), self.data,
                      self.scratch, self.pg_settings(),
                      stats)
        return stats


class SmcCartChain(TreeChain, _ParticleSets):
    """One island of the top-down particle filter: its particles are the chain's draws.

    The whole filter runs in the first ``run`` call (it has no iterations to split); ``tune``
    and ``thin`` are ignored. The particles are recorded in a random order (drawn from the
    chain's generator) so that the halves of an island used by the split R-hat are exchangeable.

    Parameters
    ----------
    problem : CartProblem
    resampling : {"systematic", "multinomial"}
    ess_threshold : float
        Resample before a stage when the Kish ESS is at most this fraction of the particles.
    rng : numpy.random.Generator
    proposal : {"prior", "optimal"}
        Node proposal: the tree prior, or the one-step optimal proposal (every rule at the node
        scored by prior times likelihood ratio; a factor costs 2^levels scores).
    """

    def __init__(self, problem: CartProblem, resampling: str, ess_threshold: float, rng: np.random.Generator,
                 proposal: str = "prior"):
        super().__init__(problem, rng)
        self.scheme = RESAMPLING_NAMES.index(resampling)
        self.ess_threshold = float(ess_threshold)
        self.proposal = PROPOSAL_NAMES.index(proposal)
        max_bins = max(int(self.nbins.max()) if self.nbins.size else 1, 1)
        self.node_proposal = new_proposal(self.proposal, max_bins, self.n_classes)
        self.finished = False

    def allocate(self, draws: int) -> None:
        """Particles and buffers for ``draws`` weighted draws."""
        super().allocate(draws)
        self._init_particles(draws, self.y.shape[0], self.capacity, self.n_classes)
        self.weight = np.zeros(draws)
        self.island = np.zeros((draws, 3))

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Run the filter and record every particle (the first call only)."""
        if self.finished:
            return
        final = smc_run(self.rng, self.pa, self.pb, self.work, self.data, self.target, self.scratch,
                        PgSettings(self.scheme, None, self.ess_threshold), self.node_proposal)
        count = self.work.w.shape[0]
        order = self.rng.permutation(count)
        first = 0
        while first < count:
            first = record_particles(self.rng, final, self.work, self.data, self.target, self.fstate, self.scratch,
                                     self.cart_out(),
                                     order, first)
            if first < count:
                tree = type(self.tree)(*[getattr(final.trees, k)[order[first]] for k in _tree.TreeArrays._fields])
                self.store = _grow_and_record(self.store, tree, first, self.order, self.scratch.stack)
                first += 1
        self.weight[:] = self.work.w[order]
        self.island[:] = self.work.out
        self.finished = True

    def sampler_stats(self, kept: int) -> dict:
        """``weight`` (normalised within the island), ``island_ess``, ``stages``, ``log_evidence``."""
        return {"weight": self.weight[:kept].copy(), "island_ess": self.island[:kept, 0].copy(),
                "stages": self.island[:kept, 1].copy(), "log_evidence": self.island[:kept, 2].copy()}


def _grow_and_record(store, tree, d, order, stack):
    store = grow_store(store, nodes_of_trees(tree.meta[_tree.M_N_LEAVES]), d)
    record_tree_now(tree, store, d, 0, order, stack)
    return store


# -- options and registry ------------------------------------------------------------------------
def _check_particles(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ArgumentError(f"sampler option {name!r} must be an integer >= 2 (particles per tree update, the "
                            f"clamped one included); got {value!r}")
    return int(value)


def _choice(names: tuple):
    """Check of an option whose value is one of ``names``."""
    def check(name: str, value) -> str:
        if not isinstance(value, str) or value not in names:
            raise ArgumentError(f"sampler option {name!r} must be one of {', '.join(map(repr, names))}; "
                                f"got {value!r}")
        return value
    return check


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"sampler option {name!r} must be True or False; got {value!r}")
    return bool(value)


def _check_threshold(name: str, value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(value, bool) or not 0.0 <= x <= 1.0:
        raise ArgumentError(f"sampler option {name!r} must be a number in [0, 1] (fraction of the particles); "
                            f"got {value!r}")
    return x


PARTICLES = Option("particles", DEFAULT_PARTICLES, _check_particles,
                   f"particles per conditional SMC update, the clamped one included (default {DEFAULT_PARTICLES})")
RESAMPLING = Option("resampling", "systematic", _choice(RESAMPLING_NAMES),
                    "resampling scheme: 'systematic' (default; conditional systematic for pg) or 'multinomial'")
ESS_THRESHOLD = Option("ess_threshold", DEFAULT_ESS_THRESHOLD, _check_threshold,
                       "resample before a stage when the weights' Kish ESS is at most this fraction of the "
                       f"particles (default {DEFAULT_ESS_THRESHOLD}; 1 resamples at every stage, 0 never)")
ANCESTOR_SAMPLING = Option("ancestor_sampling", False, _check_bool,
                           "particle Gibbs with ancestor sampling (Lindsten, Jordan & Schon 2014): redraw the "
                           "reference's ancestor at every stage (default False; each stage then completes every "
                           "particle with the reference's remaining decisions, a cost of about the reference's "
                           "stages / 2 particle updates per stage)")
PG_ESS_THRESHOLD = Option("ess_threshold", 1.0, _check_threshold,
                          "resample the particles before a stage only when their weights' Kish ESS is at most this "
                          "fraction of the particles (default 1: before every stage, the PG-BART paper's Algorithm 2; "
                          "below 1 the free particles keep their own early decisions longer, so the top of the tree "
                          "can change; not with ancestor_sampling)")
PROPOSAL = Option("proposal", "prior", _choice(PROPOSAL_NAMES),
                  "node proposal: 'prior' (default; the weights are likelihood ratios) or 'optimal' (one-step "
                  "optimal: every rule scored by prior x likelihood ratio, 2^levels scores for a factor)")

_PG_STATS = (
    Statistic("ess", (), "Kish ESS of the particle weights at the last stage (particles; BART: mean over trees)"),
    Statistic("kept_reference", (), "1 if the previous tree was returned (BART: share of the trees)"),
    Statistic("stages", (), "stages of the conditional SMC (BART: mean over trees)"),
)


def _build_pg(chain_type):
    # a partial of a module-level function (not a closure), so that models holding the spec pickle
    return functools.partial(_make_pg_chain, chain_type=chain_type)


def _make_pg_chain(problem, options, rng, chain_type):
    return chain_type(problem, options["particles"], options["resampling"], rng, options["ancestor_sampling"],
                      options["ess_threshold"])


def _pg_missing_split(options) -> str | None:
    """pg fits na_action='split' without ancestor sampling (its completion weights score the
    reference's rules without the missing-value bit)."""
    if options.get("ancestor_sampling"):
        return ("its ancestor-sampling weights score rules without the missing-value bit; "
                "sampler_options={'ancestor_sampling': False} works")
    return None


def _smc_missing_split(options) -> str | None:
    """smc fits na_action='split' with the prior proposal only."""
    if options.get("proposal") == "optimal":
        return ("its one-step optimal proposal scores rules without the missing-value bit; "
                "sampler_options={'proposal': 'prior'} works")
    return None


PG = register(SamplerSpec(
    name="pg", family="particle",
    description="particle Gibbs: conditional SMC over whole trees (PG-BART, Algorithm 2)",
    builders={"cart": _build_pg(PgCartChain), "bart": _build_pg(PgBartChain)},
    options=(PARTICLES, RESAMPLING, ANCESTOR_SAMPLING, PG_ESS_THRESHOLD),
    statistics={"cart": _PG_STATS, "bart": _PG_STATS}, missing_split=_pg_missing_split,
))

SMC = register(SamplerSpec(
    name="smc", family="particle",
    description="top-down particle filter (Lakshminarayanan et al. 2013): weighted particles, chains are islands",
    builders={"cart": lambda problem, options, rng: SmcCartChain(problem, options["resampling"],
                                                                 options["ess_threshold"], rng, options["proposal"])},
    options=(RESAMPLING, ESS_THRESHOLD, PROPOSAL),
    statistics={"cart": (
        Statistic("weight", (), "importance weight of the particle, normalised within its island"),
        Statistic("island_ess", (), "Kish ESS of the island's final weights"),
        Statistic("stages", (), "stages of the island's filter"),
        Statistic("log_evidence", (), "the island's estimate of log p(Y | X) (working scale)"),
    )},
    weighted=True,
    missing_split=_smc_missing_split,
    ess_method="kish",
))
