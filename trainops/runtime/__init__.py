"""The in-container launcher runtime: what runs inside every SageMaker training container and every simulated host
of the local backend, so a job behaves the same in both places.

``python -m trainops.runtime launch [--dry-run]`` reads the container contract (``/opt/ml`` or
``SAGEMAKER_BASE_DIR``), builds a pure launch plan (argv + environment) and runs it: torchrun, mpirun or one process.
The layers, each its own module: :mod:`contract` (read the files) -> :mod:`config` (a plain decision, no probing)
-> :mod:`plan` / :mod:`mpi_plan` (argv + env, pure; :mod:`host_facts` is the only hardware probe) -> :mod:`execute`
(run, forward signals, sweep, report through :mod:`failure`). Each rank runs under :mod:`rank`.

Training scripts use the helpers re-exported here: :func:`init`, :func:`transform` (DDP, or SMP v2 parameters on
FSDP2 / DTensor: :mod:`parallel`), :func:`barrier`, :func:`cleanup`.

Importing this package pulls in neither pydantic nor torch (torch is imported inside :func:`init`).
"""

from importlib import import_module
from typing import Any

# The helpers are imported on first use (PEP 562): `trainops.runtime.errors` and the other small modules of this
# package are imported by every command and DAG file, which should not pay for `context` and `parallel` (dataclasses,
# inspect: about 15 ms) when they use none of them.
_EXPORTS = {
    "RuntimeContext": "trainops.runtime.context",
    "barrier": "trainops.runtime.context",
    "choose_backend": "trainops.runtime.context",
    "cleanup": "trainops.runtime.context",
    "current_context": "trainops.runtime.context",
    "init": "trainops.runtime.context",
    "job_context": "trainops.runtime.context",
    "distribution_from_hyperparameters": "trainops.runtime.hyperparameters",
    "transform": "trainops.runtime.parallel",
    "ParallelismError": "trainops.runtime.smp_native",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "ParallelismError",
    "RuntimeContext",
    "barrier",
    "choose_backend",
    "cleanup",
    "current_context",
    "distribution_from_hyperparameters",
    "init",
    "job_context",
    "transform",
]
