"""SMP v2 parameters on native PyTorch: what ``hybrid_shard_degree``, ``tensor_parallel_degree`` and friends mean when
the SageMaker model parallelism library is not there (a laptop, one GPU, a local multi-process run).

The world of ``W`` ranks is laid out as a mesh ``replicate x shard x tp`` with the tensor-parallel dimension innermost
(neighbouring ranks, which on a GPU host share NVLink), as SMP does:

- ``tensor_parallel_degree`` (``tp``, default 1): the linear layers of every transformer block are split column-wise
  (the layers that fan out: query/key/value, the MLP's up projection) and row-wise (the layers that fan back in: the
  attention output, the MLP's down projection) with DTensor tensor parallelism;
- ``hybrid_shard_degree`` (``h``): FSDP2 (``fully_shard``) shards parameters, gradients and optimizer state over groups
  of ``h`` data-parallel ranks and replicates across the ``(W / tp) / h`` groups (a 2-D hybrid-shard mesh). ``0`` or
  absent means "as wide as possible" (every data-parallel rank), as SMP computes it; ``1`` means no sharding (plain
  replication of every parameter, gradients averaged);
- ``sm_activation_offloading``: the tensors each transformer block keeps for backward live in host memory until backward
  needs them (torch's ``save_on_cpu``); SMP prefetches them ``activation_loading_horizon`` blocks ahead, trainops
  copies them back on demand (the same numbers, more waiting). Activation checkpointing of the blocks is a separate
  switch, ``transform(model, activation_checkpointing=True)``, as it is a script-side call with SMP too;
- ``random_seed``: every rank seeds torch's generators with it when the model is transformed, so random numbers drawn
  after that (dropout) agree across a tensor-parallel group; the starting weights are made equal on every rank by a
  broadcast from rank 0 before anything is split;
- ``activation_loading_horizon``, ``fsdp_cache_flush_warnings``, ``allow_empty_shards``: accepted; they tune SMP's own
  implementation (prefetch depth, a warning, uneven shards) and native PyTorch needs none of them (FSDP2 pads uneven
  shards itself);
- ``context_parallel_degree`` and ``expert_parallel_degree`` above 1 are refused: nothing here implements them.

The parsing and the layout arithmetic need only the standard library (the runtime is imported in containers without
torch at import time); :func:`apply_smp` imports torch when it runs.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainops.runtime.parallel_base import DDP_DEFAULTS, ParallelismError

#: SMP v2 parameters and whether the native mapping honours them (docstring above).
HONOURED = ("hybrid_shard_degree", "tensor_parallel_degree", "sm_activation_offloading", "random_seed")
ACCEPTED_WITHOUT_EFFECT = ("activation_loading_horizon", "fsdp_cache_flush_warnings", "allow_empty_shards")
REFUSED_ABOVE_ONE = ("context_parallel_degree", "expert_parallel_degree")


@dataclass(frozen=True)
class SMPConfig:
    """The SMP v2 parameters the native mapping acts on, validated against the world size."""

    tensor_parallel_degree: int = 1
    hybrid_shard_degree: int = 0  # as given (0: as wide as possible)
    activation_offloading: bool = False
    random_seed: int | None = None


@dataclass(frozen=True)
class Layout:
    """How ``world_size`` ranks split into ``replicate x shard x tp`` (tp innermost)."""

    world_size: int
    replicate: int
    shard: int
    tp: int

    @property
    def dp_size(self) -> int:
        """Data-parallel ranks: how many different shards of each batch the job reads."""
        return self.replicate * self.shard

    def coordinates(self, rank: int) -> dict[str, int]:
        """``dp_rank``, ``dp_size``, ``tp_rank``, ``tp_size`` of a global rank (SMP's ``tsm.state`` names)."""
        return {"dp_rank": rank // self.tp, "dp_size": self.dp_size, "tp_rank": rank % self.tp, "tp_size": self.tp}

    @property
    def sharded(self) -> bool:
        """Whether FSDP shards anything (a shard dimension wider than one rank)."""
        return self.shard > 1

    @property
    def hybrid(self) -> bool:
        """Whether shards are replicated across groups (HSDP) rather than spread over every data-parallel rank."""
        return self.shard > 1 and self.replicate > 1


def _whole(parameters: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = parameters.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParallelismError(f"SMP parameter {key}={value!r}: expected a whole number >= {minimum}")
    return value


def smp_config(parameters: Mapping[str, Any] | None) -> SMPConfig:
    """Validate SMP v2 ``parameters`` for the native mapping. Raises :class:`ParallelismError` for parameters it
    cannot honour (context or expert parallelism, SMP v1 keys, unknown keys), naming each."""
    parameters = dict(parameters or {})
    known = set(HONOURED) | set(ACCEPTED_WITHOUT_EFFECT) | set(REFUSED_ABOVE_ONE)
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise ParallelismError(
            f"SMP parameters {', '.join(unknown)} cannot be honoured without the SMP library: trainops maps only the "
            f"SMP v2 parameters {', '.join(sorted(known))} onto native PyTorch (SMP v1 pipelining is not mapped)")
    for key in REFUSED_ABOVE_ONE:
        if _whole(parameters, key, 1, 1) > 1:
            raise ParallelismError(
                f"SMP parameter {key}={parameters[key]} cannot be honoured without the SMP library: native "
                f"{key.split('_')[0]} parallelism is not implemented by trainops; set it to 1, or run on SageMaker "
                "with the SMP v2 image")
    offloading = parameters.get("sm_activation_offloading", False)
    if not isinstance(offloading, bool):
        raise ParallelismError(f"SMP parameter sm_activation_offloading={offloading!r}: expected true or false")
    seed = parameters.get("random_seed")
    return SMPConfig(
        tensor_parallel_degree=_whole(parameters, "tensor_parallel_degree", 1, 1),
        hybrid_shard_degree=_whole(parameters, "hybrid_shard_degree", 0, 0),
        activation_offloading=offloading,
        random_seed=None if seed is None else _whole(parameters, "random_seed", 0, 0),
    )


def layout(config: SMPConfig, world_size: int) -> Layout:
    """The mesh for ``world_size`` ranks. Raises :class:`ParallelismError` when the degrees do not divide it."""
    tp = config.tensor_parallel_degree
    if world_size % tp:
        raise ParallelismError(f"SMP parameter tensor_parallel_degree={tp} must divide the number of ranks "
                               f"({world_size})")
    dp = world_size // tp
    shard = config.hybrid_shard_degree or dp
    if shard > dp or dp % shard:
        raise ParallelismError(f"SMP parameter hybrid_shard_degree={config.hybrid_shard_degree} must divide the "
                               f"{dp} data-parallel ranks ({world_size} ranks / tensor_parallel_degree {tp})")
    return Layout(world_size=world_size, replicate=dp // shard, shard=shard, tp=tp)


def layout_for_distribution(distribution: Mapping[str, Any], world_size: int) -> Layout:
    """The layout a canonical distribution implies: SMP v2 parameters for ``smp`` jobs, pure data parallelism (every
    rank its own shard of the data, no tensor parallelism) for everything else."""
    if distribution.get("type") == "smp":
        return layout(smp_config(distribution.get("parameters")), world_size)
    return Layout(world_size=world_size, replicate=world_size, shard=1, tp=1)


def describe(config: SMPConfig, mesh_layout: Layout) -> str:
    """One line for the log: what the native mapping does with these parameters."""
    parts = []
    if mesh_layout.tp > 1:
        parts.append(f"tensor parallel {mesh_layout.tp} (DTensor, column/row-wise linear pairs)")
    if mesh_layout.hybrid:
        parts.append(f"FSDP2 hybrid shard {mesh_layout.shard} x replicate {mesh_layout.replicate}")
    elif mesh_layout.sharded:
        parts.append(f"FSDP2 full shard over {mesh_layout.shard} ranks")
    elif mesh_layout.replicate > 1:
        parts.append(f"replicated over {mesh_layout.replicate} data-parallel ranks (hybrid_shard_degree=1)")
    if config.activation_offloading:
        parts.append("activation checkpointing with offloading to host memory")
    if config.random_seed is not None:
        parts.append(f"random_seed {config.random_seed}")
    return ", ".join(parts) or "one rank: the model is unchanged"


def apply_smp(model: Any, config: SMPConfig, mesh_layout: Layout, device: Any, blocks: list | None = None,
              tp_plan: Mapping[str, str] | None = None, activation_checkpointing: bool = False,
              mixed_precision: str | None = None) -> Any:
    """Apply the native mapping to ``model`` (already on ``device``) in the order that composes: same starting
    weights everywhere, tensor parallelism inside blocks, activation checkpointing / offloading around blocks, then
    FSDP2 on each block and on the root. ``mixed_precision`` (``"bf16"``, ``"fp16"``) is FSDP2's parameter dtype
    for compute, with float32 gradient reduction. Returns the model (modified in place)."""
    import torch

    from trainops.runtime import tensor_parallel

    if config.random_seed is not None:
        torch.manual_seed(config.random_seed)
    wrap = activation_checkpointing or config.activation_offloading
    if mesh_layout.world_size == 1:
        if wrap:
            tensor_parallel.wrap_blocks(model, tensor_parallel.find_blocks(model, blocks), activation_checkpointing,
                                        config.activation_offloading)
        return model
    from torch.distributed.device_mesh import init_device_mesh

    # FSDP2 keeps each rank's own shard of what that rank built and tensor parallelism scatters from the first rank
    # of each tensor-parallel group: both assume every rank starts from the same weights, so make it so.
    tensor_parallel.broadcast_module(model, source=0)
    device_type = torch.device(device).type
    mesh = init_device_mesh(device_type, (mesh_layout.replicate, mesh_layout.shard, mesh_layout.tp),
                            mesh_dim_names=("replicate", "shard", "tp"))
    # Blocks are needed for tensor parallelism and wrapping; FSDP2 shards per block when there are some, else whole.
    found = tensor_parallel.find_blocks(model, blocks, required=mesh_layout.tp > 1 or wrap)
    if mesh_layout.tp > 1:
        tensor_parallel.parallelize_blocks(found, mesh["tp"], tp_plan)
    found = tensor_parallel.wrap_blocks(model, found, activation_checkpointing, config.activation_offloading)
    if mesh_layout.shard == 1 and mesh_layout.tp == 1:
        from torch.nn.parallel import DistributedDataParallel

        # hybrid_shard_degree=1 is NO_SHARD: plain replication, which DDP does with one all-reduce per bucket.
        ids = [torch.device(device).index] if device_type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, **DDP_DEFAULTS)
    if mesh_layout.dp_size > 1 or mesh_layout.tp > 1:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        # A 2-D (replicate, shard) mesh is HSDP; with one replica it is plain FSDP over every data-parallel rank.
        # With tensor parallelism FSDP2 runs even over a single data-parallel rank: it makes every parameter a
        # DTensor, so optimizers' foreach / fused kernels never mix plain tensors (norms, embeddings) with the split
        # layers' DTensors, which DTensor refuses.
        # One replica: the 1-D shard mesh. A 2-D mesh with a replicate dimension of 1 is HSDP in FSDP2's eyes: an
        # all-reduce over one rank after every reduce-scatter, and (Replicate, Shard) DTensors for the optimizer.
        dp_mesh = mesh["shard"] if mesh_layout.replicate == 1 else mesh["replicate", "shard"]
        dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
        policy = MixedPrecisionPolicy(param_dtype=dtypes.get(mixed_precision or ""), reduce_dtype=torch.float32)
        for index, block in enumerate(found):
            # Backward starts with the last block: freeing its gathered parameters after forward only means
            # gathering them again at once (issue 18's profile).
            fully_shard(block, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=index < len(found) - 1)
        fully_shard(model, mesh=dp_mesh, mp_policy=policy)
    return model
