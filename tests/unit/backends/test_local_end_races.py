"""A local job that ends between two of a reader's steps is read as it ended: the follower of a job started by
another caller does not take a job that recorded and ended at once for one that records nothing, and `trainops
logs --follow` prints the lines a job wrote just before it ended."""

from __future__ import annotations

from types import SimpleNamespace

from trainops.backends.hostfs.locks import try_lock
from trainops.backends.local import identity, logs, status
from trainops.backends.local.job import LocalJob


def test_a_follower_takes_a_job_that_recorded_and_ended_between_its_checks_for_one_that_ran(tmp_path, monkeypatch):
    job_dir = tmp_path / "jobs" / "quick"
    job_dir.mkdir(parents=True)

    def the_other_caller_records_and_ends_now(path):  # after the follower found no record, before its lock probe
        status.write(job_dir, {"job_name": "quick", "status": "Failed", "failure_reason": "refused: no room"})
        return False

    monkeypatch.setattr(identity, "lock_held", the_other_caller_records_and_ends_now)
    follower = SimpleNamespace(job_name="quick", job_dir=job_dir, workdir=tmp_path, _stop_reason=None)
    result = LocalJob._follow(follower)  # type: ignore[arg-type]
    assert result.status == "Failed" and result.failure_reason == "refused: no room"


def test_following_the_logs_prints_the_lines_written_just_before_the_job_ended(tmp_path, monkeypatch):
    job_dir = tmp_path / "jobs" / "ending"
    (job_dir / "logs").mkdir(parents=True)
    log = job_dir / "logs" / "algo-1.log"
    log.write_text("first\n")
    controller = try_lock(job_dir / identity.CONTROLLER_LOCK, "the job's controller")  # a live job holds it
    status.write(job_dir, {"job_name": "ending", "status": "InProgress", "controller": identity.own_identity()})
    assert controller is not None
    real_read, reads = status.read, []

    def the_job_prints_and_ends_now(job_name, workdir=None):  # from the second read on: after a pass over the files
        reads.append(job_name)
        if len(reads) >= 2 and "last" not in log.read_text():
            with log.open("a") as handle:
                handle.write("last\n")
            status.write(job_dir, {"job_name": "ending", "status": "Completed"})
            controller.release()
        return real_read(job_name, workdir)

    monkeypatch.setattr(status, "read", the_job_prints_and_ends_now)
    lines = list(logs.iter_local_logs("ending", tmp_path, follow=True, poll_seconds=0.01))
    assert lines == ["[algo-1] first", "[algo-1] last"]
