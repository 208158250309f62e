"""Listing a local source in several processes: the levels above the subtrees here, the subtrees split among forked
children.

A re-stage of an unchanged tree is one ``stat`` of each source file, one of its copy and a little Python per file;
threads would run that Python one at a time (the GIL), so the subtrees are listed by forked processes instead, each
on its own core. The subtrees are the top-level directories, or the directories a level or two below when there are
too few at the top for every process to get one (``data/train/part-*``); each process asks for the next subtree when
it is done with one, so none idles while another has a queue. The children only read: they walk their subtrees with
the same `LocalSource.list` (every directory opened relative to its checked parent with ``O_NOFOLLOW``, compared
with the (device, inode) listed), ask the same unchanged check about each file (the manifest's columns and the open
destination are inherited; each child makes a table of its own part of the manifest), and send back what is left to
copy, what they refused, the directories they listed and, for a re-stage, how many names of the manifest they saw.
Only when the names seen by all the processes do not cover the manifest does each child send the manifest's names
under its subtrees that it did not see (stale), when asked: an unchanged re-stage walks no manifest. The copying is
done afterwards (`stage_copy_processes`).

A child that fails sends its exception back, which is raised here; Ctrl-C or any error here kills the children (they
have written nothing) before it is raised.
"""

from __future__ import annotations

import collections
import gc
import os
import pickle
import select
import signal
import threading
from collections.abc import Callable
from typing import Any

from trainops.backends.local.stage_sources import LocalSource, Refusal, SourceFile
from trainops.errors import JobFailed


def may_fork(workers: int) -> bool:
    """Whether staging with ``workers`` may fork processes: more than one worker and CPU, and no other thread in
    this process (a thread holding a lock at the fork would leave it held in the child: an Airflow worker or a
    notebook with threads stages with threads instead)."""
    return workers > 1 and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def process_count(workers: int, units: int) -> int:
    """How many processes share ``units`` pieces of work (subtrees to list, batches to copy): one per CPU at most,
    never more than the workers asked for."""
    return max(1, min(workers, os.cpu_count() or 1, units))


#: The subtrees handed to the listing processes are directories this many levels down at most: a tree with fewer
#: top-level directories than processes (``data/train/...``) is listed a level or two deeper here first, so that
#: every process gets a subtree. (Going deeper only when there are too few: what this process lists, the children
#: do not, and a level may hold the files themselves.)
DEEPEST_SPLIT = 3


def _is_inside(name: str, directories: set[str]) -> bool:
    """Whether ``name`` is inside one of ``directories`` (at any depth)."""
    while "/" in name:
        name = name.rpartition("/")[0]
        if name in directories:
            return True
    return False


def _child(source: LocalSource, check: Any, base: int, next_subtree: Callable[[], tuple[int, str] | None]) -> tuple:
    """List the subtrees the parent hands out, one at a time, until it has none left (a process that got large
    subtrees takes fewer: no process idles while another still has a queue of its own)."""
    if check is not None:  # count only what this child skips (the parent's own are in its check already)
        check.skipped = check.skipped_bytes = 0
        seen_before = len(check.seen)
        # Only the entries under this child's subtrees: ranges of the manifest's sorted names, made a table here,
        # in parallel with the other children.
        check.part = {}
        check.lookup = check.part.get
    files: list[SourceFile] = []
    refused: list[Refusal] = []
    while (subtree := next_subtree()) is not None:
        if check is not None:
            check.part.update(check.manifest.part([subtree[1][:-1]]))
        more, more_refused = source.list(check, start=[subtree])
        files += more
        refused += more_refused
    tail = source.directories[base:]
    skipped = skipped_bytes = seen = 0
    if check is not None:
        skipped, skipped_bytes = check.skipped, check.skipped_bytes
        seen = len(check.seen) - seen_before  # the subtrees of the processes never share a name
    return [tuple(item) for item in files], refused, tail, skipped, skipped_bytes, seen


def _stale_under(check: Any) -> list[str]:
    """The manifest's names under this child's subtrees that were not listed: gone from the source."""
    seen = check.seen
    return [name for name in check.part if name not in seen]


def send_message(descriptor: int, message: Any) -> None:
    """Write ``message`` (pickled, after its length) to the pipe ``descriptor``."""
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(descriptor, view):]


def read_exactly(descriptor: int, size: int, who: str = "a listing process") -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            raise JobFailed(f"{who} ended without reporting; stage again")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive_message(descriptor: int, who: str = "a listing process") -> Any:
    """One message `send_message` wrote; raises `JobFailed` naming ``who`` when the writer ended first."""
    size = int.from_bytes(read_exactly(descriptor, 8, who), "little")
    return pickle.loads(read_exactly(descriptor, size, who))


def _run_child(source: LocalSource, check: Any, deferred: list[tuple[int, str]], base: int, write_end: int,
               reply_end: int) -> None:
    """A forked child: ask for subtrees and list them, send the result; for a re-stage, send the stale names under
    its subtrees when the parent asks for them (only when the names seen by all the processes do not cover the
    manifest)."""

    def next_subtree() -> tuple[int, str] | None:
        send_message(write_end, ("next",))
        index = receive_message(reply_end, "the stage")
        return None if index is None else deferred[index]

    try:
        message = ("ok", _child(source, check, base, next_subtree))
    except BaseException as error:  # noqa: BLE001 - sent to the parent, raised there
        message = ("error", error)
    send_outcome(write_end, message, "listing the source")
    if message[0] == "ok" and check is not None and receive_message(reply_end, "the stage") == "stale":
        send_message(write_end, _stale_under(check))


def _results(children: list[tuple[int, int, int]], count: int) -> list[tuple]:
    """Hand out the subtrees ``0 .. count - 1`` to the children that ask, in order, until each has sent its
    result; return the results in the children's order. Raises a child's error as soon as it arrives."""
    queue = collections.deque(range(count))
    replies = {read_end: reply_write for _, read_end, reply_write in children}
    results: dict[int, tuple] = {}
    while len(results) < len(children):
        for read_end in select.select([end for end in replies if end not in results], [], [])[0]:
            message = receive_message(read_end)
            if message[0] == "next":
                send_message(replies[read_end], queue.popleft() if queue else None)
            elif message[0] == "error":
                raise message[1]
            else:
                results[read_end] = message
    return [results[read_end] for _, read_end, _ in children]


def freeze_for_fork() -> bool:
    """Move everything built so far (a manifest's 100,000 entries) out of the collector's reach before forking:
    a collection in a child would otherwise walk it all, writing to every object (copying the pages the child shares
    with this process); the children hold no cycles and do not collect at all. Returns whether this call froze
    (then the caller unfreezes after its children): a caller that froze its own objects (a server that forks
    workers) keeps them frozen."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def fork_worker(what: str, inherited: list[int], on_interrupt: Any, work: Callable[[int, int], None]
                ) -> tuple[int, int, int]:
    """Fork a child that runs ``work(results, replies)`` (the write end of a pipe to this process and the read end of
    one from it) and exits; return (pid, read end of its results, write end of the replies to it).

    In the child: SIGINT set to ``on_interrupt`` first, then no cyclic collection, the descriptors ``inherited``
    closed (this process's ends of the earlier children's pipes: holding them would keep those children waiting for
    a reply if this process died), and SIGKILL asked for when this process dies (a child holds the destination's lock
    through the inherited descriptor; an orphan must not). A failed fork (a process limit) closes both pipes and
    raises `JobFailed` naming ``what``.
    """
    from trainops.runtime.processes import parent_death_signal_setter

    on_parent_death = parent_death_signal_setter(signal.SIGKILL)  # looked up here: the child only calls it
    parent = os.getpid()
    results_read, results_write = os.pipe()
    replies_read, replies_write = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        for descriptor in (results_read, results_write, replies_read, replies_write):
            os.close(descriptor)
        raise JobFailed(f"could not start {what} ({error.strerror}); stage with --workers 1") from error
    if pid == 0:  # the child: never returns into the caller
        try:
            signal.signal(signal.SIGINT, on_interrupt)
            gc.disable()
            for descriptor in (*inherited, results_read, replies_write):
                os.close(descriptor)
            if on_parent_death is not None:
                on_parent_death()
            if os.getppid() == parent:  # else the parent died before the death signal was asked for
                work(results_write, replies_read)
        finally:
            os._exit(0)
    os.close(results_write)
    os.close(replies_read)
    return pid, results_read, replies_write


def send_outcome(descriptor: int, message: tuple, what: str) -> None:
    """Send a child's last message; one holding an error that does not pickle is sent as a `JobFailed` quoting it."""
    try:
        send_message(descriptor, message)
    except Exception:  # noqa: BLE001 - an exception that does not pickle
        detail = repr(message[-1])[:300] if message[0] == "error" else "its result could not be sent"
        send_message(descriptor, ("error", JobFailed(f"{what} failed: {detail}")))


def list_in_processes(source: LocalSource, check: Any, workers: int
                      ) -> tuple[list[SourceFile], list[Refusal], list[str] | None]:
    """List ``source`` with up to ``workers`` processes; return (files to copy, refusals, stale names or None when
    ``check`` is None). ``check`` is the re-stage's unchanged check (its skip counts are updated here)."""
    deferred: list[tuple[int, str]] = []
    if check is not None:
        # The top level's few files are looked up one by one (a binary search in the sorted names): no table of the
        # whole manifest is built here; each child builds one of its own part.
        check.lookup = check.manifest.entry
    files, refused = source.list(check, deferred=deferred)
    wanted = process_count(workers, workers)
    for _ in range(DEEPEST_SPLIT - 1):
        if not 0 < len(deferred) < wanted:
            break
        deeper: list[tuple[int, str]] = []
        more, more_refused = source.list(check, start=deferred, deferred=deeper)
        files += more
        refused += more_refused
        deferred = deeper
    processes = process_count(workers, len(deferred))
    if processes < 2:
        if check is not None:
            check.lookup = None  # the whole tree here: the manifest's full table beats a search per file
        more, more_refused = source.list(check, start=deferred)
        return files + more, refused + more_refused, None  # the caller finds stale names itself
    base = len(source.directories)
    children: list[tuple[int, int, int]] = []  # (pid, read end of its results, write end of the parent's reply)
    stale: list[str] | None = None
    froze = freeze_for_fork()
    try:
        for _ in range(processes):
            # Ctrl-C ends a listing process (it has written nothing); the parent reports it.
            children.append(fork_worker(
                "a listing process", [end for _, read_end, reply_write in children for end in (read_end, reply_write)],
                signal.SIG_DFL, lambda results, replies: _run_child(source, check, deferred, base, results, replies)))
        results = _results(children, len(deferred))
        if check is not None:
            # Every name of the manifest was seen by one process (the usual re-stage): nothing is stale, and no
            # process walks the manifest to find out.
            seen = len(check.seen) + sum(payload[5] for _, payload in results)
            wanted = "stale" if seen < len(check.manifest) else "none"
            for _, _, reply_write in children:
                send_message(reply_write, wanted)
            stale = []
            if wanted == "stale":
                for _, read_end, _ in children:
                    stale += receive_message(read_end)
                # The names this process listed (the levels above the subtrees) and the manifest's names outside
                # every child's subtrees.
                subtrees = {prefix[:-1] for _, prefix in deferred}
                listed = check.seen
                stale += [name for name in check.manifest.names()
                          if name not in listed and not _is_inside(name, subtrees)]
    finally:
        for pid, read_end, reply_write in children:
            os.close(read_end)
            os.close(reply_write)
            try:
                os.kill(pid, signal.SIGKILL)  # gone already after a normal end; only reads were in flight otherwise
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        if froze:
            gc.unfreeze()
    make = SourceFile._make
    for _, (child_files, child_refused, tail, skipped, skipped_bytes, _) in results:
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
    return files, refused, stale
