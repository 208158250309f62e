"""The status record of a local job (`<job dir>/status.json`): what `trainops status NAME` and the steps read back.

Whether a job that says InProgress still runs is never taken from the record alone: its controller's lock on the
job directory must be held (`trainops.backends.local.identity`). A record whose controller is gone is reported
Failed, with the processes of the job still alive counted honestly (`trainops.backends.local.tracking`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainops.backends.local import identity, paths
from trainops.errors import SpecError

STATUS_FILE = "status.json"
ACTIVE = ("InProgress", "Stopping")


def write(job_dir: Path, record: dict) -> None:
    """Replace the job's status record atomically (readers never see half a file)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    temporary = job_dir / f".{STATUS_FILE}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    os.replace(temporary, job_dir / STATUS_FILE)


def read_record(job_dir: Path, job_name: str) -> dict:
    """The record as written (checked for corruption, not for liveness)."""
    path = job_dir / STATUS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"no local job named {job_name!r} under {job_dir.parent}") from None
    except (OSError, ValueError) as error:
        raise SpecError(f"the status of local job {job_name!r} cannot be read ({error}): remove {job_dir} to "
                        "forget the job") from None
    return identity.check_record(record, job_name, path)


def read(job_name: str, workdir: str | os.PathLike | None = None) -> dict:
    """The status record of a local job; an InProgress job whose controller is gone is reported Failed."""
    job_dir = paths.job_dir(job_name, workdir)
    record = read_record(job_dir, job_name)
    if record.get("status") in ACTIVE and not identity.lock_held(job_dir):
        from trainops.backends.local.tracking import live_processes

        left = live_processes(record)
        record["status"] = "Failed"
        record["failure_reason"] = ("the trainops process running this job exited before the job ended"
                                    + (f"; {len(left)} of its processes are still running (trainops stop "
                                       f"{job_name} stops them)" if left else ""))
        record["processes_left"] = len(left)
    return record


def exists(job_name: str, workdir: str | os.PathLike | None = None) -> bool:
    """Whether a local job of that name has a status record."""
    return (paths.job_dir(job_name, workdir) / STATUS_FILE).is_file()
