"""Who controls a local job, proven rather than assumed.

A pid in a status record proves nothing: the controller may have been PID 1 of a container (pid 1 is always
"alive" elsewhere), the pid may have been reused by an unrelated process, or the record may be corrupt (`-1` would
make `kill` signal every process the user owns). So a controller is identified by three things recorded when it
starts:

- the exclusive lock it holds on `<job dir>/.controller.lock` (released by the kernel when it exits, however it
  exits): the only proof that the job still has a controller;
- its pid plus its start time (`/proc/<pid>/stat` field 22, clock ticks since boot): a reused pid has another start
  time;
- the boot id (`/proc/sys/kernel/random/boot_id`): start times only compare within one boot.

`signalable_controller` is the one place that decides whether a pid may be signalled as the job's controller.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Any

from trainops.errors import Problem, SpecError
from trainops.runtime.processes import is_alive, process_start_ticks

CONTROLLER_LOCK = ".controller.lock"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")


def boot_id() -> str | None:
    """This boot's id, or None where the kernel does not say (not Linux)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def own_identity() -> dict[str, Any]:
    """The identity of the calling process, as recorded in a status record's `controller`."""
    pid = os.getpid()
    return {"pid": pid, "start_ticks": process_start_ticks(pid), "boot_id": boot_id(), "host": socket.gethostname()}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_record(record: Any, job_name: str, path: Path) -> dict:
    """`record` when it is a well-formed status record; a `SpecError` (exit 2) naming the bad field otherwise.

    A corrupt record is refused instead of guessed at: a list, a text pid, a pid of 0 or -1 could otherwise reach
    `kill` or make a dead job look alive."""
    fix = f"the status record {path} is corrupt; remove the job directory {path.parent} to forget job {job_name!r}"
    if not isinstance(record, dict):
        raise SpecError(Problem("status", f"expected a JSON object, found {type(record).__name__}: {fix}"))
    problems = []
    if record.get("status") not in STATUSES:
        problems.append(Problem("status", f"{record.get('status')!r} is not one of {', '.join(STATUSES)}: {fix}"))
    if "controller_pid" in record and record["controller_pid"] is not None \
            and not _positive_int(record["controller_pid"]):
        problems.append(Problem("controller_pid", f"{record['controller_pid']!r} is not a positive integer: {fix}"))
    controller = record.get("controller")
    if controller is not None:
        if not isinstance(controller, dict):
            problems.append(Problem("controller", f"expected an object, found {type(controller).__name__}: {fix}"))
        else:
            if not _positive_int(controller.get("pid")):
                problems.append(Problem("controller.pid", f"{controller.get('pid')!r} is not a positive integer: "
                                                          f"{fix}"))
            ticks = controller.get("start_ticks")
            if ticks is not None and not (_positive_int(ticks) or ticks == 0):
                problems.append(Problem("controller.start_ticks", f"{ticks!r} is not a non-negative integer: {fix}"))
    if record.get("job_id") is not None and not isinstance(record.get("job_id"), str):
        problems.append(Problem("job_id", f"{record.get('job_id')!r} is not a string: {fix}"))
    if problems:
        raise SpecError(problems, source=f"status record of local job {job_name!r}")
    return record


def lock_held(job_dir: Path) -> bool:
    """Whether some process holds the job's controller lock (the controller, or the guard cleaning up after it).

    Probed with a shared, non-blocking lock taken and dropped at once: it never blocks, and a controller taking
    the lock at that very instant retries (`trainops.backends.local.locks.try_lock`'s `patience`)."""
    path = job_dir / CONTROLLER_LOCK
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: no controller ever ran, or it was removed with the job
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    finally:
        os.close(descriptor)


def same_process(identity: Any) -> bool:
    """Whether the recorded identity is provably a live process of this boot with the recorded start time."""
    if not isinstance(identity, dict) or not _positive_int(identity.get("pid")):
        return False
    ticks, recorded_boot = identity.get("start_ticks"), identity.get("boot_id")
    if ticks is None or recorded_boot is None or recorded_boot != boot_id():
        return False  # without a start time and a boot id the pid is only a number
    return is_alive(identity["pid"], ticks) and process_start_ticks(identity["pid"]) == ticks


def signalable_controller(record: dict) -> int | None:
    """The controller's pid when it may be signalled: its identity matches a live process of this boot, and it is
    neither this process nor pid 1 (a container's init, or the host's). None otherwise."""
    identity = record.get("controller")
    if not same_process(identity):
        return None
    pid = identity["pid"]
    if pid <= 1 or pid == os.getpid():
        return None
    return pid
