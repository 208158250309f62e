"""Data staging: copy a local directory, a ``file://`` URI or an S3 prefix into a local directory that stands for the
FSx for Lustre mount, in parallel, copying only what changed since the last stage.

Guarantees:

- **Nothing is written outside the destination.** Names are checked before anything is written
  (`trainops.backends.local.stage_names`: ``..``, absolute, control characters, reserved names); local symbolic
  links that point outside the source are refused; directories inside the destination are created one level at a
  time and a symbolic link (or a file) found where a directory should be stops every file below it, so staging
  never writes through a link. Every refusal is in the report, with its reason.
- **No partial file under a final name.** Each file is written into ``.trainops-stage.tmp/`` at the top of the
  destination (the same file system) and renamed into place with ``os.replace``. Interrupted staging leaves at
  most that directory, which the next run deletes before it starts; the next run then copies what is missing.
- **Re-runs copy only what changed**, through the manifest ``.trainops-stage.json``
  (`trainops.backends.local.stage_manifest`).
- **Files deleted from the source stay in the destination** by default (a stage never loses data a job may still
  read); they are listed in the report as ``stale``. With ``delete=True`` (``--delete``) the files that an earlier
  stage wrote and that are gone from the source are removed, as ``rsync --delete`` would; files staging did not
  write are never deleted.
- One stage at a time per destination: a second one fails at once instead of racing (an advisory lock on the
  destination directory).

Copies are not fsync'ed (like ``cp`` and ``rsync``): the guarantee covers an interrupted or killed process, not a
power loss of the machine.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from trainops.backends.local.stage_manifest import StageManifest
from trainops.backends.local.stage_names import TEMPORARY_DIRECTORY_NAME, printable_name, refusal_reason
from trainops.backends.local.stage_sources import (LocalSource, Refusal, S3Source, SourceFile, local_path_of,
                                                   open_source)
from trainops.errors import JobFailed, Problem, SpecError

#: The most entries of each list (refused, failed, stale, deleted) that `StageReport.to_dict` carries; XCom values
#: and KFP outputs must stay small even when a hostile bucket holds a million bad keys. The counts are always exact.
LISTED_LIMIT = 100
#: The manifest is saved this often during a long stage, so a killed run keeps most of its progress.
CHECKPOINT_SECONDS = 5.0
MAXIMUM_WORKERS = 256


@dataclass
class StageReport:
    """What a stage did. `to_dict` is JSON-able (an Airflow XCom value, a KFP output)."""

    source: str
    destination: str
    files_found: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    files_skipped: int = 0
    bytes_skipped: int = 0
    seconds: float = 0.0
    refused: list[Refusal] = field(default_factory=list)
    failed: list[Refusal] = field(default_factory=list)  # the reason is the error
    stale: list[str] = field(default_factory=list)  # staged earlier, gone from the source, left in place
    deleted: list[str] = field(default_factory=list)  # staged earlier, gone from the source, removed (delete=True)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was refused and nothing failed."""
        return not self.refused and not self.failed

    @property
    def megabytes_per_second(self) -> float:
        """Copy throughput in MB/s (10^6 bytes), over the whole run."""
        return self.bytes_copied / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; lists are cut at `LISTED_LIMIT` entries (the ``*_count`` fields stay exact)."""

        def problems(items: list[Refusal]) -> list[dict[str, str]]:
            return [{"name": printable_name(item.name), "reason": item.reason} for item in items[:LISTED_LIMIT]]

        return {
            "source": self.source,
            "destination": self.destination,
            "ok": self.ok,
            "files_found": self.files_found,
            "files_copied": self.files_copied,
            "bytes_copied": self.bytes_copied,
            "files_skipped": self.files_skipped,
            "bytes_skipped": self.bytes_skipped,
            "seconds": round(self.seconds, 3),
            "megabytes_per_second": round(self.megabytes_per_second, 1),
            "refused_count": len(self.refused),
            "refused": problems(self.refused),
            "failed_count": len(self.failed),
            "failed": problems(self.failed),
            "stale_count": len(self.stale),
            "stale": [printable_name(name) for name in self.stale[:LISTED_LIMIT]],
            "deleted_count": len(self.deleted),
            "deleted": [printable_name(name) for name in self.deleted[:LISTED_LIMIT]],
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """One line: files copied, bytes, skipped, refused, failed, seconds, MB/s."""
        line = (f"staged {self.source} -> {self.destination}: {self.files_copied} files copied "
                f"({self.bytes_copied / 1e6:.1f} MB), {self.files_skipped} unchanged skipped, "
                f"{len(self.refused)} refused, {len(self.failed)} failed in {self.seconds:.2f} s "
                f"({self.megabytes_per_second:.1f} MB/s)")
        if self.stale:
            line += f"; {len(self.stale)} files gone from the source were left in place (--delete removes them)"
        if self.deleted:
            line += f"; {len(self.deleted)} files gone from the source were deleted"
        return line

    def problem_lines(self) -> list[str]:
        """One line per refused or failed file, names escaped so they print on one line."""
        return ([f"refused {printable_name(item.name)}: {item.reason}" for item in self.refused]
                + [f"failed {printable_name(item.name)}: {item.reason}" for item in self.failed])

    def raise_for_problems(self) -> None:
        """Raise `JobFailed` (listing the first problems) when anything was refused or failed."""
        if self.ok:
            return
        lines = self.problem_lines()
        shown = "\n".join(f"  - {line}" for line in lines[:20])
        more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
        raise JobFailed(f"{self.summary()}\n{shown}{more}")


class Progress:
    """A one-line progress bar on a terminal (redrawn at most ten times a second); silent when disabled."""

    def __init__(self, total_files: int, total_bytes: int, stream: TextIO, enabled: bool):
        self.total_files, self.total_bytes = total_files, total_bytes
        self.stream, self.enabled = stream, enabled and total_files > 0
        self.files = self.bytes = 0
        self.started = time.monotonic()
        self.drawn = 0.0

    def advance(self, size: int) -> None:
        self.files += 1
        self.bytes += size
        now = time.monotonic()
        if self.enabled and (now - self.drawn >= 0.1 or self.files == self.total_files):
            self.drawn = now
            fraction = self.bytes / self.total_bytes if self.total_bytes else self.files / self.total_files
            bar = "#" * int(fraction * 30)
            rate = self.bytes / 1e6 / max(now - self.started, 1e-9)
            self.stream.write(f"\r[{bar:<30}] {self.files}/{self.total_files} files "
                              f"{self.bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB {rate:.1f} MB/s")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\n")
            self.stream.flush()


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


def _check_destination(source: LocalSource | S3Source, destination: Path, text: str) -> Path:
    if isinstance(source, LocalSource):
        source_real = os.path.realpath(source.root)
        destination_real = os.path.realpath(destination)
        if destination_real == source_real or destination_real.startswith(source_real.rstrip(os.sep) + os.sep):
            raise SpecError(Problem("destination", f"{text} is inside the source {source.uri}; staging would copy "
                                                   "its own output; choose a destination outside the source"))
    if destination.exists() and not destination.is_dir():
        raise SpecError(Problem("destination", f"{text} exists and is not a directory; choose a directory"))
    try:
        destination.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SpecError(Problem("destination", f"cannot create {text}: {error.strerror}; choose a writable "
                                               "directory")) from error
    return destination


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


def _remove_temporary(destination: Path) -> int:
    """Delete the temporary directory (what an interrupted stage left); return how many files it held."""
    temporary = destination / TEMPORARY_DIRECTORY_NAME
    if temporary.is_symlink() or temporary.is_file():
        temporary.unlink()
        return 1
    if not temporary.exists():
        return 0
    count = sum(len(files) for _, _, files in os.walk(temporary))
    shutil.rmtree(temporary)  # rmtree never follows links, so it cannot delete outside
    return count


class DirectoryMaker:
    """Creates directories under the destination one level at a time, never through a symbolic link or a file."""

    def __init__(self, destination: Path):
        self.destination = str(destination)
        self.known: dict[str, str | None] = {"": None}  # relative directory -> None (fine) or why it is not usable

    def prepare(self, relative: str) -> str | None:
        """Make sure ``relative`` is a real directory under the destination; return why not, or None."""
        if relative in self.known:
            return self.known[relative]
        parent, _, _ = relative.rpartition("/")
        problem = self.prepare(parent)
        if problem is None:
            path = os.path.join(self.destination, relative)
            try:
                os.mkdir(path)
            except FileExistsError:
                details = os.lstat(path)
                if stat.S_ISLNK(details.st_mode):
                    problem = f"{relative!r} in the destination is a symbolic link; staging does not write through it"
                elif not stat.S_ISDIR(details.st_mode):
                    problem = f"{relative!r} in the destination is a file, not a directory"
            except OSError as error:
                problem = f"cannot create the directory {relative!r}: {error.strerror}"
        self.known[relative] = problem
        return problem


def _unchanged(item: SourceFile, manifest: StageManifest, destination: str) -> bool:
    entry = manifest.entry(item.name)
    if entry is None or entry[0] != item.size or entry[1] != item.fingerprint:
        return False
    try:
        details = os.lstat(os.path.join(destination, item.name))
    except OSError:
        return False
    # The copy itself must still be what was staged: edited or replaced copies are staged again.
    return stat.S_ISREG(details.st_mode) and details.st_size == entry[0] and details.st_mtime_ns == entry[2]


def _delete_stale(names: list[str], destination: Path, manifest: StageManifest, report: StageReport) -> None:
    for name in names:
        parent = name.rpartition("/")[0]
        # The manifest is a file in the destination anyone could edit: its names get the same checks as the source's.
        if refusal_reason(name) is not None or _has_link_on_the_way(destination, parent):
            report.notes.append(f"not deleting {printable_name(name)}: its name or path is unsafe")
            continue
        path = destination / name
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            report.failed.append(Refusal(name, f"cannot delete the stale copy: {error.strerror}"))
            continue
        manifest.forget(name)
        report.deleted.append(name)
        while parent:  # remove directories the deletion emptied; rmdir refuses non-empty ones
            try:
                os.rmdir(destination / parent)
            except OSError:
                break
            parent = parent.rpartition("/")[0]


def _has_link_on_the_way(destination: Path, relative: str) -> bool:
    path = destination
    for segment in [segment for segment in relative.split("/") if segment]:
        path = path / segment
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            return True
    return False


def _copy_one(source: LocalSource | S3Source, item: SourceFile, index: int, temporary: Path, destination: str,
              stop: threading.Event) -> tuple[int, int | str, int]:
    temporary_path = os.path.join(temporary, str(index))
    target = os.open(temporary_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            result = source.copy(item, target, stop)
        finally:
            os.close(target)
        os.replace(temporary_path, os.path.join(destination, item.name))
    except BaseException:
        try:
            os.unlink(temporary_path)
        except OSError:
            pass
        raise
    return result


def stage_tree(source: str, destination: str, *, workers: int = 8, progress: bool | None = None,
               client_factory: Callable[[str], Any] | None = None, delete: bool = False,
               stream: TextIO | None = None) -> StageReport:
    """Stage ``source`` into the local directory ``destination`` and report what happened.

    Args:
        source: a local directory, a ``file://`` URI or ``s3://bucket/prefix``.
        destination: a local directory (or ``file://`` URI), created when missing; stands for the FSx mount.
        workers: parallel copies (threads), 1 to 256.
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
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAXIMUM_WORKERS:
        raise SpecError(Problem("workers", f"{workers!r} is not a number of parallel copies; use 1 to {MAXIMUM_WORKERS}"))
    stream = stream if stream is not None else sys.stderr
    target_path = local_destination(destination)
    opened = open_source(source, client_factory, workers)
    root = _check_destination(opened, target_path, destination)
    lock = _lock(root)
    report = StageReport(source=source, destination=destination)
    try:
        leftovers = _remove_temporary(root)
        if leftovers:
            report.notes.append(f"removed {leftovers} temporary files left by an interrupted stage")
        manifest = StageManifest.load(root, opened.uri)
        if manifest.note:
            report.notes.append(manifest.note)
        files, report.refused = opened.list()
        report.files_found = len(files)
        root_text = str(root)
        to_copy: list[SourceFile] = []
        for item in files:
            if _unchanged(item, manifest, root_text):
                report.files_skipped += 1
                report.bytes_skipped += item.size
            else:
                to_copy.append(item)
        present = {item.name for item in files}
        stale = sorted(name for name in manifest.files if name not in present)
        if delete:
            _delete_stale(stale, root, manifest, report)
        else:
            report.stale = stale
        _copy_all(opened, to_copy, root, manifest, report, workers, stream,
                  stream.isatty() if progress is None else progress)
    finally:
        os.close(lock)
        report.seconds = time.monotonic() - started
    return report


def _copy_all(source: LocalSource | S3Source, to_copy: list[SourceFile], root: Path, manifest: StageManifest,
              report: StageReport, workers: int, stream: TextIO, show_progress: bool) -> None:
    maker = DirectoryMaker(root)
    ready: list[SourceFile] = []
    for item in to_copy:
        problem = maker.prepare(item.name.rpartition("/")[0])
        if problem is None:
            ready.append(item)
        else:
            report.failed.append(Refusal(item.name, problem))
    if not ready:
        if manifest.changed:
            manifest.save(root, root / TEMPORARY_DIRECTORY_NAME)
            _remove_temporary(root)
        return
    # Largest first: a big file started last would leave the other workers idle at the end.
    ready.sort(key=lambda item: item.size, reverse=True)
    temporary = root / TEMPORARY_DIRECTORY_NAME
    temporary.mkdir()
    stop = threading.Event()
    bar = Progress(len(ready), sum(item.size for item in ready), stream, show_progress)
    recorded: set[int] = set()
    futures: dict[Future, int] = {}
    last_checkpoint = time.monotonic()

    def settle(future: Future, index: int) -> None:
        """Record a finished copy in the manifest and the report (or its failure)."""
        item = ready[index]
        recorded.add(index)
        error = future.exception()
        if error is None:
            written, fingerprint, staged_mtime_ns = future.result()
            manifest.record(item.name, written, fingerprint, staged_mtime_ns)
            report.files_copied += 1
            report.bytes_copied += written
        elif isinstance(error, source.failure_types):
            report.failed.append(Refusal(item.name, _describe(error)))
        else:
            raise error
        bar.advance(item.size)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainops-stage")
    try:
        for index, item in enumerate(ready):
            futures[pool.submit(_copy_one, source, item, index, temporary, str(root), stop)] = index
        for future in as_completed(futures):
            settle(future, futures[future])
            if time.monotonic() - last_checkpoint > CHECKPOINT_SECONDS:
                manifest.save(root, temporary)
                last_checkpoint = time.monotonic()
    finally:
        # Normal end, a bad failure or Ctrl-C: stop the copies in flight, keep what was completed, clean up.
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        for future, index in futures.items():
            if index not in recorded and future.done() and not future.cancelled() and future.exception() is None:
                settle(future, index)
        bar.close()
        if manifest.changed:
            manifest.save(root, temporary)
        _remove_temporary(root)


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}"
