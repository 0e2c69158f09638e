"""The five seed papers' tables and quantitative claims against the package's results files.

Writes ``benchmarks/results/replication.md``: for each paper, each table and quantitative claim,
the paper's number, ours before the re-measurements of issue 28 (the results files at commit
``BEFORE``, 9a62b57, the last commit before that work began) and ours now, each with one of
reproduced / partly / not reproduced (cause) / not attempted (why), and the counts per paper.

The statuses and their wording are judgements written here by hand (``CLAIMS``); what the script
adds is a check and the counts. Every number quoted as ours carries, in ``quotes``, strings that
must occur verbatim in the linked results file (now: the file in this checkout; before: the file
at ``BEFORE``, read with ``git show``). If one is missing the script stops with the claim and the
string, so the index cannot cite a number that no results file holds. The counts are computed
from the statuses.

Run from the repository root: ``python3 benchmarks/replication_table.py`` (``--check`` only
checks the quotes and prints the counts).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
BEFORE = "9a62b57"
STATUSES = ("reproduced", "partly", "not reproduced", "not attempted")
PAPERS = {
    "pg": "Lakshminarayanan, Roy & Teh (2015), Particle Gibbs for BART (`002_*.txt`)",
    "ctmc": "Mohammadi, Pratola & Kaptein (2020), Continuous-time birth-death MCMC (`004_*.txt`)",
    "rjhmc": "Cochrane, Wills & Johnson, RJHMC-Tree (`000_*.txt`)",
    "thesis": "Gattiglio, Tempered stochastic search of Bayesian CART (MSc thesis, `001_*.txt`)",
    "cgm_notes": "Lecture notes on Chipman, George & McCulloch (1998) (`003_*.txt`)",
}


@dataclass(frozen=True)
class Ours:
    """One side (before or now) of a claim: status, what we have, the file and its quotes, and further
    (file, quotes) pairs when the numbers come from more than one results file."""

    status: str
    text: str
    file: str | None = None
    quotes: tuple[str, ...] = ()
    more: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def sources(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every (file, quotes) pair of this side."""
        return ([(self.file, self.quotes)] if self.file is not None else []) + list(self.more)


@dataclass(frozen=True)
class Claim:
    """A table cell group or sentence of a paper with its number and ours before and now."""

    paper: str
    where: str
    claim: str
    paper_value: str
    before: Ours
    now: Ours
    notes: tuple[str, ...] = field(default=())


NA = "not attempted"

CLAIMS: list[Claim] = [
    # ---------------------------------------------------------------- PG-BART
    Claim("pg", "Table 1, D = 2, 3", "CGM's ESS of the log-likelihood above PG's when the true tree is shallow",
          "CGM 751.66 / 762.96, PG 259.11 / 666.71",
          Ours("partly", "D = 2: cgm 500.7 > pg 392.5; D = 3: cgm 107.7 < pg 256.2 (Bayesian CART with sigma "
                         "integrated out, not the paper's BART m = 1)",
               "pg_hypercube.md", ("| 2 | cgm | 500.7 |", "| 2 | pg | 392.5 |", "| 3 | cgm | 107.7 |",
                                   "| 3 | pg | 256.2 |")),
          Ours("partly", "the paper's model and grid: D = 3 as the paper (cgm 685.1 > pg 641.4); at D = 2 every "
                         "sampler mixes and pg 767.9 is a little above cgm 707.6 (paper: PG far below)",
               "pg_bart_hypercube.md", ("| 3 | uniform | cgm | 685.1 |", "| 3 | uniform | pg | 641.4 |",
                                        "| 2 | uniform | pg | 767.9 |", "| 2 | uniform | cgm | 707.6 |"))),
    Claim("pg", "Table 1, D = 4", "PG's ESS of the log-likelihood", "686.79",
          Ours("not reproduced", "61.9 (CART, systematic resampling, autocorrelation ESS)", "pg_hypercube.md",
               ("| 4 | pg | 61.9 |",)),
          Ours("partly", "438.9 by CODA (64% of the paper's; single chains 16.1-972.6; the root never changed)",
               "pg_bart_hypercube.md", ("| 4 | uniform | pg | 438.9 | 16.1-972.6 |",))),
    Claim("pg", "Table 1, D = 5", "PG's ESS of the log-likelihood", "667.27",
          Ours("not reproduced", "286.4 (43%; CART model)", "pg_hypercube.md", ("| 5 | pg | 286.4 |",)),
          Ours("not reproduced", "192.5 over 12 chains (29%); with the authors' code's data settings (no label "
                                 "noise, sigma_hat = sd(y)) 98.8 to 271.8: none reaches half (334); the free "
                                 "particles' lineages collapse onto the reference's early stages and the root never "
                                 "changes",
               "pg_bart_hypercube_pgbart_6sets.md", ("| 5 | 0.01 | least squares | uniform | pg | 192.5 |",
                                                     "| 5 | 0.0 | sd(y) | uniform | pg | 98.8 |",
                                                     "| 5 | 0.01 | sd(y) | uniform | pg | 271.8 |"))),
    Claim("pg", "Table 1, D = 7", "PG's ESS of the log-likelihood", "422.96",
          Ours(NA, "D = 7 not run", "pg_hypercube.md", ("Not run: D = 7",)),
          Ours("partly", "128.8 over 12 chains (30%); with the authors' code's noiseless hypercube 266.7, and 357.3 "
                         "with sigma_hat = sd(y) as well, above half (211), but chain medians stay near 140, the "
                         "settings differ by less than two standard errors and the root never changes",
               "pg_bart_hypercube_pgbart_6sets.md", ("| 7 | 0.01 | least squares | uniform | pg | 128.8 |",
                                                     "| 7 | 0.0 | least squares | uniform | pg | 266.7 |",
                                                     "| 7 | 0.0 | sd(y) | uniform | pg | 357.3 |"))),
    Claim("pg", "Table 1, D = 4, 5, 7", "CGM's and GrowPrune's ESS are tiny for deep trees",
          "CGM 14.01 / 2.92 / 1.16, GrowPrune 11.76 / 1.35 / 1.78",
          Ours("partly", "D = 4: cgm 2.4, grow_prune 1.5; D = 5: 1.8 and 9.2; D = 7 not run", "pg_hypercube.md",
               ("| 4 | cgm | 2.4 |", "| 4 | grow_prune | 1.5 |", "| 5 | grow_prune | 9.2 |")),
          Ours("partly", "D = 5, 7 as the paper (cgm 5.4 / 2.2, grow_prune 3.0 / 4.1); at D = 4 cgm 116.4 and "
                         "grow_prune 220.1, one chain of six mixing (652.5, 774.4)",
               "pg_bart_hypercube.md", ("| 5 | uniform | cgm | 5.4 |", "| 7 | uniform | cgm | 2.2 |",
                                        "| 4 | uniform | cgm | 116.4 | 1.5-652.5 |",
                                        "| 4 | uniform | grow_prune | 220.1 | 2.1-774.4 |"))),
    Claim("pg", "Table 1 / section 4.1", "PG's ESS much higher than CGM's for deep trees (D >= 4)",
          "PG / CGM 49x, 229x, 365x at D = 4, 5, 7",
          Ours("partly", "26x at D = 4, 162x at D = 5, D = 7 not run", "pg_hypercube.md",
               ("| 4 | 26.14 (49.02) |", "| 5 | 162.36 (228.52) |")),
          Ours("partly", "direction holds, smaller: 438.9 / 116.4 = 3.8x, 173.1 / 5.4 = 32x, 62.5 / 2.2 = 28x",
               "pg_bart_hypercube.md", ("| 4 | uniform | pg | 438.9 |", "| 4 | uniform | cgm | 116.4 |",
                                        "| 5 | uniform | cgm | 5.4 |", "| 7 | uniform | cgm | 2.2 |"))),
    Claim("pg", "Table 2", "ESS per second: CGM ahead at D = 2, 3, PG ahead at D = 4, 5, 7",
          "PG / CGM 0.049, 0.119, 5.6, 12.9, 10.1",
          Ours("partly", "0.107, 0.089 (CGM ahead, as the paper); 1.027 at D = 4, 3.897 at D = 5; D = 7 not run",
               "pg_hypercube.md", ("| 2 | 0.78 (0.34) | 0.107 (0.049) |", "| 4 | 26.14 (49.02) | 1.027 (5.613) |",
                                   "| 5 | 162.36 (228.52) | 3.897 (12.869) |")),
          Ours("partly", "the paper's model and grid, per CPU second of sampling: pg / cgm 0.073, 0.033 (CGM ahead "
                         "at D = 2, 3, as the paper), 0.086, 0.667 (CGM ahead at D = 4, 5: not), 1.489 at D = 7 (PG "
                         "ahead, smaller): a pg iteration costs 43x a cgm one at D = 4, the paper's about 9x",
               "pg_bart_hypercube.md", ("| 2 | uniform | 10053.7 | 137906.7 | 177913.4 | 0.073 |",
                                        "| 3 | uniform | 3717.0 | 111309.9 | 138014.1 | 0.033 |",
                                        "| 4 | uniform | 1351.7 | 15632.0 | 32680.1 | 0.086 |",
                                        "| 5 | uniform | 376.4 | 564.3 | 356.6 | 0.667 |",
                                        "| 7 | uniform | 63.6 | 42.7 | 151.9 | 1.489 |", "43x"))),
    Claim("pg", "Section 4.1, figure 3", "GrowPrune overestimates the number of leaves at D = 4", "true tree 16 leaves",
          Ours("reproduced", "grow_prune 34.0 leaves against 16", "pg_hypercube.md", ("34.0 (16)",)),
          Ours("reproduced", "grow_prune 30.1 leaves against 16", "pg_bart_hypercube.md", ("30.1 (16)",))),
    Claim("pg", "Section 4.1, figure 3", "PG converges faster to the posterior in test MSE (D = 4)",
          "figure only",
          Ours(NA, "no error to the true f was measured", None),
          Ours("not reproduced", "pg's RMSE to the true f is 1.760 against cgm's 0.365 and grow_prune's 0.293: "
                                 "pg's tree top stays frozen at its first draws",
               "pg_bart_hypercube.md", ("| 1.760 |", "| 0.365 |", "| 0.293 |"))),
    Claim("pg", "Table 4, CaliforniaHouses (D = 6)", "ESS of the log-likelihood, PG > GrowPrune > CGM",
          "PG 76.819, GrowPrune 34.849, CGM 18.956",
          Ours(NA, "real-data protocol never run", None),
          Ours("partly", "stand-in data (statsmodels' randhie, D = 9; the original is not available offline): pg 316.1 "
                         "ahead of grow_prune 198.4 and cgm 182.6 (cgm and grow_prune swap places)",
               "pg_bart_real.md", ("| pg | 316.1 |", "| cgm | 182.6 |", "| grow_prune | 198.4 |"))),
    Claim("pg", "Tables 4-5, YearPredictionMSD (D = 90), CTslices (D = 384)", "ESS and ESS/s, PG ahead at high D",
          "PG 76.766 / 11.838 ESS",
          Ours(NA, "real-data protocol never run", None),
          Ours("partly", "stand-ins modeldata ames (D = 73) and grants_other (D = 1,497, 0/1 response, Gaussian "
                         "BART): pg has the highest mean ESS on both, ames 17.3 against cgm 10.4 and grow_prune 9.0 "
                         "(first in 1 of 3 sets), grants 113.7 against 65.8 and 5.0 (first in 2 of 3)",
               "pg_bart_real_grants.md", ("| pg | 113.7 | 111.0 | 11.838 | 1.16 |",
                                          "| cgm | 65.8 | 41.7 | 2.511 | 2.15 |",
                                          "| grow_prune | 5.0 | 2.4 | 5.025 | 0.282 |"),
               more=(("pg_bart_real_ames.md", ("| pg | 17.3 |", "| cgm | 10.4 |", "| grow_prune | 9.0 |")),))),
    Claim("pg", "Table 5", "ESS per second: PG ahead of CGM (CaliforniaHouses: GrowPrune first)",
          "GrowPrune 48.8e-3, PG 16.7e-3, CGM 2.0e-3",
          Ours(NA, "real-data protocol never run", None),
          Ours("not reproduced", "pg is not ahead of cgm per CPU second at any width: grants (D = 1,497) cgm 2.15 > "
                                 "pg 1.16 > grow_prune 0.282; ames (D = 73) grow_prune 1.83 > cgm 0.57 > pg 0.221; "
                                 "randhie (D = 9) pg last too (ESS 316 in 110 CPU s per fit against cgm 183 in 15 and "
                                 "grow_prune 198 in 7). Our MH moves are cheap relative to pg's particle system. "
                                 "(The paper's order at D = 1,497 of the first grants run, cgm 0.23, came from our "
                                 "cgm counting every predictor's split rules at every node it scored: fixed with "
                                 "identical draws, 287 -> 32 CPU s per fit, cgm_wide_cost.md)",
               "pg_bart_real_grants.md", ("| pg | 113.7 | 111.0 | 11.838 | 1.16 |",
                                          "| grow_prune | 5.0 | 2.4 | 5.025 | 0.282 |",
                                          "| cgm | 65.8 | 41.7 | 2.511 | 2.15 |", "287 CPU s per"),
               more=(("pg_bart_real_ames.md", ("| pg | 17.3 | 4.9 | 76.766 | 0.221 |",
                                               "| cgm | 10.4 | 5.2 | 29.215 | 0.57 |",
                                               "| grow_prune | 9.0 | 3.6 | 21.656 | 1.83 |")),
                     ("pg_bart_real.md", ("| pg | 316.1 | 280.2 | 0.7901 | 110 |",
                                          "| cgm | 182.6 | 147.4 | 0.7898 | 15 |",
                                          "| grow_prune | 198.4 | 109.1 | 0.7896 | 7 |")),
                     ("cgm_wide_cost.md", ("| grants | 1497 | cgm | 120.9 | 9.7 |",))))),
    Claim("pg", "Section 4.2", "All samplers reach similar MSE and similar small trees", "text",
          Ours(NA, "real-data protocol never run", None),
          Ours("reproduced", "test RMSE 0.7901 / 0.7898 / 0.7896, 2.48-2.49 leaves per tree", "pg_bart_real.md",
               ("| pg | 316.1 | 280.2 | 0.7901 | 110 | 2.48 |", "| cgm | 182.6 | 147.4 | 0.7898 | 15 | 2.49 |"))),
    # ---------------------------------------------------------------- CT-MCMC
    Claim("ctmc", "Tables 1-3, MSE", "Every method reaches the same test MSE, the noise level",
          "1.02 (sd 1), 0.01 (sd 0.1), 1.02e-4 (sd 0.01)",
          Ours("partly", "similar at the first level (RJ-A 1.18, CT-A 1.15); the two lower levels ran noise "
                         "variances 0.1 and 0.01, not the paper's",
               "ctmc_wu.md", ("| RJ-A | ours | 1.18 |", "| CT-A | ours | 1.15 |")),
          Ours("partly", "sd 1: 0.988-1.15 for all methods (reproduced); sd 0.1 and 0.01 on our cut grid: "
                         "0.0025-0.243 against 0.01 and 1.02e-4 (RJ-A and CT-A stay in over-grown trees); on OpenBT's "
                         "grid of 100 evenly spaced cuts RJ-C reaches the noise floor (0.0098 and 0.000133 with beta "
                         "0.5), RJ-A does not (0.13, 0.092)",
               "ctmc_wu.md", ("| 1.11, 0.988, 1.15, 0.99, 0.991 |", "| 0.243, 0.0325, 0.12, 0.00952, 0.0286 |",
                              "| 0.145, 0.0231, 0.0942, 0.0025, 0.0401 |", "| RJ-C grid100 | ours | 0.0098 |",
                              "| RJ-C grid100 | ours | 0.000133 |", "| RJ-A grid100 | ours | 0.13 |",
                              "| RJ-A grid100 | ours | 0.092 |"))),
    Claim("ctmc", "Tables 1-3, ESS", "CT-A's ESS of the variable activities far above RJ-A's",
          "CT-A / RJ-A 11.2-13.7 (sd 1), 7.0-17.6 (lower noise)",
          Ours("reproduced", "8.1-10.2, 21-24, 29-32 (at noise variances, not sds)", "ctmc_wu.md",
               ("8.1-10.2 at\n  sigma^2 = 1 (paper 11-14), 21-24 at 0.1 (paper 11-18), 29-32 at 0.01",)),
          Ours("reproduced", "direction at every level and prior; size depends on the prior at sd 1: 4.41-6.20 "
                             "(beta 0.5), 18.50-39.66 (beta 2); 24.43-35.87 at lower noise (beta 0.5)",
               "ctmc_wu.md", ("| 0.5 | 1 | 4.41-6.20 |", "| 2 | 1 | 18.50-39.66 |", "| 0.5 | 0.1 | 24.43-33.43 |",
                              "| 0.5 | 0.01 | 27.37-35.87 |"))),
    Claim("ctmc", "Tables 1-3, ESS/s", "CT at least on par with RJ per second of computation",
          "CT-A / RJ-A on the activities 2.3-2.9 (sd 1), 1.5-3.6 (lower noise)",
          Ours("reproduced", "1.5-1.9, 3.5-4.0, 5.4-5.8 per second of wall time including each fit's fixed overhead",
               "ctmc_wu.md", ("CT-A / RJ-A on the activities 1.5-1.9 at sigma^2 = 1",)),
          Ours("partly", "per CPU second of sampling: 0.34-0.56 at sd 1 with beta 0.5 (CT behind), 1.52-3.09 with "
                         "beta 2, 2.25-3.44 at sd 0.1 and 0.01 (beta 0.5)",
               "ctmc_wu.md", ("| 0.5 | 1 | 4.41-6.20 | 0.34-0.56 |", "| 2 | 1 | 18.50-39.66 | 1.52-3.09 |",
                              "| 0.5 | 0.1 | 24.43-33.43 | 2.39-3.44 |", "| 0.5 | 0.01 | 27.37-35.87 | 2.25-2.93 |"))),
    Claim("ctmc", "Tables 1-3, ESS/s of sigma^2", "CT behind RJ per second on sigma^2", "CT-A / RJ-A 0.16-0.26",
          Ours("reproduced", "0.14-0.31", "ctmc_wu.md", ("ratio 0.14-0.31 here",)),
          Ours("reproduced", "0.08-0.25", "ctmc_wu.md", ("| 0.5 | 1 | 4.41-6.20 | 0.34-0.56 | 0.25 |",
                                                         "| 2 | 0.1 | 573.12-660.90 | 41.18-48.17 | 0.08 |"))),
    Claim("ctmc", "Tables 1-3, unique trees", "CT-A visits many more unique trees than RJ-A",
          "11.44 vs 1.83 (sd 1; unit not stated)",
          Ours("reproduced", "13,017 vs 2,913", "ctmc_wu.md", ("13,017 vs 2,913",)),
          Ours("reproduced", "13,610 vs 2,729 (sd 1, beta 0.5)", "ctmc_wu.md", ("| 13,610 |", "| 2,729 |"))),
    Claim("ctmc", "Tables 1-3, activity", "Variable activity near the analytic (0.3, 0.4, 0.3)",
          "CT-A (0.28, 0.43, 0.28)",
          Ours("reproduced", "CT-A (0.281, 0.411, 0.308)", "ctmc_wu.md", ("| 0.281 | 0.411 | 0.308 |",)),
          Ours("partly", "CT-A (0.34, 0.354, 0.305) with beta 0.5 and (0.357, 0.36, 0.282) with beta 2 at sd 1: x2 "
                         "below 0.4",
               "ctmc_wu.md", ("| 0.34 | 0.354 | 0.305 |", "| 0.357 | 0.36 | 0.282 |"))),
    Claim("ctmc", "Tables 1-3, CT-B / CT-C", "Rotate (CT-B) raises CT's ESS; CT-C best overall",
          "CT-B / CT-A 1.9-3.6 on the activities",
          Ours("not reproduced", "CT-B / CT-A 0.21-0.26 (sd 1), 0.04-0.08 (lower noise)", "ctmc_wu.md",
               ("CT-B / CT-A\n  is 0.21-0.26",)),
          Ours("not reproduced", "CT-B / CT-A 0.01-0.38, CT-C / CT-A 0.00-0.20 with change of variable (0.00-0.49 "
                                 "without). With rotate and perturb the chains hold smaller trees (RJ-A, CT-A, RJ-C, "
                                 "CT-C: 12.6, 10.9, 4.8, 4.8 leaves at sd 1, beta 0.5); that this lowers their "
                                 "within-chain ESS is not isolated",
               "ctmc_wu.md", ("| 0.28-0.38 | 0.10-0.20 | 0.39-0.49 |", "| 0.01 | 0.00 | 0.00 |",
                              "| 12.6, 10.9, 4.8, 4.8 |"))),
    Claim("ctmc", "Tables 1-3, RJ-C", "Perturb makes x1 and x3 mix (RJ-C / RJ-A ESS of x1, x3)", "8-13x",
          Ours("not reproduced", "1.1x, 0.6x, 1.5x", "ctmc_wu.md", ("(1.1x, 0.6x, 1.5x)",)),
          Ours("not reproduced", "Pratola's change of variable is now in perturb (exact, default probability 0.1): "
                                 "RJ-C / RJ-A 0.09-2.15 with it, 0.10-4.59 without; on OpenBT's grid of 100 evenly "
                                 "spaced cuts it makes every chain switch between the x1 and x3 forms and gives the "
                                 "paper's RJ-C activities (x1 0.263, x2 0.485, x3 0.252 at sd 1, beta 0.5), but "
                                 "RJ-C / RJ-A ESS of x1, x3 falls to 0.01-0.03: rare, large switches score as slow "
                                 "within-chain mixing, and cannot give the paper's 8-13x",
               "ctmc_wu.md", ("| 0.66, 0.09 |", "| 1.83, 2.15 |", "| 0.15, 0.10 |", "| 4.59, 1.98 |",
                              "| RJ-C grid100 | ours | 0.98 | 12,427 | 18.06 | 369 | 17.50 | 0.263 | 0.485 | 0.252 |",
                              "RJ-C grid100 / RJ-A grid100 (ours, paper): ESS x1 0.03 (12.67)"))),
    Claim("ctmc", "Section 4 text", "Rao-Blackwellized estimate has lower MSE than the unweighted one",
          "0.01 vs 0.014 (sd 0.1), 1.04e-4 vs 1.98e-3 (sd 0.01)",
          Ours(NA, "not computed", None),
          Ours("not reproduced", "on the paper's Wu data the weightings tie: unweighted / Rao-Blackwellized test MSE, "
                                 "median (range) over 10 replications, 1.00 (0.96-1.00) at sd 0.01 and 1.00 "
                                 "(0.98-1.00) at sd 0.1 (beta 0.5), because every chain stays far above the noise "
                                 "floor (test MSE 0.12, posterior sigma 0.351 at sd 0.01), so the weights reweight "
                                 "trees that share one error; where chains sample an exact posterior (enumerated "
                                 "grids, ctmc_rao_blackwell.md) the unweighted jump chain is biased and worse, as the "
                                 "paper says",
               "ctmc_rb_wu.md", ("| 1.00 (0.96-1.00) |", "| 1.00 (0.98-1.00) |", "| 0.351 |", "| 0.12 |"))),
    # ---------------------------------------------------------------- RJHMC-Tree
    Claim("rjhmc", "Table 1, CGM data", "HMC-DF / HMC-DFI test MSE", "0.041 / 0.041",
          Ours("partly", "0.041-0.042 from one traced chain per sampler (500 tune); a Fit with 150 tune gave 0.703",
               "rjhmc_tables.md", ("**0.041** / 0.042", "0.703 ± 0.002")),
          Ours("partly", "hmc_dfi at the paper's protocol, 10 x (500 + 500): 0.0417 ± 0.0005 (eq. 3 average 0.0413; "
                         "per chain 0.0413-0.0420; 977 CPU s per chain). hmc_df at table 4's fixed h = 0.001: chain 0 "
                         "(2,308 CPU s) did not find the partition, 0.9709; traced, its tree keeps a threshold "
                         "within h of a grid value of x0 and splits those rows (11.6%) between leaves. With h "
                         "annealed from "
                         "0.01 in each NUTS warm-up (setting h_ramp, a departure from table 4): 9 of 10 chains at "
                         "0.0414-0.0416, one at 0.4612, 468 CPU s per chain; the authors' 500-transition restarts "
                         "(25x the NUTS work) were not run on CGM",
               "rjhmc_tables.md", ("| cgm | hmc_dfi | default  | 10 x (500 + 500) | 0.0417 ± 0.0005 | 0.0413 |",
                                   "(per chain: 0.0418, 0.0413, 0.0419, 0.0415, 0.0418, 0.0414, 0.0420, 0.0418, "
                                   "0.0414, 0.0417)", "| 977 |",
                                   "| cgm | hmc_df | default  | 1 x (500 + 500) | 0.9709 ± 0.1697 |",
                                   "splits 11.6% of the training rows between leaves",
                                   "h_ramp's row above: 9 of 10 chains found it",
                                   "per chain 0.0414, 0.4612, 0.0415, 0.0415, 0.0416, 0.0416, 0.0414, 0.0415, 0.0416, "
                                   "0.0414)", "468 CPU s per chain against 2,308 at the fixed h"))),
    Claim("rjhmc", "Table 1, CGM data", "Acceptance rate", "36.34% / 36.45%",
          Ours("not reproduced", "reported over the kept iterations only (14.1-15.3% of 510 traced iterations), "
                                 "not the paper's statistic",
               "rjhmc_tables.md", ("14.1% over all 510 iterations",)),
          Ours("partly", "hmc_dfi 36.3 ± 1.9% in the paper's units (accepted RJ moves, stays included, over all "
                         "1,000 iterations), the paper's 10 chains, against 36.45%; hmc_df 38.0 ± 1.5% against "
                         "36.34%, but with h annealed from 0.01 (setting h_ramp; at table 4's fixed h one chain, "
                         "37.5%)", "rjhmc_tables.md",
               ("| 7.94 ± 1.67 | 36.3 ± 1.9 |", "| 6.27 ± 0.94 | 38.0 ± 1.5 |",
                "| 8.68 ± 0.68 | 37.5 ± 0.0 |"))),
    Claim("rjhmc", "Table 1 / discussion", "HMC beats the CGM method on tree-generated data",
          "CGM test MSE 0.064 vs HMC 0.041",
          Ours("not reproduced", "`cgm` CART reaches 0.041 too", "rjhmc_tables.md",
               ("| MSE 0.041, 8.15 leaves, 36.5% | 0.041 |",)),
          Ours("not reproduced", "`cgm` CART 0.0414 and `smc` 0.0413 on the shipped split: the tree-generated data "
                                 "are no harder for CGM here",
               "rjhmc_tables/cgm_cgm_cart.json", ('"test": 0.041443726430842306',))),
    Claim("rjhmc", "Table 2, Iris", "HMC-DF / HMC-DFI test accuracy", ".906 / .917",
          Ours("partly", "0.950 / 0.944 from one chain of 30 + 30", "rjhmc_tables.md",
               ("| iris | hmc_df | 30 + 30 (earlier) | 0.950 ± 0.025 |",)),
          Ours("reproduced", "0.940 / 0.937 at the paper's protocol 10 x (200 + 800), our own split",
               "rjhmc_tables.md", ("| 10 x (200 + 800) | 0.940 ± 0.026 |", "| 10 x (200 + 800) | 0.937 ± 0.025 |"))),
    Claim("rjhmc", "Table 2, Wine", "HMC-DF / HMC-DFI test accuracy", ".950 / .948",
          Ours("partly", "1.000 / 0.935 from one chain of 30 + 30", "rjhmc_tables.md",
               ("| wine | hmc_df | 30 + 30 (earlier) | 1.000 ± 0.000 |",)),
          Ours("reproduced", "0.928 / 0.943 at the paper's protocol (within the paper's sd 0.039 / 0.022)",
               "rjhmc_tables.md", ("| 10 x (200 + 800) | 0.928 ± 0.043 |", "| 10 x (200 + 800) | 0.943 ± 0.029 |"))),
    Claim("rjhmc", "Table 2, Breast cancer", "HMC-DF / HMC-DFI test accuracy", ".940 / .952",
          Ours("partly", "0.953 / 0.955 from one chain of 30 + 30", "rjhmc_tables.md",
               ("| breast_cancer | hmc_df | 30 + 30 (earlier) | 0.953 ± 0.007 |",)),
          Ours("reproduced", "0.945 / 0.959 at the paper's protocol 10 x (200 + 800), our own split",
               "rjhmc_tables.md", ("| 10 x (200 + 800) | 0.945 ± 0.010 |", "| 10 x (200 + 800) | 0.959 ± 0.009 |"))),
    Claim("rjhmc", "Table 2, Raisin", "HMC-DF / HMC-DFI test accuracy", ".847 / .838",
          Ours("partly", "0.869 / 0.844 from one chain of 30 + 30", "rjhmc_tables.md",
               ("| raisin | hmc_df | 30 + 30 (earlier) | 0.869 ± 0.012 |",)),
          Ours("reproduced", "0.861 ± 0.016 / 0.854 ± 0.012 at the paper's protocol 10 x (200 + 800), above the "
                             "paper's by 0.014 / 0.016, on our own seeded split (270 test rows); acceptance 55.0 / "
                             "53.6% against the paper's 55.53 / 53.62%",
               "rjhmc_tables.md", ("| raisin | hmc_df | default  | 10 x (200 + 800) | 0.861 ± 0.016 |",
                                   "| raisin | hmc_dfi | default  | 10 x (200 + 800) | 0.854 ± 0.012 |",
                                   "| 55.0 ± 1.5 |", "| 53.6 ± 1.7 |"))),
    Claim("rjhmc", "Table 2, acceptance", "Acceptance rate on Iris and Wine", "56.92-59.01% / 53.04-53.11%",
          Ours("not reproduced", "reported over the kept iterations only (43-73%), not the paper's statistic",
               "rjhmc_tables.md", ('**"accept %" is over the kept iterations only**',)),
          Ours("reproduced", "iris 57.2 / 58.2, wine 54.0 / 53.2 (paper's units: accepted RJ moves over all "
                             "iterations)",
               "rjhmc_tables.md", ("| 57.2 ± 1.4 |", "| 58.2 ± 2.2 |", "| 54.0 ± 1.7 |", "| 53.2 ± 0.9 |"))),
    Claim("rjhmc", "Table 2, acceptance", "Acceptance rate on Breast cancer", "54.09% / 58.64%",
          Ours("not reproduced", "reported over the kept iterations only", "rjhmc_tables.md",
               ('**"accept %" is over the kept iterations only**',)),
          Ours("reproduced", "53.2 / 59.4 at the paper's protocol (paper's units)",
               "rjhmc_tables.md", ("| 53.2 ± 1.2 |", "| 59.4 ± 2.0 |"))),
    Claim("rjhmc", "Table 2, leaves", "Average leaves of HMC-DF / HMC-DFI", "iris 3.38 / 3.45, wine 5.92 / 6.12, "
          "BCW 5.05 / 4.17",
          Ours("partly", "one short chain: iris 3.1 / 3.6, wine 5.3 / 3.0, BCW 5.0 / 4.7", "rjhmc_tables.md",
               ("| 3.1 ± 0.2 |", "| 3.6 ± 0.6 |")),
          Ours("partly", "iris 3.19 / 3.33 and BCW 5.39 / 3.94 (as the paper, within one sd), wine 4.25 / 3.37 "
                         "(not)",
               "rjhmc_tables.md", ("| 3.19 ± 0.46 |", "| 3.33 ± 0.62 |", "| 4.25 ± 0.53 |", "| 3.37 ± 0.61 |",
                                   "| 5.39 ± 0.77 |", "| 3.94 ± 0.87 |"))),
    Claim("rjhmc", "Table 2 / discussion", "HMC methods beat the existing methods (CGM, SMC, WU) in test accuracy "
          "in most cases", "paper's CGM .908 / .916 / .939 / .843 (iris, wine, BCW, raisin)",
          Ours("partly", "`cgm` CART 0.956 / 0.972 / 0.951 / 0.881 against the soft trees' 30 + 30 rows",
               "rjhmc_tables.md",
               ("| .917 | 0.956 |", "| .950 | 0.972 |", "| .952 | 0.951 |", "| .847 | 0.881 |")),
          Ours("partly", "`cgm` CART matches on iris (0.956), beats hmc_df and matches hmc_dfi on wine (0.972), "
                         "beats hmc_df and is beaten by hmc_dfi on BCW (0.951 against 0.946 / 0.976), beats both on "
                         "raisin (0.881 against 0.874 / 0.867) and is behind hmc_dfi on CGM by 0.0002 (0.0414 against "
                         "0.0413); eq. 3 averages on the same splits",
               "rjhmc_tables.md", ("cgm CART (0.972) beats hmc_df (0.944)", "cgm CART (0.951) beats hmc_df (0.946)",
                                   "cgm CART (0.951) is beaten by hmc_dfi (0.976)",
                                   "cgm CART (0.881) beats hmc_df (0.874) by 0.007",
                                   "cgm CART (0.881) beats hmc_dfi (0.867) by 0.015",
                                   "cgm CART (0.0414) is beaten by hmc_dfi (0.0413) by 0.0002"))),
    # ---------------------------------------------------------------- thesis (tempering)
    Claim("thesis", "Table 5.1, speed", "Geometric tempering's MH moves per minute against no tempering",
          "3814 / 4034 against 9898 per minute: 0.39 / 0.41",
          Ours("partly", "0.27 / 0.31 of `cgm`'s MH steps per wall second at 1/10 of the budget", "tempered_cgm.md",
               ("| 14,583 | 0.27 |", "| 16,556 | 0.31 |")),
          Ours("partly", "0.30 (SEO) / 0.30 (DEO) of `cgm`'s MH steps per CPU second at the full budget: slower "
                         "than the untempered sampler, as in the thesis, by more",
               "tempered_cgm_full.md", ("| 80,173 | 0.30 |", "| 80,420 | 0.30 |"))),
    Claim("thesis", "Table 5.1, speed", "Shrinkage tempering's MH moves per minute against no tempering",
          "25589 / 30282 against 9898: 2.59 / 3.06",
          Ours("not reproduced", "0.44 / 0.43 of `cgm`'s MH steps per wall second", "tempered_cgm.md",
               ("| 23,670 | 0.44 |", "| 23,256 | 0.43 |")),
          Ours("not reproduced", "0.53 (SEO) / 0.51 (DEO) per CPU second. Both count MH moves of all rungs; our "
                                 "moves cost about the same on small trees and each iteration adds a swap round "
                                 "(measured in the file's speed check and reading)",
               "tempered_cgm_full.md", ("| 144,276 | 0.53 |", "| 138,189 | 0.51 |", "What an MH step costs"))),
    Claim("thesis", "Section 5.1", "Without tempering the 8 runs stay in different modes (no convergence)",
          "figures 5.1-5.2",
          Ours("reproduced", "R-hat of n_leaves 1.667, of the log posterior 1.691 at 1.2 M MH steps per run",
               "tempered_cgm_long.md", ("| 1.667 | 1.691 |",)),
          Ours("reproduced", "R-hat 1.667 / 1.691 at 1.2 M MH steps per run (2.490 / 2.378 at 412,500): the runs "
                             "hold different root splits",
               "tempered_cgm_full.md", ("| 1.667 | 1.691 |", "| 412,500 | 2.490 | 2.378 |"))),
    Claim("thesis", "Section 5.2, figure 5.3", "Geometric tempering: hotter rungs hold much larger trees",
          "figure only",
          Ours("reproduced", "hot rungs hold 35-125 leaves (a 4,000-iteration check of one run)", "tempered_cgm.md",
               ("35-125 leaves",)),
          Ours("reproduced", "mean leaves per rung 8.6 (t = 1) to 128.9 (t = 1e-7), pooled over the 8 runs",
               "tempered_cgm_full.md", ("n_leaves 8.6 12.2 30.3 86.1 109.7 118.3 125.4 128.9",))),
    Claim("thesis", "Section 5.2", "Geometric tempering: the runs' most common tree splits on the factor x2 "
          "({A, B}) at the root", "text",
          Ours("partly", "SEO 6 of 8 runs on x2 {A, B}, DEO 3 of 8 (1/10 budget)", "tempered_cgm.md",
               ("- geometric SEO (thesis ladder): x2#3 (100%); x1#366 (83%)",)),
          Ours("partly", "x2 {A, B} at the root in 6 of 8 runs with SEO (the thesis' scheme) and 2 of 8 with DEO",
               "tempered_cgm_full.md", ("- geometric SEO (thesis ladder): x2#3 (90%); x1#374 (7%)",
                                        "- geometric DEO (thesis ladder): x1#352 (10%); x2#3 (93%)"))),
    Claim("thesis", "Section 5.3, figure 5.5", "Shrinkage tempering: hotter rungs hold smaller trees", "figure only",
          Ours(NA, "the rungs' tree sizes were not reported", None),
          Ours("reproduced", "mean leaves per rung 13.3 (the model's prior) down to 5.1 (the hottest pair)",
               "tempered_cgm_full.md", ("n_leaves 13.3 11.8 10.1 9.2 8.7 8.2 7.5 7.2 6.5 6.2 6.1 6.0 5.7 5.3 5.1",))),
    Claim("thesis", "Section 5.3", "Shrinkage tempering: the first split is along the numeric x1 across runs",
          "text",
          Ours("partly", "x1 at the root in 4 of 8 runs (SEO) and 7 of 8 (DEO) at 1/10 budget", "tempered_cgm.md",
               ("- shrinkage DEO (thesis pairs): x1#397 (48%)",)),
          Ours("partly", "x1 in 2 of 8 runs (SEO) and 5 of 8 (DEO); the others split on x2 at the root",
               "tempered_cgm_full.md", ("- shrinkage SEO (thesis pairs): x2#1 (39%)",
                                        "- shrinkage DEO (thesis pairs): x1#398 (29%)"))),
    Claim("thesis", "Section 5.3, figure 5.7", "Shrinkage: DEO swaps mix better than SEO", "text",
          Ours("partly", "R-hat of n_leaves 1.448 (DEO) against 1.551 (SEO), of the log posterior 1.577 against 1.509",
               "tempered_cgm.md", ("| 1.448 | 1.577 |", "| 1.551 | 1.509 |")),
          Ours("not reproduced", "at the full budget DEO is worse: R-hat 1.757 / 1.762 against SEO's 1.481 / 1.468; "
                                 "trees rarely travel the ladder (0-1 round trips per run) either way",
               "tempered_cgm_full.md", ("| 1.757 | 1.762 |", "| 1.481 | 1.468 |"))),
    Claim("thesis", "Sections 5.2-5.3, chapter 6", "Both tempering schemes improve mixing over no tempering",
          "figures 5.4, 5.6 against 5.2",
          Ours("partly", "at 1/10 budget R-hat of n_leaves 1.45-2.11 against `cgm`'s 2.684", "tempered_cgm.md",
               ("| 2.684 | 2.285 |", "| 2.109 | 2.128 |", "| 1.448 | 1.577 |")),
          Ours("not reproduced", "at the full budget the thesis' ladders give R-hat 1.481-2.016 (n_leaves) / "
                                 "1.468-2.071 (log posterior) against `cgm`'s 1.667 / 1.691: the geometric pairs do "
                                 "not swap and the shrinkage ladder's trees do not travel back from the hot rungs",
               "tempered_cgm_full.md", ("R-hat of n_leaves 1.481-2.016 and of the log posterior 1.468-2.071",))),
    Claim("thesis", "Chapter 6", "Neither tempering scheme converges on the example (\"major convergence issues\")",
          "text",
          Ours("partly", "no scheme's runs agree at 1/10 of the budget (R-hat >= 1.2)", "tempered_cgm.md",
               ("none of the schemes makes the 8 runs agree (R-hat >= 1.2)",)),
          Ours("reproduced", "at the thesis' budget the thesis' ladders still give R-hat 1.481-2.016 (n_leaves) "
                             "/ 1.468-2.071 (log posterior) (ours with 16 adapted likelihood rungs: 1.010 / 1.024)",
               "tempered_cgm_full.md", ("R-hat of n_leaves 1.481-2.016 and of the log posterior 1.468-2.071",))),
]


def read(path: str, commit: str | None) -> str | None:
    """Text of a results file now (``commit`` None) or at ``commit``; None if it does not exist."""
    full = f"{RESULTS}/{path}"
    if commit is None:
        p = ROOT / full
        return p.read_text() if p.exists() else None
    out = subprocess.run(["git", "show", f"{commit}:{full}"], capture_output=True, text=True, cwd=ROOT)
    return out.stdout if out.returncode == 0 else None


def check(claims: list[Claim], sides: tuple[str, ...] = ("before", "now")) -> list[str]:
    """Problems: unknown statuses and quotes missing from their files (``sides``: "before" reads the
    files at ``BEFORE`` with git, "now" this checkout)."""
    problems = []
    cache: dict[tuple[str, str | None], str | None] = {}
    for c in claims:
        if c.paper not in PAPERS:
            problems.append(f"{c.where}: unknown paper {c.paper!r}")
        for side, ours, commit in (("before", c.before, BEFORE), ("now", c.now, None)):
            if side not in sides:
                continue
            if ours.status not in STATUSES:
                problems.append(f"{c.paper} {c.where} ({side}): status {ours.status!r} not one of {STATUSES}")
            for file, quotes in ours.sources():
                key = (file, commit)
                if key not in cache:
                    cache[key] = read(file, commit)
                text = cache[key]
                if text is None:
                    problems.append(f"{c.paper} {c.where} ({side}): {RESULTS}/{file} missing at "
                                    f"{commit or 'this checkout'}")
                    continue
                for q in quotes:
                    if q not in text:
                        problems.append(f"{c.paper} {c.where} ({side}): {q!r} not in {RESULTS}/{file} at "
                                        f"{commit or 'this checkout'}")
    return problems


def counts(claims: list[Claim], paper: str, side: str) -> Counter:
    """Statuses of one paper's claims, before or now."""
    return Counter(getattr(c, side).status for c in claims if c.paper == paper)


def link(ours: Ours, commit: str | None) -> str:
    """Markdown links to the results files (relative to benchmarks/results/)."""
    files = [file for file, _ in ours.sources()]
    if not files:
        return "-"
    return ", ".join(f"[{f}]({f})" if commit is None else f"`{f}` at {commit}" for f in files)


def report(claims: list[Claim]) -> list[str]:
    """The markdown index."""
    lines = [
        "# The seed papers' claims against our results",
        "",
        "Written by `python3 benchmarks/replication_table.py` from the claims listed in that script. The statuses "
        "and their wording are judgements made by hand when the results were read; the script checks that every "
        "number quoted as ours occurs verbatim in the linked results file (now: this checkout; before: the file "
        f"at commit {BEFORE}, the last commit before issue 28's re-measurements) and computes the counts. Each "
        "linked file is written by its own script, named in its header.",
        "",
        "Statuses: **reproduced** (the paper's number or conclusion holds here), **partly** (holds in part, or "
        "on a reduced protocol or stand-in data), **not reproduced** (measured, does not hold; the cause as far "
        "as measured), **not attempted** (why).",
        "",
        "## Counts",
        "",
        "| paper | claims | before: reproduced / partly / not / not attempted | now: reproduced / partly / not / "
        "not attempted |",
        "|---|---|---|---|",
    ]
    total_before, total_now = Counter(), Counter()
    for key, title in PAPERS.items():
        b, n = counts(claims, key, "before"), counts(claims, key, "now")
        total_before += b
        total_now += n
        k = sum(n.values())
        lines.append(f"| {title} | {k} | " + " / ".join(str(b[s]) for s in STATUSES) + " | "
                     + " / ".join(str(n[s]) for s in STATUSES) + " |")
    lines.append(f"| all | {sum(total_now.values())} | " + " / ".join(str(total_before[s]) for s in STATUSES)
                 + " | " + " / ".join(str(total_now[s]) for s in STATUSES) + " |")
    for key, title in PAPERS.items():
        rows = [c for c in claims if c.paper == key]
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append(NOTES_NO_CLAIMS.get(key, "No quantitative claims."))
            continue
        lines += ["| where | claim | paper | before | now | file (now) |", "|---|---|---|---|---|---|"]
        for c in rows:
            before = f"**{c.before.status}**: {c.before.text}"
            now = f"**{c.now.status}**: {c.now.text}"
            lines.append(f"| {c.where} | {c.claim} | {c.paper_value} | {before} | {now} | {link(c.now, None)} |")
        for note in EXTRA_NOTES.get(key, ()):
            lines += ["", note]
    return lines


NOTES_NO_CLAIMS = {
    "cgm_notes": "The notes derive the model (tree prior, integrated likelihoods, the four MH moves) and report no "
                 "experiment, so they have no table or quantitative claim to reproduce. Their formulas are checked "
                 "by tests, not by a results file: exact posteriors by enumeration of every tree "
                 "(`tests/test_exact_posterior.py`), the MH ratios (`tests/test_move_ratios.py`) and the prior "
                 "with the likelihood off (`tests/test_prior_only.py`).",
}
EXTRA_NOTES: dict[str, tuple[str, ...]] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=f"{RESULTS}/replication.md", help="output file (relative to the root)")
    parser.add_argument("--check", action="store_true", help="only check the quotes and print the counts")
    args = parser.parse_args()
    problems = check(CLAIMS)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    lines = report(CLAIMS)
    if args.check:
        print("\n".join(lines[:lines.index("## Counts") + 12]))
        return
    out = ROOT / args.out
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out.relative_to(ROOT)} ({len(CLAIMS)} claims)")


if __name__ == "__main__":
    main()
