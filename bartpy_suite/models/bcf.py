"""``bcf``: Bayesian causal forests (Hahn, Murray & Carvalho 2020, "HMC20"; issue 30, "Causal"), in
HMC20's parameterisation as the authors' ``bcf`` package codes it (spec multi_forest.md 3.1, 3.3, 3.4):

    y = mu(x, pihat) + tau(x) z + e,  on the standardised response as  s_m m(x, pihat) + b_z t(x) + e

with a prognostic (mu) forest of 200 trees (alpha .95, beta 2) scaled by s_m ~ N(0, 1) and leaves
N(0, c_mu^2 / (delta M_mu)), delta ~ Gamma(1/2, 1/2), so that the sd of mu(x) is half-Cauchy with median
``sd_control`` sd(y); a treatment (tau) forest of 50 trees (alpha .25, beta 3) with leaves
N(0, c_tau^2 / M_tau), c_tau = ``sd_moderate`` / 0.6745, on the basis b_{z_i} with b_0, b_1 ~ N(0, 1/2),
so that the sd of tau(x) is half-normal with median ``sd_moderate`` sd(y); and sigma^2 ~ nu lam / chi^2_nu
with P(sigma < sigma_hat) = q, sigma_hat the residual sd of the linear fit of y on (z, x, pihat).

The propensity pihat is the posterior mean of Phi(f(x)) of the package's probit BART of z on x, clipped
to [0.01, 0.99] and given to the mu forest only (spec 3.2, 7: never z to mu, never pihat to tau); or a
column of the user's (``propensity="column"``). It is estimated once, from (x, z) only.

Import rule: imports ``_kernels``, ``samplers``, ``posterior``, ``priors``, ``_binning`` and the modules of
this package; ``formula`` and pandas inside ``bcf`` only.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
from scipy import stats

from .. import _validation as check
from .._binning import BinnedPredictors
from .._kernels.likelihood import MODEL_BASIS_NORMAL
from .._kernels.records import make_prior
from ..errors import ArgumentError, DataError, MixingWarning
from ..posterior.bcf import CausalFit, build_causal_idata, treatment_codes
from ..posterior.random_effects import attach_random_effects
from ..priors import calibrate_lambda
from ..samplers.multi_forest import (
    CausalChain,
    CausalProblem,
    ForestSpec,
    check_multi_forest_sampler,
)
from ._base import spawn_generators
from ._runner import run_chains
from .bart import residual_sd

#: Clipping of the estimated propensity (spec 3.2).
PROPENSITY_CLIP = (0.01, 0.99)
#: Settings of the propensity model (probit BART of z on x) unless ``propensity_options`` overrides them.
PROPENSITY_DEFAULTS = {"trees": 200, "chains": 1, "draws": 500, "tune": 500, "check_mixing": False}
#: Split R-hat of the ATE or sigma above which ``bcf`` warns that the chains have not mixed.
RHAT_WARN = 1.05
#: The random effects' prior (``_kernels/random_effects.py``, as BART's): sigma2_k ~ IG(a, b), alpha_k ~
#: N(0, alpha_var); the effective sd |alpha_k| sigma_k is half-t_2 of scale one sd of y (spec 4.1).
RE_PRIOR = {"a": 1.0, "b": 1.0, "alpha_var": 1.0}
#: The random intercept's name among the terms (``formula.random_effects.INTERCEPT``).
INTERCEPT = "(Intercept)"
#: 0.6745 = Phi^-1(0.75): the median of a half-normal of scale 1.
HALF_NORMAL_MEDIAN = float(stats.norm.ppf(0.75))


def _rhs_names(rhs: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9.]*", rhs))


def _shown(value) -> str:
    """``value`` as an error message shows it: the repr of a name or scalar, the type and length of an
    array or series (whose full repr would bury the message)."""
    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return repr(value)
    try:
        return f"<{type(value).__name__} of {len(value)} values>"
    except TypeError:
        return f"<{type(value).__name__}>"


def bcf(formula: str, data, *, treatment: str, tau_formula: str | None = None, propensity: str | None = None,
        weights: str | None = None,
        mu_trees: int = 200, tau_trees: int = 50, sd_control: float = 2.0, sd_moderate: float = 1.0,
        alpha_mu: float = 0.95, beta_mu: float = 2.0, alpha_tau: float = 0.25, beta_tau: float = 3.0,
        nu: float = 3.0, q: float = 0.9, min_leaf_size: int = 5, max_cuts: int = 100, sampler: str = "grow_prune",
        moves: dict | None = None, chains: int = 4, draws: int = 1000, tune: int = 1000, thin: int = 1,
        seed=None, likelihood: bool = True, threads: int | None = None, progress: bool = False,
        propensity_options: dict | None = None, na_action: str = "drop", check_mixing: bool = True) -> CausalFit:
    """Fit a Bayesian causal forest (Hahn, Murray & Carvalho 2020) from a formula and a 0/1 treatment.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + x2 + C(g)"``: the response and the predictors of the prognostic (mu) forest (and of
        the treatment forest unless ``tau_formula`` is given). ``"y ~ ."`` takes every column but the
        response, the treatment and the propensity column. The treatment may not be a predictor. One lme4
        random-effect term, ``"y ~ x1 + (1 | g)"`` (a random intercept per level of g) or ``(x1 | g)`` (and a
        slope on x1), adds Gaussian group effects to the prognostic part (BART's prior and Gibbs block, spec
        multi_forest.md 4): the grouping factor is in neither forest unless it is also a term, the CATE
        does not include the effects, ``predict`` adds a known group's; not with ``weights``.
    data : pandas.DataFrame
        The data; never modified.
    treatment : str
        The 0/1 (or False/True) treatment column.
    tau_formula : str, optional
        ``"~ x1 + x2"``: the moderators the treatment forest may split on (default: the formula's
        predictors).
    propensity : str, optional
        A column holding each row's propensity P(z = 1 | x), strictly between 0 and 1. Default: the
        posterior mean of probit BART of the treatment on the formula's predictors, clipped to
        [0.01, 0.99]; appended to the mu forest's predictors only.
    weights : str, optional
        A column of precision weights w_i >= 0 (spec 1.1: e_i ~ N(0, sigma^2 / w_i); w_i = 0 leaves row i
        out of every likelihood term). The response is standardised by its weighted mean and sd, as bcf
        does; sigma_hat (the sigma^2 prior's scale) still comes from the unweighted linear fit; the
        ATE, ATT and ATC average the rows' CATE with equal weights (the sample ATE, spec 3.7).
    mu_trees, tau_trees : int
        Trees of the mu and tau forests (HMC20: 200 and 50).
    sd_control, sd_moderate : float
        Prior medians of sd(mu(x)) and sd(tau(x)) in units of sd(y) (HMC20: 2 and 1).
    alpha_mu, beta_mu, alpha_tau, beta_tau : float
        Tree priors p_split = alpha (1 + depth)^-beta (HMC20: .95, 2 and .25, 3).
    nu, q : float
        sigma^2 ~ nu lam / chi^2_nu with P(sigma < sigma_hat) = q.
    min_leaf_size : int
        Rows each child of a split needs (all rows, treated or not).
    max_cuts : int
        Most cut points per numeric predictor.
    sampler : {"grow_prune", "cgm", "pg", "ctmc", "tempered"} or dict
        The tree update of both forests (MH moves, particle Gibbs or the continuous-time process, each
        with its default options), or ``{"mu": name, "tau": name}``, one per forest; ``"tempered"``: a
        ladder of 4 whole BCF chains (likelihood powers 1, 10^-1.5, 10^-3, 0) with swaps, cgm moves.
    moves : dict, optional
        Move probabilities by name of the MH sampler (default the sampler's mix).
    chains, draws, tune, thin : int
        Chains; kept draws per chain; discarded first sweeps; keep every ``thin``-th sweep.
    seed : int or numpy.random.SeedSequence, optional
        Seed of the chains (and of the propensity model).
    likelihood : bool
        False samples the prior (tests).
    threads : int, optional
        Threads the chains run on (default one per chain).
    progress : bool
        Show a progress bar.
    propensity_options : dict, optional
        Keywords of ``bps.bart`` for the propensity model (default ``PROPENSITY_DEFAULTS``).
    na_action : {"drop", "raise"}
        Rows with a missing predictor are dropped with a warning, or raise.
    check_mixing : bool
        With several chains, warn (``MixingWarning``) when the split R-hat of the ATE or sigma exceeds
        ``RHAT_WARN``: the chains disagree on what the fit reports.

    Returns
    -------
    CausalFit
        ``ate()``, ``att()``, ``atc()``, ``cate(new)``, ``predict(new)``, ``summary()``,
        ``common_support()``, ``variable_activity(forest=)``, ``tree(forest=)``, ``save(path)`` (netCDF);
        the draws in ``idata`` (an ArviZ-layout DataTree, one group per forest).

    Raises
    ------
    DataError
        A treatment that is not 0/1, constant or missing; a propensity column outside (0, 1).
    ArgumentError
        A bad keyword, the treatment among the predictors, a sampler that cannot run two forests, or
        random effects with weights or in ``tau_formula``.
    FormulaError
        A malformed random-effect term, several of them, or a numeric grouping factor.
    """
    import pandas as pd

    from ..formula import build_design
    from ..formula.random_effects import has_random_effects

    if not isinstance(data, pd.DataFrame):
        raise ArgumentError(f"data must be a pandas DataFrame (got {type(data).__name__})")
    if not isinstance(treatment, str) or treatment not in data.columns:
        raise ArgumentError(f"treatment={_shown(treatment)} is not a column of data; give the name of the 0/1 "
                            "treatment column")
    na_action = check.check_choice("na_action", na_action, ("drop", "raise"))
    mu_trees = check.check_int_at_least("mu_trees", mu_trees, 1)
    tau_trees = check.check_int_at_least("tau_trees", tau_trees, 1)
    sd_control = check.check_positive("sd_control", sd_control)
    sd_moderate = check.check_positive("sd_moderate", sd_moderate)
    for name, value in (("alpha_mu", alpha_mu), ("alpha_tau", alpha_tau)):
        check.check_open_unit(name, value)
    for name, value in (("beta_mu", beta_mu), ("beta_tau", beta_tau)):
        check.check_nonnegative(name, value)
    nu = check.check_positive("nu", nu)
    q = check.check_open_unit("q", q)
    min_leaf_size = check.check_int_at_least("min_leaf_size", min_leaf_size, 1)
    max_cuts = check.check_int_at_least("max_cuts", max_cuts, 1)
    chains = check.check_int_at_least("chains", chains, 1)
    draws = check.check_int_at_least("draws", draws, 1)
    tune = check.check_int_at_least("tune", tune, 0)
    thin = check.check_int_at_least("thin", thin, 1)
    likelihood = check.check_bool("likelihood", likelihood)
    check_mixing = check.check_bool("check_mixing", check_mixing)
    move_mix = check_multi_forest_sampler(sampler, moves)
    if "~" not in formula:
        raise ArgumentError(f"formula must read 'y ~ x1 + x2' (got {formula!r})")
    rhs = formula.split("~", 1)[1]
    if treatment in _rhs_names(rhs):
        raise ArgumentError(f"the treatment {treatment!r} may not be a predictor in the formula {formula!r}: bcf "
                            "adds its effect through the treatment forest (leave it out of the formula)")
    hidden = [treatment] + [c for c in (propensity, weights) if c is not None]
    if weights is not None and (not isinstance(weights, str) or weights not in data.columns):
        raise ArgumentError(f"weights={_shown(weights)} is not a column of data; give the name of a column of "
                            "non-negative weights, or None")
    if propensity is not None and (not isinstance(propensity, str) or propensity not in data.columns):
        raise ArgumentError(f"propensity={_shown(propensity)} is not a column of data; give a column name or None "
                            "(estimate it with probit BART)")
    treatment_codes(data[treatment], treatment)  # a bad treatment is reported before any model is built
    visible = data.drop(columns=hidden)
    re_data = None
    if has_random_effects(formula):
        design, x_mu, y, index, re_data = _random_effects_design(formula, visible, na_action, weights, tau_formula)
        rhs = design.expanded_formula.split("~", 1)[1]  # the trees' predictors: without the bar term
    else:
        design, x_mu, y, index = build_design(formula, visible, na_action=na_action, return_index=True)
    if design.response_kind != "numeric":
        raise DataError(f"bcf needs a numeric response; {design.response!r} is {design.response_kind}")
    tau_rhs = rhs if tau_formula is None else tau_formula.split("~", 1)[-1]
    if treatment in _rhs_names(tau_rhs):
        raise ArgumentError(f"the treatment {treatment!r} may not be a moderator in tau_formula={tau_formula!r}")
    tau_design, x_tau, _, tau_index = build_design(f"{design.response} ~ {tau_rhs}", visible.loc[index],
                                                   na_action=na_action, return_index=True)
    if len(tau_index) < len(index):  # tau_formula's columns miss values the formula's do not
        if re_data is not None:
            keep = index.get_indexer(tau_index)
            re_data = type(re_data)(re_data.spec, re_data.group[keep], re_data.basis[keep])
        design, x_mu, y, index = build_design(design.expanded_formula if re_data is not None else formula,
                                              visible.loc[tau_index], na_action="raise", return_index=True)
    z = treatment_codes(data.loc[index, treatment], treatment)
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    w = np.ones(n)
    if weights is not None:
        w = np.asarray(data.loc[index, weights], dtype=np.float64)
        bad = ~(np.isfinite(w) & (w >= 0))
        if bad.any() or not (w > 0).any():
            raise DataError(f"weights column {weights!r} must hold finite values >= 0, not all 0 ({int(bad.sum())} "
                            "rows are negative, missing or infinite)")
    ss = spawn_generators(seed, chains + 1)
    config = {"model_type": "bcf", "formula": design.expanded_formula, "tau_formula": f"~ {tau_rhs.strip()}",
              "treatment": treatment, "mu_trees": mu_trees, "tau_trees": tau_trees, "sd_control": sd_control,
              "sd_moderate": sd_moderate, "alpha_mu": alpha_mu, "beta_mu": beta_mu, "alpha_tau": alpha_tau,
              "beta_tau": beta_tau, "nu": nu, "q": q, "min_leaf_size": min_leaf_size, "max_cuts": max_cuts,
              "sampler": sampler, "moves": move_mix, "chains": chains, "draws": draws, "tune": tune, "thin": thin,
              "likelihood": likelihood, "propensity_column": propensity, "weights": weights,
              "propensity_clip": PROPENSITY_CLIP}

    # -- the propensity, once, from (x, z) only (spec 7) ---------------------------------------
    propensity_fit = None
    if propensity is not None:
        pi = np.asarray(data.loc[index, propensity], dtype=np.float64)
        if not np.all((pi > 0) & (pi < 1)):
            bad = int(np.sum(~((pi > 0) & (pi < 1))))
            raise DataError(f"propensity column {propensity!r} must lie strictly between 0 and 1 ({bad} rows do "
                            "not, or are missing)")
    else:
        from .bart import BART

        options = {**PROPENSITY_DEFAULTS, **(propensity_options or {})}
        options.setdefault("seed", int(ss[chains].integers(2**63)))
        frame = visible.loc[index].assign(**{treatment: z.astype(bool)})
        rhs_expanded = design.expanded_formula.split("~", 1)[1]
        propensity_fit = BART.from_formula(f"{_quoted(treatment)} ~ {rhs_expanded}", frame, na_action="raise",
                                           **options)
        pi = np.clip(propensity_fit.predict(frame)["prob_True"].to_numpy(dtype=np.float64), *PROPENSITY_CLIP)

    # -- the standardised problem --------------------------------------------------------------
    center = float(np.average(y, weights=w))
    scale = float(np.sqrt(np.average((y - center) ** 2, weights=w) * n / (n - 1))) if n > 1 else 0.0
    if not np.isfinite(scale) or scale <= 0:
        raise DataError(f"the response {design.response!r} is constant; bcf needs variation in it")
    ys = (y - center) / scale
    mu_cat = list(design.is_categorical) + [False]
    x_mu_full = np.column_stack([x_mu, pi])
    mu_binned = BinnedPredictors.fit(x_mu_full, np.array(mu_cat), list(design.n_levels) + [0], max_cuts)
    tau_binned = BinnedPredictors.fit(np.asarray(x_tau, dtype=np.float64), np.array(tau_design.is_categorical),
                                      list(tau_design.n_levels), max_cuts)
    s_hat = residual_sd(np.column_stack([z.astype(np.float64), x_mu_full]), ys, np.array([False] + mu_cat))
    if not np.isfinite(s_hat) or s_hat <= 0:
        s_hat = 1.0
    lam = calibrate_lambda(s_hat, nu, q)
    common = {"min_leaf": min_leaf_size, "model": MODEL_BASIS_NORMAL, "nu": nu, "lam": lam, "likelihood": likelihood}
    c_tau = sd_moderate / HALF_NORMAL_MEDIAN
    problem = CausalProblem(
        y=ys, z=z, w=w,
        mu=ForestSpec(mu_binned.codes, np.array(mu_cat), mu_binned.nbins, make_prior(alpha=alpha_mu, beta=beta_mu,
                      **common), mu_trees, sd_control ** 2 / mu_trees, 0.0),
        tau=ForestSpec(tau_binned.codes, np.array(tau_design.is_categorical), tau_binned.nbins,
                       make_prior(alpha=alpha_tau, beta=beta_tau, **common), tau_trees, c_tau ** 2 / tau_trees,
                       1.0 / tau_trees),
        mu_scale2=sd_control ** 2 / mu_trees, sigma2=1.0)
    if re_data is not None:  # the prior of BART's random effects (models/bart.py, spec 4.1)
        terms = list(re_data.spec.terms)
        problem.random_effects = {"group": re_data.group, "basis": re_data.basis, "n_groups": len(re_data.spec.levels),
                                  **RE_PRIOR, "intercept": terms.index(INTERCEPT) if INTERCEPT in terms else -1}
        config["random_effects"] = {**re_data.spec.to_config(), **RE_PRIOR}
    config.update(center=center, scale=scale, sigma_hat=s_hat * scale, lam=lam * scale * scale,
                  tau_leaf_sd=c_tau / np.sqrt(tau_trees), mu_leaf_sd=sd_control / np.sqrt(mu_trees))

    # -- the chains ------------------------------------------------------------------------------
    chain_list = [CausalChain(problem, move_mix, rng, sampler=sampler) for rng in ss[:chains]]
    for chain in chain_list:
        chain.allocate(draws)

    def run_chunk(chain, _index, first, n_iter):
        chain.run(first, n_iter, tune, thin)

    done = run_chains(chain_list, tune + draws * thin, run_chunk, threads=threads, progress=progress)
    kept = min(draws, min(max(0, (d - tune + thin - 1) // thin) for d in done))
    if kept == 0:
        raise KeyboardInterrupt("sampling was interrupted before the first kept draw")
    collected = [chain.collect(kept) for chain in chain_list]
    del chain_list
    forests = {}
    for name, binned, names in (("mu", mu_binned, list(design.predictors) + ["propensity"]),
                                ("tau", tau_binned, list(tau_design.predictors))):
        stores = [c[name]["store"] for c in collected]
        forests[name] = (np.concatenate([s.var for s in stores]), np.concatenate([s.cut for s in stores]),
                         np.concatenate([s.value for s in stores]), np.concatenate([s.tree_nodes for s in stores]),
                         binned, names)
    idata = build_causal_idata(
        params=np.concatenate([c["params"] for c in collected]), chains=chains, forests=forests,
        counts=np.concatenate([c["counts"] for c in collected]), y=y, z=z, w=w, propensity=pi, index=index,
        designs={"mu": design, "tau": tau_design}, config=config)
    fit = CausalFit(idata, {"mu": design, "tau": tau_design}, propensity_fit)
    if re_data is not None:
        taken = {k: np.stack([c["re"][k] for c in collected]) for k in ("re_alpha", "re_xi", "re_sigma_xi")}
        attach_random_effects(fit, taken, re_data.group, re_data.basis)
    fit.warn_common_support(stacklevel=3)  # the caller of bcf()
    if check_mixing and chains > 1 and likelihood:
        r_hat = fit.summary()["r_hat"]
        bad = {k: float(v) for k, v in r_hat.items() if k in ("ATE", "sigma") and v > RHAT_WARN}
        if bad:
            warnings.warn(f"the chains have not mixed: split R-hat {', '.join(f'{k} {v:.3f}' for k, v in bad.items())} "
                          f"(above {RHAT_WARN}); run longer (larger tune and draws) before trusting the effects",
                          MixingWarning, stacklevel=2)
    return fit


def _random_effects_design(formula: str, visible, na_action: str, weights, tau_formula):
    """The mu design, X, y, row index and random effects of a formula with a bar term (``y ~ x1 + (1 | g)``):
    the grouping factor is a tree predictor only when it is also a term of its own.

    Raises
    ------
    ArgumentError
        Random effects with ``weights`` (the random-effects block has no observation weights) or a bar term
        in ``tau_formula`` (the effects are prognostic).
    """
    from ..formula import build_design
    from ..formula.random_effects import build_random_effects_design

    if weights is not None:
        raise ArgumentError(f"weights={weights!r} cannot be combined with random effects in bcf yet (the random-"
                            "effects block has no observation weights): drop the weights or the (... | g) term")
    if tau_formula is not None and "|" in tau_formula:
        raise ArgumentError(f"tau_formula={tau_formula!r} may not hold a random-effect term: the random effects are "
                            "prognostic (part of mu); put (1 | g) in the formula")
    design, x_mu, y, re_data = build_random_effects_design(formula, visible, na_action=na_action)
    # the rows kept: those with a group (and slopes) and, among them, those the fixed design keeps
    keep = visible[[re_data.spec.group, *re_data.spec.slopes]].notna().all(axis=1).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped rows were reported by build_random_effects_design
        _, _, _, index = build_design(design.expanded_formula, visible[keep], na_action=na_action, return_index=True)
    if len(index) != len(y):  # pragma: no cover - the two builders agree on the rows
        raise DataError("the rows of the random-effect term and of the predictors do not match; drop the rows with "
                        "missing values first")
    return design, x_mu, y, index, re_data


def _quoted(name: str) -> str:
    return name if name.isidentifier() else f"`{name}`"
