"""The job's log in the task log, continued without repeats or gaps (issue 37 item 3): a trigger taken over by
another triggerer after the job ended, and a cleared task's next try re-attaching to a job that ended between two
looks, write exactly the lines after the last one the task log has, the job's tail included
(`trainops.operators.log_marks`, an Airflow Variable per job: a dict stands for Airflow's store here). A real
detached local job prints three lines, waits for the test's go, prints three more and ends."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home
from support.trigger_log import recorded_trigger

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.operators.training import DistributedTrainingOperator  # noqa: E402

JOB = ("import os, pathlib, time\n"
       "for step in (1, 2, 3):\n"
       "    print(f'line {step} of the job', flush=True)\n"
       "gate = pathlib.Path(os.environ['GO'])\n"
       "while not gate.exists():\n"
       "    time.sleep(0.05)\n"
       "for step in (4, 5, 6):\n"
       "    print(f'line {step} of the job', flush=True)\n"
       "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n")
ALL = [f"[algo-1 rank 0] line {step} of the job" for step in range(1, 7)]


@pytest.fixture
def variables(monkeypatch):
    """Airflow's Variables: where the marks live (every triggerer and worker reads the same store)."""
    store: dict[str, str] = {}
    monkeypatch.setattr("trainops.operators.compat.get_variable", lambda key, default=None: store.get(key, default))
    monkeypatch.setattr("trainops.operators.compat.set_variable", store.__setitem__)
    monkeypatch.setattr("trainops.operators.compat.delete_variable", lambda key: store.pop(key, None))
    return store


@pytest.fixture
def gated(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(JOB)
    go = tmp_path / "go"
    spec = {"name": "gated", "entry_point": "train.py", "source_dir": str(source), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 300, "environment": {"GO": str(go)}}
    return spec, go, tmp_path / "work"


def job_lines(seen: list[str]) -> list[str]:
    return [line for line in seen if "of the job" in line]


def write_until(trigger, seen: list[str], count: int) -> None:
    """Run a trigger until it has written ``count`` of the job's lines, then cancel it (its triggerer died, or the
    task was cleared)."""

    async def partly() -> None:
        running = asyncio.ensure_future(trigger.run().__anext__())
        deadline = time.monotonic() + 60
        while len(job_lines(seen)) < count and not running.done():
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.05)
        running.cancel()

    asyncio.run(partly())


def ended(status_of, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while status_of() == "InProgress":
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_trigger_taken_over_after_the_job_ended_writes_exactly_the_lines_after_the_last_one(variables, gated):
    from trainops.backends.api import get_backend
    from trainops.backends.local import status
    from trainops.steps.train import load_spec

    spec, go, work = gated
    handle = get_backend("local", workdir=str(work)).submit(load_spec(spec), "gated-job", detached=True)
    first: list[str] = []
    write_until(recorded_trigger(first.append)(handle.to_dict(), poll_seconds=0.2), first, 3)
    assert job_lines(first) == ALL[:3]
    go.write_text("go")  # the job prints its last three lines and ends while no trigger runs
    ended(lambda: status.read("gated-job", str(work))["status"])
    second: list[str] = []
    # another triggerer rebuilds it from its serialized form, long after the wait began (as after a takeover)
    kwargs = {**recorded_trigger(second.append)(handle.to_dict(), poll_seconds=0.2).serialize()[1],
              "started_at": time.time() - 3600}
    event = asyncio.run(recorded_trigger(second.append)(**kwargs).run().__anext__()).payload
    assert event["status"] == "success", event
    assert job_lines(second) == ALL[3:], second  # no repeat, the tail not lost
    assert any("after the last line the task log has" in line for line in second)


def test_a_cleared_task_reattaching_to_a_job_that_ended_writes_its_tail_into_the_new_trys_log(variables, gated,
                                                                                              capsys):
    from airflow.sdk.exceptions import TaskDeferred

    spec, go, work = gated

    def context(try_number: int) -> dict:
        return {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1,
                                      try_number=try_number)}

    first_try = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=True,
                                            workdir=str(work), check_interval=0.2)
    with pytest.raises(TaskDeferred) as deferred:
        first_try.execute(context(1))
    trigger = deferred.value.trigger
    seen: list[str] = []
    write_until(recorded_trigger(seen.append)(**trigger.serialize()[1]), seen, 3)
    assert job_lines(seen) == ALL[:3]
    assert len(variables) == 1  # where the task log stands
    go.write_text("go")  # cleared: the first try's trigger is gone, the job ends before the second try looks
    from trainops.backends.local import status

    ended(lambda: status.read(trigger.job_name, str(work))["status"])
    capsys.readouterr()
    second_try = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=True,
                                             workdir=str(work), check_interval=0.2)
    result = second_try.execute(context(2))
    assert (result["status"], result["reattached"], result["job_name"]) == ("Completed", True, trigger.job_name)
    written = [line for line in capsys.readouterr().out.splitlines() if "of the job" in line]
    import re

    assert [re.search(r"\[algo-1 rank 0\] line \d of the job", line)[0] for line in written] == ALL[3:], written
    assert variables == {}  # the task has the job's outcome: its mark is gone


def test_a_deferred_local_job_is_looked_at_every_two_seconds_whatever_the_check_interval(variables, gated,
                                                                                        monkeypatch):
    """The task ends within seconds of its job: the trigger's pause between looks is the backend's
    (`Backend.next_look_seconds`: a local look reads a file), not the task's 30 s check_interval."""
    from trainops.backends.api import get_backend
    from trainops.operators import triggers
    from trainops.steps.train import load_spec

    spec, go, work = gated
    go.write_text("go")
    handle = get_backend("local", workdir=str(work)).submit(load_spec(spec), "gated-job", detached=True)
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(min(seconds, 0.2))

    monkeypatch.setattr(triggers.asyncio, "sleep", sleep)
    seen: list[str] = []
    event = asyncio.run(recorded_trigger(seen.append)(handle.to_dict(), poll_seconds=30).run().__anext__()).payload
    assert event["status"] == "success" and pauses and max(pauses) <= 2.0, pauses


def test_the_backends_say_when_to_look_again():
    from trainops.backends.api import JobHandle, JobResult, JobStatus, get_backend

    def result(status: str, secondary: str) -> JobResult:
        return JobResult(backend="sagemaker", job_name="j", status=JobStatus(status), secondary_status=secondary)

    handle = JobHandle("sagemaker", "j", region="us-east-1")
    sagemaker = get_backend("sagemaker", region="us-east-1", client_factory=lambda service: None)
    assert sagemaker.next_look_seconds(handle, result("InProgress", "Training"), 30) == 30  # an API call per look
    assert sagemaker.next_look_seconds(handle, result("InProgress", "Uploading"), 30) == 5  # ending: sooner
    assert sagemaker.next_look_seconds(handle, result("Stopping", "Stopping"), 30) == 5
    assert get_backend("local").next_look_seconds(JobHandle("local", "j"), result("InProgress", ""), 30) == 2
