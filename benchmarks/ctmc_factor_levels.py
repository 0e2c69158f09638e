"""Cost of ``ctmc`` factor rules against the number of levels of a factor (single tree).

Data: n = 1,000 rows (``--rows``); a factor ``g`` with L levels of equal size, two numeric
predictors (100 bins); y = (level effect, a random N(0, 1) per level) + x1 + N(0, 1),
standardised. Bayesian CART with the package's default priors (min_leaf_size 5), the
common-sigma and the per-leaf-sigma regression models, driven through ``CtmcCartChain`` (the
chain ``sampler="ctmc"`` builds; no posterior is assembled), one thread, 10% of the jumps as
tune. Kernels are compiled by a small warm-up run.

Measured, per L (``--levels``):

* ``CPU ms / jump``: CPU seconds of the run (``time.process_time``; the machine is shared, so
  CPU time, not wall time) over its jumps (recording each kept draw, leaf parameters drawn,
  included), from the stump;
* ``CPU ms / stump rates``: one ``compute_all_rates`` of the stump, i.e. one Gray-code walk over
  the 2^(L-1) - 1 partitions of all L levels plus the numeric cuts (median of repeats);
* ``ns / partition``: that walk's time per partition;
* ``rows checks``: the share of walk steps that needed a side's availability checked on its
  rows (``_side_availability`` undecided).

In the common-sigma model every jump changes the scatter sum B and so every rate; a leaf whose
partitions outnumber its rows has no per-partition cache and is re-walked at every jump, so the
cost per jump grows like (leaves holding many levels) x 2^(L-1).

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/ctmc_factor_levels.py --out
benchmarks/results/ctmc_factor_levels.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from bartpy_suite._kernels import ctmc as _ctmc
from bartpy_suite._kernels.ctmc import compute_all_rates
from bartpy_suite.priors import NormalLeafPrior, TreePrior, default_lambda, kernel_prior
from bartpy_suite.samplers.ctmc import CtmcCartChain
from bartpy_suite.samplers.problems import CartProblem

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402
from _tables import emit  # noqa: E402

SEEDS = ("the L-level problem's data `default_rng(100 + L)`; its chains seed 1, the stump-rates chain seed 2; the "
         "warm-up problems from `default_rng(0)`, chains seed 0")


def problem(n: int, levels: int, rng: np.random.Generator, per_leaf_sigma: bool = False) -> CartProblem:
    """The kernels' view of the data: factor codes, numeric predictors binned at 99 quantile cuts,
    standardised y, the package's default priors (common sigma unless ``per_leaf_sigma``)."""
    g = rng.permutation(np.arange(n) % levels)
    effect = rng.normal(size=levels)
    x = rng.uniform(size=(2, n))
    y = effect[g] + x[0] + rng.normal(size=n)
    y = (y - y.mean()) / y.std()
    cuts = [np.quantile(xi, np.linspace(0.01, 0.99, 99)) for xi in x]
    codes = np.vstack([g] + [np.searchsorted(c, xi) for c, xi in zip(cuts, x)]).astype(np.int32)
    hyper = kernel_prior(TreePrior(), NormalLeafPrior(a=1 / 3, mu_bar=0.0, nu=3.0, lam=default_lambda(y, 3.0),
                                                      per_leaf_sigma=per_leaf_sigma), likelihood=True)
    return CartProblem(codes, np.array([True, False, False]), np.array([levels, 100, 100], dtype=np.int64), y,
                       np.zeros(n, dtype=np.int64), hyper)


def stump_rates_ms(chain: CtmcCartChain, repeats: int) -> float:
    """Median CPU ms of one ``compute_all_rates`` of the chain's current tree."""
    data, hyper = chain._kernel_args()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        compute_all_rates(chain.tree, data, hyper, chain.fstate, chain.scratch, chain.cs)
        times.append(time.process_time() - t0)
    return 1e3 * float(np.median(times))


def run(prob: CartProblem, jumps: int, seed: int) -> tuple[float, float]:
    """(CPU ms per jump, mean weighted leaves) of ``jumps`` jumps from the stump."""
    chain = CtmcCartChain(prob, np.random.default_rng(seed))
    tune = max(jumps // 10, 1)
    chain.allocate(jumps - tune)
    t0 = time.process_time()
    chain.run(0, jumps, tune, 1)
    cpu = time.process_time() - t0
    leaves = float(np.average(chain.draws.n_leaves, weights=chain.weight))
    return 1e3 * cpu / jumps, leaves


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="4,8,12,16,20")
    ap.add_argument("--jumps", default="4000,4000,2000,400,60", help="jumps (tune + draws) per level count")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-levels", type=int, default=None,
                    help="override ctmc.MAX_FACTOR_LEVELS for the measurement (to time levels past the limit)")
    args = ap.parse_args(argv)
    if args.max_levels is not None:
        _ctmc.MAX_FACTOR_LEVELS = args.max_levels
    cli = list(argv if argv is not None else sys.argv[1:])
    rng = np.random.default_rng(0)
    run(problem(200, 4, rng), 50, 0)  # compile
    run(problem(200, 4, rng, True), 50, 0)
    lines = ["# ctmc: cost of factor rules against the number of levels (single tree)", "",
             *_provenance.header(SEEDS, argv=[__file__, *cli]),
             f"{args.rows} rows; CPU seconds (time.process_time).", "",
             "| L | partitions 2^(L-1)-1 | jumps | CPU ms / jump (common sigma) | mean leaves | "
             "CPU ms / jump (per-leaf sigma) | mean leaves | CPU ms / stump rates | ns / partition | rows checks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for levels, jumps in zip([int(s) for s in args.levels.split(",")], [int(s) for s in args.jumps.split(",")]):
        seed = 100 + levels
        ms_common, leaves_common = run(problem(args.rows, levels, np.random.default_rng(seed)), jumps, 1)
        ms_var, leaves_var = run(problem(args.rows, levels, np.random.default_rng(seed), True), jumps, 1)
        chain = CtmcCartChain(problem(args.rows, levels, np.random.default_rng(seed)), np.random.default_rng(2))
        stats = getattr(chain.cs, "walk_stats", np.zeros(2, dtype=np.int64))  # absent before the Gray-code walk
        stats[:] = 0
        stump_ms = stump_rates_ms(chain, 5 if levels >= 18 else 21)
        steps, rows_checks = stats
        n_part = (1 << (levels - 1)) - 1
        lines.append(f"| {levels} | {n_part} | {jumps} | {ms_common:.3f} | {leaves_common:.1f} | {ms_var:.3f} | "
                     f"{leaves_var:.1f} | {stump_ms:.3f} | {1e6 * stump_ms / n_part:.0f} | "
                     f"{rows_checks / max(steps, 1):.4f} |")
        print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
