"""Whether killing a try means "end the task" (stop its job) or "a newer try takes over" (leave the job running).

Airflow says the same thing to a deferred task's trigger (`BaseTrigger.on_kill`, 3.3+: the trigger was removed by a
user's action) whether a user marked the task failed or success, stopped its DAG run, or cleared it to run again; a
try running in a worker gets SIGTERM (the operator's ``on_kill``) both when it is marked failed and when it is
cleared. But a cleared, retried or re-queued train, evaluate or stage task re-attaches to the job its earlier try
started (jobs are named from the task instance, not the try): stopping that job on a clear kills the job the next
try follows, and on SageMaker a paid multi-node job. So a kill first reads the task instance's state as Airflow
records it now (the user's action is written before the trigger is removed or the worker signalled):

- ended (`ENDED_STATES`: success, failed, skipped, upstream_failed, removed, or the task instance gone with its
  run): the user ended the task or its run, so the job is stopped;
- any other state (none yet, scheduled, queued, running, deferred, up_for_retry, up_for_reschedule, restarting): a
  newer try runs or will run and re-attaches, so the job is left running.

A state that cannot be read leaves the job running and logs the command that stops it: a kill that stops nothing
costs a command, a clear that stops a job costs the job. Airflow 3 answers through the Task SDK's supervisor
channel (``RuntimeTaskInstance.get_task_states``, which the triggerer and the task supervisor serve); Airflow 2.11
reads its database, as its components may. Imported by triggers and operators when a kill happens, never by a DAG
file at parse time (only this module's names).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from trainops.operators.common import command_hint
from trainops.operators.compat import AIRFLOW_2

#: Task-instance states in which nothing will run the task again: a kill in them is the user ending the task.
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: How long a worker's kill waits for the state (its supervisor escalates to SIGKILL 5 s after SIGTERM).
WORKER_LOOKUP_SECONDS = 3.0


def task_instance_of(context: Any) -> Any:
    """The task instance of an Airflow context (None for an empty one: ``dag.test()``'s resume, a cleared task's)."""
    try:
        return context["ti"] if context else None
    except (KeyError, TypeError):
        return None


def _state_name(state: Any) -> str | None:
    value = getattr(state, "value", state)
    return None if value is None else str(value)


def task_state(ti: Any) -> str | None:
    """The state Airflow records now for the task instance ``ti`` (its dag_id, run_id, task_id, map_index):
    ``"removed"`` when it no longer exists (its run was deleted); raises when the state cannot be read."""
    map_index = getattr(ti, "map_index", -1)
    map_index = -1 if map_index is None else int(map_index)
    if AIRFLOW_2:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.execute(select(TaskInstance.state).where(
                TaskInstance.dag_id == ti.dag_id, TaskInstance.run_id == ti.run_id,
                TaskInstance.task_id == ti.task_id, TaskInstance.map_index == map_index)).all()
        return _state_name(rows[0][0]) if rows else "removed"
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    states = RuntimeTaskInstance.get_task_states(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id],
                                                 map_index=map_index)
    key = ti.task_id if map_index < 0 else f"{ti.task_id}_{map_index}"
    run = states.get(ti.run_id) or {}
    return _state_name(run[key]) if key in run else "removed"


def stop_hint(handle: Any, kind: str, backend: str | None = None) -> str:
    """How a user stops a job left running: for a training job, the command from this machine (`trainops.operators.
    common.command_hint`: on ``backend``, the task's as it names it, else the handle's, and where the job lives: an
    Airflow worker's work directory is ``$AIRFLOW_HOME/trainops``, not the command line's default); ``trainops stop``
    stops training jobs only, so for another kind the backend's own tools."""
    if kind != "training":
        return f"the {handle.backend} backend's own tools"

    return f"`{command_hint('stop', handle, backend)}`"


def describe(ti: Any) -> str:
    try_number = getattr(ti, "try_number", None)
    return f"{ti.dag_id}.{ti.task_id} of {ti.run_id}" + (f" (try {try_number})" if try_number else "")


def ended_by_user(ti: Any, log: Any, what: str, stop_hint: str, timeout: float | None = None) -> bool:
    """Whether the kill of ``ti``'s try ends the task (stop ``what``, the job) rather than hand it to a newer try.

    ``ti`` None (a trigger or operator used outside Airflow's components) has nothing to supersede it: True. The
    decision and its reason go to ``log``; ``stop_hint`` (the command that stops the job) is logged when the job is
    left running because the state could not be read. ``timeout``: give up the look-up after that many seconds (a
    worker's signal handler, whose interrupted main thread may hold the supervisor channel)."""
    if ti is None:
        return True
    try:
        state = _bounded(lambda: task_state(ti), timeout) if timeout else task_state(ti)
    except Exception as error:  # noqa: BLE001 - unknown: leave the job to whoever looks next
        log.warning("task %s was killed, but its state could not be read (%s): %s is left running, since a "
                    "newer try may be following it; if the task was ended, stop it with %s", describe(ti), error,
                    what, stop_hint)
        return False
    if state in ENDED_STATES:
        log.info("task %s is %s: stopping %s", describe(ti), state, what)
        return True
    log.info("task %s is %s (cleared, retried or re-queued): its next try re-attaches to %s, which is left running",
             describe(ti), state or "without a state", what)
    return False


def _bounded(call: Callable[[], Any], timeout: float) -> Any:
    """``call()`` in a daemon thread, or TimeoutError after ``timeout`` seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed back to the caller
            box["error"] = error

    thread = threading.Thread(target=run, name="trainops-task-state", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
