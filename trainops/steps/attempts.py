"""A train step as a series of attempts: each ended attempt is classified, retried only on the budget of its class,
and priced, so a run reports why each attempt ended, which budget it used and what all of them cost together.

Attempt 1 runs under the step's job name, attempt N under `<name>-N` (SageMaker names can never be reused; the same
names on the local backend keep the two alike). A retry resumes from the checkpoint location the attempts share: the
spec is the same, so its checkpoint S3 URI (or the local checkpoint key) is too.

Backend-neutral: the caller passes `run_attempt(name) -> result dict` (a finished attempt's result, or the result a
`JobFailed` carries). When the step is run again by its orchestrator (an Airflow retry, a re-run of the pipeline),
the attempts that already ended are listed and priced (`known_attempts`) but not run again: the new call starts
after them with fresh budgets, as a retry is meant to run again (the orchestrator's own retries are its budget, and a
user error fails the task without them: see the Airflow operator).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainops.backends.api import MAX_SUFFIX
from trainops.backends.failures import RetryBudgets, Verdict, status_walk
from trainops.backends.vocabulary import classify_result, vocabulary_of

Log = Callable[[str], None]
logger = logging.getLogger(__name__)


def attempt_name(job_name: str, number: int) -> str:
    """The job name of attempt `number` (1-based): the step's name, then `<name>-2`, `<name>-3`, ..."""
    if number <= 1:
        return job_name
    from trainops.spec.names import with_suffix

    return with_suffix(job_name, str(number))


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


def run_attempts(
    run_attempt: Callable[[str], Mapping[str, Any]],
    *,
    job_name: str,
    budgets: RetryBudgets | Mapping[str, Any] | str | None = None,
    instance_type: str | None = None,
    instance_count: int = 1,
    region: str | None = None,
    known_attempts: Sequence[Mapping[str, Any]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: Log | None = None,
    ledger: dict[str, Any] | None = None,
    fits: Callable[[float | None], tuple[bool, str]] | None = None,
    cost_notes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run attempts until one completes or a failure's class has no budget left; return the last attempt's result
    with `attempts` (one record each), `failure_class`/`failure_evidence` of the last failure, `retries` (budgets and
    use) and `cost` (the sum over attempts).

    The run's money: ``ledger["spent"]`` is set before each attempt to what the attempts before it cost (None when a
    price is unknown), so `run_attempt` can give its job what is left; ``fits(spent)`` says whether a retry may start
    (False: the run ends with the failure, and ``retry_refused`` says why); ``cost_notes`` (the forecast and the
    budget) join the result's ``cost``, with ``spent``."""
    budgets = RetryBudgets.parse(budgets)
    ledger = ledger if ledger is not None else {}
    log = log or (lambda line: print(line, flush=True))
    records: list[AttemptRecord] = []
    for number, earlier in enumerate(known_attempts or [], start=1):
        verdict = classify_result(earlier)
        records.append(AttemptRecord(number, str(earlier.get("job_name") or attempt_name(job_name, number)),
                                     str(earlier.get("status")), verdict.failure_class if verdict else None,
                                     verdict.describe() if verdict else "",
                                     cost=attempt_cost(earlier, instance_type=instance_type,
                                                       instance_count=instance_count, region=region)))
    number = len(records)
    while True:
        number += 1
        name = attempt_name(job_name, number)
        ledger["spent"] = total_cost([record.cost for record in records])["total"] if records else 0.0
        result = dict(run_attempt(name))
        verdict = classify_result(result)
        record = AttemptRecord(number, str(result.get("job_name") or name), str(result.get("status")),
                               cost=attempt_cost(result, instance_type=instance_type, instance_count=instance_count,
                                                 region=region))
        records.append(record)
        if verdict is not None:
            record.failure_class, record.evidence = verdict.failure_class, verdict.describe()
        if verdict is None or result.get("status") == "InProgress" or not budgets.allows(verdict):
            return _final(result, records, verdict, budgets, cost_notes)
        if fits is not None:
            room, why = fits(total_cost([item.cost for item in records])["total"])
            if not room:
                logger.info("[trainops] attempt %d (%s) ended %s; no retry: %s", number, record.job_name,
                            verdict.describe(), why)
                result["retry_refused"] = why
                return _final(result, records, verdict, budgets, cost_notes)
        delay = budgets.spend(verdict)
        record.retried_on = verdict.failure_class
        logger.info("[trainops] attempt %d (%s) ended %s; retrying on the %s budget (%d of %d) in %g s, resuming "
                    "from the last checkpoint", number, record.job_name, verdict.describe(), verdict.failure_class,
                    budgets.used[verdict.failure_class], getattr(budgets, verdict.failure_class), delay)
        sleep(delay)


def _final(result: dict[str, Any], records: list[AttemptRecord], verdict: Verdict | None,
           budgets: RetryBudgets, cost_notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    result["attempts"] = [record.to_dict() for record in records]
    result["failure_class"] = verdict.failure_class if verdict else None
    result["failure_evidence"] = verdict.to_dict() if verdict else None
    result["retries"] = budgets.to_dict()
    result["cost"] = run_cost([record.cost for record in records], cost_notes)
    return result


def run_cost(costs: Sequence[Mapping[str, Any]], cost_notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``cost`` of a run's attempts, as every front end reports it (the step result, the Airflow XCom, KFP's
    metrics, the registry entry): the sum (`total_cost`), each attempt's, ``spent``, and with ``cost_notes``
    (`cost_notes`) the ``forecast`` and the ``budget`` with what is ``left`` of it."""
    total = total_cost(costs)
    cost = total | {"per_attempt": [dict(item) for item in costs], "spent": total["total"]}
    if cost_notes:
        notes = dict(cost_notes)
        budget = dict(notes.pop("budget", None) or {})
        if budget.get("max_cost_usd") is not None:
            budget["left"] = None if total["total"] is None else round(budget["max_cost_usd"] - total["total"], 6)
        cost.update(notes, budget=budget or None)
    return cost


def cost_notes(spec: Any, planned: Any = None, *, backend: Any = None) -> dict[str, Any]:
    """What a run's cost says beside the sums: the forecast of one attempt on ``backend`` and the budget
    (`run_cost`)."""
    from trainops.steps.forecast import forecast

    planned = planned if planned is not None else forecast(spec, backend=backend)
    limit = getattr(spec, "max_cost_usd", None)
    return {"forecast": planned.to_dict(),
            "budget": {"max_cost_usd": limit, "mode": getattr(spec, "budget", "stop")} if limit is not None else None}


def spent_before(backend: Any, spec: Any, job_name: str) -> float | None:
    """What the attempts of ``job_name`` that already ended cost (the run's money before the next or running
    attempt; None when a price is unknown): `guards_for` gives that attempt what is left."""
    instance_type, count = _instances(spec)
    costs = [attempt_cost(item, instance_type=instance_type, instance_count=count,
                          region=getattr(spec, "region", None)) for item in known_attempts(backend, job_name)]
    return total_cost(costs)["total"] if costs else 0.0


def cost_line(cost: Mapping[str, Any] | None) -> str:
    """`$12.34 over 3 attempts (spot saved 61 %)`, or what is unknown."""
    if not cost:
        return "cost unknown"
    if cost.get("attempts") == 0:
        return "no training attempt"
    attempts = int(cost.get("attempts") or 1)
    plural = "attempt" if attempts == 1 else "attempts"
    if cost.get("total") is None:
        if cost.get("no_price"):
            return f"cost unknown over {attempts} {plural} ({cost['no_price']})"
        missing = ", ".join(cost.get("unknown_prices") or []) or "no duration"
        return f"cost unknown over {attempts} {plural} (no price for {missing})"
    from trainops.backends.guards import usd

    text = f"{usd(cost['total'])} over {attempts} {plural}"
    if cost.get("spot_saving"):
        text += f" (spot saved {cost['spot_saving'] * 100:.0f} %)"
    return text


def cost_figures(cost: Mapping[str, Any] | None) -> dict[str, float]:
    """A run's money as numbers (KFP metrics, a Model artifact's metadata): the forecast of one attempt, what was
    spent, the budget and what is left of it; a figure that is not known is left out."""
    cost = cost or {}
    budget = cost.get("budget") or {}
    figures = {"forecast_attempt_usd": (cost.get("forecast") or {}).get("attempt_usd"),
               "spent_usd": cost.get("spent", cost.get("total")),
               "max_cost_usd": budget.get("max_cost_usd"), "budget_left_usd": budget.get("left")}
    return {key: float(value) for key, value in figures.items() if isinstance(value, (int, float))}


def budget_line(cost: Mapping[str, Any] | None) -> str:
    """`forecast at most $0.19 per attempt; max_cost_usd $5.00, $4.99 left` ("" when the cost has neither)."""
    from trainops.backends.guards import usd

    figures = cost_figures(cost)
    parts = []
    if "forecast_attempt_usd" in figures:
        parts.append(f"forecast at most {usd(figures['forecast_attempt_usd'])} per attempt")
    if "max_cost_usd" in figures:
        left = f", {usd(figures['budget_left_usd'])} left" if "budget_left_usd" in figures else ""
        parts.append(f"max_cost_usd {usd(figures['max_cost_usd'])}{left}")
    return "; ".join(parts)


def registry_note(job_name: str, cost: Mapping[str, Any] | None) -> str:
    """What a registry entry's description says of the model's training: its job, the forecast and the budget, and
    what every attempt cost (`trained by X (forecast ...; max_cost_usd ...): spent $0.01 over 1 attempt`)."""
    plan = budget_line(cost)
    return f"trained by {job_name}{f' ({plan})' if plan else ''}: spent {cost_line(cost)}"


def known_attempts(backend: Any, job_name: str, limit: int = MAX_SUFFIX) -> list[dict[str, Any]]:
    """The results of the attempts of `job_name` that already ended in failure, in order, up to the first name that
    is free or whose job runs or completed (that one is re-attached to, never duplicated)."""
    ended: list[dict[str, Any]] = []
    for number in range(1, limit + 1):
        name = attempt_name(job_name, number)
        status = backend.status_of(name)  # the lookup the re-attach policy uses (None: no such job)
        if status is None or status.reattachable:
            break
        ended.append(backend.describe(_handle(backend, name)).to_dict())
    return ended


def _handle(backend: Any, name: str) -> Any:
    from trainops.backends.api import JobHandle

    return JobHandle(backend.name, name, workdir=getattr(backend, "workdir", None),
                     region=getattr(backend, "region", None), created=False)


def _instances(spec: Any) -> tuple[str | None, int]:
    groups = getattr(spec, "instance_groups", None) or []
    if groups:
        kinds = {group.instance_type for group in groups}
        # Mixed groups are priced at the first group's type only when every group has the same type.
        return (kinds.pop() if len(kinds) == 1 else None), sum(group.instance_count for group in groups)
    return spec.instance_type, int(spec.instance_count or 1)


def guards_for(spec: Any, spent: float | None = 0.0, *, backend: Any = None) -> Any:
    """The `trainops.backends.guards.JobGuards` of an attempt of ``spec`` on ``backend`` (None: the default one)
    after earlier attempts cost ``spent``: what is left of max_cost_usd, the instances' hourly price at the backend's
    price, the stall watchdog and the wait bound's grace."""
    from trainops.backends.guards import JobGuards
    from trainops.steps.forecast import hourly_cost

    limit = getattr(spec, "max_cost_usd", None)
    left = None if limit is None else max(0.0, limit - (spent or 0.0))
    return JobGuards.from_spec(spec, budget_usd=left, hourly_usd=hourly_cost(spec, backend=backend))


def train_in_attempts(backend: Any, spec: Any, job_name: str, *, retries: Any = None, log: Log,
                      on_handle: Callable[[Any, Any], None] | None = None, **options: Any) -> dict[str, Any]:
    """`train()` on a backend as attempts: earlier failed attempts listed, then attempts until one completes or the
    failure's class has no budget left. Raises `JobFailed` (carrying the result) when the last attempt failed."""
    from trainops.backends.states import JobStatus
    from trainops.errors import JobFailed
    from trainops.steps.forecast import check_budget, retry_fits

    budgets = RetryBudgets.parse(retries) if retries is not None else RetryBudgets(infrastructure=0)
    planned = check_budget(spec, backend=backend)  # budget: refuse refuses here, before anything is created
    limit = getattr(spec, "max_cost_usd", None)
    if limit is not None and planned.hourly_usd is None:
        logger.warning("[trainops] warning: max_cost_usd cannot stop the job: the catalog has no price for %s in %s "
                       "(no retry will start)", ", ".join(planned.unknown_prices) or "its instances", planned.region)
    ledger: dict[str, Any] = {}

    def run_attempt(name: str) -> dict[str, Any]:
        handle = backend.submit(spec, name, if_exists="reattach", log=log, detached=False, **options)
        if on_handle is not None:
            on_handle(backend, handle)
        guards = guards_for(spec, ledger.get("spent"), backend=backend)
        ended: dict[str, Any] = backend.wait(handle, log=log, guards=guards).to_dict()
        return ended

    instance_type, count = _instances(spec)
    notes = cost_notes(spec, planned, backend=backend)
    result = run_attempts(run_attempt, job_name=job_name, budgets=budgets, instance_type=instance_type,
                          instance_count=count, region=getattr(spec, "region", None),
                          known_attempts=known_attempts(backend, job_name), log=log, ledger=ledger,
                          fits=lambda spent: retry_fits(spec, spent, backend=backend), cost_notes=notes)
    if JobStatus.parse(result.get("status")).outcome == "failure":
        verdict = result.get("failure_evidence") or {}
        error = JobFailed(f"training job {result['job_name']} ended {result['status']} "
                          f"({verdict.get('failure_class', 'unknown')} failure): "
                          f"{result.get('failure_reason') or 'no reason given'}")
        error.result = result  # type: ignore[attr-defined]
        raise error
    return result


def attempts_report(backend: Any, job_name: str, record: Mapping[str, Any],
                    notes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What `trainops status NAME` adds to a job's record: why it ended (class and evidence), and when NAME is the
    first of a series of attempts (`NAME`, `NAME-2`, ...), each attempt's status and class and their cost
    (`run_cost`, with ``notes``: the forecast and budget of `cost_notes`)."""
    walk = status_walk(record.get("secondary_status_history") or ())
    verdict = classify_result({**record, "secondary_statuses": walk or record.get("secondary_statuses") or ()})
    raw = record.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    instance_type = record.get("instance_type") or spec.get("instance_type")
    count = int(record.get("instance_count") or spec.get("instance_count") or 1)
    series = known_attempts(backend, job_name)
    following = attempt_name(job_name, len(series) + 1)
    if series and backend.status_of(following) is not None:  # the attempt after the failed ones runs or completed
        series.append(backend.describe(_handle(backend, following)).to_dict())
    if not series:
        series = [dict(record, job_name=job_name)]
    costs = [attempt_cost(item, instance_type=instance_type, instance_count=count) for item in series]
    verdicts = [classify_result(item) for item in series]
    report: dict[str, Any] = {
        "attempts": [{"job_name": item.get("job_name"), "status": item.get("status"),
                      "failure_class": verdict.failure_class if verdict else None}
                     for item, verdict in zip(series, verdicts, strict=True)],
        "cost": run_cost(costs, notes),
    }
    if verdict is not None:
        report["failure_class"] = verdict.failure_class
        report["failure_evidence"] = verdict.describe()
    return report
