"""Copying a local tree with forked processes, each in a directory of its own.

Copying a small file is a few system calls and a little Python. With threads the Python runs one thread at a time
(the GIL is handed over at every system call), and two threads creating files in one directory wait on that
directory's lock: on 2 cores, two threads took longer than one. Processes in different directories do neither
(measured in bench/staging.py; the figures are in its README).

The parent hands out the work: a *unit* is one batch of `stage_copy.batches` (files of one source directory going
into one destination directory), or several batches of small directories taken together so that a tree of many tiny
directories is not one round trip per file. A process keeps to its directory while it has batches left, then takes
one no other process has started; only when none is left does it join the directory with the most batches to go.

Each process copies with the same code as a thread (`CopyRun.copy_batch`: checked directories, temporary name,
rename), sends the parent what it copied and what failed after each batch, and asks for its next unit. The parent
records those results (manifest, report, progress) and saves the manifest every few seconds, as with threads. After
an error, Ctrl-C or a process that ended without reporting, the parent stops the others with SIGTERM: each finishes
or removes the file in hand and reports what it completed (so the manifest keeps every copy that has its final
name, as with threads); after `STOP_SECONDS` the rest are killed, and the parent removes their temporary files (it
knows which unit each one was copying, so which directories to look in). A process dies with the parent
(parent-death signal); what it left then is in the journal for the next stage.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import select
import signal
import time

from trainops.backends.local.safe_fs import DirectoryCache
from trainops.backends.local.stage_copy import BATCH_FILES, CHECKPOINT_SECONDS, CopyRun
from trainops.backends.local.stage_names import temporary_name
from trainops.backends.local.stage_parallel import (
    fork_worker,
    freeze_for_fork,
    receive_message,
    send_message,
    send_outcome,
)
from trainops.errors import JobFailed

_WHO = "a copying process"
#: How long stopped processes may take to report what they completed before they are killed.
STOP_SECONDS = 2.0


class Units:
    """Hands out units of batch indices, one destination directory per process where possible."""

    def __init__(self, batches: list[list]):
        self.batches = batches
        self.left: dict[str, collections.deque[int]] = {}
        for index, batch in enumerate(batches):  # batches come large files first: so do the directories
            self.left.setdefault(batch[0].name.rpartition("/")[0], collections.deque()).append(index)
        self.unstarted = collections.deque(self.left)
        self.holding: dict[int, str] = {}  # process number -> the directory it works in

    def next_for(self, number: int) -> list[int]:
        """The next unit for process ``number`` (empty when all work is handed out)."""
        directory = self.holding.pop(number, None)
        if directory is not None and self.left[directory]:
            self.holding[number] = directory
            return [self.left[directory].popleft()]
        unit: list[int] = []
        files = 0
        while self.unstarted and files < BATCH_FILES:
            directory = self.unstarted.popleft()
            index = self.left[directory].popleft()
            unit.append(index)
            files += len(self.batches[index])
            if self.left[directory]:  # a directory with more to copy: keep to it
                break
        if unit:
            self.holding[number] = directory
            return unit
        # Every directory is started: help in the one with the most batches left (sharing its lock beats idling).
        busiest = max(self.holding.values(), key=lambda name: len(self.left[name]), default=None)
        if busiest is None or not self.left[busiest]:
            return []
        self.holding[number] = busiest
        return [self.left[busiest].popleft()]


def _copy_units(run: CopyRun, results: int, requests: int) -> None:
    """A copying process: ask for a unit, copy it, report each batch as soon as it is done; end on an empty unit,
    on an error (reported), or when the parent stops the stage (SIGTERM: the file in hand is finished or removed,
    what was completed is reported)."""
    run.on_results = lambda done, failed, failed_bytes: send_message(results, ("batch", done, failed, failed_bytes))
    signal.signal(signal.SIGTERM, lambda *_: run.stop.set())
    temporary = temporary_name(0, os.getpid())
    targets = DirectoryCache(run.root, capacity=8)
    sources = run.source.directory_opener()
    try:
        while not run.stop.is_set():
            send_message(results, ("next",))
            unit = receive_message(requests, "the stage")
            for index in unit:
                if not run.copy_batch(run.batches[index], temporary, targets, sources):
                    break
            if not unit or run.error is not None:
                break
        if run.error is not None:
            send_outcome(results, ("error", run.error), "copying")
    except BaseException as error:  # noqa: BLE001 - sent to the parent (which ignores it once it is stopping)
        send_outcome(results, ("error", error), "copying")
    finally:
        targets.close()
        sources.close()


def _start(run: CopyRun, number: int, children: dict[int, list]) -> None:
    """Fork copying process ``number``; record it in ``children`` (by the read end of its results)."""
    # SIGINT ignored: Ctrl-C reaches the whole process group, and the parent stops its processes (SIGTERM), which
    # report what they completed; dying at once would lose that and end the parent's wait with a lesser error.
    pid, results, requests = fork_worker(_WHO, [end for read_end, child in children.items()
                                                for end in (read_end, child[1])], signal.SIG_IGN,
                                         lambda results, requests: _copy_units(run, results, requests))
    children[results] = [pid, requests, number, []]


def _stop(run: CopyRun, children: dict[int, list]) -> bool:
    """Stop the processes still running (an error, Ctrl-C): SIGTERM, record what they report for up to
    `STOP_SECONDS`, then SIGKILL and reap them, and remove the temporary files they may have left (in the
    directories of their units). False when one of those could not be removed (the journal then stays)."""
    for pid, requests, _, _ in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        os.close(requests)  # a process waiting for a unit reads the end
    reporting = set(children)
    deadline = time.monotonic() + STOP_SECONDS
    while reporting and time.monotonic() < deadline:
        for descriptor in select.select(list(reporting), [], [], max(0.0, deadline - time.monotonic()))[0]:
            try:
                message = receive_message(descriptor, _WHO)
            except JobFailed:  # it ended
                reporting.discard(descriptor)
                continue
            if message[0] == "batch":
                run.keep_results(*message[1:])
    cache = DirectoryCache(run.root, capacity=8)
    removed = True
    try:
        for descriptor, (pid, _, _, unit) in children.items():
            os.close(descriptor)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            name = temporary_name(0, pid)
            for directory in {run.batches[index][0].name.rpartition("/")[0] for index in unit}:
                try:
                    os.unlink(name, dir_fd=cache.open(directory))
                except FileNotFoundError:
                    pass
                except OSError:
                    removed = False
    finally:
        cache.close()
        children.clear()
    return removed


def copy_in_processes(run: CopyRun, processes: int) -> None:
    """Copy ``run.batches`` with ``processes`` forked processes; the results are recorded in ``run``. Raises the
    first unexpected error of a process (or `JobFailed` when one ended without reporting)."""
    units = Units(run.batches)
    children: dict[int, list] = {}  # read end of results -> [pid, write end of requests, number, current unit]
    froze = freeze_for_fork()
    try:
        for number in range(processes):
            _start(run, number, children)
        while children:
            for descriptor in select.select(list(children), [], [], CHECKPOINT_SECONDS)[0]:
                child = children[descriptor]
                message = receive_message(descriptor, _WHO)
                if message[0] == "batch":
                    run.keep_results(*message[1:])
                elif message[0] == "error":
                    raise message[1]
                else:  # "next": it finished its unit
                    child[3] = units.next_for(child[2])
                    send_message(child[1], child[3])
                    if not child[3]:
                        os.waitpid(child[0], 0)
                        os.close(child[1])
                        os.close(descriptor)
                        del children[descriptor]
            if run.checkpoint_due():
                run.checkpoint()
    finally:
        if children:
            run.leftovers_removed = _stop(run, children)
        if froze:
            gc.unfreeze()
