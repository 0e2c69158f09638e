# %% [markdown]
# # Continuous-time birth-death MCMC and its weights
#
# *What does `sampler="ctmc"` do differently, why do its draws come with weights, and does it
# mix better than reversible-jump MH on the example of the CT-MCMC paper?*
#
# Mohammadi, Pratola & Kaptein (2020) replace the accept/reject step of Metropolis-Hastings by a
# continuous-time process. From the current tree T every possible birth (split a leaf on any
# predictor and cut) and every death (collapse a node whose children are leaves) has a rate,
# `min(1, pi(T') / pi(T))`. The process waits an exponential time with rate Lambda(T), the sum of
# all rates, then jumps to one of those trees with probability proportional to its rate. Nothing
# is rejected; every iteration moves.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior.weighted import kish_ess, weighted_ess

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: a small run
REPS, ITERS, BURN = (1, 150, 30) if QUICK else (10, 10_000, 1_000)

wu = bps.datasets.load("wu2007")
fit = bps.cart("y ~ x1 + x2 + x3", data=wu, sampler="ctmc", chains=1, draws=ITERS, tune=BURN, seed=1,
               threads=1, progress=False)
stats = fit.sample_stats
visits = pd.DataFrame({
    "leaves": fit.posterior["n_leaves"].values[0],
    "Lambda (total rate)": stats["total_rate"].values[0],
    "raw weight 1/Lambda": stats["weight"].values[0],
})
visits["normalised weight x draws"] = visits["raw weight 1/Lambda"] / visits["raw weight 1/Lambda"].mean()
visits.head(8)

# %% [markdown]
# ## Why the weights
#
# The sequence of trees the process jumps through (the *jump chain*) visits a tree T in
# proportion to pi(T) Lambda(T), not pi(T): a tree with many attractive neighbours (large Lambda)
# is left quickly but entered often. The process itself spends an expected time 1/Lambda(T) in T
# per visit, so weighting each visited tree by 1/Lambda(T) (eq. 12 of the paper: the expected
# holding time instead of a random one, a Rao-Blackwellization) turns the visit frequencies back
# into pi. `fit.weights` holds these weights normalised, and `summary()`, `predict()` and
# `variable_activity()` use them.
#
# Larger trees have more possible births, hence a larger Lambda and a smaller weight:

# %%
by_size = visits.groupby("leaves").agg(visits=("leaves", "size"), mean_Lambda=("Lambda (total rate)", "mean"),
                                       mean_weight=("normalised weight x draws", "mean"))
by_size["share of visits"] = by_size["visits"] / by_size["visits"].sum()
by_size["share of weight"] = visits.groupby("leaves")["normalised weight x draws"].sum() / len(visits)
by_size

# %% [markdown]
# The two last columns are the jump chain's distribution of the tree size and the weighted one.
# Where does the weight come from? Run the process in real time: it stays in the i-th visited
# tree for a random time `tau_i ~ Exponential(Lambda_i)`, and the share of *time* spent in a set
# of trees estimates its posterior probability. That estimator is unbiased but noisy, because the
# holding times are random. Replacing each `tau_i` by its expectation `1 / Lambda_i` gives the
# same estimator on average with less noise: that is the Rao-Blackwellization. We draw the
# holding times 500 times for the same sequence of visited trees:

# %%
rng = np.random.default_rng(0)
raw = visits["raw weight 1/Lambda"].to_numpy()  # 1 / Lambda_i
leaves = visits["leaves"].to_numpy()
sizes = np.sort(np.unique(leaves))
tau = rng.exponential(raw, size=(500, raw.size))  # 500 draws of every holding time
time_share = np.stack([(tau * (leaves == k)).sum(axis=1) / tau.sum(axis=1) for k in sizes], axis=1)
explained = pd.DataFrame({
    "jump chain (unweighted)": [np.mean(leaves == k) for k in sizes],
    "time share, random tau: mean of 500": time_share.mean(axis=0),
    "time share, random tau: sd of 500": time_share.std(axis=0),
    "weights 1/Lambda (ctmc)": [raw[leaves == k].sum() / raw.sum() for k in sizes],
}, index=pd.Index(sizes, name="leaves"))
explained

# %% [markdown]
# The weighted column agrees with the average of the random-time estimates, and the jump
# chain's frequencies do not: they over-represent trees that the process leaves quickly. The
# sd column is the noise the weights remove. (Whether the weighted frequencies match the exact
# posterior is checked in the package's tests, on data small enough to enumerate every tree:
# `tests/test_ctmc_exact.py`.)

# %% [markdown]
# The weights cost information: draws with tiny weights count for little. Kish's effective
# sample size of the weights, `(sum w)^2 / sum w^2`, measures that loss (it ignores
# autocorrelation; the ESS in the table below accounts for both).

# %%
w = fit.weights.values.ravel()
print(f"{w.size} visited trees; Kish ESS of their weights {kish_ess(w):.0f} "
      f"({kish_ess(w) / w.size:.0%}); largest / smallest weight {w.max() / w.min():.1f}")

# %% [markdown]
# ## Table 1 of the CT-MCMC paper, at a smaller size
#
# The paper's table 1 compares reversible-jump MH with grow and prune moves (RJ-A, our
# `grow_prune`) with the continuous-time sampler (CT-A, our `ctmc`) on this data (sigma^2 = 1):
# 100 replications of 20,000 iterations after 1,000 burn-in. We run `REPS` replications of
# `ITERS` iterations after `BURN` (see the first code cell), each with fresh training data and a
# fresh test set, one chain per sampler, and measure as the paper does: test MSE of the posterior
# mean, ESS of sigma^2 and of each predictor's activity (weighted ESS for `ctmc`), the posterior
# activity of each predictor, the number of distinct trees, and ESS per CPU second of the
# sampling itself. (The paper's other two noise levels, written "sigma^2 = 0.1, 0.01", are noise
# standard deviations: its MSE column reads 0.01 and 1.02e-4 there. At sigma^2 = 1 the two
# readings coincide.)
#
# Timing: the chains run in worker threads, so the process's CPU time minus the main thread's
# is the CPU time of the sampling, without the fixed cost of building the fit (the fits below
# skip the mixing check and the log-likelihood group, which would run in threads of their own).
# A fit takes a fraction of a second here, so that fixed cost would otherwise dominate the
# cheaper sampler's time.

# %%
PAPER = pd.DataFrame(  # the paper's table 1 (sigma^2 = 1), for reference
    [[1.02, 19758, 1037, 2370, 1265, 0.27, 0.45, 0.28, 26344, 1382],
     [1.02, 19282, 14160, 32374, 14128, 0.28, 0.43, 0.28, 5371, 3944]],
    index=["RJ-A (paper)", "CT-A (paper)"],
    columns=["MSE", "ESS s2", "ESS x1", "ESS x2", "ESS x3", "act x1", "act x2", "act x3", "ESS/s s2", "ESS/s x1"],
)


def distinct_trees(fit):
    arr = fit.tree_arrays()
    var = arr["split_var"].values.reshape(-1, arr.sizes["node"])
    cut = arr["split_cut"].values.reshape(-1, arr.sizes["node"])
    return len({(v.tobytes(), c.tobytes()) for v, c in zip(var, cut)})


def sampling_cpu_fit(data, sampler, seed):
    """A fit and the CPU seconds its chain spent sampling (process CPU minus main-thread CPU)."""
    process0, main0 = time.process_time(), time.thread_time()
    fit = bps.cart("y ~ x1 + x2 + x3", data=data, sampler=sampler, chains=1, draws=ITERS, tune=BURN, seed=seed,
                   threads=1, progress=False, check_mixing=False, log_likelihood=False)
    return fit, (time.process_time() - process0) - (time.thread_time() - main0)


def one_run(sampler, train, test, seed):
    fit, cpu = sampling_cpu_fit(train, sampler, seed)
    w = fit.weights.values
    activity = fit.posterior["variable_activity"].values  # (chain, draw, predictor)
    row = {"MSE": np.mean((fit.predict(test)["mean"].to_numpy() - test["y"].to_numpy()) ** 2),
           "ESS s2": weighted_ess(fit.posterior["sigma"].values ** 2, w)}
    for k in range(3):
        row[f"ESS x{k + 1}"] = weighted_ess(activity[..., k], w)
    for k in range(3):
        row[f"act x{k + 1}"] = np.sum(w * activity[..., k]) / w.sum()
    row["ESS/s s2"] = row["ESS s2"] / cpu
    row["ESS/s x1"] = row["ESS x1"] / cpu
    row["distinct trees"] = distinct_trees(fit)
    row["sampling CPU s"] = cpu
    return row


for sampler in ("grow_prune", "ctmc"):  # compile (or load the compiled kernels) before any timing
    bps.cart("y ~ x1 + x2 + x3", data=wu, sampler=sampler, chains=1, draws=20, tune=5, seed=0, progress=False)
runs = {"RJ-A (grow_prune)": [], "CT-A (ctmc)": []}
for r in range(REPS):
    train = bps.datasets.simulate_wu2007(300, seed=r)
    test = bps.datasets.simulate_wu2007(300, seed=10_000 + r)
    runs["RJ-A (grow_prune)"].append(one_run("grow_prune", train, test, seed=r))
    runs["CT-A (ctmc)"].append(one_run("ctmc", train, test, seed=r))
ours = pd.DataFrame({label: pd.DataFrame(rows).mean() for label, rows in runs.items()}).T
pd.concat([ours, PAPER])

# %%
ratio = ours.loc["CT-A (ctmc)"] / ours.loc["RJ-A (grow_prune)"]
paper_ratio = PAPER.loc["CT-A (paper)"] / PAPER.loc["RJ-A (paper)"]
pd.DataFrame({"ours": ratio, "paper": paper_ratio}).loc[["ESS s2", "ESS x1", "ESS x2", "ESS x3", "ESS/s s2",
                                                          "ESS/s x1"]].rename_axis("CT-A / RJ-A")

# %% [markdown]
# Reading the two tables: the paper's claim is that per iteration CT-A mixes far better over the
# tree structure (ESS of the activities roughly ten times RJ-A's) while both find the same
# activities (about 0.3, 0.4, 0.3) and test error. Per CPU second the gain shrinks, because a
# jump computes the rates of every birth and death. What this run shows, in numbers:

# %%
act = ["ESS x1", "ESS x2", "ESS x3"]
print(f"CT-A / RJ-A, ESS of the activities: {ratio[act].min():.1f}-{ratio[act].max():.1f} here "
      f"(paper {paper_ratio[act].min():.1f}-{paper_ratio[act].max():.1f}); ESS of x1 per CPU second of sampling: "
      f"{ratio['ESS/s x1']:.2f} here (paper {paper_ratio['ESS/s x1']:.2f}), so per CPU second CT-A is "
      f"{'ahead of' if ratio['ESS/s x1'] > 1 else 'behind'} RJ-A on x1 in this run; ESS of sigma^2 per CPU second "
      f"{ratio['ESS/s s2']:.2f} (paper {paper_ratio['ESS/s s2']:.2f}).")

# %% [markdown]
# A few short replications are noisy: one chain that happens to move (or to stick) swings a mean
# over replications. The benchmark `benchmarks/ctmc_wu.py` runs the paper's size (20,000
# iterations after 1,000) at the three noise levels and under two tree priors, with the same
# timing (`benchmarks/results/ctmc_wu.md`); `benchmarks/ctmc_rao_blackwell.py` measures, against
# an exactly enumerated posterior, how much the 1/Lambda weights lower the error of the
# estimates compared with random holding times and with the unweighted jump chain
# (`benchmarks/results/ctmc_rao_blackwell.md`).
#
# Traces of the activity of `x1` in the last replication: the jump chain of `ctmc` (dots sized
# by weight) against `grow_prune`, over the same number of iterations.

# %%
last = bps.datasets.simulate_wu2007(300, seed=REPS - 1)
shown = min(ITERS, 2000)
fig, axes = plt.subplots(2, 1, figsize=(11, 4), sharex=True)
for ax, sampler in zip(axes, ["grow_prune", "ctmc"]):
    f = bps.cart("y ~ x1 + x2 + x3", data=last, sampler=sampler, chains=1, draws=shown, tune=BURN,
                 seed=REPS - 1, threads=1, progress=False)
    act = f.posterior["variable_activity"].values[0, :, 0]
    ww = f.weights.values[0]
    ax.scatter(np.arange(shown), act, s=40 * ww / ww.max(), lw=0)
    ax.set_ylabel("activity x1")
    ax.set_title(sampler, fontsize=9)
axes[1].set_xlabel("iteration");
