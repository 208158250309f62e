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

from trainops.runtime.context import (
    RuntimeContext,
    barrier,
    choose_backend,
    cleanup,
    current_context,
    init,
    job_context,
)
from trainops.runtime.hyperparameters import distribution_from_hyperparameters
from trainops.runtime.parallel import transform
from trainops.runtime.smp_native import ParallelismError

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
