"""Finding and stopping every process of a local job, whatever became of the tree.

Each launcher starts in its own session, but ranks may start sessions of their own and a dead launcher orphans its
children. So every process of a job carries a marker in its environment (`TRAINOPS_LOCAL_JOB_ID`), inherited by all
descendants, and cleanup finds them through /proc: no process of the job is left, whichever one died first.
"""

from __future__ import annotations

import os
import signal
import time

MARKER = "TRAINOPS_LOCAL_JOB_ID"


def job_processes(job_id: str) -> list[int]:
    """Pids of the live processes whose environment carries this job's marker (never this process itself)."""
    needle = f"{MARKER}={job_id}".encode()
    found = []
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ.split(b"\0") and not _is_zombie(int(entry)):
            found.append(int(entry))
    return found


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # The state follows the command name, which is in parentheses and may itself contain spaces.
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def signal_job(job_id: str, signum: int) -> int:
    """Send a signal to every process of the job; returns how many were signalled."""
    count = 0
    for pid in job_processes(job_id):
        try:
            os.kill(pid, signum)
            count += 1
        except ProcessLookupError:
            pass
    return count


def kill_job(job_id: str, grace_seconds: float = 10.0) -> list[int]:
    """SIGTERM every process of the job, then SIGKILL what is still there after the grace period.

    Returns the pids that needed SIGKILL (empty when everything stopped on SIGTERM).
    """
    if not signal_job(job_id, signal.SIGTERM):
        return []
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if not job_processes(job_id):
            return []
        time.sleep(0.1)
    stubborn = job_processes(job_id)
    for pid in stubborn:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return stubborn


# --- pids inside an emulated host's PID namespace ---------------------------------------------------------------------

def pid_namespace_of(launcher: int) -> str | None:
    """The PID namespace a host's launcher made for the host (`host_init`: its children are born there), as the
    kernel names it (``pid:[inode]``); None when the launcher is gone."""
    try:
        return os.readlink(f"/proc/{launcher}/ns/pid_for_children")
    except OSError:
        return None


def host_pid(pid_in_host: int, start_ticks: int | None, namespace: str | None) -> int | None:
    """The pid on this machine of the process whose pid is `pid_in_host` inside the PID namespace `namespace`
    (`pid_namespace_of`), which started at `start_ticks` (when given); without a namespace, `pid_in_host` itself.
    None when no such process runs. Read from the kernel (``NSpid`` in /proc/<pid>/status), never guessed."""
    from trainops.runtime.processes import process_start_ticks

    if namespace is None:
        alive = start_ticks is None or process_start_ticks(pid_in_host) == start_ticks
        return pid_in_host if alive and not _is_zombie(pid_in_host) else None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                levels = next(line for line in handle if line.startswith(b"NSpid:")).split()[1:]
            if len(levels) < 2 or int(levels[-1]) != pid_in_host or os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
        except (OSError, StopIteration, ValueError):
            continue  # gone, or not ours to read
        if start_ticks is None or process_start_ticks(int(entry)) == start_ticks:
            return int(entry)
    return None
