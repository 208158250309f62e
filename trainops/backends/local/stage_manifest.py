"""The staging manifest: what was staged into a destination, so a re-run copies only what changed.

The manifest lives at the top of the destination (``.trainops-stage.json``) and records, for every file staged
there, the source's fingerprint of it and the modification time the staged copy was given:

``{"version": 2, "source": "s3://bucket/prefix", "files": ["a/b.bin", ...], "sizes": [...], "fingerprints": [...],
"staged_mtimes": [...]}``: four parallel lists, the i-th entry of each describing the i-th file. Version 1 kept one
``[size, fingerprint, staged_mtime_ns]`` list per name; parallel flat lists load several times faster (a manifest of
100,000 files is read on every re-stage, and that read was a large part of a re-stage's time). Version 1 is still
read.

The fingerprint is the source file's modification time in nanoseconds for local sources (with the size, the test
``rsync`` uses by default) and the ETag for S3 objects. A file is skipped on the next run only when its source
fingerprint is unchanged *and* the staged copy still has the recorded size and modification time, so a copy that was
edited or deleted in the destination is staged again.

The manifest is only ever trusted as a hint: an unreadable, foreign or malformed manifest means "nothing is known"
(everything is copied again), and its names are checked like any other name before staging acts on them.
"""

from __future__ import annotations

import gc
import json
import os
import stat
from typing import Any

from trainops.backends.local.stage_names import MANIFEST_NAME, RESERVED_PREFIX, TEMPORARY_SUFFIX

MANIFEST_VERSION = 2

#: (size, fingerprint, staged_mtime_ns); the fingerprint is an int (mtime_ns) or a str (ETag).
Entry = tuple[int, "int | str", int]


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


class StageManifest:
    """The files staged into one destination from one source. Load with `StageManifest.load`."""

    def __init__(self, source: str, files: dict[str, Entry] | None = None, *, note: str | None = None):
        self.source = source
        self.files: dict[str, Entry] = dict(files or {})
        #: Why a manifest on disk was not used (for the report), or None.
        self.note = note
        self.changed = False

    @classmethod
    def load(cls, destination: int, source: str) -> "StageManifest":
        """The manifest of the open destination directory for ``source``; empty when there is none, it is
        unreadable, or it was written for another source (whose files are then left alone: staging never deletes
        what it did not record)."""
        # The cyclic garbage collector is held off while the document becomes lists and tuples: it holds no
        # cycles, and building 100,000 entries otherwise sets off collections that rescan everything built so far
        # (about a third of the load's time).
        enabled = gc.isenabled()
        gc.disable()
        try:
            return cls._load(destination, source)
        finally:
            if enabled:
                gc.enable()

    @classmethod
    def _load(cls, destination: int, source: str) -> "StageManifest":
        raw = read_regular_file(MANIFEST_NAME, destination)
        if raw is None:
            return cls(source)
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return cls(source, note=f"{MANIFEST_NAME} is not valid JSON; every file is copied again")
        if not isinstance(document, dict) or document.get("version") not in (1, MANIFEST_VERSION):
            return cls(source, note=f"{MANIFEST_NAME} has an unknown format; every file is copied again")
        if document.get("source") != source:
            return cls(source, note=f"the destination was last staged from {document.get('source')!r}; every file "
                                    "is copied again and files from that source are left in place")
        if document["version"] == MANIFEST_VERSION:
            files = _parallel_lists(document)
            if files is None:
                return cls(source, note=f"{MANIFEST_NAME} is malformed; every file is copied again")
            return cls(source, files)
        files = {}
        recorded = document.get("files")
        for name, value in (recorded.items() if isinstance(recorded, dict) else ()):
            entry = _valid_entry(value)
            if entry is not None:
                files[name] = entry
        return cls(source, files)

    def entry(self, name: str) -> Entry | None:
        """What was recorded for ``name``, or None."""
        return self.files.get(name)

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
        # In the order files were listed and copied (no sort: a manifest of 100,000 files is saved several times).
        sizes, fingerprints, mtimes = (list(column) for column in zip(*self.files.values())) if self.files \
            else ([], [], [])
        document = {"version": MANIFEST_VERSION, "source": self.source, "files": list(self.files), "sizes": sizes,
                    "fingerprints": fingerprints, "staged_mtimes": mtimes}
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
