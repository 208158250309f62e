"""SageMakerTrainingTrigger: serialize() round-trips; run() (driven with asyncio) walks InProgress -> Completed and
InProgress -> Failed against a stubbed SageMaker client, reports timeouts and errors as events, and on_kill stops the
job. The events then go through the operator's execute_complete, as Airflow does after deferral."""

from __future__ import annotations

import asyncio
import time

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException  # noqa: E402
from support.sagemaker_shapes import training_description  # noqa: E402
from support.stubbed_aws import StubbedAWS  # noqa: E402

from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.operators.triggers import CLASSPATH, SageMakerTrainingTrigger  # noqa: E402

NAME = "digits-0123456789"


@pytest.fixture
def aws(monkeypatch):
    stubbed = StubbedAWS()
    seen = []

    def factory(conn_id, region):
        seen.append((conn_id, region))
        return stubbed, region or "us-east-1"

    monkeypatch.setattr("trainops.operators.common.aws_client_factory", factory)
    stubbed.connections = seen
    return stubbed


def describes(aws: StubbedAWS, *states: tuple[str, str], **options) -> None:
    for status, secondary in states:
        aws.stub("sagemaker").add_response("describe_training_job",
                                           training_description(NAME, status, secondary, **options),
                                           {"TrainingJobName": NAME})


def run_trigger(trigger: SageMakerTrainingTrigger) -> list:
    async def collect() -> list:
        return [event async for event in trigger.run()]

    return asyncio.run(collect())


def trigger(**overrides) -> SageMakerTrainingTrigger:
    arguments = dict(job_name=NAME, aws_conn_id="aws_training", region_name="eu-west-1", poll_seconds=0,
                     max_run=7200)
    arguments.update(overrides)
    return SageMakerTrainingTrigger(**arguments)


def test_serialize_round_trips():
    original = trigger(max_wait=9000, grace_seconds=600, started_at=1234.5)
    classpath, kwargs = original.serialize()
    assert classpath == CLASSPATH
    module, _, name = classpath.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    rebuilt = cls(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert kwargs == {"job_name": NAME, "aws_conn_id": "aws_training", "region_name": "eu-west-1",
                      "poll_seconds": 0, "max_run": 7200, "max_wait": 9000, "grace_seconds": 600,
                      "started_at": 1234.5, "reattached": False}


def test_started_at_defaults_to_now_and_survives_serialization():
    before = time.time()
    first = trigger()
    assert before <= first.started_at <= time.time()
    # A trigger moved to another triggerer keeps the original start: its bound does not start again.
    assert SageMakerTrainingTrigger(**first.serialize()[1]).started_at == first.started_at


def test_run_walks_in_progress_to_completed(aws):
    describes(aws, ("InProgress", "Starting"), ("InProgress", "Training"), ("InProgress", "Uploading"))
    completed = training_description(NAME, "Completed", "Completed", billable=3000, training=3100)
    completed["FinalMetricDataList"] = [{"MetricName": "val:accuracy", "Value": 0.97,
                                         "Timestamp": completed["CreationTime"]}]
    aws.stub("sagemaker").add_response("describe_training_job", completed, {"TrainingJobName": NAME})
    events = run_trigger(trigger())
    aws.verify()
    assert aws.connections == [("aws_training", "eu-west-1")]  # the task's connection and region reach the trigger
    assert len(events) == 1
    payload = events[0].payload
    assert payload["status"] == "success"
    assert (payload["job_status"], payload["billable_seconds"], payload["duration_seconds"]) == ("Completed", 3000,
                                                                                                 3100)
    assert payload["metrics"] == {"val:accuracy": 0.97}
    assert payload["model_artifact"] == f"s3://trainops-test/output/{NAME}/output/model.tar.gz"
    assert "SecondaryStatusTransitions" not in payload and "ResourceConfig" not in payload  # small, not describe
    result = DistributedTrainingOperator(task_id="train", spec={}, backend="sagemaker",
                                         stream_logs=False).execute_complete({}, payload, reattached=False)
    assert (result["status"], result["metrics"], result["region"]) == ("Completed", {"val:accuracy": 0.97},
                                                                       "eu-west-1")


def test_run_walks_in_progress_to_failed_and_execute_complete_raises_the_reason(aws):
    reason = "AlgorithmError: rank 3 on host algo-2 exited with code 1"
    describes(aws, ("InProgress", "Training"))
    describes(aws, ("Failed", "Failed"), failure_reason=reason)
    events = run_trigger(trigger())
    aws.verify()
    payload = events[0].payload
    assert (payload["status"], payload["failure_reason"]) == ("failed", reason)
    with pytest.raises(AirflowException, match="rank 3 on host algo-2 exited with code 1"):
        DistributedTrainingOperator(task_id="train", spec={}, stream_logs=False).execute_complete({}, payload)


def test_a_stopped_job_is_a_stopped_event_explaining_the_secondary_status(aws):
    describes(aws, ("Stopped", "MaxRuntimeExceeded"))
    payload = run_trigger(trigger())[0].payload
    assert payload["status"] == "stopped"
    assert "MaxRuntimeInSeconds" in payload["message"]


def test_a_spot_interruption_keeps_waiting(aws):
    describes(aws, ("InProgress", "Interrupted"), ("InProgress", "Training"), ("Completed", "Completed"),
              spot=True, max_wait=9000)
    assert run_trigger(trigger())[0].payload["status"] == "success"
    aws.verify()


def test_the_wait_is_bounded_by_the_jobs_limits_and_reports_a_timeout(aws):
    # The job's own StoppingCondition (60 s) wins over the spec's max_run; the bound counts from started_at.
    describes(aws, ("InProgress", "Training"), max_run=60)
    late = trigger(max_run=7200, grace_seconds=0, started_at=time.time() - 61)
    payload = run_trigger(late)[0].payload
    assert payload["status"] == "timeout"
    assert "bound 60 s" in payload["message"] and "was not stopped" in payload["message"]
    with pytest.raises(AirflowException, match="gave up waiting"):
        DistributedTrainingOperator(task_id="train", spec={}, stream_logs=False).execute_complete({}, payload)


def test_spot_jobs_get_max_wait_on_top_of_max_run(aws):
    # 60 s max_run + 100 s max_wait: after 90 s a spot job is still inside its bound.
    describes(aws, ("InProgress", "Interrupted"), ("Completed", "Completed"), spot=True, max_run=60, max_wait=100)
    payload = run_trigger(trigger(grace_seconds=0, started_at=time.time() - 90))[0].payload
    assert payload["status"] == "success"


def test_an_aws_error_becomes_an_error_event_not_a_crashed_trigger(aws):
    aws.stub("sagemaker").add_client_error("describe_training_job", service_error_code="AccessDeniedException",
                                           service_message="not authorized to DescribeTrainingJob",
                                           http_status_code=403)
    payload = run_trigger(trigger())[0].payload
    assert payload["status"] == "error"
    assert "not authorized" in payload["message"]


def test_on_kill_stops_the_remote_job(aws):
    describes(aws, ("InProgress", "Training"))
    aws.stub("sagemaker").add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    asyncio.run(trigger().on_kill())
    aws.verify()


def test_a_job_name_only_trigger_has_safe_defaults():
    bare = SageMakerTrainingTrigger(NAME)
    kwargs = bare.serialize()[1]
    assert (kwargs["aws_conn_id"], kwargs["region_name"], kwargs["max_run"]) == ("aws_default", None, None)


# --- LocalTrainingTrigger -----------------------------------------------------------------------------------------
def local_first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def test_the_local_trigger_reports_a_missing_job_as_an_error_event(tmp_path):
    from trainops.operators.triggers import LocalTrainingTrigger

    event = local_first_event(LocalTrainingTrigger("never-submitted", workdir=str(tmp_path), reattached=True))
    assert (event["status"], event["backend"], event["reattached"]) == ("error", "local", True)
    assert "never-submitted" in event["message"]
    with pytest.raises(AirflowException, match="never-submitted"):
        DistributedTrainingOperator(task_id="train", spec={}, backend="local").execute_complete({}, event)


def test_the_local_trigger_gives_up_after_max_run_plus_grace_counted_from_its_first_start(tmp_path, monkeypatch):
    from trainops.operators import triggers

    monkeypatch.setattr(triggers.LocalTrainingTrigger, "_read",
                        lambda self: {"job_name": self.job_name, "status": "InProgress", "secondary_status": "Training"})
    # a trigger restarted on another triggerer keeps started_at: the allowance does not start again
    trigger = triggers.LocalTrainingTrigger("slow-job", max_run=10, grace_seconds=5, poll_seconds=0,
                                            started_at=time.time() - 60)
    event = local_first_event(trigger)
    assert (event["status"], event["job_status"]) == ("timeout", "InProgress")
    assert "trainops stop slow-job" in event["message"]
