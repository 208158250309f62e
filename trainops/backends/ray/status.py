"""A look at a Ray job in trainops' terms (its states: the engine's vocabulary), the evidence its failure rules
read, and what the look tells the guards."""

from __future__ import annotations

import re
import time
from typing import Any

from trainops.backends.kit import JobResult, Observation
from trainops.backends.ray.submission import MODEL_KEY
from trainops.backends.ray.vocabulary import FAILURE_FILE_END, FAILURE_FILE_START, ray_job_status

_FAILURE_FILE = re.compile(re.escape(FAILURE_FILE_START).replace(re.escape("{host}"), r"(?P<host>\S+)") + r"\n"
                           r"(?P<text>.*?)\n?" + re.escape(FAILURE_FILE_END), re.DOTALL)


def failure_file(message: str | None) -> tuple[str, str] | None:
    """(host, failure file) the driver printed in a failed job's log, which Ray's message ends with; None when it
    printed none (the last one printed when several)."""
    found = list(_FAILURE_FILE.finditer(message or ""))
    if not found:
        return None
    return found[-1].group("host"), found[-1].group("text").strip()


def ray_status(info: Any) -> str:
    """The status of Ray's `JobDetails` as text (``RUNNING``), whatever Ray's enum type."""
    status = getattr(info, "status", None)
    return str(getattr(status, "value", status) or "PENDING")


def result(info: Any, job_name: str, *, reattached: bool, stop_reason: str | None = None,
           log: str | None = None) -> JobResult:
    """The `JobResult` of one look: a stop's recorded reason is the failure reason of a stopped job (a guard's stop
    is reported as the guard's); the failing host's failure file that of a failed one (from ``log``, the job's log,
    or Ray's message), else Ray's message."""
    status = ray_status(info)
    ours = ray_job_status(status)
    start, end = _seconds(getattr(info, "start_time", None)), _seconds(getattr(info, "end_time", None))
    reason, failed_host = None, None
    if ours.value == "Failed":
        message = getattr(info, "message", None)
        # Ray's message keeps only the log's last lines, where the other hosts' lines may follow the failure file:
        # the whole log (``log``), when read, is where the driver printed it.
        printed = failure_file(log) or failure_file(message)
        if printed is not None:  # a rank failed: its host's failure file is the reason, as on Slurm
            failed_host, reason = printed
        else:
            reason = message or "the Ray job failed"
    elif ours.value == "Stopped":
        reason = stop_reason or getattr(info, "message", None) or "Stopped"
    error_type = getattr(info, "error_type", None)
    error = str(getattr(error_type, "value", error_type)) if error_type else None
    # A completed job's model: where the driver's host 1 packed it (the submission's metadata, a file:// output).
    model = dict(getattr(info, "metadata", None) or {}).get(MODEL_KEY) if ours.value == "Completed" else None
    return JobResult("ray", job_name, ours, secondary_status=status, failure_reason=reason, model_artifact=model,
                     duration_seconds=(end - start) if start and end else None, reattached=reattached,
                     details={"ray_status": status, "error_type": error, "failed_host": failed_host,
                              # the evidence Ray's rules read: its state, then its JobErrorType
                              "secondary_statuses": [status, *([error] if error else [])],
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
