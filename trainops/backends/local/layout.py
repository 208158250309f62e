"""The contract directories of a local job: one SageMaker-shaped base directory per simulated host.

Each `hosts/algo-N/` holds what a SageMaker container would see under /opt/ml (docs/contracts.md, section 3), so the
same runtime launcher runs unchanged: resourceconfig, hyperparameters, inputdataconfig, channels pointing at the
staged data, the code, model/ and output/. Checkpoints are one shared directory outside the job, as every SageMaker
host syncs the same checkpoint prefix, and it outlives the run so a re-run resumes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from trainops.backends.contract import encode_hyperparameters, runtime_hyperparameters
from trainops.spec.inputs import FileSystemInput, TrainingInput
from trainops.spec.job import JobSpec

LOCAL_NETWORK_INTERFACE = "lo"


@dataclass(frozen=True)
class HostLayout:
    """One simulated host's base directory (its SAGEMAKER_BASE_DIR)."""

    name: str
    base_dir: Path

    @property
    def model_dir(self) -> Path:
        return self.base_dir / "model"

    @property
    def output_dir(self) -> Path:
        return self.base_dir / "output"

    @property
    def failure_file(self) -> Path:
        return self.base_dir / "output" / "failure"


def host_names(spec: JobSpec) -> list[str]:
    """algo-1 .. algo-N, N = hosts in the job."""
    return [f"algo-{index}" for index in range(1, spec.host_count() + 1)]


def _groups(spec: JobSpec, hosts: list[str]) -> dict[str, tuple[str, str]]:
    """host -> (group name, instance type) for heterogeneous clusters; hosts are handed out group by group."""
    if not spec.instance_groups:
        return {}
    assignment, remaining = {}, iter(hosts)
    for group in spec.instance_groups:
        for _ in range(group.instance_count):
            assignment[next(remaining)] = (group.instance_group_name, group.instance_type)
    return assignment


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, indent=2), encoding="utf-8")
    os.replace(temporary, path)


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=target.is_dir())


def _shard(files: list[Path], index: int, count: int) -> list[Path]:
    # ShardedByS3Key: each host gets every count-th object, as SageMaker splits a prefix's keys between hosts.
    return files[index::count]


def lay_out_job(
    spec: JobSpec,
    job_name: str,
    job_dir: Path,
    channels: dict[str, Path],
    code_dir: Path,
    checkpoint_dir: Path,
) -> list[HostLayout]:
    """Write every host's contract directory; `channels` maps each channel to the local directory holding its data."""
    hosts = host_names(spec)
    groups = _groups(spec, hosts)
    hyperparameters = encode_hyperparameters(runtime_hyperparameters(spec, job_name, spec.region))
    layouts = []
    for index, host in enumerate(hosts):
        base = job_dir / "hosts" / host
        group_name, instance_type = groups.get(host, ("homogeneousCluster", spec.instance_type or "local"))
        resource = {
            "current_host": host,
            "hosts": sorted(hosts),
            "current_instance_type": instance_type,
            "current_group_name": group_name,
            "network_interface_name": LOCAL_NETWORK_INTERFACE,
        }
        if spec.instance_groups:
            by_group: dict[str, dict] = {}
            for member, (name, kind) in groups.items():
                entry = by_group.setdefault(name, {"instance_group_name": name, "instance_type": kind, "hosts": []})
                entry["hosts"].append(member)
            resource["instance_groups"] = list(by_group.values())
        _write_json(base / "input" / "config" / "resourceconfig.json", resource)
        _write_json(base / "input" / "config" / "hyperparameters.json", hyperparameters)
        _write_json(base / "input" / "config" / "inputdataconfig.json", _input_data_config(spec))
        for name, path in channels.items():
            channel = spec.channels.get(name)
            link = base / "input" / "data" / name
            if isinstance(channel, TrainingInput) and channel.distribution == "ShardedByS3Key" and len(hosts) > 1:
                _shard_channel(link, path, index, len(hosts))
            else:
                _link(link, path)
        _link(base / "code", code_dir)
        _link(base / "checkpoints", checkpoint_dir)
        for directory in ("model", "output/data", "output/intermediate"):
            (base / directory).mkdir(parents=True, exist_ok=True)
        layouts.append(HostLayout(host, base))
    return layouts


def _shard_channel(link: Path, source: Path, index: int, count: int) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    link.mkdir(parents=True, exist_ok=True)
    files = sorted(path for path in source.rglob("*") if path.is_file())
    for path in _shard(files, index, count):
        target = link / path.relative_to(source)
        _link(target, path)


def _input_data_config(spec: JobSpec) -> dict:
    config = {}
    for name, channel in spec.channels.items():
        if isinstance(channel, FileSystemInput):
            config[name] = {"TrainingInputMode": "File", "RecordWrappingType": "None",
                            "FileSystemType": channel.file_system_type}
        else:
            config[name] = {"TrainingInputMode": channel.input_mode or spec.input_mode,
                            "S3DistributionType": channel.distribution, "RecordWrappingType": "None"}
            if channel.content_type:
                config[name]["ContentType"] = channel.content_type
    return config
