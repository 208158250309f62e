"""How mpirun hosts meet locally, and reading mpirun's report of a failed rank."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from trainops.runtime import mpi_coordination as coordination


def never() -> bool:
    return False


def test_workers_register_and_receive_the_outcome():
    name = f"trainops-test/{uuid.uuid4()}"
    master = coordination.MasterCoordinator(name)
    outcomes: dict[str, object] = {}

    def worker(host: str) -> None:
        connection = coordination.register_with_master(name, host, f"/records/{host}", {"SM_CURRENT_HOST": host},
                                                       never, timeout=20)
        outcomes[host] = coordination.wait_for_outcome(connection, never, timeout=20)

    threads = [threading.Thread(target=worker, args=(host,)) for host in ("algo-2", "algo-3")]
    for thread in threads:
        thread.start()
    registered = master.wait_for(("algo-2", "algo-3"), never, timeout=20)
    assert {host: r.env["SM_CURRENT_HOST"] for host, r in registered.items()} == {"algo-2": "algo-2",
                                                                                  "algo-3": "algo-3"}
    assert registered["algo-3"].record_dir == "/records/algo-3"
    master.finish({"exit_code": 1, "failure": "rank 2 on host algo-3 exited with code 1\n"})
    for thread in threads:
        thread.join(20)
    assert outcomes["algo-2"] == {"exit_code": 1, "failure": "rank 2 on host algo-3 exited with code 1\n"}


def test_a_second_master_for_the_same_job_is_refused():
    name = f"trainops-test/{uuid.uuid4()}"
    first = coordination.MasterCoordinator(name)
    try:
        with pytest.raises(coordination.CoordinationError, match="running twice"):
            coordination.MasterCoordinator(name)
    finally:
        first.finish({})


def test_missing_hosts_time_out_with_their_names():
    master = coordination.MasterCoordinator(f"trainops-test/{uuid.uuid4()}")
    try:
        with pytest.raises(coordination.CoordinationError, match="algo-2 did not register"):
            master.wait_for(("algo-2",), never, timeout=0.5)
    finally:
        master.finish({})


def test_waiting_stops_when_asked():
    master = coordination.MasterCoordinator(f"trainops-test/{uuid.uuid4()}")
    try:
        with pytest.raises(InterruptedError):
            master.wait_for(("algo-2",), lambda: True, timeout=30)
        with pytest.raises(InterruptedError):
            coordination.register_with_master(f"nobody/{uuid.uuid4()}", "algo-2", "", {}, lambda: True)
    finally:
        master.finish({})


def test_a_master_that_goes_away_is_noticed():
    name = f"trainops-test/{uuid.uuid4()}"
    master = coordination.MasterCoordinator(name)
    connection = coordination.register_with_master(name, "algo-2", "", {}, never, timeout=10)
    master.wait_for(("algo-2",), never, timeout=10)
    master.workers["algo-2"].connection.close()
    master.server.close()
    assert coordination.wait_for_outcome(connection, never, timeout=10) is None


def test_host_environment_files(tmp_path):
    path = coordination.write_host_environment(str(tmp_path), "algo-2", {"A": "1"})
    assert json.loads(open(path).read()) == {"A": "1"}
    with pytest.raises(Exception, match="cannot name a file"):
        coordination.write_host_environment(str(tmp_path), "../x", {})


SIGNALLED = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
mpirun noticed that process rank 3 with PID 0 on node vm exited on signal 9 (Killed).
"""
EXITED = """mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[30423,1],1]
  Exit code:    3
"""


def test_mpirun_reports_are_read():
    assert coordination.parse_mpirun_report(SIGNALLED) == {"rank": 3, "exit_code": -9}
    assert coordination.parse_mpirun_report(EXITED) == {"rank": 1, "exit_code": 3}
    assert coordination.parse_mpirun_report("all good") is None


def test_daemon_pids_read_proc(tmp_path):
    for pid, name in ((10, "orted"), (11, "python"), (12, "prted")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(name + "\n")
    (tmp_path / "self").mkdir()
    assert sorted(coordination.daemon_pids(str(tmp_path))) == [10, 12]


def test_hosts_that_share_a_directory_meet_in_it(tmp_path):
    """Through an agent (a Slurm job's nodes): registrations and the outcome are files in the launch's directory."""
    meeting = str(tmp_path / "mpi" / "12.0")
    master = coordination.MeetingDirectory(meeting, poll_seconds=0.01)
    outcomes: dict[str, object] = {}

    def worker(host: str) -> None:
        mine = coordination.MeetingDirectory(meeting, outcome_poll_seconds=0.01)
        mine.register(host, f"/records/{host}", {"SM_CURRENT_HOST": host})
        outcomes[host] = mine.wait_for_outcome(never, timeout=20)

    threads = [threading.Thread(target=worker, args=(host,)) for host in ("algo-2", "algo-3")]
    for thread in threads:
        thread.start()
    registered = master.wait_for(("algo-2", "algo-3"), never, timeout=20)
    assert {host: (r.record_dir, r.env) for host, r in registered.items()} == {
        "algo-2": ("/records/algo-2", {"SM_CURRENT_HOST": "algo-2"}),
        "algo-3": ("/records/algo-3", {"SM_CURRENT_HOST": "algo-3"})}
    master.finish({"exit_code": 1, "failure": "rank 2 on host algo-3 exited with code 1\n"})
    for thread in threads:
        thread.join(20)
    assert outcomes == {host: {"exit_code": 1, "failure": "rank 2 on host algo-3 exited with code 1\n"}
                        for host in ("algo-2", "algo-3")}


def test_a_meeting_names_the_hosts_that_never_came_and_stops_when_asked(tmp_path):
    meeting = coordination.MeetingDirectory(str(tmp_path / "mpi"), poll_seconds=0.01, outcome_poll_seconds=0.01)
    meeting.register("algo-2", "/records/algo-2", {})
    with pytest.raises(coordination.CoordinationError, match="algo-3 did not register"):
        meeting.wait_for(("algo-2", "algo-3"), never, timeout=0.05)
    with pytest.raises(InterruptedError):
        meeting.wait_for(("algo-4",), lambda: True, timeout=20)
    with pytest.raises(InterruptedError):
        meeting.wait_for_outcome(lambda: True, timeout=20)
    assert meeting.wait_for_outcome(never, timeout=0.05) is None  # the master never said: the worker reports it
    with pytest.raises(coordination.ContractError):
        meeting.register("../algo-2", "/records", {})
