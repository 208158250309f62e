"""A deferred SageMaker training task under the real Airflow components (api-server, scheduler with LocalExecutor,
dag-processor, triggerer; test_airflow_scheduler.py's ``airflow`` fixture and helpers), against a moto server on
127.0.0.1 named only in the ``aws_default`` connection, with the preflight on, as a deployment runs it.

1. **Clear while running** (the UI's *Clear* through the REST API) of the train task deferred on an InProgress job:
   Airflow cancels the first try's trigger "by user action" and calls its ``on_kill``; the task instance is already
   running again, so the trigger leaves the job to the next try, which re-attaches to it. StopTrainingJob is never
   called; when the job completes the run succeeds with one job, ``reattached`` in its XCom. Its CloudWatch log,
   written by the test three lines at a time, reaches the task log once and whole although the triggerer is killed
   (SIGKILL) and replaced between two batches, the task is cleared between two more, and the last batch is written
   just before the job completes (the tail between two looks).
2. **Mark failed** of a deferred train task: the trigger's ``on_kill`` finds the task failed and stops its job
   (StopTrainingJob for that job only).

moto creates training jobs Completed and has no StopTrainingJob: the server runs in this process, where the test
makes new jobs InProgress (``Training``), records StopTrainingJob calls (the job reads Stopped), and completes a job
when it chooses.
"""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from support.airflow_home import REPO
from support.moto_server import ACCOUNT_ID, REGION, recording_stop_training_job
from test_airflow_scheduler import (  # noqa: F401 - airflow: the fixture
    airflow,
    airflow_cli,
    answer,
    clear_task,
    mark_failed,
    processes_of,
    query,
    try_number,
)

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

DAG_ID = "sagemaker_train"
DAG_FILE = textwrap.dedent('''
    """One SageMaker training task, deferred (the job's spec is the test's)."""
    import json
    from airflow.sdk import DAG
    from trainops.operators.training import DistributedTrainingOperator

    with DAG(dag_id="sagemaker_train", schedule=None) as dag:
        DistributedTrainingOperator(task_id="train", spec=json.loads(SPEC_JSON), backend="sagemaker",
                                    deferrable=True, check_interval=2, retries=0)
''')


@pytest.fixture(scope="module")
def moto_jobs(moto_endpoint):
    """Training jobs on the in-process moto server start InProgress; StopTrainingJob is recorded (the job reads
    Stopped); ``complete(name)`` ends one Completed."""
    from moto.sagemaker.models import FakeTrainingJob, sagemaker_backends
    from moto.sagemaker.responses import SageMakerResponse

    stopped: list[str] = []
    original_init = FakeTrainingJob.__init__

    def running(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.training_job_status, self.secondary_status = "InProgress", "Training"

    def jobs() -> dict:
        return sagemaker_backends[ACCOUNT_ID][REGION].training_jobs

    def complete(name: str) -> None:
        jobs()[name].training_job_status, jobs()[name].secondary_status = "Completed", "Completed"

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FakeTrainingJob, "__init__", running)
        patch.setattr(SageMakerResponse, "stop_training_job", recording_stop_training_job(stopped), raising=False)
        yield {"endpoint": moto_endpoint, "stopped": stopped, "jobs": jobs, "complete": complete}


def wait_for(condition, what: str, components, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n" + components.tail()
        time.sleep(1)


def state_of(database: Path, run_id: str, task_id: str = "train") -> str | None:
    rows = answer(database, "SELECT state FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = ?",
                 DAG_ID, run_id, task_id)
    return rows[0][0] if rows else None


def run_state(database: Path, run_id: str) -> str | None:
    rows = answer(database, "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", DAG_ID, run_id)
    return rows[0][0] if rows else None


def host_lines(logs, job: str):
    """Write the job's CloudWatch log (one host) three lines at a time, as the job prints them; yield each batch."""
    from trainops.backends.sagemaker.logs import LOG_GROUP

    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    stream = f"{job}/algo-1-1767225600"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    for first in (1, 4, 7, 10):
        batch = [f"line {n} of the job" for n in range(first, first + 3)]
        now = int(time.time() * 1000)
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                            logEvents=[{"timestamp": now + i, "message": text} for i, text in enumerate(batch)])
        yield batch


def task_log(home: Path, run_id: str, attempt: int) -> str:
    path = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=train" / f"attempt={attempt}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def trigger_log(home: Path, run_id: str, attempt: int) -> str:
    folder = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=train"
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.glob(f"attempt={attempt}.log.trigger*")))


def test_clearing_a_deferred_sagemaker_task_never_stops_its_job_and_marking_it_failed_does(airflow,  # noqa: F811
                                                                                           moto_jobs):
    home, env, components = airflow
    database = home / "airflow.db"
    import boto3

    from trainops.steps.train import load_spec

    s3 = boto3.client("s3", endpoint_url=moto_jobs["endpoint"], region_name=REGION, aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    spec = load_spec(str(REPO / "examples" / "specs" / "smddp-p4d.yaml")).to_json_dict()
    spec["output_path"] = f"s3://{bucket}/smddp"
    (home / "dags" / "retrain_pipeline.py").unlink()  # only this module's DAG
    (home / "dags" / "sagemaker_train.py").write_text(f"SPEC_JSON = {json.dumps(json.dumps(spec))}\n" + DAG_FILE)
    env.update({  # every AWS call of every component goes through the connection, to moto
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({"conn_type": "aws", "login": "testing", "password": "testing",
                                                "extra": {"endpoint_url": moto_jobs["endpoint"],
                                                          "region_name": REGION}}),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"})
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        env.pop(name, None)
    components.start("api-server", "api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"])
    components.start("dag-processor", "dag-processor")
    components.start("scheduler", "scheduler")
    components.start("triggerer", "triggerer")
    wait_for(lambda: query(database, "SELECT dag_id FROM dag WHERE dag_id = ?", DAG_ID), "the DAG", components, 240)
    assert airflow_cli(env, "dags", "unpause", DAG_ID).returncode == 0

    def job_of(run_id: str) -> str:
        """The one training job of a run (its name is the task instance's: every try shares it)."""
        names = [name for name in moto_jobs["jobs"]() if name not in seen]
        return names[0] if len(names) == 1 else ""

    seen: set[str] = set(moto_jobs["jobs"]())
    # 1. Clear while deferred on an InProgress job: the next try re-attaches; the job is never stopped.
    cleared = "manual__cleared"
    assert airflow_cli(env, "dags", "trigger", DAG_ID, "--run-id", cleared).returncode == 0
    wait_for(lambda: state_of(database, cleared) == "deferred", "train deferred", components)
    job = wait_for(lambda: job_of(cleared), "the job", components)
    # the triggerer runs the first try's trigger (it has looked at the job) before the user clears the task
    wait_for(lambda: "InProgress / Training" in trigger_log(home, cleared, 1), "the first trigger's look", components)
    logs = boto3.client("logs", endpoint_url=moto_jobs["endpoint"], region_name=REGION, aws_access_key_id="testing",
                        aws_secret_access_key="testing")
    batches = iter(host_lines(logs, job))
    first = next(batches)
    wait_for(lambda: all(line in trigger_log(home, cleared, 1) for line in first), "the first batch", components)
    # the trigger has recorded where the task log stands (just after writing the batch: a crash in between would
    # repeat that batch, which is the one window the marks leave)
    wait_for(lambda: query(database, "SELECT val FROM variable WHERE key LIKE 'trainops_log_mark%'"),
             "the first batch's mark", components)
    components.kill("triggerer")  # a crash between two batches
    second = next(batches)
    components.start("triggerer", "triggerer")
    wait_for(lambda: all(line in trigger_log(home, cleared, 1) for line in second), "the second batch",
             components)
    clear_task(env, DAG_ID, cleared, "train")
    wait_for(lambda: try_number(database, DAG_ID, cleared, "train") >= 2
             and state_of(database, cleared) == "deferred", "the cleared task deferred again", components)
    # the first try's trigger was cancelled and its on_kill decided: wait for its word, then check nothing stopped
    wait_for(lambda: "which is left running" in trigger_log(home, cleared, 1), "the first trigger's on_kill",
             components)
    assert moto_jobs["stopped"] == [], "clearing the task stopped its job"
    assert moto_jobs["jobs"]()[job].training_job_status == "InProgress"
    third = next(batches)
    wait_for(lambda: all(line in trigger_log(home, cleared, 2) for line in third), "the third batch", components)
    next(batches)  # the job's last lines, then it completes before any look sees it running again
    moto_jobs["complete"](job)
    wait_for(lambda: run_state(database, cleared) in ("success", "failed"), "the cleared run's end", components)
    assert run_state(database, cleared) == "success", components.tail()
    [(value,)] = answer(database, "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = 'train' "
                                 "AND key = 'return_value'", DAG_ID, cleared)
    result = json.loads(value) if isinstance(value, (str, bytes)) else value
    assert (result["job_name"], result["status"], result["reattached"]) == (job, "Completed", True)
    assert [name for name in moto_jobs["jobs"]() if name not in seen] == [job], "the second try created a job"
    assert moto_jobs["stopped"] == []
    # every line of the job once in the task log, across both triggerers of the first try and the second try
    logged = [line for attempt in (1, 2) for line in
              (trigger_log(home, cleared, attempt) + task_log(home, cleared, attempt)).splitlines()
              if "] line " in line]
    messages = sorted(json.loads(line)["event"] for line in logged)
    assert messages == sorted(f"[algo-1] line {n} of the job" for n in range(1, 13)), messages
    seen.add(job)

    # 2. Mark failed while deferred: the user ended the task, its job is stopped.
    failed = "manual__marked_failed"
    assert airflow_cli(env, "dags", "trigger", DAG_ID, "--run-id", failed).returncode == 0
    wait_for(lambda: state_of(database, failed) == "deferred", "train deferred", components)
    other = wait_for(lambda: job_of(failed), "the second run's job", components)
    wait_for(lambda: "InProgress / Training" in trigger_log(home, failed, 1), "the trigger's look", components)
    mark_failed(env, DAG_ID, failed, "train")
    wait_for(lambda: moto_jobs["stopped"], "StopTrainingJob after mark failed", components, 120)
    assert moto_jobs["stopped"] == [other]
    assert run_state(database, failed) == "failed"

    components.stop_all()
    deadline = time.monotonic() + 30
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(home) == [], "processes of this Airflow home are still running"
