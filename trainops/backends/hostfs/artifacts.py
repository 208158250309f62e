"""Packing a local job's results the way SageMaker does: `<output_path>/<job>/output/model.tar.gz` (host 1's model
directory) and `output.tar.gz` (its output/data), where `output_path` is the request's OutputDataConfig.S3OutputPath
(a local path, a file:// URI, or s3://, uploaded through boto3). Written under a temporary name and renamed, so a
reader never sees half an archive under the final name, even when the disk fills up or is read-only. The output path
may be a directory other users can write: everything below it goes through `trainops.backends.hostfs.safe_fs`'s
writer (no link followed, unguessable temporaries created exclusively, renamed within the open directory)."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.hostfs.paths import safe_component
from trainops.backends.hostfs.safe_fs import new_temporary, open_destination, write_file_at
from trainops.spec.inputs import local_path

Factory = Callable[[str], Any]


def default_output_path(job_dir: Path) -> str:
    """Where a job without an output_path writes: <workdir>/output, beside the jobs (a file:// URI)."""
    # "file://" and the path as it is: Path.as_uri() percent-encodes (é, %), and local_path never decodes, so the
    # archives went to an encoded sibling of the work directory.
    return f"file://{(job_dir.parent.parent / 'output').resolve()}"  # <workdir>/jobs/<job> -> <workdir>/output


def local_output_root(output_path: str | None, job_dir: Path) -> Path:
    """Where archives are written on this machine: the local output path, else a staging directory for S3."""
    output_path = output_path or default_output_path(job_dir)
    if not output_path.startswith("s3://"):
        return Path(local_path(output_path)).expanduser().resolve()
    return job_dir / "s3-staging"  # packed here, then uploaded


def output_directory(output_path: str | None, job_name: str, job_dir: Path, create: bool = True) -> tuple[Path, int]:
    """``<output root>/<job>/output`` held open (`safe_fs.open_destination`: the output root may be shared with other
    users, so ``<job>`` and ``output`` are reached without following a link and must be this user's) and its path."""
    root = local_output_root(output_path, job_dir)
    name = safe_component(job_name)  # never outside the output root
    return root / name / "output", open_destination(root, [name, "output"], create=create)


def _pack(source: Path, directory: int, name: str) -> None:
    """Write ``source``'s entries as the archive ``name`` in the open ``directory`` (`write_file_at`: an unguessable
    temporary, then a rename within the directory)."""
    def write(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:gz") as tar:
            for item in sorted(source.iterdir()):
                tar.add(item, arcname=item.name)

    write_file_at(directory, name, write)


def output_location_problem(output_path: str | None, job_name: str, job_dir: Path) -> str | None:
    """Why the archives could not be written where they go (a read-only disk, a file in the way, a link or another
    user's directory where trainops makes its own), found before the job runs rather than after hours of training;
    None when a file can be created there."""
    base = local_output_root(output_path, job_dir) / job_name / "output"
    try:
        base, directory = output_directory(output_path, job_name, job_dir)
        try:
            temporary, descriptor = new_temporary(directory, "write-test")
            os.close(descriptor)
            os.unlink(temporary, dir_fd=directory)
        finally:
            os.close(directory)
    except OSError as error:
        return f"the output location {base} cannot be written ({error.strerror or error}): nothing was run"
    return None


def pack_outputs(output_path: str | None, job_name: str, first_host: HostLayout, job_dir: Path,
                 s3_factory: Factory | None = None) -> tuple[str, str]:
    """Pack host 1's model and output data; returns the two artifact locations (local paths or s3:// URIs)."""
    base, directory = output_directory(output_path, job_name, job_dir)
    try:
        _pack(first_host.model_dir, directory, "model.tar.gz")
        _pack(first_host.output_dir / "data", directory, "output.tar.gz")
    finally:
        os.close(directory)
    model, output = base / "model.tar.gz", base / "output.tar.gz"
    if output_path and output_path.startswith("s3://"):
        prefix = f"{output_path.rstrip('/')}/{job_name}/output"
        return (_upload(model, f"{prefix}/model.tar.gz", s3_factory),
                _upload(output, f"{prefix}/output.tar.gz", s3_factory))
    return str(model), str(output)


def _upload(path: Path, uri: str, s3_factory: Factory | None) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    if s3_factory is None:
        import boto3

        s3_factory = boto3.client
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        s3_factory("s3").upload_file(str(path), bucket, key)
    except (BotoCoreError, ClientError) as error:  # reported like a full disk: the job failed while uploading
        raise OSError(f"upload to {uri} failed: {error}") from error
    return uri
