"""Ports that concurrent jobs never share, finding every process of a job, and stale status records."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

from trainops.backends.hostfs.locks import try_lock
from trainops.backends.local import status
from trainops.backends.local.identity import own_identity
from trainops.backends.local.ports import _locks_dir, reserve_port
from trainops.backends.local.processes import MARKER, job_processes


def test_reserved_ports_differ_and_stay_locked_until_released():
    first, second = reserve_port(), reserve_port()
    try:
        assert first.port != second.port
        with open(_locks_dir() / f"{first.port}.lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked_elsewhere = False
            except OSError:
                locked_elsewhere = True
        assert locked_elsewhere
    finally:
        first.release()
        second.release()
    with open(_locks_dir() / f"{first.port}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: raises if still held
        fcntl.flock(handle, fcntl.LOCK_UN)


def test_job_processes_finds_orphaned_grandchildren_by_marker():
    job_id = f"test-{os.getpid()}-{time.time_ns()}"
    # A child that starts a grandchild in a new session and exits: the grandchild is an orphan nobody waits for.
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], "
            "start_new_session=True)")
    subprocess.run([sys.executable, "-c", code], env={**os.environ, MARKER: job_id}, check=True)
    deadline = time.monotonic() + 10
    while not job_processes(job_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(job_processes(job_id)) == 1
    for pid in job_processes(job_id):  # counted by status, never signalled by trainops: the test cleans up
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while job_processes(job_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job_processes(job_id) == []


def test_in_progress_job_without_its_controller_reads_as_failed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    status.write(tmp_path / "jobs" / "ghost", {"job_name": "ghost", "status": "InProgress",
                                               "controller_pid": dead.pid})
    record = status.read("ghost", tmp_path)
    assert record["status"] == "Failed" and "exited before the job ended" in record["failure_reason"]
    # A live pid alone proves nothing (it may be reused, or pid 1 of a container): the controller's lock does.
    status.write(tmp_path / "jobs" / "pid-only", {"job_name": "pid-only", "status": "InProgress",
                                                  "controller_pid": os.getpid()})
    assert status.read("pid-only", tmp_path)["status"] == "Failed"
    status.write(tmp_path / "jobs" / "alive", {"job_name": "alive", "status": "InProgress",
                                               "controller_pid": os.getpid(), "controller": own_identity()})
    lock = try_lock(tmp_path / "jobs" / "alive" / ".controller.lock", "alive")  # the recorded controller's own
    try:
        assert status.read("alive", tmp_path)["status"] == "InProgress"
    finally:
        lock.release()
    assert status.read("alive", tmp_path)["status"] == "Failed"


def test_a_job_that_ends_while_it_is_described_reads_as_it_ended(tmp_path, monkeypatch):
    # The race the fresh-clone CI run of af38d02 lost: the record is read InProgress, then the controller writes
    # Stopped and exits (the kernel drops its lock), then the lock is probed. That is a stopped job, not a lost one.
    job_dir = tmp_path / "jobs" / "stopping"
    status.write(job_dir, {"job_name": "stopping", "status": "InProgress"})

    def controller_ends_now(record, path):
        status.write(job_dir, {"job_name": "stopping", "status": "Stopped", "failure_reason": "budget: spent"})
        return False

    monkeypatch.setattr(status.identity, "controller_alive", controller_ends_now)
    record = status.read("stopping", tmp_path)
    assert record["status"] == "Stopped" and record["failure_reason"] == "budget: spent"
