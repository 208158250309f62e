"""Rank records and stderr tails."""

from __future__ import annotations

import os

from trainops.runtime import records


def test_records_round_trip_sorted_by_rank(tmp_path):
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    records.write_record(first, {"rank": 2, "state": "running", "pid": 12})
    records.write_record(second, {"rank": 0, "state": "exited", "exit_code": 0})
    records.write_record(first, {"rank": 2, "state": "exited", "exit_code": 1})
    found = records.read_records([first, second, str(tmp_path / "missing")])
    assert [(r["rank"], r["state"], r["record_dir"]) for r in found] == [(0, "exited", second), (2, "exited", first)]
    assert not [name for name in os.listdir(first) if name.endswith(".tmp")]


def test_broken_record_files_are_skipped(tmp_path):
    (tmp_path / "rank-1.json").write_text("{half")
    records.write_record(str(tmp_path), {"rank": 0, "state": "running"})
    assert [r["rank"] for r in records.read_records([str(tmp_path)])] == [0]


def test_tail_lines(tmp_path):
    with open(records.tail_path(str(tmp_path), 0), "wb") as handle:
        handle.write(b"one\r\ntwo\n\nthree \xff\n")
    assert records.read_tail(str(tmp_path), 0, lines=2) == ["two", "three \ufffd"]
    assert records.read_tail(str(tmp_path), 9) == []


def test_observed_failures_round_trip(tmp_path):
    records.write_observed(str(tmp_path), "torchrun", [{"rank": 1, "exit_code": -9, "timestamp": 3.0}])
    assert records.read_observed(str(tmp_path)) == [{"rank": 1, "exit_code": -9, "timestamp": 3.0}]
    assert records.read_observed(str(tmp_path / "none")) == []


def test_clear_records_removes_a_previous_run(tmp_path):
    records.write_record(str(tmp_path), {"rank": 0, "state": "exited"})
    records.write_observed(str(tmp_path), "torchrun", [])
    (tmp_path / "hosts").mkdir()
    records.clear_records(str(tmp_path))
    assert os.listdir(tmp_path) == ["hosts"]
