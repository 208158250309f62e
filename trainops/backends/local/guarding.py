"""The guards of a local job's wait (`trainops.backends.guards`), watched from a thread beside the job.

What the watchdog observes of a local job: its start is the status record's ``started``; its billable seconds are
its wall time since then (what the same run would cost on SageMaker: x instances x the catalog's price, the figure
the train step prices a local attempt with); its activity is the growth of the hosts' log files
(``<job>/logs/<host>.log``, which carry every line the ranks print, metrics included), counted from the moment the
log directory exists (the hosts are starting). A guard that trips calls ``stop(message)``: for a job this process
runs, `LocalJob.request_stop` (a flag the run obeys within a tenth of a second); for another process's job, the
stop-request file its controller polls.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.backends.api import JobResult
from trainops.backends.guards import JobGuards, Observation, Tripped
from trainops.backends.polled import Look, Watch
from trainops.backends.states import JobStatus

LOOK_SECONDS = 1.0


class LogGrowth:
    """When the hosts' log files last grew (seconds since the epoch), from their sizes at each look."""

    def __init__(self, logs_dir: Path):
        self.logs_dir = Path(logs_dir)
        self.sizes: dict[str, int] = {}
        self.first_seen: float | None = None  # when the log directory appeared: the hosts were starting
        self.last_growth: float | None = None

    def look(self, now: float) -> None:
        try:
            entries = list(os.scandir(self.logs_dir))
        except OSError:
            return
        if self.first_seen is None:
            self.first_seen = now
        for entry in entries:
            if not entry.name.endswith(".log"):
                continue
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if size != self.sizes.get(entry.name):
                if size > self.sizes.get(entry.name, 0):
                    self.last_growth = now
                self.sizes[entry.name] = size


class LocalGuard(Watch):
    """The kit's watch over one local job (`trainops.backends.polled.Watch`), observing it itself: the status
    record's start, and the growth of its hosts' logs since the previous look (state this watch keeps). Run as a
    thread beside a job this process runs (`start` ... `close`), or looked at once a poll (the kit's wait, the
    Airflow trigger). `tripped` is the guard that stopped it, if any."""

    def __init__(self, job_dir: str | os.PathLike, guards: JobGuards, stop: Callable[[str], Any], *,
                 read_record: Callable[[], dict[str, Any]], log: Callable[[str], None] | None = None,
                 now: Callable[[], float] = time.time, look_seconds: float = LOOK_SECONDS):
        super().__init__(guards, self._unused_look, stop, log)
        self.growth = LogGrowth(Path(job_dir) / "logs")
        self.stop = stop
        self.read_record = read_record
        self.now = now
        self.look_seconds = look_seconds
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _unused_look() -> Any:  # pragma: no cover - `look` observes the job itself
        raise NotImplementedError

    def observe(self) -> Observation | None:
        """One look (None before the job has a record with its start)."""
        try:
            record = self.read_record()
        except Exception:  # noqa: BLE001 - no record yet (the job is laying out): look again later
            return None
        started = record.get("started")
        if not isinstance(started, (int, float)):
            return None
        now = self.now()
        self.growth.look(now)
        raw = record.get("spec")
        spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
        return Observation(now=now, started=float(started), running_since=self.growth.first_seen,
                           billable_seconds=max(0.0, now - float(started)), last_activity=self.growth.last_growth,
                           max_run=spec.get("max_run"), max_wait=spec.get("max_wait"))

    def look(self, found: Look | None = None) -> Tripped | None:
        """Observe once and stop the job when a guard trips (`trainops.backends.guards.act`); ``found``, a look the
        kit's wait made this poll, only says whether the job ended (nothing then to stop)."""
        if found is not None and found.result.status.terminal:
            return None
        return super().look(Look(found.result if found is not None else _RUNNING, self.observe()))

    def _run(self) -> None:
        while not self._closed.wait(self.look_seconds):
            try:
                self.look()
            except Exception:  # noqa: BLE001 - a failed look is retried; it must never end the watch
                pass

    def start(self) -> LocalGuard:
        self._thread = threading.Thread(target=self._run, name="trainops-job-guards", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LocalGuard:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: What a look of the guard's own stands on when the caller made none: a job still running (a job that ended is
#: seen by the caller, the wait or the thread's owner, which then closes the watch).
_RUNNING = JobResult("local", "job", JobStatus.IN_PROGRESS)
