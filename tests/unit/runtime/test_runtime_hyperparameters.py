"""Hyperparameter decoding and the distribution rebuilt from either route (trainops JSON or toolkit keys)."""

from __future__ import annotations

import json

import pytest

from trainops.runtime.hyperparameters import (
    DistributionError,
    decode_value,
    distribution_from_hyperparameters,
    is_framework_key,
    normalize_distribution,
    script_arguments,
    user_hyperparameters,
)


def encode(values: dict) -> dict[str, str]:
    return {key: json.dumps(value) for key, value in values.items()}


def test_values_are_json_decoded_with_the_raw_string_as_fallback():
    assert decode_value("3") == 3
    assert decode_value("true") is True
    assert decode_value('"train.py"') == "train.py"
    assert decode_value('{"a": [1, 2]}') == {"a": [1, 2]}
    assert decode_value("not json at all") == "not json at all"
    assert decode_value(7) == 7


@pytest.mark.parametrize("key, framework", [
    ("sagemaker_program", True), ("trainops_distribution", True), ("mp_parameters", False), ("_tuning_objective_metric", True),
    ("epochs", False), ("learning_rate", False), ("my_sagemaker_flag", False),
])
def test_framework_keys(key, framework):
    assert is_framework_key(key) is framework


def test_user_hyperparameters_drop_framework_keys_and_decode():
    raw = encode({"sagemaker_program": "train.py", "trainops_distribution": {"type": "none"},
                  "mp_parameters": {"x": 1}, "epochs": 3, "name": "resnet"})
    # mp_parameters reaches the script as the toolkit passes it (issue 14); the tuner's own key does not.
    assert user_hyperparameters(raw) == {"mp_parameters": {"x": 1}, "epochs": 3, "name": "resnet"}
    assert user_hyperparameters(encode({"_tuning_objective_metric": "loss", "lr": 1})) == {"lr": 1}


def test_script_arguments_follow_the_toolkit_conventions():
    arguments = script_arguments({"lr": 0.1, "epochs": 3, "b": True, "layers": [1, 2], "opts": {"z": 1, "a": "x"}})
    assert arguments == ["-b", "True", "--epochs", "3", "--layers", "[1, 2]", "--lr", "0.1", "--opts", "a=x,z=1"]


# Each distribution as the spec's canonical JSON and as the toolkit hyperparameters the SDK writes for it.
ROUTES = [
    ({"type": "torch_distributed"}, {"sagemaker_torch_distributed_enabled": True,
                                     "sagemaker_instance_type": "ml.p4d.24xlarge"}),
    ({"type": "smddp", "custom_mpi_options": "-verbose"},
     {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": "ml.p4d.24xlarge",
      "sagemaker_distributed_dataparallel_custom_mpi_options": "-verbose"}),
    ({"type": "smddp", "launcher": "torchrun"},
     {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_torch_distributed_enabled": True}),
    ({"type": "pytorchddp"}, {"sagemaker_pytorch_ddp_enabled": True}),
    ({"type": "smp", "launcher": "torchrun", "parameters": {"hybrid_shard_degree": 8}},
     {"mp_parameters": {"hybrid_shard_degree": 8}, "sagemaker_distributed_dataparallel_enabled": False,
      "sagemaker_torch_distributed_enabled": True}),
    ({"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2}, "processes_per_host": 8,
      "custom_mpi_options": "-x A=1"},
     {"mp_parameters": {"partitions": 2}, "sagemaker_mpi_enabled": True,
      "sagemaker_mpi_num_of_processes_per_host": 8, "sagemaker_mpi_custom_mpi_options": "-x A=1"}),
    ({"type": "mpi", "processes_per_host": 2, "custom_mpi_options": "--NCCL_DEBUG WARN"},
     {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
      "sagemaker_mpi_custom_mpi_options": "--NCCL_DEBUG WARN"}),
    ({"type": "parameter_server"}, {"sagemaker_parameter_server_enabled": True}),
    ({"type": "pytorchxla"}, {"sagemaker_pytorch_xla_multi_worker_enabled": True}),
    ({"type": "multi_worker_mirrored_strategy"}, {"sagemaker_multi_worker_mirrored_strategy_enabled": True}),
    ({"type": "none"}, {}),
]


@pytest.mark.parametrize("canonical, toolkit", ROUTES, ids=[f"{c['type']}-{i}" for i, (c, _) in enumerate(ROUTES)])
def test_both_routes_give_the_same_distribution(canonical, toolkit):
    script_mode = {"sagemaker_program": "train.py", "sagemaker_region": "us-east-1", "epochs": 2}
    from_trainops = distribution_from_hyperparameters(encode({**script_mode, "trainops_distribution": canonical}))
    from_toolkit = distribution_from_hyperparameters(encode({**script_mode, **toolkit}))
    assert from_trainops == from_toolkit
    assert from_trainops["type"] == canonical["type"]
    for field, value in canonical.items():
        assert from_trainops[field] == value


def test_trainops_distribution_may_be_encoded_twice_and_wins_over_toolkit_keys():
    canonical = {"type": "mpi", "processes_per_host": 4}
    twice = {"trainops_distribution": json.dumps(json.dumps(canonical)), "sagemaker_torch_distributed_enabled": "true"}
    result = distribution_from_hyperparameters(twice)
    assert result["type"] == "mpi" and result["processes_per_host"] == 4


def test_normalized_distribution_fills_every_field():
    result = normalize_distribution({"type": "smddp"})
    assert result == {"type": "smddp", "launcher": "mpirun", "processes_per_host": None, "custom_mpi_options": "",
                      "instance_groups": None, "neuron_parallel_compile": False}


def test_launcher_kind_is_read_as_launcher():
    assert normalize_distribution({"type": "smp", "launcher_kind": "mpirun"})["launcher"] == "mpirun"


@pytest.mark.parametrize("value, message", [
    ({"type": "horovod"}, "unknown distribution type 'horovod'"),
    ({"type": "smddp", "launcher": "srun"}, "launcher must be one of"),
    ({"type": "mpi", "processes_per_host": 0}, "processes_per_host must be a positive integer"),
    ({"type": "smp", "parameters": [1]}, "parameters must be a JSON object"),
    ("[1, 2]", "expected a JSON object"),
    ("{not json", "not JSON"),
])
def test_malformed_distributions_are_named(value, message):
    raw = {"trainops_distribution": value if isinstance(value, str) else json.dumps(value)}
    with pytest.raises(DistributionError, match="trainops_distribution") as error:
        distribution_from_hyperparameters(raw)
    assert message in str(error.value)


def test_instance_groups_from_toolkit_keys():
    raw = encode({"sagemaker_torch_distributed_enabled": True, "sagemaker_distribution_instance_groups": ["gpus"]})
    assert distribution_from_hyperparameters(raw)["instance_groups"] == ["gpus"]
