"""``trainops.runtime.transform(model)``: prepare a model for whatever the job's distribution asks, after
:func:`trainops.runtime.init`.

=================================================  ===========================================================
job                                                what ``transform`` returns
=================================================  ===========================================================
one process (any distribution)                     the model, on the job's device (unchanged otherwise)
``torch_distributed``, ``mpi``, ``smddp``,         ``DistributedDataParallel`` (on the process group ``init()``
``pytorchddp``, ``pytorchxla``, plain torchrun     joined: gloo, NCCL, smddp or xla)
``smp`` on SageMaker with the SMP library          handed over to ``torch.sagemaker`` (``tsm.transform``, then
                                                   FSDP as SMP v2 documents)
``smp`` anywhere else                              SMP v2 parameters on FSDP2 / DTensor (:mod:`smp_native`)
=================================================  ===========================================================

Data sharding follows the context: read shard ``context.dp_rank`` of ``context.dp_size``; the ``context.tp_size``
ranks of a tensor-parallel group read the same batch. Parameters the native mapping cannot honour raise
:class:`~trainops.runtime.smp_native.ParallelismError` with a message naming them.

Torch is imported when :func:`transform` runs, never when the runtime is imported.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from trainops.runtime.distributions import names_where
from trainops.runtime.parallel_base import DDP_DEFAULTS, ParallelismError  # noqa: F401 - re-exported for scripts
from trainops.runtime.smp_native import apply_smp, describe, layout, smp_config

#: Distributions whose processes train replicas of one model (data parallelism).
DATA_PARALLEL_TYPES = names_where(data_parallel=True)
#: Distributions for frameworks other than PyTorch, which transform() cannot prepare a model for.
OTHER_FRAMEWORK_TYPES = names_where(other_framework=True)

_smp_library_initialised = False


def _log(message: str, context: Any) -> None:
    if context.rank == 0:
        print(f"trainops: {message}", file=sys.stderr, flush=True)


def _on_device(model: Any, device: Any) -> Any:
    # DDP, FSDP2 and DTensor all want the module on its device before they wrap it.
    if device is None:
        return model
    import torch

    target = torch.device(device)
    for parameter in model.parameters():
        if parameter.device != target:
            return model.to(target)
        break
    return model


def _smp_library_present(environ: Mapping[str, str]) -> bool:
    """The real ``torch.sagemaker`` on a SageMaker host (never in a local run, where a stand-in may answer)."""
    if environ.get("TRAINOPS_LOCAL") == "1":
        return False
    from trainops.runtime.shims import is_real

    return is_real("torch.sagemaker")


def hand_over_to_smp(model: Any, context: Any, blocks: Iterable[Any] | None = None,
                     mixed_precision: str | None = None) -> Any:
    """SMP v2 as AWS documents it: ``tsm.init()`` (reads the job's parameters), ``tsm.transform(model)`` (tensor
    parallelism), then PyTorch FSDP over the transformer blocks, whose sharding SMP sets from
    ``hybrid_shard_degree``."""
    global _smp_library_initialised
    import torch
    import torch.sagemaker as tsm
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from trainops.runtime.tensor_parallel import find_blocks

    if not _smp_library_initialised:
        tsm.init()
        _smp_library_initialised = True
    model = tsm.transform(model)
    block_types = {type(block) for block in find_blocks(model, blocks)}
    device_id = torch.cuda.current_device() if torch.cuda.is_available() else None
    _log("SMP library present: torch.sagemaker.transform, then FSDP over "
         f"{', '.join(sorted(kind.__name__ for kind in block_types))}", context)
    options: dict[str, Any] = {}
    if mixed_precision is not None:
        from torch.distributed.fsdp import MixedPrecision

        options["mixed_precision"] = MixedPrecision(param_dtype=_dtype(mixed_precision), reduce_dtype=torch.float32)
    return FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy(block_types), device_id=device_id,
                                    use_orig_params=True, **options)


def _dtype(mixed_precision: str) -> Any:
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}[mixed_precision]


#: Buckets on one host (NVLink): see `parallel_base.DDP_DEFAULTS` for why the sizes differ by link.
SINGLE_HOST_BUCKET_MB = 400
#: ``mixed_precision`` values transform() takes: parameters as FSDP2 gathers them for compute (gradients are reduced
#: and the optimizer steps in float32).
MIXED_PRECISION = ("bf16", "fp16")


def transform(model: Any, *, context: Any = None, blocks: Iterable[Any] | None = None,
              tp_plan: Mapping[str, str] | None = None, activation_checkpointing: bool = False,
              mixed_precision: str | None = None, ddp_options: Mapping[str, Any] | None = None) -> Any:
    """Prepare ``model`` for this job (see the module's table) and return the model to train.

    Args:
        model: an ``nn.Module``, built the same way on every rank; it is moved to ``context.device``.
        context: the :class:`~trainops.runtime.RuntimeContext` (default: what the last ``init()`` returned).
        blocks: the transformer blocks, when the largest homogeneous ``nn.ModuleList`` is not them.
        tp_plan: ``{layer name inside a block: "colwise" | "rowwise"}`` for tensor parallelism, when the layer
            names are not the common ones (q/k/v/o, fc1/fc2, *_proj, ...).
        activation_checkpointing: recompute each block's activations in backward instead of keeping them.
        mixed_precision: ``"bf16"`` or ``"fp16"``: a sharded model (``smp``: FSDP2) gathers its parameters in that
            dtype and computes with them; gradients are reduced in float32 into float32 shards, which the optimizer
            steps. Half the all-gather traffic, and no per-step casts of the weights under ``torch.autocast``. A
            replicated model (DDP) keeps float32 weights either way: use ``torch.autocast`` for its compute.
        ddp_options: keyword arguments for ``DistributedDataParallel`` over :data:`DDP_DEFAULTS` (e.g.
            ``{"static_graph": True}`` or ``{"bucket_cap_mb": 25}``).
    """
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISION:
        raise ParallelismError(f"transform(mixed_precision={mixed_precision!r}): expected one of "
                               f"{', '.join(MIXED_PRECISION)}, or None for float32 parameters")
    if context is None:
        from trainops.runtime.context import current_context

        context = current_context()
    if context is None:
        raise RuntimeError("trainops.runtime.transform(): call trainops.runtime.init() first (it joins the process "
                           "group and picks the device the model goes to)")
    distribution = context.distribution or {"type": "none"}
    kind = distribution.get("type", "none")
    if kind in OTHER_FRAMEWORK_TYPES:
        raise ParallelismError(f"distribution {kind} is a TensorFlow / MXNet strategy: transform() prepares "
                               "PyTorch models for torch_distributed, mpi, smddp, pytorchddp, pytorchxla and smp jobs")
    model = _on_device(model, context.device)
    if kind == "smp":
        return _transform_smp(model, context, distribution, blocks, tp_plan, activation_checkpointing,
                              mixed_precision)
    if activation_checkpointing:
        from trainops.runtime.tensor_parallel import find_blocks, wrap_blocks

        wrap_blocks(model, find_blocks(model, blocks), checkpoint=True, offload=False)
    if context.world_size == 1:
        return model
    return _data_parallel(model, context, ddp_options)


def _data_parallel(model: Any, context: Any, ddp_options: Mapping[str, Any] | None = None) -> Any:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device = torch.device(context.device) if context.device is not None else torch.device("cpu")
    options: dict[str, Any] = dict(DDP_DEFAULTS)
    if context.local_world_size >= context.world_size:  # every rank on this host: NVLink / PCIe, no network
        options["bucket_cap_mb"] = SINGLE_HOST_BUCKET_MB
    if device.type == "cuda":
        options["device_ids"] = [device.index if device.index is not None else torch.cuda.current_device()]
    options.update(ddp_options or {})
    _log(f"transform: DistributedDataParallel over {context.world_size} ranks ({context.backend}), "
         f"bucket {options.get('bucket_cap_mb')} MB, gradient_as_bucket_view "
         f"{options.get('gradient_as_bucket_view')}", context)
    return DistributedDataParallel(model, **options)


def _transform_smp(model: Any, context: Any, distribution: Mapping[str, Any], blocks: Iterable[Any] | None,
                   tp_plan: Mapping[str, str] | None, activation_checkpointing: bool,
                   mixed_precision: str | None = None) -> Any:
    if distribution.get("launcher") == "mpirun":
        raise ParallelismError("SMP v1 (smdistributed modelparallel launched by mpirun: pipelining, partitions) is "
                               "not mapped onto native PyTorch; use SMP v2 (launched by torch_distributed) and its "
                               "parameters, or call smdistributed.modelparallel.torch directly on SageMaker")
    if _smp_library_present(os.environ):
        return hand_over_to_smp(model, context, blocks, mixed_precision)
    config = smp_config(distribution.get("parameters"))
    mesh_layout = layout(config, context.world_size)
    _log(f"SMP v2 parameters on native PyTorch: {describe(config, mesh_layout)}", context)
    return apply_smp(model, config, mesh_layout, context.device, blocks=list(blocks) if blocks is not None else None,
                     tp_plan=tp_plan, activation_checkpointing=activation_checkpointing,
                     mixed_precision=mixed_precision)
