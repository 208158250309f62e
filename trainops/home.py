"""Where trainops keeps its state: ``$TRAINOPS_HOME``, else the user's state directory (platformdirs), or a work
directory given explicitly (``--workdir``, a pipeline file's ``workdir``).

One small module below everything else, because the spec layer (a pipeline file's ``${workdir}``), the steps and the
local backend all need the same answer; how the local backend secures the directory is
`trainops.backends.hostfs.paths`.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from trainops.errors import Problem, SpecError

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
    """The root of local state: `$TRAINOPS_HOME`, else the user's state directory (platformdirs)."""
    configured = os.environ.get("TRAINOPS_HOME")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(platformdirs.user_state_path("trainops")).resolve()
