"""Who controls a local job, proven rather than assumed.

A pid in a status record proves nothing: the controller may have been PID 1 of a container (pid 1 is always
"alive" elsewhere), the pid may have been reused by an unrelated process, or the record may be corrupt (`-1` would
make `kill` signal every process the user owns). So a controller is identified by three things recorded when it
starts:

- the exclusive lock it holds on `<job dir>/.controller.lock` (released by the kernel when it exits, however it
  exits), held through a descriptor the controller itself opened at that path (`holds_lock`, from the kernel's
  ``/proc/<pid>/fd`` and ``fdinfo``): the only proof that the job still has a controller. Not the lock file's inode
  (a hard link to another job's lock shares it) and not "someone holds the lock" (each host's launcher keeps a copy
  of the descriptor until its host has ended, and a launcher that never ends must not keep a dead job InProgress);
- its pid plus its start time (`/proc/<pid>/stat` field 22, clock ticks since boot): a reused pid has another start
  time;
- the boot id (`/proc/sys/kernel/random/boot_id`): start times only compare within one boot.

`controller_alive` decides whether a job still runs; `signalable_controller` whether a pid may be signalled as the
job's controller.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Any

from trainops.errors import Problem, SpecError
from trainops.runtime.processes import is_alive, process_start_ticks
from trainops.runtime.untrusted import open_regular

CONTROLLER_LOCK = ".controller.lock"  # held by the trainops process running the job (`locks.try_lock`)
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")


def boot_id() -> str | None:
    """This boot's id, or None where the kernel does not say (not Linux)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as handle:  # the kernel's (procfs), no job's
            return handle.read().strip() or None
    except OSError:
        return None


def own_identity() -> dict[str, Any]:
    """The identity of the calling process, as recorded in a status record's `controller`."""
    pid = os.getpid()
    return {"pid": pid, "start_ticks": process_start_ticks(pid), "boot_id": boot_id(), "host": socket.gethostname()}


def forget_hint(job_dir: Path, what: str, lock: str = CONTROLLER_LOCK) -> str:
    """What to do about a job whose record cannot be used: never "remove its directory" while the job may run. A
    held lock means a process of the job still runs (its record is rewritten when it ends); a free one means none
    does, and removing the directory only forgets the job."""
    path = job_dir / lock
    if lock_held(job_dir, lock):
        return (f"{what} may still be running (a process holds {path}; `fuser -v {path}` names it): leave {job_dir} "
                "as it is until that process has ended, then remove it to forget the job")
    return f"no process holds {path}, so nothing runs {what}: remove {job_dir} to forget it"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_record(record: Any, job_name: str, path: Path) -> dict:
    """`record` when it is a well-formed status record; a `SpecError` (exit 2) naming the bad field otherwise.

    A corrupt record is refused instead of guessed at: a list, a text pid, a pid of 0 or -1 could otherwise reach
    `kill` or make a dead job look alive."""
    def fix() -> str:
        # Only for a record refused: it probes the job's lock, and every status read (a poller's look) checks one.
        return f"the status record {path} is corrupt; {forget_hint(path.parent, f'job {job_name!r}')}"

    if not isinstance(record, dict):
        raise SpecError(Problem("status", f"expected a JSON object, found {type(record).__name__}: {fix()}"))
    problems: list[tuple[str, str]] = []
    if record.get("status") not in STATUSES:
        problems.append(("status", f"{record.get('status')!r} is not one of {', '.join(STATUSES)}"))
    if "controller_pid" in record and record["controller_pid"] is not None \
            and not _positive_int(record["controller_pid"]):
        problems.append(("controller_pid", f"{record['controller_pid']!r} is not a positive integer"))
    controller = record.get("controller")
    if controller is not None:
        if not isinstance(controller, dict):
            problems.append(("controller", f"expected an object, found {type(controller).__name__}"))
        else:
            if not _positive_int(controller.get("pid")):
                problems.append(("controller.pid", f"{controller.get('pid')!r} is not a positive integer"))
            ticks = controller.get("start_ticks")
            if ticks is not None and not (_positive_int(ticks) or ticks == 0):
                problems.append(("controller.start_ticks", f"{ticks!r} is not a non-negative integer"))
    if record.get("job_id") is not None and not isinstance(record.get("job_id"), str):
        problems.append(("job_id", f"{record.get('job_id')!r} is not a string"))
    if problems:
        said = fix()
        raise SpecError([Problem(field, f"{message}: {said}") for field, message in problems],
                        source=f"status record of local job {job_name!r}")
    return record


def lock_held(job_dir: Path, lock: str = CONTROLLER_LOCK) -> bool:
    """Whether some process holds the job's controller lock (the controller, or a host's launcher that has not ended),
    or the job directory's ``lock``.

    Probed with a shared, non-blocking lock taken and dropped at once: it never blocks, and a controller taking
    the lock at that very instant retries (`trainops.backends.hostfs.locks.try_lock`'s `patience`)."""
    path = job_dir / lock
    try:  # never blocks: a FIFO there is not a lock (`open_regular`)
        descriptor = open_regular(path)
    except OSError:
        return False  # no lock file (no controller ever ran, or it was removed with the job), or not a file
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


def lock_holders(path: Path) -> set[int]:
    """The pids the kernel reports (`/proc/locks`) as holding a `flock` on the file at ``path`` (opened without
    following a link); empty when none does or the file is missing. The pids are those that took the lock, as seen
    from this process's pid namespace."""
    try:
        descriptor = open_regular(path)
    except OSError:
        return set()
    try:
        details = os.fstat(descriptor)
    finally:
        os.close(descriptor)
    wanted = f"{os.major(details.st_dev):02x}:{os.minor(details.st_dev):02x}:{details.st_ino}"
    holders = set()
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the number
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
                    holders.add(int(fields[4]))
    except OSError:
        pass
    return holders


#: Where the kernel shows each open file of a process and the locks held through it (Linux 4.1 and later).
FDINFO = "/proc/self/fdinfo"


def holds_lock(pid: int, path: Path) -> bool | None:
    """Whether process ``pid`` holds a `flock` on the lock file at ``path`` *through a descriptor it opened at that
    very path*: for one of its descriptors, ``/proc/<pid>/fd/N`` names this file (its path as the process opened it,
    so a hard link to the same inode elsewhere, another job's lock, does not count) and ``/proc/<pid>/fdinfo/N`` shows
    the kernel's lock on that open file description. A pid that was reused, a record copied from another process, a
    lock held only by a copy of the descriptor in another process: all answer False. None where the kernel does not
    tell (no fdinfo: not Linux), for callers to fall back on `lock_held`."""
    if not os.path.isdir(FDINFO):
        return None
    try:
        wanted = os.path.realpath(path)
        expected = os.stat(wanted, follow_symlinks=False)
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False  # no such file, or no such process (or not ours to look at)
    for descriptor in descriptors:
        link = f"/proc/{pid}/fd/{descriptor}"
        try:
            if os.readlink(link) != wanted:
                continue
            details = os.stat(link)
            if (details.st_dev, details.st_ino) != (expected.st_dev, expected.st_ino):
                continue
            with open(f"/proc/{pid}/fdinfo/{descriptor}", encoding="ascii", errors="replace") as handle:
                if any(line.startswith("lock:") and " FLOCK " in line for line in handle):
                    return True
        except OSError:
            continue  # closed meanwhile
    return False


def controller_alive(record: dict, job_dir: Path) -> bool:
    """Whether the job's recorded controller still runs it: its identity (pid, start time, boot) is a live process
    that holds the job's controller lock itself (`holds_lock`). A lock held only by the hosts' launchers (copies of
    the controller's descriptor, kept until their host has ended) is not a controller: a launcher that never ends
    must not keep a job whose controller is gone InProgress. Where the kernel cannot say who holds the lock, a held
    lock is taken as the controller's (`lock_held`)."""
    if not os.path.isdir(FDINFO):
        return lock_held(job_dir)
    identity = record.get("controller")
    return isinstance(identity, dict) and same_process(identity) \
        and bool(holds_lock(identity["pid"], job_dir / CONTROLLER_LOCK))


def signalable_controller(record: dict, job_dir: Path | None = None) -> int | None:
    """The controller's pid when it may be signalled: its identity matches a live process of this boot, it is
    neither this process nor pid 1 (a container's init, or the host's), and, given the job's directory, it holds the
    job's controller lock itself, through a descriptor it opened at that path (`holds_lock`: an identity copied from
    an unrelated process into the record, or a lock file that is a hard link to another job's, proves nothing). None
    otherwise, also where the kernel cannot say who holds the lock."""
    identity = record.get("controller")
    if not isinstance(identity, dict) or not same_process(identity):
        return None
    pid = identity["pid"]
    if pid <= 1 or pid == os.getpid():
        return None
    if job_dir is not None and not holds_lock(pid, Path(job_dir) / CONTROLLER_LOCK):
        return None
    return pid
