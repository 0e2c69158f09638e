"""``gfr``: the grow-from-root sampler of XBART (He, Yalov & Hahn 2019, AISTATS; He & Hahn 2021,
JASA) for BART regression, and ``warm_start``, which starts MCMC chains from GFR forests
(``init="gfr"`` of ``bps.bart``; Krantsevich, He & Hahn 2023, stochtree's default).

Each sweep regrows every tree from its root, drawing each node's split (or stop) in proportion
to prior mass times the marginal likelihood of the two children as leaves, then the leaves from
their normal full conditionals and sigma^2 once per sweep (``_kernels/gfr.py``; spec
``gfr.md`` sections 2-3). The draws are an approximation: the tree step is a one-step lookahead
proposal (spec section 10), not a Gibbs or MH step for the BART posterior, so a ``gfr`` chain is
a stochastic search whose stationary distribution is not the posterior.

Options: ``weights`` ("B", the package's tree prior over variables then rules, default; or "U",
XBART's and stochtree's uniform weight over all candidate rules of a node), ``max_depth``
(default 10, as stochtree; nodes at that depth stay leaves) and ``sigma_update`` ("sweep",
default, or "tree": XBART's draw of sigma^2 before every tree). Statistic: ``n_truncated``.

Import rule: imports ``_kernels``, ``_validation``, ``errors`` and the modules of this package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import _validation as check
from .._kernels import tree as _tree
from .._kernels.backfit import SIGMA_PROBIT
from .._kernels.gfr import SIGMA_PER_SWEEP, SIGMA_PER_TREE, WEIGHTS_B, WEIGHTS_U, new_work, run_gfr_chain
from ..errors import ArgumentError
from .forest import ForestChain
from .problems import BartProblem
from .registry import Option, SamplerSpec, Statistic, register

WEIGHT_MODES = {"B": WEIGHTS_B, "U": WEIGHTS_U}
SIGMA_UPDATES = {"sweep": SIGMA_PER_SWEEP, "tree": SIGMA_PER_TREE}
#: GFR's depth cap (stochtree's ``max_depth``; spec 3.4 and 13).
DEFAULT_MAX_DEPTH = 10
#: Most GFR depth: the histogram slots and stack grow with it, and a BART tree holds at most
#: 255 nodes (``forest.BART_MAX_NODES``) anyway.
MAX_MAX_DEPTH = 64
#: Samplers whose chains ``warm_start`` can start from a GFR forest: their whole state is the
#: forest, the backfitting state and sigma^2.
WARM_STARTABLE = ("grow_prune", "cgm", "gfr")
SUPPORTED = "regression BART (a numeric response, bps.bart with sparse=False)"


class GfrChain(ForestChain):
    """One BART chain of grow-from-root sweeps.

    Parameters
    ----------
    problem : BartProblem
        A regression problem (``SIGMA_SAMPLED`` or ``SIGMA_FIXED``).
    options : dict
        The validated sampler options (``weights``, ``max_depth``, ``sigma_update``).
    rng : numpy.random.Generator
    """

    def __init__(self, problem: BartProblem, options: Mapping, rng: np.random.Generator):
        check_problem(problem)
        super().__init__(problem, rng)
        self.work = new_work(self.nbins, self.is_categorical, weights=WEIGHT_MODES[options["weights"]],
                             max_depth=int(options["max_depth"]), sigma_update=SIGMA_UPDATES[options["sigma_update"]])

    def allocate(self, draws: int) -> None:
        """Buffers for ``draws`` kept draws and the ``n_truncated`` statistic."""
        super().allocate(draws)
        self.truncated = np.zeros(draws, dtype=np.int64)

    def run(self, first_iter: int, n_iter: int, tune: int, thin: int) -> None:
        """Advance ``n_iter`` GFR sweeps, recording kept draws (the store grows on demand)."""
        args = (self.rng, self.forest, self.state, self.data, self.scratch, self.work)
        self.run_kernel(run_gfr_chain, args, (self.truncated,), first_iter, n_iter, tune, thin)

    def sampler_stats(self, kept: int) -> dict:
        """``n_truncated`` per kept sweep."""
        return {"n_truncated": self.truncated[:kept].copy()}


def check_problem(problem) -> None:
    """Raise unless GFR can fit ``problem`` (regression BART without DART)."""
    if int(problem.sigma_mode) == SIGMA_PROBIT:
        raise ArgumentError(f"sampler 'gfr' (and init='gfr') fits {SUPPORTED} only, not probit (binary) BART; use "
                            "sampler='grow_prune' for a binary response")
    if problem.prior.na_split:
        raise ArgumentError("sampler 'gfr' (and init='gfr') does not support na_action='split' (its rules do not "
                            "carry the missing-value bit); use na_action='drop', or init=None with sampler="
                            "'grow_prune'")
    if getattr(problem, "sparse", None) is not None:
        raise ArgumentError(f"sampler 'gfr' (and init='gfr') fits {SUPPORTED} only: its split weights do not "
                            "include DART's; leave sparse=False or use sampler='grow_prune'")


def _check_weights(name: str, value) -> str:
    return check.check_choice(name, value, tuple(WEIGHT_MODES))


def _check_depth(name: str, value) -> int:
    depth = check.check_int_at_least(name, value, 1)
    if depth > MAX_MAX_DEPTH:
        raise ArgumentError(f"{name} must be at most {MAX_MAX_DEPTH}; got {depth} (a BART tree holds at most 255 "
                            "nodes anyway)")
    return depth


def _check_sigma_update(name: str, value) -> str:
    return check.check_choice(name, value, tuple(SIGMA_UPDATES))


OPTIONS = (
    Option("weights", "B", _check_weights,
           "split weights at a node: 'B' (default) the BART tree prior, uniform over variables with an available "
           "rule then over that variable's rules, so that GFR approximates the posterior the MCMC samplers "
           "target; 'U' uniform over all candidate rules of the node (XBART, stochtree), which gives a binary "
           "predictor 1/100 of the weight of one with 100 cuts"),
    Option("max_depth", DEFAULT_MAX_DEPTH, _check_depth,
           "nodes at this depth are not split (default 10, stochtree's)"),
    Option("sigma_update", "sweep", _check_sigma_update,
           "'sweep' (default): sigma^2 drawn once per sweep after all trees, as the MCMC samplers and "
           "stochtree do; 'tree': before every tree from the residual with that tree at its previous fit (XBART)"),
)


def _build_bart(problem: BartProblem, options: dict, rng) -> GfrChain:
    return GfrChain(problem, options, rng)


GFR = register(SamplerSpec(
    name="gfr", family="gfr",
    description=f"grow-from-root (XBART; every tree regrown each sweep): approximate, {SUPPORTED} only",
    builders={"bart": _build_bart}, options=OPTIONS,
    statistics={"bart": (Statistic("n_truncated", (), "nodes of the sweep left unsplit because a tree's 255 node "
                                                      "slots were full"),)},
))


def default_sweeps(chains: int) -> int:
    """GFR sweeps of ``init="gfr"`` by default: stochtree's 5, or one per chain if more (spec 9.4)."""
    return max(5, chains)


def check_init_options(options, chains: int) -> dict:
    """Validated ``init_options`` of ``init="gfr"``: ``sweeps`` (default ``default_sweeps(chains)``;
    at least ``chains``) and the options of the ``gfr`` sampler."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise ArgumentError(f"init_options must be a dict of option -> value; got {type(options).__name__}")
    options = dict(options)
    known = ["sweeps", *GFR.option_defaults()]
    for key in options:
        if key not in known:  # 'sweeps' is no sampler option: check_options alone would not suggest it
            close = check.suggest(str(key), known)
            raise ArgumentError(f"init_options: no option {key!r}; its options are: "
                                f"{', '.join(map(repr, known))} ('sweeps': the number of GFR sweeps)."
                                + (f" Did you mean {close[0]!r}?" if close else ""))
    sweeps = options.pop("sweeps", None)
    if sweeps is not None:
        sweeps = check.check_int_at_least("init_options['sweeps']", sweeps, 1)
        if sweeps < chains:
            raise ArgumentError(f"init_options['sweeps'] = {sweeps} is fewer than the {chains} chains: each chain "
                                f"starts from a different GFR sweep; give at least {chains} sweeps")
    try:
        out = GFR.check_options(options)
    except ArgumentError as exc:  # a bad value (the keys are known)
        raise ArgumentError(f"init_options: {exc}") from None
    out["sweeps"] = default_sweeps(chains) if sweeps is None else sweeps
    return out


def warm_start(chains: Sequence, problem: BartProblem, rng: np.random.Generator, options: Mapping) -> None:
    """Start every chain from a different GFR forest (``init="gfr"``; spec 9.4, stochtree's rule).

    Runs ``options["sweeps"]`` = k GFR sweeps with ``rng`` (a generator of its own, so that the
    chains' streams do not depend on the warm start) under the chains' own prior, grid and
    sigma^2 prior, and sets chain c (0-based) to the forest, leaf values and sigma^2 after
    sweep k - 1 - c: the last sweep starts chain 0. The chains' residuals are recomputed from
    their new forests. The MCMC kernels are untouched, so the chains target the exact posterior;
    only their start changes.

    Parameters
    ----------
    chains : sequence of ForestChain
        Fresh chains of ``problem`` of a sampler in ``WARM_STARTABLE``.
    problem : BartProblem
        The problem the chains were built for.
    rng : numpy.random.Generator
        The GFR sweeps' generator.
    options : mapping
        ``check_init_options``' result.

    Raises
    ------
    ArgumentError
        For a problem GFR cannot fit or more chains than sweeps.
    """
    check_problem(problem)
    k = int(options["sweeps"])
    if k < len(chains):
        raise ArgumentError(f"init='gfr' needs at least one GFR sweep per chain; got {k} sweeps for {len(chains)} "
                            "chains")
    gfr = GfrChain(problem, {key: options[key] for key in GFR.option_defaults()}, rng)
    for chain in chains:
        if not isinstance(chain, ForestChain) or chain.forest.var.shape != gfr.forest.var.shape:
            raise ArgumentError("init='gfr' starts BART chains of the samplers "
                                f"{', '.join(map(repr, WARM_STARTABLE))} only")
    gfr.allocate(0)  # nothing is recorded: the warm-up sweeps are not draws
    for sweep in range(k):
        gfr.run(sweep, 1, 0, 1)
        c = k - 1 - sweep
        if c < len(chains):
            _copy_start(gfr, chains[c], problem)


def _copy_start(src: GfrChain, dst: ForestChain, problem: BartProblem) -> None:
    """Set ``dst``'s forest, leaf map, residual and sigma^2 to ``src``'s current ones."""
    for name in _tree.TreeArrays._fields:
        np.copyto(getattr(dst.forest, name), getattr(src.forest, name))
    np.copyto(dst.state.leaf_of, src.state.leaf_of)
    # The residual from the forest, not carried over, so that no rounding drift of the GFR sweeps
    # (spec 9.4) reaches the chain: y - offset - sum_j g_j(x).
    resid = np.asarray(problem.y, dtype=np.float64) - problem.offset
    for j in range(dst.forest.var.shape[0]):
        resid = resid - dst.forest.value[j][dst.state.leaf_of[j]]
    np.copyto(dst.state.resid, resid)
    dst.state.target.sigma2[0] = src.state.target.sigma2[0]
