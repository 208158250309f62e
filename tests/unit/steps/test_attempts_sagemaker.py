"""Retry budgets on the SageMaker backend: a spot interruption is retried under `<name>-2`, which completes, and the
cost is summed over both attempts; a script error is not retried.

Moto cannot walk a training job through InProgress, so SageMaker is a fake client behind the same interface (it
records CreateTrainingJob requests and answers DescribeTrainingJob from a script of responses built with the real
response shapes, tests/support/sagemaker_shapes.py). Everything else is trainops' own code: render, the re-attach
policy, the wait loop, the classifier, the attempt loop, the cost estimate.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from sagemaker_shapes import training_description  # noqa: E402

from trainops.errors import JobFailed  # noqa: E402
from trainops.steps.train import train  # noqa: E402

SPEC = {"name": "bert", "role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1",
        "entry_point": "train.py", "source_dir": "s3://bucket/code/sourcedir.tar.gz", "launcher": "toolkit",
        "framework_version": "2.3.0", "py_version": "py311", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
        "output_path": "s3://bucket/out", "use_spot_instances": True, "max_run": 7200, "max_wait": 14400,
        "checkpoint_s3_uri": "s3://bucket/checkpoints/bert"}


class FakeSageMaker:
    """create_training_job records; describe_training_job plays each job's scripted walk, then repeats its end."""

    def __init__(self, walks: dict[str, list[dict[str, Any]]]):
        self.walks = walks
        self.created: list[dict[str, Any]] = []
        self.seen: dict[str, int] = {}
        self.created_at: dict[str, datetime] = {}

    def create_training_job(self, **request: Any) -> dict[str, Any]:
        self.created.append(request)
        self.created_at[request["TrainingJobName"]] = datetime.now(timezone.utc)  # the wait bound counts from it
        return {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{request['TrainingJobName']}"}

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        if TrainingJobName not in {request["TrainingJobName"] for request in self.created}:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "Requested resource not found"}},
                              "DescribeTrainingJob")
        walk = self.walks[TrainingJobName]
        index = self.seen.get(TrainingJobName, 0)
        self.seen[TrainingJobName] = index + 1
        return dict(walk[min(index, len(walk) - 1)], CreationTime=self.created_at[TrainingJobName])


class NoQuotas:
    """Service Quotas of an account that lists none for SageMaker: the submission's preflight notes it."""

    def list_service_quotas(self, **arguments: Any) -> dict[str, Any]:
        return {"Quotas": []}


class NoLogs:
    """CloudWatch Logs of jobs that wrote no line yet: the wait, given a log, reads the job's lines as it looks."""

    def describe_log_streams(self, **arguments: Any) -> dict[str, Any]:
        return {"logStreams": []}


def factory_for(fake: FakeSageMaker):
    def factory(service: str) -> Any:
        assert service in ("sagemaker", "service-quotas", "logs"), f"unexpected AWS service {service}"
        return {"sagemaker": fake, "service-quotas": NoQuotas(), "logs": NoLogs()}[service]
    return factory


def test_spot_interruption_is_retried_and_the_cost_covers_both_attempts(caplog):
    caplog.set_level(logging.INFO, logger="trainops")
    interrupted = training_description(
        "bert-1", "Failed", "Failed", spot=True, billable=600, training=1800, max_wait=14400,
        transitions=[("Starting", ""), ("Training", ""), ("Interrupted", "spot capacity reclaimed"), ("Failed", "")])
    fake = FakeSageMaker({
        "bert-1": [training_description("bert-1", "InProgress", "Training", spot=True), interrupted],
        "bert-1-2": [training_description("bert-1-2", "InProgress", "Training", spot=True),
                     training_description("bert-1-2", "Completed", "Completed", spot=True, billable=1200,
                                          training=3600, max_wait=14400)],
    })
    lines: list[str] = []
    result = train(SPEC, backend="sagemaker", job_name="bert-1", client_factory=factory_for(fake), poll_seconds=0,
                   retries={"infrastructure": 2, "backoff_seconds": 0}, log=lines.append)
    assert [request["TrainingJobName"] for request in fake.created] == ["bert-1", "bert-1-2"]
    # Both attempts resume from the same checkpoint prefix.
    assert {request["CheckpointConfig"]["S3Uri"] for request in fake.created} == {"s3://bucket/checkpoints/bert"}
    assert result["status"] == "Completed"
    first, second = result["attempts"]
    assert first["failure_class"] == "infrastructure" and "Interrupted" in first["evidence"]
    assert first["retried_on"] == "infrastructure" and second["failure_class"] is None
    per_attempt = [attempt["cost"] for attempt in result["attempts"]]
    assert all(item["basis"] == "sagemaker-billable" and item["cost"] > 0 for item in per_attempt)
    assert result["cost"]["total"] == pytest.approx(per_attempt[0]["cost"] + per_attempt[1]["cost"])
    assert result["cost"]["spot_saving"] == pytest.approx(1 - (600 + 1200) / (1800 + 3600), abs=1e-3)
    lines += [record.getMessage() for record in caplog.records]  # trainops' own messages are logged
    assert any("retrying on the infrastructure budget" in line for line in lines)


def test_a_script_error_on_sagemaker_is_not_retried():
    fake = FakeSageMaker({"bert-2": [training_description(
        "bert-2", "Failed", "Failed", billable=300, training=300,
        failure_reason="AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'labels'\"")]})
    with pytest.raises(JobFailed, match=r"\(user failure\)"):
        train(SPEC, backend="sagemaker", job_name="bert-2", client_factory=factory_for(fake), poll_seconds=0,
              retries={"infrastructure": 3, "backoff_seconds": 0}, log=lambda line: None)
    assert [request["TrainingJobName"] for request in fake.created] == ["bert-2"]
