"""One attempts engine, its drivers: the same endings fed through the train step's synchronous driver
(`trainops.steps.train.train` -> `run_attempts`), through the deferred Airflow operator (execute, the real
`JobTrigger` rebuilt from its serialized form, execute_complete with the trigger's event and the deferral's kwargs)
through the operator's wait in the worker and through reschedule pokes (each a fresh operator) get the same
decisions from `AttemptsEngine.ended` and place the same jobs.

The engine here is a scripted backend written against the kit (`PolledBackend`): each job it creates ends the way
the case's next line says after its first look (a lost node, a script's error, completion), or runs on until a guard
of trainops stops it (a stall, the run's money). Its vocabulary is its own: a lost node is ``infrastructure``, a
script's failure ``user``; one ml.m5.large costs $360 an hour, so an attempt of 10 s costs $1.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()  # before Airflow is imported: never write into ~/airflow

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException, TaskDeferred  # noqa: E402

from trainops.backends.kit import (  # noqa: E402
    BackendOptions,
    JobHandle,
    JobResult,
    JobStatus,
    Look,
    Observation,
    PolledBackend,
    Rule,
    Vocabulary,
    register,
)
from trainops.errors import JobFailed  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.steps.attempts_engine import AttemptsEngine, Done, Fail, Retry  # noqa: E402
from trainops.steps.train import train  # noqa: E402

SCRIPTED = register(Vocabulary(
    engine="scripted",
    tables={"scripted_job": {"InProgress": "waiting", "Completed": "success", "Failed": "failure",
                             "NodeLost": "failure", "Stopped": "failure"}},
    training_kind="scripted_job", ended_as={"Stopped": "Stopped"},
    rules=(Rule("infrastructure", "secondary_status", r"^NodeLost$", "the job's node was lost", "hosts"),
           Rule("user", "secondary_status", r"^Failed$", "the job's script failed", "script")),
    price=lambda instance_type, region: {"ml.m5.large": 360.0}.get(instance_type),
    price_basis="the scripted engine's own price"))

#: How a scripted job ends: its state and failure reason after its first look; None: it runs until stopped.
ENDINGS: dict[str, tuple[str, str | None] | None] = {
    "done": ("Completed", None),
    "user": ("Failed", "the script exited 1: ValueError: bad label"),
    "lost": ("NodeLost", "the job's node went away"),
    "stall": None,  # quiet since long ago: the stall watchdog stops it
    "pricey": None,  # billed an hour already: the budget stops it
}


@dataclass(frozen=True)
class ScriptedOptions(BackendOptions):
    backend: ClassVar[str] = "scripted"


class ScriptedBackend(PolledBackend[ScriptedOptions]):
    """Jobs that end as the script of their work directory says, one line per created job, in order."""

    name = "scripted"
    Options = ScriptedOptions
    vocabulary = SCRIPTED
    CONTEXT = frozenset({"workdir"})
    WAIT_GRACE_SECONDS = 60.0
    poll_seconds = 0.01
    scripts: ClassVar[dict[str, list[str]]] = {}  # work directory -> the endings of the jobs still to create
    jobs: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {}  # work directory -> job name -> its record

    def __init__(self, workdir: str | None = None):
        self.workdir = str(workdir)

    def location(self) -> dict[str, str]:
        return {"workdir": self.workdir}

    def _jobs(self) -> dict[str, dict[str, Any]]:
        return self.jobs.setdefault(self.workdir, {})

    def dry_run(self, spec: Any, name: str, options: ScriptedOptions) -> dict[str, Any]:
        return {"job_name": name, "instance_type": spec.instance_type}

    def create(self, spec: Any, name: str, options: ScriptedOptions, *, detached: bool, log: Any) -> JobHandle:
        self._jobs()[name] = {"ending": self.scripts[self.workdir].pop(0), "looks": 0, "stopped": None,
                              "max_run": spec.max_run}
        return self.handle(name, created=True)

    def status_of(self, name: str) -> JobStatus | None:
        record = self._jobs().get(name)
        return None if record is None else SCRIPTED.job_status(self._state(record)[0])

    def _state(self, record: dict[str, Any]) -> tuple[str, str | None]:
        if record["stopped"]:
            return "Stopped", record["stopped"]
        ending = ENDINGS[record["ending"]]
        return ending if ending is not None and record["looks"] > 1 else ("InProgress", None)

    def look(self, handle: JobHandle) -> Look:
        record = self._jobs()[handle.job_name]
        record["looks"] += 1
        state, reason = self._state(record)
        ended = state != "InProgress"
        result = JobResult("scripted", handle.job_name, SCRIPTED.job_status(state), secondary_status=state,
                           failure_reason=reason, duration_seconds=10.0 if ended else None,
                           billable_seconds=10 if ended else None, reattached=not handle.created)
        now = time.time()
        billed = 3600.0 if record["ending"] == "pricey" else 1.0
        quiet = 30.0 if record["ending"] == "stall" else 0.0  # the others print all the time
        return Look(result, Observation(now=now, started=now - 30, running_since=now - 30, billable_seconds=billed,
                                        last_activity=now - quiet, max_run=record["max_run"]))

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        self._jobs()[handle.job_name]["stopped"] = reason
        return f"{handle.job_name}: stopping ({reason})"

    def render_request(self, spec: Any, job_name: str, *, options: Any = None) -> dict[str, Any]:
        return self.dry_run(spec, job_name, self.options(options))


@pytest.fixture(autouse=True)
def scripted_backend(monkeypatch):
    from trainops.backends import BUILTIN

    monkeypatch.setitem(BUILTIN, "scripted", f"{__name__}:ScriptedBackend")


@pytest.fixture
def decisions(monkeypatch):
    """Every decision the engine makes, with the job name of the attempt it was made on."""
    made: list[tuple[str, Any]] = []
    ended = AttemptsEngine.ended

    def spy(self: AttemptsEngine, result: Mapping[str, Any]) -> Any:
        decision = ended(self, result)
        made.append((str(result.get("job_name")), decision))
        return decision

    monkeypatch.setattr(AttemptsEngine, "ended", spy)
    return made


def spec(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    (tmp_path / "train.py").write_text("print('scripted')\n")
    return {"name": "scripted", "entry_point": "train.py", "source_dir": str(tmp_path),
            "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 600, **fields}


def summary(base: str, made: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    """The decisions with the run's name replaced by ``NAME`` (the operator names its job after the task)."""
    def named(name: str) -> str:
        return name.replace(base, "NAME")

    out: list[tuple[Any, ...]] = []
    for ended, decision in made:
        if isinstance(decision, Retry):
            out.append((named(ended), "retry", decision.number, named(decision.job_name), decision.failure_class,
                        decision.used, decision.budget))
        elif isinstance(decision, Fail):
            out.append((named(ended), "fail", decision.failure_class, bool(decision.refused)))
        else:
            assert isinstance(decision, Done)
            out.append((named(ended), "done", decision.status))
    return out


def through_the_step(tmp_path: Path, endings: list[str], retries: dict[str, Any], fields: dict[str, Any]
                     ) -> tuple[str, list[str]]:
    work = str(tmp_path / "step")
    ScriptedBackend.scripts[work] = list(endings)
    try:
        train(spec(tmp_path, **fields), backend="scripted", backend_options={"workdir": work}, job_name="run-1",
              retries=retries, log=lambda line: None)
    except JobFailed:
        pass
    return "run-1", list(ScriptedBackend.jobs[work])


def run_trigger(trigger: Any) -> dict[str, Any]:
    classpath, kwargs = trigger.serialize()
    rebuilt = type(trigger)(**kwargs)  # what a (restarted) triggerer runs: the serialized form only

    async def first_event() -> dict[str, Any]:
        async for event in rebuilt.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(first_event())


def through_the_operator(tmp_path: Path, endings: list[str], retries: dict[str, Any], fields: dict[str, Any]
                         ) -> tuple[str, list[str]]:
    work = str(tmp_path / "task")
    ScriptedBackend.scripts[work] = list(endings)
    context = {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1,
                                     try_number=1)}

    def operator() -> DistributedTrainingOperator:  # a new instance per resumption, as Airflow makes one
        return DistributedTrainingOperator(task_id="train", spec=spec(tmp_path, **fields), backend="scripted",
                                           backend_options={"workdir": work}, deferrable=True, check_interval=0,
                                           stream_logs=False, retry_budgets=retries)

    with pytest.raises(TaskDeferred) as deferred:
        operator().execute(context)
    base = deferred.value.trigger.base_name
    while True:
        event = run_trigger(deferred.value.trigger)
        try:
            operator().execute_complete(context, event, **(deferred.value.kwargs or {}))
        except TaskDeferred as again:
            deferred = pytest.ExceptionInfo.from_exc_info((type(again), again, again.__traceback__))
            continue
        except AirflowException:
            pass
        return base, list(ScriptedBackend.jobs[work])


def through_the_workers_poll(tmp_path: Path, endings: list[str], retries: dict[str, Any], fields: dict[str, Any]
                             ) -> tuple[str, list[str]]:
    """The operator's third way: it polls its job from the worker and places the next attempt there."""
    work = str(tmp_path / "worker")
    ScriptedBackend.scripts[work] = list(endings)
    context = {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__2", map_index=-1,
                                     try_number=1)}
    operator = DistributedTrainingOperator(task_id="train", spec=spec(tmp_path, **fields), backend="scripted",
                                           backend_options={"workdir": work}, wait_mode="worker", check_interval=0,
                                           stream_logs=False, retry_budgets=retries)
    try:
        operator.execute(context)
    except AirflowException:
        pass
    names = list(ScriptedBackend.jobs[work])
    return names[0], names


def through_reschedule_pokes(tmp_path: Path, endings: list[str], retries: dict[str, Any], fields: dict[str, Any]
                             ) -> tuple[str, list[str]]:
    """No triggerer: pokes of one try (Airflow 3 counts them: ``task_reschedule_count``), each a fresh operator
    that keeps nothing from the one before."""
    from trainops.operators.compat import AirflowRescheduleException

    work = str(tmp_path / "pokes")
    ScriptedBackend.scripts[work] = list(endings)
    for poke in range(20):
        context = {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__3", map_index=-1,
                                         try_number=1), "task_reschedule_count": poke}
        operator = DistributedTrainingOperator(task_id="train", spec=spec(tmp_path, **fields), backend="scripted",
                                               backend_options={"workdir": work}, wait_mode="reschedule",
                                               check_interval=0, stream_logs=False, retry_budgets=retries)
        try:
            operator.execute(context)
        except AirflowRescheduleException:
            continue
        except AirflowException:
            pass
        break
    names = list(ScriptedBackend.jobs[work])
    return names[0], names


CASES = {
    "a user error fails at once": (["user"], {"infrastructure": 2}, {}, [
        ("NAME", "fail", "user", False)]),
    "an infrastructure failure is retried, then completes": (["lost", "done"], {"infrastructure": 2}, {}, [
        ("NAME", "retry", 2, "NAME-2", "infrastructure", 1, 2), ("NAME-2", "done", "Completed")]),
    "the infrastructure budget runs out": (["lost", "lost", "lost"], {"infrastructure": 2}, {}, [
        ("NAME", "retry", 2, "NAME-2", "infrastructure", 1, 2),
        ("NAME-2", "retry", 3, "NAME-3", "infrastructure", 2, 2), ("NAME-3", "fail", "infrastructure", False)]),
    # $1 an attempt against $2.50: the third leaves no room for a fourth, whatever the budget of retries says.
    "max_cost_usd over the attempts refuses a retry": (["lost", "lost", "lost", "done"], {"infrastructure": 5},
                                                       {"max_cost_usd": 2.5}, [
        ("NAME", "retry", 2, "NAME-2", "infrastructure", 1, 5),
        ("NAME-2", "retry", 3, "NAME-3", "infrastructure", 2, 5), ("NAME-3", "fail", "infrastructure", True)]),
    "a stall stopped by its guard is retried": (["stall", "done"], {"infrastructure": 1}, {"stall_timeout": 5}, [
        ("NAME", "retry", 2, "NAME-2", "infrastructure", 1, 1), ("NAME-2", "done", "Completed")]),
    "the budget guard's stop is never retried": (["pricey", "done"], {"infrastructure": 3},
                                                 {"max_cost_usd": 50.0}, [
        ("NAME", "fail", "budget", False)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_step_and_the_operator_decide_alike_and_place_the_same_jobs(tmp_path, decisions, case):
    endings, retries, fields, expected = CASES[case]
    retries = {**retries, "backoff_seconds": 0}
    base, step_jobs = through_the_step(tmp_path, endings, retries, fields)
    step = summary(base, decisions)
    decisions.clear()
    task_base, task_jobs = through_the_operator(tmp_path, endings, retries, fields)
    task = summary(task_base, decisions)
    decisions.clear()
    worker_base, worker_jobs = through_the_workers_poll(tmp_path, endings, retries, fields)
    worker = summary(worker_base, decisions)
    decisions.clear()
    poked_base, poked_jobs = through_reschedule_pokes(tmp_path, endings, retries, fields)
    poked = summary(poked_base, decisions)
    assert step == expected
    assert task == expected
    assert worker == expected
    assert poked == expected
    jobs = [name.replace(base, "NAME") for name in step_jobs]
    assert jobs == [name.replace(task_base, "NAME") for name in task_jobs]
    assert jobs == [name.replace(worker_base, "NAME") for name in worker_jobs]
    assert jobs == [name.replace(poked_base, "NAME") for name in poked_jobs]


def test_the_look_for_earlier_attempts_fails_like_a_waits_look_and_is_made_again(tmp_path, monkeypatch):
    """Before an attempt is placed, the attempts of the name that already ended are looked up; a look there that fails
    without proving anything (a controller that does not answer) is made again after a pause, as a wait's is, never
    raised at once nor read as "no such job" (which would start the series over and charge nothing)."""
    from trainops.backends.looks import LookFailed
    from trainops.steps.attempts import known_attempts

    pauses: list[float] = []
    monkeypatch.setattr("trainops.backends.looks._sleep", pauses.append)
    ScriptedBackend.jobs[str(tmp_path)] = {"j": {"ending": "user", "looks": 2, "stopped": None, "max_run": 600}}
    answers = iter([False])  # the first look fails, the rest answer
    answered = ScriptedBackend.status_of

    def flaky(self: ScriptedBackend, name: str) -> JobStatus | None:
        if not next(answers, True):
            raise LookFailed("the controller did not answer")
        return answered(self, name)

    monkeypatch.setattr(ScriptedBackend, "status_of", flaky)
    known = known_attempts(ScriptedBackend(tmp_path), "j")
    assert [(attempt["job_name"], attempt["status"]) for attempt in known] == [("j", "Failed")]
    assert len(pauses) == 1
