"""Choosing the root cause and writing the failure file."""

from __future__ import annotations

import os

from trainops.runtime import records
from trainops.runtime.failure import (
    Failure,
    classify_exit,
    parse_failure,
    read_failure,
    render_failure,
    root_cause,
    with_tail,
    write_once,
)


def record(rank, state="exited", exit_code=0, ended_at=100.0, host="algo-1", exception=""):
    return {"rank": rank, "local_rank": rank % 2, "host": host, "pid": 1000 + rank, "state": state,
            "exit_code": exit_code, "ended_at": ended_at, "exception": exception, "reason": "error"}


def observed(rank, exit_code, timestamp=100.0, host="algo-1"):
    return Failure(*classify_exit(exit_code)[:1], host=host, rank=rank, local_rank=rank % 2,
                   exit_code=classify_exit(exit_code)[1], signal=classify_exit(exit_code)[2], time=timestamp)


def test_exit_statuses_are_classified():
    assert classify_exit(1) == ("error", 1, "")
    assert classify_exit(-9) == ("oom", 137, "SIGKILL")
    assert classify_exit(137) == ("oom", 137, "SIGKILL")
    assert classify_exit(-11) == ("killed", 139, "SIGSEGV")
    assert classify_exit(143) == ("killed", 143, "SIGTERM")


def test_the_earliest_recorded_failure_wins():
    ranks = [record(0, exit_code=1, ended_at=105.0, exception="RuntimeError: peer closed"),
             record(1, exit_code=1, ended_at=101.5, exception="ValueError: boom"),
             record(2, state="running")]
    cause = root_cause(ranks, [])
    assert (cause.rank, cause.exception, cause.reason) == (1, "ValueError: boom", "error")


def test_a_rank_killed_by_an_outside_signal_beats_its_peers_errors():
    # Rank 3 was SIGKILLed; rank 0 then failed on the broken connection, and recorded that a moment earlier than
    # torchrun noticed rank 3 (torchrun polls). The kill is the cause.
    ranks = [record(0, exit_code=1, ended_at=100.2, exception="RuntimeError: Connection reset by peer"),
             record(3, state="running")]
    cause = root_cause(ranks, [observed(3, -9, timestamp=101.0), observed(0, 1, timestamp=101.0)])
    assert (cause.rank, cause.reason, cause.signal, cause.exit_code) == (3, "oom", "SIGKILL", 137)


def test_teardown_signals_are_consequences_not_causes():
    ranks = [record(0, state="running"), record(1, exit_code=2, ended_at=100.0, exception="SystemExit: 2")]
    cause = root_cause(ranks, [observed(0, -15, timestamp=99.0)])
    assert cause.rank == 1 and cause.exit_code == 2


def test_observations_alone_name_the_rank():
    cause = root_cause([], [observed(5, -11, timestamp=7.0, host="algo-3"), observed(1, -11, timestamp=9.0)])
    assert (cause.rank, cause.host, cause.reason, cause.signal) == (5, "algo-3", "killed", "SIGSEGV")


def test_nothing_failed():
    assert root_cause([record(0), record(1)], []) is None


def test_rendered_failure_follows_the_contract_and_parses_back():
    failure = Failure(reason="error", host="algo-2", rank=3, local_rank=1, exit_code=1, time=0.0,
                      exception="ValueError: boom", stderr_tail=["Traceback (most recent call last):",
                                                                 "ValueError: boom"])
    text = render_failure(failure)
    lines = text.splitlines()
    assert lines[0] == "rank 3 on host algo-2 exited with code 1: ValueError: boom"
    assert lines[1:8] == ["host: algo-2", "rank: 3", "local_rank: 1", "exit_code: 1", "signal: ", "reason: error",
                          "time: "]
    assert lines[8] == "--- last lines of stderr ---"
    parsed = parse_failure(text)
    assert parsed["rank"] == "3" and parsed["host"] == "algo-2" and parsed["reason"] == "error"
    assert parsed["stderr"] == ["Traceback (most recent call last):", "ValueError: boom"]


def test_oom_first_line():
    failure = Failure(reason="oom", host="algo-1", rank=0, local_rank=0, exit_code=137, signal="SIGKILL")
    assert failure.first_line() == "rank 0 on host algo-1 was killed by SIGKILL (exit code 137), likely out of memory"


def test_failure_file_is_written_once(tmp_path):
    path = str(tmp_path / "output" / "failure")
    assert write_once(path, "first\n")
    assert not write_once(path, "second\n")
    assert read_failure(path)["summary"] == "first"
    assert read_failure(str(tmp_path / "absent")) is None


def test_tail_is_attached_from_the_rank_file(tmp_path):
    directory = str(tmp_path)
    with open(records.tail_path(directory, 2), "w") as handle:
        handle.write("".join(f"line {index}\n" for index in range(100)))
    failure = with_tail(Failure(reason="error", host="algo-1", rank=2, exit_code=1), [directory], [])
    assert failure.stderr_tail[-1] == "line 99" and len(failure.stderr_tail) == 30
    assert os.path.exists(records.tail_path(directory, 2))
