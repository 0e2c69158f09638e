"""The post-fit mixing check: graded by what users consume, with advice that fits the sampler.

What is monitored (``mixing_report``):

- **f(x) at up to ``MONITOR_ROWS`` training rows** (regression; evenly spaced row indices, so
  the choice is deterministic), computed from the stored trees by the fit's own prediction
  code; for a classifier the **class probabilities** at those rows (the second class only when
  there are two); and **sigma** where the model has one. These are what ``predict()`` and
  ``summary()`` report, so they grade the message.
- The tree-size quantities (``n_leaves``, ``depth``; BART's ``mean_leaves``, ``mean_depth``)
  as **supporting evidence only**: they are named in a message but never set its severity.
  A tree's size can wander between equally good trees of different sizes while f(x) and sigma
  are well estimated (the issue behind this module: ``mean_leaves`` r_hat 1.0104 with sigma's
  ESS at 786 gave a warning that told users not to trust their intervals).

Each quantity gets the rank-normalised split R-hat and bulk ESS of Vehtari et al. (2021),
through ``posterior.weighted`` so that weighted draws (``ctmc`` CART, ``smc``) are handled as
``Fit.summary()`` handles them: the weighted split R-hat and the delta-method ESS for
``ctmc``'s 1/Lambda weights; for ``smc``'s independent weighted particles the sum over islands
of Kish's ESS, and an R-hat that compares the islands.

Grades (``SEVERITIES``), from the worst monitored quantity. The thresholds come from two
measurements: ``benchmarks/first_hour_rhat_chance.py`` (``results/first_hour_rhat_chance.md``:
for 4 chains that sample the same law with bulk ESS about 113 per chain, the largest R-hat of 25
quantities exceeded 1.01 in every replication and 1.05 in none, at most 1.031; with ESS about 54
per chain it exceeded 1.05 in 18%) and ``benchmarks/first_hour.py`` (``results/first_hour.md``:
98 default fits on seven real data sets):

- ``"ok"``: every r_hat <= 1.01 and bulk ESS >= 100 per chain (Vehtari et al.'s bar for
  final inferences). Silent.
- ``"note"``: borderline, r_hat <= ``RHAT_WARN`` and ESS >= ``ESS_WARN`` per chain. With 20-50
  monitored quantities the largest of their r_hat exceeds 1.01 by chance even for chains that
  agree (r_hat - 1 is of the order 1 / ESS per split chain), so this is where short but sound
  runs land. Logged, not warned: one line ``bartpy_suite: note: ...`` on standard error
  through the ``logging`` logger ``"bartpy_suite"`` at INFO level (see ``emit_note``), not a
  warning category users must silence.
- ``"warning"``: ``MixingWarning``. The chains disagree beyond chance, or carry few effective
  draws: intervals are rough.
- ``"strong"``: ``StrongMixingWarning`` (a ``MixingWarning``): r_hat > ``RHAT_STRONG`` or ESS <
  ``ESS_STRONG`` per chain on what users consume: the chains sit in different places, do not
  use the predictions yet. On the real data sets this is what CART's chains do: their best
  trees differ by tens of nats of log posterior (Boston, ``cgm``: -416, -393, -381, -375).
  Below 5 effective draws per chain a split chain holds about 2 and R-hat itself is noise;
  between 5 and 50 (BART on Boston: f ESS 6-7 per chain, r_hat 1.10) it is a warning.

Borderline cases: a quantity exactly at a threshold passes it (the tests are strict ``>`` and
``<``); NaN diagnostics (one chain's r_hat, constant draws) are not counted against the fit.
- ``"undefined"``: fewer than ``MIN_DRAWS`` draws per chain; a ``MixingWarning`` saying so (the
  diagnostics need at least 4 draws per chain).

Import rule: imports numpy, pandas, the package's ``errors``, ``posterior.weighted`` and the sampler
registry (the sampler's family picks the advice); the ``Fit`` is duck-typed (``posterior``,
``config``, ``weights``, ``sample_stats`` and its ``leaf_model``).
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import MixingWarning, StrongMixingWarning
from ..samplers.mh import ROTATE_PERTURB_MOVES
from ..samplers.registry import SAMPLERS
from .weighted import MIN_DRAWS, kish_ess, weighted_ess, weighted_rhat

#: Vehtari et al. (2021): r_hat below 1.01 and bulk ESS above 100 per chain for final inferences.
RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100
#: Above these (r_hat) or below (ESS per chain) a borderline note becomes a ``MixingWarning``.
RHAT_WARN = 1.05
ESS_WARN = 50
#: Past these, a ``StrongMixingWarning``: the chains disagree about f(x), sigma or the classes.
RHAT_STRONG = 1.2
ESS_STRONG = 5
#: Training rows at which f(x) (or the class probabilities) is monitored.
MONITOR_ROWS = 24
SEVERITIES = ("ok", "note", "warning", "strong", "undefined")
#: Tree-size quantities: reported as supporting evidence, never graded.
TREE_SIZE = ("n_leaves", "depth", "mean_leaves", "mean_depth")

logger = logging.getLogger("bartpy_suite")


@dataclass
class MixingReport:
    """What the mixing check measured and concluded.

    Attributes
    ----------
    severity : str
        One of ``SEVERITIES``.
    table : pandas.DataFrame
        One row per monitored quantity (``f[17]``, ``prob_yes[17]``, ``sigma``, ``n_leaves``,
        ...); columns ``kind`` ("f", "prob", "sigma" or "tree size"), ``r_hat``, ``ess_bulk``,
        ``ess_per_chain`` and ``grade`` (the quantity's own grade; "supporting" for tree sizes).
    message : str
        The text of the note or warning ("" when ``severity == "ok"``).
    draws_per_chain, chains : int
    """

    severity: str
    table: pd.DataFrame
    message: str = ""
    draws_per_chain: int = 0
    chains: int = 0
    details: dict = field(default_factory=dict)

    @property
    def graded(self) -> pd.DataFrame:
        """The rows that set the severity (f, prob, sigma)."""
        return self.table[self.table["kind"] != "tree size"]


def monitored_rows(n: int, k: int = MONITOR_ROWS) -> np.ndarray:
    """Indices of the training rows whose f(x) is monitored: ``min(n, k)`` evenly spaced rows,
    first and last included (deterministic, independent of the draws)."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def _consumed_samples(fit, rows: np.ndarray) -> dict[str, tuple[str, np.ndarray]]:
    """``{name: (kind, samples (chain, draw))}`` of f(x) or class probabilities at ``rows``."""
    chains, draws = int(fit.posterior.sizes["chain"]), int(fit.posterior.sizes["draw"])
    out = fit.leaf_model.draws(fit.leaf_model.training_inputs(rows))
    result = {}
    if out.ndim == 2:  # f(x): (samples, rows)
        for j, r in enumerate(rows):
            result[f"f[{r}]"] = ("f", out[:, j].reshape(chains, draws))
        return result
    labels = [str(c) for c in fit.config.get("class_labels", range(out.shape[-1]))]
    classes = range(1, 2) if out.shape[-1] == 2 else range(out.shape[-1])
    for j, r in enumerate(rows):
        for c in classes:
            result[f"prob_{labels[c]}[{r}]"] = ("prob", out[:, j, c].reshape(chains, draws))
    return result


def grade_quantity(r_hat: float, ess_per_chain: float) -> str:
    """Grade (``"ok"``, ``"note"``, ``"warning"``, ``"strong"``) of one monitored quantity; NaN
    diagnostics (one chain's r_hat) pass."""
    bad = lambda value, limit, above: (not math.isnan(value)) and (value > limit if above else value < limit)  # noqa: E731
    if bad(r_hat, RHAT_STRONG, True) or bad(ess_per_chain, ESS_STRONG, False):
        return "strong"
    if bad(r_hat, RHAT_WARN, True) or bad(ess_per_chain, ESS_WARN, False):
        return "warning"
    if bad(r_hat, RHAT_MAX, True) or bad(ess_per_chain, ESS_PER_CHAIN_MIN, False):
        return "note"
    return "ok"


def diagnose(samples: dict, weights: np.ndarray, kish: bool) -> pd.DataFrame:
    """Table of r_hat, bulk ESS and grades for ``{name: (kind, (chain, draw) array)}``.

    ``weights`` (chain, draw) are the fit's; ``kish`` selects ``smc``'s ESS (the sum over
    islands of Kish's ESS of the island's weights, the same for every quantity, as in
    ``Fit.summary()``).
    """
    chains = weights.shape[0]
    kish_total = float(sum(kish_ess(weights[c]) for c in range(chains))) if kish else None
    rows = {}
    with np.errstate(all="ignore"):
        for name, (kind, arr) in samples.items():
            arr = np.asarray(arr, dtype=float)
            if not np.isfinite(arr).all() or np.ptp(arr) == 0:
                continue  # constant: nothing to mix (e.g. a row every draw puts in the same leaf)
            r_hat = weighted_rhat(arr, weights)
            ess = kish_total if kish else weighted_ess(arr, weights)
            grade = "supporting" if kind == "tree size" else grade_quantity(r_hat, ess / chains)
            rows[name] = {"kind": kind, "r_hat": r_hat, "ess_bulk": ess, "ess_per_chain": ess / chains,
                          "grade": grade}
    columns = ["kind", "r_hat", "ess_bulk", "ess_per_chain", "grade"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def severity_of(table: pd.DataFrame) -> str:
    """The worst grade among the graded rows of a ``diagnose`` table (tree sizes left out)."""
    order = ("ok", "note", "warning", "strong")
    return max(table.loc[table["kind"] != "tree size", "grade"], key=order.index, default="ok")


def mixing_report(fit, rows: int = MONITOR_ROWS) -> MixingReport:
    """Measure how well the chains of ``fit`` mixed on what users consume, and grade it.

    Parameters
    ----------
    fit : Fit
        Any fit of the package (CART, BART, soft tree; weighted samplers included).
    rows : int
        How many training rows to monitor f(x) (or the class probabilities) at.

    Returns
    -------
    MixingReport
        ``severity``, the per-quantity ``table`` and the ``message`` the check would issue.
    """
    chains, draws = int(fit.posterior.sizes["chain"]), int(fit.posterior.sizes["draw"])
    if draws < MIN_DRAWS:
        empty = pd.DataFrame(columns=["kind", "r_hat", "ess_bulk", "ess_per_chain", "grade"])
        report = MixingReport("undefined", empty, draws_per_chain=draws, chains=chains)
        report.message = _undefined_message(fit, draws)
        return report
    n = int(fit.idata["observed_data"].sizes[next(iter(fit.idata["observed_data"].sizes))])
    samples = _consumed_samples(fit, monitored_rows(n, rows))
    if "sigma" in fit.posterior.data_vars and fit.posterior["sigma"].dims == ("chain", "draw"):
        samples["sigma"] = ("sigma", fit.posterior["sigma"].values)
    for name in TREE_SIZE:
        if name in fit.posterior.data_vars and fit.posterior[name].dims == ("chain", "draw"):
            samples[name] = ("tree size", fit.posterior[name].values)
    kish = fit.particle_weighted
    table = diagnose(samples, np.asarray(fit.weights.values, dtype=float), kish)
    severity = severity_of(table)
    report = MixingReport(severity, table, draws_per_chain=draws, chains=chains)
    if severity != "ok":
        report.message = _message(fit, report)
    return report


def mixing_problems(fit) -> pd.DataFrame:
    """The monitored quantities of ``fit`` that miss r_hat <= 1.01 or bulk ESS >= 100 per chain.

    Parameters
    ----------
    fit : Fit

    Returns
    -------
    pandas.DataFrame
        One row per such quantity (``f[17]``, ``prob_<label>[17]``, ``sigma``, and the
        tree-size quantities ``n_leaves``, ... as supporting evidence), columns ``kind``,
        ``r_hat``, ``ess_bulk``, ``ess_per_chain`` and ``grade``; empty when every quantity
        passes. Quantities whose diagnostics are undefined (constant draws, fewer than 4 draws
        per chain) are left out.
    """
    table = mixing_report(fit).table
    bad = (table["r_hat"] > RHAT_MAX) | (table["ess_per_chain"] < ESS_PER_CHAIN_MIN)
    return table[bad]


# -- messages ------------------------------------------------------------------------------------
def _fmt(row) -> str:
    rhat = "nan" if math.isnan(row["r_hat"]) else f"{row['r_hat']:.3f}"
    return f"r_hat {rhat}, bulk ESS {row['ess_bulk']:.0f} = {row['ess_per_chain']:.0f} per chain"


def _advice(fit, severity: str) -> str:
    """What to try, for the sampler and model of ``fit``."""
    cfg = fit.config
    sampler, model = cfg["sampler"], cfg["model_type"]
    family = SAMPLERS[sampler].family if sampler in SAMPLERS else None  # "mh": cgm, grow_prune; "hmc": soft
    longer = f"a longer tune (tune={cfg['tune']} now) and more draws (draws={cfg['draws']} now)"
    more_draws = f"more draws (draws={cfg['draws']} now)"
    if sampler == "gfr":  # approximate (spec gfr.md 10 and pitfall 15): more sweeps give no posterior draws
        search = "gfr's sweeps are a stochastic search, not posterior draws"
        if severity == "note":
            return f"for posterior intervals, init='gfr' with sampler='grow_prune' ({search})"
        return f"init='gfr' with sampler='grow_prune' for posterior intervals ({search})"
    if severity == "note":
        if sampler == "smc":
            return f"for final numbers, more particles per island (draws={cfg['draws']} now) or more chains"
        return f"for final numbers, {more_draws}"
    opts = cfg.get("sampler_options") or {}
    if family == "mh" and cfg.get("leaf_model") in ("multinomial", "ordinal", "normal_re"):
        # only the MH samplers fit these models: no other sampler to suggest
        return f"{longer}, or thinning (thin={cfg['thin']} now)"
    if family == "mh":
        other = ("sampler='tempered' (parallel tempering: crosses between the separated modes of a single tree "
                 "that local moves do not)" if model == "cart" else "sampler='pg' (particle Gibbs: proposes whole "
                 "new trees)")
        return f"{longer}, or {other}"
    if sampler == "tempered":
        moves = opts.get("moves") or {}
        if model == "cart" and not any(moves.get(m, 0.0) > 0 for m in ("rotate", "perturb")):
            # on cgm1998 the rung count (6-16) changed nothing per MH step; these moves did
            return (f"{longer}, or Pratola's rotate and perturb moves inside the rungs (sampler_options="
                    f"{{'moves': {ROTATE_PERTURB_MOVES}}}: on cgm1998 the runs agreed after a quarter of the MH "
                    "steps, benchmarks/results/tempered_agreement.md)")
        rungs = opts.get("rungs")
        if rungs is None and opts.get("temperatures") is None:  # the sampler's defaults (its 'rungs' option)
            rungs = 8 if model == "bart" else (15 if opts.get("ladder") == "shrinkage" else 16)
        if rungs is None:
            return f"{longer}, or more rungs (a longer list of temperatures)"
        return f"{longer}, or more rungs (sampler_options={{'rungs': {2 * int(rungs)}}}; {rungs} now)"
    if sampler == "pg":
        particles = opts.get("particles") or 10
        return (f"{longer}, or more particles (sampler_options={{'particles': {2 * int(particles)}}}; {particles} "
                "now) or ancestor_sampling=True")
    if sampler == "smc":
        return (f"smc has no tune: more particles per island (draws={cfg['draws']} now; each chain is one island) "
                "and more islands (chains), or an MCMC sampler ('tempered')")
    if sampler == "ctmc":
        other = "sampler='tempered'" if model == "cart" else "sampler='grow_prune' or 'pg'"
        return f"{longer}, or {other}"
    if family == "hmc":
        return (f"a longer tune (tune={cfg['tune']} now: the soft tree's topology is found during tune) and more "
                f"draws (draws={cfg['draws']} now)")
    return f"{longer}, or another sampler (see 'Which sampler?' in docs/guide/samplers.md)"


_SILENCE = ("Silence this check with check_mixing=False or "
            "warnings.filterwarnings('ignore', category=bartpy_suite.MixingWarning)")


def _undefined_message(fit, draws: int) -> str:
    return (f"cannot check mixing: the diagnostics (r_hat, ESS) need at least {MIN_DRAWS} draws per chain and this "
            f"fit has {draws}; fit.summary() shows NaN for them. Run draws >= {MIN_DRAWS} (draws >= 100 per chain "
            f"for intervals). {_SILENCE}")


def _message(fit, report: MixingReport) -> str:
    graded = report.graded
    worst = graded.sort_values("r_hat", ascending=False, na_position="last")
    lowest = graded.sort_values("ess_per_chain")
    consumed = graded[graded["kind"] != "sigma"]
    what = "class probabilities" if (consumed["kind"] == "prob").any() else "f(x)"
    off = consumed[consumed["grade"] != "ok"]
    parts = []
    if len(consumed):
        parts.append(f"{what} at {len(off)} of {len(consumed)} monitored training rows")
    if "sigma" in graded.index and graded.loc["sigma", "grade"] != "ok":
        parts.append(f"sigma ({_fmt(graded.loc['sigma'])})")
    head = " and ".join(parts)
    worst_r, low_e = worst.iloc[0], lowest.iloc[0]
    detail = f"worst r_hat: {worst.index[0]} ({_fmt(worst_r)})"
    if lowest.index[0] != worst.index[0]:
        detail += f"; fewest effective draws: {lowest.index[0]} ({_fmt(low_e)})"
    sizes = report.table[report.table["kind"] == "tree size"]
    size_text = ""
    if len(sizes):
        size_text = " Tree size, as supporting evidence: " + ", ".join(
            f"{name} {_fmt(row)}" for name, row in sizes.iterrows()) + "."
    one_chain = " (r_hat needs 2 chains or more)" if report.chains < 2 else ""
    advice = _advice(fit, report.severity)
    if report.severity == "note":
        return (f"borderline mixing on {head}: {detail}{one_chain}; the bar for final inferences is r_hat <= "
                f"{RHAT_MAX} and bulk ESS >= {ESS_PER_CHAIN_MIN} per chain. Estimates and intervals are fine for "
                f"exploring; {advice}. mixing_report(fit) has the table.")
    if report.severity == "strong":
        lead = (f"the chains have not mixed: they disagree about {head} ({detail}{one_chain}). Do not use the "
                "predictions or intervals yet")
    else:
        lead = (f"the chains have not mixed well on {head} ({detail}{one_chain}); intervals are rough (the bar for "
                f"final inferences is r_hat <= {RHAT_MAX} and bulk ESS >= {ESS_PER_CHAIN_MIN} per chain)")
    return f"{lead}.{size_text} Try {advice}. {_SILENCE}"


# -- issuing ----------------------------------------------------------------------------------------
def emit_note(message: str) -> None:
    """Log ``message`` at INFO on the ``"bartpy_suite"`` logger; when logging is not configured
    (no handler on the logger or its ancestors) and that logger's level is not set above INFO,
    print it as ``bartpy_suite: note: ...`` to standard error instead, as PyMC shows its notes.

    A note is not a warning: ``-W error`` and warning filters do not see it. Silence notes with
    ``logging.getLogger("bartpy_suite").setLevel(logging.WARNING)`` or ``check_mixing=False``.
    """
    if logger.hasHandlers():
        logger.info(message)
    elif logger.level == logging.NOTSET or logger.level <= logging.INFO:
        print(f"bartpy_suite: note: {message}", file=sys.stderr)


def warn_if_poor_mixing(fit, stacklevel: int = 2) -> MixingReport:
    """Run ``mixing_report(fit)`` and issue its message by severity: nothing, a note
    (``emit_note``), a ``MixingWarning`` or a ``StrongMixingWarning``; return the report."""
    report = mixing_report(fit)
    if report.severity == "note":
        emit_note(report.message)
    elif report.severity in ("warning", "undefined"):
        warnings.warn(report.message, MixingWarning, stacklevel=stacklevel + 1)
    elif report.severity == "strong":
        warnings.warn(report.message, StrongMixingWarning, stacklevel=stacklevel + 1)
    return report
