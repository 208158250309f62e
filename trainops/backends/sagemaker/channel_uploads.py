"""Uploading a v3 spec's local channels before the job is created (`trainops.backends.request.local_channels`
says which and where). Data may be large: each file goes through boto3's managed transfer (multipart above its
threshold), not one PutObject of the file read into memory as the code's small files do."""

from __future__ import annotations

import logging
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.aws.s3 import parse_s3_uri
from trainops.backends.request.local_channels import local_channels
from trainops.errors import JobFailed

logger = logging.getLogger(__name__)


def upload_local_channels(factory: ClientFactory, spec: Any, output_path: str, job_name: str) -> list[str]:
    """Upload each local channel of ``spec`` where the rendered request points; returns the keys written. The keys
    depend on the files only, so a run again after a failed create writes the same objects."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import ClientError

    client = factory("s3")
    written = []
    for channel in local_channels(spec, output_path, job_name):
        bucket, prefix = parse_s3_uri(channel.uri, f"inputs.{channel.name}")
        prefix = prefix.rstrip("/") if channel.path.is_dir() else prefix.rsplit("/", 1)[0]
        files = channel.files()
        logger.info("[trainops] uploading channel %s: %d file(s) of %s to s3://%s/%s/", channel.name, len(files),
                    channel.path, bucket, prefix)
        for path, relative in files:
            key = f"{prefix}/{relative}"
            try:
                client.upload_file(str(path), bucket, key)
            except ClientError as error:
                if error_code(error) == "NoSuchBucket":
                    raise JobFailed(f"S3 bucket {bucket!r} does not exist; create it or choose another "
                                    "output_path") from error
                raise translate_client_error(error, f"PutObject s3://{bucket}/{key}") from error
            except S3UploadFailedError as error:
                raise JobFailed(f"uploading {path} to s3://{bucket}/{key} failed: {error}") from error
            written.append(key)
    return written
