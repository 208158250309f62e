"""`RenderTrainingJobOperator`: the dry run as a task. Shows the exact SageMaker request, calls no AWS API.

It renders the spec with the same job name the training task of the same DAG run will use (pass that task's
``job_name`` base and ``task_id`` as ``for_task_id``), so what the log shows is, byte for byte, what
``DistributedTrainingOperator`` would send to CreateTrainingJob. Secret-looking environment values are masked.
Put it before the training task to review requests in the UI, or run it alone on a machine with no AWS access.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainops.operators.common import task_identity, translated_errors
from trainops.operators.compat import BaseOperator


class RenderTrainingJobOperator(BaseOperator):
    """Render a job spec to its CreateTrainingJob request and log it (masked); no AWS call.

    Args:
        spec: the job spec (mapping, YAML/JSON path or ``JobSpec``).
        job_name: the base of the job name, as given to the training task.
        for_task_id: the training task whose job name to show (default: this task's id).
        launcher: ``trainops`` (default from the spec) or ``toolkit``.
        region_name: the region when the spec has none.

    Returns (XCom): a summary ``{job_name, region, training_image, instance_type, instance_count, instance_groups,
    distribution, launcher, channels, max_run_seconds, max_wait_seconds, spot, vpc}``; the whole request is in the
    task log.
    """

    template_fields: Sequence[str] = ("spec", "job_name", "for_task_id", "launcher", "region_name")
    template_fields_renderers = {"spec": "json"}
    ui_color = "#eeeeee"

    def __init__(
        self,
        *,
        spec: Any,
        job_name: str | None = None,
        for_task_id: str | None = None,
        launcher: str | None = None,
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.job_name = job_name
        self.for_task_id = for_task_id
        self.launcher = launcher
        self.region_name = region_name

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.backends.api import get_backend
        from trainops.spec.names import deterministic_job_name
        from trainops.steps.train import load_spec

        with translated_errors():
            spec = load_spec(self.spec)
            dag_id, task_id, run_id, map_index = task_identity(context)
            target = self.for_task_id or task_id
            # The same parts as trainops.operators.common.task_job_name, for the training task's id.
            name = deterministic_job_name(self.job_name or spec.name or target, dag_id, target, run_id, map_index)
            request = get_backend("sagemaker", region=self.region_name).render_request(
                spec, name, launcher=self.launcher, region=self.region_name)
        self.log.info("CreateTrainingJob request (dry run, nothing was sent):\n%s", json.dumps(request, indent=2))
        return summarize_request(request, spec.region or self.region_name, self.launcher or spec.launcher)


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
