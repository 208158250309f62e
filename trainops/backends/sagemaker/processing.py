"""Evaluation on SageMaker: a processing job that scores the trained model on test data and writes metrics.json.

The job runs the training image (so the evaluation sees the same framework versions as training) with four inputs
and one output, at fixed paths inside the container (`ContainerPaths`):

- the model artifact (``model.tar.gz``) in ``/opt/ml/processing/model``: the script unpacks it;
- the test data in ``/opt/ml/processing/test``;
- the evaluation code (a prefix holding the script) in ``/opt/ml/processing/code``;
- the output directory ``/opt/ml/processing/evaluation``, uploaded to the evaluation prefix, where the script
  must write ``metrics.json`` (a JSON object of metric name -> number).

The script is started as ``python3 /opt/ml/processing/code/<script> --model-dir ... --test-dir ... --output-dir ...``
and also finds the directories in ``TRAINOPS_MODEL_DIR``, ``TRAINOPS_TEST_DIR`` and ``TRAINOPS_OUTPUT_DIR``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from trainops.aws.clients import ClientFactory, translate_client_error
from trainops.aws.s3 import get_bytes, join_uri, parse_s3_uri
from trainops.backends.sagemaker.training import is_not_found
from trainops.backends.sagemaker.waiting import describer, poll, stop_unless_ended
from trainops.backends.states import classify
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.names import valid_job_name

METRICS_FILE = "metrics.json"


class ContainerPaths:
    """Where the inputs and the output sit inside the processing container."""

    model = "/opt/ml/processing/model"
    test = "/opt/ml/processing/test"
    code = "/opt/ml/processing/code"
    output = "/opt/ml/processing/evaluation"


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation produced: the job, its status, the metrics read back and where they are."""

    job_name: str
    status: str
    metrics: dict[str, Any]
    metrics_uri: str
    created: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom and KFP outputs)."""
        return asdict(self)


def _s3_input(name: str, uri: str, destination: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "S3Input": {
            "S3Uri": uri,
            "LocalPath": destination,
            "S3DataType": "S3Prefix",
            "S3InputMode": "File",
            "S3DataDistributionType": "FullyReplicated",
        },
    }


def build_evaluation_request(
    *,
    job_name: str,
    role_arn: str,
    image_uri: str,
    model_uri: str,
    test_data_uri: str,
    code_uri: str,
    script: str,
    output_uri: str,
    instance_type: str = "ml.m5.xlarge",
    instance_count: int = 1,
    volume_size_gb: int = 30,
    max_runtime_seconds: int = 3600,
    arguments: list[str] | None = None,
    environment: dict[str, str] | None = None,
    subnets: list[str] | None = None,
    security_group_ids: list[str] | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``create_processing_job`` keyword arguments of an evaluation (pure: printable, testable, no AWS call).

    Args:
        job_name: a valid SageMaker job name (see `trainops.spec.names`).
        model_uri: the training job's ``model.tar.gz``. test_data_uri: an S3 prefix of test data.
        code_uri: an S3 prefix holding ``script`` (a file name, relative to that prefix).
        output_uri: the evaluation prefix; ``metrics.json`` appears directly under it.
        arguments: extra arguments for the script, after the directory options.
    """
    problems = []
    if not valid_job_name(job_name):
        problems.append(Problem("job_name", f"{job_name!r} is not a valid SageMaker job name (1-63 letters, digits, "
                                            "hyphens)"))
    for field_name, uri in (("model_uri", model_uri), ("test_data_uri", test_data_uri), ("code_uri", code_uri),
                            ("output_uri", output_uri)):
        try:
            parse_s3_uri(uri, field_name)
        except SpecError as error:
            problems += error.problems
    if not script or script.startswith("/") or ".." in script.split("/"):
        problems.append(Problem("script", f"{script!r} must be a file name relative to code_uri, like evaluate.py"))
    if problems:
        raise SpecError(problems, source="evaluation")
    env = {
        "TRAINOPS_MODEL_DIR": ContainerPaths.model,
        "TRAINOPS_TEST_DIR": ContainerPaths.test,
        "TRAINOPS_OUTPUT_DIR": ContainerPaths.output,
        **(environment or {}),
    }
    request: dict[str, Any] = {
        "ProcessingJobName": job_name,
        "RoleArn": role_arn,
        "AppSpecification": {
            "ImageUri": image_uri,
            "ContainerEntrypoint": ["python3", f"{ContainerPaths.code}/{script}"],
            "ContainerArguments": [
                "--model-dir", ContainerPaths.model,
                "--test-dir", ContainerPaths.test,
                "--output-dir", ContainerPaths.output,
                *(arguments or []),
            ],
        },
        "ProcessingInputs": [
            _s3_input("model", model_uri, ContainerPaths.model),
            _s3_input("test", test_data_uri, ContainerPaths.test),
            _s3_input("code", code_uri, ContainerPaths.code),
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "evaluation",
                    "S3Output": {"S3Uri": output_uri, "LocalPath": ContainerPaths.output, "S3UploadMode": "EndOfJob"},
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": instance_count,
                "InstanceType": instance_type,
                "VolumeSizeInGB": volume_size_gb,
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime_seconds},
        "Environment": env,
    }
    if subnets or security_group_ids:
        request["NetworkConfig"] = {"VpcConfig": {"Subnets": list(subnets or []),
                                                  "SecurityGroupIds": list(security_group_ids or [])}}
    if tags:
        request["Tags"] = [{"Key": key, "Value": value} for key, value in sorted(tags.items())]
    return request


def submit_evaluation(factory: ClientFactory, request: dict[str, Any]) -> bool:
    """Create the processing job unless one of that name exists (re-attach on retries); return whether it was
    created."""
    from botocore.exceptions import ClientError

    client = factory("sagemaker")
    name = request["ProcessingJobName"]
    try:
        client.describe_processing_job(ProcessingJobName=name)
        return False
    except ClientError as error:
        if not is_not_found(error):
            raise translate_client_error(error, f"DescribeProcessingJob {name}", "job_name") from error
    try:
        client.create_processing_job(**request)
    except ClientError as error:
        raise translate_client_error(error, f"CreateProcessingJob {name}") from error
    return True


def wait_processing(
    factory: ClientFactory,
    name: str,
    *,
    max_runtime_seconds: float = 3600.0,
    grace_seconds: float = 1800.0,
    poll_seconds: float = 15.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait for a processing job (states table ``processing_job``); return its description when it completed.
    Raises `JobFailed` with the failure reason when it failed or was stopped."""
    client = factory("sagemaker")

    describe = describer(client.describe_processing_job, f"DescribeProcessingJob {name}", ProcessingJobName=name)
    response = poll(
        describe,
        resource="processing_job",
        status_of=lambda described: described.get("ProcessingJobStatus"),
        bound_seconds=max_runtime_seconds + grace_seconds,
        poll_seconds=poll_seconds,
        what=f"processing job {name}",
        clock=clock,
        sleep=sleep,
    )
    status = response.get("ProcessingJobStatus")
    if classify("processing_job", status) != "success":
        reason = response.get("FailureReason") or response.get("ExitMessage") or "no reason given"
        raise JobFailed(f"evaluation job {name} ended {status}: {reason}")
    return response


def describe_processing(factory: ClientFactory, name: str) -> dict[str, Any]:
    """One DescribeProcessingJob (a deferred evaluation's look); its errors as trainops' own, naming the job."""
    return describer(factory("sagemaker").describe_processing_job, f"DescribeProcessingJob {name}",
                     ProcessingJobName=name)()


def stop_processing(factory: ClientFactory, name: str) -> str:
    """StopProcessingJob unless the job ended already (stopping an ended job is not an error: ``on_kill`` may call
    it at any time); return the status it was in."""
    return stop_unless_ended(str(describe_processing(factory, name).get("ProcessingJobStatus")),
                             resource="processing_job", stopping="Stopping",
                             call=lambda: factory("sagemaker").stop_processing_job(ProcessingJobName=name),
                             action=f"StopProcessingJob {name}", field="job_name")


def output_uri_of(response: dict[str, Any]) -> str:
    """The evaluation prefix a processing job writes to (its one output), from its description."""
    return str(response["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"])


def outcome_of(factory: ClientFactory, response: dict[str, Any], created: bool = False) -> EvaluationResult:
    """The result of a completed evaluation job from its description: the metrics read back from its output.
    Raises `JobFailed` with the job's reason when it did not complete."""
    name = str(response.get("ProcessingJobName"))
    status = response.get("ProcessingJobStatus")
    if classify("processing_job", status) != "success":
        reason = response.get("FailureReason") or response.get("ExitMessage") or "no reason given"
        raise JobFailed(f"evaluation job {name} ended {status}: {reason}")
    output_uri = output_uri_of(response)
    return EvaluationResult(job_name=name, status=str(status), metrics=read_metrics(factory, output_uri),
                            metrics_uri=join_uri(output_uri, METRICS_FILE), created=created)


def read_metrics(factory: ClientFactory, output_uri: str) -> dict[str, Any]:
    """Read ``metrics.json`` under the evaluation prefix. Raises `JobFailed` when it is missing or not a JSON object."""
    uri = join_uri(output_uri, METRICS_FILE)
    data = get_bytes(factory, uri)
    try:
        metrics = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise JobFailed(f"{uri} is not valid JSON ({error}); the evaluation script must write a JSON object") from error
    if not isinstance(metrics, dict):
        raise JobFailed(f"{uri} holds a {type(metrics).__name__}; the evaluation script must write a JSON object")
    return metrics


def evaluate(
    factory: ClientFactory,
    request: dict[str, Any],
    *,
    poll_seconds: float = 15.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> EvaluationResult:
    """Run an evaluation request (from `build_evaluation_request`) to its end and read its metrics back."""
    name = request["ProcessingJobName"]
    created = submit_evaluation(factory, request)
    response = wait_processing(
        factory,
        name,
        max_runtime_seconds=float((request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds", 3600)),
        poll_seconds=poll_seconds,
        clock=clock,
        sleep=sleep,
    )
    # The request's output, not the description's: a re-attached job is read where this request writes.
    return outcome_of(factory, {**response, "ProcessingOutputConfig": request["ProcessingOutputConfig"]}, created)
