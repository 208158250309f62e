"""Reading a file that a job or another user can write: the one way trainops does it.

A rank runs as the user who started the job, so anything in its job directory (a failure file, a rank record, a
status record, a lock, a log, a metrics file) may have been replaced by what the job chose to leave there: a sparse
file of gigabytes, a FIFO that blocks the first reader forever, a link to a device or to another user's file. So such
a file is opened

- without following a link (``O_NOFOLLOW``: a link there fails with ELOOP, named as a link),
- without blocking (``O_NONBLOCK``: opening a FIFO for reading returns at once),
- and used only when ``fstat`` says it is a regular file,

then read for at most the number of bytes the caller can use: the first part (`read_bounded`), the last part
(`read_tail_bytes`), or the whole only when it fits (``whole=True``, else `UnsafeFile` with EFBIG). A JSON file
(`read_json`) is read whole within its limit and must hold the type asked for, else `CorruptFile` naming it: never a
raw ``JSONDecodeError``, ``UnicodeDecodeError`` or ``RecursionError``. `unreadable` words any of these errors as
"<file>: <why>" for a message. Standard library only: the runtime reads its ranks' records with it, in every
container and every emulated host.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """Not a regular file where one was expected (a link, FIFO, device, socket, directory), or larger than allowed.

    ``errno`` says which: ELOOP for a link, EFBIG for a file too large to take whole, EINVAL otherwise."""


class CorruptFile(ValueError):
    """A file read whole (`read_json`) that does not hold what it should: not UTF-8 JSON, nested deeper than the
    parser goes, or not of the type expected. The message names the file."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (relative to ``dir_fd`` when given), opened without
    following a link and without blocking; `UnsafeFile` when it is anything else, `FileNotFoundError` when missing."""
    try:
        descriptor = os.open(path, READ_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, "is a symbolic link; trainops does not read through one",
                             os.fspath(path)) from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(errno.EINVAL, f"is {_kind(mode)}, not a regular file", os.fspath(path))
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _read_at_most(descriptor: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_bounded(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None,
                 whole: bool = False) -> bytes:
    """At most the first ``limit`` bytes of the regular file at ``path`` (`open_regular`). With ``whole``, the file
    must fit: one byte more raises `UnsafeFile` (EFBIG) instead of returning a cut copy (a JSON record cut in two
    would read as corrupt for the wrong reason)."""
    descriptor = open_regular(path, dir_fd=dir_fd)
    try:
        data = _read_at_most(descriptor, limit + 1 if whole else limit)
    finally:
        os.close(descriptor)
    if whole and len(data) > limit:
        raise UnsafeFile(errno.EFBIG, f"is larger than {limit:,} bytes, more than this file can hold",
                         os.fspath(path))
    return data


def read_tail_bytes(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None) -> bytes:
    """At most the last ``limit`` bytes of the regular file at ``path`` (`open_regular`)."""
    descriptor = open_regular(path, dir_fd=dir_fd)
    try:
        size = os.fstat(descriptor).st_size
        os.lseek(descriptor, max(0, size - limit), os.SEEK_SET)
        return _read_at_most(descriptor, limit)
    finally:
        os.close(descriptor)


def read_text(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None) -> str:
    """`read_bounded` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_bounded(path, limit, dir_fd=dir_fd).decode("utf-8", errors="replace")


def read_json(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None,
              expect: type = dict) -> Any:
    """The JSON value of the regular file at ``path``, read whole within ``limit`` bytes (`read_bounded`), which must
    be an ``expect`` (a ``dict`` unless said). Raises `FileNotFoundError` when it is missing, `UnsafeFile` when it is
    a link, a FIFO, a device or too large, `CorruptFile` when it holds anything else: each names the file."""
    raw = read_bounded(path, limit, dir_fd=dir_fd, whole=True)
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        why = "nested too deep" if isinstance(error, RecursionError) else str(error)
        raise CorruptFile(f"{os.fspath(path)}: not valid JSON ({why})") from None
    if not isinstance(value, expect):
        raise CorruptFile(f"{os.fspath(path)}: expected a JSON {_JSON_NAMES.get(expect, expect.__name__)}, "
                          f"found {_JSON_NAMES.get(type(value), type(value).__name__)}")
    return value


_JSON_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def unreadable(error: BaseException) -> str:
    """An error of `read_json` / `read_bounded` as "<file>: <why>" (an OSError's own words otherwise end in the
    file's repr after its errno)."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{os.fspath(error.filename)}: {error.strerror or error}"
    return str(error)
