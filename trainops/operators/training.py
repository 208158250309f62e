"""`DistributedTrainingOperator`: one typed job spec, trained on any backend, never twice.

The operator translates between Airflow and the backend seam (`trainops.backends.api`): the job name comes from the
task instance (DAG id, task id, run id, map index; not the try number), so a retried or cleared task re-attaches to
the job its first try created; SpecError text (every problem with its field) becomes the task's failure; the XCom
value is small JSON with the same keys on every path (`XCOM_KEYS`, the cost of every attempt included).

How it waits (``wait_mode``, or ``deferrable`` for short):

- ``defer`` (``deferrable=True``; default when ``[operators] default_deferrable`` is set): the job is submitted
  (a local job to a detached supervisor, so it belongs to neither the worker nor the triggerer) and the one trigger
  (`trainops.operators.triggers.JobTrigger`) polls ``backend.describe`` and streams the job's log lines into the
  task log; no worker slot is held.
- ``reschedule``: for deployments without a triggerer (MWAA Serverless caps a task at 60 minutes): each poke
  submits or re-attaches (the same job: the name is the task instance's), looks once and gives its slot back until
  ``check_interval`` later; the log names the command that follows the job's logs.
- ``worker``: a job of a backend that runs jobs in the caller's process (``RUNS_HERE``: the local
  backend) runs in the task's process, its hosts' logs streaming live; any other is polled from the worker by the
  trigger's own loop, run there.

What follows an ended attempt is decided by the attempts engine (`trainops.steps.attempts_engine`), the one the
train step drives: the retry budgets per failure class (``retry_budgets``), the next attempt's name, the cost over
the attempts against ``max_cost_usd`` and what a guard's stop means. The operator carries it out the Airflow way:
the next attempt is deferred on (what the try used of its budgets rides in the deferral's kwargs), a failure fails
the task (`AirflowFailException` where no retry can help).

Every wait applies the job's guards (`trainops.backends.guards.JobGuards`: what is left of ``max_cost_usd`` after
the earlier attempts, the stall watchdog, the wait bound from the job's own start), whichever mode waits: the train
step's wait in the worker, the backend's watch (`Backend.watch`) at each look of the worker's poll, each poke, and
in the trigger, which gets them as JSON. A guard that trips stops the job, and the task's failure carries its class
(``budget``, ``infrastructure`` for a stall, ``timeout``). ``on_kill`` stops what the try started, through the seam
(``backend.stop(handle)``), unless a newer try takes over and re-attaches (`trainops.operators.kills`). Nothing here
imports or names a backend: the task's backend and its one mapping of settings reach it through
`trainops.operators.backend_choice.BackendChoice`, and what differs between backends is what each declares (its
capabilities, what it needs to be reached, its wait grace, its links).

Function-local imports (DAG-parse path): a DAG file imports this operator (bench/dag_parse.py measures the
parse); the train step, the attempts engine, the spec and the backend load when its task runs or its trigger fires.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from trainops.operators import log_marks
from trainops.operators.common import (
    check_backend,
    command_hint,
    failure_exception,
    task_job_name,
    task_logger,
    translated_errors,
    with_retry_defaults,
)
from trainops.operators.compat import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    BaseOperator,
    default_deferrable,
)
from trainops.operators.kills import WORKER_LOOKUP_SECONDS, ended_by_user, stop_hint, task_instance_of
from trainops.operators.lineage import LineageMixin, remember_lineage, training_datasets
from trainops.operators.links import TrainingJobLink, TrainingLogsLink, remember_links

IF_JOB_EXISTS = ("reattach", "fail", "new")
WAIT_MODES = ("defer", "reschedule", "worker")
#: Extra time given to Airflow's own deferral timeout beyond the trigger's bound: the trigger should always be the one
#: to report a timeout, because its message says what to do.
DEFERRAL_MARGIN_SECONDS = 600
#: The shortest pause between two reschedule pokes. Airflow's scheduler fails a rescheduled task whose previous poke's
#: executor "success" arrives after the task was queued again (apache/airflow#71172: seen here with a 2 s pause,
#: LocalExecutor, 3.3.2: the poke's workload took 5 s to finish), so a poke must outlast the workload's teardown.
MIN_RESCHEDULE_SECONDS = 30.0
#: Log lines written per look at the job in the worker and per reschedule poke (the trigger has its own bound), and
#: after the job ended.
LOG_LINES_PER_POLL = 500
LOG_LINES_AFTER_END = 5000
#: Attempts per failure class within one try of a train task (`trainops.backends.failures.RetryBudgets`).
DEFAULT_BUDGETS = {"infrastructure": 2, "user": 0}
XCOM_KEYS = ("backend", "job_name", "status", "secondary_status", "failure_reason", "model_artifact",
             "billable_seconds", "duration_seconds", "metrics", "reattached", "region", "cost")


def xcom_result(result: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The XCom value of a training task: a fixed set of small JSON keys, whatever the backend returned."""
    merged = {**result, **extra}
    value = {key: merged.get(key) for key in XCOM_KEYS}
    value["metrics"] = dict(value["metrics"] or {})
    return value


class DistributedTrainingOperator(LineageMixin, BaseOperator):
    """Train a job spec on any backend, re-attaching instead of duplicating on retry.

    Args:
        spec: the job spec: a mapping (templated, key by key), a YAML/JSON file path, or a ``JobSpec``.
        backend: a registered backend or a named one (default: the registry's default, the local backend's
            simulated hosts on the worker).
        backend_options: the backend's one mapping of settings (templated; a mapping or its JSON text): how it is
            reached and its jobs' options, checked by the backend, which refuses one it does not take.
        backend_conn_id: an Airflow connection whose extra is ``{"backend": NAME, "options": {...}}``: the backend
            when ``backend`` is not given, and settings under ``backend_options``.
        job_name: the base of the job's name (default: the spec's name, else the task id). The name is
            ``<base>-<hash of dag id, task id, run id, map index>``, within 63 characters.
        if_job_exists: ``reattach`` (default: follow the job of that name; a failed one is retried under a suffixed
            name), ``fail``, or ``new`` (a suffixed copy).
        wait_for_completion: wait for the job to end (default) or return after submitting it.
        deferrable: wait in the triggerer (``wait_mode="defer"``); default ``[operators] default_deferrable``.
        wait_mode: ``defer``, ``reschedule`` (no triggerer: short pokes, the slot given back between them) or
            ``worker``; overrides ``deferrable`` when given.
        check_interval: seconds between two looks at the job.
        aws_conn_id: the Airflow AWS connection: AWS clients for a backend that calls AWS, and the region of a
            backend that needs one (`Backend.NEEDS`) when neither the spec nor the settings give it.
        launcher, preflight, processes_per_host, channel_overrides: shorthands for the settings of those names in
            ``backend_options`` (a backend refuses one it does not take).
        workdir, region_name: the deployment's context, handed to any backend (read by those that use them: the
            local state directory, default ``$TRAINOPS_HOME``; the region when the spec names none).
        stream_logs: put the hosts' logs into the task log (SageMaker: from CloudWatch), while deferred too.
        retry_budgets: attempts per failure class within one try of the task (`trainops.backends.failures`;
            default ``{"infrastructure": 2, "user": 0}``): an infrastructure failure starts ``<name>-2`` from the
            checkpoint, in the worker or from the deferral. A user error, a time limit or a stop fails the task with
            `AirflowFailException`, so Airflow's own ``retries`` are not spent on it.

    Returns (XCom): ``{backend, job_name, status, secondary_status, failure_reason, model_artifact,
    billable_seconds, duration_seconds, metrics, reattached, region, cost}``.
    """

    template_fields: Sequence[str] = (
        "spec", "job_name", "backend", "aws_conn_id", "region_name", "workdir", "channel_overrides",
        "processes_per_host", "if_job_exists", "retry_budgets", "backend_options", "backend_conn_id",
    )
    template_fields_renderers = {"spec": "json", "channel_overrides": "json", "backend_options": "json"}
    operator_extra_links = (TrainingJobLink(), TrainingLogsLink())
    ui_color = "#d5e8f7"

    def __init__(
        self,
        *,
        spec: Any,
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        backend_conn_id: str | None = None,
        job_name: str | None = None,
        if_job_exists: str = "reattach",
        wait_for_completion: bool = True,
        deferrable: bool | None = None,
        wait_mode: str | None = None,
        check_interval: float = 30.0,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        launcher: str | None = None,
        preflight: bool | None = None,
        workdir: str | None = None,
        processes_per_host: int | None = None,
        channel_overrides: dict[str, str] | None = None,
        stream_logs: bool = True,
        retry_budgets: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if wait_mode is not None and wait_mode not in WAIT_MODES:
            raise AirflowFailException(f"invalid input: 1 problem\n  - wait_mode: {wait_mode!r} is not one of "
                                       f"{', '.join(WAIT_MODES)}")
        if deferrable is None:
            deferrable = default_deferrable() if wait_mode is None else wait_mode == "defer"
        self.wait_mode = wait_mode or ("defer" if deferrable else "worker")
        super().__init__(**with_retry_defaults(kwargs))
        self.deferrable = self.wait_mode == "defer"
        # Airflow's scheduler waits for the reschedule date only for tasks that say they reschedule.
        self.reschedule = self.wait_mode == "reschedule"
        self.retry_budgets = retry_budgets
        self.spec = spec
        self.backend = backend
        self.backend_options = backend_options
        self.backend_conn_id = backend_conn_id
        self.job_name = job_name
        self.if_job_exists = if_job_exists
        self.wait_for_completion = wait_for_completion
        self.check_interval = check_interval
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.launcher = launcher
        self.preflight = preflight
        self.workdir = workdir
        self.processes_per_host = processes_per_host
        self.channel_overrides = channel_overrides
        self.stream_logs = stream_logs

    # --- execute ----------------------------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.steps.train import check_choice

        self._held: tuple[Any, Any] | None = None  # (backend, JobHandle) of the job this try placed: on_kill stops it
        self._ti = task_instance_of(context)  # on_kill reads its state: ended, or superseded by a newer try
        self._in_process = False  # a local job in this task's process ends with it, whatever the state
        self._chosen: Any = None  # the task's BackendChoice, made on first use (`_choice`)
        self._context = context  # a wait in the worker resumes as after a deferral, with it
        with translated_errors():
            check_backend(self.backend)
            check_choice(self.if_job_exists, IF_JOB_EXISTS, "if_job_exists")
            spec = self._spec()  # every problem of the spec at once, with its field
            base = task_job_name(context, self.job_name or spec.name)
            backend = self._backend_for(spec)
            if backend.RUNS_HERE and self.wait_mode == "worker":
                return self._train_in_worker(backend, spec, base)
            return self._placed(backend, spec, base)

    def _looks(self, job_name: str) -> Any:
        """The failed-look policy of this task's looks at its job (`trainops.backends.looks`): a look that fails
        is looked at again, and the task gives up past both bounds, saying the job may still run."""
        from trainops.backends.looks import Looks
        from trainops.operators.triggers import REATTACH

        return Looks(f"training job {job_name}", reattach=REATTACH, poll_seconds=self.check_interval,
                     log=self.log.warning)

    def _placed(self, backend: Any, spec: Any, base: str, name: str | None = None,
                used: dict[str, int] | None = None) -> dict[str, Any]:
        """`_attempt`, again after a failed look while the job is placed or first looked at (a timeout, a 5xx,
        throttling, a refused connection: also each reschedule poke's): the job's name is the task instance's (or
        the engine's next attempt's), so whatever the failed pass did or did not create is found again, never
        created twice."""
        return self._looks(base).look(  # type: ignore[no-any-return]
            lambda: self._attempt(backend, spec, base, name, used))

    def _spec(self) -> Any:
        import os

        from trainops.spec.secrets import restore_masked
        from trainops.steps.train import load_spec

        # A spec from XCom (the prepare task's) carries secrets masked: the worker's environment holds them. It is
        # checked by the spec rules of the task's backend (slurm's, not the SageMaker request's, on slurm).
        return load_spec(restore_masked(self.spec, os.environ), backend=self._choice().name())

    def _choice(self) -> Any:
        """The task's backend, its one mapping of settings (the shorthand arguments laid in) and its connections;
        one per execute (`execute` forgets it), so its connection is read once though the spec and the backend both
        ask for it."""
        from trainops.operators.backend_choice import BackendChoice

        if getattr(self, "_chosen", None) is None:
            self._chosen = BackendChoice.of_task(self, launcher=self.launcher, preflight=self.preflight,
                                                 processes_per_host=self.processes_per_host,
                                                 channel_overrides=self.channel_overrides or None)
        return self._chosen

    def _open(self, region: str | None, handle: Any = None) -> Any:
        """The task's backend (for a job found again: bound to where its handle says it lives)."""
        return self._choice().open(region=region, handle=handle)

    def _backend_for(self, spec: Any) -> Any:
        """The task's backend, in the spec's region when it names one (else the settings', else, for a backend that
        needs one, the AWS connection's)."""
        return self._open(spec.region)

    def _attempt(self, backend: Any, spec: Any, base: str, name: str | None = None,
                 used: dict[str, int] | None = None) -> dict[str, Any]:
        """Place an attempt and follow it the task's way. The try's first attempt is named by the re-attach policy
        (``if_job_exists`` on the task's name: a running or completed job is followed, a failed one is followed by
        ``<name>-N``); a later one (``name``) is the attempts engine's, placed with ``reattach`` so a pass repeated
        after a failed look follows it instead of starting it twice."""
        from trainops.backends.vocabulary import vocabulary_of
        from trainops.steps.attempts import guards_for
        from trainops.steps.forecast import check_budget

        # The settings were bound when the backend was opened; what the task adds is its own: the job must not depend
        # on this worker, and every try of this task resumes its own checkpoints (where the options type keeps
        # checkpoints by key).
        options = {"detached": True, **vocabulary_of(backend).takes({"checkpoint_key": base})}
        planned = check_budget(spec, backend=backend)  # budget: refuse refuses before anything is created
        engine = self._engine(spec, base, used, backend, planned)
        if name is None and self._poked_before():
            decided = self._ended_since_last_poke(backend, spec, base, planned)
            if decided is not None:
                return decided
        refused = engine.opening() if name is None else None
        if refused is not None:  # the earlier attempts spent the run's money
            raise failure_exception(f"{refused.evidence}: {refused.refused}", refused.failure())
        handle = backend.submit(spec, name or base, if_exists="reattach" if name else self.if_job_exists,
                                log=task_logger(self), **options)
        self._held = (backend, handle)
        remember_links(self, backend, "training", handle.job_name, handle.location)
        result = backend.describe(handle)
        if result.status.outcome == "waiting" and not self.wait_for_completion:
            return self._finish(backend, spec, base, result)
        if result.status.outcome != "waiting":
            if not handle.created:
                # A re-attached job that ended since the earlier try's last look: the lines after the last one that
                # try's log has (its tail included), then its result at once, the same XCom as after a wait.
                self._write_logs(backend, handle, log_marks.load(handle, self.log), limit=LOG_LINES_AFTER_END,
                                 resume=True)
            return self._ended(backend, spec, base, result, engine)
        guards = guards_for(spec, engine.spent(), backend=backend, planned=planned)
        if self.wait_mode == "defer":
            self._defer(spec, handle, base, guards)
        if self.wait_mode == "reschedule":
            return self._poke(backend, spec, base, handle, result, guards)
        return self._wait_in_worker(backend, spec, base, handle, guards)

    def _poked_before(self) -> bool:
        """Whether this is a later poke of a reschedule-mode try (Airflow 3's ``task_reschedule_count``; Airflow 2.11
        does not say: every poke is then placed by the re-attach policy alone)."""
        context = getattr(self, "_context", None) or {}
        return self.wait_mode == "reschedule" and int(context.get("task_reschedule_count") or 0) > 0

    def _ended_since_last_poke(self, backend: Any, spec: Any, base: str, planned: Any) -> dict[str, Any] | None:
        """A later poke: when the attempt an earlier poke placed has failed since, the attempts engine decides what
        follows it, as after a deferral (None: it runs or completed, and is followed). A poke keeps no state (Airflow
        clears its XComs), so the attempts before it count as retried on their budgets (`charge_known`)."""
        from trainops.steps.attempts import ended_attempts, engine_for

        known, follows = ended_attempts(backend, base)
        if follows or not known:
            return None
        engine = engine_for(backend, spec, base, self._budgets(), known=known[:-1], planned=planned)
        engine.charge_known()
        last = known[-1]
        message = (f"training job {last.get('job_name')} ended {last.get('status')}: "
                   f"{last.get('failure_reason') or 'no reason given'}")
        return self._after(spec, base, engine, engine.ended(last), last, message, backend)

    def _engine(self, spec: Any, base: str, used: dict[str, int] | None = None, backend: Any = None,
                planned: Any = None) -> Any:
        """The attempts engine of this try: the task's budgets and what this try ``used`` of them, carried through
        the deferrals (`trainops.steps.attempts.resumed_engine`)."""
        from trainops.steps.attempts import resumed_engine

        return resumed_engine(spec, base, self._budgets(), used, planned=planned,
                              backend=backend if backend is not None else self._choice().name(),
                              opened=lambda: backend if backend is not None else self._backend_for(spec))

    def _ended(self, backend: Any, spec: Any, base: str, result: Any, engine: Any) -> dict[str, Any]:
        """An attempt found ended as it was placed: the XCom, the task's failure, or the next attempt, as the
        attempts engine decides (`_after`)."""
        data = result.to_dict()
        held = getattr(self, "_held", None)
        if held is not None:
            log_marks.forget(held[1])  # the task has the job's outcome: no later writer continues its log
        message = (f"training job {result.job_name} ended {result.status.value}: "
                   f"{result.failure_reason or 'no reason given'}")
        decided = self._after(spec, base, engine, engine.ended(data), data, message, backend)
        return decided if decided is not None else self._finish(backend, spec, base, result)

    def _after(self, spec: Any, base: str, engine: Any, decision: Any, result: dict[str, Any], message: str,
               backend: Any = None) -> dict[str, Any] | None:
        """Carry out the engine's decision on an ended attempt: None when the run is done (the caller makes the
        XCom); a failure fails the task with its class (`failure_exception`: without Airflow's retries where a retry
        cannot help); a retry places the next attempt and follows it (deferred, poked or in the worker, after the
        backoff only there: between two deferrals the task holds a worker)."""
        from trainops.steps.attempts_engine import Done, Fail

        if isinstance(decision, Done):
            return None
        if isinstance(decision, Fail):
            message += f"; no retry: {decision.refused}" if decision.refused else ""
            self.log.error("%s", message)
            raise failure_exception(message, {**result, **decision.failure()})
        self.log.warning("%s [%s]; starting attempt %d (%s) on the %s budget (%d of %d)", message, decision.reason,
                         decision.number, decision.job_name, decision.failure_class, decision.used, decision.budget)
        self._budget_used = engine.used
        self._held = None
        if self.wait_mode == "worker":
            time.sleep(decision.delay)
        with translated_errors():
            return self._placed(backend if backend is not None else self._backend_for(spec), spec, base,
                                decision.job_name, engine.used)

    def _train_in_worker(self, backend: Any, spec: Any, base: str) -> dict[str, Any]:
        """A job of a backend that runs jobs in the caller's process, in this task's (its hosts' logs stream live),
        through the train step's attempts: the task's own backend and settings."""
        from trainops.backends.vocabulary import vocabulary_of
        from trainops.steps.train import train

        log = task_logger(self) if self.stream_logs else (lambda line: None)
        self._in_process = True
        result = self._run_step(train, spec, backend=backend, job_name=base, if_exists=self.if_job_exists, log=log,
                                on_handle=self._hold, retries=self._budgets(),
                                **vocabulary_of(backend).takes({"checkpoint_key": base}))
        self._remember_lineage(spec, result.get("model_artifact"), backend)
        return xcom_result(result, metrics={}, cost=self._cost(base, backend, result, spec))

    def _hold(self, backend: Any, handle: Any) -> None:
        self._held = (backend, handle)

    def _run_step(self, step: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call a step; a job that ran and failed carries its result, whose reason becomes the task's message."""
        from trainops.errors import JobFailed

        try:
            return step(*args, **kwargs)
        except JobFailed as error:
            result = getattr(error, "result", None)
            if result:
                self.log.error("training job %s ended %s: %s", result.get("job_name"), result.get("status"),
                               result.get("failure_reason"))
            raise

    # --- waiting ------------------------------------------------------------------------------------------------
    def _bound(self, spec: Any, result: Any = None, grace: float = 3600.0) -> float:
        from trainops.backends.states import wait_bound_seconds

        details = getattr(result, "details", None) or {}
        max_run = details.get("max_run_seconds") or spec.max_run or 86400
        max_wait = details.get("max_wait_seconds") or spec.max_wait
        return wait_bound_seconds(max_run, max_wait, grace)

    def _trigger(self, spec: Any, handle: Any, base: str, guards: Any = None) -> tuple[Any, float]:
        """The trigger that waits for the job (in the triggerer, or run in the worker), and its bound in seconds."""
        from trainops.backends import backend_class
        from trainops.operators.triggers import GUARDED_BACKSTOP_SECONDS, JobTrigger

        grace = backend_class(handle.backend).WAIT_GRACE_SECONDS  # what the backend spends outside the job's limits
        if guards is not None:  # the job's own bound (the guards', from its start) must come first
            grace = max(grace, float(guards.grace_seconds))
        trigger = JobTrigger(handle.to_dict(), kind="training", aws_conn_id=self.aws_conn_id,
                             backend_choice=self._choice().to_dict(),
                             poll_seconds=self.check_interval, max_run=spec.max_run, max_wait=spec.max_wait,
                             grace_seconds=grace, reattached=not handle.created, base_name=base,
                             stream_logs=self.stream_logs, guards=guards.to_dict() if guards is not None else None)
        bound = self._bound(spec, grace=trigger.grace_seconds)
        return trigger, bound + (GUARDED_BACKSTOP_SECONDS if guards is not None else 0.0)

    def _resumption(self, handle: Any) -> dict[str, Any]:
        """What `execute_complete` is handed besides the event: whether the job was re-attached to, and what this
        try used of its retry budgets (the attempts engine's state between two deferrals)."""
        return {"reattached": not handle.created, "budget_used": getattr(self, "_budget_used", {})}

    def _defer(self, spec: Any, handle: Any, base: str, guards: Any = None) -> None:
        trigger, bound = self._trigger(spec, handle, base, guards)
        self.log.info("deferring: the triggerer waits for %s training job %s (%s; at most %.0f s) and streams its "
                      "logs here; by hand: %s", handle.backend, handle.job_name,
                      "submitted" if handle.created else "re-attached", bound, self._logs_hint(handle))
        self.defer(trigger=trigger, method_name="execute_complete", kwargs=self._resumption(handle),
                   timeout=timedelta(seconds=bound + DEFERRAL_MARGIN_SECONDS))
        raise AssertionError("unreachable: defer() raises TaskDeferred")

    def _logs_hint(self, handle: Any) -> str:
        """The command that follows the job's logs from this machine (`command_hint`)."""
        return command_hint("logs", handle, self.backend, "--follow")

    def _write_logs(self, backend: Any, handle: Any, cursor: Any, limit: int = LOG_LINES_PER_POLL,
                    resume: bool = False) -> Any:
        """Write the job's lines after ``cursor`` into the task log and record where it stands (`log_marks`);
        ``resume``: ``cursor`` is an earlier writer's mark (None: it had none, so nothing is known to be missing)."""
        if not self.stream_logs or (resume and cursor is None):
            return cursor
        try:
            lines, cursor = log_marks.read(backend, handle, cursor, limit, self.log)
        except Exception as error:  # noqa: BLE001 - logs are a convenience; the job's status decides
            self.log.warning("could not read the logs of %s: %s", handle.job_name, error)
            return cursor
        for line in lines:
            self.log.info("%s", line)
        if lines:
            log_marks.save(handle, cursor, self.log)
        return cursor

    def _wait_in_worker(self, backend: Any, spec: Any, base: str, handle: Any, guards: Any = None
                        ) -> dict[str, Any]:
        """Wait for the job in the worker as the triggerer would: the one poll loop (`JobTrigger`: the guards at each
        look, failed looks, the log lines into the task log, the bound) run here on the task's backend, then resume
        as after a deferral (`execute_complete`: the attempts engine decides)."""
        import asyncio

        trigger, _ = self._trigger(spec, handle, base, guards)
        trigger.run_here(backend, handle, self.log)
        event = asyncio.run(trigger.first_event())
        return self.execute_complete(getattr(self, "_context", None) or {}, event, **self._resumption(handle))

    def _poke(self, backend: Any, spec: Any, base: str, handle: Any, result: Any, guards: Any = None
              ) -> dict[str, Any]:
        """No triggerer: apply the guards once (a look of the backend's watch: the budget and the bound from the
        job's start; a stall needs a watch that lasts, which a poke is not), write what is new in the logs, then
        give the worker slot back until the next look."""
        from datetime import datetime, timezone

        watch = backend.watch(handle, guards, log=task_logger(self)) if guards is not None else None
        if watch is not None:
            watch.look()  # a guard that trips stops the job: the next poke finds it Stopped, with the guard's reason
        # A poke keeps nothing for the next one (XComs are cleared at each try): the logs are the command's.
        pause = max(self.check_interval, MIN_RESCHEDULE_SECONDS)
        self.log.info("training job %s is %s / %s; looking again in %.0f s (reschedule mode%s); its logs: %s",
                      handle.job_name, result.status.value, result.secondary_status, pause,
                      f", at least {MIN_RESCHEDULE_SECONDS:.0f} s" if pause > self.check_interval else "",
                      self._logs_hint(handle))
        raise AirflowRescheduleException(datetime.now(timezone.utc) + timedelta(seconds=pause))

    def _finish(self, backend: Any, spec: Any, base: str, result: Any) -> dict[str, Any]:
        """The XCom of a job that ended and is done with (or, not waited for, runs on)."""
        data = result.to_dict()
        held = getattr(self, "_held", None)
        region = held[1].region if held else backend.location().get("region")
        self._remember_lineage(spec, result.model_artifact, backend)
        cost = self._cost(base, backend, data, spec) if result.status.outcome != "waiting" else None
        return xcom_result(data, region=region, metrics=data.get("metrics") or {}, cost=cost)

    # --- after deferral -----------------------------------------------------------------------------------------
    def execute_complete(self, context: Any, event: dict[str, Any] | None = None,
                         reattached: bool | None = None, budget_used: dict[str, int] | None = None
                         ) -> dict[str, Any]:
        """Resume after the trigger: raise on anything but success (with the reason), else return the XCom.

        The event carries everything needed (its handle, the task's base job name): ``dag.test()`` and a cleared
        task that re-attaches hand this method an empty context, and the deferral's own keyword arguments are then
        None.
        """
        from trainops.operators.triggers import result_of
        from trainops.steps.attempts_engine import Done, Retry

        if not event:
            raise AirflowException("the training trigger ended without an event: the job's outcome is unknown")
        self._ti = task_instance_of(context)
        self._in_process = False
        if event.get("handle"):  # the trigger wrote the job's log to its end: no later writer continues it
            from trainops.backends.api import JobHandle

            log_marks.forget(JobHandle.from_dict(event["handle"]))
        backend = self._event_backend(event)
        backend_name = event.get("backend") or (backend.name if backend is not None else None)
        if event.get("job_name"):
            remember_links(self, backend, "training", event["job_name"], (event.get("handle") or {}).get("location")
                           or ({"region": event["region"]} if event.get("region") else {}))
        message = event.get("message") or f"training job {event.get('job_name')} did not succeed"
        result = result_of(event)
        if result is None:  # the wait itself failed: the job's outcome is unknown
            raise AirflowException(message)
        spec = self._spec_or_none()
        base = self._base_of(context, event, spec)
        with translated_errors():  # the attempts engine decides, from the event, what follows the attempt
            engine = self._engine(spec, base, dict(budget_used or {}))
            decision = engine.ended(result)
            if spec is None and isinstance(decision, Retry):
                spec = self._spec()  # a retry is placed from the spec: its problems fail the task, each named
        if not isinstance(decision, Done) or event.get("status") != "success":
            decided = self._after(spec, base, engine, decision, result, message)
            if decided is None:  # done, yet not a success: a job that runs on, which an event never reports
                raise AirflowException(message)
            return decided
        self.log.info("%s", message)
        if reattached is None:
            reattached = event.get("reattached")  # the trigger echoes it (dag.test() passes the event alone)
        cost = None
        if spec is not None:
            self._remember_lineage(spec, event.get("model_artifact"), backend)
            cost = self._cost(base, backend, {**event, "status": event.get("job_status")}, spec)
        return xcom_result({**event, "status": event.get("job_status")}, backend=backend_name, reattached=reattached,
                           cost=cost)

    def _base_of(self, context: Any, event: dict[str, Any], spec: Any) -> str:
        """The task's job name before any attempt's suffix: the event's (the trigger echoes it), else the task
        instance's, else the event's job."""
        return str(event.get("base_name") or (task_job_name(context, self.job_name or spec.name)
                                              if spec is not None and context else event.get("job_name")))

    def _event_backend(self, event: dict[str, Any]) -> Any:
        """The backend of the job an event reports, bound to where its handle says the job lives (None when it
        cannot be opened here: links and cost are then left out, never the outcome)."""
        from trainops.backends.api import JobHandle

        try:
            data = event.get("handle") or {"backend": event.get("backend"), "job_name": event.get("job_name"),
                                           "region": event.get("region")}
            handle = JobHandle.from_dict(data) if data.get("backend") and data.get("job_name") else None
            return self._open(event.get("region"), handle)
        except Exception as error:  # noqa: BLE001 - the job's outcome is known; its backend is only for reports
            self.log.warning("could not open the job's backend for its links and cost: %s", error)
            return None

    def _spec_or_none(self) -> Any:
        try:
            return self._spec()
        except Exception as error:  # noqa: BLE001 - lineage and cost must never fail a finished job
            self.log.warning("no lineage or cost for this task: %s", error)
            return None

    def _remember_lineage(self, spec: Any, model_artifact: str | None, backend: Any = None) -> None:
        try:
            # Where the backend's job reads each channel when its settings say (local paths), else the spec's.
            sources = backend.channel_sources() if backend is not None else None
            datasets = training_datasets(spec, sources or None, model_artifact)
            remember_lineage(self, datasets["inputs"], datasets["outputs"])
        except Exception as error:  # noqa: BLE001 - lineage must never fail a finished job
            self.log.warning("no lineage for this task: %s", error)

    def _cost(self, base: str, backend: Any, record: dict[str, Any], spec: Any) -> dict[str, Any] | None:
        """What the training of this task cost over every attempt of its job name (the XCom's ``cost``, shaped as
        the train step's: `trainops.steps.attempts.run_cost`)."""
        from trainops.steps.attempts import attempts_report, cost_notes

        try:
            chosen = backend if backend is not None else self._backend_for(spec)
            record = {**record, "instance_type": spec.instance_type, "instance_count": spec.instance_count}
            # The step result's shape: the sums, each attempt's, spent, the forecast and the budget with what is left.
            return attempts_report(chosen, base, record, cost_notes(spec, backend=chosen))["cost"]
        except Exception as error:  # noqa: BLE001 - the cost is a report; the job's outcome is already known
            self.log.warning("could not add up the cost of the attempts: %s", error)
            return None

    def _budgets(self) -> Any:
        from trainops.backends.failures import RetryBudgets

        return RetryBudgets.parse(self.retry_budgets if self.retry_budgets is not None else DEFAULT_BUDGETS,
                                  "retry_budgets")

    # --- kill -------------------------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Stop what this task started, whatever the backend: ``backend.stop(handle)`` (a local job this worker
        runs stops every host; a detached or SageMaker job is asked to stop). A try killed because a newer one takes
        over (cleared while running, re-queued: `trainops.operators.kills`) leaves a job that outlives it running:
        the next try re-attaches to it."""
        held = getattr(self, "_held", None)
        if held is None:
            return

        backend, handle = held
        if getattr(self, "_in_process", False) or ended_by_user(
                getattr(self, "_ti", None), self.log, f"training job {handle.job_name}",
                stop_hint(handle, "training", self.backend), timeout=WORKER_LOOKUP_SECONDS):
            self.log.info("task killed: %s", backend.stop(handle, "the Airflow task was killed"))
