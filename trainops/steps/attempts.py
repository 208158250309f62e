"""A train step as a series of attempts, run one after another in this process: the synchronous driver of the
attempts engine (`trainops.steps.attempts_engine`), which classifies each ended attempt, retries it only on the
budget of its class and prices it, so a run reports why each attempt ended, which budget it used and what all of
them cost together. The CLI, the pipeline runner, the KFP train component and the Airflow operator in its worker
drive it here; the deferred operator drives the same engine from the trigger's events.

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
from typing import Any

from trainops.backends.api import MAX_SUFFIX, JobHandle
from trainops.backends.failures import RetryBudgets, status_walk
from trainops.backends.guards import JobGuards, usd
from trainops.backends.states import JobStatus
from trainops.backends.vocabulary import classify_result
from trainops.errors import JobFailed
from trainops.steps.attempts_engine import (  # noqa: F401 - the costs and AttemptRecord: re-exported
    AttemptRecord,
    AttemptsEngine,
    Fail,
    Pricing,
    Retry,
    attempt_cost,
    attempt_name,
    run_cost,
    total_cost,
)
from trainops.steps.forecast import check_budget, forecast, hourly_cost, retry_fits

Log = Callable[[str], None]
logger = logging.getLogger(__name__)


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
    engine: AttemptsEngine | None = None,
) -> dict[str, Any]:
    """Run attempts until one completes or the engine ends the run; return the last attempt's result with
    `attempts` (one record each), `failure_class`/`failure_evidence` of the last failure, `retries` (budgets and
    use) and `cost` (the sum over attempts): `AttemptsEngine.report`.

    The run's money: ``ledger["spent"]`` is set before each attempt to what the attempts before it cost (None when a
    price is unknown), so `run_attempt` can give its job what is left; ``fits(spent)`` says whether another attempt
    may start (False: the run ends with the failure, and ``retry_refused`` says why); ``cost_notes`` (the forecast
    and the budget) join the result's ``cost``, with ``spent``. ``engine``: one the caller built, whose budgets,
    pricing, known attempts, ``fits`` and notes replace those arguments."""
    if engine is None:
        engine = AttemptsEngine(job_name, budgets, pricing=Pricing(instance_type, instance_count, region),
                                known=known_attempts or (), fits=fits, notes=cost_notes)
    ledger = ledger if ledger is not None else {}
    refused = engine.opening()
    if refused is not None:  # the earlier attempts spent the run's money: the last of them is the outcome
        logger.info("[trainops] %s: %s", refused.evidence, refused.refused)
        return engine.report(dict(known_attempts[-1]) if known_attempts else {"job_name": job_name})
    while True:
        name = engine.next_name
        ledger["spent"] = engine.spent()
        result = dict(run_attempt(name))
        decision = engine.ended(result)
        ended = str(result.get("job_name") or name)
        if not isinstance(decision, Retry):
            if isinstance(decision, Fail) and decision.refused:
                logger.info("[trainops] attempt %d (%s) ended %s; no retry: %s", engine.records[-1].number, ended,
                            decision.evidence, decision.refused)
            return engine.report(result)
        logger.info("[trainops] attempt %d (%s) ended %s; retrying on the %s budget (%d of %d) in %g s, resuming "
                    "from the last checkpoint", decision.number - 1, ended, decision.reason,
                    decision.failure_class, decision.used, decision.budget, decision.delay)
        sleep(decision.delay)


def cost_notes(spec: Any, planned: Any = None, *, backend: Any = None) -> dict[str, Any]:
    """What a run's cost says beside the sums: the forecast of one attempt on ``backend`` and the budget
    (`run_cost`)."""
    planned = planned if planned is not None else forecast(spec, backend=backend)
    limit = getattr(spec, "max_cost_usd", None)
    return {"forecast": planned.to_dict(),
            "budget": {"max_cost_usd": limit, "mode": getattr(spec, "budget", "stop")} if limit is not None else None}


def engine_for(backend: Any, spec: Any, job_name: str, budgets: Any = None, *, known: Any = None,
               follows: bool = False, used: Mapping[str, int] | None = None, planned: Any = None) -> AttemptsEngine:
    """The attempts engine of a run of ``spec`` named ``job_name`` on ``backend`` (opened, or its name): its pricing
    and its money from one forecast (``planned``: `check_budget`'s, else made here: the spec's instances are worked
    out once per run), the attempts of the name that already ended (``known`` and ``follows``; None: looked up now,
    `ended_attempts`), what the run ``used`` of its budgets, and ``fits``: another attempt must fit the run's
    max_cost_usd."""
    planned = planned if planned is not None else forecast(spec, backend=backend)
    if known is None:
        known, follows = ended_attempts(backend, job_name)
    return AttemptsEngine(job_name, budgets, pricing=Pricing.of_forecast(planned), known=known, follows=follows,
                          used=used, fits=lambda spent: retry_fits(spec, spent, backend=backend),
                          notes=cost_notes(spec, planned, backend=backend))


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
    return ended_attempts(backend, job_name, limit)[0]


def ended_attempts(backend: Any, job_name: str, limit: int = MAX_SUFFIX) -> tuple[list[dict[str, Any]], bool]:
    """`known_attempts`, and whether the attempt after them exists (it runs or completed: it is followed)."""
    ended: list[dict[str, Any]] = []
    for number in range(1, limit + 1):
        name = attempt_name(job_name, number)
        # the look the re-attach policy makes (None: no such job); a failed look is made again, never "no job"
        status = backend.looked_status(name)
        if status is None or status.reattachable:
            return ended, status is not None
        ended.append(backend.describe(_handle(backend, name)).to_dict())
    return ended, False


def _handle(backend: Any, name: str) -> Any:
    return JobHandle(backend.name, name, workdir=getattr(backend, "workdir", None),
                     region=getattr(backend, "region", None), created=False)


def resumed_engine(spec: Any, job_name: str, budgets: Any, used: Mapping[str, int] | None, *, backend: Any,
                   opened: Callable[[], Any], planned: Any = None) -> AttemptsEngine:
    """The engine of a run picked up again at each of its attempts (the Airflow operator, at each placement and
    each resumption after a deferral), with what the run ``used`` of its budgets. ``backend``: opened, or its name;
    ``opened()`` opens it where the attempts that ended must be looked up: only where the spec has a max_cost_usd, as
    their cost decides then (without one nothing they hold changes a decision: an attempt's number is read from its
    job's name). Without a spec (one that no longer loads) the budgets alone decide."""
    if spec is None:
        return AttemptsEngine(job_name, budgets, used=used)
    known: list[dict[str, Any]] = []
    follows = False
    if getattr(spec, "max_cost_usd", None) is not None:
        try:
            known, follows = ended_attempts(opened(), job_name)
        except Exception as error:  # noqa: BLE001 - the earlier attempts' cost is a look-up; the wait goes on
            logger.warning("[trainops] could not add up what the earlier attempts of %s cost (%s): the budget "
                           "counts this attempt only", job_name, error)
    return engine_for(backend, spec, job_name, budgets, known=known, follows=follows, used=used, planned=planned)


def guards_for(spec: Any, spent: float | None = 0.0, *, backend: Any = None, planned: Any = None) -> Any:
    """The `trainops.backends.guards.JobGuards` of an attempt of ``spec`` on ``backend`` (None: the default one)
    after earlier attempts cost ``spent``: what is left of max_cost_usd, the instances' hourly price at the backend's
    price (``planned``'s, the run's forecast, when given), the stall watchdog and the wait bound's grace."""
    limit = getattr(spec, "max_cost_usd", None)
    left = None if limit is None else max(0.0, limit - (spent or 0.0))
    hourly = planned.hourly_usd if planned is not None else hourly_cost(spec, backend=backend)
    return JobGuards.from_spec(spec, budget_usd=left, hourly_usd=hourly)


def train_in_attempts(backend: Any, spec: Any, job_name: str, *, retries: Any = None, log: Log,
                      on_handle: Callable[[Any, Any], None] | None = None, **options: Any) -> dict[str, Any]:
    """`train()` on a backend as attempts: earlier failed attempts listed, then attempts until one completes or the
    failure's class has no budget left. Raises `JobFailed` (carrying the result) when the last attempt failed."""
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
        guards = guards_for(spec, ledger.get("spent"), backend=backend, planned=planned)
        ended: dict[str, Any] = backend.wait(handle, log=log, guards=guards).to_dict()
        return ended

    known, follows = ended_attempts(backend, job_name)
    engine = engine_for(backend, spec, job_name, budgets, known=known, follows=follows, planned=planned)
    result = run_attempts(run_attempt, job_name=job_name, known_attempts=known, ledger=ledger, engine=engine)
    if JobStatus.parse(result.get("status")).outcome == "failure":
        raise failed(result)
    return result


def failed(result: dict[str, Any]) -> Exception:
    """The `JobFailed` of a run whose last attempt failed, carrying the run's result."""
    verdict = result.get("failure_evidence") or {}
    error = JobFailed(f"training job {result['job_name']} ended {result['status']} "
                      f"({verdict.get('failure_class', 'unknown')} failure): "
                      f"{result.get('failure_reason') or 'no reason given'}")
    error.result = result  # type: ignore[attr-defined]
    return error


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
    if series and backend.looked_status(following) is not None:  # the attempt after the failed ones runs or completed
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
