"""The contract directories the local backend writes: what a SageMaker container would see, per simulated host."""

from __future__ import annotations

import json

from trainops.backends.local.layout import host_names, lay_out_job
from trainops.spec import parse_job_spec


def spec_of(**fields):
    base = {"name": "layout", "entry_point": "train.py", "instance_type": "ml.g5.xlarge"}
    return parse_job_spec({**base, **fields})


def read(path):
    return json.loads(path.read_text())


def test_every_host_gets_sagemakers_files_with_hosts_ranked_as_strings(tmp_path):
    spec = spec_of(instance_count=11, hyperparameters={"epochs": 3, "name": "x"},
                   distribution={"torch_distributed": {"enabled": True}}, inputs={"train": str(tmp_path)})
    code, checkpoints = tmp_path / "code", tmp_path / "ckpt"
    code.mkdir(), checkpoints.mkdir()
    layouts = lay_out_job(spec, "job-1", tmp_path / "job", {"train": tmp_path}, code, checkpoints)
    assert [layout.name for layout in layouts] == host_names(spec) == [f"algo-{i}" for i in range(1, 12)]
    resource = read(layouts[9].base_dir / "input/config/resourceconfig.json")
    assert resource["current_host"] == "algo-10"
    assert resource["hosts"][:4] == ["algo-1", "algo-10", "algo-11", "algo-2"]  # SageMaker's ranking
    assert resource["current_instance_type"] == "ml.g5.xlarge"
    hyper = read(layouts[0].base_dir / "input/config/hyperparameters.json")
    assert hyper["epochs"] == "3" and hyper["name"] == '"x"'  # the SDK's json.dumps encoding
    assert hyper["sagemaker_program"] == '"train.py"' and hyper["sagemaker_job_name"] == '"job-1"'
    assert json.loads(hyper["trainops_distribution"])["type"] == "torch_distributed"
    data_config = read(layouts[0].base_dir / "input/config/inputdataconfig.json")
    assert data_config["train"]["TrainingInputMode"] == "File"
    host = layouts[3].base_dir
    assert (host / "input/data/train").resolve() == tmp_path.resolve()
    assert (host / "code").resolve() == code.resolve() and (host / "checkpoints").resolve() == checkpoints.resolve()
    assert (host / "model").is_dir() and (host / "output/data").is_dir()


def test_sharded_channel_splits_files_between_hosts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for index in range(5):
        (data / f"part-{index}").write_text(str(index))
    spec = spec_of(instance_count=2, inputs={"train": {"s3_data": str(data), "distribution": "ShardedByS3Key"}})
    (tmp_path / "code").mkdir()
    layouts = lay_out_job(spec, "job-2", tmp_path / "job", {"train": data}, tmp_path / "code", tmp_path)
    first = sorted(path.name for path in (layouts[0].base_dir / "input/data/train").iterdir())
    second = sorted(path.name for path in (layouts[1].base_dir / "input/data/train").iterdir())
    assert first == ["part-0", "part-2", "part-4"] and second == ["part-1", "part-3"]


def test_instance_groups_assign_hosts_group_by_group(tmp_path):
    spec = spec_of(instance_type=None, instance_groups=[
        {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "instance_count": 1},
        {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}],
        distribution={"type": "torch_distributed", "instance_groups": ["train"]})
    (tmp_path / "code").mkdir()
    layouts = lay_out_job(spec, "job-3", tmp_path / "job", {}, tmp_path / "code", tmp_path)
    resources = [read(layout.base_dir / "input/config/resourceconfig.json") for layout in layouts]
    assert [r["current_group_name"] for r in resources] == ["data", "train", "train"]
    assert [r["current_instance_type"] for r in resources] == ["ml.c5.xlarge", "ml.p4d.24xlarge", "ml.p4d.24xlarge"]
    groups = {group["instance_group_name"]: group["hosts"] for group in resources[0]["instance_groups"]}
    assert groups == {"data": ["algo-1"], "train": ["algo-2", "algo-3"]}
