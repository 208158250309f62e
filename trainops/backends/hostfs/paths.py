"""Where a job's files live: the local backend's state root, `$TRAINOPS_HOME` (default: the user's state directory,
from platformdirs: `~/.local/state/trainops` on Linux) or an explicit work directory, and the slurm backend's shared
directory, checked the same way.

The state root is the user's alone, checked before anything is written in it: created mode 0700, and refused (exit
2, saying what to do) when it, `jobs/` or `checkpoints/` is owned by someone else or writable by group or others, or
lies under a directory another user could rename it in. Otherwise a user who created the directory first could
plant links there that a root `trainops run` would write through, or a checkpoint it would resume.

Every name that becomes a directory here (a job name, a checkpoint key) must be one safe path component: the rules
of `trainops.spec` check names where they enter, and these checks are the last line before the file system, so a
name that slipped past them (`../x`, `/etc`, `.`, `a;b`, a newline) can never put a job's files outside its root.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from trainops.errors import Problem, SpecError
from trainops.home import PSEUDO_FILE_SYSTEMS, TMPFS_UNDER_DEV, state_root, trainops_home  # noqa: F401 - re-exported

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


def _owner_problem(path: Path, details: os.stat_result, ancestor: bool) -> str | None:
    """Why ``path`` cannot hold this user's state, or None: owned by another user (root's own directories are fine
    above the root), or writable by group or others (a sticky directory such as /tmp is fine above the root)."""
    me = os.geteuid()
    if details.st_uid != me and not (ancestor and details.st_uid == 0):
        return f"is owned by uid {details.st_uid}, not by you (uid {me})"
    if details.st_mode & 0o022 and not (ancestor and details.st_mode & stat.S_ISVTX):
        who = "others" if details.st_mode & 0o002 else "its group"
        return f"is writable by {who} (mode {details.st_mode & 0o7777:o})"
    return None


def _refuse(path: Path, why: str, field: str) -> SpecError:
    if field in ("TRAINOPS_HOME", "workdir"):
        what = (f"remove {path} or point {'TRAINOPS_HOME' if field == 'TRAINOPS_HOME' else '--workdir'} at a new "
                "directory of your own (trainops creates it, mode 0700)")
    else:
        what = f"remove {path} (trainops creates it again, mode 0700)"
    return SpecError(Problem(field, f"{path} {why}: trainops keeps job state only in a directory that is yours "
                                    f"alone (another user could plant links there); {what}"),
                     source="local state")


def checked_directory(path: Path, field: str, *, ancestors: bool = False, create: bool = False) -> Path:
    """``path`` (created mode 0700 when missing and ``create``) checked to be a real directory of this user that
    nobody else can write; `SpecError` naming ``field`` otherwise (a file, a link, another user's, group- or
    world-writable). A missing one that is not to be created is fine: nobody planted anything there."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except FileNotFoundError:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return checked_directory(path, field, ancestors=ancestors, create=create)
        except OSError as error:
            raise SpecError(Problem(field, f"{path} cannot be created ({error.strerror}): give a directory you can "
                                           "write"), source="local state") from None
    try:
        details = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(details.st_mode):
        raise _refuse(path, "is a symbolic link", field)
    if not stat.S_ISDIR(details.st_mode):
        raise SpecError(Problem(field, f"{path} is a file, not a directory: move it away, or give another "
                                       "directory"), source="local state")
    problem = _owner_problem(path, details, ancestor=False)
    if problem:
        raise _refuse(path, problem, field)
    if ancestors:
        for parent in path.parents:
            problem = _owner_problem(parent, os.stat(parent), ancestor=True)
            if problem:
                raise _refuse(path, f"lies in {parent}, which {problem}", field)
    return path


def secure_root(workdir: str | os.PathLike | None = None, create: bool = False) -> Path:
    """`state_root` checked with its `jobs/` and `checkpoints/` (`checked_directory`; the root's parents too)
    before a command reads or writes there, so a planted one is refused first; with ``create`` (a job about to
    run) the missing ones are made, mode 0700."""
    field = "workdir" if workdir else "TRAINOPS_HOME"
    root = checked_directory(state_root(workdir, field), field, ancestors=True, create=create)
    for name in ("jobs", "checkpoints"):
        checked_directory(root / name, field, create=create)
    return root


def jobs_root(workdir: str | os.PathLike | None = None) -> Path:
    """The directory holding one sub-directory per local job (checked, not created)."""
    return secure_root(workdir) / "jobs"


def job_dir(job_name: str, workdir: str | os.PathLike | None = None) -> Path:
    """The directory of one local job (contract directories, logs, status); `SpecError` for an unsafe name, or
    for a file, a link or another user's directory under that name."""
    path = jobs_root(workdir) / safe_component(job_name, "job_name")
    try:
        details = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(details.st_mode):
        target = path.resolve()
        outside = "" if target.parent == path.parent else f" that leads outside {path.parent} (to {target})"
        raise _refuse(path, f"is a symbolic link{outside}", "job_name")
    if not stat.S_ISDIR(details.st_mode):
        raise SpecError(Problem("job_name", f"{path} is a file, not a job directory: remove it, or choose another "
                                            "job name"), source="local state")
    problem = _owner_problem(path, details, ancestor=False)
    if problem:
        raise _refuse(path, problem, "job_name")
    return path


def checkpoints_root(workdir: str | os.PathLike | None = None) -> Path:
    """Checkpoints outlive a job's run, so a re-run of the same job resumes: they sit beside the jobs, by key
    (checked, not created)."""
    return secure_root(workdir) / "checkpoints"


def short_key(key: str, limit: int = 200) -> str:
    """``key`` when it fits one directory entry with room for trainops' own affixes (`.KEY.lock`, `KEY@job`),
    else its first characters plus a digest of the whole: the same key always gives the same name, so a re-run
    still resumes, and a long `checkpoint_s3_uri` never ends in "File name too long"."""
    if len(key.encode("utf-8")) <= limit:
        return key
    import hashlib

    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return f"{key.encode('utf-8')[:limit - 17].decode('utf-8', 'ignore')}-{digest}"


#: A checkpoint key (``checkpoint_key``, ``--resume-from JOB``): the characters of `SAFE_COMPONENT`, any length (a
#: long one is shortened by `short_key`).
CHECKPOINT_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+=-]*\Z")


def checkpoint_key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a checkpoint directory (one path component under the checkpoints root: no ``/``, no
    ``..``, no hidden or option-like name), or None."""
    if not isinstance(key, str) or not CHECKPOINT_KEY.match(key):
        return (f"{key!r} cannot be a checkpoint key: use the name of a job (letters, digits and - . _ @ + =, starting "
                "with a letter or digit; no /, no .., no spaces)")
    return None


def checkpoint_component(key: str, field: str = "checkpoint_key") -> str:
    """The checkpoint directory's name for ``key`` (`short_key`), one path component under the checkpoints root.
    A ``checkpoint_key`` must be a safe name (`checkpoint_key_problem`, a `SpecError` naming the field); a key made
    from a ``checkpoint_s3_uri`` has its slashes replaced and starts with the bucket's name, so it stays below."""
    if field == "checkpoint_key":
        problem = checkpoint_key_problem(key)
        if problem:
            raise SpecError(Problem(field, problem), source="job options")
    name = short_key(key)
    if "/" in name or "\0" in name or name in (".", ".."):
        raise SpecError(Problem(field, f"{key!r} cannot name a checkpoint directory"), source="job options")
    return name


def own_directory(path: Path, field: str) -> Path:
    """``path`` (a job's or a checkpoint's directory under a checked root) created mode 0700 when missing; a link,
    a file or another user's directory there is a `SpecError` naming ``field``."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise SpecError(Problem(field, f"{path} cannot be created ({error.strerror})"), source="local state") from None
    details = os.lstat(path)
    if stat.S_ISLNK(details.st_mode):
        raise _refuse(path, "is a symbolic link", field)
    if not stat.S_ISDIR(details.st_mode):
        raise SpecError(Problem(field, f"{path} is a file, not a directory: move it away"), source="local state")
    problem = _owner_problem(path, details, ancestor=False)
    if problem:
        raise _refuse(path, problem, field)
    return path

