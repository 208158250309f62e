"""Every parameter of the SDK v2 estimator (sagemaker 2.257.7: `EstimatorBase`, `Framework`, `PyTorch`), and what
trainops does with it: the spec field that takes it, or why trainops leaves it out.

docs/spec.md's "What the SDK adds and trainops leaves out" is generated from `LEFT_OUT`, and a differential test
compares `COVERED` + `LEFT_OUT` with the SDK's own signatures (captured in
tests/differential/goldens/estimator_signature.json), so a parameter a new SDK adds cannot go unnoticed.
"""

from __future__ import annotations

#: The SDK version whose signatures these tables follow.
SDK_VERSION = "2.257.7"

#: SDK parameter -> the job-spec field that takes it (the same name, except `base_job_name`).
COVERED: dict[str, str] = {name: name for name in (
    "role", "instance_count", "instance_type", "keep_alive_period_in_seconds", "volume_size", "volume_kms_key",
    "max_run", "input_mode", "output_path", "output_kms_key", "tags", "subnets", "security_group_ids", "model_uri",
    "model_channel_name", "metric_definitions", "encrypt_inter_container_traffic", "use_spot_instances", "max_wait",
    "checkpoint_s3_uri", "checkpoint_local_path", "tensorboard_output_config", "enable_sagemaker_metrics",
    "enable_network_isolation", "disable_profiler", "environment", "max_retry_attempts", "source_dir",
    "hyperparameters", "container_log_level", "code_location", "entry_point", "dependencies", "instance_groups",
    "training_repository_access_mode", "training_repository_credentials_provider_arn", "enable_infra_check",
    "container_entry_point", "container_arguments", "disable_output_compression", "enable_remote_debug",
    "enable_session_tag_chaining", "training_plan", "instance_placement_config", "image_uri", "framework_version",
    "py_version", "distribution",
)}
COVERED["base_job_name"] = "name"

#: SDK parameter -> why trainops has no field for it (shown in docs/spec.md).
LEFT_OUT: dict[str, str] = {
    "sagemaker_session": "not part of the job: trainops builds its own AWS clients from the region (`region`, "
    "`--region`, `AWS_REGION`) and the usual credential chain.",
    "rules": "SageMaker Debugger and profiler rules run extra processing jobs beside the training job; trainops "
    "keeps Debugger off (no `DebugRuleConfigurations` / `ProfilerRuleConfigurations`).",
    "debugger_hook_config": "the Debugger hook saves tensors for the smdebug library in the script; trainops sends "
    "no `DebugHookConfig` (the SDK adds one to every framework job): a script that does not use smdebug loses "
    "nothing, and nothing is written.",
    "profiler_config": "the profiler's own settings (sampling interval, framework profiling): trainops sends the "
    "SDK's default `ProfilerConfig` (system monitoring, written under the output path) and `disable_profiler: true` "
    "turns it off.",
    "git_config": "the SDK clones the repository on the submitting machine and uploads the checkout; clone it "
    "yourself (a pinned commit in CI) and give `source_dir`, so what runs is what was reviewed.",
    "compiler_config": "SageMaker Training Compiler: AWS no longer releases it (its last images are PyTorch 1.13 "
    "and TensorFlow 2.11), so there is nothing current to configure.",
    "training_recipe": "SageMaker HyperPod recipes: the SDK downloads a recipe repository and generates the launch "
    "script and hyperparameters from it; trainops runs your own entry_point with a typed distribution instead.",
    "recipe_overrides": "overrides of `training_recipe` (left out with it).",
}


def sdk_parameters() -> list[str]:
    """Every SDK parameter these tables know, sorted."""
    return sorted({*COVERED, *LEFT_OUT})
