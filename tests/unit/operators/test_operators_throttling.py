"""ThrottlingException backs off without failing a task (issue 26 item 7), against botocore's Stubber: moto never
throttles. A Stubber answer goes to the caller as it is (botocore's retries act on HTTP answers, which a Stubber
replaces), so these throttles are the ones botocore's own adaptive retries gave up on; that first line of defence is
tested against moto with throttles injected into the HTTP answers (tests/system/test_sagemaker_throttling_moto.py).
A throttled look is a failed look (`trainops.backends.looks`; issue 38 item 4: tests/system/test_failed_looks_moto.py
injects every kind against moto):

- the trigger: throttled looks are paused (the poll interval, at least 1 s) and retried, the wait goes on, the task
  resumes with success;
- the reschedule poke: a throttled look is looked at again within the poke instead of failing the try; the poke
  finds the job by its name (created once) and reschedules as usual, and the next poke returns its result.
"""

from __future__ import annotations

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
import test_operators_triggers as trigger_tests  # noqa: E402
from support.sagemaker_shapes import training_description  # noqa: E402
from test_operators_triggers import NAME, describes, fresh_clients, run_trigger, trigger  # noqa: E402,F401

from trainops.operators.compat import AirflowRescheduleException  # noqa: E402
from trainops.operators.training import MIN_RESCHEDULE_SECONDS, DistributedTrainingOperator  # noqa: E402

aws = trigger_tests.aws  # the trigger tests' stubbed connection clients, shared


def throttle(aws, operation: str = "describe_training_job") -> None:
    aws.stub("sagemaker").add_client_error(operation, service_error_code="ThrottlingException",
                                           service_message="Rate exceeded", http_status_code=400)


def test_the_trigger_backs_off_on_throttled_looks_and_the_task_still_succeeds(aws, capsys):
    describes(aws, ("InProgress", "Training"))
    throttle(aws)
    throttle(aws)
    describes(aws, ("Completed", "Completed"), billable=42)
    event = run_trigger(trigger())[0].payload
    aws.verify()
    assert event["status"] == "success", event
    output = capsys.readouterr()
    warnings = [line for line in (output.out + output.err).splitlines() if "could not look at training job" in line]
    assert len(warnings) == 2, output
    assert all("ThrottlingException" in line and "looking again in 1 s" in line for line in warnings), warnings
    result = DistributedTrainingOperator(task_id="train", spec={}, backend="sagemaker",
                                         stream_logs=False).execute_complete({}, event, reattached=False)
    assert (result["status"], result["billable_seconds"]) == ("Completed", 42)


SPEC = {"name": "digits", "role": "arn:aws:iam::123456789012:role/trainops-test", "region": "eu-west-1",
        "framework_version": "2.3.0", "py_version": "py311", "entry_point": "train.py",
        "source_dir": "s3://trainops-test/code/sourcedir.tar.gz", "instance_type": "ml.p4d.24xlarge",
        "launcher": "toolkit", "instance_count": 2, "inputs": {"train": "s3://trainops-test/data/"},
        "output_path": "s3://trainops-test/output", "max_run": 7200}


class TaskInstance:
    dag_id, task_id, run_id, map_index, try_number = "retrain", "train", "manual__1", -1, 1


def test_a_throttled_reschedule_poke_looks_again_instead_of_failing_and_the_next_poke_succeeds(aws, monkeypatch):
    import trainops.backends.looks as looks
    import trainops.spec.names as names

    monkeypatch.setattr(names, "deterministic_job_name", lambda base, *parts: NAME)  # the stubs' job name
    pauses: list[float] = []
    monkeypatch.setattr(looks, "_sleep", pauses.append)  # the policy's pause, without waiting
    operator = DistributedTrainingOperator(task_id="train", spec=SPEC, backend="sagemaker", wait_mode="reschedule",
                                           check_interval=5, stream_logs=False)
    import datetime

    # created just now: the poke's guards (the wait bound from the job's start) let it run
    running = dict(training_description(NAME, "InProgress", "Training"),
                   CreationTime=datetime.datetime.now(datetime.timezone.utc))
    for _ in range(2):  # the re-attach policy's look, and the create that finds the job exists
        aws.stub("sagemaker").add_response("describe_training_job", running, {"TrainingJobName": NAME})
    throttle(aws)  # the poke's own look
    for _ in range(3):  # looked at again: the same job found by its name (no create), then the poke's look
        aws.stub("sagemaker").add_response("describe_training_job", running, {"TrainingJobName": NAME})
    with pytest.raises(AirflowRescheduleException) as first:
        operator.execute({"ti": TaskInstance()})
    assert pauses == [5.0]  # one failed look, paused for the poll interval
    pause = first.value.reschedule_date - datetime.datetime.now(datetime.timezone.utc)
    assert pause > datetime.timedelta(seconds=MIN_RESCHEDULE_SECONDS - 5)
    aws.verify()  # every stub used: no CreateTrainingJob was asked (the stubs have none)
    # the next poke: the same job, found by its name, now Completed: the poke returns its result
    done = training_description(NAME, "Completed", "Completed", billable=42)
    for _ in range(3):  # the re-attach policy's look, the create that finds it, the poke's look
        aws.stub("sagemaker").add_response("describe_training_job", done, {"TrainingJobName": NAME})
    result = DistributedTrainingOperator(task_id="train", spec=SPEC, backend="sagemaker", wait_mode="reschedule",
                                         check_interval=5, stream_logs=False).execute(
        {"ti": TaskInstance()})
    assert (result["job_name"], result["status"], result["billable_seconds"]) == (NAME, "Completed", 42)
    aws.verify()


def test_the_workers_poll_looks_again_through_failed_looks_to_the_jobs_result(aws, monkeypatch):
    """wait_mode="worker" on SageMaker: two looks answered 503 in the worker's poll are looked at again (not the job's
    failure, not the try's), and the task returns the job's result."""
    import datetime

    import trainops.spec.names as names

    monkeypatch.setattr(names, "deterministic_job_name", lambda base, *parts: NAME)
    running = dict(training_description(NAME, "InProgress", "Training"),
                   CreationTime=datetime.datetime.now(datetime.timezone.utc))
    for _ in range(4):  # the re-attach policy's look, the create that finds the job, the first look, the poll's
        aws.stub("sagemaker").add_response("describe_training_job", running, {"TrainingJobName": NAME})
    for _ in range(2):
        aws.stub("sagemaker").add_client_error("describe_training_job", service_error_code="ServiceUnavailable",
                                               http_status_code=503, expected_params={"TrainingJobName": NAME})
    aws.stub("sagemaker").add_response("describe_training_job",
                                       training_description(NAME, "Completed", "Completed", billable=42),
                                       {"TrainingJobName": NAME})
    result = DistributedTrainingOperator(task_id="train", spec=SPEC, backend="sagemaker", wait_mode="worker",
                                         check_interval=0, preflight=False, stream_logs=False).execute(
        {"ti": TaskInstance()})
    assert (result["job_name"], result["status"], result["billable_seconds"]) == (NAME, "Completed", 42)
