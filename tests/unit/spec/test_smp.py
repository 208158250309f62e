"""SMP `parameters` rules per library version (v2: torchrun, v1: mpirun)."""

from __future__ import annotations

import pytest

from trainops.spec.smp import V1_KEYS, V2_KEYS, smp_parameter_problems


def _problems(parameters, version):
    return {problem.path: problem.message for problem in smp_parameter_problems(parameters, version, "p")}


def test_every_v2_key_with_a_good_value_passes():
    parameters = {"hybrid_shard_degree": 8, "tensor_parallel_degree": 2, "context_parallel_degree": 1,
                  "expert_parallel_degree": 1, "activation_loading_horizon": 0, "random_seed": 0,
                  "sm_activation_offloading": True, "fsdp_cache_flush_warnings": False, "allow_empty_shards": True}
    assert set(parameters) == V2_KEYS
    assert _problems(parameters, 2) == {}


def test_v2_without_parameters_passes():
    assert _problems({}, 2) == {}


@pytest.mark.parametrize("key, value, words", [
    ("tensor_parallel_degree", 0, "whole number >= 1"),
    ("hybrid_shard_degree", 2.5, "whole number >= 1"),
    ("context_parallel_degree", True, "whole number >= 1"),
    ("expert_parallel_degree", "2", "whole number >= 1"),
    ("random_seed", -1, "whole number >= 0"),
    ("activation_loading_horizon", -3, "whole number >= 0"),
    ("sm_activation_offloading", "yes", "true or false"),
    ("allow_empty_shards", 1, "true or false"),
])
def test_v2_bad_values(key, value, words):
    problems = _problems({key: value}, 2)
    assert list(problems) == [f"p.{key}"]
    assert words in problems[f"p.{key}"]
    assert repr(value) in problems[f"p.{key}"]


def test_v1_key_in_v2_names_the_generation():
    problems = _problems({"partitions": 2, "pipeline": "interleaved"}, 2)
    assert set(problems) == {"p.partitions", "p.pipeline"}
    assert "SMP v1 parameter" in problems["p.partitions"]
    assert "hybrid_shard_degree" in problems["p.partitions"]  # lists the v2 keys to use instead


def test_unknown_key_lists_known_keys():
    problems = _problems({"tensor_paralel_degree": 2}, 2)
    assert "is not an SMP v2 parameter" in problems["p.tensor_paralel_degree"]
    assert "tensor_parallel_degree" in problems["p.tensor_paralel_degree"]


def test_v1_good_parameters_pass():
    parameters = {"partitions": 2, "microbatches": 4, "placement_strategy": "spread", "pipeline": "interleaved",
                  "optimize": "speed", "ddp": True, "auto_partition": False, "default_partition": 0,
                  "memory_weight": 0.8, "ddp_port": 29500, "ddp_dist_backend": "nccl", "partition_file": "p.json"}
    assert set(parameters) <= V1_KEYS
    assert _problems(parameters, 1) == {}


def test_v1_pipeline_parallel_degree_stands_for_partitions():
    assert _problems({"pipeline_parallel_degree": 2}, 1) == {}


@pytest.mark.parametrize("parameters, path, words", [
    ({}, "p.partitions", "is required"),
    ({"partitions": 0}, "p.partitions", "positive whole number"),
    ({"partitions": 2, "microbatches": "4"}, "p.microbatches", "positive whole number"),
    ({"partitions": 2, "fp16": "true"}, "p.fp16", "true or false"),
    ({"partitions": 2, "pipeline": "fast"}, "p.pipeline", "one of simple, interleaved"),
    ({"partitions": 2, "placement_strategy": "random"}, "p.placement_strategy", "one of spread, cluster"),
    ({"partitions": 2, "optimize": "both"}, "p.optimize", "one of speed, memory"),
    ({"partitions": 2, "auto_partition": False}, "p.default_partition", "required when auto_partition is false"),
    ({"partitions": 2, "auto_partition": False, "default_partition": 2}, "p.default_partition",
     "less than partitions"),
    ({"partitions": 2, "memory_weight": 1.5}, "p.memory_weight", "between 0.0 and 1.0"),
    ({"partitions": 2, "ddp_port": 29500}, "p.ddp_port", "needs ddp"),
    ({"partitions": 2, "ddp": True, "ddp_port": 70000}, "p.ddp_port", "port number"),
    ({"partitions": 2, "ddp_dist_backend": "nccl"}, "p.ddp_dist_backend", "needs ddp"),
    ({"partitions": 2, "ddp": True, "horovod": True}, "p.ddp", "cannot both be enabled"),
    ({"partitions": 2, "partition_file": 3}, "p.partition_file", "must be a string"),
    ({"partitions": 2, "hybrid_shard_degree": 2}, "p.hybrid_shard_degree", "SMP v2 parameter"),
])
def test_v1_rules(parameters, path, words):
    problems = _problems(parameters, 1)
    assert path in problems, problems
    assert words in problems[path]


def test_all_v1_problems_are_reported_together():
    problems = _problems({"microbatches": 0, "pipeline": "bad", "memory_weight": 2, "bogus": 1}, 1)
    assert set(problems) == {"p.partitions", "p.microbatches", "p.pipeline", "p.memory_weight", "p.bogus"}
