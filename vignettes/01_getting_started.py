# %% [markdown]
# # Getting started: Bayesian CART on the CGM 1998 example
#
# *I have a response, a numeric predictor and a factor. Which splits does the data support, how
# sure can I be of them, and how do I know the sampler has told me the truth?*
#
# Bayesian CART puts a prior on trees (deep trees are unlikely) and samples trees from their
# posterior with Markov chain Monte Carlo. Every draw is a whole tree, so every answer comes with
# its uncertainty. We use the simulated example of Chipman, George & McCulloch (1998), where we
# know the truth: `y = f(x1, x2) + 2 eps` with a step function `f` of five regions.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bartpy_suite as bps

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: fewer draws
DRAWS, TUNE = (100, 50) if QUICK else (2000, 1000)

df = bps.datasets.load("cgm1998")
print(bps.datasets.available()["cgm1998"])  # each shipped data set has a one-line description
df.head()

# %% [markdown]
# ## Fit
#
# The formula names the response and the predictors; `x2` is a factor, so the trees split it by
# subsets of its levels. Four chains run in parallel threads from one seed.

# %%
fit = bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=4, draws=DRAWS, tune=TUNE, seed=1, progress=False)
fit

# %% [markdown]
# `summary()` gives the posterior of the noise level and of the tree's size, with ArviZ's
# effective sample size and R-hat (R-hat near 1 means the chains agree).

# %%
fit.summary()

# %% [markdown]
# The true noise sd is 2 and the true tree has 5 leaves: compare with the rows `sigma` and
# `n_leaves` above.
#
# ## Credible and predictive intervals
#
# `predict(new, level=...)` gives the posterior mean of f(x) and a credible interval for it;
# `kind="predictive"` gives an interval for a new observation y, which adds the noise. We predict
# on a grid of `x1` for each level of `x2` and draw the true `f` beside it.

# %%
grid = pd.DataFrame(
    [(x1, level) for level in bps.datasets.CGM1998_LEVELS for x1 in np.linspace(0, 10, 201)], columns=["x1", "x2"]
)
mean = fit.predict(grid, level=0.9)
pred = fit.predict(grid, kind="predictive", level=0.9)
truth = bps.datasets.f_cgm1998(grid["x1"], grid["x2"])

fig, axes = plt.subplots(1, 4, figsize=(13, 3), sharey=True)
for ax, level in zip(axes, bps.datasets.CGM1998_LEVELS):
    rows = (grid["x2"] == level).to_numpy()
    x = grid["x1"][rows]
    ax.fill_between(x, pred["lower"][rows], pred["upper"][rows], color="0.85", label="90% predictive")
    ax.fill_between(x, mean["lower"][rows], mean["upper"][rows], color="tab:blue", alpha=0.4, label="90% credible")
    ax.plot(x, mean["mean"][rows], color="tab:blue", label="posterior mean")
    ax.plot(x, truth[rows], "k--", lw=1, label="true f")
    points = df[df["x2"] == level]
    ax.plot(points["x1"], points["y"], ".", ms=2, color="0.4")
    ax.set_title(f"x2 = {level}")
    ax.set_xlabel("x1")
axes[0].set_ylabel("y")
axes[0].legend(fontsize=7, loc="lower left");

# %% [markdown]
# Are the predictive intervals honest? On fresh data from the same model, about 90% of the new
# observations should fall inside their 90% predictive interval.

# %%
fresh = bps.datasets.simulate_cgm1998(n=2000, seed=12345)
interval = fit.predict(fresh, kind="predictive", level=0.9)
inside = ((fresh["y"] >= interval["lower"]) & (fresh["y"] <= interval["upper"])).mean()
print(f"share of 2000 new observations inside their 90% predictive interval: {inside:.3f}")

# %% [markdown]
# ## The most probable tree and which predictors matter
#
# `map_tree()` prints the visited tree with the largest posterior probability, like R's `rpart`.

# %%
print(fit.map_tree())

# %% [markdown]
# `variable_activity()` is the share of split rules on each predictor, averaged over the draws,
# with an interval.

# %%
fit.variable_activity()

# %% [markdown]
# ## What disagreeing chains look like
#
# Check R-hat in the summary before believing anything above. The posterior over trees is
# rugged: a tree that splits first on `x1` and one that splits first on `x2` can both fit well,
# and a local sampler (grow, prune, change or swap one node at a time) must pass through poor
# trees to go from one to the other. Chains of `cgm` can therefore settle in different trees,
# often overgrown ones, and stay there. Here are the four chains of the fit above.

# %%
def per_chain(fit):
    """Mean log posterior and mean number of leaves of each chain."""
    table = pd.DataFrame({
        "mean log posterior": fit.sample_stats["log_posterior"].values.mean(axis=1),
        "mean leaves": fit.posterior["n_leaves"].values.mean(axis=1),
    })
    table.index.name = "chain"
    return table


def traces(fit, title):
    fig, axes = plt.subplots(1, 2, figsize=(12, 2.8))
    for c, (lp, nl) in enumerate(zip(fit.sample_stats["log_posterior"].values, fit.posterior["n_leaves"].values)):
        axes[0].plot(lp, lw=0.6, label=f"chain {c}")
        axes[1].plot(nl, lw=0.6)
    axes[0].set_title(f"{title}: log posterior of the tree")
    axes[1].set_title(f"{title}: number of leaves")
    axes[0].legend(fontsize=7)


traces(fit, "cgm")
rhat = fit.summary().loc["n_leaves", "r_hat"]
print(f"R-hat of n_leaves across the chains: {rhat:.3f} "
      f"({'the chains disagree' if rhat > 1.01 else 'no sign of disagreement'}; 1.01 is the usual bound)")
per_chain(fit)

# %% [markdown]
# Traces that sit at different levels and an R-hat above 1.01 say the same thing: the chains have
# not mixed, the pooled summary mixes answers from different trees, and any single chain would be
# overconfident. The remedies are many more iterations and chains, or a sampler that moves between
# modes. Parallel tempering (`sampler="tempered"`, see its vignette) runs a ladder of flattened
# posteriors per chain and swaps trees between them. It costs one MH step per rung (16 by
# default) per iteration; the printout gives the MH steps per chain of both fits.

# %%
tempered = bps.cart("y ~ x1 + x2", data=df, sampler="tempered", chains=4, draws=DRAWS // 4, tune=TUNE // 2,
                    seed=1, progress=False)
rungs = tempered.sample_stats["ladder"].sizes["rung"]
print(f"MH steps per chain: cgm {DRAWS + TUNE}, tempered {(DRAWS // 4 + TUNE // 2) * rungs} ({rungs} rungs)")
traces(tempered, "tempered")
comparison = pd.DataFrame({"cgm": fit.summary()["r_hat"], "tempered": tempered.summary()["r_hat"]})
comparison.loc["mean leaves"] = [fit.posterior["n_leaves"].mean().item(), tempered.posterior["n_leaves"].mean().item()]
comparison.loc["max log posterior"] = [fit.sample_stats["log_posterior"].max().item(),
                                       tempered.sample_stats["log_posterior"].max().item()]
comparison

# %%
per_chain(tempered)
