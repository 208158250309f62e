"""`trainops stop` for local jobs: ask the process running the job to stop it, or clean up after it if it died."""

from __future__ import annotations

import os
import signal
import time

from trainops.backends.local import paths, status
from trainops.backends.local.processes import kill_job


def stop_local_job(job_name: str, workdir: str | os.PathLike | None = None, timeout: float = 60.0) -> str:
    """Stop a running local job; returns a one-line description of what happened."""
    record = status.read(job_name, workdir)
    if record["status"] != "InProgress":
        if record.get("job_id"):
            kill_job(record["job_id"], grace_seconds=1.0)  # a dead controller may have left processes behind
        return f"{job_name}: {record['status']} (nothing to stop)"
    pid = record.get("controller_pid")
    os.kill(pid, signal.SIGTERM)  # its handler stops every host in order and records the status
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = status.read(job_name, workdir)
        if record["status"] != "InProgress":
            return f"{job_name}: {record['status']}"
        time.sleep(0.2)
    kill_job(record["job_id"], grace_seconds=1.0)
    record.update(status="Stopped", failure_reason="stopped by trainops stop (the controller did not answer)")
    status.write(paths.job_dir(job_name, workdir), record)
    return f"{job_name}: Stopped (forced)"
