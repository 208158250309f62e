"""The emulated containers of a local job: each host's base directory filled from the CreateTrainingJob request
(render_local, the same request builder the SageMaker backend uses), as SageMaker fills /opt/ml."""

from __future__ import annotations

import json

import pytest

from trainops.backends.hostfs.channels import fetch_channels
from trainops.backends.hostfs.contract_dir import (
    container_argv,
    container_environment,
    fill_container,
    input_data_config,
)
from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.local.container import request_secrets
from trainops.backends.local.request_exec import check_request
from trainops.backends.request.hosts import host_groups
from trainops.backends.request.render import render_local
from trainops.errors import SpecError
from trainops.spec import parse_job_spec


def spec_of(**fields):
    base = {"name": "layout", "entry_point": "train.py", "instance_type": "ml.g5.xlarge"}
    return parse_job_spec({**base, **fields})


def request_of(spec, tmp_path, launcher="trainops", job_name="job-1"):
    return render_local(spec, job_name=job_name, launcher=launcher, code=str(tmp_path / "code"),
                        runtime=str(tmp_path / "runtime"), submit=str(tmp_path / "sourcedir.tar.gz"),
                        output_path=(tmp_path / "out").as_uri())


def fill_all(request, tmp_path, channels):
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    return [fill_container(request, host, tmp_path / "job" / "hosts" / host, channels, tmp_path / "ckpt")
            for host, _, _ in host_groups(request)]


def read(path):
    return json.loads(path.read_text())


def test_every_host_gets_sagemakers_files_with_hosts_ranked_as_strings(tmp_path):
    spec = spec_of(instance_count=11, hyperparameters={"epochs": 3, "name": "x"},
                   distribution={"torch_distributed": {"enabled": True}}, inputs={"train": str(tmp_path)})
    request = request_of(spec, tmp_path)
    for name in ("code", "runtime"):
        (tmp_path / name).mkdir()
    channels = fetch_channels(request, tmp_path / "job", {}, None)
    layouts = fill_all(request, tmp_path, channels)
    assert [layout.name for layout in layouts] == [f"algo-{i}" for i in range(1, 12)]
    resource = read(layouts[9].base_dir / "input/config/resourceconfig.json")
    assert resource["current_host"] == "algo-10"
    assert resource["hosts"][:4] == ["algo-1", "algo-10", "algo-11", "algo-2"]  # SageMaker's ranking
    assert resource["current_instance_type"] == "ml.g5.xlarge"
    assert resource["current_group_name"] == "homogeneousCluster"
    assert resource["instance_groups"] == [{"instance_group_name": "homogeneousCluster",
                                            "instance_type": "ml.g5.xlarge", "hosts": [f"algo-{i}" for i in range(1, 12)]}]
    hyper = read(layouts[0].base_dir / "input/config/hyperparameters.json")
    assert hyper == request["HyperParameters"]  # exactly the request's strings
    assert hyper["epochs"] == "3" and hyper["name"] == '"x"'  # the SDK's json.dumps encoding
    assert json.loads(hyper["trainops_distribution"])["type"] == "torch_distributed"
    data_config = read(layouts[0].base_dir / "input/config/inputdataconfig.json")
    assert data_config["train"] == {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                                    "RecordWrappingType": "None"}
    assert set(data_config) == {"train", "trainops_code", "trainops_runtime"}
    host = layouts[3].base_dir
    assert (host / "input/data/train").resolve() == tmp_path.resolve()
    assert (host / "input/data/trainops_code").resolve() == (tmp_path / "code").resolve()
    assert (host / "input/data/trainops_runtime").resolve() == (tmp_path / "runtime").resolve()
    assert (host / "checkpoints").resolve() == (tmp_path / "ckpt").resolve()
    assert (host / "model").is_dir() and (host / "output/data").is_dir()


def test_sharded_channel_splits_files_between_hosts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for index in range(5):
        (data / f"part-{index}").write_text(str(index))
    spec = spec_of(instance_count=2, inputs={"train": {"s3_data": str(data), "distribution": "ShardedByS3Key"}})
    request = request_of(spec, tmp_path, launcher="toolkit")
    layouts = fill_all(request, tmp_path, fetch_channels(request, tmp_path / "job", {}, None))
    first = sorted(path.name for path in (layouts[0].base_dir / "input/data/train").iterdir())
    second = sorted(path.name for path in (layouts[1].base_dir / "input/data/train").iterdir())
    assert first == ["part-0", "part-2", "part-4"] and second == ["part-1", "part-3"]
    assert input_data_config(request)["train"]["S3DistributionType"] == "ShardedByS3Key"


def test_instance_groups_assign_hosts_group_by_group(tmp_path):
    spec = spec_of(instance_type=None, instance_groups=[
        {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "instance_count": 1},
        {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}],
        distribution={"type": "torch_distributed", "instance_groups": ["train"]})
    request = request_of(spec, tmp_path, launcher="toolkit")
    layouts = fill_all(request, tmp_path, {})
    resources = [read(layout.base_dir / "input/config/resourceconfig.json") for layout in layouts]
    assert [r["current_group_name"] for r in resources] == ["data", "train", "train"]
    assert [r["current_instance_type"] for r in resources] == ["ml.c5.xlarge", "ml.p4d.24xlarge", "ml.p4d.24xlarge"]
    groups = {group["instance_group_name"]: group["hosts"] for group in resources[0]["instance_groups"]}
    assert groups == {"data": ["algo-1"], "train": ["algo-2", "algo-3"]}


def test_the_container_runs_the_requests_entrypoint_with_the_image_python(tmp_path):
    trainops = request_of(spec_of(), tmp_path)
    assert container_argv(trainops, "/img/bin/python") == ["/img/bin/python", "-m", "trainops.runtime", "launch"]
    toolkit = request_of(spec_of(), tmp_path, launcher="toolkit")
    assert container_argv(toolkit, "/img/bin/python") == ["/img/bin/python", "-m", "sagemaker_training.cli.train"]


def test_the_environment_is_the_requests_with_no_pythonpath_of_ours(tmp_path):
    request = request_of(spec_of(environment={"MY_FLAG": "1", "PYTHONPATH": "/opt/ml/code/lib"}), tmp_path)
    layout = HostLayout("algo-1", tmp_path / "base")
    inherited = {"PATH": "/usr/bin", "PYTHONPATH": "/work/main", "SM_MODEL_DIR": "/stale", "AWS_REGION": "eu-west-1"}
    isolated = container_environment(request, layout, inherited=inherited, isolated=True, extra={"X": "y"})
    assert isolated["PYTHONPATH"] == "/opt/ml/input/data/trainops_runtime:/opt/ml/code/lib"
    assert isolated["MY_FLAG"] == "1" and isolated["X"] == "y" and isolated["PATH"] == "/usr/bin"
    assert "SM_MODEL_DIR" not in isolated and "SAGEMAKER_BASE_DIR" not in isolated
    assert isolated["TRAINING_JOB_NAME"] == "job-1"
    shared = container_environment(request, layout, inherited=inherited, isolated=False, extra={})
    base = str(tmp_path / "base")
    assert shared["PYTHONPATH"] == f"{base}/input/data/trainops_runtime:{base}/code/lib"
    assert shared["SAGEMAKER_BASE_DIR"] == base
    toolkit = container_environment(request_of(spec_of(), tmp_path, launcher="toolkit"), layout, inherited={},
                                    isolated=True, extra={})
    assert toolkit["SAGEMAKER_TRAINING_MODULE"] == "sagemaker_pytorch_container.training:main"


def test_secret_looking_request_environment_values_are_masked(tmp_path):
    request = request_of(spec_of(environment={"HF_TOKEN": "hf_abcdefghijkl", "EPOCHS": "3"}), tmp_path)
    assert request_secrets(request, {}) == ["hf_abcdefghijkl"]


def test_channel_problems_are_reported_at_once(tmp_path):
    spec = spec_of(inputs={"train": str(tmp_path / "missing"),
                           "fsx": {"file_system_id": "fs-0123456789abcdef0", "file_system_type": "FSxLustre",
                                   "directory_path": "/fsx/data"}},
                   subnets=["subnet-0123abcd"], security_group_ids=["sg-0123abcd"])
    request = request_of(spec, tmp_path, launcher="toolkit")
    with pytest.raises(SpecError) as caught:
        fetch_channels(request, tmp_path / "job", {"nope": "/tmp"}, None)
    paths = sorted(problem.path for problem in caught.value.problems)
    assert paths == ["channel nope", "inputs.fsx", "inputs.train"]
    assert "--channel fsx=PATH" in str(caught.value)


@pytest.mark.parametrize("request_, field", [([], "request"), ({"TrainingJobName": "x"}, "AlgorithmSpecification")])
def test_a_request_missing_keys_is_refused_by_name(request_, field):
    with pytest.raises(SpecError) as caught:
        check_request(request_)
    assert field in [problem.path for problem in caught.value.problems]


@pytest.mark.parametrize("form", ["{path}", "file://{path}", "file://localhost{path}"])
def test_a_local_channel_is_the_same_path_to_the_check_and_to_the_job(tmp_path, form):
    from trainops.backends.local.preflight import _local_channels

    data = tmp_path / "data"
    for directory in (data, tmp_path / "code", tmp_path / "runtime"):  # the runtime and code channels too
        directory.mkdir()
    (data / "part-0").write_text("x")
    request = request_of(spec_of(inputs={"train": "s3://bucket/train/"}), tmp_path)
    overrides = {"train": form.format(path=data)}
    assert _local_channels(request, overrides) == {"inputs.train": str(data)}
    assert fetch_channels(request, tmp_path / "job", overrides, None)["train"] == data
