"""Where the local backend keeps its state: `$TRAINOPS_HOME` (default `~/.trainops`) or an explicit work directory.

Every name that becomes a directory here (a job name, a checkpoint key) must be one safe path component: the rules
of `trainops.spec` check names where they enter, and these checks are the last line before the file system, so a
name that slipped past them (`../x`, `/etc`, `.`, `a;b`, a newline) can never put a job's files outside its root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainops.errors import Problem, SpecError

# Letters, digits and `._@+=-`, not starting with `.` or `-` (no `.`, `..`, hidden or option-like names), at most
# 255 bytes (one directory entry on Linux). `@` is in: a private checkpoint directory is `<key>@<job name>`.
SAFE_COMPONENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+=-]{0,254}\Z")


def safe_component(name: object, field: str = "job_name") -> str:
    """``name`` when it is one safe path component, else `SpecError` naming ``field`` and what to use instead."""
    if not isinstance(name, str) or not SAFE_COMPONENT.match(name):
        raise SpecError(Problem(field, f"{name!r} cannot be a directory name: use letters, digits and hyphens "
                                       "(also . _ @ + =), starting with a letter or digit, at most 255 characters; "
                                       "no /, no .., no spaces, ; or control characters"), source="job name")
    return name


def child(root: Path, name: object, field: str = "job_name") -> Path:
    """``root / name`` for a safe ``name``, checked to resolve inside ``root`` (a link planted under that name that
    leads out of the root is refused too)."""
    path = root / safe_component(name, field)
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved.parent != resolved_root:
        raise SpecError(Problem(field, f"{path} leads outside {resolved_root} (to {resolved}): remove it"),
                        source="job name")
    return path


# Kernel file systems: a directory there looks real but refuses new entries (or worse, writes reach a device).
# /dev/shm is an ordinary tmpfs, a fine place for scratch state.
PSEUDO_FILE_SYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))
TMPFS_UNDER_DEV = Path("/dev/shm")


def state_root(workdir: str | os.PathLike | None = None, field: str = "workdir") -> Path:
    """The directory holding local state: ``workdir`` resolved, else `trainops_home`; `SpecError` naming ``field``
    when it is (or lies under) a file, or lies in /proc, /sys or /dev, where jobs cannot be kept."""
    root = Path(workdir).expanduser().resolve() if workdir else trainops_home()
    if workdir is None:
        field = "TRAINOPS_HOME"
    in_tmpfs = root == TMPFS_UNDER_DEV or TMPFS_UNDER_DEV in root.parents
    if not in_tmpfs and any(root == pseudo or pseudo in root.parents for pseudo in PSEUDO_FILE_SYSTEMS):
        raise SpecError(Problem(field, f"{root} is on a kernel file system (/proc, /sys or /dev): give a directory "
                                       "on disk"), source="local state")
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise SpecError(Problem(field, f"{existing} is a file, not a directory"
                                       + (f" (so {root} cannot be created)" if existing != root else "")
                                       + ": give a directory"), source="local state")
    return root


def trainops_home() -> Path:
    """The root of local state: `$TRAINOPS_HOME`, else `~/.trainops`."""
    return Path(os.environ.get("TRAINOPS_HOME") or Path.home() / ".trainops").expanduser().resolve()


def jobs_root(workdir: str | os.PathLike | None = None) -> Path:
    """The directory holding one sub-directory per local job."""
    return state_root(workdir) / "jobs"


def job_dir(job_name: str, workdir: str | os.PathLike | None = None) -> Path:
    """The directory of one local job (contract directories, logs, status); `SpecError` for an unsafe name."""
    return child(jobs_root(workdir), job_name, "job_name")


def checkpoints_root(workdir: str | os.PathLike | None = None) -> Path:
    """Checkpoints outlive a job's run, so a re-run of the same job resumes: they sit beside the jobs, by key."""
    return state_root(workdir) / "checkpoints"

