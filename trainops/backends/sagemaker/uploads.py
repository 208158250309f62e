"""Putting code into S3 for a training job: the user's source directory and the trainops runtime.

Two shapes, for the two launchers (docs/contracts.md section 3):

- ``launcher: trainops``: the source directory as individual objects under a prefix (an input channel named
  ``trainops_code``), and the runtime (`upload_runtime`) as another channel the container puts on ``PYTHONPATH``
  before running ``python3 -m trainops.runtime launch``;
- ``launcher: toolkit``: the SageMaker Python SDK's ``sourcedir.tar.gz`` (`upload_source_tarball`), named by the
  ``sagemaker_submit_directory`` hyperparameter.

Both are deterministic: the same tree gives the same keys and the same bytes (the tarball has fixed times, owners
and order), so re-submitting after a retry uploads identical objects. ``__pycache__`` and ``.git`` are skipped, and
so are symbolic links that point outside the directory (they would upload files the user never meant to ship).
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.aws.s3 import parse_s3_uri
from trainops.backends.request.code import (  # noqa: F401 - what the uploads carry, re-exported
    SKIPPED_DIRECTORIES,
    SOURCE_TARBALL_NAME,
    code_files,
    list_files,
    runtime_files,
    source_tarball_bytes,
)
from trainops.backends.request.render import is_s3_source
from trainops.errors import JobFailed, Problem, SpecError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadResult:
    """Where an upload went: the S3 URI (prefix or object), the keys written (sorted) and the bytes sent."""

    uri: str
    keys: list[str] = field(default_factory=list)
    total_bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def _put(client: Any, bucket: str, key: str, body: bytes) -> None:
    from botocore.exceptions import ClientError

    try:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    except ClientError as error:
        if error_code(error) == "NoSuchBucket":
            raise JobFailed(f"S3 bucket {bucket!r} does not exist; create it or choose another bucket") from error
        raise translate_client_error(error, f"PutObject s3://{bucket}/{key}") from error


def _upload_tree(factory: ClientFactory, files: list[tuple[Path, str]], s3_prefix: str, field_name: str
                 ) -> UploadResult:
    bucket, key_prefix = parse_s3_uri(s3_prefix, field_name)
    key_prefix = key_prefix.strip("/")
    client = factory("s3")
    keys: list[str] = []
    total = 0
    for path, relative in files:
        key = f"{key_prefix}/{relative}" if key_prefix else relative
        # Files of a code directory are small: one PutObject each keeps the upload simple and its order fixed.
        body = path.read_bytes()
        _put(client, bucket, key, body)
        keys.append(key)
        total += len(body)
    return UploadResult(uri=s3_prefix.rstrip("/"), keys=keys, total_bytes=total)


def upload_source_dir(factory: ClientFactory, source_dir: str | os.PathLike[str], s3_prefix: str,
                      field_name: str = "source_dir", ignore_patterns: list[str] | None = None) -> UploadResult:
    """Upload every file under ``source_dir`` as its own object under ``s3_prefix`` (relative paths kept).

    For the trainops launcher's code channel. Returns the keys written, sorted.
    """
    files, skipped = list_files(source_dir, field_name, ignore_patterns)
    result = _upload_tree(factory, files, s3_prefix, "s3_prefix")
    return UploadResult(uri=result.uri, keys=result.keys, total_bytes=result.total_bytes, skipped=skipped)


def upload_source_tarball(factory: ClientFactory, source_dir: str | os.PathLike[str], s3_uri: str,
                          dependencies: list[str] | tuple[str, ...] = ()) -> UploadResult:
    """Upload ``source_dir`` as one ``sourcedir.tar.gz`` object at ``s3_uri`` (the toolkit launcher's code).

    ``s3_uri`` names the object itself (``s3://bucket/job/source/sourcedir.tar.gz``); the same URI goes into the
    ``sagemaker_submit_directory`` hyperparameter.
    """
    body = source_tarball_bytes(source_dir, dependencies)
    bucket, key = parse_s3_uri(s3_uri, "s3_uri")
    if not key or key.endswith("/"):
        raise SpecError(Problem("s3_uri", f"{s3_uri!r} names a prefix; name the object, e.g. "
                                          f".../{SOURCE_TARBALL_NAME}"))
    _put(factory("s3"), bucket, key, body)
    return UploadResult(uri=s3_uri, keys=[key], total_bytes=len(body))


def upload_runtime(factory: ClientFactory, s3_prefix: str) -> UploadResult:
    """Upload the trainops runtime under ``s3_prefix`` so that the prefix, mounted as a channel, is a PYTHONPATH root
    (``<channel>/trainops/runtime/...``) for ``python3 -m trainops.runtime launch``."""
    return _upload_tree(factory, runtime_files(), s3_prefix, "s3_prefix")


def upload_job_code(factory: ClientFactory, spec: Any, locations: Any, launcher: str) -> list[UploadResult]:
    """Put what the rendered request's code channels point at into S3, for `spec` run by `launcher`.

    An ``s3://`` source_dir is an uploaded tarball and the request names it as it is, so nothing of the user's code
    is uploaded; the trainops launcher's runtime channel is uploaded in every case (the container has no trainops).
    ``locations`` is the job's `trainops.backends.request.render.ArtifactLocations`.
    """
    results = []
    if launcher == "trainops":
        if spec.source_dir and not is_s3_source(spec.source_dir):
            results.append(upload_source_dir(factory, spec.source_dir, locations.code_prefix,
                                             ignore_patterns=getattr(spec, "ignore_patterns", None)))
            for index, dependency in enumerate(getattr(spec, "dependencies", None) or []):
                prefix = f"{locations.code_prefix.rstrip('/')}/{Path(dependency).name}/"
                results.append(upload_source_dir(factory, dependency, prefix, f"dependencies.{index}"))
        results.append(upload_runtime(factory, locations.runtime_prefix))
    elif spec.source_dir and not is_s3_source(spec.source_dir):
        results.append(upload_source_tarball(factory, spec.source_dir, locations.source_tarball,
                                             getattr(spec, "dependencies", None) or ()))
    return results
