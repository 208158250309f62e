"""Packing a local job's results the way SageMaker does: `<output_path>/<job>/output/model.tar.gz` (host 1's model
directory) and `output.tar.gz` (its output/data). Written under a temporary name and renamed, so a reader never sees
half an archive under the final name, even when the disk fills up or is read-only."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from trainops.backends.local.layout import HostLayout
from trainops.backends.local.paths import child
from trainops.spec.inputs import local_path
from trainops.spec.job import JobSpec


def local_output_root(spec: JobSpec, job_dir: Path) -> Path:
    """Where archives are written on this machine: the spec's local output_path, else beside the jobs."""
    if spec.output_path and not spec.output_path.startswith("s3://"):
        return Path(local_path(spec.output_path)).expanduser().resolve()
    if spec.output_path:
        return job_dir / "s3-staging"  # packed here, then uploaded
    return job_dir.parent.parent / "output"  # <workdir>/jobs/<job> -> <workdir>/output


def _pack(source: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    temporary = archive.with_name(f".{archive.name}.{os.getpid()}.partial")
    try:
        with tarfile.open(temporary, "w:gz") as tar:
            for item in sorted(source.iterdir()):
                tar.add(item, arcname=item.name)
        os.replace(temporary, archive)
    finally:
        if temporary.exists():
            temporary.unlink()


def output_location_problem(spec: JobSpec, job_name: str, job_dir: Path) -> str | None:
    """Why the archives could not be written where they go (a read-only disk, a file in the way), found before the
    job runs rather than after hours of training; None when a file can be created there."""
    base = child(local_output_root(spec, job_dir), job_name) / "output"  # never outside the output root
    probe = base / f".write-test.{os.getpid()}"
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        return f"the output location {base} cannot be written ({error.strerror or error}): nothing was run"
    return None


def pack_outputs(spec: JobSpec, job_name: str, first_host: HostLayout, job_dir: Path) -> tuple[str, str]:
    """Pack host 1's model and output data; returns the two artifact locations (local paths or s3:// URIs)."""
    base = child(local_output_root(spec, job_dir), job_name) / "output"  # never outside the output root
    model, output = base / "model.tar.gz", base / "output.tar.gz"
    _pack(first_host.model_dir, model)
    _pack(first_host.output_dir / "data", output)
    if spec.output_path and spec.output_path.startswith("s3://"):
        return _upload(model, f"{spec.output_path.rstrip('/')}/{job_name}/output/model.tar.gz"), _upload(
            output, f"{spec.output_path.rstrip('/')}/{job_name}/output/output.tar.gz")
    return str(model), str(output)


def _upload(path: Path, uri: str) -> str:
    import boto3

    bucket, _, key = uri[len("s3://"):].partition("/")
    boto3.client("s3").upload_file(str(path), bucket, key)
    return uri
