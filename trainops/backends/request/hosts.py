"""The hosts of a CreateTrainingJob request as SageMaker names them (algo-1..N, in instance-group order): what every
backend that runs the request itself (local emulated hosts, one Slurm node each) lays its hosts out by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def host_groups(request: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(host, instance group, instance type) for every host of the request, algo-1..N in group order."""
    resources = request["ResourceConfig"]
    groups = resources.get("InstanceGroups") or [{"InstanceGroupName": "homogeneousCluster",
                                                   "InstanceType": resources.get("InstanceType") or "local",
                                                   "InstanceCount": resources.get("InstanceCount") or 1}]
    hosts, index = [], 1
    for group in groups:
        for _ in range(int(group["InstanceCount"])):
            hosts.append((f"algo-{index}", group["InstanceGroupName"], group["InstanceType"]))
            index += 1
    return hosts
