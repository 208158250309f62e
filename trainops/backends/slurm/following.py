"""What the kit's polled-job helper observes of a Slurm job (`trainops.backends.polled`), and the guards' watch.

`SlurmBackend.look` reads the job's status record (`SlurmBackend.status_record`: its own records, then Slurm) and
hands the kit a `Look`: the result, and what the guards observe (the start, or the submission before it; since when
the script runs: the job RUNNING; its billable seconds; the newest host log line, the files the node script writes
under ``logs/algo-N.log``). The wait, the guards, failed looks (`SlurmUnreachable` is a `LookFailed`: the controller
restarting, slurmrestd down, a timeout) and ``logs --follow`` are the kit's, as for every polled backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.backends.api import JobHandle, JobResult
from trainops.backends.guards import JobGuards, Observation, Tripped
from trainops.backends.polled import Look, Watch
from trainops.backends.states import JobStatus

#: What a result carries beside the common keys (`JobResult.details`).
DETAILS = ("slurm_job_id", "slurm_state", "nodes", "job_dir", "checkpoint_dir", "output_artifact", "hosts",
           "stop_requested", "instance_type", "instance_count", "batch_log")


def last_activity(job_dir: Path) -> float | None:
    """When a host of the job last wrote a log line (the newest log file's modification time)."""
    times = []
    for path in (job_dir / "logs").glob("algo-*.log"):
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times) if times else None


def result_of(record: Mapping[str, Any], handle: JobHandle | None) -> JobResult:
    """The `JobResult` of a status record."""
    return JobResult(backend="slurm", job_name=handle.job_name if handle else str(record.get("job_name") or ""),
                     status=JobStatus.parse(record.get("status")), secondary_status=record.get("secondary_status"),
                     failure_reason=record.get("failure_reason"), model_artifact=record.get("model_artifact"),
                     duration_seconds=record.get("duration_seconds"),
                     billable_seconds=record.get("billable_seconds"),
                     reattached=handle is not None and not handle.created,
                     details={key: record.get(key) for key in DETAILS})


def observe(record: Mapping[str, Any]) -> Observation | None:
    """What the guards see of a job from its status record: budget (elapsed time x the nodes' price), stall (no new
    log line once it runs), wait bound (from its start, or its submission while it queues)."""
    started = record.get("started")
    start = started or record.get("submitted")
    if start is None:
        return None
    return Observation(now=time.time(), started=start,
                       running_since=started if record.get("slurm_state") == "RUNNING" else None,
                       billable_seconds=record.get("billable_seconds"),
                       last_activity=last_activity(Path(record["job_dir"])) if record.get("job_dir") else None,
                       max_run=record.get("max_run"))


def look_of(record: Mapping[str, Any], handle: JobHandle | None) -> Look:
    return Look(result_of(record, handle), observe(record))


class SlurmWatch(Watch):
    """The kit's watch over a Slurm job; ``look`` also takes a status record already read this poll."""

    def __init__(self, backend: Any, handle: JobHandle | None, guards: JobGuards,
                 log: Callable[[str], None] | None = None):
        super().__init__(guards, lambda: backend.look(handle), lambda reason: backend.stop(handle, reason), log)
        self.handle = handle

    def look(self, found: Look | Mapping[str, Any] | None = None) -> Tripped | None:
        if found is not None and not isinstance(found, Look):
            found = look_of(found, self.handle)
        return super().look(found)
