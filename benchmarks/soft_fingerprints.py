"""Fingerprints of soft-tree fits in the settings ``draw_fingerprints.py`` does not reach
(classification with both samplers, the faithful mode with the authors' quirks, the h schedule of
the code and Stan's step-size heuristic, ``keep_first_run`` with other NUTS settings, prior only),
each with its predictions, the paper's metric and, for ``hmc_df``, the SHAP values: a change of
the soft-tree kernels must leave all of them bit-identical.

Command: ``python3 benchmarks/soft_fingerprints.py [--out FILE] [--compare FILE]``

Run it once on the code before a change (``--out before.json``, e.g. with ``PYTHONPATH`` pointing
at a ``git archive`` of the base commit) and once after (``--compare before.json``): the second
run prints the cases whose hash changed and exits with status 1 if any did. One chain of 6 tune
and 6 kept iterations per case on 50 simulated rows (seed 0), fit seed 5. Hashes depend on the
machine's floating point, so compare runs on one machine only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bartpy_suite as bps
from bartpy_suite.posterior import soft

sys.path.insert(0, str(Path(__file__).resolve().parent))
from draw_fingerprints import _hash_fit, save_and_compare  # noqa: E402


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 50
    df = pd.DataFrame({"x1": rng.random(n), "x2": rng.random(n), "x3": rng.random(n)})
    df["y"] = np.where(df.x1 > 0.5, 1.0, -1.0) + 0.3 * rng.normal(size=n)
    df["c"] = pd.Categorical(np.where(df.x2 > 0.6, "a", np.where(df.x1 > 0.4, "b", "c")))
    return df


def _cases(df):
    kw = dict(draws=6, tune=6, chains=1, seed=5, progress=False, check_mixing=False)
    yield "cls_dfi", lambda: bps.soft_tree("c ~ x1 + x2 + x3", data=df, **kw)
    yield "cls_df", lambda: bps.soft_tree("c ~ x1 + x2 + x3", data=df, sampler="hmc_df", **kw)
    yield "reg_restart_quirks", lambda: bps.soft_tree(
        "y ~ x1 + x2", data=df, sampler_options=dict(adaptation="restart", warmup=30, code_quirks=True,
                                                     h_schedule="code", init_stepsize=True), **kw)
    yield "reg_keep_first_df", lambda: bps.soft_tree(
        "y ~ x1 + x2 + x3", data=df, sampler="hmc_df",
        sampler_options=dict(keep_first_run=True, max_tree_depth=5, target_accept=0.9), **kw)
    yield "reg_prior_only", lambda: bps.soft_tree("y ~ x1 + x2", data=df, likelihood=False, **kw)


def _hash_arrays(*arrays) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--compare")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    df = _data()
    result = {}
    for name, build in _cases(df):
        fit = build()
        kind = "prob" if fit.is_classification else "mean"
        parts = [_hash_fit(fit), _hash_arrays(fit.predict(df.head(7), kind=kind).select_dtypes("number")),
                 _hash_arrays(soft.paper_metric(fit, df.head(9)))]
        if fit.config["sampler"] == "hmc_df":
            parts.append(_hash_arrays(fit.shap(df.head(4)).to_array().values))
        result[name] = hashlib.sha1("".join(parts).encode()).hexdigest()
        print(f"{name:24s} {result[name]}", flush=True)
    return save_and_compare(result, args.out, args.compare)


if __name__ == "__main__":
    sys.exit(main())
