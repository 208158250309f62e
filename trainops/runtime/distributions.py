"""Every distribution type the runtime knows, in one table: the fields each keeps, the launcher it needs, and what
it asks of the script's process group.

The decoder (`hyperparameters`), the planner (`plan`, `mpi_plan`), the context (`context`) and `transform()`
(`parallel`) all read this table, so a new distribution type is one row here plus its model and rules in
``spec/distribution.py`` (and, only for the SDK's toolkit encoding, ``backends/request/render.py``).

Standard library only: this runs inside training containers that may have no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DistributionType:
    """One distribution type.

    ``launch`` is ``torchrun``, ``mpirun``, ``per_host`` (one process per host that reads ``TF_CONFIG``), ``plain``
    or ``choice`` (the distribution's own ``launcher`` field decides, among ``launchers``, first the default).
    ``data_parallel``: `transform()` wraps the model in DistributedDataParallel. ``other_framework``: the type is not
    PyTorch's, so `transform()` refuses it with a clear message. ``smddp``: the script's process group may use
    SageMaker's data-parallel library.
    """

    fields: dict[str, Any] = field(default_factory=dict)
    launch: str = "plain"
    launchers: tuple[str, ...] = ()
    data_parallel: bool = False
    other_framework: bool = False
    smddp: bool = False


TYPES: dict[str, DistributionType] = {
    "none": DistributionType(data_parallel=True),
    "torch_distributed": DistributionType({"processes_per_host": None}, launch="torchrun", data_parallel=True),
    "pytorchddp": DistributionType({"processes_per_host": None, "custom_mpi_options": ""}, launch="mpirun",
                                   data_parallel=True, smddp=True),
    "smddp": DistributionType({"launcher": "mpirun", "processes_per_host": None, "custom_mpi_options": ""},
                              launch="choice", launchers=("mpirun", "torchrun"), data_parallel=True, smddp=True),
    "smp": DistributionType({"launcher": "torchrun", "parameters": {}, "processes_per_host": None,
                             "custom_mpi_options": ""}, launch="choice", launchers=("torchrun", "mpirun")),
    "mpi": DistributionType({"processes_per_host": None, "custom_mpi_options": ""}, launch="mpirun",
                            data_parallel=True),
    "parameter_server": DistributionType(launch="per_host", other_framework=True),
    "pytorchxla": DistributionType(launch="torchrun", data_parallel=True),
    "multi_worker_mirrored_strategy": DistributionType(launch="per_host", other_framework=True),
}


def local_ports_needed(host_count: int) -> int:
    """How many consecutive ports, from ``TRAINOPS_MASTER_PORT`` on, a local job of ``host_count`` emulated hosts
    uses: the rendezvous port, then a TensorFlow worker and a parameter-server port per host (`plan._tf_ports`), so
    that the local backend reserves them all (here, so the controller imports no planner to know it)."""
    return 1 + 2 * host_count


def names_where(**wanted: Any) -> tuple[str, ...]:
    """The type names whose attributes equal ``wanted`` (e.g. ``launch="torchrun"``), in the table's order."""
    return tuple(name for name, kind in TYPES.items()
                 if all(getattr(kind, attribute) == value for attribute, value in wanted.items()))
