"""Stand-in for ``smdistributed.dataparallel.torch.torch_smddp`` (local runs only, see :mod:`trainops.runtime.shims`).

Importing the real module registers SMDDP's ``smddp`` process-group backend. This one registers a backend of the same
name that is NCCL on GPU hosts (CUDA tensors, as with SMDDP, which is GPU-only) and gloo on CPU-only hosts, so
``dist.init_process_group(backend="smddp")`` and everything built on it (DDP, FSDP) run unchanged. SMDDP's own
AllReduce / AllGather algorithms are not reproduced: the numbers are the same, the speed is NCCL's or gloo's.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from trainops.runtime.shims import log_once

__all__ = ["BACKEND", "native_backend"]

#: The backend name scripts pass to ``init_process_group``.
BACKEND = "smddp"


def native_backend() -> str:
    """What the stand-in backend really is here: ``nccl`` with CUDA, else ``gloo``."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def _create(store, rank: int, size: int, timeout: timedelta):
    # The plain (non-extended) creator signature of Backend.register_backend: store, rank, world size, timeout.
    from torch.distributed import distributed_c10d as c10d

    if native_backend() == "nccl":
        options = c10d.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return c10d.ProcessGroupNCCL(store, rank, size, options)
    return c10d.ProcessGroupGloo(store, rank, size, timeout)


def _register() -> None:
    if getattr(dist.Backend, BACKEND.upper(), None) is not None:
        return  # registered already (a second import of the stand-in)
    devices = ["cuda"] if native_backend() == "nccl" else ["cpu"]
    dist.Backend.register_backend(BACKEND, _create, devices=devices)


def _announce() -> None:
    log_once("smddp", f"local run without the SMDDP library: smdistributed.dataparallel.torch.torch_smddp is "
                      f"trainops' stand-in; the process-group backend 'smddp' runs on {native_backend()}")


_register()
