"""Extracting a ``model.tar.gz`` without trusting it: the code both backends run.

Checking member names with ``realpath`` is not enough: a chain of links whose expanded path is longer than PATH_MAX
makes ``realpath`` give up and resolve the rest lexically, while the kernel follows the links out of the directory
(CVE-2025-4517; Python 3.11.7's ``data`` filter is fooled the same way). So nothing here resolves or follows a link:

- only regular files and directories are extracted; a symbolic link, hard link, device or FIFO member refuses the
  whole archive (a training job's model directory has no need for them), as does an absolute name or a ``..``;
- every directory is created and opened relative to its already-open parent with ``O_NOFOLLOW``, every file is
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to its directory, so even a link that got there some other
  way is never written through;
- the sizes in the headers are added up before anything is written: more than the limit
  (``TRAINOPS_MAX_MODEL_BYTES``, default 64 GiB), more than `MAX_RATIO` times the archive's own size (once past
  `RATIO_FLOOR_BYTES`: a bomb is refused as soon as its headers say so, before its data is even decompressed), or
  more than the free space of the destination refuses the archive with the numbers, and a disk that fills anyway is
  a clear error. The sizes are also counted while writing, so a header that lies cannot write more than it declared;
- a header is checked field by field: a sparse member (its holes would be written out in full), a negative size, a
  modification time that is not a finite number of a sane range refuse the archive, naming the member;
- nothing is dropped silently: Python's reader stops without a word at a corrupt header that follows good members,
  so what follows the last member must be the end-of-archive padding (zeros), and a stream cut short (a truncated
  gzip) or corrupt is refused naming the member it was reading.

All the checks run before the first byte is written, and a failure part-way removes what was extracted.

This module is self-contained (standard library only, no trainops import): the SageMaker evaluation bootstrap
(`trainops.backends.sagemaker.evaluation_bootstrap`) carries its text into the processing job, where trainops is not
installed, so an evaluation extracts its model with this same code on both backends. Errors are `ArchiveRefused`
(the archive or the limit setting; ``field`` names what to fix) and `NoRoom`; `model_archive` turns them into
trainops' own errors.
"""

from __future__ import annotations

import errno
import gzip
import math
import os
import shutil
import tarfile
import zlib
from pathlib import Path

#: Environment variable that sets the largest total size an archive may expand to, in bytes.
LIMIT_VARIABLE = "TRAINOPS_MAX_MODEL_BYTES"
DEFAULT_LIMIT_BYTES = 64 * 1024 ** 3
#: The most members an archive may hold (each costs a few system calls and, when refused, a line of error).
MAX_MEMBERS = 1_000_000
CHUNK_BYTES = 1024 * 1024
#: An archive expanding to more than MAX_RATIO times its own size is a bomb, once it expands past RATIO_FLOOR_BYTES
#: (gzip's own bound is about 1,030; a model of real weights compresses a little, one of zeros up to that bound).
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 1024 ** 3
#: After the last member only the end-of-archive blocks and the padding to a record may follow (zeros): more than this
#: after it is refused, as data tar's reader would have skipped.
TRAILER_LIMIT_BYTES = 1024 * 1024
#: Modification times beyond this many seconds either side of 1970 (about 4,000 years) are not a model's.
MTIME_LIMIT_SECONDS = 2 ** 37
#: What a compressed stream cut short or corrupt raises while it is read (gzip's BadGzipFile is an OSError: caught
#: before the disk's errors).
_STREAM_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, gzip.BadGzipFile)
_READ_ERRORS: tuple[type[BaseException], ...] = (*_STREAM_ERRORS, tarfile.TarError)
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ArchiveRefused(Exception):
    """The archive, or the size limit's setting, is not acceptable; ``field`` names what to fix."""

    def __init__(self, message: str, field: str = "model_artifact"):
        super().__init__(message)
        self.field = field


class NoRoom(Exception):
    """The destination has no room for what the archive holds."""


def size_limit() -> int:
    """The configured limit (``TRAINOPS_MAX_MODEL_BYTES``); raises `ArchiveRefused` for a value that is not a
    positive number."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_LIMIT_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise ArchiveRefused(f"{text!r} is not a positive number of bytes", field=LIMIT_VARIABLE)
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
    if member.issparse():
        return ("is a sparse file; model archives are extracted without sparse members, whose holes would be "
                "written out in full")
    if not (member.isreg() or member.isdir()):
        return "is a device or pipe, not a file"
    if not parts and not member.isdir():
        return "has no name"
    if not isinstance(member.size, int) or member.size < 0:
        return f"has a negative or invalid size in its header ({member.size!r})"
    mtime = member.mtime
    if isinstance(mtime, bool) or not isinstance(mtime, (int, float)) or not math.isfinite(mtime) \
            or abs(mtime) > MTIME_LIMIT_SECONDS:
        return f"has an invalid modification time in its header ({str(mtime)[:40]})"
    return parts


def human(count: float) -> str:
    """A byte count for people: ``6,000 bytes``, ``6.0 MiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:,} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)  # pragma: no cover - the loop always returns


def _shown(name: str) -> str:
    return repr(name if len(name) <= 200 else name[:197] + "...")


def _checked_members(bundle: tarfile.TarFile, source: Path) -> list[tuple[tarfile.TarInfo, list[str]]]:
    """Every member, checked (`member_parts`), with the total size bounded by the limit and the ratio as the headers
    are read (a bomb is refused before its data is decompressed); then the archive's end (`_check_end`)."""
    checked: list[tuple[tarfile.TarInfo, list[str]]] = []
    total, limit = 0, size_limit()
    ratio_bound = max(RATIO_FLOOR_BYTES, MAX_RATIO * os.stat(source).st_size)
    previous = "the first member"
    try:
        for member in bundle:
            if len(checked) >= MAX_MEMBERS:
                raise ArchiveRefused(f"{source} holds more than {MAX_MEMBERS:,} members; refusing to extract it")
            parts = member_parts(member)
            if isinstance(parts, str):
                raise ArchiveRefused(f"{source}: member {_shown(member.name)} {parts}; refusing to extract this "
                                     "archive")
            checked.append((member, parts))
            total += member.size if member.isreg() else 0
            if total > limit:
                raise ArchiveRefused(f"{source} expands to at least {human(total)} (up to member "
                                     f"{_shown(member.name)}), more than the limit of {human(limit)}; refusing to "
                                     f"extract it (a larger model: set {LIMIT_VARIABLE} to a number of bytes)")
            if total > ratio_bound:
                raise ArchiveRefused(f"{source} ({human(os.stat(source).st_size)}) expands to at least "
                                     f"{human(total)} (up to member {_shown(member.name)}), over {MAX_RATIO} times its "
                                     "size: refusing it as an archive bomb")
            previous = f"member {_shown(member.name)}"
        _check_end(bundle, source, previous)
    except _STREAM_ERRORS as error:
        raise ArchiveRefused(f"{source} is cut short or corrupt at or after {previous} ({error}); refusing to extract "
                             "it: give the training job's whole model.tar.gz") from error
    return checked


def _check_end(bundle: tarfile.TarFile, source: Path, previous: str) -> None:
    """Refuse an archive with anything but zeros after its last member: Python's reader ends without a word at a
    corrupt header after the first one, which would drop the members that follow silently."""
    stream = bundle.fileobj
    assert stream is not None  # an open archive
    stream.seek(bundle.offset)
    left = TRAILER_LIMIT_BYTES
    while True:
        chunk = stream.read(min(CHUNK_BYTES, left + 1))
        if not chunk:
            return
        if chunk.count(0) != len(chunk):
            raise ArchiveRefused(f"{source} has data after {previous} that is not a valid tar header (a corrupt or "
                                 "forged header); refusing to extract it rather than leave out what follows")
        left -= len(chunk)
        if left < 0:
            raise ArchiveRefused(f"{source} has more than {human(TRAILER_LIMIT_BYTES)} of padding after {previous}; "
                                 "refusing to extract it")


def _check_free_space(total: int, destination: Path, source: Path, room_hint: str) -> None:
    try:
        details = os.statvfs(destination)
    except OSError:
        return
    free = details.f_bavail * details.f_frsize
    if total > free:
        raise NoRoom(f"{source} expands to {human(total)} but {destination} has only {human(free)} free; "
                     f"{room_hint}")


def _make_directory(name: str, parent: int) -> int:
    """Create (or reuse) the directory ``name`` in ``parent`` and return it open; never through a link."""
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ArchiveRefused(f"{name!r} is already there and is not a directory (a link, or a file); "
                                 "refusing to extract this archive") from error
        raise


def _write_member(bundle: tarfile.TarFile, member: tarfile.TarInfo, name: str, parent: int, budget: list[int]) -> None:
    try:
        descriptor = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=parent)
    except FileExistsError:
        # A later member of the same name replaces the earlier one, as tar does, but only a regular file.
        details = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not (details.st_mode & 0o170000 == 0o100000):
            raise ArchiveRefused(f"{name!r} is already there and is not a file (a link?); refusing to extract this "
                                 "archive") from None
        os.unlink(name, dir_fd=parent)
        descriptor = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=parent)
    try:
        reader = bundle.extractfile(member)
        while reader is not None:
            try:
                chunk = reader.read(CHUNK_BYTES)
            except _READ_ERRORS as error:
                raise ArchiveRefused(f"member {_shown(member.name)} cannot be read ({error}): the archive is cut "
                                     "short or corrupt; refusing it") from error
            if not chunk:
                break
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise ArchiveRefused(f"member {member.name!r} holds more data than its header declared; refusing "
                                     "the archive")
            view = memoryview(chunk)
            while view:
                view = view[os.write(descriptor, view):]
        # Execute bits are kept (a model may ship a script); set-uid, set-gid and sticky bits never are.
        os.fchmod(descriptor, 0o755 if member.mode & 0o111 else 0o644)
        os.utime(descriptor, (member.mtime, member.mtime))
    finally:
        os.close(descriptor)


def extract(archive: str | os.PathLike[str], destination: str | os.PathLike[str],
            room_hint: str = "free some space and try again") -> Path:
    """Extract a ``model.tar.gz`` into ``destination`` (created), following no link; return the directory.

    Raises `ArchiveRefused` for a file that is not a tar archive, a member that is a link, a device, absolute or has
    ``..``, or an archive larger than the limit; `NoRoom` (its message ends with ``room_hint``) when the disk has no
    room. Nothing is left behind when it raises.
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
                _check_free_space(total, target, source, room_hint)
                budget = [total]
                for member, parts in members:
                    parent = root
                    opened: list[int] = []
                    try:
                        directories = parts if member.isdir() else parts[:-1]
                        for part in directories:
                            parent = _make_directory(part, parent)
                            opened.append(parent)
                        if member.isreg():
                            _write_member(bundle, member, parts[-1], parent, budget)
                    finally:
                        for descriptor in opened:
                            os.close(descriptor)
        except tarfile.TarError as error:
            raise ArchiveRefused(f"{source} is not a readable tar archive ({error}); give the training job's "
                                 "model.tar.gz") from error
        except _STREAM_ERRORS as error:  # cut short before the first header
            raise ArchiveRefused(f"{source} is cut short or corrupt ({error}); give the training job's whole "
                                 "model.tar.gz") from error
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise NoRoom(f"no space left in {target} while extracting {source}; {room_hint}") from error
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
