"""The SageMaker API's own limits, checked on the rendered CreateTrainingJob request before anything is created.

boto3 checks only the minimums of botocore's model before it sends; the service checks the rest (maximum lengths and
counts, patterns, enumerations) after trainops would have uploaded the code and the runtime. So the whole request
is checked here against the model (`trainops.spec.api_model`, generated from botocore): the request, not the spec,
because the API counts what trainops adds itself (the launcher's hyperparameters and environment variables, its
code channels). Each problem names the spec field the user can change.

The rules the API's documentation states and its shapes cannot (no VolumeKmsKeyId on local NVMe storage,
augmented manifests in Pipe mode only) need nothing trainops adds: they are spec rules (`trainops.spec.api_rules`),
so `validate` reports them too.
"""

from __future__ import annotations

from typing import Any

from trainops.errors import Problem
from trainops.spec.api_model import (
    matches_api_pattern,
    request_constraints,
    training_instance_types,
    unknown_instance_type_message,
)
from trainops.spec.rules import INSTANCE_TYPE

#: Request paths -> the spec field a user changes (the first matching prefix wins).
_SPEC_FIELDS = (
    ("TrainingJobName", "job_name"),
    ("RoleArn", "role"),
    ("AlgorithmSpecification.TrainingImage", "image_uri"),
    ("AlgorithmSpecification.MetricDefinitions", "metric_definitions"),
    ("AlgorithmSpecification.ContainerEntrypoint", "container_entry_point"),
    ("AlgorithmSpecification.ContainerArguments", "container_arguments"),
    ("OutputDataConfig.S3OutputPath", "output_path"),
    ("OutputDataConfig.KmsKeyId", "output_kms_key"),
    ("ResourceConfig.InstanceType", "instance_type"),
    ("ResourceConfig.InstanceCount", "instance_count"),
    ("ResourceConfig.VolumeSizeInGB", "volume_size"),
    ("ResourceConfig.VolumeKmsKeyId", "volume_kms_key"),
    ("ResourceConfig.KeepAlivePeriodInSeconds", "keep_alive_period_in_seconds"),
    ("ResourceConfig.TrainingPlanArn", "training_plan"),
    ("ResourceConfig.InstancePlacementConfig", "instance_placement_config"),
    ("StoppingCondition.MaxRuntimeInSeconds", "max_run"),
    ("StoppingCondition.MaxWaitTimeInSeconds", "max_wait"),
    ("StoppingCondition.MaxPendingTimeInSeconds", "max_pending_time"),
    ("CheckpointConfig.S3Uri", "checkpoint_s3_uri"),
    ("CheckpointConfig.LocalPath", "checkpoint_local_path"),
    ("TensorBoardOutputConfig.S3OutputPath", "tensorboard_output_config.s3_output_path"),
    ("TensorBoardOutputConfig.LocalPath", "tensorboard_output_config.container_local_output_path"),
    ("ProfilerConfig.S3OutputPath", "output_path"),
    ("VpcConfig.Subnets", "subnets"),
    ("VpcConfig.SecurityGroupIds", "security_group_ids"),
    ("RetryStrategy", "max_retry_attempts"),
    ("ExperimentConfig", "experiment_config"),
)

def instance_type_problems(spec: Any) -> list[Problem]:
    """A well-formed ``ml.*`` instance type of ``spec`` (or of its instance groups) the API does not know, with "did
    you mean"; ``local`` / ``local_gpu`` pass (this machine). A name that is not ``ml.<family>.<size>`` at all is the
    spec rule's to refuse (`trainops.spec.rules.instance_type_is_known`), with its own message."""
    named = [("instance_type", spec.instance_type)] if getattr(spec, "instance_type", None) else []
    named += [(f"instance_groups.{index}.instance_type", group.instance_type)
              for index, group in enumerate(getattr(spec, "instance_groups", None) or [])]
    return [Problem(path, unknown_instance_type_message(name)) for path, name in named
            if INSTANCE_TYPE.match(name) and name not in training_instance_types()]


def request_problems(request: dict[str, Any], spec: Any = None) -> list[Problem]:
    """Every way ``request`` breaks the API's limits (model and documentation), each at the spec field to change."""
    found: list[tuple[list[Any], str]] = []
    _check(request, "", [], request_constraints(), found)
    problems: list[Problem] = []
    for where, message in found:
        path = _spec_path(where, request, spec)
        if where in (["HyperParameters"], ["Environment"]):
            message += _added_entries(request, where[0], spec)
        problem = Problem(path, message)
        if problem not in problems:
            problems.append(problem)
    return problems


def _added_entries(request: dict[str, Any], key: str, spec: Any) -> str:
    """The count's explanation: the API counts the entries the launcher adds beside the user's."""
    own = getattr(spec, "hyperparameters" if key == "HyperParameters" else "environment", None) or {}
    added = sorted(set(request.get(key) or {}) - set(own))
    if not added:
        return ""
    excess = len(request[key]) - request_constraints()[key]["max"]
    return (f" ({len(own)} of the spec's and {len(added)} the launcher adds: {', '.join(added)}): leave out at "
            f"least {excess} of the spec's")


def _check(value: Any, path: str, where: list[Any], model: dict[str, dict[str, Any]],
           found: list[tuple[list[Any], str]]) -> None:
    facts = model.get(path)
    if facts is not None:
        message = _violation(value, path, facts, where)
        if message:
            found.append((where, message))
    if isinstance(value, dict):
        if facts is not None and facts["type"] == "map" or f"{path}{{key}}" in model or f"{path}{{value}}" in model:
            for key, item in value.items():
                _check(key, f"{path}{{key}}", [*where, ("key", key)], model, found)
                _check(item, f"{path}{{value}}", [*where, ("key", key)], model, found)
        else:
            for key, item in value.items():
                _check(item, f"{path}.{key}" if path else key, [*where, key], model, found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[]", [*where, index], model, found)


def _violation(value: Any, path: str, facts: dict[str, Any], where: list[Any]) -> str | None:
    kind = facts["type"]
    shown = _request_path(where)
    if kind == "string" and isinstance(value, str):
        enum = facts.get("enum")
        if isinstance(enum, dict):  # listed once at the top: the training instance types
            if value not in training_instance_types():
                return unknown_instance_type_message(value)
        elif enum is not None and value not in enum:
            return f"{value!r} is not one of the API's values for {shown}: {', '.join(enum)}"
        if "max" in facts and len(value) > facts["max"]:
            return f"is {len(value)} characters long; CreateTrainingJob takes at most {facts['max']} in {shown}"
        if "min" in facts and len(value) < facts["min"]:
            return f"is {len(value)} characters long; CreateTrainingJob needs at least {facts['min']} in {shown}"
        if "pattern" in facts and not matches_api_pattern(facts["pattern"], value):
            return (f"{value[:80]!r} does not match the API's pattern for {shown} ({facts['pattern']}): "
                    f"{_pattern_hint(path)}")
    elif kind in ("list", "map") and isinstance(value, (list, dict)):
        if "max" in facts and len(value) > facts["max"]:
            return f"{len(value)} entries in {shown}; CreateTrainingJob takes at most {facts['max']}"
        if "min" in facts and len(value) < facts["min"]:
            return f"{len(value)} entries in {shown}; CreateTrainingJob needs at least {facts['min']}"
    elif kind in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
        if "max" in facts and value > facts["max"]:
            return f"{value} is over the API's maximum of {facts['max']} for {shown}"
        if "min" in facts and value < facts["min"]:
            return f"{value} is under the API's minimum of {facts['min']} for {shown}"
    return None


def _pattern_hint(path: str) -> str:
    if path.startswith("Tags[]"):
        return "tags take letters, digits, spaces and _ . : / = + - @ only"
    if path.endswith("S3Uri") or path.endswith("S3OutputPath"):
        return "give an s3://bucket/key URI"
    return "change the value to one the API accepts"


def _request_path(where: list[Any]) -> str:
    text = ""
    for part in where:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, tuple):
            text += f"[{part[1]!r}]"
        else:
            text += f".{part}" if text else part
    return text or "the request"


def _spec_path(where: list[Any], request: dict[str, Any], spec: Any) -> str:
    head = where[0] if where else ""
    if head in ("HyperParameters", "Environment"):
        field = head.lower() if head == "Environment" else "hyperparameters"
        own = getattr(spec, field, None) or {}
        if len(where) > 1 and isinstance(where[1], tuple) and where[1][1] in own:
            return f"{field}.{where[1][1]}"
        return field
    if head == "Tags":
        return "tags" if len(where) < 3 else f"tags.{where[1]}.{where[2]}"
    if head == "InputDataConfig" and len(where) > 1 and isinstance(where[1], int):
        channels = request.get("InputDataConfig") or []
        name = channels[where[1]].get("ChannelName") if where[1] < len(channels) else None
        if spec is not None and name in (getattr(spec, "inputs", None) or {}):
            return f"inputs.{name}"
        if spec is not None and getattr(spec, "model_uri", None) and name == getattr(spec, "model_channel_name", None):
            return "model_uri"
        return "code_location" if getattr(spec, "code_location", None) else "output_path"
    if head == "ResourceConfig" and len(where) > 3 and where[1] == "InstanceGroups":
        return f"instance_groups.{where[2]}.{_snake(where[3])}"
    dotted = ".".join(str(part) for part in where if isinstance(part, str))
    for prefix, field in _SPEC_FIELDS:
        if dotted == prefix or dotted.startswith(prefix + "."):
            if field == "experiment_config" and len(where) > 1:
                return f"experiment_config.{_snake(str(where[1]))}"
            return field
    return _request_path(where)


def _snake(name: str) -> str:
    return "".join(f"_{char.lower()}" if char.isupper() and index else char.lower()
                   for index, char in enumerate(name))
