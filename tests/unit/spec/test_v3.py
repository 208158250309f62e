"""Specs written in the SageMaker SDK v3's names (ModelTrainer): converted into the one spec (trainops.spec.v3),
v3's defaults, mixing refused, and the request render sends (v3's hyperparameter encoding, the runtime's keys)."""

from __future__ import annotations

import json

import pytest

from trainops.backends.request.render import render
from trainops.errors import SpecError
from trainops.runtime.hyperparameters import script_arguments, v3_script_arguments
from trainops.spec import parse_job_spec

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
V3 = {"training_image": IMAGE, "role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1",
      "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz", "entry_script": "train.py"},
      "output_data_config": {"s3_output_path": "s3://bucket/out"}}


def problems(data):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(data)
    return {problem.path: problem.message for problem in caught.value.problems}


def test_v3_names_and_defaults():
    spec = parse_job_spec(V3)
    assert spec.sdk == "v3" and spec.entry_point == "train.py" and spec.image_uri == IMAGE
    assert spec.instance_type == "ml.m5.xlarge" and spec.instance_count == 1  # v3's defaults
    assert spec.max_run == 3600 and spec.volume_size == 30
    assert spec.name == "pytorch-training-job"  # v3's base job name: the image's repository + "-job"


def test_every_v3_object_maps_to_its_field():
    spec = parse_job_spec({
        **V3, "base_job_name": "bert", "training_input_mode": "FastFile",
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2, "volume_size_in_gb": 100,
                    "keep_alive_period_in_seconds": 600},
        "distributed": {"type": "torchrun", "process_count_per_node": 4},
        "stopping_condition": {"max_runtime_in_seconds": 7200},
        "checkpoint_config": {"s3_uri": "s3://bucket/ckpt", "local_path": "/opt/ml/checkpoints"},
        "networking": {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"],
                       "enable_inter_container_traffic_encryption": True},
        "input_data_config": [{"channel_name": "train", "data_source": "s3://bucket/train"},
                              {"channel_name": "fsx", "data_source": {"file_system_data_source": {
                                  "file_system_id": "fs-0123456789abcdef0", "file_system_type": "FSxLustre",
                                  "directory_path": "/fsx/data", "file_system_access_mode": "ro"}}},
                              {"channel_name": "val", "data_source": {"s3_data_source": {
                                  "s3_uri": "s3://bucket/val", "s3_data_type": "S3Prefix",
                                  "s3_data_distribution_type": "ShardedByS3Key"}}}],
        "tags": [{"key": "team", "value": "vision"}],
        "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
        "retry_strategy": {"maximum_retry_attempts": 2}, "infra_check_config": {"enable_infra_check": True},
        "remote_debug_config": {"enable_remote_debug": True},
        "session_chaining_config": {"enable_session_tag_chaining": True},
        "tensorboard_output_config": {"s3_output_path": "s3://bucket/tb", "local_path": "/opt/ml/output/tb"}})
    assert (spec.name, spec.input_mode, spec.instance_count, spec.volume_size) == ("bert", "FastFile", 2, 100)
    assert spec.dist.type == "torch_distributed" and spec.dist.processes_per_host == 4
    assert spec.max_run == 7200 and spec.checkpoint_s3_uri == "s3://bucket/ckpt"
    assert spec.encrypt_inter_container_traffic and spec.subnets == ["subnet-0a1b2c3d"]
    assert spec.channels["val"].distribution == "ShardedByS3Key"
    assert spec.channels["fsx"].directory_path == "/fsx/data"
    assert [(tag.key, tag.value) for tag in spec.tags] == [("team", "vision")]
    assert spec.metric_definitions[0].name == "loss" and spec.max_retry_attempts == 2
    assert spec.enable_infra_check and spec.enable_remote_debug and spec.enable_session_tag_chaining
    assert spec.tensorboard_output_config.container_local_output_path == "/opt/ml/output/tb"


def test_mpi_and_smp_shapes():
    mpi = parse_job_spec({**V3, "compute": {"instance_type": "ml.c5.xlarge", "instance_count": 2},
                          "distributed": {"type": "mpi", "process_count_per_node": 2,
                                          "mpi_additional_options": ["-x", "NCCL_DEBUG=INFO"]}})
    assert mpi.dist.type == "mpi" and mpi.dist.custom_mpi_options == "-x NCCL_DEBUG=INFO"
    smp = parse_job_spec({**V3, "compute": {"instance_type": "ml.p4d.24xlarge"},
                          "distributed": {"type": "torchrun", "smp": {"hybrid_shard_degree": 8}}})
    assert smp.dist.type == "smp" and smp.dist.version == 2 and smp.dist.parameters == {"hybrid_shard_degree": 8}


def test_mixing_v2_and_v3_names_is_refused_naming_both():
    found = problems({**V3, "entry_point": "x.py", "image_uri": IMAGE, "compute": {"instance_type": "ml.c5.xlarge"},
                      "instance_type": "ml.c5.xlarge", "max_run": 10})
    assert "source_code.entry_script" in found["entry_point"]
    assert "training_image" in found["image_uri"]
    assert "compute.instance_type" in found["instance_type"]
    assert "stopping_condition.max_runtime_in_seconds" in found["max_run"]


def test_v3_shapes_refused_with_their_names():
    found = problems({**V3, "source_code": {"entry_script": "train.py", "args": ["--x"]},
                      "distributed": {"type": "deepspeed"}, "compute": {"instance_typ": "ml.c5.xlarge"}})
    assert "command" in found["source_code.args"]
    assert "torchrun" in found["distributed"]
    assert "instance_type" in found["compute.instance_typ"]
    assert "toolkit" in problems({**V3, "launcher": "toolkit"})["launcher"]


def test_render_sends_v3_s_hyperparameter_encoding_and_the_runtime_keys():
    spec = parse_job_spec({**V3, "hyperparameters": {"amp": True, "layers": ["attn", "mlp"], "name": "[1,2]",
                                                     "lr": 0.1},
                           "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz",
                                           "entry_script": "train.py", "requirements": "requirements.txt"}})
    request = render(spec, job_name="v3-1")
    hyperparameters = request["HyperParameters"]
    # ModelTrainer's safe_serialize: strings as they are, everything else JSON
    assert [hyperparameters[key] for key in ("amp", "layers", "name", "lr")] == \
        ["true", '["attn", "mlp"]', "[1,2]", "0.1"]
    assert json.loads(hyperparameters["trainops_script_arguments"]) == "v3"
    assert json.loads(hyperparameters["trainops_requirements"]) == "requirements.txt"
    assert request["ResourceConfig"]["InstanceType"] == "ml.m5.xlarge"
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    # the script's arguments: v3's drivers' (--key for every key, in order), the user's string unchanged
    assert v3_script_arguments(hyperparameters) == ["--amp", "true", "--layers", '["attn", "mlp"]',
                                                    "--name", "[1,2]", "--lr", "0.1"]
    # a v2 spec keeps the toolkit's way
    assert script_arguments({"amp": True, "layers": ["attn", "mlp"]}) == \
        ["--amp", "True", "--layers", "['attn', 'mlp']"]


def test_problems_of_the_converted_spec_are_told_in_v3_s_names():
    found = problems({**V3, "compute": {"instance_count": 0},
                      "input_data_config": [{"channel_name": "train", "data_source": "ftp://x/y"}]})
    assert "greater than or equal to 1" in found["compute.instance_count"]
    assert "ftp://" in found["input_data_config[train].s3_data"]
    # a v2 name beside v3's is refused at the key the user wrote
    assert "source_code.entry_script" in problems({**V3, "entry_point": "x.py"})["entry_point"]


def test_channel_options_and_max_pending_time_in_v3_s_names():
    spec = parse_job_spec({
        **V3, "training_input_mode": "Pipe", "compute": {"instance_type": "ml.p4d.24xlarge"},
        "stopping_condition": {"max_runtime_in_seconds": 7200, "max_pending_time_in_seconds": 3600},
        "input_data_config": [{"channel_name": "train", "compression_type": "Gzip", "record_wrapper_type": "RecordIO",
                               "input_mode": "Pipe", "shuffle_config": {"seed": 3},
                               "data_source": {"s3_data_source": {
                                   "s3_uri": "s3://bucket/train", "s3_data_type": "S3Prefix",
                                   "s3_data_distribution_type": "ShardedByS3Key"}}}]})
    channel = spec.channels["train"]
    assert (channel.compression, channel.record_wrapping, channel.input_mode) == ("Gzip", "RecordIO", "Pipe")
    assert channel.shuffle_config.seed == 3 and channel.distribution == "ShardedByS3Key"
    request = render(spec, job_name="v3-1")
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxPendingTimeInSeconds": 3600}
    sent = next(item for item in request["InputDataConfig"] if item["ChannelName"] == "train")
    assert (sent["CompressionType"], sent["RecordWrapperType"], sent["ShuffleConfig"]) == ("Gzip", "RecordIO",
                                                                                           {"Seed": 3})
    # the API's range, told in v3's name; a Channel field v3 lacks is named with the fields it has
    found = problems({**V3, "stopping_condition": {"max_pending_time_in_seconds": 600}})
    assert "greater than or equal to 1800" in found["stopping_condition.max_pending_time_in_seconds"]
    private = parse_job_spec({**V3, "networking": {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]},
                              "training_image_config": {
        "training_repository_access_mode": "Vpc", "training_repository_auth_config": {
            "training_repository_credentials_provider_arn": "arn:aws:lambda:us-east-1:111122223333:function:auth"}}})
    assert (private.training_repository_access_mode, private.training_repository_credentials_provider_arn) == \
        ("Vpc", "arn:aws:lambda:us-east-1:111122223333:function:auth")
    found = problems({**V3, "input_data_config": [{"channel_name": "train", "data_source": "s3://bucket/t",
                                                   "seed": 1}]})
    assert "shuffle_config" in found["input_data_config.0.seed"]


def test_a_stopping_condition_without_run_time_leaves_it_to_the_api_default():
    # v3 fills in one hour only where no StoppingCondition (or a None run time) is given
    assert parse_job_spec({**V3, "stopping_condition": {"max_pending_time_in_seconds": 7200}}).max_run == 86400
    assert parse_job_spec({**V3, "stopping_condition": {"max_runtime_in_seconds": None}}).max_run == 3600
    board = parse_job_spec({**V3, "tensorboard_output_config": {"s3_output_path": "s3://bucket/tb"}})
    assert board.tensorboard_output_config.container_local_output_path == "/opt/ml/output/tensorboard"


def test_the_slurm_engine_refuses_a_max_pending_time_the_local_engine_has_none_to_bound():
    from trainops.backends.request.channel_options import unhonoured_problems

    spec = parse_job_spec({**V3, "stopping_condition": {"max_pending_time_in_seconds": 7200}})
    assert "queue" in {problem.path: problem.message for problem in unhonoured_problems(spec, "slurm")}[
        "max_pending_time"]
    assert not unhonoured_problems(spec, "local")


def test_ignore_patterns_keep_names_out_of_the_code(tmp_path):
    from trainops.backends.request.code import code_files, list_files

    for name in ("train.py", ".env", "data/big.ckpt", "data/keep.txt", "__pycache__/x.pyc", "notes.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    # v3's default patterns for a v3 spec; a v2 spec keeps trainops' own (__pycache__ and .git only)
    v3 = parse_job_spec({**V3, "source_code": {"source_dir": str(tmp_path), "entry_script": "train.py"}})
    assert v3.ignore_patterns == [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]
    assert [name for _, name in code_files(tmp_path, ignore_patterns=v3.ignore_patterns)] == \
        ["data/big.ckpt", "data/keep.txt", "notes.md", "train.py"]
    assert ".env" in [name for _, name in list_files(tmp_path)[0]]
    # the user's patterns replace v3's default, matched on each name as shutil.ignore_patterns matches
    spec = parse_job_spec({**V3, "source_code": {"source_dir": str(tmp_path), "entry_script": "train.py",
                                                 "ignore_patterns": ["*.ckpt", "*.md"]}})
    assert [name for _, name in code_files(tmp_path, ignore_patterns=spec.ignore_patterns)] == \
        [".env", "__pycache__/x.pyc", "data/keep.txt", "train.py"]


def test_the_sagemaker_backend_says_what_v3_s_session_would_have_used():
    spec = parse_job_spec({key: value for key, value in V3.items() if key not in ("role", "output_data_config")})
    with pytest.raises(SpecError) as caught:
        render(spec, job_name="v3-1")
    found = {problem.path: problem.message for problem in caught.value.problems}
    # told in v3's names, with what v3 would have used
    assert "s3://sagemaker-<region>-<account id>/<base_job_name>" in found["output_data_config.s3_output_path"]
    assert "caller's own identity" in found["role"]
    # a v2 spec keeps the plain message
    with pytest.raises(SpecError) as caught:
        render(parse_job_spec({"entry_point": "train.py", "image_uri": IMAGE}), job_name="v2-1")
    assert "SDK v3" not in str(caught.value)
    local = parse_job_spec({**V3, "input_data_config": [{"channel_name": "train",
                                                         "data_source": "/nonexistent/trainops/data"}]})
    with pytest.raises(SpecError) as caught:
        render(local, job_name="v3-1")
    assert "SDK v3 uploads a local channel" in {problem.path: problem.message
                                                for problem in caught.value.problems}["input_data_config[train]"]
    assert "args" in problems({**V3, "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz",
                                                     "entry_script": "train.py", "args": ["--x", 1]}})[
        "source_code.args"]


def test_the_ray_engine_ships_the_code_without_the_ignored_names(tmp_path):
    from trainops.backends import get_backend

    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = parse_job_spec({**V3, "compute": {"instance_type": "ml.g5.12xlarge"},
                           "source_code": {"source_dir": str(tmp_path), "entry_script": "train.py",
                                           "ignore_patterns": ["*.ckpt", "data"]}})
    rendered = get_backend("ray", options={"address": "http://head:8265", "runtime_env": {"excludes": ["*.log"]}}
                           ).render_request(spec, "v3-1")
    # Ray's excludes match names in any directory (gitignore patterns without a slash), as v3's patterns do
    assert rendered["runtime_env"]["excludes"] == ["*.log", "*.ckpt", "data"]
    assert rendered["runtime_env"]["working_dir"] == str(tmp_path.resolve())


def test_a_v3_command_travels_to_the_runtime_with_its_args_quoted():
    from trainops.runtime.hyperparameters import COMMAND_KEY

    spec = parse_job_spec({**V3, "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz",
                                                 "command": "python  train.py --epochs 2",
                                                 "args": ["--name", "a b", 0.5]}})
    assert spec.entry_point is None and spec.command == "python train.py --epochs 2 --name 'a b' 0.5"
    hyperparameters = render(spec, job_name="v3-1")["HyperParameters"]
    assert json.loads(hyperparameters[COMMAND_KEY]) == spec.command and "sagemaker_program" not in hyperparameters
    found = problems({**V3, "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz", "command": "x",
                                            "entry_script": "train.py"}, "distributed": {"type": "torchrun"}})
    assert "not both" in found["source_code.command"] and "torchrun" in found["distributed"]
    assert "required" in problems({**V3, "source_code": {"source_dir": "s3://bucket/code/sourcedir.tar.gz"}})[
        "source_code.entry_script"]
    # in v2 names too, and the image's toolkit runs an entry_point only
    v2 = {"entry_point": None, "command": "python train.py", "instance_type": "ml.c5.xlarge",
          "role": "arn:aws:iam::123456789012:role/x", "output_path": "s3://b/o", "source_dir": "s3://b/c.tar.gz",
          "framework_version": "2.3.0", "py_version": "py311"}
    assert "toolkit" in problems({**v2, "launcher": "toolkit"})["command"]
    assert "required" in problems({**v2, "command": None})["entry_point"]


@pytest.mark.parametrize("extra, path, words", [
    ({"compute": {"cluster_name": "pod", "node_count": 2}}, "compute.cluster_name", "HyperPod"),
    ({"compute": {"instance_type": "ml.p5.48xlarge", "node_count": 2}}, "compute.node_count", "instance_count"),
    ({"training_recipe": "training/llama/hf_llama3_8b_seq8k_gpu_p5x16_pretrain"}, "training_recipe", "recipes"),
    ({"recipe_overrides": {"trainer": {"num_nodes": 2}}}, "recipe_overrides", "recipes"),
    ({"jumpstart_config": {"model_id": "meta-llama"}}, "jumpstart_config", "JumpStart"),
    ({"training_mode": "LOCAL_CONTAINER"}, "training_mode", "--backend local"),
    ({"hyperparameters": "hyperparameters.yaml"}, "hyperparameters", "write the hyperparameters in the spec"),
])
def test_what_v3_takes_and_trainops_does_not_is_refused_naming_the_field(extra, path, words):
    assert words in problems({**V3, **extra})[path]


def test_a_recipe_alone_makes_a_v3_spec_and_is_refused_in_v3_s_words():
    found = problems({"training_recipe": "training/llama/x", "compute": {"instance_type": "ml.p5.48xlarge"}})
    assert list(found) == ["training_recipe"] and "does not resolve recipes" in found["training_recipe"]


def test_a_v3_local_channel_is_rendered_where_it_will_be_uploaded(tmp_path):
    from trainops.backends.request.local_channels import local_channels

    (tmp_path / "data" / "nested").mkdir(parents=True)
    (tmp_path / "data" / "nested" / "b.csv").write_text("b")
    (tmp_path / "data" / "a.csv").write_text("a")
    (tmp_path / "labels.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    data = {**V3, "input_data_config": [{"channel_name": "train", "data_source": str(tmp_path / "data")},
                                        {"channel_name": "labels", "data_source": str(tmp_path / "labels.json")}]}
    request = render(parse_job_spec(data), job_name="v3-local-1")
    uris = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
            for channel in request["InputDataConfig"]}
    assert uris["train"] == "s3://bucket/out/v3-local-1/input/train/"
    assert uris["labels"] == "s3://bucket/out/v3-local-1/input/labels/labels.json"
    train = local_channels(parse_job_spec(data), "s3://bucket/out", "v3-local-1")[0]
    assert [key for _, key in train.files()] == ["a.csv", "nested/b.csv"]
    empty = {**V3, "input_data_config": [{"channel_name": "train", "data_source": str(tmp_path / "empty")}]}
    with pytest.raises(SpecError, match="holds no file"):
        render(parse_job_spec(empty), job_name="v3-local-2")
    # a v2 spec's local channel stays refused: the v2 estimator uploads none
    v2 = parse_job_spec({"entry_point": "train.py", "image_uri": IMAGE, "role": V3["role"], "region": "us-east-1",
                         "instance_type": "ml.m5.xlarge",
                         "output_path": "s3://bucket/out", "source_dir": "s3://bucket/code/sourcedir.tar.gz",
                         "inputs": {"train": str(tmp_path / "data")}})
    with pytest.raises(SpecError, match="trainops stage SRC"):
        render(v2, job_name="v2-local-1")
