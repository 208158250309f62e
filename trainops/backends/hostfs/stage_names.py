"""Which relative names staging may write, and how to show any name safely.

A name is the path of a file relative to the staging source: a local file's path under the source directory, or an
S3 key with the source prefix taken off. S3 keys are arbitrary strings, so a key such as ``../x``, ``/etc/x`` or
``a/../../x`` would land outside the destination if it were joined to it naively. Staging therefore accepts only
names made of ordinary segments, and refuses (and reports) everything else before any byte is written:

- empty names, and absolute names (starting with ``/``);
- ``..`` and ``.`` segments, and empty segments (``a//b``): they either escape the destination or make two different
  keys land on one file;
- control characters anywhere (newlines, tabs, NUL, escape sequences, the C1 range): they break logs, manifests
  and tools that read one name per line, and can rewrite a terminal when printed;
- segments longer than a file name may be (255 bytes);
- names staging keeps for itself (any segment starting with ``.trainops-stage``: its manifest, its marker of a
  running stage and its temporary files).

A backslash is an ordinary character on Linux (the local backend and FSx for Lustre mounts), so it is allowed.
"""

from __future__ import annotations

import os
import re
import secrets

#: Every name staging keeps for itself starts with this; a source name with a segment that starts with it is
#: refused, so a source can never collide with staging's own files.
RESERVED_PREFIX = ".trainops-stage"
#: The manifest of what was staged, at the top of the destination.
MANIFEST_NAME = RESERVED_PREFIX + ".json"
#: Present while a stage writes: a stage that finds it was killed, and removes the temporary files left behind.
JOURNAL_NAME = RESERVED_PREFIX + "-journal.json"
#: Temporary files are ``.trainops-stage-<number>-<random>.tmp`` in the directory of their final name: a name nobody
#: can guess, created exclusively and never through a link (`trainops.backends.hostfs.safe_fs`'s rule for directories
#: trainops does not own), and recognisable as staging's own when a killed stage left one.
TEMPORARY_SUFFIX = ".tmp"
#: The longest file name (one segment) Linux file systems take, in bytes.
NAME_MAX = 255


def temporary_name(number: int) -> str:
    """A temporary file's name (in the directory of the final file, so the rename stays in one directory)."""
    return f"{RESERVED_PREFIX}-{number}-{secrets.token_hex(8)}{TEMPORARY_SUFFIX}"


def is_temporary_name(name: str) -> bool:
    """Whether a directory entry is a temporary file of staging (a leftover when no stage is running)."""
    return name.startswith(RESERVED_PREFIX + "-") and name.endswith(TEMPORARY_SUFFIX)


#: C0 controls, DEL and the C1 controls (U+0080-U+009F include CSI, which some terminals obey).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def refusal_reason(name: str) -> str | None:
    """Why ``name`` may not be staged (a short sentence for the report), or None when it is safe to write under the
    destination."""
    if not name:
        return "empty name"
    reason = entry_refusal_reason(name)
    if reason is not None and "control character" in reason:
        return reason
    if name.startswith("/"):
        return "absolute path; it would be written outside the destination"
    segments = name.rstrip("/").split("/")
    if ".." in segments:
        return "'..' segment; it would be written outside the destination"
    if "." in segments:
        return "'.' segment; names must be plain relative paths"
    if "" in segments:
        return "empty path segment ('//'); two keys would land on one file"
    for segment in segments:
        reason = entry_refusal_reason(segment)
        if reason is not None:
            return reason
    return None


def entry_refusal_reason(entry_name: str) -> str | None:
    """`refusal_reason` for one segment (a directory entry's own name, whose parent was already accepted)."""
    found = _CONTROL.search(entry_name)
    if found:
        return f"name contains the control character {found.group()!r}; rename the file or object"
    if entry_name.startswith(RESERVED_PREFIX):
        return f"names starting with {RESERVED_PREFIX!r} are reserved for staging's own files"
    if len(entry_name) * 4 > NAME_MAX and len(os.fsencode(entry_name)) > NAME_MAX:
        return f"a path segment is longer than {NAME_MAX} bytes, which no file system here takes"
    return None


def printable_name(name: str) -> str:
    """``name`` with control characters and undecodable bytes escaped, safe to print on one line.

    Local file names that are not UTF-8 reach Python as surrogate escapes (PEP 383); they are shown as ``\\xNN``.
    """
    try:
        text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no file system produced: show the code point
        return ascii(name)[1:-1]
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)
