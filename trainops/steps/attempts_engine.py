"""The attempts engine: what follows an ended attempt of a train step, decided in one place for every front end.

An attempt ends; the engine classifies it (the failure rules of the backend that ran it), prices it, and decides:
`Retry` (the next attempt's number and job name, the budget it is paid from, the backoff before it), `Fail` (the
class and evidence, and why no retry could be paid for when the run's ``max_cost_usd`` was the reason) or `Done`
(it completed, or runs on and was not waited for). It holds the retry budgets per failure class
(`trainops.spec.retries.RetryBudgets`), the attempts' names (``<name>``, ``<name>-2``, ...), their cost over every
attempt, and what a guard's outcome means (a stopped job is classified by its guard; a wait bound that left the job
running is a ``timeout``, never retried).

It makes no call and holds no backend, so the same endings give the same decisions and the same job names whichever
front end drives it: `trainops.steps.attempts.run_attempts` runs attempts one after another in its process (the CLI,
the pipeline runner, the KFP train component, the Airflow operator in its worker), and the Airflow operator runs each
attempt as a deferral and hands the engine the trigger's event (`trainops.operators.training`). Between two
deferrals its state is `AttemptsEngine.used` (small JSON in the deferral's kwargs); the attempts that ended are found
again by name, so a triggerer restart or a task retry never starts an attempt twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainops.backends.failures import RetryBudgets, Verdict
from trainops.backends.vocabulary import classify_result, vocabulary_of
from trainops.spec.names import with_suffix
from trainops.spec.retries import BUDGET, TIMEOUT

#: The evidence of a wait that gave up on its bound and left the job running (``stop_at_wait_bound: false``).
LEFT_RUNNING = "the wait bound passed (stop_at_wait_bound: false): the job was left running"


def attempt_name(job_name: str, number: int) -> str:
    """The job name of attempt `number` (1-based): the step's name, then `<name>-2`, `<name>-3`, ..."""
    if number <= 1:
        return job_name

    return with_suffix(job_name, str(number))


def attempt_number(job_name: str, name: str) -> int | None:
    """Which attempt of `job_name` the job `name` is (`attempt_name` read back); None when it is none of them."""
    if name == job_name:
        return 1
    tail = name.rpartition("-")[2]
    if tail.isdigit() and int(tail) >= 2 and attempt_name(job_name, int(tail)) == name:
        return int(tail)
    return None


@dataclass(frozen=True)
class Pricing:
    """What prices an attempt: the run's instances (one type, or None for mixed groups) and region, worked out once
    per run from its forecast (`of_forecast`)."""

    instance_type: str | None = None
    instance_count: int = 1
    region: str | None = None

    @classmethod
    def of_forecast(cls, planned: Any) -> Pricing:
        """From a `trainops.steps.forecast.Forecast`: its instances (mixed groups are priced by type only when every
        group has the same type) and its region."""
        kinds = {item["instance_type"] for item in planned.instances}
        count = sum(int(item["instance_count"]) for item in planned.instances)
        return cls(kinds.pop() if len(kinds) == 1 else None, count or 1, planned.region)


def attempt_cost(result: Mapping[str, Any], *, instance_type: str | None = None, instance_count: int = 1,
                 region: str | None = None) -> dict[str, Any]:
    """What one attempt cost: the backend's own estimate where it made one (SageMaker: billable seconds x instances
    x price, spot saving included), else the attempt's billable or wall seconds x instance count x the price of the
    backend that ran it (the result's ``backend``: its vocabulary's; local: what the same request would cost on
    SageMaker; the `basis` says which). A backend with no price: the cost is unknown, and ``no_price`` says why."""
    estimate = result.get("cost")
    if isinstance(estimate, Mapping) and "estimated_cost" in estimate:
        return {"basis": estimate.get("basis") or "backend-estimate", "seconds": result.get("billable_seconds"),
                "cost": estimate.get("estimated_cost"), "on_demand_cost": estimate.get("on_demand_cost"),
                "spot_saving": estimate.get("spot_saving"),
                "unknown_prices": list(estimate.get("unknown_prices") or [])}
    seconds = result.get("billable_seconds")
    basis = "billable"
    if seconds is None:
        seconds, basis = result.get("duration_seconds"), "wall-time-at-catalog-price"
    words = vocabulary_of(result.get("backend") or None)  # no backend named: the default one's, as elsewhere
    price = words.hourly_price(instance_type, region or "us-east-1")
    cost = None if price is None or seconds is None else round(float(seconds) * instance_count * price / 3600.0, 6)
    found = {"basis": basis, "seconds": seconds, "cost": cost, "on_demand_cost": cost, "spot_saving": None,
             "unknown_prices": [] if price is not None or not instance_type else [instance_type]}
    return {**found, "no_price": words.unpriced_reason()} if not words.priced else found


def total_cost(costs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The cost of several attempts (or of several steps' totals): sums where every figure is known, None otherwise
    (a total that silently leaves out an attempt would understate the run)."""
    # An attempt's cost has `cost`/`on_demand_cost`; a step's total (summed again for a run) has `total`/...
    figures = [item.get("cost", item.get("total")) for item in costs]
    on_demand = [item.get("on_demand_cost", item.get("on_demand_total")) for item in costs]
    known = bool(costs) and all(value is not None for value in figures)
    total = round(sum(figures), 6) if known else None  # type: ignore[arg-type]
    full = round(sum(on_demand), 6) if known and all(v is not None for v in on_demand) else None  # type: ignore
    saving = None
    spot = any(item.get("spot_saving") is not None for item in costs)
    if spot and total is not None and full:
        saving = round(1.0 - total / full, 4) if full > total else 0.0
    unknown = sorted({name for item in costs for name in item.get("unknown_prices") or []})
    summed = {"currency": "USD", "total": total, "on_demand_total": full, "spot_saving": saving,
              "attempts": sum(int(item.get("attempts", 1)) for item in costs), "unknown_prices": unknown}
    no_price = sorted({str(item["no_price"]) for item in costs if item.get("no_price")})
    return {**summed, "no_price": "; ".join(no_price)} if no_price else summed


def run_cost(costs: Sequence[Mapping[str, Any]], cost_notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``cost`` of a run's attempts, as every front end reports it (the step result, the Airflow XCom, KFP's
    metrics, the registry entry): the sum (`total_cost`), each attempt's, ``spent``, and with ``cost_notes``
    (`trainops.steps.attempts.cost_notes`) the ``forecast`` and the ``budget`` with what is ``left`` of it."""
    total = total_cost(costs)
    cost = total | {"per_attempt": [dict(item) for item in costs], "spent": total["total"]}
    if cost_notes:
        notes = dict(cost_notes)
        budget = dict(notes.pop("budget", None) or {})
        if budget.get("max_cost_usd") is not None:
            budget["left"] = None if total["total"] is None else round(budget["max_cost_usd"] - total["total"], 6)
        cost.update(notes, budget=budget or None)
    return cost


@dataclass
class AttemptRecord:
    """One attempt as reported: its job, how it ended, which budget its retry used, what it cost."""

    number: int
    job_name: str
    status: str
    failure_class: str | None = None
    evidence: str = ""
    retried_on: str | None = None  # the budget the next attempt was paid from
    cost: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "job_name": self.job_name, "status": self.status,
                "failure_class": self.failure_class, "evidence": self.evidence, "retried_on": self.retried_on,
                "cost": self.cost}


@dataclass(frozen=True)
class Retry:
    """Start attempt `number` as `job_name`, after `delay` seconds (a driver that cannot wait starts it at once),
    paid from the `failure_class` budget (`used` of `budget` after this one)."""

    number: int
    job_name: str
    failure_class: str
    reason: str  # how the attempt before it ended (the verdict, described)
    delay: float
    used: int
    budget: int


@dataclass(frozen=True)
class Fail:
    """The run ends failed: the last attempt's class, its evidence described and its verdict (`Verdict.to_dict`;
    None for an outcome no failure rule gives, a wait that left the job running); `refused` says why a retry its
    budget allowed could not be paid for (the run's max_cost_usd), empty otherwise."""

    failure_class: str | None
    evidence: str
    refused: str = ""
    verdict: Mapping[str, Any] | None = None

    @property
    def reason(self) -> str:
        return f"{self.evidence}; no retry: {self.refused}" if self.refused else self.evidence

    def failure(self) -> dict[str, Any]:
        """Why the run ends, as ``failure_class`` and ``failure_evidence`` (what a task's exception reads: a retry
        the money refused ends the run as ``budget``, which no retry can pay for either)."""
        if self.refused:
            return {"failure_class": BUDGET, "failure_evidence": {"failure_class": BUDGET, "evidence": self.refused}}
        evidence = dict(self.verdict) if self.verdict else {"failure_class": self.failure_class,
                                                            "evidence": self.evidence}
        return {"failure_class": self.failure_class, "failure_evidence": evidence}


@dataclass(frozen=True)
class Done:
    """The last attempt completed, or runs on and was not waited for: the run ends with its `status`."""

    status: str


Decision = Retry | Fail | Done


class AttemptsEngine:
    """The attempts of one run of a train step named `job_name`: the budgets (and what was `used` of them, carried
    between two deferrals), the attempts that `known` ended before this run (listed and priced, not charged to the
    budgets) and whether the attempt after them exists (``follows``: it runs or completed, and the run follows it),
    the run's `pricing`, ``fits(spent)`` (whether another attempt fits the run's max_cost_usd: (fits, why not)) and
    `notes` (the forecast and budget its report's cost carries)."""

    def __init__(self, job_name: str, budgets: RetryBudgets | Mapping[str, Any] | str | None = None, *,
                 pricing: Pricing | None = None, known: Sequence[Mapping[str, Any]] = (),
                 follows: bool = False, used: Mapping[str, int] | None = None,
                 fits: Callable[[float | None], tuple[bool, str]] | None = None,
                 notes: Mapping[str, Any] | None = None) -> None:
        self.job_name = job_name
        self.follows = follows
        self.budgets = RetryBudgets.parse(budgets)
        self.budgets.used = {str(name): int(count) for name, count in (used or {}).items()}
        self.pricing = pricing or Pricing()
        self.fits = fits
        self.notes = notes
        self.records: list[AttemptRecord] = []
        self.verdict: Verdict | None = None
        self.decision: Decision | None = None
        for earlier in known:
            self._record(earlier, classify_result(earlier))

    @property
    def used(self) -> dict[str, int]:
        """What this run used of each budget: the state a driver carries between two attempts it cannot hold."""
        return dict(self.budgets.used)

    def charge_known(self) -> None:
        """Count each attempt recorded so far as retried on its class's budget: for a driver that keeps no state
        between two attempts (a reschedule poke), stricter than one that does, never looser."""
        for record in self.records:
            if record.failure_class:
                self.budgets.used[record.failure_class] = self.budgets.used.get(record.failure_class, 0) + 1

    @property
    def next_number(self) -> int:
        return self.records[-1].number + 1 if self.records else 1

    @property
    def next_name(self) -> str:
        """The job name of the attempt to start next (after every attempt known to have ended)."""
        return attempt_name(self.job_name, self.next_number)

    def spent(self) -> float | None:
        """What the attempts recorded so far cost together (0.0 before any; None when a price is unknown)."""
        return total_cost([record.cost for record in self.records])["total"] if self.records else 0.0

    def opening(self) -> Fail | None:
        """Before the first attempt of this run, after attempts that ended already: a `Fail` (class ``budget``) when
        the run's max_cost_usd has no room for another attempt, else None (None too when the run follows an
        attempt that runs: it is guarded with what is left, never left unwatched)."""
        spent = self.spent()
        if self.fits is None or not self.records or self.follows or spent == 0.0:
            return None
        room, why = self.fits(spent)
        if room:
            return None
        self.decision = Fail(BUDGET, f"no new attempt of training job {self.job_name}", why)
        return self.decision

    def ended(self, result: Mapping[str, Any]) -> Decision:
        """Record an attempt that ended (or that runs on, not waited for) and decide what follows it."""
        self.verdict = verdict = classify_result(result)
        record = self._record(result, verdict)
        self.decision = self._decide(result, record, verdict)
        return self.decision

    def report(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """The run's result: the last attempt's, with ``attempts`` (one record each), ``failure_class`` /
        ``failure_evidence`` of the last failure, ``retries`` (the budgets and their use), ``cost`` (over every
        attempt) and ``retry_refused`` when the run's money refused a retry."""
        report = dict(result)
        verdict, decision = self.verdict, self.decision
        if isinstance(decision, Fail) and decision.refused:
            report["retry_refused"] = decision.refused
        report["attempts"] = [record.to_dict() for record in self.records]
        if verdict is None and isinstance(decision, Fail):  # a guard's outcome no failure rule gives (left running)
            report.update(decision.failure())
        else:
            report["failure_class"] = verdict.failure_class if verdict else None
            report["failure_evidence"] = verdict.to_dict() if verdict else None
        report["retries"] = self.budgets.to_dict()
        report["cost"] = run_cost([record.cost for record in self.records], self.notes)
        return report

    # --- the decision ---------------------------------------------------------------------------------------------
    def _decide(self, result: Mapping[str, Any], record: AttemptRecord, verdict: Verdict | None) -> Decision:
        status = str(result.get("status"))
        if status == "InProgress":
            guard = result.get("guard")
            if isinstance(guard, Mapping) and guard.get("kind") == "wait_bound":  # the wait gave up, job left running
                record.failure_class, record.evidence = TIMEOUT, LEFT_RUNNING
                return Fail(TIMEOUT, LEFT_RUNNING)
            return Done(status)
        if verdict is None:
            return Done(status)
        if not self.budgets.allows(verdict):
            return Fail(verdict.failure_class, verdict.describe(), verdict=verdict.to_dict())
        if self.fits is not None:
            room, why = self.fits(self.spent())
            if not room:
                return Fail(verdict.failure_class, verdict.describe(), why, verdict.to_dict())
        delay = self.budgets.spend(verdict)
        record.retried_on = verdict.failure_class
        return Retry(record.number + 1, attempt_name(self.job_name, record.number + 1), verdict.failure_class,
                     verdict.describe(), delay, self.budgets.used[verdict.failure_class],
                     int(getattr(self.budgets, verdict.failure_class)))

    def _record(self, result: Mapping[str, Any], verdict: Verdict | None) -> AttemptRecord:
        """The record of an ended attempt, in its place by number (an attempt listed again replaces its record)."""
        name = str(result.get("job_name") or self.next_name)
        number = attempt_number(self.job_name, name) or self.next_number
        record = AttemptRecord(number, name, str(result.get("status")),
                               verdict.failure_class if verdict else None, verdict.describe() if verdict else "",
                               cost=attempt_cost(result, instance_type=self.pricing.instance_type,
                                                 instance_count=self.pricing.instance_count,
                                                 region=self.pricing.region))
        self.records = sorted([item for item in self.records if item.number != number] + [record],
                              key=lambda item: item.number)
        return record
