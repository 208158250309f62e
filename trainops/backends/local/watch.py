"""The controller's watch over a running local job's processes: what `LocalJob` starts before its launchers and
finishes after them.

While the job runs: each host's PID namespace where the kernel gives one, and the controller as child subreaper
plus a `/proc` scan every half second, keep every process of the job in view (`trainops.backends.local.tracking`);
a guard process waits to stop them should the controller be killed outright (`trainops.backends.local.guard`); each
launcher dies with the controller (parent-death signal); and a stop asked for by `trainops stop` (a `stop-request`
file in the job directory, so no process is ever signalled on the strength of a recorded pid) reaches the job
within a fraction of a second.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from trainops.backends.local.guard import Guard, start_guard
from trainops.backends.local.safe_fs import open_state_file, write_atomically
from trainops.backends.local.tracking import (
    JobProcesses,
    clock_ticks_now,
    hold_subreaper,
    launcher_preexec,
    launching,
    release_subreaper,
)
from trainops.runtime.processes import process_start_ticks

STOP_REQUEST = "stop-request"
SCAN_SECONDS = 0.5  # the tree must be seen before a process can slip out of it (about 16 ms a scan)
#: With each host a PID namespace the kernel ends whatever a host left; the scan only keeps `trainops status` current.
NAMESPACED_SCAN_SECONDS = 5.0
STOP_POLL_SECONDS = 0.2

logger = logging.getLogger(__name__)


def request_stop(job_dir: Path, reason: str) -> None:
    """Ask the controller of the job in `job_dir` to stop it (it polls for this file)."""
    write_atomically(job_dir / STOP_REQUEST, reason.encode("utf-8"))


def clear_stop_request(job_dir: Path) -> None:
    """Forget a request left by an earlier run of this job name; called before the job's first status record, so
    that a stop asked for once the record names this job is never lost."""
    try:
        (job_dir / STOP_REQUEST).unlink()
    except FileNotFoundError:
        pass


class ProcessWatch:
    """Started by the controller once it holds the job's locks; `finish()` stops whatever is left."""

    def __init__(self, job_dir: Path, job_id: str, *, locked_descriptors: list[int], namespaced: bool = False,
                 on_stop_request: Callable[[str], None]):
        self.job_dir = Path(job_dir)
        self.job_id = job_id
        self.locked_descriptors = [fd for fd in locked_descriptors if fd is not None]
        self.on_stop_request = on_stop_request
        self.scan_seconds = NAMESPACED_SCAN_SECONDS if namespaced else SCAN_SECONDS
        self.processes: JobProcesses | None = None
        self.guard: Guard | None = None
        self._subreaper_held = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from trainops.backends.local.status import reserve_space

        reserve_space(self.job_dir)  # given back when the disk fills, so the job's end can still be recorded
        # A request made since the job recorded itself (while it was laying out) is this job's: seen at once, not
        # cleared (an earlier run's request was cleared before this job's first record: `clear_stop_request`).
        self.check_stop_request()
        self.processes = JobProcesses(self.job_dir, self.job_id, adopter=os.getpid(), since_ticks=clock_ticks_now())
        self.processes.activate()
        hold_subreaper()
        self._subreaper_held = True
        with launching(self.job_id) as launch:
            self.guard = start_guard(self.job_dir, self.locked_descriptors)
            if self.guard is not None:
                launch.register(self.guard.pid)
        if self.guard is not None:
            self.processes.listener = self.guard.tell  # the guard acts on what it is told, not on the file
        if self.guard is None:
            logger.warning("[trainops] warning: the job's guard could not start: if this process is killed "
                           "outright, trainops stop NAME stops what it left")
        else:
            self.processes.exclude.add(self.guard.pid)
        self.processes.save()
        self._thread = threading.Thread(target=self._run, name="trainops-process-watch", daemon=True)
        self._thread.start()

    def describe(self) -> dict:
        """For the status record: the job's guard."""
        return {"guard_pid": self.guard.pid if self.guard else None}

    def preexec(self) -> Callable[[], None] | None:
        """The `preexec_fn` for a launcher started now (see `tracking.launcher_preexec`)."""
        main_thread = threading.current_thread() is threading.main_thread()
        return launcher_preexec(parent_death=main_thread)

    def launching(self) -> launching:
        """Hold this around starting a launcher, and `register` its pid inside: another job run by this same
        process then never takes it for one of its own (see `tracking.launching`)."""
        return launching(self.job_id)

    def add_launcher(self, pid: int) -> None:
        ticks = process_start_ticks(pid)
        if self.processes is not None and ticks is not None:
            self.processes.known[pid] = ticks
            self.processes.save()

    def check_stop_request(self) -> bool:
        """Pass a pending stop request on to the job (`on_stop_request`); True when there is one."""
        try:
            with open(open_state_file(self.job_dir / STOP_REQUEST, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
                reason = handle.read(4096).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return False
        self.on_stop_request(reason or "Stopped by trainops stop")
        return True

    def _run(self) -> None:
        waited = 0.0
        while not self._stopped.wait(STOP_POLL_SECONDS):
            self.check_stop_request()
            waited += STOP_POLL_SECONDS
            if waited >= self.scan_seconds and self.processes is not None:
                waited = 0.0
                try:
                    self.processes.scan()
                except Exception:  # noqa: BLE001 - a failed scan is retried; it must never end the watch
                    pass

    def finish(self, grace_seconds: float = 1.0) -> tuple[int, int]:
        """Stop what is still running of the job; returns (processes found still running, processes left alive)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        stopped = left = 0
        if self.processes is not None:
            stopped, left = self.processes.stop(grace_seconds)
        if self.guard is not None:
            self.guard.done()
        if self.processes is not None:
            self.processes.deactivate()
        if self._subreaper_held:
            self._subreaper_held = False
            release_subreaper()
        try:
            (self.job_dir / STOP_REQUEST).unlink()
        except FileNotFoundError:
            pass
        return stopped, left
