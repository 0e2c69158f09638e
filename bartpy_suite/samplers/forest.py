"""``ForestChain``: the state every BART sampler's chain holds (the forest and the
backfitting state of ``_kernels.backfit``), and its draw buffers. A sampler subclasses it and
implements ``run`` with its own sweep (see ``_kernels/backfit.py`` for the loop).

Import rule: imports ``_kernels`` and the modules of this package.
"""

from __future__ import annotations

import os

import numpy as np

from .._kernels import tree as _tree
from .._kernels.backfit import SIGMA_PROBIT, BackfitState, record_forest_now
from .._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from .._kernels.record import grow_store, new_store, nodes_of_trees, trim_store
from .._kernels.records import Data, ForestOut, Prior, make_target, make_window
from .._kernels.row_parallel import block_layout, n_blocks
from ..errors import ArgumentError
from .draws import ChainDraws
from .problems import BartProblem

# Most nodes one BART tree may hold (128 leaves). Under BART's prior (beta = 2) a tree this large
# has negligible probability; a grow beyond it is rejected, i.e. the prior is truncated there.
BART_MAX_NODES = 255
#: First node room of the draw store per tree and kept draw (it grows on demand).
INITIAL_NODES_PER_TREE = 4
#: Most bytes of row permutations a chain keeps one per tree (4 n T). Above, its trees share one,
#: rebuilt for each tree in the residual pass (``_kernels/backfit.py``): the same draws, a
#: scattered write per row and tree more (at 10^7 rows and 200 trees: 40 MB instead of 8 GB).
PER_TREE_PERM_BYTES = 1 << 30


#: Fewest rows at which a chain's O(n) passes run by row blocks (``_kernels/row_parallel.py``), the
#: layout that lets one chain use several threads with draws that do not depend on how many. Below,
#: the sequential passes of ``_kernels/backfit.py`` (and their draws) are kept. The environment
#: variable ``ROW_BLOCKS_ENV`` overrides it (read when a chain is built), e.g. to test the block
#: passes on small data. Why 300,000 (``benchmarks/results/threads_one_chain.md``, one chain, 200
#: trees, at a load average of 12-15 on 2 cores): on one thread the blocks cost CPU at 10^5 rows
#: (0.030 against 0.029 s per sweep; 0.042 against 0.038 in an earlier run) and nothing from
#: 3 x 10^5 on (0.086 against 0.086; 0.348 against 0.370 at 10^6), and a chain above the threshold
#: uses them on one thread too (e.g. 4 chains on 2 cores); a chain with row blocks also compiles
#: kernels of its own, about 6 CPU s more than a first BART fit without (20.2 against 13.8-14.4,
#: ``benchmarks/results/compile_time_threads.md``), negligible next to a fit of that size. No wall
#: gain from a second thread could be measured on that loaded machine at any n (0.89-0.99x).
ROW_BLOCKS_MIN_ROWS = 300_000
ROW_BLOCKS_ENV = "BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS"


def uses_row_blocks(n_rows: int) -> bool:
    """Whether a BART chain over ``n_rows`` rows runs its O(n) passes by row blocks: from
    ``ROW_BLOCKS_MIN_ROWS`` rows on, or from the value of the environment variable
    ``BARTPY_SUITE_ROW_BLOCKS_MIN_ROWS`` when set (an integer >= 1)."""
    text = os.environ.get(ROW_BLOCKS_ENV, "").strip()
    if not text:
        return n_rows >= ROW_BLOCKS_MIN_ROWS
    try:
        least = int(text)
    except ValueError:
        least = 0
    if least < 1:
        raise ArgumentError(f"environment variable {ROW_BLOCKS_ENV}={text!r}: give a whole number of rows >= 1 "
                            f"(the fewest rows at which a chain runs its row passes by blocks), or unset it")
    return n_rows >= least


def shares_perm(n_trees: int, n_rows: int) -> bool:
    """Whether a forest of ``n_trees`` trees over ``n_rows`` rows shares one row permutation."""
    return n_trees > 1 and 4 * n_trees * n_rows > PER_TREE_PERM_BYTES


def new_forest(n_trees: int, n_rows: int, capacity: int) -> _tree.TreeArrays:
    """A forest of ``n_trees`` stumps: ``TreeArrays`` fields stacked along a first tree axis;
    ``perm`` has one row per tree, or a single row the trees share (``shares_perm``)."""
    stump = _tree.new_tree(n_rows, capacity)
    perm_rows = 1 if shares_perm(n_trees, n_rows) else n_trees
    return _tree.TreeArrays(*[np.repeat(getattr(stump, k)[None], perm_rows if k == "perm" else n_trees, axis=0)
                              for k in _tree.TreeArrays._fields])


class ForestBuffers:
    """The draw buffers of a chain over a stacked forest (``self.forest``, ``self.scratch``,
    ``self.order``): the chain protocol's ``allocate`` / ``collect``, ``record_pending`` and the
    chunk loop around a sampler's kernel, ``run_kernel``.
    Per draw it keeps each tree's leaf count and depth, the trees, and ``model_buffers``."""

    def init_forest(self, problem, rng: np.random.Generator, n_trees: int, n_rows: int, sparse: bool = False) -> None:
        """Set the binned predictors of ``problem`` (``codes``, ``is_categorical``, ``nbins``), ``rng``, and a
        forest of ``n_trees`` stumps over ``n_rows`` rows with its node ``capacity`` (at most ``BART_MAX_NODES``),
        ``scratch`` (for the leaf model of ``problem.prior``; ``sparse`` as in ``_tree.new_scratch``) and
        ``order`` buffer; a chain's ``__init__`` calls it first."""
        self.codes = np.ascontiguousarray(problem.codes, dtype=np.int32)
        self.is_categorical = np.asarray(problem.is_categorical, dtype=np.bool_)
        self.nbins = np.asarray(problem.nbins, dtype=np.int64)
        self.rng = rng
        prior = problem.prior
        self.capacity = min(_tree.node_capacity(n_rows, prior.min_leaf), BART_MAX_NODES)
        self.forest = new_forest(n_trees, n_rows, self.capacity)
        self.scratch = _tree.new_scratch(self.codes, self.capacity, self.nbins, model=prior.model, sparse=sparse)
        self.order = np.empty(self.capacity, dtype=np.int32)

    @property
    def n_trees(self) -> int:
        """Number of trees (over all classes for multinomial BART)."""
        return self.forest.var.shape[0]

    def model_buffers(self, draws: int) -> dict:
        """Further per-draw model quantities (none here)."""
        return {}

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws; the node store starts small and grows on demand."""
        t = self.n_trees
        self.out = {**self.model_buffers(draws), "n_leaves": np.zeros((draws, t), dtype=np.int32),
                    "depth": np.zeros((draws, t), dtype=np.int32)}
        self.store = new_store(draws, t, INITIAL_NODES_PER_TREE * t * min(draws, 256))

    def run_kernel(self, kernel, args: tuple, stats: tuple, first_iter: int, n_iter: int, tune: int,
                   thin: int, in_args: tuple = ()) -> None:
        """Advance ``n_iter`` iterations with a chunk-running kernel, recording kept draws.

        The kernel is called as ``kernel(*args, window, *model outputs, *stats, ForestOut)`` (the
        model outputs are the ``model_buffers`` arrays, e.g. sigma, but those named in
        ``in_args``, which the caller passed inside ``args``, e.g. in a ``records.Dart``) and
        returns ``(iterations done, pending draw)``: a draw it could not record because the store
        was full is recorded here after growing the store, and the kernel is called again for the
        iterations left.
        """
        skip = ("n_leaves", "depth", *in_args)
        done = 0
        while done < n_iter:
            model = tuple(v for k, v in self.out.items() if k not in skip)
            steps, pending = kernel(*args, make_window(first_iter + done, n_iter - done, tune, thin), *model, *stats,
                                    ForestOut(self.out["n_leaves"], self.out["depth"], self.store, self.scratch.nodes,
                                    self.order))
            done += steps
            if pending >= 0:
                self.record_pending(pending)

    def record_pending(self, d: int) -> None:
        """Grow the store and record the current forest as draw d (after a kernel found no room)."""
        self.store = grow_store(self.store, nodes_of_trees(self.forest.meta[:, _tree.M_N_LEAVES]), d)
        record_forest_now(self.forest, self.store, d, self.out["n_leaves"], self.out["depth"], self.scratch.nodes,
                          self.order, self.scratch.stack)

    def collect(self, kept: int) -> ChainDraws:
        """The first ``kept`` draws; sampler statistics come from ``sampler_stats``."""
        posterior = {key: value[:kept].copy() for key, value in self.out.items()}
        out = ChainDraws(posterior, self.sampler_stats(kept), trim_store(self.store, kept))
        self.out = self.store = None
        return out

    def sampler_stats(self, kept: int) -> dict:
        """Sampler statistics of the first ``kept`` draws (none by default)."""
        return {}


class SweepByRun:
    """Mixin (listed before the chain's base class) for a chain whose ``run`` kernel is its only kernel:
    ``sweep`` is one iteration of ``run`` with nothing kept."""

    def sweep(self) -> None:
        """One sweep with nothing recorded (the Geweke test's successive-conditional step); the
        buffers of ``allocate`` must exist (any size)."""
        if self.out is None:
            self.allocate(1)
        self.run(0, 1, 1 << 62, 1)


class ForestChain(ForestBuffers):
    """State of one BART chain.

    Parameters
    ----------
    problem : BartProblem
    rng : numpy.random.Generator
    """

    def __init__(self, problem: BartProblem, rng: np.random.Generator):
        y = np.asarray(problem.y, dtype=np.float64)
        n = y.shape[0]
        n_trees = int(problem.n_trees)
        prior = problem.prior
        self.init_forest(problem, rng, n_trees, n, sparse=getattr(problem, "sparse", None) is not None)
        probit = int(problem.sigma_mode) == SIGMA_PROBIT
        if probit:
            ybin = y.astype(np.int64)
            # Start the latents at +-1 around a zero fit.
            z = np.where(ybin == 1, 1.0, -1.0)
            start = 0.0
        else:  # the latents and 0/1 codes of probit BART are not used: no n-sized arrays for them
            ybin = np.zeros(0, dtype=np.int64)
            z = np.zeros(0)
            start = float(np.mean(y))
        self.forest.value[:, 0] = start / n_trees
        target = z if probit else y
        # Row blocks (row_parallel.py): their layout widens sums and cursor, and ``blocks`` (None
        # otherwise) makes the kernels compile the block passes, for this chain's signature only.
        blocks = None
        # only chains whose passes are backfit.py's (normal leaves): a basis-leaf chain (basis.py)
        # replaces sums with its own and has no block passes
        if prior.model == MODEL_NORMAL_KNOWN_VARIANCE and uses_row_blocks(n):
            sums, cursor = block_layout(n, self.capacity)
            blocks = n_blocks(n)
        else:
            sums, cursor = np.zeros((4, self.capacity)), np.zeros(self.capacity, dtype=np.int64)
        self.state = BackfitState(
            resid=np.ascontiguousarray(target - start - problem.offset),
            # all rows start in the root of a stump; uint8 node ids since capacity <= 255
            leaf_of=np.zeros((n_trees, n), dtype=np.uint8),
            sums=sums,
            z=z,
            ybin=ybin,
            ycls=np.zeros(0, dtype=np.int64),  # class codes: read by classification leaf models only
            target=make_target(prior, problem.sigma2),  # the chain's sigma^2 cell starts at problem.sigma2
            fstate=np.zeros(2),
            sigma_mode=np.array([problem.sigma_mode], dtype=np.int64),
            cursor=cursor,
            blocks=blocks,
        )
        # The tree updates read the residual of the state (rewritten in place by the sweep).
        self.data = Data(self.codes, self.is_categorical, self.nbins, self.state.resid, self.state.ycls)
        self.out = None
        self.store = None

    @property
    def prior(self) -> Prior:
        """The chain's prior record (``_kernels/records.Prior``)."""
        return self.state.target.prior

    @property
    def current_sigma2(self) -> float:
        """The chain's current sigma^2 (the noise draw writes it)."""
        return float(self.state.target.sigma2[0])

    @property
    def resid(self) -> np.ndarray:
        """The current residual y - sum of trees (latent minus fit for probit)."""
        return self.state.resid

    @property
    def z(self) -> np.ndarray:
        """The probit latents."""
        return self.state.z

    @property
    def ybin(self) -> np.ndarray:
        """The 0/1 response of probit BART (zeros otherwise)."""
        return self.state.ybin

    def model_buffers(self, draws: int) -> dict:
        """Per-draw model quantities besides the trees' sizes: sigma."""
        return {"sigma": np.full(draws, np.nan)}
