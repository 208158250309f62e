"""Where staged data comes from: a local directory (a path or a ``file://`` URI) or an S3 prefix.

A source lists its files as `SourceFile` records (each with a checked relative name and a fingerprint for the
manifest) plus the `Refusal` of everything it will not stage, and copies one file into an open file descriptor.

Local trees: symbolic links are followed only while they point inside the source tree (to a file, or to a
directory that is not one of its own ancestors); links that point outside, dangling links, links that loop, FIFOs,
sockets and devices are refused. The root is opened once and everything below it is reached relative to an open
directory with ``O_NOFOLLOW``: directories are checked to be the ones that were listed (device and inode), files are
opened relative to their directory and checked by inode, and a link inside the tree is followed by opening its
resolved path component by component the same way. A directory or file swapped for a link between listing and
copying is therefore refused instead of read.

S3: the prefix is read as a directory (``s3://b/data`` lists ``data/...``, never ``database/...``); zero-byte keys
ending in ``/`` are the folder markers of the S3 console and are skipped. boto3 finds its endpoint, credentials and
region by itself (``AWS_ENDPOINT_URL`` included).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from trainops.backends.local.safe_fs import UnsafePath, open_path
from trainops.backends.local.stage_names import entry_refusal_reason, refusal_reason
from trainops.errors import JobFailed, Problem, SpecError

#: Bytes per copy call: large enough to be one system call for most files, small enough to notice a stop request.
COPY_CHUNK_BYTES = 64 * 1024 * 1024
#: Bytes per read when a download streams from S3.
DOWNLOAD_CHUNK_BYTES = 1024 * 1024


class StagingStopped(Exception):
    """Raised inside a copy when staging is being stopped (another file failed badly, or Ctrl-C)."""


class SourceChanged(OSError):
    """The file on disk is no longer the one that was listed (replaced, or turned into a link or a FIFO)."""


class SourceFile(NamedTuple):
    """One file to stage: its relative name, size and fingerprint, and where it is in the source.

    A named tuple rather than a dataclass: a listing makes one per file, and tuples are several times cheaper to
    build than frozen dataclasses (and smaller: a listing of 100,000 files holds 100,000 of them).
    """

    name: str
    size: int
    fingerprint: int | str  # mtime in nanoseconds (local) or ETag (S3)
    location: str  # the S3 key, or the local file's own name in its (real) directory
    identity: int | None = None  # inode of a local file, checked when it is opened
    directory: int = -1  # local: index of the file's real directory in `LocalSource.directories`
    mode: int = 0o644  # permission bits the copy is created with (the local file's; umask applies, as for cp)


class Refusal(NamedTuple):
    """A file or key that staging will not write, and why."""

    name: str
    reason: str


def local_path_of(location: str, field: str) -> Path | None:
    """The local path of a plain path or ``file://`` URI; None for any other URI scheme. Raises `SpecError` for a
    ``file://`` URI on another host."""
    if location.startswith("file:"):
        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise SpecError(Problem(field, f"{location!r} names the host {parts.netloc!r}; file:// URIs must be local "
                                           "(file:///absolute/path)"))
        return Path(unquote(parts.path))
    if "://" in location:
        return None
    return Path(location)


# --- Local directories -------------------------------------------------------------------------------------------


class LocalSource:
    """A directory on this machine, read without following a link that could have been swapped in.

    The root is opened once; every directory below it is opened relative to its already-open parent with
    ``O_NOFOLLOW`` and checked to be the directory that was listed (device and inode), both while listing and when
    a file is copied, and every file is opened relative to its directory with ``O_NOFOLLOW``. A directory replaced by
    a link at any moment therefore fails (its files are reported) instead of being read through. A link inside the
    tree is followed by opening its resolved path, component by component, the same way.
    """

    kind = "local"
    failure_types: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, root: Path, uri: str):
        self.root = root
        self.uri = uri
        #: What the manifest records as the source: the same directory however it was spelled.
        self.identity = os.path.realpath(root)
        #: Every directory files are copied from: (components under the root, (device, inode), listing parent).
        self.directories: list[tuple[tuple[str, ...], tuple[int, int], int]] = []
        self._root_fd: int | None = None

    def close(self) -> None:
        """Release the root directory (after the copies)."""
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def _open_root(self) -> int:
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._root_fd

    def directory_opener(self) -> DirectoryOpener:
        """Opens listed directories (one opener per thread: it keeps a few descriptors open)."""
        return DirectoryOpener(self._open_root(), self.directories)

    def list(self, unchanged: Any = None, *,
             start: list[tuple[int, str]] | None = None, deferred: list[tuple[int, str]] | None = None
             ) -> tuple[list[SourceFile], list[Refusal]]:
        """Every file to stage and every refusal, walking the tree without recursion (deep trees are fine).

        ``unchanged``, when given, is a re-stage's `staging.UnchangedCheck`: each regular file is checked against it
        as it is listed (inline, through its ``inline_parts()``), and the unchanged ones are left out of the list (a
        re-stage then builds no record for them).

        ``deferred``, when given, receives the (directory index, name prefix) of each directory found instead of
        walking it: the listing stops at the top level, and the subtrees are walked later with ``start`` (the
        directories to walk from; default the root), possibly in other processes (`stage_parallel`)."""
        root_fd = self._open_root()
        # The root's real path, from the descriptor (what was opened), to tell links inside from links out.
        try:
            root_real = os.readlink(f"/proc/self/fd/{root_fd}")
        except OSError:
            root_real = os.path.realpath(self.root)
        if start is None:
            root_details = os.fstat(root_fd)
            self.directories = [((), (root_details.st_dev, root_details.st_ino), -1)]
            start = [(0, "")]
        by_components: dict[tuple[str, ...], int] = {(): 0}
        opener = DirectoryOpener(root_fd, self.directories)
        files: list[SourceFile] = []
        refused: list[Refusal] = []
        pending: list[tuple[int, str]] = list(start)  # (directory index, name prefix)
        found = pending if deferred is None else deferred  # where the directories listed go
        # A re-stage's check (`staging.UnchangedCheck`) is done inline, without a call per file: the look-up of a
        # manifest entry, the set of names seen and, per directory, the open directory of the copies (or None).
        inline = unchanged is not None
        if inline:
            manifest_get, seen_add, copies_directory = unchanged.inline_parts()
            inline_skipped = inline_skipped_bytes = 0
            stat_at = os.stat
        # Bound here: a module attribute looked up per file is a measurable part of a re-stage's Python.
        is_regular, is_directory, is_link = stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK
        try:
            while pending:
                index, prefix = pending.pop()
                try:
                    listing = os.scandir(opener.open(index))
                except OSError as error:
                    refused.append(Refusal(prefix.rstrip("/") or ".", f"cannot read the directory: "
                                                                      f"{_reason(error)}"))
                    continue
                components = self.directories[index][0]
                copies_fd = copies_directory(prefix[:-1]) if inline else None
                # Entries are taken as the directory is read (not collected first: that cost about 0.5 us a file).
                # A read that fails part-way reports the directory; what was listed before stays listed.
                try:
                    with listing:
                        for entry in listing:
                            entry_name = entry.name
                            name = prefix + entry_name
                            # Most names are printable ASCII: the full check (a regular expression) only for the
                            # others.
                            if not (entry_name.isascii() and entry_name.isprintable()) \
                                    or entry_name.startswith(".trainops-stage"):
                                reason = entry_refusal_reason(entry_name)
                                if reason is not None:
                                    refused.append(Refusal(name, reason))
                                    continue
                            try:
                                details = entry.stat(follow_symlinks=False)  # fstatat relative to the directory
                            except OSError as error:
                                refused.append(Refusal(name, f"cannot read it: {_reason(error)}"))
                                continue
                            mode = details.st_mode
                            if is_regular(mode):
                                if inline:
                                    recorded = manifest_get(name)
                                    if recorded is not None:
                                        seen_add(name)
                                        size = details.st_size
                                        if copies_fd is not None and recorded[0] == size \
                                                and recorded[1] == details.st_mtime_ns:
                                            # The copy must still be what was staged: edited or replaced copies
                                            # go again.
                                            try:
                                                copy = stat_at(entry_name, dir_fd=copies_fd, follow_symlinks=False)
                                            except OSError:
                                                copy = None
                                            if copy is not None and copy.st_size == size \
                                                    and copy.st_mtime_ns == recorded[2] and is_regular(copy.st_mode):
                                                inline_skipped += 1
                                                inline_skipped_bytes += size
                                                continue
                                files.append(SourceFile(name, details.st_size, details.st_mtime_ns, entry_name,
                                                        details.st_ino, index, mode & 0o777))
                            elif is_directory(mode):
                                self.directories.append((components + (entry_name,),
                                                         (details.st_dev, details.st_ino), index))
                                found.append((len(self.directories) - 1, name + "/"))
                            elif is_link(mode):
                                self._linked(root_fd, root_real, components, entry_name, name, index,
                                             by_components, files, refused, found)
                            else:
                                refused.append(Refusal(name, "not a regular file (a FIFO, socket or device)"))
                except OSError as error:
                    refused.append(Refusal(prefix.rstrip("/") or ".", f"cannot read the directory: "
                                                                      f"{_reason(error)}"))
        finally:
            opener.close()
            if inline:
                unchanged.skipped += inline_skipped
                unchanged.skipped_bytes += inline_skipped_bytes
        return files, refused

    def _linked(self, root_fd: int, root_real: str, components: tuple[str, ...], entry_name: str, name: str,
                index: int, by_components: dict[tuple[str, ...], int], files: list[SourceFile],
                refused: list[Refusal], pending: list[tuple[int, str]]) -> None:
        """A symbolic link in the tree: staged when it resolves inside the source (opened by its resolved path,
        component by component, without following anything), refused otherwise."""
        target = os.path.realpath(os.path.join(root_real, *components, entry_name))
        if target != root_real and not target.startswith(root_real.rstrip(os.sep) + os.sep):
            refused.append(Refusal(name, "symbolic link pointing outside the source tree"))
            return
        parts = tuple(part for part in target[len(root_real):].split(os.sep) if part)
        if not parts:
            refused.append(Refusal(name, "symbolic link to one of its own parent directories (a loop)"))
            return
        try:
            parent = open_path(list(parts[:-1]), root_fd)
            try:
                details = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                parent_identity = _identity(os.fstat(parent))
            finally:
                os.close(parent)
        except OSError:
            refused.append(Refusal(name, "symbolic link whose target does not exist (or loops)"))
            return
        if stat.S_ISDIR(details.st_mode):
            identity = (details.st_dev, details.st_ino)
            ancestor = index
            while ancestor >= 0:
                if self.directories[ancestor][1] == identity:
                    refused.append(Refusal(name, "symbolic link to one of its own parent directories (a loop)"))
                    return
                ancestor = self.directories[ancestor][2]
            self.directories.append((parts, identity, index))
            pending.append((len(self.directories) - 1, name + "/"))
        elif stat.S_ISREG(details.st_mode):
            directory = by_components.get(parts[:-1])
            if directory is None or self.directories[directory][1] != parent_identity:
                self.directories.append((parts[:-1], parent_identity, -1))
                directory = by_components[parts[:-1]] = len(self.directories) - 1
            files.append(SourceFile(name, details.st_size, details.st_mtime_ns, parts[-1], details.st_ino, directory,
                                    details.st_mode & 0o777))
        else:
            refused.append(Refusal(name, "symbolic link to something that is not a regular file"))

    def copy(self, item: SourceFile, target: int, stop: threading.Event, directory: int) -> tuple[int, int | str, int]:
        """Copy ``item`` from its open source ``directory`` into the open descriptor ``target`` (created with its
        permission bits); give it the source's access and modification times.

        Returns ``(bytes written, fingerprint, modification time given to the copy in ns)``.
        """
        # O_NOFOLLOW: a file swapped for a link is refused; O_NONBLOCK so a FIFO swapped in cannot hang the open.
        try:
            source = os.open(item.location, _READ_FLAGS, dir_fd=directory)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise SourceChanged(errno.ELOOP, "it became a symbolic link after it was listed") from error
            raise
        try:
            details = os.fstat(source)
            if not stat.S_ISREG(details.st_mode) or details.st_ino != item.identity:
                raise SourceChanged(errno.ESTALE, "it was replaced after it was listed; stage again")
            written = copy_descriptor(source, target, details.st_size, stop)
        finally:
            os.close(source)
        os.utime(target, ns=(details.st_atime_ns, details.st_mtime_ns))
        return written, details.st_mtime_ns, details.st_mtime_ns


_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW


def _identity(details: os.stat_result) -> tuple[int, int]:
    return details.st_dev, details.st_ino


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


class DirectoryOpener:
    """Opens the listed directories of a `LocalSource` by their components, each relative to its open parent with
    ``O_NOFOLLOW``, checking that each listed one is still the same directory; keeps the last few open (a walk goes
    down one level at a time, and a copy takes a directory's files together)."""

    CAPACITY = 32

    def __init__(self, root: int, directories: list[tuple[tuple[str, ...], tuple[int, int], int]]):
        self.root = root
        self.directories = directories
        self.open_ones: dict[tuple[str, ...], int] = {}

    def open(self, index: int) -> int:
        """The open directory of ``self.directories[index]`` (owned by the opener: do not close it). Raises
        `SourceChanged` when it was replaced (by a link, or by another directory) since it was listed."""
        components, identity, _ = self.directories[index]
        descriptor = self.open_ones.get(components)
        if descriptor is not None:
            return descriptor
        # From the nearest open ancestor (the parent, while walking down), else from the root.
        depth = len(components)
        base, start = self.root, 0
        for cut in range(depth - 1, 0, -1):
            ancestor = self.open_ones.get(components[:cut])
            if ancestor is not None:
                base, start = ancestor, cut
                break
            if depth - cut > 2:
                break  # not worth hashing every prefix of a deep path: walk from the root
        try:
            descriptor = open_path(list(components[start:]), base) if start < depth else os.dup(base)
        except UnsafePath as error:
            raise SourceChanged(errno.ELOOP, "a directory on its path became a symbolic link after it was listed") \
                from error
        if _identity(os.fstat(descriptor)) != identity:
            os.close(descriptor)
            raise SourceChanged(errno.ESTALE, "its directory was replaced after it was listed; stage again")
        if len(self.open_ones) >= self.CAPACITY:
            oldest = next(iter(self.open_ones))
            os.close(self.open_ones.pop(oldest))
        self.open_ones[components] = descriptor
        return descriptor

    def close(self) -> None:
        for descriptor in self.open_ones.values():
            os.close(descriptor)
        self.open_ones.clear()


#: How each copy call is made; falls back for file systems (or kernels) without copy_file_range or sendfile.
_copy_methods: dict[str, Any] = {"method": "copy_file_range" if hasattr(os, "copy_file_range") else "sendfile",
                                 "small": hasattr(os, "sendfile")}
#: Files up to this size are copied with one sendfile call.
SMALL_FILE_BYTES = 256 * 1024
_FALLBACK_ERRORS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM}


def _copy_chunk(source: int, target: int, count: int) -> int:
    method = _copy_methods["method"]
    try:
        if method == "copy_file_range":
            # In-kernel copy (and a reflink where the file system can): no bytes pass through Python.
            return os.copy_file_range(source, target, count)
        if method == "sendfile":
            return os.sendfile(target, source, None, count)
    except OSError as error:
        if error.errno not in _FALLBACK_ERRORS:
            raise
        _copy_methods["method"] = "sendfile" if method == "copy_file_range" else "read"
        return _copy_chunk(source, target, count)
    data = os.read(source, min(count, DOWNLOAD_CHUNK_BYTES))
    _write_all(target, data)
    return len(data)


def copy_descriptor(source: int, target: int, size: int, stop: threading.Event) -> int:
    """Copy up to ``size`` bytes from ``source`` to ``target`` (both at their current offsets); return the count.

    Stops at ``size`` even if the file grew meanwhile (its new modification time makes the next run copy it again).
    """
    copied = 0
    if 0 < size <= SMALL_FILE_BYTES and _copy_methods["small"]:
        # Small files (most of a many-small-files tree): one sendfile, measured faster than copy_file_range for
        # them (bench/staging.py); what is left after a short count goes the general way below.
        try:
            copied = os.sendfile(target, source, None, size)
        except OSError as error:
            if error.errno not in _FALLBACK_ERRORS:
                raise
            _copy_methods["small"] = False
    while copied < size:
        if stop.is_set():
            raise StagingStopped()
        count = _copy_chunk(source, target, min(size - copied, COPY_CHUNK_BYTES))
        if count == 0:  # the file shrank while being copied
            break
        copied += count
    return copied


def _write_all(target: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(target, view):]


# --- S3 -----------------------------------------------------------------------------------------------------------


class S3Source:
    """The objects under an S3 prefix."""

    kind = "s3"

    def __init__(self, uri: str, bucket: str, prefix: str, client: Any):
        from botocore.exceptions import BotoCoreError, ClientError

        self.uri = uri
        self.bucket = bucket
        self.prefix = prefix
        self.client = client
        #: What the manifest records as the source: the same prefix with or without its trailing slash.
        self.identity = f"s3://{bucket}/{prefix}"
        # A failed download fails that file only; the others go on.
        self.failure_types: tuple[type[BaseException], ...] = (OSError, BotoCoreError, ClientError)

    def list(self) -> tuple[list[SourceFile], list[Refusal]]:
        """Every object under the prefix (an ETag is compared with the manifest after listing). Raises `SpecError`
        when the bucket does not exist or nothing is there."""
        from botocore.exceptions import BotoCoreError, ClientError

        from trainops.aws.clients import error_code, translate_client_error

        files: list[SourceFile] = []
        refused: list[Refusal] = []
        markers = 0
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
                for record in page.get("Contents", []):
                    key, size = record["Key"], int(record.get("Size", 0))
                    name = key[len(self.prefix):]
                    reason = refusal_reason(name)
                    if reason is not None:
                        refused.append(Refusal(name, reason))
                    elif name.endswith("/"):
                        if size:
                            refused.append(Refusal(name, "a key ending in '/' holds data; it cannot be a file name"))
                        markers += 1
                    else:
                        files.append(SourceFile(name, size, str(record.get("ETag", "")), key))
        except ClientError as error:
            if error_code(error) == "NoSuchBucket":
                raise SpecError(Problem("source", f"S3 bucket {self.bucket!r} does not exist ({self.uri}); check the "
                                                  "bucket name, the region and AWS_ENDPOINT_URL")) from error
            raise translate_client_error(error, f"ListObjectsV2 {self.uri}", "source") from error
        except BotoCoreError as error:
            raise JobFailed(f"cannot list {self.uri}: {error}") from error
        if not files and not refused and not markers:
            raise SpecError(Problem("source", f"no objects under {self.uri}; check the bucket and the prefix"))
        return files, refused

    def close(self) -> None:
        """Nothing to release (the client's connections close with it)."""

    def copy(self, item: SourceFile, target: int, stop: threading.Event, directory: int | None = None
             ) -> tuple[int, int | str, int]:
        """Download ``item`` into the open descriptor ``target``; its modification time becomes LastModified.

        Returns ``(bytes written, ETag of what was downloaded, modification time given to the copy in ns)``.
        """
        response = self.client.get_object(Bucket=self.bucket, Key=item.location)
        body = response["Body"]
        written = 0
        try:
            for chunk in body.iter_chunks(DOWNLOAD_CHUNK_BYTES):
                if stop.is_set():
                    raise StagingStopped()
                _write_all(target, chunk)
                written += len(chunk)
        finally:
            body.close()
        expected = response.get("ContentLength")
        if expected is not None and written != int(expected):
            raise OSError(errno.EIO, f"download ended after {written} of {expected} bytes")
        modified = response.get("LastModified")
        if modified is not None:
            staged_mtime_ns = int(modified.timestamp() * 1_000_000_000)
        else:
            staged_mtime_ns = os.fstat(target).st_mtime_ns
        os.utime(target, ns=(staged_mtime_ns, staged_mtime_ns))
        # The ETag of what was downloaded, not the listed one: the object may have changed in between.
        return written, str(response.get("ETag", item.fingerprint)), staged_mtime_ns


def open_source(source: str, client_factory: Callable[[str], Any] | None, workers: int) -> LocalSource | S3Source:
    """The source named by ``source``. Raises `SpecError` for unsupported schemes and missing local directories."""
    if not isinstance(source, str) or not source:
        raise SpecError(Problem("source", "no source given; pass a local directory, a file:// URI or "
                                          "s3://bucket/prefix"))
    if source.startswith("s3://"):
        from trainops.aws.s3 import parse_s3_uri

        bucket, key = parse_s3_uri(source, "source")
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        factory = client_factory or _default_factory(workers)
        return S3Source(source, bucket, prefix, factory("s3"))
    root = local_path_of(source, "source")
    if root is None:
        raise SpecError(Problem("source", f"{source!r} has an unsupported scheme; use a local directory, a file:// "
                                          "URI or s3://bucket/prefix"))
    if not root.exists():
        raise SpecError(Problem("source", f"{source} does not exist; check the path"))
    if not root.is_dir():
        raise SpecError(Problem("source", f"{source} is not a directory; stage the directory that holds the data"))
    return LocalSource(root, source)


def _default_factory(workers: int) -> Callable[[str], Any]:
    import boto3

    from trainops.aws.clients import client_config, client_factory_from_session

    # One connection per worker thread: botocore's default pool of 10 would make extra threads wait (and warn).
    config = client_config(max_pool_connections=max(10, workers))
    return client_factory_from_session(boto3.session.Session(), config)
