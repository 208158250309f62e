"""The deferrable waits of the training operator: a SageMaker training job, and a detached local job.

`LocalTrainingTrigger` (below the SageMaker one) polls a local job's status record, which its detached supervisor
keeps (`trainops.backends.local.detached`): the job belongs to neither the worker nor the triggerer, so the trigger
is only a reader, rebuilt from its serialized arguments after a triggerer restart, and the job never notices.

The SageMaker wait: a constructor, `serialize()`, and one async polling loop.

The loop is the asynchronous form of the backend's own wait (`trainops.backends.sagemaker.training.wait`): it asks the
shared states table (`trainops.backends.states.classify`) what each status means, reduces responses with the same
`summarize`, words failures with the same `failure_message`, and is bounded the same way, by the job's own
``max_run`` (+ ``max_wait`` for spot) + a grace (`wait_bound_seconds`), never by a fixed number of attempts.
boto3 is synchronous: each call runs in a worker thread (``asyncio.to_thread``) so the triggerer's event loop never
blocks. The client comes from the Amazon provider's ``AwsBaseHook`` with the task's ``aws_conn_id`` and
``region_name`` (both serialized, so a trigger that moves to another triggerer keeps its region).

It yields exactly one event, ``{"status": "success" | "failed" | "stopped" | "timeout" | "error", ...}``; the
operator's ``execute_complete`` raises on anything but ``success``, with the event's ``message``.

This module subclasses Airflow's ``BaseTrigger`` (``airflow.triggers.base``, the only trigger base there is), so it
is imported by the triggerer and by ``execute`` when deferring, never by a DAG file.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CLASSPATH = "trainops.operators.triggers.SageMakerTrainingTrigger"
LOCAL_CLASSPATH = "trainops.operators.triggers.LocalTrainingTrigger"
#: Default when the job's limits are unknown: SageMaker's own default MaxRuntimeInSeconds (one day).
DEFAULT_MAX_RUN_SECONDS = 86400


def final_metrics(response: dict[str, Any]) -> dict[str, float]:
    """The job's final metric values (``FinalMetricDataList``) as a small name -> number mapping."""
    metrics: dict[str, float] = {}
    for item in response.get("FinalMetricDataList") or []:
        name, value = item.get("MetricName"), item.get("Value")
        if name is not None and isinstance(value, (int, float)):
            metrics[str(name)] = float(value)
    return metrics


def event_for(response: dict[str, Any], region: str | None) -> dict[str, Any]:
    """The trigger event of a terminal describe response: small JSON, never the response itself."""
    from trainops.backends.failures import status_walk
    from trainops.backends.sagemaker.training import failure_message, summarize
    from trainops.backends.states import classify

    summary = summarize(response)
    outcome = classify("training_job", summary.status)
    if outcome == "success":
        status, message = "success", f"training job {summary.job_name} completed"
    else:
        status = "stopped" if summary.status in ("Stopped", "Stopping") else "failed"
        message = failure_message(summary)
    return {
        "status": status,
        "message": message,
        "job_name": summary.job_name,
        "region": region,
        "job_status": summary.status,
        "secondary_status": summary.secondary_status,
        # The walk, for the failure classifier: a spot interruption shows only in the transitions.
        "secondary_statuses": status_walk(summary.secondary_status_history),
        "failure_reason": summary.failure_reason,
        "model_artifact": summary.model_artifact_uri,
        "billable_seconds": summary.billable_seconds,
        "duration_seconds": summary.training_seconds,
        "metrics": final_metrics(response),
    }


class SageMakerTrainingTrigger(BaseTrigger):
    """Waits for a SageMaker training job to end, without holding a worker slot.

    Args:
        job_name: the training job.
        aws_conn_id: the Airflow AWS connection (credentials, role, endpoint) the task used.
        region_name: the job's region (None: the connection's or boto3's default).
        poll_seconds: pause between two DescribeTrainingJob calls.
        max_run, max_wait: the job's MaxRuntimeInSeconds and (spot) MaxWaitTimeInSeconds; when None they are read
            from the job's own StoppingCondition on the first describe.
        grace_seconds: added to the bound (provisioning, image download, model upload are not counted by max_run).
        started_at: wall-clock time (``time.time()``) the wait began. The bound counts from it, so a trigger that is
            restarted on another triggerer does not get a fresh allowance.
        reattached: whether the task followed a job an earlier try created; echoed in the event (``dag.test()``
            hands ``execute_complete`` the event alone, without the deferral's keyword arguments).
    """

    def __init__(
        self,
        job_name: str,
        *,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_seconds: float = 30.0,
        max_run: float | None = None,
        max_wait: float | None = None,
        grace_seconds: float = 3600.0,
        started_at: float | None = None,
        reattached: bool = False,
    ):
        super().__init__()
        self.job_name = job_name
        self.reattached = reattached
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.poll_seconds = poll_seconds
        self.max_run = max_run
        self.max_wait = max_wait
        self.grace_seconds = grace_seconds
        self.started_at = time.time() if started_at is None else started_at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and every constructor argument (JSON values only)."""
        return CLASSPATH, {
            "job_name": self.job_name,
            "aws_conn_id": self.aws_conn_id,
            "region_name": self.region_name,
            "poll_seconds": self.poll_seconds,
            "max_run": self.max_run,
            "max_wait": self.max_wait,
            "grace_seconds": self.grace_seconds,
            "started_at": self.started_at,
            "reattached": self.reattached,
        }

    def _client(self) -> Any:
        # Runs in a thread: building the session may read the Airflow connection (a blocking call).
        from trainops.operators.common import aws_client_factory

        factory, region = aws_client_factory(self.aws_conn_id, self.region_name)
        self.region_name = self.region_name or region
        return factory("sagemaker")

    def _bound(self, response: dict[str, Any]) -> float:
        from trainops.backends.states import wait_bound_seconds

        stopping = response.get("StoppingCondition") or {}
        # The job's own limits win: a re-attached job may have been created with other limits than the spec's now.
        max_run = stopping.get("MaxRuntimeInSeconds") or self.max_run or DEFAULT_MAX_RUN_SECONDS
        max_wait = stopping.get("MaxWaitTimeInSeconds") if response.get("EnableManagedSpotTraining") else None
        return wait_bound_seconds(max_run, max_wait if max_wait is not None else self.max_wait, self.grace_seconds)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until the job is terminal or the bound passes; yield one event, then return."""
        try:
            event = await self._wait()
        except Exception as error:  # noqa: BLE001 - any failure must reach execute_complete as an event
            from trainops.operators.common import airflow_error

            event = {"status": "error", "job_name": self.job_name, "region": self.region_name,
                     "message": f"waiting for training job {self.job_name} failed: {airflow_error(error)}"}
        yield TriggerEvent({**event, "reattached": self.reattached})

    async def _wait(self) -> dict[str, Any]:
        from trainops.backends.states import classify

        client = await asyncio.to_thread(self._client)
        last_progress: tuple[Any, Any] | None = None
        while True:
            response = await asyncio.to_thread(client.describe_training_job, TrainingJobName=self.job_name)
            status, secondary = response.get("TrainingJobStatus"), response.get("SecondaryStatus")
            if (status, secondary) != last_progress:
                last_progress = (status, secondary)
                self.log.info("training job %s: %s / %s", self.job_name, status, secondary)
            if classify("training_job", status) != "waiting":
                return event_for(response, self.region_name)
            bound = self._bound(response)
            elapsed = time.time() - self.started_at
            if elapsed >= bound:
                return {
                    "status": "timeout", "job_name": self.job_name, "region": self.region_name,
                    "job_status": status, "secondary_status": secondary,
                    "message": f"gave up waiting for training job {self.job_name} after {elapsed:.0f} s (bound "
                               f"{bound:.0f} s = max_run + max_wait + grace); last status {status} / {secondary}. "
                               "The job was not stopped: check it in the console, or stop it.",
                }
            await asyncio.sleep(max(0.0, min(self.poll_seconds, bound - elapsed)))

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed / success, clear): stop the remote job too, through the
        backend seam (``backend.stop(handle)``), as the worker's on_kill and the command line do."""
        from trainops.backends.api import JobHandle, get_backend

        def stop() -> str:
            client = self._client()
            backend = get_backend("sagemaker", region=self.region_name, client_factory=lambda service: client)
            return backend.stop(JobHandle("sagemaker", self.job_name, region=self.region_name, created=False))

        outcome = await asyncio.wait_for(asyncio.to_thread(stop), timeout=60)
        self.log.info("stop requested because the task was killed: %s", outcome)


def local_event(record: dict[str, Any]) -> dict[str, Any]:
    """The trigger event of a local job's final status record: the same keys as a SageMaker job's event."""
    name, job_status = record.get("job_name"), record.get("status")
    reason = record.get("failure_reason") or "no reason given"
    if job_status == "Completed":
        status, message = "success", f"local training job {name} completed"
    elif job_status == "Stopped":
        status, message = "stopped", f"local training job {name} was stopped: {reason}"
    else:
        status, message = "failed", f"local training job {name} ended {job_status}: {reason}"
    return {
        "status": status,
        "message": message,
        "backend": "local",
        "job_name": name,
        "region": None,
        "job_status": job_status,
        "secondary_status": record.get("secondary_status"),
        "failure_reason": record.get("failure_reason"),
        "model_artifact": record.get("model_artifact"),
        "billable_seconds": None,
        "duration_seconds": record.get("duration_seconds"),
        "metrics": {},
    }


class LocalTrainingTrigger(BaseTrigger):
    """Waits for a detached local training job to end, without holding a worker slot.

    Args:
        job_name: the local job.
        workdir: its work directory (None: ``$TRAINOPS_HOME``), as the operator submitted it.
        poll_seconds: pause between two reads of the job's status record.
        max_run: the job's ``max_run``; the job's controller enforces it, so the trigger's bound (``max_run`` +
            ``grace_seconds``) is only a safety net against a record that never ends.
        grace_seconds: added to the bound.
        started_at: wall-clock time the wait began; kept across triggerer restarts, so the bound does not restart.
        reattached: whether the task followed a job an earlier try started; echoed in the event (``dag.test()``
            hands ``execute_complete`` the event alone, without the deferral's keyword arguments).
    """

    def __init__(
        self,
        job_name: str,
        *,
        workdir: str | None = None,
        poll_seconds: float = 5.0,
        max_run: float | None = None,
        grace_seconds: float = 600.0,
        started_at: float | None = None,
        reattached: bool = False,
    ):
        super().__init__()
        self.job_name = job_name
        self.reattached = reattached
        self.workdir = workdir
        self.poll_seconds = poll_seconds
        self.max_run = max_run
        self.grace_seconds = grace_seconds
        self.started_at = time.time() if started_at is None else started_at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and every constructor argument (JSON values only)."""
        return LOCAL_CLASSPATH, {
            "job_name": self.job_name,
            "workdir": self.workdir,
            "poll_seconds": self.poll_seconds,
            "max_run": self.max_run,
            "grace_seconds": self.grace_seconds,
            "started_at": self.started_at,
            "reattached": self.reattached,
        }

    def _read(self) -> dict[str, Any]:
        from trainops.backends.local import status

        return status.read(self.job_name, self.workdir)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll the status record until the job ends or the bound passes; yield one event, then return."""
        try:
            event = await self._wait()
        except Exception as error:  # noqa: BLE001 - any failure must reach execute_complete as an event
            from trainops.operators.common import airflow_error

            event = {"status": "error", "backend": "local", "job_name": self.job_name, "region": None,
                     "message": f"waiting for local training job {self.job_name} failed: {airflow_error(error)}"}
        yield TriggerEvent({**event, "reattached": self.reattached})

    async def _wait(self) -> dict[str, Any]:
        from trainops.backends.local.status import ACTIVE
        from trainops.backends.states import wait_bound_seconds

        last: tuple[Any, Any] | None = None
        bound = wait_bound_seconds(self.max_run or DEFAULT_MAX_RUN_SECONDS, None, self.grace_seconds)
        while True:
            record = await asyncio.to_thread(self._read)
            progress = (record.get("status"), record.get("secondary_status"))
            if progress != last:
                last = progress
                self.log.info("local training job %s: %s / %s", self.job_name, *progress)
            if record.get("status") not in ACTIVE:
                return local_event(record)
            elapsed = time.time() - self.started_at
            if elapsed >= bound:
                return {"status": "timeout", "backend": "local", "job_name": self.job_name, "region": None,
                        "job_status": record.get("status"), "secondary_status": record.get("secondary_status"),
                        "message": f"gave up waiting for local training job {self.job_name} after {elapsed:.0f} s "
                                   f"(bound {bound:.0f} s = max_run + grace); it still says {record.get('status')}. "
                                   f"Stop it with `trainops stop {self.job_name}`."}
            await asyncio.sleep(max(0.0, min(self.poll_seconds, bound - elapsed)))

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed / success, clear): stop the local job too, through the
        backend seam (``backend.stop(handle)``)."""
        from trainops.backends.api import JobHandle, get_backend

        backend = get_backend("local", workdir=self.workdir)
        handle = JobHandle("local", self.job_name, workdir=self.workdir, created=False)
        outcome = await asyncio.wait_for(asyncio.to_thread(backend.stop, handle), timeout=90)
        self.log.info("local training job stopped because the task was killed: %s", outcome)
