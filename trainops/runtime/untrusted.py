"""Reading a file that a job or another user can write: the one way trainops does it.

A rank runs as the user who started the job, so anything in its job directory (a failure file, a rank record, a
status record, a lock, a log, a metrics file) may have been replaced by what the job chose to leave there: a sparse
file of gigabytes, a FIFO that blocks the first reader forever, a link to a device or to another user's file. So such
a file is opened

- without following a link (``O_NOFOLLOW``: a link there fails with ELOOP, named as a link),
- without blocking (``O_NONBLOCK``: opening a FIFO for reading returns at once),
- and used only when ``fstat`` says it is a regular file,

then read for at most the number of bytes the caller can use: the first part (`read_bounded`), the last part
(`read_tail_bytes`), or the whole only when it fits (``whole=True``, else `UnsafeFile` with EFBIG). Standard library
only: the runtime reads its ranks' records with it, in every container and every emulated host.
"""

from __future__ import annotations

import errno
import os
import stat

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """Not a regular file where one was expected (a link, FIFO, device, socket, directory), or larger than allowed.

    ``errno`` says which: ELOOP for a link, EFBIG for a file too large to take whole, EINVAL otherwise."""


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
