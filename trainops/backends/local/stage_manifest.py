"""The staging manifest: what was staged into a destination, so a re-run copies only what changed.

The manifest lives at the top of the destination (``.trainops-stage.json``) and records, for every file staged
there, the source's fingerprint of it and the modification time the staged copy was given. Version 3:

``{"version": 3, "source": "s3://bucket/prefix", "names": "a/b.bin\\na/c.bin...", "sizes": "<base64>",
"fingerprints": "<base64>" or ["etag", ...], "staged_mtimes": "<base64>"}``: the names sorted, joined by newlines (a
control character, which no staged name may hold), and each number column as base64 of little-endian signed 64-bit
integers (the fingerprints as a list when they are S3 ETags). Version 2 kept four JSON lists; reading 300,000 numbers
from JSON and building a dict of 100,000 entries took about 0.1 s, most of a re-stage's serial time. Now the columns
load in about 10 ms, and the lookup table is built lazily: a listing process (`stage_parallel`) builds it only for
the names under its own subtrees (a range of the sorted names), in parallel with the others. Versions 1 and 2 are
still read.

The fingerprint is the source file's modification time in nanoseconds for local sources (with the size, the test
``rsync`` uses by default) and the ETag for S3 objects. A file is skipped on the next run only when its source
fingerprint is unchanged *and* the staged copy still has the recorded size and modification time, so a copy that was
edited or deleted in the destination is staged again.

The manifest is only ever trusted as a hint: an unreadable, foreign or malformed manifest means "nothing is known"
(everything is copied again), and its names are checked like any other name before staging acts on them.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import gc
import json
import operator
import os
import stat
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from trainops.backends.local.stage_names import MANIFEST_NAME, RESERVED_PREFIX, TEMPORARY_SUFFIX

MANIFEST_VERSION = 3
#: Between names in a version 3 manifest: a newline, which `stage_names` refuses in every name (a control
#: character). One string of 100,000 names parses in about 10 ms; a JSON list of them takes several times that.
NAME_SEPARATOR = "\n"

#: (size, fingerprint, staged_mtime_ns); the fingerprint is an int (mtime_ns) or a str (ETag).
Entry = tuple[int, "int | str", int]
#: The sorted names and their three columns (arrays of int64, or a list of fingerprints that are ETags).
Columns = tuple[list[str], array, "array | list[int | str]", array]


def _valid_entry(value: Any) -> Entry | None:
    if not isinstance(value, list) or len(value) != 3:
        return None
    size, fingerprint, staged_mtime_ns = value
    if type(size) is not int or type(staged_mtime_ns) is not int or type(fingerprint) not in (int, str):
        return None
    return size, fingerprint, staged_mtime_ns


def _parallel_lists(document: dict[str, Any]) -> dict[str, Entry] | None:
    """The files of a version 2 manifest, or None when its lists are not what they must be (all or nothing: a
    hand-edited manifest is not worth salvaging entry by entry, everything is simply copied again)."""
    names, sizes = document.get("files"), document.get("sizes")
    fingerprints, mtimes = document.get("fingerprints"), document.get("staged_mtimes")
    columns = (names, sizes, fingerprints, mtimes)
    if not all(type(column) is list for column in columns) or len({len(column) for column in columns}) != 1:
        return None
    # Checked a column at a time (set of types): much faster than one check per entry.
    if not (set(map(type, names)) <= {str} and set(map(type, sizes)) <= {int} and set(map(type, mtimes)) <= {int}
            and set(map(type, fingerprints)) <= {int, str}):
        return None
    return dict(zip(names, zip(sizes, fingerprints, mtimes)))


def _numbers(value: Any) -> array | None:
    """A column of 64-bit integers written by `_encoded` (an array: its Python ints are made only for the entries
    looked at), or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) % 8:
        return None
    column = array("q")
    column.frombytes(raw)
    if sys.byteorder != "little":
        column.byteswap()
    return column


def _encoded(values: list | array) -> str | list:
    """A column as base64 of little-endian int64 when every value is such an integer, else the list itself."""
    try:
        column = array("q", values)
    except (TypeError, OverflowError):
        return list(values)
    if sys.byteorder != "little":
        column.byteswap()
    return base64.b64encode(column.tobytes()).decode("ascii")


def _version_3(document: dict[str, Any]) -> Columns | None:
    """The columns of a version 3 manifest, or None when they are not what they must be (all or nothing)."""
    names = document.get("names")
    if not isinstance(names, str):
        return None
    names = names.split(NAME_SEPARATOR) if names else []
    sizes, mtimes = _numbers(document.get("sizes")), _numbers(document.get("staged_mtimes"))
    fingerprints = document.get("fingerprints")
    fingerprints = _numbers(fingerprints) if isinstance(fingerprints, str) else fingerprints
    if sizes is None or mtimes is None or not isinstance(fingerprints, (list, array)) \
            or not len(names) == len(sizes) == len(fingerprints) == len(mtimes) \
            or (type(fingerprints) is list and not set(map(type, fingerprints)) <= {int, str}):
        return None
    return names, sizes, fingerprints, mtimes


def read_regular_file(name: str, directory: int) -> bytes | None:
    """The bytes of ``name`` in the open directory ``directory`` when it is a regular file (not a link), else None;
    never blocks on a FIFO."""
    # O_NONBLOCK: a FIFO planted under the manifest's name must not hang staging; it is rejected by the fstat.
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def write_new_file(name: str, directory: int, text: str) -> None:
    """Write ``text`` (ASCII) to ``name`` in the open directory ``directory`` as a new file, never through a link
    that sits under that name."""
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    # O_EXCL | O_NOFOLLOW: whatever sat under this name is gone, and a link planted meanwhile makes the open fail.
    descriptor = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=directory)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(text)


def _columns_of(files: dict[str, Entry]) -> Columns:
    """The sorted columns of a name -> entry table (a manifest of version 1 or 2, or one written out of order)."""
    names = sorted(files)
    entries = list(map(files.__getitem__, names))
    fingerprints = [entry[1] for entry in entries]
    return (names, array("q", [entry[0] for entry in entries]),
            fingerprints if any(type(value) is str for value in fingerprints) else array("q", fingerprints),
            array("q", [entry[2] for entry in entries]))


def _without_collection(build: Callable[[], Any]) -> Any:
    """``build()`` with the cyclic garbage collector held off: building 100,000 tuples and dict entries (no cycles)
    otherwise sets off collections that rescan everything built so far (about a third of the time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    finally:
        if enabled:
            gc.enable()


class StageManifest:
    """The files staged into one destination from one source. Load with `StageManifest.load`.

    A manifest loaded from disk keeps its sorted columns and builds the name -> entry table (`files`) only when it
    is used whole; `entry` looks a name up in the columns, and `part` gives the entries under some directories (the
    subtrees a listing process walks). Every version read becomes sorted columns."""

    def __init__(self, source: str, files: dict[str, Entry] | None = None, *, note: str | None = None,
                 columns: Columns | None = None):
        self.source = source
        self._files: dict[str, Entry] | None = dict(files or {}) if columns is None else None
        self._columns = columns
        #: Why a manifest on disk was not used (for the report), or None.
        self.note = note
        self.changed = False

    @property
    def files(self) -> dict[str, Entry]:
        """Every name -> (size, fingerprint, staged mtime); built on first use."""
        if self._files is None:
            names, sizes, fingerprints, mtimes = self._columns
            self._files = _without_collection(lambda: dict(zip(names, zip(sizes, fingerprints, mtimes))))
            self._columns = None
        return self._files

    def __len__(self) -> int:
        return len(self._files) if self._files is not None else len(self._columns[0])

    def names(self) -> Iterator[str]:
        """Every recorded name."""
        return iter(self._files if self._files is not None else self._columns[0])

    def entry(self, name: str) -> Entry | None:
        """What was recorded for ``name``, or None (a binary search while the columns are not yet a table)."""
        if self._files is not None:
            return self._files.get(name)
        names, sizes, fingerprints, mtimes = self._columns
        index = bisect.bisect_left(names, name)
        if index < len(names) and names[index] == name:
            return sizes[index], fingerprints[index], mtimes[index]
        return None

    def part(self, directories: Iterable[str]) -> dict[str, Entry]:
        """The entries whose names are inside the ``directories`` (each ``a`` or ``a/b``, no trailing slash; none
        inside another)."""
        wanted = set(directories)
        if self._columns is None:  # a table built meanwhile: back to sorted columns, which ranges need
            self._columns, self._files = _without_collection(lambda: _columns_of(self._files)), None
        names, sizes, fingerprints, mtimes = self._columns

        def build() -> dict[str, Entry]:
            part: dict[str, Entry] = {}
            for directory in wanted:
                # Sorted names: those starting with "a/b/" are exactly the ones from "a/b/" up to "a/b0" ("0" follows
                # "/" in every encoding of the names).
                low = bisect.bisect_left(names, directory + "/")
                high = bisect.bisect_left(names, directory + "0")
                part.update(zip(names[low:high], zip(sizes[low:high], fingerprints[low:high], mtimes[low:high])))
            return part

        return _without_collection(build)

    @classmethod
    def load(cls, destination: int, source: str) -> StageManifest:
        """The manifest of the open destination directory for ``source``; empty when there is none, it is
        unreadable, or it was written for another source (whose files are then left alone: staging never deletes
        what it did not record)."""
        return _without_collection(lambda: cls._load(destination, source))

    @classmethod
    def _load(cls, destination: int, source: str) -> StageManifest:
        raw = read_regular_file(MANIFEST_NAME, destination)
        if raw is None:
            return cls(source)
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return cls(source, note=f"{MANIFEST_NAME} is not valid JSON; every file is copied again")
        if not isinstance(document, dict) or document.get("version") not in (1, 2, MANIFEST_VERSION):
            return cls(source, note=f"{MANIFEST_NAME} has an unknown format; every file is copied again")
        if document.get("source") != source:
            return cls(source, note=f"the destination was last staged from {document.get('source')!r}; every file "
                                    "is copied again and files from that source are left in place")
        if document["version"] == MANIFEST_VERSION:
            columns = _version_3(document)
            if columns is not None and not all(map(operator.lt, columns[0], columns[0][1:])):
                # Not sorted (or a name twice): not what this code writes; sorted here, as ranges need.
                columns = _columns_of(dict(zip(columns[0], zip(*columns[1:]))))
        elif document["version"] == 2:
            files = _parallel_lists(document)
            columns = None if files is None else _columns_of(files)
        else:
            recorded = document.get("files")
            files = {name: entry for name, entry in
                     ((name, _valid_entry(value)) for name, value in
                      (recorded.items() if isinstance(recorded, dict) else ()))
                     if entry is not None}
            columns = _columns_of(files)
        if columns is None:
            return cls(source, note=f"{MANIFEST_NAME} is malformed; every file is copied again")
        return cls(source, columns=columns)

    def record(self, name: str, size: int, fingerprint: int | str, staged_mtime_ns: int) -> None:
        """Remember that ``name`` was staged (called only after the file has its final name)."""
        self.files[name] = (size, fingerprint, staged_mtime_ns)
        self.changed = True

    def forget(self, name: str) -> None:
        """Drop ``name`` (its staged copy was deleted)."""
        if self.files.pop(name, None) is not None:
            self.changed = True

    def to_json(self) -> str:
        """The manifest document, as written to disk."""
        names, sizes, fingerprints, mtimes = self._columns if self._columns is not None else _columns_of(self._files)
        document = {"version": MANIFEST_VERSION, "source": self.source, "names": NAME_SEPARATOR.join(names),
                    "sizes": _encoded(sizes), "fingerprints": _encoded(fingerprints),
                    "staged_mtimes": _encoded(mtimes)}
        # ensure_ascii: non-UTF-8 file names (surrogate escapes) survive the round trip as \\udcXX escapes.
        return json.dumps(document, ensure_ascii=True, separators=(",", ":"))

    def save(self, destination: int) -> None:
        """Write the manifest into the open destination directory atomically: to a temporary file next to it, then
        rename. A rename replaces a symbolic link planted under the manifest's name instead of writing through it.
        """
        temporary = f"{RESERVED_PREFIX}-manifest-{os.getpid()}{TEMPORARY_SUFFIX}"
        write_new_file(temporary, destination, self.to_json())
        os.replace(temporary, MANIFEST_NAME, src_dir_fd=destination, dst_dir_fd=destination)
        self.changed = False
