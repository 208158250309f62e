"""The seam's other job kinds on SageMaker: an evaluation's processing job and a stage's FSx import task are looked
at and stopped through `Backend.describe_job` / `Backend.stop_job` (what the one Airflow trigger and ``on_kill``
call), against botocore's Stubber (the processing job's moto counterpart is in
tests/system/test_airflow_evaluate_stage_deferral.py; moto implements no FSx data repository tasks)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from support.stubbed_aws import StubbedAWS
from test_sagemaker_fsx import FS, S3, _association, _associations, _file_system, _task_created, _task_state

from trainops.backends.api import JobHandle, Unsupported, get_backend
from trainops.backends.states import JobStatus
from trainops.errors import JobFailed, SpecError

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
JOB = "evaluate-0123456789"
TASK = "task-0123456789abcdef0"


def processing(aws, status, **more):
    response = {"ProcessingJobName": JOB, "ProcessingJobArn": f"arn:aws:sagemaker:us-east-1:1:processing-job/{JOB}",
                "ProcessingJobStatus": status, "CreationTime": NOW,
                "AppSpecification": {"ImageUri": "image:1"},
                "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge",
                                                          "VolumeSizeInGB": 30}},
                "StoppingCondition": {"MaxRuntimeInSeconds": 1200},
                "ProcessingOutputConfig": {"Outputs": [{"OutputName": "evaluation", "S3Output": {
                    "S3Uri": "s3://out/eval", "LocalPath": "/opt/ml/processing/evaluation",
                    "S3UploadMode": "EndOfJob"}}]}, **more}
    aws.stub("sagemaker").add_response("describe_processing_job", response, {"ProcessingJobName": JOB})


def backend(aws):
    return get_backend("sagemaker", region="us-east-1", client_factory=aws)


def test_an_evaluation_job_is_described_through_its_own_table_and_bounded_by_its_own_limit():
    aws = StubbedAWS()
    processing(aws, "InProgress")
    processing(aws, "Failed", FailureReason="AlgorithmError: no metrics.json")
    handle = JobHandle("sagemaker", JOB, region="us-east-1")
    running = backend(aws).describe_job(handle, "evaluation")
    assert (running.status, running.details["max_run_seconds"]) == (JobStatus.IN_PROGRESS, 1200)
    failed = backend(aws).describe_job(handle, "evaluation")
    assert (failed.status, failed.failure_reason) == (JobStatus.FAILED, "AlgorithmError: no metrics.json")
    aws.verify()


def test_stopping_an_evaluation_stops_its_processing_job_and_only_while_it_runs():
    aws = StubbedAWS()
    processing(aws, "InProgress")
    aws.stub("sagemaker").add_response("stop_processing_job", {}, {"ProcessingJobName": JOB})
    processing(aws, "Completed")  # a second stop after it ended asks nothing more
    handle = JobHandle("sagemaker", JOB, region="us-east-1")
    assert backend(aws).stop_job(handle, "evaluation") == f"{JOB}: Stopping"
    assert backend(aws).stop_job(handle, "evaluation") == f"{JOB}: Completed"
    aws.verify()


def started_stage(aws):
    report = f"{S3}/_trainops_fsx_reports"
    _file_system(aws)
    _associations(aws, [_association("AVAILABLE")])
    _task_created(aws, ["datasets/digits"], report)
    return backend(aws).start_stage(S3, f"fsx://{FS}/datasets/digits", timeout_seconds=600.0)


def test_a_started_stage_is_an_import_task_followed_and_reported_as_the_blocking_stage_reports_it():
    aws = StubbedAWS()
    handle = started_stage(aws)
    assert (handle.job_name, handle.region, handle.location["mount_name"]) == (TASK, "us-east-1", "abcdefgh")
    # the handle survives the trip through the trigger's kwargs (JSON) with what the report needs
    handle = JobHandle.from_dict(handle.to_dict())
    _task_state(aws, "EXECUTING")
    _task_state(aws, "SUCCEEDED", total=3, succeeded=3)
    _task_state(aws, "SUCCEEDED", total=3, succeeded=3)
    running = backend(aws).describe_job(handle, "stage")
    assert (running.status, running.secondary_status, running.details["max_run_seconds"]) == (
        JobStatus.IN_PROGRESS, "EXECUTING", 600.0)
    assert backend(aws).describe_job(handle, "stage").status is JobStatus.COMPLETED
    report = backend(aws).stage_result(handle).to_dict()
    assert report["directory_path"] == "/abcdefgh/datasets/digits"
    assert (report["task_id"], report["succeeded"], report["association_created"]) == (TASK, 3, False)
    aws.verify()


def test_a_stage_with_failed_files_is_a_failed_job_naming_the_report_and_its_result_raises():
    aws = StubbedAWS()
    handle = started_stage(aws)
    _task_state(aws, "SUCCEEDED", total=3, succeeded=2, failed=1)
    _task_state(aws, "SUCCEEDED", total=3, succeeded=2, failed=1)
    result = backend(aws).describe_job(handle, "stage")
    assert result.status is JobStatus.FAILED
    assert "2 of 3 files imported, 1 failed" in result.failure_reason
    assert "_trainops_fsx_reports" in result.failure_reason
    with pytest.raises(JobFailed, match="1 failed"):
        backend(aws).stage_result(handle)
    aws.verify()


def test_stopping_a_stage_cancels_its_import_task_and_a_cancelled_one_reads_stopped():
    aws = StubbedAWS()
    handle = started_stage(aws)
    _task_state(aws, "EXECUTING")
    aws.stub("fsx").add_response("cancel_data_repository_task", {"TaskId": TASK, "Lifecycle": "CANCELING"},
                                 {"TaskId": TASK})
    _task_state(aws, "CANCELED")
    assert backend(aws).stop_job(handle, "stage") == f"{TASK}: CANCELING"
    assert backend(aws).describe_job(handle, "stage").status is JobStatus.STOPPED
    aws.verify()


def test_an_unknown_kind_and_a_backend_without_the_kind_are_refused_by_name(tmp_path):
    aws = StubbedAWS()
    with pytest.raises(SpecError, match="kind: 'batch' is not one of training, evaluation, stage"):
        backend(aws).describe_job(JobHandle("sagemaker", JOB), "batch")
    local = get_backend("local", workdir=str(tmp_path))
    with pytest.raises(Unsupported, match="cannot start staging without waiting"):
        local.describe_job(JobHandle("local", JOB, workdir=str(tmp_path)), "stage")
