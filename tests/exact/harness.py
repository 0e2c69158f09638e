"""Drive ``CartChain`` against the enumerated posterior: chain construction, exact-start
invariance runs, long runs, and the goodness-of-fit statistics.

This is the only module of ``tests/exact`` that imports ``bartpy_suite`` (its public harness
``CartChain`` and the prior/binning helpers); ``enumerate.py`` stays an independent reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from bartpy_suite._binning import BinnedPredictors
from bartpy_suite._kernels.cart_chain import cart_step
from bartpy_suite._kernels.cart_moves import (
    MOVE_NAMES,
    accept_prune,
    change_or_swap,
    propose_grow,
    propose_prune,
    undo_grow,
)
from bartpy_suite._kernels.record import to_padded
from bartpy_suite._kernels.rotate import perturb_step, rotate_step
from bartpy_suite.priors import DirichletLeafPrior, NormalLeafPrior, TreePrior, kernel_prior
from bartpy_suite.samplers.mh import MOVE_INDEX, CartChain, move_flags

from .enumerate import Problem, tree_depth, tree_leaves

CGM_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1}
GROW_PRUNE_MOVES = {"grow": 0.5, "prune": 0.5}
# The paper's RJ-B (rotate added) and RJ-C (rotate and perturb) counterparts.
ROTATE_MOVES = {"grow": 0.25, "prune": 0.25, "change": 0.2, "swap": 0.1, "rotate": 0.2}
PERTURB_MOVES = {"grow": 0.2, "prune": 0.2, "change": 0.2, "swap": 0.1, "rotate": 0.15, "perturb": 0.15}


def make_chain(prob: Problem, moves: dict, seed: int, likelihood: bool = True) -> CartChain:
    """A ``CartChain`` on the data of ``prob`` with the same priors."""
    bp = BinnedPredictors.fit(prob.X, prob.is_cat, prob.n_levels, None)
    tree_prior = TreePrior(prob.alpha, prob.beta, prob.m, split_missing=prob.split_missing)
    n = prob.n
    if prob.model == "classification" or (prob.model is None and prob.ycls is not None):
        leaf = DirichletLeafPrior(prob.class_alpha, prob.n_classes)
        y = np.zeros(n)
        ycls = np.asarray(prob.ycls, dtype=np.int64)
    else:
        leaf = NormalLeafPrior(prob.a, prob.mu_bar, prob.nu, prob.lam,
                               per_leaf_sigma=prob.model == "mean_variance_shift")
        y = np.asarray(prob.y, dtype=float)
        ycls = np.zeros(n, dtype=np.int64)
    h = kernel_prior(tree_prior, leaf, likelihood=likelihood and prob.model is not None)
    return CartChain(bp.codes, bp.is_categorical, bp.nbins, y, ycls, h, moves, np.random.default_rng(seed))


def n_internal(tree) -> int:
    """Number of internal nodes of a nested tree."""
    return tree_leaves(tree) - 1


def move_possible(tree, move: str | None) -> bool:
    """Whether a single-move kernel has a proposal at ``tree`` (change needs a split, swap a split
    with an internal child). When it has none, the correct kernel stays put."""
    if move == "change":
        return tree is not None
    if move in ("swap", "rotate"):
        return n_internal(tree) >= 2
    if move == "perturb":
        return tree is not None
    return True


def _has_categorical_rule(tree, is_cat) -> bool:
    if tree is None:
        return False
    return bool(is_cat[tree[0]]) or _has_categorical_rule(tree[2], is_cat) or _has_categorical_rule(tree[3], is_cat)


class Stepper:
    """Apply MH transitions of one kernel to trees loaded into a ``CartChain``.

    ``move=None`` runs the chain's own move mix; "grow" runs the grow/prune pair, "change" and
    "swap" their own kernels (``step(chain, move)`` semantics). Several transitions are run
    in one ``CartChain.run`` call (nothing recorded) on a chain whose move mix is that kernel:
    the same ``cart_step`` as ``step(chain, move)``, without a Python round trip per step.
    """

    SINGLE = {"grow": {"grow": 0.5, "prune": 0.5}, "change": {"change": 1.0}, "swap": {"swap": 1.0},
              "rotate": {"rotate": 1.0}, "perturb": {"perturb": 1.0}}

    def __init__(self, make, move: str | None, moves: dict):
        self.move = move
        self.chain = make(self.SINGLE[move] if move is not None else moves)
        self.chain.allocate(1)
        self._snap = None

    def load(self, tree, reuse: bool = False) -> None:
        """``set_tree(tree)``; with ``reuse`` restore a copy of the state ``set_tree`` built for
        the previous identical call (valid only when the load is deterministic: no categorical
        rule, whose stored orientation ``set_tree`` draws at random)."""
        ch = self.chain
        if reuse and self._snap is not None:
            arrays, fstate = self._snap
            ch.tree = type(ch.tree)(*[a.copy() for a in arrays])
            ch.fstate[:] = fstate
            return
        ch.set_tree(tree)
        self._snap = ([a.copy() for a in ch.tree], ch.fstate.copy())

    def advance(self, n_steps: int) -> None:
        self.chain.run(0, n_steps, n_steps, 1)


def exact_start_run(stepper: Stepper, trees: list, probs: np.ndarray, n_draws: int, n_steps: int,
                    seed: int) -> list:
    """Draw ``n_draws`` trees i.i.d. from ``probs``, load each into the chain, apply ``n_steps``
    transitions and return the canonical trees reached.

    Loading goes through ``set_tree``, which draws a random stored representation of categorical
    rules for every draw; trees without categorical rules load deterministically, so repeated
    draws of one such tree restore a copy of the loaded state instead (speed only).
    For a single-move kernel, a tree offering no proposal of that move is left as it is (the
    correct kernel is the identity there; ``test_forced_move_without_candidates_stays`` checks the
    chain itself)."""
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(trees), size=n_draws, p=probs))
    is_cat = stepper.chain.is_categorical
    out = []
    prev = -1
    for i in idx:
        tree = trees[i]
        if not move_possible(tree, stepper.move):
            out.append(tree)
            continue
        stepper.load(tree, reuse=(i == prev) and not _has_categorical_rule(tree, is_cat))
        prev = i
        stepper.advance(n_steps)
        out.append(stepper.chain.get_tree())
    return out


@dataclass
class FitResult:
    """Goodness of fit of observed canonical trees to an exact distribution."""

    n: int
    g: float
    df: int
    p_value: float
    tv: float
    tv_null_mean: float
    tv_null_sd: float
    unknown: int

    def line(self) -> str:
        return (f"N={self.n} G={self.g:.1f} df={self.df} p={self.p_value:.3g} TV={self.tv:.4f} "
                f"(i.i.d. sampling-noise TV {self.tv_null_mean:.4f} +- {self.tv_null_sd:.4f}) unknown={self.unknown}")


def g_test(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> tuple[float, int, float]:
    """G-test of multinomial ``counts`` against ``probs``.

    Cells with expected count below ``min_expected`` are pooled into one cell (a rule fixed by the
    exact probabilities alone, so the test keeps its level); the pooled cell is merged into the
    smallest kept cell if it is itself too small. Returns (G, df, p).
    """
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    n = counts.sum()
    expected = n * probs
    keep = expected >= min_expected
    obs = list(counts[keep])
    exp = list(expected[keep])
    rest_o = counts[~keep].sum()
    rest_e = expected[~keep].sum()
    if rest_e >= min_expected or (rest_e > 0 and not obs):
        obs.append(rest_o)
        exp.append(rest_e)
    elif rest_e > 0 or rest_o > 0:
        j = int(np.argmin(exp))
        obs[j] += rest_o
        exp[j] += rest_e
    obs = np.array(obs)
    exp = np.array(exp)
    nz = obs > 0
    g = 2.0 * float(np.sum(obs[nz] * np.log(obs[nz] / exp[nz])))
    df = len(obs) - 1
    return g, df, float(stats.chi2.sf(g, df)) if df > 0 else 1.0


def tv_distance(counts: np.ndarray, probs: np.ndarray) -> float:
    """Total variation between the empirical distribution of ``counts`` and ``probs``."""
    counts = np.asarray(counts, dtype=float)
    return 0.5 * float(np.abs(counts / counts.sum() - probs).sum())


def tv_null(n: int, probs: np.ndarray, reps: int = 200, seed: int = 12345) -> tuple[float, float]:
    """Mean and standard deviation of the TV of an i.i.d. sample of size n from ``probs`` itself
    (the sampling-noise floor), by simulation."""
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, probs, size=reps)
    tv = 0.5 * np.abs(draws / n - probs).sum(axis=1)
    return float(np.mean(tv)), float(np.std(tv, ddof=1))


def fit_trees(observed: list, index: dict, probs: np.ndarray) -> FitResult:
    """Compare a list of canonical trees with the exact distribution ``probs`` over ``index``.

    A tree missing from the enumeration (an invalid tree) counts in ``unknown``.
    """
    counts = np.zeros(len(probs))
    unknown = 0
    for t in observed:
        i = index.get(t)
        if i is None:
            unknown += 1
        else:
            counts[i] += 1
    g, df, p = g_test(counts, probs)
    n = len(observed)
    return FitResult(n, g, df, p, tv_distance(counts, probs) if counts.sum() else 1.0, *tv_null(n, probs), unknown)


def distribution(values: np.ndarray, probs: np.ndarray) -> dict:
    """Exact distribution of an integer statistic of the trees."""
    out = {}
    for v, p in zip(np.asarray(values).tolist(), np.asarray(probs).tolist()):
        out[v] = out.get(v, 0.0) + p
    return out


def tree_stats(trees: list) -> tuple[np.ndarray, np.ndarray]:
    """(n_leaves, depth) of each nested tree."""
    return (np.array([tree_leaves(t) for t in trees]), np.array([tree_depth(t) for t in trees]))


# -- long runs -----------------------------------------------------------------------------------

@dataclass
class LongRun:
    """Thinned states of one chain: canonical trees, (n_leaves, depth) and, per recorded draw,
    the drawn leaf parameter reaching each training row (regression: (draws, n) leaf means;
    classification: (draws, n, K) leaf class probabilities)."""

    trees: list
    n_leaves: np.ndarray
    depth: np.ndarray
    row_values: np.ndarray


def _route(out: dict, codes: np.ndarray, is_cat: np.ndarray) -> np.ndarray:
    """Leaf slot (in the recorded preorder arrays of draw 0) reached by each training row."""
    var = out["split_var"][0]
    cut = out["split_cut"][0]
    left = out["left"][0]
    right = out["right"][0]
    n = codes.shape[1]
    node = np.zeros(n, dtype=np.int64)
    while True:
        v = var[node]
        active = v >= 0
        if not active.any():
            return node
        rows = np.flatnonzero(active)
        vv = v[rows]
        c = codes[vv, rows].astype(np.int64)
        k = cut[node[rows]]
        # numeric: cut index in the low word, the missing code in the high word when missing
        # values go left (na_action="split", ``_kernels/tree.py``; 0 otherwise)
        go_left = np.where(is_cat[vv], (k >> c) & 1 == 1, (c <= (k & (2**32 - 1))) | (c == (k >> 32)))
        node[rows] = np.where(go_left, left[node[rows]], right[node[rows]])


def long_run(chain: CartChain, n_draws: int, thin: int) -> LongRun:
    """Run ``chain`` from its current tree for ``n_draws * thin`` iterations (the sampler's own
    ``run``: move, then leaf-parameter draws) and keep every ``thin``-th state."""
    k = max(chain.n_classes, 1)
    classification = chain.n_classes > 1
    trees = []
    n_leaves = np.zeros(n_draws, dtype=np.int64)
    depth = np.zeros(n_draws, dtype=np.int64)
    n = chain.y.shape[0]
    values = np.zeros((n_draws, n, k)) if classification else np.zeros((n_draws, n))
    for d in range(n_draws):
        chain.allocate(1)
        chain.run(0, thin, thin - 1, 1)
        tree = chain.get_tree()
        trees.append(tree)
        n_leaves[d] = chain.draws.n_leaves[0]
        depth[d] = chain.draws.depth[0]
        store = chain.store  # one recorded tree, in preorder from slot 0
        used = int(store.fill[0])
        out = {key: arr[0] for key, arr in to_padded(store.var[:used], store.cut[:used], store.value[:used],
                                                     store.tree_nodes).items()}
        leaf = _route(out, chain.codes, chain.is_categorical)
        values[d] = store.prob[leaf] if classification else store.value[leaf]
    return LongRun(trees, n_leaves, depth, values)


def batch_means_se(samples: np.ndarray, n_batches: int = 40) -> np.ndarray:
    """Monte Carlo standard error of the mean of each column of ``samples`` (draws first) by
    non-overlapping batch means."""
    samples = np.asarray(samples, dtype=float)
    size = samples.shape[0] // n_batches
    batches = samples[: size * n_batches].reshape((n_batches, size) + samples.shape[1:]).mean(axis=1)
    return batches.std(axis=0, ddof=1) / np.sqrt(n_batches)


def mean_check(samples: np.ndarray, exact: np.ndarray, indicator=None, family_level: float = 1e-4,
               n_batches: int = 40):
    """Bonferroni-corrected batch-means t-tests of the chain means of ``samples`` (draws x k)
    against ``exact`` (k,).

    The standard error is floored at its i.i.d. value (a chain does not beat independent
    sampling on these statistics); for the 0/1 columns flagged in ``indicator`` that value is
    taken from the exact probability, so a state the chain never visited still gets a finite z.
    Returns (max |z|, threshold, z array)."""
    samples = np.asarray(samples, dtype=float).reshape(len(samples), -1)
    exact = np.asarray(exact, dtype=float).reshape(-1)
    n, k = samples.shape
    se = batch_means_se(samples, n_batches)
    se_iid = samples.std(axis=0, ddof=1) / np.sqrt(n)
    if indicator is not None:
        indicator = np.asarray(indicator, dtype=bool)
        se_iid = np.where(indicator, np.sqrt(np.clip(exact * (1.0 - exact), 0.0, None) / n), se_iid)
    se = np.maximum(se, np.maximum(se_iid, 1e-12))
    z = (samples.mean(axis=0) - exact) / se
    threshold = float(stats.t.ppf(1.0 - family_level / (2 * k), n_batches - 1))
    return float(np.max(np.abs(z))), threshold, z


def rao_scott_g_test(labels: np.ndarray, probs: np.ndarray, n_batches: int = 40, min_expected: float = 5.0):
    """G-test of an autocorrelated sequence of cell labels (0..K-1) against ``probs`` with the
    first-order Rao-Scott correction: G divided by the mean design effect of the cells, each
    design effect being the batch-means variance of the cell frequency over its i.i.d. value.

    Cells with expected count below ``min_expected`` are pooled as in ``g_test``.
    Returns (G_adjusted, df, p, mean design effect)."""
    labels = np.asarray(labels)
    probs = np.asarray(probs, dtype=float)
    n = len(labels)
    keep = np.flatnonzero(n * probs >= min_expected)
    cell_of = np.full(len(probs), len(keep), dtype=np.int64)
    cell_of[keep] = np.arange(len(keep))
    p_cells = np.append(probs[keep], probs.sum() - probs[keep].sum())
    cells = cell_of[labels]
    if n * p_cells[-1] < min_expected:  # merge a small pooled cell into the smallest kept cell
        j = int(np.argmin(p_cells[:-1]))
        cells = np.where(cells == len(keep), j, cells)
        p_cells[j] += p_cells[-1]
        p_cells = p_cells[:-1]
    kk = len(p_cells)
    onehot = np.zeros((n, kk))
    onehot[np.arange(n), cells] = 1.0
    counts = onehot.sum(axis=0)
    expected = n * p_cells
    nz = counts > 0
    g = 2.0 * float(np.sum(counts[nz] * np.log(counts[nz] / expected[nz])))
    var_bm = batch_means_se(onehot, n_batches) ** 2
    deff = np.maximum(var_bm / (p_cells * (1 - p_cells) / n), 1.0)
    mean_deff = float(np.sum((1 - p_cells) * deff) / (kk - 1))
    g_adj = g / mean_deff
    return g_adj, kk - 1, float(stats.chi2.sf(g_adj, kk - 1)), mean_deff


# -- any sampler's chain (additive helpers) ---------------------------------------------------------

def cart_problem(prob: Problem, likelihood: bool = True):
    """The ``CartProblem`` of ``prob`` with the same priors as ``make_chain``."""
    from bartpy_suite.samplers.problems import CartProblem

    chain = make_chain(prob, GROW_PRUNE_MOVES, 0, likelihood=likelihood)
    return CartProblem(chain.codes, chain.is_categorical, chain.nbins, chain.y, chain.ycls, chain.prior)


def make_sampler_chain(prob: Problem, sampler: str, options: dict, seed: int, likelihood: bool = True):
    """A chain of the registered ``sampler`` (its ``TreeChain``) on the data of ``prob``, built
    through the registry with ``options`` (validated, defaults filled in)."""
    from bartpy_suite.samplers import get_sampler

    spec = get_sampler(sampler, "cart")
    return spec.make_chain(cart_problem(prob, likelihood), spec.check_options(options), np.random.default_rng(seed))


def make_ctmc_chain(prob: Problem, seed: int, likelihood: bool = True, rates: tuple = (0.0, 0.0)):
    """A ``CtmcCartChain`` (continuous-time sampler) on the data of ``prob`` with the same priors
    as ``make_chain``; ``rates``: those of its rotate and perturb events."""
    from bartpy_suite.samplers.ctmc import CtmcCartChain

    return CtmcCartChain(cart_problem(prob, likelihood), np.random.default_rng(seed), rotate=rates[0],
                         perturb=rates[1])


# -- single moves of a CartChain (the move-ratio and exact-posterior tests) ------------------------
#: Returned by ``propose`` in place of a tree when the drawn proposal is impossible (``None`` is a
#: valid tree: the stump).
NO_PROPOSAL = "no proposal"
#: The kernels' ``leaf_of`` for a single tree, which keeps no row-to-leaf map (``cart_step``).
NO_LEAF_MAP = np.empty(0, dtype=np.uint8)


def step(chain: CartChain, move: str | None = None) -> tuple[str, bool]:
    """One MH transition of ``chain``: of the sampler's move mix (``move=None``) or of one move type.

    A forced move type is run as its own MH kernel: same proposal and ratio, with the move
    mix set to that type and its reverse (so each is invariant on its own).
    """
    if move is None:
        probs = chain.move_probs
    else:
        probs = np.zeros(len(MOVE_NAMES))
        probs[MOVE_INDEX[move]] = 1.0
        if move in ("grow", "prune"):
            probs[:2] = 0.5
    k, accepted = cart_step(
        chain.rng, chain.tree, chain.data, chain.target, probs, *move_flags(probs, chain.chv), chain.fstate, chain.scratch, NO_LEAF_MAP,
    )
    return (MOVE_NAMES[k] if k >= 0 else "none"), bool(accepted)

def propose(chain: CartChain, move: str) -> tuple[float, object]:
    """Draw one proposal of ``move`` and return ``(log acceptance ratio, proposed tree)``
    without keeping it (the proposed tree is ``NO_PROPOSAL`` when the proposal is impossible).

    The chain's tree is left as it was. Ratios use the chain's move probabilities.
    """
    before = chain.get_tree()
    fstate = chain.fstate.copy()
    n_total = float(chain.y.shape[0])
    args = (chain.tree, chain.data, chain.target)
    if move == "grow":
        log_r, node, _ = propose_grow(chain.rng, *args, chain.move_probs, chain.fstate, n_total, chain.scratch,
                                      NO_LEAF_MAP, chain.scratch.model)
        proposed = chain.get_tree() if node >= 0 else NO_PROPOSAL
        if node >= 0:
            undo_grow(chain.tree, node, chain.target, chain.scratch)
        return float(log_r), proposed
    if move == "prune":
        log_r, node = propose_prune(chain.rng, *args, chain.move_probs, chain.fstate, n_total, chain.scratch,
                                    chain.scratch.model)
        if node < 0:
            return float(log_r), NO_PROPOSAL
        accept_prune(chain.tree, node, chain.fstate, chain.scratch, chain.target)
    else:
        if move == "rotate":
            accepted, valid, log_r = rotate_step(chain.rng, *args, chain.fstate, n_total, chain.scratch, True)
        elif move == "perturb":
            accepted, valid, log_r = perturb_step(chain.rng, *args, chain.fstate, n_total, chain.scratch,
                                                   chain.chv, True)
        else:
            accepted, valid, log_r = change_or_swap(chain.rng, *args, chain.fstate, n_total, chain.scratch,
                                                    MOVE_INDEX[move], chain.scratch.model, True)
        if not accepted:
            return float(log_r), NO_PROPOSAL
    proposed = chain.get_tree()
    chain.set_tree(before)
    chain.fstate[:] = fstate
    return float(log_r), proposed
