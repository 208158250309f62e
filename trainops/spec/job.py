"""The job spec: one typed model of a distributed-training job, validated before anything is created.

Field names follow the SageMaker Python SDK v2 estimator (`PyTorch(...)`), so a user moving an estimator over keeps
the names. Single-field checks are declared on the fields; rules that need several fields live in
`trainops.spec.rules` and all run together, so every problem is reported at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from trainops.spec.api_model import tag_problem
from trainops.spec.base import (
    CHANNEL_NAME,
    ENV_NAME,
    JOB_NAME,
    REGION,
    ROLE_ARN,
    S3_URI,
    SECURITY_GROUP_ID,
    SUBNET_ID,
    CoreModel,
    raise_problems,
    relocated,
)
from trainops.spec.distribution import (
    Distribution,
    DistributionInput,
    NoDistribution,
    SdkDistribution,
)
from trainops.spec.estimator_options import (
    MODEL_CHANNEL,
    ExperimentConfig,
    InstancePlacementConfig,
    TensorBoardOutputConfig,
    check_code_location,
    check_container_command,
    check_credentials_provider,
    check_training_plan,
)
from trainops.spec.images import image_instance_type
from trainops.spec.inputs import ChannelInput, FileSystemInput, TrainingInput, check_data_uri, normalise_channel
from trainops.spec.rule_registry import all_problems
from trainops.spec.secrets import secret_environment_names

VERSION = re.compile(r"^\d+(\.\d+){0,2}\Z")
PY_VERSION = re.compile(r"^py[23]\d{0,2}\Z")
MAX_RUN_LIMIT = 28 * 24 * 3600  # SageMaker's MaxRuntimeInSeconds ceiling without a quota increase
KEEP_ALIVE_LIMIT = 21600  # KeepAlivePeriodInSeconds' maximum in botocore's model (tests/unit/spec/test_api_model.py)
# Validation-context keys (see `trainops.spec.loader.parse_job_spec`): rules to skip because a field they read was
# invalid, and a flag saying the cross-field rules ran.
SKIP_RULES_READING = "trainops_skip_rules_reading"
RULES_RAN = "trainops_rules_ran"
#: The rule sets of the engine the spec is for (`trainops.spec.rule_registry`; absent: the default backend's).
RULE_SETS = "trainops_rule_sets"


# What YAML gives for `team: vision` or `OMP_NUM_THREADS: 4`: both mappings accept scalars and store them as text.
_SCALAR_MAPPING = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}


def _also_accepts(*alternatives: dict[str, Any]) -> Any:
    """A JSON Schema hook: the field's generated schema, or one of `alternatives` (input the validators convert)."""
    def extend(schema: dict[str, Any]) -> None:
        kept: dict[str, Any] = {key: schema.pop(key) for key in ("title", "description", "default") if key in schema}
        generated = dict(schema)
        schema.clear()
        schema.update(kept)
        schema["anyOf"] = [generated, *alternatives]

    return extend


class Tag(CoreModel):
    """A resource tag, as the SageMaker API and SDK spell it."""

    key: str = Field(alias="Key", min_length=1, max_length=128, description="Tag key.")
    value: str = Field(alias="Value", max_length=256, description="Tag value.")

    @field_validator("key", "value")
    @classmethod
    def _api_tag_text(cls, value: str, info: ValidationInfo) -> str:
        problem = tag_problem(info.field_name or "key", value)
        if problem:
            raise ValueError(problem)
        return value


class MetricDefinition(CoreModel):
    """A metric SageMaker reads from the job's logs with a regular expression (the SDK's `metric_definitions`)."""

    name: str = Field(alias="Name", min_length=1, max_length=255, pattern=r"^.+$", description="Metric name.")
    regex: str = Field(alias="Regex", min_length=1, max_length=500, pattern=r"^.+$",
                       description="Regular expression whose first group is the value, e.g. 'loss=([0-9.]+)'.")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"{value!r} is not a regular expression ({error})") from None
        return value


class InstanceGroup(CoreModel):
    """One group of a heterogeneous cluster (the SDK's `InstanceGroup`)."""

    instance_group_name: str = Field(min_length=1, max_length=64, pattern=r"^.+$", description="Name of the group.")
    instance_type: str = Field(description="e.g. ml.p4d.24xlarge.")
    instance_count: int = Field(ge=1, le=1000, description="Hosts in the group.")


def _holds_nul(value: Any) -> bool:
    """Whether a NUL character is in ``value`` or in any string (key or item) of the lists and mappings it holds."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            pending += list(item)
    return False


class JobSpec(CoreModel):
    """A distributed-training job. Field names follow the SageMaker Python SDK v2 estimator."""

    name: str | None = Field(default=None, description="Base job name; a timestamp or a stable hash is appended.")
    role: str | None = Field(default=None, description="IAM role ARN SageMaker assumes (sagemaker backend).")
    region: str | None = Field(default=None, description="AWS region, e.g. us-east-1 (default: --region, then "
                               "AWS_REGION or AWS_DEFAULT_REGION).")
    image_uri: str | None = Field(default=None, max_length=255, description="Training image; default: the AWS DLC.")
    framework: Literal["pytorch", "tensorflow"] = Field(default="pytorch", description="Deep-learning framework.")
    framework_version: str | None = Field(default=None, description="Framework version, e.g. 2.3.0.")
    py_version: str | None = Field(default=None, description="Python version of the image, e.g. py311.")
    entry_point: str | None = Field(default=None, min_length=1, max_length=1024,
                                    description="Training script, relative to source_dir (or give command).")
    source_dir: str | None = Field(default=None, max_length=4096, description="Directory holding the code.")
    launcher: Literal["trainops", "toolkit"] = Field(
        default="trainops", description="Who launches the ranks in the container: the trainops runtime or the "
        "image's own SageMaker training toolkit.")
    health_check: bool | None = Field(
        default=None, description="Run the GPU health check on every host before the ranks start (trainops launcher); "
        "a failing host ends the attempt as an infrastructure failure before training time is paid. Default: on for "
        "multi-node GPU jobs on SageMaker, off otherwise.")
    instance_type: str | None = Field(default=None, description="e.g. ml.p4d.24xlarge; required unless "
                                      "instance_groups is given; local and local_gpu run on this machine.")
    instance_count: int = Field(default=1, ge=1, le=1000, description="Number of hosts.")
    instance_groups: list[InstanceGroup] | None = Field(
        default=None, description="Heterogeneous cluster instead of instance_type/instance_count.")
    distribution: DistributionInput = Field(
        default_factory=NoDistribution, json_schema_extra=_also_accepts({"type": "null"}),
        description="SDK dict form ({smdistributed: {dataparallel: {enabled: true}}}) or typed form ({type: smddp}).")
    hyperparameters: dict[str, Any] = Field(
        default_factory=dict, description="Passed to the script as --key value, each value JSON-encoded (the SDK's "
        "encoding); names that look like secrets are refused.")
    inputs: dict[str, ChannelInput] = Field(
        default_factory=dict, description="Channel name -> s3:// URI, TrainingInput fields or FileSystemInput fields.")
    input_mode: Literal["File", "FastFile", "Pipe"] = Field(default="File", description="Default channel mode.")
    subnets: list[str] | None = Field(default=None, description="VPC subnet ids (needed for FSx/EFS inputs).")
    security_group_ids: list[str] | None = Field(default=None, description="VPC security group ids.")
    output_path: str | None = Field(default=None, description="s3:// prefix (or local path/file:// for local runs).")
    max_run: int = Field(default=86400, ge=1, le=MAX_RUN_LIMIT, description="Maximum runtime in seconds.")
    volume_size: int = Field(default=30, ge=1, le=16384, description="EBS volume per host, GB.")
    volume_kms_key: str | None = Field(default=None, max_length=2048, description="KMS key for the volumes.")
    output_kms_key: str | None = Field(default=None, max_length=2048, description="KMS key for the output.")
    use_spot_instances: bool = Field(default=False, description="Managed spot training.")
    max_wait: int | None = Field(default=None, ge=1, le=2 * MAX_RUN_LIMIT,
                                 description="Spot: seconds to wait for capacity plus run (>= max_run).")
    # The API's range (trainops/spec/sagemaker_api.json, StoppingCondition.MaxPendingTimeInSeconds), checked here
    # too so that a v3 spec hears it in its own name (stopping_condition.max_pending_time_in_seconds).
    max_pending_time: int | None = Field(
        default=None, ge=1800, le=2419200, description="Seconds the job may wait for capacity before SageMaker "
        "stops it (StoppingCondition.MaxPendingTimeInSeconds, v3's stopping_condition.max_pending_time_in_seconds; "
        "the API takes 1,800-2,419,200 and applies it to accelerated instance types only). The local engine starts "
        "a job at once; the Slurm engine refuses it.")
    max_retry_attempts: int | None = Field(default=None, ge=1, le=30, description="Retries on InternalServerError.")
    keep_alive_period_in_seconds: int | None = Field(default=None, ge=0, le=KEEP_ALIVE_LIMIT,
                                                     description="Warm pool keep-alive.")
    checkpoint_s3_uri: str | None = Field(default=None, description="s3:// prefix synced with checkpoint_local_path.")
    checkpoint_local_path: str | None = Field(default=None, description="Default /opt/ml/checkpoints.")
    environment: dict[str, str] = Field(
        default_factory=dict, json_schema_extra=_also_accepts(_SCALAR_MAPPING),
        description="Environment variables of the container; values of secret-looking names are masked in trainops "
        "output.")
    metric_definitions: list[MetricDefinition] = Field(
        default_factory=list, max_length=40,
        description="Metrics SageMaker extracts from the logs: [{Name, Regex}], as in the SDK.")
    enable_sagemaker_metrics: bool | None = Field(
        default=None, description="SageMaker Metrics time series; default as the SDK: on for PyTorch >= 1.3 and "
        "TensorFlow >= 1.15.")
    enable_network_isolation: bool = Field(default=False, description="No outbound network from the container.")
    encrypt_inter_container_traffic: bool = Field(default=False, description="Encrypt traffic between hosts.")
    tags: list[Tag] = Field(default_factory=list, json_schema_extra=_also_accepts(_SCALAR_MAPPING),
                            description="[{Key, Value}] or a mapping.")
    # --- the SDK v2 estimator's other job options (trainops.spec.estimator_options; rendered by
    # trainops.backends.request.render_options) ----------------------------------------------------------------
    training_plan: str | None = Field(
        default=None, description="Training plan ARN (reserved capacity: ResourceConfig.TrainingPlanArn); the "
        "SageMaker preflight checks its status, instances, zone and end before submitting.")
    instance_placement_config: InstancePlacementConfig | None = Field(
        default=None, description="UltraServer placement (ResourceConfig.InstancePlacementConfig): "
        "{EnableMultipleJobs, PlacementSpecifications: [{UltraServerId, InstanceCount}]}.")
    enable_infra_check: bool | None = Field(
        default=None, description="SageMaker's own hardware and network health check before training "
        "(InfraCheckConfig); recorded, not emulated, by the local backend.")
    disable_output_compression: bool = Field(
        default=False, description="Upload the model and output data as files under <output_path>/<job>/output/"
        "model/ and .../output/data/ instead of model.tar.gz and output.tar.gz (OutputDataConfig.CompressionType "
        "NONE).")
    tensorboard_output_config: TensorBoardOutputConfig | None = Field(
        default=None, description="{s3_output_path, container_local_output_path}: TensorBoard files synced to S3 "
        "(TensorBoardOutputConfig).")
    model_uri: str | None = Field(
        default=None, description="A pre-trained model (s3:// object or prefix; a local path or file:// for the "
        "local backend) given to the job as the model channel.")
    model_channel_name: str = Field(default=MODEL_CHANNEL, description="Channel that carries model_uri.")
    dependencies: list[str] = Field(
        default_factory=list, max_length=100, description="Local directories copied next to the code (each "
        "under its own name at the code's root, as the SDK packs them).")
    code_location: str | None = Field(
        default=None, description="s3:// prefix the code is uploaded under (<code_location>/<job>/...); default: "
        "the output path's.")
    container_entry_point: list[str] | None = Field(
        default=None, description="The container's entrypoint (AlgorithmSpecification.ContainerEntrypoint); "
        "launcher toolkit only, the trainops launcher is the entrypoint itself.")
    container_arguments: list[str] | None = Field(
        default=None, description="Arguments of the entrypoint (AlgorithmSpecification.ContainerArguments); "
        "launcher toolkit only.")
    training_repository_access_mode: Literal["Platform", "Vpc"] | None = Field(
        default=None, description="Where the image is pulled from: Platform (ECR) or Vpc (a private registry "
        "in the job's VPC; needs subnets).")
    training_repository_credentials_provider_arn: str | None = Field(
        default=None, description="Lambda function ARN that returns the private registry's credentials "
        "(needs training_repository_access_mode: Vpc).")
    enable_remote_debug: bool | None = Field(
        default=None, description="Allow `aws sagemaker start-session` into the running container "
        "(RemoteDebugConfig); recorded, not emulated, by the local backend.")
    enable_session_tag_chaining: bool | None = Field(
        default=None, description="Pass the role's session tags on to the job's own sessions "
        "(SessionChainingConfig).")
    disable_profiler: bool = Field(
        default=False, description="Turn SageMaker's profiler (system monitoring) off: ProfilerConfig "
        "{DisableProfiler: true}. Default, as the SDK: on, writing under output_path, except in the regions without "
        "it and on Trainium.")
    experiment_config: ExperimentConfig | None = Field(
        default=None, description="SageMaker Experiments: {ExperimentName, TrialName, TrialComponentDisplayName, "
        "RunName} (the SDK's fit(experiment_config=...)), sent as ExperimentConfig; recorded, not emulated, by the "
        "local engine.")
    # --- how the job was written: SDK v3 ModelTrainer shapes (trainops.spec.v3) -------------------------------
    sdk: Literal["v2", "v3"] = Field(
        default="v2", description="Whose behaviour the job follows: v2 (the estimator's) or v3 (ModelTrainer's: "
        "hyperparameters reach the script as v3's drivers pass them, strings as they are and other values "
        "JSON-encoded, in the order written; requirements installed first). A spec written in v3's names is v3.")
    command: str | None = Field(
        default=None, min_length=1, max_length=4096, description="SDK v3's SourceCode.command (with its args "
        "shell-quoted after it): a shell command the trainops runtime runs once on every host, in the code "
        "directory, instead of an entry_point; no distribution launches it and hyperparameters reach it in SM_HPS "
        "only, as in v3.")
    ignore_patterns: list[str] | None = Field(
        default=None, max_length=100, description="Names left out of source_dir when its code is uploaded or laid "
        "out (v3's SourceCode.ignore_patterns: shell-style patterns matched against each file and directory name, "
        "as shutil.ignore_patterns does; v3's default list for a v3 spec: .env, .git, __pycache__, .DS_Store, "
        ".cache, .ipynb_checkpoints); honoured by the SageMaker upload, the local and Slurm code layouts and Ray's "
        "runtime_env excludes. Not given: __pycache__ and .git.")
    requirements: str | None = Field(
        default=None, max_length=1024, description="A requirements file in source_dir (v3's "
        "SourceCode.requirements) that the trainops runtime installs with pip on every host before the script; a "
        "failed install ends the job before the script starts.")
    container_log_level: int = Field(
        default=20, ge=0, le=50, description="Log level of the image's training toolkit "
        "(sagemaker_container_log_level; 20 is logging.INFO); launcher toolkit: the trainops runtime records it "
        "and keeps its own output.")

    # --- what a run may cost, and when a job that hangs is stopped (trainops' own guards: no request field) ----
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="Budget in US dollars over every attempt of a run (at the backend's "
        "price: SageMaker's on-demand list prices on sagemaker and local; refused on a backend with no price, such "
        "as slurm); see `budget` for what reaching it does.")
    budget: Literal["refuse", "stop"] = Field(
        default="stop", description="refuse: refuse before anything is created a run whose first attempt could "
        "cost more than max_cost_usd; stop: stop the job when its billable cost reaches it (either way no retry "
        "starts that cannot fit, and the attempt is classified budget).")
    wait_grace_seconds: int = Field(
        default=3600, ge=0, le=7 * 24 * 3600, description="Grace added to max_run (+ max_wait) for the wait "
        "bound, measured from the job's own start (provisioning, image download, model upload).")
    stop_at_wait_bound: bool = Field(
        default=True, description="Stop the job when its wait bound passes (classified timeout); false: leave "
        "it running and only stop waiting.")
    stall_timeout: int | None = Field(
        default=None, ge=1, le=MAX_RUN_LIMIT, description="Seconds without a new log line or metric after which "
        "a running job is stopped as infrastructure (stalled); off by default, recommended for multi-node GPU "
        "jobs (an NCCL hang prints nothing).")

    # --- single-field checks ---------------------------------------------------------------------------------
    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 63 or not JOB_NAME.match(value)):
            raise ValueError(
                f"{value!r} is not a valid job name: 1-63 letters, digits and hyphens, starting and ending with a "
                "letter or digit")
        return value

    @field_validator("role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        if value is not None and not ROLE_ARN.match(value):
            raise ValueError(f"{value!r} is not an IAM role ARN: expected arn:aws:iam::<12 digits>:role/<name>")
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not REGION.match(value):
            raise ValueError(f"{value!r} is not an AWS region name such as us-east-1")
        return value

    @field_validator("framework_version")
    @classmethod
    def _framework_version(cls, value: str | None) -> str | None:
        if value is not None and not VERSION.match(value):
            raise ValueError(f"{value!r} is not a version such as 2.3 or 2.3.0")
        return value

    @field_validator("py_version")
    @classmethod
    def _py_version(cls, value: str | None) -> str | None:
        if value is not None and not PY_VERSION.match(value):
            raise ValueError(f"{value!r} is not a Python version tag such as py3 or py311")
        return value

    @field_validator("subnets")
    @classmethod
    def _subnets(cls, value: list[str] | None) -> list[str] | None:
        return _ids(value, SUBNET_ID, "subnet id", "subnet-", 16)

    @field_validator("security_group_ids")
    @classmethod
    def _security_groups(cls, value: list[str] | None) -> list[str] | None:
        return _ids(value, SECURITY_GROUP_ID, "security group id", "sg-", 5)

    @field_validator("output_path")
    @classmethod
    def _output_path(cls, value: str | None) -> str | None:
        return None if value is None else check_data_uri(value)

    @field_validator("checkpoint_s3_uri")
    @classmethod
    def _checkpoint_s3_uri(cls, value: str | None) -> str | None:
        if value is not None and not S3_URI.match(value):
            raise ValueError(f"{value!r} is not an s3://bucket/prefix URI")
        return value

    @field_validator("checkpoint_local_path")
    @classmethod
    def _checkpoint_local_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or ".." in value.split("/") or "\x00" in value):
            raise ValueError(f"{value!r} must be an absolute container path such as /opt/ml/checkpoints")
        return value

    @field_validator("training_plan")
    @classmethod
    def _training_plan(cls, value: str | None) -> str | None:
        return check_training_plan(value)

    @field_validator("training_repository_credentials_provider_arn")
    @classmethod
    def _credentials_provider(cls, value: str | None) -> str | None:
        return check_credentials_provider(value)

    @field_validator("code_location")
    @classmethod
    def _code_location(cls, value: str | None) -> str | None:
        return check_code_location(value)

    @field_validator("container_entry_point", "container_arguments")
    @classmethod
    def _container_command(cls, value: list[str] | None) -> list[str] | None:
        return check_container_command(value)

    @field_validator("model_uri")
    @classmethod
    def _model_uri(cls, value: str | None) -> str | None:
        return None if value is None else check_data_uri(value)

    @field_validator("model_channel_name")
    @classmethod
    def _model_channel_name(cls, value: str) -> str:
        if not CHANNEL_NAME.match(value) or value in (".", ".."):
            raise ValueError(f"{value!r} is not a channel name: 1-64 of letters, digits, '.', '_' and '-'")
        return value

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("/") or ".." in value.split("/") or "\x00" in value):
            raise ValueError(f"{value!r} must be a file path relative to source_dir, e.g. requirements.txt")
        return value

    @field_validator("dependencies")
    @classmethod
    def _dependencies(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item or "\x00" in item or item.startswith(("s3://", "file://")):
                raise ValueError(f"{item!r}: give local directory paths (relative to the spec's directory or "
                                 "absolute), as the SDK takes them")
        names = [item.rstrip("/").rsplit("/", 1)[-1] for item in value]
        if len(set(names)) != len(names):
            raise ValueError("two dependencies have the same directory name; each is copied under its own name")
        return value

    @field_validator("inputs")
    @classmethod
    def _channel_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 20:
            raise ValueError(f"has {len(value)} channels; SageMaker allows at most 20")
        bad = [name for name in value if not CHANNEL_NAME.match(name)]
        if bad:
            raise ValueError(f"channel names {bad} must be 1-64 of letters, digits, '.', '_' and '-'")
        # A channel is a directory input/data/<name> in the container: '.' and '..' would name the data directory
        # itself or its parent.
        dots = [name for name in value if name in (".", "..")]
        if dots:
            raise ValueError(f"channel names {dots} are not allowed: a channel is the directory input/data/<name>; "
                             "choose a name such as train")
        return value

    @field_validator("environment", mode="before")
    @classmethod
    def _environment(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if len(value) > 100:
            raise ValueError(f"has {len(value)} variables; SageMaker allows at most 100")
        converted = {}
        for key, item in value.items():
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, (int, float)):
                item = str(item)
            if isinstance(item, str) and len(item) > 512:
                raise ValueError(f"value of {key} is {len(item)} characters; SageMaker allows 512")
            if isinstance(item, str) and "\x00" in item:
                raise ValueError(f"value of {key} contains a NUL character, which no environment variable can hold")
            if key.upper().startswith("TRAINOPS_"):
                raise ValueError(f"{key} is reserved: TRAINOPS_* variables are set by trainops' launcher; use the "
                                 "spec's own fields (health_check, distribution, ...) or another name")
            converted[key] = item
        return converted

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 100:
            raise ValueError(f"has {len(value)} entries; SageMaker allows at most 100")
        for key, item in value.items():
            if not key or len(key) > 256:
                raise ValueError(f"name {key[:40]!r} must be 1-256 characters")
            try:
                encoded = json.dumps(item)
            except (TypeError, ValueError):
                raise ValueError(f"{key}: value must be JSON (string, number, boolean, list or mapping)") from None
            if len(encoded) > 2500:
                raise ValueError(f"{key}: encoded value is {len(encoded)} characters; SageMaker allows 2500")
            if "\x00" in key or _holds_nul(item):
                # json.dumps wrote it as \u0000; the launchers decode it back into the script's arguments
                raise ValueError(f"{key[:40]!r}: contains a NUL character, which no command-line argument can hold "
                                 "(hyperparameters become the training script's arguments); remove it")
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        if isinstance(value, dict):
            # YAML reads `team: 7` or `cost-center: 2024` as numbers; tag values are text.
            value = [{"Key": key, "Value": _scalar_text(item)} for key, item in value.items()]
        if isinstance(value, list) and len(value) > 50:
            raise ValueError(f"has {len(value)} tags; SageMaker allows at most 50")
        keys = [item.get("Key", item.get("key")) for item in value if isinstance(item, dict)] \
            if isinstance(value, list) else []
        twice = sorted({key for key in keys if isinstance(key, str) and keys.count(key) > 1})
        if twice:
            raise ValueError(f"tag key(s) {twice} given twice; the API takes each key once per resource")
        return value

    @field_validator("distribution", mode="wrap")
    @classmethod
    def _typed_distribution(cls, value: Any, handler: Any) -> Distribution:
        """Either spelling in, the typed variant out; errors at the path the user wrote (no union tags)."""
        if value is None:
            value = {}
        if not isinstance(value, (dict, Distribution, SdkDistribution)):
            raise ValueError(
                f"must be a mapping, got {type(value).__name__}: the SDK form, e.g. "
                "{smdistributed: {dataparallel: {enabled: true}}}, or the typed form, e.g. {type: smddp}")
        try:
            parsed = handler(value)
        except ValidationError as error:
            raise relocated(error, _without_distribution_tag) from None
        if isinstance(parsed, SdkDistribution):
            typed = parsed.to_typed()
            typed._sdk_form = parsed.model_dump(mode="json", exclude_none=True)
            return typed
        return parsed

    @field_validator("inputs", mode="wrap")
    @classmethod
    def _inputs_without_tags(cls, value: Any, handler: Any) -> dict[str, Any]:
        try:
            return handler(value)
        except ValidationError as error:
            raise relocated(error, _without_channel_tag) from None

    # --- rules across fields ---------------------------------------------------------------------------------
    @model_validator(mode="after")
    def _cross_field_rules(self, info: ValidationInfo) -> JobSpec:
        context = info.context if isinstance(info.context, dict) else None
        skip = frozenset(context.get(SKIP_RULES_READING, ())) if context else frozenset()
        if context is not None:
            context[RULES_RAN] = True
        rule_sets = context.get(RULE_SETS) if context else None
        problems = all_problems(self, skip=skip, rule_sets=None if rule_sets is None else frozenset(rule_sets))
        if problems:
            raise_problems("JobSpec", problems, self.model_dump(mode="json", by_alias=True))
        return self

    # --- derived views ---------------------------------------------------------------------------------------
    @property
    def channels(self) -> dict[str, TrainingInput | FileSystemInput]:
        """Every input channel in its full form (bare URIs become `TrainingInput`)."""
        return {name: normalise_channel(value) for name, value in self.inputs.items()}

    @property
    def dist(self) -> Distribution:
        """The typed distribution (the field is typed after validation; this says so to type checkers)."""
        return self.distribution  # type: ignore[return-value]

    def host_count(self) -> int:
        """Hosts in the job: instance_count, or the sum of the instance groups."""
        if self.instance_groups:
            return sum(group.instance_count for group in self.instance_groups)
        return self.instance_count

    def image_instance_type(self) -> str | None:
        """The instance type the training image is picked for (one image for every instance group:
        `trainops.spec.images.image_instance_type`)."""
        if self.instance_groups:
            return image_instance_type([group.instance_type for group in self.instance_groups])
        return self.instance_type

    def training_instance_type(self) -> str | None:
        """The instance type the distribution runs on (its instance group's, for heterogeneous clusters)."""
        if self.instance_groups:
            wanted = self.dist.instance_groups or [self.instance_groups[0].instance_group_name]
            for group in self.instance_groups:
                if group.instance_group_name == wanted[0]:
                    return group.instance_type
        return self.instance_type

    def to_json_dict(self) -> dict[str, Any]:
        """The spec as plain JSON data with the distribution in its typed form (what the CLI and XCom carry)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        data["distribution"] = self.dist.to_canonical()
        data["entry_point"] = self.entry_point
        return data

    def secret_environment_names(self) -> list[str]:
        """The secret environment variables (`trainops.spec.secrets`: HF_TOKEN, DB_PASSWORD, OPENAI_KEY, a URL with
        credentials): masked wherever trainops shows or records their values, passed unchanged to the script."""
        return secret_environment_names(self.environment)

    def spec_hash(self) -> str:
        """A stable hash of everything that defines the job (for deterministic names and skipping reruns)."""
        canonical = json.dumps(self.to_json_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _scalar_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _without_distribution_tag(loc: tuple) -> tuple:
    # pydantic's locations: ("sdk", "smdistributed", ...) or ("typed", "smddp", "custom_mpi_options").
    if loc[:1] == ("sdk",):
        return loc[1:]
    if loc[:1] == ("typed",):
        return loc[2:]
    return loc


def _without_channel_tag(loc: tuple) -> tuple:
    # pydantic's locations: (<channel>, "s3" | "uri" | "file_system", ...).
    if len(loc) >= 2 and loc[1] in ("uri", "s3", "file_system"):
        return loc[:1] + loc[2:]
    return loc


def _ids(values: list[str] | None, pattern: re.Pattern, what: str, prefix: str, limit: int) -> list[str] | None:
    if values is None:
        return None
    if not values:
        raise ValueError(f"is empty: give at least one {what} or leave the field out")
    if len(values) > limit:
        raise ValueError(f"has {len(values)} entries; SageMaker allows at most {limit}")
    bad = [value for value in values if not pattern.match(value)]
    if bad:
        shown = ", ".join(repr(value) for value in bad)
        verb = f"is not a {what}" if len(bad) == 1 else f"are not {what}s"
        raise ValueError(f"{shown} {verb} ({prefix} followed by 8-17 hexadecimal digits)")
    if len(set(values)) != len(values):
        raise ValueError("lists the same id twice")
    return values
