"""`StartedJobMixin`: how an operator whose step starts a job away from the worker (an evaluation's processing job, a
stage's FSx import task) waits for it, the way the training operator waits for its training job.

The operator starts the job through the seam (``backend.start_evaluation`` / ``backend.start_stage``) and records
its handle at once, so ``on_kill`` stops that job and only that one (``backend.stop_job(handle, kind)``), and only
when the task ended (a cleared try's successor re-attaches to it: `trainops.operators.kills`). Then:

- ``deferrable=True`` (default ``[operators] default_deferrable``): the one trigger
  (`trainops.operators.triggers.JobTrigger`, with the job's kind) looks at it through ``backend.describe_job`` and
  the task resumes in ``execute_complete`` with the handle the event carries (``dag.test()`` passes the event alone);
- otherwise the worker looks at it every ``check_interval`` seconds, bounded by the job's own limit plus a grace.

Either way the operator's ``_finish(backend, handle)`` makes the XCom value, so both paths push the same shape. A
backend that cannot start the job without waiting (its capabilities lack ``start_evaluation`` / ``start_stage``)
runs the step in the worker, saying so in the task log; so does a job of this machine that is not deferred (it
streams its lines into the task log and ends with the task). Nothing here imports a concrete backend.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from trainops.operators.common import translated_errors
from trainops.operators.compat import AirflowException, default_deferrable
from trainops.operators.kills import WORKER_LOOKUP_SECONDS, ended_by_user, stop_hint, task_instance_of

#: Extra time given to Airflow's deferral timeout beyond the trigger's bound: the trigger reports its own timeout.
DEFERRAL_MARGIN_SECONDS = 600


class StartedJobMixin:
    """Waiting for a started job of kind `job_kind` (a key of `trainops.backends.api.JOB_KINDS`) in the triggerer or
    the worker; subclasses set ``job_kind``, ``capability`` and ``aws_conn_id`` and define ``_finish``."""

    job_kind = ""
    capability = ""
    aws_conn_id: str | None
    log: Any
    _held: tuple[Any, Any] | None = None  # (backend, JobHandle) of the job this try started or resumed on
    _ti: Any = None  # the try's task instance: on_kill reads its state (ended, or superseded by a newer try)

    def _begin_try(self, context: Any) -> None:
        """A new try of the task: it holds no job yet (``on_kill`` stops only one it started), and keeps its task
        instance (``on_kill`` reads its state: ended, or superseded by a newer try) and its context."""
        self._held = None
        self._ti = task_instance_of(context)
        self._context = context

    def _waiting_settings(self, deferrable: bool | None, check_interval: float) -> None:
        self.deferrable = default_deferrable() if deferrable is None else bool(deferrable)
        self.check_interval = check_interval

    def _starts_jobs(self, backend: Any) -> bool:
        """Whether to start the job and follow it: when deferring, or when the backend does not run jobs in the
        caller's process (then the worker holds its handle for ``on_kill``), and the backend can start one without
        waiting. A job of a backend that runs jobs in the caller's process (``RUNS_HERE``), which the worker
        waits for, runs in the task's process instead (its lines stream into the task log, and it ends with the
        task). When deferral was asked and cannot be had, the task log says why."""
        from trainops.backends.job_kinds import Unsupported

        try:
            backend.job_kind(self.job_kind)  # the backend's started jobs of this kind (Unsupported: it has none)
        except Unsupported:
            pass
        else:
            return bool(self.deferrable or not backend.RUNS_HERE)
        if self.deferrable:
            self.log.info("deferrable: the %s backend runs this %s in the worker (it has no job to hand the "
                          "triggerer: %s)", backend.name, self.job_kind, self._why_not_deferred(backend))
        return False

    def _why_not_deferred(self, backend: Any) -> str:
        return f"it cannot {self.capability.replace('_', ' ')}"

    def _follow(self, backend: Any, handle: Any, *, max_run: float, grace: float) -> Any:
        """Hold the started job (for ``on_kill``), then defer on it or wait for it here; the XCom value at the end."""
        from trainops.backends.states import wait_bound_seconds

        self._held = (backend, handle)
        result = self._looks(handle).look(lambda: backend.describe_job(handle, self.job_kind))
        if result.status.outcome != "waiting":
            return self._finish_or_fail(backend, handle, result)
        max_run = float(result.details.get("max_run_seconds") or max_run)
        bound = wait_bound_seconds(max_run, None, grace)
        if self.deferrable:
            from trainops.operators.triggers import KINDS, JobTrigger

            trigger = JobTrigger(handle.to_dict(), kind=self.job_kind, aws_conn_id=self.aws_conn_id,
                                 backend_choice=self._choice().to_dict(),
                                 poll_seconds=self.check_interval, max_run=max_run, grace_seconds=grace,
                                 reattached=not handle.created, stream_logs=False)
            self.log.info("deferring: the triggerer waits for %s %s (%s; at most %.0f s)", KINDS[self.job_kind],
                          handle.job_name, "started" if handle.created else "re-attached", bound)
            self.defer(trigger=trigger, method_name="execute_complete",  # type: ignore[attr-defined]
                       timeout=timedelta(seconds=bound + DEFERRAL_MARGIN_SECONDS))
            raise AssertionError("unreachable: defer() raises TaskDeferred")
        return self._finish_or_fail(backend, handle, self._poll(backend, handle, bound))

    def _looks(self, handle: Any) -> Any:
        """The failed-look policy of this task's looks at its job (`trainops.backends.looks`): a look that fails is
        not the job's failure; it is looked at again, and given up on past both bounds, the job left running."""
        from trainops.backends.looks import Looks
        from trainops.operators.triggers import KINDS, REATTACH

        return Looks(f"{KINDS[self.job_kind]} {handle.job_name}", reattach=REATTACH,
                     poll_seconds=self.check_interval, log=self.log.warning)

    def _poll(self, backend: Any, handle: Any, bound: float) -> Any:
        started, last = time.monotonic(), None
        looks = self._looks(handle)
        while True:
            result = looks.look(lambda: backend.describe_job(handle, self.job_kind))
            if (result.status, result.secondary_status) != last:
                last = (result.status, result.secondary_status)
                self.log.info("%s %s: %s / %s", self.job_kind, handle.job_name, result.status.value,
                              result.secondary_status)
            if result.status.outcome != "waiting":
                return result
            if time.monotonic() - started > bound:
                raise AirflowException(f"gave up waiting for {self.job_kind} {handle.job_name} after {bound:.0f} s; "
                                       "it was not stopped")
            time.sleep(self.check_interval)

    def _finish_or_fail(self, backend: Any, handle: Any, result: Any) -> Any:
        if result.status.outcome == "failure":
            from trainops.operators.triggers import KINDS

            message = (f"{KINDS[self.job_kind]} {handle.job_name} ended {result.status.value}: "
                       f"{result.failure_reason or 'no reason given'}")
            self.log.error("%s", message)
            raise AirflowException(message)
        with translated_errors():
            return self._finish(backend, handle)

    def _finish(self, backend: Any, handle: Any) -> Any:
        raise NotImplementedError

    def _choice(self) -> Any:
        """How the task reaches its backend (`trainops.operators.backend_choice.BackendChoice`): its ``backend``,
        ``backend_options`` and ``backend_conn_id``, with its AWS connection."""
        from trainops.operators.backend_choice import BackendChoice  # not at DAG parse

        return BackendChoice.of_task(self)

    def _backend_of(self, handle: Any) -> Any:
        """The handle's backend, bound to where the job lives, to the task's settings and its connections."""
        return self._choice().open(handle=handle, **self._backend_context())

    def _backend_context(self) -> dict[str, Any]:
        return {}

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: the job's failure (with its reason) fails the task, else the XCom value."""
        from trainops.backends.api import JobHandle

        if not event or not event.get("handle"):
            raise AirflowException(f"the {self.job_kind} trigger ended without an event: the outcome is unknown")
        handle = JobHandle.from_dict(event["handle"])
        backend = self._backend_of(handle)
        self._held = (backend, handle)
        self._context = context
        self._ti = task_instance_of(context)
        if event.get("status") != "success":
            self.log.error("%s", event.get("message"))
            raise AirflowException(event.get("message") or f"{self.job_kind} {handle.job_name} did not succeed")
        self.log.info("%s", event.get("message"))
        with translated_errors():
            return self._finish(backend, handle)

    def on_kill(self) -> None:
        """Stop the job this task started (its recorded handle), through the seam, unless the try was killed
        because a newer one takes over (cleared, re-queued: `trainops.operators.kills`), which re-attaches to it."""
        held = getattr(self, "_held", None)
        if held is None:
            return
        from trainops.operators.triggers import KINDS

        backend, handle = held
        if ended_by_user(getattr(self, "_ti", None), self.log, f"{KINDS[self.job_kind]} {handle.job_name}",
                         stop_hint(handle, self.job_kind), timeout=WORKER_LOOKUP_SECONDS):
            self.log.info("task killed: %s", backend.stop_job(handle, self.job_kind, "the Airflow task was killed"))
