"""Checking a source tarball's headers before the runtime unpacks it (an ``s3://.../sourcedir.tar.gz`` source_dir).

tarfile's ``data`` filter refuses links out, absolute names and devices, but not what the headers claim: a GNU
sparse member of a few hundred bytes is written out as a file of its full declared size (its holes filled), a
negative size makes the reader skip backwards and drop the members after it, a modification time no clock has
raises a raw ``OverflowError`` at ``utime``, and a bomb is decompressed to the disk's end. So every header is read
and checked first (`checked_members`), nothing written until all pass, each refusal naming the member:

- only regular files and directories, no sparse member, a name inside the code directory;
- a size that is a non-negative integer and a finite modification time of a sane range;
- the sizes added up within `CODE_LIMIT_BYTES` (``TRAINOPS_MAX_CODE_BYTES``) and within `MAX_RATIO` times the
  archive's own size once past `RATIO_FLOOR_BYTES`, decided from the headers before the data is decompressed;
- only zeros after the last member (Python's reader stops without a word at a corrupt header after the first, which
  would drop the code that follows silently), and a stream cut short named as such.

The model archive extractor (`trainops.backends.model_extract`) applies the same rules to a model.tar.gz; it cannot
import this module, nor this one it: it is carried as text into SageMaker processing jobs where trainops is not
installed, and the runtime imports nothing above itself. Standard library only.
"""

from __future__ import annotations

import gzip
import math
import os
import tarfile
import zlib

#: Environment variable that sets the largest total size a source tarball may expand to, in bytes.
LIMIT_VARIABLE = "TRAINOPS_MAX_CODE_BYTES"
#: Training code is text and a few small files; SageMaker itself keeps a source tarball far under this.
CODE_LIMIT_BYTES = 4 * 1024 ** 3
MAX_MEMBERS = 1_000_000
#: Expanding to more than MAX_RATIO times its own size once past RATIO_FLOOR_BYTES is a bomb (gzip's bound is ~1,030).
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 256 * 1024 ** 2
TRAILER_LIMIT_BYTES = 1024 * 1024
MTIME_LIMIT_SECONDS = 2 ** 37
#: What a compressed stream cut short or corrupt raises while it is read.
STREAM_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, gzip.BadGzipFile)


class TarballRefused(ValueError):
    """The source tarball (or the limit's setting) is refused; the message names the member and what to do."""


def size_limit() -> int:
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return CODE_LIMIT_BYTES
    if not text.isdigit() or int(text) <= 0:
        raise TarballRefused(f"{LIMIT_VARIABLE}={text!r} is not a positive number of bytes")
    return int(text)


def member_problem(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` cannot be unpacked into the code directory, or None."""
    parts = [part for part in member.name.split("/") if part not in ("", ".")]
    if member.name.startswith(("/", "\\")) or ".." in parts or "\x00" in member.name:
        return "is an absolute path or has a '..' segment: it would land outside the code directory"
    if member.issparse():
        return "is a sparse file, whose holes would be written out in full"
    if not (member.isreg() or member.isdir()):
        return "is a link, device or pipe, not a plain file or directory"
    if not isinstance(member.size, int) or member.size < 0:
        return f"has a negative or invalid size in its header ({member.size!r})"
    mtime = member.mtime
    if isinstance(mtime, bool) or not isinstance(mtime, (int, float)) or not math.isfinite(mtime) \
            or abs(mtime) > MTIME_LIMIT_SECONDS:
        return f"has an invalid modification time in its header ({str(mtime)[:40]})"
    return None


def checked_members(bundle: tarfile.TarFile, archive: str) -> list[tarfile.TarInfo]:
    """Every member of the open ``bundle``, each checked (`member_problem`), the total bounded as the headers are
    read, then the end of the archive; raises `TarballRefused` naming the member."""
    members: list[tarfile.TarInfo] = []
    total, limit = 0, size_limit()
    ratio_bound = max(RATIO_FLOOR_BYTES, MAX_RATIO * os.stat(archive).st_size)
    last = "the first member"
    try:
        for member in bundle:
            problem = member_problem(member)
            if problem is None and len(members) >= MAX_MEMBERS:
                problem = f"is past the {MAX_MEMBERS:,} members a source tarball may hold"
            total += member.size if problem is None and member.isreg() else 0
            if problem is None and total > limit:
                problem = (f"takes the code to at least {total:,} bytes, over the limit of {limit:,} (more: set "
                           f"{LIMIT_VARIABLE} to a number of bytes)")
            if problem is None and total > ratio_bound:
                problem = f"takes the code to {total:,} bytes, over {MAX_RATIO} times the archive's size: a bomb"
            if problem is not None:
                raise TarballRefused(f"member {member.name[:200]!r} {problem}; rebuild the source tarball from the "
                                     "training code's regular files")
            members.append(member)
            last = f"member {member.name[:200]!r}"
        _check_end(bundle, last)
    except STREAM_ERRORS as error:
        raise TarballRefused(f"the archive is cut short or corrupt at or after {last} ({error}); upload the "
                             "whole source tarball again") from None
    return members


def _check_end(bundle: tarfile.TarFile, last: str) -> None:
    stream = bundle.fileobj
    assert stream is not None  # an open archive
    stream.seek(bundle.offset)
    tail = stream.read(TRAILER_LIMIT_BYTES + 1)
    if tail.count(0) != len(tail) or len(tail) > TRAILER_LIMIT_BYTES:
        raise TarballRefused(f"what follows {last} is not a valid tar header nor the archive's end (a corrupt or "
                             "forged header): refusing it rather than leave out the code that follows")
