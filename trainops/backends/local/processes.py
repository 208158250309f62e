"""Processes of a local job as this machine sees them: the job's marker, and pids inside a host's PID namespace.

Every process of a job carries a marker in its environment (`TRAINOPS_LOCAL_JOB_ID`), inherited by its
descendants. It is only ever counted (`status.read` of a job whose controller is gone), never a reason to signal
anything: a process can set any environment it likes. What stops a job's processes is their host's launcher
(`host_init`), which knows them by the kernel's own record (its PID namespace, or its descendants).
"""

from __future__ import annotations

import os

from trainops.runtime.processes import process_start_ticks

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
