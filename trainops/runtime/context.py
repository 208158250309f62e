"""Script helpers: ``trainops.runtime.init()`` gives a training script its place in the job and a ready process group.

The same script then runs as one process on a laptop, under torchrun or mpirun locally, on SageMaker GPU fleets and on
Trainium::

    import trainops.runtime as runtime

    context = runtime.init()
    model = MyModel().to(context.device)
    ...
    if context.rank == 0:
        torch.save(model.state_dict(), os.path.join(context.model_dir, "model.pt"))
    runtime.cleanup()

Ranks come from torchrun (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``) or Open MPI (``OMPI_COMM_WORLD_*``, with
``MASTER_ADDR`` / ``MASTER_PORT`` from the launch plan). The backend: ``smddp`` when the SMDDP library is importable and
the distribution asks for it (``smddp``, ``pytorchddp``), ``xla`` on Trainium (``torch_xla`` importable on a Neuron
host), ``nccl`` when CUDA is available, else ``gloo``. Directories, channels and hyperparameters come from the ``SM_*``
variables the launcher sets, else from the contract directory, else from the current directory (a script run by hand).

Torch is imported inside :func:`init`, never when ``trainops.runtime`` is imported.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops.runtime.contract import FRAMEWORK_CHANNEL_PREFIX, read_config
from trainops.runtime.distributions import names_where
from trainops.runtime.hyperparameters import (
    distribution_from_hyperparameters,
    normalize_distribution,
    user_hyperparameters,
)

_SMDDP_TYPES = names_where(smddp=True)


@dataclass
class RuntimeContext:
    """Where this process stands in the job, and where its inputs and outputs are."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    device: Any = None  # a torch.device
    backend: str | None = None  # the process group's backend; None for a single process
    model_dir: str = ""
    output_data_dir: str = ""
    checkpoint_dir: str = ""
    channels: dict[str, str] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)  # decoded, the user's keys only
    distribution: dict[str, Any] = field(default_factory=lambda: {"type": "none"})
    current_host: str = "algo-1"
    hosts: list[str] = field(default_factory=lambda: ["algo-1"])
    dp_rank: int = 0  # this rank's shard of the data (pure data parallelism: the rank)
    dp_size: int = 1  # how many shards (pure data parallelism: the world size)
    tp_rank: int = 0  # this rank's place in its tensor-parallel group (SMP tensor_parallel_degree)
    tp_size: int = 1  # ranks that split each layer and read the same data

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (the one that writes the model and reports)."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether a process group joins several processes."""
        return self.world_size > 1


def choose_backend(distribution_type: str, smddp_available: bool, xla_available: bool, neuron_host: bool,
                   cuda_available: bool) -> str:
    """The process-group backend for a job: ``smddp`` (library present and asked for), ``xla`` (Trainium with
    torch_xla), ``nccl`` (CUDA), else ``gloo``."""
    if distribution_type in _SMDDP_TYPES and smddp_available:
        return "smddp"
    if neuron_host and xla_available:
        return "xla"
    if cuda_available:
        return "nccl"
    return "gloo"


def ranks_from_environment(environ: Mapping[str, str]) -> tuple[int, int, int, int]:
    """``(rank, local_rank, world_size, local_world_size)`` from torchrun's variables, else Open MPI's, else a single
    process."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        world = int(environ["WORLD_SIZE"])
        return (int(environ["RANK"]), int(environ.get("LOCAL_RANK", "0")), world,
                int(environ.get("LOCAL_WORLD_SIZE", str(world))))
    if "OMPI_COMM_WORLD_RANK" in environ:
        world = int(environ.get("OMPI_COMM_WORLD_SIZE", "1"))
        return (int(environ["OMPI_COMM_WORLD_RANK"]), int(environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")), world,
                int(environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", str(world))))
    return 0, 0, 1, 1


def _base_dir(environ: Mapping[str, str]) -> str:
    explicit = environ.get("TRAINOPS_BASE_DIR") or environ.get("SAGEMAKER_BASE_DIR")
    if explicit:
        return explicit
    return "/opt/ml" if os.path.isdir("/opt/ml") else os.path.abspath(".")


def _channels(environ: Mapping[str, str], base_dir: str) -> dict[str, str]:
    if "SM_CHANNELS" in environ:
        names = json.loads(environ["SM_CHANNELS"] or "[]")
        from trainops.runtime.environment import env_name

        return {name: environ.get(f"SM_CHANNEL_{env_name(name)}", os.path.join(base_dir, "input", "data", name))
                for name in names}
    data_dir = os.path.join(base_dir, "input", "data")
    try:
        entries = sorted(os.listdir(data_dir))
    except OSError:
        return {}
    return {name: os.path.join(data_dir, name) for name in entries
            if os.path.isdir(os.path.join(data_dir, name)) and not name.startswith(FRAMEWORK_CHANNEL_PREFIX)}


def job_context(environ: Mapping[str, str] | None = None) -> RuntimeContext:
    """The context without torch: ranks, directories, channels, hyperparameters and distribution, as the
    environment (or the contract directory) describes them. :func:`init` adds the device and the process group."""
    environ = os.environ if environ is None else environ
    base_dir = _base_dir(environ)
    rank, local_rank, world, local_world = ranks_from_environment(environ)
    raw_hyperparameters = None
    if "SM_HPS" in environ:
        hyperparameters = json.loads(environ["SM_HPS"] or "{}")
    else:
        raw_hyperparameters = read_config(os.path.join(base_dir, "input", "config", "hyperparameters.json")) or {}
        hyperparameters = user_hyperparameters(raw_hyperparameters)
    if environ.get("TRAINOPS_DISTRIBUTION"):
        distribution = normalize_distribution(environ["TRAINOPS_DISTRIBUTION"], "TRAINOPS_DISTRIBUTION")
    else:
        if raw_hyperparameters is None:
            raw_hyperparameters = read_config(os.path.join(base_dir, "input", "config", "hyperparameters.json")) or {}
        distribution = distribution_from_hyperparameters(raw_hyperparameters)
    resource = read_config(os.path.join(base_dir, "input", "config", "resourceconfig.json")) or {}
    hosts = json.loads(environ["SM_HOSTS"]) if environ.get("SM_HOSTS") else sorted(resource.get("hosts") or [])
    current = environ.get("SM_CURRENT_HOST") or resource.get("current_host") or "algo-1"
    coordinates = _parallel_coordinates(distribution, rank, world)
    return RuntimeContext(
        rank=rank, local_rank=local_rank, world_size=world, local_world_size=local_world,
        model_dir=environ.get("SM_MODEL_DIR") or os.path.join(base_dir, "model"),
        output_data_dir=environ.get("SM_OUTPUT_DATA_DIR") or os.path.join(base_dir, "output", "data"),
        checkpoint_dir=environ.get("TRAINOPS_CHECKPOINT_DIR") or os.path.join(base_dir, "checkpoints"),
        channels=_channels(environ, base_dir),
        hyperparameters=hyperparameters,
        distribution=distribution,
        current_host=current,
        hosts=list(hosts) or [current],
        dp_rank=coordinates["dp_rank"], dp_size=coordinates["dp_size"], tp_rank=coordinates["tp_rank"],
        tp_size=coordinates["tp_size"],
    )


def _parallel_coordinates(distribution: Mapping[str, Any], rank: int, world: int) -> dict[str, int]:
    # SMP jobs with tensor parallelism read one shard of the data per tensor-parallel group (trainops.runtime.
    # smp_native); parameters that do not fit the world are reported by transform(), so here they mean plain DP.
    from trainops.runtime.parallel_base import ParallelismError
    from trainops.runtime.smp_native import layout_for_distribution

    try:
        return layout_for_distribution(distribution, world).coordinates(rank)
    except ParallelismError:
        return {"dp_rank": rank, "dp_size": world, "tp_rank": 0, "tp_size": 1}


def _neuron_host(environ: Mapping[str, str]) -> bool:
    try:
        if int(environ.get("SM_NUM_NEURONS") or "0") > 0:
            return True
    except ValueError:
        pass
    from trainops.runtime import catalog

    instance = catalog.lookup(environ.get("SM_CURRENT_INSTANCE_TYPE", ""))
    return instance is not None and instance.accelerator == "neuron"


def _importable(name: str) -> bool:
    # A trainops stand-in (trainops.runtime.shims, local runs) is not the library.
    from trainops.runtime.shims import is_real

    return is_real(name)


def _log(message: str) -> None:
    print(f"trainops: {message}", file=sys.stderr, flush=True)


def init(backend: str | None = None, timeout_seconds: float | None = None) -> RuntimeContext:
    """Set up this process for training and say where it stands: joins the process group (when the job has more
    than one process and none exists yet) with the right backend, picks and selects the device, and returns the
    :class:`RuntimeContext`. ``backend`` forces a backend; ``timeout_seconds`` bounds collective operations."""
    import datetime

    import torch
    import torch.distributed as dist

    context = job_context()
    environ = os.environ
    kind = context.distribution.get("type", "none")
    neuron = _neuron_host(environ)
    smddp_asked = kind in _SMDDP_TYPES
    smddp_available = smddp_asked and _importable("smdistributed.dataparallel")
    xla_available = neuron and _importable("torch_xla")
    cuda = torch.cuda.is_available()
    chosen = backend or choose_backend(kind, smddp_available, xla_available, neuron, cuda)
    if smddp_asked and not smddp_available and backend is None and context.is_main:
        _log(f"the SMDDP library is not installed here: using the {chosen} backend instead of smddp")

    if chosen == "xla":
        import torch_xla.core.xla_model as xla_model

        context.device = xla_model.xla_device()
    elif chosen in ("nccl", "smddp") or (cuda and chosen != "gloo"):
        # A local run's simulated hosts share this machine's GPUs: spread the job's ranks over them by global rank
        # (two hosts' local rank 0 on one GPU would make NCCL refuse the group). On SageMaker: the local rank.
        own = context.rank if environ.get("TRAINOPS_LOCAL") == "1" else context.local_rank
        index = own % max(1, torch.cuda.device_count())
        torch.cuda.set_device(index)
        context.device = torch.device("cuda", index)
    else:
        context.device = torch.device("cpu")

    if context.world_size > 1 and dist.is_available():
        if not dist.is_initialized():
            options: dict[str, Any] = {}
            if timeout_seconds:
                options["timeout"] = datetime.timedelta(seconds=timeout_seconds)
            if chosen == "smddp":
                import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401 - registers the backend

                dist.init_process_group("smddp", **options)
            elif chosen == "xla":
                import torch_xla.distributed.xla_backend  # noqa: F401 - registers the backend

                dist.init_process_group("xla", init_method="xla://", **options)
            else:
                if "MASTER_ADDR" not in environ or "MASTER_PORT" not in environ:
                    raise RuntimeError("trainops.runtime.init(): MASTER_ADDR / MASTER_PORT are not set; start the "
                                       "script with `python -m trainops.runtime launch` or torchrun")
                dist.init_process_group(chosen, rank=context.rank, world_size=context.world_size, **options)
        context.backend = dist.get_backend()
        if context.is_main:
            _log(f"process group of {context.world_size} ranks, backend {context.backend}, device {context.device}")
    global _CURRENT
    _CURRENT = context
    return context


_CURRENT: RuntimeContext | None = None


def current_context() -> RuntimeContext | None:
    """The context the last :func:`init` of this process returned (None before it), for :func:`transform`."""
    return _CURRENT


def barrier() -> None:
    """Wait for every rank (no-op for a single process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def cleanup() -> None:
    """Leave the process group, if one was joined (call at the end of the script)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
