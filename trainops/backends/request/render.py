"""The dry run: a job spec rendered to the exact boto3 `create_training_job` keyword arguments.

Nothing here talks to AWS. `submit` sends what `render` returns, unchanged, so `trainops render` shows exactly what
will be created. Two launchers:
- `trainops` (default): the trainops runtime is the container's entrypoint; it and the user's code arrive as input
  channels; the distribution travels as JSON (hyperparameter `trainops_distribution`).
- `toolkit`: the image's own SageMaker training toolkit launches; hyperparameters carry the SDK's distribution keys
  with the SDK's encoding (`json.dumps` of each value).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from trainops.aws.clients import REGION_WAYS
from trainops.backends.contract import encode_hyperparameters, runtime_hyperparameters
from trainops.backends.request.api_limits import instance_type_problems, request_problems
from trainops.backends.request.channel_options import unhonoured_problems
from trainops.backends.request.local_channels import local_channel_problems, local_channels
from trainops.backends.request.render_options import apply_estimator_options
from trainops.errors import Problem, SpecError
from trainops.runtime import catalog
from trainops.runtime.hyperparameters import ARGUMENTS_KEY
from trainops.runtime.output_relay import MASK_VARIABLES
from trainops.runtime.requirements import REQUIREMENTS_KEY
from trainops.spec.base import JOB_NAME, REGION
from trainops.spec.distribution import SMP, Distribution
from trainops.spec.images import is_version_at_least, resolve_training_image
from trainops.spec.inputs import FileSystemInput, TrainingInput, is_local_uri
from trainops.spec.job import JobSpec
from trainops.spec.rules import code_channel_problems
from trainops.spec.secrets import mask_values, masked_environment, secret_values
from trainops.spec.v3 import v3_problems

RUNTIME_CHANNEL = "trainops_runtime"
CODE_CHANNEL = "trainops_code"
TOOLKIT_CODE_CHANNEL = "code"
CONTAINER_DATA = "/opt/ml/input/data"
ENTRYPOINT = ["python3", "-m", "trainops.runtime", "launch"]
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default
MASK = "****"
LOCAL_ROLE = "arn:aws:iam::000000000000:role/trainops-local"  # no role is assumed locally; the request needs one
LOCAL_IMAGE = "trainops-local"  # the interpreter given by --image-python (or this one) stands for the image


@dataclass(frozen=True)
class ArtifactLocations:
    """Where a job's uploads and outputs live under its output path (the SDK's layout where it has one)."""

    code_prefix: str  # the user's source_dir, file by file (trainops launcher)
    runtime_prefix: str  # the trainops runtime package, file by file (trainops launcher)
    source_tarball: str  # sourcedir.tar.gz (toolkit launcher)
    model_artifact: str  # what SageMaker writes at the end
    evaluation_prefix: str  # where the evaluation step writes metrics.json


def is_s3_source(source_dir: str | None) -> bool:
    """True when the code is an uploaded tarball (s3://.../sourcedir.tar.gz), used as given: nothing is uploaded."""
    return source_dir is not None and source_dir.startswith("s3://")


def artifact_locations(output_path: str, job_name: str) -> ArtifactLocations:
    """The S3 locations derived from the output path and the job name."""
    base = f"{output_path.rstrip('/')}/{job_name}"
    return ArtifactLocations(
        code_prefix=f"{base}/trainops/code/",
        runtime_prefix=f"{base}/trainops/runtime/",
        source_tarball=f"{base}/source/sourcedir.tar.gz",
        model_artifact=f"{base}/output/model.tar.gz",
        evaluation_prefix=f"{base}/evaluation/",
    )


def toolkit_distribution_hyperparameters(distribution: Distribution, instance_type: str | None,
                                         framework: str = "pytorch",
                                         instance_groups: list[str] | None = None) -> dict[str, Any]:
    """The hyperparameters the SDK v2 sets for a distribution (before encoding), computed from the SDK's dict form
    the user wrote (or the typed form's equivalent), key by key as the SDK's PyTorch and TensorFlow estimators do:
    sections present but disabled still send their ``*_enabled: false`` flags, empty SMP parameters send no
    ``mp_parameters``, ``pytorchddp`` wins over ``torch_distributed`` and ``torch_distributed`` over ``mpi`` (the
    SDK drops mpi then). ``instance_groups`` are the job's group names: with exactly one, a distribution that names
    none runs on it, and the SDK names it (``sagemaker_distribution_instance_groups``) where it sends groups."""
    sdk = dict(distribution.sdk_form())
    if instance_groups and len(instance_groups) == 1 and sdk and "instance_groups" not in sdk:
        sdk["instance_groups"] = list(instance_groups)
    if framework == "pytorch" and "pytorchddp" in sdk and "smdistributed" not in sdk:
        # The SDK's PyTorch estimator rewrites pytorchddp into smdistributed.dataparallel before anything else.
        sdk["smdistributed"] = {"dataparallel": sdk.pop("pytorchddp")}
    if framework != "pytorch":
        return _framework_distribution_values(sdk, instance_type)
    ddp = "pytorchddp" in sdk and bool(sdk["pytorchddp"].get("enabled", False))
    torchrun = "pytorchddp" not in sdk and "torch_distributed" in sdk and bool(
        sdk["torch_distributed"].get("enabled", False))
    if ddp:
        values: dict[str, Any] = {"sagemaker_pytorch_ddp_enabled": True}
    elif torchrun:
        values = _framework_distribution_values(sdk, instance_type) if "smdistributed" in sdk else {}
        values["sagemaker_torch_distributed_enabled"] = True
        processes = getattr(distribution, "processes_per_host", None)
        if processes and "sagemaker_mpi_num_of_processes_per_host" not in values:
            # The typed form's ranks per host, which the SDK's form cannot send with torch_distributed alone: under
            # the key AWS's toolkit reads for every launcher (sagemaker_training.runner), torchrun's --nproc_per_node.
            values["sagemaker_mpi_num_of_processes_per_host"] = processes
    else:
        return _framework_distribution_values(sdk, instance_type)
    if instance_type is not None:
        values["sagemaker_instance_type"] = instance_type
    return values


def _enabled(section: Any) -> bool:
    return bool(section.get("enabled", False)) if isinstance(section, dict) else False


def _framework_distribution_values(sdk: dict[str, Any], instance_type: str | None) -> dict[str, Any]:
    """The keys every SDK framework estimator derives from the distribution dict (PyTorch's fallback, TensorFlow's
    only encoding)."""
    values: dict[str, Any] = {}
    if "instance_groups" in sdk:
        values["sagemaker_distribution_instance_groups"] = list(sdk["instance_groups"])
    if "pytorchxla" in sdk:
        values["sagemaker_pytorch_xla_multi_worker_enabled"] = _enabled(sdk["pytorchxla"])
    if "parameter_server" in sdk:
        values["sagemaker_parameter_server_enabled"] = _enabled(sdk["parameter_server"])
    if "mpi" in sdk:
        mpi = sdk["mpi"]
        values["sagemaker_mpi_enabled"] = _enabled(mpi)
        if mpi.get("processes_per_host"):
            values["sagemaker_mpi_num_of_processes_per_host"] = mpi["processes_per_host"]
        values["sagemaker_mpi_custom_mpi_options"] = mpi.get("custom_mpi_options") or ""
    if "smdistributed" in sdk:
        smdistributed = sdk["smdistributed"]
        model_parallel = smdistributed.get("modelparallel") or {}
        if _enabled(model_parallel) and model_parallel.get("parameters"):
            values["mp_parameters"] = dict(model_parallel["parameters"])
        data_parallel = smdistributed.get("dataparallel") or {}
        values["sagemaker_distributed_dataparallel_enabled"] = _enabled(data_parallel)
        values["sagemaker_instance_type"] = instance_type
        if _enabled(data_parallel):
            values["sagemaker_distributed_dataparallel_custom_mpi_options"] = \
                data_parallel.get("custom_mpi_options") or ""
    if "multi_worker_mirrored_strategy" in sdk:
        values["sagemaker_multi_worker_mirrored_strategy_enabled"] = _enabled(sdk["multi_worker_mirrored_strategy"])
    return values


def toolkit_model_dir(spec: JobSpec, job_name: str, distribution_values: dict[str, Any]) -> str:
    """TensorFlow's ``model_dir`` hyperparameter, as the SDK sets it: ``/opt/ml/model`` under MPI, else
    ``<output_path>/<job>/model``."""
    if distribution_values.get("sagemaker_mpi_enabled"):
        return "/opt/ml/model"
    return f"{(spec.output_path or '').rstrip('/')}/{job_name}/model"


# What a v3 session derives where a v3 spec leaves these out, and why trainops asks instead: it never creates a bucket
# and never turns the caller's own identity into the job's role (sagemaker.train.defaults, sagemaker 3.27.0).
_V3_OUTPUT = (" (output_data_config.s3_output_path; SDK v3 would use its session's default bucket, "
              "s3://sagemaker-<region>-<account id>/<base_job_name>, creating the bucket if it is missing: trainops "
              "creates no bucket, so name one)")
_V3_ROLE = (" (SDK v3 would resolve the caller's own identity and check it may train: trainops runs the job as no "
            "role it was not given, so name it)")


def sagemaker_problems(spec: JobSpec, region: str | None) -> list[Problem]:
    """What the SageMaker backend needs beyond a valid spec: a role, S3 locations, a region, a real instance type."""
    problems = []
    if not spec.role:
        problems.append(Problem("role", "is required for the sagemaker backend: the IAM role ARN SageMaker assumes"
                                + _V3_ROLE * (spec.sdk == "v3")))
    if not region:
        problems.append(Problem("region", f"is required for the sagemaker backend: give one with {REGION_WAYS}"))
    elif not REGION.match(region):
        problems.append(Problem("region", f"{region!r} is not an AWS region name such as us-east-1"))
    if not spec.output_path:
        problems.append(Problem("output_path", "is required for the sagemaker backend: an s3://bucket/prefix"
                                + _V3_OUTPUT * (spec.sdk == "v3")))
    elif is_local_uri(spec.output_path):
        problems.append(Problem("output_path", f"{spec.output_path!r} is local; the sagemaker backend writes to S3: "
                                               "give an s3://bucket/prefix (local paths are for the local backend)"))
    if spec.sdk == "v3":
        problems += local_channel_problems(spec)  # v3 uploads them (local_channels): they must be there
    for name, channel in spec.channels.items():
        if spec.sdk != "v3" and isinstance(channel, TrainingInput) and is_local_uri(channel.s3_data):
            problems.append(Problem(f"inputs.{name}", f"{channel.s3_data!r} is local; the sagemaker backend reads "
                                                      "S3 or FSx: upload it first (trainops stage SRC s3://...)"))
    for path, instance_type in _instance_types(spec):
        if catalog.is_local(instance_type):
            problems.append(Problem(path, f"{instance_type} runs on this machine only: choose an ml.* instance type "
                                          "for the sagemaker backend"))
    if spec.source_dir and spec.source_dir.startswith("file://"):
        problems.append(Problem("source_dir", "give a local directory path or an s3:// tarball, not a file:// URI"))
    elif spec.source_dir is not None and is_s3_source(spec.source_dir) and (
            not spec.source_dir.endswith(".tar.gz") or len(spec.source_dir.split("/")) < 4):
        problems.append(Problem("source_dir", f"{spec.source_dir!r}: an s3:// source_dir names a tarball object, "
                                              "as the SDK requires (s3://bucket/prefix/sourcedir.tar.gz)"))
    if not spec.image_uri and not spec.framework_version:
        problems.append(Problem("framework_version", "is required to pick the AWS Deep Learning Container (or give "
                                                     "image_uri)"))
    return problems


def _instance_types(spec: JobSpec) -> list[tuple[str, str]]:
    if spec.instance_groups:
        return [(f"instance_groups.{index}.instance_type", group.instance_type)
                for index, group in enumerate(spec.instance_groups)]
    return [("instance_type", spec.instance_type)] if spec.instance_type else []


def training_image(spec: JobSpec, region: str) -> str:
    """The image URI: the spec's own, else the AWS Deep Learning Container for its framework, version and type."""
    if spec.image_uri:
        return spec.image_uri

    instance_type = spec.image_instance_type()
    if not spec.framework_version or not instance_type:
        raise SpecError(Problem("framework_version" if instance_type else "instance_type",
                                "is required to pick the AWS Deep Learning Container (or give image_uri)"))
    return resolve_training_image(
        spec.framework,
        spec.framework_version,
        spec.py_version,
        instance_type,
        region,
        smp_v2=isinstance(spec.dist, SMP) and spec.dist.version == 2,
    )


def render(spec: JobSpec, *, job_name: str, launcher: str | None = None, region: str | None = None) -> dict[str, Any]:
    """The exact `create_training_job` keyword arguments for `spec` as job `job_name`.

    Raises `SpecError` listing everything the SageMaker backend needs and the spec lacks.
    """
    launcher = launcher or spec.launcher
    if launcher not in ("trainops", "toolkit"):
        raise SpecError(Problem("launcher", f"{launcher!r} is not a launcher: use trainops or toolkit"))
    region = spec.region or region
    problems = sagemaker_problems(spec, region)

    problems += instance_type_problems(spec)  # an ml.* type the API lists, with "did you mean"

    problems += code_channel_problems(spec, launcher)  # the spec's rule checked its own launcher; this is render's
    if not isinstance(job_name, str) or len(job_name) > 63 or not JOB_NAME.match(job_name):
        problems.append(Problem("job_name", f"{job_name!r} is not a valid job name (1-63 letters, digits, hyphens)"))
    image = None
    if not problems and region:  # sagemaker_problems() reported a missing region
        try:
            image = training_image(spec, region)
        except SpecError as error:
            problems += error.problems
    if problems:
        raise _named_as_written(spec, SpecError(problems, "job spec for the sagemaker backend"))
    # sagemaker_problems() refused a spec without these, and the image resolved.
    assert region is not None and spec.output_path is not None and image is not None

    locations = artifact_locations(spec.output_path, job_name)
    # An s3:// tarball is the code as it is (the runtime unpacks it); otherwise the files uploaded one by one.
    tarball = spec.source_dir if spec.source_dir is not None and is_s3_source(spec.source_dir) else None

    uploaded = {channel.name: channel.uri for channel in local_channels(spec, spec.output_path, job_name)}
    request = _assemble(spec, job_name, launcher, region, image, output_path=spec.output_path,
                        code=tarball or locations.code_prefix, runtime=locations.runtime_prefix,
                        submit=tarball or locations.source_tarball, channel_uris=uploaded or None)
    # The API's own limits on what is sent, the launcher's additions counted (api_limits), before anything exists.

    problems = request_problems(request, spec)
    if problems:
        raise _named_as_written(spec, SpecError(problems, "job spec for the sagemaker backend"))
    return request


def _named_as_written(spec: JobSpec, error: SpecError) -> SpecError:
    """``error`` with each path in the names the spec was written in (a v3 spec's: ``input_data_config[train]``)."""
    if spec.sdk != "v3":
        return error

    return v3_problems(error)


def render_local(spec: JobSpec, *, job_name: str, launcher: str | None = None, code: str, runtime: str,
                 submit: str, output_path: str, channels: dict[str, str] | None = None,
                 known_instance_types: bool = False) -> dict[str, Any]:
    """The request the local backend executes: what `render` gives SageMaker, with this machine's locations.

    `code` and `runtime` are the trainops launcher's code and runtime channels, `submit` the toolkit's source (a
    directory or tarball path), `output_path` where model.tar.gz goes (file:// or s3://), `channels` the data
    channels' locations (default: the spec's own). None of SageMaker's account checks apply (role, S3-only
    locations); a role and an image are filled in when the spec has none. ``known_instance_types``: an ``ml.*`` type
    must be one the API knows (the local engine, which runs SageMaker's request; Slurm maps types its own way).
    """
    launcher = launcher or spec.launcher
    if launcher not in ("trainops", "toolkit"):
        raise SpecError(Problem("launcher", f"{launcher!r} is not a launcher: use trainops or toolkit"))

    problems = unhonoured_problems(spec, "local" if known_instance_types else "slurm")
    if known_instance_types:
        problems += instance_type_problems(spec)
    if problems:
        raise SpecError(problems, f"job spec for the {'local' if known_instance_types else 'slurm'} backend")
    region = spec.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    try:
        image = training_image(spec, region)
    except SpecError:
        image = LOCAL_IMAGE
    return _assemble(spec, job_name, launcher, region, image, output_path=output_path, code=code, runtime=runtime,
                     submit=submit, role=spec.role or LOCAL_ROLE, channel_uris=channels)


def _assemble(spec: JobSpec, job_name: str, launcher: str, region: str | None, image: str, *, output_path: str,
              code: str, runtime: str, submit: str, role: str | None = None,
              channel_uris: dict[str, str] | None = None) -> dict[str, Any]:
    channels = [_channel(name, channel) for name, channel in spec.channels.items()]
    for entry in channels:
        if channel_uris and entry["ChannelName"] in channel_uris and "S3DataSource" in entry["DataSource"]:
            entry["DataSource"]["S3DataSource"]["S3Uri"] = channel_uris[entry["ChannelName"]]
    request: dict[str, Any] = {
        "TrainingJobName": job_name,
        "RoleArn": role or spec.role,
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": spec.input_mode},
        "HyperParameters": {},
        "InputDataConfig": channels,
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": _resources(spec),
        "StoppingCondition": {"MaxRuntimeInSeconds": spec.max_run},
    }
    environment = dict(spec.environment)
    if launcher == "trainops":
        request["AlgorithmSpecification"]["ContainerEntrypoint"] = list(ENTRYPOINT)
        hyperparameters = runtime_hyperparameters(spec, job_name, region)
        if spec.sdk == "v3":  # the script's arguments as v3's drivers pass them (runtime.hyperparameters)
            hyperparameters[ARGUMENTS_KEY] = "v3"
        if spec.requirements:  # installed by the runtime before the script (runtime.requirements)
            hyperparameters[REQUIREMENTS_KEY] = spec.requirements
        request["InputDataConfig"] += [
            _s3_prefix_channel(CODE_CHANNEL, code),
            _s3_prefix_channel(RUNTIME_CHANNEL, runtime),
        ]
        runtime_path = f"{CONTAINER_DATA}/{RUNTIME_CHANNEL}"
        existing = environment.get("PYTHONPATH")
        environment["PYTHONPATH"] = f"{runtime_path}:{existing}" if existing else runtime_path
        if spec.health_check is not None:
            # The runtime's default (on for multi-node GPU jobs) applies unless the spec decided.
            environment["TRAINOPS_HEALTHCHECK"] = "1" if spec.health_check else "0"
        if spec.secret_environment_names():
            # The runtime masks these variables' values in the logs and the failure file (FailureReason).
            environment[MASK_VARIABLES] = ",".join(spec.secret_environment_names())
    else:
        if spec.enable_network_isolation:
            # No network in the container: the toolkit cannot download the code, so it arrives as a channel.
            if submit.endswith("/sourcedir.tar.gz") and not is_s3_source(spec.source_dir):
                channel = submit.rsplit("/", 1)[0] + "/"
            else:
                channel = submit
            request["InputDataConfig"].append(_s3_prefix_channel(TOOLKIT_CODE_CHANNEL, channel))
            submit = f"{CONTAINER_DATA}/{TOOLKIT_CODE_CHANNEL}/{submit.rstrip('/').rsplit('/', 1)[-1]}"
        hyperparameters = dict(spec.hyperparameters)
        hyperparameters.update(sagemaker_program=spec.entry_point, sagemaker_job_name=job_name, sagemaker_region=region)
        hyperparameters["sagemaker_submit_directory"] = submit
        hyperparameters["sagemaker_container_log_level"] = CONTAINER_LOG_LEVEL
        groups = [group.instance_group_name for group in spec.instance_groups or []]
        distribution_values = toolkit_distribution_hyperparameters(spec.dist, spec.instance_type, spec.framework,
                                                                   groups)
        hyperparameters.update(distribution_values)
        if spec.framework == "tensorflow" and "model_dir" not in spec.hyperparameters:
            hyperparameters["model_dir"] = toolkit_model_dir(spec, job_name, distribution_values)
    request["HyperParameters"] = encode_hyperparameters(hyperparameters)
    if spec.sdk == "v3":
        # v3 sends a string hyperparameter as it is and JSON for the rest (ModelTrainer's safe_serialize).
        request["HyperParameters"].update({key: value for key, value in spec.hyperparameters.items()
                                           if isinstance(value, str)})
    if not request["InputDataConfig"]:
        del request["InputDataConfig"]
    _optional_settings(spec, request, environment)
    # The SDK estimator's other job options (training plan, infra check, ...): render_options. Only render_local
    # passes a role, so a role here means the local backend's request.

    apply_estimator_options(spec, request, launcher, local=role is not None, region=region)
    return request


def _metrics_time_series(spec: JobSpec) -> bool | None:
    """The SDK's default for EnableSageMakerMetricsTimeSeries: on from PyTorch 1.3 and TensorFlow 1.15."""
    if spec.enable_sagemaker_metrics is not None:
        return spec.enable_sagemaker_metrics

    minimum = "1.3" if spec.framework == "pytorch" else "1.15"
    if spec.framework_version and is_version_at_least(spec.framework_version, minimum):
        return True
    return None


def _optional_settings(spec: JobSpec, request: dict[str, Any], environment: dict[str, str]) -> None:
    if spec.metric_definitions:
        request["AlgorithmSpecification"]["MetricDefinitions"] = [
            {"Name": metric.name, "Regex": metric.regex} for metric in spec.metric_definitions]
    time_series = _metrics_time_series(spec)
    if time_series is not None:
        request["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] = time_series
    if spec.output_kms_key:
        request["OutputDataConfig"]["KmsKeyId"] = spec.output_kms_key
    if spec.subnets:
        request["VpcConfig"] = {"SecurityGroupIds": list(spec.security_group_ids or []),
                                "Subnets": list(spec.subnets)}
    if spec.use_spot_instances:
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = spec.max_wait
    if spec.checkpoint_s3_uri:
        request["CheckpointConfig"] = {"S3Uri": spec.checkpoint_s3_uri,
                                       "LocalPath": spec.checkpoint_local_path or DEFAULT_CHECKPOINT_PATH}
    if spec.enable_network_isolation:
        request["EnableNetworkIsolation"] = True
    if spec.encrypt_inter_container_traffic:
        request["EnableInterContainerTrafficEncryption"] = True
    if environment:
        request["Environment"] = environment
    if spec.max_pending_time is not None:
        request["StoppingCondition"]["MaxPendingTimeInSeconds"] = spec.max_pending_time
    if spec.max_retry_attempts:
        request["RetryStrategy"] = {"MaximumRetryAttempts": spec.max_retry_attempts}
    if spec.tags:
        request["Tags"] = [{"Key": tag.key, "Value": tag.value} for tag in spec.tags]


def _resources(spec: JobSpec) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if spec.instance_groups:
        resources["InstanceGroups"] = [
            {"InstanceType": group.instance_type, "InstanceCount": group.instance_count,
             "InstanceGroupName": group.instance_group_name}
            for group in spec.instance_groups
        ]
    else:
        resources["InstanceType"] = spec.instance_type
        resources["InstanceCount"] = spec.instance_count
    resources["VolumeSizeInGB"] = spec.volume_size
    if spec.volume_kms_key:
        resources["VolumeKmsKeyId"] = spec.volume_kms_key
    if spec.keep_alive_period_in_seconds is not None:
        resources["KeepAlivePeriodInSeconds"] = spec.keep_alive_period_in_seconds
    return resources


def _channel(name: str, channel: TrainingInput | FileSystemInput) -> dict[str, Any]:
    if isinstance(channel, FileSystemInput):
        entry: dict[str, Any] = {
            "ChannelName": name,
            "DataSource": {"FileSystemDataSource": {
                "FileSystemId": channel.file_system_id,
                "FileSystemType": channel.file_system_type,
                "DirectoryPath": channel.directory_path,
                "FileSystemAccessMode": channel.file_system_access_mode,
            }},
        }
    else:
        entry = {
            "ChannelName": name,
            "DataSource": {"S3DataSource": {
                "S3DataType": channel.s3_data_type,
                "S3Uri": channel.s3_data,
                "S3DataDistributionType": channel.distribution,
            }},
        }
        if channel.input_mode:
            entry["InputMode"] = channel.input_mode
        # The SDK's TrainingInput options, where the SDK puts them (sagemaker.inputs.TrainingInput).
        source = entry["DataSource"]["S3DataSource"]
        if channel.attribute_names is not None:
            source["AttributeNames"] = list(channel.attribute_names)
        if channel.instance_groups is not None:
            source["InstanceGroupNames"] = list(channel.instance_groups)
        if channel.compression is not None:
            entry["CompressionType"] = channel.compression
        if channel.record_wrapping is not None:
            entry["RecordWrapperType"] = channel.record_wrapping
        if channel.shuffle_config is not None:
            entry["ShuffleConfig"] = {"Seed": channel.shuffle_config.seed}
    if channel.content_type:
        entry["ContentType"] = channel.content_type
    return entry


def _s3_prefix_channel(name: str, prefix: str) -> dict[str, Any]:
    # The launcher's own channels are plain files, whatever the job's input mode.
    return {
        "ChannelName": name,
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": prefix,
                                        "S3DataDistributionType": "FullyReplicated"}},
        "InputMode": "File",
    }


def masked(request: dict[str, Any]) -> dict[str, Any]:
    """A copy for display (CLI, logs, XCom): secret environment values (`trainops.spec.secrets`) are masked, and
    each secret's value wherever else it appears in the request (by value, not only by name)."""
    shown = json.loads(json.dumps(request))
    environment = shown.get("Environment") or {}
    secrets = secret_values(environment)
    shown = {key: masked_environment(value) if key == "Environment" and value else mask_values(value, secrets)
             for key, value in shown.items()}
    return shown
