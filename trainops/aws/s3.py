"""S3 URIs and small object reads and writes, shared by uploads, evaluation and the registry."""

from __future__ import annotations

from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.errors import JobFailed, Problem, SpecError


def parse_s3_uri(uri: str, field: str = "s3_uri") -> tuple[str, str]:
    """Split ``s3://bucket/key/prefix`` into ``("bucket", "key/prefix")``.

    Raises `SpecError` naming ``field`` when the value is not an ``s3://`` URI with a bucket.
    """
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise SpecError(Problem(field, f"{uri!r} is not an S3 URI; write it as s3://bucket/prefix"))
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise SpecError(Problem(field, f"{uri!r} has no bucket; write it as s3://bucket/prefix"))
    return bucket, key


def join_uri(prefix: str, *parts: str) -> str:
    """Join an S3 prefix and key parts with single slashes: ``join_uri("s3://b/x/", "y", "z.json")`` ->
    ``"s3://b/x/y/z.json"``."""
    pieces = [prefix.rstrip("/")] + [part.strip("/") for part in parts if part.strip("/")]
    return "/".join(pieces)


def put_bytes(factory: ClientFactory, uri: str, data: bytes, content_type: str = "application/octet-stream") -> str:
    """Write one object; return its URI. A missing bucket is reported with the fix."""
    from botocore.exceptions import ClientError

    bucket, key = parse_s3_uri(uri)
    try:
        factory("s3").put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
    except ClientError as error:
        if error_code(error) == "NoSuchBucket":
            raise JobFailed(f"S3 bucket {bucket!r} does not exist; create it or choose another bucket") from error
        raise translate_client_error(error, f"PutObject {uri}") from error
    return uri


def get_bytes(factory: ClientFactory, uri: str) -> bytes:
    """Read one object. A missing object or bucket raises `JobFailed` naming the URI."""
    from botocore.exceptions import ClientError

    bucket, key = parse_s3_uri(uri)
    try:
        response: Any = factory("s3").get_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error_code(error) in {"NoSuchKey", "NoSuchBucket", "404"}:
            raise JobFailed(f"{uri} does not exist") from error
        raise translate_client_error(error, f"GetObject {uri}") from error
    return response["Body"].read()
