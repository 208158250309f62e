"""The backend seam: the `Backend` base class every backend subclasses, the typed results it returns, the one
re-attach policy, and `get_backend` (the registry: `trainops.backends`).

A front end (the CLI, the pipeline runner, an Airflow operator, a KFP component) holds a backend and a `JobHandle`:

    backend = get_backend("sagemaker", region="eu-west-1")
    handle = backend.submit(spec, "digits-1", options=SageMakerOptions(launcher="toolkit"))  # or re-attach
    result = backend.wait(handle)                  # a JobResult; on_kill / SIGTERM / Ctrl-C call backend.stop(handle)

Only the registry turns a backend name into an object; nothing else compares a backend name. Results are frozen
dataclasses whose ``to_dict()`` is small JSON (an XCom value, a KFP output). This module imports no backend: each
backend imports it.

A DAG file's parse imports nothing of `trainops.backends` (an operator imports the seam when its task runs). This
module imports the standard library and trainops' own light modules (the spec's loader, with pydantic, only when a
job is submitted); each backend's heavy imports (boto3, the local process machinery) come with that backend's
modules, which the registry loads by name.
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from trainops.backends import builtin_names
from trainops.backends import get_backend as from_registry
from trainops.backends.job_kinds import (
    Evaluations,
    FollowedJobs,
    Registry,
    Staging,
    Unsupported,
    started_evaluations,
    started_staging,
)
from trainops.backends.looks import Looks
from trainops.backends.options import (
    BackendOptions,
    LocalOptions,
    SageMakerOptions,
    coerce_all,
    declared_types,
    unknown_settings,
)
from trainops.backends.results import Evaluation, JobHandle, JobResult, ModelRegistry, RegisteredVersion, StageReport
from trainops.backends.states import JobStatus
from trainops.backends.vocabulary import Vocabulary
from trainops.backends.vocabulary import neutral as vocabulary_neutral
from trainops.errors import JobFailed, Problem, SpecError
from trainops.job_index import remember_job
from trainops.spec.names import check_job_name, with_suffix

if TYPE_CHECKING:  # the spec's models import pydantic: a DAG file that imports the seam does not need them
    from trainops.backends.guards import GuardWatch, JobGuards
    from trainops.spec.job import JobSpec

__all__ = [
    "BACKENDS", "IF_EXISTS", "JOB_KINDS", "MAX_SUFFIX", "Backend", "BackendOptions", "Evaluation",
    "JobHandle", "JobResult", "LocalOptions", "ModelRegistry", "Placement", "RegisteredVersion", "SageMakerOptions",
    "StageReport", "Unsupported", "check_choice", "get_backend", "place_job",
]

#: The built-in backends, in the order messages list them (entry points may add more: `trainops.backends`).
BACKENDS: tuple[str, ...] = builtin_names()
#: The kinds of job a handle may name, each as a poller follows it (`Backend.job_kind`): the one Airflow trigger, the
#: reschedule poke and ``on_kill`` go through `Backend.describe_job` / `Backend.stop_job` with the kind.
JOB_KINDS: dict[str, str] = {
    "training": "the backend's training jobs",
    "evaluation": "its started evaluations (SageMaker: a processing job)",
    "stage": "its started staging (SageMaker: an FSx data repository import task)",
}
#: What `submit` does when a job of the name exists: follow it, refuse, or create a suffixed copy.
IF_EXISTS: tuple[str, ...] = ("reattach", "fail", "new")
#: Suffixed names tried (``<name>-2`` ... ``<name>-99``) before giving up: the one bound of the re-attach policy,
#: used by every backend and front end that looks for a job's copies.
MAX_SUFFIX = 99

Log = Callable[[str], None]
#: The pause between two failed re-attach looks (the bounds of `trainops.backends.looks` apply).
REATTACH_LOOK_SECONDS = 10.0
#: A backend's options type (`Backend[OptionsT]`): what its `dry_run` / `create` are typed on. A front end holds a
#: bare `Backend` (any backend: its options are parsed by the backend itself, `Backend.options`).
#: (Its default, PEP 696, is for the type checker only: Python 3.10's TypeVar takes none, and it changes nothing
#: at run time.)
if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultedTypeVar

    OptionsT = DefaultedTypeVar("OptionsT", bound=BackendOptions, default=Any)
else:
    OptionsT = TypeVar("OptionsT", bound=BackendOptions)
logger = logging.getLogger(__name__)


def _print(line: str) -> None:
    print(line, flush=True)


def check_choice(value: str, choices: tuple[str, ...], field: str) -> str:
    """Refuse a value outside ``choices`` with a message naming the field and the valid values."""
    if value not in choices:
        raise SpecError(Problem(field, f"{value!r} is not one of {', '.join(choices)}"))
    return value


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


class Backend(abc.ABC, Generic[OptionsT]):
    """What a backend does; `LocalBackend` and `SageMakerBackend` subclass it, and front ends use nothing else.
    Public through `trainops.backends.kit` (docs/writing-a-backend.md).

    Its core, what every engine writes: ``name``, ``Options``, ``CONTEXT``, `dry_run`, `create`, `status_of`,
    `describe`, `wait`, `watch`, `stop`, `logs`, `log_lines`, `render_request`, `location` (a `PolledBackend`
    writes `look` and `read_logs` instead of the five that follow a job). Everything else has a default or is the
    seam's own machinery (`submit`, `options`, `settings`, `handle`, `stop_copies`, `job_kind`...).

    What differs between backends, each declares (a front end reads these, never a backend's name):

    - ``name``: its registry name.
    - ``Options``: its `BackendOptions` type (its jobs' options); ``CONTEXT``: the settings that reach it (its
      constructor's keywords). Together they are the one mapping of settings a front end hands it
      (`split_settings`; `trainops.backends.get_backend`'s ``options``); anything else is refused, named.
    - the other job kinds it has, as objects (`evaluations`, `staging`, `registry`; None: it has none, and a front
      end that needs one raises `Unsupported` naming the backend). ``RUNS_HERE``: its jobs can run in the caller's
      process (a front end that waits may run them there; elsewhere they are started and followed).
    - ``EXTRAS``: the extras of trainops (pyproject) that the place submitting and following its jobs needs
      installed (a KFP component's image, a worker): boto3 for an AWS service, torch to run jobs in the caller.
    - ``NEEDS``: the context it cannot reach a job without and where a front end finds it (a region from the AWS
      configuration); ``WAIT_GRACE_SECONDS``: what a wait allows beyond the job's own limits.
    - `links`: the pages where a person follows its jobs (none by default); `location`: where a job lives, as its
      handle carries it; `render_request`: what it would create, as a person reviews it.

    `submit` is a template method: the backend's dry run (every input problem, nothing created), then the one
    re-attach policy (`place_job`), then the backend's `create` (or `reattach`).

    A backend is generic in its options type: ``class ToyBackend(Backend[ToyOptions])`` with ``Options =
    ToyOptions`` gets its `dry_run` and `create` called with a ``ToyOptions`` (parsed from the front end's mapping),
    never a bare `BackendOptions`.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    CONTEXT: ClassVar[frozenset[str]] = frozenset()
    #: Whether its jobs can run in the caller's process (a front end that waits may run them there; elsewhere they
    #: are started and followed).
    RUNS_HERE: ClassVar[bool] = False
    EXTRAS: ClassVar[tuple[str, ...]] = ()
    #: Context this backend cannot reach a job without, and where a front end finds it when the user gave none:
    #: key -> source. ``"aws"``: the AWS configuration (an Airflow task's AWS connection; boto3's own chain
    #: elsewhere). A front end looks only at this, never at the backend's name.
    NEEDS: ClassVar[Mapping[str, str]] = {}
    #: Seconds a wait allows beyond the job's own limits (max_run, max_wait) before it gives up: what the backend
    #: spends outside them (SageMaker: provisioning, the image download, the model upload).
    WAIT_GRACE_SECONDS: ClassVar[float] = 3600.0
    #: Its engine's words (states, failure rules, price, spec rule sets): `trainops.backends.vocabulary`; None: the
    #: neutral ones (`vocabulary.neutral`).
    vocabulary: ClassVar[Vocabulary | None] = None

    #: The job options this backend was opened with (`trainops.backends.get_backend`'s ``options``); `options`
    #: lays a call's own over them.
    bound_options: BackendOptions | None = None
    #: The named backend (`trainops.backends.named_file`) this one was opened as, if any: a message telling the user
    #: how to reach the job again names it.
    named_as: str | None = None

    # --- settings: how a front end's one mapping reaches the backend ----------------------------------------
    @classmethod
    def settings(cls) -> dict[str, Any]:
        """Every setting this backend takes in its one mapping, name -> declared type: its context (how it is
        reached: the constructor's keywords in ``CONTEXT``) and its options type's fields."""
        return {**declared_types(cls.__init__, sorted(cls.CONTEXT)), **cls.Options.types()}

    @classmethod
    def split_settings(cls, values: Mapping[str, Any] | None,
                       source: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """(context, job options) of a front end's mapping, text coerced to each setting's declared type; a key
        that is neither is a `SpecError` naming it, the backend and its settings. None values: not given."""
        given = {key: value for key, value in (values or {}).items() if value is not None}
        known = cls.settings()
        problems = unknown_settings(set(given) - set(known), known, f"the {cls.name} backend")
        try:
            coerced = coerce_all({key: value for key, value in given.items() if key in known}, known,
                                 f"the {cls.name} backend", source)
        except SpecError as error:
            problems += error.problems
        if problems:
            raise SpecError(problems, source)
        context = {key: value for key, value in coerced.items() if key in cls.CONTEXT}
        return context, {key: value for key, value in coerced.items() if key not in cls.CONTEXT}

    @classmethod
    def takes(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Those of ``values`` this backend's jobs take (its options type's fields): for what a front end derives
        itself (a checkpoint key from the task's name), never for what a user gave, which is refused instead."""
        names = set(cls.Options.names())
        return {key: value for key, value in values.items() if key in names}

    def channel_sources(self) -> dict[str, str]:
        """Channel -> where this backend's jobs read it instead of the spec's own source (the local paths its
        options give), for lineage; empty: the spec's."""
        return {}

    def links(self, kind: str, name: str, location: Mapping[str, str] | None = None) -> dict[str, str]:
        """Pages where a person follows a job of ``kind`` (a key of `JOB_KINDS`, or ``"model"``: a registered
        version, by its location) called ``name``: link -> URL (``job``, ``logs``). Empty: this backend's jobs
        have no such page."""
        return {}

    # --- training jobs: the template ------------------------------------------------------------------------
    def options(self, values: BackendOptions | Mapping[str, Any] | None = None, **more: Any) -> OptionsT:
        """This backend's options (an instance of its `Options`): those it was opened with, an options object's or a
        mapping's laid over, then ``more`` (None: not given)."""
        base = self.bound_options if self.bound_options is not None else self.Options()
        if isinstance(values, BackendOptions):
            parsed = self.Options.parse(values)
            given = {name: getattr(parsed, name) for name in parsed.names()}
        else:
            given = dict(values or {})
        given.update(more)
        return cast(OptionsT, base.merged(given) if given else base)

    def submit(self, spec: JobSpec, name: str, *, if_exists: str = "reattach", log: Log | None = None,
               detached: bool = False, options: BackendOptions | Mapping[str, Any] | None = None,
               **option_values: Any) -> JobHandle:
        """Create the training job, or re-attach to the job of that name (`place_job`); return its handle without
        waiting (``detached``: the job must not depend on this process).

        Options go in ``options`` (this backend's `Options` type or a mapping) or as keywords; either way an option
        this backend does not know is a `SpecError` naming it."""
        log = log or _print
        chosen = self.options(options, **option_values)
        check_choice(if_exists, IF_EXISTS, "if_exists")
        check_job_name(name)
        from trainops.spec.loader import check_rule_sets  # function-local (heavy): pydantic; the kit loads none

        check_rule_sets(spec, (self.vocabulary or vocabulary_neutral(self.name)).spec_rules)  # the engine's own
        self.dry_run(spec, name, chosen)  # every input problem, before anything is looked up or created
        placement = place_job(name, if_exists, lambda candidate: self.looked_status(candidate, log), self.label)
        handle = (self.reattach(spec, placement, chosen, log) if placement.reattach
                  else self.create(spec, placement.job_name, chosen, detached=detached, log=log))
        remember_job(self, handle)  # the per-user index: `trainops status NAME` finds the job
        return handle

    def looked_status(self, name: str, log: Log | None = None) -> JobStatus | None:
        """`status_of` as the re-attach look makes it: a look that fails without proving anything (an endpoint that
        does not answer, a 5xx, throttling) is made again as every wait does (`trainops.backends.looks`: said on
        ``log``, given up after both bounds with `JobOutOfSight`), never read as "no job" nor raised at once; proof
        (no credentials, access denied, no such job) is not a failed look."""
        looks = Looks(f"{self.label} job {name} (whether it exists, before creating it)", log=log,
                      poll_seconds=REATTACH_LOOK_SECONDS,
                      reattach="Nothing was created by this command. Run it again once the look works: it follows "
                               "the job of that name if there is one.")
        return looks.look(lambda: self.status_of(name))

    @property
    def label(self) -> str:
        """How messages name this backend's jobs: ``a <label> job`` (``local``, ``SageMaker training``)."""
        return self.name

    @abc.abstractmethod
    def dry_run(self, spec: JobSpec, name: str, options: OptionsT) -> dict[str, Any]:
        """What `submit` would create for ``name``, without side effects (SageMaker: the CreateTrainingJob request);
        raises `SpecError` for every problem found."""

    @abc.abstractmethod
    def create(self, spec: JobSpec, name: str, options: OptionsT, *, detached: bool, log: Log) -> JobHandle:
        """Create the job ``name`` (free: `place_job` said so) and return its handle."""

    def reattach(self, spec: JobSpec, placement: Placement, options: OptionsT, log: Log) -> JobHandle:
        """The handle of the job `place_job` chose to follow."""
        status = placement.existing.value if placement.existing is not None else "unknown"
        logger.info("[trainops] re-attaching to %s job %s (%s)", self.label, placement.job_name, status)
        return self.handle(placement.job_name, created=False)

    def handle(self, job_name: str, *, created: bool = False) -> JobHandle:
        """A handle of this backend's job ``job_name`` (for a job found by name)."""
        return JobHandle(self.name, job_name, location=self.location(), created=created)

    def location(self) -> dict[str, str]:
        """Where this backend's jobs live, as a handle carries it (local: the state directory; SageMaker: the
        region); empty where the default applies."""
        return {}

    def where(self) -> str:
        """Where this backend's jobs live, for a message ("no local job X (in /root/.local/state/trainops/jobs)")."""
        return ", ".join(f"{key} {value}" for key, value in self.location().items()) or f"the {self.name} backend"

    @abc.abstractmethod
    def status_of(self, name: str) -> JobStatus | None:
        """The status of the training job called ``name``, or None when there is none (the re-attach policy's look)."""

    @abc.abstractmethod
    def describe(self, handle: JobHandle) -> JobResult:
        """Where the job stands now (one look; the one trigger polls this)."""

    @abc.abstractmethod
    def wait(self, handle: JobHandle, *, log: Log | None = None, guards: JobGuards | None = None) -> JobResult:
        """Wait until the job ends (bounded: `trainops.backends.states.wait_bound_seconds`); return how it ended.
        ``guards`` (`trainops.backends.guards.JobGuards`): the job's budget, stall watchdog and wait bound from its
        own start; a guard that trips stops the job and the result's ``guard`` says which."""

    def watch(self, handle: JobHandle, guards: JobGuards, *, log: Log | None = None) -> GuardWatch | None:
        """The guards of the job for a caller that polls it itself (the Airflow trigger, a worker's poll): a
        `trainops.backends.guards.GuardWatch` whose ``look()`` is the per-poll check `wait(guards=)` runs
        (`trainops.backends.guards.act`: observe, decide, stop). None: this backend guards only its own wait."""
        return None

    @abc.abstractmethod
    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """Ask the job to stop; return a one-line account (safe from a signal handler)."""

    @abc.abstractmethod
    def logs(self, handle: JobHandle, *, follow: bool = False) -> Iterator[str]:
        """The job's log lines, each prefixed with its host."""

    @abc.abstractmethod
    def log_lines(self, handle: JobHandle, cursor: Mapping[str, Any] | None = None, *, limit: int = 1000
                  ) -> tuple[list[str], dict[str, Any]]:
        """At most ``limit`` log lines written after ``cursor`` (None: from the start), each prefixed with its host,
        and the cursor after them (small JSON): a poller (the Airflow trigger) streams a job's logs with it."""

    @abc.abstractmethod
    def render_request(self, spec: JobSpec, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any] | str:
        """What `submit` would create for ``job_name``, as a person reviews it, secrets masked (a dry run: nothing
        is called): a mapping (shown as JSON; local and SageMaker: the CreateTrainingJob request) or a text (a
        batch script). ``options`` are laid over those the backend was opened with."""

    def render_summary(self, rendered: dict[str, Any] | str, spec: JobSpec) -> dict[str, Any]:
        """The few lines of what `render_request` rendered for ``spec`` that a reviewer looks at first (small JSON:
        an XCom value)."""
        return {"rendered": rendered if isinstance(rendered, str) else sorted(rendered)}

    def status_record(self, handle: JobHandle) -> dict[str, Any]:
        """Everything the backend knows of the job, for ``trainops status`` (default: the result's dict)."""
        return self.describe(handle).to_dict()

    def runs_here(self, handle: JobHandle) -> bool:
        """Whether this process runs the job (then `stop` sets a flag and `wait` returns Stopped by itself)."""
        return False

    def stop_copies(self, job_name: str, reason: str = "Stopped by the user") -> list[tuple[str, str]]:
        """Stop the job of that name and each suffixed copy the re-attach policy may have created (``-2``, ``-3``
        ... up to `MAX_SUFFIX`), for a stop asked before a handle exists; (name, what happened) for each one found.
        The copies end at the first name with no job."""
        found = []
        for number in range(1, MAX_SUFFIX + 1):
            name = job_name if number == 1 else with_suffix(job_name, str(number))
            if self.status_of(name) is None:
                break
            found.append((name, self.stop(self.handle(name), reason)))
        return found

    # --- any kind of job: the trigger's look and on_kill's stop ----------------------------------------------
    def job_kind(self, kind: str = "training") -> FollowedJobs:
        """The jobs of ``kind`` (a key of `JOB_KINDS`) as a poller follows them: this backend's training jobs, or
        the `Started` evaluations / staging it hands out; `Unsupported` when it starts none of that kind."""
        check_choice(kind, tuple(JOB_KINDS), "kind")
        if kind == "training":
            return self
        return started_evaluations(self) if kind == "evaluation" else started_staging(self)

    def describe_job(self, handle: JobHandle, kind: str = "training") -> JobResult:
        """Where a job of ``kind`` stands now: one look (`job_kind`)."""
        return self.job_kind(kind).describe(handle)

    def stop_job(self, handle: JobHandle, kind: str = "training", reason: str = "Stopped by the user") -> str:
        """Ask the job of ``kind`` to stop (only that one: the handle's); a one-line account. Stopping one that
        ended already is not an error."""
        return self.job_kind(kind).stop(handle, reason)

    def next_look_seconds(self, handle: JobHandle, result: JobResult, interval: float) -> float:
        """How long a poller (the Airflow trigger) waits before its next look at a job that ``result`` says is still
        running, given its own ``interval``: sooner where a look is cheap or the job is about to end, so a deferred
        task ends within seconds of its job (default: the interval)."""
        return interval

    def check_spec(self, spec: JobSpec, region: str | None = None,
                   options: BackendOptions | Mapping[str, Any] | None = None) -> None:
        """Raise `SpecError` for every problem this backend would find in the spec with ``options`` (laid over those
        it was opened with: `options`), before anything runs (default: the dry run)."""
        self.dry_run(spec, "check", self.options(options))

    # --- the other job kinds: objects the backend hands out (`trainops.backends.job_kinds`) ---------------------
    def evaluations(self) -> Evaluations | None:
        """How this backend evaluates models (None: it does not)."""
        return None

    def staging(self) -> Staging | None:
        """How this backend stages data (None: it does not)."""
        return None

    def registry(self) -> Registry | None:
        """This backend's model registry (None: it has none)."""
        return None

    # --- pipeline defaults ----------------------------------------------------------------------------------
    def pipeline_settings(self, spec: JobSpec | Callable[[], JobSpec], region: str | None = None) -> dict[str, Any]:
        """What a pipeline's evaluate and register steps take from its training spec on this backend (``spec`` may
        be a function returning it: read only by the backends that need it)."""
        return {}

    def evaluation_output(self, workdir: str | os.PathLike[str] | None, key: str,
                          model_artifact: str | None = None) -> str:
        """Where a pipeline's evaluation writes: keyed by ``key``, or beside ``model_artifact`` where the backend
        writes there ("" when that backend is given no model: it derives the place when it runs)."""
        return ""


def get_backend(name: str | Backend | None = None, *, options: Mapping[str, Any] | None = None,
                source: str | None = None, **context: Any) -> Backend:
    """The backend called ``name``, bound to its settings, or ``name`` itself when it is a backend already opened
    (settings given beside it refused, naming them): `trainops.backends.get_backend` (the registry)."""
    return from_registry(name, options=options, source=source, **context)
