"""The status record of a local job (`<job dir>/status.json`): what `trainops status NAME` and the steps read back."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainops.backends.local import paths
from trainops.errors import SpecError

STATUS_FILE = "status.json"


def write(job_dir: Path, record: dict) -> None:
    """Replace the job's status record atomically (readers never see half a file)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    temporary = job_dir / f".{STATUS_FILE}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    os.replace(temporary, job_dir / STATUS_FILE)


def _controller_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(job_name: str, workdir: str | os.PathLike | None = None) -> dict:
    """The status record of a local job; an InProgress job whose controller is gone is reported Failed."""
    path = paths.job_dir(job_name, workdir) / STATUS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"no local job named {job_name!r} under {paths.jobs_root(workdir)}") from None
    except (OSError, ValueError) as error:
        raise SpecError(f"the status of local job {job_name!r} cannot be read ({error})") from None
    if record.get("status") == "InProgress" and not _controller_alive(record.get("controller_pid")):
        record["status"] = "Failed"
        record["failure_reason"] = "the trainops process running this job exited before the job ended"
    return record


def exists(job_name: str, workdir: str | os.PathLike | None = None) -> bool:
    """Whether a local job of that name has a status record."""
    return (paths.job_dir(job_name, workdir) / STATUS_FILE).is_file()
