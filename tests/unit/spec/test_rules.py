"""Every cross-field rule of the job spec, accepted and rejected, with the field path and a useful message."""

from __future__ import annotations

import pytest

from trainops.errors import SpecError
from trainops.spec import parse_job_spec
from trainops.spec.job import JobSpec
from trainops.spec.rules import RULES

GPU = {"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
       "framework_version": "2.3.0"}
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}
TORCHRUN = {"torch_distributed": {"enabled": True}}
FSX = {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx1a2b3c/train"}
VPC = {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]}
GROUPS = [{"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1},
          {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]


def found(base=GPU, **fields):
    """{path: message} of every problem in `base` updated with `fields` (a field set to ... is removed)."""
    data = {**base, **fields}
    data = {key: value for key, value in data.items() if value is not ...}
    try:
        parse_job_spec(data)
    except SpecError as error:
        return {problem.path: problem.message for problem in error.problems}
    return {}


def rejected(path, words, base=GPU, **fields):
    problems = found(base, **fields)
    assert path in problems, problems
    assert words in problems[path], problems[path]
    return problems


# --- instance types and groups ------------------------------------------------------------------------------------

@pytest.mark.parametrize("instance_type", ["ml.p4d.24xlarge", "ml.c5.xlarge", "ml.x99.48xlarge", "local",
                                           "local_gpu"])
def test_well_formed_instance_types_pass(instance_type):
    assert found({"entry_point": "train.py"}, instance_type=instance_type) == {}


@pytest.mark.parametrize("instance_type", ["p4d.24xlarge", "ml.p4d", "ML.P4D.24XLARGE", "ml.p4d.24xlarge "])
def test_malformed_instance_type(instance_type):
    rejected("instance_type", "expected ml.<family>.<size>", {"entry_point": "t.py"}, instance_type=instance_type)


def test_instance_type_or_groups_required():
    rejected("instance_type", "is required", {"entry_point": "train.py"})


def test_instance_type_and_groups_exclusive():
    rejected("instance_groups", "not both", {"entry_point": "t.py", "instance_type": "ml.c5.xlarge",
                                             "instance_groups": GROUPS[:1]})


def test_group_instance_types_and_names():
    bad = [{**GROUPS[0], "instance_type": "c5.xlarge"}, {**GROUPS[1], "instance_group_name": "cpus"}]
    problems = rejected("instance_groups.0.instance_type", "expected ml.", {"entry_point": "t.py"},
                        instance_groups=bad)
    assert "must be unique" in problems["instance_groups"]


def test_distribution_names_one_defined_group():
    base = {"entry_point": "train.py", "instance_groups": GROUPS, "framework_version": "2.3.0"}
    assert found(base, distribution={**SMDDP, "instance_groups": ["gpus"]}) == {}
    rejected("distribution.instance_groups", "name the one instance group", base, distribution=SMDDP)
    rejected("distribution.instance_groups", "'tpus' is not one of ['cpus', 'gpus']", base,
             distribution={"mpi": {"enabled": True}, "instance_groups": ["tpus"]})
    rejected("distribution.instance_groups", "only one instance group", base,
             distribution={"mpi": {"enabled": True}, "instance_groups": ["cpus", "gpus"]})
    rejected("distribution.instance_groups", "defines no instance_groups", GPU,
             distribution={**SMDDP, "instance_groups": ["gpus"]})


def test_issue_27_heterogeneous_clusters_as_the_sdk_builds_them():
    base = {"entry_point": "train.py", "instance_groups": GROUPS, "framework_version": "2.3.0"}
    # two groups and no strategy: every host runs the script (AWS's heterogeneous-cluster example)
    assert found(base) == {}
    # the SDK runs only MPI and SMDDP on instance groups (and torch_distributed for PyTorch)
    tensorflow = {**base, "framework": "tensorflow", "framework_version": "2.16.2", "py_version": "py310"}
    for strategy in ("parameter_server", "multi_worker_mirrored_strategy"):
        rejected("distribution", "does not run on instance groups", tensorflow,
                 distribution={strategy: {"enabled": True}, "instance_groups": ["gpus"]})
        # one group counts too: the SDK names it itself
        rejected("distribution", "does not run on instance groups", {**tensorflow, "instance_groups": GROUPS[1:]},
                 distribution={strategy: {"enabled": True}})
    assert found(tensorflow, distribution={"mpi": {"enabled": True}, "instance_groups": ["gpus"]}) == {}
    assert found(base, distribution={**TORCHRUN, "instance_groups": ["gpus"]}) == {}


def test_issue_27_multi_worker_mirrored_strategy_needs_tensorflow_2_9():
    tensorflow = {**GPU, "framework": "tensorflow", "py_version": "py39"}
    mwms = {"multi_worker_mirrored_strategy": {"enabled": True}}
    rejected("framework_version", "needs TensorFlow >= 2.9", tensorflow, framework_version="2.8.0", distribution=mwms)
    assert found(tensorflow, framework_version="2.9.1", distribution=mwms) == {}


def test_issue_36_instance_groups_take_no_instance_count_no_warm_pool_and_no_strategy_on_trainium():
    base = {"entry_point": "train.py", "instance_groups": GROUPS, "framework_version": "2.3.0"}
    # the SDK refuses instance_count beside instance_groups (the count was dropped from the request before)
    rejected("instance_count", "cannot be set with instance_groups", base, instance_count=2)
    rejected("instance_count", "cannot be set with instance_groups", base, instance_count=1)
    # AWS: warm pools work neither with heterogeneous clusters nor with spot
    rejected("keep_alive_period_in_seconds", "not available for heterogeneous clusters", base,
             keep_alive_period_in_seconds=600)
    # the SDK refuses a strategy on a named Trainium group
    trainium = {**base, "framework_version": "2.1.2",
                "instance_groups": [GROUPS[0], {"instance_group_name": "trns", "instance_type": "ml.trn1.32xlarge",
                                                "instance_count": 2}]}
    rejected("distribution.instance_groups", "names the Trainium group 'trns'", trainium,
             distribution={**TORCHRUN, "instance_groups": ["trns"]})
    assert found(trainium) == {}  # no strategy: every host runs the script


def test_issue_36_one_image_for_every_group_from_their_processors():
    from trainops.spec.images import image_instance_type

    assert image_instance_type(["ml.c5.18xlarge", "ml.p4d.24xlarge"]) == "ml.p4d.24xlarge"  # as the SDK: GPU first
    assert image_instance_type(["ml.c5.18xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge"]) == "ml.g5.12xlarge"
    assert image_instance_type(["ml.c5.18xlarge", "ml.trn1.32xlarge"]) == "ml.trn1.32xlarge"  # Neuron over CPU
    assert image_instance_type(["ml.c5.18xlarge", "ml.m5.xlarge"]) == "ml.c5.18xlarge"
    spec = parse_job_spec({"entry_point": "train.py", "instance_groups": GROUPS, "framework_version": "2.3.0"})
    assert spec.image_instance_type() == "ml.p4d.24xlarge" and spec.training_instance_type() == "ml.c5.xlarge"


def test_one_group_needs_no_name():
    assert found({"entry_point": "train.py", "instance_groups": GROUPS[1:], "framework_version": "2.3.0"},
                 distribution=SMDDP) == {}


# --- Trainium -----------------------------------------------------------------------------------------------------

TRN = {"entry_point": "train.py", "instance_type": "ml.trn1.32xlarge", "instance_count": 2,
       "framework_version": "2.1.2"}


def test_trainium_with_torchrun_or_nothing_passes():
    assert found(TRN, distribution=TORCHRUN) == {}
    assert found(TRN) == {}
    assert found(TRN, distribution={"type": "torch_distributed", "neuron_parallel_compile": True,
                                    "processes_per_host": 32}) == {}


@pytest.mark.parametrize("distribution", [{"mpi": {"enabled": True}}, {"pytorchxla": {"enabled": True}},
                                          {"type": "smddp"}, {"parameter_server": {"enabled": True}}])
def test_trainium_refuses_other_strategies(distribution):
    problems = rejected("distribution", "not supported on Trainium", TRN, distribution=distribution)
    assert "use torch_distributed" in problems["distribution"]


def test_trainium_is_pytorch_only():
    rejected("framework", "PyTorch (torch-neuronx) only", TRN, framework="tensorflow", framework_version=...)


def test_neuron_parallel_compile_is_for_trainium():
    rejected("distribution.neuron_parallel_compile", "Trainium", GPU,
             distribution={"type": "torch_distributed", "neuron_parallel_compile": True})


def test_trainium_processes_per_host_limited_by_neuron_cores():
    rejected("distribution.processes_per_host", "exceed the 32 accelerators", TRN,
             distribution={"type": "torch_distributed", "processes_per_host": 33})


# --- torch_distributed, pytorchddp --------------------------------------------------------------------------------

def test_torch_distributed_on_gpus_passes():
    assert found(distribution=TORCHRUN) == {}
    assert found(distribution={"type": "torch_distributed", "processes_per_host": 8}) == {}
    assert found(distribution=TORCHRUN, instance_type="local") == {}


def test_torch_distributed_needs_a_python_entry_point():
    rejected("entry_point", "must be a .py file", distribution=TORCHRUN, entry_point="train.sh")


def test_torch_distributed_needs_accelerators():
    rejected("instance_type", "needs GPU or Trainium", distribution=TORCHRUN, instance_type="ml.c5.18xlarge")


def test_torch_distributed_versions():
    rejected("framework_version", "needs PyTorch >= 1.13, got 1.12.1", distribution=TORCHRUN,
             framework_version="1.12.1")
    assert found(distribution=TORCHRUN, framework_version="1.13.1") == {}
    # A custom image carries its own versions.
    assert found(distribution=TORCHRUN, framework_version="1.12.1", image_uri="my/image:1") == {}
    rejected("framework", "needs the PyTorch framework", distribution=TORCHRUN, framework="tensorflow",
             framework_version=...)


def test_torch_distributed_processes_per_host_limited_by_gpus():
    rejected("distribution.processes_per_host", "exceed the 8 accelerators of ml.p4d.24xlarge",
             distribution={"type": "torch_distributed", "processes_per_host": 9})


def test_pytorchddp_versions():
    assert found(distribution={"pytorchddp": {"enabled": True}}, framework_version="2.0.1") == {}
    # The SDK documents pytorchddp for the PyTorch DLCs v1.11 and later.
    assert found(distribution={"pytorchddp": {"enabled": True}}, framework_version="1.11.0",
                 instance_type="ml.p4d.24xlarge") == {}
    rejected("framework_version", "pytorchddp needs PyTorch >= 1.11", distribution={"pytorchddp": {"enabled": True}},
             framework_version="1.10.2")


# --- SMDDP --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("instance_type", ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge", "local_gpu"])
def test_smddp_on_supported_types(instance_type):
    assert found(distribution=SMDDP, instance_type=instance_type) == {}


def test_smddp_on_unsupported_type_lists_the_supported_ones():
    problems = rejected("distribution.smdistributed.dataparallel", "SMDDP does not support ml.g5.48xlarge",
                        distribution=SMDDP, instance_type="ml.g5.48xlarge")
    assert "ml.p4d.24xlarge" in problems["distribution.smdistributed.dataparallel"]
    rejected("distribution.pytorchddp", "SMDDP does not support", distribution={"pytorchddp": {"enabled": True}},
             instance_type="ml.g5.48xlarge")


def test_smddp_is_pytorch_only():
    rejected("framework", "supports PyTorch only", distribution=SMDDP, framework="tensorflow",
             framework_version=...)


def test_smddp_framework_versions():
    problems = rejected("framework_version", "do not carry SMDDP", distribution=SMDDP, framework_version="2.4.0")
    assert "2.3.0" in problems["framework_version"]
    assert found(distribution=SMDDP, framework_version="2.3") == {}
    assert found(distribution=SMDDP, framework_version="2.4.0", image_uri="my/smddp:1") == {}


# --- SMP ----------------------------------------------------------------------------------------------------------

P5 = {"entry_point": "train.py", "instance_type": "ml.p5.48xlarge", "instance_count": 4, "framework_version": "2.3.1"}


def smp_v2(**parameters):
    return {"smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}}, **TORCHRUN}


def test_smp_v2_degrees_that_divide_pass():
    assert found(P5, distribution=smp_v2(hybrid_shard_degree=16, tensor_parallel_degree=2)) == {}
    assert found(P5, distribution=smp_v2(tensor_parallel_degree=8, context_parallel_degree=2,
                                         expert_parallel_degree=2)) == {}


def test_smp_v2_degree_must_divide_gpus():
    rejected("distribution.smdistributed.modelparallel.parameters.tensor_parallel_degree",
             "3 must divide the number of GPUs (32 = 4 hosts x 8)", P5, distribution=smp_v2(tensor_parallel_degree=3))


def test_smp_v2_degrees_multiply():
    rejected("distribution.smdistributed.modelparallel.parameters.context_parallel_degree",
             "after the other degrees", P5, distribution=smp_v2(tensor_parallel_degree=8, context_parallel_degree=8))
    rejected("distribution.smdistributed.modelparallel.parameters.hybrid_shard_degree",
             "must divide the 4 data-parallel ranks left", P5,
             distribution=smp_v2(tensor_parallel_degree=8, hybrid_shard_degree=3))


def test_smp_degrees_use_processes_per_host():
    rejected("distribution.smdistributed.modelparallel.parameters.tensor_parallel_degree",
             "(16 = 4 hosts x 4)", P5,
             distribution={"type": "smp", "processes_per_host": 4, "parameters": {"tensor_parallel_degree": 32}})


def test_smp_v1_pipeline_degree():
    v1 = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"pipeline_parallel_degree": 3}}},
          "mpi": {"enabled": True, "processes_per_host": 8}}
    rejected("distribution.smdistributed.modelparallel.parameters.pipeline_parallel_degree", "must divide", P5,
             distribution=v1, framework_version="1.13.1")


def test_smp_v2_needs_pytorch_2():
    rejected("framework_version", "SMP v2) needs PyTorch >= 2.0", P5, distribution=smp_v2(), framework_version="1.13.1")


def test_smp_needs_nvidia_gpus():
    rejected("instance_type", "SMP runs on NVIDIA GPU instances", P5, distribution=smp_v2(),
             instance_type="ml.c5.18xlarge")


def test_smp_on_local_types_defers_the_degree_check():
    assert found(P5, distribution=smp_v2(tensor_parallel_degree=3), instance_type="local_gpu") == {}


# --- pytorchxla, TensorFlow strategies, MPI ---------------------------------------------------------------------------

def test_pytorchxla():
    assert found(distribution={"pytorchxla": {"enabled": True}}, instance_type="local_gpu") == {}
    # On SageMaker it needs Training Compiler's configuration, which trainops does not set (the SDK refuses too).
    rejected("distribution.pytorchxla", "Training Compiler", distribution={"pytorchxla": {"enabled": True}})
    rejected("framework", "pytorchxla needs the PyTorch framework", distribution={"pytorchxla": {"enabled": True}},
             framework="tensorflow", framework_version=...)
    rejected("instance_type", "runs on GPU instances", distribution={"pytorchxla": {"enabled": True}},
             instance_type="ml.c5.xlarge")


def test_multi_worker_mirrored_strategy_is_tensorflow():
    mwms = {"multi_worker_mirrored_strategy": {"enabled": True}}
    assert found(distribution=mwms, framework="tensorflow", framework_version="2.14.1") == {}
    rejected("framework", "set framework: tensorflow", distribution=mwms)


def test_parameter_server_passes():
    assert found(distribution={"parameter_server": {"enabled": True}}, framework="tensorflow",
                 framework_version="2.14.1") == {}


def test_mpi_processes_per_host():
    assert found(distribution={"mpi": {"enabled": True, "processes_per_host": 8}}) == {}
    assert found(distribution={"mpi": {"enabled": True, "processes_per_host": 36}},
                 instance_type="ml.c5.18xlarge") == {}
    rejected("distribution.mpi.processes_per_host", "exceed the 8 accelerators",
             distribution={"mpi": {"enabled": True, "processes_per_host": 9}})


# --- VPC and file systems ---------------------------------------------------------------------------------------------

def test_file_system_channels_with_vpc_pass():
    assert found(inputs={"train": FSX}, **VPC) == {}


def test_file_system_channels_need_subnets_and_security_groups():
    problems = found(inputs={"train": FSX})
    assert set(problems) == {"subnets", "security_group_ids"}
    assert "['train'] read a file system" in problems["subnets"]
    assert "TCP 988" in problems["security_group_ids"]


def test_file_system_channels_in_a_fastfile_or_pipe_job_are_sent_as_the_sdk_sends_them():
    # Issue 46: no AWS source says the API refuses them (the refusal this test asserted before is gone).
    for mode in ("FastFile", "Pipe"):
        assert found(inputs={"train": FSX}, input_mode=mode, **VPC) == {}


def test_subnets_and_security_groups_go_together():
    rejected("security_group_ids", "go together", subnets=VPC["subnets"])
    rejected("subnets", "go together", security_group_ids=VPC["security_group_ids"])


# --- spot and warm pools ------------------------------------------------------------------------------------------

def test_spot_rules():
    assert found(use_spot_instances=True, max_run=3600, max_wait=7200) == {}
    assert found(use_spot_instances=True, max_run=3600, max_wait=3600) == {}
    rejected("max_wait", "spot training needs max_wait", use_spot_instances=True)
    rejected("max_wait", "7200 is less than max_run (86400)", use_spot_instances=True, max_wait=7200)
    rejected("keep_alive_period_in_seconds", "warm pools are not available", use_spot_instances=True,
             max_wait=86400, keep_alive_period_in_seconds=600)
    rejected("max_wait", "applies to spot training only", max_wait=90000)
    assert found(keep_alive_period_in_seconds=1800) == {}


# --- names -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["hf_token", "HF_TOKEN", "wandb_api_key", "db_password", "apiKey", "client_secret",
                                  "AWS_SECRET_ACCESS_KEY", "github_token"])
def test_secret_looking_hyperparameters_rejected(name):
    problems = rejected(f"hyperparameters.{name}", "looks like a secret", hyperparameters={name: "x"})
    assert "environment" in problems[f"hyperparameters.{name}"]
    assert "Secrets Manager" in problems[f"hyperparameters.{name}"]


def test_tokenizer_like_hyperparameters_accepted():
    names = ["tokenizer_name", "max_tokens", "pad_token_id", "eos_token", "max_token_length", "num_tokens",
             "token_budget"]
    assert found(hyperparameters={name: 1 for name in names}) == {}


@pytest.mark.parametrize("key", ["sagemaker_program", "sagemaker_anything", "trainops_distribution", "mp_parameters"])
def test_reserved_hyperparameters(key):
    rejected(f"hyperparameters.{key}", "reserved for the launcher", hyperparameters={key: 1})


def test_mp_parameters_prefix_only_reserves_the_exact_name():
    assert found(hyperparameters={"mp_parameters_file": "x"}) == {}


def test_reserved_channel_names():
    rejected("inputs.trainops_code", "reserved", inputs={"trainops_code": "s3://bucket/x"})


def test_python_2_images_refused():
    rejected("py_version", "runs on Python 3 images only", py_version="py27",
             distribution={"torch_distributed": {"enabled": True}})
    # issue 27 item 4: without a library strategy the image tables decide (the SDK builds PyTorch 1.4 on py2)...
    assert found(framework_version="1.4.0", py_version="py2") == {}
    # ... and refuse a version built for Python 3 only, with the versions it was built for
    rejected("py_version", "built for py311, not 'py27'", py_version="py27")


# --- every problem at once --------------------------------------------------------------------------------------------

def test_five_problems_are_five_reports():
    problems = found(
        {"entry_point": "train.sh", "instance_type": "ml.p4d.24xlarge", "framework_version": "2.3.0"},
        role="not-an-arn",                                # field check
        distribution=TORCHRUN,                            # rule: entry point must be .py
        hyperparameters={"hf_token": "x"},                # rule: secret
        use_spot_instances=True, max_run=7200, max_wait=60,  # rule: max_wait < max_run
        inputs={"train": "ftp://host/x"},                 # field check
    )
    assert set(problems) == {"role", "entry_point", "hyperparameters.hf_token", "max_wait", "inputs.train"}


def test_rules_reading_an_invalid_field_stay_quiet():
    # subnets is invalid: the VPC rule (which reads it) must not add "subnets and security_group_ids go together".
    problems = found(subnets=["subnet-zz"], hyperparameters={"api_key": "x"})
    assert set(problems) == {"subnets", "hyperparameters.api_key"}
    # A misspelt field counts as invalid for the rules reading the field it stands for.
    problems = found(P5, instanc_count=4, distribution=smp_v2(tensor_parallel_degree=16))
    assert set(problems) == {"instanc_count"}


def test_rules_run_once_when_fields_are_valid():
    problems = found(hyperparameters={"hf_token": "x", "api_key": "y"}, max_wait=100)
    assert set(problems) == {"hyperparameters.hf_token", "hyperparameters.api_key", "max_wait"}


# --- what each rule says it reads is what it reads ------------------------------------------------------------------

SAMPLES = [
    GPU | {"distribution": SMDDP},
    GPU | {"distribution": TORCHRUN, "entry_point": "train.sh"},
    GPU | {"distribution": {"type": "torch_distributed", "processes_per_host": 9}},
    GPU | {"distribution": {"pytorchddp": {"enabled": True}}},
    GPU | {"distribution": {"pytorchxla": {"enabled": True}}},
    GPU | {"distribution": {"mpi": {"enabled": True, "processes_per_host": 9}}},
    GPU | {"distribution": {"multi_worker_mirrored_strategy": {"enabled": True}}},
    GPU | {"distribution": {"type": "torch_distributed", "neuron_parallel_compile": True}},
    P5 | {"distribution": smp_v2(tensor_parallel_degree=8, hybrid_shard_degree=3)},
    TRN | {"distribution": {"mpi": {"enabled": True}}, "framework": "tensorflow"},
    {"entry_point": "train.py", "instance_groups": GROUPS, "distribution": {**SMDDP, "instance_groups": ["gpus"]}},
    {"entry_point": "train.py", "instance_groups": GROUPS, "distribution": {"mpi": {"enabled": True}}},
    GPU | {"inputs": {"train": FSX, "trainops_x": "s3://bucket/x"}, "input_mode": "Pipe", "subnets": VPC["subnets"]},
    GPU | {"use_spot_instances": True, "max_wait": 10, "keep_alive_period_in_seconds": 10, "py_version": "py27",
           "hyperparameters": {"hf_token": 1, "sagemaker_x": 2}},
    {"entry_point": "t.py"},
]


def _spec_without_rules(data) -> JobSpec:
    """A validated spec whose cross-field rules did not run (so a sample may break them)."""
    from trainops.spec.job import SKIP_RULES_READING

    return JobSpec.model_validate(data, context={SKIP_RULES_READING: set(JobSpec.model_fields)})


@pytest.mark.parametrize("check", RULES, ids=lambda check: check.__name__)
def test_rules_declare_the_fields_they_read(check):
    read: set[str] = set()
    fields = set(JobSpec.model_fields)

    class Recording(JobSpec):
        def __getattribute__(self, name):
            if name in fields:
                read.add(name)
            return super().__getattribute__(name)

    for data in SAMPLES:
        spec = _spec_without_rules(data)
        recording = Recording.model_construct(**{name: getattr(spec, name) for name in fields})
        list(check(recording))
    assert read, "the samples never exercised this rule"
    assert read <= check.reads, f"{check.__name__} reads {sorted(read - check.reads)} without declaring them"


def test_a_plain_dlc_without_smddp_is_refused_for_smddp():
    # Issue 14: the SDK refuses the 2.0.1 CUDA 12.1 DLC for smdistributed; AWS ships no SMDDP in later DLCs.
    smddp = {"smdistributed": {"dataparallel": {"enabled": True}}}
    dlc = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:{}"
    for tag in ("2.0.1-gpu-py310-cu121-ubuntu20.04-sagemaker", "2.6.0-gpu-py312-cu126-ubuntu22.04-sagemaker",
                "2.2.0-cpu-py310-ubuntu20.04-sagemaker"):
        rejected("image_uri", "without the SMDDP library", distribution=smddp, image_uri=dlc.format(tag))
    for image in (dlc.format("2.2.0-gpu-py310-cu121-ubuntu20.04-sagemaker"),
                  "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.3.1-gpu-py311-cu121",
                  "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:latest"):
        assert "image_uri" not in found(distribution=smddp, image_uri=image)
