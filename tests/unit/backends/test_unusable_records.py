"""A job record that cannot be used never makes trainops advise deleting the state of a job that may still run
(issue 37 item 5): with a process holding the job's lock the message says the job may be running and to leave its
directory alone until that process has ended; with none it says nothing runs the job and removing the directory only
forgets it. Local training jobs (the controller lock), local evaluation jobs (the runner's lock) and Slurm job
records (whose job Slurm may still run)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from trainops.errors import JobFailed, SpecError


@contextlib.contextmanager
def holding(path: Path):
    """This process holds the lock at ``path`` for the block, as a running controller or runner does."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


@pytest.fixture
def local_job(tmp_path):
    from trainops.backends.hostfs import paths

    job_dir = paths.job_dir("digits-1", str(tmp_path))
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    (job_dir / "status.json").write_text("{not json")
    return job_dir


def test_an_unreadable_status_record_of_a_running_local_job_is_not_deleted_advice(local_job):
    from trainops.backends.local import status
    from trainops.backends.local.identity import CONTROLLER_LOCK

    with holding(local_job / CONTROLLER_LOCK), pytest.raises(SpecError) as running:
        status.read_record(local_job, "digits-1")
    message = str(running.value)
    assert "may still be running" in message and f"leave {local_job} as it is" in message
    assert "remove it to forget the job" in message and "until that process has ended" in message
    with pytest.raises(SpecError) as idle:
        status.read_record(local_job, "digits-1")
    assert f"nothing runs job 'digits-1': remove {local_job} to forget it" in str(idle.value)


def test_a_corrupt_record_of_a_running_local_job_says_it_may_run(local_job):
    from trainops.backends.local import status
    from trainops.backends.local.identity import CONTROLLER_LOCK

    (local_job / "status.json").write_text('{"status": "Dancing", "job_name": "digits-1"}')
    with holding(local_job / CONTROLLER_LOCK), pytest.raises(SpecError) as running:
        status.read_record(local_job, "digits-1")
    assert "is corrupt" in str(running.value) and "may still be running" in str(running.value)


def test_an_unreadable_evaluation_record_whose_runner_holds_its_lock_says_it_may_run(tmp_path):
    from trainops.backends.local import evaluation_job

    directory = evaluation_job.job_path("evaluate-1", str(tmp_path))
    directory.mkdir(parents=True, mode=0o700)
    (directory / "status.json").write_text("[]")
    with holding(directory / evaluation_job.RUN_LOCK), pytest.raises(JobFailed) as running:
        evaluation_job.read("evaluate-1", str(tmp_path))
    assert "this evaluation job may still be running" in str(running.value)
    with pytest.raises(JobFailed) as idle:
        evaluation_job.read("evaluate-1", str(tmp_path))
    assert "nothing runs this evaluation job" in str(idle.value)


def test_an_unreadable_slurm_record_says_to_check_the_queue_first(tmp_path):
    from trainops.backends.slurm import records

    job_dir = tmp_path / "digits-1"
    job_dir.mkdir()
    (job_dir / "job.json").write_text("{broken")
    with pytest.raises(SpecError) as caught:
        records.read(job_dir, "job.json")
    message = str(caught.value)
    assert message.index("squeue --name digits-1") < message.index(f"remove {job_dir}")
    assert "once Slurm no longer runs it" in message


def test_a_usable_record_is_read_without_probing_the_jobs_lock(local_job, monkeypatch):
    # Every status read checks its record (a poller looks every few seconds): the lock is probed only for the advice
    # of a record refused.
    from trainops.backends.local import identity, status

    probes = []
    monkeypatch.setattr(identity, "lock_held", lambda *args: probes.append(args) or False)
    (local_job / "status.json").write_text('{"status": "InProgress", "job_name": "digits-1"}')
    assert status.read_record(local_job, "digits-1")["status"] == "InProgress" and probes == []
    (local_job / "status.json").write_text('{"status": "Dancing", "job_name": "digits-1"}')
    with pytest.raises(SpecError) as refused:
        status.read_record(local_job, "digits-1")
    assert len(probes) == 1 and "nothing runs job 'digits-1'" in str(refused.value)
