"""The instance catalog: what each SageMaker ``ml.*`` training instance type carries.

Accelerator kind and count, NeuronCores, GPU memory, vCPUs, EFA and GPUDirect-RDMA support, SMDDP support, datasheet
figures for the health check, and an approximate on-demand price. The facts live in ``instances.json`` next to this
module (data, not code branches) and are read once, on first use.

This module is imported inside training containers, which may have no pydantic and no network: it uses the standard
library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

#: The SageMaker SDK's local-mode instance types: the job runs on this machine, not on a catalogued instance.
LOCAL_TYPES: tuple[str, ...] = ("local", "local_gpu")

_DATA_FILE = "instances.json"


@dataclass(frozen=True)
class InstanceType:
    """One SageMaker training instance type, as the catalog knows it."""

    name: str  # "ml.p4d.24xlarge"
    family: str  # "p4d"
    accelerator: str | None  # "nvidia" | "neuron" | None
    accelerator_model: str | None  # "A100-40GB", "H100", "Trainium", ...
    gpus: int  # NVIDIA GPUs (0 if none)
    gpu_memory_gib: int  # per GPU (0 if none)
    neuron_devices: int  # Trainium chips
    neuron_cores: int  # NeuronCores visible to processes (trn2: logical cores at the default LNC=2)
    vcpus: int
    memory_gib: float
    efa: bool  # EFA-enabled networking
    gpudirect_rdma: bool  # device RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1 applies)
    efa_interfaces: int  # EFA network cards (0 if none)
    smddp_supported: bool  # the SMDDP library supports this type (current AWS documentation)
    bf16_tflops: float | None  # dense bf16 peak per accelerator, vendor datasheet
    memory_bandwidth_gbps: float | None  # accelerator memory bandwidth per accelerator, datasheet GB/s
    price_per_hour: float | None  # approximate on-demand USD per hour, SageMaker Training, us-east-1

    @property
    def accelerators(self) -> int:
        """How many accelerators of either kind (GPUs or Trainium chips) the instance has."""
        return self.gpus or self.neuron_devices


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    # Read lazily: importing the runtime must stay cheap, and most callers never look at the catalog.
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _build(name: str, record: dict[str, Any], accelerators: dict[str, dict[str, Any]]) -> InstanceType:
    model = record.get("accelerator_model")
    chip = accelerators.get(model, {}) if model else {}
    kind = chip.get("kind")
    gpus = int(record.get("gpus", 0))
    return InstanceType(
        name=name,
        family=family_of(name),
        accelerator=kind,
        accelerator_model=model,
        gpus=gpus,
        gpu_memory_gib=int(record.get("gpu_memory_gib", chip.get("memory_gib", 0))) if gpus else 0,
        neuron_devices=int(record.get("neuron_devices", 0)),
        neuron_cores=int(record.get("neuron_cores", 0)),
        vcpus=int(record["vcpus"]),
        memory_gib=float(record["memory_gib"]),
        efa=bool(record.get("efa", False)),
        gpudirect_rdma=bool(record.get("gpudirect_rdma", False)),
        efa_interfaces=int(record.get("efa_interfaces", 0)),
        smddp_supported=bool(record.get("smddp_supported", False)),
        bf16_tflops=_optional_float(chip.get("bf16_tflops")),
        memory_bandwidth_gbps=_optional_float(chip.get("memory_bandwidth_gbps")),
        price_per_hour=_optional_float(record.get("price_per_hour")),
    )


@lru_cache(maxsize=1)
def _instances() -> dict[str, InstanceType]:
    table = _table()
    accelerators = table["accelerators"]
    return {name: _build(name, record, accelerators) for name, record in table["instances"].items()}


def family_of(name: str) -> str:
    """The family part of an instance type name: ``"ml.p4d.24xlarge"`` -> ``"p4d"``, ``"ml.p6-b200.48xlarge"`` ->
    ``"p6-b200"``. Works for names the catalog does not know; returns ``""`` for names without that shape."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "ml":
        return parts[1]
    return ""


def lookup(name: str) -> InstanceType | None:
    """The catalog entry for an instance type name, or None for unknown types and for the local-mode types."""
    if not isinstance(name, str):
        return None
    return _instances().get(name.strip())


def names() -> list[str]:
    """Every instance type in the catalog, sorted."""
    return sorted(_instances())


def families() -> list[str]:
    """Every instance family in the catalog (``"c5"``, ``"g5"``, ``"p4d"``, ``"trn1"``, ...), sorted."""
    return sorted({instance.family for instance in _instances().values()})


def is_local(name: str) -> bool:
    """Whether the name is one of the SageMaker SDK's local-mode types (``local``, ``local_gpu``)."""
    return name in LOCAL_TYPES


def region_price_multipliers() -> dict[str, float]:
    """The regions whose prices the catalog can estimate, each with its factor relative to us-east-1."""
    table = _table()["region_price_multipliers"]
    return {region: float(factor) for region, factor in table.items() if not region.startswith("_")}


def hourly_price(name: str, region: str = "us-east-1") -> float | None:
    """Approximate on-demand USD per instance-hour of SageMaker Training for an instance type in a region.

    The catalog holds us-east-1 list prices and a table of region multipliers. Returns None when the price is not
    known: an unknown or local instance type, a type whose price the catalog leaves empty, or a region missing from
    the multiplier table. Prices are estimates for cost reports, never billing figures.
    """
    instance = lookup(name)
    if instance is None or instance.price_per_hour is None:
        return None
    factor = region_price_multipliers().get(region)
    if factor is None:
        return None
    return round(instance.price_per_hour * factor, 4)
