"""Transformer blocks: finding them, splitting their linear layers across a tensor-parallel group, wrapping them for
activation checkpointing or offloading, and giving every rank the same starting weights.

Blocks are found without knowing the model's class: the largest ``nn.ModuleList`` whose members are all of one class
(``model.blocks``, ``transformer.h``, ``model.layers``, ...), or the list the caller passes. Inside a block, linear
layers pair up by the names the common model families use: the layers that fan out (query, key, value, the MLP's
up/gate projection) are split column-wise, the layers that fan back in (the attention output, the MLP's down
projection) row-wise, so each pair needs one all-reduce in forward and one in backward (Megatron-style). A fused
query/key/value layer cannot be split column-wise without mixing heads, so it is refused; pass ``tp_plan`` (relative
layer name -> ``"colwise"`` / ``"rowwise"``) for names outside the table.

Attention modules must take the number of heads from the tensor they get (``view(batch, time, -1, head_dim)``), since
after the split each rank holds ``heads / tensor_parallel_degree`` of them.

Torch is imported inside the functions, never when the runtime is imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainops.runtime.parallel_base import ParallelismError

#: Last name components of layers split column-wise (output features) and row-wise (input features).
COLUMN_WISE = frozenset({"q", "k", "v", "q_proj", "k_proj", "v_proj", "query", "key", "value", "wq", "wk", "wv",
                         "fc1", "fc_in", "c_fc", "up_proj", "gate_proj", "w1", "w3", "up", "gate"})
ROW_WISE = frozenset({"o", "o_proj", "out_proj", "proj", "wo", "fc2", "fc_out", "down_proj", "w2", "down"})
#: Fused query/key/value layers: a plain column-wise split would give rank 0 all the queries and half the keys.
FUSED = frozenset({"qkv", "c_attn", "qkv_proj", "Wqkv", "query_key_value"})


def find_blocks(model: Any, blocks: Iterable[Any] | None = None, required: bool = True) -> list[Any]:
    """The model's transformer blocks: ``blocks`` when given, else the members of its largest homogeneous
    ``nn.ModuleList``. When there is none: :class:`ParallelismError` if ``required``, else an empty list."""
    import torch.nn as nn

    if blocks is not None:
        found = list(blocks)
        if not found:
            raise ParallelismError("transform(blocks=...): the list of transformer blocks is empty")
        return found
    best: list[Any] = []
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) > len(best):
            members = list(module)
            if len({type(member) for member in members}) == 1:
                best = members
    if not best and required:
        raise ParallelismError(f"cannot find the transformer blocks of {type(model).__name__}: no nn.ModuleList of "
                               "same-class blocks; pass transform(model, blocks=[...])")
    return best


def block_plan(block: Any, tp_plan: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{relative layer name: "colwise" | "rowwise"}`` for one block: ``tp_plan`` when given, else the linear layers
    whose last name component is in the table above."""
    import torch.nn as nn

    if tp_plan:
        bad = {name: style for name, style in tp_plan.items() if style not in ("colwise", "rowwise")}
        if bad:
            raise ParallelismError(f"tp_plan: styles must be 'colwise' or 'rowwise', got {bad}")
        return dict(tp_plan)
    plan: dict[str, str] = {}
    for name, module in block.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        last = name.rsplit(".", 1)[-1]
        if last in FUSED:
            raise ParallelismError(f"tensor parallelism: {type(block).__name__}.{name} is a fused query/key/value "
                                   "layer, which a column-wise split would cut across heads; split it into q, k, v "
                                   "layers or pass tp_plan")
        if last in COLUMN_WISE:
            plan[name] = "colwise"
        elif last in ROW_WISE:
            plan[name] = "rowwise"
    return plan


def _check_divisible(block: Any, plan: Mapping[str, str], degree: int) -> None:
    for name, style in plan.items():
        layer = block.get_submodule(name)
        features = layer.out_features if style == "colwise" else layer.in_features
        if features % degree:
            side = "output" if style == "colwise" else "input"
            raise ParallelismError(f"tensor_parallel_degree={degree} must divide the {side} features of "
                                   f"{type(block).__name__}.{name} ({features})")


def parallelize_blocks(blocks: list[Any], tp_mesh: Any, tp_plan: Mapping[str, str] | None = None) -> None:
    """Split every block's linear layers over ``tp_mesh`` (a 1-D device mesh). Raises :class:`ParallelismError` for a
    block with no column-wise / row-wise pair or features the degree does not divide."""
    from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

    degree = tp_mesh.size()
    for index, block in enumerate(blocks):
        plan = block_plan(block, tp_plan)
        styles = set(plan.values())
        if styles != {"colwise", "rowwise"}:
            raise ParallelismError(
                f"tensor_parallel_degree={degree}: block {index} ({type(block).__name__}) has no column-wise / "
                f"row-wise pair of linear layers the name table knows (found {plan or 'none'}); pass "
                "transform(model, tp_plan={'attn.q': 'colwise', ..., 'mlp.fc2': 'rowwise'})")
        _check_divisible(block, plan, degree)
        styles_by_name: dict[str, ParallelStyle] = {
            name: ColwiseParallel() if style == "colwise" else RowwiseParallel() for name, style in plan.items()}
        parallelize_module(block, tp_mesh, styles_by_name)


def wrap_blocks(model: Any, blocks: list[Any], checkpoint: bool, offload: bool) -> list[Any]:
    """Replace each block, where it sits in the model, by a checkpointed (recomputed in backward) and/or offloaded
    (saved tensors in host memory) version. Returns the blocks as they now are in the model."""
    if not (checkpoint or offload):
        return list(blocks)
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        checkpoint_wrapper,
        offload_wrapper,
    )

    parents = _parents(model)
    wrapped = []
    for block in blocks:
        replacement = block
        if checkpoint:
            replacement = checkpoint_wrapper(replacement, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        if offload:
            replacement = offload_wrapper(replacement)
        parent, name = parents[id(block)]
        setattr(parent, name, replacement)
        wrapped.append(replacement)
    return wrapped


def _parents(model: Any) -> dict[int, tuple[Any, str]]:
    found = {}
    for module in model.modules():
        for name, child in module.named_children():
            found[id(child)] = (module, name)
    return found


def broadcast_module(model: Any, source: int = 0) -> None:
    """Copy every parameter and buffer of ``model`` from global rank ``source`` to every rank (what FSDP1's
    ``sync_module_states`` did), so ranks that built the model with different random numbers start alike."""
    import torch
    import torch.distributed as dist

    with torch.no_grad():
        for tensor in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(tensor.data, src=source)
