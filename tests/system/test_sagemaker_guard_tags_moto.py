"""Why trainops stopped a SageMaker training job outlives the stop, against a moto server on 127.0.0.1: a guard tags
the job (AddTags: ``trainops:stopped-by`` and ``trainops:stop-reason``) before StopTrainingJob, and describe reads
the tags back (ListTags), so a later `trainops status` and the seam's describe say budget / stalled / timeout, not a
bare Stopped; the deferred path's trigger stops a job at its budget this way and the task fails as budget.

moto creates jobs Completed and has no StopTrainingJob: `set_training_job_status` makes the job InProgress, and the
`stoppable` fixture adds StopTrainingJob to the in-process server (the job reads Stopped at once)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from support.airflow_home import isolate_airflow_home
from support.moto_quotas import set_training_job_status
from support.moto_server import ACCOUNT_ID, REGION, recording_stop_training_job
from support.sagemaker_shapes import training_request

isolate_airflow_home()

from trainops.backends.api import JobHandle, get_backend  # noqa: E402
from trainops.backends.guards import JobGuards, Tripped  # noqa: E402
from trainops.backends.sagemaker import training  # noqa: E402
from trainops.backends.vocabulary import classify_result  # noqa: E402

pytestmark = pytest.mark.system


@pytest.fixture
def stoppable(monkeypatch):
    """StopTrainingJob on the moto server: the job ends Stopped (moto has no such call)."""
    from moto.sagemaker.responses import SageMakerResponse

    stopped: list[str] = []
    monkeypatch.setattr(SageMakerResponse, "stop_training_job", recording_stop_training_job(stopped), raising=False)
    return stopped


def running_job(aws_clients) -> str:
    from moto.sagemaker.models import sagemaker_backends

    name = f"bert-{uuid.uuid4().hex[:10]}"
    aws_clients("sagemaker").create_training_job(**training_request(name))
    set_training_job_status(name, "InProgress")
    sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name].secondary_status = "Training"
    return name


def tags_of(aws_clients, name: str) -> dict[str, str]:
    client = aws_clients("sagemaker")
    arn = client.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return {tag["Key"]: tag["Value"] for tag in client.list_tags(ResourceArn=arn)["Tags"]}


def test_a_guard_stop_is_tagged_and_read_back_by_describe_and_status(aws_clients, stoppable):
    name = running_job(aws_clients)
    guard = Tripped("stalled", "stalled: no new log line or metric for 1900 s (stall_timeout 1800 s)")
    assert training.stop(aws_clients, name, guard=guard) == "Stopping"
    assert stoppable == [name]
    assert tags_of(aws_clients, name) == {"trainops:stopped-by": "stalled", "trainops:stop-reason":
                                          "stalled: no new log line or metric for 1900 s  stall_timeout 1800 s"}
    backend = get_backend("sagemaker", region=REGION, client_factory=aws_clients)
    handle = JobHandle("sagemaker", name, region=REGION)
    result = backend.describe(handle)
    assert result.status.value == "Stopped" and result.details["guard"]["kind"] == "stalled"
    assert result.failure_reason.startswith("stalled: no new log line or metric for 1900 s")
    verdict = classify_result(result.to_dict())
    assert (verdict.failure_class, verdict.reason) == ("infrastructure", "stalled")
    record = backend.status_record(handle)  # what `trainops status` prints
    assert record["status"] == "Stopped" and record["guard"]["kind"] == "stalled"
    assert record["failure_reason"].startswith("stalled:")


def test_a_job_stopped_by_a_person_reads_plainly_stopped(aws_clients, stoppable):
    name = running_job(aws_clients)
    training.stop(aws_clients, name)
    assert tags_of(aws_clients, name) == {}
    result = get_backend("sagemaker", region=REGION, client_factory=aws_clients).describe(
        JobHandle("sagemaker", name, region=REGION))
    assert result.status.value == "Stopped" and "guard" not in result.details and not result.failure_reason


def test_tag_values_keep_to_what_sagemaker_accepts():
    value = training.tag_value("budget: billable cost $0.0002 reached the $0.0001 left of max_cost_usd (3 s at "
                               "$0.1150/h)")
    assert value == "budget: billable cost USD 0.0002 reached the USD 0.0001 left of max_cost_usd  3 s at USD 0.1150/h"
    assert len(training.tag_value("x" * 400)) == 256


def test_the_deferred_trigger_stops_a_job_at_its_budget_and_the_task_fails_as_budget(aws_clients, stoppable,
                                                                                     monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from trainops.operators import triggers
    from trainops.operators.training import DistributedTrainingOperator
    from trainops.operators.triggers import JobTrigger

    monkeypatch.setattr("trainops.operators.common.aws_client_factory", lambda conn, region: (aws_clients, REGION))
    triggers._FACTORIES.clear()
    name = running_job(aws_clients)
    guards = JobGuards(budget_usd=0.000001, hourly_usd=1000.0)  # any billed second is over it
    kwargs = JobTrigger({"backend": "sagemaker", "job_name": name, "region": REGION}, poll_seconds=0,
                        stream_logs=False, guards=guards.to_dict()).serialize()[1]
    trigger = JobTrigger(**json.loads(json.dumps(kwargs)))  # as the triggerer rebuilds it

    async def first():
        async for event in trigger.run():
            return event.payload

    try:
        event = asyncio.run(first())
    finally:
        triggers._FACTORIES.clear()
    assert stoppable == [name]
    assert (event["status"], event["job_status"], event["guard"]["kind"]) == ("stopped", "Stopped", "budget"), event
    assert event["failure_reason"].startswith("budget: billable cost")
    assert tags_of(aws_clients, name)["trainops:stopped-by"] == "budget"
    with pytest.raises(AirflowFailException, match=r"\[budget failure"):
        DistributedTrainingOperator(task_id="train", spec={}, backend="sagemaker").execute_complete({}, event)
    later = get_backend("sagemaker", region=REGION, client_factory=aws_clients).status_record(
        JobHandle("sagemaker", name, region=REGION))
    assert later["guard"]["kind"] == "budget"  # `trainops status` later, from another process: the tags


def test_trainops_status_says_why_trainops_stopped_the_job(aws_clients, aws_environment, stoppable):
    """`trainops status` as a user runs it, in another process, against the same moto server."""
    import os
    import subprocess
    import sys

    name = running_job(aws_clients)
    guard = Tripped("wait_bound", "wait bound: 90000 s since the job's start passed max_run + max_wait + "
                                  "wait_grace_seconds (90000 s)")
    training.stop(aws_clients, name, guard=guard)

    def status(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainops.cli", "status", name, "--backend", "sagemaker",
                               "--region", REGION, *flags], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ))

    described = status("--json")
    assert described.returncode == 0, described.stderr
    record = json.loads(described.stdout)
    assert record["status"] == "Stopped" and record["guard"]["kind"] == "wait_bound"
    # the tag's value: what SageMaker accepts in one (no apostrophe, no parentheses)
    assert record["failure_reason"] == ("wait bound: 90000 s since the job s start passed max_run + max_wait + "
                                        "wait_grace_seconds  90000 s")
    assert record["failure_class"] == "timeout"
    text = status()
    assert "failure_class: timeout" in text.stdout and "failure_reason: wait bound:" in text.stdout, text.stdout
