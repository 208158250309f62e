"""What a wait guards a running job against: its budget, its wait bound and a stall, on every backend alike.

A backend's wait observes its job (when it started, how many seconds are billable so far, when it last wrote a log
line or a metric) and asks a `Watchdog` whether a guard has tripped; the wait then stops the job and the result
carries the `Tripped` guard, which the failure classifier reads (`budget`, `infrastructure` for a stall, `timeout`
for the bound). The decisions live here, once; the backends only observe and stop:

- budget: the billable seconds so far x the job's instances' price per hour reach what the run may still spend
  (``max_cost_usd`` less what earlier attempts cost);
- wait bound: ``max_run`` (+ ``max_wait`` for spot) + ``wait_grace_seconds`` after the job's own start, so a
  re-attached wait (an Airflow retry, a second caller) gets no fresh bound;
- stall: no new log line and no new metric for ``stall_timeout`` seconds once the job runs its script (an NCCL hang
  or EFA falling back to TCP prints nothing and fails nothing).

Every wait applies them through the same per-poll step, `act` (look, decide, say, stop), on a watch the backend hands
out (`Backend.watch`: an object with ``look()`` and ``tripped``): the backend's own guarded wait, the Airflow trigger
and the worker's poll alike, so a deferred job is stopped for the same reasons as a waited one.

Standard library only: the Airflow trigger and the KFP components import it, and `JobGuards` travels as JSON.

Function-local imports (DAG-parse path): the operators import the guards' names; the states load when a guard acts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

BUDGET = "budget"
STALLED = "stalled"
WAIT_BOUND = "wait_bound"
KINDS = (BUDGET, STALLED, WAIT_BOUND)
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass(frozen=True)
class JobGuards:
    """The guards of one job's wait. None turns a guard off; the wait bound is always on (it only stops the job when
    ``stop_at_bound``; otherwise the wait gives up and leaves the job running)."""

    budget_usd: float | None = None  # what this job may spend (the run's max_cost_usd less earlier attempts)
    hourly_usd: float | None = None  # the job's instances together, per hour (the catalog's on-demand prices)
    stall_timeout: float | None = None
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    stop_at_bound: bool = True
    max_run: float | None = None  # None: the job's own StoppingCondition (or the status record's spec)
    max_wait: float | None = None

    @classmethod
    def from_spec(cls, spec: Any, *, budget_usd: float | None = None, hourly_usd: float | None = None) -> JobGuards:
        """The guards a job spec asks for; ``budget_usd`` is what is left of ``max_cost_usd`` for this attempt."""
        return cls(budget_usd=budget_usd, hourly_usd=hourly_usd,
                   stall_timeout=getattr(spec, "stall_timeout", None),
                   grace_seconds=float(getattr(spec, "wait_grace_seconds", DEFAULT_GRACE_SECONDS)),
                   stop_at_bound=bool(getattr(spec, "stop_at_wait_bound", True)),
                   max_run=getattr(spec, "max_run", None),
                   max_wait=getattr(spec, "max_wait", None) if getattr(spec, "use_spot_instances", False) else None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> JobGuards:
        known = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in (data or {}).items() if key in known})

    def bound_seconds(self, max_run: float | None = None, max_wait: float | None = None) -> float:
        """max_run (+ max_wait) + grace: how long after its own start a job may be waited for."""
        from trainops.backends.states import wait_bound_seconds

        run = self.max_run if self.max_run is not None else (max_run or 86400)
        wait = self.max_wait if self.max_wait is not None else max_wait
        return wait_bound_seconds(run, wait, self.grace_seconds)


@dataclass(frozen=True)
class Observation:
    """One look at a running job. Times are seconds since the epoch; None: not known (yet)."""

    now: float
    started: float | None = None  # the job's own start (SageMaker: TrainingStartTime, else CreationTime)
    running_since: float | None = None  # since when the script should be printing (its Training status)
    billable_seconds: float | None = None  # so far
    last_activity: float | None = None  # the newest log line or metric
    max_run: float | None = None  # the job's own limits, where the guards have none
    max_wait: float | None = None


@dataclass(frozen=True)
class Tripped:
    """A guard that tripped: which (`KINDS`), and the sentence the job's result and log carry."""

    kind: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def usd(amount: float | None) -> str:
    """$12.34, or $0.0002 for the sums a test budget deals in (a cent would read as $0.00)."""
    if amount is None:
        return "unknown"
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def cost_so_far(guards: JobGuards, billable_seconds: float | None) -> float | None:
    """The job's billable cost so far in USD (None without a price or a duration)."""
    if guards.hourly_usd is None or billable_seconds is None:
        return None
    return round(max(0.0, float(billable_seconds)) * guards.hourly_usd / 3600.0, 6)


class Watchdog:
    """Decides, at each look, whether a guard has tripped; the first one that trips is kept (a job is stopped once,
    for one reason)."""

    def __init__(self, guards: JobGuards):
        self.guards = guards
        self.tripped: Tripped | None = None
        self.spent: float | None = None

    def check(self, seen: Observation) -> Tripped | None:
        """The guard that trips at this look (None: none; a guard that tripped earlier is not reported again)."""
        if self.tripped is not None:
            return None
        self.spent = cost_so_far(self.guards, seen.billable_seconds)
        found = self._budget(seen) or self._stall(seen) or self._bound(seen)
        self.tripped = found
        return found

    def _budget(self, seen: Observation) -> Tripped | None:
        budget = self.guards.budget_usd
        if budget is None or self.spent is None or self.spent < budget:
            return None
        return Tripped(BUDGET, f"budget: billable cost {usd(self.spent)} reached the {usd(budget)} left of "
                               f"max_cost_usd ({seen.billable_seconds:.0f} s at ${self.guards.hourly_usd:.4f}/h)")

    def _stall(self, seen: Observation) -> Tripped | None:
        limit = self.guards.stall_timeout
        if not limit or seen.running_since is None:
            return None
        since = max(seen.running_since, seen.last_activity or 0.0)
        quiet = seen.now - since
        if quiet < limit:
            return None
        return Tripped(STALLED, f"stalled: no new log line or metric for {quiet:.0f} s (stall_timeout {limit:g} s)")

    def _bound(self, seen: Observation) -> Tripped | None:
        if seen.started is None:
            return None
        bound = self.guards.bound_seconds(seen.max_run, seen.max_wait)
        waited = seen.now - seen.started
        if waited < bound:
            return None
        left = "" if self.guards.stop_at_bound else "; left running (stop_at_wait_bound: false)"
        return Tripped(WAIT_BOUND, f"wait bound: {waited:.0f} s since the job's start passed max_run + max_wait + "
                                   f"wait_grace_seconds ({bound:.0f} s){left}")

    def remaining(self, seen: Observation) -> float | None:
        """Seconds until the wait bound passes (None before the job's start is known)."""
        if seen.started is None:
            return None
        return seen.started + self.guards.bound_seconds(seen.max_run, seen.max_wait) - seen.now

    def deadline(self, seen: Observation) -> float | None:
        """When the wait bound passes, in seconds since the epoch (`trainops.backends.states.job_deadline`)."""
        remaining = self.remaining(seen)
        return None if remaining is None else seen.now + remaining


class GuardWatch(Protocol):
    """What `Backend.watch` returns: one job's guards, looked at once a poll. ``look()`` observes the job, and when a
    guard trips says so and stops the job (`act`); ``tripped`` is the guard that tripped, if any."""

    @property
    def tripped(self) -> Tripped | None: ...

    def look(self) -> Tripped | None: ...


def stops(tripped: Tripped, guards: JobGuards) -> bool:
    """Whether a tripped guard stops the job (a passed wait bound only when ``stop_at_bound``: otherwise the wait
    gives up and leaves the job running)."""
    return tripped.kind != WAIT_BOUND or guards.stop_at_bound


def act(watchdog: Watchdog, seen: Observation | None, stop: Callable[[str], Any],
        log: Callable[[str], None] | None = None) -> Tripped | None:
    """One poll's guard check, the one every wait runs: the watchdog's verdict on this look; a guard that trips is
    said (``log``) and, where it `stops`, the job is stopped with the guard's sentence as the reason. Returns the
    guard that tripped at this look (None: none, or ``seen`` is None: nothing to observe yet)."""
    if seen is None:
        return None
    tripped = watchdog.check(seen)
    if tripped is None:
        return None
    stopping = stops(tripped, watchdog.guards)
    if log is not None:
        log(f"[trainops] {tripped.message}" + (": stopping the job" if stopping else ""))
    if stopping:
        try:
            stop(tripped.message)
        except Exception:
            watchdog.tripped = None  # not stopped: the next look trips and asks again (a 5xx is a failed look)
            raise
    return tripped


GUARD_PREFIXES = ("budget:", "stalled:", "wait bound:")


def stopped_by(tripped: Tripped | None, stopped: bool, failure_reason: str | None) -> Tripped | None:
    """The guard an ended job is reported with: the one that tripped, when the job ended Stopped for its reason (a job
    that failed on its own meanwhile, or was stopped first by someone else, keeps its own cause)."""
    if tripped is None or not stopped:
        return None
    if failure_reason and not failure_reason.startswith(tripped.message[:40]):
        prefix = next((item for item in GUARD_PREFIXES if tripped.message.startswith(item)), None)
        if prefix is None or not failure_reason.startswith(prefix):
            return None
    return tripped


def settle(result: Any, tripped: Tripped | None) -> Any:
    """An ended `trainops.backends.api.JobResult` with the guard that stopped it (`stopped_by`) in its details and as
    its failure reason, unless the backend reported one already (SageMaker: the job's tags; local: the stop reason):
    what a poller outside the backend's wait (the trigger, the worker's poll) returns."""
    details = dict(getattr(result, "details", None) or {})
    if details.get("guard"):
        return result
    status = getattr(result.status, "value", result.status)
    found = stopped_by(tripped, status in ("Stopped", "Stopping"), result.failure_reason)
    if found is None:
        return result
    from dataclasses import replace

    return replace(result, details={**details, "guard": found.to_dict()},
                   failure_reason=result.failure_reason or found.message)
