"""Per-iteration trace of one RJHMC-Tree chain on the shipped CGM split (the diagnosis behind
the CGM rows of ``results/rjhmc_tables.md``): move, acceptance, log alpha, leaves, sigma, NUTS
step size, mean tree depth, leapfrog steps and divergences of the iteration, and the train /
test MSE of the current tree, soft-routed (sum_k phi_k mu_k) and by the paper's argmax-leaf
routing, both at h_final, and the share of training rows the tree splits between leaves (most
probable leaf below 0.99: a threshold within a few h of a value the rows take). Tune
iterations are traced too (``Fit`` keeps only the kept ones).

Usage::

    PYTHONPATH=. python3 benchmarks/rjhmc_cgm_trace.py SAMPLER TUNE TOTAL [OPTIONS [HYPER]]

e.g. ``hmc_df 150 160 "{'warmup': 30, 'max_tree_depth': 8}"``; OPTIONS is a dict of sampler
options, HYPER a tuple (h_init, h_final, alpha_s, beta_s) (default: spec table 4). Environment:
SEED (1), EVERY (print every EVERY-th iteration, 1), TREE_EVERY (also print the current tree every
TREE_EVERY-th iteration; 0, the default: only at the end), OUT (also write the trace to this
markdown file under a provenance header, e.g. ``benchmarks/results/rjhmc_cgm_trace_hmc_df.md``).
"""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path

import numpy as np

import bartpy_suite as bps
from bartpy_suite._kernels import rjhmc
from bartpy_suite._kernels import soft_tree as st
from bartpy_suite.models._base import spawn_generators
from bartpy_suite.samplers.hmc import OPTIONS, SoftTreeChain
from bartpy_suite.samplers.problems import SoftTreeProblem

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _provenance  # noqa: E402
from rjhmc_tables import HYPER  # noqa: E402

TABLE4 = {sampler: by_data["cgm"] for sampler, by_data in HYPER.items()}  # spec table 4, CGM column


def setup(sampler, h_i, h_f, a_s, b_s, opts, seed=1):
    """The chain (paper priors: mu ~ N(0, 1), sigma ~ InvGamma(1.5, 1.5), y unscaled) and the
    scaled train / test inputs."""
    df = bps.datasets.load("cgm_rjhmc")
    tr, te = df[df.split == "train"], df[df.split == "test"]
    x, y = tr[["x0", "x1"]].to_numpy(float), tr.y.to_numpy(float)
    xt, yt = te[["x0", "x1"]].to_numpy(float), te.y.to_numpy(float)
    low, width = x.min(0), x.max(0) - x.min(0)
    conf = np.zeros(st.N_CONF)
    conf[st.C_LIK], conf[st.C_MU_SCALE], conf[st.C_SIG_A], conf[st.C_SIG_B], conf[st.C_CLASS_ALPHA] = 1, 1, 1.5, 1.5, 1
    xs = (x - low) / width
    problem = SoftTreeProblem(xs, y, np.zeros(len(y), dtype=np.int64), 0, conf, a_s, b_s, h_i, h_f)
    options = {o.name: o.default for o in OPTIONS}
    options.update(opts)
    mode = st.MODE_DFI if sampler == "hmc_dfi" else st.MODE_DF
    # chain 0's generator of a fit with this seed: the trace is that Fit's chain 0 (see
    # tests/test_soft_tree.py::test_fit_path_is_the_chain_run_by_hand)
    return SoftTreeChain(problem, options, spawn_generators(seed, 1)[0], mode), xs, y, (xt - low) / width, yt


def predictions(chain, x, h):
    """(soft mean, value of the most probable leaf, share of rows whose most probable leaf has
    probability below 0.99) of the chain's current tree at bandwidth h."""
    s = chain.cur
    n = int(s.nn[0])
    work = st.new_work(x.shape[0], chain.cap, chain.nx, 0, h)
    leaves = s.right[:n] < 0
    phi = np.empty((x.shape[0], int(leaves.sum())))
    st.leaf_probabilities(x, s, h, chain.mode, work, phi)
    mu = s.mu[:n][leaves]
    return phi @ mu, mu[np.argmax(phi, axis=1)], float(np.mean(phi.max(axis=1) < 0.99))


def describe(chain):
    s = chain.cur
    lines = []
    for j in range(int(s.nn[0])):
        pad = "  " * int(s.depth[j])
        if s.right[j] >= 0:
            split = np.round(s.delta[j], 3) if chain.mode == st.MODE_DFI else f"x{s.kappa[j]}"
            lines.append(f"{pad}[{j}] {split} tau={s.tau[j]:.4f} inverse metric {np.round(s.minv[j], 5)}")
        else:
            lines.append(f"{pad}[{j}] mu={s.mu[j]:.3f}")
    return "\n".join(lines)


def main(argv):
    sampler, tune, total = argv[0], int(argv[1]), int(argv[2])
    opts = ast.literal_eval(argv[3]) if len(argv) > 3 else {}
    hyper = ast.literal_eval(argv[4]) if len(argv) > 4 else TABLE4[sampler]
    seed = int(os.environ.get("SEED", 1))
    chain, xs, y, xts, yt = setup(sampler, *hyper, opts, seed)
    out = []

    def say(text):
        print(text, flush=True)
        out.append(text)

    every = int(os.environ.get("EVERY", 1))
    tree_every = int(os.environ.get("TREE_EVERY", 0))
    chain.allocate(max(total - tune, 1))
    t0 = time.process_time()
    chain.run(0, 0, tune, 1)  # the initial NUTS run on the stump
    accepted = 0
    for it in range(total):
        chain.run(it, 1, tune, 1)
        i = chain.it
        accepted += i[rjhmc.I_ACCEPTED]
        if it % every == 0 or it == total - 1:
            soft_tr, hard_tr, split_tr = predictions(chain, xs, hyper[1])
            soft_te, hard_te, _ = predictions(chain, xts, hyper[1])
            n = int(chain.cur.nn[0])
            say(f"it {it:4d} move {'GPS'[int(i[rjhmc.I_MOVE])]} acc {int(i[rjhmc.I_ACCEPTED])} "
                f"log_alpha {i[rjhmc.I_LOG_ALPHA]:9.2f} leaves {int((chain.cur.right[:n] < 0).sum()):2d} "
                f"sigma {chain.cur.scal[0]:.3f} eps {i[rjhmc.I_EPS]:.2e} "
                f"depth {i[rjhmc.I_DEPTH_SUM] / max(i[rjhmc.I_TRANSITIONS], 1):.1f} "
                f"leapfrog {int(i[rjhmc.I_LEAPFROG]):6d} div {int(i[rjhmc.I_DIVERGENT]):3d} "
                f"train soft {np.mean((soft_tr - y) ** 2):.3f} test soft {np.mean((soft_te - yt) ** 2):.3f} "
                f"test argmax {np.mean((hard_te - yt) ** 2):.3f} train split {split_tr:.3f} "
                f"cpu {time.process_time() - t0:.0f}")
        if tree_every and it % tree_every == 0:
            say(describe(chain))
    say(describe(chain))
    say(f"acceptance over all {total} iterations: {accepted / total:.3f}")
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"])
        settings = f"(h_init, h_final, alpha_s, beta_s) {hyper}, options {opts}; paper priors, y unscaled"
        head = _provenance.header(f"chain 0 of a fit with seed={seed} (SEED)", settings=settings,
                                  env=("SEED", "EVERY", "TREE_EVERY", "OUT"))
        text = "\n".join([f"# RJHMC-Tree trace: {sampler} on the CGM split", "", *head, "```", *out, "```", ""])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)  # never a half-written file


if __name__ == "__main__":
    main(sys.argv[1:])
