"""What an engine that runs the trainops runtime on a cluster's own nodes refuses of a spec (`own_nodes_problems`).

The slurm and ray backends (and kubernetes, through slurm's layout) start the trainops launcher on one homogeneous set
of the cluster's nodes, with no SageMaker training image: what only SageMaker's images or its fleet give (SMP v1 under
mpirun, the TensorFlow toolkit's strategies, the toolkit launcher, instance groups, managed spot, a container entry
point) is refused the same way there, each naming the engine and what to use instead. Each engine adds its own rules.
"""

from __future__ import annotations

from typing import Any

from trainops.errors import Problem


def own_nodes_problems(spec: Any, engine: str) -> list[Problem]:
    """The problems of ``spec`` on ``engine`` (its name as a message says it: "the slurm backend")."""
    problems: list[Problem] = []
    kind = spec.dist.type
    if kind == "smp" and getattr(spec.dist, "launcher", None) == "mpirun":
        problems.append(Problem("distribution", f"SMP v1 (smp with launcher: mpirun) runs in SageMaker's training "
                                                f"images only; on {engine} use SMP v2 (AWS documents its conda binary "
                                                "for clusters, HyperPod included): launcher: torchrun with SMP v2's "
                                                "parameters"))
    if kind in ("parameter_server", "multi_worker_mirrored_strategy"):
        problems.append(Problem("distribution", f"{kind} (TensorFlow) is not run by {engine}: use a PyTorch "
                                                "distribution (torch_distributed)"))
    if spec.launcher != "trainops":
        problems.append(Problem("launcher", f"{engine} runs the trainops launcher only (the toolkit reads /opt/ml and "
                                            "reaches hosts as algo-N, which needs a container per host): use "
                                            "launcher: trainops"))
    if spec.instance_groups:
        problems.append(Problem("instance_groups", f"{engine} runs one homogeneous set of hosts: give instance_type "
                                                   "and instance_count"))
    if spec.use_spot_instances:
        problems.append(Problem("use_spot_instances", f"is SageMaker's managed spot training; {engine} runs on the "
                                                      "cluster's own nodes: leave it out"))
    if spec.container_entry_point or spec.container_arguments:
        problems.append(Problem("container_entry_point", f"{engine} runs the trainops runtime, no image: leave "
                                                         "container_entry_point out"))
    return problems
