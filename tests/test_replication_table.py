"""benchmarks/replication_table.py: every number the replication index quotes as ours is in the
results file it links (this checkout's files; the 'before' side reads git history and is checked
by running the script), and the check does fail on a number that is not there."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from _benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
table = load_benchmark("replication_table")


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


def test_a_quote_missing_from_a_further_file_is_reported():
    """A claim citing several results files (``Ours.more``) has each file's quotes checked."""
    claim = next(c for c in table.CLAIMS if c.now.more)
    file, _ = claim.now.more[0]
    wrong = dataclasses.replace(claim, now=dataclasses.replace(claim.now, more=((file, ("| 999.9 |",)),)))
    problems = table.check([wrong], sides=("now",))
    assert len(problems) == 1 and "999.9" in problems[0] and file in problems[0]


def test_the_guide_and_the_index_agree_on_the_counts():
    """docs/guide/benchmarks.md quotes the index's totals, before and now: they must be the script's."""
    guide = (ROOT / "docs" / "guide" / "benchmarks.md").read_text()
    text = " ".join(guide.split())
    now = sum((table.counts(table.CLAIMS, p, "now") for p in table.PAPERS), start=table.Counter())
    before = sum((table.counts(table.CLAIMS, p, "before") for p in table.PAPERS), start=table.Counter())
    expected = (f"Of its {len(table.CLAIMS)} claims, {now['reproduced']} are reproduced, {now['partly']} partly, "
                f"{now['not reproduced']} not reproduced and {now[table.NA]} not attempted (before the "
                f"re-measurements: {before['reproduced']}, {before['partly']}, {before['not reproduced']} and "
                f"{before[table.NA]})")
    assert expected in text, expected
