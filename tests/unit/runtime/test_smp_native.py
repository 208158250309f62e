"""SMP v2 parameters on native PyTorch: validation, the replicate x shard x tp layout, and what it says it does."""

from __future__ import annotations

import pytest

from trainops.runtime.smp_native import (
    ParallelismError,
    SMPConfig,
    describe,
    layout,
    layout_for_distribution,
    smp_config,
)


def test_parameters_it_honours_are_read():
    config = smp_config({"hybrid_shard_degree": 4, "tensor_parallel_degree": 2, "sm_activation_offloading": True,
                         "random_seed": 7, "activation_loading_horizon": 2, "fsdp_cache_flush_warnings": False,
                         "allow_empty_shards": True})
    assert config == SMPConfig(tensor_parallel_degree=2, hybrid_shard_degree=4, activation_offloading=True,
                               random_seed=7)
    assert smp_config(None) == SMPConfig()


@pytest.mark.parametrize("parameters, words", [
    ({"context_parallel_degree": 2}, ["context_parallel_degree=2", "cannot be honoured"]),
    ({"expert_parallel_degree": 4}, ["expert_parallel_degree=4", "cannot be honoured"]),
    ({"partitions": 2, "microbatches": 4}, ["microbatches, partitions", "SMP v1 pipelining is not mapped"]),
    ({"tensor_parallel_degree": 0}, ["tensor_parallel_degree=0", ">= 1"]),
    ({"hybrid_shard_degree": True}, ["hybrid_shard_degree=True"]),
    ({"sm_activation_offloading": "yes"}, ["sm_activation_offloading='yes'", "true or false"]),
])
def test_parameters_it_cannot_honour_are_refused_by_name(parameters, words):
    with pytest.raises(ParallelismError) as caught:
        smp_config(parameters)
    for word in words:
        assert word in str(caught.value)


def test_degrees_of_one_for_context_and_expert_parallelism_are_fine():
    assert smp_config({"context_parallel_degree": 1, "expert_parallel_degree": 1}) == SMPConfig()


@pytest.mark.parametrize("parameters, world, shape", [
    ({}, 1, (1, 1, 1)),
    ({}, 8, (1, 8, 1)),                                       # 0 / absent: shard over every data-parallel rank
    ({"hybrid_shard_degree": 8}, 8, (1, 8, 1)),
    ({"hybrid_shard_degree": 2}, 4, (2, 2, 1)),               # HSDP: shard within pairs, replicate the pairs
    ({"hybrid_shard_degree": 1}, 4, (4, 1, 1)),               # NO_SHARD
    ({"tensor_parallel_degree": 2}, 2, (1, 1, 2)),
    ({"tensor_parallel_degree": 2, "hybrid_shard_degree": 2}, 8, (2, 2, 2)),
    ({"tensor_parallel_degree": 8, "hybrid_shard_degree": 16}, 256, (2, 16, 8)),
])
def test_layout_shapes(parameters, world, shape):
    result = layout(smp_config(parameters), world)
    assert (result.replicate, result.shard, result.tp) == shape
    assert result.replicate * result.shard * result.tp == world


@pytest.mark.parametrize("parameters, world, words", [
    ({"tensor_parallel_degree": 3}, 4, ["tensor_parallel_degree=3 must divide the number of ranks (4)"]),
    ({"hybrid_shard_degree": 3}, 4, ["hybrid_shard_degree=3 must divide the 4 data-parallel ranks"]),
    ({"hybrid_shard_degree": 4, "tensor_parallel_degree": 2}, 4, ["must divide the 2 data-parallel ranks"]),
])
def test_degrees_that_do_not_divide_the_world_are_refused(parameters, world, words):
    with pytest.raises(ParallelismError) as caught:
        layout(smp_config(parameters), world)
    for word in words:
        assert word in str(caught.value)


def test_coordinates_put_tensor_parallel_ranks_next_to_each_other():
    mesh = layout(smp_config({"tensor_parallel_degree": 2, "hybrid_shard_degree": 2}), 8)
    coordinates = [mesh.coordinates(rank) for rank in range(8)]
    assert [c["tp_rank"] for c in coordinates] == [0, 1, 0, 1, 0, 1, 0, 1]
    assert [c["dp_rank"] for c in coordinates] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {c["dp_size"] for c in coordinates} == {4} and {c["tp_size"] for c in coordinates} == {2}
    # Every data shard is read by exactly one tensor-parallel group.
    assert sorted({c["dp_rank"] for c in coordinates}) == list(range(4))


def test_other_distributions_are_pure_data_parallelism():
    for kind in ("torch_distributed", "mpi", "smddp", "none"):
        mesh = layout_for_distribution({"type": kind}, 4)
        assert mesh.coordinates(3) == {"dp_rank": 3, "dp_size": 4, "tp_rank": 0, "tp_size": 1}
    smp = layout_for_distribution({"type": "smp", "parameters": {"tensor_parallel_degree": 2}}, 4)
    assert smp.coordinates(3) == {"dp_rank": 1, "dp_size": 2, "tp_rank": 1, "tp_size": 2}


def test_description_names_what_happens():
    assert describe(SMPConfig(), layout(SMPConfig(), 1)) == "one rank: the model is unchanged"
    hybrid = SMPConfig(hybrid_shard_degree=2, tensor_parallel_degree=2, activation_offloading=True, random_seed=3)
    text = describe(hybrid, layout(hybrid, 8))
    for part in ("tensor parallel 2", "FSDP2 hybrid shard 2 x replicate 2", "offloading", "random_seed 3"):
        assert part in text
    assert "full shard over 4 ranks" in describe(SMPConfig(), layout(SMPConfig(), 4))
    no_shard = SMPConfig(hybrid_shard_degree=1)
    assert "replicated over 4" in describe(no_shard, layout(no_shard, 4))


def test_context_carries_the_layout_for_smp_jobs(monkeypatch, tmp_path):
    from trainops.runtime.context import job_context

    environ = {"TRAINOPS_BASE_DIR": str(tmp_path), "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
               "TRAINOPS_DISTRIBUTION": '{"type": "smp", "parameters": {"tensor_parallel_degree": 2}}'}
    context = job_context(environ)
    assert (context.dp_rank, context.dp_size, context.tp_rank, context.tp_size) == (1, 2, 1, 2)
    # Parameters that do not fit the world leave plain data parallelism here; transform() reports them.
    environ["TRAINOPS_DISTRIBUTION"] = '{"type": "smp", "parameters": {"tensor_parallel_degree": 3}}'
    context = job_context(environ)
    assert (context.dp_rank, context.dp_size, context.tp_rank, context.tp_size) == (3, 4, 0, 1)
