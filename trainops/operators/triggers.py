"""`JobTrigger`: the one trigger of every trainops operator, for every backend and job kind.

A deferred task hands the triggerer a `JobHandle` (``to_dict()`` in the trigger's kwargs) and the job's kind; the
trigger asks the backend seam where the job stands (``backend.describe_job(handle, kind)``, in a thread: the
backends block) every ``poll_seconds`` until the states table says the job ended or the wait's bound passed, and
yields one small event. It knows no backend: a local job (run by a detached supervisor, so it belongs to neither
the worker nor the triggerer) and a SageMaker job are the same loop, and a new backend needs no new trigger. A new job
kind is a row of `KINDS` (as the Amazon provider's ``SageMakerTrigger(job_name, job_type)`` maps its kinds through
small tables).

While it waits, the trigger streams the job's new log lines (`Backend.log_lines`: local files or CloudWatch) into
the task's log, at most ``log_lines_per_poll`` a poll, so the cost of a poll stays bounded whatever the job prints,
and records where the task log stands (`trainops.operators.log_marks`), so a trigger moved to another triggerer
and a later try that re-attaches continue from the last line written: no line twice, none lost. Between two looks
it waits ``poll_seconds``, or less where the backend says so (`Backend.next_look_seconds`: a local job's look is a
file read, a SageMaker job uploading its model is about to end), so the task ends within seconds of its job.
The bound (`trainops.backends.states.wait_bound_seconds`) counts from ``started_at``, which survives a triggerer
restart, so a trigger moved to another triggerer gets no fresh allowance. ``on_kill`` (Airflow 3.3+: the task was
marked failed or success, its run stopped, or it was cleared) stops the job through the seam
(``backend.stop_job(handle, kind)``) only when the task ended: a cleared task's next try re-attaches to the job
(`trainops.operators.kills`).

With ``guards`` (`trainops.backends.guards.JobGuards` as a dict: what a train task's wait guards its job against)
the trigger applies them at every poll through the backend's watch (`Backend.watch`: the per-poll check the
backend's own guarded wait runs): the budget, the stall watchdog and the wait bound counted from the JOB's start
(not the trigger's), each stopping the job; the event then carries the ``guard`` that stopped it, which classifies
the failure (``budget``, ``infrastructure``, ``timeout``). The guards are JSON in the kwargs, so a trigger rebuilt
by another triggerer applies the same ones (a local stall's quiet time is counted again from the rebuild).

Events: ``{"status": "success" | "failed" | "stopped" | "timeout" | "error", "message", "backend", "job_name", ...}``;
the operator's ``execute_complete`` raises on anything but ``success``, with the event's ``message``. This module is
imported by the triggerer and by ``execute`` when deferring, never by a DAG file.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent  # the same module on Airflow 2.11 and 3.x

from trainops.backends.api import JobHandle
from trainops.backends.guards import JobGuards, settle, stops
from trainops.backends.looks import Looks
from trainops.backends.states import JobStatus, wait_bound_seconds
from trainops.backends.vocabulary import vocabulary_of
from trainops.operators import kills, log_marks
from trainops.operators.backend_choice import BackendChoice
from trainops.operators.common import airflow_error, lazy_aws_client_factory
from trainops.operators.kills import ended_by_user, stop_hint

CLASSPATH = "trainops.operators.triggers.JobTrigger"
#: Default when the job's limits are unknown: SageMaker's own default MaxRuntimeInSeconds (one day).
DEFAULT_MAX_RUN_SECONDS = 86400
#: Log lines written to the task log per poll, and after the job ended (the last lines arrive then).
LOG_LINES_PER_POLL = 500
LOG_LINES_AFTER_END = 5000

#: kind -> how messages name it. A kind is what the handle's backend can describe and stop through the seam
#: (`Backend.describe_job` / `Backend.stop_job` with the kind: `trainops.backends.api.JOB_KINDS`).
KINDS: dict[str, str] = {"training": "training job", "evaluation": "evaluation job", "stage": "staging task"}


#: A trigger whose wait began this long before it first runs was rebuilt by another triggerer (or restarted).
RESUMED_AFTER_SECONDS = 60.0
#: Reads (of 10,000 lines each) a resumed trigger spends finding where the logs end.
MAX_SKIP_READS = 1000
#: With guards, the trigger's own bound (from its start) gets this on top: the job's bound is the watch's (from the
#: job's start), and a job it stopped has this long to show the stop.
GUARDED_BACKSTOP_SECONDS = 3600.0
#: How a task whose wait lost sight of its job re-attaches (`trainops.backends.looks.JobOutOfSight`).
REATTACH = ("Airflow's next try of this task re-attaches to it (the job is named after the task instance, not the "
            "try): let the task retry, or clear it once the service answers again.")
#: The soonest a trigger fires after its task deferred (`JobTrigger._hold_early_event`; the reschedule mode's
#: `MIN_RESCHEDULE_SECONDS` guards against the same scheduler race).
EVENT_FLOOR_SECONDS = 30.0
#: What the trigger's on_kill may take: below Airflow's own bound on it (``[triggerer] on_kill_timeout``, 30 s).
ON_KILL_SECONDS = 25.0


def event_for(result: Any, kind: str = "training") -> dict[str, Any]:
    """The trigger event of a terminal `JobResult`: small JSON, never the service's response."""
    label = f"{result.backend} {KINDS.get(kind, kind)}"
    data = result.to_dict()
    if result.succeeded:
        status, message = "success", f"{label} {result.job_name} completed"
    else:
        status = "stopped" if result.status in (JobStatus.STOPPED, JobStatus.STOPPING) else "failed"
        message = f"{label} {result.job_name} ended {result.status.value}"
        if result.secondary_status and result.secondary_status != result.status.value:
            meaning = vocabulary_of(result.backend).explain_state(result.secondary_status)
            message += f" ({result.secondary_status}: {meaning})"
        message += f": {result.failure_reason or 'no reason given'}"
    return {
        "status": status,
        "message": message,
        "backend": result.backend,
        "job_name": result.job_name,
        "job_status": result.status.value,
        "secondary_status": result.secondary_status,
        # The walk, for the failure classifier: a spot interruption shows only in the transitions.
        "secondary_statuses": list(data.get("secondary_statuses") or ()),
        "failure_reason": result.failure_reason,
        "model_artifact": result.model_artifact,
        "billable_seconds": result.billable_seconds,
        "duration_seconds": result.duration_seconds,
        "metrics": dict(data.get("metrics") or {}),
        "guard": data.get("guard"),  # a trainops guard stopped the job (trainops.backends.guards): its class
    }


def result_of(event: dict[str, Any]) -> dict[str, Any] | None:
    """The attempt's result an event reports (what `event_for` or a wait that left the job running made of it), as
    the attempts engine reads it (`trainops.steps.attempts_engine`); None when the event reports no end of the job:
    the wait itself failed, or gave up on the trigger's own bound."""
    status = event.get("status")
    if status == "timeout" and event.get("guard"):  # the job's own bound passed and it runs on
        return {"backend": event.get("backend"), "job_name": event.get("job_name"),
                "status": event.get("job_status") or "InProgress", "guard": event["guard"]}
    if status not in ("success", "failed", "stopped"):
        return None
    succeeded = status == "success"
    return {"backend": event.get("backend"),  # whose failure rules classify it
            "job_name": event.get("job_name"),
            "status": event.get("job_status") or ("Completed" if succeeded else "Failed"),
            "failure_reason": event.get("failure_reason") or (None if succeeded else event.get("message")),
            "secondary_status": event.get("secondary_status"),
            "secondary_statuses": event.get("secondary_statuses") or (),
            "billable_seconds": event.get("billable_seconds"), "duration_seconds": event.get("duration_seconds"),
            "guard": event.get("guard")}  # a trainops guard stopped it: budget, stalled, wait bound


#: One client factory per (connection, region) for the whole triggerer: a boto3 session and its clients cost about
#: 20 MB, and one triggerer holds hundreds of triggers (bench/triggerer_scale.py: 300 triggers took 7 GB with one
#: each). boto3 clients are thread-safe; the factory builds each service's client once, under its own lock.
_FACTORIES: dict[tuple[str | None, str | None], Any] = {}
_FACTORIES_LOCK = threading.Lock()


def shared_client_factory(aws_conn_id: str | None, region: str | None) -> Any:
    with _FACTORIES_LOCK:
        key = (aws_conn_id, region)
        if key not in _FACTORIES:
            _FACTORIES[key] = lazy_aws_client_factory(aws_conn_id, region)
        return _FACTORIES[key]


def backend_for(handle: Any, aws_conn_id: str | None, choice: dict[str, Any] | None = None) -> Any:
    """The backend of a handle, bound to where the job lives (its ``location``) and to the task's settings and
    connections (`trainops.operators.backend_choice.BackendChoice`, JSON in the trigger's arguments); the AWS
    connection's clients are shared by every trigger of this process and built on first use (a backend that never
    calls AWS never reads the connection). Blocking: call it in a thread."""
    chosen = BackendChoice.from_dict(choice, aws_conn_id)
    return chosen.open(handle=handle, client_factory=shared_client_factory(aws_conn_id, handle.region))


def with_location(handle: Any, backend: Any) -> Any:
    """The handle with what the backend found of where the job lives that the handle did not say (a region the AWS
    connection resolved), so the event reports it."""
    located = {**backend.location(), **handle.location}
    if located == dict(handle.location):
        return handle
    return JobHandle(handle.backend, handle.job_name, created=handle.created, location=located)


class JobTrigger(BaseTrigger):
    """Waits for a job of any backend and kind to end, streaming its logs, without holding a worker slot.

    Args:
        handle: the job's `JobHandle` as ``to_dict()``.
        kind: a key of `KINDS`.
        aws_conn_id: the Airflow AWS connection the task used (AWS credentials, role, endpoint, region).
        backend_choice: how the task reaches its backend (`BackendChoice.to_dict`: its name as the task gives it,
            its settings, its connections); None: the handle's backend with the AWS connection only.
        poll_seconds: pause between two looks at the job.
        max_run, max_wait: the spec's limits; the job's own (``details``: ``max_run_seconds``,
            ``max_wait_seconds``) win when the backend reports them, as a re-attached job may have other limits.
        grace_seconds: added to the bound (provisioning, image download, model upload are not counted by max_run).
        started_at: wall-clock time the wait began (``time.time()``); kept across triggerer restarts.
        reattached: whether the task followed a job an earlier try created; echoed in the event, as is
            ``base_name`` (the task's job name before any retry suffix: the cost adds up its attempts), because
            ``dag.test()`` hands ``execute_complete`` the event alone.
        stream_logs: write the job's new log lines into the task log while waiting.
        log_lines_per_poll: at most this many lines a poll.
        guards: `trainops.backends.guards.JobGuards.to_dict()`: the job's budget, stall watchdog and wait bound
            from its own start, applied at each poll (None: only the bound above, counted from ``started_at``).
    """

    def __init__(
        self,
        handle: dict[str, Any],
        *,
        kind: str = "training",
        aws_conn_id: str | None = "aws_default",
        poll_seconds: float = 30.0,
        max_run: float | None = None,
        max_wait: float | None = None,
        grace_seconds: float = 3600.0,
        started_at: float | None = None,
        reattached: bool = False,
        base_name: str | None = None,
        stream_logs: bool = True,
        log_lines_per_poll: int = LOG_LINES_PER_POLL,
        guards: dict[str, Any] | None = None,
        backend_choice: dict[str, Any] | None = None,
    ):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
        self.handle = dict(handle)
        self.kind = kind
        self.aws_conn_id = aws_conn_id
        self.poll_seconds = poll_seconds
        self.max_run = max_run
        self.max_wait = max_wait
        self.grace_seconds = grace_seconds
        self.started_at = time.time() if started_at is None else started_at
        self.reattached = reattached
        self.base_name = base_name
        self.stream_logs = stream_logs
        self.log_lines_per_poll = log_lines_per_poll
        self.guards = dict(guards) if guards else None
        self.backend_choice = dict(backend_choice) if backend_choice else None

    @property
    def job_name(self) -> str:
        return str(self.handle["job_name"])

    @property
    def region_name(self) -> str | None:
        return self.handle.get("region")

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and every constructor argument (JSON values only)."""
        return CLASSPATH, {
            "handle": self.handle, "kind": self.kind, "aws_conn_id": self.aws_conn_id,
            "poll_seconds": self.poll_seconds, "max_run": self.max_run, "max_wait": self.max_wait,
            "grace_seconds": self.grace_seconds, "started_at": self.started_at, "reattached": self.reattached,
            "base_name": self.base_name, "stream_logs": self.stream_logs,
            "log_lines_per_poll": self.log_lines_per_poll, "guards": self.guards,
            "backend_choice": self.backend_choice,
        }

    def run_here(self, backend: Any, handle: Any, log: Any) -> None:
        """Run this trigger in a worker rather than a triggerer (`first_event`), on the task's opened backend and
        writing to the task's log (a worker without a triggerer waits with the same loop)."""
        self._opened = (backend, handle)
        self._log = log

    async def first_event(self) -> dict[str, Any]:
        """The one event of `run`, as a dict."""
        async for event in self.run():
            return dict(event.payload)
        raise RuntimeError(f"the trigger of {self.job_name} ended without an event")

    def _open(self) -> tuple[Any, Any]:
        opened = getattr(self, "_opened", None)
        if opened is not None:  # run in the worker (`run_here`)
            return opened  # type: ignore[no-any-return]

        handle = JobHandle.from_dict(self.handle)
        backend = backend_for(handle, self.aws_conn_id, self.backend_choice)
        resolved = with_location(handle, backend)
        if resolved is not handle:
            self.handle = resolved.to_dict()  # the event reports where the job is (a region the connection gave)
        return backend, resolved

    def _bound(self, result: Any) -> float:
        details = result.details or {}
        max_run = details.get("max_run_seconds") or self.max_run or DEFAULT_MAX_RUN_SECONDS
        max_wait = details.get("max_wait_seconds")
        return wait_bound_seconds(max_run, max_wait if max_wait is not None else self.max_wait, self.grace_seconds)

    def _common(self) -> dict[str, Any]:
        return {"backend": self.handle.get("backend"), "job_name": self.job_name, "region": self.region_name,
                "kind": self.kind, "handle": self.handle, "reattached": self.reattached, "base_name": self.base_name}

    async def run(self) -> AsyncIterator[Any]:
        """Poll until the job is terminal or the bound passes; yield one event, then return."""
        try:
            event = await self._wait()
        except Exception as error:  # noqa: BLE001 - any failure must reach execute_complete as an event
            event = {"status": "error", "message": f"waiting for {KINDS[self.kind]} {self.job_name} failed: "
                                                   f"{airflow_error(error)}"}
        yield TriggerEvent({**self._common(), **event})

    async def _wait(self) -> dict[str, Any]:
        self._warming = asyncio.ensure_future(asyncio.to_thread(self._warm_kill_lookup))
        backend, handle = await asyncio.to_thread(self._open)
        watch = await asyncio.to_thread(self._watch, backend, handle)
        cursor = await self._starting_cursor(backend, handle) if self.stream_logs else None
        last: tuple[Any, Any] | None = None
        # A describe that fails (a timeout, a 5xx, throttling past the clients' own retries, a refused connection)
        # is not the job's failure: the trigger looks again, and gives up only past both bounds of the policy.
        looks = Looks(f"{KINDS[self.kind]} {self.job_name}", reattach=REATTACH, poll_seconds=self.poll_seconds,
                      log=self.log.warning)
        while True:
            try:
                result = await asyncio.to_thread(backend.describe_job, handle, self.kind)
            except Exception as error:  # noqa: BLE001 - `failed` raises what is not a failed look
                await asyncio.sleep(looks.failed(error))
                continue
            progress = (result.status.value, result.secondary_status)
            if progress != last:
                last = progress
                self.log.info("%s %s: %s / %s", KINDS[self.kind], self.job_name, *progress)
            ended = result.status.outcome != "waiting"
            if self.stream_logs:
                cursor = await self._stream(backend, handle, cursor, LOG_LINES_AFTER_END if ended else None)
            if ended:
                await self._hold_early_event()
                return self._ended(result, watch)
            bound = self._bound(result)
            if watch is not None:  # the job's own bound is the watch's; this one, from the trigger's start, a backstop
                try:
                    tripped = await asyncio.to_thread(watch.look)
                except Exception as error:  # noqa: BLE001 - a look (or a stop) that failed is tried again
                    await asyncio.sleep(looks.failed(error))
                    continue
                if tripped is not None and not stops(tripped, JobGuards.from_dict(self.guards)):
                    return self._left_running(result, backend, handle, tripped)
                bound += GUARDED_BACKSTOP_SECONDS
            looks.succeeded()
            elapsed = time.time() - self.started_at
            if elapsed >= bound:
                hint = self._stop_hint(handle)
                return {"status": "timeout", "job_status": result.status.value,
                        "secondary_status": result.secondary_status,
                        "message": f"gave up waiting for {KINDS[self.kind]} {self.job_name} after {elapsed:.0f} s "
                                   f"(bound {bound:.0f} s = max_run + max_wait + grace); last status "
                                   f"{result.status.value} / {result.secondary_status}. The job was not stopped: "
                                   f"check it and stop it with {hint}."}
            # Sooner where the backend says a look is cheap or the job is ending: the task ends within seconds of it.
            pause = await asyncio.to_thread(backend.next_look_seconds, handle, result, self.poll_seconds)
            await asyncio.sleep(max(0.0, min(pause, bound - elapsed)))

    async def _hold_early_event(self) -> None:
        """In a triggerer, never fire sooner than `EVENT_FLOOR_SECONDS` after the task deferred (``started_at``):
        Airflow 3.3.2's scheduler fails a task whose deferring try's executor event ("success") arrives after the
        trigger's event has queued the task again (apache/airflow#71172, seen here: a job completed 4 s after its
        task deferred, the deferring workload ended 5 s after deferring, and the task was marked failed). Only a
        job that ends within that time of the deferral waits for it."""
        if getattr(self, "task_instance", None) is None:
            return  # no scheduler behind it (a trigger run by hand or by a test)
        hold = self.started_at + EVENT_FLOOR_SECONDS - time.time()
        if hold > 0:
            self.log.info("%s %s ended %.0f s after the task deferred: the event waits %.0f s more, so Airflow has "
                          "seen the deferring try end (apache/airflow#71172)", KINDS[self.kind], self.job_name,
                          EVENT_FLOOR_SECONDS - hold, hold)
            await asyncio.sleep(hold)

    def _warm_kill_lookup(self) -> None:
        """Read the task's state once now, so that a kill's look-up (`on_kill`) is answered at once: Airflow 3's
        triggerer builds its API client on the first such request (11 to 15 s on a loaded 2-core machine), which
        would otherwise eat most of the time Airflow gives ``on_kill``."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return

        try:
            kills.task_state(ti)
        except Exception as error:  # noqa: BLE001 - only a warm-up: the kill looks again and says what failed
            self.log.debug("could not read the task's state yet: %s", error)

    def _watch(self, backend: Any, handle: Any) -> Any:
        """The backend's watch of the job's guards (None without guards, or where the backend has none)."""
        if not self.guards:
            return None
        watch = backend.watch(handle, JobGuards.from_dict(self.guards), log=lambda line: self.log.info("%s", line))
        if watch is None:
            self.log.warning("the %s backend cannot guard a job it does not wait for itself: %s %s is bounded only "
                             "from this wait's start", handle.backend, KINDS[self.kind], self.job_name)
        return watch

    def _ended(self, result: Any, watch: Any) -> dict[str, Any]:
        """The event of an ended job; a guard of this watch that stopped it joins the result, unless the backend
        reported it already (SageMaker: the job's tags; local: the stop reason)."""
        return event_for(settle(result, watch.tripped) if watch is not None else result, self.kind)

    def _left_running(self, result: Any, backend: Any, handle: Any, tripped: Any) -> dict[str, Any]:
        """The timeout event of a wait bound that only ends the wait (``stop_at_wait_bound: false``)."""
        hint = self._stop_hint(handle)
        return {"status": "timeout", "job_status": result.status.value, "secondary_status": result.secondary_status,
                "guard": tripped.to_dict(),
                "message": f"gave up waiting for {KINDS[self.kind]} {self.job_name}: {tripped.message}. The job was "
                           f"not stopped: check it and stop it with {hint}."}

    async def _starting_cursor(self, backend: Any, handle: Any) -> dict[str, Any] | None:
        """Where this trigger starts in the job's log: after the last line the task log has (`log_marks`: written by
        this trigger's earlier triggerer, or by the try this one re-attached after); without a mark, at the log's
        end for a trigger resumed long after its wait began (the lines so far are in the earlier triggerer's part
        of the task log), else at the job's first line."""
        mark = await asyncio.to_thread(log_marks.load, handle, self.log)
        if mark is not None:
            self.log.info("continuing the log of %s after the last line the task log has (this trigger moved to "
                          "another triggerer, or this try re-attached to the job)", self.job_name)
            return mark
        if time.time() - self.started_at > max(RESUMED_AFTER_SECONDS, 3 * self.poll_seconds):
            return await self._skip_to_end(backend, handle)
        return None

    def _stop_hint(self, handle: Any) -> str:
        """How to stop the job by hand (`trainops.operators.kills.stop_hint`), on the task's backend."""
        return stop_hint(handle, self.kind, (self.backend_choice or {}).get("backend"))

    async def _skip_to_end(self, backend: Any, handle: Any) -> dict[str, Any] | None:
        cursor, skipped = None, 0
        try:
            for _ in range(MAX_SKIP_READS):
                lines, cursor = await asyncio.to_thread(backend.log_lines, handle, cursor, limit=10000)
                skipped += len(lines)
                if not lines:
                    break
        except Exception as error:  # noqa: BLE001 - logs are a convenience
            self.log.warning("could not read the logs of %s: %s", self.job_name, error)
        self.log.info("resumed by another triggerer: %d earlier log lines of %s are in the log already, not "
                      "repeated", skipped, self.job_name)
        return cursor

    async def _stream(self, backend: Any, handle: Any, cursor: dict[str, Any] | None,
                      drain: int | None) -> dict[str, Any] | None:
        """Write the job's new log lines into the task log (at most a poll's share, or ``drain`` after the end),
        recording where the task log stands after each batch (`trainops.operators.log_marks`)."""
        budget = drain or self.log_lines_per_poll
        try:
            while budget > 0:
                lines, cursor = await asyncio.to_thread(log_marks.read, backend, handle, cursor,
                                                        min(budget, self.log_lines_per_poll), self.log)
                for line in lines:
                    self.log.info("%s", line)
                if lines:  # where the task log stands now: a moved trigger or a later try continues from here
                    await asyncio.to_thread(log_marks.save, handle, cursor, self.log)
                budget -= len(lines)
                if not drain or not lines:
                    break
        except Exception as error:  # noqa: BLE001 - logs are a convenience; the job's status decides the outcome
            self.log.warning("could not read the logs of %s: %s", self.job_name, error)
        return cursor

    async def on_kill(self) -> None:
        """Airflow 3.3+ removed this trigger by a user's action: the task was marked failed or success, its run
        stopped, or it was cleared. Only a task that ended stops its job (`trainops.operators.kills`): a cleared one
        runs again and its next try re-attaches to this job, which must keep running.

        The look-up and the stop run in one thread and log their own outcome: Airflow 3.3.2's triggerer cancels
        the trigger again at each of its syncs (about a second apart) until the trigger is gone, on_kill included,
        so only a thread outlives that; this await only bounds how long the trigger waits for it
        (`ON_KILL_SECONDS`, below Airflow's own ``[triggerer] on_kill_timeout``)."""
        def stop() -> None:
            backend, handle = self._open()
            what = f"{KINDS[self.kind]} {self.job_name}"
            if ended_by_user(getattr(self, "task_instance", None), self.log, what, self._stop_hint(handle)):
                outcome = backend.stop_job(handle, self.kind, "the Airflow task was killed")
                self.log.info("stop requested because the task was ended: %s", outcome)

        await asyncio.wait_for(asyncio.to_thread(stop), timeout=ON_KILL_SECONDS)
