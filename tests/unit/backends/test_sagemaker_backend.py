"""The SageMakerBackend facade: it binds one client factory and hands every call to the service modules."""

from __future__ import annotations

from support.sagemaker_shapes import training_description, training_request
from support.stubbed_aws import FakeClock, StubbedAWS
from trainops.backends.sagemaker.backend import SageMakerBackend

NAME = "digits-0123456789"


def test_submit_wait_and_cost_go_through_the_given_factory():
    aws = StubbedAWS()
    stub = aws.stub("sagemaker")
    stub.add_client_error("describe_training_job", service_error_code="ValidationException",
                          service_message="Requested resource not found.")
    stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/x"},
                      training_request(NAME))
    for status in ("InProgress", "Completed"):
        stub.add_response("describe_training_job",
                          training_description(NAME, status, status if status == "Completed" else "Training",
                                               billable=3600, training=3600))
    backend = SageMakerBackend(client_factory=aws)
    assert backend.submit(training_request(NAME)).created is True
    clock = FakeClock()
    summary = backend.wait(NAME, max_run=7200, poll_seconds=1, clock=clock, sleep=clock.sleep)
    assert summary.status == "Completed"
    aws.verify()
    assert set(aws.requested) == {"sagemaker"}


def test_the_default_factory_is_built_lazily(monkeypatch):
    built = []
    monkeypatch.setattr("trainops.backends.sagemaker.backend.default_client_factory",
                        lambda region=None: built.append(region) or StubbedAWS())
    backend = SageMakerBackend(region="eu-west-1")
    assert built == []
    backend.clients("sagemaker")
    backend.clients("logs")
    assert built == ["eu-west-1"]


def test_importing_the_backend_imports_no_aws_sdk():
    # DAG files import operators that import these modules: boto3 must load only when a call is made.
    import subprocess
    import sys

    code = ("import sys, trainops.backends.sagemaker.backend, trainops.backends.states; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'sagemaker')))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"
