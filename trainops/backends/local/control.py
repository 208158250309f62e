"""Stopping a local job from outside its controller: `trainops stop`, a guard that tripped in another process.

Nothing is signalled on the strength of a record. A running job is asked to stop through a `stop-request` file in
its job directory, which its controller reads while it starts and watches the hosts (`LocalJob`). Only when the
controller does not answer in time is it killed, and only if it is proven (`identity.signalable_controller`: the
recorded identity *and* the kernel reporting it as the holder of the job's lock); then each host's launcher sees
the controller's pipe close and ends every process of its host before it lets the job's locks go
(`trainops.backends.local.host_init`).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from trainops.backends.hostfs import paths
from trainops.backends.hostfs.safe_fs import read_text, write_atomically
from trainops.backends.local import identity, status

STOP_REQUEST = "stop-request"


def request_stop(job_dir: Path, reason: str) -> None:
    """Ask the controller of the job in `job_dir` to stop it (it reads this file while the job runs)."""
    write_atomically(job_dir / STOP_REQUEST, reason.encode("utf-8"))


def clear_stop_request(job_dir: Path) -> None:
    """Forget a request left by an earlier run of this job name; called before the job's first status record, so
    that a stop asked for once the record names this job is never lost."""
    try:
        (job_dir / STOP_REQUEST).unlink()
    except FileNotFoundError:
        pass


def stop_requested(job_dir: Path) -> str | None:
    """The reason of a pending stop request, or None (never read through a link planted under its name)."""
    try:
        return read_text(job_dir / STOP_REQUEST, 4096).strip() or "Stopped by trainops stop"
    except OSError:
        return None


def stop_local_job(job_name: str, workdir: str | os.PathLike | None = None, timeout: float = 60.0) -> str:
    """Stop a running local job; returns a one-line description of what happened."""
    job_dir = paths.job_dir(job_name, workdir)
    record = status.read(job_name, workdir)
    if record["status"] not in status.ACTIVE:
        return f"{job_name}: {record['status']} (nothing to stop)"
    request_stop(job_dir, "Stopped by trainops stop")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = status.read(job_name, workdir)
        if record["status"] not in status.ACTIVE:
            return f"{job_name}: {record['status']}"
        time.sleep(0.2)
    pid = identity.signalable_controller(status.read_record(job_dir, job_name), job_dir)
    if pid is None:
        record = status.read(job_name, workdir)
        if record["status"] not in status.ACTIVE:  # it ended (or its controller went) meanwhile
            return f"{job_name}: {record['status']}"
        return (f"{job_name}: still {record['status']}: its controller did not stop it within {timeout:.0f} s and "
                "could not be proven to be the job's own process, so it was not signalled")
    os.kill(pid, signal.SIGKILL)  # proven to be the job's controller: its hosts' launchers end every host
    hosts_deadline = time.monotonic() + 30.0
    while identity.lock_held(job_dir) and time.monotonic() < hosts_deadline:
        time.sleep(0.2)
    record = status.read_record(job_dir, job_name)
    if record.get("status") in status.ACTIVE:
        record.update(status="Stopped", failure_reason="stopped by trainops stop (the controller did not answer)")
        status.write(job_dir, record)
    if identity.lock_held(job_dir):
        return (f"{job_name}: Stopped (forced); a host's launcher has not ended yet and still holds the job's lock "
                "(its processes are counted by trainops status)")
    return f"{job_name}: Stopped (forced)"
