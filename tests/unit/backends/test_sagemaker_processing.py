"""The evaluation request (pure) and the evaluation's failure paths (Stubber: moto's processing jobs complete at
once). The success path against moto is in tests/system/test_sagemaker_jobs_moto.py."""

from __future__ import annotations

import pytest
from support.sagemaker_shapes import ROLE_ARN
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.sagemaker import processing
from trainops.errors import JobFailed, SpecError

NOW = "2026-01-01T00:00:00Z"


def _request(**overrides):
    arguments = dict(
        job_name="digits-eval-1",
        role_arn=ROLE_ARN,
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311",
        model_uri="s3://bucket/out/digits/output/model.tar.gz",
        test_data_uri="s3://bucket/data/test/",
        code_uri="s3://bucket/out/digits/evaluation-code/",
        script="evaluate.py",
        output_uri="s3://bucket/out/digits/evaluation/",
    )
    arguments.update(overrides)
    return processing.build_evaluation_request(**arguments)


def test_request_wires_inputs_output_and_script():
    request = _request(arguments=["--threshold", "0.9"])
    inputs = {item["InputName"]: item["S3Input"] for item in request["ProcessingInputs"]}
    assert inputs["model"]["S3Uri"].endswith("model.tar.gz")
    assert inputs["model"]["LocalPath"] == "/opt/ml/processing/model"
    assert inputs["test"]["LocalPath"] == "/opt/ml/processing/test"
    assert inputs["code"]["LocalPath"] == "/opt/ml/processing/code"
    assert request["AppSpecification"]["ContainerEntrypoint"] == ["python3", "/opt/ml/processing/code/evaluate.py"]
    assert request["AppSpecification"]["ContainerArguments"][-2:] == ["--threshold", "0.9"]
    output = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]
    assert output["LocalPath"] == "/opt/ml/processing/evaluation"
    assert request["Environment"]["TRAINOPS_OUTPUT_DIR"] == "/opt/ml/processing/evaluation"
    assert "NetworkConfig" not in request


def test_request_is_valid_for_the_api():
    # The Stubber validates parameters against the SageMaker model: a malformed request fails here.
    aws = StubbedAWS()
    request = _request(subnets=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"], tags={"team": "ml"})
    aws.stub("sagemaker").add_response("create_processing_job", {"ProcessingJobArn": "arn:aws:sagemaker:x"}, request)
    aws("sagemaker").create_processing_job(**request)
    aws.verify()


def test_bad_arguments_are_all_reported():
    with pytest.raises(SpecError) as raised:
        _request(job_name="bad_name", model_uri="/local/model.tar.gz", script="../evil.py")
    assert {problem.path for problem in raised.value.problems} == {"job_name", "model_uri", "script"}


def _describe(aws, status, reason=None):
    response = {
        "ProcessingJobName": "digits-eval-1",
        "ProcessingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:processing-job/digits-eval-1",
        "ProcessingJobStatus": status,
        "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": "image"},
        "CreationTime": NOW,
    }
    if reason:
        response["FailureReason"] = reason
    aws.stub("sagemaker").add_response("describe_processing_job", response, {"ProcessingJobName": "digits-eval-1"})


def test_a_failed_evaluation_raises_with_its_reason():
    aws = StubbedAWS()
    _describe(aws, "InProgress")
    _describe(aws, "Failed", reason="ClientError: metrics.json not written")
    clock = FakeClock()
    with pytest.raises(JobFailed) as raised:
        processing.wait_processing(aws, "digits-eval-1", poll_seconds=5, clock=clock, sleep=clock.sleep)
    assert "metrics.json not written" in str(raised.value)
    assert clock.sleeps == [5]


def test_an_existing_evaluation_job_is_reattached_not_recreated():
    aws = StubbedAWS()
    _describe(aws, "InProgress")
    assert processing.submit_evaluation(aws, _request()) is False
    aws.verify()
