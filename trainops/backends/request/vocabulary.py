"""What the SageMaker request means wherever it runs (the sagemaker backend, and the local backend, which executes the
very request): its failure rules, its price and the spec rule set it binds. Each of those engines' vocabularies
(`trainops.backends.sagemaker.vocabulary`, `trainops.backends.local.vocabulary`) is built on it; no other engine's is.

The price is the SageMaker list price: for the sagemaker backend what the job is billed (an estimate, never a bill);
for the local backend what the same request would cost on SageMaker (a local job costs nothing itself; its figure
says what it would cost there, and a ``max_cost_usd`` on it is kept against that, as on SageMaker).

Standard library only (the catalog is read when a price is asked for).
"""

from __future__ import annotations

from trainops.backends.failures import INFRASTRUCTURE, TIMEOUT, USER, Rule
from trainops.runtime import catalog
from trainops.spec.rule_registry import SAGEMAKER_REQUEST

__all__ = ["PRICE_BASIS", "RULES", "SAGEMAKER_REQUEST", "list_price"]

PRICE_BASIS = "SageMaker on-demand list prices (trainops.runtime.catalog)"

_I = "(?i)"

#: The SageMaker request's failure rules, each in its stage of the table (`trainops.backends.failures.STAGES`).
#: Texts are real ones: FailureReason prefixes (ClientError, AlgorithmError, CapacityError, InternalServerError),
#: secondary statuses (the local backend words its limits so too).
RULES: tuple[Rule, ...] = (
    Rule(TIMEOUT, "secondary_status", r"^(MaxRuntimeExceeded|MaxWaitTimeExceeded)$", "a time limit of the job",
         "limit"),
    Rule(TIMEOUT, "failure_text", _I + r"(MaxRuntimeExceeded|MaxWaitTimeExceeded|ran longer than MaxRuntimeInSeconds)",
         "a time limit of the job", "limit"),
    Rule(INFRASTRUCTURE, "secondary_status", r"^Interrupted$", "spot capacity was reclaimed"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(CapacityError|InsufficientInstanceCapacity|insufficient capacity|"
         r"not enough capacity|capacity is not available)", "no capacity for the instance type"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(InternalServerError|internal (server )?error|InternalFailure|"
         r"ServiceUnavailable|service is unavailable)", "an error inside the service"),
    Rule(USER, "failure_text", _I + r"(ResourceLimitExceeded|ValidationException|ClientError)",
         "the request or its input is invalid", "request"),
    Rule(USER, "failure_text", _I + r"(AlgorithmError|ExecuteUserScriptError)", "the training script failed",
         "script"),
)


def list_price(instance_type: str, region: str) -> float | None:
    """The catalog's approximate on-demand list price of an instance type per hour (None: not listed)."""
    return catalog.hourly_price(instance_type, region)
