"""The status record of a local job (`<job dir>/status.json`): what `trainops status NAME` and the steps read back.

Whether a job that says InProgress still runs is never taken from the record alone: its controller's lock on the
job directory must be held (`trainops.backends.local.identity`; each host's launcher holds a copy until its host has
ended). A record whose lock is free is reported Failed.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from trainops.backends.hostfs import paths, safe_fs
from trainops.backends.local import identity
from trainops.backends.local.processes import job_processes
from trainops.backends.looks import TRANSIENT_ERRNOS, LookFailed
from trainops.errors import JobFailed, Problem, SpecError

STATUS_FILE = "status.json"
FAILURE_FILE = "failure"
ACTIVE = ("InProgress", "Stopping")
# Space set aside when a job starts and given back when its disk is full, so that the status record and the
# failure file can still say why the job ended.
RESERVE_FILE = ".space-reserve"
RESERVE_BYTES = 1 << 20
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: The largest status record read back (one with every rank of a large job listed is a few hundred KiB).
RECORD_LIMIT_BYTES = 16 * 1024 * 1024


def reserve_space(job_dir: Path) -> None:
    """Set `RESERVE_BYTES` aside in the job directory (best effort: nothing is reserved on a disk already full)."""
    path = job_dir / RESERVE_FILE
    try:
        descriptor = safe_fs.open_state_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with open(descriptor, "wb") as handle:
            handle.write(b"\0" * RESERVE_BYTES)  # written, not sparse: the blocks are really taken
    except OSError:
        try:
            path.unlink()
        except OSError:
            pass


def _release_space(job_dir: Path) -> bool:
    try:
        (job_dir / RESERVE_FILE).unlink()
        return True
    except OSError:
        return False


def _replace(job_dir: Path, name: str, text: str) -> None:
    """Write `name` in the job directory atomically; on a full disk, give back the reserve and try once more."""
    job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for attempt in (1, 2):
        try:
            safe_fs.write_atomically(job_dir / name, text.encode("utf-8"))
            return
        except OSError as error:
            if attempt == 2 or error.errno not in FULL or not _release_space(job_dir):
                raise JobFailed(f"cannot write {job_dir / name}: {error.strerror or error}"
                                + (f"{disk_full_note(job_dir)}" if error.errno in FULL else "")) from None


def write(job_dir: Path, record: dict) -> None:
    """Replace the job's status record atomically (readers never see half a file)."""
    _replace(job_dir, STATUS_FILE, json.dumps(record, indent=2, default=str))
    if record.get("status") not in ACTIVE:
        _release_space(job_dir)  # recorded for good: the reserve is not needed any more


def write_failure(job_dir: Path, reason: str) -> None:
    """Write the job's failure file (never left empty: on a full disk the reserve is given back first)."""
    _replace(job_dir, FAILURE_FILE, reason)


def write_failed_start(job_dir: Path, job_id: str, reason: str) -> None:
    """Record as Failed a job whose controller raised before it could record an end (bad input found while laying
    out, a crash): only while the record is still that job's and active; never raises."""
    try:
        record = read_record(job_dir, job_dir.name)
        if isinstance(record, dict) and record.get("job_id") == job_id and record.get("status") in ACTIVE:
            write(job_dir, {**record, "status": "Failed", "failure_reason": reason[:1024]})
    except Exception:  # noqa: BLE001 - the original error is what the caller reports
        pass


def disk_full_note(path: Path) -> str:
    """"; the disk ... is full" when the file system holding `path` has (almost) no room left, else ""."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return ""
    free = stats.f_bavail * stats.f_frsize
    if free >= RESERVE_BYTES:
        return ""
    return (f"; the job's disk is full ({free // 1024} KiB free on the file system of {path}): free space there "
            "and run the job again")


def read_record(job_dir: Path, job_name: str) -> dict:
    """The record as written (checked for corruption, not for liveness)."""
    path = job_dir / STATUS_FILE

    def forget() -> str:  # asked only once the record is unusable: it looks at who holds the job's lock
        return identity.forget_hint(job_dir, f"job {job_name!r}")

    def unreadable(why: object) -> SpecError:
        return SpecError(f"the status of local job {job_name!r} cannot be read ({why}): {forget()}")

    try:
        record = json.loads(safe_fs.read_bounded(path, RECORD_LIMIT_BYTES, whole=True).decode("utf-8"))
    except safe_fs.UnsafeFile as error:
        if error.errno != errno.ELOOP:
            raise unreadable(f"{path} {error.strerror}") from None
        raise SpecError(Problem("job_name", f"{path} is a symbolic link; trainops never writes through one (remove "
                                            f"the link): trainops reads only its own status records; {forget()}"),
                        source="local state") from None
    except FileNotFoundError:
        raise SpecError(f"no local job named {job_name!r} under {job_dir.parent}") from None
    except OSError as error:
        if error.errno in TRANSIENT_ERRNOS:  # EIO, EMFILE, ESTALE...: it may read the next time (a failed look)
            raise LookFailed(f"the status of local job {job_name!r} cannot be read for now ({error})") from error
        raise unreadable(error) from None
    except (ValueError, RecursionError) as error:  # RecursionError: JSON nested thousands deep
        raise unreadable(error) from None
    return identity.check_record(record, job_name, path)


def read(job_name: str, workdir: str | os.PathLike | None = None) -> dict:
    """The status record of a local job; an InProgress job whose controller is gone is reported Failed, whatever
    else still holds its lock (`identity.controller_alive`)."""
    job_dir = paths.job_dir(job_name, workdir)
    record = read_record(job_dir, job_name)
    if record.get("status") in ACTIVE and not identity.controller_alive(record, job_dir):
        # The controller writes its last record before the kernel drops its lock, so the record read again now is
        # final: the one read above may be from just before that write (a job stopping as it is described).
        record = read_record(job_dir, job_name)
    if record.get("status") in ACTIVE and not identity.controller_alive(record, job_dir):
        # Each host's launcher ends its host when the controller is gone; what still runs is counted, never
        # signalled: a launcher that has not ended (stopped, or stuck in the kernel) holding the job's lock, or, for
        # a launcher killed outright where no PID namespace ended its host (`host_init`), the host's processes.

        left = job_processes(record["job_id"]) if isinstance(record.get("job_id"), str) else []
        record["status"] = "Failed"
        record["failure_reason"] = ("the trainops process controlling this job exited before the job ended"
                                    + (f"; {len(left)} processes carrying its marker still run (pids "
                                       f"{', '.join(map(str, left[:10]))}): stop them yourself" if left else ""))
        record["processes_left"] = len(left)
    return record


def exists(job_name: str, workdir: str | os.PathLike | None = None) -> bool:
    """Whether a local job of that name has a status record."""
    return os.path.lexists(paths.job_dir(job_name, workdir) / STATUS_FILE)  # a link there: `read` says so
