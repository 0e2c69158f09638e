"""One benchmark run in its own process: one package, one task, one size (used by bart_vs_peers.py).

``python benchmarks/_peers.py --package bartz --task friedman --n 1000 --tune 200 --draws 500
--result out.json`` makes the data, fits BART with the shared CGM (2010) priors, predicts the
test set and writes one JSON record: timings, peak memory (this process's ``ru_maxrss``) and the
accuracy figures. See the docstring of ``bart_vs_peers.py`` for what is measured and how each
package's options map to the priors.

Every runner returns posterior draws on the original scale: ``f`` (draws, test rows) of the
regression function, or ``p`` (draws, test rows) of P(y = 1) for the probit task, and the
metrics are computed here the same way for every package.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback
import warnings


def _pin_to_cpu(argv: list[str]) -> None:
    """``--cpu K``: run this process (and every thread it starts later) on logical CPU K only,
    before any library starts a thread pool; the thread settings below are then a second line."""
    if "--cpu" in argv:
        cpu = int(argv[argv.index("--cpu") + 1])
        if cpu >= 0 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu})


_pin_to_cpu(sys.argv)

# Single-threaded everything; the parent sets these too, this covers a direct run.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

PACKAGES = ("bartpy_suite", "bartpy_suite-cgm", "bartpy_suite-pg", "bartpy_suite-ctmc", "bartpy_suite-tempered",
            "stochtree", "bartz", "pymc-bart")
#: This package's BART sampler behind each of its package names.
OUR_SAMPLERS = {"bartpy_suite": "grow_prune", "bartpy_suite-cgm": "cgm", "bartpy_suite-pg": "pg",
                "bartpy_suite-ctmc": "ctmc", "bartpy_suite-tempered": "tempered"}
TASKS = ("friedman", "breast_cancer", "friedman_ess")
ESS_POINTS = 100  # test points whose f(x) ESS is reported (the first rows of the Friedman test set)

TREES = 200
ALPHA, BETA = 0.95, 2.0
K = 2.0
NU, Q = 3.0, 0.9
MAX_CUTS = 100
MIN_LEAF = 5
P_FRIEDMAN = 10
N_TEST = 5000
DATA_SEED = 2010
MCMC_SEED = 1


# -- data ---------------------------------------------------------------------------------------
def friedman_f(x: np.ndarray) -> np.ndarray:
    """Friedman #1: 10 sin(pi x1 x2) + 20 (x3 - .5)^2 + 10 x4 + 5 x5."""
    return 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]


def friedman_data(n: int, n_test: int = N_TEST, seed: int = DATA_SEED) -> dict:
    """Training rows (x ~ U(0,1)^10, y = f + N(0,1)) and a test set with its noiseless f.

    The test set depends only on ``seed``, not on ``n``, so every size is scored on the same rows.
    """
    test_rng = np.random.default_rng([seed, 0])
    x_test = test_rng.uniform(size=(n_test, P_FRIEDMAN))
    rng = np.random.default_rng([seed, n])
    x = rng.uniform(size=(n, P_FRIEDMAN))
    y = friedman_f(x) + rng.standard_normal(n)
    return {"x": x, "y": y, "x_test": x_test, "f_test": friedman_f(x_test)}


def breast_cancer_data() -> dict:
    """sklearn's breast cancer data (shipped with sklearn), fixed stratified 70/30 split.

    ``y`` is 1 for a benign tumour (sklearn's target 1), 0 for malignant.
    """
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    x, x_test, y, y_test = train_test_split(data.data, data.target, test_size=0.3, random_state=0,
                                            stratify=data.target)
    return {"x": x, "y": y.astype(np.int64), "x_test": x_test, "y_test": y_test.astype(np.int64)}


# -- the CGM (2010) prior, computed once and handed to every package ------------------------------
def cgm_prior(x: np.ndarray, y: np.ndarray, probit: bool) -> dict:
    """Response scaling and hyperparameters of CGM (2010).

    Regression: y is mapped to [-0.5, 0.5] by (y - center) / scale with center the midrange and
    scale the range; leaf sd 0.5 / (k sqrt(T)) there; sigma_hat the residual sd of an OLS fit of
    y on an intercept and all predictors (n - p - 1 degrees of freedom); sigma^2 ~ nu lam / chi2_nu
    with P(sigma < sigma_hat) = q, i.e. lam = sigma_hat^2 chi2_nu^{-1}(1 - q) / nu (on the scaled
    response: ``lam_scaled``). Probit: leaf sd 3 / (k sqrt(T)) on the latent scale, offset
    Phi^-1(mean y).
    """
    if probit:
        return {"offset": float(stats.norm.ppf(np.mean(y))), "leaf_sd": 3.0 / (K * np.sqrt(TREES))}
    lo, hi = float(np.min(y)), float(np.max(y))
    center, scale = 0.5 * (lo + hi), hi - lo
    design = np.column_stack([np.ones(len(y)), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    sigma_hat = float(np.sqrt(resid @ resid / (len(y) - design.shape[1])))
    lam = sigma_hat ** 2 * float(stats.chi2.ppf(1.0 - Q, NU)) / NU
    return {
        "center": center,
        "scale": scale,
        "sigma_hat": sigma_hat,
        "lam": lam,
        "sigma_hat_scaled": sigma_hat / scale,
        "lam_scaled": lam / scale ** 2,
        "leaf_sd_scaled": 0.5 / (K * np.sqrt(TREES)),
    }


# -- helpers -------------------------------------------------------------------------------------
class Timer:
    """Wall and process CPU seconds of a block."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0
        return False


def _frame(x: np.ndarray, y=None):
    import pandas as pd

    df = pd.DataFrame(x, columns=[f"x{j}" for j in range(x.shape[1])])
    if y is not None:
        df["y"] = y
    return df


# -- runners ---------------------------------------------------------------------------------------
# Each runner returns a dict with: fit_s, fit_cpu_s, sample_s (sampling only, None when the package
# offers no finer hook than the fit call), compile_s (None when nothing is compiled), predict_s, and
# "f" or "p" (draws, test rows), and for regression "sigma" (posterior draws of sigma, original scale).


def run_bartpy_suite(task, data, prior, tune, draws, sampler):
    import bartpy_suite as bps

    probit = task == "breast_cancer"
    sample_time = [0.0]
    hooked = False
    try:  # time the chain runner alone (sampling), from outside the package
        from bartpy_suite.models import _base

        original_run = _base.TreeModel._run

        def timed_run(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original_run(self, *args, **kwargs)
            finally:
                sample_time[0] += time.perf_counter() - t0

        _base.TreeModel._run = timed_run
        hooked = True
    except (ImportError, AttributeError):
        pass

    y = data["y"].astype(bool) if probit else data["y"]
    df = _frame(data["x"], y)
    test = _frame(data["x_test"])
    kw = dict(trees=TREES, sampler=sampler, chains=1, alpha=ALPHA, beta=BETA, k=K, max_cuts=MAX_CUTS,
              min_leaf_size=MIN_LEAF, progress=False, threads=1)
    if not probit:
        kw.update(nu=NU, q=Q, sigma_hat=prior["sigma_hat"])

    def predict(fit):
        if probit:
            frame = fit.predict(test, kind="prob")
            return {"p_mean": frame["prob_True"].to_numpy()}
        return {"f": fit.function_samples(test)}

    # warm-up: compiles the numba kernels (or loads them from numba's cache) on the same data
    warm_tune, warm_draws = 1, 2
    with Timer() as warm:
        predict(bps.bart("y ~ .", data=df, draws=warm_draws, tune=warm_tune, seed=MCMC_SEED + 1, **kw))
    sample_time[0] = 0.0
    with Timer() as fit_t:
        fit = bps.bart("y ~ .", data=df, draws=draws, tune=tune, seed=MCMC_SEED, **kw)
    with Timer() as pred_t:
        out = predict(fit)
    sample_s = sample_time[0] if hooked else None
    per_sweep = (sample_s if sample_s is not None else fit_t.wall) / (tune + draws)
    out.update(
        fit_s=fit_t.wall, fit_cpu_s=fit_t.cpu, sample_s=sample_s, predict_s=pred_t.wall,
        compile_s=max(0.0, warm.wall - (warm_tune + warm_draws) * per_sweep),
    )
    if not probit:
        out["sigma"] = fit.posterior["sigma"].values.reshape(-1)
    return out


def run_stochtree(task, data, prior, tune, draws):
    from stochtree import BARTModel, OutcomeModel

    probit = task == "breast_cancer"
    general = dict(cutpoint_grid_size=MAX_CUTS, random_seed=MCMC_SEED, num_threads=1, keep_every=1, num_chains=1)
    forest = dict(num_trees=TREES, alpha=ALPHA, beta=BETA, min_samples_leaf=MIN_LEAF, max_depth=-1,
                  sample_sigma2_leaf=False)
    if probit:
        y = data["y"].astype(np.float64)
        general.update(outcome_model=OutcomeModel(outcome="binary", link="probit"))
        forest.update(sigma2_leaf_init=float(prior["leaf_sd"] ** 2))
    else:
        y = (data["y"] - prior["center"]) / prior["scale"]
        general.update(standardize=False, sigma2_init=float(prior["sigma_hat_scaled"] ** 2),
                       sigma2_global_shape=NU / 2, sigma2_global_scale=NU * prior["lam_scaled"] / 2)
        forest.update(sigma2_leaf_init=float(prior["leaf_sd_scaled"] ** 2))
    model = BARTModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Timer() as fit_t:
            model.sample(data["x"], y, num_gfr=0, num_burnin=tune, num_mcmc=draws, general_params=general,
                         mean_forest_params=forest)
        with Timer() as pred_t:
            if probit:
                p = np.asarray(model.predict(data["x_test"], type="posterior", terms="y_hat", scale="probability"))
            else:
                f = np.asarray(model.predict(data["x_test"], type="posterior", terms="y_hat"))
    out = dict(fit_s=fit_t.wall, fit_cpu_s=fit_t.cpu, sample_s=None, compile_s=None, predict_s=pred_t.wall)
    if probit:
        out["p"] = p.T
    else:
        out["f"] = prior["center"] + prior["scale"] * f.T
        out["sigma"] = prior["scale"] * np.sqrt(np.asarray(model.global_var_samples))
    return out


def run_bartz(task, data, prior, tune, draws):
    import jax
    import jax.monitoring
    from bartz.BART import gbart

    probit = task == "breast_cancer"
    compile_secs = [0.0]

    def listener(name, secs, **_):
        if name.startswith("/jax/core/compile/"):
            compile_secs[0] += secs

    jax.monitoring.register_event_duration_secs_listener(listener)
    kw = dict(ntree=TREES, base=ALPHA, power=BETA, k=K, usequants=True, numcut=MAX_CUTS, nskip=tune, ndpost=draws,
              keepevery=1, printevery=None, seed=MCMC_SEED,
              bart_kwargs=dict(precompute_predict_train=False, init_kw=dict(min_points_per_leaf=MIN_LEAF)))
    if probit:
        kw.update(type="pbart")
        y = data["y"]
    else:
        kw.update(type="wbart", sigest=prior["sigma_hat"], sigdf=NU, sigquant=Q, offset=prior["center"])
        y = data["y"]

    def fit_predict():
        with Timer() as fit_t:
            model = gbart(data["x"], y, **kw)
            jax.block_until_ready(model._bart._main_trace)  # noqa: SLF001  (the MCMC runs asynchronously)
        with Timer() as pred_t:
            latent = np.asarray(jax.block_until_ready(model.predict(data["x_test"])))
        return model, latent, fit_t, pred_t

    # warm-up on the same shapes (same n, trees, burn-in and draws: bartz's traces have those
    # lengths, so anything shorter would compile a different program)
    _, _, warm_fit, warm_pred = fit_predict()
    compile_secs[0] = 0.0
    model, latent, fit_t, pred_t = fit_predict()
    out = dict(fit_s=fit_t.wall, fit_cpu_s=fit_t.cpu, sample_s=None, predict_s=pred_t.wall,
               compile_s=max(0.0, (warm_fit.wall + warm_pred.wall) - (fit_t.wall + pred_t.wall)),
               compile_in_timed_run_s=compile_secs[0])
    if probit:
        out["p"] = stats.norm.cdf(latent)
    else:
        out["f"] = latent
        out["sigma"] = np.asarray(model.sigma_).reshape(-1)
    return out


def run_pymc_bart(task, data, prior, tune, draws):
    import logging

    import pymc as pm
    import pymc_bart as pmb

    logging.getLogger("pymc").setLevel(logging.ERROR)
    probit = task == "breast_cancer"
    y = data["y"] if probit else (data["y"] - prior["center"]) / prior["scale"]

    def build():
        with pm.Model() as model:
            x = pm.Data("X", data["x"])
            mu = pmb.BART("mu", x, y, m=TREES, alpha=ALPHA, beta=BETA)
            if probit:
                pm.Bernoulli("y", p=pm.math.invprobit(mu), observed=y, shape=mu.shape)
            else:
                s2 = pm.InverseGamma("sigma2", alpha=NU / 2, beta=NU * prior["lam_scaled"] / 2,
                                     initval=prior["sigma_hat_scaled"] ** 2)
                pm.Normal("y", mu=mu, sigma=pm.math.sqrt(s2), observed=y, shape=mu.shape)
            step = pmb.PGBART([mu], batch=(1.0, 1.0))
        return model, step

    def sample(model, step, n_tune, n_draws, seed):
        with model:
            return pm.sample(draws=n_draws, tune=n_tune, chains=1, cores=1, step=[step], random_seed=seed,
                             progressbar=False, compute_convergence_checks=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm_tune, warm_draws = 1, 2
        with Timer() as warm:  # compiles PyTensor's functions (kept in its on-disk cache)
            model, step = build()
            sample(model, step, warm_tune, warm_draws, MCMC_SEED + 1)
        with Timer() as fit_t:
            model, step = build()
            idata = sample(model, step, tune, draws, MCMC_SEED)
        sample_s = float(idata.posterior.attrs.get("sampling_time", fit_t.wall))
        with Timer() as pred_t:
            with model:
                pm.set_data({"X": data["x_test"]})
                pp = pm.sample_posterior_predictive(idata, var_names=["mu"], random_seed=MCMC_SEED,
                                                    progressbar=False)
    latent = pp.posterior_predictive["mu"].values.reshape(-1, data["x_test"].shape[0])
    out = dict(fit_s=fit_t.wall, fit_cpu_s=fit_t.cpu, sample_s=sample_s, predict_s=pred_t.wall,
               compile_s=max(0.0, warm.wall - (warm_tune + warm_draws) * sample_s / (tune + draws)))
    if probit:
        out["p"] = stats.norm.cdf(latent)
    else:
        out["f"] = prior["center"] + prior["scale"] * latent
        out["sigma"] = prior["scale"] * np.sqrt(idata.posterior["sigma2"].values.reshape(-1))
    return out


# -- ESS per second (task friedman_ess) ------------------------------------------------------------
# Each runner returns: f (chains, draws, ESS_POINTS) on the original scale, sigma (chains, draws),
# weights (chains, draws) or None (uniform), sample_cpu_s and sample_wall_s (all chains, sampling
# only, compilation excluded) and a note on what those seconds cover.


def ess_bartpy_suite(data, prior, tune, draws, chains, sampler):
    import bartpy_suite as bps
    from bartpy_suite.models import _base

    spent = {"cpu": 0.0, "wall": 0.0}
    original_run = _base.TreeModel._run

    def timed_run(self, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return original_run(self, *args, **kwargs)
        finally:
            spent["wall"] += time.perf_counter() - t0
            spent["cpu"] += time.process_time() - c0

    _base.TreeModel._run = timed_run
    df = _frame(data["x"], data["y"])
    test = _frame(data["x_test"][:ESS_POINTS])
    kw = dict(trees=TREES, sampler=sampler, alpha=ALPHA, beta=BETA, k=K, max_cuts=MAX_CUTS, min_leaf_size=MIN_LEAF,
              progress=False, threads=1, nu=NU, q=Q, sigma_hat=prior["sigma_hat"])
    bps.bart("y ~ .", data=df, chains=1, draws=2, tune=1, seed=MCMC_SEED + 100, **kw).function_samples(test)
    spent.update(cpu=0.0, wall=0.0)
    fit = bps.bart("y ~ .", data=df, chains=chains, draws=draws, tune=tune, seed=MCMC_SEED, **kw)
    f = fit.function_samples(test).reshape(chains, draws, -1)
    return dict(f=f, sigma=fit.posterior["sigma"].values.reshape(chains, draws),
                weights=fit.weights.values.reshape(chains, draws), sample_cpu_s=spent["cpu"],
                sample_wall_s=spent["wall"], timed="the chain runner (chains=4, threads=1: one after the other)")


def ess_stochtree(data, prior, tune, draws, chains):
    from stochtree import BARTModel

    y = (data["y"] - prior["center"]) / prior["scale"]
    forest = dict(num_trees=TREES, alpha=ALPHA, beta=BETA, min_samples_leaf=MIN_LEAF, max_depth=-1,
                  sample_sigma2_leaf=False, sigma2_leaf_init=float(prior["leaf_sd_scaled"] ** 2))
    fs, sigmas, cpu, wall = [], [], 0.0, 0.0
    for c in range(chains):
        general = dict(cutpoint_grid_size=MAX_CUTS, random_seed=MCMC_SEED + c, num_threads=1, keep_every=1,
                       num_chains=1, standardize=False, sigma2_init=float(prior["sigma_hat_scaled"] ** 2),
                       sigma2_global_shape=NU / 2, sigma2_global_scale=NU * prior["lam_scaled"] / 2)
        model = BARTModel()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Timer() as t:
                model.sample(data["x"], y, num_gfr=0, num_burnin=tune, num_mcmc=draws, general_params=general,
                             mean_forest_params=forest)
            f = np.asarray(model.predict(data["x_test"][:ESS_POINTS], type="posterior", terms="y_hat"))
        cpu, wall = cpu + t.cpu, wall + t.wall
        fs.append(prior["center"] + prior["scale"] * f.T)
        sigmas.append(prior["scale"] * np.sqrt(np.asarray(model.global_var_samples)))
    return dict(f=np.stack(fs), sigma=np.stack(sigmas), weights=None, sample_cpu_s=cpu, sample_wall_s=wall,
                timed="the fit calls, one per chain (binning and set-up included)")


def ess_bartz(data, prior, tune, draws, chains):
    import jax
    from bartz.BART import gbart

    kw = dict(ntree=TREES, base=ALPHA, power=BETA, k=K, usequants=True, numcut=MAX_CUTS, nskip=tune, ndpost=draws,
              keepevery=1, printevery=None, type="wbart", sigest=prior["sigma_hat"], sigdf=NU, sigquant=Q,
              offset=prior["center"],
              bart_kwargs=dict(precompute_predict_train=False, init_kw=dict(min_points_per_leaf=MIN_LEAF)))
    x_test = data["x_test"][:ESS_POINTS]

    def one(seed):
        with Timer() as t:
            model = gbart(data["x"], data["y"], seed=seed, **kw)
            jax.block_until_ready(model._bart._main_trace)  # noqa: SLF001  (the MCMC runs asynchronously)
        f = np.asarray(jax.block_until_ready(model.predict(x_test)))
        return f, np.asarray(model.sigma_).reshape(-1), t

    one(MCMC_SEED + 100)  # warm-up on the same shapes: compiles the program the timed chains reuse
    fs, sigmas, cpu, wall = [], [], 0.0, 0.0
    for c in range(chains):
        f, sigma, t = one(MCMC_SEED + c)
        fs.append(f)
        sigmas.append(sigma)
        cpu, wall = cpu + t.cpu, wall + t.wall
    return dict(f=np.stack(fs), sigma=np.stack(sigmas), weights=None, sample_cpu_s=cpu, sample_wall_s=wall,
                timed="the fit calls, one per chain, after a warm-up fit that compiles")


def ess_pymc_bart(data, prior, tune, draws, chains):
    import logging

    import pymc as pm
    import pymc_bart as pmb

    logging.getLogger("pymc").setLevel(logging.ERROR)
    y = (data["y"] - prior["center"]) / prior["scale"]

    def build():
        with pm.Model() as model:
            x = pm.Data("X", data["x"])
            mu = pmb.BART("mu", x, y, m=TREES, alpha=ALPHA, beta=BETA)
            s2 = pm.InverseGamma("sigma2", alpha=NU / 2, beta=NU * prior["lam_scaled"] / 2,
                                 initval=prior["sigma_hat_scaled"] ** 2)
            pm.Normal("y", mu=mu, sigma=pm.math.sqrt(s2), observed=y, shape=mu.shape)
            step = pmb.PGBART([mu], batch=(1.0, 1.0))
        return model, step

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, step = build()
        with model:  # warm-up: compiles PyTensor's functions (kept in its on-disk cache)
            pm.sample(draws=2, tune=1, chains=1, cores=1, step=[step], random_seed=MCMC_SEED + 100,
                      progressbar=False, compute_convergence_checks=False)
        model, step = build()
        with model, Timer() as t:
            idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, step=[step], random_seed=MCMC_SEED,
                              progressbar=False, compute_convergence_checks=False)
        with model:
            pm.set_data({"X": data["x_test"][:ESS_POINTS]})
            pp = pm.sample_posterior_predictive(idata, var_names=["mu"], random_seed=MCMC_SEED, progressbar=False)
    latent = pp.posterior_predictive["mu"].values.reshape(chains, draws, -1)
    return dict(f=prior["center"] + prior["scale"] * latent,
                sigma=prior["scale"] * np.sqrt(idata.posterior["sigma2"].values.reshape(chains, draws)),
                weights=None, sample_cpu_s=t.cpu, sample_wall_s=t.wall,
                timed="pm.sample with chains=4, cores=1 (one after the other)")


def ess_figures(out: dict) -> dict:
    """ESS of sigma and of f at each test point, and per sampling CPU second.

    The ESS is this package's ``weighted_ess``: with uniform weights it is arviz-stats' bulk ESS
    (split chains, rank-normalised, Vehtari et al. 2021) over the chains together; with the
    Rao-Blackwellized weights of a weighted sampler (``ctmc``, ``pg``) it is the delta-method ESS
    of the weighted mean.
    """
    from bartpy_suite.posterior.weighted import weighted_ess

    w = out["weights"] if out["weights"] is not None else np.ones_like(out["sigma"])
    ess_sigma = float(weighted_ess(out["sigma"], w))
    ess_f = np.array([weighted_ess(out["f"][:, :, i], w) for i in range(out["f"].shape[2])])
    cpu = out["sample_cpu_s"]
    return {
        "ess_sigma": ess_sigma,
        "ess_f_median": float(np.nanmedian(ess_f)),
        "ess_f_p5": float(np.nanpercentile(ess_f, 5)),
        "ess_sigma_per_s": ess_sigma / cpu,
        "ess_f_median_per_s": float(np.nanmedian(ess_f)) / cpu,
        "ess_f_p5_per_s": float(np.nanpercentile(ess_f, 5)) / cpu,
        "sample_cpu_s": cpu,
        "sample_wall_s": out["sample_wall_s"],
        "timed": out["timed"],
        "chains": int(out["sigma"].shape[0]),
        "sigma_mean": float(np.mean(out["sigma"])),
    }


def run_ess(package: str, n: int, tune: int, draws: int, chains: int) -> dict:
    data = friedman_data(n)
    prior = cgm_prior(data["x"], data["y"], probit=False)
    if package in OUR_SAMPLERS:
        out = ess_bartpy_suite(data, prior, tune, draws, chains, OUR_SAMPLERS[package])
    elif package == "stochtree":
        out = ess_stochtree(data, prior, tune, draws, chains)
    elif package == "bartz":
        out = ess_bartz(data, prior, tune, draws, chains)
    else:
        out = ess_pymc_bart(data, prior, tune, draws, chains)
    record = ess_figures(out)
    record.update(package=package, task="friedman_ess", n=n, tune=tune, draws=draws, sweeps=chains * (tune + draws))
    record["cpu_s_per_sweep"] = record["sample_cpu_s"] / record["sweeps"]
    return record


# -- metrics ---------------------------------------------------------------------------------------
def regression_metrics(f: np.ndarray, f_test: np.ndarray, sigma: np.ndarray) -> dict:
    """RMSE of the posterior mean against the noiseless f; coverage and mean width of the
    equal-tailed 95% credible intervals of f(x); posterior mean of sigma."""
    mean = f.mean(axis=0)
    lo, hi = np.quantile(f, [0.025, 0.975], axis=0)
    return {
        "rmse": float(np.sqrt(np.mean((mean - f_test) ** 2))),
        "coverage95": float(np.mean((lo <= f_test) & (f_test <= hi))),
        "width95": float(np.mean(hi - lo)),
        "sigma_mean": float(np.mean(sigma)),
    }


def probit_metrics(p_mean: np.ndarray, y_test: np.ndarray) -> dict:
    """Accuracy at 0.5 and log loss of the posterior mean probability of y = 1."""
    p = np.clip(p_mean, 1e-15, 1 - 1e-15)
    return {
        "accuracy": float(np.mean((p >= 0.5) == (y_test == 1))),
        "log_loss": float(-np.mean(y_test * np.log(p) + (1 - y_test) * np.log(1 - p))),
    }


def run(package: str, task: str, n: int, tune: int, draws: int, chains: int = 1) -> dict:
    if task == "friedman_ess":
        return run_ess(package, n, tune, draws, chains)
    if task == "friedman":
        data = friedman_data(n)
        prior = cgm_prior(data["x"], data["y"], probit=False)
    else:
        data = breast_cancer_data()
        prior = cgm_prior(data["x"], data["y"], probit=True)
    if package in OUR_SAMPLERS:
        out = run_bartpy_suite(task, data, prior, tune, draws, OUR_SAMPLERS[package])
    elif package == "stochtree":
        out = run_stochtree(task, data, prior, tune, draws)
    elif package == "bartz":
        out = run_bartz(task, data, prior, tune, draws)
    elif package == "pymc-bart":
        out = run_pymc_bart(task, data, prior, tune, draws)
    else:
        raise ValueError(f"unknown package {package!r}; choose from {', '.join(PACKAGES)}")
    record = {k: v for k, v in out.items() if not isinstance(v, np.ndarray)}
    if task == "friedman":
        record.update(regression_metrics(out["f"], data["f_test"], out["sigma"]))
        record["sigma_hat"] = prior["sigma_hat"]
        record["n_draws_kept"] = int(out["f"].shape[0])
    else:
        p_mean = out["p_mean"] if "p_mean" in out else out["p"].mean(axis=0)
        record.update(probit_metrics(p_mean, data["y_test"]))
    record.update(package=package, task=task, n=int(data["x"].shape[0]), p=int(data["x"].shape[1]),
                  n_test=int(data["x_test"].shape[0]), tune=tune, draws=draws, sweeps=tune + draws)
    base = record["sample_s"] if record.get("sample_s") is not None else record["fit_s"]
    record["s_per_sweep"] = base / record["sweeps"]
    record["cpu_s_per_sweep"] = record["fit_cpu_s"] / record["sweeps"]
    return record


def main(argv=None) -> int:
    global MCMC_SEED
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", required=True, choices=PACKAGES)
    ap.add_argument("--task", required=True, choices=TASKS)
    ap.add_argument("--n", type=int, default=1000, help="training rows (friedman)")
    ap.add_argument("--tune", type=int, required=True)
    ap.add_argument("--draws", type=int, required=True)
    ap.add_argument("--chains", type=int, default=1, help="chains (task friedman_ess only)")
    ap.add_argument("--result", required=True, help="JSON file to write")
    ap.add_argument("--cpu", type=int, default=-1, help="pin the process to this logical CPU (-1: no pinning)")
    ap.add_argument("--seed", type=int, default=MCMC_SEED, help="MCMC seed (chain c of friedman_ess: seed + c)")
    args = ap.parse_args(argv)
    MCMC_SEED = args.seed
    try:
        record = run(args.package, args.task, args.n, args.tune, args.draws, args.chains)
        record["ok"] = True
    except Exception as exc:  # noqa: BLE001  (reported in the table, the run goes on)
        traceback.print_exc()
        record = {"package": args.package, "task": args.task, "n": args.n, "ok": False,
                  "error": f"{type(exc).__name__}: {exc}"}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    scale = 1024.0 if sys.platform != "darwin" else 1024.0 * 1024.0  # ru_maxrss: KiB on Linux, bytes on macOS
    record["cpus"] = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    record["peak_rss_mb"] = usage.ru_maxrss / scale
    record["peak_rss_children_mb"] = children.ru_maxrss / scale
    with open(args.result, "w") as fh:
        json.dump(record, fh, indent=1)
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
