"""Stand-in for ``torch.sagemaker`` (SMP v2) in local runs (see :mod:`trainops.runtime.shims`).

``tsm.init(config=None)`` joins the process group through :func:`trainops.runtime.init` and takes the SMP parameters
from ``config`` or, as the library does, from the job (``SM_HP_MP_PARAMETERS`` / the distribution);
``tsm.transform(model)`` is :func:`trainops.runtime.transform`, which maps the parameters onto FSDP2 and DTensor tensor
parallelism; ``tsm.state`` carries ``rank``, ``world_size``, ``local_rank``, ``local_world_size``, ``dp_rank``,
``dp_size``, ``tp_rank``, ``tp_size`` and ``hybrid_shard_degree``.

One difference from the library: SMP's ``transform`` applies tensor parallelism and the script then wraps the model
in FSDP itself; this ``transform`` does both (the sharding follows ``hybrid_shard_degree``), so a script should not
wrap the result in FSDP again.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

from typing import Any

from trainops.runtime.shims import log_once

__all__ = ["init", "transform", "state", "is_initialized"]


class _State:
    """Where this rank stands, with SMP's ``torch.sagemaker.state`` attribute names."""

    def __init__(self) -> None:
        self.initialized = False
        self.rank = 0
        self.world_size = 1
        self.local_rank = 0
        self.local_world_size = 1
        self.dp_rank = 0
        self.dp_size = 1
        self.tp_rank = 0
        self.tp_size = 1
        self.hybrid_shard_degree = 0
        self.context = None  # the trainops RuntimeContext behind it

    def __repr__(self) -> str:
        fields = ("rank", "world_size", "local_rank", "dp_rank", "dp_size", "tp_rank", "tp_size")
        return "tsm.state(" + ", ".join(f"{name}={getattr(self, name)}" for name in fields) + ")"


state = _State()


def is_initialized() -> bool:
    """Whether :func:`init` has run in this process."""
    return state.initialized


def init(config: dict[str, Any] | None = None) -> None:
    """Join the job (process group, device) and read the SMP v2 parameters: ``config`` when given, else the job's."""
    import trainops.runtime as runtime
    from trainops.runtime.smp_native import layout, smp_config

    context = runtime.init()
    distribution = dict(context.distribution)
    parameters = dict(config) if config is not None else dict(distribution.get("parameters") or {})
    # A torch.sagemaker script is an SMP v2 script whatever launched it (e.g. torch_distributed in a local spec).
    context.distribution = {**distribution, "type": "smp", "launcher": "torchrun", "parameters": parameters}
    mesh_layout = layout(smp_config(parameters), context.world_size)
    coordinates = mesh_layout.coordinates(context.rank)
    context.dp_rank, context.dp_size = coordinates["dp_rank"], coordinates["dp_size"]
    context.tp_rank, context.tp_size = coordinates["tp_rank"], coordinates["tp_size"]
    state.rank, state.world_size = context.rank, context.world_size
    state.local_rank, state.local_world_size = context.local_rank, context.local_world_size
    state.dp_rank, state.dp_size = context.dp_rank, context.dp_size
    state.tp_rank, state.tp_size = context.tp_rank, context.tp_size
    state.hybrid_shard_degree = mesh_layout.shard
    state.context = context
    state.initialized = True


def transform(model: Any, device: Any = None, dtype: Any = None, delayed_param_initialization: bool = False,
              **options: Any) -> Any:
    """Prepare ``model`` as the job's SMP v2 parameters say (FSDP2 / DTensor); ``dtype`` casts it first. Options of
    the library that have no native meaning here (``delayed_param_initialization``, ...) are accepted and ignored."""
    import trainops.runtime as runtime

    if not state.initialized:
        init()
    if dtype is not None:
        model = model.to(dtype)
    if device is not None:
        model = model.to(device)
    return runtime.transform(model, context=state.context)


def _announce() -> None:
    log_once("tsm", "local run without the SMP library: torch.sagemaker is trainops' stand-in; SMP v2 parameters "
                    "map onto native PyTorch (FSDP2 fully_shard, DTensor tensor parallelism)")
