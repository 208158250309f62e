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
- names staging keeps for itself (any segment starting with ``.trainops-stage``: its manifest, journal and
  temporary files).

A backslash is an ordinary character on Linux (the local backend and FSx for Lustre mounts), so it is allowed.
"""

from __future__ import annotations

import os
import re

#: Every name staging keeps for itself starts with this: the manifest, the journal and the temporary files. A
#: source name with a segment that starts with it is refused, so a source can never collide with them.
RESERVED_PREFIX = ".trainops-stage"
#: The manifest of what was staged, at the top of the destination.
MANIFEST_NAME = RESERVED_PREFIX + ".json"
#: Lists the directories that hold temporary files while a stage runs, so the next run can remove what a killed
#: run left behind.
JOURNAL_NAME = RESERVED_PREFIX + "-journal.json"
#: Temporary files are ``.trainops-stage-<pid>-<number>.tmp`` in the directory of their final name.
TEMPORARY_SUFFIX = ".tmp"


def temporary_name(number: int, process: int | None = None) -> str:
    """The name of a temporary file (in the directory of the final file, so the rename stays in one directory);
    ``process`` is this process's id, passed in by callers that make many names."""
    return f"{RESERVED_PREFIX}-{process or os.getpid()}-{number}{TEMPORARY_SUFFIX}"


def is_temporary_name(name: str) -> bool:
    """Whether a directory entry is a temporary file of staging (a leftover when no stage is running)."""
    return name.startswith(RESERVED_PREFIX + "-") and name.endswith(TEMPORARY_SUFFIX)


#: C0 controls, DEL and the C1 controls (U+0080-U+009F include CSI, which some terminals obey).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _control_character(name: str) -> str | None:
    found = _CONTROL.search(name)
    return found.group() if found else None


def _is_control(character: str) -> bool:
    return _CONTROL.match(character) is not None


def refusal_reason(name: str) -> str | None:
    """Why ``name`` may not be staged, or None when it is safe to write under the destination.

    The reason is a short sentence naming the problem, for the report and the command line.
    """
    if not name:
        return "empty name"
    control = _control_character(name)
    if control is not None:
        return f"name contains the control character {control!r}; rename the file or object"
    if name.startswith("/"):
        return "absolute path; it would be written outside the destination"
    segments = name.rstrip("/").split("/")
    if ".." in segments:
        return "'..' segment; it would be written outside the destination"
    if "." in segments:
        return "'.' segment; names must be plain relative paths"
    if "" in segments:
        return "empty path segment ('//'); two keys would land on one file"
    if RESERVED_PREFIX in name and any(segment.startswith(RESERVED_PREFIX) for segment in segments):
        return f"names starting with {RESERVED_PREFIX!r} are reserved for staging's own files"
    return None


def entry_refusal_reason(entry_name: str) -> str | None:
    """`refusal_reason` for one directory entry's own name, when its parent's name was already accepted (a local
    listing: an entry name never holds ``/`` and is never ``.`` or ``..``, so only the rest needs checking)."""
    control = _control_character(entry_name)
    if control is not None:
        return f"name contains the control character {control!r}; rename the file or object"
    if entry_name.startswith(RESERVED_PREFIX):
        return f"names starting with {RESERVED_PREFIX!r} are reserved for staging's own files"
    return None


def printable_name(name: str) -> str:
    """``name`` with control characters and undecodable bytes escaped, safe to print on one line.

    Local file names that are not UTF-8 reach Python as surrogate escapes (PEP 383); they are shown as ``\\xNN``.
    """
    try:
        text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no file system produced: show the code point
        return ascii(name)[1:-1]
    if _control_character(text) is None:
        return text
    return "".join(_escaped(character) for character in text)


def _escaped(character: str) -> str:
    return character.encode("unicode_escape").decode("ascii") if _is_control(character) else character
