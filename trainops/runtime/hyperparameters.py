"""Hyperparameters as SageMaker hands them over, and the distribution they carry.

SageMaker writes ``input/config/hyperparameters.json`` with string values that the launchers encoded with
``json.dumps`` (docs/contracts.md, section 2). This module decodes them, separates the framework keys from the user's
own, turns the user's keys into the ``--key value`` arguments a script expects, and rebuilds the canonical
distribution dict (section 1) either from ``trainops_distribution`` or from the AWS toolkit's hyperparameters, so both
routes lead to the same launch plan.

Standard library only: this runs inside training containers that may have no pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trainops.runtime.distributions import TYPES

#: The hyperparameter that carries the canonical distribution JSON (trainops launcher).
DISTRIBUTION_KEY = "trainops_distribution"

#: Every distribution type the runtime knows, with the fields it keeps and their defaults (`distributions.TYPES`).
DISTRIBUTION_FIELDS: dict[str, dict[str, Any]] = {name: kind.fields for name, kind in TYPES.items()}

#: Fields every variant may carry (docs/contracts.md, section 1).
COMMON_FIELDS: dict[str, Any] = {"instance_groups": None, "neuron_parallel_compile": False}

_LAUNCHERS = {name: kind.launchers for name, kind in TYPES.items() if kind.launch == "choice"}


class DistributionError(ValueError):
    """The distribution in the hyperparameters cannot be understood; the message names the key."""


def decode_value(raw: Any) -> Any:
    """One hyperparameter value as the script should see it: ``json.loads`` of the string, or the string itself when
    it is not JSON (SageMaker users also write plain strings). Values that are not strings are returned unchanged."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def decode_hyperparameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every hyperparameter decoded with :func:`decode_value`."""
    return {str(key): decode_value(value) for key, value in raw.items()}


#: SageMaker's own hyperparameters without the ``sagemaker_`` prefix (the toolkit's list): set by automatic model
#: tuning, never the user's.
TOOLKIT_INTERNAL_KEYS = frozenset({"_tuning_objective_metric"})

#: The ``sagemaker_*`` keys the toolkit keeps for itself; every other ``sagemaker_*`` key is a framework parameter
#: (``SM_FRAMEWORK_PARAMS``).
TOOLKIT_OWN_KEYS = frozenset({"sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
                              "sagemaker_region", "sagemaker_container_log_level", "sagemaker_job_name",
                              "sagemaker_default_user_module_name", "sagemaker_s3_output",
                              "_tuning_objective_metric"})


def is_framework_key(key: str) -> bool:
    """Whether a hyperparameter belongs to the launchers (``sagemaker_*``, ``trainops_*``, ``_tuning_objective_metric``)
    rather than to the user's script. Framework keys never reach the script as ``--key value``; ``mp_parameters``
    does, as AWS's toolkit passes it (``--mp_parameters key=value,...``)."""
    return key.startswith(("sagemaker_", "trainops_")) or key in TOOLKIT_INTERNAL_KEYS


def framework_parameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``SM_FRAMEWORK_PARAMS``: the decoded ``sagemaker_*`` hyperparameters other than the toolkit's own (the
    distribution flags such as ``sagemaker_distributed_dataparallel_enabled``)."""
    return {key: value for key, value in decode_hyperparameters(raw).items()
            if key.startswith("sagemaker_") and key not in TOOLKIT_OWN_KEYS}


def user_hyperparameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The user's own hyperparameters, decoded, framework keys removed."""
    return {key: value for key, value in decode_hyperparameters(raw).items() if not is_framework_key(key)}


def argument_value(value: Any) -> str:
    """How one decoded value is written on the script's command line, following the AWS toolkit: dicts become
    ``k=v,k2=v2`` (keys sorted), everything else its Python ``str`` (so ``True``, ``0.1``, ``[1, 2]``)."""
    if isinstance(value, Mapping):
        return ",".join(f"{key}={item}" for key, item in sorted(value.items()))
    return str(value)


def script_arguments(user: Mapping[str, Any]) -> list[str]:
    """The ``--key value`` arguments for the user's hyperparameters, keys sorted (one-letter keys get ``-k``, as the
    toolkit does)."""
    arguments: list[str] = []
    for key in sorted(user):
        arguments.append(f"-{key}" if len(key) == 1 else f"--{key}")
        arguments.append(argument_value(user[key]))
    return arguments


#: The hyperparameter that says how the script gets its arguments: ``v3`` for a spec written in the SDK v3's names.
ARGUMENTS_KEY = "trainops_script_arguments"

#: The hyperparameter that carries SDK v3's ``SourceCode.command`` (its args quoted after it): run by a shell on every
#: host in the code directory instead of an entry point, as v3's ``sm_train.sh`` runs it.
COMMAND_KEY = "trainops_command"


def v3_script_arguments(raw: Mapping[str, Any]) -> list[str]:
    """The user's hyperparameters as the SDK v3's drivers pass them (``hyperparameters_to_cli_args``): ``--key``
    for every key (one letter too), in the order written, each value as the request carries it: a string as it is,
    anything else JSON (``--amp true --layers ["attn", "mlp"]``). v3's drivers decode a string and encode it again,
    so a string that reads as JSON (``"[1,2]"``) reaches the script re-spaced (``[1, 2]``); trainops passes the
    string the user wrote (docs/spec.md, SDK v3 differences)."""
    arguments: list[str] = []
    for key, value in raw.items():
        if is_framework_key(key):
            continue
        arguments += [f"--{key}", value if isinstance(value, str) else json.dumps(value)]
    return arguments


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def normalize_distribution(value: Any, source: str = DISTRIBUTION_KEY) -> dict[str, Any]:
    """The canonical distribution dict with every field of its type present (defaults filled), so two equal
    distributions compare equal whichever route produced them. ``launcher_kind`` (the spec's attribute name) is read
    as ``launcher``. Raises :class:`DistributionError` naming ``source`` when the value is not a known distribution."""
    if value is None or value == {}:
        value = {"type": "none"}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise DistributionError(f"{source}: not JSON: {value[:200]!r}") from None
    if not isinstance(value, Mapping):
        raise DistributionError(f"{source}: expected a JSON object with a 'type', got {type(value).__name__}")
    kind = value.get("type")
    if kind not in DISTRIBUTION_FIELDS:
        known = ", ".join(sorted(DISTRIBUTION_FIELDS))
        raise DistributionError(f"{source}: unknown distribution type {kind!r}; known types: {known}")
    result: dict[str, Any] = {"type": kind}
    for field, default in {**DISTRIBUTION_FIELDS[kind], **COMMON_FIELDS}.items():
        found = value.get(field, value.get("launcher_kind") if field == "launcher" else None)
        result[field] = default if found is None else found
    if kind in _LAUNCHERS and result["launcher"] not in _LAUNCHERS[kind]:
        raise DistributionError(f"{source}: launcher must be one of {', '.join(_LAUNCHERS[kind])}, "
                                f"got {result['launcher']!r}")
    processes = result.get("processes_per_host")
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise DistributionError(f"{source}: processes_per_host must be a positive integer, got {processes!r}")
    if "parameters" in result and not isinstance(result["parameters"], Mapping):
        raise DistributionError(f"{source}: parameters must be a JSON object")
    if "custom_mpi_options" in result:
        result["custom_mpi_options"] = _text(result["custom_mpi_options"])
    result["neuron_parallel_compile"] = bool(result["neuron_parallel_compile"])
    if result["instance_groups"] is not None:
        result["instance_groups"] = [str(name) for name in result["instance_groups"]]
    return result


def _toolkit_distribution(hps: Mapping[str, Any]) -> dict[str, Any]:
    # The SDK's encoding of `distribution` (reference.md table); the checks go from the most specific library to the
    # plain launchers, as the SDK only ever sets one strategy (plus torch_distributed / mpi for the smdistributed ones).
    # The processes-per-host key is read for every launcher AWS's toolkit gives it to (sagemaker_training.runner:
    # torchrun's --nproc_per_node, the smddp / pytorchddp mpirun's host list, MPI's); PyTorch/XLA's launcher counts
    # GPUs itself.
    torchrun = _truthy(hps.get("sagemaker_torch_distributed_enabled", False))
    mpi = _truthy(hps.get("sagemaker_mpi_enabled", False))
    processes = hps.get("sagemaker_mpi_num_of_processes_per_host")
    mpi_options = _text(hps.get("sagemaker_mpi_custom_mpi_options"))
    data_parallel_options = _text(hps.get("sagemaker_distributed_dataparallel_custom_mpi_options"))
    if "mp_parameters" in hps:
        parameters = hps["mp_parameters"]
        if isinstance(parameters, str):
            parameters = decode_value(parameters)
        if not isinstance(parameters, Mapping):
            raise DistributionError(f"mp_parameters: expected a JSON object, got {parameters!r}")
        return {"type": "smp", "launcher": "torchrun" if torchrun or not mpi else "mpirun",
                "parameters": dict(parameters), "processes_per_host": processes, "custom_mpi_options": mpi_options}
    if _truthy(hps.get("sagemaker_distributed_dataparallel_enabled", False)):
        return {"type": "smddp", "launcher": "torchrun" if torchrun else "mpirun", "processes_per_host": processes,
                "custom_mpi_options": data_parallel_options}
    if _truthy(hps.get("sagemaker_pytorch_ddp_enabled", False)):
        return {"type": "pytorchddp", "processes_per_host": processes, "custom_mpi_options": data_parallel_options}
    # The toolkit checks MPI before torch_distributed: both enabled launch mpirun.
    if mpi:
        return {"type": "mpi", "processes_per_host": processes, "custom_mpi_options": mpi_options}
    if torchrun:
        return {"type": "torch_distributed", "processes_per_host": processes}
    if _truthy(hps.get("sagemaker_parameter_server_enabled", False)):
        return {"type": "parameter_server"}
    if _truthy(hps.get("sagemaker_pytorch_xla_multi_worker_enabled", False)):
        return {"type": "pytorchxla"}
    if _truthy(hps.get("sagemaker_multi_worker_mirrored_strategy_enabled", False)):
        return {"type": "multi_worker_mirrored_strategy"}
    return {"type": "none"}


def distribution_from_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical distribution dict (docs/contracts.md, section 1) a job's hyperparameters ask for.

    ``hyperparameters`` may be raw (the json-encoded strings of ``hyperparameters.json``) or already decoded.
    ``trainops_distribution`` wins when present (it may be encoded once or twice); otherwise the dict is rebuilt from
    the AWS toolkit keys (``sagemaker_torch_distributed_enabled``, ``sagemaker_mpi_enabled``, ``mp_parameters``, ...).
    Both routes give the same dict for the same distribution. Raises :class:`DistributionError` on a malformed value.
    """
    hps = decode_hyperparameters(hyperparameters)
    if DISTRIBUTION_KEY in hps:
        return normalize_distribution(hps[DISTRIBUTION_KEY], DISTRIBUTION_KEY)
    distribution = _toolkit_distribution(hps)
    groups = hps.get("sagemaker_distribution_instance_groups")
    if groups:
        distribution["instance_groups"] = groups if isinstance(groups, list) else [groups]
    return normalize_distribution(distribution, "toolkit hyperparameters")
