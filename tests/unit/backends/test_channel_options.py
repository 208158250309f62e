"""The SDK's TrainingInput options (compression, record wrapping, shuffle, attribute names, per-channel instance
groups) and experiment_config: the spec's checks, the request as the SDK renders it, and what the local and Slurm
engines make of them (trainops.backends.request.channel_options)."""

from __future__ import annotations

import gzip

import pytest

from trainops.backends.request.channel_options import ChannelOptions, channel_options
from trainops.backends.request.render import render, render_local
from trainops.errors import SpecError
from trainops.spec import parse_job_spec

BASE = {"role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1", "entry_point": "train.py",
        "framework_version": "2.3.0", "instance_type": "ml.c5.xlarge", "output_path": "s3://bucket/out"}
GROUPS = [{"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "instance_count": 1},
          {"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "instance_count": 2}]


def spec(**fields):
    return parse_job_spec({key: value for key, value in {**BASE, **fields}.items() if value is not ...})


def problems(**fields):
    with pytest.raises(SpecError) as caught:
        spec(**fields)
    return {problem.path: problem.message for problem in caught.value.problems}


def test_every_option_rendered_where_the_sdk_puts_it():
    job = spec(input_mode="Pipe", instance_type=..., instance_groups=GROUPS, inputs={
        "train": {"s3_data": "s3://bucket/train.manifest", "s3_data_type": "AugmentedManifestFile",
                  "compression": "Gzip", "record_wrapping": "RecordIO", "shuffle_config": {"seed": 7},
                  "attribute_names": ["source-ref", "label"], "instance_groups": ["train"]}},
        experiment_config={"ExperimentName": "bert", "TrialName": "t-1", "RunName": "run-7"})
    request = render(job, job_name="j-1")
    channel = request["InputDataConfig"][0]
    assert channel["CompressionType"] == "Gzip" and channel["RecordWrapperType"] == "RecordIO"
    assert channel["ShuffleConfig"] == {"Seed": 7}
    assert channel["DataSource"]["S3DataSource"]["AttributeNames"] == ["source-ref", "label"]
    assert channel["DataSource"]["S3DataSource"]["InstanceGroupNames"] == ["train"]
    assert request["ExperimentConfig"] == {"ExperimentName": "bert", "TrialName": "t-1", "RunName": "run-7"}


def test_options_the_api_refuses_are_refused_at_their_fields():
    found = problems(inputs={"train": {"s3_data": "s3://bucket/t", "compression": "Gzip", "record_wrapping": "RecordIO",
                                       "attribute_names": ["a"], "instance_groups": ["gpus"]}})
    assert "Pipe mode" in found["inputs.train.compression"]
    assert "Pipe mode" in found["inputs.train.record_wrapping"]
    assert "AugmentedManifestFile" in found["inputs.train.attribute_names"]
    assert "defines no instance_groups" in found["inputs.train.instance_groups"]
    found = problems(instance_type=..., instance_groups=GROUPS,
                     inputs={"train": {"s3_data": "s3://bucket/t", "instance_groups": ["gpus"]}})
    assert "'gpus' is not one of the job's instance groups" in found["inputs.train.instance_groups"]
    assert "experiment entity name" in problems(experiment_config={"ExperimentName": "bad name"})[
        "experiment_config.ExperimentName"]


def test_local_and_slurm_refuse_what_they_do_not_emulate(tmp_path):
    job = spec(input_mode="Pipe", inputs={"train": {"s3_data": str(tmp_path), "record_wrapping": "RecordIO"}})
    arguments = {"job_name": "j", "code": str(tmp_path), "runtime": str(tmp_path), "submit": str(tmp_path),
                 "output_path": str(tmp_path)}
    for known, engine in ((True, "local"), (False, "slurm")):
        with pytest.raises(SpecError) as caught:
            render_local(job, known_instance_types=known, **arguments)
        assert f"the {engine} engine does not wrap objects in RecordIO" in str(caught.value)


def test_a_host_gets_its_groups_channels_its_share_and_the_seeded_order(tmp_path):
    job = spec(input_mode="Pipe", instance_type=..., instance_groups=GROUPS, inputs={
        "train": {"s3_data": "s3://bucket/t", "distribution": "ShardedByS3Key", "compression": "Gzip",
                  "shuffle_config": {"seed": 7}, "instance_groups": ["train"]},
        "meta": {"s3_data": "s3://bucket/m", "instance_groups": ["data"]}})
    request = render(job, job_name="j")
    assert channel_options(request, "algo-1")["train"] == ChannelOptions(on_this_host=False, gzip=True, seed=7)
    assert channel_options(request, "algo-1")["meta"].share == (0, 1)
    assert channel_options(request, "algo-3")["train"].share == (1, 2)
    source = tmp_path / "data"
    source.mkdir()
    for index in range(6):
        with gzip.open(source / f"part-{index}.txt.gz", "wt") as handle:
            handle.write(f"record {index}")
    seen = []
    for host in ("algo-2", "algo-3"):
        link = tmp_path / host / "train"
        option = channel_options(request, host)["train"]
        option.lay_out(link, source, index=9, count=9, sharded=True)  # the option's share wins over the job's
        seen.append(sorted(path.read_text() for path in link.iterdir()))
    assert sorted(seen[0] + seen[1]) == [f"record {index}" for index in range(6)]
    assert not set(seen[0]) & set(seen[1])
    assert seen != [["record 0", "record 2", "record 4"], ["record 1", "record 3", "record 5"]]  # shuffled
