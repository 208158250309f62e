"""What a guarded wait observes of a SageMaker training job: its start, its billable seconds so far, and when it last
wrote a log line or a metric (`trainops.backends.guards.Observation`).

- Start: ``TrainingStartTime`` (the instances are up and billed), else ``CreationTime``: the wait bound counts from
  the job's own start, so a re-attached wait gets no fresh bound.
- Billable so far: ``BillableTimeInSeconds`` once SageMaker reports it, else the seconds since
  ``TrainingStartTime`` less the spot interruptions' (``Interrupted`` transitions): an upper bound (a spot job is
  billed less than on-demand for the same seconds).
- Activity: the newest of the job's CloudWatch log streams' ``lastEventTimestamp`` and ``lastIngestionTime``
  (DescribeLogStreams, one call per look, paged; ``lastEventTimestamp`` alone may lag by design, ingestion does not)
  and the ``Timestamp`` of ``FinalMetricDataList`` (SageMaker updates the metrics while the job runs). Only while
  the secondary status is ``Training``: provisioning, downloads, a spot interruption and the model upload print
  nothing and are not stalls.

`SageMakerBackend.look` observes the first two from each DescribeTrainingJob answer; `TrainingJobWatch`, the kit's
watch over a training job, adds the log activity (one DescribeLogStreams call a look, only with a stall guard) and
records on the job why a guard stopped it (its tags: SageMaker keeps no stop reason of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from trainops.aws.clients import ClientFactory
from trainops.backends.api import JobHandle, Log
from trainops.backends.guards import JobGuards, Observation, Tripped
from trainops.backends.polled import Look, Watch
from trainops.backends.sagemaker.logs import LOG_GROUP, stream_records
from trainops.backends.sagemaker.training import stop as stop_job


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    return None


def last_log_event(factory: ClientFactory, job_name: str, log_group: str = LOG_GROUP) -> float | None:
    """Seconds since the epoch of the newest log event of any of the job's streams (None: no stream yet)."""
    stamps = [stamp / 1000.0 for stream in stream_records(factory, job_name, log_group)
              for key in ("lastEventTimestamp", "lastIngestionTime")
              if isinstance(stamp := stream.get(key), (int, float))]
    return max(stamps) if stamps else None


def _interrupted(response: dict[str, Any], now: float) -> float:
    """Seconds a spot job spent interrupted (not billed), from its Interrupted transitions."""
    total = 0.0
    for transition in response.get("SecondaryStatusTransitions") or []:
        if transition.get("Status") != "Interrupted":
            continue
        start = _epoch(transition.get("StartTime"))
        end = _epoch(transition.get("EndTime")) or now
        if start is not None:
            total += max(0.0, end - start)
    return total


def _running_since(response: dict[str, Any]) -> float | None:
    if response.get("SecondaryStatus") != "Training":
        return None
    for transition in reversed(response.get("SecondaryStatusTransitions") or []):
        if transition.get("Status") == "Training":
            return _epoch(transition.get("StartTime"))
    return _epoch(response.get("TrainingStartTime"))


def observe(response: dict[str, Any], now: float) -> Observation:
    """One look at a job from its DescribeTrainingJob response (the log activity is the watch's:
    `TrainingJobWatch`)."""
    started_training = _epoch(response.get("TrainingStartTime"))
    started = started_training or _epoch(response.get("CreationTime"))
    billable: float | None = response.get("BillableTimeInSeconds")
    if billable is None:
        billable = max(0.0, now - started_training - _interrupted(response, now)) if started_training else 0.0
    running_since = _running_since(response)
    stamps = [_epoch(item.get("Timestamp")) for item in response.get("FinalMetricDataList") or []]
    known = [stamp for stamp in stamps if stamp is not None]
    stopping = response.get("StoppingCondition") or {}
    spot = bool(response.get("EnableManagedSpotTraining"))
    return Observation(now=now, started=started, running_since=running_since, billable_seconds=float(billable),
                       last_activity=max(known) if known else None,
                       max_run=stopping.get("MaxRuntimeInSeconds"),
                       max_wait=stopping.get("MaxWaitTimeInSeconds") if spot else None)


class TrainingJobWatch(Watch):
    """The kit's watch over one SageMaker training job (`SageMakerBackend.watch`: the wait's per-look check, and
    what the Airflow trigger and the worker's poll look with).

    A look right after the backend described the job uses that answer (`SageMakerBackend.recent_look`): a poller
    that describes, then looks, pays one DescribeTrainingJob a poll. With a stall guard, a look at a job in its
    Training status adds the newest log event (`last_log_event`). A guard that trips stops the job with its reason
    tagged on it first (`training.stop`), so ``trainops status`` says budget / stalled / timeout later.
    """

    def __init__(self, backend: Any, handle: JobHandle, guards: JobGuards, log: Log | None = None):
        name = handle.job_name

        def look() -> Look:
            return self._active(backend.recent_look(handle) or backend.look(handle))

        def stop(reason: str) -> str:
            return stop_job(backend.clients, name, guard=self.watchdog.tripped)

        super().__init__(guards, look, stop, (lambda line: log(f"{line} ({name})")) if log is not None else None)
        self._activity: Callable[[], float | None] = lambda: last_log_event(backend.clients, name)

    def look(self, found: Look | None = None) -> Tripped | None:
        return super().look(self._active(found) if found is not None else None)

    def _active(self, found: Look) -> Look:
        """``found`` with the job's newest log event as its activity, where a stall guard watches a training job."""
        seen = found.seen
        if not self.guards.stall_timeout or seen is None or seen.running_since is None \
                or found.result.status.terminal:
            return found
        stamps = [stamp for stamp in (seen.last_activity, self._activity()) if stamp is not None]
        return replace(found, seen=replace(seen, last_activity=max(stamps) if stamps else None))
