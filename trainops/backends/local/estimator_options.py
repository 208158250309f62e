"""What the local backend does with the SDK estimator options of a request (issue 25), and what it cannot do.

Honoured, as SageMaker does them:
- ``OutputDataConfig.CompressionType NONE`` (`disable_output_compression`): SageMaker's uncompressed upload mode
  (https://docs.aws.amazon.com/sagemaker/latest/dg/model-train-storage-uncompressed.html uploads "model and data
  outputs" uncompressed): host 1's model directory is copied file by file to ``<output_path>/<job>/output/model/``
  and its output/data to ``.../output/data/`` (uploaded under those prefixes for an s3:// output path); neither
  model.tar.gz nor output.tar.gz is written;
- ``TensorBoardOutputConfig``: each host's ``LocalPath`` (default /opt/ml/output/tensorboard) is copied to
  ``S3OutputPath`` itself (a local path, file:// or s3://) when the job ends, whatever its status. SageMaker syncs
  while the job runs; locally the files are there once it ends;
- `dependencies` travel in the code (the trainops launcher's code channel, the toolkit's sourcedir.tar.gz), the model
  channel of `model_uri` is an ordinary channel, and ContainerEntrypoint/ContainerArguments start each host
  (`trainops.backends.hostfs.contract_dir.container_argv`).

Recorded in the request, not emulated (said in the job's log): SageMaker's infra check and remote debugging need
SageMaker's instances; a training plan, UltraServer placement, a private registry's access mode and session-tag
chaining have no meaning on this machine.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from trainops.backends.hostfs.artifacts import _upload, output_directory
from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.hostfs.safe_fs import (
    DirectoryCache,
    copy_tree_at,
    open_destination,
    open_directory,
    open_path,
    open_regular,
    write_file_at,
)
from trainops.backends.request.code import is_ignored
from trainops.spec.inputs import local_path

CONTAINER_BASE = "/opt/ml"
DEFAULT_TENSORBOARD = "/opt/ml/output/tensorboard"
logger = logging.getLogger(__name__)

#: Request fields the local backend records and does not act on, with what the log says.
NOT_EMULATED = {
    "InfraCheckConfig": "SageMaker's infra check (enable_infra_check) runs on SageMaker's instances before "
                        "training: recorded, not emulated here",
    "RemoteDebugConfig": "remote debugging (enable_remote_debug) is a session into a SageMaker instance: recorded, "
                         "not emulated here (the hosts are processes on this machine)",
}
NO_MEANING_HERE = {
    "TrainingPlanArn": "training_plan", "InstancePlacementConfig": "instance_placement_config",
    "TrainingImageConfig": "training_repository_access_mode", "SessionChainingConfig": "enable_session_tag_chaining",
}


def unemulated_lines(request: dict[str, Any]) -> list[str]:
    """The log lines saying which of the request's settings the local backend does not emulate."""
    lines = [f"[trainops] {NOT_EMULATED[key]}" for key in NOT_EMULATED
             if any((request.get(key) or {}).values())]
    resources = request.get("ResourceConfig") or {}
    present = [field for key, field in NO_MEANING_HERE.items()
               if key in resources or key in request or key in (request.get("AlgorithmSpecification") or {})]
    if present:
        lines.append(f"[trainops] {', '.join(present)}: recorded in the request; no meaning on this machine")
    return lines


def is_uncompressed(request: dict[str, Any]) -> bool:
    return (request.get("OutputDataConfig") or {}).get("CompressionType") == "NONE"


def _regular_files(root: Path) -> Iterable[tuple[Path, str]]:
    """Every regular file under `root` (links are neither followed nor copied), as (path, relative posix name)."""
    for directory, subdirectories, names in os.walk(root):
        current = Path(directory)
        subdirectories[:] = sorted(name for name in subdirectories if not (current / name).is_symlink())
        for name in sorted(names):
            path = current / name
            if path.is_file() and not path.is_symlink():
                yield path, path.relative_to(root).as_posix()


def _skip(path: str, why: str) -> None:
    """Links and special files of a host's directories are not outputs: left out, as they always were, and said."""
    logger.info("[trainops] %s %s: not copied to the output location", path, why)


def _place_tree(source: Path, directory: int, name: str) -> None:
    """Copy `source`'s regular files to ``name`` in the open output ``directory`` through a directory of an
    unguessable name renamed into place (`safe_fs`: nothing followed or written through a link, a reader never sees
    half a tree under the final name); an earlier tree of that name is moved aside, then removed."""
    import secrets

    temporary = f".{name}.{secrets.token_hex(8)}.partial"
    os.mkdir(temporary, 0o755, dir_fd=directory)  # exclusive: a name planted meanwhile fails it
    try:
        target = open_directory(temporary, directory)
        try:
            from_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                copy_tree_at(from_fd, target, _skip, str(source))
            finally:
                os.close(from_fd)
        finally:
            os.close(target)
        old = f".{name}.{secrets.token_hex(8)}.old"
        try:
            os.rename(name, old, src_dir_fd=directory, dst_dir_fd=directory)
        except FileNotFoundError:
            old = ""
        os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        if old:
            shutil.rmtree(old, dir_fd=directory, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temporary, dir_fd=directory, ignore_errors=True)
        raise


def write_outputs_uncompressed(output_path: str | None, job_name: str, first_host: HostLayout, job_dir: Path,
                               s3_factory: Callable[[str], Any] | None = None) -> tuple[str, str]:
    """CompressionType NONE, as SageMaker's uncompressed upload mode: host 1's model files under
    ``<output_path>/<job>/output/model/`` and its output/data files under ``.../output/data/`` (SageMaker uploads
    both uncompressed in that mode); returns (model location, output data location), prefixes ending in a slash."""
    trees = {"model": first_host.model_dir, "data": first_host.output_dir / "data"}
    base, directory = output_directory(output_path, job_name, job_dir)
    try:
        for name, source in trees.items():
            _place_tree(source, directory, name)
    finally:
        os.close(directory)
    if output_path and output_path.startswith("s3://"):
        prefix = f"{output_path.rstrip('/')}/{job_name}/output"
        for name, source in trees.items():  # from the host's own directories: what was placed is their copy
            for path, relative in _regular_files(source):
                _upload(path, f"{prefix}/{name}/{relative}", s3_factory)
        return f"{prefix}/model/", f"{prefix}/data/"
    return f"{base / 'model'}{os.sep}", f"{base / 'data'}{os.sep}"


def _host_path(container_path: str, layout: HostLayout) -> Path:
    if container_path == CONTAINER_BASE or container_path.startswith(CONTAINER_BASE + "/"):
        return layout.base_dir / container_path[len(CONTAINER_BASE):].lstrip("/")
    return Path(container_path)


def sync_tensorboard(request: dict[str, Any], layouts: list[HostLayout],
                     s3_factory: Callable[[str], Any] | None) -> int:
    """Copy every host's TensorBoard directory to TensorBoardOutputConfig.S3OutputPath; returns the files copied."""
    config = request.get("TensorBoardOutputConfig")
    if not config:
        return 0
    target = str(config["S3OutputPath"])
    copied = 0
    for layout in layouts:
        source = _host_path(str(config.get("LocalPath") or DEFAULT_TENSORBOARD), layout)
        if not source.is_dir():
            continue
        if target.startswith("s3://"):
            for path, relative in _regular_files(source):
                _upload(path, f"{target.rstrip('/')}/{relative}", s3_factory)
                copied += 1
        else:
            copied += _copy_into(source, Path(local_path(target)))
    logger.info("[trainops] TensorBoard: %d file(s) copied to %s", copied, target)
    return copied


def _copy_into(source: Path, target: Path) -> int:
    """Copy `source`'s regular files into the directory `target` (which other users may write: `safe_fs`, each file
    written under an unguessable name and renamed within its open directory, no link followed); returns how many."""
    root = open_destination(target)
    directories = DirectoryCache(root)
    copied = 0
    try:
        from_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for _, relative in _regular_files(source):
                parent, _, name = relative.rpartition("/")
                into, within = directories.open(parent, create=True, mode=0o755), open_path(
                    parent.split("/") if parent else [], from_fd)
                try:
                    write_file_at(into, name, functools.partial(_copy_out, within, name))
                finally:
                    os.close(within)
                copied += 1
        finally:
            os.close(from_fd)
    finally:
        directories.close()
        os.close(root)
    return copied


def _copy_out(directory: int, name: str, handle: BinaryIO) -> None:
    source = open_regular(name, dir_fd=directory)
    with os.fdopen(source, "rb") as reader:
        shutil.copyfileobj(reader, handle, 1024 * 1024)


#: What the code's upload leaves out (trainops.backends.sagemaker.uploads skips the same directories).
SKIPPED_DIRECTORIES = frozenset({"__pycache__", ".git"})


def code_with_dependencies_path(job_dir: Path) -> Path:
    """Where `code_with_dependencies` lays out the code channel of a job with dependencies."""
    return job_dir / "code"


def code_with_dependencies(code_dir: Path, dependencies: list[str], job_dir: Path,
                           ignore_patterns: list[str] | None = None) -> Path:
    """The trainops launcher's code channel: `code_dir` itself, or with `dependencies` or `ignore_patterns` (v3's
    SourceCode.ignore_patterns) a copy laid out as the upload lays it out (the code's files at the root, each
    dependency under its own name; links not copied; names the patterns match left out of the code's)."""
    if not dependencies and ignore_patterns is None:
        return code_dir

    target = code_with_dependencies_path(job_dir)
    shutil.rmtree(target, ignore_errors=True)
    sources = [(code_dir, target), *((Path(item), target / Path(item).name) for item in dependencies)]
    for source, destination in sources:
        for path, relative in _regular_files(source):
            if SKIPPED_DIRECTORIES.intersection(relative.split("/")[:-1]):
                continue
            if source is code_dir and ignore_patterns is not None and any(
                    is_ignored(part, ignore_patterns) for part in relative.split("/")):
                continue
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, destination / relative)  # keeps the execute bit, as the upload does
    return target
