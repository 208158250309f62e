"""One host's contract directory (what its container sees as /opt/ml), filled from a `CreateTrainingJob` request.

Per host, the base directory is written the way SageMaker writes /opt/ml for that request: `input/config/` holds
resourceconfig.json, inputdataconfig.json and hyperparameters.json (the request's HyperParameters as they are), every
channel of InputDataConfig is `input/data/<channel>` (the trainops code and runtime arrive as channels too, their data
found by `channels`), and `model/`, `output/data`, `checkpoints` exist. The process is the request's
ContainerEntrypoint + ContainerArguments (else the Deep Learning Container's own entrypoint, the toolkit's `train`),
run by the image's Python, with the request's Environment and a PYTHONPATH holding only what the request puts there.

The local backend runs each such host on this machine (`trainops.backends.local.container` isolates it); the slurm
backend lays one out per node under its shared directory and the node gets `SAGEMAKER_BASE_DIR`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.hostfs.safe_fs import write_atomically
from trainops.backends.request.channel_options import channel_options
from trainops.backends.request.hosts import host_groups
from trainops.errors import Problem, SpecError

CONTAINER_BASE = "/opt/ml"
LOCAL_NETWORK_INTERFACE = "lo"  # every emulated host shares this machine's loopback (gloo / NCCL bind to it)
DLC_ENTRYPOINT_MODULE = "sagemaker_training.cli.train"  # the `train` console script every framework DLC runs
DLC_TRAINING_MODULE = "sagemaker_pytorch_container.training:main"  # what the PyTorch DLC sets in its image


# --- the config files, as SageMaker writes them -----------------------------------------------------------------------

def resource_config(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    """resourceconfig.json of `host`: SageMaker's keys, hosts sorted as strings, every instance group listed."""
    members = host_groups(request)
    _, group, kind = next(member for member in members if member[0] == host)
    groups: dict[str, dict[str, Any]] = {}
    for name, group_name, instance_type in members:
        entry = groups.setdefault(group_name, {"instance_group_name": group_name, "instance_type": instance_type,
                                               "hosts": []})
        entry["hosts"].append(name)
    return {"current_host": host, "current_instance_type": kind, "current_group_name": group,
            "hosts": sorted(name for name, _, _ in members), "instance_groups": list(groups.values()),
            "network_interface_name": LOCAL_NETWORK_INTERFACE}


def input_data_config(request: Mapping[str, Any]) -> dict[str, Any]:
    """inputdataconfig.json: per channel its input mode, distribution and record wrapping (and content type)."""
    default_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    config: dict[str, Any] = {}
    for channel in request.get("InputDataConfig") or []:
        entry: dict[str, Any] = {"TrainingInputMode": channel.get("InputMode") or default_mode}
        source = channel["DataSource"]
        if "S3DataSource" in source:
            entry["S3DistributionType"] = source["S3DataSource"].get("S3DataDistributionType", "FullyReplicated")
        else:
            entry["FileSystemType"] = source["FileSystemDataSource"]["FileSystemType"]
        entry["RecordWrappingType"] = channel.get("RecordWrapperType", "None")
        if channel.get("ContentType"):
            entry["ContentType"] = channel["ContentType"]
        config[channel["ChannelName"]] = entry
    return config


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(value).encode("utf-8"), 0o644)  # an earlier run's host may have left a link


# --- one container's base directory ----------------------------------------------------------------------------------

def fill_container(request: Mapping[str, Any], host: str, base: Path, channels: Mapping[str, Path],
                   checkpoint_dir: Path, *, mount: bool = False) -> HostLayout:
    """Write `host`'s base directory from the request. With ``mount`` (the host has a mount namespace) each channel
    is an empty directory that `isolate` bind-mounts the data onto, read-only unless the channel's
    FileSystemAccessMode is rw; without, a link to the data (the fallback: writable, and a link). A ShardedByS3Key
    channel gets every N-th file of the sorted listing, as SageMaker splits a prefix's keys between hosts."""
    members = [name for name, _, _ in host_groups(request)]
    index, count = members.index(host), len(members)

    options = channel_options(request, host)
    config = base / "input" / "config"
    _write_json(config / "resourceconfig.json", resource_config(request, host))
    _write_json(config / "inputdataconfig.json", input_data_config(request))
    _write_json(config / "hyperparameters.json", dict(request.get("HyperParameters") or {}))
    distribution = {channel["ChannelName"]: channel["DataSource"].get("S3DataSource", {}).get(
        "S3DataDistributionType", "FullyReplicated") for channel in request.get("InputDataConfig") or []}
    writable = {channel["ChannelName"]: channel["DataSource"].get("FileSystemDataSource", {}).get(
        "FileSystemAccessMode") == "rw" for channel in request.get("InputDataConfig") or []}
    mounts: list[tuple[str, str, bool]] = []
    for name, path in channels.items():
        link = base / "input" / "data" / name
        option = options.get(name)
        if option is not None and not option.on_this_host:
            _clear(link)  # the channel of other instance groups' hosts (InstanceGroupNames): not here
            continue
        if option is not None and option.rewrites:
            option.lay_out(link, path, index, count, sharded=distribution.get(name) == "ShardedByS3Key")
        elif distribution.get(name) == "ShardedByS3Key" and count > 1:
            _shard(link, path, index, count)
        elif mount:
            _mount_point(link)
            mounts.append((_mountable(str(path), name), f"input/data/{name}", not writable.get(name, False)))
        else:
            replace_with_link(link, path)
    replace_with_link(base / "checkpoints", checkpoint_dir)
    for directory in ("model", "output/data", "output/intermediate", "code"):
        (base / directory).mkdir(parents=True, exist_ok=True)
    return HostLayout(host, base, mounts=tuple(mounts))


def _mount_point(directory: Path) -> None:
    # An empty directory of its own (an earlier run's link or data removed), for the data to be mounted on.
    _clear(directory)
    directory.mkdir(parents=True)


def _mountable(source: str, name: str) -> str:
    # The mount list is one tab-separated line per channel: a path that could break the line is refused.
    if any(character in source for character in "\t\n\r"):
        raise SpecError(Problem(f"inputs.{name}", f"{source!r} holds a tab or a line break: move the data to a "
                                                  "plainer path"), source="local host")
    return source


def _shard(link: Path, source: Path, index: int, count: int) -> None:
    replace_with_link(link, source)
    link.unlink()
    link.mkdir(parents=True)
    files = sorted(path for path in source.rglob("*") if path.is_file())
    for path in files[index::count]:
        replace_with_link(link / path.relative_to(source), path)


def replace_with_link(link: Path, target: Path) -> None:
    """``link`` made a symbolic link to ``target``, whatever was there (an earlier run's link, file or directory)."""
    _clear(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=target.is_dir())


def _clear(path: Path) -> None:
    """Nothing left at ``path``: an earlier run's link or file unlinked (never followed), its directory removed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


# --- the process: command and environment ---------------------------------------------------------------------------

def uses_toolkit(request: Mapping[str, Any]) -> bool:
    """True when the image's own entrypoint (the toolkit) runs the job: the request names no ContainerEntrypoint."""
    return not request["AlgorithmSpecification"].get("ContainerEntrypoint")


def container_argv(request: Mapping[str, Any], python: str) -> list[str]:
    """What the container runs: the request's ContainerEntrypoint + ContainerArguments with `python` for the image's
    python3; for a Deep Learning Container (no entrypoint in the request), the toolkit's `train` command."""
    algorithm = request["AlgorithmSpecification"]
    entrypoint = list(algorithm.get("ContainerEntrypoint") or [])
    if not entrypoint:
        return [python, "-m", DLC_ENTRYPOINT_MODULE, *algorithm.get("ContainerArguments", [])]
    if os.path.basename(entrypoint[0]) in ("python", "python3"):
        entrypoint[0] = python
    return entrypoint + list(algorithm.get("ContainerArguments") or [])


def to_host(value: str, base: Path) -> str:
    # Without a private /opt/ml the request's container paths are rewritten to the host's base directory.
    return value.replace(CONTAINER_BASE, str(base))


def container_environment(request: Mapping[str, Any], layout: HostLayout, *, inherited: Mapping[str, str],
                          isolated: bool, extra: Mapping[str, str], python: str | None = None) -> dict[str, str]:
    """The container's environment: this machine's (credentials, endpoint, PATH) without its PYTHONPATH and any
    SM_/SAGEMAKER_ variable, the image's bin directory first on PATH (`python`'s: the toolkit runs `torchrun` and
    `mpirun` by name), then what SageMaker sets (TRAINING_JOB_NAME, region, the DLC's training module), the
    request's Environment, and the local executor's own variables (`extra`)."""
    env = {key: value for key, value in inherited.items()
           if key != "PYTHONPATH" and not key.startswith(("SM_", "SAGEMAKER_"))}
    if python:
        env["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(python), env.get("PATH")]))
    hyperparameters = request.get("HyperParameters") or {}
    env["TRAINING_JOB_NAME"] = request["TrainingJobName"]
    region = hyperparameters.get("sagemaker_region")
    if region:
        env.setdefault("AWS_REGION", json.loads(region))
    if uses_toolkit(request):
        env["SAGEMAKER_TRAINING_MODULE"] = DLC_TRAINING_MODULE
    for key, value in (request.get("Environment") or {}).items():
        env[key] = value if isolated else to_host(value, layout.base_dir)
    if not isolated:
        env["SAGEMAKER_BASE_DIR"] = str(layout.base_dir)
    env.update(extra)
    return env
