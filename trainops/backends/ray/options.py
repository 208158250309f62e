"""What the ray backend takes: where the cluster is (`RaySettings`, the backend's context, carried by every handle)
and a job's options (`RayOptions`).

A front end passes both in one mapping (the CLI's ``-o KEY=VALUE``, a pipeline file's ``backend_options``); the seam
splits it and coerces text to the declared types (``runtime_env`` and ``resources_per_host`` from JSON).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from trainops.backends.kit import BackendOptions, Problem, SpecError, path_problems
from trainops.backends.options import front_end_option_problems

#: The settings that say where the cluster is: the backend's context.
CLUSTER_SETTINGS = ("address", "token_file", "shared_dir")
#: Placement strategies of Ray's placement groups: how the job's hosts (one bundle each) land on the nodes.
PLACEMENTS = ("STRICT_SPREAD", "SPREAD", "PACK", "STRICT_PACK")
#: runtime_env keys trainops sets itself (the code it ships, the contract's variables are merged, not replaced).
OWNED_RUNTIME_ENV = ("working_dir", "py_modules")
_ADDRESS = re.compile(r"^(https?|ray)://[^\s/]+(/[^\s]*)?\Z")


@dataclass(frozen=True)
class RaySettings:
    """Where a Ray cluster is and how it is reached (the ray backend's context).

    Args:
        address: the Jobs API's address (the dashboard's, ``http://head:8265``); default ``$RAY_ADDRESS`` when it
            is one (an ``http(s)://`` address).
        token_file: a file holding a bearer token (Ray's token authentication, or a proxy's in front of the
            dashboard); sent as ``Authorization: Bearer``.
        shared_dir: a directory this machine and every node see (the job laid out there as on Slurm); without it
            the code travels in the job's ``runtime_env``.
    """

    address: str | None = None
    token_file: str | None = None
    shared_dir: str | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        if self.address is not None and not (isinstance(self.address, str) and _ADDRESS.match(self.address)):
            problems.append(Problem("address", f"{self.address!r} is not the Jobs API's address: give the "
                                               "dashboard's http://HOST:8265"))
        elif isinstance(self.address, str) and self.address.startswith("ray://"):
            problems.append(Problem("address", f"{self.address!r} is a Ray Client address; the ray backend submits "
                                               "through the Jobs API: give the dashboard's http://HOST:8265"))
        path_problems(self.token_file, "token_file", problems)
        path_problems(self.shared_dir, "shared_dir", problems, absolute=True)
        if problems:
            raise SpecError(problems, "ray backend settings")

    def resolved_address(self) -> str:
        """The address given, else ``$RAY_ADDRESS`` when it is a Jobs API address; `SpecError` when neither."""
        if self.address:
            return self.address.rstrip("/")
        found = os.environ.get("RAY_ADDRESS", "")
        if re.match(r"^https?://", found):
            return found.rstrip("/")
        why = f" ($RAY_ADDRESS is {found!r}, not an http:// address)" if found else ""
        raise SpecError(Problem("address", f"the ray backend needs the cluster's Jobs API address{why}: -o "
                                           "address=http://HEAD:8265, or RAY_ADDRESS"), "ray backend settings")

    def given(self) -> dict[str, str]:
        """The settings given (a handle's location)."""
        return {name: value for name in CLUSTER_SETTINGS if (value := getattr(self, name)) is not None}


@dataclass(frozen=True)
class RayOptions(BackendOptions):
    """Options of a job on the ray backend.

    Args:
        runtime_env: Ray's runtime environment for the job (pip, conda, env_vars, ...), merged with what trainops
            ships: ``working_dir`` and ``py_modules`` are trainops' (the code and the runtime); ``env_vars`` are
            merged, the spec's environment winning.
        placement: how the hosts' bundles land on the nodes (default ``STRICT_SPREAD``: one host per Ray node, as
            one container per instance).
        cpus_per_host: logical CPUs each host's bundle asks (default 1).
        gpus_per_host: GPUs each host's bundle asks (default: the instance type's GPUs; 0 on a CPU cluster).
        resources_per_host: custom Ray resources each bundle asks (``{"accelerator_type:A10G": 1}``).
        processes_per_host: ranks per host (default: the spec's, else the GPUs, else one).
        channel_overrides: channel name -> a directory every node sees, read instead of the spec's source (the
            pipeline's train step gives its channels so).
        checkpoint_key: the key of the job's checkpoint directory, which every host of the job shares (the train
            step gives its job's name, so its attempts <name>-N resume from it; default: the spec's
            checkpoint_s3_uri, else the job's name).
    """

    backend: ClassVar[str] = "ray"

    runtime_env: dict[str, Any] | None = None
    placement: str | None = None
    cpus_per_host: float | None = None
    gpus_per_host: float | None = None
    resources_per_host: dict[str, float] | None = None
    processes_per_host: int | None = None
    checkpoint_key: str | None = None
    channel_overrides: dict[str, str] | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        problems += front_end_option_problems(
            self.channel_overrides, self.checkpoint_key, directory="absolute directory every node sees",
            is_directory=lambda value: os.path.isabs(value.removeprefix("file://")))
        if self.runtime_env is not None:
            if not isinstance(self.runtime_env, dict):
                problems.append(Problem("runtime_env", f"{self.runtime_env!r} is not a mapping (Ray's runtime_env)"))
            else:
                problems += [Problem(f"runtime_env.{key}", "is set by trainops (it ships the job's code and its "
                                                           "runtime): leave it out, or give shared_dir")
                             for key in OWNED_RUNTIME_ENV if key in self.runtime_env]
                env_vars = self.runtime_env.get("env_vars")
                if env_vars is not None and not (isinstance(env_vars, dict) and all(
                        isinstance(key, str) and isinstance(value, str) for key, value in env_vars.items())):
                    problems.append(Problem("runtime_env.env_vars", "is not a mapping of names to text values"))
        if self.placement is not None and self.placement not in PLACEMENTS:
            problems.append(Problem("placement", f"{self.placement!r} is not a placement strategy; use one of "
                                                 f"{', '.join(PLACEMENTS)}"))
        for name in ("cpus_per_host", "gpus_per_host"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                problems.append(Problem(name, f"{value!r} is not a number of at least 0"))
        if self.resources_per_host is not None and not (isinstance(self.resources_per_host, dict) and all(
                isinstance(key, str) and isinstance(value, int | float) and not isinstance(value, bool)
                and value >= 0 for key, value in self.resources_per_host.items())):
            problems.append(Problem("resources_per_host", f"{self.resources_per_host!r} is not a mapping of "
                                                          "resource names to numbers of at least 0"))
        if self.processes_per_host is not None and (isinstance(self.processes_per_host, bool) or not isinstance(
                self.processes_per_host, int) or self.processes_per_host < 1):
            problems.append(Problem("processes_per_host", f"{self.processes_per_host!r} is not a whole number of "
                                                          "at least 1"))
        if problems:
            raise SpecError(problems, "ray backend options")
