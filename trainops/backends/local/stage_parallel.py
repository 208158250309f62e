"""Listing a local source in several processes: the top level here, its subtrees split among forked children.

A re-stage of an unchanged tree is one ``stat`` of each source file, one of its copy and a little Python per file;
threads would run that Python one at a time (the GIL), so the subtrees are listed by forked processes instead, each
on its own core. The children only read: they walk their subtrees with the same `LocalSource.list` (every directory
opened relative to its checked parent with ``O_NOFOLLOW``, compared with the (device, inode) listed), ask the same
unchanged check about each file (the manifest and the open destination are inherited, nothing is loaded twice), and
send back what is left to copy, what they refused, the directories they listed and, for a re-stage, the names of the
manifest under their subtrees that they did not see (stale). The copying is done afterwards, in this process.

A child that fails sends its exception back, which is raised here; Ctrl-C or any error here kills the children (they
have written nothing) before it is raised.
"""

from __future__ import annotations

import os
import pickle
import signal
from typing import Any

from trainops.backends.local.stage_sources import LocalSource, Refusal, SourceFile
from trainops.errors import JobFailed


def listing_processes(workers: int, units: int) -> int:
    """How many processes list ``units`` subtrees: one per CPU at most, never more than the workers asked for."""
    return max(1, min(workers, os.cpu_count() or 1, units))


def _child(source: LocalSource, check: Any, group: list[tuple[int, str]], base: int) -> tuple:
    if check is not None:  # count only what this child skips (the parent's own are in its check already)
        check.skipped = check.skipped_bytes = 0
    files, refused = source.list(check, start=group)
    tail = source.directories[base:]
    stale: list[str] = []
    skipped = skipped_bytes = 0
    if check is not None:
        skipped, skipped_bytes = check.skipped, check.skipped_bytes
        # The manifest's names under this child's subtrees that were not listed: gone from the source.
        tops = {prefix.partition("/")[0] for _, prefix in group}
        seen = check.seen
        stale = [name for name in check.files if name.partition("/")[0] in tops and name not in seen]
    return [tuple(item) for item in files], refused, tail, skipped, skipped_bytes, stale


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def _read_all(descriptor: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def list_in_processes(source: LocalSource, check: Any, workers: int
                      ) -> tuple[list[SourceFile], list[Refusal], list[str] | None]:
    """List ``source`` with up to ``workers`` processes; return (files to copy, refusals, stale names or None when
    ``check`` is None). ``check`` is the re-stage's unchanged check (its skip counts are updated here)."""
    deferred: list[tuple[int, str]] = []
    files, refused = source.list(check, deferred=deferred)
    processes = listing_processes(workers, len(deferred))
    if processes < 2:
        more, more_refused = source.list(check, start=deferred)
        stale = None
        if check is not None:
            stale = [name for name in check.files if name not in check.seen] \
                if len(check.seen) < len(check.files) else []
        return files + more, refused + more_refused, stale
    base = len(source.directories)
    groups = [deferred[number::processes] for number in range(processes)]
    children: list[tuple[int, int]] = []
    try:
        for group in groups:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns into the caller
                try:
                    os.close(read_end)
                    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it; the parent reports it
                    try:
                        data = pickle.dumps(("ok", _child(source, check, group, base)), pickle.HIGHEST_PROTOCOL)
                    except BaseException as error:  # noqa: BLE001 - sent to the parent, raised there
                        try:
                            data = pickle.dumps(("error", error), pickle.HIGHEST_PROTOCOL)
                        except Exception:  # noqa: BLE001 - an exception that does not pickle
                            data = pickle.dumps(("error", JobFailed(f"listing the source failed: {error!r}")))
                    _write_all(write_end, data)
                finally:
                    os._exit(0)
            os.close(write_end)
            children.append((pid, read_end))
        results = []
        for pid, read_end in children:
            results.append(pickle.loads(_read_all(read_end)))
    finally:
        for pid, read_end in children:
            os.close(read_end)
            try:
                os.kill(pid, signal.SIGKILL)  # gone already after a normal end; only reads were in flight otherwise
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
    for kind, payload in results:
        if kind == "error":
            raise payload
    stale = None
    if check is not None:
        # The names this process listed (the top level) and the manifest's names outside every child's subtrees.
        tops = {prefix.partition("/")[0] for _, prefix in deferred}
        seen = check.seen
        stale = [name for name in check.files
                 if not ("/" in name and name.partition("/")[0] in tops) and name not in seen]
    make = SourceFile._make
    for _, (child_files, child_refused, tail, skipped, skipped_bytes, child_stale) in results:
        offset = len(source.directories) - base
        if offset:
            tail = [(components, identity, parent + offset if parent >= base else parent)
                    for components, identity, parent in tail]
            child_files = [item[:5] + (item[5] + offset if item[5] >= base else item[5],) + item[6:]
                           for item in child_files]
        source.directories += tail
        files += map(make, child_files)
        refused += child_refused
        if check is not None:
            check.skipped += skipped
            check.skipped_bytes += skipped_bytes
            stale += child_stale
    return files, refused, stale
