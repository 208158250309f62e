"""bench/reliability.py --update: only the summary table's rows of a re-measured section replace their lines; the
section's detail tables further down the rendered page never land in the summary."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from reliability import summary_rows, update_rows  # noqa: E402

RENDERED = """# Reliability

| item | case | measured | bound | result | covered by |
| --- | --- | --- | --- | --- | --- |
| 1 | Bad input: 352 files | 352/352 | exit 2 | pass | corpus |
| 2 | Hostile data | 12 reported | each | pass | staging |

## Bad input, per file

| file | exit | ms |
| --- | --- | --- |
| specs/a.yaml | 2 | 10 |
"""

CURRENT = """# Reliability

| item | case | measured | bound | result | covered by |
| --- | --- | --- | --- | --- | --- |
| 1 | Bad input: 344 files | 344/344 | exit 2 | pass | corpus |
| 3 | No shell | 0 | none | pass | scan |

## Details

| file | exit | ms |
| --- | --- | --- |
| specs/old.yaml | 2 | 9 |
"""


def test_only_the_summary_tables_rows_are_taken():
    assert summary_rows(RENDERED) == ["| 1 | Bad input: 352 files | 352/352 | exit 2 | pass | corpus |",
                                      "| 2 | Hostile data | 12 reported | each | pass | staging |"]


def test_an_update_replaces_its_rows_and_adds_new_ones_inside_the_summary_table():
    updated = update_rows(CURRENT, summary_rows(RENDERED)).splitlines()
    assert updated[4] == "| 1 | Bad input: 352 files | 352/352 | exit 2 | pass | corpus |"
    assert "| 2 | Hostile data | 12 reported | each | pass | staging |" in updated[:8]
    assert not any("344" in line for line in updated)
    assert updated.count("| specs/old.yaml | 2 | 9 |") == 1 and "| specs/a.yaml | 2 | 10 |" not in updated


def test_a_reworded_case_replaces_the_one_row_of_its_item_and_leaves_repeated_items_alone():
    current = CURRENT.replace("| 3 | No shell | 0 | none | pass | scan |",
                              "| 3 | No shell | 0 | none | pass | scan |\n| 39.1 | Writing where another user can write | "
                              "8 passed | nothing through a link | pass | hostile_writes |\n"
                              "| 15.4 | Stop, case a | 1 s | 10 s | pass | a |\n| 15.4 | Stop, case b | 2 s | 10 s | pass | b |")
    rows = ["| 39.1 | Writing where another user can write (the Slurm node's too) | 25 passed | nothing through a "
            "link | pass | hostile_writes, slurm |",
            "| 15.4 | Stop, case c | 3 s | 10 s | pass | c |"]
    updated = update_rows(current, rows).splitlines()
    assert [line for line in updated if line.startswith("| 39.1 ")] == [rows[0]]
    # an item with several rows (cases of one section): a new case is added, none replaced
    assert [line.split(" | ")[1] for line in updated if line.startswith("| 15.4 ")] == [
        "Stop, case a", "Stop, case b", "Stop, case c"]
