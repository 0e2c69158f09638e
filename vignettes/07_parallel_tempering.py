# %% [markdown]
# # Parallel tempering: do independent runs finally agree?
#
# *My chains end in different trees (R-hat well above 1). Does parallel tempering fix that, at
# what cost, and how do I check that the tempering itself works?*
#
# Gattiglio's thesis (chapter 5) runs Bayesian CART on the CGM 1998 data with its table 5.1
# settings: 8 independent runs of 1.2 million MH steps each, plain CGM moves against tempered
# schemes. Without tempering the runs stop in different trees; with tempering they should agree.
# We repeat the experiment at a smaller budget (`STEPS` MH steps per run, set below), giving
# every scheme the same number of MH steps (iterations x rungs). The schemes:
#
# - `cgm`: no tempering;
# - `tempered` with the thesis' geometric ladder of 8 inverse temperatures (rung r targets
#   `[L(T) p(T)]^t_r`), swaps between neighbours by the deterministic even-odd scheme (DEO);
# - `tempered` with the thesis' shrinkage ladder: 15 rungs that keep the likelihood but flatten
#   the tree prior through (alpha, beta);
# - `tempered` with the package default: 16 rungs that temper the likelihood only, re-placed
#   during tuning so that every neighbouring pair swaps equally often (Syed et al. 2019).

# %%
import os
import time
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.samplers.tempered import THESIS_TEMPERATURES

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: a small run
RUNS = 4 if QUICK else 8
STEPS = 3_200 if QUICK else 120_000  # MH steps per run (the thesis: 1,200,000)

PRIORS = dict(alpha=0.95, beta=1.0, a=1 / 3, mu_bar=4.85, nu=10.0, lam=4.0, min_leaf_size=5,  # table 5.1
              moves={"grow": 0.25, "prune": 0.25, "change": 0.25, "swap": 0.25})
SCHEMES = {  # label: (sampler options, or None for plain cgm; rungs)
    "cgm (no tempering)": (None, 1),
    "geometric, thesis ladder, DEO": ({"ladder": "geometric", "temperatures": THESIS_TEMPERATURES,
                                       "swaps": "deo", "adapt": False}, 8),
    "shrinkage, thesis pairs, DEO": ({"ladder": "shrinkage", "swaps": "deo", "adapt": False}, 15),
    "likelihood, 16 adapted rungs (default)": ({}, 16),
}

df = bps.datasets.load("cgm1998")
for sampler in ("cgm", "tempered"):  # compile first, so that the timings measure sampling
    bps.cart("y ~ x1 + x2", data=df.head(50), sampler=sampler, chains=1, draws=5, tune=5, progress=False)

# %% [markdown]
# ## The runs
#
# One fit per scheme with `RUNS` chains (each chain is an independent run with its own random
# generator), a quarter of the iterations as tuning.

# %%
def root_split(fit, run):
    """The most common root split of one run and its share of the run's draws."""
    arrays = fit.tree_arrays()
    var = arrays["split_var"].values[run, :, 0, 0]
    cut = arrays["split_cut"].values[run, :, 0, 0]
    cuts = fit.idata["constant_data"]["cuts"].values  # (predictor, cut): the cut grid
    levels = bps.datasets.CGM1998_LEVELS

    def label(v, c):
        if v < 0:
            return "stump"
        if fit.predictors[v] == "x2":  # a subset of levels; a rule and its complement are the same split
            mask = c if c & 1 else ~c & (2 ** len(levels) - 1)
            return "x2 in {" + ",".join(level for i, level in enumerate(levels) if mask >> i & 1) + "}"
        return f"x1 <= {cuts[v, c]:.2f}"

    (text, n), = Counter(label(v, c) for v, c in zip(var, cut)).most_common(1)
    return f"{text} ({n / len(var):.0%})"


fits, rows = {}, []
for label, (options, rungs) in SCHEMES.items():
    iterations = STEPS // rungs
    tune = iterations // 4
    thin = max((iterations - tune) // 1000, 1)
    start = time.perf_counter()
    fit = bps.cart("y ~ x1 + x2", data=df, sampler="cgm" if options is None else "tempered",
                   sampler_options=options, chains=RUNS, draws=(iterations - tune) // thin, tune=tune, thin=thin,
                   seed=1, progress=False, **PRIORS)
    seconds = time.perf_counter() - start
    fits[label] = fit
    summary = fit.summary()
    lp = fit.sample_stats["log_posterior"].values
    rows.append({"scheme": label, "rungs": rungs, "iterations per run": iterations,
                 "MH steps per s": RUNS * iterations * rungs / seconds,
                 "R-hat n_leaves": summary.loc["n_leaves", "r_hat"],
                 "spread of run means of log posterior": np.ptp(lp.mean(axis=1)),
                 "best log posterior": lp.max(),
                 "runs agreeing on the root split": Counter(root_split(fit, r).split(" (")[0]
                                                            for r in range(RUNS)).most_common(1)[0][1]})
results = pd.DataFrame(rows).set_index("scheme")
results

# %% [markdown]
# How to read it: R-hat near 1 and a small spread of the runs' mean log posterior mean the runs
# agree; "runs agreeing on the root split" counts the runs whose most common root split is the
# most popular one. The best log posterior found by any run tells whether a scheme reaches the
# high-posterior trees at all. MH steps per second show the cost of the swaps and bookkeeping.
#
# The root split of every run, per scheme:

# %%
pd.DataFrame({label: [root_split(fit, r) for r in range(RUNS)] for label, fit in fits.items()},
             index=pd.Index(range(RUNS), name="run")).T

# %% [markdown]
# ## Is the tempering working?
#
# Two checks from the sampler's own statistics (`fit.sample_stats`): the acceptance rate of the
# swaps between each neighbouring pair of rungs (a pair that never swaps cuts the ladder in two),
# and round trips: how many times a tree travelled from the target rung to the hottest rung and
# back. A ladder with round trips mixes information across all temperatures; without any, the hot
# rungs are decoration.

# %%
tempered = {label: fit for label, fit in fits.items() if SCHEMES[label][0] is not None}
fig, ax = plt.subplots(figsize=(7, 3))
swap_table = {}
for label, fit in tempered.items():
    last = fit.sample_stats.isel(draw=-1)
    rate = np.nanmean(last["swap_rate"].values, axis=0)  # per pair, averaged over runs
    ax.plot(np.arange(rate.size), rate, marker="o", label=label)
    swap_table[label] = {"min swap rate": rate.min(), "max swap rate": rate.max(),
                         "round trips per run (mean)": last["round_trips"].values.mean(),
                         "runs without a round trip": int((last["round_trips"].values == 0).sum())}
ax.set_xlabel("pair of rungs (0 = target and next)")
ax.set_ylabel("swap acceptance")
ax.set_ylim(0, 1)
ax.legend(fontsize=7)
pd.DataFrame(swap_table).T

# %% [markdown]
# The adaptation of the default ladder re-places the rungs during tuning so that every pair
# swaps about equally often (compare its min and max swap rates with those of the fixed ladders).
# The ladder it chose for run 0 (inverse temperature per rung):

# %%
default = fits["likelihood, 16 adapted rungs (default)"]
ladder = default.sample_stats["ladder"].isel(chain=0, draw=-1).to_pandas()
ladder[["inv_temp"]].T

# %% [markdown]
# ## Traces of the runs
#
# Log posterior of the target rung's tree, every run, without and with (default) tempering.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3), sharey=True)
for ax, label in zip(axes, ["cgm (no tempering)", "likelihood, 16 adapted rungs (default)"]):
    for run in fits[label].sample_stats["log_posterior"].values:
        ax.plot(run, lw=0.5)
    ax.set_title(label, fontsize=9)
    ax.set_xlabel("kept draw")
axes[0].set_ylabel("log posterior");

# %% [markdown]
# At the thesis' full budget (1.2 M MH steps per run) the benchmark `benchmarks/tempered_cgm.py`
# runs the same schemes (results in `benchmarks/results/tempered_cgm_full.md`, with R-hat
# against budget, the geometric ladder's swap barrier and what a tempered MH step costs); here
# the budget is `STEPS` per run, so the table above says how far each scheme gets with that
# much work.
