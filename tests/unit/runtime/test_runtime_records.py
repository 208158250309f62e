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


def test_a_link_or_fifo_planted_at_a_guessable_name_is_never_written_through_nor_blocked_on(tmp_path):
    """Every rank of a host writes in its record directory: one could plant a link at the name the next write
    would take (``<file>.<pid>.tmp``, as it was) or at the final name, or a FIFO there, which blocks a writer's open
    forever. Each write takes a name nobody can guess instead, and replaces whatever the final name was."""
    import stat

    from support.hostile_files import finishes

    record_dir = tmp_path / "ranks"
    record_dir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("the victim's own contents")
    writes = {"rank-0.json": lambda: records.write_record(str(record_dir), {"rank": 0, "state": "running"}),
              records.OBSERVED_FILE: lambda: records.write_observed(str(record_dir), "torchrun", [{"rank": 0}]),
              "algo-2.json": lambda: records.write_json_atomically(str(record_dir / "algo-2.json"), {"A": "1"})}
    for name in ("rank-0.json", records.OBSERVED_FILE):
        (record_dir / f"{name}.{os.getpid()}.tmp").symlink_to(victim)
    os.mkfifo(record_dir / f"algo-2.json.{os.getpid()}.tmp")
    (record_dir / "rank-0.json").symlink_to(victim)  # the final name: replaced, not followed
    for write in writes.values():
        finishes(write)
    assert victim.read_text() == "the victim's own contents"
    assert [r["state"] for r in records.read_records([str(record_dir)])] == ["running"]
    assert records.read_observed(str(record_dir)) == [{"rank": 0}]
    assert stat.S_IMODE(os.lstat(record_dir / "algo-2.json").st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(record_dir / "rank-0.json").st_mode) == 0o644
    left = sorted(name for name in os.listdir(record_dir) if not name.endswith(f".{os.getpid()}.tmp"))
    assert left == ["algo-2.json", records.OBSERVED_FILE, "rank-0.json"]  # no temporary left behind
