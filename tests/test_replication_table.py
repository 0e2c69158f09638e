"""benchmarks/replication_table.py: every number the replication index quotes as ours is in the
results file it links (this checkout's files; the 'before' side reads git history and is checked
by running the script), and the check does fail on a number that is not there."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("replication_table", ROOT / "benchmarks" / "replication_table.py")
table = importlib.util.module_from_spec(_spec)
sys.modules["replication_table"] = table  # dataclasses look their module up there
_spec.loader.exec_module(table)


def test_every_quoted_number_is_in_its_results_file():
    assert table.check(table.CLAIMS, sides=("now",)) == []


def test_a_quote_missing_from_its_file_is_reported():
    claim = table.CLAIMS[1]
    wrong = dataclasses.replace(claim, now=dataclasses.replace(claim.now, quotes=("| 4 | uniform | pg | 999.9 |",)))
    problems = table.check([wrong], sides=("now",))
    assert len(problems) == 1 and "999.9" in problems[0] and claim.now.file in problems[0]


def test_an_unknown_status_is_reported():
    claim = table.CLAIMS[0]
    wrong = dataclasses.replace(claim, now=dataclasses.replace(claim.now, status="mostly"))
    assert any("'mostly'" in p for p in table.check([wrong], sides=("now",)))


def test_counts_cover_every_claim():
    lines = table.report(table.CLAIMS)
    total = next(line for line in lines if line.startswith("| all |"))
    assert f"| all | {len(table.CLAIMS)} |" in total
