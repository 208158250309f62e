"""The few lines of a rendered CreateTrainingJob request a reviewer looks at first (small JSON: an XCom value, the
render task's result), for the backends that render that request (local and SageMaker alike)."""

from __future__ import annotations

import json
from typing import Any


def summarize_request(request: dict[str, Any], region: str | None, launcher: str) -> dict[str, Any]:
    """A few lines of a rendered request that a reviewer looks at first (small enough for XCom)."""
    resources = request.get("ResourceConfig") or {}
    stopping = request.get("StoppingCondition") or {}
    hyperparameters = request.get("HyperParameters") or {}
    channels = {}
    for channel in request.get("InputDataConfig") or []:
        source = channel.get("DataSource") or {}
        if "S3DataSource" in source:
            channels[channel["ChannelName"]] = source["S3DataSource"]["S3Uri"]
        elif "FileSystemDataSource" in source:
            fs = source["FileSystemDataSource"]
            channels[channel["ChannelName"]] = (f"{fs['FileSystemType']}:{fs['FileSystemId']}"
                                                f"{fs['DirectoryPath']} ({fs['FileSystemAccessMode']})")
    distribution = hyperparameters.get("trainops_distribution")
    return {
        "job_name": request.get("TrainingJobName"),
        "region": region,
        "training_image": (request.get("AlgorithmSpecification") or {}).get("TrainingImage"),
        "instance_type": resources.get("InstanceType"),
        "instance_count": resources.get("InstanceCount"),
        "instance_groups": resources.get("InstanceGroups"),
        # trainops launcher: the canonical JSON (contracts.md sections 1 and 2); toolkit: the SDK's keys.
        "distribution": _decoded(distribution) if distribution else
        {key: value for key, value in hyperparameters.items()
         if key.startswith(("sagemaker_distributed", "sagemaker_torch", "sagemaker_mpi", "mp_parameters"))},
        "launcher": launcher,
        "channels": channels,
        "max_run_seconds": stopping.get("MaxRuntimeInSeconds"),
        "max_wait_seconds": stopping.get("MaxWaitTimeInSeconds"),
        "spot": bool(request.get("EnableManagedSpotTraining")),
        "vpc": request.get("VpcConfig"),
    }


def _decoded(value: str) -> object:
    # Hyperparameter values are json.dumps-encoded strings; decode until the value is no longer JSON text.
    while isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            break
    return value
