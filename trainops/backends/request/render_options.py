"""The SDK v2 estimator's job options rendered into the CreateTrainingJob request, exactly as the SDK renders them.

`render._assemble` builds the request from the core fields and calls `apply_estimator_options` last; each option
here maps to one request field, with the SDK's (2.257.7) shape, and is sent only when the spec sets it, as the SDK
does (`sagemaker.job._Job._load_config`, `EstimatorBase._get_train_args`):

    training_plan                         ResourceConfig.TrainingPlanArn
    instance_placement_config             ResourceConfig.InstancePlacementConfig (the dict as written)
    disable_output_compression            OutputDataConfig.CompressionType = NONE
    tensorboard_output_config             TensorBoardOutputConfig {S3OutputPath, LocalPath}
    container_entry_point / _arguments    AlgorithmSpecification.ContainerEntrypoint / ContainerArguments
    training_repository_*                 AlgorithmSpecification.TrainingImageConfig
    enable_infra_check                    InfraCheckConfig.EnableInfraCheck
    enable_remote_debug                   RemoteDebugConfig.EnableRemoteDebug
    enable_session_tag_chaining           SessionChainingConfig.EnableSessionTagChaining
    disable_profiler                      ProfilerConfig: {S3OutputPath, DisableProfiler: false} by default, as
                                          the SDK sends it; {DisableProfiler: true} when disabled, in the regions
                                          without the profiler and on Trainium
    container_log_level                   hyperparameter sagemaker_container_log_level
    model_uri / model_channel_name        one more channel, after the data channels (the SDK's model channel)
    code_location                         where the code channels / sagemaker_submit_directory point
    dependencies                          nothing in the request: the directories travel inside the code

Problems only the SageMaker backend has (a local TensorBoard or model path, an entrypoint that would replace the
trainops launcher) are raised here together as one `SpecError`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from trainops.errors import Problem, SpecError
from trainops.runtime.catalog import family_of
from trainops.spec.inputs import is_local_uri

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

#: The SDK's model channel (`sagemaker.job._Job._format_model_uri_input`).
MODEL_CONTENT_TYPE = "application/x-sagemaker-model"
DEFAULT_LOG_LEVEL = 20
#: The channels the launchers add for the code (render.CODE_CHANNEL, RUNTIME_CHANNEL, TOOLKIT_CODE_CHANNEL).
CODE_CHANNELS = ("trainops_code", "trainops_runtime", "code")
#: Regions where SageMaker Debugger's profiler does not run, where the SDK turns it off (its
#: PROFILER_UNSUPPORTED_REGIONS, sagemaker 2.257.7 fw_utils.py).
PROFILER_UNSUPPORTED_REGIONS = frozenset({"us-iso-east-1", "us-isob-east-1", "ap-southeast-3", "ap-southeast-4",
                                          "eu-south-2", "me-central-1", "ap-south-2", "eu-central-2",
                                          "us-gov-east-1"})


def option_problems(spec: JobSpec, launcher: str, *, local: bool) -> list[Problem]:
    """What the options need from the launcher and, on SageMaker, from the locations."""
    problems = []
    if launcher == "trainops":
        for name in ("container_entry_point", "container_arguments"):
            if getattr(spec, name) is not None:
                problems.append(Problem(name, "replaces the container's entrypoint, which is the trainops runtime "
                                              "with launcher trainops: set launcher: toolkit (or --launcher "
                                              "toolkit) to run your own"))
    if not local:
        tensorboard = spec.tensorboard_output_config
        if tensorboard is not None and is_local_uri(tensorboard.s3_output_path):
            problems.append(Problem("tensorboard_output_config.s3_output_path",
                                    f"{tensorboard.s3_output_path!r} is local; SageMaker syncs TensorBoard files to "
                                    "S3: give an s3://bucket/prefix"))
        if spec.model_uri is not None and is_local_uri(spec.model_uri):
            problems.append(Problem("model_uri", f"{spec.model_uri!r} is local; the sagemaker backend reads the model "
                                                 "from S3: upload it first (aws s3 cp ...) and give its s3:// URI"))
    return problems


def apply_estimator_options(spec: JobSpec, request: dict[str, Any], launcher: str, *, local: bool,
                            region: str | None = None) -> None:
    """Add the options `spec` sets to `request` (built by `render._assemble`) in place."""
    problems = option_problems(spec, launcher, local=local)
    if problems:
        raise SpecError(problems, "job spec for the sagemaker backend")
    resources = request["ResourceConfig"]
    if spec.training_plan is not None:
        resources["TrainingPlanArn"] = spec.training_plan
    if spec.instance_placement_config is not None:
        resources["InstancePlacementConfig"] = spec.instance_placement_config.model_dump(
            mode="json", by_alias=True, exclude_unset=True)
    if spec.disable_output_compression:
        request["OutputDataConfig"]["CompressionType"] = "NONE"
    elif spec.sdk == "v3":  # ModelTrainer always says GZIP (its OutputDataConfig's default)
        request["OutputDataConfig"]["CompressionType"] = "GZIP"
    algorithm = request["AlgorithmSpecification"]
    if spec.container_entry_point is not None:
        algorithm["ContainerEntrypoint"] = list(spec.container_entry_point)
    if spec.container_arguments is not None:
        algorithm["ContainerArguments"] = list(spec.container_arguments)
    if spec.training_repository_access_mode is not None:
        image_config: dict[str, Any] = {"TrainingRepositoryAccessMode": spec.training_repository_access_mode}
        if spec.training_repository_credentials_provider_arn is not None:
            image_config["TrainingRepositoryAuthConfig"] = {
                "TrainingRepositoryCredentialsProviderArn": spec.training_repository_credentials_provider_arn}
        algorithm["TrainingImageConfig"] = image_config
    if spec.tensorboard_output_config is not None:
        tensorboard = {"S3OutputPath": spec.tensorboard_output_config.s3_output_path}
        if spec.tensorboard_output_config.container_local_output_path is not None:
            tensorboard["LocalPath"] = spec.tensorboard_output_config.container_local_output_path
        request["TensorBoardOutputConfig"] = tensorboard
    if spec.experiment_config is not None:
        request["ExperimentConfig"] = spec.experiment_config.model_dump(mode="json", by_alias=True,
                                                                         exclude_none=True)
    if spec.enable_infra_check is not None:
        request["InfraCheckConfig"] = {"EnableInfraCheck": spec.enable_infra_check}
    if spec.enable_remote_debug is not None:
        request["RemoteDebugConfig"] = {"EnableRemoteDebug": spec.enable_remote_debug}
    if spec.enable_session_tag_chaining is not None:
        request["SessionChainingConfig"] = {"EnableSessionTagChaining": spec.enable_session_tag_chaining}
    if spec.sdk != "v3":  # ModelTrainer sends no ProfilerConfig
        request["ProfilerConfig"] = profiler_config(spec, request["OutputDataConfig"]["S3OutputPath"], region)
    hyperparameters = request.setdefault("HyperParameters", {})
    if launcher == "toolkit" or spec.container_log_level != DEFAULT_LOG_LEVEL:
        hyperparameters["sagemaker_container_log_level"] = json.dumps(spec.container_log_level)
    if spec.model_uri is not None:
        _add_model_channel(spec, request)
    if spec.code_location and not local:
        _move_code(spec, request)


def profiler_config(spec: JobSpec, output_path: str, region: str | None) -> dict[str, Any]:
    """ProfilerConfig as the SDK's estimator sends it (`_prepare_profiler_for_training`): SageMaker's system
    monitoring on, writing under the output path, unless `disable_profiler`, the region has no profiler or the
    instance type is Trainium's (the SDK's `_instance_type_supports_profiler`: it turns the profiler off there)."""
    family = family_of(spec.instance_type or "")
    if spec.disable_profiler or (region or "").lower() in PROFILER_UNSUPPORTED_REGIONS or family.startswith("trn"):
        return {"DisableProfiler": True}
    return {"S3OutputPath": output_path, "DisableProfiler": False}


def _add_model_channel(spec: JobSpec, request: dict[str, Any]) -> None:
    channel = {
        "ChannelName": spec.model_channel_name,
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": spec.model_uri,
                                        "S3DataDistributionType": "FullyReplicated"}},
        "ContentType": MODEL_CONTENT_TYPE,
        "InputMode": "File",
    }
    channels = request.setdefault("InputDataConfig", [])
    # After the data channels and before the launchers' own (the SDK: inputs, model, code).
    channels.insert(len(spec.inputs), channel)


def _move_code(spec: JobSpec, request: dict[str, Any]) -> None:
    """Point the launchers' code channels and the toolkit's submit directory at `code_location`: what the request
    puts under ``<output_path>/<job>/`` for them moves to ``<code_location>/<job>/`` (`locations.job_locations`,
    where the backend uploads it). Data and model channels are the user's and stay."""
    job = request["TrainingJobName"]
    old = f"{request['OutputDataConfig']['S3OutputPath'].rstrip('/')}/{job}/"
    new = f"{str(spec.code_location).rstrip('/')}/{job}/"

    def moved(uri: str) -> str:
        return new + uri[len(old):] if uri.startswith(old) else uri

    for channel in request.get("InputDataConfig") or []:
        source = channel["DataSource"].get("S3DataSource")
        if source and channel["ChannelName"] in CODE_CHANNELS:
            source["S3Uri"] = moved(source["S3Uri"])
    hyperparameters = request.get("HyperParameters") or {}
    submit = hyperparameters.get("sagemaker_submit_directory")
    if submit is not None and isinstance(json.loads(submit), str):
        hyperparameters["sagemaker_submit_directory"] = json.dumps(moved(json.loads(submit)))
