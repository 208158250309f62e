"""Waiters as data: what each status of a remote resource means (success, failure, or keep waiting).

One table per resource kind, shared by every loop that polls one: a backend's synchronous wait, the Airflow trigger
and the CLI. A loop asks `classify(resource, status)` and never compares status strings itself.

The tables are each engine's own: an engine declares them in its vocabulary (`trainops.backends.vocabulary`), which
registers them here (`register_tables`) when the engine's package is imported; this module holds only trainops' own
status (`JobStatus`, the ``job`` table) and the lookups. A resource kind is one engine's: a second engine cannot
register the same kind with other rows.

Unknown statuses are classified as ``"waiting"`` (and logged once per resource and status as a warning). Services add
statuses over time; treating a new one as a failure would fail jobs that are fine, and every wait in trainops is
bounded by a deadline (the job's own ``max_run`` plus a grace, counted from the job's own start: `job_deadline`), so an
unknown status can never make a wait hang for ever. The warning makes the new status visible so the table can be
updated.

This module is imported by the Airflow trigger, so it uses the standard library (and `trainops.errors`) only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import Enum
from typing import Literal

from trainops.errors import JobFailed

logger = logging.getLogger(__name__)

Outcome = Literal["success", "failure", "waiting"]

SUCCESS: Outcome = "success"
FAILURE: Outcome = "failure"
WAITING: Outcome = "waiting"

#: trainops' own status of a training job (`JobStatus`), whatever engine ran it.
JOB_TABLE: dict[str, Outcome] = {
    "InProgress": WAITING,
    "Stopping": WAITING,  # transient: it ends as Stopped (or Completed, if the job finished first)
    "Completed": SUCCESS,
    "Failed": FAILURE,
    "Stopped": FAILURE,  # stopped by a person, an orchestrator, a guard or the engine at a limit
    "Deleting": FAILURE,  # the job is being deleted: nothing to wait for
}

#: Resource kind -> status -> outcome: ``job`` (trainops' own), then every kind an engine registered.
TABLES: dict[str, Mapping[str, Outcome]] = {"job": JOB_TABLE}


def register_tables(tables: Mapping[str, Mapping[str, Outcome]], engine: str = "") -> None:
    """Add an engine's status tables (kind -> status -> outcome). Registering the same rows again is a no-op; a kind
    another engine registered with other rows is a ``ValueError`` (two engines would read each other's states)."""
    who = engine or "an engine"
    for kind, table in tables.items():
        for status, outcome in table.items():
            if outcome not in (SUCCESS, FAILURE, WAITING):
                raise ValueError(f"{who}'s {kind} table: status {status!r} has outcome {outcome!r}; use one of "
                                 f"{SUCCESS}, {FAILURE}, {WAITING}")
        known = TABLES.get(kind)
        if known is not None and dict(known) != dict(table):
            raise ValueError(f"resource kind {kind!r} is registered already with other statuses: {who} must name "
                             "its own kinds (e.g. <engine>_job)")
        TABLES[kind] = dict(table)


_warned: set[tuple[str, str]] = set()


def classify(resource: str, status: str | None) -> Outcome:
    """Say whether a status of a resource is a success, a failure, or a reason to keep waiting.

    Args:
        resource: a key of `TABLES` (``"job"``, or a kind an engine registered: its vocabulary lists them).
        status: the status exactly as the engine reported it. ``None`` (not reported yet) means waiting.

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


def wait_bound_seconds(max_run: float, max_wait: float | None = None, grace: float = 3600.0) -> float:
    """How long a wait for a training job may last before it is declared timed out.

    The job's own limits bound it: ``max_run`` (MaxRuntimeInSeconds), plus ``max_wait`` (MaxWaitTimeInSeconds) for
    spot jobs, plus a grace that covers what the limits do not count (instance provisioning, image download, the
    model upload). The sum is deliberately generous: the engine enforces the real limits; this bound only guarantees
    that a wait never hangs.
    """
    return float(max_run) + float(max_wait or 0) + float(grace)


def job_deadline(started: float, max_run: float, max_wait: float | None = None, grace: float = 3600.0) -> float:
    """When a wait for a job gives up, in seconds since the epoch: its own start (as its engine reports it) plus
    `wait_bound_seconds`. Per job, not per caller: a
    re-attached wait (an Airflow retry, a second caller) gets no fresh bound. The grace is the spec's
    ``wait_grace_seconds``; a guarded wait stops the job at its deadline (``stop_at_wait_bound``, the default)."""
    return float(started) + wait_bound_seconds(max_run, max_wait, grace)


class JobStatus(str, Enum):
    """trainops' status of a training job on any backend (a ``str``, so it compares equal to the status strings of
    status records, and is JSON as it is). An engine maps its own states to it in its vocabulary
    (`trainops.backends.vocabulary.Vocabulary.job_status`).

    `parse` reads a status through a table (``job``: this one's; an engine's kind), so a status unknown to it reads as
    still running, like everywhere else, instead of breaking the caller.
    """

    IN_PROGRESS = "InProgress"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    DELETING = "Deleting"

    @classmethod
    def parse(cls, status: str | None, resource: str = "job") -> JobStatus:
        """The status of a describe response or a status record; None (not reported yet) and statuses the table
        does not know (a warning is logged once) are IN_PROGRESS."""
        classify(resource, status)  # logs an unknown status once
        try:
            return cls(status)
        except ValueError:
            return cls.IN_PROGRESS

    @property
    def outcome(self) -> Outcome:
        """success, failure or waiting (the ``job`` table)."""
        return classify("job", self.value)

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


class WaitTimedOut(JobFailed):
    """A wait passed its bound (max_run, + max_wait, + grace) without the resource reaching a terminal status.

    The remote resource is left as it is: the caller decides whether to stop it (a guarded wait of a training job
    stops it instead and returns it Stopped, classified timeout, unless ``stop_at_wait_bound`` is false).
    """
