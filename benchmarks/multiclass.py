"""Multiclass BART (issue 14) against our CART, a random forest and multinomial logistic regression.

Data: Iris and Wine (scikit-learn's copies) and a simulated 4-class problem (``simulate``:
n = 400, 5 predictors, classes by quadrant of (x1, x2) with 10% of labels replaced at random).
For each data set, ``--splits`` random 70/30 splits (seeds 0..splits-1, stratified); on each,
test accuracy and log loss of

* ``bps.bart`` (log-linear multinomial BART, ``--trees`` trees per class, 2 chains x ``--draws``
  after ``--draws`` tuning sweeps),
* ``bps.cart`` (Bayesian CART with Dirichlet leaves, cgm, 2 chains x 2,000 after 2,000),
* scikit-learn's ``RandomForestClassifier(n_estimators=500)``,
* statsmodels' ``MNLogit`` (on standardised predictors; a separable training split makes it
  diverge, which is reported as a failure rather than a number).

Probabilities are clipped to [1e-15, 1] for the log loss. Also the time per sweep of multinomial
BART against binary probit BART on the same rows (the first class against the rest) and trees.

Run: ``python3 -m pip install ".[bench]" && python3 benchmarks/multiclass.py`` (a few minutes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

import bartpy_suite as bps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _provenance  # noqa: E402

SEEDS = ("70/30 splits `train_test_split(random_state=split)`, split = 0..splits-1 (stratified); sim4 data "
         "`simulate(seed=2024)`; bps.bart and bps.cart seed 1; random forest random_state 0; MNLogit none "
         "(deterministic); the s/sweep fits seed 2")


def simulate(n: int = 400, seed: int = 2024) -> pd.DataFrame:
    """4 classes by quadrant of (x1, x2), 3 noise predictors, 10% of labels replaced at random."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 5))
    label = (x[:, 0] > 0).astype(int) * 2 + (x[:, 1] > 0).astype(int)
    noisy = rng.uniform(size=n) < 0.1
    label[noisy] = rng.integers(0, 4, size=noisy.sum())
    frame = pd.DataFrame(x, columns=[f"x{j + 1}" for j in range(5)])
    frame["y"] = pd.Categorical(np.array(["q1", "q2", "q3", "q4"])[label])
    return frame


def load(name: str) -> pd.DataFrame:
    """A data set as a frame with a categorical response ``y``."""
    if name == "sim4":
        return simulate()
    from sklearn import datasets

    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine}[name]
    raw = loader(as_frame=True)
    frame = raw.data.copy()
    frame.columns = [c.replace(" ", "_").replace("(cm)", "cm").replace("/", "_") for c in frame.columns]
    frame["y"] = pd.Categorical(np.asarray(raw.target_names)[raw.target.to_numpy()])
    return frame


def scores(prob: np.ndarray, labels: list, truth: pd.Series) -> tuple[float, float]:
    """Accuracy and log loss of class probabilities (rows x classes, columns in ``labels`` order)."""
    codes = pd.Categorical(truth.astype(str), categories=[str(c) for c in labels]).codes
    p = np.clip(prob[np.arange(len(codes)), codes], 1e-15, 1.0)
    return float((prob.argmax(axis=1) == codes).mean()), float(-np.log(p).mean())


def fit_ours(model: str, train: pd.DataFrame, test: pd.DataFrame, args) -> np.ndarray:
    if model == "bart":
        fit = bps.bart("y ~ .", data=train, trees=args.trees, chains=2, draws=args.draws, tune=args.draws, seed=1,
                       progress=False)
    else:
        fit = bps.cart("y ~ .", data=train, chains=2, draws=2000, tune=2000, seed=1, progress=False)
    labels = fit.config["class_labels"]
    pred = fit.predict(test, kind="prob")
    return pred[[f"prob_{c}" for c in labels]].to_numpy(), labels


def fit_forest(train, test):
    from sklearn.ensemble import RandomForestClassifier

    x, y = train.drop(columns="y"), train["y"].astype(str)
    rf = RandomForestClassifier(n_estimators=500, random_state=0).fit(x, y)
    return rf.predict_proba(test.drop(columns="y")), list(rf.classes_)


def fit_mnlogit(train, test):
    import statsmodels.api as sm

    x = train.drop(columns="y")
    mean, sd = x.mean(), x.std().replace(0, 1)
    labels = sorted(train["y"].astype(str).unique())
    codes = pd.Categorical(train["y"].astype(str), categories=labels).codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.MNLogit(codes, sm.add_constant((x - mean) / sd)).fit(disp=False, maxiter=200)
    prob = np.asarray(res.predict(sm.add_constant((test.drop(columns="y") - mean) / sd, has_constant="add")))
    if not np.isfinite(prob).all():
        raise FloatingPointError("MNLogit diverged")
    return prob, labels


def sweep_seconds(frame: pd.DataFrame, trees: int, link: str) -> float:
    """Seconds per sweep of one chain (compiled already), 200 kept after 100 tuning sweeps."""
    data = frame if link == "logit" else frame.assign(y=frame["y"] == frame["y"].cat.categories[0])
    t0 = time.perf_counter()
    bps.bart("y ~ .", data=data, trees=trees, chains=1, draws=200, tune=100, seed=2, progress=False, threads=1)
    return (time.perf_counter() - t0) / 300


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table (floats to 3 decimals, missing cells blank)."""
    def cell(value) -> str:
        if isinstance(value, float):
            return "" if np.isnan(value) else f"{value:.3f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--data", default="iris,wine,sim4")
    parser.add_argument("--out", help="write the markdown table here")
    args = parser.parse_args(argv)
    from sklearn.model_selection import train_test_split

    rows = []
    for name in args.data.split(","):
        frame = load(name)
        results = {m: [] for m in ("bart", "cart", "forest", "mnlogit")}
        failures = {m: 0 for m in results}
        for split in range(args.splits):
            train, test = train_test_split(frame, test_size=0.3, random_state=split, stratify=frame["y"])
            for method in results:
                try:
                    if method in ("bart", "cart"):
                        prob, labels = fit_ours(method, train, test, args)
                    elif method == "forest":
                        prob, labels = fit_forest(train, test)
                    else:
                        prob, labels = fit_mnlogit(train, test)
                except (FloatingPointError, np.linalg.LinAlgError):
                    failures[method] += 1
                    continue
                results[method].append(scores(prob, labels, test["y"]))
        for method, values in results.items():
            arr = np.array(values) if values else np.full((1, 2), np.nan)
            rows.append({"data": name, "n": len(frame), "classes": frame["y"].nunique(), "method": method,
                         "accuracy": arr[:, 0].mean(), "accuracy_sd": arr[:, 0].std(),
                         "log_loss": arr[:, 1].mean(), "log_loss_sd": arr[:, 1].std(),
                         "failed_splits": failures[method]})
        multi = sweep_seconds(frame, args.trees, "logit")
        probit = sweep_seconds(frame, args.trees, "probit")
        rows.append({"data": name, "n": len(frame), "classes": frame["y"].nunique(),
                     "method": f"s/sweep multinomial {multi:.4f} vs probit {probit:.4f} (ratio {multi / probit:.2f})"})
    text = markdown(pd.DataFrame(rows))
    print(text)
    if args.out:
        run_argv = [__file__, *(sys.argv[1:] if argv is None else argv)]
        head = "\n".join(_provenance.header(SEEDS, settings=str(vars(args)), argv=run_argv))
        with open(args.out, "w") as handle:
            handle.write(f"# Multiclass BART benchmark\n\n{head}\n{text}\n")


if __name__ == "__main__":
    main()
