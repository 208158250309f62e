"""`build_plan`: the launch plan of this host, chosen by the launcher the distribution needs.

The one place that knows every launcher's plan (`trainops.runtime.plan` for torchrun, per-host and plain launches,
`trainops.runtime.mpi_plan` for mpirun), so that those modules need not know each other: the MPI plan builds on the
shared pieces of `plan`, and nothing in `plan` reaches back.
"""

from __future__ import annotations

from trainops.runtime.config import LaunchConfig
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.mpi_plan import mpirun_plan
from trainops.runtime.plan import LaunchPlan, distribution_kind, plain_plan, torchrun_plan, with_catalog_neuron_cores


def build_plan(config: LaunchConfig, facts: HostFacts) -> LaunchPlan:
    """The launch plan for this host: pure, from the config and the host facts. Raises
    :class:`~trainops.runtime.contract.ContractError` when the contract asks for something that cannot be launched
    (e.g. custom MPI options with shell metacharacters, a torchrun job whose entry point is not Python)."""
    facts, note = with_catalog_neuron_cores(config, facts)
    kind = distribution_kind(config.distribution) if config.in_distribution else "plain"
    if kind == "torchrun":
        plan = torchrun_plan(config, facts)
    elif kind == "mpirun":
        plan = mpirun_plan(config, facts)
    else:
        plan = plain_plan(config, facts)
    if note:
        plan.notes.insert(0, note)
    return plan
