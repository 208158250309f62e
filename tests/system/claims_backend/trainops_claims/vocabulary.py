"""The claims engine's words, declared the way any outside engine declares them: its pod-like states, its own
failure rule (a lost node is an infrastructure failure, so a retry budget retries it), no price (cost unknown), and
a spec rule set of its own (its nodes are pools, ``pool-<name>``, never ``ml.*`` types)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainops.backends.kit import Problem, Rule, Vocabulary, register, spec_rule

CLAIMS_RULES = "claims"


@spec_rule("instance_type", binds=CLAIMS_RULES)
def nodes_are_a_pool(spec: Any) -> Iterator[Problem]:
    """The claims engine runs on node pools: instance_type is pool-<name>."""
    if spec.instance_type and not spec.instance_type.startswith("pool-"):
        yield Problem("instance_type", f"{spec.instance_type!r} is not a node pool of the claims engine: use "
                                       "pool-<name>, such as pool-cpu")


CLAIMS = register(Vocabulary(
    engine="claims",
    tables={"claims_job": {"Pending": "waiting", "Running": "waiting", "Succeeded": "success", "Failed": "failure",
                           "NodeLost": "failure"}},
    training_kind="claims_job",
    rules=(Rule("infrastructure", "secondary_status", r"^NodeLost$", "the claims engine lost the job's node",
                "hosts"),),
    price=None,
    spec_rules=frozenset({CLAIMS_RULES}),
    front_end_options=frozenset({"channel_overrides", "checkpoint_key", "processes_per_host"}),
))
