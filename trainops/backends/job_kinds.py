"""The other kinds of job a pipeline runs beside training, as objects a backend hands out over typed requests.

A backend that evaluates models returns an `Evaluations` from `Backend.evaluations`; one that stages data, a
`Staging` from `Backend.staging`; one with a model registry, a `Registry` from `Backend.registry`. A backend without
one returns None (the default), and a front end that needs it refuses the step naming the backend and what it can do
(`needed`). A kind whose jobs can be started and followed without waiting for them (an Airflow task that defers, a
worker that holds the handle for ``on_kill``) also hands out a `Started` (``started()``); the one trigger looks at any
kind of job through `Backend.job_kind` (a `FollowedJobs`: one look and a stop), typed, by the kind's name.

Each request carries the common arguments as fields and the backend's own settings (SageMaker's role and image, an
FSx path's options) in ``settings``, which the object's ``SETTINGS`` declares: one it does not take is a `SpecError`
naming it (`checked_settings`). Standard library and trainops' light modules only: the Airflow operators import it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.backends.results import (
        Evaluation,
        JobHandle,
        JobResult,
        ModelRegistry,
        RegisteredVersion,
        StageReport,
    )

class Unsupported(SpecError):
    """A backend was asked for a kind of job it does not hand out (`Backend.evaluations`, `staging`, `registry`)."""


RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")
Sink = Callable[[str, bool], None]


@dataclass(frozen=True)
class EvaluationRequest:
    """An evaluation script run on a model: its code, the model, its input channels and where it writes.
    ``settings``: the backend's own (`Evaluations.SETTINGS`)."""

    entry_point: str
    source_dir: Any
    model_artifact: Any
    channels: Mapping[str, Any]
    output_dir: Any
    hyperparameters: Mapping[str, Any] | None = None
    environment: Mapping[str, str] | None = None
    timeout: float | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StageRequest:
    """Data put where training reads it: from ``source`` to ``destination``; ``settings``: the backend's own
    (`Staging.SETTINGS`: workers, delete, an FSx S3 prefix...)."""

    source: str | None
    destination: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RegistrationRequest:
    """A model version recorded in a registry, once per training job; ``settings``: the backend's own
    (`Registry.SETTINGS`)."""

    model_artifact: Any
    metrics: Mapping[str, Any]
    group: str
    approval: str
    spec_data: Mapping[str, Any] | None = None
    description: str = ""
    job_name: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)


class FollowedJobs(Protocol):
    """A kind of job a poller follows: one look (a `JobResult` read through the kind's states) and a stop (only
    that job; stopping one that ended is no error). The backend itself is one (its training jobs)."""

    def describe(self, handle: JobHandle) -> JobResult: ...

    def stop(self, handle: JobHandle, reason: str = ...) -> str: ...


class Started(abc.ABC, Generic[RequestT, ResultT]):
    """Jobs of a kind started without waiting for them: `start` (the same job name re-attaches), `describe` and
    `stop` (a `FollowedJobs`), and `result` once one ended."""

    @abc.abstractmethod
    def start(self, request: RequestT, job_name: str | None = None) -> JobHandle:
        """Start the job called ``job_name`` (or find it started already; None: the backend names it) and return
        its handle."""

    @abc.abstractmethod
    def describe(self, handle: JobHandle) -> JobResult:
        """Where the job stands now (one look)."""

    @abc.abstractmethod
    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """Ask the job to stop; a one-line account."""

    @abc.abstractmethod
    def result(self, handle: JobHandle) -> ResultT:
        """What the ended job produced; raises `JobFailed` when it did not complete."""


def checked_settings(given: Mapping[str, Any], known: frozenset[str], what: str, backend: str,
                     source: str) -> dict[str, Any]:
    """``given`` without None values; a key outside ``known`` is a `SpecError` naming it and the settings there are."""
    chosen = {key: value for key, value in given.items() if value is not None}
    unknown = sorted(set(chosen) - known)
    if unknown:
        have = ", ".join(sorted(known)) or "none"
        raise SpecError([Problem(key, f"is not a setting of {what} on the {backend} backend (its settings: {have}); "
                                      "leave it out or choose the backend it belongs to") for key in unknown], source)
    return chosen


class Evaluations(abc.ABC):
    """How a backend evaluates models (the gates are the evaluate step's, not the backend's)."""

    #: The backend's own settings an `EvaluationRequest` may carry.
    SETTINGS: frozenset[str] = frozenset()

    @abc.abstractmethod
    def run(self, request: EvaluationRequest, *, sink: Sink | None = None) -> Evaluation:
        """Run the evaluation and read its metrics back (``sink``: its output lines, ``(line, from_stderr)``)."""

    def started(self) -> Started[EvaluationRequest, Evaluation] | None:
        """Evaluations started without waiting for them (None: this backend runs them where the caller is)."""
        return None


class Staging(abc.ABC):
    """How a backend puts data where its training jobs read it."""

    #: The backend's own settings a `StageRequest` may carry.
    SETTINGS: frozenset[str] = frozenset()

    @abc.abstractmethod
    def run(self, request: StageRequest) -> StageReport:
        """Stage the data and report how (``to_dict()``: small JSON); a failed file raises `JobFailed`."""

    def started(self) -> Started[StageRequest, StageReport] | None:
        """Staging started without waiting for the part that runs away from the caller (None: none)."""
        return None


class Registry(abc.ABC):
    """A backend's model registry."""

    #: The backend's own settings a `RegistrationRequest` may carry.
    SETTINGS: frozenset[str] = frozenset()

    @abc.abstractmethod
    def register(self, request: RegistrationRequest) -> RegisteredVersion:
        """Record the version (once per training job: a second call returns the first's, ``already_registered``)."""

    @abc.abstractmethod
    def champion(self, group: str) -> RegisteredVersion | None:
        """The group's latest Approved version, or None."""

    def browse(self) -> ModelRegistry | None:
        """The registry itself, for listing and approving versions (``trainops models``; None: not browsable)."""
        return None


#: How messages say each kind a backend may lack.
WHAT = {"evaluations": "evaluate models", "started evaluations": "start an evaluation without waiting",
        "staging": "stage data", "started staging": "start staging without waiting", "registry": "register models",
        "browse": "browse a model registry", "metrics": "report a job's metrics"}

T = TypeVar("T")


def needed(found: T | None, backend: Any, kind: str) -> T:
    """``found`` (a job-kind object a backend handed out), or `Unsupported` naming the backend, what it cannot do
    (`WHAT`) and what it can."""
    if found is not None:
        return found
    have = ", ".join(WHAT[name] for name in kinds_of(backend)) or "nothing more"
    raise Unsupported(Problem("backend", f"the {backend.name} backend cannot {WHAT.get(kind, kind)} (it can: "
                                         f"{have}); choose a backend that can"))


def kinds_of(backend: Any) -> list[str]:
    """The job kinds a backend (opened) hands out, as `WHAT` names them."""
    found = []
    evaluations, staging, registry = backend.evaluations(), backend.staging(), backend.registry()
    if evaluations is not None:
        found += ["evaluations"] + (["started evaluations"] if evaluations.started() is not None else [])
    if staging is not None:
        found += ["staging"] + (["started staging"] if staging.started() is not None else [])
    if registry is not None:
        try:
            browsable = registry.browse() is not None
        except SpecError:  # it has one, but opening it needs a setting this backend was not given (slurm's shared_dir)
            browsable = True
        found += ["registry"] + (["browse"] if browsable else [])
    return found


def started_evaluations(backend: Any) -> Started[EvaluationRequest, Evaluation]:
    """The evaluations a backend starts without waiting (`Unsupported`, naming it, when it has none)."""
    return needed(needed(backend.evaluations(), backend, "evaluations").started(), backend, "started evaluations")


def started_staging(backend: Any) -> Started[StageRequest, StageReport]:
    """The staging a backend starts without waiting (`Unsupported`, naming it, when it has none)."""
    return needed(needed(backend.staging(), backend, "staging").started(), backend, "started staging")
