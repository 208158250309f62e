"""The backend seam: what every backend does, the small typed results it returns, and `get_backend`.

A front end (the CLI, the pipeline runner, an Airflow operator, a KFP component) holds a backend and a `JobHandle`:

    backend = get_backend("sagemaker", region="eu-west-1")
    handle = backend.submit(spec, "digits-1")      # create, or re-attach to a job of that name (`place_job`)
    result = backend.wait(handle)                  # a JobResult; on_kill / SIGTERM / Ctrl-C call backend.stop(handle)

`get_backend` is the only place the strings ``"local"`` and ``"sagemaker"`` become objects; nothing else compares
a backend name. Results are frozen dataclasses whose ``to_dict()`` is small JSON (an XCom value, a KFP output).

This module is imported by DAG files (through the operators): the standard library and trainops' own light modules
only; each backend's heavy imports (boto3, the local process machinery) happen inside its methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from trainops.backends.states import JobStatus
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.names import check_job_name, with_suffix

if TYPE_CHECKING:
    from trainops.steps.evaluate import EvaluationResult

#: The backends `get_backend` knows, in the order messages list them.
BACKENDS: tuple[str, ...] = ("local", "sagemaker")
#: What `submit` does when a job of the name exists: follow it, refuse, or create a suffixed copy.
IF_EXISTS: tuple[str, ...] = ("reattach", "fail", "new")
#: Suffixed names tried (``<name>-2`` ... ``<name>-99``) before giving up.
MAX_SUFFIX = 99

Log = Callable[[str], None]


def check_choice(value: str, choices: tuple[str, ...], field: str) -> str:
    """Refuse a value outside ``choices`` with a message naming the field and the valid values."""
    if value not in choices:
        raise SpecError(Problem(field, f"{value!r} is not one of {', '.join(choices)}"))
    return value


@dataclass(frozen=True)
class JobHandle:
    """Enough to find a job again from any process: the backend, the job's name and where it lives.

    ``created`` says whether `submit` created the job or re-attached to one that existed. A handle is checked when it
    is made, so a name like ``../x`` never reaches a path or an API call.
    """

    backend: str
    job_name: str
    workdir: str | None = None  # local: the state directory ($TRAINOPS_HOME when None)
    region: str | None = None  # sagemaker: the region (boto3's own choice when None)
    created: bool = True

    def __post_init__(self) -> None:
        check_choice(self.backend, BACKENDS, "backend")
        check_job_name(self.job_name)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "job_name": self.job_name, "workdir": self.workdir, "region": self.region,
                "created": self.created}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobHandle:
        return cls(backend=data["backend"], job_name=data["job_name"], workdir=data.get("workdir"),
                   region=data.get("region"), created=bool(data.get("created", True)))


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


@dataclass(frozen=True)
class Placement:
    """What `place_job` decided: the name to use, and the status of the job re-attached to (None: create it)."""

    job_name: str
    existing: JobStatus | None

    @property
    def reattach(self) -> bool:
        return self.existing is not None


def place_job(job_name: str, if_exists: str, lookup: Callable[[str], JobStatus | None], where: str = "") -> Placement:
    """The re-attach policy, the same on every backend.

    ``lookup(name)`` returns the status of the job of that name, or None when there is none. With ``reattach`` (the
    default) a running or completed job is followed, never duplicated; a job that failed or was stopped is retried
    under the first suffixed name (``<name>-2``, ``-3``...) that is free, or followed there when such a retry already
    runs or completed (job names can never be reused on SageMaker, and a retry is meant to run again). ``new`` always
    creates, under the first free suffixed name when the name is taken; ``fail`` refuses a taken name.
    """
    check_choice(if_exists, IF_EXISTS, "if_exists")
    check_job_name(job_name)
    status = lookup(job_name)
    if status is None:
        return Placement(job_name, None)
    if if_exists == "fail":
        raise SpecError(Problem("job_name", f"a {where + ' ' if where else ''}job named {job_name!r} exists (status "
                                            f"{status.value}): choose another name, or if_exists=reattach / new"))
    if if_exists == "reattach" and status.reattachable:
        return Placement(job_name, status)
    for attempt in range(2, MAX_SUFFIX + 1):
        candidate = with_suffix(job_name, str(attempt))
        status = lookup(candidate)
        if status is None:
            return Placement(candidate, None)
        if if_exists == "reattach" and status.reattachable:
            return Placement(candidate, status)
    raise JobFailed(f"no free job name found for copies of {job_name!r} ({MAX_SUFFIX - 1} tried): choose another name")


@runtime_checkable
class Backend(Protocol):
    """What a backend does. Both `LocalBackend` and `SageMakerBackend` implement it; front ends use nothing else.

    ``remote`` says whether jobs run away from this machine (then local paths mean nothing to them, a job has a
    console page, and its logs are the service's): front ends ask it instead of comparing backend names.
    """

    name: str
    remote: bool

    def submit(self, spec: Any, name: str, *, if_exists: str = "reattach", log: Log | None = None,
               **options: Any) -> JobHandle:
        """Create the training job (or re-attach: `place_job`); return its handle without waiting."""

    def status_of(self, name: str) -> JobStatus | None:
        """The status of the training job called ``name``, or None when there is none."""

    def describe(self, handle: JobHandle) -> JobResult:
        """Where the job stands now."""

    def wait(self, handle: JobHandle, *, log: Log | None = None) -> JobResult:
        """Wait until the job ends (bounded: `trainops.backends.states.wait_bound_seconds`); return how it ended."""

    def stop(self, handle: JobHandle) -> str:
        """Ask the job to stop; return a one-line account (safe from a signal handler)."""

    def logs(self, handle: JobHandle, *, follow: bool = False) -> Iterator[str]:
        """The job's log lines, each prefixed with its host."""

    def log_lines(self, handle: JobHandle, cursor: Mapping[str, Any] | None = None, *, limit: int = 1000
                  ) -> tuple[list[str], dict[str, Any]]:
        """At most ``limit`` log lines written after ``cursor`` (None: from the start), each prefixed with its host,
        and the cursor after them (small JSON): a poller (the Airflow trigger) streams a job's logs with it."""

    def render_request(self, spec: Any, job_name: str, *, launcher: str | None = None,
                       region: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request the job would be created with, secrets masked (a dry run: no call)."""

    def runs_here(self, handle: JobHandle) -> bool:
        """Whether this process runs the job (then `stop` sets a flag and `wait` returns Stopped by itself)."""

    def stop_copies(self, job_name: str, reason: str = "") -> list[tuple[str, str]]:
        """Stop the job of that name and its suffixed copies, for a stop asked before a handle exists."""

    def evaluate(self, **arguments: Any) -> EvaluationResult:
        """Run an evaluation script on a model and read its metrics (no gates: `trainops.steps.evaluate`)."""

    def register(self, **arguments: Any) -> RegisteredVersion:
        """Record a model version in the backend's registry."""

    def champion(self, group: str) -> RegisteredVersion | None:
        """The group's latest Approved version, or None."""

    def stage(self, source: str, destination: str, **options: Any) -> Any:
        """Put data where training reads it; the report has ``to_dict()``."""

    def check_spec(self, spec: Any, region: str | None = None) -> None:
        """Raise `SpecError` for every problem this backend would find in the spec, before anything runs."""

    def pipeline_settings(self, spec: Any, region: str | None = None) -> dict[str, Any]:
        """What a pipeline's evaluate and register steps take from its training spec on this backend."""

    def evaluation_output(self, workdir: Any, key: str) -> str:
        """Where a pipeline's evaluation writes ("" where the backend derives it from the model)."""


def get_backend(name: str, *, source: str | None = None, **context: Any) -> Backend:
    """The backend called ``name`` (``"local"`` or ``"sagemaker"``), bound to its context.

    Context keys: ``workdir`` and ``registry_dir`` (local); ``region``, ``client_factory`` and ``poll_seconds``
    (SageMaker). Keys of the other backend are ignored, so a front end may pass all it knows; any other key, or any
    other name, is a `SpecError` naming the field and the valid values (``source``: what the error says was wrong,
    e.g. ``"evaluation"``).
    """
    from trainops.backends.local.backend import LocalBackend
    from trainops.backends.sagemaker.backend import SageMakerBackend

    classes = {"local": LocalBackend, "sagemaker": SageMakerBackend}
    if name not in classes:
        raise SpecError(Problem("backend", f"{name!r} is not a backend; use one of {', '.join(BACKENDS)}"), source)
    known = set().union(*(cls.CONTEXT for cls in classes.values()))
    unknown = sorted(set(context) - known)
    if unknown:
        raise SpecError([Problem(key, f"is not a backend setting; use one of {', '.join(sorted(known))}")
                         for key in unknown], source)
    backend = classes[name]
    return backend(**{key: value for key, value in context.items() if key in backend.CONTEXT})
