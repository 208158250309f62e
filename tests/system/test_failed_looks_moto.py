"""A status look that fails is not a failed job (issue 38 item 4), with faults injected in front of a moto server on
127.0.0.1: a proxy (tests/support/fault_proxy.py) answers the job's DescribeTrainingJob with SageMaker's 500, its
throttling answer, a closed connection, or no listener at all, for a window, then passes through.

- `trainops run --backend sagemaker` (a subprocess, as a user runs it): the wait goes through a window of every
  kind and ends with the job's real outcome, one CreateTrainingJob and no StopTrainingJob; a window longer than
  both bounds ends the command with "may still be running" and the command that re-attaches, the job not stopped,
  and that command then follows the same job to its end.
- The Airflow train task deferred on the one trigger (run in this process, as tests/system/
  test_airflow_evaluate_stage_deferral.py runs it): the same, and the task's next try re-attaches to the job.

The clients run with ``AWS_MAX_ATTEMPTS=1`` so that each fault reaches the look (botocore's own adaptive retries,
10 attempts with backoff, would otherwise absorb a short window first: tests/system/test_sagemaker_throttling_moto.py);
the bounds are the production ones (5 looks and 60 s) where a window passes, and small ones
(``TRAINOPS_FAILED_LOOKS_COUNT`` / ``_SECONDS``) where a window must outlast them. moto creates jobs Completed: a hook
on CreateTrainingJob makes the job InProgress, and the end of the window gives it its real outcome.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import boto3  # noqa: E402
import pytest  # noqa: E402
from support.fault_proxy import FaultProxy  # noqa: E402
from support.moto_quotas import set_training_job_status  # noqa: E402
from support.moto_server import ACCOUNT_ID, REGION  # noqa: E402

pytestmark = pytest.mark.system

ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


@pytest.fixture(scope="module")
def proxy(moto_endpoint):
    started = FaultProxy(moto_endpoint).start()
    yield started
    started.stop()


@pytest.fixture
def faulty(aws_environment, proxy, monkeypatch, tmp_path):
    """boto3 (this process's and the CLI's) pointed at the proxy, one attempt a call; a bucket with the job's data and
    a spec whose source is a local directory. Training jobs start InProgress."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    proxy.clear()
    proxy.on("CreateTrainingJob", lambda request: running(request["TrainingJobName"]))
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="data/train/part-0", Body=b"x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: looks\n"
        f"role: {ROLE}\nregion: {REGION}\nframework_version: '2.3.0'\npy_version: py311\n"
        "entry_point: train.py\nsource_dir: src\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {torch_distributed: {enabled: true}}\n"
        f"inputs: {{train: s3://{bucket}/data/train/}}\noutput_path: s3://{bucket}/out\n")
    yield SimpleNamespace(proxy=proxy, spec=spec, bucket=bucket, name=f"looks-{uuid.uuid4().hex[:10]}")
    proxy.clear()


def running(name: str) -> None:
    from moto.sagemaker.models import sagemaker_backends

    set_training_job_status(name, "InProgress")
    sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name].secondary_status = "Training"


def status_in_moto(name: str) -> str:
    from moto.sagemaker.models import sagemaker_backends

    return str(sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name].training_job_status)


def trainops_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainops.cli", *args]


# --- the command line ----------------------------------------------------------------------------------------
def test_the_cli_waits_through_every_kind_of_failed_look_to_the_jobs_real_outcome(faulty):
    proxy, name = faulty.proxy, faulty.name
    # After the create: a 500, a throttle, a closed connection, then no listener (a refused connection) until the
    # test sees a refused look in the command's output and listens again; the job has Completed meanwhile.
    proxy.fault("DescribeTrainingJob", ["500", "throttle", "close", "refuse"], after="CreateTrainingJob",
                on_end=lambda: set_training_job_status(name, "Completed"))
    process = subprocess.Popen(
        trainops_command("run", str(faulty.spec), "--backend", "sagemaker", "--job-name", name, "-o",
                         "poll_seconds=0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if "could not look at" in line and "Could not connect to the endpoint URL" in line:
            proxy.accept()  # a look was refused: the service answers again (the window's end completes the job)
    output = "".join(lines)
    assert process.wait(timeout=120) == 0, output
    assert [kind for _, kind in proxy.faulted] == ["500", "throttle", "close", "refuse"], output
    failed_looks = [line for line in lines if "could not look at SageMaker training job" in line]
    assert len(failed_looks) >= 5, output  # the four faults, and at least one refused connection after them
    assert all("not a failure of the job" in line for line in failed_looks)
    for error in ("InternalFailure", "ThrottlingException", "Connection was closed", "Could not connect"):
        assert any(error in line for line in failed_looks), (error, output)
    assert "status:     Completed" in output
    assert proxy.count("CreateTrainingJob") == 1 and proxy.count("StopTrainingJob") == 0, proxy.operations


def test_the_cli_gives_up_past_both_bounds_says_how_to_reattach_and_that_command_follows_the_job(faulty, monkeypatch):
    proxy, name = faulty.proxy, faulty.name
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_COUNT", "3")
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_SECONDS", "2")
    proxy.fault("DescribeTrainingJob", "500", after="CreateTrainingJob")  # for ever
    command = trainops_command("run", str(faulty.spec), "--backend", "sagemaker", "--job-name", name, "-o",
                               "poll_seconds=0.2")
    gave_up = subprocess.run(command, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert gave_up.returncode == 1, gave_up.stdout + gave_up.stderr
    message = gave_up.stderr
    found = re.search(r"could not look at SageMaker training job (\S+): (\d+) looks in a row failed over (\d+) s",
                      message)
    assert found is not None, message
    assert found.group(1) == name and int(found.group(2)) >= 3 and int(found.group(3)) >= 2, message
    assert "InternalFailure" in message and "It may still be running: this wait did not stop it." in message
    reattach = re.search(r"Re-attach with `trainops (run [^`]+)`", message)
    assert reattach is not None, message
    assert reattach.group(1) == f"run {faulty.spec} --backend sagemaker -o poll_seconds=0.2 --job-name {name}"
    where = re.search(r"see where it stands with `trainops (status [^`]+)`", message)
    assert where is not None and where.group(1) == f"status {name} --backend sagemaker -o poll_seconds=0.2", message
    # the job was left alone: still running, created once, never stopped
    assert status_in_moto(name) == "InProgress"
    assert proxy.count("CreateTrainingJob") == 1 and proxy.count("StopTrainingJob") == 0, proxy.operations
    # the service answers again: the status command the message gave shows the job running, and once it completed
    # the run command the message gave follows the same job
    proxy.clear()
    shown = subprocess.run(trainops_command(*where.group(1).split(), "--json"), capture_output=True, text=True,
                           timeout=120, env=dict(os.environ))
    assert shown.returncode == 0 and '"status": "InProgress"' in shown.stdout, shown.stdout + shown.stderr
    set_training_job_status(name, "Completed")
    again = subprocess.run(trainops_command(*reattach.group(1).split()), capture_output=True, text=True,
                           timeout=120, env=dict(os.environ))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"re-attached to SageMaker training job {name}" in again.stdout
    assert "status:     Completed" in again.stdout
    assert proxy.count("CreateTrainingJob") == 0, proxy.operations
    jobs = boto3.client("sagemaker", region_name=REGION).list_training_jobs(NameContains=name)
    assert [job["TrainingJobName"] for job in jobs["TrainingJobSummaries"]] == [name]


def test_the_reattach_look_before_a_create_looks_again_and_gives_up_creating_nothing(faulty, monkeypatch):
    """The look `submit` makes before it creates (is there a job of that name?) is a look like a wait's (issue 47):
    a 500 and a throttle are looked through, the job is created once; past both bounds nothing is created."""
    import trainops.backends.api as api
    from trainops.backends.api import get_backend
    from trainops.backends.looks import JobOutOfSight
    from trainops.spec import load_job_spec

    proxy, name = faulty.proxy, faulty.name
    monkeypatch.setattr(api, "REATTACH_LOOK_SECONDS", 0.0)  # the pause between looks: a second, not ten
    backend = get_backend("sagemaker", options={"region": REGION, "preflight": False})
    spec = load_job_spec(str(faulty.spec))
    proxy.fault("DescribeTrainingJob", ["500", "throttle"])
    said: list[str] = []
    handle = backend.submit(spec, name, log=said.append)
    assert handle.created and handle.job_name == name
    assert proxy.faulted == [("DescribeTrainingJob", "500"), ("DescribeTrainingJob", "throttle")]
    looked = [line for line in said if line.startswith(f"[trainops] could not look at SageMaker training job {name} "
                                                      "(whether it exists, before creating it)")]
    assert len(looked) == 2 and all("not a failure of the job" in line for line in looked), said
    assert proxy.count("CreateTrainingJob") == 1, proxy.operations

    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_COUNT", "2")
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_SECONDS", "0")
    proxy.clear()
    proxy.fault("DescribeTrainingJob", "500")  # for ever
    with pytest.raises(JobOutOfSight, match="Nothing was created by this command"):
        backend.submit(spec, f"{name}-other", log=said.append)
    assert proxy.count("DescribeTrainingJob") == 0 and len(proxy.faulted) == 2  # two failed looks, then given up
    assert proxy.count("CreateTrainingJob") == 0, proxy.operations


# --- the Airflow trigger -------------------------------------------------------------------------------------
@pytest.fixture
def operator_clients(faulty, monkeypatch):
    """The operators' and the trigger's clients (where they would ask the Airflow connection) through the proxy."""
    import trainops.operators.common as common_module
    from trainops.aws.clients import default_client_factory
    from trainops.operators import triggers

    clients = default_client_factory(region=REGION)
    monkeypatch.setattr(common_module, "aws_client_factory", lambda conn, region: (clients, region or REGION))
    triggers._FACTORIES.clear()
    yield clients
    triggers._FACTORIES.clear()


def deferred_train_task(faulty, try_number: int = 1):
    """Execute the train task (deferrable) and return (operator, trigger): the job is created, the task deferred."""
    from airflow.sdk.exceptions import TaskDeferred

    from trainops.operators.training import DistributedTrainingOperator
    from trainops.steps.train import load_spec

    spec = load_spec(str(faulty.spec)).to_json_dict()
    operator = DistributedTrainingOperator(task_id="train", spec=spec, backend="sagemaker", deferrable=True,
                                           check_interval=0, stream_logs=False, job_name=faulty.name)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(faulty.name, try_number))
    return operator, deferred.value.trigger


def context(run_id: str, try_number: int) -> dict:
    return {"ti": SimpleNamespace(dag_id="looks", task_id="train", run_id=run_id, map_index=-1,
                                  try_number=try_number)}


def first_event(trigger) -> dict:
    async def run() -> dict:
        async for event in type(trigger)(**trigger.serialize()[1]).run():  # as the triggerer rebuilds it
            return dict(event.payload)
        raise AssertionError("the trigger yielded no event")

    return asyncio.run(run())


def test_the_trigger_waits_through_failed_looks_and_the_task_resumes_with_the_jobs_result(faulty, operator_clients):
    proxy = faulty.proxy
    operator, trigger = deferred_train_task(faulty)
    name = trigger.job_name
    assert status_in_moto(name) == "InProgress"
    proxy.fault("DescribeTrainingJob", ["500", "throttle", "close", "500"],
                on_end=lambda: set_training_job_status(name, "Completed"))
    event = first_event(trigger)
    assert event["status"] == "success", event
    assert [kind for _, kind in proxy.faulted] == ["500", "throttle", "close", "500"]
    result = operator.execute_complete(context(faulty.name, 1), event)
    assert (result["job_name"], result["status"]) == (name, "Completed")
    assert proxy.count("CreateTrainingJob") == 1 and proxy.count("StopTrainingJob") == 0, proxy.operations


def test_a_trigger_past_both_bounds_fails_the_try_without_a_class_and_the_next_try_reattaches(faulty, operator_clients,
                                                                                               monkeypatch):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    proxy = faulty.proxy
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_COUNT", "2")
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_SECONDS", "1")
    operator, trigger = deferred_train_task(faulty)
    name = trigger.job_name
    proxy.fault("DescribeTrainingJob", "throttle")  # for ever
    event = first_event(trigger)
    assert event["status"] == "error", event
    message = event["message"]
    assert f"could not look at training job {name}" in message and "ThrottlingException" in message
    assert "It may still be running: this wait did not stop it." in message
    assert "Airflow's next try of this task re-attaches to it" in message
    with pytest.raises(AirflowException) as failed:
        operator.execute_complete(context(faulty.name, 1), event)
    assert not isinstance(failed.value, AirflowFailException), "Airflow's retries must stay for this"
    assert getattr(failed.value, "failure_class", None) is None
    assert status_in_moto(name) == "InProgress"
    assert proxy.count("CreateTrainingJob") == 1 and proxy.count("StopTrainingJob") == 0, proxy.operations
    # the task's next try: the same job, re-attached, deferred on again
    proxy.clear()
    _, retried = deferred_train_task(faulty, try_number=2)
    assert retried.job_name == name and retried.handle["created"] is False
    assert proxy.count("CreateTrainingJob") == 0 and proxy.count("StopTrainingJob") == 0, proxy.operations
