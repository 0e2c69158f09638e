# %% [markdown]
# # Choosing a sampler
#
# *The package offers five samplers for a single tree. Which one should I use, and how do I tell
# whether the one I picked has explored the posterior?*
#
# All five target the same posterior over trees; they differ in how they move:
#
# | sampler | one iteration |
# |---|---|
# | `cgm` | one Metropolis-Hastings proposal: grow, prune, change or swap (Chipman, George & McCulloch 1998) |
# | `grow_prune` | one MH proposal, grow or prune only |
# | `pg` | particle Gibbs: a conditional SMC grows 10 whole trees from the prior and keeps one (Lakshminarayanan, Roy & Teh 2015) |
# | `ctmc` | one jump of a continuous-time birth-death process; each visited tree carries a weight (Mohammadi, Pratola & Kaptein 2020) |
# | `tempered` | one `cgm` proposal on each of 16 tempered copies, then swaps between neighbours (Gattiglio's thesis, ch. 4) |
#
# We run each with four chains of the same number of iterations on two data sets whose
# posteriors are hard in different ways, and measure what matters: R-hat (do the chains agree?),
# effective sample size (ESS) of the number of leaves and of sigma, and CPU time.

# %%
import os
import time

import matplotlib.pyplot as plt
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior.weighted import kish_ess

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: a small run
CHAINS, DRAWS, TUNE = (2, 60, 30) if QUICK else (4, 2000, 1000)
SAMPLERS = ["cgm", "grow_prune", "pg", "ctmc", "tempered"]

# compile every sampler once, so that the timings below measure sampling, not compilation
warm = bps.datasets.load("wu2007").head(60)
for sampler in SAMPLERS:
    bps.cart("y ~ .", data=warm, sampler=sampler, chains=1, draws=5, tune=5, seed=0, progress=False,
             check_mixing=False)


def compare(formula, data, truth_leaves=None, **priors):
    """Fit every sampler with the same settings; one row of diagnostics per sampler."""
    rows, fits = [], {}
    for sampler in SAMPLERS:
        start = time.process_time()
        fit = bps.cart(formula, data=data, sampler=sampler, chains=CHAINS, draws=DRAWS, tune=TUNE, seed=7,
                       threads=1, progress=False, **priors)
        cpu = time.process_time() - start
        summary = fit.summary()
        w = fit.weights.values
        row = {
            "sampler": sampler,
            "CPU s": cpu,
            "R-hat leaves": summary.loc["n_leaves", "r_hat"],
            "ESS leaves": summary.loc["n_leaves", "ess_bulk"],
            "ESS sigma": summary.loc["sigma", "ess_bulk"],
            "ESS/s leaves": summary.loc["n_leaves", "ess_bulk"] / cpu,
            "mean leaves": summary.loc["n_leaves", "mean"],
            "weights: Kish ESS / draws": kish_ess(w.ravel()) / w.size,
        }
        activity = fit.variable_activity()["mean"]
        row.update({f"activity {name}": value for name, value in activity.items()})
        rows.append(row)
        fits[sampler] = fit
    table = pd.DataFrame(rows).set_index("sampler")
    if truth_leaves is not None:
        table.insert(6, "true leaves", truth_leaves)
    return table, fits


# %% [markdown]
# ## Wu et al. (2007): two predictors that tell the same story
#
# In this data set `x1` and `x3` are confounded: the first split can be on either, with nearly
# the same fit, and a local sampler must dismantle a tree to switch. The CT-MCMC paper derives
# activities of about 0.3, 0.4 and 0.3 for `x1`, `x2`, `x3` (its table 1).

# %%
wu = bps.datasets.load("wu2007")
wu_table, wu_fits = compare("y ~ x1 + x2 + x3", wu)
wu_table

# %% [markdown]
# ## Hypercube-4: a deep true tree
#
# Sixteen clusters at the vertices of [-1, 1]^4, each with its own mean: the true tree has 16
# leaves and four levels. We use the prior of the PG-BART paper for D = 4 (`beta = 0.4`) and let
# leaves hold a single row, as there.

# %%
cube = bps.datasets.load("hypercube4")
cube_table, cube_fits = compare("y ~ .", cube, truth_leaves=16, alpha=0.95, beta=0.4, min_leaf_size=1)
cube_table

# %% [markdown]
# ## Traces
#
# The number of leaves per draw, chain 0 of each sampler, on the hypercube (for `ctmc` each draw
# is a visited tree, whose weight the summaries use; the trace shows the jump chain).

# %%
fig, axes = plt.subplots(1, len(SAMPLERS), figsize=(15, 2.6), sharey=True)
for ax, sampler in zip(axes, SAMPLERS):
    ax.plot(cube_fits[sampler].posterior["n_leaves"].values[0], lw=0.6)
    ax.axhline(16, color="k", ls="--", lw=0.8)
    ax.set_title(sampler)
axes[0].set_ylabel("leaves (dashed: truth)");

# %% [markdown]
# ## Weights
#
# Four samplers return equally weighted draws. `ctmc` records every tree the process visits with
# weight 1/Lambda, its expected holding time (Lambda is the total rate of all births and deaths
# from that tree), because the jump chain visits a tree in proportion to pi(T) Lambda(T), not
# pi(T). `fit.weights` holds them, normalised, and every summary uses them. How uneven they are
# decides how much information the draws carry: Kish's ESS of the weights over the number of
# draws is 1 for equal weights (column "weights: Kish ESS / draws" above).

# %%
w = wu_fits["ctmc"].weights.values.ravel()
fig, ax = plt.subplots(figsize=(5, 2.8))
ax.hist(w * w.size, bins=50)
ax.set_xlabel("weight x number of draws (1 = an equal weight)")
ax.set_title("ctmc weights on wu2007")
print(f"largest / smallest weight: {w.max() / w.min():.1f}; Kish ESS {kish_ess(w):.0f} of {w.size} draws")

# %% [markdown]
# ## Which sampler when
#
# Read the two tables above for this run's numbers; what they measure, and what to look for:
#
# - **`cgm`** is the cheapest per iteration and has change and swap moves that `grow_prune` lacks
#   (it was the single tree's default; `bps.cart` now uses `tempered`, below). Trust it only when
#   R-hat across four or more chains is below about 1.01.
# - **`grow_prune`** is the move set of most BART packages; on a single tree it is usually the
#   slowest to leave a mode (compare its R-hat and ESS with `cgm`'s).
# - **`pg`** rebuilds the whole tree at each iteration, so it can jump between trees that local
#   moves connect only through poor intermediate trees, as on the deep hypercube tree. It costs
#   far more per iteration: compare its R-hat and ESS (per iteration) with its ESS/s (per CPU
#   second) to see whether better mixing pays for the cost on your data.
# - **`ctmc`** proposes every birth and death at once and weights each visited tree; it reaches
#   more distinct trees per iteration, at the cost of computing all rates. Use its weights (the
#   package does) and judge it by the ESS, which accounts for them.
# - **`tempered`** is for multimodal posteriors where the other chains disagree (R-hat well above
#   1): the hot rungs cross between modes and pass trees down; it is `bps.cart`'s default. It costs
#   one MH step per rung plus the swaps, about two `cgm` steps per rung on cgm1998
#   (`benchmarks/results/tempered_cgm_full.md`); see the parallel-tempering vignette.
#
# Inside BART the same choice applies to each tree's update (`bps.bart(..., sampler=...)`): the
# other trees make each tree's posterior simpler, and `grow_prune` (BART's default) or `cgm` are the
# usual choices; `grow_prune` gave more effective draws of f(x) at the median test point per CPU
# second than `cgm` on every data set of `benchmarks/results/bart_default_mixing.md` (1.16-1.55x,
# medians over seeds), and of sigma and of the 5% quantile of f(x) on all but hypercube-2, where the
# two are level (1.01x and 0.93x). `pg` helps when single trees must be deep (the particle Gibbs
# vignette).
