"""The copying half of staging: workers that write each file under a temporary name and rename it into place.

The workers are threads here, or forked processes (`trainops.backends.local.stage_copy_processes`, for a local tree
with more than one worker in a process that may fork); both copy with `CopyRun.copy_batch`.

Work is handed out in batches of files that share a source directory and a destination directory, so a worker
opens the two directories once per batch (each relative to its open parent, with ``O_NOFOLLOW``, and checked to be
the directory that was listed or prepared) and then does every file of the batch relative to them: open the source
file, create the temporary file next to its final name, copy in the kernel, rename. Nothing is looked up by a full
path after the check, so a directory swapped for a link mid-copy makes its files fail instead of landing elsewhere.

Temporary files are ``.trainops-stage-<pid>-<worker>.tmp``: one name per worker, reused for every file it copies
(the rename consumes it). Before the first byte is written, the directories that will hold temporary files are listed
in the journal (`trainops.backends.local.stage_journal`), which the next stage reads to remove what a killed one
left behind.

Each worker thread records its results (manifest, report, progress) under one lock once per batch, so the main thread only
waits and saves the manifest now and then; handing every result back to it would cost two thread switches per file.
"""

from __future__ import annotations

import collections
import errno
import os
import threading
import time
from typing import TextIO

from trainops.backends.local.safe_fs import DirectoryCache, UnsafePath
from trainops.backends.local.stage_journal import forget_journal, write_journal
from trainops.backends.local.stage_manifest import StageManifest
from trainops.backends.local.stage_names import temporary_name
from trainops.backends.local.stage_report import Progress, StageReport
from trainops.backends.local.stage_sources import LocalSource, Refusal, S3Source, SourceFile, StagingStopped

#: The manifest is saved at least this often during a long stage, so a killed run keeps most of its progress (and
#: never more often than 20 times what a save takes: a manifest of millions of files is not rewritten constantly).
CHECKPOINT_SECONDS = 5.0
#: Files per batch: big enough that opening its two directories costs little per file, small enough that one huge
#: directory is shared among the workers.
BATCH_FILES = 256
#: A completed copy: (name, listed size, bytes written, fingerprint, modification time given to the copy in ns).
Copied = tuple[str, int, int, "int | str", int]
_TARGET_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def batches(items: list[SourceFile]) -> list[list[SourceFile]]:
    """``items`` grouped by (source directory, destination directory), largest files first in each group, cut into
    batches of at most `BATCH_FILES`; the batches of large files first, so that no big file starts last."""
    groups: dict[tuple[int, str], list[SourceFile]] = collections.defaultdict(list)
    for item in items:
        groups[(item.directory, item.name.rpartition("/")[0])].append(item)
    cut: list[list[SourceFile]] = []
    for group in groups.values():
        group.sort(key=lambda item: item.size, reverse=True)
        cut += [group[start:start + BATCH_FILES] for start in range(0, len(group), BATCH_FILES)]
    cut.sort(key=lambda batch: batch[0].size, reverse=True)
    return cut


def copy_one(source: LocalSource | S3Source, item: SourceFile, temporary: str, final: str, target_directory: int,
             source_directory: int | None, stop: threading.Event) -> tuple[int, int | str, int]:
    """Copy one file to ``temporary`` in the open ``target_directory``, then rename it to ``final`` there; on any
    error the temporary file is removed. Returns what `LocalSource.copy` / `S3Source.copy` return."""
    try:
        target = os.open(temporary, _TARGET_FLAGS, item.mode, dir_fd=target_directory)
    except FileExistsError:  # left by a copy of this worker that failed to remove it: it is ours to replace
        os.unlink(temporary, dir_fd=target_directory)
        target = os.open(temporary, _TARGET_FLAGS, item.mode, dir_fd=target_directory)
    try:
        try:
            result = source.copy(item, target, stop, source_directory)
        finally:
            os.close(target)
        # A rename replaces whatever has the final name (a link planted there included) without following it.
        os.replace(temporary, final, src_dir_fd=target_directory, dst_dir_fd=target_directory)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=target_directory)
        except OSError:
            pass
        raise
    return result


class CopyRun:
    """One parallel copy of a list of files into the open destination ``root``, recording into ``manifest`` and
    ``report``; ``prepared`` holds the (device, inode) of every destination directory made for it."""

    def __init__(self, source: LocalSource | S3Source, work: list[list[SourceFile]], root: int,
                 prepared: dict[str, tuple[int, int]], manifest: StageManifest, report: StageReport, bar: Progress):
        self.source, self.root, self.prepared = source, root, prepared
        self.manifest, self.report, self.bar = manifest, report, bar
        self.batches = work
        self.pending: collections.deque[list[SourceFile]] = collections.deque()  # the threads' queue (see `run`)
        self.lock = threading.Lock()  # guards manifest, report and bar
        self.stop = threading.Event()
        self.error: BaseException | None = None  # the first unexpected error, raised again by `run`
        self.process = os.getpid()
        self.inline = False  # one worker runs in the calling thread, which then also saves the checkpoints
        self.last_checkpoint = time.monotonic()
        self.checkpoint_every = CHECKPOINT_SECONDS
        #: Where a batch's results go: `keep_results` here; a copying process sends them to its parent instead.
        self.on_results = self.keep_results
        #: False when copying processes were killed and their temporary files could not all be removed: the
        #: journal then stays for the next stage.
        self.leftovers_removed = True

    def _target_directory(self, cache: DirectoryCache, relative: str) -> int:
        try:
            descriptor = cache.open(relative)
        except UnsafePath as error:
            raise UnsafePath(errno.ELOOP, f"the destination directory {relative!r} became a symbolic link (or a "
                                          "file) during the stage; nothing is written through it") from error
        details = os.fstat(descriptor)
        if (details.st_dev, details.st_ino) != self.prepared.get(relative):
            raise UnsafePath(errno.ESTALE, f"the destination directory {relative!r} was replaced during the stage; "
                                           "nothing is written into the new one")
        return descriptor

    def work(self, number: int = 0) -> None:
        """A worker: take the next batch until none are left or the run is stopping."""
        temporary = temporary_name(number, self.process)
        targets = DirectoryCache(self.root, capacity=8)
        sources = self.source.directory_opener() if isinstance(self.source, LocalSource) else None
        try:
            while not self.stop.is_set():
                try:
                    batch = self.pending.popleft()
                except IndexError:
                    return
                if not self.copy_batch(batch, temporary, targets, sources):
                    return
        finally:
            targets.close()
            if sources is not None:
                sources.close()

    def copy_batch(self, batch: list[SourceFile], temporary: str, targets: DirectoryCache, sources) -> bool:
        """Copy one batch; record what completed (also when stopped part-way). False when the run must stop."""
        done: list[Copied] = []
        failed: list[Refusal] = []
        failed_bytes = 0
        first = batch[0]
        try:
            try:
                target_directory = self._target_directory(targets, first.name.rpartition("/")[0])
                source_directory = sources.open(first.directory) if sources is not None else None
            except self.source.failure_types as error:
                reason = describe(error)
                failed = [Refusal(item.name, reason) for item in batch]
                failed_bytes = sum(item.size for item in batch)
                return True
            for item in batch:
                if self.stop.is_set():
                    return False
                final = item.name.rpartition("/")[2]
                try:
                    outcome = copy_one(self.source, item, temporary, final, target_directory, source_directory,
                                       self.stop)
                except StagingStopped:
                    return False
                except self.source.failure_types as error:
                    failed.append(Refusal(item.name, describe(error)))
                    failed_bytes += item.size
                    continue
                except BaseException as error:  # noqa: BLE001 - anything else stops the whole run; `run` raises it
                    with self.lock:
                        self.error = self.error or error
                    self.stop.set()
                    return False
                done.append((item.name, item.size, *outcome))
            return True
        finally:
            self.on_results(done, failed, failed_bytes)

    def keep_results(self, done: list[Copied], failed: list[Refusal], failed_bytes: int) -> None:
        """Record a batch's results: the copies (in the manifest, as soon as they have their final names), the
        failures, the progress."""
        with self.lock:
            record = self.manifest.record
            copied = listed = 0
            for name, size, written, fingerprint, staged_mtime_ns in done:
                record(name, written, fingerprint, staged_mtime_ns)
                copied += written
                listed += size
            self.report.files_copied += len(done)
            self.report.bytes_copied += copied
            self.report.failed += failed
            self.bar.advance_many(len(done) + len(failed), listed + failed_bytes)
        if self.inline and self.checkpoint_due():
            self.checkpoint()

    def checkpoint_due(self) -> bool:
        return time.monotonic() - self.last_checkpoint >= self.checkpoint_every

    def checkpoint(self) -> None:
        """Save the manifest of what is complete so far."""
        with self.lock:
            if self.manifest.changed:
                started = time.monotonic()
                self.manifest.save(self.root)
                self.checkpoint_every = max(CHECKPOINT_SECONDS, 20 * (time.monotonic() - started))
        self.last_checkpoint = time.monotonic()

    def run(self, workers: int, journal: list[str], processes: int = 0) -> None:
        """Copy everything with ``processes`` forked processes when it is 2 or more
        (`trainops.backends.local.stage_copy_processes`), else with ``workers`` threads (none for one worker); raise
        the first unexpected error."""
        write_journal(self.root, journal)
        threads: list[threading.Thread] = []
        try:
            if processes >= 2:
                from trainops.backends.local.stage_copy_processes import copy_in_processes

                copy_in_processes(self, processes)
            elif workers == 1:
                self.inline = True
                self.pending.extend(self.batches)
                self.work()  # no thread to start or switch to
            else:
                self.pending.extend(self.batches)  # popleft is atomic: workers share it without a lock
                threads = [threading.Thread(target=self.work, args=(number,), name=f"trainops-stage-{number}",
                                            daemon=True)
                           for number in range(min(workers, len(self.pending)))]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    while thread.is_alive():
                        thread.join(timeout=CHECKPOINT_SECONDS)
                        if self.checkpoint_due():
                            self.checkpoint()
        finally:
            # Normal end, an unexpected error or Ctrl-C: stop the copies in flight, keep what was completed.
            self.stop.set()
            for thread in threads:
                # Ctrl-C can land while the threads are being started: join only those that run. One that has not
                # begun yet finds the stop flag set and ends before touching anything.
                if thread.is_alive():
                    thread.join()
            self.bar.close()
            self.checkpoint()
            # Every worker removed its own temporary file on the way out (and the files of killed copying processes
            # were removed for them), so the journal has nothing left to name.
            if self.leftovers_removed:
                forget_journal(self.root)
        if self.error is not None:
            raise self.error


def describe(error: BaseException) -> str:
    """A short text for a failed file: the OS error's message, or the exception's type and text."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}"


def copy_all(source: LocalSource | S3Source, items: list[SourceFile], root: int, prepared: dict[str, tuple[int, int]],
             manifest: StageManifest, report: StageReport, workers: int, stream: TextIO, show_progress: bool) -> None:
    """Copy ``items`` (their directories already exist, as ``prepared``) into the open destination ``root`` with
    ``workers`` threads or, for a local tree in a process that may fork, processes (one per CPU at most), recording each copy in the manifest as soon as it has its final name; save the manifest at
    the end, also when interrupted."""
    work = batches(items)
    bar = Progress(len(items), sum(item.size for item in items), stream, show_progress)
    journal = sorted({item.name.rpartition("/")[0] for item in items})
    processes = 0
    if isinstance(source, LocalSource) and workers > 1:
        # A local copy is system calls plus a little Python per file: threads would take turns at the GIL (and two
        # threads in one directory wait on its lock), so it is split among processes when this one may fork.
        from trainops.backends.local.stage_parallel import may_fork, process_count

        if may_fork(workers):
            processes = process_count(workers, len(work))
    report.copied_with = "processes" if processes >= 2 else "threads" if workers > 1 else "one worker"
    CopyRun(source, work, root, prepared, manifest, report, bar).run(workers, journal, processes)

