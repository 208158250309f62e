"""Files, archives and other users (issue 15, items 6-10): each hostile case is built by
tests/reliability/files_scenarios.py (shared with bench/reliability.py, section ``files``) and must leave nothing
outside where trainops may write, with a clear error.
"""

from __future__ import annotations

import pytest
from files_scenarios import (
    concurrent_registrations,
    corrupt_entry,
    deep_tree,
    expansion_bomb,
    planted_port_directory,
    registry_links,
    staging_races,
    tar_slip,
)


def test_realpath_overflow_archive_cannot_write_outside_the_model_directory(tmp_path):
    """CVE-2025-4517's chain of long links fools realpath checks and the data filter of Python 3.11.7; extraction
    without links refuses it and writes nothing."""
    outcome = tar_slip(tmp_path)
    assert not outcome["victim_overwritten"]
    assert outcome["refused"] and "link" in outcome["message"]
    assert outcome["left_in_destination"] == 0


def test_expansion_bomb_is_refused_before_filling_the_disk(tmp_path):
    outcome = expansion_bomb(tmp_path)
    assert outcome["archive_bytes"] < 1024 * 1024
    assert outcome["refused"] and "200.0 MiB" in outcome["message"] and "100.0 MiB" in outcome["message"]
    assert outcome["written_bytes"] == 0


def test_registering_a_directory_with_links_copies_nothing_from_outside(tmp_path):
    outcome = registry_links(tmp_path)
    assert outcome["secret_copies"] == 0 and outcome["versions"] == 0
    assert all("symbolic link" in text for text in outcome["outcomes"].values())


def test_ten_concurrent_registrations_of_one_job_make_one_version(tmp_path):
    outcome = concurrent_registrations(tmp_path)
    assert outcome["exit_codes"] == [0] * 10
    assert outcome["versions_made"] == 1 and outcome["versions_returned"] == [1]
    # The losers of the race say so: only the one that added the version reports already_registered false.
    assert outcome["said_added"] == 1


def test_a_corrupt_entry_blocks_neither_listing_nor_registering(tmp_path):
    outcome = corrupt_entry(tmp_path)
    assert outcome["list_exit"] == 0 and outcome["listed"] == 1 and outcome["warnings"] == 2
    assert outcome["new_version"] == 4
    assert not outcome["served_outside"]


def test_a_port_directory_planted_by_another_user_is_refused(tmp_path):
    outcome = planted_port_directory(tmp_path)
    assert outcome["refused"] and "TMPDIR" in outcome["message"]
    assert outcome["victims_changed"] == 0


@pytest.mark.parametrize("swap_in", ["thread", "process"])
def test_staging_while_directories_are_swapped_for_links_reads_and_writes_nothing_outside(tmp_path, swap_in):
    """The swaps made by a thread of the staging process and by another process."""
    outcome = staging_races(tmp_path, files=1000, rounds=2, swap_in=swap_in)
    assert outcome["source_swaps"]["from_outside"] == 0
    assert outcome["destination_swaps"]["written_outside"] == 0


def test_a_source_1200_directories_deep_stages(tmp_path):
    outcome = deep_tree(tmp_path)
    assert outcome["ok"] and outcome["copied"] == outcome["files"] == 12, outcome
