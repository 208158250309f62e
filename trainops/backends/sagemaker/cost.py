"""An estimate of what a training job cost, from the instance catalog's on-demand prices.

SageMaker reports two durations: ``TrainingTimeInSeconds`` (wall time the instances ran the job) and
``BillableTimeInSeconds``. For on-demand jobs they are equal; for managed spot jobs the billable time is reduced by
the spot discount, so ``billable x on-demand price`` is what the job cost and ``1 - billable / training`` is the
saving. Prices are approximate list prices (`trainops.runtime.catalog`): an estimate for reports, never a bill.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from trainops.backends.sagemaker.training import JobSummary
from trainops.runtime import catalog

#: (instance type, region) -> USD per instance-hour, or None when unknown.
PriceLookup = Callable[[str, str], "float | None"]

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class CostEstimate:
    """The estimated cost of one training job, in US dollars. Fields are None where the figure is not known."""

    job_name: str
    currency: str
    region: str
    price_per_hour: float | None  # per instance, for a homogeneous job; None for instance groups with mixed prices
    instance_hours_billed: float | None
    estimated_cost: float | None  # what the billable time costs at the on-demand price
    on_demand_cost: float | None  # what the same training time would have cost on demand
    spot: bool
    spot_saving: float | None  # 1 - billable / training time, for spot jobs (0.7 means 70 % saved)
    unknown_prices: list[str]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; ``basis`` names what the figure rests on (SageMaker's billable seconds)."""
        return {**asdict(self), "basis": "sagemaker-billable"}


def catalog_price(instance_type: str, region: str) -> float | None:
    """The catalog's approximate on-demand price per instance-hour (None when the type or region is unknown)."""
    return catalog.hourly_price(instance_type, region)


def spot_saving(billable_seconds: int | None, training_seconds: int | None) -> float | None:
    """The fraction a managed spot job saved: ``1 - billable / training`` (None without both, or a zero training
    time)."""
    if billable_seconds is None or not training_seconds:
        return None
    return round(1.0 - billable_seconds / training_seconds, 4)


def _groups(summary: JobSummary) -> list[tuple[str, int]]:
    if summary.instance_groups:
        return [(group["instance_type"], int(group["instance_count"] or 0)) for group in summary.instance_groups]
    if summary.instance_type:
        return [(summary.instance_type, int(summary.instance_count or 1))]
    return []


def estimate_cost(
    summary: JobSummary,
    *,
    region: str | None = None,
    price_lookup: PriceLookup | None = None,
) -> CostEstimate:
    """Estimate a job's cost from its summary: billable seconds x instance count x on-demand price per hour.

    Args:
        summary: the job's `JobSummary` (from `describe` or `wait`).
        region: the region whose prices apply; default: the region in the job's ARN, else us-east-1.
        price_lookup: (instance type, region) -> price per instance-hour; default: the instance catalog.

    Instance types without a known price are listed in ``unknown_prices`` and make the totals None, rather than a
    figure that silently leaves them out.
    """
    lookup = price_lookup or catalog_price
    chosen_region = region or _region_of(summary.arn) or DEFAULT_REGION
    groups = _groups(summary)
    prices = {instance_type: lookup(instance_type, chosen_region) for instance_type, _ in groups}
    unknown = sorted(instance_type for instance_type, price in prices.items() if price is None)
    known = {kind: price for kind, price in prices.items() if price is not None}
    hourly_total = None if unknown or not groups else sum(known[kind] * count for kind, count in groups)
    distinct_prices = {prices[kind] for kind, _ in groups}
    per_instance = distinct_prices.pop() if len(distinct_prices) == 1 else None

    billable = summary.billable_seconds
    training = summary.training_seconds
    instance_count = sum(count for _, count in groups)

    def cost_of(seconds: int | None) -> float | None:
        if hourly_total is None or seconds is None:
            return None
        return round(hourly_total * seconds / 3600.0, 4)

    return CostEstimate(
        job_name=summary.job_name,
        currency="USD",
        region=chosen_region,
        price_per_hour=per_instance,
        instance_hours_billed=None if billable is None else round(billable * instance_count / 3600.0, 4),
        estimated_cost=cost_of(billable),
        on_demand_cost=cost_of(training if training is not None else billable),
        spot=summary.spot,
        spot_saving=spot_saving(billable, training) if summary.spot else None,
        unknown_prices=unknown,
    )


def _region_of(arn: str | None) -> str | None:
    # arn:aws:sagemaker:<region>:<account>:training-job/<name>
    if not arn:
        return None
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 and parts[3] else None
