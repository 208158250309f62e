"""The job spec's own fields: single-field checks, the distribution and channel fields, derived views."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainops.errors import SpecError
from trainops.spec import parse_job_spec
from trainops.spec.distribution import MPI, SMDDP, NoDistribution, TorchDistributed
from trainops.spec.inputs import FileSystemInput, TrainingInput
from trainops.spec.job import JobSpec

BASE = {"entry_point": "train.py", "instance_type": "ml.c5.xlarge"}


def problems(**fields):
    """{path: message} of every problem parse_job_spec reports for BASE updated with `fields`."""
    with pytest.raises(SpecError) as caught:
        parse_job_spec({**BASE, **fields})
    return {problem.path: problem.message for problem in caught.value.problems}


def spec(**fields) -> JobSpec:
    return parse_job_spec({**BASE, **fields})


def test_minimal_spec_and_defaults():
    job = spec()
    assert job.instance_count == 1 and job.framework == "pytorch" and job.launcher == "trainops"
    assert job.dist == NoDistribution()
    assert (job.max_run, job.volume_size, job.input_mode) == (86400, 30, "File")
    assert job.hyperparameters == {} and job.inputs == {} and job.tags == [] and job.environment == {}


def test_entry_point_is_required():
    with pytest.raises(SpecError) as caught:
        parse_job_spec({"instance_type": "ml.c5.xlarge"})
    assert [(p.path, p.message) for p in caught.value.problems] == [("entry_point", "is required")]


@pytest.mark.parametrize("field, good, bad, words", [
    ("name", ["job", "my-job-1", "a" * 63], ["-job", "job_1", "a" * 64, "a" + "-" * 70 + "b", "job\n"],
     "not a valid job name"),
    ("role", ["arn:aws:iam::111122223333:role/SageMakerRole"], ["SageMakerRole", "arn:aws:iam::1:role/x"],
     "not an IAM role ARN"),
    ("region", ["us-east-1", "eu-central-2"], ["us east 1", "useast1", "us-east-1\n"], "not an AWS region"),
    # "2" is a version too; no PyTorch image has it (test_a_well_formed_version_without_an_image)
    ("framework_version", ["1.0", "2.3", "2.3.0"], ["2.3.0.1", "latest", "v2.3", "2.3.0\n"], "not a version"),
    ("py_version", ["py3", "py310", "py311"], ["python3", "3.11", "py3111", "py4"], "not a Python version"),
    ("checkpoint_s3_uri", ["s3://bucket/ckpt"], ["/opt/ml/checkpoints", "s3://B/x"], "not an s3://bucket"),
    ("checkpoint_local_path", ["/opt/ml/checkpoints"], ["checkpoints", "/opt/../etc"], "absolute container path"),
    ("output_path", ["s3://bucket/out", "file:///tmp/out", "out"], ["s3://B/x", "gs://bucket/x"], ""),
])
def test_single_field_formats(field, good, bad, words):
    for value in good:
        assert getattr(spec(**{field: value}), field) is not None
    for value in bad:
        found = problems(**{field: value})
        assert list(found) == [field], (value, found)
        assert words in found[field]


def test_a_well_formed_version_without_an_image():
    assert list(problems(framework_version="2")) == ["framework_version"]
    assert "no image for version '2'" in problems(framework_version="2")["framework_version"]
    assert spec(framework_version="2", image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:2").image_uri


@pytest.mark.parametrize("field, value", [
    ("instance_count", 0), ("instance_count", 1001), ("max_run", 0), ("max_run", 28 * 24 * 3600 + 1),
    ("volume_size", 0), ("max_retry_attempts", 31), ("max_retry_attempts", 0), ("keep_alive_period_in_seconds", -1),
    ("keep_alive_period_in_seconds", 21601), ("max_wait", 0), ("image_uri", "x" * 256), ("entry_point", ""),
    ("framework", "mxnet"), ("launcher", "slurm"), ("input_mode", "Stream"), ("use_spot_instances", "maybe"),
])
def test_limits(field, value):
    assert field in problems(**{field: value})


@pytest.mark.parametrize("field, value, words", [
    ("subnets", [], "is empty"),
    ("subnets", ["subnet-zz"], "'subnet-zz' is not a subnet id (subnet- followed by"),
    ("subnets", ["subnet-0a1b2c3d", "subnet-0a1b2c3d"], "same id twice"),
    ("subnets", [f"subnet-0a1b2c{index:02x}" for index in range(17)], "at most 16"),
    ("security_group_ids", ["sg-1", "sg-2"], "'sg-1', 'sg-2' are not security group ids"),
    ("security_group_ids", [f"sg-0a1b2c{index:02x}" for index in range(6)], "at most 5"),
])
def test_vpc_ids(field, value, words):
    found = problems(**{field: value})
    assert words in found[field]


def test_vpc_ids_accepted():
    job = spec(subnets=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d", "sg-0a1b2c3e"])
    assert job.subnets == ["subnet-0a1b2c3d"] and len(job.security_group_ids) == 2


def test_channel_names_and_count():
    assert "inputs" in problems(inputs={"bad/name": "s3://bucket/x"})
    assert "at most 20" in problems(inputs={f"c{index}": "s3://bucket/x" for index in range(21)})["inputs"]
    job = spec(inputs={"train": "s3://bucket/x", "val.1": {"s3_data": "s3://bucket/y"},
                       "fsx": {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/a"}},
               subnets=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d"])
    channels = job.channels
    assert isinstance(channels["train"], TrainingInput) and channels["train"].s3_data == "s3://bucket/x"
    assert isinstance(channels["fsx"], FileSystemInput)


def test_channel_errors_have_the_users_path_even_for_a_channel_named_like_a_tag():
    found = problems(inputs={"s3": {"s3_data": "s3://bucket/x", "distrbution": "x"},
                             "uri": "http://x", "file_system": {"file_system_id": "fs-zz", "directory_path": "/a"}})
    assert set(found) == {"inputs.s3.distrbution", "inputs.uri", "inputs.file_system.file_system_id"}
    assert found["inputs.s3.distrbution"] == "unknown key: did you mean 'distribution'?"


def test_environment_values_become_text():
    job = spec(environment={"OMP_NUM_THREADS": 4, "DEBUG": True, "RATIO": 0.5, "NAME": "x"})
    assert job.environment == {"OMP_NUM_THREADS": "4", "DEBUG": "true", "RATIO": "0.5", "NAME": "x"}


@pytest.mark.parametrize("value, words", [
    ({"1BAD": "x"}, "not a valid environment variable name"),
    ({"A-B": "x"}, "not a valid environment variable name"),
    ({"A": "x" * 513}, "SageMaker allows 512"),
    ({f"V{index}": "x" for index in range(101)}, "at most 100"),
])
def test_environment_rules(value, words):
    assert words in problems(environment=value)["environment"]


def test_environment_value_must_be_scalar():
    assert "environment.A" in problems(environment={"A": None})


def test_hyperparameters_keep_json_values():
    job = spec(hyperparameters={"lr": 0.1, "layers": [1, 2], "opts": {"a": True}, "name": "x"})
    assert job.hyperparameters["layers"] == [1, 2]


@pytest.mark.parametrize("value, words", [
    ({f"h{index}": 1 for index in range(101)}, "at most 100"),
    ({"x" * 257: 1}, "1-256 characters"),
    ({"big": "x" * 2600}, "SageMaker allows 2500"),
])
def test_hyperparameter_limits(value, words):
    assert words in problems(hyperparameters=value)["hyperparameters"]


def test_hyperparameter_values_must_be_json():
    import datetime

    found = problems(hyperparameters={"when": datetime.date(2024, 1, 1)})
    assert "value must be JSON" in found["hyperparameters"]


def test_tags_as_list_or_mapping():
    as_list = spec(tags=[{"Key": "team", "Value": "vision"}])
    as_mapping = spec(tags={"team": "vision"})
    assert as_list.tags == as_mapping.tags
    assert as_list.tags[0].key == "team" and as_list.tags[0].value == "vision"
    numbers = spec(tags={"cost-center": 2024, "billable": True})
    assert [(tag.key, tag.value) for tag in numbers.tags] == [("cost-center", "2024"), ("billable", "true")]


def test_tag_rules():
    assert "at most 50" in problems(tags={f"k{index}": "v" for index in range(51)})["tags"]
    found = problems(tags=[{"Key": "a", "Valu": "x"}])
    assert found["tags.0.Valu"] == "unknown key: did you mean 'Value'?"
    assert "tags.0.Value" in found
    assert "tags.0.Key" in problems(tags=[{"Key": "", "Value": "x"}])


def test_instance_group_fields():
    found = problems(instance_type=None, instance_groups=[{"instance_group_name": "g", "instance_type": "ml.c5.xlarge",
                                                           "instance_count": 0}])
    assert "instance_groups.0.instance_count" in found


# --- the distribution field ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, {}])
def test_missing_distribution_is_none(value):
    assert spec(distribution=value).dist == NoDistribution()


@pytest.mark.parametrize("value", ["smddp", ["mpi"], 3, True])
def test_distribution_must_be_a_mapping(value):
    found = problems(distribution=value)
    assert list(found) == ["distribution"]
    assert "must be a mapping" in found["distribution"] and "{type: smddp}" in found["distribution"]


def test_both_spellings_give_the_typed_variant():
    sdk = spec(distribution={"mpi": {"enabled": True, "processes_per_host": 2}})
    typed = spec(distribution={"type": "mpi", "processes_per_host": 2})
    assert sdk.dist == typed.dist == MPI(processes_per_host=2)
    assert isinstance(sdk.distribution, MPI)


@pytest.mark.parametrize("distribution, loc", [
    ({"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-x A; rm -rf /"}}},
     ("distribution", "smdistributed", "dataparallel", "custom_mpi_options")),
    ({"smdistributed": {"dataparallel": {"enabled": "sometimes"}}},
     ("distribution", "smdistributed", "dataparallel", "enabled")),
    ({"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_option": "-v"}}},
     ("distribution", "smdistributed", "dataparallel", "custom_mpi_option")),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
      "torch_distributed": {"enabled": True}},
     ("distribution", "smdistributed", "modelparallel", "parameters", "partitions")),
    ({"type": "smddp", "custom_mpi_options": "a|b"}, ("distribution", "custom_mpi_options")),
    ({"type": "smp", "parameters": {"partitions": 2}}, ("distribution", "parameters", "partitions")),
    ({"type": "bogus"}, ("distribution",)),
])
def test_model_validate_reports_the_path_the_user_wrote(distribution, loc):
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({**BASE, "instance_type": "ml.p4d.24xlarge", "distribution": distribution})
    assert [error["loc"] for error in caught.value.errors()] == [loc]


def test_typo_in_either_form_suggests_the_key():
    assert problems(distribution={"torch_distibuted": {"enabled": True}}) == {
        "distribution.torch_distibuted": "unknown key: did you mean 'torch_distributed'?"}
    assert problems(distribution={"smdistributed": {"dataparalel": {"enabled": True}}}) == {
        "distribution.smdistributed.dataparalel": "unknown key: did you mean 'dataparallel'?"}
    assert problems(distribution={"type": "smddp", "launchr": "torchrun"}) == {
        "distribution.launchr": "unknown key: did you mean 'launcher'?"}
    found = problems(distribution={"type": "mpi", "zzz": 1})
    assert "known keys: custom_mpi_options, instance_groups, processes_per_host, type" in found["distribution.zzz"]


def test_unknown_top_level_key_suggests_the_field():
    assert problems(instanc_count=2) == {"instanc_count": "unknown key: did you mean 'instance_count'?"}
    assert "known keys:" in problems(zzzzzz=1)["zzzzzz"]


# --- derived views ------------------------------------------------------------------------------------------------

GROUPS = [{"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 2},
          {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 3}]


def test_host_count_and_training_instance_type():
    assert spec(instance_count=4).host_count() == 4
    grouped = spec(instance_type=None, instance_groups=GROUPS,
                   distribution={"smdistributed": {"dataparallel": {"enabled": True}}, "instance_groups": ["gpus"]})
    assert grouped.host_count() == 5
    assert grouped.training_instance_type() == "ml.p4d.24xlarge"
    assert isinstance(grouped.dist, SMDDP)
    single = spec(instance_type=None, instance_groups=GROUPS[:1])
    assert single.training_instance_type() == "ml.c5.xlarge"


def test_to_json_dict_carries_the_typed_distribution_and_round_trips():
    job = spec(instance_type="ml.p4d.24xlarge", instance_count=2,
               distribution={"torch_distributed": {"enabled": True}}, tags={"team": "x"},
               hyperparameters={"lr": 0.1})
    data = job.to_json_dict()
    assert data["distribution"] == {"type": "torch_distributed", "neuron_parallel_compile": False}
    assert data["entry_point"] == "train.py"
    assert "max_run" not in data  # defaults are left out
    again = parse_job_spec(data)
    assert again == job
    assert isinstance(again.dist, TorchDistributed)


def test_spec_hash_is_stable_and_sensitive():
    first = spec(hyperparameters={"a": 1, "b": 2})
    same = spec(hyperparameters={"b": 2, "a": 1})
    other = spec(hyperparameters={"a": 1, "b": 3})
    assert first.spec_hash() == same.spec_hash() != other.spec_hash()
    assert len(first.spec_hash()) == 64


def test_assignment_is_validated():
    job = spec()
    with pytest.raises(ValidationError):
        job.instance_count = 0


# --- issue 14: channel names, environment values and names -----------------------------------------------------

@pytest.mark.parametrize("name", [".", ".."])
def test_dot_channel_names_are_refused(name):
    # A channel is input/data/<name>: '.' replaced the data directory with a link, '..' gave an internal error.
    with pytest.raises(ValidationError, match="not allowed"):
        JobSpec(entry_point="train.py", instance_type="local", inputs={name: "s3://bucket/x"})


def test_environment_values_with_nul_are_refused():
    with pytest.raises(ValidationError, match="NUL"):
        JobSpec(entry_point="train.py", instance_type="local", environment={"A": "x\x00y"})


@pytest.mark.parametrize("name", ["TRAINOPS_HEALTHCHECK", "trainops_x"])
def test_trainops_variables_are_reserved(name):
    with pytest.raises(ValidationError, match="reserved"):
        JobSpec(entry_point="train.py", instance_type="local", environment={name: "1"})


def test_hyphenated_instance_families_are_instance_types():
    spec = JobSpec(entry_point="train.py", instance_type="ml.p6-b200.48xlarge")
    assert spec.instance_type == "ml.p6-b200.48xlarge"


def test_metric_definitions_reach_the_request():
    from trainops.backends.request.render import render

    spec = JobSpec(entry_point="train.py", instance_type="ml.p4d.24xlarge", framework_version="2.2.0",
                   role="arn:aws:iam::123456789012:role/R", region="us-east-1", output_path="s3://bkt/out",
                   metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}])
    request = render(spec, job_name="job-1")
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
    with pytest.raises(ValidationError, match="not a regular expression"):
        JobSpec(entry_point="train.py", instance_type="local", metric_definitions=[{"Name": "x", "Regex": "("}])
