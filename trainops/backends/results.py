"""What the seam's calls return and carry: a job's handle, its result, an evaluation, a registered model version, a
stage's report, and what ``trainops models`` asks of a registry.

A module below `trainops.backends.api` (which re-exports every name): the objects a backend hands out for its other
job kinds (`trainops.backends.job_kinds`) speak these types without importing the seam that imports them.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainops.backends import check_backend_name
from trainops.backends.states import JobStatus
from trainops.errors import JobFailed
from trainops.spec.names import check_job_name

__all__ = ["Evaluation", "JobHandle", "JobResult", "ModelRegistry", "RegisteredVersion", "StageReport"]


@dataclass(frozen=True, init=False)
class JobHandle:
    """Enough to find a job again from any process: the backend, the job's name and where it lives.

    ``location`` is the backend's own mapping of where (local: ``workdir``, the state directory; SageMaker:
    ``region``; another backend: its namespace or cluster); ``workdir`` and ``region`` read it. ``created`` says
    whether `submit` created the job or re-attached to one that existed. A handle is checked when it is made, so a
    name like ``../x`` never reaches a path or an API call.
    """

    backend: str
    job_name: str
    created: bool
    location: Mapping[str, str]

    def __init__(self, backend: str, job_name: str, workdir: str | None = None, region: str | None = None,
                 created: bool = True, location: Mapping[str, str] | None = None) -> None:
        check_backend_name(backend)
        check_job_name(job_name)
        where = {key: str(value) for key, value in (location or {}).items() if value is not None}
        for key, value in (("workdir", workdir), ("region", region)):
            if value is not None:
                where[key] = str(value)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "job_name", job_name)
        object.__setattr__(self, "created", bool(created))
        object.__setattr__(self, "location", dict(sorted(where.items())))

    def __hash__(self) -> int:
        return hash((self.backend, self.job_name, self.created, tuple(self.location.items())))

    @property
    def workdir(self) -> str | None:
        return self.location.get("workdir")

    @property
    def region(self) -> str | None:
        return self.location.get("region")

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "job_name": self.job_name, "workdir": self.workdir, "region": self.region,
                "created": self.created, "location": dict(self.location)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobHandle:
        return cls(backend=data["backend"], job_name=data["job_name"], workdir=data.get("workdir"),
                   region=data.get("region"), created=bool(data.get("created", True)),
                   location=data.get("location") or None)


@dataclass(frozen=True)
class JobResult:
    """Where a training job stands (from `Backend.describe`) or how it ended (from `Backend.wait`).

    ``details`` holds the few values only one backend has (local: ``job_dir``, ``checkpoint_dir``, ``hosts``,
    ``output_artifact``, ``processes_left``; SageMaker: ``cost``); `to_dict` lays them flat beside the common keys.
    """

    backend: str
    job_name: str
    status: JobStatus
    secondary_status: str | None = None
    failure_reason: str | None = None
    model_artifact: str | None = None
    duration_seconds: float | None = None
    billable_seconds: int | None = None
    reattached: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status is JobStatus.COMPLETED

    def to_dict(self) -> dict[str, Any]:
        return {**self.details, "backend": self.backend, "job_name": self.job_name, "status": self.status.value,
                "secondary_status": self.secondary_status, "failure_reason": self.failure_reason,
                "model_artifact": self.model_artifact, "duration_seconds": self.duration_seconds,
                "billable_seconds": self.billable_seconds, "reattached": self.reattached}

    def raise_for_status(self) -> JobResult:
        """Return self when the job completed or still runs; raise `JobFailed` (carrying ``result``, the dict)
        when it failed or was stopped."""
        if self.status.outcome == "failure":
            error = JobFailed(f"training job {self.job_name} ended {self.status.value}: "
                              f"{self.failure_reason or 'no reason given'}")
            error.result = self.to_dict()  # type: ignore[attr-defined]
            raise error
        return self


@dataclass(frozen=True)
class Evaluation:
    """What a backend's evaluation produced: the script's metrics and files (the gates are the evaluate step's).

    ``output_dir`` is a local directory or an S3 prefix; ``files`` (relative to it), ``report`` and ``plots`` are
    known where the backend lists the output (local); ``job_name`` is the processing job's (SageMaker).
    """

    backend: str
    metrics: dict[str, float]
    output_dir: str = ""
    metrics_path: str = ""
    files: list[str] = field(default_factory=list)
    report: str | None = None
    plots: list[str] = field(default_factory=list)
    job_name: str | None = None
    duration_seconds: float | None = None


@dataclass(frozen=True)
class RegisteredVersion:
    """A model version in a registry (local directory or the SageMaker Model Registry)."""

    backend: str
    group: str
    version: int | None
    approval_status: str
    model_artifact: str | None
    metrics: dict[str, Any]
    location: str  # the version's directory locally, the model package ARN on SageMaker
    champion: bool = False  # whether this version is now the group's champion
    created: Any = None
    job_name: str | None = None
    already_registered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "group": self.group, "version": self.version,
                "approval_status": self.approval_status, "model_artifact": self.model_artifact,
                "metrics": dict(self.metrics), "champion": self.champion, "created": self.created,
                "job_name": self.job_name, "location": self.location, "already_registered": self.already_registered}


class StageReport(abc.ABC):
    """What every backend's `Backend.stage` returns (local: files copied into a directory standing for the FSx
    mount; SageMaker: an FSx import task). Each backend's report adds its own fields; `to_dict` is small JSON (an
    XCom value, a KFP output), which the stage step returns."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the report."""


class ModelRegistry(Protocol):
    """What ``trainops models`` does with a backend's registry (`Backend.model_registry`). Entries are the
    backend's own records (with ``group``, ``version``, ``approval_status``, ``metrics``, ``to_dict()``)."""

    root: Any

    def list(self, group: str | None = None) -> list[Any]: ...

    def damaged(self, group: str | None = None) -> builtins.list[tuple[str, int, str]]: ...

    def get(self, group: str, version: int | None = None) -> Any: ...

    def champion(self, group: str) -> Any: ...

    def set_approval(self, group: str, version: int, status: str) -> Any: ...
