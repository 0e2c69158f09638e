"""``bps.bcf`` on the simulation design of Hahn, Murray & Carvalho (2020, section 6), beside stochtree's
``BCFModel`` on the same data (issue 30, "Causal"; spec multi_forest.md 3.9).

Command (from the repository root):

    PYTHONPATH=$PWD python3 benchmarks/bcf_hmc20.py [--reps 5] [--n 250 500] [--draws 1000] [--tune 1000]

writes ``benchmarks/results/bcf_hmc20.md`` and ``.json``. Design (spec 3.9, as the replication code and
stochtree's scripts read the paper): x1, x2, x3 ~ N(0, 1), x4 ~ Bernoulli(1/2), x5 uniform on {1, 2, 3};
g(1, 2, 3) = (2, -1, -4); mu(x) = 1 + g(x5) + x1 x3 (linear) or -6 + g(x5) + 6 |x3 - 1| (nonlinear);
tau(x) = 3 (homogeneous) or 1 + 2 x2 x4 (heterogeneous); pi(x) = 0.8 Phi(3 mu(x) / sd(mu) - 0.5 x1) + 0.05
+ u / 10, u ~ U(0, 1); z ~ Bernoulli(pi); y = mu + tau z + N(0, 1) (noise sd 1: the paper's value is not
confirmed, spec 9). Replicate r of a setting uses data seed ``numpy.random.default_rng([2020, n, het, lin,
r])``.

Fits: ``bps.bcf`` with its defaults (HMC20's priors: 200 mu trees, 50 tau trees, grow_prune), the
propensity by its default probit BART, ``--chains`` (default 2) chains of ``--tune`` + ``--draws`` sweeps,
seed r. stochtree ``BCFModel.sample`` (if importable; version printed) on the same covariates (x5 one-hot)
with the same estimated propensity, its defaults otherwise except ``num_gfr=10, num_burnin=--tune,
num_mcmc=--draws``, one chain, ``random_seed=r``.

Metrics (spec 3.9, in-sample at the n fitted rows, 95% intervals): ATE rmse over replicates of
(posterior-mean ATE - mean_i tau_i), ATE coverage and mean interval length; CATE rmse = sqrt(PEHE) averaged
over replicates, CATE coverage (mean over rows and replicates) and length; s/fit is the wall time per fit
(bps.bcf's includes its probit BART propensity model, stochtree's does not: it is given that propensity).
HMC20's own table values could not be retrieved (spec 9), so they are not printed here.
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

from bartpy_suite.datasets import simulate_hmc20

sys.path.insert(0, str(Path(__file__).parent))
from _tables import markdown_table  # noqa: E402


def metrics(ate_draws: np.ndarray, cate_draws: np.ndarray, tau: np.ndarray) -> dict:
    """ATE and CATE error, coverage and length of 95% equal-tailed intervals; draws (samples, rows)."""
    lo, hi = np.quantile(ate_draws, [0.025, 0.975])
    clo, chi = np.quantile(cate_draws, [0.025, 0.975], axis=0)
    truth = tau.mean()
    return {"ate_err": float(ate_draws.mean() - truth), "ate_cover": bool(lo <= truth <= hi), "ate_len": float(hi - lo),
            "pehe": float(np.sqrt(np.mean((cate_draws.mean(axis=0) - tau) ** 2))),
            "cate_cover": float(np.mean((clo <= tau) & (tau <= chi))), "cate_len": float(np.mean(chi - clo))}


def fit_bps(df, seed, args):
    import bartpy_suite as bps
    from bartpy_suite.posterior.bcf import CommonSupportWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CommonSupportWarning)
        fit = bps.bcf("y ~ x1 + x2 + x3 + x4 + C(x5)", df, treatment="z", chains=args.chains, draws=args.draws,
                      tune=args.tune, seed=seed)
    draws = fit.cate_draws()
    return draws.mean(axis=1), draws, fit.propensity


def fit_stochtree(df, pi, seed, args):
    from stochtree import BCFModel

    x = np.column_stack([df[["x1", "x2", "x3", "x4"]].to_numpy(float), pd.get_dummies(df["x5"]).to_numpy(float)])
    model = BCFModel()
    model.sample(X_train=x, Z_train=df["z"].to_numpy(float), y_train=df["y"].to_numpy(float), propensity_train=pi,
                 num_gfr=10, num_burnin=args.tune, num_mcmc=args.draws, general_params={"random_seed": seed})
    draws = np.asarray(model.tau_hat_train).reshape(len(df), -1).T
    return draws.mean(axis=1), draws


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--n", type=int, nargs="+", default=[250, 500])
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "bcf_hmc20"))
    args = parser.parse_args(argv)
    try:
        from importlib.metadata import version

        import stochtree  # noqa: F401
        st_version = version("stochtree")
    except ImportError:
        st_version = None
    rows, records = [], []
    for n in args.n:
        for het in (False, True):
            for lin in (True, False):
                per = {"bcf": [], "stochtree": []}
                times = {"bcf": 0.0, "stochtree": 0.0}
                for r in range(args.reps):
                    df, tau, _ = simulate_hmc20(n, [2020, n, int(het), int(lin), r], heterogeneous=het, linear=lin)
                    t = time.perf_counter()
                    ate, cate, pi = fit_bps(df, r, args)
                    times["bcf"] += time.perf_counter() - t
                    per["bcf"].append(metrics(ate, cate, tau))
                    if st_version is not None:
                        t = time.perf_counter()
                        ate, cate = fit_stochtree(df, pi, r, args)
                        times["stochtree"] += time.perf_counter() - t
                        per["stochtree"].append(metrics(ate, cate, tau))
                for name, ms in per.items():
                    if not ms:
                        continue
                    m = pd.DataFrame(ms)
                    row = {"n": n, "tau": "heterogeneous" if het else "homogeneous",
                           "mu": "linear" if lin else "nonlinear", "method": name,
                           "ATE rmse": np.sqrt(np.mean(m.ate_err ** 2)), "ATE cover": m.ate_cover.mean(),
                           "ATE len": m.ate_len.mean(), "CATE rmse": m.pehe.mean(), "CATE cover": m.cate_cover.mean(),
                           "CATE len": m.cate_len.mean(), "s/fit": times[name] / args.reps}
                    rows.append(row)
                    records.append({**row, "replicates": ms})
                    print(pd.DataFrame([row]).to_string(index=False, header=len(rows) == 1, float_format="%.3f"),
                          flush=True)
    table = pd.DataFrame(rows)
    header = (f"# bps.bcf on the HMC20 design, beside stochtree BCFModel\n\n"
              f"Command: `PYTHONPATH=$PWD python3 benchmarks/bcf_hmc20.py --reps {args.reps} --n "
              f"{' '.join(map(str, args.n))} --chains {args.chains} --draws {args.draws} --tune {args.tune}`  \n"
              f"Run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
              f"({os.cpu_count()} logical CPUs, shared with other jobs: times are indicative), Python "
              f"{sys.version.split()[0]}, stochtree {st_version}. Settings and seeds: see the script's docstring. "
              f"{args.reps} replicates per setting; 95% intervals; in-sample (the fitted rows).\n\n")
    cells = [[f"{v:.3f}" if isinstance(v, float) else v for v in row] for row in table.itertuples(index=False)]
    Path(args.out + ".md").write_text(header + "\n".join(markdown_table(list(table.columns), cells)) + "\n")
    Path(args.out + ".json").write_text(json.dumps(records, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
