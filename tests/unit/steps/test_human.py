"""A record as a person reads it (`trainops.steps.human`): `trainops status` and the job's page."""

from __future__ import annotations

import os
import time

import pytest

from trainops.steps.human import duration, lines, rows


@pytest.fixture
def utc():
    """This process reads local time as UTC for the test, and as before after it."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_times_durations_and_lists_read_as_such(utc):
    record = {"job_name": "j-1", "started": 1796612888.9, "training_end_time": 1796612950.0, "epochs": 3,
              "duration_seconds": 61.04, "hosts": ["algo-1", "algo-2"], "reattached": False, "empty": [],
              "attempts": [{"job_name": "j-1", "status": "Failed", "failure_class": "infrastructure"},
                           {"job_name": "j-1-2", "status": "Completed", "failure_class": None}],
              "ranks": [{"host": "algo-1", "rank": 0, "pid": 10, "exit": 0}],
              "cost": {"total_usd": 0.0213, "attempts": 2}}
    assert lines(record) == [
        "job_name: j-1", "started: 2026-12-07 03:08:08 UTC", "training_end_time: 2026-12-07 03:09:10 UTC",
        "epochs: 3", "duration_seconds: 61.0 s", "hosts: algo-1, algo-2", "reattached: no",
        "attempts:", "  - j-1 Failed infrastructure", "  - j-1-2 Completed",
        "ranks:", "  - host=algo-1 rank=0 pid=10 exit=0",
        "cost:", "  total_usd: 0.0213", "  attempts: 2"]
    assert dict(rows(record))["attempts"] == "j-1 Failed infrastructure; j-1-2 Completed"


def test_a_number_is_a_moment_only_by_its_key_and_range():
    assert lines({"epochs": 1796612888, "started": 12.0}) == ["epochs: 1796612888", "started: 12"]


def test_durations():
    assert [duration(seconds) for seconds in (4.25, 190, 7300)] == ["4.2 s", "3 min 10 s", "2 h 01 min"]
