"""The table of job-spec rules: each rule registers itself here with the fields it reads, in report order.

A module of its own so that every module of rules (`rules`, `estimator_rules`) registers into it without importing
another module of rules; `rules.all_problems` runs the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

Rule = Callable[["JobSpec"], Iterator[Problem]]
RULES: list[Rule] = []
#: The modules of rules in report order, whichever of them is imported first (a test may import one directly).
MODULE_ORDER = ("trainops.spec.rules", "trainops.spec.estimator_rules", "trainops.spec.api_rules",
                "trainops.spec.channel_rules", "trainops.spec.v3_rules")


def _module_rank(function: Rule) -> int:
    module = getattr(function, "__module__", "")
    return MODULE_ORDER.index(module) if module in MODULE_ORDER else len(MODULE_ORDER)


def rule(*reads: str) -> Callable[[Rule], Rule]:
    """Register a rule that reads the job-spec fields `reads`; the order of registration is the order of the report.

    The fields a rule reads let `parse_job_spec` run every rule whose fields are valid even when other fields are
    not, so one run reports everything (a rule reading an invalid field would only add noise).
    """
    def register(function: Rule) -> Rule:
        function.reads = frozenset(reads)  # type: ignore[attr-defined]
        RULES.append(function)
        RULES.sort(key=_module_rank)  # stable: a module's own rules keep their order
        return function

    return register
