"""Small builders of valid SageMaker requests and responses for tests (valid against the botocore model, which the
Stubber checks)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

ROLE_ARN = "arn:aws:iam::123456789012:role/trainops-test"
CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def training_request(name: str = "digits-0123456789", **overrides: Any) -> dict[str, Any]:
    """A minimal but complete create_training_job request, like the renderer produces."""
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE_ARN,
        "HyperParameters": {"sagemaker_job_name": json.dumps(name), "epochs": "3"},
        "OutputDataConfig": {"S3OutputPath": "s3://trainops-test/output"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
    }
    request.update(overrides)
    return request


def training_description(
    name: str,
    status: str,
    secondary: str,
    *,
    failure_reason: str | None = None,
    spot: bool = False,
    max_run: int = 7200,
    max_wait: int | None = None,
    billable: int | None = None,
    training: int | None = None,
    transitions: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """A DescribeTrainingJob response."""
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": max_run}
    if max_wait is not None:
        stopping["MaxWaitTimeInSeconds"] = max_wait
    response: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://trainops-test/output/{name}/output/model.tar.gz"},
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "AlgorithmSpecification": {"TrainingImage": "image:latest", "TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "StoppingCondition": stopping,
        "CreationTime": CREATED,
        "EnableManagedSpotTraining": spot,
        "SecondaryStatusTransitions": [
            {"Status": state, "StartTime": CREATED, "StatusMessage": message} for state, message in (transitions or [])
        ],
    }
    if failure_reason:
        response["FailureReason"] = failure_reason
    if billable is not None:
        response["BillableTimeInSeconds"] = billable
    if training is not None:
        response["TrainingTimeInSeconds"] = training
    return response
