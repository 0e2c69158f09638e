"""pymc-bart's particle Gibbs on one hypercube-D data set, in its own process (used by
``pg_hypercube.py`` through the peers' virtual environment, as ``_peers.py`` is by
``bart_vs_peers.py``).

``python benchmarks/_pymc_hypercube.py --data d.npz --beta 0.4 --tune 1000 --draws 1000 --seed 0
--result out.json`` reads x, y from the npz file, fits pymc-bart with one tree (m = 1),
alpha = 0.95, the given beta, ``num_particles`` = 10 (its default, the paper's C) and every tree
updated at every iteration (``batch=(1, 1)``), and writes one JSON record: sampling seconds
(pymc's own ``sampling_time``), sigma and f at the training rows per kept draw (on y's scale),
so that the parent computes the log-likelihood and its ESS exactly as for our samplers.

Priors as ``_peers.run_pymc_bart``: y scaled to [-0.5, 0.5] by its range; sigma^2 ~
InvGamma(nu/2, nu lam/2) with nu = 3 and P(sigma < sigma_hat) = 0.9, sigma_hat the residual sd of
a linear fit (CGM 2010); the leaf prior is pymc-bart's own.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

NU, Q, ALPHA = 3.0, 0.9, 0.95


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--beta", type=float, required=True)
    ap.add_argument("--tune", type=int, required=True)
    ap.add_argument("--draws", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--particles", type=int, default=10)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()

    import logging

    import pymc as pm
    import pymc_bart as pmb

    logging.getLogger("pymc").setLevel(logging.ERROR)
    d = np.load(args.data)
    x, y = d["x"], d["y"]
    lo, hi = float(y.min()), float(y.max())
    center, scale = 0.5 * (lo + hi), hi - lo
    design = np.column_stack([np.ones(len(y)), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    sigma_hat = float(np.sqrt(resid @ resid / (len(y) - design.shape[1]))) / scale
    lam = sigma_hat ** 2 * float(stats.chi2.ppf(1.0 - Q, NU)) / NU
    ys = (y - center) / scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pm.Model():
            mu = pmb.BART("mu", x, ys, m=1, alpha=ALPHA, beta=args.beta)
            s2 = pm.InverseGamma("sigma2", alpha=NU / 2, beta=NU * lam / 2, initval=sigma_hat ** 2)
            pm.Normal("y", mu=mu, sigma=pm.math.sqrt(s2), observed=ys, shape=mu.shape)
            step = pmb.PGBART([mu], num_particles=args.particles, batch=(1.0, 1.0))
            t0 = time.perf_counter()
            idata = pm.sample(draws=args.draws, tune=args.tune, chains=1, cores=1, step=[step],
                              random_seed=args.seed, progressbar=False, compute_convergence_checks=False)
            wall = time.perf_counter() - t0
    f = center + scale * idata.posterior["mu"].values.reshape(args.draws, -1)
    sigma = scale * np.sqrt(idata.posterior["sigma2"].values.reshape(-1))
    record = {"sample_s": float(idata.posterior.attrs.get("sampling_time", wall)), "wall_s": wall,
              "f": f.tolist(), "sigma": sigma.tolist()}
    with open(args.result, "w") as fh:
        json.dump(record, fh)


if __name__ == "__main__":
    main()
