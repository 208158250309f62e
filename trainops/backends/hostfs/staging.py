"""Data staging: copy a local directory, a ``file://`` URI or an S3 prefix into a local directory that stands for the
FSx for Lustre mount, copying only what changed since the last stage.

- **Nothing is written outside the destination.** Names are checked before anything is written (`stage_names`);
  local links that point outside the source are refused; directories are created one level at a time relative to
  their open parent and checked by (device, inode), and a link or a file where a directory should be fails every
  file below it. Every refusal and failure is in the report, with its reason.
- **No partial file under a final name.** Each file is written to a new temporary name (``O_EXCL``) in the
  directory of its final name, then renamed. While a stage writes, ``.trainops-stage-journal.json`` marks the
  destination; a stage that finds the mark of a killed one first removes the temporary files it left (one stopped
  by Ctrl-C or an error removes them itself).
- **Re-runs copy only what changed** (`stage_manifest`): a local file is skipped while its size and modification
  time, an S3 object while its size and ETag, are what was staged and its copy is still what was written.
- **Files gone from the source stay** (listed as ``stale``) unless ``delete=True`` removes those staging wrote.
- **One stage at a time per destination** (an advisory ``flock`` on the destination directory).

A local tree is copied by this process, each file in the kernel (`stage_sources.LocalSource`); an S3 prefix is
downloaded in parallel by boto3's transfer manager (`stage_s3.S3Source`). Copies are not fsync'ed (as ``cp`` and
``aws s3 sync``).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from trainops.backends.hostfs.safe_fs import NEW_FILE_FLAGS, DirectoryCache, UnsafePath
from trainops.backends.hostfs.stage_manifest import StageManifest
from trainops.backends.hostfs.stage_names import JOURNAL_NAME, is_temporary_name, printable_name, refusal_reason
from trainops.backends.hostfs.stage_names import temporary_name as _temporary_name
from trainops.backends.hostfs.stage_report import Progress, StageReport
from trainops.backends.hostfs.stage_s3 import S3Source
from trainops.backends.hostfs.stage_sources import LocalSource, Refusal, SourceFile, local_path_of
from trainops.errors import JobFailed, Problem, SpecError

MAXIMUM_WORKERS = 256
#: Seconds between saves of the manifest while a stage runs (what a killed stage completed is not copied again).
CHECKPOINT_SECONDS = 5.0


def local_destination(destination: str) -> Path:
    """The directory named by ``destination`` (a path or ``file://`` URI). Raises `SpecError` for anything else."""
    if not isinstance(destination, str) or not destination:
        raise SpecError(Problem("destination", "no destination given; pass a local directory"))
    path = local_path_of(destination, "destination")
    if path is None:
        hint = (" (FSx on SageMaker: use the stage step with backend='sagemaker')" if destination.startswith("fsx://")
                else "")
        raise SpecError(Problem("destination", f"{destination!r} is not a local directory; the local backend "
                                               f"stages into a directory that stands for the FSx mount{hint}"))
    return path


def default_workers(source: str) -> int:
    """Parallel S3 downloads when none are asked for: 10, as ``aws s3 sync``; 1 for a local tree (unused there)."""
    return 10 if source.startswith("s3://") else 1


class Created(NamedTuple):
    """A temporary file open for writing: its directory (a descriptor of the cache's, or this record's own when
    many files are in flight), name and descriptor."""

    directory: int
    temporary: str
    descriptor: int


class Destination:
    """Writes files under the open destination and records each outcome in the report, the manifest and the
    progress bar. Directories are created level by level relative to their open parent (`safe_fs.DirectoryCache`),
    never through a link or a file, and checked by (device, inode) each time one is opened for a file."""

    def __init__(self, root: int, report: StageReport, manifest: StageManifest, progress: Progress,
                 in_flight: bool):
        self.root, self.report, self.manifest, self.progress = root, report, manifest, progress
        self.in_flight = in_flight  # several files open at once (S3): each holds its own directory descriptor
        self.cache = DirectoryCache(root)
        details = os.fstat(root)
        self.problems: dict[str, str | None] = {"": None}  # relative directory -> None (usable) or why not
        self.identities = {"": (details.st_dev, details.st_ino)}
        self.number, self.saved = 0, time.monotonic()
        self.checked = ("", -1)  # the directory (relative name, descriptor) whose identity was checked last
        # Temporary files neither renamed into place nor discarded yet: settling one twice (an error raised by
        # `commit` after it closed the record's directory descriptor, then the caller's cleanup discarding it)
        # would close that number again, by then perhaps another file's.
        self.pending: set[str] = set()

    def prepare(self, relative: str) -> str | None:
        """Make ``relative`` a real directory under the destination; return why it cannot be, or None."""
        missing = []
        while relative not in self.problems:
            missing.append(relative)
            relative = relative.rpartition("/")[0]
        problem = self.problems[relative]
        for relative in reversed(missing):
            if problem is None:
                try:
                    details = os.fstat(self.cache.open(relative, create=True))
                    self.identities[relative] = (details.st_dev, details.st_ino)
                except UnsafePath:
                    parent, _, name = relative.rpartition("/")
                    try:
                        mode = os.stat(name, dir_fd=self.cache.open(parent), follow_symlinks=False).st_mode
                    except OSError:
                        mode = 0
                    problem = (f"{relative!r} in the destination is a symbolic link; staging does not write through "
                               "it" if stat.S_ISLNK(mode) else f"{relative!r} in the destination is a file, not a "
                                                               "directory")
                except OSError as error:
                    problem = f"cannot create the directory {relative!r}: {error.strerror}"
            self.problems[relative] = problem
        return problem

    def directory(self, relative: str) -> tuple[int, str | None]:
        """The destination directory ``relative`` (created when missing), open and checked to be the one staging
        created: (descriptor, None), or (-1, why no file can go there). The descriptor is the cache's."""
        problem = self.prepare(relative)
        if problem is not None:
            return -1, problem
        try:
            directory = self.cache.open(relative)
            if self.checked != (relative, directory):  # reopened: is it the one created?
                details = os.fstat(directory)
                if (details.st_dev, details.st_ino) != self.identities[relative]:
                    return -1, f"{relative!r} in the destination was replaced while staging; stage again"
                self.checked = (relative, directory)
        except UnsafePath:
            return -1, f"{relative!r} in the destination became a symbolic link; staging does not write through it"
        except OSError as error:
            return -1, f"cannot create a file in the destination directory {relative!r}: {error.strerror}"
        return directory, None

    def new_file(self, item: SourceFile, directory: int) -> Created | None:
        """A new temporary file (``O_EXCL``) for ``item`` in the open ``directory``, or None (the failure recorded).
        The record holds the caller's descriptor of the directory."""
        while True:
            self.number += 1
            name = _temporary_name(self.number)
            try:
                created = Created(directory, name, os.open(name, NEW_FILE_FLAGS, item.mode, dir_fd=directory))
                self.pending.add(name)
                return created
            except FileExistsError:
                continue
            except OSError as error:
                self.fail(item, f"cannot create a file in the destination directory "
                                f"{item.name.rpartition('/')[0]!r}: {error.strerror}")
                return None

    def create(self, item: SourceFile) -> Created | None:
        """A new temporary file for ``item`` in its directory, or None (the failure recorded)."""
        directory, problem = self.directory(item.name.rpartition("/")[0])
        if problem is not None:
            self.fail(item, problem)
            return None
        created = self.new_file(item, directory)
        if created is not None and self.in_flight:  # several files open at once: each holds its own descriptor
            created = created._replace(directory=os.dup(directory))
        return created

    def commit(self, created: Created, item: SourceFile, written: int, fingerprint: int | str, modified: int) -> None:
        """Rename the complete temporary file to its final name (a file or link there is replaced, never written
        through) and record it."""
        try:
            os.replace(created.temporary, item.name.rpartition("/")[2], src_dir_fd=created.directory,
                       dst_dir_fd=created.directory)
        except OSError as error:
            self.discard(created)
            self.fail(item, "a directory of that name is in the destination" if isinstance(error, IsADirectoryError)
                      else f"cannot rename into place: {error.strerror}")
            return
        self.pending.discard(created.temporary)
        if self.in_flight:
            os.close(created.directory)
        self.manifest.files[item.name] = (written, fingerprint, modified)
        self.report.files_copied += 1
        self.report.bytes_copied += written
        self.progress.advance(item.size)
        if time.monotonic() - self.saved > CHECKPOINT_SECONDS:
            self.manifest.save(self.root)
            self.saved = time.monotonic()

    def fail(self, item: SourceFile, reason: str) -> None:
        self.report.failed.append(Refusal(item.name, reason))
        self.progress.advance(item.size)

    def discard(self, created: Created) -> None:
        """Remove the temporary file (its descriptor is closed by whoever wrote it); nothing when it was renamed
        into place or removed already."""
        if created.temporary not in self.pending:
            return
        self.pending.discard(created.temporary)
        try:
            os.unlink(created.temporary, dir_fd=created.directory)
        except OSError:
            pass
        if self.in_flight:
            os.close(created.directory)


#: A disk that refuses a write for want of room.
FULL = (errno.ENOSPC, errno.EDQUOT)


def _human(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def _check_room(destination: int, files: list[SourceFile], shown: str) -> None:
    """Refuse a stage whose files cannot fit in the destination's free space, before the first byte is copied
    (`JobFailed` with both sizes), instead of failing file after file with "No space left on device"."""
    try:
        details = os.fstatvfs(destination)
    except OSError:
        return
    free, needed = details.f_bavail * details.f_frsize, sum(item.size for item in files)
    if needed > free:
        raise JobFailed(f"{shown} has {_human(free)} free, but the {len(files)} files to stage there need "
                        f"{_human(needed)}: free space there or stage into a larger disk (nothing was copied)")


def _lock(destination: Path, text: str) -> int:
    """Create and open the destination and hold an advisory lock on it; fail when another stage holds it."""
    try:
        destination.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(destination, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise SpecError(Problem("destination", f"cannot create {text}: {error.strerror}; choose a writable "
                                               "directory")) from error
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise JobFailed(f"another stage is writing into {destination}; wait for it to finish, then stage again") \
            from None
    except OSError:
        pass  # file systems without flock: stage unlocked rather than not at all
    return descriptor


def _remove_leftovers(root: int) -> int:
    """When a killed stage left its mark, remove the temporary files under the destination; returns how many."""
    try:
        os.unlink(JOURNAL_NAME, dir_fd=root)
    except FileNotFoundError:
        return 0
    return _remove_temporaries(root)


def _remove_temporaries(root: int) -> int:
    """Remove every temporary file under the destination (a walk relative to open directories, no link followed)
    while no stage writes there; returns how many."""
    cache, pending, removed = DirectoryCache(root), [""], 0
    while pending:
        relative = pending.pop()
        try:
            listing = os.scandir(cache.open(relative))
        except OSError:
            continue
        with listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(f"{relative}/{entry.name}" if relative else entry.name)
                elif is_temporary_name(entry.name) and entry.is_file(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=cache.open(relative))
                    removed += 1
    cache.close()
    return removed


def _delete_stale(names: list[str], root: int, manifest: StageManifest, report: StageReport) -> None:
    """Remove the staged copies of ``names`` (and the directories that leaves empty)."""
    cache = DirectoryCache(root, capacity=8)
    for name in names:
        parent, _, base = name.rpartition("/")
        try:  # the manifest could be edited: its names get the source's checks, directories no link followed
            if refusal_reason(name) is not None:
                raise UnsafePath(name)
            directory = cache.open(parent)
            mode: int | None = os.stat(base, dir_fd=directory, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = 0  # already gone
        except UnsafePath:
            mode = None
        except OSError as error:
            report.failed.append(Refusal(name, f"cannot delete the stale copy: {error.strerror}"))
            continue
        if mode is None or stat.S_ISDIR(mode):  # unsafe, or a directory now: not ours to delete
            report.notes.append(f"not deleting {printable_name(name)}: "
                                + ("its name or path is unsafe" if mode is None else "it is a directory now"))
            manifest.files.pop(name, None)
            continue
        try:
            if mode:
                os.unlink(base, dir_fd=directory)
        except OSError as error:
            report.failed.append(Refusal(name, f"cannot delete the stale copy: {error.strerror}"))
            continue
        manifest.files.pop(name, None)
        report.deleted.append(name)
        while parent:  # remove directories the deletion emptied; rmdir refuses non-empty ones
            above, _, last = parent.rpartition("/")
            cache.forget(parent)
            try:
                os.rmdir(last, dir_fd=cache.open(above))
            except OSError:
                break
            parent = above
    cache.close()


def _changed_copies(names: Iterable[str], manifest: StageManifest, root: int) -> list[str]:
    """Those of ``names`` whose copy in the destination is not what the manifest says staging wrote (one stat each,
    relative to its open directory, no link followed)."""
    copies, changed = DirectoryCache(root, capacity=8), []
    for name in names:
        directory, _, base = name.rpartition("/")
        try:
            details = os.stat(base, dir_fd=copies.open(directory), follow_symlinks=False)
        except OSError:
            changed.append(name)
            continue
        entry = manifest.files[name]
        if not (stat.S_ISREG(details.st_mode) and details.st_size == entry[0] and details.st_mtime_ns == entry[2]):
            changed.append(name)
    copies.close()
    return changed


def open_source(source: str, client_factory: Callable[[str], Any] | None, workers: int) -> Any:
    """The source named by ``source`` (`LocalSource` or `stage_s3.S3Source`). Raises `SpecError` for unsupported
    schemes and missing local directories."""
    if not isinstance(source, str) or not source:
        raise SpecError(Problem("source", "no source given; pass a local directory, a file:// URI or "
                                          "s3://bucket/prefix"))
    if source.startswith("s3://"):
        return S3Source.open(source, client_factory, workers)
    root = local_path_of(source, "source")
    if root is None:
        raise SpecError(Problem("source", f"{source!r} has an unsupported scheme; use a local directory, a file:// "
                                          "URI or s3://bucket/prefix"))
    if not root.exists():
        raise SpecError(Problem("source", f"{source} does not exist; check the path"))
    if not root.is_dir():
        raise SpecError(Problem("source", f"{source} is not a directory; stage the directory that holds the data"))
    return LocalSource(root)


def stage_tree(source: str, destination: str, *, workers: int | None = None, progress: bool | None = None,
               client_factory: Callable[[str], Any] | None = None, delete: bool = False,
               stream: TextIO | None = None) -> StageReport:
    """Stage ``source`` (a local directory, ``file://`` URI or ``s3://bucket/prefix``) into the local directory
    ``destination`` (created when missing; it stands for the FSx mount) and report what happened.

    ``workers``: parallel S3 downloads, 1 to 256 (default `default_workers`; a local tree is copied by this
    process). ``progress``: draw a progress bar on
    ``stream`` (default ``sys.stderr``; None: when it is a terminal). ``client_factory``: service name -> boto3
    client for S3 (default: boto3's own configuration, ``AWS_ENDPOINT_URL`` included). ``delete``: remove the files
    an earlier stage wrote that are gone from the source (default: leave them, listed as ``stale``).

    Refused and failed files do not raise: they are in the report (`StageReport.raise_for_problems` turns them into
    `JobFailed`). Raises `SpecError` for bad input and `JobFailed` when the source cannot be listed or another stage
    holds the destination. Anything unexpected (or Ctrl-C) stops the copies, keeps the completed files and their
    manifest, removes the temporary files and is raised.
    """
    started = time.monotonic()
    workers = default_workers(str(source)) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAXIMUM_WORKERS:
        raise SpecError(Problem("workers", f"{workers!r} is not a number of parallel copies; use 1 to "
                                           f"{MAXIMUM_WORKERS}"))
    root = local_destination(destination)
    opened = open_source(source, client_factory, workers)
    report = StageReport(source, destination)
    lock = None
    # The listing and the manifest are 100,000s of small objects and no cycles: the collector's passes over them
    # cost a tenth of a re-stage, so it is paused: through a local tree's copies (one thread, a few objects a file),
    # until the copies from S3 (the transfer manager's threads). Only with no other thread: the switch is the whole
    # process's, and another thread's garbage is not this stage's to let pile up.
    collecting = gc.isenabled() and threading.active_count() == 1
    if collecting:
        gc.disable()
    local = isinstance(opened, LocalSource)
    try:
        if local:
            inside = os.path.realpath(root)
            if inside == opened.identity or inside.startswith(opened.identity.rstrip(os.sep) + os.sep):
                raise SpecError(Problem("destination", f"{destination} is inside the source {source}; staging would "
                                                       "copy its own output; choose a destination outside it"))
        if root.exists() and not root.is_dir():
            raise SpecError(Problem("destination", f"{destination} exists and is not a directory; choose one"))
        if not local:  # listed before the destination is created: a missing bucket or prefix leaves nothing behind
            files, report.refused = opened.list_files()
        lock = _lock(root, destination)
        leftovers = _remove_leftovers(lock)
        if leftovers:
            report.notes.append(f"removed {leftovers} temporary files left by an interrupted stage")
        manifest = StageManifest.load(lock, opened.identity)
        report.notes += [manifest.note] if manifest.note else []
        if local:
            files, report.refused = opened.list_files()
        report.files_found = len(files)
        to_copy = files
        if len(manifest):
            recorded = manifest.files
            changed = set(_changed_copies(recorded, manifest, lock))
            to_copy = [item for item in files if (entry := recorded.get(item.name)) is None or entry[0] != item.size
                       or entry[1] != item.fingerprint or item.name in changed]
            report.files_skipped = len(files) - len(to_copy)
            report.bytes_skipped = sum(item.size for item in files) - sum(item.size for item in to_copy)
            stale = [] if report.files_skipped == len(recorded) else sorted(
                set(recorded).difference(item.name for item in files))
            if delete:
                _delete_stale(stale, lock, manifest, report)
            else:
                report.stale = stale
        if not to_copy:
            if report.deleted:
                manifest.save(lock)
            return report
        _check_room(lock, to_copy, destination)
        if collecting and not local:  # the transfer manager's threads run from here on
            gc.enable()
        stream = stream if stream is not None else sys.stderr
        bar = Progress(len(to_copy), sum(item.size for item in to_copy), stream,
                       stream.isatty() if progress is None else progress)
        writer = Destination(lock, report, manifest, bar, in_flight=not local)
        for relative in dict.fromkeys(item.name.rpartition("/")[0] for item in to_copy):
            writer.prepare(relative)  # every directory first: the tree's shape is in place before its files come
        try:
            os.close(os.open(JOURNAL_NAME, NEW_FILE_FLAGS, 0o644, dir_fd=lock))
            try:
                opened.copy_all(to_copy, writer)
            except BaseException:  # stopped at any moment (Ctrl-C), a process may have left a temporary file
                _remove_temporaries(lock)
                raise
            finally:
                writer.cache.close()
                bar.close()
                try:
                    manifest.save(lock)
                finally:
                    os.unlink(JOURNAL_NAME, dir_fd=lock)
        except OSError as error:
            if error.errno not in FULL:
                raise
            raise JobFailed(f"the disk of {destination} is full ({error.strerror}): {report.files_copied} of "
                            f"{len(to_copy)} files were staged (kept there); free space there, or stage into a "
                            "larger disk, and stage again") from error
    finally:
        if collecting:
            gc.enable()
        if lock is not None:
            os.close(lock)
        opened.close()
        report.seconds = time.monotonic() - started
    return report
