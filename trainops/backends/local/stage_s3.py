"""Staging from S3: list the prefix, download with boto3's own transfer manager (s3transfer).

The prefix is read as a directory (``s3://b/data`` lists ``data/...``, never ``database/...``); zero-byte keys
ending in ``/`` are the folder markers of the S3 console and are skipped. The transfer manager runs the downloads
in parallel (``max_concurrency``; large objects in ranged parts) into files staging opened itself (temporary names
created relative to checked directories, `staging.Destination`); it is told each object's size and listed ETag, so
it sends no HeadObject, and every GetObject carries ``If-Match`` with that ETag: what lands on disk is exactly the
object the manifest records, or the file fails ("changed since it was listed"). boto3 finds its endpoint,
credentials and region by itself (``AWS_ENDPOINT_URL`` included).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

from trainops.backends.local.stage_names import refusal_reason
from trainops.backends.local.stage_sources import Refusal, SourceFile
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
        from trainops.aws.s3 import parse_s3_uri

        bucket, key = parse_s3_uri(uri, "source")
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        if client_factory is None:
            import boto3

            from trainops.aws.clients import client_config, client_factory_from_session

            # One connection per concurrent request: botocore's default pool of 10 would make the others wait.
            config = client_config(max_pool_connections=max(10, workers))
            client_factory = client_factory_from_session(boto3.session.Session(), config)
        return cls(uri, bucket, prefix, client_factory("s3"), workers)

    def close(self) -> None:
        """Nothing to release (the client's connections close with it)."""

    def list_files(self) -> tuple[list[SourceFile], list[Refusal]]:
        """Every object under the prefix. Raises `SpecError` when the bucket does not exist or nothing is there."""
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
                    if (name == "" or name.endswith("/")) and not size:  # a folder marker (the prefix's own too)
                        markers += 1
                    elif reason is not None:
                        refused.append(Refusal(name, reason))
                    elif name.endswith("/"):
                        refused.append(Refusal(name, "a key ending in '/' holds data; it cannot be a file name"))
                    else:
                        modified = record.get("LastModified")
                        nanoseconds = (int(modified.timestamp()) * 10**9 + modified.microsecond * 1000
                                       if modified is not None else 0)
                        files.append(SourceFile(name, size, str(record.get("ETag", "")), key, modified=nanoseconds))
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
        """Download ``items`` into ``destination`` (a `staging.Destination`), at most ``workers`` requests at once."""
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

        def finish(future: Any, item: SourceFile, handle: Any, created: Any) -> None:
            try:
                future.result()
                handle.flush()
                written = os.fstat(handle.fileno()).st_size
                if written != item.size:
                    raise OSError(f"download ended after {written} of {item.size} bytes")
                os.utime(handle.fileno(), ns=(item.modified, item.modified))
            except self.failure_types as error:
                handle.close()
                destination.discard(created)
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


def _download_error(error: BaseException) -> str:
    from trainops.aws.clients import error_code

    # A failed If-Match: a ClientError, or s3transfer's own error once it has seen one.
    if error_code(error) == "PreconditionFailed" or "did not match expected ETag" in str(error):
        return "the object changed since it was listed; stage again"
    return f"download failed: {error}"
