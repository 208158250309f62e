"""Data staging: copy a local directory, a ``file://`` URI or an S3 prefix into a local directory that stands for the
FSx for Lustre mount, in parallel, copying only what changed since the last stage.

Guarantees:

- **Nothing is written outside the destination.** Names are checked before anything is written
  (`trainops.backends.local.stage_names`: ``..``, absolute, control characters, reserved names); local symbolic
  links that point outside the source are refused; directories inside the destination are created one level at a
  time and a symbolic link (or a file) found where a directory should be fails every file below it, so staging
  never writes through a link. Every refusal and failure is in the report, with its reason.
- **Nothing is looked up by path after it was checked** (`trainops.backends.local.safe_fs`): the source and the
  destination are opened once, every directory below them is opened relative to its already-open parent with
  ``O_NOFOLLOW`` and compared with the (device, inode) seen when it was listed or created, and every file is
  opened, created, renamed, looked at and deleted relative to its directory's descriptor. A directory swapped for a
  link while a stage runs, on either side, makes its files fail instead of being read or written through the link.
  Walks are iterative and paths are never joined, so trees of any depth (longer than PATH_MAX) are staged.
- **No partial file under a final name.** Each file is written to a temporary name
  (``.trainops-stage-<pid>-<worker>.tmp``) in the directory of its final name and renamed into place with
  ``os.replace``. Before copying, the directories that will hold temporary files are listed in a journal
  (``.trainops-stage-journal.json``); a stage that is killed leaves the journal, and the next run deletes the
  temporary files it names before it starts, then copies what is missing.
- **Re-runs copy only what changed**, through the manifest ``.trainops-stage.json``
  (`trainops.backends.local.stage_manifest`), saved at the end, every few seconds, and when a stage is interrupted.
  A re-stage of a local tree compares each file with the manifest and with its copy while the source is listed, so
  an unchanged file costs one ``stat`` on each side and no record in memory.
- **Files deleted from the source stay in the destination** by default (a stage never removes data a job may still
  read); they are listed in the report as ``stale``. With ``delete=True`` (``--delete``) the files an earlier stage
  wrote that are gone from the source are removed, as ``rsync --delete`` would; files staging did not write are
  never deleted.
- **One stage at a time per destination**: a second one fails at once instead of racing (an advisory ``flock`` on
  the destination directory).

Copies are not fsync'ed (like ``cp`` and ``rsync``): the guarantees cover an interrupted or killed process, not a
power loss of the machine.

The copying itself (temporary names, the journal, worker threads) is in `trainops.backends.local.stage_copy`; a local
tree with more than one worker is copied by forked processes instead, each in a directory of its own
(`trainops.backends.local.stage_copy_processes`), when this process may fork (no other thread).
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from trainops.backends.local.safe_fs import DirectoryCache, UnsafePath
from trainops.backends.local.stage_journal import remove_leftovers
from trainops.backends.local.stage_manifest import StageManifest
from trainops.backends.local.stage_names import printable_name, refusal_reason
from trainops.backends.local.stage_report import StageReport
from trainops.backends.local.stage_sources import LocalSource, Refusal, S3Source, SourceFile, local_path_of, open_source
from trainops.errors import JobFailed, Problem, SpecError

MAXIMUM_WORKERS = 256

Source = LocalSource | S3Source


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


def _check_destination(source: Source, destination: Path, text: str) -> None:
    """Raise `SpecError` when ``destination`` is inside a local source or is not a directory."""
    if isinstance(source, LocalSource):
        source_real = os.path.realpath(source.root)
        destination_real = os.path.realpath(destination)
        if destination_real == source_real or destination_real.startswith(source_real.rstrip(os.sep) + os.sep):
            raise SpecError(Problem("destination", f"{text} is inside the source {source.uri}; staging would copy "
                                                   "its own output; choose a destination outside the source"))
    if destination.exists() and not destination.is_dir():
        raise SpecError(Problem("destination", f"{text} exists and is not a directory; choose a directory"))


def _create_destination(destination: Path, text: str) -> None:
    try:
        destination.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SpecError(Problem("destination", f"cannot create {text}: {error.strerror}; choose a writable "
                                               "directory")) from error


def _lock(destination: Path) -> int:
    """Hold an advisory lock on the destination directory for this stage; fail when another stage holds it."""
    descriptor = os.open(destination, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise JobFailed(f"another stage is writing into {destination}; wait for it to finish, then stage again")
    except OSError:
        pass  # file systems without flock: stage unlocked rather than not at all
    return descriptor


class DirectoryMaker:
    """Creates directories under the open destination one level at a time, each relative to its open parent, never
    through a symbolic link or a file; remembers the (device, inode) of each, which the copies check."""

    def __init__(self, root: int):
        self.cache = DirectoryCache(root)
        root_details = os.fstat(root)
        self.known: dict[str, str | None] = {"": None}  # relative directory -> None (fine) or why it is not usable
        self.identities: dict[str, tuple[int, int]] = {"": (root_details.st_dev, root_details.st_ino)}

    def prepare(self, relative: str) -> str | None:
        """Make sure ``relative`` is a real directory under the destination; return why not, or None. Iterative:
        a tree thousands of levels deep is fine."""
        if relative in self.known:
            return self.known[relative]
        missing = []
        while relative not in self.known:
            missing.append(relative)
            relative = relative.rpartition("/")[0]
        problem = self.known[relative]
        for relative in reversed(missing):
            if problem is None:
                try:
                    details = os.fstat(self.cache.open(relative, create=True))
                    self.identities[relative] = (details.st_dev, details.st_ino)
                except UnsafePath:
                    problem = self._why_not_a_directory(relative)
                except OSError as error:
                    problem = f"cannot create the directory {relative!r}: {error.strerror}"
            self.known[relative] = problem
        return problem

    def _why_not_a_directory(self, relative: str) -> str:
        parent, _, name = relative.rpartition("/")
        try:
            mode = os.stat(name, dir_fd=self.cache.open(parent), follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode):
            return f"{relative!r} in the destination is a symbolic link; staging does not write through it"
        return f"{relative!r} in the destination is a file, not a directory"

    def close(self) -> None:
        self.cache.close()


class CopiesOnDisk:
    """Looks at the staged copies in the destination (relative to their open directory, links not followed)."""

    def __init__(self, root: int):
        self.cache = DirectoryCache(root, capacity=8)
        self.missing: str | None = None  # a directory found missing (or unsafe): its files are not looked at
        self.last: str | None = None
        self.last_descriptor = -1

    def directory(self, directory: str) -> int | None:
        """The open directory of the copies named ``directory/...`` (relative to the destination), or None when it
        is missing or unsafe (a link or a file where the directory should be)."""
        # Names come directory by directory: the last directory's descriptor is kept at hand.
        if directory != self.last:
            if directory == self.missing:
                return None
            try:
                self.last_descriptor, self.last = self.cache.open(directory), directory
            except OSError:  # missing, or a link or a file where the directory should be
                self.missing = directory
                return None
        return self.last_descriptor

    def details(self, name: str) -> os.stat_result | None:
        directory, _, base = name.rpartition("/")
        if self.directory(directory) is None:
            return None
        try:
            return os.stat(base, dir_fd=self.last_descriptor, follow_symlinks=False)
        except OSError:
            return None

    def close(self) -> None:
        self.cache.close()


class UnchangedCheck:
    """What a re-stage's listing checks each local file against (`LocalSource.list` makes the check inline): the
    manifest's entry and the copy on disk. Counts what it skips, and how many listed names the manifest knows (to
    tell whether any went stale)."""

    def __init__(self, manifest: StageManifest, copies: CopiesOnDisk):
        self.manifest, self.copies = manifest, copies
        #: How a name's entry is found: the whole manifest's table unless set (a listing process sets its part's).
        self.lookup: Callable[[str], Any] | None = None
        self.part: dict[str, Any] = {}  # in a listing process: the entries under its subtrees
        self.skipped = self.skipped_bytes = 0
        self.seen: set[str] = set()  # listed names the manifest knows

    def inline_parts(self) -> tuple[Callable[[str], Any], Callable[[str], None], Callable[[str], int | None]]:
        """What `LocalSource.list` uses to make this check inline (the test of `_unchanged`, without a call per
        file; it adds to `skipped` and `skipped_bytes` itself): the look-up of an entry, ``seen.add`` and the open
        directory of the copies for a directory name."""
        return self.lookup or self.manifest.files.get, self.seen.add, self.copies.directory


def _unchanged(item: SourceFile, manifest: StageManifest, copies: CopiesOnDisk) -> bool:
    entry = manifest.entry(item.name)
    if entry is None or entry[0] != item.size or entry[1] != item.fingerprint:
        return False
    details = copies.details(item.name)
    # The copy itself must still be what was staged: edited or replaced copies are staged again.
    return (details is not None and stat.S_ISREG(details.st_mode) and details.st_size == entry[0]
            and details.st_mtime_ns == entry[2])


def _delete_stale(names: list[str], root: int, manifest: StageManifest, report: StageReport) -> None:
    cache = DirectoryCache(root, capacity=8)
    try:
        for name in names:
            parent, _, base = name.rpartition("/")
            # The manifest is a file in the destination anyone could edit: its names get the same checks as the
            # source's, and its directories are opened without following links.
            try:
                directory = cache.open(parent) if refusal_reason(name) is None else None
            except OSError:
                directory = None
            if directory is None:
                report.notes.append(f"not deleting {printable_name(name)}: its name or path is unsafe")
                continue
            try:
                mode = os.stat(base, dir_fd=directory, follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = None
            except OSError as error:
                report.failed.append(Refusal(name, f"cannot delete the stale copy: {error.strerror}"))
                continue
            if mode is not None and stat.S_ISDIR(mode):
                # Something else replaced the staged file with a directory: not ours to delete any more.
                report.notes.append(f"not deleting {printable_name(name)}: it is a directory now")
                manifest.forget(name)
                continue
            try:
                if mode is not None:
                    os.unlink(base, dir_fd=directory)
            except OSError as error:
                report.failed.append(Refusal(name, f"cannot delete the stale copy: {error.strerror}"))
                continue
            manifest.forget(name)
            report.deleted.append(name)
            while parent:  # remove directories the deletion emptied; rmdir refuses non-empty ones
                above, _, last = parent.rpartition("/")
                cache.forget(parent)
                try:
                    os.rmdir(last, dir_fd=cache.open(above))
                except OSError:
                    break
                parent = above
    finally:
        cache.close()


def _prepare_directories(items: list[SourceFile], maker: DirectoryMaker, report: StageReport) -> list[SourceFile]:
    """Create the directories ``items`` go into; the items whose directory cannot be made fail (in the report)."""
    ready: list[SourceFile] = []
    for item in items:
        problem = maker.prepare(item.name.rpartition("/")[0])
        if problem is None:
            ready.append(item)
        else:
            report.failed.append(Refusal(item.name, problem))
    return ready


def _list(source: Source, check: UnchangedCheck | None, workers: int
          ) -> tuple[list[SourceFile], list[Refusal], list[str] | None]:
    """List the source: a local tree with more than one worker in several processes (`stage_parallel`: a re-stage
    is mostly the per-file work of this listing); returns (files, refusals, stale names or None when unknown)."""
    if isinstance(source, LocalSource) and workers > 1:
        # Imported here: an S3 stage or a single worker needs none of it (pickle, select).
        from trainops.backends.local.stage_parallel import list_in_processes, may_fork

        if may_fork(workers):
            return list_in_processes(source, check, workers)
    files, refused = source.list(check) if check is not None else source.list()  # a check only for local trees
    return files, refused, None


def default_workers(source: str) -> int:
    """Parallel copies when none are asked for: S3 downloads wait on the network, so 8; local copies wait on the
    CPU and the disk, so one per CPU (at least 2, at most 8): more copies than cores only add switching (measured in
    bench/staging.py on 2 cores: 2 workers beat 4 and 8)."""
    if source.startswith("s3://"):
        return 8
    return max(2, min(8, os.cpu_count() or 2))


def stage_tree(source: str, destination: str, *, workers: int | None = None, progress: bool | None = None,
               client_factory: Callable[[str], Any] | None = None, delete: bool = False,
               stream: TextIO | None = None) -> StageReport:
    """Stage ``source`` into the local directory ``destination`` and report what happened.

    Args:
        source: a local directory, a ``file://`` URI or ``s3://bucket/prefix``.
        destination: a local directory (or ``file://`` URI), created when missing; stands for the FSx mount.
        workers: parallel copies, 1 to 256; default `default_workers(source)`. For a local tree in a process
            with no other thread these are forked processes (at most one per CPU) that list and copy; otherwise
            threads.
        progress: draw a progress bar on ``stream``; None (default) draws it when ``stream`` is a terminal.
        client_factory: a callable from a service name to a boto3 client (for S3 sources); default: boto3's own
            configuration (credentials, region, ``AWS_ENDPOINT_URL``).
        delete: remove files an earlier stage wrote that are gone from the source (default: leave them, and list
            them as ``stale``).
        stream: where the progress bar goes (default ``sys.stderr``).

    Refused and failed files do not raise: they are in the report (`StageReport.ok` is False; call
    `StageReport.raise_for_problems` to turn them into `JobFailed`). Raises `SpecError` for bad input (missing
    source, destination inside the source, bad ``workers``) and `JobFailed` when the source cannot be listed or
    another stage holds the destination. Anything unexpected (or Ctrl-C) stops every copy, keeps the files that
    were completed (and the manifest of them), removes the temporary files and is raised again.
    """
    started = time.monotonic()
    if workers is None:
        workers = default_workers(str(source))
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAXIMUM_WORKERS:
        raise SpecError(Problem("workers", f"{workers!r} is not a number of parallel copies; use 1 to "
                                           f"{MAXIMUM_WORKERS}"))
    stream = stream if stream is not None else sys.stderr
    root = local_destination(destination)
    opened = open_source(source, client_factory, workers)
    _check_destination(opened, root, destination)
    report = StageReport(source=source, destination=destination)
    lock = None
    maker = copies = check = None
    try:
        if isinstance(opened, LocalSource) and root.is_dir():
            # A re-stage of a local tree: the manifest is read first (under the lock) and each file compared while
            # it is listed, so that unchanged files cost one stat on each side and nothing else.
            lock = _lock(root)  # also the destination's descriptor: everything below is done relative to it
            leftovers = remove_leftovers(lock)
            manifest = StageManifest.load(lock, opened.identity)
            if len(manifest):
                copies = CopiesOnDisk(lock)
                check = UnchangedCheck(manifest, copies)
            files, report.refused, stale_found = _list(opened, check, workers)
        else:
            # Listed before the destination is created, so a missing bucket or prefix leaves nothing behind.
            files, report.refused, _ = _list(opened, None, workers)
            _create_destination(root, destination)
            lock = _lock(root)
            leftovers = remove_leftovers(lock)
            manifest = StageManifest.load(lock, opened.identity)
        if leftovers:
            report.notes.append(f"removed {leftovers} temporary files left by an interrupted stage")
        if manifest.note:
            report.notes.append(manifest.note)
        to_copy: list[SourceFile] = []
        stale: list[str] = []
        if check is not None:
            to_copy = files
            report.files_skipped, report.bytes_skipped = check.skipped, check.skipped_bytes
            report.files_found = len(files) + check.skipped
            if stale_found is not None:
                stale = sorted(stale_found)
            elif len(check.seen) < len(manifest):
                stale = sorted(name for name in manifest.names() if name not in check.seen)
        elif len(manifest):
            report.files_found = len(files)
            copies = CopiesOnDisk(lock)
            for item in files:
                if _unchanged(item, manifest, copies):
                    report.files_skipped += 1
                    report.bytes_skipped += item.size
                else:
                    to_copy.append(item)
            present = {item.name for item in files}
            stale = sorted(name for name in manifest.names() if name not in present)
        else:
            report.files_found = len(files)
            to_copy = files
        if delete:
            _delete_stale(stale, lock, manifest, report)
        else:
            report.stale = stale
        maker = DirectoryMaker(lock)
        ready = _prepare_directories(to_copy, maker, report)
        if ready:
            # Imported here: a re-stage with nothing to copy (the common case) needs none of it.
            from trainops.backends.local.stage_copy import copy_all

            copy_all(opened, ready, lock, maker.identities, manifest, report, workers, stream,
                     stream.isatty() if progress is None else progress)
        elif manifest.changed:
            manifest.save(lock)
    finally:
        for helper in (maker, copies):
            if helper is not None:
                helper.close()
        if lock is not None:
            os.close(lock)
        opened.close()
        report.seconds = time.monotonic() - started
    return report
