"""The post-fit mixing check: one warning naming the scalar quantities whose chains disagree
(rank-normalised split R-hat above ``RHAT_MAX``) or carry too little information (bulk ESS
below ``ESS_PER_CHAIN_MIN`` per chain), with what to do about it. The thresholds are PyMC's
(Vehtari et al. 2021, "Rank-normalization, folding, and localization").

Import rule: imports this package's ``errors`` and the ``Fit`` of ``posterior.fit`` (duck-typed:
only ``summary()``, ``posterior`` and ``config`` are used).
"""

from __future__ import annotations

import math
import warnings

import pandas as pd

from ..errors import MixingWarning

RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100


def mixing_problems(fit) -> pd.DataFrame:
    """The scalar quantities of ``fit`` that fail the mixing thresholds.

    Parameters
    ----------
    fit : Fit

    Returns
    -------
    pandas.DataFrame
        One row per failing quantity (``sigma``, ``n_leaves``, ...), columns ``r_hat``,
        ``ess_bulk`` and ``ess_per_chain``; empty when every quantity passes. Quantities whose
        diagnostics are undefined (constant draws, fewer than 4 draws per chain) are skipped.
    """
    chains = int(fit.posterior.sizes["chain"])
    table = fit.summary()[["r_hat", "ess_bulk"]].copy()
    table["ess_per_chain"] = table["ess_bulk"] / chains
    bad_rhat = table["r_hat"] > RHAT_MAX
    bad_ess = table["ess_per_chain"] < ESS_PER_CHAIN_MIN
    return table[bad_rhat | bad_ess]


# what to try instead, per model type (the samplers that fit it)
_OTHER_SAMPLERS = {
    "cart": "'tempered' escapes local modes of a single tree, 'ctmc' and 'smc' give weighted draws",
    "bart": "'pg' makes larger moves inside BART, 'tempered' runs a ladder of heated chains",
    "soft_tree": "'hmc_df' and 'hmc_dfi' differ in how a split picks its predictor",
}


def mixing_message(fit, problems: pd.DataFrame) -> str:
    """The text of the mixing warning for the rows of ``mixing_problems``."""
    parts = []
    for name, row in problems.iterrows():
        rhat = "nan" if math.isnan(row["r_hat"]) else f"{row['r_hat']:.3f}"
        parts.append(f"{name} (r_hat {rhat}, bulk ESS {row['ess_bulk']:.0f} = {row['ess_per_chain']:.0f} per chain)")
    cfg = fit.config
    return (
        f"the chains have not mixed: {'; '.join(parts)}; the thresholds are r_hat <= {RHAT_MAX} and bulk ESS >= "
        f"{ESS_PER_CHAIN_MIN} per chain. Do not trust the intervals yet: run a longer tune (tune={cfg['tune']} now) "
        f"and more draws (draws={cfg['draws']} now), or another sampler (sampler={cfg['sampler']!r} now; "
        f"{_OTHER_SAMPLERS.get(cfg['model_type'], 'see the README')}). "
        "Silence this check with check_mixing=False or "
        "warnings.filterwarnings('ignore', category=bartpy_suite.MixingWarning)"
    )


def warn_if_poor_mixing(fit, stacklevel: int = 2) -> pd.DataFrame:
    """Issue one ``MixingWarning`` when ``mixing_problems(fit)`` is not empty; return it."""
    problems = mixing_problems(fit)
    if len(problems):
        warnings.warn(mixing_message(fit, problems), MixingWarning, stacklevel=stacklevel + 1)
    return problems
