"""Long runs on one Wu et al. (2007) data set: do the single-tree samplers agree with each other?

The CT-MCMC replication (``ctmc_wu.py``) computes ESS within one 20,000-iteration chain per
replication, which says nothing about whether that chain has found the posterior. Here four
chains per sampler, long, on the replication-0 training data (``simulate_wu2007(300, seed=0,
sigma2)``), package default priors, seed 7, one thread per chain:

* ``grow_prune`` (RJ-A) and ``cgm``: 2,000 tuning + 400,000 kept iterations, thin 20;
* ``ctmc`` (CT-A): 2,000 + 100,000 jumps, thin 5 (weighted means);
* ``tempered`` (16 adapted likelihood-tempered rungs of cgm, sigma^2 = 1 only): 15,000 + 60,000,
  thin 5, the referee (its four chains agree).

Printed per chain: the (weighted) mean number of leaves and the activity of x1, x2, x3.
Run: ``PYTHONPATH=. python3 benchmarks/ctmc_wu_longrun.py`` (about 20 CPU minutes).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import bartpy_suite as bps

RUNS = [(1.0, "grow_prune", 400_000, 2_000, 20), (1.0, "cgm", 400_000, 2_000, 20), (1.0, "ctmc", 100_000, 2_000, 5),
        (1.0, "tempered", 60_000, 15_000, 5),
        (0.1, "grow_prune", 400_000, 2_000, 20), (0.1, "cgm", 400_000, 2_000, 20), (0.1, "ctmc", 100_000, 2_000, 5)]


def main() -> None:
    warnings.filterwarnings("ignore", category=bps.MixingWarning)
    for sigma2, sampler, draws, tune, thin in RUNS:
        train = bps.datasets.simulate_wu2007(300, seed=0, sigma2=sigma2)
        t0 = time.process_time()
        fit = bps.cart("y ~ x1 + x2 + x3", data=train, sampler=sampler, chains=4, draws=draws, tune=tune, thin=thin,
                       seed=7, progress=False, threads=1)
        w = fit.weights.values
        leaves = (w * fit.posterior["n_leaves"].values).sum(1) / w.sum(1)
        act = fit.posterior["variable_activity"].values
        acts = [np.round((w * act[..., k]).sum(1) / w.sum(1), 3).tolist() for k in range(3)]
        print(f"sigma2={sigma2} {sampler}: leaves per chain {np.round(leaves, 2).tolist()}; "
              f"activity x1 {acts[0]}, x2 {acts[1]}, x3 {acts[2]}; {time.process_time() - t0:.0f} CPU s", flush=True)


if __name__ == "__main__":
    main()
