"""The staging journal: which directories may hold temporary files, so what a killed stage left is found and removed.

Before the first byte is copied, the directories that will receive temporary files
(``.trainops-stage-<pid>-<number>.tmp``) are written to ``.trainops-stage-journal.json`` at the top of the
destination. A stage that ends normally removes it; one that was killed (or whose copying processes were) leaves it,
and the next stage, under the destination's lock, deletes the temporary files in the directories it names before it
starts.
"""

from __future__ import annotations

import json
import os

from trainops.backends.local.safe_fs import DirectoryCache
from trainops.backends.local.stage_manifest import read_regular_file, write_new_file
from trainops.backends.local.stage_names import JOURNAL_NAME, is_temporary_name, refusal_reason


def write_journal(root: int, directories: list[str]) -> None:
    """Record ``directories`` (relative to the open destination ``root``) as about to hold temporary files."""
    write_new_file(JOURNAL_NAME, root, json.dumps(directories))


def forget_journal(root: int) -> None:
    """Remove the journal: no temporary file is left."""
    try:
        os.unlink(JOURNAL_NAME, dir_fd=root)
    except FileNotFoundError:
        pass


def remove_leftovers(root: int) -> int:
    """Delete the temporary files a killed stage left (in the directories its journal names, and at the top), then
    the journal; return how many files there were. Call it under the destination's lock, so no stage is writing
    them."""
    directories = [""]
    raw = read_regular_file(JOURNAL_NAME, root)
    if raw is not None:
        try:
            listed = json.loads(raw)
        except ValueError:
            listed = []
        # The journal is a file in the destination anyone could edit: its names get the same checks as the source's.
        directories += [name for name in (listed if isinstance(listed, list) else [])
                        if isinstance(name, str) and name and refusal_reason(name) is None]
    removed = 0
    cache = DirectoryCache(root)
    try:
        for relative in directories:
            try:
                directory = cache.open(relative)  # never through a link: such a directory is skipped
                with os.scandir(directory) as listing:
                    names = [entry.name for entry in listing
                             if is_temporary_name(entry.name) and not entry.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for name in names:
                try:
                    os.unlink(name, dir_fd=directory)
                    removed += 1
                except FileNotFoundError:
                    pass
    finally:
        cache.close()
    forget_journal(root)
    return removed
