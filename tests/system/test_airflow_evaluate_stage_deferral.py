"""Evaluate and stage deferrable through the one trigger, with the real components (issue 26 item 4).

- Airflow itself: ``dag.test()`` runs a DAG whose local stage (asked to defer: a local copy runs in the worker, the
  log says so) feeds a local evaluation that defers on a real detached evaluation job; Airflow serializes the
  trigger, runs it and resumes the task, whose XCom is the worker path's. A second stage takes its backend and
  settings from a connection (Airflow's environment variable, as a secrets backend would hand it), read once.
- SageMaker on a moto server on 127.0.0.1: the evaluate task creates a real (moto) processing job and defers on it;
  the trigger looks at it through DescribeProcessingJob until it completes; ``execute_complete`` reads the metrics
  back from S3; ``on_kill`` stops that processing job (StopProcessingJob) and no other. moto creates processing jobs
  already Completed and runs nothing, so the test starts them InProgress in moto's in-process state, completes them
  there and writes the metrics the script would have written.
- FSx data repository tasks are not implemented by moto (5.2: file systems and backups only), so the stage task's
  deferral on an import task is tested with botocore's Stubber: tests/unit/operators/test_operators_deferred_steps.py.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import uuid
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import TaskDeferred  # noqa: E402
from support.airflow_home import airflow_home  # noqa: E402,F401 - the session fixture
from support.moto_server import ACCOUNT_ID, REGION  # noqa: E402

from trainops.operators.evaluate import EvaluateModelOperator  # noqa: E402

pytestmark = pytest.mark.system

DAG_FILE = textwrap.dedent('''
    """Deferred evaluate after a stage, on the local backend."""
    import json, os, pathlib
    from airflow.sdk import DAG, BaseHook
    from trainops.operators.evaluate import EvaluateModelOperator
    from trainops.operators.stage import StageDataOperator

    ROOT = pathlib.Path(os.environ["TRAINOPS_TEST_ROOT"])
    SCRIPT = (
        "import json, os, time\\n"
        "time.sleep(1)\\n"
        "rows = [name for name in os.listdir(os.environ['SM_CHANNEL_TEST']) if name in 'abcd']\\n"
        "json.dump({'accuracy': 0.5 + 0.1 * len(rows)}, "
        "open(os.path.join(os.environ['SM_OUTPUT_DATA_DIR'], 'metrics.json'), 'w'))\\n")

    (ROOT / "code").mkdir(exist_ok=True)
    (ROOT / "code" / "evaluate.py").write_text(SCRIPT)
    (ROOT / "model").mkdir(exist_ok=True)
    (ROOT / "raw").mkdir(exist_ok=True)
    for name in ("a", "b", "c", "d"):
        (ROOT / "raw" / name).write_text(name)

    # Every read of a connection, one line each: the stage from a connection reads it once.
    if not getattr(BaseHook.get_connection, "counted", False):
        lookup = BaseHook.get_connection

        def counted(conn_id):
            with open(ROOT / "connection-reads", "a") as reads:
                reads.write(conn_id + "\\n")
            return lookup(conn_id)

        counted.counted = True
        BaseHook.get_connection = counted

    with DAG(dag_id="deferred_evaluate", schedule=None) as dag:
        stage = StageDataOperator(task_id="stage", source=str(ROOT / "raw"), destination=str(ROOT / "staged"),
                                  deferrable=True, retries=0)
        evaluate = EvaluateModelOperator(task_id="evaluate", entry_point="evaluate.py", source_dir=str(ROOT / "code"),
                                         model_artifact=str(ROOT / "model"), channels={"test": str(ROOT / "staged")},
                                         output_dir=str(ROOT / "evaluation"), gate="accuracy >= 0.8",
                                         deferrable=True, check_interval=0.5, retries=0)
        stage >> evaluate
        # The backend and its settings from a connection; a context option (region) has the step open the backend.
        StageDataOperator(task_id="stage_from_connection", source=str(ROOT / "raw"),
                          destination=str(ROOT / "staged-from-connection"), backend_conn_id="team_stage",
                          options={"region": "eu-west-1"}, retries=0)
''')


def test_a_local_stage_then_a_deferred_local_evaluation_under_dag_test(airflow_home, tmp_path):  # noqa: F811
    dag_file = tmp_path / "dags" / "deferred_evaluate.py"
    dag_file.parent.mkdir()
    dag_file.write_text(DAG_FILE)
    root = tmp_path / "root"
    root.mkdir()
    # AirflowHome.dag_test, with the DAG's own root in the environment of the dag.test() subprocess
    done = airflow_home.run(str(airflow_home_script()), str(dag_file), "deferred_evaluate", "{}",
                            str(tmp_path / "outcome.json"), env={
                                "TRAINOPS_TEST_ROOT": str(root), "AIRFLOW__CORE__DAGS_FOLDER": str(dag_file.parent),
                                "AIRFLOW_CONN_TEAM_STAGE": json.dumps({"conn_type": "generic", "extra": {
                                    "backend": "local", "options": {"workdir": str(root / "work")}}})})
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    output = done.stdout + done.stderr
    assert outcome["tasks"] == {"stage": "success", "evaluate": "success", "stage_from_connection": "success"}, (
        output[-5000:])
    assert "the local backend runs this stage in the worker" in output
    assert "deferring: the triggerer waits for evaluation job" in output
    result = outcome["xcom"]["evaluate"]["return_value"]
    assert (result["backend"], result["passed"], result["metrics"]) == ("local", True, {"accuracy": 0.9})
    assert outcome["xcom"]["stage"]["return_value"]["files_copied"] == 4
    assert outcome["xcom"]["stage_from_connection"]["return_value"]["files_copied"] == 4
    assert (root / "connection-reads").read_text().splitlines() == ["team_stage"]  # read once, by its task
    # the worker path's XCom, key for key
    in_worker = EvaluateModelOperator(
        task_id="evaluate", entry_point="evaluate.py", source_dir=str(root / "code"),
        model_artifact=str(root / "model"), channels={"test": str(root / "staged")},
        output_dir=str(tmp_path / "in-worker"), gate="accuracy >= 0.8").execute({"ti": task_instance()})
    assert sorted(in_worker) == sorted(result)
    assert in_worker["metrics"] == result["metrics"] and in_worker["gate"] == result["gate"]


def airflow_home_script():
    import support.airflow_home as module

    return module.__file__


def task_instance(run_id: str = "manual__moto"):
    return SimpleNamespace(dag_id="retrain", task_id="evaluate", run_id=run_id, map_index=-1, try_number=1,
                           xcom_push=lambda key, value: None)


# --- SageMaker: a processing job on moto ----------------------------------------------------------------------
@pytest.fixture
def moto_aws(aws_clients, monkeypatch):
    """The operators' and the trigger's clients from the moto server; processing jobs start InProgress."""
    from moto.sagemaker.models import FakeProcessingJob

    import trainops.operators.common as common_module
    from trainops.operators import triggers

    monkeypatch.setattr(common_module, "aws_client_factory", lambda conn, region: (aws_clients, region or REGION))
    triggers._FACTORIES.clear()
    original = FakeProcessingJob.__init__

    def starts_in_progress(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.processing_job_status = "InProgress"

    monkeypatch.setattr(FakeProcessingJob, "__init__", starts_in_progress)
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    s3 = aws_clients("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="digits/output/model.tar.gz", Body=b"model")
    s3.put_object(Bucket=bucket, Key="test/rows.csv", Body=b"1,2\n")
    yield aws_clients, bucket
    triggers._FACTORIES.clear()


def moto_job(name: str):
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT_ID][REGION].processing_jobs[name]


def sagemaker_evaluate(bucket: str, code, output: str = "evaluation", **more) -> EvaluateModelOperator:
    return EvaluateModelOperator(
        task_id="evaluate", backend="sagemaker", entry_point="evaluate.py", source_dir=str(code),
        model_artifact=f"s3://{bucket}/digits/output/model.tar.gz", channels={"test": f"s3://{bucket}/test/"},
        output_dir=f"s3://{bucket}/digits/{output}", gate="accuracy >= 0.9", region_name=REGION,
        role="arn:aws:iam::123456789012:role/trainops-test", image_uri="image:1", check_interval=0.2, **more)


@pytest.fixture
def code(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "evaluate.py").write_text("print('scoring')\n")
    return tmp_path / "code"


def test_a_sagemaker_evaluation_defers_on_its_processing_job_and_resumes_with_its_metrics(moto_aws, code):
    clients, bucket = moto_aws
    operator = sagemaker_evaluate(bucket, code, deferrable=True)
    with pytest.raises(TaskDeferred) as caught:
        operator.execute({"ti": task_instance()})
    trigger = caught.value.trigger
    name = trigger.job_name
    assert (trigger.kind, trigger.handle["backend"]) == ("evaluation", "sagemaker")
    described = clients("sagemaker").describe_processing_job(ProcessingJobName=name)
    assert described["ProcessingJobStatus"] == "InProgress"
    from trainops.operators.links import EvaluationJobLink

    assert EvaluationJobLink().get_link(operator, ti_key=None).endswith(f"#/processing-jobs/{name}")

    async def run_and_complete() -> list:
        async def complete_later() -> None:
            await asyncio.sleep(1.0)  # the trigger has looked at least once while it ran
            clients("s3").put_object(Bucket=bucket, Key="digits/evaluation/metrics.json",
                                     Body=json.dumps({"accuracy": 0.93}).encode())
            moto_job(name).processing_job_status = "Completed"

        finisher = asyncio.create_task(complete_later())
        events = [event async for event in type(trigger)(**trigger.serialize()[1]).run()]
        await finisher
        return events

    event = asyncio.run(run_and_complete())[0].payload
    assert event["status"] == "success", event
    result = sagemaker_evaluate(bucket, code, deferrable=True).execute_complete({"ti": task_instance()}, event)
    assert (result["backend"], result["job_name"], result["metrics"], result["passed"]) == (
        "sagemaker", name, {"accuracy": 0.93}, True)
    assert result["metrics_path"] == f"s3://{bucket}/digits/evaluation/metrics.json"
    # the worker path: the same job (named from the task instance) re-attached, same XCom
    in_worker = sagemaker_evaluate(bucket, code, deferrable=False).execute({"ti": task_instance()})
    assert in_worker == result
    jobs = clients("sagemaker").list_processing_jobs(NameContains=name)["ProcessingJobSummaries"]
    assert len(jobs) == 1, "a second processing job was created"


def test_killing_a_sagemaker_evaluate_task_stops_its_processing_job_and_no_other(moto_aws, code, task_state):
    """A user ended the task (``task_state``: failed): its job stops, the other task's does not."""
    clients, bucket = moto_aws
    other = sagemaker_evaluate(bucket, code, output="other", deferrable=True)
    with pytest.raises(TaskDeferred) as other_deferral:
        other.execute({"ti": task_instance("manual__other")})
    operator = sagemaker_evaluate(bucket, code, deferrable=True)
    with pytest.raises(TaskDeferred) as caught:  # a run of its own: the job is named from the task instance
        operator.execute({"ti": task_instance("manual__killed")})
    operator.on_kill()
    mine, theirs = caught.value.trigger.job_name, other_deferral.value.trigger.job_name
    assert mine != theirs
    status = {name: clients("sagemaker").describe_processing_job(ProcessingJobName=name)["ProcessingJobStatus"]
              for name in (mine, theirs)}
    assert status == {mine: "Stopped", theirs: "InProgress"}
    # and a task killed while deferred: the trigger's on_kill stops its job through the same seam call
    asyncio.run(other_deferral.value.trigger.on_kill())
    assert clients("sagemaker").describe_processing_job(ProcessingJobName=theirs)["ProcessingJobStatus"] == "Stopped"
