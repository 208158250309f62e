"""Streams the CloudWatch logs of every host of a SageMaker training job into the task log while the worker waits.

A background thread runs `trainops.backends.sagemaker.logs.iter_log_lines` (every host's stream, merged by time,
``[algo-2] ...``) while the operator's main thread runs the backend's bounded wait. The follower does not ask
SageMaker for the job's status itself: it sees the status the wait last observed (`ObservedStatus`), which halves the
DescribeTrainingJob calls (throttling) and means the wait alone decides when the job is over. When the wait ends the
follower is woken, reads once more (the last lines arrive after the job ends) and stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from trainops.operators.common import ClientFactory


class ObservedStatus:
    """A stand-in for the SageMaker client, for the follower: the training job's status as the wait last saw it."""

    #: Reported once the wait has ended without a terminal status (it timed out): it only ends the log loop.
    ENDED = "Stopped"

    def __init__(self) -> None:
        self.status: str | None = None

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803 - boto3's spelling
        return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": self.status}


class LogFollower:
    """``start()`` before waiting; `observe` each status the wait reports; ``finish()`` after the wait."""

    def __init__(self, factory: ClientFactory, job_name: str, write: Callable[[str], None], poll_seconds: float,
                 warn: Callable[[str], None]):
        self.job_name = job_name
        self.write = write
        self.warn = warn
        self.poll_seconds = poll_seconds
        self.observed = ObservedStatus()
        self._wake = threading.Event()
        self._factory = lambda service: self.observed if service == "sagemaker" else factory(service)
        self._thread = threading.Thread(target=self._follow, name=f"logs-{job_name}", daemon=True)

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def observe(self, status: str | None) -> None:
        """The wait saw this status (called from the wait's ``on_update``)."""
        self.observed.status = status

    def finish(self, timeout: float = 60.0) -> None:
        """The wait is over: let the follower read the last lines, then stop (bounded by ``timeout``)."""
        from trainops.backends.states import is_terminal

        if not is_terminal("training_job", self.observed.status):
            self.observed.status = ObservedStatus.ENDED
        self._wake.set()
        self._thread.join(timeout=timeout)

    def _sleep(self, seconds: float) -> None:
        # Wakes early when the wait ends, so the final read is not delayed by a whole poll interval.
        self._wake.wait(seconds)

    def _follow(self) -> None:
        from trainops.backends.sagemaker.logs import iter_log_lines

        try:
            for line in iter_log_lines(self._factory, self.job_name, follow=True, poll_seconds=self.poll_seconds,
                                       sleep=self._sleep):
                self.write(line.render())
        except Exception as error:  # noqa: BLE001 - logs are a convenience; the wait decides the outcome
            self.warn(f"stopped following the logs of {self.job_name}: {error}")
