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
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Mapping

from trainops.runtime.smp_native import ParallelismError, apply_smp, describe, layout, smp_config

#: Distributions whose processes train replicas of one model (data parallelism).
DATA_PARALLEL_TYPES = ("none", "torch_distributed", "mpi", "smddp", "pytorchddp", "pytorchxla")
#: Distributions for frameworks other than PyTorch, which transform() cannot prepare a model for.
OTHER_FRAMEWORK_TYPES = ("parameter_server", "multi_worker_mirrored_strategy")

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


def hand_over_to_smp(model: Any, context: Any, blocks: Iterable[Any] | None = None) -> Any:
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
    return FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy(block_types), device_id=device_id,
                                    use_orig_params=True)


def transform(model: Any, *, context: Any = None, blocks: Iterable[Any] | None = None,
              tp_plan: Mapping[str, str] | None = None, activation_checkpointing: bool = False) -> Any:
    """Prepare ``model`` for this job (see the module's table) and return the model to train.

    Args:
        model: an ``nn.Module``, built the same way on every rank; it is moved to ``context.device``.
        context: the :class:`~trainops.runtime.RuntimeContext` (default: what the last ``init()`` returned).
        blocks: the transformer blocks, when the largest homogeneous ``nn.ModuleList`` is not them.
        tp_plan: ``{layer name inside a block: "colwise" | "rowwise"}`` for tensor parallelism, when the layer
            names are not the common ones (q/k/v/o, fc1/fc2, *_proj, ...).
        activation_checkpointing: recompute each block's activations in backward instead of keeping them.
    """
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
        return _transform_smp(model, context, distribution, blocks, tp_plan, activation_checkpointing)
    if activation_checkpointing:
        from trainops.runtime.tensor_parallel import find_blocks, wrap_blocks

        wrap_blocks(model, find_blocks(model, blocks), checkpoint=True, offload=False)
    if context.world_size == 1:
        return model
    return _data_parallel(model, context)


def _data_parallel(model: Any, context: Any) -> Any:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device = torch.device(context.device) if context.device is not None else torch.device("cpu")
    options: dict[str, Any] = {}
    if device.type == "cuda":
        options["device_ids"] = [device.index if device.index is not None else torch.cuda.current_device()]
    if context.backend == "xla":
        # torch_xla's DDP guidance: gradients as views of the communication buckets.
        options["gradient_as_bucket_view"] = True
    _log(f"transform: DistributedDataParallel over {context.world_size} ranks ({context.backend})", context)
    return DistributedDataParallel(model, **options)


def _transform_smp(model: Any, context: Any, distribution: Mapping[str, Any], blocks: Iterable[Any] | None,
                   tp_plan: Mapping[str, str] | None, activation_checkpointing: bool) -> Any:
    if distribution.get("launcher") == "mpirun":
        raise ParallelismError("SMP v1 (smdistributed modelparallel launched by mpirun: pipelining, partitions) is "
                               "not mapped onto native PyTorch; use SMP v2 (launched by torch_distributed) and its "
                               "parameters, or call smdistributed.modelparallel.torch directly on SageMaker")
    if _smp_library_present(os.environ):
        return hand_over_to_smp(model, context, blocks)
    config = smp_config(distribution.get("parameters"))
    mesh_layout = layout(config, context.world_size)
    _log(f"SMP v2 parameters on native PyTorch: {describe(config, mesh_layout)}", context)
    return apply_smp(model, config, mesh_layout, context.device, blocks=list(blocks) if blocks is not None else None,
                     tp_plan=tp_plan, activation_checkpointing=activation_checkpointing)
