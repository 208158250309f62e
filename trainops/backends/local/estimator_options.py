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
  (`trainops.backends.local.container.container_argv`).

Recorded in the request, not emulated (said in the job's log): SageMaker's infra check and remote debugging need
SageMaker's instances; a training plan, UltraServer placement, a private registry's access mode and session-tag
chaining have no meaning on this machine.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trainops.backends.local.artifacts import _upload, local_output_root
from trainops.backends.local.layout import HostLayout
from trainops.backends.local.paths import child
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


def _copy_tree(source: Path, target: Path) -> None:
    for path, relative in _regular_files(source):
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)


def _place_tree(source: Path, target: Path) -> None:
    """Copy `source`'s regular files to `target` through a temporary directory renamed into place, so a reader never
    sees half a tree under the final name."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        _copy_tree(source, temporary)
        if target.exists():
            shutil.rmtree(target)
        os.replace(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def write_outputs_uncompressed(output_path: str | None, job_name: str, first_host: HostLayout, job_dir: Path,
                               s3_factory: Callable[[str], Any] | None = None) -> tuple[str, str]:
    """CompressionType NONE, as SageMaker's uncompressed upload mode: host 1's model files under
    ``<output_path>/<job>/output/model/`` and its output/data files under ``.../output/data/`` (SageMaker uploads
    both uncompressed in that mode); returns (model location, output data location), prefixes ending in a slash."""
    base = child(local_output_root(output_path, job_dir), job_name) / "output"
    trees = {"model": first_host.model_dir, "data": first_host.output_dir / "data"}
    for name, source in trees.items():
        _place_tree(source, base / name)
    if output_path and output_path.startswith("s3://"):
        prefix = f"{output_path.rstrip('/')}/{job_name}/output"
        for name in trees:
            for path, relative in _regular_files(base / name):
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
        for path, relative in _regular_files(source):
            if target.startswith("s3://"):
                _upload(path, f"{target.rstrip('/')}/{relative}", s3_factory)
            else:
                destination = Path(local_path(target)) / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, destination)
            copied += 1
    logger.info("[trainops] TensorBoard: %d file(s) copied to %s", copied, target)
    return copied


#: What the code's upload leaves out (trainops.backends.sagemaker.uploads skips the same directories).
SKIPPED_DIRECTORIES = frozenset({"__pycache__", ".git"})


def code_with_dependencies_path(job_dir: Path) -> Path:
    """Where `code_with_dependencies` lays out the code channel of a job with dependencies."""
    return job_dir / "code"


def code_with_dependencies(code_dir: Path, dependencies: list[str], job_dir: Path) -> Path:
    """The trainops launcher's code channel: `code_dir` itself, or with `dependencies` a copy laid out as the upload
    lays it out (the code's files at the root, each dependency under its own name; links not copied)."""
    if not dependencies:
        return code_dir
    target = code_with_dependencies_path(job_dir)
    shutil.rmtree(target, ignore_errors=True)
    sources = [(code_dir, target), *((Path(item), target / Path(item).name) for item in dependencies)]
    for source, destination in sources:
        for path, relative in _regular_files(source):
            if SKIPPED_DIRECTORIES.intersection(relative.split("/")[:-1]):
                continue
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, destination / relative)  # keeps the execute bit, as the upload does
    return target
