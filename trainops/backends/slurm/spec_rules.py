"""The spec rules the slurm backend binds instead of the SageMaker request's (`trainops.spec.rule_registry`).

A Slurm cluster describes its own nodes: there is no instance catalog, so ``instance_type`` names the nodes the job
asks for (``cpu``, ``a100-node``, or an ``ml.*`` type on HyperPod) and says nothing about their accelerators: a
`torch_distributed` job runs on a CPU partition as well (torchrun with gloo), and how many processes a node starts is
``processes_per_host`` (the distribution's or the backend option's), never looked up from a type. What the backend
cannot run at all (instance groups, spot, TensorFlow strategies, the toolkit launcher) its dry run refuses
(`trainops.backends.slurm.layout`), with the spec's other problems.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem
from trainops.spec.rule_registry import rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

#: The rule set name (`trainops.backends.slurm.vocabulary.SLURM`'s ``spec_rules``).
SLURM_RULES = "slurm"

#: A node description: what a record, a message and the batch script's comment show (no spaces or shell characters).
NODE_DESCRIPTION = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}\Z")


@rule("instance_type", binds=SLURM_RULES)
def nodes_are_described(spec: JobSpec) -> Iterator[Problem]:
    """instance_type describes the Slurm nodes (a name, ``ml.*`` or not: the cluster has no instance catalog)."""
    name = spec.instance_type
    if name and not NODE_DESCRIPTION.match(name):
        yield Problem("instance_type", f"{name!r} does not describe Slurm nodes: give a name of letters, digits and "
                                       ". _ : + - (up to 64), such as cpu or a100-node")
