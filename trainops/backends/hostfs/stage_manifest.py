"""The manifest of a staged destination, ``.trainops-stage.json``: for each file staging wrote there, its size, its
fingerprint at the source (modification time in ns for a local file, ETag for an S3 object) and the modification
time given to the copy. A re-stage skips a file whose source still matches and whose copy is still what was
written; ``--delete`` removes only names listed here. The manifest sits in the destination, where anyone with write
access could edit it: it is read without following a link, every entry is checked, and anything unexpected means
"copy everything again", never "trust it".
"""

from __future__ import annotations

import json
import os

from trainops.backends.hostfs.safe_fs import UnsafeFile, read_bounded
from trainops.backends.hostfs.stage_names import MANIFEST_NAME, temporary_name

MANIFEST_VERSION = 4
#: The largest manifest read back (about 100 bytes a file: a million files fit); a larger one is not trusted.
MANIFEST_LIMIT_BYTES = 256 * 1024 * 1024
Entry = tuple[int, "int | str", int]  # (size, fingerprint, staged mtime in ns); read back as a list


#: The types an entry may have (JSON gives lists; a string or an object of three would unpack to strings).
_ENTRY_TYPES = {(int, int, int), (int, str, int)}


def _valid(entries: list) -> bool:
    try:  # one pass in C-speed comprehension: a 100,000-file manifest is checked in a few milliseconds
        return {(type(size), type(fingerprint), type(modified)) for size, fingerprint, modified in entries} \
            <= _ENTRY_TYPES and all(type(entry) is list for entry in entries)
    except (TypeError, ValueError):
        return False


class StageManifest:
    """The files staged into one destination from one source (``files``: name -> `Entry`)."""

    def __init__(self, source: str, files: dict[str, Entry] | None = None, note: str | None = None):
        self.source = source
        self.files: dict[str, Entry] = files if files is not None else {}
        self.note = note  # why a manifest on disk was not used (for the report), or None

    def __len__(self) -> int:
        return len(self.files)

    @classmethod
    def load(cls, destination: int, source: str) -> StageManifest:
        """The manifest in the open ``destination`` when it was written for ``source``; else an empty one with a
        note saying why (missing: no note)."""
        try:  # bounded, a regular file only: a FIFO planted under the manifest's name must not hang staging
            raw = read_bounded(MANIFEST_NAME, MANIFEST_LIMIT_BYTES, dir_fd=destination, whole=True)
        except UnsafeFile as error:
            return cls(source, note=f"{MANIFEST_NAME} {error.strerror}; every file is copied again")
        except OSError:
            return cls(source)
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError):
            return cls(source, note=f"{MANIFEST_NAME} is not valid JSON; every file is copied again")
        if not isinstance(document, dict) or document.get("version") != MANIFEST_VERSION:
            return cls(source, note=f"{MANIFEST_NAME} has an unknown format (an older trainops writes other "
                                    "versions); every file is copied again")
        if document.get("source") != source:
            return cls(source, note=f"the destination was last staged from {document.get('source')!r}; every file "
                                    "is copied again and files from that source are left in place")
        files = document.get("files")
        if not isinstance(files, dict) or not _valid(list(files.values())):
            return cls(source, note=f"{MANIFEST_NAME} is malformed; every file is copied again")
        return cls(source, files)

    def save(self, destination: int) -> None:
        """Write the manifest into the open destination atomically: a new temporary file (``O_EXCL``, never through
        a link), then a rename, which replaces a link planted under the manifest's name instead of following it."""
        # ensure_ascii: non-UTF-8 local names (surrogate escapes) survive the round trip as \\udcXX escapes.
        text = json.dumps({"version": MANIFEST_VERSION, "source": self.source, "files": self.files},
                          separators=(",", ":"))
        name = temporary_name(0)
        try:
            os.unlink(name, dir_fd=destination)
        except FileNotFoundError:
            pass
        descriptor = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=destination)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(text)
        os.replace(name, MANIFEST_NAME, src_dir_fd=destination, dst_dir_fd=destination)
