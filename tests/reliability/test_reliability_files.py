"""Files, archives and other users (issue 15, items 6-10): each hostile case is built by
tests/reliability/files_scenarios.py (shared with bench/reliability.py, section ``files``) and must leave nothing
outside where trainops may write, with a clear error.
"""

from __future__ import annotations

from pathlib import Path

from files_scenarios import expansion_bomb, tar_slip


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
