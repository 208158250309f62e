"""`trainops stop` for local jobs: ask the job's controller to stop it, or clean up after a controller that died.

Nothing is signalled on the strength of a record. A running job is asked to stop through a `stop-request` file
its controller polls (`trainops.backends.local.watch`); what a dead controller left behind is found and stopped by
`trainops.backends.local.tracking` from what the kernel reports (the job's marker in a process's environment; a
host's PID namespace ends with its init), never from the pids a record lists. Only when the controller does not answer
in time is it killed, and only if it is proven (`identity.signalable_controller`: the recorded identity *and* the
kernel reporting it as the holder of the job's lock): then its guard stops the job's processes and records the
job.
"""

from __future__ import annotations

import os
import signal
import time

from trainops.backends.local import identity, paths, status
from trainops.backends.local.tracking import stop_processes
from trainops.backends.local.watch import request_stop


def _leftovers(job_dir, record: dict) -> str:
    found, left = stop_processes(job_dir, record, grace_seconds=5.0)
    if not found:
        return ""
    return f"; stopped {found - left} process(es) it had left running" + (f", {left} could not be stopped"
                                                                          if left else "")


def stop_local_job(job_name: str, workdir: str | os.PathLike | None = None, timeout: float = 60.0) -> str:
    """Stop a running local job; returns a one-line description of what happened."""
    job_dir = paths.job_dir(job_name, workdir)
    record = status.read(job_name, workdir)
    if record["status"] not in status.ACTIVE:
        return f"{job_name}: {record['status']} (nothing to stop{_leftovers(job_dir, record)})"
    request_stop(job_dir, "Stopped by trainops stop")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = status.read(job_name, workdir)
        if record["status"] not in status.ACTIVE:
            return f"{job_name}: {record['status']}{_leftovers(job_dir, record)}"
        time.sleep(0.2)
    pid = identity.signalable_controller(status.read_record(job_dir, job_name), job_dir)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)  # proven to be the job's controller: its guard takes over from here
        guard_deadline = time.monotonic() + 30.0
        while identity.lock_held(job_dir) and time.monotonic() < guard_deadline:
            time.sleep(0.2)
    if identity.lock_held(job_dir):
        return (f"{job_name}: still {record['status']}: its controller did not stop it within {timeout:.0f} s and "
                "could not be proven to be the job's own process, so it was not signalled")
    record = status.read(job_name, workdir)
    extra = _leftovers(job_dir, record)
    record = status.read_record(job_dir, job_name)
    if record.get("status") in status.ACTIVE:
        record.update(status="Stopped", failure_reason="stopped by trainops stop (the controller did not answer)")
        status.write(job_dir, record)
    return f"{job_name}: Stopped (forced){extra}"
