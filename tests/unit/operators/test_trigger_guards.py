"""JobTrigger applies a train task's guards (trainops.backends.guards.JobGuards) on real detached local jobs: the
budget and the stall watchdog stop the job, the wait bound counts from the job's own start (a trigger rebuilt from
its serialized kwargs gets no fresh allowance), a bound that only ends the wait leaves the job running; the guards
travel as JSON in the kwargs, and the event, through the operator's execute_complete, fails the task with the
guard's class (budget and timeout never retried by Airflow, a stall an infrastructure failure).

The stand-in scripts are tests/system/scripts/guards/ (the local cost is wall time x instances x the catalog price:
1 x ml.m5.large at $0.115/h makes $0.0001 about 3 s)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from support.airflow_home import isolate_airflow_home
from support.trigger_log import recorded_trigger

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402

from trainops.backends.api import JobHandle, get_backend  # noqa: E402
from trainops.backends.guards import JobGuards  # noqa: E402
from trainops.backends.vocabulary import classify_result  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.operators.triggers import JobTrigger  # noqa: E402
from trainops.steps.attempts import guards_for  # noqa: E402
from trainops.steps.train import load_spec  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[2] / "system" / "scripts" / "guards"


def spec(entry_point: str, tmp_path: Path, **fields):
    return load_spec({"name": "guarded", "entry_point": entry_point, "source_dir": str(SCRIPTS),
                      "instance_type": "ml.m5.large", "instance_count": 1, "output_path": str(tmp_path / "out"),
                      "max_run": 600, **fields})


def submit(tmp_path: Path, job_spec, name: str) -> tuple[dict, object]:
    backend = get_backend("local", workdir=str(tmp_path / "w"))
    handle = backend.submit(job_spec, name, detached=True)
    return handle.to_dict(), backend


def first_event(trigger: JobTrigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def rebuilt(trigger: JobTrigger) -> JobTrigger:
    """The trigger as another triggerer builds it: from its serialized kwargs, through JSON (the database's)."""
    classpath, kwargs = trigger.serialize()
    return JobTrigger(**json.loads(json.dumps(kwargs)))


def wait_until_ended(backend, handle: dict, seconds: float = 60) -> str:
    deadline = time.time() + seconds
    status = ""
    while time.time() < deadline:
        status = backend.describe(JobHandle.from_dict(handle)).status.value
        if status in ("Completed", "Failed", "Stopped"):
            break
        time.sleep(0.2)
    return status


def test_the_guards_travel_as_json_and_survive_a_rebuild():
    guards = JobGuards(budget_usd=1.5, hourly_usd=0.115, stall_timeout=900, grace_seconds=120, stop_at_bound=False,
                       max_run=3600)
    first = JobTrigger({"backend": "local", "job_name": "j-1", "workdir": "/tmp/w", "region": None},
                       guards=guards.to_dict(), started_at=1000.0)
    again = rebuilt(first)
    assert again.serialize() == first.serialize()
    assert JobGuards.from_dict(again.guards) == guards
    assert again.started_at == 1000.0


def test_a_deferred_local_job_is_stopped_at_its_budget_and_the_task_fails_as_budget(tmp_path):
    job_spec = spec("busy_printer.py", tmp_path, max_cost_usd=0.0001)
    handle, _ = submit(tmp_path, job_spec, "pricey-1")
    trigger = JobTrigger(handle, poll_seconds=0.3, stream_logs=False, base_name="pricey-1",
                         guards=guards_for(job_spec).to_dict())
    event = first_event(rebuilt(trigger))
    assert (event["status"], event["job_status"]) == ("stopped", "Stopped"), event
    assert event["guard"]["kind"] == "budget"
    assert event["failure_reason"].startswith("budget: billable cost") and "max_cost_usd" in event["failure_reason"]
    # Later, from another process (`trainops status`): the local record keeps the guard's sentence as its reason.
    later = get_backend("local", workdir=str(tmp_path / "w")).describe(JobHandle.from_dict(handle)).to_dict()
    assert later["failure_reason"] == event["failure_reason"]
    assert classify_result(later).failure_class == "budget"
    operator = DistributedTrainingOperator(task_id="train", spec={}, backend="local", workdir=str(tmp_path / "w"),
                                           retry_budgets={"infrastructure": 2, "user": 0})
    with pytest.raises(AirflowFailException, match=r"\[budget failure") as raised:
        operator.execute_complete({}, event)
    assert "not retried: the run's max_cost_usd is spent" in str(raised.value)
    assert raised.value.failure_class == "budget"  # what the retry policy reads


def test_a_deferred_local_job_that_hangs_is_stopped_as_stalled(tmp_path):
    job_spec = spec("print_then_sleep.py", tmp_path, stall_timeout=2)
    handle, _ = submit(tmp_path, job_spec, "hung-1")
    lines: list[str] = []

    RecordedTrigger = recorded_trigger(lines.append)

    event = first_event(RecordedTrigger(handle, poll_seconds=0.3, guards=guards_for(job_spec).to_dict()))
    assert (event["status"], event["guard"]["kind"]) == ("stopped", "stalled"), event
    assert "stall_timeout 2 s" in event["failure_reason"]
    assert event["duration_seconds"] < 60  # seconds, not max_run (600 s)
    assert any("step 1 done" in line for line in lines)  # it printed once, streamed into the task log
    assert any("stalled: no new log line" in line and "stopping the job" in line for line in lines), lines
    operator = DistributedTrainingOperator(task_id="train", spec={}, backend="local", workdir=str(tmp_path / "w"),
                                           retry_budgets={"infrastructure": 0, "user": 0})
    with pytest.raises(AirflowException, match=r"\[infrastructure failure") as raised:
        operator.execute_complete({}, event)
    assert not isinstance(raised.value, AirflowFailException)  # another try may help: Airflow's retries stay
    assert raised.value.failure_class == "infrastructure"


def test_the_wait_bound_counts_from_the_jobs_start_not_the_triggers(tmp_path):
    handle, backend = submit(tmp_path, spec("busy_printer.py", tmp_path), "long-1")
    time.sleep(3)  # the job runs 3 s before this trigger (rebuilt after a restart, say) starts
    guards = JobGuards(max_run=1, grace_seconds=1)  # bound: 2 s after the job's own start
    trigger = JobTrigger(handle, poll_seconds=0.3, stream_logs=False, guards=guards.to_dict())
    assert time.time() - trigger.started_at < 1  # a fresh trigger: its own start is now
    event = first_event(trigger)
    assert (event["status"], event["guard"]["kind"]) == ("stopped", "wait_bound"), event
    assert event["failure_reason"].startswith("wait bound:")
    with pytest.raises(AirflowFailException, match=r"\[timeout failure"):
        DistributedTrainingOperator(task_id="train", spec={}, backend="local",
                                    workdir=str(tmp_path / "w")).execute_complete({}, event)


def test_a_bound_that_only_ends_the_wait_leaves_the_job_running(tmp_path):
    handle, backend = submit(tmp_path, spec("busy_printer.py", tmp_path), "left-1")
    guards = JobGuards(max_run=1, grace_seconds=1, stop_at_bound=False)
    event = first_event(JobTrigger(handle, poll_seconds=0.3, stream_logs=False, guards=guards.to_dict()))
    try:
        assert (event["status"], event["guard"]["kind"]) == ("timeout", "wait_bound"), event
        assert "was not stopped" in event["message"] and "trainops stop left-1" in event["message"]
        assert backend.describe(JobHandle.from_dict(handle)).status.value == "InProgress"
        with pytest.raises(AirflowFailException, match=r"\[timeout failure"):
            DistributedTrainingOperator(task_id="train", spec={}, backend="local").execute_complete({}, event)
    finally:
        backend.stop(JobHandle.from_dict(handle))
        assert wait_until_ended(backend, handle) == "Stopped"


def test_without_guards_the_trigger_keeps_its_own_bound(tmp_path):
    """A trigger serialized before guards existed (or another job kind's) has none: it waits as it always did."""
    handle, backend = submit(tmp_path, spec("busy_printer.py", tmp_path, max_cost_usd=0.0001), "unguarded-1")
    try:
        event = first_event(JobTrigger(handle, poll_seconds=0.3, stream_logs=False, max_run=1, grace_seconds=1))
        assert event["status"] == "timeout" and event.get("guard") is None
        assert "was not stopped" in event["message"]
    finally:
        backend.stop(JobHandle.from_dict(handle))
        wait_until_ended(backend, handle)
