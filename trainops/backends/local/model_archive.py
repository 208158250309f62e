"""Extracting a ``model.tar.gz`` without trusting it.

Checking member names with ``realpath`` is not enough: a chain of links whose expanded path is longer than PATH_MAX
makes ``realpath`` give up and resolve the rest lexically, while the kernel follows the links out of the directory
(CVE-2025-4517; Python 3.11.7's ``data`` filter is fooled the same way). So nothing here resolves or follows a link:

- only regular files and directories are extracted; a symbolic link, hard link, device or FIFO member refuses the
  whole archive (a training job's model directory has no need for them), as does an absolute name or a ``..``;
- every directory is created and opened relative to its already-open parent with ``O_NOFOLLOW``, every file is
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to its directory, so even a link that got there some other
  way is never written through;
- the sizes in the headers are added up before anything is written: more than the limit
  (``TRAINOPS_MAX_MODEL_BYTES``, default 64 GiB) or more than the free space of the destination refuses the archive
  with both numbers, and a disk that fills anyway is a clear error. The sizes are also counted while writing, so a
  header that lies cannot write more than it declared.

All the checks run before the first byte is written, and a failure part-way removes what was extracted.
"""

from __future__ import annotations

import errno
import os
import shutil
import tarfile
from pathlib import Path

from trainops.backends.local.safe_fs import NEW_FILE_FLAGS, UnsafePath, make_directory
from trainops.errors import JobFailed, Problem, SpecError

#: Environment variable that sets the largest total size an archive may expand to, in bytes.
LIMIT_VARIABLE = "TRAINOPS_MAX_MODEL_BYTES"
DEFAULT_LIMIT_BYTES = 64 * 1024 ** 3
#: The most members an archive may hold (each costs a few system calls and, when refused, a line of error).
MAX_MEMBERS = 1_000_000
CHUNK_BYTES = 1024 * 1024


def _problem(message: str) -> SpecError:
    return SpecError(Problem("model_artifact", message), source="evaluation")


def size_limit() -> int:
    """The configured limit (``TRAINOPS_MAX_MODEL_BYTES``); raises `SpecError` for a value that is not a number."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_LIMIT_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise SpecError(Problem(LIMIT_VARIABLE, f"{text!r} is not a positive number of bytes"), source="evaluation")
    return value


def member_parts(member: tarfile.TarInfo) -> list[str] | str:
    """The member's name split in plain components, or why it is refused."""
    name = member.name
    if not name or name.startswith(("/", "\\")):
        return "is an absolute path"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return "has a '..' segment and would land outside the model directory"
    if any("\x00" in part for part in parts):
        return "has a NUL byte in its name"
    if member.issym() or member.islnk():
        kind = "symbolic" if member.issym() else "hard"
        target = member.linkname if len(member.linkname) <= 60 else member.linkname[:57] + "..."
        return (f"is a {kind} link (to {target!r}); model archives are extracted without links, so that "
                "nothing can be written outside the model directory")
    if not (member.isreg() or member.isdir()):
        return "is a device or pipe, not a file"
    if not parts and not member.isdir():
        return "has no name"
    return parts


def _human(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:,} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)  # pragma: no cover - the loop always returns


def _checked_members(bundle: tarfile.TarFile, source: Path) -> list[tuple[tarfile.TarInfo, list[str]]]:
    checked = []
    total = 0
    for member in bundle:
        if len(checked) >= MAX_MEMBERS:
            raise _problem(f"{source} holds more than {MAX_MEMBERS:,} members; refusing to extract it")
        parts = member_parts(member)
        if isinstance(parts, str):
            raise _problem(f"{source}: member {member.name!r} {parts}; refusing to extract this archive")
        checked.append((member, parts))
        total += member.size if member.isreg() else 0
    limit = size_limit()
    if total > limit:
        raise _problem(f"{source} expands to {_human(total)}, more than the limit of {_human(limit)}; refusing to "
                       f"extract it (a larger model: set {LIMIT_VARIABLE} to a number of bytes)")
    return checked


def _check_free_space(total: int, destination: Path, source: Path) -> None:
    try:
        details = os.statvfs(destination)
    except OSError:
        return
    free = details.f_bavail * details.f_frsize
    if total > free:
        raise JobFailed(f"{source} expands to {_human(total)} but {destination} has only {_human(free)} free; free "
                        "some space (or point the scratch directory elsewhere) and try again")


def _write_member(bundle: tarfile.TarFile, member: tarfile.TarInfo, name: str, parent: int, budget: list[int]) -> None:
    try:
        descriptor = os.open(name, NEW_FILE_FLAGS, 0o644, dir_fd=parent)
    except FileExistsError:
        # A later member of the same name replaces the earlier one, as tar does, but only a regular file.
        details = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not (details.st_mode & 0o170000 == 0o100000):
            raise UnsafePath(errno.EEXIST, f"{name!r} is already there and is not a file") from None
        os.unlink(name, dir_fd=parent)
        descriptor = os.open(name, NEW_FILE_FLAGS, 0o644, dir_fd=parent)
    try:
        reader = bundle.extractfile(member)
        while reader is not None:
            chunk = reader.read(CHUNK_BYTES)
            if not chunk:
                break
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise _problem(f"member {member.name!r} holds more data than its header declared; refusing the "
                               "archive")
            view = memoryview(chunk)
            while view:
                view = view[os.write(descriptor, view):]
        # Execute bits are kept (a model may ship a script); set-uid, set-gid and sticky bits never are.
        os.fchmod(descriptor, 0o755 if member.mode & 0o111 else 0o644)
        os.utime(descriptor, (member.mtime, member.mtime))
    finally:
        os.close(descriptor)


def extract_model(archive: str | os.PathLike[str], destination: str | os.PathLike[str]) -> Path:
    """Extract a ``model.tar.gz`` into ``destination`` (created), following no link; return the directory.

    Raises `SpecError` (field ``model_artifact``) for a file that is not a tar archive, a member that is a link,
    a device, absolute or has ``..``, or an archive larger than the limit; `JobFailed` when the disk has no room.
    Nothing is left behind when it raises.
    """
    source = Path(archive)
    target = Path(destination).resolve()
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    root = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    existing = set(os.listdir(root))
    try:
        try:
            with tarfile.open(source, "r:*") as bundle:
                members = _checked_members(bundle, source)
                total = sum(member.size for member, _ in members if member.isreg())
                _check_free_space(total, target, source)
                budget = [total]
                for member, parts in members:
                    parent = root
                    opened: list[int] = []
                    try:
                        directories = parts if member.isdir() else parts[:-1]
                        for part in directories:
                            parent = make_directory(part, parent, 0o755)
                            opened.append(parent)
                        if member.isreg():
                            _write_member(bundle, member, parts[-1], parent, budget)
                    finally:
                        for descriptor in opened:
                            os.close(descriptor)
        except tarfile.TarError as error:
            raise _problem(f"{source} is not a readable tar archive ({error}); give the training job's "
                           "model.tar.gz") from error
        except UnsafePath as error:
            raise _problem(f"{source}: {error.strerror}; refusing to extract this archive") from error
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise JobFailed(f"no space left in {target} while extracting {source}; free some space and try "
                                "again") from error
            raise
    except BaseException:
        _remove_extracted(target, created, existing)
        raise
    finally:
        os.close(root)
    return target


def _remove_extracted(target: Path, created: bool, existing: set[str]) -> None:
    """Remove what this extraction added (the whole directory when it created it; what was there stays)."""
    # rmtree works on descriptors and does not follow links, so it cannot reach outside the directory.
    if created:
        shutil.rmtree(target, ignore_errors=True)
        return
    for entry in os.scandir(target):
        if entry.name in existing:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
