"""Staging from S3: list the prefix, download with boto3's own transfer manager (s3transfer).

The prefix is read as a directory (``s3://b/data`` lists ``data/...``, never ``database/...``); zero-byte keys
ending in ``/`` are the folder markers of the S3 console and are skipped. The transfer manager runs the downloads
in parallel (``max_concurrency``; large objects in ranged parts) into files staging opened itself (temporary names
created relative to checked directories, `staging.Destination`); it is told each object's size and listed ETag, so
it sends no HeadObject, and every GetObject carries ``If-Match`` with that ETag: what lands on disk is exactly the
object the manifest records, or the file fails ("changed since it was listed"). boto3 finds its endpoint,
credentials and region by itself (``AWS_ENDPOINT_URL`` included). An object written or deleted while it is staged is
looked up again and downloaded again, or reported vanished (`S3Source.copy_all`).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

from trainops.aws.clients import client_config, client_factory_from_session, error_code, translate_client_error
from trainops.aws.s3 import parse_s3_uri
from trainops.backends.hostfs.stage_names import refusal_reason
from trainops.backends.hostfs.stage_sources import Refusal, SourceFile
from trainops.errors import JobFailed, Problem, SpecError


class S3Source:
    """The objects under an S3 prefix."""

    def __init__(self, uri: str, bucket: str, prefix: str, client: Any, workers: int):
        from botocore.exceptions import BotoCoreError, ClientError
        from s3transfer.exceptions import S3DownloadFailedError

        self.uri, self.bucket, self.prefix, self.client, self.workers = uri, bucket, prefix, client, workers
        #: What the manifest records as the source: the same prefix with or without its trailing slash.
        self.identity = f"s3://{bucket}/{prefix}"
        # A failed download fails that file only; the others go on.
        self.failure_types: tuple[type[BaseException], ...] = (OSError, BotoCoreError, ClientError,
                                                               S3DownloadFailedError)

    @classmethod
    def open(cls, uri: str, client_factory: Callable[[str], Any] | None, workers: int) -> S3Source:
        bucket, key = parse_s3_uri(uri, "source")
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        if client_factory is None:
            import boto3


            # One connection per concurrent request: botocore's default pool of 10 would make the others wait.
            config = client_config(max_pool_connections=max(10, workers))
            client_factory = client_factory_from_session(boto3.session.Session(), config)
        return cls(uri, bucket, prefix, client_factory("s3"), workers)

    def close(self) -> None:
        """Nothing to release (the client's connections close with it)."""

    def list_files(self) -> tuple[list[SourceFile], list[Refusal]]:
        """Every object under the prefix. Raises `SpecError` when the bucket does not exist or nothing is there."""
        from botocore.exceptions import BotoCoreError, ClientError


        files: list[SourceFile] = []
        refused: list[Refusal] = []
        markers = 0
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
                for record in page.get("Contents", []):
                    key, size = record["Key"], int(record.get("Size", 0))
                    name = key[len(self.prefix):]
                    reason = refusal_reason(name)
                    if (name == "" or name.endswith("/")) and not size:  # a folder marker (the prefix's own too)
                        markers += 1
                    elif reason is not None:
                        refused.append(Refusal(name, reason))
                    elif name.endswith("/"):
                        refused.append(Refusal(name, "a key ending in '/' holds data; it cannot be a file name"))
                    else:
                        files.append(SourceFile(name, size, str(record.get("ETag", "")), key,
                                                modified=_nanoseconds(record.get("LastModified"), 0)))
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

    def copy_all(self, items: list[SourceFile], destination: Any) -> None:
        """Download ``items`` into ``destination`` (a `staging.Destination`), at most ``workers`` requests at once.

        An object that changes after it was listed (its ETag no longer matches, or it is another size) is looked up
        again and downloaded again, up to `CHANGE_ROUNDS` rounds (reported in ``changed``); one deleted meanwhile is
        reported in ``vanished``, not as a failure: what a stage copies is the prefix as it is, not as it was."""
        pending = items
        for round_number in range(1, CHANGE_ROUNDS + 1):
            moved = self._copy_round(pending, destination, retry=round_number < CHANGE_ROUNDS)
            if not moved:
                return
            pending = self._looked_up_again(moved, destination)

    def _looked_up_again(self, moved: list[SourceFile], destination: Any) -> list[SourceFile]:
        """The objects that moved under the stage, as they are now (HeadObject); those gone are reported vanished."""
        from botocore.exceptions import ClientError


        again: list[SourceFile] = []
        for item in moved:
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=item.location)
            except ClientError as error:
                if error_code(error) in ("404", "NoSuchKey", "NotFound"):
                    destination.report.vanished.append(item.name)
                    destination.progress.advance(item.size)
                    continue
                destination.fail(item, f"changed while staged, then could not be looked up again: {error}")
                continue
            destination.report.changed.append(item.name)
            again.append(SourceFile(item.name, int(head.get("ContentLength", 0)), str(head.get("ETag", "")),
                                    item.location, modified=_nanoseconds(head.get("LastModified"), item.modified)))
        return again

    def _copy_round(self, items: list[SourceFile], destination: Any, retry: bool) -> list[SourceFile]:
        """One pass of downloads; returns the items that changed or vanished under it (with ``retry``; without, they
        fail)."""
        from boto3.s3.transfer import TransferConfig
        from s3transfer.manager import TransferManager
        from s3transfer.subscribers import BaseSubscriber

        class Manager(TransferManager):
            # If-Match is what ranged parts already send (with the ETag we provide); allowed here for whole objects.
            ALLOWED_DOWNLOAD_ARGS = [*TransferManager.ALLOWED_DOWNLOAD_ARGS, "IfMatch"]

        class Known(BaseSubscriber):
            """Gives the transfer the listed size and ETag: no HeadObject per object."""

            def __init__(self, item: SourceFile):
                self.item = item

            def on_queued(self, future: Any, **kwargs: Any) -> None:
                future.meta.provide_transfer_size(self.item.size)
                future.meta.provide_object_etag(self.item.fingerprint)

        config = TransferConfig(max_concurrency=self.workers, use_threads=True)
        # Each download in flight holds an open temporary file: at most this many at once.
        window: collections.deque[tuple[Any, SourceFile, Any, Any]] = collections.deque()
        limit = max(64, 8 * self.workers)
        moved: list[SourceFile] = []

        def finish(future: Any, item: SourceFile, handle: Any, created: Any) -> None:
            try:
                future.result()
                handle.flush()
                written = os.fstat(handle.fileno()).st_size
                if written != item.size:
                    raise _Moved(f"the object is {written} bytes now, {item.size} when it was listed")
                os.utime(handle.fileno(), ns=(item.modified, item.modified))
            except self.failure_types as error:
                handle.close()
                destination.discard(created)
                if retry and _moved(error):
                    moved.append(item)
                else:
                    destination.fail(item, _download_error(error))
                return
            handle.close()
            destination.commit(created, item, written, item.fingerprint, item.modified)

        try:
            with Manager(self.client, config) as manager:
                for item in items:
                    created = destination.create(item)
                    if created is None:
                        continue
                    handle = os.fdopen(created.descriptor, "wb")
                    future = manager.download(self.bucket, item.location, handle,
                                              extra_args={"IfMatch": item.fingerprint}, subscribers=[Known(item)])
                    window.append((future, item, handle, created))
                    while len(window) >= limit:
                        finish(*window[0])
                        window.popleft()
                while window:
                    finish(*window[0])
                    window.popleft()
        finally:  # the manager has stopped its threads: nothing writes to these any more
            for _, _, handle, created in window:
                handle.close()
                destination.discard(created)
        return moved


def _nanoseconds(modified: Any, default: int) -> int:
    """An object's LastModified (a datetime, from ListObjectsV2 or HeadObject) as the nanoseconds a staged file's
    mtime is set to; ``default`` when S3 gave none."""
    if modified is None:
        return default
    return int(modified.timestamp()) * 10**9 + modified.microsecond * 1000


#: How many times an object that keeps changing under a stage is looked up and downloaded again before it fails.
CHANGE_ROUNDS = 3


class _Moved(OSError):
    """The object downloaded is not the one listed (another size): it changed under the stage."""


def _changed(error: BaseException) -> bool:
    """Whether a download failed because the object is not the one listed: a failed If-Match (a ClientError, or
    s3transfer's own error once it has seen one) or another size."""
    return (isinstance(error, _Moved) or error_code(error) == "PreconditionFailed"
            or "did not match expected ETag" in str(error))


def _moved(error: BaseException) -> bool:
    """Whether a download failed because the object changed (`_changed`) or vanished (404)."""
    return _changed(error) or error_code(error) in ("NoSuchKey", "404")


def _download_error(error: BaseException) -> str:
    if _changed(error):
        return f"the object kept changing while it was staged ({CHANGE_ROUNDS} tries); stage again once it is written"
    return f"download failed: {error}"
