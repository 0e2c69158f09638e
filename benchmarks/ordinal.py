"""Ordinal (cumulative-probit) BART against statsmodels' ``OrderedModel`` and multinomial BART
(issue 31, "Ordinal responses"), and the mixing of its cutpoint update.

Part 1, prediction. Data: p = 5 predictors uniform on [-1, 1]; a latent

    z = eta(x) + N(0, 1),   eta(x) = 2 sin(pi x1 x2) + 2 x3^2 + x4      (nonlinear; x5 is noise)
    and   eta(x) = x1 + x2 - x3 + 0.5 x4                                (linear: the check that
                                                                        ordinal BART loses little
                                                                        where OrderedModel is right)

cut at the 25/50/75% quantiles of z (taken from 200,000 draws, seed 999) into four ordered
classes of about equal size. For each seed s in ``--seeds`` (default 0, 1, 2): ``--n`` training rows
(default 500) and 2,000 test rows drawn with seed s; test log loss (probabilities clipped to
[1e-15, 1]) and accuracy of

* ordinal BART: ``bps.bart`` on the ordered Categorical response (``--trees`` trees, 2 chains x
  ``--draws`` draws after as many tuning sweeps, seed 1);
* multinomial BART: the same response as an unordered Categorical (log-linear BART, ``--trees``
  trees per class, the same chains);
* statsmodels' ``OrderedModel(distr="probit")``, linear in x (BFGS, maxiter 1000).

The Bayes log loss and accuracy (true eta, true cuts) on the same test rows are the floor.

Part 2, cutpoint mixing (``--mixing``): the default MH step on the log gaps (z integrated out,
Cowles 1996) against Albert & Chib's (1993) Gibbs step, at n = 200, 2,000 and 20,000 rows of the
nonlinear data: bulk ESS per 1,000 draws of the free cutpoints (20 trees, 2 chains x 1,000 draws after
1,000 tuning sweeps, seed 1; arviz-stats' bulk ESS of the worse cutpoint).

Run: ``PYTHONPATH=$PWD python3 benchmarks/ordinal.py --out benchmarks/results/ordinal.md`` (under
15 minutes on the shared 2-core machine; ``--latent nonlinear`` and ``--no-mixing`` shorten it).
Machine and timings are written into the output's header.
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
from bartpy_suite.errors import BartpySuiteWarning

LEVELS = ["1", "2", "3", "4"]
N_TEST = 2000


def eta_of(x: np.ndarray, latent: str) -> np.ndarray:
    """The latent mean (module docstring)."""
    if latent == "linear":
        return x[:, 0] + x[:, 1] - x[:, 2] + 0.5 * x[:, 3]
    return 2.0 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 2.0 * x[:, 2] ** 2 + x[:, 3]


def cuts_of(latent: str) -> np.ndarray:
    """The 25/50/75% quantiles of z (200,000 draws, seed 999)."""
    rng = np.random.default_rng(999)
    x = rng.uniform(-1, 1, (200_000, 5))
    return np.quantile(eta_of(x, latent) + rng.standard_normal(len(x)), [0.25, 0.5, 0.75])


def simulate(n: int, seed: int, latent: str, cuts: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """A frame with x1..x5 and the ordered response y; also eta."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 5))
    eta = eta_of(x, latent)
    codes = np.digitize(eta + rng.standard_normal(n), cuts)
    frame = pd.DataFrame(x, columns=[f"x{j + 1}" for j in range(5)])
    frame["y"] = pd.Categorical.from_codes(codes, categories=LEVELS, ordered=True)
    return frame, eta


def bayes_prob(eta: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    from scipy import special

    full = np.r_[-np.inf, cuts, np.inf]
    return special.ndtr(full[None, 1:] - eta[:, None]) - special.ndtr(full[None, :-1] - eta[:, None])


def scores(prob: np.ndarray, codes: np.ndarray) -> tuple[float, float]:
    """Log loss (clipped at 1e-15) and accuracy."""
    p = np.clip(prob[np.arange(len(codes)), codes], 1e-15, 1.0)
    return float(-np.log(p).mean()), float((prob.argmax(axis=1) == codes).mean())


def fit_bart(train: pd.DataFrame, test: pd.DataFrame, ordered: bool, args) -> np.ndarray:
    data = train if ordered else train.assign(y=train["y"].cat.as_unordered())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BartpySuiteWarning)  # short chains: the mixing note
        fit = bps.bart("y ~ x1 + x2 + x3 + x4 + x5", data=data, trees=args.trees, chains=2, draws=args.draws,
                       tune=args.draws, seed=1, progress=False, log_likelihood=False)
    expected = "ordinal" if ordered else "multinomial"
    assert fit.config["leaf_model"] == expected, fit.config["leaf_model"]
    pred = fit.predict(test, kind="prob")
    return pred[[f"prob_{c}" for c in LEVELS]].to_numpy()


def fit_ordered_model(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    cols = [f"x{j + 1}" for j in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = OrderedModel(train["y"], train[cols], distr="probit").fit(method="bfgs", maxiter=1000, disp=False)
    return np.asarray(res.predict(test[cols]))


def part_prediction(args) -> tuple[str, dict]:
    cuts = cuts_of(args.latent)
    rows, raw = [], {}
    for seed in args.seeds:
        train, _ = simulate(args.n, seed, args.latent, cuts)
        test, eta = simulate(N_TEST, 10_000 + seed, args.latent, cuts)
        codes = test["y"].cat.codes.to_numpy()
        methods = {}
        t0 = time.perf_counter()
        methods["ordinal BART"] = (fit_bart(train, test, True, args), time.perf_counter() - t0)
        t0 = time.perf_counter()
        methods["multinomial BART"] = (fit_bart(train, test, False, args), time.perf_counter() - t0)
        t0 = time.perf_counter()
        methods["OrderedModel (probit, linear)"] = (fit_ordered_model(train, test), time.perf_counter() - t0)
        methods["Bayes (true eta and cuts)"] = (bayes_prob(eta, cuts), 0.0)
        for name, (prob, seconds) in methods.items():
            loss, acc = scores(prob, codes)
            rows.append({"seed": seed, "method": name, "log loss": loss, "accuracy": acc, "seconds": seconds})
            raw.setdefault(name, []).append((loss, acc))
            print(f"seed {seed} {name}: log loss {loss:.4f} accuracy {acc:.3f} ({seconds:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    mean = table.groupby("method", sort=False)[["log loss", "accuracy", "seconds"]].mean().reset_index()
    ours = np.array([v[0] for v in raw["ordinal BART"]])
    diff = {name: ours - np.array([v[0] for v in raw[name]]) for name in ("OrderedModel (probit, linear)",
                                                                          "multinomial BART")}
    reading = "; ".join(f"against {name}: {d.mean():+.4f} (per seed {', '.join(f'{v:+.4f}' for v in d)})"
                        for name, d in diff.items())
    lines = [f"### Prediction, {args.latent} latent: mean over seeds {', '.join(map(str, args.seeds))}", "",
             _markdown(mean), "", f"Test log loss of ordinal BART minus the other method's (negative: ours lower) "
             f"{reading}.", "", "Per seed:", "", _markdown(table), ""]
    return "\n".join(lines), raw


def part_mixing(args) -> str:
    """ESS per 1,000 draws of the worse free cutpoint, MH against Gibbs."""
    import arviz_stats
    from arviz_base import convert_to_dataset
    from scipy import special

    from bartpy_suite._binning import BinnedPredictors
    from bartpy_suite._kernels.backfit import SIGMA_PROBIT
    from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
    from bartpy_suite.models.ordinal import initial_cutpoints
    from bartpy_suite.priors import TreePrior, kernel_prior
    from bartpy_suite.samplers.mh import GROW_PRUNE_MOVES, OrdinalMHChain, move_flags, move_vector
    from bartpy_suite.samplers.problems import OrdinalBartProblem

    cuts = cuts_of("nonlinear")
    trees, draws, chains = 20, 1000, 2
    rows = []
    for n in args.mixing_n:
        frame, _ = simulate(n, 0, "nonlinear", cuts)
        x = frame[[f"x{j + 1}" for j in range(5)]].to_numpy()
        y = frame["y"].cat.codes.to_numpy().astype(np.int64)
        binned = BinnedPredictors.fit(x, [False] * 5, [0] * 5, 100)
        tau = 3.0 / (2.0 * np.sqrt(trees))
        hyper = kernel_prior(TreePrior(), None, likelihood=True, tau2=tau * tau,
                             model_code=MODEL_NORMAL_KNOWN_VARIANCE)
        mu0 = float(special.ndtri(np.clip((y >= 1).mean(), 1e-6, 1 - 1e-6)))
        start = tuple(float(c) for c in initial_cutpoints(y, 4, mu0))
        for gibbs in (False, True):
            t0 = time.perf_counter()
            samples = []
            for c in range(chains):
                problem = OrdinalBartProblem(binned.codes, binned.is_categorical, binned.nbins, y.astype(float),
                                             hyper, trees, SIGMA_PROBIT, mu0, n_classes=4, cutpoints=start,
                                             gibbs=gibbs)
                chain = OrdinalMHChain(problem, GROW_PRUNE_MOVES, np.random.default_rng([1, c]), move_vector,
                                       move_flags)
                chain.allocate(draws)
                chain.run(0, 2 * draws, draws, 1)
                samples.append(chain.collect(draws).posterior["cutpoints"])
            seconds = time.perf_counter() - t0
            arr = np.stack(samples)  # (chain, draw, cut)
            ess = [float(arviz_stats.ess(convert_to_dataset({"c": arr[:, :, k]}))["c"]) for k in (1, 2)]
            rows.append({"n": n, "update": "Gibbs (Albert & Chib 1993)" if gibbs else "MH on log gaps (default)",
                         "ESS per 1000 draws (worse cutpoint)": 1000 * min(ess) / (chains * draws),
                         "seconds": seconds})
            print(rows[-1], flush=True)
    return "\n".join(["### Cutpoint mixing: MH against Gibbs", "", _markdown(pd.DataFrame(rows)), ""])


#: Decimals per column of the tables.
DECIMALS = {"log loss": 4, "accuracy": 4, "seconds": 1, "ESS per 1000 draws (worse cutpoint)": 1}


def _markdown(frame: pd.DataFrame) -> str:
    def cell(column, value) -> str:
        if isinstance(value, float):
            return f"{value:.{DECIMALS.get(column, 4)}f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(frame.columns, row)) + " |"
              for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--latent", choices=("nonlinear", "linear"), nargs="+", default=["nonlinear", "linear"])
    parser.add_argument("--no-mixing", dest="mixing", action="store_false")
    parser.add_argument("--mixing-n", type=int, nargs="+", default=[200, 2000, 20000])
    parser.add_argument("--out", help="write the markdown report here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    parts = []
    for latent in args.latent:
        parts.append(part_prediction(argparse.Namespace(**{**vars(args), "latent": latent}))[0])
    if args.mixing:
        parts.append(part_mixing(args))
    total = time.perf_counter() - started
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = [
        "# Ordinal BART: prediction and cutpoint mixing",
        "",
        "Generated by `PYTHONPATH=$PWD python3 benchmarks/ordinal.py "
        + " ".join(argv if argv is not None else __import__("sys").argv[1:]) + "`",
        f"(settings: n = {args.n} training and {N_TEST} test rows, {' and '.join(args.latent)} latent, "
        f"seeds {args.seeds}, "
        f"{args.trees} trees (per class for multinomial BART), 2 chains x {args.draws} draws after {args.draws} "
        "tuning sweeps, BART seed 1; see the script's docstring for the data).",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average at the end "
        f"{load:.1f}), Python {platform.python_version()}; whole run {total:.0f} s, numba compile included.",
        "",
    ]
    report = "\n".join(header + parts)
    print(report)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(report)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
