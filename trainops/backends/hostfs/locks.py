"""Advisory locks that keep concurrent jobs apart: one controller per local job directory, one running job per
checkpoint directory, one submitter per Slurm job name.

An exclusive `flock` on a small file, held for as long as the job runs and released by the kernel when the holder
exits, however it exits: a crashed controller never leaves a stale lock. The file holds the holder's job name, so the
one who is refused can say by whom.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from pathlib import Path

from trainops.backends.hostfs.safe_fs import PlantedLink, open_state_file, read_text
from trainops.errors import Problem, SpecError


class HeldLock:
    """A lock this process holds until `release()` (or until it exits)."""

    def __init__(self, path: Path, handle):
        self.path = path
        self._handle = handle

    def fileno(self) -> int | None:
        """The locked descriptor (a process given a copy holds the lock with it), or None once released."""
        return None if self._handle is None else self._handle.fileno()

    def release(self) -> None:
        """Close this process's descriptor: the kernel drops the lock once no process holds a copy (a host's
        launcher given one keeps it until its host has ended; an unlock would drop it for every holder)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def try_lock(path: Path, owner: str, patience: float = 0.0) -> HeldLock | None:
    """Take the lock at `path` without waiting (or retrying for up to `patience` seconds), recording `owner`; None
    when another process holds it.

    `patience` is for locks that readers probe (`trainops.backends.local.identity.lock_held` holds a shared lock
    for a few microseconds): a controller starting at that instant retries instead of calling itself a duplicate."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:  # never through a link planted under the lock's name (it would be truncated below); close-on-exec:
        # launchers must not keep it after the controller is gone; never blocking on a FIFO planted there
        descriptor = open_state_file(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK)
    except PlantedLink as error:
        raise SpecError(Problem("job_name", f"{error.strerror}"), source="local state") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise SpecError(Problem("job_name", f"{path} is not a regular file (a FIFO, device or socket stands where "
                                            "trainops keeps a lock): remove it"), source="local state")
    handle = open(descriptor, "r+", encoding="utf-8")  # noqa: SIM115 - held until `release`
    deadline = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.01)
    handle.seek(0)
    handle.truncate()
    handle.write(owner)
    handle.flush()
    return HeldLock(path, handle)


def holder(path: Path) -> str:
    """The owner recorded by whoever holds (or last held) the lock at `path`."""
    try:
        return read_text(path, 4096).strip() or "another job"
    except OSError:
        return "another job"
