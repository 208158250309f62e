"""docs/spec.md's section on specs written in the SDK v3's names (`trainops.spec.v3`), with the table of what
trainops does differently from v3 on purpose and the source of each."""

from __future__ import annotations

from trainops.spec.v3 import DEFAULT_INSTANCE_TYPE, DEFAULT_MAX_RUNTIME, NOT_TAKEN

_V3 = "sagemaker 3.27.0 (PyPI), sagemaker/train"

#: (the grid's rule, what v3 does, what trainops does, the source). A rule names the adjudication of
#: tests/differential/adjudications.V3_RULES that settles the v3 grid's cases of the difference ("" where no case
#: can show it: the behaviour is inside the container).
V3_DIFFERENCES: tuple[tuple[str, str, str, str], ...] = (
    ("", "its drivers decode a string hyperparameter as JSON and encode it again, so `\"[1,2]\"` reaches the script as "
     "`[1, 2]` and `\"1.0\"` as `1.0`", "passes the string the user wrote, as the request carries it",
     f"{_V3}/container_drivers/common/utils.py (`hyperparameters_to_cli_args`: `safe_deserialize` then "
     "`safe_serialize`)"),
    ("", "`MPI(process_count_per_node=N)` runs `mpirun -np N`: N processes in all, however many hosts",
     "N processes on every host (`-np` = N x hosts), what the field's name says",
     f"{_V3}/container_drivers/distributed_drivers/mpi_driver.py and mpi_utils.py (`-np num_processes`)"),
    ("", "sends its own driver plumbing: the `code` and `sm_drivers` channels and `ContainerEntrypoint` "
     "`/bin/bash .../sm_train.sh`", "sends the trainops runtime's (its `trainops_code` / `trainops_runtime` "
     "channels and `python3 -m trainops.runtime launch`), with `trainops_*` hyperparameters saying v3's encoding and "
     "the requirements file", f"{_V3}/model_trainer.py (`_prepare_train_script`, `create_input_data_channel`)"),
    ("v3-uri-channel-mode", "gives a channel written as a URI `InputMode: File`, also in a FastFile or Pipe job, "
     "so the channel is downloaded against the job's `training_input_mode`", "sends `InputMode: File` in a File "
     "job as v3 does, "
     "and in a FastFile / Pipe job leaves the channel to the job's mode, as asked",
     f"{_V3}/model_trainer.py (`create_input_data_channel`: `input_mode=\"File\"`)"),
    ("", "`SourceCode(command=...)` beside `entry_script` runs the command and ignores the script (a warning); beside "
     "`distributed` runs the command and no driver, silently", "refuses both pairs, naming them: a command runs as "
     "written once on every host (its `args` shell-quoted after it, hyperparameters in `SM_HPS` only, as v3 runs it "
     "with `eval` in `sm_train.sh`), so start torchrun or mpirun in the command yourself",
     f"{_V3}/model_trainer.py (`_prepare_train_script`), templates.py (`EXECUTE_BASE_COMMANDS`)"),
    ("v3-local-channel-location", "uploads a channel given as a local path (`InputData(data_source=\"./data\")`) "
     "to `s3://<session default bucket>/<base_job_name>/<job name>/input/<channel>` before creating the job",
     "uploads it too, before CreateTrainingJob, under the spec's own output path: `<s3_output_path>/<job name>/input/"
     "<channel>/` (a file by its name under it); a missing path or an empty directory is refused first, and a v2 "
     "spec's local channel stays refused (the v2 estimator uploads none: `trainops stage`)",
     f"{_V3}/model_trainer.py (`create_input_data_channel`: `upload_data(... key_prefix=.../input/<channel>)`)"),
    ("v3-session-defaults", "derives what a spec leaves out from its session: the output path "
     "`s3://sagemaker-<region>-<account id>/<base_job_name>` in the session's default bucket (creating the bucket "
     "when it is missing) and, with no `role`, the caller's own identity checked for training permissions",
     "creates no bucket and assumes no role it was not given: the SageMaker backend refuses a v3 spec without "
     "`output_data_config.s3_output_path` or `role` before anything is created, saying what v3 would have used "
     "(the local engine writes under its work directory and needs no role)",
     f"{_V3}/defaults.py (`TrainDefaults.get_output_data_config`, `get_role`), sagemaker/train/utils.py "
     "(`_default_s3_uri`); https://sagemaker.readthedocs.io/en/stable/api/utility/session.html "
     "(`Session.default_bucket`)"),
    ("v3-api-defaults-written", "leaves a field out where the API then takes its default: no `MaxRuntimeInSeconds` "
     "when a `StoppingCondition` is written without `max_runtime_in_seconds` (v3 fills in its one hour only where "
     "the field is None), no `S3DataDistributionType` when an `S3DataSource` omits it, and none of a shape's false "
     "or zero fields (`keep_alive_period_in_seconds: 0`, `enable_infra_check: false`; its serializer drops them)",
     "writes the value the API takes in their place: `MaxRuntimeInSeconds` 86400 (the API: \"The default value is 1 "
     "day\"), `FullyReplicated` (what v3 itself sends for a channel given as a URI, and the v2 SDK for every "
     "channel), 0 and false as written: the same job",
     f"{_V3}/model_trainer.py (`_create_training_job_args`), sagemaker/core/utils/utils.py (`_serialize_shape`: "
     "`if serialize_result := serialize(v)`), sagemaker/train/defaults.py (`get_stopping_condition`); "
     "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html"),
    ("v3-launcher-entries", "adds no hyperparameter or environment variable of its own (its drivers' settings travel "
     "in the `sm_drivers` channel), so 100 of the user's reach the API", "the trainops runtime reads its settings "
     "from 5 `sagemaker_*` / `trainops_*` hyperparameters and finds itself through `PYTHONPATH`; they count against "
     "the API's 100 entries, so a v3 spec of more than 95 hyperparameters or 100 environment variables is refused "
     "before anything is created, naming the count", f"{_V3}/model_trainer.py (`_create_training_job_args`); "
     "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html (`HyperParameters`, "
     "`Environment`: \"Maximum number of 100 items\")"),
)


def v3_section() -> list[str]:
    rows = [f"| {f'`{name}`' if name else ''} | {sdk} | {ours} | {source} |"
            for name, sdk, ours, source in V3_DIFFERENCES]
    return [
        "## Specs in the SDK v3's names (ModelTrainer)",
        "",
        "A spec may be written as a `ModelTrainer(...)` and its `train()` are: `training_image`, `base_job_name`, "
        "`role`, `hyperparameters`, `environment`, `source_code: {source_dir, entry_script, requirements, "
        "ignore_patterns}` (v3's default ignore_patterns, .env .git __pycache__ .DS_Store .cache .ipynb_checkpoints, "
        "keep those names out of the code on every engine), "
        "`compute: {instance_type, instance_count, volume_size_in_gb, enable_managed_spot_training, "
        "keep_alive_period_in_seconds, instance_groups, volume_kms_key_id, training_plan_arn}`, `distributed: {type: "
        "torchrun | mpi, process_count_per_node, smp: {...}, mpi_additional_options}`, `stopping_condition: "
        "{max_runtime_in_seconds, max_wait_time_in_seconds, max_pending_time_in_seconds}`, "
        "`output_data_config`, `checkpoint_config`, `networking`, `training_image_config: "
        "{training_repository_access_mode, training_repository_auth_config}`, `training_input_mode`, "
        "`input_data_config: [{channel_name, data_source, content_type}]` (a URI, `{s3_data_source: {...}}` or "
        "`{file_system_data_source: {...}}`; an entry with a `Channel`'s own fields, `compression_type`, "
        "`record_wrapper_type`, `input_mode`, `shuffle_config: {seed}`, is that Channel), "
        "`tags: [{key, value}]`, `metric_definitions: [{name, regex}]`, and "
        "the `with_*` settings under their attribute names (`retry_strategy`, `infra_check_config`, "
        "`remote_debug_config`, `session_chaining_config`, `tensorboard_output_config`). Any of v3's own keys makes "
        "the spec a v3 one (`sdk: v3`); a v2 name for the same thing beside them is refused, naming both "
        "(`trainops.spec.v3`). v3's defaults apply where a field is left out: `compute.instance_type` "
        f"{DEFAULT_INSTANCE_TYPE}, `max_runtime_in_seconds` {DEFAULT_MAX_RUNTIME}, `base_job_name` the image "
        "repository's name + `-job`. v3's behaviours on every engine: hyperparameters reach the script as v3's "
        "drivers pass them (`--key` for every key in the order written, strings as they are, other values JSON: "
        "`--amp true --layers [\"attn\", \"mlp\"]`, where a v2 spec gets the toolkit's `--amp True --layers "
        "['attn', 'mlp']`), and `requirements` is installed with pip by the trainops runtime on every host before "
        "the script; a failed install ends the job as a `setup` failure (\"before the training script started: "
        "installing the requirements of ... failed\"). `trainops render` shows the request v3 would send, less "
        "v3's driver plumbing. A v3 spec runs on the trainops launcher only.",
        "",
        "| grid rule | SDK v3 | trainops | source |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        "What v3 takes that trainops refuses before anything is created, naming the field (`trainops.spec.v3.NOT_TAKEN`"
        "); HyperPod's EKS compute and recipes are out of scope (a HyperPod Slurm cluster is the slurm engine's, "
        "docs/slurm.md):",
        "",
        "| v3 field | trainops |",
        "| --- | --- |",
        *(f"| `{key}` | {message} |" for key, message in NOT_TAKEN.items()),
        "| `hyperparameters` as a file name | refused: write the mapping in the spec (v3 reads a JSON or YAML file) |",
        "",
    ]
