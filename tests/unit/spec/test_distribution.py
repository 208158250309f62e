"""The distribution-config model: the SDK's dict form (every key), the typed form, one union, round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from trainops.spec.distribution import (
    MPI,
    SMDDP,
    SMP,
    MultiWorkerMirroredStrategy,
    NoDistribution,
    ParameterServer,
    PyTorchDDP,
    PyTorchXLA,
    SdkDistribution,
    TorchDistributed,
    TypedDistribution,
    parse_distribution,
)


def _errors(value):
    """(dotted path, message) of every error parse_distribution raises for `value`."""
    with pytest.raises(ValidationError) as caught:
        parse_distribution(value)
    return [(".".join(str(part) for part in error["loc"]), error["msg"]) for error in caught.value.errors()]


# --- the SDK dict form, key by key -------------------------------------------------------------------------------

SDK_FORMS = [
    ({}, NoDistribution()),
    ({"pytorchddp": {"enabled": True}}, PyTorchDDP()),
    ({"torch_distributed": {"enabled": True}}, TorchDistributed()),
    ({"smdistributed": {"dataparallel": {"enabled": True}}}, SMDDP()),
    ({"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-verbose -x NCCL_DEBUG=INFO"}}},
     SMDDP(custom_mpi_options="-verbose -x NCCL_DEBUG=INFO")),
    ({"smdistributed": {"dataparallel": {"enabled": True}}, "torch_distributed": {"enabled": True}},
     SMDDP(launcher="torchrun")),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 8,
                                                                           "tensor_parallel_degree": 2}}},
      "torch_distributed": {"enabled": True}},
     SMP(launcher="torchrun", parameters={"hybrid_shard_degree": 8, "tensor_parallel_degree": 2})),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2, "microbatches": 4,
                                                                           "placement_strategy": "spread",
                                                                           "pipeline": "interleaved",
                                                                           "optimize": "speed", "ddp": True}}},
      "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-verbose"}},
     SMP(launcher="mpirun", parameters={"partitions": 2, "microbatches": 4, "placement_strategy": "spread",
                                        "pipeline": "interleaved", "optimize": "speed", "ddp": True},
         processes_per_host=8, custom_mpi_options="-verbose")),
    ({"mpi": {"enabled": True}}, MPI()),
    ({"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-x OMP_NUM_THREADS=4"}},
     MPI(processes_per_host=2, custom_mpi_options="-x OMP_NUM_THREADS=4")),
    ({"parameter_server": {"enabled": True}}, ParameterServer()),
    ({"pytorchxla": {"enabled": True}}, PyTorchXLA()),
    ({"multi_worker_mirrored_strategy": {"enabled": True}}, MultiWorkerMirroredStrategy()),
    ({"mpi": {"enabled": True}, "instance_groups": ["gpus"]}, MPI(instance_groups=["gpus"])),
    ({"instance_groups": ["gpus"]}, NoDistribution(instance_groups=["gpus"])),
    # Disabled sections are no strategy at all, as in the SDK.
    ({"mpi": {"enabled": False}, "torch_distributed": {"enabled": False}}, NoDistribution()),
    ({"smdistributed": {"dataparallel": {"enabled": False}}, "mpi": {"enabled": True}}, MPI()),
]


@pytest.mark.parametrize("sdk, typed", SDK_FORMS, ids=[json.dumps(sdk)[:60] for sdk, _ in SDK_FORMS])
def test_sdk_form_parses_to_the_typed_variant(sdk, typed):
    assert parse_distribution(sdk) == typed


# The SDK forms that are already canonical (no disabled sections) come back unchanged.
CANONICAL_SDK_FORMS = [case for case in SDK_FORMS if '"enabled": false' not in json.dumps(case[0])]


@pytest.mark.parametrize("sdk, typed", CANONICAL_SDK_FORMS, ids=[json.dumps(s)[:60] for s, _ in CANONICAL_SDK_FORMS])
def test_typed_to_sdk_dict_gives_the_sdk_form_back(sdk, typed):
    assert typed.to_sdk_dict() == sdk


def test_every_sdk_key_is_modelled():
    assert set(SdkDistribution.model_fields) == {
        "pytorchddp", "torch_distributed", "smdistributed", "mpi", "parameter_server", "pytorchxla",
        "multi_worker_mirrored_strategy", "instance_groups"}


def test_none_means_no_distribution():
    assert parse_distribution(None) == NoDistribution()


@pytest.mark.parametrize("value, path, words", [
    ({"smdistributed": {"dataparallel": {"enabled": True}, "modelparallel": {"enabled": True}}},
     "smdistributed", "one smdistributed strategy"),
    ({"pytorchddp": {"enabled": True}, "smdistributed": {"dataparallel": {"enabled": True}}},
     "pytorchddp", "cannot be combined"),
    ({"pytorchddp": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True}}},
     "pytorchddp", "cannot be combined"),
    ({"smdistributed": {"dataparallel": {"enabled": True}}, "mpi": {"enabled": True}},
     "mpi", "brings its own mpirun"),
    ({"pytorchxla": {"enabled": True}, "mpi": {"enabled": True}}, "pytorchxla", "enable only one"),
    ({"parameter_server": {"enabled": True}, "multi_worker_mirrored_strategy": {"enabled": True}},
     "multi_worker_mirrored_strategy", "enable only one"),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 2}}}},
     "smdistributed.modelparallel", "needs a launcher"),
    ({"smdistributed": {"modelparallel": {"enabled": True}}, "torch_distributed": {"enabled": True},
      "mpi": {"enabled": True}}, "mpi", "not both"),
])
def test_conflicting_sdk_forms_name_the_key(value, path, words):

    errors = _errors(value)
    assert [error_path for error_path, _ in errors] == [path]
    assert words in errors[0][1]


@pytest.mark.parametrize("value, path", [
    ({"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-x A; rm -rf /"}}},
     "sdk.smdistributed.dataparallel.custom_mpi_options"),
    ({"mpi": {"enabled": True, "custom_mpi_options": "-x A=$(id)"}}, "sdk.mpi.custom_mpi_options"),
    ({"type": "smddp", "custom_mpi_options": "a | b"}, "typed.smddp.custom_mpi_options"),
    ({"type": "mpi", "custom_mpi_options": "`id`"}, "typed.mpi.custom_mpi_options"),
    ({"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 1}, "custom_mpi_options": "a > b"},
     "typed.smp.custom_mpi_options"),
])
def test_shell_metacharacters_in_mpi_options_are_rejected(value, path):
    # parse_distribution is the bare union: its paths carry pydantic's union tags (the job spec drops them).
    errors = _errors(value)
    assert [error_path for error_path, _ in errors] == [path]
    assert "shell metacharacters" in errors[0][1]


def test_unbalanced_quotes_in_mpi_options_are_rejected():
    errors = _errors({"type": "mpi", "custom_mpi_options": "-x FOO='a b"})
    assert "cannot be split" in errors[0][1]


def test_mpi_options_become_argv_items():
    mpi = MPI(custom_mpi_options="-x FOO='a b' --mca btl_tcp_if_exclude lo,docker0")
    assert mpi.mpi_arguments() == ["-x", "FOO=a b", "--mca", "btl_tcp_if_exclude", "lo,docker0"]


@pytest.mark.parametrize("value, path", [
    ({"smdistributed": {"dataparallel": {"enabled": True, "bogus": 1}}}, "sdk.smdistributed.dataparallel.bogus"),
    ({"smdistributed": {"dataparallel": {"enabled": "maybe"}}}, "sdk.smdistributed.dataparallel.enabled"),
    ({"torch_distibuted": {"enabled": True}}, "sdk.torch_distibuted"),
    ({"mpi": {"enabled": True, "processes_per_host": 0}}, "sdk.mpi.processes_per_host"),
    ({"type": "mpi", "processes_per_host": 2000}, "typed.mpi.processes_per_host"),
    ({"type": "smddp", "launcher": "srun"}, "typed.smddp.launcher"),
    ({"type": "torch_distributed", "processes_per_host": "many"}, "typed.torch_distributed.processes_per_host"),
])
def test_field_errors_inside_either_form_have_their_path(value, path):
    assert path in [error_path for error_path, _ in _errors(value)]


def test_unknown_type_lists_the_known_ones():
    with pytest.raises(ValidationError) as caught:
        parse_distribution({"type": "horovod"})
    (error,) = caught.value.errors()
    assert error["type"] == "union_tag_invalid"
    assert "smddp" in error["ctx"]["expected_tags"]


# --- SMP through either form ------------------------------------------------------------------------------------

def test_smp_v1_key_in_v2_job_is_reported_at_the_sdk_path():
    errors = _errors({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
                      "torch_distributed": {"enabled": True}})
    assert errors[0][0] == "smdistributed.modelparallel.parameters.partitions"
    assert "SMP v1 parameter" in errors[0][1]


def test_smp_v2_key_in_v1_job_is_reported_at_the_sdk_path():
    errors = _errors({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {
        "partitions": 2, "hybrid_shard_degree": 4}}}, "mpi": {"enabled": True}})
    assert [path for path, _ in errors] == ["smdistributed.modelparallel.parameters.hybrid_shard_degree"]
    assert "SMP v2 parameter" in errors[0][1]


def test_smp_typed_version_follows_the_launcher():
    assert SMP().version == 2
    assert SMP(launcher="mpirun", parameters={"partitions": 2}).version == 1
    with pytest.raises(ValidationError) as caught:
        SMP(parameters={"microbatches": 4})
    assert caught.value.errors()[0]["loc"] == ("parameters", "microbatches")


# --- launchers and canonical JSON ---------------------------------------------------------------------------------

@pytest.mark.parametrize("variant, launcher", [
    (NoDistribution(), "none"), (TorchDistributed(), "torchrun"), (PyTorchDDP(), "mpirun"), (SMDDP(), "mpirun"),
    (SMDDP(launcher="torchrun"), "torchrun"), (SMP(), "torchrun"),
    (SMP(launcher="mpirun", parameters={"partitions": 2}), "mpirun"), (MPI(), "mpirun"),
    (ParameterServer(), "per_host"), (PyTorchXLA(), "torchrun"), (MultiWorkerMirroredStrategy(), "per_host"),
])
def test_launcher_of_each_variant(variant, launcher):
    assert variant.launcher == launcher


def test_canonical_json_matches_the_contract_examples():
    # docs/contracts.md, section 1.
    assert SMDDP(custom_mpi_options="-verbose").to_canonical() == {
        "type": "smddp", "custom_mpi_options": "-verbose", "launcher": "mpirun"}
    assert list(SMDDP().to_canonical())[0] == "type"
    assert SMP(parameters={"hybrid_shard_degree": 8, "tensor_parallel_degree": 1}).to_canonical() == {
        "type": "smp", "custom_mpi_options": "", "launcher": "torchrun",
        "parameters": {"hybrid_shard_degree": 8, "tensor_parallel_degree": 1}}
    assert MPI(processes_per_host=2).to_canonical() == {"type": "mpi", "custom_mpi_options": "",
                                                        "processes_per_host": 2}
    assert "processes_per_host" not in TorchDistributed().to_canonical()


# --- round trips, property-based ------------------------------------------------------------------------------------

_OPTIONS = st.sampled_from(["", "-verbose", "-x NCCL_DEBUG=INFO", "--mca btl_tcp_if_exclude lo,docker0"])
_GROUPS = st.none() | st.lists(st.sampled_from(["gpus", "cpus", "trn"]), min_size=1, max_size=2, unique=True)
_PER_HOST = st.none() | st.integers(1, 1024)
_V2_PARAMETERS = st.fixed_dictionaries({}, optional={
    "hybrid_shard_degree": st.integers(1, 64), "tensor_parallel_degree": st.integers(1, 8),
    "sm_activation_offloading": st.booleans(), "random_seed": st.integers(0, 2**31)})
_V1_PARAMETERS = st.fixed_dictionaries({"partitions": st.integers(1, 8)}, optional={
    "microbatches": st.integers(1, 16), "ddp": st.booleans(), "pipeline": st.sampled_from(["simple", "interleaved"]),
    "optimize": st.sampled_from(["speed", "memory"])})

TYPED = st.one_of(
    st.builds(NoDistribution, instance_groups=_GROUPS),
    st.builds(TorchDistributed, instance_groups=_GROUPS, processes_per_host=_PER_HOST,
              neuron_parallel_compile=st.booleans()),
    st.builds(PyTorchDDP, instance_groups=_GROUPS),
    st.builds(SMDDP, instance_groups=_GROUPS, custom_mpi_options=_OPTIONS,
              launcher=st.sampled_from(["mpirun", "torchrun"]), processes_per_host=_PER_HOST),
    st.builds(SMP, instance_groups=_GROUPS, parameters=_V2_PARAMETERS, processes_per_host=_PER_HOST),
    st.builds(SMP, launcher=st.just("mpirun"), instance_groups=_GROUPS, parameters=_V1_PARAMETERS,
              processes_per_host=_PER_HOST, custom_mpi_options=_OPTIONS),
    st.builds(MPI, instance_groups=_GROUPS, processes_per_host=_PER_HOST, custom_mpi_options=_OPTIONS),
    st.builds(ParameterServer, instance_groups=_GROUPS),
    st.builds(PyTorchXLA, instance_groups=_GROUPS),
    st.builds(MultiWorkerMirroredStrategy, instance_groups=_GROUPS),
)

def _sdk_representable(variant):
    """The variant as the SDK's dict can carry it (SMP v2's mpi options and torchrun extras dropped; SMP v2's and
    SMDDP's ranks per host travel in a disabled mpi section, as the SDK sends them)."""
    if isinstance(variant, TorchDistributed):
        return variant.model_copy(update={"processes_per_host": None, "neuron_parallel_compile": False})
    if isinstance(variant, SMP) and variant.version == 2:
        return variant.model_copy(update={"custom_mpi_options": ""})
    return variant


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TYPED)
def test_typed_to_sdk_dict_to_typed(variant):
    assert parse_distribution(variant.to_sdk_dict()) == _sdk_representable(variant)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TYPED)
def test_typed_to_json_to_typed(variant):
    text = json.dumps(variant.to_canonical())
    assert parse_distribution(json.loads(text)) == variant
    assert TypeAdapter(TypedDistribution).validate_json(variant.model_dump_json(by_alias=True)) == variant


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TYPED)
def test_both_forms_parse_into_the_same_union(variant):
    from_sdk = parse_distribution(variant.to_sdk_dict())
    from_typed = parse_distribution(variant.to_canonical())
    assert type(from_sdk) is type(from_typed)
    assert from_sdk.to_sdk_dict() == from_typed.to_sdk_dict()


def test_torch_distributed_and_mpi_together_run_torch_distributed_as_the_sdk_sends_it():
    # The SDK's PyTorch estimator encodes torch_distributed alone when mpi is enabled too (differential grid).
    parsed = parse_distribution({"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}})
    assert parsed.type == "torch_distributed"


def test_pytorchddp_takes_custom_mpi_options_like_the_sdk():
    parsed = parse_distribution({"pytorchddp": {"enabled": True, "custom_mpi_options": "--NCCL_DEBUG INFO"}})
    assert parsed.type == "pytorchddp" and parsed.custom_mpi_options == "--NCCL_DEBUG INFO"
    assert parsed.to_sdk_dict() == {"pytorchddp": {"enabled": True, "custom_mpi_options": "--NCCL_DEBUG INFO"}}


def test_issue_36_ranks_per_host_travel_where_the_sdk_sends_them_and_are_refused_where_it_drops_them():
    from trainops.errors import SpecError
    from trainops.spec import parse_job_spec

    ppn = {"mpi": {"processes_per_host": 4}}
    smddp = parse_distribution({"smdistributed": {"dataparallel": {"enabled": True}}, **ppn})
    assert isinstance(smddp, SMDDP) and smddp.processes_per_host == 4
    smp = parse_distribution({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
                              "torch_distributed": {"enabled": True}, **ppn})
    assert isinstance(smp, SMP) and smp.version == 2 and smp.processes_per_host == 4
    assert smp.to_canonical()["processes_per_host"] == 4
    for alone in ({"torch_distributed": {"enabled": True}}, {"pytorchddp": {"enabled": True}}):
        with pytest.raises(SpecError) as caught:
            parse_job_spec({"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", "distribution": {
                **alone, "mpi": {"enabled": False, "processes_per_host": 4}}})
        assert [problem.path for problem in caught.value.problems] == ["distribution.mpi.processes_per_host"]
        assert "is not sent with" in caught.value.problems[0].message
