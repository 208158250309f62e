"""Where staged data comes from: a local directory (a path or a ``file://`` URI) or an S3 prefix.

A source lists its files as `SourceFile` records (each with a checked relative name and a fingerprint for the
manifest) plus the `Refusal` of everything it will not stage, and copies one file into an open file descriptor.

Local trees: symbolic links are followed only while they point inside the source tree (to a file, or to a
directory that is not one of its own ancestors); links that point outside, dangling links, links that loop, FIFOs,
sockets and devices are refused. Each file is opened without following a link that was not one at listing time and
checked to be the very file that was listed (device and inode), so a file swapped for a link between listing and
copying is refused instead of read.

S3: the prefix is read as a directory (``s3://b/data`` lists ``data/...``, never ``database/...``); zero-byte keys
ending in ``/`` are the folder markers of the S3 console and are skipped. boto3 finds its endpoint, credentials and
region by itself (``AWS_ENDPOINT_URL`` included).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple
from urllib.parse import unquote, urlsplit

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
    build than frozen dataclasses.
    """

    name: str
    size: int
    fingerprint: int | str  # mtime in nanoseconds (local) or ETag (S3)
    location: str  # the local path, or the S3 key
    identity: tuple[int, int] | None = None  # (device, inode) of a local file, checked when it is opened
    through_link: bool = False  # the name itself is a symbolic link (inside the tree), so opening follows it
    mode: int = 0o644  # permission bits the copy is created with (the local file's; umask applies, as for cp)


@dataclass(frozen=True)
class Refusal:
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
    """A directory on this machine."""

    kind = "local"
    failure_types: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, root: Path, uri: str):
        self.root = root
        self.uri = uri
        #: What the manifest records as the source: the same directory however it was spelled.
        self.identity = os.path.realpath(root)

    def list(self) -> tuple[list[SourceFile], list[Refusal]]:
        """Every file to stage and every refusal, walking the tree without recursion (deep trees are fine)."""
        root_real = os.path.realpath(self.root)
        files: list[SourceFile] = []
        refused: list[Refusal] = []
        # Each entry: (directory path, name prefix, real paths of the directories on the way down, for loops).
        pending: list[tuple[str, str, frozenset[str]]] = [(str(self.root), "", frozenset({root_real}))]
        while pending:
            directory, prefix, chain = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError as error:
                refused.append(Refusal(prefix.rstrip("/") or ".", f"cannot read the directory: {error.strerror}"))
                continue
            real_directory = os.path.realpath(directory)
            for entry in entries:
                name = prefix + entry.name
                reason = entry_refusal_reason(entry.name)
                if reason is not None:
                    refused.append(Refusal(name, reason))
                    continue
                try:
                    if entry.is_symlink():
                        self._linked(entry, name, root_real, chain, files, refused, pending)
                    elif entry.is_dir(follow_symlinks=False):
                        real = os.path.join(real_directory, entry.name)
                        if real in chain:
                            refused.append(Refusal(name, "directory loop (reached again through symbolic links)"))
                        else:
                            pending.append((entry.path, name + "/", chain | {real}))
                    elif entry.is_file(follow_symlinks=False):
                        details = entry.stat(follow_symlinks=False)
                        files.append(SourceFile(name, details.st_size, details.st_mtime_ns, entry.path,
                                                (details.st_dev, details.st_ino), False,
                                                details.st_mode & 0o777))
                    else:
                        refused.append(Refusal(name, "not a regular file (a FIFO, socket or device)"))
                except OSError as error:
                    refused.append(Refusal(name, f"cannot read it: {error.strerror}"))
        return files, refused

    @staticmethod
    def _linked(entry: os.DirEntry, name: str, root_real: str, chain: frozenset[str], files: list[SourceFile],
                refused: list[Refusal], pending: list[tuple[str, str, frozenset[str]]]) -> None:
        target = os.path.realpath(entry.path)
        if target != root_real and not target.startswith(root_real + os.sep):
            refused.append(Refusal(name, "symbolic link pointing outside the source tree"))
            return
        try:
            details = os.stat(entry.path)
        except OSError:
            refused.append(Refusal(name, "symbolic link whose target does not exist (or loops)"))
            return
        if stat.S_ISDIR(details.st_mode):
            if target in chain:
                refused.append(Refusal(name, "symbolic link to one of its own parent directories (a loop)"))
            else:
                pending.append((entry.path, name + "/", chain | {target}))
        elif stat.S_ISREG(details.st_mode):
            files.append(SourceFile(name, details.st_size, details.st_mtime_ns, entry.path,
                                    (details.st_dev, details.st_ino), True, details.st_mode & 0o777))
        else:
            refused.append(Refusal(name, "symbolic link to something that is not a regular file"))

    def copy(self, item: SourceFile, target: int, stop: threading.Event) -> tuple[int, int | str, int]:
        """Copy ``item`` into the open descriptor ``target`` (created with its permission bits); give it the
        source's access and modification times.

        Returns ``(bytes written, fingerprint, modification time given to the copy in ns)``.
        """
        # O_NOFOLLOW unless the name was a link when listed; O_NONBLOCK so a FIFO swapped in cannot hang the open.
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if item.through_link else os.O_NOFOLLOW)
        try:
            source = os.open(item.location, flags)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise SourceChanged(errno.ELOOP, "it became a symbolic link after it was listed") from error
            raise
        try:
            details = os.fstat(source)
            if not stat.S_ISREG(details.st_mode) or (details.st_dev, details.st_ino) != item.identity:
                raise SourceChanged(errno.ESTALE, "it was replaced after it was listed; stage again")
            written = copy_descriptor(source, target, details.st_size, stop)
        finally:
            os.close(source)
        os.utime(target, ns=(details.st_atime_ns, details.st_mtime_ns))
        return written, details.st_mtime_ns, details.st_mtime_ns


#: How each copy call is made; falls back for file systems (or kernels) without copy_file_range or sendfile.
_copy_methods = {"method": "copy_file_range" if hasattr(os, "copy_file_range") else "sendfile"}
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
        """Every object under the prefix. Raises `SpecError` when the bucket does not exist or nothing is there."""
        from botocore.exceptions import BotoCoreError, ClientError

        from trainops.backends.sagemaker.clients import error_code, translate_client_error

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

    def copy(self, item: SourceFile, target: int, stop: threading.Event) -> tuple[int, int | str, int]:
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
        from trainops.backends.sagemaker.s3 import parse_s3_uri

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

    from trainops.backends.sagemaker.clients import client_config, client_factory_from_session

    # One connection per worker thread: botocore's default pool of 10 would make extra threads wait (and warn).
    config = client_config(max_pool_connections=max(10, workers))
    return client_factory_from_session(boto3.session.Session(), config)
