"""Capture goldens/render_v3.json: the CreateTrainingJob requests the SageMaker Python SDK v3's ModelTrainer sends
for job specs written in v3's names (issue 46), with no network.

Runs in the v3 oracle venv (never trainops' dependencies):

    tests/differential/build_oracle_venv.sh --v3
    ~/.cache/trainops-oracle-v3/bin/python tests/differential/generate_v3.py

Each case is a trainops spec in v3's names (`CASES`); the oracle builds the ModelTrainer those mappings stand for
(each SDK object from the mapping of its own fields, the ``with_*`` settings through their methods) with a session
whose uploads compute their S3 key and upload nothing and whose role check answers the role as given, and records
``_create_training_job_args(boto3=True)``: the request ``train()`` sends, or the SDK's error, and for a
``SourceCode.command`` the command line its ``sm_train.sh`` evals. compare.py renders the
same spec with trainops and compares everything but v3's driver plumbing (the ``code`` and ``sm_drivers`` channels,
the ``ContainerEntrypoint`` / ``ContainerArguments`` that start ``sm_train.sh``) and the name's timestamp.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "goldens" / "render_v3.json"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
ROLE = "arn:aws:iam::111122223333:role/Training"
BASE: dict[str, Any] = {"training_image": IMAGE, "role": ROLE, "region": "us-east-1",
                        "source_code": {"source_dir": "src", "entry_script": "train.py"},
                        "output_data_config": {"s3_output_path": "s3://bucket/out"}}
GPU = {"instance_type": "ml.p4d.24xlarge", "instance_count": 2}
FSX = {"file_system_data_source": {"file_system_id": "fs-0123456789abcdef0", "file_system_type": "FSxLustre",
                                   "directory_path": "/fsx/data", "file_system_access_mode": "ro"}}
S3 = {"s3_data_source": {"s3_uri": "s3://bucket/train", "s3_data_type": "S3Prefix",
                         "s3_data_distribution_type": "FullyReplicated"}}
VPC = {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]}


def _case(case_id: str, **fields: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for key, value in fields.items():
        if value is ...:
            spec.pop(key, None)
        else:
            spec[key] = value
    return {"id": case_id, "spec": spec}


CASES: list[dict[str, Any]] = [
    _case("v3-defaults"),
    _case("v3-base-job-name", base_job_name="bert-pretrain"),
    _case("v3-compute-gpu", compute=GPU),
    _case("v3-compute-volume-spot", compute={**GPU, "volume_size_in_gb": 200, "enable_managed_spot_training": True},
          stopping_condition={"max_runtime_in_seconds": 7200, "max_wait_time_in_seconds": 10800}),
    _case("v3-warm-pool", compute={**GPU, "keep_alive_period_in_seconds": 1800}),
    _case("v3-warm-pool-max", compute={**GPU, "keep_alive_period_in_seconds": 21600}),
    _case("v3-torchrun", compute=GPU, distributed={"type": "torchrun"}),
    _case("v3-torchrun-ppn", compute=GPU, distributed={"type": "torchrun", "process_count_per_node": 4}),
    _case("v3-mpi", compute={"instance_type": "ml.c5.xlarge", "instance_count": 2},
          distributed={"type": "mpi", "process_count_per_node": 2, "mpi_additional_options": ["-x", "A=1"]}),
    _case("v3-smp", compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 1},
          distributed={"type": "torchrun", "smp": {"hybrid_shard_degree": 8}}),
    _case("v3-hyperparameters", hyperparameters={"amp": True, "layers": ["attn", "mlp"], "name": "[1,2]",
                                                 "lr": 0.1, "epochs": 3, "tag": "run-7", "cfg": {"a": 1}}),
    _case("v3-environment", environment={"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "4"}),
    _case("v3-stopping", stopping_condition={"max_runtime_in_seconds": 86400}),
    _case("v3-output-kms", output_data_config={"s3_output_path": "s3://bucket/out", "kms_key_id": "alias/out"}),
    _case("v3-output-uncompressed", output_data_config={"s3_output_path": "s3://bucket/out",
                                                        "compression_type": "NONE"}),
    _case("v3-checkpoints", checkpoint_config={"s3_uri": "s3://bucket/ckpt", "local_path": "/opt/ml/checkpoints"}),
    _case("v3-networking", networking={**VPC, "enable_network_isolation": True,
                                       "enable_inter_container_traffic_encryption": True}),
    _case("v3-inputs-uri", input_data_config=[{"channel_name": "train", "data_source": "s3://bucket/train"},
                                              {"channel_name": "val", "data_source": "s3://bucket/val"}]),
    _case("v3-inputs-s3-source", input_data_config=[
        {"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train", "s3_data_type": "S3Prefix",
            "s3_data_distribution_type": "ShardedByS3Key"}}}]),
    _case("v3-inputs-fsx", networking=VPC, input_data_config=[{"channel_name": "train", "data_source": FSX}]),
    _case("v3-input-mode-fastfile", training_input_mode="FastFile",
          input_data_config=[{"channel_name": "train", "data_source": "s3://bucket/train"}]),
    _case("v3-tags", tags=[{"key": "team", "value": "vision"}, {"key": "cost-center", "value": "42"}]),
    _case("v3-metrics", metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}]),
    _case("v3-retry", retry_strategy={"maximum_retry_attempts": 3}),
    _case("v3-infra-check", infra_check_config={"enable_infra_check": True}),
    _case("v3-remote-debug", remote_debug_config={"enable_remote_debug": True}),
    _case("v3-session-chaining", session_chaining_config={"enable_session_tag_chaining": True}),
    _case("v3-tensorboard", tensorboard_output_config={"s3_output_path": "s3://bucket/tb",
                                                       "local_path": "/opt/ml/output/tensorboard"}),
    _case("v3-instance-groups", compute={"instance_groups": [
        {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        {"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1}]}),
    # The API's own limits: v3 sends these, the service refuses them (trainops: api-documented-limits).
    _case("v3-unknown-instance-type", compute={"instance_type": "ml.g5.xxlarge", "instance_count": 1}),
    _case("v3-volume-kms-nvme", compute={**GPU, "volume_kms_key_id": "alias/vol"}),
    _case("v3-tag-pattern", tags=[{"key": "team#1", "value": "x"}]),
    # Issue 46's round: every Channel option (v3's Channel beside InputData) in each input mode.
    _case("v3-channel-gzip-pipe", training_input_mode="Pipe", input_data_config=[
        {"channel_name": "train", "data_source": S3, "compression_type": "Gzip"}]),
    _case("v3-channel-recordio-pipe", training_input_mode="Pipe", input_data_config=[
        {"channel_name": "train", "data_source": S3, "record_wrapper_type": "RecordIO"}]),
    _case("v3-channel-shuffle", input_data_config=[
        {"channel_name": "train", "data_source": S3, "shuffle_config": {"seed": 7}}]),
    _case("v3-channel-shuffle-sharded", compute=GPU, input_data_config=[
        {"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train", "s3_data_type": "S3Prefix",
            "s3_data_distribution_type": "ShardedByS3Key"}}, "shuffle_config": {"seed": 11}}]),
    _case("v3-channel-mode-override", input_data_config=[
        {"channel_name": "train", "data_source": S3, "input_mode": "FastFile"},
        {"channel_name": "val", "data_source": "s3://bucket/val"}]),
    _case("v3-channel-pipe-in-file-job", input_data_config=[
        {"channel_name": "train", "data_source": S3, "input_mode": "Pipe", "compression_type": "Gzip"}]),
    _case("v3-channel-augmented-manifest-pipe", training_input_mode="Pipe", input_data_config=[
        {"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train.manifest", "s3_data_type": "AugmentedManifestFile",
            "attribute_names": ["source-ref", "label"]}}, "record_wrapper_type": "RecordIO"}]),
    _case("v3-channel-manifest-file", input_data_config=[
        {"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train.manifest", "s3_data_type": "ManifestFile",
            "s3_data_distribution_type": "FullyReplicated"}}}]),
    _case("v3-channel-content-type", input_data_config=[
        {"channel_name": "train", "data_source": "s3://bucket/train", "content_type": "text/csv"}]),
    _case("v3-channel-instance-groups", compute={"instance_groups": [
        {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        {"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1}]},
        input_data_config=[{"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train", "s3_data_type": "S3Prefix", "s3_data_distribution_type": "FullyReplicated",
            "instance_group_names": ["cpus"]}}}]),
    _case("v3-inputs-efs", networking=VPC, input_data_config=[{"channel_name": "train", "data_source": {
        "file_system_data_source": {"file_system_id": "fs-0123456789abcdef0", "file_system_type": "EFS",
                                    "directory_path": "/data", "file_system_access_mode": "rw"}}}]),
    _case("v3-inputs-fsx-fastfile", networking=VPC, training_input_mode="FastFile",
          input_data_config=[{"channel_name": "train", "data_source": FSX}]),
    _case("v3-inputs-mixed", networking=VPC, input_data_config=[
        {"channel_name": "train", "data_source": "s3://bucket/train"},
        {"channel_name": "fsx", "data_source": FSX},
        {"channel_name": "val", "data_source": S3, "shuffle_config": {"seed": 1}}]),
    # Issue 46's round: the API's limits v3 sends past (trainops refuses them before anything exists).
    _case("v3-channel-augmented-manifest-fastfile", training_input_mode="FastFile", input_data_config=[
        {"channel_name": "train", "data_source": {"s3_data_source": {
            "s3_uri": "s3://bucket/train.manifest", "s3_data_type": "AugmentedManifestFile",
            "attribute_names": ["source-ref"]}}}]),
    _case("v3-tag-aws-prefix", tags=[{"key": "aws:team", "value": "vision"}]),
    _case("v3-tags-51", tags=[{"key": f"k{index}", "value": "v"} for index in range(51)]),
    _case("v3-s3-uri-too-long", input_data_config=[
        {"channel_name": "train", "data_source": "s3://bucket/" + "p" * 1020}]),
    _case("v3-hyperparameters-100", hyperparameters={f"p{index}": index for index in range(100)}),
    _case("v3-environment-100", environment={f"VAR_{index}": str(index) for index in range(100)}),
    _case("v3-hyperparameters-101", hyperparameters={f"p{index}": index for index in range(101)}),
    _case("v3-environment-101", environment={f"VAR_{index}": str(index) for index in range(101)}),
    _case("v3-warm-pool-over-max", compute={**GPU, "keep_alive_period_in_seconds": 21601}),
    _case("v3-max-pending-below-min", compute=GPU, stopping_condition={"max_pending_time_in_seconds": 600}),
    _case("v3-max-pending-over-max", compute=GPU, stopping_condition={"max_pending_time_in_seconds": 2419201}),
    _case("v3-volume-kms-ebs", compute={"instance_type": "ml.m5.xlarge", "instance_count": 1,
                                        "volume_kms_key_id": "alias/vol"}),
    # Issue 46's remaining v3 features: max pending time, ignore patterns, requirements.
    _case("v3-max-pending", compute=GPU, stopping_condition={"max_runtime_in_seconds": 7200,
                                                             "max_pending_time_in_seconds": 7200}),
    _case("v3-stopping-without-runtime", compute=GPU, stopping_condition={"max_pending_time_in_seconds": 7200}),
    _case("v3-max-pending-spot", compute={**GPU, "enable_managed_spot_training": True},
          stopping_condition={"max_runtime_in_seconds": 3600, "max_wait_time_in_seconds": 7200,
                              "max_pending_time_in_seconds": 1800}),
    _case("v3-ignore-patterns", source_code={"source_dir": "src", "entry_script": "train.py",
                                             "ignore_patterns": ["*.ckpt", "data"]}),
    _case("v3-command", source_code={"source_dir": "src", "command": "python train.py --epochs 2"}),
    _case("v3-command-args", source_code={"source_dir": "src", "command": "python train.py",
                                          "args": ["--name", "a b", "--lr", 0.1]}),
    # A channel given as a path on this machine: v3 uploads it (a file every machine has, so the golden travels).
    _case("v3-local-channel", input_data_config=[{"channel_name": "train", "data_source": "/bin/sh"}]),
    # v3's session defaults trainops does not derive: the output path in the session's default bucket.
    _case("v3-default-output-path", output_data_config=...),
    _case("v3-private-registry", networking=VPC, training_image_config={
        "training_repository_access_mode": "Vpc", "training_repository_auth_config": {
            "training_repository_credentials_provider_arn":
                "arn:aws:lambda:us-east-1:111122223333:function:registry-auth"}}),
    # A DatasetSource as InputData: v3 3.27.0 refuses it itself (create_input_data_channel), as trainops does.
    _case("v3-dataset-source", input_data_config=[{"channel_name": "train", "data_source": {"dataset_source": {
        "dataset_arn": "arn:aws:sagemaker:us-east-1:111122223333:hub-content/hub/DataSet/train/1.0.0"}}}]),
    _case("v3-requirements", source_code={"source_dir": "src", "entry_script": "train.py",
                                          "requirements": "requirements.txt"}),
    # More of v3's everyday shapes.
    _case("v3-compute-trainium", compute={"instance_type": "ml.trn1.32xlarge", "instance_count": 2},
          distributed={"type": "torchrun"}),
    _case("v3-compute-cpu-many", compute={"instance_type": "ml.c5.2xlarge", "instance_count": 4,
                                          "volume_size_in_gb": 100}),
    _case("v3-training-plan", compute={**GPU, "training_plan_arn":
                                       "arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan-1"}),
    _case("v3-warm-pool-zero", compute={**GPU, "keep_alive_period_in_seconds": 0}),
    _case("v3-spot-checkpoints", compute={**GPU, "enable_managed_spot_training": True},
          stopping_condition={"max_runtime_in_seconds": 3600, "max_wait_time_in_seconds": 7200},
          checkpoint_config={"s3_uri": "s3://bucket/ckpt", "local_path": "/opt/ml/checkpoints"}),
    _case("v3-checkpoint-default-local", checkpoint_config={"s3_uri": "s3://bucket/ckpt"}),
    _case("v3-mpi-plain", compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
          distributed={"type": "mpi"}),
    _case("v3-torchrun-one-host", compute={"instance_type": "ml.g5.12xlarge", "instance_count": 1},
          distributed={"type": "torchrun", "process_count_per_node": 4}),
    _case("v3-smp-tensor-parallel", compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
          distributed={"type": "torchrun", "smp": {"hybrid_shard_degree": 4, "tensor_parallel_degree": 2}}),
    _case("v3-hyperparameters-nested", hyperparameters={"optimizer": {"name": "adam", "betas": [0.9, 0.99]},
                                                        "flags": [True, False], "dropout": 0.0}),
    _case("v3-hyperparameters-json-strings", hyperparameters={"on": "true", "ratio": "1.0", "empty": "",
                                                              "spaced": "a b"}),
    _case("v3-output-kms-uncompressed", output_data_config={"s3_output_path": "s3://bucket/out",
                                                            "kms_key_id": "alias/out", "compression_type": "NONE"}),
    _case("v3-networking-isolation-only", networking={"enable_network_isolation": True}),
    _case("v3-networking-vpc-only", networking=VPC),
    _case("v3-source-tarball", source_code={"source_dir": "s3://bucket/code/sourcedir.tar.gz",
                                            "entry_script": "train.py"}),
    _case("v3-tensorboard-default-local", tensorboard_output_config={"s3_output_path": "s3://bucket/tb"}),
    _case("v3-metrics-several", metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"},
                                                    {"name": "acc", "regex": "acc=([0-9.]+)"}]),
    _case("v3-retry-infra-check", retry_strategy={"maximum_retry_attempts": 30},
          infra_check_config={"enable_infra_check": False}),
    _case("v3-image-digest", training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training@sha256:"
                                            + "a" * 64),
]

_WITH = {"retry_strategy": ("with_retry_strategy", "RetryStrategy"),
         "infra_check_config": ("with_infra_check_config", "InfraCheckConfig"),
         "remote_debug_config": ("with_remote_debug_config", "RemoteDebugConfig"),
         "session_chaining_config": ("with_session_chaining_config", "SessionChainingConfig"),
         "tensorboard_output_config": ("with_tensorboard_output_config", "TensorBoardOutputConfig")}


def _trainer(spec: dict[str, Any], session: Any, workdir: Path) -> Any:
    """The ModelTrainer the spec's mappings stand for."""
    from sagemaker.train import ModelTrainer, configs
    from sagemaker.train.distributed import MPI, SMP, Torchrun

    fields = {key: value for key, value in spec.items() if key not in _WITH and key != "region"}
    source = dict(fields.pop("source_code"))
    if not source["source_dir"].startswith("s3://"):
        source["source_dir"] = str(workdir / source["source_dir"])
    arguments: dict[str, Any] = {"sagemaker_session": session, "source_code": configs.SourceCode(**source)}
    if "training_image_config" in fields:
        image_config = dict(fields.pop("training_image_config"))
        if "training_repository_auth_config" in image_config:
            image_config["training_repository_auth_config"] = configs.TrainingRepositoryAuthConfig(
                **image_config["training_repository_auth_config"])
        arguments["training_image_config"] = configs.TrainingImageConfig(**image_config)
    simple = {"compute": configs.Compute, "stopping_condition": configs.StoppingCondition,
              "output_data_config": configs.OutputDataConfig, "checkpoint_config": configs.CheckpointConfig,
              "networking": configs.Networking}
    for key, value in fields.items():
        if key in simple:
            if key == "compute" and "instance_groups" in value:
                value = {**value, "instance_groups": [configs.InstanceGroup(**group)
                                                      for group in value["instance_groups"]]}
            arguments[key] = simple[key](**value)
        elif key == "distributed":
            if value["type"] == "mpi":
                arguments[key] = MPI(**{k: v for k, v in value.items() if k != "type"})
            else:
                smp = value.get("smp")
                arguments[key] = Torchrun(process_count_per_node=value.get("process_count_per_node"),
                                          smp=SMP(**smp) if smp else None)
        elif key == "input_data_config":
            arguments[key] = [_input(item) for item in value]
        elif key == "tags":
            arguments[key] = [configs.Tag(**tag) for tag in value]
        elif key == "metric_definitions":
            arguments[key] = [configs.MetricDefinition(**item) for item in value]
        else:
            arguments[key] = value
    metrics = arguments.pop("metric_definitions", None)
    trainer = ModelTrainer(**arguments)
    if metrics:
        trainer = trainer.with_metric_definitions(metrics)
    for key, (method, config) in _WITH.items():
        if key in spec:
            trainer = getattr(trainer, method)(getattr(configs, config)(**spec[key]))
    return trainer


#: A `Channel`'s own fields: an entry with any of them is a Channel (its data_source a DataSource), else InputData.
_CHANNEL_FIELDS = ("compression_type", "record_wrapper_type", "input_mode", "shuffle_config")


def _input(item: dict[str, Any]) -> Any:
    """The InputData (or Channel) an ``input_data_config`` entry stands for."""
    from sagemaker.train import configs

    source_value = item["data_source"]
    if isinstance(source_value, dict):
        (kind, values), = source_value.items()
        source_value = {"s3_data_source": configs.S3DataSource, "dataset_source": configs.DatasetSource,
                        "file_system_data_source": configs.FileSystemDataSource}[kind](**values)
    if not any(field in item for field in _CHANNEL_FIELDS):
        return configs.InputData(channel_name=item["channel_name"], data_source=source_value,
                                 **({"content_type": item["content_type"]} if "content_type" in item else {}))
    kind = {configs.S3DataSource: "s3_data_source", configs.DatasetSource: "dataset_source"}.get(
        type(source_value), "file_system_data_source")
    fields = {field: item[field] for field in ("content_type", *_CHANNEL_FIELDS) if field in item}
    if "shuffle_config" in fields:
        fields["shuffle_config"] = configs.ShuffleConfig(**fields["shuffle_config"])
    return configs.Channel(channel_name=item["channel_name"], data_source=configs.DataSource(**{kind: source_value}),
                           **fields)


def _boto3_refusal(request: dict[str, Any]) -> str | None:
    """What boto3 itself refuses before sending (botocore's parameter validation of CreateTrainingJob), as the v2
    oracle's recording client does: a request boto3 would refuse is the SDK's refusal."""
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(request, model.operation_model("CreateTrainingJob").input_shape)
    return report.generate_report() if report.has_errors() else None


def _session() -> Any:
    import boto3
    from sagemaker.core.helper.session_helper import Session

    class RecordingSession(Session):
        """Uploads compute their key and upload nothing; the default bucket is fixed."""

        def upload_data(self, path: str, bucket: str | None = None, key_prefix: str = "data", **_: Any) -> str:
            return f"s3://{bucket or 'bucket'}/{key_prefix}"

        def default_bucket(self) -> str:
            return "bucket"

    boto = boto3.Session(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    return RecordingSession(boto_session=boto, default_bucket="bucket")


#: What v3's sm_train.sh evals for a SourceCode.command (templates.EXECUTE_BASE_COMMANDS' here-document).
_COMMAND = re.compile(r"<<'SAGEMAKER_BASE_COMMAND_EOF'\n(.*)\nSAGEMAKER_BASE_COMMAND_EOF\n", re.S)
_SCRIPTS: list[str] = []


def _record_train_script() -> None:
    """Keep each sm_train.sh v3 writes: the command it runs travels in the sm_drivers channel, not in the request."""
    from sagemaker.train import model_trainer

    original = model_trainer.ModelTrainer._prepare_train_script

    def prepare(self: Any, tmp_dir: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, tmp_dir, *args, **kwargs)
        _SCRIPTS.append((Path(tmp_dir.name) / "sm_train.sh").read_text())
        return result

    model_trainer.ModelTrainer._prepare_train_script = prepare


def capture(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    try:
        _SCRIPTS.clear()
        request = _trainer(case["spec"], _session(), workdir)._create_training_job_args(boto3=True)
        request = json.loads(json.dumps(request, default=str))
        refusal = _boto3_refusal(request)
        if refusal:
            return {"accepted": False, "error": f"ParamValidationError: {refusal}"[:2000]}
        command = _COMMAND.search(_SCRIPTS[-1]) if _SCRIPTS else None
        return {"accepted": True, "request": request, **({"command": command.group(1)} if command else {})}
    except Exception as error:  # the SDK's refusal is the oracle's answer
        return {"accepted": False, "error": f"{type(error).__name__}: {error}"[:2000]}


def main() -> int:
    import sagemaker.train.defaults as defaults

    # The role check asks IAM (SimulatePrincipalPolicy): answered with the role as given, no network.
    defaults.resolve_and_validate_role = lambda *args, **kwargs: kwargs.get("provided_role")
    _record_train_script()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        (workdir / "src").mkdir()
        (workdir / "src" / "train.py").write_text("print('train')\n")
        (workdir / "src" / "requirements.txt").write_text("numpy\n")
        os.chdir(workdir)
        cases = [{**case, "oracle": capture(case, workdir)} for case in CASES]
    GOLDEN.write_text(json.dumps({"sdk": f"sagemaker {metadata.version('sagemaker')}", "cases": cases},
                                 indent=1) + "\n")
    accepted = sum(case["oracle"]["accepted"] for case in cases)
    print(f"{GOLDEN}: {len(cases)} cases, {accepted} accepted by the SDK", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
