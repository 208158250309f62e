"""A job spec written as the SageMaker Python SDK v3 writes a training job (`ModelTrainer`), converted into the one
spec the rest of trainops knows (`trainops.spec.job.JobSpec`, in the SDK v2 estimator's names).

A v3 user writes the constructor's and ``train()``'s arguments with each SDK object as the mapping of its own fields:
``source_code: {source_dir, entry_script, requirements, ignore_patterns}``,
``compute: {instance_type, instance_count, ...}``,
``distributed: {type: torchrun | mpi, process_count_per_node, smp, mpi_additional_options}``, ``stopping_condition``,
``output_data_config``, ``checkpoint_config``, ``networking``, ``input_data_config: [{channel_name, data_source}]``,
``tags: [{key, value}]`` and the ``with_*`` settings under their attribute names. A spec with any of v3's own keys is
a v3 spec: it gets v3's defaults where a field is left out (``ml.m5.xlarge``, one hour of run time, the base job name
``<image repository>-job``) and v3's behaviours (`JobSpec.sdk` = ``v3``: hyperparameters reach the script as v3's
drivers pass them, ``requirements`` are installed before the script). Writing a v2 name beside v3's for the same
thing is refused, naming both. What v3 does that trainops does differently on purpose: docs/spec.md, "SDK v3".
"""

from __future__ import annotations

import shlex
from typing import Any

from trainops.errors import Problem, SpecError

#: v3's defaults (sagemaker.train.defaults, sagemaker 3.27.0).
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"
DEFAULT_MAX_RUNTIME = 3600
#: SourceCode.ignore_patterns' default (sagemaker.core.training.configs.SourceCode).
DEFAULT_IGNORE_PATTERNS = (".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints")
DEFAULT_TENSORBOARD_PATH = "/opt/ml/output/tensorboard"  # sagemaker.core.training.configs.TensorBoardOutputConfig

#: Each v3 key -> {its sub-key: the v2 field} (a whole-value key maps "" to its field).
_GROUPS: dict[str, dict[str, str]] = {
    "training_image": {"": "image_uri"},
    "base_job_name": {"": "name"},
    "training_input_mode": {"": "input_mode"},
    "source_code": {"source_dir": "source_dir", "entry_script": "entry_point", "requirements": "requirements",
                    "ignore_patterns": "ignore_patterns", "command": "command", "args": "_args"},
    "compute": {"instance_type": "instance_type", "instance_count": "instance_count",
                "volume_size_in_gb": "volume_size", "enable_managed_spot_training": "use_spot_instances",
                "keep_alive_period_in_seconds": "keep_alive_period_in_seconds", "instance_groups": "instance_groups",
                "volume_kms_key_id": "volume_kms_key", "training_plan_arn": "training_plan"},
    "stopping_condition": {"max_runtime_in_seconds": "max_run", "max_wait_time_in_seconds": "max_wait",
                           "max_pending_time_in_seconds": "max_pending_time"},
    "output_data_config": {"s3_output_path": "output_path", "kms_key_id": "output_kms_key",
                           "compression_type": "disable_output_compression"},
    "checkpoint_config": {"s3_uri": "checkpoint_s3_uri", "local_path": "checkpoint_local_path"},
    "networking": {"subnets": "subnets", "security_group_ids": "security_group_ids",
                   "enable_network_isolation": "enable_network_isolation",
                   "enable_inter_container_traffic_encryption": "encrypt_inter_container_traffic"},
    "training_image_config": {"training_repository_access_mode": "training_repository_access_mode",
                              "training_repository_auth_config": "training_repository_credentials_provider_arn"},
    "input_data_config": {"": "inputs"},
    "distributed": {"": "distribution"},
    "retry_strategy": {"maximum_retry_attempts": "max_retry_attempts"},
    "infra_check_config": {"enable_infra_check": "enable_infra_check"},
    "remote_debug_config": {"enable_remote_debug": "enable_remote_debug"},
    "session_chaining_config": {"enable_session_tag_chaining": "enable_session_tag_chaining"},
}
#: What a v3 user may write that trainops does not run, each refused with what to do instead (docs/spec.md, "SDK v3").
NOT_TAKEN: dict[str, str] = {
    "compute.cluster_name": "is HyperPodCompute's (v3's fine-tuning trainers submit recipe jobs to a HyperPod "
    "cluster through the HyperPod CLI): trainops does not submit to HyperPod's EKS clusters; give Compute's "
    "instance_type and instance_count for a training job, or run on a HyperPod Slurm cluster with --backend slurm",
    "compute.namespace": "is HyperPodCompute's Kubernetes namespace: trainops does not submit to HyperPod's EKS "
    "clusters; give Compute's instance_type and instance_count, or use --backend slurm on a HyperPod Slurm cluster",
    "compute.node_count": "is HyperPodCompute's: trainops does not submit to HyperPod's EKS clusters; write "
    "compute.instance_count for a training job's hosts",
    "compute.instance_preferences": "is not supported by trainops (v3 picks among several instance types): give "
    "one compute.instance_type, or instance_groups",
    "training_recipe": "is ModelTrainer.from_recipe's (a SageMaker HyperPod recipe v3 resolves into an image, a "
    "launcher script and hyperparameters): trainops does not resolve recipes; write the job's training_image, "
    "source_code and distributed yourself",
    "recipe_overrides": "is ModelTrainer.from_recipe's: trainops does not resolve recipes; write the job's "
    "training_image, source_code and distributed yourself",
    "jumpstart_config": "is ModelTrainer.from_jumpstart_config's: trainops does not look models up in JumpStart; "
    "write the training_image and source_code the model card gives",
    "algorithm_name": "is not supported by trainops (an algorithm resource, not a training image): give "
    "training_image and source_code",
    "training_mode": "is not needed: v3's local-container mode is trainops' local engine (trainops run SPEC "
    "--backend local); remove it",
    "local_container_root": "is not needed: trainops' local engine keeps its jobs under --workdir; remove it",
    "sagemaker_session": "cannot be written in a spec: trainops makes its own AWS clients; give region (and role)",
}
#: Keys both SDKs spell alike whose v3 shape differs (converted when the spec is a v3 one).
_SHARED_RESHAPED = ("tags", "metric_definitions", "tensorboard_output_config")
V3_KEYS = frozenset(_GROUPS)
#: v3's own keys trainops refuses: a spec with one is a v3 spec, told so in v3's words.
_V3_ONLY_REFUSED = frozenset(key for key in NOT_TAKEN if "." not in key)


def is_v3(data: Any) -> bool:
    """Whether ``data`` is written in ModelTrainer's names (any of v3's own keys)."""
    return isinstance(data, dict) and bool((V3_KEYS | _V3_ONLY_REFUSED) & set(data))


def from_model_trainer(data: dict[str, Any]) -> dict[str, Any]:
    """The v2-named spec of a v3 one; every problem of the v3 shape at once (`SpecError`, paths in v3's names)."""
    problems: list[Problem] = []
    v2_names = {field: f"{key}.{sub}" if sub else key for key, subs in _GROUPS.items() for sub, field in subs.items()}
    for field, v3_name in sorted(v2_names.items()):
        if field in data:
            problems.append(Problem(field, f"is the SDK v2 name of {v3_name}, and this spec is written in v3's "
                                           f"names (ModelTrainer): write {v3_name} only"))
    problems.extend(Problem(key, NOT_TAKEN[key]) for key in data if key in NOT_TAKEN)
    if isinstance(data.get("hyperparameters"), str):
        problems.append(Problem("hyperparameters", "is a file name (v3 reads a JSON or YAML file): trainops takes "
                                                   "the mapping itself; write the hyperparameters in the spec"))
    out: dict[str, Any] = {key: value for key, value in data.items() if key not in V3_KEYS and key not in NOT_TAKEN}
    out["sdk"] = "v3"
    for key, subs in _GROUPS.items():
        if key not in data:
            continue
        value = data[key]
        if "" in subs:
            out[subs[""]] = value
            continue
        if not isinstance(value, dict):
            problems.append(Problem(key, f"must be a mapping of {type_name(key)}'s fields ({', '.join(subs)})"))
            continue
        for sub, item in value.items():
            if f"{key}.{sub}" in NOT_TAKEN:
                problems.append(Problem(f"{key}.{sub}", NOT_TAKEN[f"{key}.{sub}"]))
            elif sub not in subs:
                problems.append(Problem(f"{key}.{sub}", _unknown(key, sub, subs)))
            elif item is not None:
                out[subs[sub]] = item
    _defaults(data, out)
    _reshape(out, problems)
    if problems:
        raise SpecError(problems, "job spec (SDK v3 names)")
    return out


def type_name(key: str) -> str:
    return "".join(part.capitalize() for part in key.split("_"))


def _unknown(key: str, sub: str, subs: dict[str, str]) -> str:
    return f"is not a field of {type_name(key)} trainops takes; it takes {', '.join(subs)}"


def _defaults(data: dict[str, Any], out: dict[str, Any]) -> None:
    """v3's defaults where the v3 spec leaves a field out (sagemaker.train.defaults)."""
    if "instance_type" not in out and "instance_groups" not in out:
        out["instance_type"] = DEFAULT_INSTANCE_TYPE
    if "source_dir" in out and "ignore_patterns" not in out:
        out["ignore_patterns"] = list(DEFAULT_IGNORE_PATTERNS)
    stopping = data.get("stopping_condition")
    if stopping is None or (isinstance(stopping, dict) and "max_runtime_in_seconds" in stopping):
        # v3 fills in its one hour where no StoppingCondition is given or its max_runtime_in_seconds is None; a
        # StoppingCondition written without the field sends none, and the API's default (one day, max_run's) applies.
        out.setdefault("max_run", DEFAULT_MAX_RUNTIME)
    image = out.get("image_uri")
    if "name" not in out and isinstance(image, str) and image:
        # v3's default base job name: the image's repository name + "-job" (defaults.get_base_job_name).
        repository = image.split("/")[-1].split("@")[0].split(":")[0]
        out["name"] = f"{repository}-job"


def _reshape(out: dict[str, Any], problems: list[Problem]) -> None:
    """The nested v3 objects whose fields differ from v2's spelling."""
    if isinstance(out.get("instance_groups"), list):
        pass  # InstanceGroup's fields are the same in both SDKs (instance_group_name, instance_type, instance_count)
    arguments = out.pop("_args", None)
    if arguments is not None:
        if not isinstance(out.get("command"), str):
            problems.append(Problem("source_code.args", "args apply to source_code.command only (v3 appends them to "
                                                        "the command): give command, or pass options as "
                                                        "hyperparameters to an entry_script"))
        elif not isinstance(arguments, list) or not all(isinstance(item, (str, int, float)) for item in arguments):
            problems.append(Problem("source_code.args", "must be a list of strings and numbers"))
        else:
            # As v3's _prepare_train_script builds it: the command's words, then each argument shell-quoted.
            out["command"] = " ".join([*out["command"].split(), *(shlex.quote(str(item)) for item in arguments)])
    elif isinstance(out.get("command"), str):
        out["command"] = " ".join(out["command"].split())
    auth = out.get("training_repository_credentials_provider_arn")
    if isinstance(auth, dict):
        # TrainingRepositoryAuthConfig holds the one field: {training_repository_credentials_provider_arn}
        extra = sorted(set(auth) - {"training_repository_credentials_provider_arn"})
        if extra:
            problems.append(Problem(f"training_image_config.training_repository_auth_config.{extra[0]}",
                                    "is not a field of TrainingRepositoryAuthConfig "
                                    "(training_repository_credentials_provider_arn)"))
        out["training_repository_credentials_provider_arn"] = auth.get("training_repository_credentials_provider_arn")
    if isinstance(out.get("disable_output_compression"), str):
        compression = out["disable_output_compression"]
        if compression not in ("GZIP", "NONE"):
            problems.append(Problem("output_data_config.compression_type", "must be GZIP or NONE"))
        out["disable_output_compression"] = compression == "NONE"
    if isinstance(out.get("tags"), list):
        out["tags"] = [{"Key": item.get("key", item.get("Key")), "Value": item.get("value", item.get("Value", ""))}
                       if isinstance(item, dict) else item for item in out["tags"]]
    if isinstance(out.get("metric_definitions"), list):
        out["metric_definitions"] = [{"Name": item.get("name", item.get("Name")),
                                      "Regex": item.get("regex", item.get("Regex"))}
                                     if isinstance(item, dict) else item for item in out["metric_definitions"]]
    board = out.get("tensorboard_output_config")
    if isinstance(board, dict):
        # v3's TensorBoardOutputConfig sends its local_path default, /opt/ml/output/tensorboard.
        board = dict(board)
        board["container_local_output_path"] = board.pop("local_path", DEFAULT_TENSORBOARD_PATH)
        out["tensorboard_output_config"] = board
    if "inputs" in out:
        out["inputs"] = _channels(out["inputs"], problems, out.get("input_mode", "File"))
    if "distribution" in out:
        out["distribution"] = _distribution(out["distribution"], problems)


#: A `Channel`'s own fields beside InputData's (channel_name, data_source, content_type) -> TrainingInput's.
_CHANNEL_FIELDS = {"compression_type": "compression", "record_wrapper_type": "record_wrapping",
                   "input_mode": "input_mode", "shuffle_config": "shuffle_config"}
_INPUT_FIELDS = ("channel_name", "data_source", "content_type", *_CHANNEL_FIELDS)


def _channels(value: Any, problems: list[Problem], job_mode: Any) -> Any:
    """``input_data_config: [{channel_name, data_source, content_type}]`` (v3's InputData, or its Channel with
    ``compression_type``, ``record_wrapper_type``, ``input_mode``, ``shuffle_config``) -> ``inputs: {name:
    channel}``."""
    if not isinstance(value, list):
        problems.append(Problem("input_data_config", "must be a list of InputData: [{channel_name, data_source}]"))
        return {}
    channels: dict[str, Any] = {}
    for index, item in enumerate(value):
        path = f"input_data_config.{index}"
        if not isinstance(item, dict) or "channel_name" not in item or "data_source" not in item:
            problems.append(Problem(path, "each InputData needs channel_name and data_source"))
            continue
        extra = sorted(set(item) - set(_INPUT_FIELDS))
        if extra:
            problems.append(Problem(f"{path}.{extra[0]}", f"is not a field of InputData or Channel "
                                                          f"({', '.join(_INPUT_FIELDS)})"))
        name, source = item["channel_name"], item["data_source"]
        if name in channels:
            problems.append(Problem(f"{path}.channel_name", f"{name!r} is given twice"))
        channel = _data_source(source, f"{path}.data_source", problems)
        options = {_CHANNEL_FIELDS[key]: item[key] for key in _CHANNEL_FIELDS if item.get(key) is not None}
        if options:
            if isinstance(channel, str):
                channel = {"s3_data": channel}
            if isinstance(channel, dict):
                channel.update(options)
        elif isinstance(channel, str) and job_mode == "File":
            # v3 gives a URI's channel InputMode File (create_input_data_channel). In a FastFile or Pipe job that
            # would read the channel in File mode against the job's own mode: trainops leaves it to the job's
            # (docs/spec.md, SDK v3 differences).
            channel = {"s3_data": channel, "input_mode": "File"}
        if item.get("content_type") is not None and isinstance(channel, dict):
            channel["content_type"] = item["content_type"]
        elif item.get("content_type") is not None and isinstance(channel, str):
            channel = {"s3_data": channel, "content_type": item["content_type"]}
        channels[str(name)] = channel
    return channels


_S3_FIELDS = {"s3_uri": "s3_data", "s3_data_type": "s3_data_type", "s3_data_distribution_type": "distribution",
              "attribute_names": "attribute_names", "instance_group_names": "instance_groups"}
_FILE_SYSTEM_FIELDS = {"file_system_id": "file_system_id", "file_system_type": "file_system_type",
                       "directory_path": "directory_path", "file_system_access_mode": "file_system_access_mode"}


def _data_source(source: Any, path: str, problems: list[Problem]) -> Any:
    if isinstance(source, str):
        return source
    if not isinstance(source, dict) or len(source) != 1:
        problems.append(Problem(path, "is an S3 URI or local path, {s3_data_source: {...}} or "
                                      "{file_system_data_source: {...}}"))
        return source
    (kind, fields), = source.items()
    table = {"s3_data_source": _S3_FIELDS, "file_system_data_source": _FILE_SYSTEM_FIELDS}.get(kind)
    if table is None or not isinstance(fields, dict):
        problems.append(Problem(f"{path}.{kind}", "is not a data source trainops takes: s3_data_source or "
                                                  "file_system_data_source"))
        return source
    converted = {}
    for key, item in fields.items():
        if key not in table:
            problems.append(Problem(f"{path}.{kind}.{key}", f"is not a field trainops takes; it takes "
                                                            f"{', '.join(table)}"))
        else:
            converted[table[key]] = item
    return converted


def _distribution(value: Any, problems: list[Problem]) -> Any:
    """``distributed: {type: torchrun | mpi, ...}`` -> the typed distribution. Torchrun with ``smp`` is SMP v2."""
    if value is None:
        return {}
    if not isinstance(value, dict) or value.get("type") not in ("torchrun", "mpi"):
        problems.append(Problem("distributed", "must be {type: torchrun, process_count_per_node, smp} or {type: mpi, "
                                               "process_count_per_node, mpi_additional_options}"))
        return {}
    allowed = {"type", "process_count_per_node"} | ({"smp"} if value["type"] == "torchrun" else
                                                    {"mpi_additional_options"})
    for key in sorted(set(value) - allowed):
        problems.append(Problem(f"distributed.{key}",
                                f"is not a field of {value['type']}: {', '.join(sorted(allowed))}"))
    typed: dict[str, Any] = {}
    if value.get("process_count_per_node") is not None:
        typed["processes_per_host"] = value["process_count_per_node"]
    if value["type"] == "torchrun":
        smp = value.get("smp")
        if smp is not None:
            return {"type": "smp", **typed, "parameters": {key: item for key, item in dict(smp).items()
                                                           if item is not None}}
        return {"type": "torch_distributed", **typed}
    options = value.get("mpi_additional_options") or []
    if not isinstance(options, list):
        problems.append(Problem("distributed.mpi_additional_options", "must be a list of mpirun options"))
        options = []
    if options:
        typed["custom_mpi_options"] = " ".join(str(option) for option in options)
    return {"type": "mpi", **typed}


def v3_problems(error: SpecError) -> SpecError:
    """``error`` of the converted spec with each path in the v3 names the user wrote (``instance_count`` ->
    ``compute.instance_count``, ``inputs.train`` -> ``input_data_config[train]``)."""
    names = {field: f"{key}.{sub}" if sub else key for key, subs in _GROUPS.items() for sub, field in subs.items()}
    problems = []
    for problem in error.problems:
        head, _, rest = problem.path.partition(".")
        if head == "inputs" and rest:
            channel, _, tail = rest.partition(".")
            path = f"input_data_config[{channel}]" + (f".{tail}" if tail else "")
        elif head in names:
            path = names.get(head, head) + (f".{rest}" if rest else "")
        else:
            path = problem.path
        problems.append(Problem(path, problem.message))
    return SpecError(problems, error.source)
