"""The SageMakerBackend facade: it binds one client factory and hands every call to the service modules."""

from __future__ import annotations

from support.sagemaker_shapes import CREATED, training_description
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.sagemaker.backend import SageMakerBackend

NAME = "digits-0123456789"


SPEC = {
    "name": "digits", "role": "arn:aws:iam::111122223333:role/SageMakerTrainingRole", "region": "us-east-1",
    "framework_version": "2.2.0", "py_version": "py310", "entry_point": "train.py",
    "source_dir": "s3://example-code/digits/sourcedir.tar.gz", "instance_type": "ml.g5.xlarge",
    "instance_count": 2, "distribution": {"torch_distributed": {"enabled": True}},
    "inputs": {"train": "s3://example-data/train/"}, "output_path": "s3://example-output/digits",
}


def test_submit_renders_the_spec_and_wait_returns_a_typed_result_through_the_given_factory():
    from trainops.backends.request.render import render
    from trainops.backends.states import JobStatus
    from trainops.steps.train import load_spec

    spec = load_spec(SPEC)
    # The toolkit launcher with an s3:// source tarball uploads nothing, so only SageMaker calls are made.
    request = render(spec, job_name=NAME, launcher="toolkit", region="us-east-1")
    aws = StubbedAWS()
    stub = aws.stub("sagemaker")
    for _ in range(2):  # the re-attach policy looks, then submit looks again (a create race re-attaches)
        stub.add_client_error("describe_training_job", service_error_code="ValidationException",
                              service_message="Requested resource not found.")
    stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/x"},
                      request)
    # The capacity preflight looks up the account's quota for the instance type (none listed here: not checked).
    aws.stub("service-quotas").add_response("list_service_quotas", {"Quotas": []},
                                            {"ServiceCode": "sagemaker", "MaxResults": 100})
    for status in ("InProgress", "InProgress", "Completed"):
        stub.add_response("describe_training_job",
                          training_description(NAME, status, status if status == "Completed" else "Training",
                                               billable=3600, training=3600))
    backend = SageMakerBackend(client_factory=aws, poll_seconds=1)
    handle = backend.submit(spec, NAME, launcher="toolkit", log=lambda line: None)
    assert (handle.backend, handle.job_name, handle.created, handle.region) == ("sagemaker", NAME, True, "us-east-1")
    clock = FakeClock()
    backend.now = lambda: CREATED.timestamp() + clock.now  # the job's own clock: a wait from its creation
    backend.pause = clock.sleep
    result = backend.wait(handle)
    assert result.status is JobStatus.COMPLETED and result.billable_seconds == 3600
    assert result.to_dict()["cost"]["job_name"] == NAME
    aws.verify()
    assert set(aws.requested) == {"sagemaker", "service-quotas"}  # nothing uploaded: no S3 call


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


def test_the_jobs_region_is_the_specs_and_a_factory_for_another_region_is_refused(monkeypatch):
    # A user with no AWS_REGION and no profile runs the example spec, whose region is us-east-1: the clients are made
    # for that region (before: boto3's NoRegionError, an internal error). Clients given for another region (an
    # Airflow connection's) would create the job away from its image: refused, naming both.
    import pytest

    from trainops.errors import SpecError
    from trainops.steps.train import load_spec

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    spec = load_spec({**SPEC, "region": "eu-west-1"})
    backend = SageMakerBackend()
    request = backend.dry_run(spec, NAME, backend.options())
    assert request["HyperParameters"]["sagemaker_region"] == '"eu-west-1"'
    assert backend.clients("sagemaker").meta.region_name == "eu-west-1"
    with pytest.raises(SpecError, match="the spec's region is eu-west-1 but the AWS clients given .* are for us-east-1"):
        SageMakerBackend(client_factory=StubbedAWS("us-east-1")).dry_run(spec, NAME, backend.options())
    without = load_spec({key: value for key, value in SPEC.items() if key != "region"})
    with pytest.raises(SpecError, match="region: is required for the sagemaker backend: give one with -o region=.* region: in the spec"):
        SageMakerBackend().dry_run(without, NAME, backend.options())
    with pytest.raises(SpecError, match="the sagemaker backend needs a region: give one with -o region"):
        SageMakerBackend().clients("sagemaker")
