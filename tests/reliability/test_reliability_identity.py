"""A local job's controller is identified by its lock, its pid and start time and the boot id
(`trainops.backends.local.identity`), never by a pid alone; corrupt records are refused with the field named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.backends.local import identity, status
from trainops.backends.local.locks import try_lock
from trainops.errors import SpecError


def test_only_a_proven_live_process_may_be_signalled():
    me = identity.own_identity()
    assert identity.same_process(me)
    assert identity.signalable_controller({"controller": me}) is None  # never this process itself
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        from trainops.runtime.processes import process_start_ticks

        proven = {"pid": child.pid, "start_ticks": process_start_ticks(child.pid), "boot_id": identity.boot_id()}
        assert identity.signalable_controller({"controller": proven}) == child.pid
        reused = {**proven, "start_ticks": proven["start_ticks"] - 1}  # same pid, another process
        other_boot = {**proven, "boot_id": "another-boot"}
        no_time = {**proven, "start_ticks": None}
        for record in (reused, other_boot, no_time, {**proven, "pid": 1}, {**proven, "pid": -1}):
            assert identity.signalable_controller({"controller": record}) is None, record
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("record, field", [
    ([1, 2], "status"),
    ({"status": "InProgress", "controller_pid": "123"}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": -1}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": 0}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": True}, "controller_pid"),
    ({"status": "InProgress", "controller": {"pid": "x"}}, "controller.pid"),
    ({"status": "InProgress", "controller": [1]}, "controller"),
    ({"status": "Running"}, "status"),
])
def test_corrupt_records_are_refused_with_the_field_named(tmp_path: Path, record, field):
    job_dir = tmp_path / "jobs" / "bad"
    job_dir.mkdir(parents=True)
    (job_dir / "status.json").write_text(json.dumps(record))
    with pytest.raises(SpecError) as caught:
        status.read("bad", tmp_path)
    assert any(problem.path == field for problem in caught.value.problems), caught.value
    assert "remove the job directory" in str(caught.value)


def test_liveness_is_the_lock_not_the_pid(tmp_path: Path):
    job_dir = tmp_path / "jobs" / "job"
    status.write(job_dir, {"job_name": "job", "status": "InProgress", "controller_pid": 1})
    assert status.read("job", tmp_path)["status"] == "Failed"  # pid 1 is alive, yet nobody controls the job
    lock = try_lock(job_dir / identity.CONTROLLER_LOCK, "job")
    try:
        assert identity.lock_held(job_dir) and status.read("job", tmp_path)["status"] == "InProgress"
    finally:
        lock.release()
    assert not identity.lock_held(job_dir)


def test_tracking_never_takes_init_the_caller_or_its_ancestors_for_the_job(tmp_path: Path):
    """Even a processes.json that names pid 1, this process and its parent (a corrupt or forged record) makes
    nothing of them the job's: they are never counted or signalled."""
    import os

    from trainops.backends.local.tracking import JobProcesses
    from trainops.runtime.processes import process_start_ticks

    forged = {pid: process_start_ticks(pid) for pid in (1, os.getpid(), os.getppid())}
    processes = JobProcesses(tmp_path, "forged", known={pid: ticks for pid, ticks in forged.items() if ticks},
                             sessions={os.getsid(0): process_start_ticks(os.getsid(0)) or 0})
    assert processes.members() == {}
    assert processes.stop(grace_seconds=0.1) == (0, 0)
