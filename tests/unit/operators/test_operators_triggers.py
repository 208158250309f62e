"""JobTrigger, the one trigger of every backend: serialize() round-trips; run() (driven with asyncio) walks
InProgress -> Completed and InProgress -> Failed against a stubbed SageMaker client through the backend seam, reports
timeouts and errors as events, and on_kill stops the job; on a real detached local job it streams the job's log lines
into the trigger's log (the task log, in Airflow) while the job runs. The events then go through the operator's
execute_complete, as Airflow does after deferral."""

from __future__ import annotations

import asyncio
import time

from support.airflow_home import isolate_airflow_home
from support.trigger_log import recorded_trigger

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException  # noqa: E402
from support.sagemaker_shapes import training_description  # noqa: E402
from support.stubbed_aws import StubbedAWS  # noqa: E402

from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.operators.triggers import CLASSPATH, JobTrigger  # noqa: E402

NAME = "digits-0123456789"


@pytest.fixture(autouse=True)
def fresh_clients():
    """Each test its own stubbed clients: the triggers of one process share their client factories."""
    from trainops.operators import triggers

    triggers._FACTORIES.clear()
    yield
    triggers._FACTORIES.clear()


def test_the_triggers_of_one_process_share_one_client_factory_per_connection_and_region():
    from trainops.operators.triggers import shared_client_factory

    first = shared_client_factory("aws_training", "eu-west-1")
    assert shared_client_factory("aws_training", "eu-west-1") is first
    assert shared_client_factory("aws_training", "us-east-1") is not first
    assert shared_client_factory("aws_other", "eu-west-1") is not first


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


def run_trigger(trigger: JobTrigger) -> list:
    async def collect() -> list:
        return [event async for event in trigger.run()]

    return asyncio.run(collect())


def handle(region: str = "eu-west-1") -> dict:
    return {"backend": "sagemaker", "job_name": NAME, "workdir": None, "region": region, "created": True}


def trigger(**overrides) -> JobTrigger:
    arguments = dict(handle=handle(), aws_conn_id="aws_training", poll_seconds=0, max_run=7200, stream_logs=False)
    arguments.update(overrides)
    return JobTrigger(**arguments)


def test_serialize_round_trips():
    original = trigger(max_wait=9000, grace_seconds=600, started_at=1234.5)
    classpath, kwargs = original.serialize()
    assert classpath == CLASSPATH
    module, _, name = classpath.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    rebuilt = cls(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert kwargs == {"handle": handle(), "kind": "training", "aws_conn_id": "aws_training",
                      "poll_seconds": 0, "max_run": 7200, "max_wait": 9000, "grace_seconds": 600,
                      "started_at": 1234.5, "reattached": False, "base_name": None, "stream_logs": False,
                      "backend_choice": None,
                      "log_lines_per_poll": 500, "guards": None}


def test_started_at_defaults_to_now_and_survives_serialization():
    before = time.time()
    first = trigger()
    assert before <= first.started_at <= time.time()
    # A trigger moved to another triggerer keeps the original start: its bound does not start again.
    assert JobTrigger(**first.serialize()[1]).started_at == first.started_at


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


def triggered_by(ti_state: str | None, task_state) -> JobTrigger:
    """A trigger as the triggerer runs it: with the task instance whose try deferred on it."""
    from types import SimpleNamespace

    task_state["now"] = ti_state
    deferred = trigger()
    deferred.task_instance = SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1,
                                             try_number=1)
    return deferred


@pytest.mark.parametrize("ti_state", ["failed", "success", "skipped", "removed"])
def test_on_kill_of_an_ended_task_stops_the_job(aws, task_state, ti_state):
    """Mark failed or success, a stopped DAG run, a deleted run: the user ended the task, the job stops."""
    describes(aws, ("InProgress", "Training"))
    aws.stub("sagemaker").add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    asyncio.run(triggered_by(ti_state, task_state).on_kill())
    aws.verify()
    assert task_state["asked"] == [("retrain", "train", "manual__1", -1)]


@pytest.mark.parametrize("ti_state", [None, "scheduled", "queued", "running", "deferred", "up_for_retry"])
def test_on_kill_of_a_cleared_task_leaves_the_job_to_its_next_try(aws, task_state, ti_state):
    """Airflow 3.3 calls on_kill when a clear removes the trigger too: the task instance runs again (no state yet,
    scheduled... deferred on its next try's trigger) and re-attaches, so StopTrainingJob is never called (the
    stubbed client has no answer for it: a call would fail the test)."""
    asyncio.run(triggered_by(ti_state, task_state).on_kill())
    aws.verify()
    assert task_state["asked"] == [("retrain", "train", "manual__1", -1)]


def test_a_handle_only_trigger_has_safe_defaults():
    bare = JobTrigger(handle(region=None))
    kwargs = bare.serialize()[1]
    assert (kwargs["aws_conn_id"], bare.region_name, kwargs["max_run"], kwargs["kind"]) == ("aws_default", None, None,
                                                                                          "training")
    assert kwargs["stream_logs"] is True


def test_an_unknown_job_kind_is_refused_naming_the_kinds():
    with pytest.raises(ValueError, match="kind: 'batch' is not one of training"):
        JobTrigger(handle(), kind="batch")


# --- the same trigger on local jobs -----------------------------------------------------------------------------------
def local_first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def local_handle(name: str, workdir) -> dict:
    return {"backend": "local", "job_name": name, "workdir": str(workdir), "region": None, "created": True}


def test_the_trigger_reports_a_missing_local_job_as_an_error_event(tmp_path):
    event = local_first_event(JobTrigger(local_handle("never-submitted", tmp_path), reattached=True))
    assert (event["status"], event["backend"], event["reattached"]) == ("error", "local", True)
    assert "never-submitted" in event["message"]
    with pytest.raises(AirflowException, match="never-submitted"):
        DistributedTrainingOperator(task_id="train", spec={}, backend="local").execute_complete({}, event)


def test_the_trigger_gives_up_after_max_run_plus_grace_counted_from_its_first_start(tmp_path, monkeypatch):
    from trainops.backends.api import JobResult
    from trainops.backends.local.backend import LocalBackend
    from trainops.backends.states import JobStatus

    monkeypatch.setattr(LocalBackend, "describe", lambda self, handle: JobResult(
        "local", handle.job_name, JobStatus.IN_PROGRESS, secondary_status="Training"))
    # a trigger restarted on another triggerer keeps started_at: the allowance does not start again
    trigger = JobTrigger(local_handle("slow-job", tmp_path), max_run=10, grace_seconds=5, poll_seconds=0,
                         started_at=time.time() - 60, stream_logs=False)
    event = local_first_event(trigger)
    assert (event["status"], event["job_status"]) == ("timeout", "InProgress")
    assert f"trainops stop slow-job --backend local -o workdir={tmp_path}" in event["message"]


def test_the_stop_hint_names_trainops_stop_for_training_jobs_only(tmp_path):
    """`trainops stop` stops training jobs: a timed-out evaluation's hint points at its backend's tools instead, and
    a training job's names the task's backend as the task named it."""
    from trainops.backends.api import JobHandle

    handle = JobHandle.from_dict(local_handle("slow-eval", tmp_path))
    evaluation = JobTrigger(handle.to_dict(), kind="evaluation", stream_logs=False)
    assert evaluation._stop_hint(handle) == "the local backend's own tools"
    training = JobTrigger(handle.to_dict(), stream_logs=False, backend_choice={"backend": "team-local"})
    assert training._stop_hint(handle) == f"`trainops stop slow-eval --backend team-local -o workdir={tmp_path}`"


def test_the_trigger_streams_a_running_local_jobs_log_lines_as_they_come(tmp_path):
    """A real detached local job prints a line a second; the trigger writes each line into its log while the job
    runs (seen before the job ends), each line once, bounded per poll, and the last lines after the end."""
    from trainops.backends.api import get_backend
    from trainops.backends.local import status
    from trainops.steps.train import load_spec

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(
        "import os, pathlib, time\n"
        "for step in range(6):\n"
        "    print(f'step {step} of the job', flush=True)\n"
        "    time.sleep(1)\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n")
    spec = load_spec({"name": "chatty", "entry_point": "train.py", "source_dir": str(source),
                      "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 300})
    work = tmp_path / "w"
    backend = get_backend("local", workdir=str(work))
    submitted = backend.submit(spec, "chatty-job", detached=True)
    seen: list[tuple[str, str]] = []  # (line, the job's status when the trigger wrote it)

    # The task log is Airflow's; here a recorder that notes the job's status with each line.
    RecordedTrigger = recorded_trigger(
        lambda line: seen.append((line, status.read("chatty-job", str(work))["status"])))

    trigger = RecordedTrigger(submitted.to_dict(), poll_seconds=0.3, log_lines_per_poll=2)
    event = local_first_event(trigger)
    assert event["status"] == "success", event
    lines = [line for line, _ in seen if "of the job" in line]
    assert lines == [f"[algo-1 rank 0] step {step} of the job" for step in range(6)], seen  # each once, in order
    assert [line for line, state in seen if "of the job" in line and state == "InProgress"], \
        "no log line reached the trigger's log while the job ran"


def aws_error(code: str, message: str, status: int):
    """The error a SageMaker describe raises for an AWS error answer: trainops' own, from botocore's ClientError."""
    from botocore.exceptions import ClientError

    from trainops.aws.clients import translate_client_error

    cause = ClientError({"Error": {"Code": code, "Message": message},
                         "ResponseMetadata": {"HTTPStatusCode": status}}, "DescribeTrainingJob")
    error = translate_client_error(cause, "DescribeTrainingJob busy-job")
    error.__cause__ = cause
    return error


def test_a_throttled_describe_backs_off_and_keeps_waiting(tmp_path, monkeypatch):
    """ThrottlingException after the clients' own retries is a failed look: the trigger pauses and looks again; the
    task does not fail."""
    from trainops.backends.api import JobResult
    from trainops.backends.local.backend import LocalBackend
    from trainops.backends.states import JobStatus
    from trainops.operators import triggers

    answers = [aws_error("ThrottlingException", "Rate exceeded", 400)] * 2
    pauses: list[float] = []

    def describe(self, handle):
        if answers:
            raise answers.pop()
        return JobResult("local", handle.job_name, JobStatus.COMPLETED)

    real_sleep = asyncio.sleep

    async def sleep(seconds):
        pauses.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(LocalBackend, "describe", describe)
    monkeypatch.setattr(triggers.asyncio, "sleep", sleep)
    event = local_first_event(JobTrigger(local_handle("busy-job", tmp_path), poll_seconds=5, stream_logs=False))
    assert event["status"] == "success", event
    assert pauses == [5, 5]  # the poll interval
    answers[:] = [aws_error("AccessDeniedException", "not authorized", 400)]
    event = local_first_event(JobTrigger(local_handle("busy-job", tmp_path), poll_seconds=5, stream_logs=False))
    assert event["status"] == "error" and "not authorized" in event["message"]  # anything else still ends the wait


def test_a_trigger_rebuilt_by_another_triggerer_does_not_repeat_the_logs(tmp_path):
    """A trigger whose wait began long before (its serialized started_at) was taken over after a triggerer restart:
    the lines so far are in the task log already; it writes only what comes after."""
    from trainops.backends.api import get_backend
    from trainops.backends.local import status
    from trainops.steps.train import load_spec

    source = tmp_path / "code"
    source.mkdir()
    go_on = tmp_path / "go-on"  # made once the restarted trigger follows the job: no race with a fixed delay
    (source / "train.py").write_text(
        "import os, pathlib, time\n"
        "print('before the restart', flush=True)\n"
        f"while not os.path.exists({str(go_on)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('after the restart', flush=True)\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n")
    spec = load_spec({"name": "resumed", "entry_point": "train.py", "source_dir": str(source),
                      "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 300})
    work = tmp_path / "w"
    submitted = get_backend("local", workdir=str(work)).submit(spec, "resumed-job", detached=True)
    logs = work / "jobs" / "resumed-job" / "logs"
    deadline = time.time() + 60
    while not any("before the restart" in path.read_text() for path in logs.glob("algo-*.log")) \
            and time.time() < deadline:
        time.sleep(0.2)
    assert status.read("resumed-job", str(work))["status"] == "InProgress"
    seen: list[str] = []

    def note(line: str) -> None:
        seen.append(line)
        if "earlier log lines of resumed-job are in the log already" in line:
            go_on.touch()  # the trigger has taken its place in the log: the job may go on

    RecordedTrigger = recorded_trigger(note)

    trigger = RecordedTrigger(submitted.to_dict(), poll_seconds=0.3, started_at=time.time() - 3600)
    assert local_first_event(trigger)["status"] == "success"
    assert not any("before the restart" in line for line in seen), seen
    assert any("after the restart" in line for line in seen), seen
    assert any("earlier log lines of resumed-job are in the log already" in line for line in seen), seen
