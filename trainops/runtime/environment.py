"""The environment variables a launch adds for the ranks: the ``SM_*`` variables user scripts expect (named and
encoded as the AWS toolkit does) and the EFA / NCCL settings for the instance type.

Pure functions of the config: nothing here reads or writes ``os.environ``. :func:`child_environment` is the one place
where the parent's environment and a plan's additions meet.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from trainops.runtime import catalog
from trainops.runtime.config import LaunchConfig


def _user_entry_point(config: LaunchConfig) -> str:
    """The script relative to the code directory; empty for SDK v3's command, run by a shell outside it (v3 sets
    SM_ENTRY_SCRIPT to "" then)."""
    relative = os.path.relpath(config.entry_point, config.code_dir)
    return "" if relative.startswith("..") else relative


def env_value(value: Any) -> str:
    """A value as the toolkit writes it into an environment variable: strings unchanged, everything else compact
    JSON with sorted keys."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def env_name(name: str) -> str:
    """A channel or hyperparameter name as an environment variable suffix: upper case, other characters as ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def script_environment(config: LaunchConfig, gpus: int, neuron_cores: int, cpus: int) -> dict[str, str]:
    """The ``SM_*`` variables of the AWS toolkit, for this host: hosts, channels, directories, hyperparameters
    (``SM_HPS`` and one ``SM_HP_<NAME>`` each, user keys only), accelerator counts and ``SM_TRAINING_ENV``."""
    user_args = config.script_arguments
    training_env = {
        "channel_input_dirs": config.channels,
        "current_host": config.current_host,
        "current_instance_type": config.instance_type,
        "distribution": config.distribution,
        "hosts": list(config.hosts),
        "hyperparameters": config.user_hyperparameters,
        "input_config_dir": config.input_config_dir,
        "input_data_config": config.input_data_config,
        "input_dir": config.input_dir,
        "job_name": config.job_name,
        "model_dir": config.model_dir,
        "network_interface_name": config.network_interface,
        "num_cpus": cpus,
        "num_gpus": gpus,
        "num_neurons": neuron_cores,
        "output_data_dir": config.output_data_dir,
        "output_dir": config.output_dir,
        "resource_config": config.resource_config,
        "user_entry_point": _user_entry_point(config),
    }
    env: dict[str, str] = {
        "SM_HOSTS": env_value(list(config.hosts)),
        "SM_CURRENT_HOST": config.current_host,
        "SM_CURRENT_INSTANCE_TYPE": config.instance_type,
        "SM_NETWORK_INTERFACE_NAME": config.network_interface,
        "SM_NUM_GPUS": str(gpus),
        "SM_NUM_NEURONS": str(neuron_cores),
        "SM_NUM_CPUS": str(cpus),
        "SM_MODEL_DIR": config.model_dir,
        "SM_OUTPUT_DIR": config.output_dir,
        "SM_OUTPUT_DATA_DIR": config.output_data_dir,
        "SM_OUTPUT_INTERMEDIATE_DIR": os.path.join(config.output_dir, "intermediate"),
        "SM_INPUT_DIR": config.input_dir,
        "SM_INPUT_CONFIG_DIR": config.input_config_dir,
        "SM_RESOURCE_CONFIG": env_value(config.resource_config),
        "SM_INPUT_DATA_CONFIG": env_value(config.input_data_config),
        "SM_CHANNELS": env_value(sorted(config.channels)),
        "SM_HPS": env_value(config.user_hyperparameters),
        "SM_FRAMEWORK_PARAMS": env_value(config.framework_params),
        "SM_USER_ENTRY_POINT": str(training_env["user_entry_point"]),
        "SM_USER_ARGS": env_value(user_args),
        "SM_MODULE_DIR": config.code_dir,
        "SM_TRAINING_ENV": env_value(training_env),
    }
    if config.current_group:
        env["SM_CURRENT_INSTANCE_GROUP"] = config.current_group
    env.update(instance_group_environment(config))
    for name, path in config.channels.items():
        env[f"SM_CHANNEL_{env_name(name)}"] = path
    for name, value in config.user_hyperparameters.items():
        env[f"SM_HP_{env_name(name)}"] = env_value(value)
    parameters = config.distribution.get("parameters")
    if config.distribution["type"] == "smp":
        # SMP reads its configuration from the mp_parameters hyperparameter's variable, which the toolkit exports.
        env["SM_HP_MP_PARAMETERS"] = env_value(parameters or {})
    return env


def instance_group_environment(config: LaunchConfig) -> dict[str, str]:
    """The toolkit's instance-group variables, when ``resourceconfig.json`` lists the groups: the current group's
    hosts, every group (names and ``{name: group}``), whether there are several (``SM_IS_HETERO``) and the groups
    that run the distribution (named, else the current one when a strategy is enabled, else none)."""
    groups = [group for group in config.resource_config.get("instance_groups") or [] if isinstance(group, dict)]
    if not groups:
        return {}
    named = config.distribution.get("instance_groups")
    if named:
        distribution_groups = list(named)
    else:
        distribution_groups = [config.current_group] if config.distribution["type"] != "none" \
            and config.current_group else []
    current = next((group for group in groups if group.get("instance_group_name") == config.current_group), {})
    return {
        "SM_CURRENT_INSTANCE_GROUP_HOSTS": env_value(list(current.get("hosts") or [])),
        "SM_INSTANCE_GROUPS": env_value([group.get("instance_group_name") for group in groups]),
        "SM_INSTANCE_GROUPS_DICT": env_value({group.get("instance_group_name"): group for group in groups}),
        "SM_DISTRIBUTION_INSTANCE_GROUPS": env_value(distribution_groups),
        "SM_IS_HETERO": env_value(len(groups) > 1),
    }


def network_environment(config: LaunchConfig, launcher: str = "torchrun") -> dict[str, str]:
    """The NCCL / EFA variables AWS's PyTorch toolkit gives the ranks of each launcher on a SageMaker host (nothing for
    local runs: a simulated host is not that instance, and its interface names do not exist here).

    Every launcher: ``NCCL_SOCKET_IFNAME=<interface>`` (single-host and CPU jobs too). ``torchrun``: also
    ``NCCL_PROTO=simple``, and on EFA types ``FI_PROVIDER=efa``, with device RDMA ``FI_EFA_USE_DEVICE_RDMA=1`` and
    ``RDMAV_FORK_SAFE=1``. ``mpirun``: on EFA types ``FI_PROVIDER=efa`` and ``NCCL_PROTO=simple``, with device RDMA
    ``FI_EFA_USE_DEVICE_RDMA=1``. ``smddp`` (SMDDP's mpirun): ``FI_PROVIDER=efa`` and ``RDMAV_FORK_SAFE=1`` always,
    ``NCCL_PROTO=simple`` on EFA types, ``FI_EFA_USE_DEVICE_RDMA=1`` with device RDMA. ``plain``: nothing more.
    Which types have EFA comes from the instance catalog (AWS's EFA list, which the toolkit's own list lags)."""
    if config.local or catalog.is_local(config.instance_type):
        return {}
    env = {"NCCL_SOCKET_IFNAME": config.network_interface}
    instance = catalog.lookup(config.instance_type)
    efa = bool(instance and instance.efa)
    rdma = bool(instance and instance.gpudirect_rdma)
    if launcher == "torchrun":
        env["NCCL_PROTO"] = "simple"
        if efa:
            env["FI_PROVIDER"] = "efa"
        if rdma:
            env.update(FI_EFA_USE_DEVICE_RDMA="1", RDMAV_FORK_SAFE="1")
    elif launcher in ("mpirun", "smddp"):
        if efa:
            env.update(FI_PROVIDER="efa", NCCL_PROTO="simple")
        if rdma:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
        if launcher == "smddp":
            env.update(FI_PROVIDER="efa", RDMAV_FORK_SAFE="1")
    return env


def child_environment(parent: Mapping[str, str], additions: Mapping[str, str]) -> dict[str, str]:
    """The environment of the launched process: the parent's, whole (e.g. ``NCCL_NVLS_ENABLE=0`` set by the machine
    must reach every rank), with the plan's additions on top."""
    env = dict(parent)
    env.update(additions)
    return env
