"""Rules for the SageMaker model parallelism library's `parameters`, per library version.

SMP v2 (PyTorch 2.x, launched by torchrun) is built on PyTorch FSDP and tensor parallelism; SMP v1 (mpirun) on
pipelining. The key sets differ; a v1 key in a v2 job (or the reverse) is almost always a copy-paste from the other
generation's docs, so it is reported with the version it belongs to.
"""

from __future__ import annotations

from typing import Any

from trainops.errors import Problem

V2_INTEGER_KEYS = {
    "hybrid_shard_degree",
    "tensor_parallel_degree",
    "context_parallel_degree",
    "expert_parallel_degree",
    "activation_loading_horizon",
    "random_seed",
}
V2_BOOLEAN_KEYS = {"sm_activation_offloading", "fsdp_cache_flush_warnings", "allow_empty_shards"}
V2_KEYS = V2_INTEGER_KEYS | V2_BOOLEAN_KEYS

V1_POSITIVE_KEYS = {
    "partitions",
    "microbatches",
    "active_microbatches",
    "pipeline_parallel_degree",
    "tensor_parallel_degree",
    "sharded_data_parallel_degree",
    "activation_loading_horizon",
}
V1_BOOLEAN_KEYS = {
    "auto_partition",
    "contiguous",
    "load_partition",
    "horovod",
    "ddp",
    "deterministic_server",
    "fp16",
    "bf16",
    "fp16_params",
    "shard_optimizer_state",
    "prescaled_batch",
    "skip_tracing",
    "offload_activations",
    "delayed_parameter_initialization",
    "sdp_hierarchical_allgather",
}
V1_CHOICES = {
    "pipeline": ("simple", "interleaved", "_only_forward"),
    "placement_strategy": ("spread", "cluster"),
    "optimize": ("speed", "memory"),
}
V1_OTHER_KEYS = {
    "default_partition",
    "partition_file",
    "memory_weight",
    "ddp_port",
    "ddp_dist_backend",
    "sdp_reduce_bucket_size",
    "sdp_param_persistence_threshold",
    "sdp_max_live_parameters",
    "sdp_gradient_clipping",
}
V1_KEYS = V1_POSITIVE_KEYS | V1_BOOLEAN_KEYS | set(V1_CHOICES) | V1_OTHER_KEYS

# Degrees that split the world of ranks; they must divide the number of GPUs (checked by the job spec).
V2_DEGREE_KEYS = ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "hybrid_shard_degree")


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def smp_parameter_problems(parameters: dict[str, Any], version: int, path: str) -> list[Problem]:
    """Every problem with `parameters` for SMP `version` (1 or 2), each at `path.<key>`."""
    problems: list[Problem] = []
    known = V2_KEYS if version == 2 else V1_KEYS
    other = V1_KEYS - V2_KEYS if version == 2 else V2_KEYS - V1_KEYS
    for key in parameters:
        if key in known:
            continue
        if key in other:
            hint = (
                f"is an SMP v{3 - version} parameter; this job runs SMP v{version} "
                f"({'torchrun' if version == 2 else 'mpirun'}): "
                + ("use the v2 keys " + ", ".join(sorted(V2_KEYS)) if version == 2 else
                   "launch with torch_distributed for SMP v2, or use the v1 keys")
            )
        else:
            hint = f"is not an SMP v{version} parameter; known: {', '.join(sorted(known))}"
        problems.append(Problem(f"{path}.{key}", hint))
    if version == 2:
        problems += _v2_value_problems(parameters, path)
    else:
        problems += _v1_value_problems(parameters, path)
    return problems


def _v2_value_problems(parameters: dict[str, Any], path: str) -> list[Problem]:
    problems = []
    for key in V2_INTEGER_KEYS & set(parameters):
        value = parameters[key]
        minimum = 0 if key in ("random_seed", "activation_loading_horizon") else 1
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
            problems.append(Problem(f"{path}.{key}", f"must be a whole number >= {minimum}, got {value!r}"))
    for key in V2_BOOLEAN_KEYS & set(parameters):
        if not isinstance(parameters[key], bool):
            problems.append(Problem(f"{path}.{key}", f"must be true or false, got {parameters[key]!r}"))
    return problems


def _v1_value_problems(parameters: dict[str, Any], path: str) -> list[Problem]:
    """The SDK's own checks for SMP v1 (`validate_mp_config`), reported together instead of one at a time."""
    problems = []
    if "partitions" not in parameters and "pipeline_parallel_degree" not in parameters:
        problems.append(Problem(f"{path}.partitions", "is required for SMP v1 (the number of pipeline partitions)"))
    for key in V1_POSITIVE_KEYS & set(parameters):
        if not _is_positive_int(parameters[key]):
            problems.append(Problem(f"{path}.{key}", f"must be a positive whole number, got {parameters[key]!r}"))
    for key in V1_BOOLEAN_KEYS & set(parameters):
        if not isinstance(parameters[key], bool):
            problems.append(Problem(f"{path}.{key}", f"must be true or false, got {parameters[key]!r}"))
    for key, choices in V1_CHOICES.items():
        if key in parameters and parameters[key] not in choices:
            problems.append(Problem(f"{path}.{key}", f"must be one of {', '.join(choices)}, got {parameters[key]!r}"))
    if parameters.get("auto_partition") is False and "default_partition" not in parameters:
        problems.append(Problem(f"{path}.default_partition", "is required when auto_partition is false"))
    partitions = parameters.get("partitions")
    default_partition = parameters.get("default_partition")
    if isinstance(partitions, int) and _is_positive_int(partitions) and isinstance(default_partition, int) \
            and default_partition >= partitions:
        problems.append(Problem(f"{path}.default_partition", f"must be less than partitions ({partitions})"))
    weight = parameters.get("memory_weight")
    if weight is not None and not (isinstance(weight, (int, float)) and 0.0 <= weight <= 1.0):
        problems.append(Problem(f"{path}.memory_weight", f"must be between 0.0 and 1.0, got {weight!r}"))
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in parameters and "ddp" not in parameters:
            problems.append(Problem(f"{path}.{key}", "needs ddp to be set as well"))
    port = parameters.get("ddp_port")
    if port is not None and not (isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535):
        problems.append(Problem(f"{path}.ddp_port", f"must be a port number, got {port!r}"))
    if parameters.get("horovod") is True and parameters.get("ddp") is True:
        problems.append(Problem(f"{path}.ddp", "ddp and horovod cannot both be enabled"))
    if "partition_file" in parameters and not isinstance(parameters["partition_file"], str):
        problems.append(Problem(f"{path}.partition_file", "must be a string (a file path)"))
    return problems
