"""Waiters as data: what each status of a remote resource means (success, failure, or keep waiting).

One table per resource kind, shared by every loop that polls one: the synchronous wait of the SageMaker backend, the
Airflow trigger and the CLI. A loop asks `classify(resource, status)` and never compares status strings itself.

Unknown statuses are classified as ``"waiting"`` (and logged once per resource and status as a warning). AWS adds
statuses over time (``Deleting`` joined the training-job enum years after launch); treating a new one as a failure
would fail jobs that are fine, and every wait in trainops is bounded by a deadline (the job's own ``max_run`` plus a
grace, counted from the job's own start: `job_deadline`), so an unknown status can never make a wait hang for
ever. The warning makes the new status visible so the table can be updated.

This module is imported by the Airflow trigger, so it uses the standard library (and `trainops.errors`) only.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Literal

from trainops.errors import JobFailed

logger = logging.getLogger(__name__)

Outcome = Literal["success", "failure", "waiting"]

SUCCESS: Outcome = "success"
FAILURE: Outcome = "failure"
WAITING: Outcome = "waiting"

#: Resource kind -> status -> outcome. Status names are exactly as the AWS APIs spell them.
TABLES: dict[str, dict[str, Outcome]] = {
    # sagemaker.describe_training_job()["TrainingJobStatus"]
    "training_job": {
        "InProgress": WAITING,
        "Stopping": WAITING,  # transient: it ends as Stopped (or Completed, if the job finished first)
        "Completed": SUCCESS,
        "Failed": FAILURE,
        "Stopped": FAILURE,  # stopped by a user or by the service (MaxRuntimeExceeded): the model may be partial
        "Deleting": FAILURE,  # the job is being deleted: nothing to wait for
    },
    # sagemaker.describe_processing_job()["ProcessingJobStatus"]
    "processing_job": {
        "InProgress": WAITING,
        "Stopping": WAITING,
        "Completed": SUCCESS,
        "Failed": FAILURE,
        "Stopped": FAILURE,
    },
    # a local job's status record (<workdir>/jobs/<name>/status.json), written by trainops.backends.local.job
    "local_job": {
        "InProgress": WAITING,
        "Stopping": WAITING,
        "Completed": SUCCESS,
        "Failed": FAILURE,  # also what a record says when its controller exited before the job ended
        "Stopped": FAILURE,
    },
    # a Slurm job's state (squeue --json / slurmrestd's job_state): the slurm backend's training jobs
    "slurm_job": {
        "PENDING": WAITING,
        "CONFIGURING": WAITING,  # nodes booting (a cloud or HyperPod node being replaced)
        "RUNNING": WAITING,
        "COMPLETING": WAITING,  # the steps ended; epilogs run
        "SUSPENDED": WAITING,
        "STOPPED": WAITING,  # Slurm's STOPPED is a paused job (SIGSTOP), not an ended one
        "REQUEUED": WAITING,
        "REQUEUE_HOLD": WAITING,
        "REQUEUE_FED": WAITING,
        "RESIZING": WAITING,
        "SIGNALING": WAITING,
        "STAGE_OUT": WAITING,
        "COMPLETED": SUCCESS,
        "FAILED": FAILURE,  # the batch script exited non-zero: a rank failed (its failure file says why)
        "CANCELLED": FAILURE,  # scancel: trainops' stop, or someone else's
        "TIMEOUT": FAILURE,  # the time limit (sbatch --time = max_run)
        "DEADLINE": FAILURE,
        "NODE_FAIL": FAILURE,  # a node of the job stopped answering (SlurmdTimeout)
        "BOOT_FAIL": FAILURE,
        "PREEMPTED": FAILURE,
        "OUT_OF_MEMORY": FAILURE,
        "REVOKED": FAILURE,
        "SPECIAL_EXIT": FAILURE,
    },
    # fsx.describe_data_repository_tasks()["DataRepositoryTasks"][i]["Lifecycle"]
    "fsx_task": {
        "PENDING": WAITING,
        "EXECUTING": WAITING,
        "CANCELING": WAITING,
        "SUCCEEDED": SUCCESS,  # may still carry failed files: check Status.FailedCount
        "FAILED": FAILURE,
        "CANCELED": FAILURE,
    },
    # fsx.describe_file_systems()["FileSystems"][i]["Lifecycle"]
    "fsx_file_system": {
        "CREATING": WAITING,
        "UPDATING": SUCCESS,  # an update (e.g. storage scaling) keeps the file system mountable
        "AVAILABLE": SUCCESS,
        "FAILED": FAILURE,
        "DELETING": FAILURE,
        "MISCONFIGURED": FAILURE,
        "MISCONFIGURED_UNAVAILABLE": FAILURE,
    },
    # fsx.describe_data_repository_associations()["Associations"][i]["Lifecycle"]
    "fsx_association": {
        "CREATING": WAITING,
        "UPDATING": WAITING,
        "AVAILABLE": SUCCESS,
        "MISCONFIGURED": FAILURE,
        "DELETING": FAILURE,
        "FAILED": FAILURE,
    },
}

#: What a training job's secondary status tells a user, for the statuses that need explaining.
TRAINING_SECONDARY_MEANINGS: dict[str, str] = {
    "Starting": "starting the training job",
    "Pending": "waiting for capacity or for a warm pool",
    "LaunchingMLInstances": "launching the ML instances",
    "PreparingTrainingStack": "preparing the training stack",
    "Downloading": "downloading the input data",
    "DownloadingTrainingImage": "downloading the training image",
    "Training": "the training script is running",
    "Uploading": "uploading the model and output data to S3",
    "Restarting": "restarting after a recoverable failure (RetryStrategy)",
    "Updating": "applying an update to the job",
    "Interrupted": (
        "spot capacity was reclaimed (spot interruption); SageMaker resumes the job, from its last checkpoint if "
        "checkpointing is configured, when capacity returns, within MaxWaitTimeInSeconds"
    ),
    "MaxRuntimeExceeded": (
        "the job ran longer than MaxRuntimeInSeconds and was stopped; raise max_run or make training shorter"
    ),
    "MaxWaitTimeExceeded": (
        "the spot job waited and ran longer than MaxWaitTimeInSeconds and was stopped; raise max_wait or use "
        "on-demand capacity"
    ),
    "Stopping": "stopping the job",
    "Stopped": "the job was stopped",
    "Completed": "the job finished successfully",
    "Failed": "the job failed; see the failure reason",
}

#: Secondary statuses that mean the job is held back by spot capacity (it is not running user code).
SPOT_INTERRUPTION_STATUSES: frozenset[str] = frozenset({"Interrupted"})

_warned: set[tuple[str, str]] = set()


def classify(resource: str, status: str | None) -> Outcome:
    """Say whether a status of a resource is a success, a failure, or a reason to keep waiting.

    Args:
        resource: one of the keys of `TABLES` (``"training_job"``, ``"processing_job"``, ``"local_job"``,
            ``"slurm_job"``, ``"fsx_task"``, ``"fsx_file_system"``, ``"fsx_association"``).
        status: the status exactly as the AWS API returned it. ``None`` (not reported yet) means waiting.

    Unknown statuses are "waiting" with a logged warning (see the module docstring for why). An unknown resource kind
    is a programming error and raises ``KeyError``.
    """
    table = TABLES[resource]
    if status is None:
        return WAITING
    outcome = table.get(status)
    if outcome is not None:
        return outcome
    if (resource, status) not in _warned:
        _warned.add((resource, status))
        logger.warning(
            "unknown %s status %r: treating it as still running (the wait stays bounded by its deadline)",
            resource,
            status,
        )
    return WAITING


def is_terminal(resource: str, status: str | None) -> bool:
    """Whether polling can stop: the status is a success or a failure."""
    return classify(resource, status) != WAITING


def terminal_statuses(resource: str) -> frozenset[str]:
    """Every known status of a resource that ends a wait (success or failure)."""
    return frozenset(status for status, outcome in TABLES[resource].items() if outcome != WAITING)


def explain_secondary_status(status: str | None) -> str:
    """A one-line explanation of a training job's secondary status for users (empty when there is none)."""
    if not status:
        return ""
    return TRAINING_SECONDARY_MEANINGS.get(status, status)


def wait_bound_seconds(max_run: float, max_wait: float | None = None, grace: float = 3600.0) -> float:
    """How long a wait for a training job may last before it is declared timed out.

    The job's own limits bound it: ``max_run`` (MaxRuntimeInSeconds), plus ``max_wait`` (MaxWaitTimeInSeconds) for
    spot jobs, plus a grace that covers what the limits do not count (instance provisioning, image download, the
    model upload). The sum is deliberately generous: SageMaker enforces the real limits; this bound only guarantees
    that a wait never hangs.
    """
    return float(max_run) + float(max_wait or 0) + float(grace)


def job_deadline(started: float, max_run: float, max_wait: float | None = None, grace: float = 3600.0) -> float:
    """When a wait for a job gives up, in seconds since the epoch: its own start (SageMaker: TrainingStartTime, else
    CreationTime; local: the status record's ``started``) plus `wait_bound_seconds`. Per job, not per caller: a
    re-attached wait (an Airflow retry, a second caller) gets no fresh bound. The grace is the spec's
    ``wait_grace_seconds``; a guarded wait stops the job at its deadline (``stop_at_wait_bound``, the default)."""
    return float(started) + wait_bound_seconds(max_run, max_wait, grace)


class JobStatus(str, Enum):
    """The status of a training job on any backend, spelled as SageMaker spells it (a ``str``, so it compares equal
    to the status strings of describe responses and local status records, and is JSON as it is).

    `parse` maps a backend's own status through its table above, so a status AWS adds later (unknown to the table)
    reads as still running, like everywhere else, instead of breaking the caller.
    """

    IN_PROGRESS = "InProgress"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    DELETING = "Deleting"

    @classmethod
    def parse(cls, status: str | None, resource: str = "training_job") -> JobStatus:
        """The status of a describe response or a status record; None (not reported yet) and statuses the table
        does not know (a warning is logged once) are IN_PROGRESS."""
        classify(resource, status)  # logs an unknown status once
        try:
            return cls(status)
        except ValueError:
            return cls.IN_PROGRESS

    @property
    def outcome(self) -> Outcome:
        """success, failure or waiting (the training-job table)."""
        return classify("training_job", self.value)

    @property
    def terminal(self) -> bool:
        """Whether the job has ended (it succeeded, failed or was stopped)."""
        return self.outcome != WAITING

    @property
    def reattachable(self) -> bool:
        """Whether a new run of the same name follows this job instead of starting again: it runs or it completed.
        A job that failed or was stopped is retried under a suffixed name (see `trainops.backends.api.place_job`)."""
        return self.outcome != FAILURE

    def __str__(self) -> str:
        return self.value


#: A Slurm job's ended states, as the training-job status they mean (the others that end a job are Failed).
SLURM_ENDED_STATUSES: dict[str, str] = {
    "COMPLETED": "Completed",
    "CANCELLED": "Stopped",
    "TIMEOUT": "Stopped",  # as SageMaker's MaxRuntimeExceeded: stopped at the limit
    "DEADLINE": "Stopped",
}


def slurm_status(state: str | None) -> JobStatus:
    """The training-job status of a Slurm job state (`TABLES["slurm_job"]`): still waiting -> InProgress, an ended
    state -> Completed, Stopped or Failed. A state the table does not know reads as still running (logged once)."""
    outcome = classify("slurm_job", state)
    if outcome == WAITING:
        return JobStatus.IN_PROGRESS
    return JobStatus(SLURM_ENDED_STATUSES.get(str(state), "Failed"))


class WaitTimedOut(JobFailed):
    """A wait passed its bound (max_run, + max_wait, + grace) without the resource reaching a terminal status.

    The remote resource is left as it is: the caller decides whether to stop it (a guarded wait of a training job
    stops it instead and returns it Stopped, classified timeout, unless ``stop_at_wait_bound`` is false).
    """
