"""The toy engine's vocabulary, declared through the kit alone: its job states, its failure rules, its price, its
spec rules.

A toy job's state is the ``status`` of its ``status.json``: the runner writes InProgress, then Completed, Failed (the
script exited non-zero) or Stopped (it was asked to stop). ``NodeLost`` is written by the backend's look when the
runner process (the toy's node) is gone and never recorded how the job ended: the machine went away, not the script,
so a fresh attempt is the cure (``infrastructure``, retried by the attempts engine), while a script that failed is
``user`` (a retry reproduces it).

The price is the toy's own table (USD per hour of one instance), never another engine's list price: a type it does
not list is unpriced (cost unknown).

It takes two of the options a pipeline's train step and the KFP train component pass (``channel_overrides``, the
step's ``channels:``; ``checkpoint_key``), so a pipeline file runs on it.

Its spec rules bind only toy jobs (SageMaker's ``ml.*`` rules do not): the toy runs on the machine types of its own
list, ``toy.small`` among them, and refuses any other by name, before anything is created.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainops.backends.kit import Problem, Rule, Vocabulary, register, spec_rule

#: The toy's states (``status.json``'s ``status``) -> success, failure or waiting.
TABLE = {
    "InProgress": "waiting",
    "Completed": "success",
    "Failed": "failure",  # the script exited non-zero (the runner saw it)
    "Stopped": "failure",  # asked to stop: a person, an orchestrator or a guard of trainops
    "NodeLost": "failure",  # the runner (the toy's node) went away without recording an end
}

#: The state the backend's look records when the runner process is gone and the job never ended.
NODE_LOST = "NodeLost"

#: The toy's failure rules, over its own evidence: its state (``secondary_status``).
RULES = (
    Rule("infrastructure", "secondary_status", r"^NodeLost$", "the toy job's node (its runner process) went away "
         "before the job ended: a fresh attempt resumes it", "hosts"),
    Rule("user", "secondary_status", r"^Failed$", "the toy job's script exited non-zero (a retry reproduces it)",
         "script"),
)

#: The toy's own price list: USD per hour of one instance.
PRICES = {"ml.m5.large": 0.01, "ml.m5.xlarge": 0.02, "toy.small": 0.001}


def price(instance_type: str, region: str) -> float | None:
    """USD per hour of one toy instance (the same in every region); None where the toy has no price for the type."""
    return PRICES.get(instance_type)


#: The rule set the toy's own spec rules belong to (named in its vocabulary's ``spec_rules``).
TOY_RULES = "toy"


@spec_rule("instance_type", binds=TOY_RULES)
def runs_on_toy_machines(spec: Any) -> Iterator[Problem]:
    """A toy job names one of the toy's machine types (its price list)."""
    if spec.instance_type not in PRICES:
        yield Problem("instance_type", f"{spec.instance_type!r} is not a machine type of the toy engine: use one of "
                                       f"{', '.join(sorted(PRICES))}")


TOY = register(Vocabulary(
    engine="toy", tables={"toy_job": TABLE}, training_kind="toy_job", ended_as={"Stopped": "Stopped"},
    state_meanings={"NodeLost": "the toy job's node (its runner process) went away before the job ended"},
    rules=RULES, price=price, price_basis="the toy's own price list", spec_rules=frozenset({TOY_RULES}),
    front_end_options=frozenset({"channel_overrides", "checkpoint_key"})))
