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

import gzip
import io
import logging
import os
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.aws.s3 import parse_s3_uri
from trainops.errors import JobFailed, Problem, SpecError

logger = logging.getLogger(__name__)

#: Directory names never uploaded: caches and version control.
SKIPPED_DIRECTORIES = frozenset({"__pycache__", ".git"})

#: The name of the SDK's script-mode archive, which the toolkit launcher downloads and unpacks into /opt/ml/code.
SOURCE_TARBALL_NAME = "sourcedir.tar.gz"


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


def list_files(root: str | os.PathLike[str], field_name: str = "source_dir") -> tuple[list[tuple[Path, str]], list[str]]:
    """Every regular file under ``root`` as ``(path, relative posix name)``, sorted by name, and what was skipped.

    Skips `SKIPPED_DIRECTORIES`, symbolic links to directories (not followed), links that point outside ``root``
    and anything that is not a regular file. Raises `SpecError` naming ``field_name`` when ``root`` is not a
    directory.
    """
    base = Path(root)
    if not base.is_dir():
        raise SpecError(Problem(field_name, f"{str(root)!r} is not a directory; give the directory holding your code"))
    resolved_base = base.resolve()
    files: list[tuple[Path, str]] = []
    skipped: list[str] = []
    for directory, subdirectories, names in os.walk(base):
        current = Path(directory)
        kept = []
        for name in subdirectories:
            path = current / name
            if name in SKIPPED_DIRECTORIES:
                continue
            if path.is_symlink():
                skipped.append(path.relative_to(base).as_posix())
                continue
            kept.append(name)
        subdirectories[:] = sorted(kept)
        for name in names:
            path = current / name
            relative = path.relative_to(base).as_posix()
            try:
                target = path.resolve()
                outside = path.is_symlink() and not target.is_relative_to(resolved_base)
                regular = target.is_file()
            except (OSError, RuntimeError):  # a link loop, or a file that vanished while we walked
                outside, regular = True, False
            if outside or not regular:
                skipped.append(relative)
                continue
            files.append((path, relative))
    for name in skipped:
        logger.warning("not uploading %s: a link out of the directory or not a regular file", name)
    return sorted(files, key=lambda item: item[1]), sorted(skipped)


def _put(client: Any, bucket: str, key: str, body: bytes) -> None:
    from botocore.exceptions import ClientError

    try:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    except ClientError as error:
        if error_code(error) == "NoSuchBucket":
            raise JobFailed(f"S3 bucket {bucket!r} does not exist; create it or choose another bucket") from error
        raise translate_client_error(error, f"PutObject s3://{bucket}/{key}") from error


def _upload_tree(factory: ClientFactory, files: list[tuple[Path, str]], s3_prefix: str, field_name: str) -> UploadResult:
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


def upload_source_dir(factory: ClientFactory, source_dir: str | os.PathLike[str], s3_prefix: str) -> UploadResult:
    """Upload every file under ``source_dir`` as its own object under ``s3_prefix`` (relative paths kept).

    For the trainops launcher's code channel. Returns the keys written, sorted.
    """
    files, skipped = list_files(source_dir)
    result = _upload_tree(factory, files, s3_prefix, "s3_prefix")
    return UploadResult(uri=result.uri, keys=result.keys, total_bytes=result.total_bytes, skipped=skipped)


def code_files(source_dir: str | os.PathLike[str], dependencies: list[str] | tuple[str, ...] = ()
               ) -> list[tuple[Path, str]]:
    """The files of the code: ``source_dir``'s at the root and each of the spec's ``dependencies`` directories under
    its own name, as the SDK packs them (``dependencies=['libs/common']`` -> ``common/...``)."""
    files, _ = list_files(source_dir)
    for index, dependency in enumerate(dependencies):
        name = Path(dependency).name
        extra, _ = list_files(dependency, f"dependencies.{index}")
        files += [(path, f"{name}/{relative}") for path, relative in extra]
    return sorted(files, key=lambda item: item[1])


def source_tarball_bytes(source_dir: str | os.PathLike[str], dependencies: list[str] | tuple[str, ...] = ()) -> bytes:
    """The ``sourcedir.tar.gz`` of a directory (and the spec's ``dependencies``), byte-for-byte the same for the same
    files.

    Members are at the archive root (as the SDK writes them), sorted, with time 0, owner 0 and modes normalised to
    0644 or 0755 (executable files keep their execute bit).
    """
    files = code_files(source_dir, dependencies)
    buffer = io.BytesIO()
    # The gzip header carries a time too: fix it, or two archives of the same tree differ.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed:
        with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for path, relative in files:
                data = path.read_bytes()
                info = tarfile.TarInfo(relative)
                info.size = len(data)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload_source_tarball(factory: ClientFactory, source_dir: str | os.PathLike[str], s3_uri: str,
                          dependencies: list[str] | tuple[str, ...] = ()) -> UploadResult:
    """Upload ``source_dir`` as one ``sourcedir.tar.gz`` object at ``s3_uri`` (the toolkit launcher's code).

    ``s3_uri`` names the object itself (``s3://bucket/job/source/sourcedir.tar.gz``); the same URI goes into the
    ``sagemaker_submit_directory`` hyperparameter.
    """
    body = source_tarball_bytes(source_dir, dependencies)
    bucket, key = parse_s3_uri(s3_uri, "s3_uri")
    if not key or key.endswith("/"):
        raise SpecError(Problem("s3_uri", f"{s3_uri!r} names a prefix; name the object, e.g. .../{SOURCE_TARBALL_NAME}"))
    _put(factory("s3"), bucket, key, body)
    return UploadResult(uri=s3_uri, keys=[key], total_bytes=len(body))


def runtime_files() -> list[tuple[Path, str]]:
    """The files of the trainops package a training container needs: ``trainops/__init__.py`` and
    ``trainops/runtime/**`` (stdlib-only, so it runs in any image), as ``(path, "trainops/...")`` pairs, sorted."""
    import trainops

    package = Path(trainops.__file__).resolve().parent
    files = [(package / "__init__.py", "trainops/__init__.py")]
    runtime, _ = list_files(package / "runtime", "runtime")
    files += [(path, f"trainops/runtime/{relative}") for path, relative in runtime if not relative.endswith(".pyc")]
    return sorted(files, key=lambda item: item[1])


def upload_runtime(factory: ClientFactory, s3_prefix: str) -> UploadResult:
    """Upload the trainops runtime under ``s3_prefix`` so that the prefix, mounted as a channel, is a PYTHONPATH root
    (``<channel>/trainops/runtime/...``) for ``python3 -m trainops.runtime launch``."""
    return _upload_tree(factory, runtime_files(), s3_prefix, "s3_prefix")


def upload_job_code(factory: ClientFactory, spec: Any, locations: Any, launcher: str) -> list[UploadResult]:
    """Put what the rendered request's code channels point at into S3, for `spec` run by `launcher`.

    An ``s3://`` source_dir is an uploaded tarball and the request names it as it is, so nothing of the user's code
    is uploaded; the trainops launcher's runtime channel is uploaded in every case (the container has no trainops).
    ``locations`` is the job's `trainops.backends.sagemaker.render.ArtifactLocations`.
    """
    from trainops.backends.sagemaker.render import is_s3_source

    results = []
    if launcher == "trainops":
        if spec.source_dir and not is_s3_source(spec.source_dir):
            results.append(upload_source_dir(factory, spec.source_dir, locations.code_prefix))
            for dependency in getattr(spec, "dependencies", None) or []:
                prefix = f"{locations.code_prefix.rstrip('/')}/{Path(dependency).name}/"
                results.append(upload_source_dir(factory, dependency, prefix))
        results.append(upload_runtime(factory, locations.runtime_prefix))
    elif spec.source_dir and not is_s3_source(spec.source_dir):
        results.append(upload_source_tarball(factory, spec.source_dir, locations.source_tarball,
                                             getattr(spec, "dependencies", None) or ()))
    return results
