"""Training jobs against botocore's Stubber (moto's jobs complete at once and it has no StopTrainingJob): state walks,
spot interruption, re-attach, name conflicts, stop."""

from __future__ import annotations

import json
import logging

import pytest
from support.sagemaker_shapes import CREATED, training_description, training_request
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.api import JobHandle
from trainops.backends.guards import JobGuards
from trainops.backends.sagemaker import training
from trainops.backends.sagemaker.backend import SageMakerBackend
from trainops.backends.states import WaitTimedOut
from trainops.errors import JobFailed, SpecError

NAME = "digits-0123456789"


def _not_found(aws: StubbedAWS, name: str = NAME) -> None:
    aws.stub("sagemaker").add_client_error(
        "describe_training_job",
        service_error_code="ValidationException",
        service_message="Requested resource not found.",
        http_status_code=400,
        expected_params={"TrainingJobName": name},
    )


def _describes(aws: StubbedAWS, *states: tuple[str, str], **options) -> None:
    for status, secondary in states:
        aws.stub("sagemaker").add_response(
            "describe_training_job",
            training_description(NAME, status, secondary, **options),
            {"TrainingJobName": NAME},
        )


def test_submit_sends_the_request_unchanged_when_no_job_exists():
    aws = StubbedAWS()
    request = training_request(NAME)
    _not_found(aws)
    aws.stub("sagemaker").add_response(
        "create_training_job", {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{NAME}"},
        request,
    )
    result = training.submit(aws, request)
    aws.verify()
    assert result.created is True
    assert result.job_name == NAME
    assert result.arn.endswith(NAME)


def test_reattach_creates_nothing_when_the_job_exists():
    aws = StubbedAWS()
    _describes(aws, ("InProgress", "Training"))
    # No create_training_job is queued: the Stubber would fail the call if submit made one.
    result = training.submit(aws, training_request(NAME), if_exists="reattach")
    aws.verify()
    assert (result.created, result.status, result.job_name) == (False, "InProgress", NAME)


def test_fail_policy_raises_naming_the_job():
    aws = StubbedAWS()
    _describes(aws, ("Completed", "Completed"))
    with pytest.raises(training.JobAlreadyExists) as raised:
        training.submit(aws, training_request(NAME), if_exists="fail")
    assert NAME in str(raised.value)
    assert raised.value.exit_code == 2
    assert raised.value.problems[0].path == "TrainingJobName"


def test_new_policy_creates_the_first_free_suffixed_name_and_renames_the_hyperparameter():
    aws = StubbedAWS()
    request = training_request(NAME)
    _describes(aws, ("Completed", "Completed"))
    aws.stub("sagemaker").add_response(
        "describe_training_job", training_description(f"{NAME}-2", "Failed", "Failed"), {"TrainingJobName": f"{NAME}-2"}
    )
    _not_found(aws, f"{NAME}-3")
    expected = dict(request, TrainingJobName=f"{NAME}-3")
    expected["HyperParameters"] = dict(request["HyperParameters"], sagemaker_job_name=json.dumps(f"{NAME}-3"))
    aws.stub("sagemaker").add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:x"}, expected)
    result = training.submit(aws, request, if_exists="new")
    aws.verify()
    assert result.job_name == f"{NAME}-3"
    assert result.created is True


def test_new_policy_keeps_long_names_within_63_characters():
    long_name = "a" * 63
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response(
        "describe_training_job", training_description(long_name, "Completed", "Completed"), {"TrainingJobName": long_name}
    )
    _not_found(aws, "a" * 61 + "-2")
    aws.stub("sagemaker").add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:x"}, None)
    result = training.submit(aws, training_request(long_name), if_exists="new")
    assert result.job_name == "a" * 61 + "-2"
    assert len(result.job_name) == 63


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("ResourceInUse", "Training job names must be unique within an AWS account and region"),
        ("ValidationException", "A training job with this name already exists"),
    ],
)
def test_a_create_race_is_treated_as_an_existing_job(code, message):
    aws = StubbedAWS()
    _not_found(aws)
    aws.stub("sagemaker").add_client_error("create_training_job", service_error_code=code, service_message=message)
    _describes(aws, ("InProgress", "Starting"))
    result = training.submit(aws, training_request(NAME))
    aws.verify()
    assert result.created is False
    assert result.status == "InProgress"


def test_an_invalid_request_becomes_a_spec_error():
    aws = StubbedAWS()
    _not_found(aws)
    aws.stub("sagemaker").add_client_error(
        "create_training_job", service_error_code="ValidationException", service_message="Invalid instance type"
    )
    with pytest.raises(SpecError) as raised:
        training.submit(aws, training_request(NAME))
    assert "Invalid instance type" in str(raised.value)


@pytest.mark.parametrize("bad", ["-starts-with-hyphen", "has_underscore", "x" * 64, ""])
def test_invalid_names_are_rejected_before_any_call(bad):
    aws = StubbedAWS()
    with pytest.raises(SpecError) as raised:
        training.submit(aws, training_request(bad))
    assert raised.value.problems[0].path == "TrainingJobName"
    assert aws.requested == []


def test_unknown_if_exists_value_is_rejected():
    with pytest.raises(SpecError) as raised:
        training.submit(StubbedAWS(), training_request(NAME), if_exists="overwrite")
    assert raised.value.problems[0].path == "if_exists"


def _waiting(aws: StubbedAWS, clock: FakeClock, poll_seconds: float):
    """The backend whose wait (the kit's, over its look) walks the stubbed states on ``clock``: the job was created
    at CREATED, the wait begins ``clock.now - 1000`` s later (FakeClock starts at 1000)."""
    backend = SageMakerBackend(client_factory=aws, poll_seconds=poll_seconds)
    backend.now = lambda: CREATED.timestamp() + clock.now - 1000.0
    backend.pause = clock.sleep
    return backend


def _progress(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "trainops.backends.polled"]


def test_wait_walks_in_progress_to_completed_and_reports_each_change(caplog):
    caplog.set_level(logging.INFO, "trainops.backends.polled")
    aws = StubbedAWS()
    _describes(
        aws,
        ("InProgress", "Starting"),
        ("InProgress", "Training"),
        ("InProgress", "Training"),
        ("InProgress", "Uploading"),
        ("Completed", "Completed"),
        billable=3600,
        training=3600,
    )
    clock = FakeClock()
    summary = _waiting(aws, clock, 30).wait(JobHandle("sagemaker", NAME))
    aws.verify()
    assert summary.status.value == "Completed"
    assert summary.model_artifact.endswith(f"{NAME}/output/model.tar.gz")
    seen = _progress(caplog)
    assert [line.split(" / ")[1].split(" (")[0] for line in seen[:-1]] + [seen[-1].split(" ended ")[1]] == \
        ["Starting", "Training", "Uploading", "Completed"]
    assert clock.sleeps == [30, 30, 30, 30]


@pytest.mark.parametrize(
    ("final", "secondary", "reason", "expected"),
    [
        ("Failed", "Failed", "AlgorithmError: rank 3 on host algo-2 exited with code 1", "rank 3 on host algo-2"),
        ("Stopped", "Stopped", None, "ended Stopped"),
        ("Stopped", "MaxRuntimeExceeded", None, "MaxRuntimeInSeconds"),
    ],
)
def test_wait_raises_job_failed_with_the_reason(final, secondary, reason, expected, caplog):
    caplog.set_level(logging.INFO, "trainops.backends.polled")
    aws = StubbedAWS()
    _describes(aws, ("InProgress", "Training"))
    _describes(aws, (final, secondary), failure_reason=reason)
    clock = FakeClock()
    result = _waiting(aws, clock, 10).wait(JobHandle("sagemaker", NAME))  # a failed job is returned, not raised
    with pytest.raises(JobFailed) as raised:
        result.raise_for_status()
    assert expected in _progress(caplog)[-1]  # how it ended, with what its secondary status means
    assert result.status.value == final
    assert raised.value.exit_code == 1


def test_spot_interruption_is_reported_and_the_wait_goes_on_until_completed(caplog):
    caplog.set_level(logging.INFO, "trainops.backends.polled")
    aws = StubbedAWS()
    _describes(
        aws,
        ("InProgress", "Training"),
        ("InProgress", "Interrupted"),
        ("InProgress", "Interrupted"),
        ("InProgress", "Training"),
        ("Completed", "Completed"),
        spot=True,
        max_wait=14400,
        billable=1200,
        training=4000,
    )
    clock = FakeClock()
    summary = _waiting(aws, clock, 60).wait(JobHandle("sagemaker", NAME))
    assert summary.status.value == "Completed" and summary.details["max_wait_seconds"] == 14400  # spot
    updates = _progress(caplog)
    assert [line.split(" / ")[1].split(" (")[0] for line in updates[:-1]] + [updates[-1].split(" ended ")[1]] == \
        ["Training", "Interrupted", "Training", "Completed"]
    assert "spot interruption" in updates[1]


def test_wait_times_out_after_max_run_plus_grace_and_leaves_the_job_alone():
    aws = StubbedAWS()
    # Bound = 100 + 50 = 150 s with 60 s polls: describes at t=0, 60, 120, 150, then give up.
    _describes(aws, *[("InProgress", "Training")] * 4)
    clock = FakeClock()
    with pytest.raises(WaitTimedOut) as raised:
        _waiting(aws, clock, 60).wait(JobHandle("sagemaker", NAME),
                                      guards=JobGuards(max_run=100, grace_seconds=50, stop_at_bound=False))
    aws.verify()  # and no stop_training_job call was queued or made
    assert clock.sleeps == [60, 60, 30]
    assert "InProgress" in str(raised.value)
    assert isinstance(raised.value, JobFailed)


def test_wait_reads_the_limits_from_the_job_when_not_given():
    aws = StubbedAWS()
    # The limits are the job's own (max_run 60, spot max_wait 60): bound 60 + 60 + 0 = 120 s.
    _describes(aws, *[("InProgress", "Interrupted")] * 3, spot=True, max_run=60, max_wait=60)
    clock = FakeClock()
    with pytest.raises(WaitTimedOut):
        _waiting(aws, clock, 60).wait(JobHandle("sagemaker", NAME), guards=JobGuards(grace_seconds=0,
                                                                                      stop_at_bound=False))
    assert sum(clock.sleeps) == 120


def test_stop_calls_stop_training_job_for_a_running_job():
    aws = StubbedAWS()
    _describes(aws, ("InProgress", "Training"))
    aws.stub("sagemaker").add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    assert training.stop(aws, NAME) == "Stopping"
    aws.verify()


def test_stop_of_a_finished_job_makes_no_stop_call():
    aws = StubbedAWS()
    _describes(aws, ("Completed", "Completed"))
    assert training.stop(aws, NAME) == "Completed"
    aws.verify()


def test_stop_racing_with_completion_reports_the_final_status():
    aws = StubbedAWS()
    _describes(aws, ("InProgress", "Uploading"))
    aws.stub("sagemaker").add_client_error(
        "stop_training_job", service_error_code="ValidationException", service_message="The job is not in progress"
    )
    _describes(aws, ("Completed", "Completed"))
    assert training.stop(aws, NAME) == "Completed"


def test_describe_of_an_unknown_job_names_it():
    aws = StubbedAWS()
    _not_found(aws, "nope")
    with pytest.raises(SpecError) as raised:
        training.describe(aws, "nope")
    assert "nope" in str(raised.value)


def test_summary_is_small_and_json_serialisable():
    response = training_description(
        NAME, "Completed", "Completed", spot=True, max_wait=9000, billable=900, training=3000,
        transitions=[("Starting", "Preparing the instances"), ("Training", "Training in progress")],
    )
    summary = training.summarize(response)
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["instance_type"] == "ml.p4d.24xlarge"
    assert data["instance_count"] == 2
    assert data["billable_seconds"] == 900
    assert data["max_wait_seconds"] == 9000
    assert [item["status"] for item in data["secondary_status_history"]] == ["Starting", "Training"]
    assert data["creation_time"].startswith("2026-01-02T03:04:05")
    assert "AlgorithmSpecification" not in data and "HyperParameters" not in data


def test_summary_counts_instances_of_heterogeneous_clusters():
    response = training_description(NAME, "InProgress", "Training")
    response["ResourceConfig"] = {
        "VolumeSizeInGB": 100,
        "InstanceGroups": [
            {"InstanceGroupName": "gpus", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "cpus", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 3},
        ],
    }
    summary = training.summarize(response)
    assert summary.instance_count == 5
    assert summary.instance_type is None
    assert [group["name"] for group in summary.instance_groups] == ["gpus", "cpus"]
