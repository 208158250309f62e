"""The SDK v2 estimator's structured job options, in the shapes the SDK takes them.

`JobSpec` carries the scalar options itself (`training_plan`, `enable_infra_check`, ...); the two that are
structures live here: `tensorboard_output_config` (the SDK's `TensorBoardOutputConfig(s3_output_path,
container_local_output_path)`) and `instance_placement_config` (a dict the SDK passes to the API unchanged, so its
keys are the API's: `EnableMultipleJobs`, `PlacementSpecifications[{UltraServerId, InstanceCount}]`). Keeping the
SDK's spelling means an estimator's arguments move over unchanged; the rendering is
`trainops.backends.request.render_options`.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from trainops.spec.base import S3_URI, CoreModel
from trainops.spec.inputs import check_data_uri

# The API's patterns (botocore's service model): a plan's name is up to 64 letters, digits and inner hyphens.
TRAINING_PLAN_ARN = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}\Z")
LAMBDA_ARN = re.compile(r"^arn:[A-Za-z0-9\-]+:lambda:[A-Za-z0-9\-]+:\d{12}:function:[^\x00]{1,1024}\Z")
ULTRASERVER_ID = re.compile(r"^[a-zA-Z0-9\-]{1,256}\Z")
#: The SDK's default `model_channel_name`.
MODEL_CHANNEL = "model"


class TensorBoardOutputConfig(CoreModel):
    """Where TensorBoard files written in the container are synced (the SDK's `TensorBoardOutputConfig`)."""

    s3_output_path: str = Field(description="s3:// prefix the files are synced to (a local path or file:// for "
                                "the local backend).")
    container_local_output_path: str | None = Field(
        default=None, description="Directory in the container the script writes to; SageMaker's default "
        "/opt/ml/output/tensorboard.")

    @field_validator("s3_output_path")
    @classmethod
    def _output(cls, value: str) -> str:
        return check_data_uri(value)

    @field_validator("container_local_output_path")
    @classmethod
    def _local(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or ".." in value.split("/") or "\x00" in value):
            raise ValueError(f"{value!r} must be an absolute container path such as /opt/ml/output/tensorboard")
        return value


class PlacementSpecification(CoreModel):
    """Instances of the job placed on one UltraServer."""

    ultra_server_id: str | None = Field(default=None, alias="UltraServerId",
                                        description="UltraServer of the training plan; any when left out.")
    instance_count: int = Field(alias="InstanceCount", ge=1, le=1000, description="Instances on it.")

    @field_validator("ultra_server_id")
    @classmethod
    def _ultra_server(cls, value: str | None) -> str | None:
        if value is not None and not ULTRASERVER_ID.match(value):
            raise ValueError(f"{value!r} is not an UltraServer id (letters, digits and hyphens)")
        return value


class InstancePlacementConfig(CoreModel):
    """UltraServer placement (ResourceConfig.InstancePlacementConfig), in the API's key names as the SDK takes it."""

    enable_multiple_jobs: bool | None = Field(default=None, alias="EnableMultipleJobs",
                                              description="Let other jobs share the UltraServers.")
    placement_specifications: list[PlacementSpecification] = Field(
        default_factory=list, alias="PlacementSpecifications", max_length=10,
        description="[{UltraServerId, InstanceCount}], one per UltraServer.")


def check_training_plan(value: str | None) -> str | None:
    if value is not None and not TRAINING_PLAN_ARN.match(value):
        raise ValueError(f"{value!r} is not a training plan ARN: expected "
                         "arn:aws:sagemaker:<region>:<12 digits>:training-plan/<name> (aws sagemaker "
                         "list-training-plans shows them)")
    return value


def check_credentials_provider(value: str | None) -> str | None:
    if value is not None and not LAMBDA_ARN.match(value):
        raise ValueError(f"{value!r} is not an AWS Lambda function ARN: expected "
                         "arn:aws:lambda:<region>:<12 digits>:function:<name>")
    return value


def check_code_location(value: str | None) -> str | None:
    if value is not None and not S3_URI.match(value):
        raise ValueError(f"{value!r} is not an s3://bucket/prefix URI (where the code is uploaded)")
    return value


def check_container_command(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if not value:
        raise ValueError("is empty: give at least one element or leave the field out")
    if len(value) > 100:
        raise ValueError(f"has {len(value)} elements; SageMaker allows at most 100")
    for item in value:
        if len(item) > 256 or "\x00" in item:
            raise ValueError(f"element {item[:40]!r} must be at most 256 characters, without NUL")
    return value


#: The API's ExperimentEntityName (botocore): 1-120 letters, digits and inner hyphens.
EXPERIMENT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,119}\Z")


class ExperimentConfig(CoreModel):
    """SageMaker Experiments (the SDK's ``fit(experiment_config=...)``, the API's keys, passed on as the SDK does)."""

    experiment_name: str | None = Field(default=None, alias="ExperimentName", description="Experiment.")
    trial_name: str | None = Field(default=None, alias="TrialName", description="Trial of the experiment.")
    trial_component_display_name: str | None = Field(default=None, alias="TrialComponentDisplayName",
                                                     description="Display name of the job's trial component.")
    run_name: str | None = Field(default=None, alias="RunName", description="Run of the experiment.")

    @field_validator("experiment_name", "trial_name", "trial_component_display_name", "run_name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not EXPERIMENT_NAME.match(value):
            raise ValueError(f"{value!r} is not an experiment entity name: 1-120 letters, digits and inner hyphens")
        return value
