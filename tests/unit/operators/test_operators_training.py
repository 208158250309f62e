"""DistributedTrainingOperator: template fields, bad specs, re-attach on retry (stubbed SageMaker), deferral,
execute_complete on every event, on_kill (SageMaker and a real local job), local + deferrable."""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()  # before Airflow is imported: never write into ~/airflow

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred  # noqa: E402
from support.sagemaker_shapes import ROLE_ARN, training_description  # noqa: E402
from support.stubbed_aws import StubbedAWS  # noqa: E402

from trainops.backends.request.render import render  # noqa: E402
from trainops.operators import training as training_module  # noqa: E402
from trainops.operators.links import TrainingJobLink  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.operators.triggers import JobTrigger  # noqa: E402
from trainops.spec.names import deterministic_job_name  # noqa: E402
from trainops.steps.train import load_spec  # noqa: E402

SPEC = {
    "name": "digits",
    "role": ROLE_ARN,
    "region": "us-east-1",
    "framework_version": "2.3.0",
    "py_version": "py311",
    "entry_point": "train.py",
    "source_dir": "s3://trainops-test/code/sourcedir.tar.gz",  # already in S3: nothing to upload
    "launcher": "toolkit",  # the trainops launcher would upload its runtime channel (issue 13): S3 calls
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
    "distribution": {"torch_distributed": {"enabled": True}},
    "inputs": {"train": "s3://trainops-test/data/train/"},
    "output_path": "s3://trainops-test/output",
    "max_run": 7200,
}
NAME = deterministic_job_name("digits", "retrain", "train", "scheduled__2026-01-05", -1)


def context(try_number: int = 1, run_id: str = "scheduled__2026-01-05", map_index: int = -1) -> dict:
    ti = SimpleNamespace(dag_id="retrain", task_id="train", run_id=run_id, map_index=map_index,
                         try_number=try_number)
    return {"ti": ti}


class CountingAWS(StubbedAWS):
    """Stubbed clients that also count the CreateTrainingJob calls that reached the client."""

    def __init__(self):
        super().__init__()
        self.created: list[str] = []
        self.stopped: list[str] = []
        sagemaker = self("sagemaker")
        sagemaker.meta.events.register(
            "provide-client-params.sagemaker.CreateTrainingJob",
            lambda params, **_: self.created.append(params["TrainingJobName"]))
        sagemaker.meta.events.register(
            "provide-client-params.sagemaker.StopTrainingJob",
            lambda params, **_: self.stopped.append(params["TrainingJobName"]))
        self.requested.clear()


@pytest.fixture
def aws(monkeypatch):
    stubbed = CountingAWS()
    monkeypatch.setattr("trainops.operators.common.aws_client_factory",
                        lambda conn, region: (stubbed, region or "us-east-1"))
    return stubbed


def not_found(aws: StubbedAWS, name: str = NAME) -> None:
    aws.stub("sagemaker").add_client_error(
        "describe_training_job", service_error_code="ValidationException",
        service_message="Requested resource not found.", http_status_code=400,
        expected_params={"TrainingJobName": name})


def described(aws: StubbedAWS, status: str, secondary: str, name: str = NAME, **options) -> None:
    aws.stub("sagemaker").add_response("describe_training_job", training_description(name, status, secondary,
                                                                                     **options),
                                       {"TrainingJobName": name})


def created(aws: StubbedAWS, name: str = NAME) -> None:
    request = render(load_spec(SPEC), job_name=name)
    aws.stub("sagemaker").add_response(
        "create_training_job", {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"},
        request)


def first_try(aws: StubbedAWS) -> None:
    """What a first try asks: is there a job? (train step, then submit), create it, describe it once."""
    not_found(aws)
    not_found(aws)
    created(aws)
    described(aws, "InProgress", "Starting")


def operator(**overrides) -> DistributedTrainingOperator:
    arguments = dict(task_id="train", spec=SPEC, backend="sagemaker", deferrable=True, check_interval=0)
    arguments.update(overrides)
    return DistributedTrainingOperator(**arguments)


# --- structure -----------------------------------------------------------------------------------------------------
def test_template_fields_cover_the_spec_name_backend_connection_and_region():
    op = operator()
    for field in ("spec", "job_name", "backend", "aws_conn_id", "region_name"):
        assert field in op.template_fields
        assert hasattr(op, field)
    assert any(isinstance(link, TrainingJobLink) for link in op.operator_extra_links)


def test_init_only_assigns_so_a_bad_spec_fails_in_execute_not_at_parse_time():
    op = operator(spec={"instance_count": "many"}, backend="sagemaker")  # no error here: DAG parsing stays cheap
    assert op.spec == {"instance_count": "many"}


def test_a_bad_spec_fails_the_task_listing_every_problem_with_its_field(aws):
    bad = dict(SPEC, instance_count=0, max_run=-5, entry_point=None)
    with pytest.raises(AirflowFailException) as raised:
        operator(spec=bad).execute(context())
    message = str(raised.value)
    for field in ("instance_count", "max_run", "entry_point"):
        assert field in message
    assert aws.requested == [], "nothing may reach AWS before the spec is valid"


def test_an_unknown_backend_or_if_job_exists_is_refused_with_the_field(aws):
    with pytest.raises(AirflowFailException, match="backend"):
        operator(backend="kubernetes").execute(context())
    with pytest.raises(AirflowFailException, match="if_job_exists"):
        operator(if_job_exists="sometimes").execute(context())


# --- re-attach on retry (issue 10 item 5) -------------------------------------------------------------------------
def test_a_retry_while_the_job_runs_reattaches_and_creates_no_second_job(aws):
    # Try 1 creates the job, then defers.
    first_try(aws)
    with pytest.raises(TaskDeferred) as first:
        operator().execute(context(try_number=1))
    assert aws.created == [NAME]
    # The worker died; try 2 (a new operator instance, the same task instance) finds the running job.
    for _ in range(3):  # train step, submit, and the summary after submit: all describes, no create
        described(aws, "InProgress", "Training")
    with pytest.raises(TaskDeferred) as second:
        operator().execute(context(try_number=2))
    aws.verify()
    assert aws.created == [NAME], "a retry must never create a second training job"
    for deferred in (first.value, second.value):
        assert isinstance(deferred.trigger, JobTrigger)
        assert deferred.trigger.job_name == NAME
    assert second.value.kwargs == {"reattached": True, "budget_used": {}}


def test_a_retry_after_the_job_completed_returns_its_result_without_waiting(aws):
    for _ in range(2):  # the re-attach policy's look, then the submit's own
        described(aws, "Completed", "Completed", billable=3600, training=3700)
    final = training_description(NAME, "Completed", "Completed", billable=3600, training=3700)
    final["FinalMetricDataList"] = [{"MetricName": "train:loss", "Value": 0.25, "Timestamp": final["CreationTime"]}]
    aws.stub("sagemaker").add_response("describe_training_job", final, {"TrainingJobName": NAME})
    result = operator().execute(context(try_number=3))
    aws.verify()
    assert aws.created == []
    assert (result["job_name"], result["status"], result["reattached"]) == (NAME, "Completed", True)
    assert result["model_artifact"] == f"s3://trainops-test/output/{NAME}/output/model.tar.gz"
    assert result["billable_seconds"] == 3600
    # the same XCom as after a wait or a deferral: the job's final metrics too
    assert result["metrics"] == {"train:loss": 0.25}


def test_names_differ_by_run_and_map_index_but_not_by_try():
    names = {deterministic_job_name("digits", "retrain", "train", run, index)
             for run in ("a", "b") for index in (-1, 0)}
    assert len(names) == 4
    assert all(len(name) <= 63 for name in names)


def test_the_deferral_carries_region_connection_and_the_jobs_bound(aws):
    first_try(aws)
    with pytest.raises(TaskDeferred) as deferred:
        operator(aws_conn_id="aws_training", check_interval=45).execute(context())
    trigger = deferred.value.trigger
    assert (trigger.aws_conn_id, trigger.region_name, trigger.poll_seconds) == ("aws_training", "us-east-1", 45)
    assert (trigger.max_run, trigger.max_wait) == (7200, None)
    # Airflow's own timeout is later than the trigger's bound, so the trigger reports the timeout, with a reason.
    assert deferred.value.timeout.total_seconds() > 7200 + trigger.grace_seconds
    assert deferred.value.method_name == "execute_complete"


# --- execute_complete ---------------------------------------------------------------------------------------------
def _event(status: str, **extra) -> dict:
    base = {"status": status, "job_name": NAME, "region": "us-east-1", "message": f"job {status}"}
    base.update(extra)
    return base


@pytest.mark.parametrize("status, message", [
    ("failed", "training job x ended Failed: AlgorithmError: rank 3 on host algo-2 exited with code 1"),
    ("stopped", "training job x ended Stopped (MaxRuntimeExceeded: the job ran longer than MaxRuntimeInSeconds)"),
    ("timeout", "gave up waiting for training job x after 90000 s"),
    ("error", "waiting for training job x failed: access denied"),
])
def test_execute_complete_raises_on_every_non_success_event_with_its_reason(status, message):
    op = operator(stream_logs=False)
    with pytest.raises(AirflowException) as raised:
        op.execute_complete(context(), _event(status, message=message))
    assert str(raised.value).startswith(message)  # then the failure's class, where one is known


def test_execute_complete_raises_without_an_event():
    with pytest.raises(AirflowException, match="outcome is unknown"):
        operator(stream_logs=False).execute_complete(context(), None)


def test_execute_complete_returns_small_json_on_success_and_sets_the_console_link(aws):
    from trainops.runtime.catalog import hourly_price

    event = _event("success", job_status="Completed", secondary_status="Completed", failure_reason=None,
                   model_artifact="s3://b/model.tar.gz", billable_seconds=120, duration_seconds=130,
                   metrics={"loss": 0.1})
    described(aws, "Completed", "Completed", billable=120, training=130)  # the cost looks for earlier attempts
    op = operator(stream_logs=False)
    result = op.execute_complete(context(), event, reattached=False)
    cost = result.pop("cost")
    assert result == {"backend": "sagemaker", "job_name": NAME, "status": "Completed",
                      "secondary_status": "Completed", "failure_reason": None, "model_artifact": "s3://b/model.tar.gz",
                      "billable_seconds": 120, "duration_seconds": 130, "metrics": {"loss": 0.1},
                      "reattached": False, "region": "us-east-1"}
    assert cost["attempts"] == 1
    assert cost["total"] == pytest.approx(120 * 2 * hourly_price("ml.p4d.24xlarge", "us-east-1") / 3600, rel=1e-4)
    link = TrainingJobLink().get_link(op, ti_key=None)
    assert link == f"https://console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/{NAME}"


# --- on_kill ------------------------------------------------------------------------------------------------------
def test_on_kill_stops_the_sagemaker_job_the_task_started(aws, task_state):
    first_try(aws)
    op = operator(wait_for_completion=False, deferrable=False)
    result = op.execute(context())
    assert result["status"] == "InProgress"
    described(aws, "InProgress", "Training")
    aws.stub("sagemaker").add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    op.on_kill()
    aws.verify()  # the StopTrainingJob call was made, for this job
    assert aws.stopped == [NAME]
    assert task_state["asked"] == [("retrain", "train", "scheduled__2026-01-05", -1)]


@pytest.mark.parametrize("state", [None, "restarting", "queued", "running", "deferred", "up_for_retry"])
def test_on_kill_of_a_superseded_try_leaves_the_sagemaker_job_to_the_next_try(aws, task_state, state, capsys):
    """A try killed because it was cleared or re-queued: the task instance will run again and re-attach to the job,
    so StopTrainingJob is never called."""
    first_try(aws)
    op = operator(wait_for_completion=False, deferrable=False)
    op.execute(context())
    task_state["now"] = state
    op.on_kill()
    assert aws.stopped == []
    assert "its next try re-attaches to training job" in capsys.readouterr().out


def test_on_kill_leaves_the_job_running_when_the_state_cannot_be_read_and_says_how_to_stop_it(aws, task_state,
                                                                                              capsys):
    first_try(aws)
    op = operator(wait_for_completion=False, deferrable=False)
    op.execute(context())
    task_state["now"] = ConnectionError("execution API unreachable")
    op.on_kill()
    assert aws.stopped == []
    assert f"trainops stop {NAME} --backend sagemaker -o region=us-east-1" in capsys.readouterr().out


def test_on_kill_before_any_job_does_nothing(aws):
    operator().on_kill()
    assert aws.requested == []


def test_on_kill_stops_a_running_local_job(tmp_path, task_state):
    task_state["now"] = "restarting"  # even cleared: a job in the task's process cannot outlive it
    source = tmp_path / "code"
    source.mkdir()
    (source / "sleepy.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    spec = {"name": "sleepy", "entry_point": "sleepy.py", "source_dir": str(source), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 600}
    op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", workdir=str(tmp_path / "work"),
                                     stream_logs=False)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = op.execute(context())
        except BaseException as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 60
    while getattr(op, "_held", None) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert op._held is not None, "the local job never started"
    logs = tmp_path / "work" / "jobs"
    while not any("started" in log.read_text(errors="replace") for log in logs.glob("*/logs/algo-1.log")) \
            and time.monotonic() < deadline:  # until the launcher has started the script
        time.sleep(0.05)
    op.on_kill()
    worker.join(timeout=90)
    assert not worker.is_alive(), "on_kill did not stop the local job"
    assert isinstance(outcome.get("error"), AirflowException)
    assert "Stopped" in str(outcome["error"])
    assert "the Airflow task was killed" in str(outcome["error"])


# --- local + deferrable: a detached job, a trigger on its status record ----------------------------------------------
def local_spec(tmp_path: Path, seconds: float) -> dict:
    source = tmp_path / "code"
    source.mkdir(exist_ok=True)
    (source / "train.py").write_text(
        "import os, pathlib, time\n"
        f"time.sleep({seconds})\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n"
        "print('trained once', flush=True)\n")
    return {"name": "tiny", "entry_point": "train.py", "source_dir": str(source), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 300}


def run_trigger(trigger) -> dict:
    import asyncio

    classpath, kwargs = trigger.serialize()
    assert classpath == "trainops.operators.triggers.JobTrigger"
    rebuilt = type(trigger)(**kwargs)  # what a (restarted) triggerer runs: the serialized form only

    async def first_event():
        async for event in rebuilt.run():
            return event.payload

    return asyncio.run(first_event())


def test_local_deferrable_submits_a_detached_job_defers_and_a_retry_reattaches(tmp_path):
    spec = local_spec(tmp_path, seconds=3)
    work = tmp_path / "w"

    def try_task(try_number: int):
        op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=True,
                                         workdir=str(work), check_interval=0.2)
        return op, op.execute(context(try_number=try_number))

    with pytest.raises(TaskDeferred) as first:
        try_task(1)
    trigger = first.value.trigger
    assert first.value.method_name == "execute_complete"
    assert first.value.kwargs == {"reattached": False, "budget_used": {}}
    name = trigger.job_name
    assert name == deterministic_job_name("tiny", "retrain", "train", "scheduled__2026-01-05", -1)
    # the job runs without the task: a second try (the worker died, the task was cleared) follows the same job
    with pytest.raises(TaskDeferred) as retry:
        try_task(2)
    assert retry.value.trigger.job_name == name and retry.value.kwargs == {"reattached": True, "budget_used": {}}
    event = run_trigger(trigger)
    assert (event["status"], event["job_status"], event["backend"]) == ("success", "Completed", "local"), event
    op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=True, workdir=str(work))
    result = op.execute_complete(context(), event, reattached=False)
    assert set(result) == set(training_module.XCOM_KEYS)  # the same XCom as a job that ran in the worker
    assert (result["backend"], result["status"], result["metrics"]) == ("local", "Completed", {})
    assert Path(result["model_artifact"]).is_file()
    # a try after the job completed returns its result at once, without deferring
    _, after = try_task(3)
    assert (after["job_name"], after["status"], after["reattached"]) == (name, "Completed", True)
    assert [path.name for path in (work / "jobs").iterdir()] == [name], "a try started a second job"
    synchronous = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", workdir=str(work))
    assert set(synchronous.execute(context(run_id="manual__sync"))) == set(result)


def test_a_failed_local_job_fails_the_task_after_deferral_and_a_retry_runs_a_suffixed_copy(tmp_path):
    spec = local_spec(tmp_path, seconds=0)
    (Path(spec["source_dir"]) / "train.py").write_text("raise SystemExit('no data')\n")
    work = tmp_path / "w"
    # A poll every 0.2 s instead of the default 30 s: the trigger sees the failure as soon as it is recorded.
    op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=True, workdir=str(work),
                                     check_interval=0.2)
    with pytest.raises(TaskDeferred) as first:
        op.execute(context())
    event = run_trigger(first.value.trigger)
    assert (event["status"], event["job_status"]) == ("failed", "Failed"), event
    with pytest.raises(AirflowException, match="no data"):
        op.execute_complete(context(), event, reattached=False)
    with pytest.raises(TaskDeferred) as retry:
        op.execute(context(try_number=2))
    assert retry.value.trigger.job_name == f"{first.value.trigger.job_name}-2"
    run_trigger(retry.value.trigger)


def test_killing_a_deferred_local_task_stops_its_job(tmp_path):
    """Without a task instance (the trigger run by hand, not by a triggerer) nothing supersedes it: on_kill stops."""
    import asyncio

    from trainops.backends.local import status

    work = tmp_path / "w"
    op = DistributedTrainingOperator(task_id="train", spec=local_spec(tmp_path, seconds=120), backend="local",
                                     deferrable=True, workdir=str(work))
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context())
    trigger = deferred.value.trigger
    deadline = time.monotonic() + 60
    # the user kills a task deferred on a running job (a stop asked while the supervisor is still starting the job
    # is forced after 60 s instead: a race of the detached supervisor, not of the trigger)
    while not status.read(trigger.job_name, str(work)).get("hosts") and time.monotonic() < deadline:
        time.sleep(0.2)
    started = time.monotonic()
    asyncio.run(trigger.on_kill())
    record = status.read(trigger.job_name, str(work))
    assert record["status"] == "Stopped", record
    assert time.monotonic() - started < 30


def test_importing_the_operator_module_loads_nothing_heavy():
    import subprocess

    code = ("import sys; import trainops.operators.training, trainops.operators.stage, trainops.operators.evaluate, "
            "trainops.operators.register, trainops.operators.render; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'torch', 'kfp') "
            "or m.startswith(('trainops.spec', 'trainops.steps', 'trainops.backends', "
            "'airflow.providers.amazon.aws'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


# --- synchronous SageMaker wait, with every host's logs in the task log -------------------------------------------
class FakeLogs:
    """CloudWatch Logs with one stream per host; answers any number of polls the same way (the follower polls on
    its own schedule)."""

    def __init__(self, job_name: str):
        self.streams = {f"{job_name}/algo-{host}-1767000000": [
            {"timestamp": 1767000000000 + 10 * step + host, "message": f"epoch {step} on algo-{host}\n"}
            for step in (1, 2)] for host in (1, 2)}

    def describe_log_streams(self, logGroupName, logStreamNamePrefix, nextToken=None):  # noqa: N803
        return {"logStreams": [{"logStreamName": name} for name in self.streams]}

    def get_log_events(self, logGroupName, logStreamName, startFromHead, nextToken=None, limit=None):  # noqa: N803
        if nextToken is None:
            return {"events": self.streams[logStreamName], "nextForwardToken": "f/end"}
        return {"events": [], "nextForwardToken": nextToken}


def test_sync_wait_streams_every_hosts_logs_and_returns_the_final_metrics(aws, monkeypatch, capsys):
    logs = FakeLogs(NAME)
    factory = lambda service: logs if service == "logs" else aws(service)  # noqa: E731
    monkeypatch.setattr("trainops.operators.common.aws_client_factory", lambda conn, region: (factory, "us-east-1"))
    first_try(aws)
    running = training_description(NAME, "InProgress", "Training")
    running["CreationTime"] = datetime.now(timezone.utc)  # started just now: well within its wait bound
    for _ in range(2):  # the poll's describe, then the guards' look at the running job (the backend's watch)
        aws.stub("sagemaker").add_response("describe_training_job", running, {"TrainingJobName": NAME})
    final = training_description(NAME, "Completed", "Completed", billable=100, training=110)
    final["FinalMetricDataList"] = [{"MetricName": "train:loss", "Value": 0.25,
                                     "Timestamp": final["CreationTime"]}]
    aws.stub("sagemaker").add_response("describe_training_job", final, {"TrainingJobName": NAME})
    result = operator(deferrable=False).execute(context())
    aws.verify()  # reading the logs asked SageMaker nothing: every describe here is the wait's or its guards'
    assert (result["status"], result["billable_seconds"], result["metrics"]) == ("Completed", 100,
                                                                                 {"train:loss": 0.25})
    output = capsys.readouterr().out
    for host in (1, 2):
        for step in (1, 2):
            assert output.count(f"[algo-{host}] epoch {step} on algo-{host}") == 1


def test_sync_wait_fails_the_task_with_the_jobs_failure_reason(aws):
    first_try(aws)
    described(aws, "Failed", "Failed", failure_reason="AlgorithmError: rank 3 on host algo-2 exited with code 1")
    with pytest.raises(AirflowException, match="rank 3 on host algo-2 exited with code 1"):
        operator(deferrable=False, stream_logs=False).execute(context())


def test_local_retry_reattaches_to_the_completed_job_and_a_new_run_trains_again(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(
        "import os, pathlib\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n"
        "print('trained once', flush=True)\n")
    spec = {"name": "tiny", "entry_point": "train.py", "source_dir": str(source), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 300}

    def run(try_number: int, run_id: str = "scheduled__2026-01-05") -> dict:
        op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", workdir=str(tmp_path / "w"))
        return op.execute(context(try_number=try_number, run_id=run_id))

    first = run(1)
    retry = run(2)
    assert (first["status"], first["reattached"]) == ("Completed", False)
    assert (retry["status"], retry["reattached"], retry["job_name"]) == ("Completed", True, first["job_name"])
    assert retry["model_artifact"] == first["model_artifact"] and Path(first["model_artifact"]).is_file()
    next_week = run(1, run_id="scheduled__2026-01-12")
    assert next_week["job_name"] != first["job_name"] and next_week["reattached"] is False
    assert sorted(p.name for p in (tmp_path / "w" / "jobs").iterdir()) == sorted([first["job_name"],
                                                                                  next_week["job_name"]])


# --- failure classes and retry budgets (issue 17) -----------------------------------------------------------------
def test_a_user_failure_fails_the_task_without_airflows_retries():
    event = _event("failed", job_status="Failed", message="training job x ended Failed",
                   failure_reason="AlgorithmError: ExecuteUserScriptError: ValueError: bad label")
    with pytest.raises(AirflowFailException, match=r"\[user failure: .*ValueError: bad label\].*not retried"):
        operator(stream_logs=False).execute_complete(context(), event)


def test_an_infrastructure_failure_starts_the_next_attempt_and_defers_on_it(aws):
    second = f"{NAME}-2"  # the attempts engine names the next attempt: the failed job is not looked up again
    not_found(aws, second)  # the re-attach policy: <name>-2 is free
    not_found(aws, second)  # the submit's own check before creating
    created(aws, second)
    described(aws, "InProgress", "Starting", name=second)
    event = _event("failed", job_status="Failed", message=f"training job {NAME} ended Failed",
                   failure_reason="CapacityError: Unable to provision requested ML compute capacity")
    with pytest.raises(TaskDeferred) as deferred:
        operator(stream_logs=False).execute_complete(context(), event, reattached=False)
    aws.verify()
    assert aws.created == [second]
    assert deferred.value.trigger.job_name == second
    assert deferred.value.kwargs["budget_used"] == {"infrastructure": 1}
    # The budget is spent: the next infrastructure failure fails the task (Airflow's retries may still run).
    with pytest.raises(AirflowException, match=r"\[infrastructure failure") as raised:
        operator(stream_logs=False, retry_budgets={"infrastructure": 1}).execute_complete(
            context(), {**event, "job_name": second}, budget_used={"infrastructure": 1})
    assert not isinstance(raised.value, AirflowFailException)


def test_a_spot_interruption_seen_by_the_trigger_is_an_infrastructure_failure():
    from trainops.backends.api import JobHandle
    from trainops.backends.sagemaker.backend import SageMakerBackend
    from trainops.operators.triggers import event_for

    response = training_description(NAME, "Failed", "Failed", spot=True,
                                    transitions=[("Training", ""), ("Interrupted", ""), ("Failed", "")])
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response("describe_training_job", response, {"TrainingJobName": NAME})
    result = SageMakerBackend("us-east-1", client_factory=aws).describe(JobHandle("sagemaker", NAME))
    event = event_for(result)
    assert event["secondary_statuses"] == ["Training", "Interrupted", "Failed"]
    with pytest.raises(AirflowException, match=r"\[infrastructure failure: Interrupted\]") as raised:
        operator(stream_logs=False, retry_budgets={"infrastructure": 0}).execute_complete(context(), event)
    assert not isinstance(raised.value, AirflowFailException)  # Airflow's own retries may still try again


# --- no triggerer: reschedule mode (issue 26 item 1) ----------------------------------------------------------------
def test_reschedule_mode_pokes_give_the_slot_back_and_never_start_a_second_job(tmp_path):
    from trainops.operators.compat import AirflowRescheduleException

    spec = local_spec(tmp_path, seconds=3)
    work = tmp_path / "w"

    def poke(try_number: int):
        op = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", wait_mode="reschedule",
                                         workdir=str(work), check_interval=1)
        assert op.reschedule and not op.deferrable  # the scheduler waits for the reschedule date
        return op.execute(context(try_number=try_number))

    with pytest.raises(AirflowRescheduleException) as first:
        poke(1)
    assert first.value.reschedule_date.tzinfo is not None
    deadline = time.monotonic() + 120
    result = None
    while result is None and time.monotonic() < deadline:
        time.sleep(1)
        try:
            result = poke(1)  # a reschedule keeps the try number
        except AirflowRescheduleException:
            continue
    assert result is not None, "the job never ended"
    assert (result["status"], result["reattached"], result["backend"]) == ("Completed", True, "local")
    assert set(result) == set(training_module.XCOM_KEYS)
    assert len(list((work / "jobs").iterdir())) == 1, "a poke started a second job"
