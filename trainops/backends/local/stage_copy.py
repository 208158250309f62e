"""The copying half of staging: worker threads that write each file under a temporary name and rename it into place.

Temporary files sit next to their final names (``.trainops-stage-<pid>-<n>.tmp``), so creating and renaming one takes
only that directory's lock; the work is handed out round-robin over directories, largest files first, so parallel
workers rarely wait on the same directory and no big file starts last. Before the first byte is written, the
directories that will hold temporary files are listed in the journal, which the next stage reads to remove what a
killed one left behind (`trainops.backends.local.staging`).

Each worker records its own results (manifest, report, progress) under one lock, so the main thread only waits and
saves the manifest every few seconds; handing every result back to it would cost two thread switches per file.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import threading
import time
from pathlib import Path
from typing import TextIO

from trainops.backends.local.stage_manifest import StageManifest, write_new_file
from trainops.backends.local.stage_names import JOURNAL_NAME, temporary_name
from trainops.backends.local.stage_report import Progress, StageReport
from trainops.backends.local.stage_sources import LocalSource, Refusal, S3Source, SourceFile, StagingStopped

#: The manifest is saved this often during a long stage, so a killed run keeps most of its progress.
CHECKPOINT_SECONDS = 5.0


def work_order(items: list[SourceFile]) -> list[SourceFile]:
    """Round-robin over directories, largest files first in each."""
    by_directory: dict[str, list[SourceFile]] = collections.defaultdict(list)
    for item in items:
        by_directory[item.name.rpartition("/")[0]].append(item)
    groups = [sorted(group, key=lambda item: item.size, reverse=True) for group in by_directory.values()]
    return [item for row in itertools.zip_longest(*groups) for item in row if item is not None]


def copy_one(source: LocalSource | S3Source, item: SourceFile, number: int, root: str, stop: threading.Event,
             process: int | None = None) -> tuple[int, int | str, int]:
    """Copy one file to a temporary name next to its final name, then rename it into place; on any error the
    temporary file is removed. Returns what `LocalSource.copy` / `S3Source.copy` return."""
    final = f"{root}/{item.name}"
    temporary = f"{final.rpartition('/')[0]}/{temporary_name(number, process)}"
    target = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, item.mode)
    try:
        try:
            result = source.copy(item, target, stop)
        finally:
            os.close(target)
        os.replace(temporary, final)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return result


class CopyRun:
    """One parallel copy of a list of files into ``root``, recording into ``manifest`` and ``report``."""

    def __init__(self, source: LocalSource | S3Source, items: list[SourceFile], root: Path, manifest: StageManifest,
                 report: StageReport, bar: Progress):
        self.source, self.items, self.root, self.root_text = source, items, root, str(root)
        self.manifest, self.report, self.bar = manifest, report, bar
        self.pending = collections.deque(range(len(items)))  # popleft is atomic: workers share it without a lock
        self.lock = threading.Lock()  # guards manifest, report and bar
        self.stop = threading.Event()
        self.error: BaseException | None = None  # the first unexpected error, raised again by `run`
        self.process = os.getpid()
        self.inline = False  # one worker runs in the calling thread, which then also saves the checkpoints
        self.last_checkpoint = time.monotonic()

    def work(self) -> None:
        """A worker: take the next file until none are left or the run is stopping."""
        while not self.stop.is_set():
            try:
                index = self.pending.popleft()
            except IndexError:
                return
            item = self.items[index]
            try:
                outcome = copy_one(self.source, item, index, self.root_text, self.stop, self.process)
            except StagingStopped:
                return
            except self.source.failure_types as error:
                with self.lock:
                    self.report.failed.append(Refusal(item.name, describe(error)))
                    self.bar.advance(item.size)
                continue
            except BaseException as error:  # noqa: BLE001 - anything else stops the whole run; `run` raises it
                with self.lock:
                    self.error = self.error or error
                self.stop.set()
                return
            written, fingerprint, staged_mtime_ns = outcome
            with self.lock:
                self.manifest.record(item.name, written, fingerprint, staged_mtime_ns)
                self.report.files_copied += 1
                self.report.bytes_copied += written
                self.bar.advance(item.size)
            if self.inline and time.monotonic() - self.last_checkpoint >= CHECKPOINT_SECONDS:
                self.checkpoint()

    def checkpoint(self) -> None:
        """Save the manifest of what is complete so far."""
        with self.lock:
            if self.manifest.changed:
                self.manifest.save(self.root)
        self.last_checkpoint = time.monotonic()

    def run(self, workers: int) -> None:
        """Copy everything with ``workers`` threads (none for one worker); raise the first unexpected error."""
        write_new_file(self.root / JOURNAL_NAME, json.dumps(sorted({item.name.rpartition("/")[0]
                                                                    for item in self.items})))
        threads: list[threading.Thread] = []
        try:
            if workers == 1:
                self.inline = True
                self.work()  # no thread to start or switch to
            else:
                threads = [threading.Thread(target=self.work, name=f"trainops-stage-{number}", daemon=True)
                           for number in range(min(workers, len(self.items)))]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    while thread.is_alive():
                        thread.join(timeout=CHECKPOINT_SECONDS)
                        if time.monotonic() - self.last_checkpoint >= CHECKPOINT_SECONDS:
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
            # Every worker removed its own temporary file on the way out, so the journal has nothing left to name.
            (self.root / JOURNAL_NAME).unlink(missing_ok=True)
        if self.error is not None:
            raise self.error


def describe(error: BaseException) -> str:
    """A short text for a failed file: the OS error's message, or the exception's type and text."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}"


def copy_all(source: LocalSource | S3Source, items: list[SourceFile], root: Path, manifest: StageManifest,
             report: StageReport, workers: int, stream: TextIO, show_progress: bool) -> None:
    """Copy ``items`` (their directories already exist) with ``workers`` threads, recording each copy in the
    manifest as soon as it has its final name; save the manifest at the end, also when interrupted."""
    ordered = work_order(items)
    bar = Progress(len(ordered), sum(item.size for item in ordered), stream, show_progress)
    CopyRun(source, ordered, root, manifest, report, bar).run(workers)
