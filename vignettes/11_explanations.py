# %% [markdown]
# # Explaining BART predictions with posterior SHAP values
#
# *Which predictors move a prediction, by how much, and how sure is the model about that?*
#
# A SHAP value splits one prediction f(x) into a base value (the average prediction) plus one
# contribution per predictor, and the contributions add up exactly: base + sum of values = f(x)
# (Lundberg et al. 2020). BART gives a posterior over f, so every posterior draw has its own
# explanation, and the spread of a SHAP value over the draws is a credible interval for the
# contribution. `fit.shap` computes the exact values of every kept draw, `fit.shap_summary`
# their means and intervals, `fit.importance` a global ranking (mean |SHAP| over rows, with an
# interval), and `plotting.plot_shap` / `plotting.plot_importance` draw them.
#
# We explain a regression with a known answer (Friedman's test function plus a factor) and a
# probit classification (breast-cancer biopsies), and compare one draw's values with the `shap`
# library's TreeExplainer when it is installed.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite import plotting
from bartpy_suite.posterior import shap as posterior_shap

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: a small run
SETTINGS = (dict(trees=20, chains=2, tune=30, draws=30) if QUICK
            else dict(trees=200, chains=2, tune=1000, draws=1000))
print("variant:", posterior_shap.VARIANT)

# %% [markdown]
# ## Which TreeSHAP?
#
# The package computes **path-dependent TreeSHAP** (Lundberg et al. 2020, Algorithm 2), exactly,
# for every draw: the value of a coalition of predictors is the tree's expectation when the
# predictors outside it are integrated out with the training rows that reach each node (the
# "covers", recomputed by routing the stored training rows through each stored tree). It needs no
# background sample and costs O(leaves x depth^2) per row and tree, a few hundred operations for
# BART's small trees. The interventional variant (Algorithm 3) would cost that times the size of
# a background sample (about 100 times more for 1,000 draws of 200 trees) and answers a different
# question: what f does when the predictors are made independent of each other. Both are exact
# and both satisfy local accuracy (the sum rule above), per draw.
#
# ## A regression with a known answer
#
# Friedman's first test function on ten uniform predictors, of which five matter,
# f = 10 sin(pi x1 x2) + 20 (x3 - 1/2)^2 + 10 x4 + 5 x5, plus a factor `g` with four levels
# shifting y by (0, 2, -2, 1), and normal noise of sd 1. The additive parts give the answer a
# SHAP value should find: with independent predictors, the value of x4 is 10 (x4 - E x4), that
# of `g` its shift minus the mean shift, and so on; x1 and x2 share their interaction.

# %%
rng = np.random.default_rng(11)
n = 200 if QUICK else 500
X = pd.DataFrame(rng.uniform(size=(n, 10)), columns=[f"x{j}" for j in range(1, 11)])
X["g"] = pd.Categorical(rng.choice(list("abcd"), size=n), categories=list("abcd"))
shift = {"a": 0.0, "b": 2.0, "c": -2.0, "d": 1.0}
f_true = (10 * np.sin(np.pi * X["x1"] * X["x2"]) + 20 * (X["x3"] - 0.5) ** 2 + 10 * X["x4"] + 5 * X["x5"]
          + X["g"].map(shift).astype(float))
data = X.assign(y=f_true + rng.normal(size=n))
started = time.process_time()
reg = bps.bart("y ~ .", data=data, seed=1, progress=False, **SETTINGS)
print(f"regression BART, {n} rows, {SETTINGS}: fit in {time.process_time() - started:.0f} CPU s")
reg.summary()

# %% [markdown]
# ### One row, explained with intervals
#
# `fit.shap_summary(rows)` gives, per row and predictor, the posterior mean SHAP value and an
# equal-tailed credible interval (90% by default). Here the first training row: its predictor
# values, their contributions, the base value and the prediction.

# %%
row = data.iloc[[0]]
summary = reg.shap_summary(row, level=0.9)
one = summary.rows.set_index("predictor")[["mean", "lower", "upper"]]
one.insert(0, "value", [row[p].iloc[0] for p in one.index])
explained = reg.shap(row)
base = explained["base"].values.ravel()
prediction = reg.predict(row, level=0.9)
print(f"scale: {summary.scale}; base (mean over draws) {base.mean():.3f}; base + sum of mean values "
      f"{base.mean() + one['mean'].sum():.3f}; f(x) posterior mean {prediction['mean'].iloc[0]:.3f} "
      f"(90% interval {prediction['lower'].iloc[0]:.3f} to {prediction['upper'].iloc[0]:.3f}); "
      f"true f {f_true.iloc[0]:.3f}")
one.sort_values("mean", key=np.abs, ascending=False)

# %%
fig, ax = plt.subplots(figsize=(6, 4))
shown = one.sort_values("mean", key=np.abs)
ax.barh(range(len(shown)), shown["mean"], color=np.where(shown["mean"] > 0, "C3", "C0"))
ax.errorbar(shown["mean"], range(len(shown)), xerr=[shown["mean"] - shown["lower"], shown["upper"] - shown["mean"]],
            fmt="none", ecolor="black", lw=1)
ax.set_yticks(range(len(shown)), [f"{p} = {v:.2f}" if p != "g" else f"g = {v}" for p, v in
                                  zip(shown.index, shown["value"])])
ax.axvline(0, color="grey", lw=0.8)
ax.set(xlabel="SHAP value (posterior mean, 90% interval)", title="Row 0: contributions to f(x)");

# %% [markdown]
# ### Additivity, draw by draw
#
# For every draw d and row i, base_d + sum_j phi_dij = f_d(x_i), where f_d is the draw's
# prediction (`fit.predict(..., samples=True)`). We check it on every training row and every draw.

# %%
started = time.process_time()
values = reg.shap()  # every training row and draw: (chain, draw, row, predictor)
shap_cpu = time.process_time() - started
f_draws = reg.predict(data, samples=True)
gap = (values["base"] + values["shap"].sum("predictor")).values - f_draws.values
print(f"{values['shap'].shape} values in {shap_cpu:.1f} CPU s; largest |base + sum - f(x)| over "
      f"{gap.size:,} (draw, row) pairs: {np.abs(gap).max():.1e}")

# %% [markdown]
# ### Against the known answer
#
# For each additive part, the posterior mean SHAP value of every training row against the true
# contribution (the part minus its mean over the rows): the correlation and the regression slope
# (1 is right). Noise predictors should get values near zero.

# %%
mean_values = values["shap"].mean(("chain", "draw")).to_pandas()
truth = {"x3": 20 * (X["x3"] - 0.5) ** 2, "x4": 10 * X["x4"], "x5": 5 * X["x5"],
         "g": X["g"].map(shift).astype(float)}
rows = {}
for name, part in truth.items():
    centred = part - part.mean()
    est = mean_values[name].to_numpy()
    rows[name] = {"correlation": np.corrcoef(est, centred)[0, 1],
                  "slope": np.polyfit(centred, est, 1)[0], "sd of true part": centred.std()}
noise = mean_values[[f"x{j}" for j in range(6, 11)]].abs().mean()
print(f"noise predictors x6 ... x10: mean over the rows of |posterior mean SHAP| at most {noise.max():.3f} "
      f"({noise.idxmax()}), against {mean_values['x5'].abs().mean():.3f} for x5, the weakest signal")
pd.DataFrame(rows).T

# %% [markdown]
# ### A factor is one predictor
#
# `g` gets one SHAP value per row, whatever level subsets the trees split on (SHAP values per
# level or per dummy column are not provided). Its posterior mean value by level against the
# level's true shift minus the mean shift:

# %%
by_level = pd.DataFrame({"value": mean_values["g"].to_numpy(), "g": X["g"].to_numpy()}).groupby(
    "g", observed=True)["value"].agg(["mean", "std", "size"])
by_level.insert(0, "true shift - mean shift", [shift[k] - X["g"].map(shift).astype(float).mean()
                                               for k in by_level.index])
by_level

# %% [markdown]
# ### Beeswarm and importance
#
# `plotting.plot_shap` puts each row at its posterior mean SHAP value, one line per predictor,
# coloured by the predictor's value (low blue, high red; a factor by level order), with the 90%
# interval as a grey bar. `plotting.plot_importance` shows the mean |SHAP| over the rows with
# its posterior interval; `fit.importance` adds `p_top`, the posterior probability that the
# predictor is the most important one. Variable activity (the share of split rules) is beside it:
# BART's many small trees spread their rules over every predictor, so it separates signal from
# noise far less sharply.

# %%
fig, ax = plt.subplots(figsize=(7, 5))
plotting.plot_shap(reg, data.iloc[:200], ax=ax);

# %%
fig, ax = plt.subplots(figsize=(6, 4))
plotting.plot_importance(reg, ax=ax)
importance = reg.importance()
importance.join(reg.variable_activity(level=0.9).add_prefix("activity "))

# %% [markdown]
# ## A classification: breast-cancer biopsies
#
# The Wisconsin data (vignette 03) with probit BART on the nine cytology scores; the 16 biopsies
# with a missing `bare_nuclei` are left out here. Probit BART's P(malignant) = Phi(f(x)) is not a
# sum over trees, so the SHAP values explain the latent f(x) ("probit latent" scale): a value of
# +1 moves f by one unit, which moves a probability near 1/2 by about 0.4 and one near 0.95 by
# little.

# %%
cancer = bps.datasets.load("breast_cancer").dropna().reset_index(drop=True)
started = time.process_time()
clf = bps.bart("class ~ . - id", data=cancer, seed=1, progress=False, **SETTINGS)
print(f"probit BART, {len(cancer)} biopsies: fit in {time.process_time() - started:.0f} CPU s")
picked = cancer.loc[[cancer.index[cancer["class"] == "benign"][0], cancer.index[cancer["class"] == "malignant"][0]]]
prob = clf.predict(picked, kind="prob", level=0.9)
cls_summary = clf.shap_summary(picked, level=0.9)
table = cls_summary.rows.pivot(index="predictor", columns="row", values=["mean", "lower", "upper"])
table.columns = [f"row {r} ({picked.loc[r, 'class']}): {stat}" for stat, r in table.columns]
print(f"scale: {cls_summary.scale}; P(malignant): "
      + "; ".join(f"row {r} {prob.loc[r, 'prob_malignant']:.3f} ({prob.loc[r, 'prob_malignant_lower']:.3f} to "
                  f"{prob.loc[r, 'prob_malignant_upper']:.3f})" for r in picked.index))
table[sorted(table.columns, key=lambda c: (c.split(":")[0], ["mean", "lower", "upper"].index(c.split(": ")[1])))]

# %%
fig, ax = plt.subplots(figsize=(7, 5))
plotting.plot_shap(clf, ax=ax)
clf.importance()

# %% [markdown]
# ## One draw against the shap library
#
# The `shap` library (not a dependency; `pip install shap`) reads a tree ensemble given as arrays.
# We hand it the 200 trees of one posterior draw of the breast-cancer fit, on the binned
# predictors the trees split (a row goes left when its bin code is at most the rule's cut, i.e.
# code <= cut + 0.5), with each node's cover counted by routing the training rows, and ask its
# `TreeExplainer(feature_perturbation="tree_path_dependent")` for the values of 100 training
# rows. The trees, cut codes and training codes come from `fit.tree_arrays()` and the fit's
# `constant_data` group.

# %%
try:
    import shap
except ImportError:
    shap = None
    print("shap is not installed: comparison skipped (pip install shap to run it). tests/test_shap.py checks "
          "the values against brute-force enumeration of all coalitions instead.")
if shap is not None:
    trees = clf.tree_arrays().isel(chain=0, draw=0)
    codes = clf.idata["constant_data"]["x_codes"].values  # (predictors, training rows)
    model = []
    for t in range(trees.sizes["tree"]):
        var = trees["split_var"].values[t]
        size = int((var >= -1).sum())  # -2 pads the shorter trees
        var, cut = var[:size], trees["split_cut"].values[t, :size]
        left, right = trees["left_child"].values[t, :size], trees["right_child"].values[t, :size]
        cover = np.zeros(size)
        for i in range(codes.shape[1]):  # route every training row down the tree
            k = 0
            cover[k] += 1
            while var[k] >= 0:
                k = left[k] if codes[var[k], i] <= cut[k] else right[k]
                cover[k] += 1
        model.append({"children_left": left, "children_right": right, "children_default": left,
                      "features": np.where(var >= 0, var, -2), "thresholds": np.where(var >= 0, cut + 0.5, 0.0),
                      "values": np.nan_to_num(trees["leaf_value"].values[t, :size])[:, None],
                      "node_sample_weight": cover})
    explainer = shap.TreeExplainer({"trees": model}, feature_perturbation="tree_path_dependent")
    theirs = explainer.shap_values(codes[:, :100].T.astype(float))
    ours = clf.shap(cancer.iloc[:100], max_draws=1)
    # the stored leaf values carry probit BART's offset mu0 (spread over the trees), so both bases include it
    print(f"shap {shap.__version__}: largest |ours - shap| over 100 rows x {theirs.shape[1]} predictors = "
          f"{np.abs(ours['shap'].values[0, 0] - theirs).max():.1e}; base: ours "
          f"{float(ours['base'].values[0, 0]):.12f}, shap's expected value "
          f"{float(np.ravel(explainer.expected_value)[0]):.12f}")

# %% [markdown]
# ## Reading
#
# The numbers above are this run's. The sum rule holds per draw to rounding error. On Friedman's
# function the posterior mean SHAP values follow the known additive parts, the noise predictors
# get values near zero, and the factor's values recover the level shifts; the importance ranking
# separates the five active predictors and `g` from the noise with intervals, where variable
# activity spreads its shares more evenly. For the biopsies, the values are on the latent probit
# scale: large contributions far from zero may barely change a probability that is already near 0
# or 1. The values are those of path-dependent TreeSHAP, the variant of `shap`'s TreeExplainer
# without a background sample. Where the mixing check printed a warning after a fit, read that
# fit's intervals as rough (more draws or chains tighten them); each draw's explanation is exact
# whatever the mixing, and the posterior means above are already close to the known answer.
