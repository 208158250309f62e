"""Ray's job statuses in trainops' terms (one table), and what a look at a Ray job tells the guards."""

from __future__ import annotations

import time
from typing import Any

from trainops.backends.kit import JobResult, JobStatus, Observation

#: Ray's JobStatus -> trainops' (SageMaker's spelling, `JobStatus.parse`): PENDING and RUNNING wait.
STATUSES = {"PENDING": "InProgress", "RUNNING": "InProgress", "SUCCEEDED": "Completed", "FAILED": "Failed",
            "STOPPED": "Stopped"}


def ray_status(info: Any) -> str:
    """The status of Ray's `JobDetails` as text (``RUNNING``), whatever Ray's enum type."""
    status = getattr(info, "status", None)
    return str(getattr(status, "value", status) or "PENDING")


def result(info: Any, job_name: str, *, reattached: bool, stop_reason: str | None = None) -> JobResult:
    """The `JobResult` of one look: a stop's recorded reason is the failure reason of a stopped job (a guard's stop
    is reported as the guard's); Ray's message that of a failed one."""
    status = ray_status(info)
    ours = STATUSES.get(status, "InProgress")
    start, end = _seconds(getattr(info, "start_time", None)), _seconds(getattr(info, "end_time", None))
    reason = None
    if ours == "Failed":
        reason = getattr(info, "message", None) or "the Ray job failed"
    elif ours == "Stopped":
        reason = stop_reason or getattr(info, "message", None) or "Stopped"
    error_type = getattr(info, "error_type", None)
    return JobResult("ray", job_name, JobStatus.parse(ours), secondary_status=status, failure_reason=reason,
                     duration_seconds=(end - start) if start and end else None, reattached=reattached,
                     details={"ray_status": status, "error_type": str(error_type) if error_type else None,
                              "driver_exit_code": getattr(info, "driver_exit_code", None),
                              "submission_id": getattr(info, "submission_id", None) or job_name})


def observation(info: Any, max_run: float | None) -> Observation | None:
    """What the guards observe: the job's start and billable seconds (None before the driver started)."""
    start = _seconds(getattr(info, "start_time", None))
    if not start or ray_status(info) == "PENDING":
        return None
    now = time.time()
    end = _seconds(getattr(info, "end_time", None))
    return Observation(now=now, started=start, running_since=start, billable_seconds=max(0.0, (end or now) - start),
                       last_activity=None, max_run=max_run)


def _seconds(milliseconds: Any) -> float | None:
    return float(milliseconds) / 1000.0 if milliseconds else None
