"""Where the local backend keeps its state: `$TRAINOPS_HOME` (default `~/.trainops`) or an explicit work directory."""

from __future__ import annotations

import os
from pathlib import Path


def trainops_home() -> Path:
    """The root of local state: `$TRAINOPS_HOME`, else `~/.trainops`."""
    return Path(os.environ.get("TRAINOPS_HOME") or Path.home() / ".trainops").expanduser().resolve()


def jobs_root(workdir: str | os.PathLike | None = None) -> Path:
    """The directory holding one sub-directory per local job."""
    return (Path(workdir).resolve() if workdir else trainops_home()) / "jobs"


def job_dir(job_name: str, workdir: str | os.PathLike | None = None) -> Path:
    """The directory of one local job (contract directories, logs, status)."""
    return jobs_root(workdir) / job_name


def checkpoints_root(workdir: str | os.PathLike | None = None) -> Path:
    """Checkpoints outlive a job's run, so a re-run of the same job resumes: they sit beside the jobs, by key."""
    return (Path(workdir).resolve() if workdir else trainops_home()) / "checkpoints"
