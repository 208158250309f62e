"""What a run can cost before it starts: the forecast `trainops validate` and `render` print, and the budget check.

The ceiling of one training attempt is what SageMaker can bill for it: every instance for ``max_run`` seconds (a
spot job bills at most its run time too, usually much less; ``max_wait`` bounds only its wall time), plus the warm
pool's idle time after the job (``keep_alive_period_in_seconds``, billed while the instances wait for the next job),
at the backend's price (its vocabulary's, `trainops.backends.vocabulary.Vocabulary.price`: for sagemaker and local
the catalog's SageMaker on-demand list prices, `trainops.runtime.catalog`, an estimate, never a bill). An engine with
no price (slurm) has no forecast: its cost is unknown, never another engine's price. An evaluation job, where a
pipeline has one, adds its instance for its timeout.

``max_cost_usd`` is spent over every attempt of a run. With ``budget: refuse`` a run whose first attempt alone could
cost more is refused before anything is created (`check_budget`); with ``budget: stop`` (the default) the wait stops
the job when its billable cost reaches what is left (`trainops.backends.guards`), and `retry_fits` starts no retry
that cannot fit. On an engine with no price, ``max_cost_usd`` cannot be kept, so `check_budget` refuses it under
either mode: a budget that silently never stops a job would be worse than none.

``backend`` (each function's keyword): the backend the job runs on, by name, opened or as its vocabulary; None: the
default backend's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from trainops.backends.guards import usd
from trainops.backends.vocabulary import Vocabulary, vocabulary_of
from trainops.errors import Problem, SpecError
from trainops.runtime import catalog

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Forecast:
    """The cost ceiling of one attempt of a job spec, in USD; None where a price is unknown."""

    region: str
    instances: list[dict[str, Any]]  # {"instance_type", "instance_count", "price_per_hour"}
    hourly_usd: float | None  # every instance together
    max_run_seconds: int
    training_usd: float | None
    spot: bool = False
    max_wait_seconds: int | None = None
    warm_pool_seconds: int = 0
    warm_pool_usd: float | None = 0.0
    evaluation_usd: float | None = 0.0
    attempt_usd: float | None = None  # training + warm pool + evaluation: what one attempt can cost at most
    max_cost_usd: float | None = None
    budget: str = "stop"
    unknown_prices: list[str] = field(default_factory=list)
    currency: str = "USD"
    backend: str = ""
    no_price: str = ""  # why there is no price at all (the engine has none), "" when it has one
    price_basis: str = ""  # whose prices these are, in the engine's words (never SageMaker's for another engine)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def exceeds_budget(self) -> bool:
        """Whether one attempt could cost more than the run's max_cost_usd."""
        return self.max_cost_usd is not None and self.attempt_usd is not None and self.attempt_usd > self.max_cost_usd

    def lines(self) -> list[str]:
        """What `trainops validate` / `render` print on stderr (nothing for the SDK's local-mode types: they run
        here, priced at nothing)."""
        if self.instances and all(catalog.is_local(item["instance_type"]) for item in self.instances):
            return []
        if self.no_price:
            lines = [f"forecast: unknown ({self.no_price})"]
        elif self.hourly_usd is None:
            missing = ", ".join(self.unknown_prices) or "no instance type"
            lines = [f"forecast: unknown (the catalog has no price for {missing} in {self.region})"]
        else:
            parts = " + ".join(f"{item['instance_count']} x {item['instance_type']} at ${item['price_per_hour']:.4f}/h"
                               for item in self.instances)
            basis = self.price_basis or "on-demand list prices"
            lines = [f"forecast: at most ${self.attempt_usd:.2f} per attempt ({parts}; {self.region}, {basis})",
                     f"  training: ${self.training_usd:.2f} for max_run {self.max_run_seconds} s"]
            if self.spot:
                lines.append(f"  spot: billed at most max_run, usually far less; the job may take up to max_wait "
                             f"{self.max_wait_seconds} s of wall time")
            if self.warm_pool_seconds:
                lines.append(f"  warm pool: ${self.warm_pool_usd:.2f} for {self.warm_pool_seconds} s idle after the "
                             "job (keep_alive_period_in_seconds)")
            if self.evaluation_usd:
                lines.append(f"  evaluation: ${self.evaluation_usd:.2f}")
        if self.max_cost_usd is not None:
            verdict = ("over it: refused before anything is created" if self.exceeds_budget and self.budget == "refuse"
                       else "over it: the job is stopped when its billable cost reaches it" if self.exceeds_budget
                       else "within it")
            lines.append(f"  budget: max_cost_usd {usd(self.max_cost_usd)} over every attempt (budget: "
                         f"{self.budget}); one attempt is {verdict}")
        return lines


def pricing(backend: Any = None) -> Vocabulary:
    """The vocabulary whose price a forecast uses: ``backend``'s (a name, an opened backend or a vocabulary)."""
    return backend if isinstance(backend, Vocabulary) else vocabulary_of(backend)


def instances_of(spec: Any) -> list[tuple[str, int]]:
    """(instance type, count) of every instance the job runs on."""
    groups = getattr(spec, "instance_groups", None) or []
    if groups:
        return [(group.instance_type, int(group.instance_count)) for group in groups]
    return [(spec.instance_type, int(spec.instance_count or 1))] if getattr(spec, "instance_type", None) else []


def hourly_cost(spec: Any, region: str | None = None, *, backend: Any = None) -> float | None:
    """Every instance of the job together, USD per hour at the backend's price (None when a price is unknown)."""
    region = region or getattr(spec, "region", None) or DEFAULT_REGION
    words = pricing(backend)
    total = 0.0
    kinds = instances_of(spec)
    for instance_type, count in kinds:
        price = words.hourly_price(instance_type, region)
        if price is None:
            return None
        total += price * count
    return round(total, 6) if kinds else None


def forecast(spec: Any, *, region: str | None = None, evaluation: Mapping[str, Any] | None = None,
             backend: Any = None) -> Forecast:
    """The forecast of one attempt of ``spec`` on ``backend``. ``evaluation``: ``{"instance_type", "instance_count",
    "timeout_seconds"}`` of an evaluation job the run adds (a pipeline's evaluate step on SageMaker)."""
    region = region or getattr(spec, "region", None) or DEFAULT_REGION
    words = pricing(backend)
    described, unknown, hourly = [], [], 0.0
    for instance_type, count in instances_of(spec):
        price = words.hourly_price(instance_type, region)
        described.append({"instance_type": instance_type, "instance_count": count, "price_per_hour": price})
        if price is None:
            unknown.append(instance_type)
        else:
            hourly += price * count
    known = bool(described) and not unknown
    max_run = int(spec.max_run)
    keep_alive = int(getattr(spec, "keep_alive_period_in_seconds", None) or 0)
    training = round(hourly * max_run / 3600.0, 6) if known else None
    warm = round(hourly * keep_alive / 3600.0, 6) if known else None
    evaluation_usd: float | None = 0.0
    if evaluation:
        kind = str(evaluation.get("instance_type") or "")
        price = words.hourly_price(kind, region)
        if price is None:
            unknown.append(kind or "the evaluation's instance type")
            evaluation_usd = None
        else:
            evaluation_usd = round(price * int(evaluation.get("instance_count") or 1)
                                   * float(evaluation.get("timeout_seconds") or 3600) / 3600.0, 6)
    parts = (training, warm, evaluation_usd)
    attempt = round(sum(parts), 6) if all(part is not None for part in parts) else None  # type: ignore[arg-type]
    spot = bool(getattr(spec, "use_spot_instances", False))
    return Forecast(region=region, instances=described, hourly_usd=round(hourly, 6) if known else None,
                    max_run_seconds=max_run, training_usd=training, spot=spot,
                    max_wait_seconds=getattr(spec, "max_wait", None) if spot else None, warm_pool_seconds=keep_alive,
                    warm_pool_usd=warm, evaluation_usd=evaluation_usd, attempt_usd=attempt,
                    max_cost_usd=getattr(spec, "max_cost_usd", None), budget=getattr(spec, "budget", "stop"),
                    unknown_prices=sorted(set(unknown)), backend=words.engine, no_price=words.unpriced_reason(),
                    price_basis=words.price_basis)


def check_budget(spec: Any, *, region: str | None = None, spent: float = 0.0, backend: Any = None) -> Forecast:
    """Refuse (`SpecError` naming max_cost_usd, with the forecast) a run whose next attempt could cost more than
    what is left of max_cost_usd, when the spec says ``budget: refuse``; return the forecast otherwise. A price the
    catalog lacks cannot be budgeted: refused too, under ``budget: refuse``. A backend with no price at all cannot
    keep a max_cost_usd under either mode: refused."""
    planned = forecast(spec, region=region, backend=backend)
    if planned.max_cost_usd is not None and planned.no_price:
        raise SpecError(Problem("max_cost_usd", f"cannot be kept: {planned.no_price}, so the job could never be "
                                                "stopped at it; leave max_cost_usd out on this backend, or run on a "
                                                "backend with a price (sagemaker, local)"))
    if planned.max_cost_usd is None or planned.budget != "refuse":
        return planned
    left = planned.max_cost_usd - spent
    if planned.attempt_usd is None:
        raise SpecError(Problem("max_cost_usd", f"budget: refuse needs a price for every instance, and the catalog "
                                                f"has none for {', '.join(planned.unknown_prices)} in "
                                                f"{planned.region}: use budget: stop, or a catalogued instance type"))
    if planned.attempt_usd > left:
        spent_text = f" (${spent:.2f} already spent by earlier attempts)" if spent else ""
        raise SpecError(Problem("max_cost_usd", f"one attempt could cost ${planned.attempt_usd:.2f}, more than the "
                                                f"${left:.2f} left of max_cost_usd ${planned.max_cost_usd:.2f}"
                                                f"{spent_text}; raise max_cost_usd, lower max_run or the instances, or "
                                                f"use budget: stop to stop the job when it is reached. "
                                                + " / ".join(line.strip() for line in planned.lines())))
    return planned


def retry_fits(spec: Any, spent: float | None, *, region: str | None = None, backend: Any = None
               ) -> tuple[bool, str]:
    """Whether another attempt may start under the run's max_cost_usd after ``spent``: something must be left, and
    under ``budget: refuse`` the attempt's whole ceiling must fit. (fits, why not)."""
    limit = getattr(spec, "max_cost_usd", None)
    if limit is None:
        return True, ""
    if spent is None:
        return False, "the cost of the earlier attempts is unknown (no price in the catalog), so a retry cannot be "\
                      "budgeted"
    left = limit - spent
    if left <= 0:
        return False, f"max_cost_usd ${limit:.2f} is spent (${spent:.4f})"
    if getattr(spec, "budget", "stop") == "refuse":
        planned = forecast(spec, region=region, backend=backend)
        if planned.attempt_usd is None or planned.attempt_usd > left:
            ceiling = "unknown" if planned.attempt_usd is None else f"${planned.attempt_usd:.2f}"
            return False, f"a retry could cost {ceiling}, more than the ${left:.4f} left of max_cost_usd"
    return True, ""
