"""Executing a `CreateTrainingJob` request as it was sent, on this machine.

The request is the one a SageMaker client sent (recorded from the boto3 client) or would send: its channels may be
s3:// (downloaded through `s3_client`), local paths or file:// URIs; its output path s3:// (model.tar.gz uploaded
through `s3_client`) or local. Everything else is the local backend's `LocalJob`, run from the request instead of a
spec: one emulated container per host, logs, stop-all on the first failure, MaxRuntimeInSeconds, status records.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from trainops.backends.local.job import MAX_RUNTIME_GRACE_SECONDS, STOP_GRACE_SECONDS, LocalJob, LocalJobResult
from trainops.backends.local.job_input import from_request
from trainops.errors import Problem, SpecError

REQUIRED = ("TrainingJobName", "AlgorithmSpecification", "OutputDataConfig", "ResourceConfig", "StoppingCondition")


def check_request(request: Any) -> None:
    """Refuse a request the executor cannot run, naming the key and what to do."""
    if not isinstance(request, dict):
        raise SpecError(Problem("request", "must be the CreateTrainingJob keyword arguments (a dict)"))
    problems = [Problem(key, "is required in a CreateTrainingJob request") for key in REQUIRED if key not in request]
    if not problems and not request["OutputDataConfig"].get("S3OutputPath"):
        problems.append(Problem("OutputDataConfig.S3OutputPath", "is required: where model.tar.gz goes"))
    if problems:
        raise SpecError(problems, "training request")


def execute_training_request(
    request: dict[str, Any],
    *,
    workdir: str | os.PathLike | None = None,
    image_python: str | None = None,
    s3_client: Any = None,
    log: Callable[[str], None] | None = None,
    channel_overrides: dict[str, str] | None = None,
    processes_per_host: int | None = None,
    grace_seconds: float = STOP_GRACE_SECONDS,
    max_runtime_grace_seconds: float = MAX_RUNTIME_GRACE_SECONDS,
    on_job: Callable[[LocalJob], None] | None = None,
) -> LocalJobResult:
    """Run `request` (``create_training_job`` keyword arguments) as SageMaker would, one emulated container per host.

    `image_python` is the interpreter standing for the training image (default: this one); `s3_client` a boto3 S3
    client for s3:// channels and the output path (default: boto3's own configuration, AWS_ENDPOINT_URL honoured);
    `on_job` receives the `LocalJob` before it starts (to stop it from a signal handler). Returns how the job ended:
    `status` Completed / Failed / Stopped, `failure_reason` as SageMaker's FailureReason, `model_artifact`.
    """
    check_request(request)
    factory = None if s3_client is None else (lambda service: s3_client)
    job = LocalJob(from_request(request), request["TrainingJobName"], workdir=workdir,
                   image_python=image_python, s3_factory=factory, log=log, channel_overrides=channel_overrides,
                   processes_per_host=processes_per_host, grace_seconds=grace_seconds,
                   max_runtime_grace_seconds=max_runtime_grace_seconds)
    if on_job is not None:
        on_job(job)
    return job.run()
