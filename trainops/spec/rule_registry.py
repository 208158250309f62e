"""The table of job-spec rules: each rule registers itself here with the fields it reads, in report order.

A module of its own so that every module of rules (`rules`, `estimator_rules`, an engine's own) registers into it
without importing another module of rules; `all_problems` runs the table.

The spec's model (`trainops.spec.job.JobSpec`) runs the table when it validates, and the rules are typed on that
model: so the table imports neither. It loads the modules of rules by name (`MODULE_ORDER`) the first time it runs,
as the backend registry loads a backend: the model depends on the table, the rules on the model and the table, and
no import goes round in a circle (tests/unit/architecture counts ``TYPE_CHECKING`` imports too).

A rule binds every engine, or one rule set (``binds``): the rules of the SageMaker request (`SAGEMAKER_REQUEST`: the
``ml.*`` instance types, their accelerators, the distribution strategies as SageMaker runs them) bind where a job runs
as that request (the sagemaker and local backends); an engine declares the sets it binds in its vocabulary
(`trainops.backends.vocabulary.Vocabulary.spec_rules`) and may register a set of its own (slurm's). A spec checked
without naming its engine is checked as the default backend checks it (`DEFAULT_RULE_SETS`), so nothing is weakened
for a caller that does not say.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

from trainops.errors import Problem

#: A rule: the job spec (a `trainops.spec.job.JobSpec`; ``Any`` here, below the model) -> its problems.
Rule = Callable[[Any], Iterator[Problem]]
RULES: list[Rule] = []
#: The modules of rules in report order, whichever of them is imported first (a test may import one directly).
MODULE_ORDER = ("trainops.spec.rules", "trainops.spec.estimator_rules", "trainops.spec.api_rules",
                "trainops.spec.channel_rules", "trainops.spec.v3_rules")


def _module_rank(function: Rule) -> int:
    module = getattr(function, "__module__", "")
    return MODULE_ORDER.index(module) if module in MODULE_ORDER else len(MODULE_ORDER)


def rule(*reads: str, binds: str | None = None) -> Callable[[Rule], Rule]:
    """Register a rule that reads the job-spec fields `reads`; the order of registration is the order of the report.
    ``binds``: the rule set it belongs to (None: it binds every engine).

    The fields a rule reads let `parse_job_spec` run every rule whose fields are valid even when other fields are
    not, so one run reports everything (a rule reading an invalid field would only add noise).
    """
    def register(function: Rule) -> Rule:
        function.reads = frozenset(reads)  # type: ignore[attr-defined]
        function.binds = binds  # type: ignore[attr-defined]
        RULES.append(function)
        RULES.sort(key=_module_rank)  # stable: a module's own rules keep their order
        return function

    return register


def applies(check: Rule, rule_sets: frozenset[str] | None) -> bool:
    """Whether a rule runs for an engine binding ``rule_sets`` (None: `DEFAULT_RULE_SETS`)."""
    binds = getattr(check, "binds", None)
    return binds is None or binds in (DEFAULT_RULE_SETS if rule_sets is None else rule_sets)


#: The rule set of the SageMaker request: the rules of instance types (``ml.*``, the catalog's accelerators) and of
#: the distribution strategies as SageMaker runs them. Bound where a job runs as that request (the sagemaker and local
#: backends: `trainops.backends.vocabulary.Vocabulary.spec_rules`); another engine declares its own set.
SAGEMAKER_REQUEST = "sagemaker_request"
#: The rule sets a spec is checked by when its engine is not named: the default backend's (local, which runs the
#: SageMaker request). A front end that knows the engine passes that engine's sets instead.
DEFAULT_RULE_SETS: frozenset[str] = frozenset({SAGEMAKER_REQUEST})


def all_problems(spec: Any, skip: frozenset[str] = frozenset(),
                 rule_sets: frozenset[str] | None = None, *, bound_only: bool = False) -> list[Problem]:
    """Every problem of every rule that binds the engine (``rule_sets``: the sets it binds, None: the default
    backend's; `applies`), leaving out the rules that read a field named in `skip`; ``bound_only``: the rules of
    those sets only (a spec the neutral rules passed already). A rule marked `after_the_others` (the image check,
    whose refusal is the most general) reports only at paths no other rule reported: the specific message stands
    alone. The modules of `MODULE_ORDER` are loaded first (an engine's own rules register when its vocabulary
    loads)."""
    for module in MODULE_ORDER:
        importlib.import_module(module)
    problems: list[Problem] = []
    for check in RULES:
        if check.reads & skip or not applies(check, rule_sets):  # type: ignore[attr-defined]
            continue
        if bound_only and getattr(check, "binds", None) is None:
            continue
        found = list(check(spec))
        if getattr(check, "after_the_others", False):
            reported = {problem.path for problem in problems}
            found = [problem for problem in found if problem.path not in reported]
        problems += found
    return problems
