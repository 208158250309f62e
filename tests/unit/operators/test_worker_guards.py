"""The train task's other waits apply the same guards through the backend's watch (`Backend.watch`): the worker's
poll (the remote path; driven here on a real detached local job, which it serves alike) stops a job at its budget
and fails the task as budget, a reschedule poke stops it too (the next poke finds it Stopped), and a backend without
a watch leaves the trigger its own bound, said in the log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from support.airflow_home import isolate_airflow_home
from support.trigger_log import recorded_trigger

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException  # noqa: E402

from trainops.backends.api import Backend, JobHandle, get_backend  # noqa: E402
from trainops.backends.vocabulary import classify_result  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.steps.attempts import guards_for  # noqa: E402
from trainops.steps.train import load_spec  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[2] / "system" / "scripts" / "guards"


def started(tmp_path: Path, name: str, **fields):
    spec = load_spec({"name": "guarded", "entry_point": "busy_printer.py", "source_dir": str(SCRIPTS),
                      "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 600,
                      "output_path": str(tmp_path / "out"), **fields})
    backend = get_backend("local", workdir=str(tmp_path / "w"))
    return spec, backend, backend.submit(spec, name, detached=True)


def operator(tmp_path: Path) -> DistributedTrainingOperator:
    return DistributedTrainingOperator(task_id="train", spec={}, backend="local", workdir=str(tmp_path / "w"),
                                       check_interval=0.3, stream_logs=False)


def ended(backend, handle, seconds: float = 60):
    deadline = time.time() + seconds
    result = backend.describe(handle)
    while result.status.outcome == "waiting" and time.time() < deadline:
        time.sleep(0.2)
        result = backend.describe(handle)
    return result


def test_the_workers_poll_stops_a_job_at_its_budget_and_fails_as_budget(tmp_path):
    spec, backend, handle = started(tmp_path, "polled-1", max_cost_usd=0.0001)
    with pytest.raises(AirflowFailException, match=r"ended Stopped: budget: billable cost.*\[budget failure"):
        operator(tmp_path)._wait_in_worker(backend, spec, "polled-1", handle, guards_for(spec))
    assert ended(backend, handle).status.value == "Stopped"


def test_a_reschedule_poke_applies_the_guards_once(tmp_path):
    spec, backend, handle = started(tmp_path, "poked-1", max_cost_usd=0.0001)
    time.sleep(4)  # about $0.00013 of ml.m5.large: over the budget
    with pytest.raises(AirflowRescheduleException):
        operator(tmp_path)._poke(backend, spec, "poked-1", handle, backend.describe(handle), guards_for(spec))
    result = ended(backend, handle)
    assert result.status.value == "Stopped" and result.failure_reason.startswith("budget:")
    assert classify_result(result.to_dict()).failure_class == "budget"


def test_a_backend_without_a_watch_leaves_the_trigger_its_own_bound(tmp_path, monkeypatch):
    from trainops.backends.local.backend import LocalBackend

    monkeypatch.setattr(LocalBackend, "watch", Backend.watch)  # the seam's default: no watch
    spec, backend, handle = started(tmp_path, "unwatched-1", max_cost_usd=0.0001)
    seen: list[str] = []

    RecordedTrigger = recorded_trigger(seen.append)

    trigger = RecordedTrigger(handle.to_dict(), poll_seconds=0.3, stream_logs=False, max_run=2, grace_seconds=1,
                              guards=guards_for(spec).to_dict())

    async def first():
        async for event in trigger.run():
            return event.payload

    try:
        event = asyncio.run(first())
        assert event["status"] == "timeout" and event.get("guard") is None, event
        assert any("cannot guard a job it does not wait for itself" in line for line in seen), seen
    finally:
        backend.stop(JobHandle.from_dict(handle.to_dict()))
        ended(backend, handle)
