"""Evaluate and stage deferrable through the one trigger (issue 26 item 4): the task starts its job, defers with the
job's kind, resumes in ``execute_complete`` with the XCom value the worker path pushes, and ``on_kill`` stops the job
it started. Local evaluations run as real detached evaluation jobs (a process and a status record); the FSx import
task is botocore's Stubber (moto implements no data repository tasks); the SageMaker processing job is exercised
against moto in tests/system/test_airflow_evaluate_stage_deferral.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
import test_operators_evaluate  # noqa: E402
from airflow.sdk.exceptions import AirflowException, TaskDeferred  # noqa: E402
from support.stubbed_aws import StubbedAWS  # noqa: E402
from test_operators_evaluate import FakeTI  # noqa: E402
from test_operators_triggers import fresh_clients, run_trigger  # noqa: E402,F401 - the fixture

from trainops.operators.evaluate import EvaluateModelOperator  # noqa: E402
from trainops.operators.stage import StageDataOperator  # noqa: E402

evaluation_inputs = test_operators_evaluate.evaluation_inputs  # the evaluate operator's own fixture, shared


def fsx_stubs():
    """The FSx answers of the FSx step's own tests (tests/unit/backends/test_sagemaker_fsx.py), shared, not copied."""
    import importlib.util

    path = Path(__file__).parents[1] / "backends" / "test_sagemaker_fsx.py"
    spec = importlib.util.spec_from_file_location("fsx_stub_answers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def own_state(tmp_path, monkeypatch):
    """Each test its own local state root: evaluation jobs are named per task instance, like training jobs."""
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "trainops-home"))


def context() -> dict:
    return {"ti": FakeTI()}


def deferred(operator, ctx) -> TaskDeferred:
    with pytest.raises(TaskDeferred) as caught:
        operator.execute(ctx)
    return caught.value


def test_a_deferred_local_evaluation_resumes_with_the_same_xcom_as_the_worker_path(evaluation_inputs, tmp_path):
    arguments = evaluation_inputs(0.97)
    in_worker = EvaluateModelOperator(task_id="evaluate", **arguments).execute(context())
    operator = EvaluateModelOperator(task_id="evaluate", deferrable=True, check_interval=0.2,
                                     registry_dir=str(tmp_path / "registry"), **arguments)
    deferral = deferred(operator, context())
    trigger = deferral.trigger
    assert (trigger.kind, trigger.handle["backend"], deferral.method_name) == ("evaluation", "local",
                                                                                "execute_complete")
    assert trigger.stream_logs is False
    classpath, kwargs = trigger.serialize()
    events = run_trigger(type(trigger)(**kwargs))
    assert events[0].payload["status"] == "success", events[0].payload
    resumed = EvaluateModelOperator(task_id="evaluate", deferrable=True, **arguments).execute_complete(
        context(), events[0].payload)
    assert sorted(resumed) == sorted(in_worker)
    assert (resumed["passed"], resumed["metrics"]) == (True, in_worker["metrics"])
    assert {key: resumed[key] for key in ("gate", "message", "metrics_path")} == {
        key: in_worker[key] for key in ("gate", "message", "metrics_path")}


def test_a_retried_deferred_evaluation_reattaches_to_the_job_its_first_try_started(evaluation_inputs):
    arguments = evaluation_inputs(0.97)
    first = deferred(EvaluateModelOperator(task_id="evaluate", deferrable=True, check_interval=0.2, **arguments),
                     context()).trigger
    run_trigger(first)
    again = EvaluateModelOperator(task_id="evaluate", deferrable=True, **arguments)
    result = again.execute(context())  # the job completed: its result at once, no second deferral
    assert result["metrics"]["accuracy"] == 0.97
    assert again._held[1].job_name == first.handle["job_name"] and again._held[1].created is False


def test_on_kill_stops_the_deferred_evaluation_it_started_and_only_that_one(evaluation_inputs, tmp_path, task_state):
    from trainops.backends.api import JobHandle, get_backend
    from trainops.backends.states import JobStatus

    arguments = evaluation_inputs(0.97)
    (Path(arguments["source_dir"]) / "evaluate.py").write_text(
        "import os, time\nopen(os.path.join(os.environ['SM_OUTPUT_DATA_DIR'], 'pid'), 'w').write(str(os.getpid()))"
        "\ntime.sleep(120)\n")
    other_inputs = {**arguments, "output_dir": str(tmp_path / "other")}
    other_ctx = context()
    other_ctx["ti"].run_id = "manual__2"  # another task instance: another evaluation job
    other = deferred(EvaluateModelOperator(task_id="evaluate", deferrable=True, **other_inputs), other_ctx).trigger
    operator = EvaluateModelOperator(task_id="evaluate", deferrable=True, **arguments)
    mine = deferred(operator, context()).trigger
    pid_file = Path(arguments["output_dir"]) / "pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the evaluation script never started"
    operator.on_kill()
    backend = get_backend("local")
    stopped = None
    # A bound of its own: on a loaded machine the script's start can take most of the first one (failed once so).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stopped = backend.describe_job(JobHandle.from_dict(mine.handle), "evaluation")
        if stopped.status.terminal:
            break
        time.sleep(0.1)
    assert stopped is not None and stopped.status is JobStatus.STOPPED
    assert not Path(f"/proc/{pid_file.read_text()}").exists(), "the script outlived its stopped job"
    other_handle = JobHandle.from_dict(other.handle)
    assert backend.describe_job(other_handle, "evaluation").status is JobStatus.IN_PROGRESS
    # the trigger's on_kill (a task killed while deferred) stops through the same seam call
    import asyncio

    asyncio.run(other.on_kill())
    while time.monotonic() < deadline and not backend.describe_job(other_handle, "evaluation").status.terminal:
        time.sleep(0.1)
    assert backend.describe_job(other_handle, "evaluation").status is JobStatus.STOPPED


def test_a_failed_deferred_evaluation_fails_the_task_with_the_scripts_reason(evaluation_inputs):
    arguments = evaluation_inputs(0.97)
    (Path(arguments["source_dir"]) / "evaluate.py").write_text("import sys\nsys.exit('no test data here')\n")
    trigger = deferred(EvaluateModelOperator(task_id="evaluate", deferrable=True, check_interval=0.2,
                                             **arguments), context()).trigger
    event = run_trigger(trigger)[0].payload
    assert event["status"] == "failed"
    with pytest.raises(AirflowException, match="no test data here"):
        EvaluateModelOperator(task_id="evaluate", **arguments).execute_complete(context(), event)


def test_a_bad_gate_fails_before_the_evaluation_job_starts(evaluation_inputs, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    arguments = {**evaluation_inputs(0.97), "gate": "accuracy > champion"}
    with pytest.raises(AirflowFailException, match="champion_group"):
        EvaluateModelOperator(task_id="evaluate", deferrable=True, **arguments).execute(context())
    assert not Path(arguments["output_dir"]).exists()


def test_default_deferrable_is_honoured_by_evaluate_and_stage(monkeypatch):
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    evaluate = EvaluateModelOperator(task_id="e", entry_point="e.py", model_artifact="m", channels={}, output_dir="o")
    stage = StageDataOperator(task_id="s", source="a", destination="b")
    assert (evaluate.deferrable, stage.deferrable) == (True, True)
    assert EvaluateModelOperator(task_id="e2", entry_point="e.py", model_artifact="m", channels={}, output_dir="o",
                                 deferrable=False).deferrable is False
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert StageDataOperator(task_id="s2", source="a", destination="b").deferrable is False


def test_a_local_stage_asked_to_defer_copies_in_the_worker_and_says_so(tmp_path, capsys):
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.txt").write_text("a")
    operator = StageDataOperator(task_id="stage", source=str(source), destination=str(tmp_path / "staged"),
                                 deferrable=True)
    report = operator.execute(context())
    assert report["files_copied"] == 1 and (tmp_path / "staged" / "a.txt").read_text() == "a"
    assert "the local backend runs this stage in the worker" in capsys.readouterr().out


# --- SageMaker: the FSx import task ---------------------------------------------------------------------------
FS = "fs-0123456789abcdef0"
S3 = "s3://trainops-data/datasets/digits"
TASK = "task-0123456789abcdef0"


@pytest.fixture
def fsx_aws(monkeypatch):
    _association, _associations, _file_system, _task_created = (
        getattr(fsx_stubs(), name) for name in ("_association", "_associations", "_file_system", "_task_created"))

    stubbed = StubbedAWS()
    monkeypatch.setattr("trainops.operators.common.aws_client_factory", lambda conn, region: (stubbed, "us-east-1"))
    _file_system(stubbed)
    _associations(stubbed, [_association("AVAILABLE")])
    _task_created(stubbed, ["datasets/digits"], f"{S3}/_trainops_fsx_reports")
    return stubbed


def stage_operator(**more) -> StageDataOperator:
    return StageDataOperator(task_id="stage", source=S3, destination=f"fsx://{FS}/datasets/digits",
                             backend="sagemaker", region_name="us-east-1", check_interval=0, **more)


def test_a_sagemaker_stage_defers_on_its_import_task_and_resumes_with_the_stage_report(fsx_aws):
    _task_state = fsx_stubs()._task_state

    _task_state(fsx_aws, "EXECUTING")  # the look after starting it: still running, so the task defers
    trigger = deferred(stage_operator(deferrable=True), context()).trigger
    assert (trigger.kind, trigger.job_name) == ("stage", TASK)
    _task_state(fsx_aws, "EXECUTING")
    _task_state(fsx_aws, "SUCCEEDED", total=4, succeeded=4)
    _task_state(fsx_aws, "SUCCEEDED", total=4, succeeded=4)  # execute_complete's report
    classpath, kwargs = trigger.serialize()
    event = run_trigger(type(trigger)(**json.loads(json.dumps(kwargs))))[0].payload
    assert event["status"] == "success", event.get("message")
    report = stage_operator().execute_complete(context(), event)
    fsx_aws.verify()
    assert (report["task_id"], report["succeeded"], report["directory_path"]) == (TASK, 4, "/abcdefgh/datasets/digits")
    from trainops.backends.sagemaker.fsx import StagingReport

    assert sorted(report) == sorted(StagingReport.__dataclass_fields__)  # the blocking step's report, key for key


def test_a_sagemaker_stage_in_the_worker_holds_its_task_and_on_kill_cancels_it(fsx_aws, task_state):
    _task_state = fsx_stubs()._task_state

    operator = stage_operator(deferrable=False)
    _task_state(fsx_aws, "SUCCEEDED", total=2, succeeded=1, failed=1)
    with pytest.raises(AirflowException, match="1 of 2 files imported, 1 failed"):
        operator.execute(context())
    assert operator._held[1].job_name == TASK
    _task_state(fsx_aws, "EXECUTING")
    fsx_aws.stub("fsx").add_response("cancel_data_repository_task", {"TaskId": TASK, "Lifecycle": "CANCELING"},
                                     {"TaskId": TASK})
    operator.on_kill()
    fsx_aws.verify()
