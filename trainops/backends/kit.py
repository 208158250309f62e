"""The backend kit: trainops' public API for writing a backend (an engine that runs training jobs).

Everything a backend of another package needs is importable from here, and only from here; the modules these names
live in are trainops' own and may change. A backend written against this module alone (the toy of
``tests/support/toy_backend``, docs/writing-a-backend.md) keeps working across trainops releases that keep this
module's names.

What a backend writes (the core of `Backend`, typed on `JobSpec` and its own options type):

- ``name``, ``Options`` (its `BackendOptions` subclass), ``CONTEXT`` (its constructor's settings), and optionally
  ``EXTRAS``, ``NEEDS``, ``WAIT_GRACE_SECONDS``;
- `Backend.dry_run` (every problem of a spec, nothing created), `Backend.create` (create a job the re-attach policy
  said is free), `Backend.status_of` (the policy's look by name), `Backend.stop`, `Backend.render_request`,
  `Backend.location` (what a handle carries to find the job again);
- for jobs followed by looking at them, subclass `PolledBackend` and write `PolledBackend.look` (a `Look`: the
  `JobResult` and the guards' `Observation`) and `PolledBackend.read_logs`: the wait, the guards (wait bound,
  ``max_cost_usd``, ``stall_timeout``), failed-look handling, the log cursor and ``logs --follow`` come with it.

The other job kinds a pipeline runs are objects a backend hands out over typed requests, None when it has none:
`Backend.evaluations` (an `Evaluations`: ``run(EvaluationRequest)``), `Backend.staging` (a `Staging`:
``run(StageRequest)``), `Backend.registry` (a `Registry`: ``register(RegistrationRequest)``, ``champion``, ``browse``);
a kind whose jobs can be started without waiting also hands out a `Started` (``start``, ``describe``, ``stop``,
``result``), which the Airflow trigger follows (`Backend.job_kind`).

`trainops.backends.testing` is the conformance suite a backend package runs in its own tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainops.backends.api import (
    IF_EXISTS,
    MAX_SUFFIX,
    Backend,
    Evaluation,
    JobHandle,
    JobResult,
    Log,
    ModelRegistry,
    OptionsT,
    Placement,
    RegisteredVersion,
    StageReport,
    Unsupported,
    check_choice,
    place_job,
)
from trainops.backends.failures import STAGES, FailureEvidence, Rule
from trainops.backends.guards import (
    BUDGET,
    STALLED,
    WAIT_BOUND,
    GuardWatch,
    JobGuards,
    Observation,
    Tripped,
    Watchdog,
    act,
    cost_so_far,
    settle,
    usd,
)
from trainops.backends.job_kinds import (
    EvaluationRequest,
    Evaluations,
    FollowedJobs,
    RegistrationRequest,
    Registry,
    StageRequest,
    Staging,
    Started,
    checked_settings,
)
from trainops.backends.looks import JobOutOfSight, LookFailed, LookPolicy, Looks, is_failed_look
from trainops.backends.options import BackendOptions, front_end_option_problems, path_problems
from trainops.backends.polled import Look, PolledBackend, Watch
from trainops.backends.states import JobStatus, WaitTimedOut
from trainops.backends.vocabulary import (
    FRONT_END_OPTIONS,
    PriceLookup,
    Vocabulary,
    classify_result,
    register,
    vocabulary_of,
)
from trainops.errors import JobFailed, Problem, SpecError, TrainopsError
from trainops.home import trainops_home
from trainops.runtime.catalog import InstanceType
from trainops.runtime.catalog import lookup as instance_type
from trainops.spec.rule_registry import rule as spec_rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

__all__ = [
    # the seam
    "Backend", "BackendOptions", "path_problems", "OptionsT", "JobHandle", "JobResult", "JobStatus", "JobSpec", "Log",
    "IF_EXISTS", "MAX_SUFFIX", "Placement", "place_job", "check_choice",
    # jobs followed by looking at them
    "PolledBackend", "Look", "Watch", "Observation",
    # the guards
    "JobGuards", "Tripped", "Watchdog", "GuardWatch", "act", "settle", "cost_so_far", "usd", "BUDGET", "STALLED",
    "WAIT_BOUND",
    # failed looks
    "LookFailed", "JobOutOfSight", "Looks", "LookPolicy", "is_failed_look",
    # the other job kinds: objects a backend hands out (None: it has none), over typed requests
    "Evaluations", "EvaluationRequest", "Evaluation", "Staging", "StageRequest", "StageReport", "Registry",
    "RegistrationRequest", "RegisteredVersion", "ModelRegistry", "Started", "FollowedJobs", "checked_settings",
    # errors
    "SpecError", "Problem", "JobFailed", "WaitTimedOut", "Unsupported", "TrainopsError",
    # each backend's vocabulary (issue 43 item 2): the typed record it declares (its status table, failure rules
    # over typed evidence, price, spec rules, the front-end options it takes)
    "Vocabulary", "register", "vocabulary_of", "classify_result", "FRONT_END_OPTIONS", "PriceLookup", "Rule",
    "STAGES", "FailureEvidence",
    # the front-end options' checks (a mapping of channels, a safe checkpoint key), for an options type that takes them
    "front_end_option_problems",
    # a spec rule of the engine's own: `@spec_rule("instance_type", binds="<set>")` on a function of the spec that
    # yields Problems, the set named in the vocabulary's ``spec_rules`` (it binds only where the engine's jobs run)
    "spec_rule",
    # instance types (their price) and where trainops keeps its files
    "InstanceType", "instance_type", "trainops_home",
]


def __getattr__(name: str) -> Any:
    """`JobSpec` on first use: the spec's models import pydantic, which importing the kit does not need."""
    if name == "JobSpec":
        from trainops.spec.job import JobSpec

        return JobSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
