"""Following a Slurm job: the wait's loop (logs, guards, the wait bound), the guards' watch, and `trainops logs`.

Every look goes through `SlurmBackend.status_record`. A look that cannot reach Slurm (`SlurmUnreachable`: the
controller restarting, slurmrestd down, a timeout) is not an answer about the job: the loop keeps the job's logs
flowing from the shared directory and looks again under the seam's one policy (`trainops.backends.looks`: it gives
up, leaving the job alone, only past both its bounds). The hosts' logs are the files the node script writes
(``logs/algo-N.log``), each line already prefixed with its host and rank by the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trainops.backends.guards import JobGuards, Observation, Tripped, Watchdog, act
from trainops.backends.slurm.transport import SlurmUnreachable
from trainops.backends.states import JobStatus, WaitTimedOut, wait_bound_seconds

Log = Callable[[str], None]


def last_activity(job_dir: Path) -> float | None:
    """When a host of the job last wrote a log line (the newest log file's modification time)."""
    times = []
    for path in (job_dir / "logs").glob("algo-*.log"):
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times) if times else None


class SlurmWatch:
    """A job's guards, looked at once a poll (`trainops.backends.guards.GuardWatch`): budget (elapsed time x the
    nodes' price), stall (no new log line), wait bound (from the job's submission)."""

    def __init__(self, backend: Any, handle: Any, guards: JobGuards, log: Log | None = None):
        self.backend, self.handle, self.log = backend, handle, log
        self.watchdog = Watchdog(guards)
        self._tripped: Tripped | None = None

    @property
    def tripped(self) -> Tripped | None:
        return self._tripped

    def look(self, record: dict[str, Any] | None = None) -> Tripped | None:
        """One check; ``record`` is a status record already read this poll (else one is read now)."""
        if record is None:
            try:
                record = self.backend.status_record(self.handle)
            except SlurmUnreachable:
                return None
        if JobStatus.parse(record.get("status")).terminal:
            return None
        started = record.get("started")
        seen = Observation(now=time.time(), started=started or record.get("submitted"),
                           running_since=started if record.get("slurm_state") == "RUNNING" else None,
                           billable_seconds=record.get("billable_seconds"),
                           last_activity=last_activity(Path(record["job_dir"])), max_run=record.get("max_run"))
        tripped = act(self.watchdog, seen, lambda reason: self.backend.stop(self.handle, reason), self.log)
        if tripped is not None:
            self._tripped = tripped
        return tripped


def follow(backend: Any, handle: Any, *, log: Log | None, watch: SlurmWatch | None, guards: JobGuards | None,
           poll_seconds: float) -> dict[str, Any]:
    """Wait for the job to end; returns its last status record."""
    from trainops.backends.looks import REATTACH, Looks

    cursor: dict[str, Any] = {}
    looks = Looks(f"Slurm job {handle.job_name}", poll_seconds=poll_seconds,
                  reattach=f"{REATTACH} `trainops status {handle.job_name} --backend slurm` shows where it stands.")
    while True:
        if log is not None:
            cursor = _print_new(backend, handle, cursor, log)
        try:
            record = backend.status_record(handle)
        except SlurmUnreachable as error:
            time.sleep(looks.failed(error))  # past both bounds of the policy: JobOutOfSight, the job left alone
            continue
        looks.succeeded()
        if JobStatus.parse(record.get("status")).terminal:
            if log is not None:
                _print_new(backend, handle, cursor, log)
            return record
        tripped = watch.look(record) if watch is not None else None
        start = record.get("started") or record.get("submitted")
        if start is not None:
            grace = guards.grace_seconds if guards is not None else 3600.0
            bound = wait_bound_seconds(record.get("max_run") or 86400, None, grace)
            passed = time.time() > float(start) + bound and (guards is None or not guards.stop_at_bound)
            if passed or (tripped is not None and tripped.kind == "wait_bound" and guards is not None
                          and not guards.stop_at_bound):
                raise WaitTimedOut(f"Slurm job {handle.job_name} did not end within its bound ({bound:.0f} s from "
                                   "its start): it is left running; trainops stop NAME ends it")
        time.sleep(poll_seconds)


def _print_new(backend: Any, handle: Any, cursor: dict[str, Any], log: Log) -> dict[str, Any]:
    while True:
        lines, cursor = backend.log_lines(handle, cursor, limit=1000)
        for line in lines:
            log(line)
        if len(lines) < 1000:
            return cursor


def iter_logs(backend: Any, handle: Any, *, follow: bool, poll_seconds: float) -> Iterator[str]:
    """The job's log lines, each prefixed with its host (and rank); with ``follow``, new lines until it ends."""
    from trainops.backends.looks import Looks

    looks = Looks(f"Slurm job {handle.job_name}", poll_seconds=poll_seconds)
    looks.look(lambda: backend.status_record(handle))  # a clear error when there is no such job
    cursor: dict[str, Any] = {}
    while True:
        ended = not follow
        if follow:
            try:
                ended = JobStatus.parse(backend.status_record(handle).get("status")).terminal
                looks.succeeded()
            except SlurmUnreachable as error:
                looks.failed(error)  # past both bounds: JobOutOfSight (the lines so far were printed)
                ended = False
        while True:
            lines, cursor = backend.log_lines(handle, cursor, limit=1000)
            yield from lines
            if len(lines) < 1000:
                break
        if ended:
            return
        time.sleep(poll_seconds)
