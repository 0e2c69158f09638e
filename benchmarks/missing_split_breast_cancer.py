"""Probit BART on the Wisconsin breast-cancer data (bare_nuclei missing in 16 rows): test accuracy
of na_action="split" against na_action="drop" on one fixed random split.

Usage: PYTHONPATH=. python3 benchmarks/missing_split_breast_cancer.py [path/to/breast_cancer_wisconsin_original.csv]

Under "drop" the rows of the test set missing bare_nuclei cannot be predicted; they are scored
there by the fit's prediction with bare_nuclei imputed by the training median, and both numbers
(all test rows, and the rows with bare_nuclei observed) are printed.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

import bartpy_suite as bps

PATH = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/breast_cancer_wisconsin_original.csv"


def main() -> None:
    df = pd.read_csv(PATH, na_values="?").drop(columns="id")
    df["class"] = df["class"].map({2: "benign", 4: "malignant"})
    rng = np.random.default_rng(2026)
    # Fixed split: 1/3 test, with half of the rows missing bare_nuclei in the test set.
    missing = df.index[df["bare_nuclei"].isna()].to_numpy()
    observed = df.index[df["bare_nuclei"].notna()].to_numpy()
    test = np.concatenate([rng.permutation(missing)[: len(missing) // 2],
                           rng.permutation(observed)[: len(observed) // 3]])
    train_df, test_df = df.drop(index=test), df.loc[test]
    truth = test_df["class"].to_numpy()
    settings = dict(trees=50, chains=2, draws=500, tune=500, seed=1, progress=False)
    rows_missing = test_df["bare_nuclei"].isna().to_numpy()
    print(f"train {len(train_df)} rows ({int(train_df['bare_nuclei'].isna().sum())} missing bare_nuclei), "
          f"test {len(test_df)} rows ({int(rows_missing.sum())} missing)")
    for action in ("split", "drop"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = bps.bart("class ~ .", data=train_df, na_action=action, **settings)
        new = test_df.drop(columns="class")
        if action == "drop":
            new = new.fillna({"bare_nuclei": train_df["bare_nuclei"].median()})
        table = fit.predict(new, kind="prob")
        pred = table["class"].to_numpy()
        p_true = np.where(truth == "malignant", table["prob_malignant"], table["prob_benign"])
        brier = 2 * (1 - p_true) ** 2
        acc = float(np.mean(pred == truth))
        acc_obs = float(np.mean(pred[~rows_missing] == truth[~rows_missing]))
        acc_mis = float(np.mean(pred[rows_missing] == truth[rows_missing]))
        print(f"na_action={action!r}: n_train={fit.idata['observed_data']['y'].size} accuracy all {acc:.4f}, "
              f"bare_nuclei observed {acc_obs:.4f}, missing {acc_mis:.4f} ({int(rows_missing.sum())} rows); "
              f"Brier all {brier.mean():.4f}, missing {brier[rows_missing].mean():.4f}")


if __name__ == "__main__":
    main()
