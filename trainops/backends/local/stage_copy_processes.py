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
rename) and, after each unit, sends the parent what it copied and what failed, then waits for its next unit. The
parent records those results (manifest, report, progress), saves the manifest every few seconds as with threads,
and after an error, Ctrl-C or a process that ended without reporting kills every process and removes their
temporary files (it knows which unit each one was copying, so which directories to look in). A process dies with
the parent (parent-death signal); what it left then is in the journal for the next stage.
"""

from __future__ import annotations

import collections
import gc
import os
import select
import signal

from trainops.backends.local.safe_fs import DirectoryCache
from trainops.backends.local.stage_copy import BATCH_FILES, CHECKPOINT_SECONDS, CopyRun
from trainops.backends.local.stage_names import temporary_name
from trainops.backends.local.stage_parallel import fork_worker, freeze_for_fork, receive_message, send_message
from trainops.errors import JobFailed

_WHO = "a copying process"


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
    """A copying process: copy each unit the parent sends, answer with what was copied and what failed."""
    copied: list[tuple] = []
    failed: list = []
    failed_bytes = [0]

    def keep(done, refused, refused_bytes) -> None:
        copied.extend((item.name, *outcome) for item, *outcome in done)
        failed.extend(refused)
        failed_bytes[0] += refused_bytes

    run.on_results = keep
    temporary = temporary_name(0, os.getpid())
    targets = DirectoryCache(run.root, capacity=8)
    sources = run.source.directory_opener()
    unit: list[int] = []
    while True:
        error = None
        for index in unit:
            if not run.copy_batch(run.batches[index], temporary, targets, sources):
                error = run.error or JobFailed("a copying process was stopped")
                break
        message = (copied, failed, failed_bytes[0], error)
        try:
            send_message(results, message)
        except Exception:  # noqa: BLE001 - an error that does not pickle: its text still reaches the parent
            send_message(results, (copied, failed, failed_bytes[0], JobFailed(f"copying failed: {error!r:.300}")))
        if error is not None:
            return
        copied, failed, failed_bytes[0] = [], [], 0
        unit = receive_message(requests, "the stage")
        if not unit:
            return


def _start(run: CopyRun, number: int, children: dict[int, list], parent: int, on_death) -> None:
    """Fork copying process ``number``; record it in ``children`` (by the read end of its results) right away."""

    def work(results: int, requests: int) -> None:
        if on_death is not None:
            on_death()
        if os.getppid() == parent:  # else the parent died before the death signal was asked for
            _copy_units(run, results, requests)

    # Ctrl-C reaches the whole process group: the parent stops the stage and kills its processes, which meanwhile
    # finish what they are copying (dying here would end the parent's wait with a lesser error).
    pid, results, requests = fork_worker(_WHO, [end for read_end, child in children.items()
                                                for end in (read_end, child[1])], signal.SIG_IGN, work)
    children[results] = [pid, requests, number, []]


def _record(run: CopyRun, unit: list[int], copied: list[tuple], failed: list, failed_bytes: int) -> None:
    """Record a unit's results as a thread would (names back to the listed files)."""
    by_name = {item.name: item for index in unit for item in run.batches[index]}
    run.keep_results([(by_name[name], *outcome) for name, *outcome in copied], failed, failed_bytes)


def _remove_temporary_files(run: CopyRun, killed: list[tuple[int, list[int]]]) -> bool:
    """Remove what killed processes may have left: each one's temporary name, in the directories of its unit.
    False when one could not be removed (the journal then stays for the next stage)."""
    cache = DirectoryCache(run.root, capacity=8)
    removed = True
    try:
        for pid, unit in killed:
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
    return removed


def copy_in_processes(run: CopyRun, processes: int) -> None:
    """Copy ``run.batches`` with ``processes`` forked processes; the results are recorded in ``run``. Raises the
    first unexpected error of a process (or `JobFailed` when one ended without reporting)."""
    from trainops.runtime.processes import parent_death_signal_setter

    units = Units(run.batches)
    children: dict[int, list] = {}  # read end of results -> [pid, write end of requests, number, current unit]
    on_death = parent_death_signal_setter(signal.SIGKILL)
    froze = freeze_for_fork()
    try:
        for number in range(processes):
            _start(run, number, children, os.getpid(), on_death)
        while children:
            ready = select.select(list(children), [], [], CHECKPOINT_SECONDS)[0]
            for descriptor in ready:
                child = children[descriptor]
                copied, failed, failed_bytes, error = receive_message(descriptor, _WHO)
                _record(run, child[3], copied, failed, failed_bytes)
                if error is not None:
                    raise error
                child[3] = units.next_for(child[2])
                send_message(child[1], child[3])
                if not child[3]:
                    del children[descriptor]
                    os.close(descriptor)
                    os.close(child[1])
                    os.waitpid(child[0], 0)
            if run.checkpoint_due():
                run.checkpoint()
    finally:
        killed = []
        for descriptor, (pid, requests, _, unit) in children.items():
            os.close(descriptor)
            os.close(requests)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            killed.append((pid, unit))
        if froze:
            gc.unfreeze()
        if killed:
            run.leftovers_removed = _remove_temporary_files(run, killed)
