"""The dry run: a job spec rendered to the exact boto3 `create_training_job` kwargs.

Golden files (tests/golden/render/<case>.<launcher>.json) freeze the requests of the example specs; regenerate them
with `TRAINOPS_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/backends/test_render.py` and read the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainops.backends.request.render import (
    CODE_CHANNEL,
    ENTRYPOINT,
    MASK,
    RUNTIME_CHANNEL,
    artifact_locations,
    encode_hyperparameters,
    masked,
    render,
    toolkit_distribution_hyperparameters,
)
from trainops.errors import SpecError
from trainops.spec import load_job_spec, parse_job_spec
from trainops.spec.base import looks_secret
from trainops.spec.distribution import (
    MPI,
    SMDDP,
    SMP,
    MultiWorkerMirroredStrategy,
    NoDistribution,
    ParameterServer,
    PyTorchDDP,
    PyTorchXLA,
    TorchDistributed,
)

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "render"
EXAMPLES = ROOT / "examples" / "specs"

# Golden case -> example spec: SMDDP on 2 x p4d.24xlarge, SMP v2 on p5, torchrun on trn1, MPI, FSx input with VPC.
CASES = {
    "smddp-p4d": "smddp-p4d.yaml",
    "smp-v2-p5": "smp-v2-p5.yaml",
    "torchrun-trn1": "torchrun-trn1-fsx.yaml",
    "mpi": "mpi-cpu.yaml",
    "fsx-vpc": "smddp-p4de-fsx.yaml",
}
LAUNCHERS = ("trainops", "toolkit")

BASE = {"role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1", "entry_point": "train.py",
        "framework_version": "2.3.0", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
        "output_path": "s3://bucket/out"}


def spec(**fields):
    data = {key: value for key, value in {**BASE, **fields}.items() if value is not ...}
    return parse_job_spec(data)


def decoded(request):
    return {key: json.loads(value) for key, value in request["HyperParameters"].items()}


# --- golden files -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_requests(case, launcher):
    request = render(load_job_spec(EXAMPLES / CASES[case]), job_name=f"{case}-golden", launcher=launcher)
    text = json.dumps(request, indent=2) + "\n"
    path = GOLDEN / f"{case}.{launcher}.json"
    if os.environ.get("TRAINOPS_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with TRAINOPS_UPDATE_GOLDEN=1 and review it"
    assert path.read_text() == text, f"{path} differs: review the change, then regenerate with TRAINOPS_UPDATE_GOLDEN=1"


def test_every_example_spec_has_a_golden_case():
    assert sorted(CASES.values()) == sorted(path.name for path in EXAMPLES.glob("*.yaml"))


def test_golden_files_are_the_cases():
    expected = {f"{case}.{launcher}.json" for case in CASES for launcher in LAUNCHERS}
    assert {path.name for path in GOLDEN.glob("*.json")} == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_toolkit_hyperparameters_are_json_dumps_of_each_value(case):
    request = json.loads((GOLDEN / f"{case}.toolkit.json").read_text())
    for key, value in request["HyperParameters"].items():
        assert isinstance(value, str)
        assert json.dumps(json.loads(value)) == value, key


# --- the toolkit encoding (reference.md's table) ----------------------------------------------------------------------

P4D = "ml.p4d.24xlarge"
TOOLKIT = [
    (SMDDP(), {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": P4D,
               "sagemaker_distributed_dataparallel_custom_mpi_options": ""}),
    (SMDDP(custom_mpi_options="-verbose", launcher="torchrun"),
     {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": P4D,
      "sagemaker_distributed_dataparallel_custom_mpi_options": "-verbose",
      "sagemaker_torch_distributed_enabled": True}),
    # The SDK rewrites pytorchddp into smdistributed.dataparallel before encoding.
    (PyTorchDDP(), {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": P4D,
                    "sagemaker_distributed_dataparallel_custom_mpi_options": ""}),
    (SMP(parameters={"tensor_parallel_degree": 8}),
     {"mp_parameters": {"tensor_parallel_degree": 8}, "sagemaker_distributed_dataparallel_enabled": False,
      "sagemaker_instance_type": P4D, "sagemaker_torch_distributed_enabled": True}),
    (SMP(launcher="mpirun", parameters={"partitions": 2}, processes_per_host=8, custom_mpi_options="-verbose"),
     {"mp_parameters": {"partitions": 2}, "sagemaker_distributed_dataparallel_enabled": False,
      "sagemaker_instance_type": P4D, "sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 8,
      "sagemaker_mpi_custom_mpi_options": "-verbose"}),
    (TorchDistributed(), {"sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": P4D}),
    (MPI(), {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""}),
    (MPI(processes_per_host=4, custom_mpi_options="-x A=1"),
     {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 4,
      "sagemaker_mpi_custom_mpi_options": "-x A=1"}),
    (ParameterServer(), {"sagemaker_parameter_server_enabled": True}),
    (PyTorchXLA(), {"sagemaker_pytorch_xla_multi_worker_enabled": True}),
    (MultiWorkerMirroredStrategy(), {"sagemaker_multi_worker_mirrored_strategy_enabled": True}),
    (NoDistribution(), {}),
    (MPI(instance_groups=["gpus"]), {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": "",
                                     "sagemaker_distribution_instance_groups": ["gpus"]}),
]


@pytest.mark.parametrize("distribution, expected", TOOLKIT, ids=lambda value: getattr(value, "type", ""))
def test_toolkit_distribution_hyperparameters(distribution, expected):
    assert toolkit_distribution_hyperparameters(distribution, P4D) == expected


def test_sdk_encoding_examples_from_reference():
    encoded = encode_hyperparameters({"a": True, "b": "ml.p4d.24xlarge", "c": {"tensor_parallel_degree": 8},
                                      "d": 0.001, "e": [1, "x"], "f": None})
    assert encoded == {"a": "true", "b": '"ml.p4d.24xlarge"', "c": '{"tensor_parallel_degree": 8}', "d": "0.001",
                       "e": '[1, "x"]', "f": "null"}


def test_toolkit_request_carries_script_mode_keys():
    request = render(spec(hyperparameters={"epochs": 3, "model": "resnet"},
                          distribution={"smdistributed": {"dataparallel": {"enabled": True}}}),
                     job_name="job-1", launcher="toolkit")
    hyperparameters = decoded(request)
    assert hyperparameters == {
        "epochs": 3, "model": "resnet",
        "sagemaker_program": "train.py", "sagemaker_job_name": "job-1", "sagemaker_region": "us-east-1",
        "sagemaker_submit_directory": "s3://bucket/out/job-1/source/sourcedir.tar.gz",
        "sagemaker_container_log_level": 20,
        "sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": P4D,
        "sagemaker_distributed_dataparallel_custom_mpi_options": ""}
    assert request["HyperParameters"]["model"] == '"resnet"'
    assert "ContainerEntrypoint" not in request["AlgorithmSpecification"]
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.3.0-gpu-py311")
    assert "InputDataConfig" not in request  # no channels: the key is left out


def test_toolkit_with_network_isolation_brings_the_code_as_a_channel():
    request = render(spec(enable_network_isolation=True), job_name="job-1", launcher="toolkit")
    assert decoded(request)["sagemaker_submit_directory"] == "/opt/ml/input/data/code/sourcedir.tar.gz"
    (code,) = request["InputDataConfig"]
    assert code["ChannelName"] == "code"
    assert code["DataSource"]["S3DataSource"]["S3Uri"] == "s3://bucket/out/job-1/source/"
    assert request["EnableNetworkIsolation"] is True


# --- the trainops launcher --------------------------------------------------------------------------------------------

def test_trainops_launcher_request():
    job = spec(distribution={"type": "smddp", "custom_mpi_options": "-verbose"}, environment={"PYTHONPATH": "/x"},
               inputs={"train": "s3://bucket/train"})
    request = render(job, job_name="job-1")
    assert request["AlgorithmSpecification"]["ContainerEntrypoint"] == ENTRYPOINT
    hyperparameters = decoded(request)
    assert hyperparameters == {"sagemaker_program": "train.py", "sagemaker_job_name": "job-1",
                               "sagemaker_region": "us-east-1", "trainops_distribution": job.dist.to_canonical()}
    locations = artifact_locations("s3://bucket/out", "job-1")
    channels = {channel["ChannelName"]: channel for channel in request["InputDataConfig"]}
    assert list(channels) == ["train", CODE_CHANNEL, RUNTIME_CHANNEL]
    assert channels[CODE_CHANNEL]["DataSource"]["S3DataSource"]["S3Uri"] == locations.code_prefix
    assert channels[RUNTIME_CHANNEL]["DataSource"]["S3DataSource"]["S3Uri"] == locations.runtime_prefix
    assert channels[CODE_CHANNEL]["InputMode"] == "File"
    assert request["Environment"]["PYTHONPATH"] == "/opt/ml/input/data/trainops_runtime:/x"


def test_spec_launcher_is_the_default_and_the_argument_wins():
    job = spec(launcher="toolkit")
    assert "ContainerEntrypoint" not in render(job, job_name="a")["AlgorithmSpecification"]
    assert "ContainerEntrypoint" in render(job, job_name="a", launcher="trainops")["AlgorithmSpecification"]


def test_hyperparameters_reach_the_runtime_as_the_same_distribution():
    runtime = pytest.importorskip("trainops.runtime.hyperparameters")
    for case, name in CASES.items():
        job = load_job_spec(EXAMPLES / name)
        expected = runtime.normalize_distribution(job.dist.to_canonical())
        for launcher in LAUNCHERS:
            request = render(job, job_name="job-1", launcher=launcher)
            assert runtime.distribution_from_hyperparameters(request["HyperParameters"]) == expected, (case, launcher)


# --- every other setting ----------------------------------------------------------------------------------------------

def test_optional_settings():
    # ml.p3.16xlarge: EBS storage; the API refuses a volume key on p4d's local NVMe (test_api_limits.py)
    job = spec(instance_type="ml.p3.16xlarge", output_kms_key="alias/out", volume_kms_key="alias/vol",
               volume_size=100, use_spot_instances=True,
               max_run=3600, max_wait=7200, checkpoint_s3_uri="s3://bucket/ckpt", enable_network_isolation=True,
               encrypt_inter_container_traffic=True, max_retry_attempts=3, tags={"team": "x"},
               environment={"A": "1"}, subnets=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d"])
    request = render(job, job_name="job-1")
    assert request["OutputDataConfig"] == {"S3OutputPath": "s3://bucket/out", "KmsKeyId": "alias/out"}
    assert request["ResourceConfig"] == {"InstanceType": "ml.p3.16xlarge", "InstanceCount": 2,
                                         "VolumeSizeInGB": 100, "VolumeKmsKeyId": "alias/vol"}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert request["EnableManagedSpotTraining"] is True
    assert request["CheckpointConfig"] == {"S3Uri": "s3://bucket/ckpt", "LocalPath": "/opt/ml/checkpoints"}
    assert request["EnableNetworkIsolation"] is True
    assert request["EnableInterContainerTrafficEncryption"] is True
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 3}
    assert request["Tags"] == [{"Key": "team", "Value": "x"}]
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-0a1b2c3d"], "Subnets": ["subnet-0a1b2c3d"]}
    assert request["Environment"]["A"] == "1"


def test_defaults_leave_optional_keys_out():
    request = render(spec(), job_name="job-1", launcher="toolkit")
    assert set(request) == {"TrainingJobName", "RoleArn", "AlgorithmSpecification", "HyperParameters",
                            "OutputDataConfig", "ResourceConfig", "StoppingCondition", "ProfilerConfig"}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}
    # SageMaker's system monitoring, on by default as the SDK sends it
    assert request["ProfilerConfig"] == {"S3OutputPath": request["OutputDataConfig"]["S3OutputPath"],
                                         "DisableProfiler": False}


def test_warm_pool_and_checkpoint_path():
    request = render(spec(keep_alive_period_in_seconds=0, checkpoint_s3_uri="s3://bucket/c",
                          checkpoint_local_path="/ckpt"), job_name="a")
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 0
    assert request["CheckpointConfig"]["LocalPath"] == "/ckpt"


def test_channels():
    job = spec(inputs={
        "train": {"s3_data": "s3://bucket/train", "distribution": "ShardedByS3Key", "input_mode": "Pipe",
                  "content_type": "text/csv", "s3_data_type": "ManifestFile"},
        "fsx": {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/a", "file_system_type": "FSxLustre",
                "file_system_access_mode": "rw", "content_type": "application/x-image"}},
        subnets=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d"])
    train, fsx = render(job, job_name="a", launcher="toolkit")["InputDataConfig"]
    assert train == {"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "ManifestFile", "S3Uri": "s3://bucket/train", "S3DataDistributionType": "ShardedByS3Key"}},
        "InputMode": "Pipe", "ContentType": "text/csv"}
    assert fsx == {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {
        "FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "FSxLustre", "DirectoryPath": "/fsx/a",
        "FileSystemAccessMode": "rw"}}, "ContentType": "application/x-image"}


def test_instance_groups():
    groups = [{"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1},
              {"instance_group_name": "gpus", "instance_type": P4D, "instance_count": 2}]
    job = spec(instance_type=..., instance_count=..., instance_groups=groups,
               distribution={"smdistributed": {"dataparallel": {"enabled": True}}, "instance_groups": ["gpus"]})
    request = render(job, job_name="a", launcher="toolkit")
    assert request["ResourceConfig"] == {"InstanceGroups": [
        {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "InstanceGroupName": "cpus"},
        {"InstanceType": P4D, "InstanceCount": 2, "InstanceGroupName": "gpus"}], "VolumeSizeInGB": 30}
    hyperparameters = decoded(request)
    # The SDK sends the estimator's instance_type, which a heterogeneous cluster leaves unset (SDK 2.257, checked in
    # tests/differential): null; the toolkit then takes the current host's type.
    assert hyperparameters["sagemaker_instance_type"] is None
    assert hyperparameters["sagemaker_distribution_instance_groups"] == ["gpus"]
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("-gpu-py311")


def test_image_uri_is_used_as_given():
    request = render(spec(image_uri="123.dkr.ecr.us-east-1.amazonaws.com/mine:1", framework_version=...),
                     job_name="a")
    assert request["AlgorithmSpecification"]["TrainingImage"] == "123.dkr.ecr.us-east-1.amazonaws.com/mine:1"


def test_region_argument_when_the_spec_has_none():
    request = render(spec(region=...), job_name="a", region="eu-west-1")
    assert ".eu-west-1." in request["AlgorithmSpecification"]["TrainingImage"]
    assert decoded(request)["sagemaker_region"] == "eu-west-1"
    # The spec's own region wins over the argument.
    assert decoded(render(spec(), job_name="a", region="eu-west-1"))["sagemaker_region"] == "us-east-1"


# --- what the SageMaker backend needs ---------------------------------------------------------------------------------

def _problems(job, **arguments):
    with pytest.raises(SpecError) as caught:
        render(job, **{"job_name": "job-1", **arguments})
    return {problem.path: problem.message for problem in caught.value.problems}


def test_region_missing_everywhere():
    problems = _problems(spec(region=...))
    assert list(problems) == ["region"]
    assert "AWS_REGION" in problems["region"] and "--region" in problems["region"]


def test_bad_region_argument():
    assert "not an AWS region" in _problems(spec(region=...), region="moon-1")["region"]


def test_everything_missing_is_reported_at_once():
    job = parse_job_spec({"entry_point": "train.py", "instance_type": "local", "output_path": "out",
                          "inputs": {"train": "data/train"}, "source_dir": "file:///src"})
    problems = _problems(job, job_name="bad name")
    assert set(problems) == {"role", "region", "output_path", "inputs.train", "instance_type", "source_dir",
                             "framework_version", "job_name"}
    assert "s3://bucket/prefix" in problems["output_path"]
    assert "upload it first" in problems["inputs.train"]
    assert "runs on this machine only" in problems["instance_type"]


def test_missing_output_path_and_local_groups():
    groups = [{"instance_group_name": "g", "instance_type": "local", "instance_count": 1}]
    problems = _problems(spec(output_path=..., instance_type=..., instance_count=..., instance_groups=groups))
    assert set(problems) == {"output_path", "instance_groups.0.instance_type"}


@pytest.mark.parametrize("name", ["", "-a", "a_b", "a" * 64, "a" + "-" * 70 + "b", "job\n"])
def test_bad_job_names(name):
    assert "job_name" in _problems(spec(), job_name=name)


def test_bad_launcher():
    assert "launcher" in _problems(spec(), launcher="slurm")


def test_unknown_framework_version_is_a_field_error():
    # The spec's image rule refuses it already (validate's verdict is render's); render refuses the same way when
    # given such a spec unvalidated.
    with pytest.raises(SpecError) as caught:
        spec(framework_version="2.99.0")
    assert [problem.path for problem in caught.value.problems] == ["framework_version"]
    unvalidated = spec().model_copy(update={"framework_version": "2.99.0"})
    problems = _problems(unvalidated)
    assert list(problems) == ["framework_version"]
    assert "supported versions" in problems["framework_version"]
    assert caught.value.problems[0].message == problems["framework_version"]


def test_a_user_channel_named_code_under_network_isolation_is_refused_for_the_toolkit_launcher():
    # issue 27 item 5: the toolkit's code travels in a channel named code; the SDK refuses the duplicate channel
    isolated = spec(enable_network_isolation=True, inputs={"code": "s3://bucket/my-code"})
    problems = _problems(isolated, launcher="toolkit")
    assert list(problems) == ["inputs.code"] and "rename this channel" in problems["inputs.code"]
    assert render(isolated, job_name="job-1")["InputDataConfig"]  # the trainops launcher has no code channel
    with pytest.raises(SpecError, match="inputs.code"):
        spec(enable_network_isolation=True, inputs={"code": "s3://bucket/my-code"}, launcher="toolkit")


# --- display ----------------------------------------------------------------------------------------------------------

def test_masked_hides_secret_looking_environment_values_only():
    request = render(spec(environment={"HF_TOKEN": "hf_x", "DB_PASSWORD": "p", "NCCL_DEBUG": "INFO",
                                       "PAD_TOKEN": "<pad>"}), job_name="a")
    shown = masked(request)
    assert shown["Environment"]["HF_TOKEN"] == MASK and shown["Environment"]["DB_PASSWORD"] == MASK
    assert shown["Environment"]["NCCL_DEBUG"] == "INFO" and shown["Environment"]["PAD_TOKEN"] == "<pad>"
    assert request["Environment"]["HF_TOKEN"] == "hf_x"  # the request itself is untouched
    assert masked({"TrainingJobName": "a"}) == {"TrainingJobName": "a"}


def test_artifact_locations():
    locations = artifact_locations("s3://bucket/out/", "job-1")
    assert locations.code_prefix == "s3://bucket/out/job-1/trainops/code/"
    assert locations.runtime_prefix == "s3://bucket/out/job-1/trainops/runtime/"
    assert locations.source_tarball == "s3://bucket/out/job-1/source/sourcedir.tar.gz"
    assert locations.model_artifact == "s3://bucket/out/job-1/output/model.tar.gz"
    assert locations.evaluation_prefix == "s3://bucket/out/job-1/evaluation/"


# --- property-based: render never fails on a valid spec ---------------------------------------------------------------

PYTORCH_GPU = ["2.0.1", "2.1.0", "2.2.0", "2.3.0"]  # have pytorch-training images and SMDDP


@st.composite
def distributions(draw):
    """(instance_type, instance_count, framework, framework_version, distribution) that obey every rule."""
    count = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["none", "smddp", "pytorchddp", "torchrun", "smp", "mpi", "trainium", "xla", "tf"]))
    options = draw(st.sampled_from(["", "-verbose", "-x NCCL_DEBUG=INFO"]))
    if kind == "smddp":
        typed = draw(st.booleans())
        launcher = draw(st.sampled_from(["mpirun", "torchrun"]))
        distribution = ({"type": "smddp", "launcher": launcher, "custom_mpi_options": options} if typed else
                        {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": options}}})
        return (draw(st.sampled_from(["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge"])), count,
                "pytorch", draw(st.sampled_from(PYTORCH_GPU)), distribution)
    if kind == "pytorchddp":
        version = draw(st.sampled_from(PYTORCH_GPU))
        return "ml.p4d.24xlarge", count, "pytorch", version, {"pytorchddp": {"enabled": True}}
    if kind == "torchrun":
        instance_type = draw(st.sampled_from(["ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.g5.xlarge", "ml.p5.48xlarge"]))
        return instance_type, count, "pytorch", draw(st.sampled_from(["1.13.1", "2.4.0", "2.9.0"])), {
            "torch_distributed": {"enabled": True}}
    if kind == "smp":
        tensor = draw(st.sampled_from([1, 2, 4, 8]))
        shard = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if (8 * count // tensor) % d == 0]))
        return ("ml.p5.48xlarge", count, "pytorch", draw(st.sampled_from(["2.2.0", "2.3.1", "2.5.1"])),
                {"type": "smp", "parameters": {"tensor_parallel_degree": tensor, "hybrid_shard_degree": shard}})
    if kind == "mpi":
        instance_type, limit = draw(st.sampled_from([("ml.c5.18xlarge", 72), ("ml.m5.xlarge", 4),
                                                     ("ml.p4d.24xlarge", 8)]))
        mpi = {"enabled": True, "custom_mpi_options": options}
        per_host = draw(st.none() | st.integers(1, limit))
        if per_host:
            mpi["processes_per_host"] = per_host
        return instance_type, count, "pytorch", "2.2.0", {"mpi": mpi}
    if kind == "trainium":
        distribution = draw(st.sampled_from([{}, {"torch_distributed": {"enabled": True}},
                                             {"type": "torch_distributed", "neuron_parallel_compile": True}]))
        return (draw(st.sampled_from(["ml.trn1.32xlarge", "ml.trn1.2xlarge"])), count, "pytorch",
                draw(st.sampled_from(["2.1.2", "2.5.1"])), distribution)
    if kind == "xla":
        # pytorchxla needs Training Compiler's configuration on SageMaker (refused, as the SDK does): disabled here.
        return "ml.p4d.24xlarge", count, "pytorch", "2.1.0", {"pytorchxla": {"enabled": False}}
    if kind == "tf":
        distribution = draw(st.sampled_from([{"parameter_server": {"enabled": True}},
                                             {"multi_worker_mirrored_strategy": {"enabled": True}}, {}]))
        return draw(st.sampled_from(["ml.c5.xlarge", "ml.g5.xlarge"])), count, "tensorflow", "2.14.1", distribution
    return draw(st.sampled_from(["ml.c5.xlarge", "ml.g5.2xlarge", "ml.m5.large"])), count, "pytorch", "2.3.0", {}


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True).filter(
    lambda name: not looks_secret(name) and not name.startswith(("sagemaker_", "trainops_", "mp_parameters")))
VALUES = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(st.characters(blacklist_characters="\x00"), max_size=20) | st.lists(st.integers(), max_size=3)
# (no NUL in a value: a hyperparameter becomes a command-line argument, which cannot hold one, so the spec refuses it)
CHANNELS = st.from_regex(r"[a-z][a-z0-9._-]{0,10}", fullmatch=True).filter(
    lambda name: not name.startswith("trainops_"))
S3 = st.from_regex(r"s3://[a-z0-9]{3,10}/[a-z0-9/]{0,12}", fullmatch=True)
CHANNEL = S3 | st.builds(
    lambda uri, mode, sharded: {"s3_data": uri, "input_mode": mode,
                                "distribution": "ShardedByS3Key" if sharded else "FullyReplicated"},
    S3, st.sampled_from(["File", "FastFile", "Pipe"]), st.booleans())


@st.composite
def valid_specs(draw):
    instance_type, count, framework, version, distribution = draw(distributions())
    data = {
        "role": "arn:aws:iam::111122223333:role/Training",
        "region": draw(st.sampled_from(["us-east-1", "us-west-2", "eu-west-1"])),
        "output_path": draw(S3),
        "framework": framework, "framework_version": version, "entry_point": "train.py",
        "instance_type": instance_type, "instance_count": count, "distribution": distribution,
        "hyperparameters": draw(st.dictionaries(NAMES, VALUES, max_size=5)),
        "inputs": draw(st.dictionaries(CHANNELS, CHANNEL, max_size=3)),
        "launcher": draw(st.sampled_from(["trainops", "toolkit"])),
        # Tag values in the API's alphabet (letters, digits, spaces, _ . : / = + - @): others are refused since
        # issue 46 (test_api_model.py).
        "tags": draw(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(
            st.characters(whitelist_categories=("L", "N", "Zs"), whitelist_characters="_.:/=+-@"), max_size=10),
            max_size=3)),
        # Valid values: no NUL (no environment variable holds one) and no reserved TRAINOPS_* names.
        "environment": draw(st.dictionaries(st.from_regex(r"[A-S][A-Z0-9_]{0,8}", fullmatch=True),
                                            st.text(st.characters(blacklist_characters="\x00"), max_size=20),
                                            max_size=3)),
        "enable_network_isolation": draw(st.booleans()),
        "encrypt_inter_container_traffic": draw(st.booleans()),
    }
    if draw(st.booleans()):
        data.update(use_spot_instances=True, max_run=draw(st.integers(60, 86400)))
        data["max_wait"] = data["max_run"] + draw(st.integers(0, 86400))
    elif draw(st.booleans()):
        data["keep_alive_period_in_seconds"] = draw(st.integers(0, 3600))
    if draw(st.booleans()):
        data["checkpoint_s3_uri"] = draw(S3)
    if draw(st.booleans()):
        data.update(subnets=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d"])
        if draw(st.booleans()):
            data["inputs"]["fsx"] = {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/data"}
            data["input_mode"] = "File"
    return data


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_specs(), st.sampled_from(LAUNCHERS))
def test_render_never_fails_on_a_valid_spec(data, launcher):
    job = parse_job_spec(data)  # the strategy builds valid specs: a SpecError here is a bug in a rule or in it
    request = render(job, job_name="job-1", launcher=launcher)
    assert json.loads(json.dumps(request)) == request
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in request["HyperParameters"].items())
    hyperparameters = decoded(request)
    assert {key: hyperparameters[key] for key in job.hyperparameters} == job.hyperparameters
    assert request["ResourceConfig"]["InstanceCount"] == job.instance_count
    assert ("VpcConfig" in request) == bool(job.subnets)
    if launcher == "trainops":
        assert hyperparameters["trainops_distribution"] == job.dist.to_canonical()
    else:
        assert hyperparameters["sagemaker_program"] == "train.py"
    assert masked(request)["HyperParameters"] == request["HyperParameters"]


def test_one_instance_group_is_named_as_the_sdk_names_it():
    # issue 27 item 3: one group and MPI naming none: the SDK sends the group (torch_distributed: it sends none)
    one = [{"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    mpi = spec(instance_type=..., instance_count=..., instance_groups=one, distribution={"mpi": {"enabled": True}})
    hyperparameters = decoded(render(mpi, job_name="job-1", launcher="toolkit"))
    assert hyperparameters["sagemaker_distribution_instance_groups"] == ["gpus"]
    torchrun = spec(instance_type=..., instance_count=..., instance_groups=one,
                    distribution={"torch_distributed": {"enabled": True}})
    assert "sagemaker_distribution_instance_groups" not in decoded(render(torchrun, job_name="job-1",
                                                                           launcher="toolkit"))


def test_issue_36_typed_ranks_per_host_reach_the_toolkit_and_instance_groups_share_one_image():
    # The SDK's form cannot send torch_distributed's ranks per host; the typed form's go under the key AWS's toolkit
    # gives torchrun as --nproc_per_node.
    typed = decoded(render(spec(distribution={"type": "torch_distributed", "processes_per_host": 4}),
                           job_name="job-1", launcher="toolkit"))
    assert typed["sagemaker_torch_distributed_enabled"] is True and typed["sagemaker_mpi_num_of_processes_per_host"] == 4
    assert "sagemaker_mpi_num_of_processes_per_host" not in decoded(
        render(spec(distribution={"torch_distributed": {"enabled": True}}), job_name="job-1", launcher="toolkit"))
    groups = [{"instance_group_name": "cpus", "instance_type": "ml.c5.18xlarge", "instance_count": 1},
              {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    request = render(spec(instance_type=..., instance_count=..., instance_groups=groups), job_name="job-1")
    assert "-gpu-" in request["AlgorithmSpecification"]["TrainingImage"]  # a GPU group exists: the GPU image


def test_issue_36_a_missing_dependency_is_refused_by_the_dry_runs_naming_it(tmp_path):
    from trainops.backends.local.backend import LocalBackend
    from trainops.backends.sagemaker.backend import SageMakerBackend

    (tmp_path / "libs").mkdir()
    (tmp_path / "train.py").write_text("print('training')\n")  # the entry point is there: only the dependency is not
    job = spec(dependencies=[str(tmp_path / "libs"), str(tmp_path / "missing")], source_dir=str(tmp_path))
    for backend in (SageMakerBackend(region="us-east-1"), LocalBackend(workdir=str(tmp_path / "state"))):
        with pytest.raises(SpecError) as caught:
            backend.dry_run(job, "job-1", backend.options())
        assert [problem.path for problem in caught.value.problems] == ["dependencies.1"]
        assert "missing' is not a directory" in caught.value.problems[0].message
    with pytest.raises(SpecError) as caught:
        SageMakerBackend(region="us-east-1").render_request(job, "job-1")
    assert caught.value.problems[0].path == "dependencies.1"


def test_issue_36_the_sagemaker_dry_run_refuses_a_missing_entry_point_or_source_dir_as_validate_does(tmp_path):
    """The SDK refuses a script that is not a file in source_dir before any request; the SageMaker backend's dry run
    and render refuse it with validate's own check (`request.code.code_problems`), beside every other problem."""
    from trainops.backends.request.code import code_problems
    from trainops.backends.sagemaker.backend import SageMakerBackend

    (tmp_path / "src").mkdir()
    backend = SageMakerBackend(region="us-east-1")
    missing_script = spec(source_dir=str(tmp_path / "src"))
    missing_directory = spec(source_dir=str(tmp_path / "nowhere"))
    for job, field, words in ((missing_script, "entry_point", f"train.py is not a file in {tmp_path / 'src'}"),
                              (missing_directory, "source_dir", f"{tmp_path / 'nowhere'} is not a directory")):
        assert [(problem.path, problem.message) for problem in code_problems(job)][0][0] == field
        for call, arguments in ((backend.dry_run, (job, "job-1", backend.options())),
                                (backend.render_request, (job, "job-1"))):
            with pytest.raises(SpecError) as caught:
                call(*arguments)
            assert [problem.path for problem in caught.value.problems] == [field]
            assert words in caught.value.problems[0].message
    with pytest.raises(SpecError) as caught:  # every problem at once: render's own and the code's
        backend.dry_run(spec(source_dir=str(tmp_path / "src"), role=None), "job-1", backend.options())
    assert [problem.path for problem in caught.value.problems] == ["role", "entry_point"]
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    assert backend.dry_run(missing_script, "job-1", backend.options())["HyperParameters"]


def test_issue_36_an_s3_source_tarball_is_not_looked_for_and_a_bad_one_is_named_once(tmp_path, monkeypatch):
    from trainops.backends.sagemaker.backend import SageMakerBackend

    monkeypatch.chdir(tmp_path)  # no train.py here: an s3:// tarball's entry point is not looked for on this machine
    backend = SageMakerBackend(region="us-east-1")
    request = backend.dry_run(spec(source_dir="s3://bucket/code/sourcedir.tar.gz"), "job-1", backend.options())
    assert "s3://bucket/code/sourcedir.tar.gz" in json.dumps(request["InputDataConfig"])  # the code, as given
    with pytest.raises(SpecError) as caught:
        backend.dry_run(spec(source_dir="s3://bucket/code/"), "job-1", backend.options())
    assert [problem.path for problem in caught.value.problems] == ["source_dir"]
    assert "as the SDK requires" in caught.value.problems[0].message  # render's words, not repeated by the code check
