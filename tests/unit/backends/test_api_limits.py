"""The API's own limits on the rendered CreateTrainingJob request (trainops.backends.request.api_limits): what boto3
would send and the service would refuse after the code was uploaded is refused by render, at the spec's field."""

from __future__ import annotations

import pytest

from trainops.backends.request.api_limits import request_problems
from trainops.backends.request.render import render, render_local
from trainops.errors import SpecError
from trainops.spec import parse_job_spec
from trainops.spec.api_model import closest_instance_types, training_instance_types
from trainops.spec.api_rules import has_local_storage

BASE = {"role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1", "entry_point": "train.py",
        "framework_version": "2.3.0", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
        "output_path": "s3://bucket/out"}


def spec(**fields):
    return parse_job_spec({key: value for key, value in {**BASE, **fields}.items() if value is not ...})


def problems(job, launcher="trainops"):
    with pytest.raises(SpecError) as caught:
        render(job, job_name="job-1", launcher=launcher)
    return {problem.path: problem.message for problem in caught.value.problems}


def test_unknown_instance_type_is_refused_with_did_you_mean():
    found = problems(spec(instance_type="ml.g5.xxlarge"))
    assert "did you mean ml.g5.xlarge" in found["instance_type"]
    assert "not a SageMaker training instance type" in found["instance_type"]


def test_unknown_instance_type_of_a_group_is_refused():
    job = spec(instance_type=..., instance_count=...,
               instance_groups=[{"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 1},
                                {"instance_group_name": "b", "instance_type": "ml.c5.xlage", "instance_count": 1}])
    found = problems(job)
    assert "ml.c5.xlarge" in found["instance_groups.1.instance_type"]


def test_local_engine_refuses_unknown_types_slurm_style_callers_do_not(tmp_path):
    job = spec(instance_type="ml.p4d.24xlarg")
    arguments = {"job_name": "job-1", "code": str(tmp_path), "runtime": str(tmp_path), "submit": str(tmp_path),
                 "output_path": str(tmp_path)}
    with pytest.raises(SpecError) as caught:
        render_local(job, known_instance_types=True, **arguments)
    assert "did you mean ml.p4d.24xlarge" in str(caught.value)
    assert render_local(job, **arguments)["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"[:-1]
    assert render_local(spec(instance_type="local"), known_instance_types=True, **arguments)


def test_every_catalogued_and_example_type_is_known():
    from trainops.runtime import catalog

    assert set(catalog.names()) <= training_instance_types() | {"local", "local_gpu"}
    assert closest_instance_types("ml.p5.48xlage")[0] == "ml.p5.48xlarge"


@pytest.mark.parametrize("launcher,added", [("trainops", 4), ("toolkit", 5)])
def test_hyperparameters_count_what_the_launcher_adds(launcher, added):
    job = spec(hyperparameters={f"h{index}": index for index in range(100)})
    found = problems(job, launcher)
    message = found["hyperparameters"]
    assert f"{100 + added} entries in HyperParameters; CreateTrainingJob takes at most 100" in message
    assert f"100 of the spec's and {added} the launcher adds" in message
    assert "sagemaker_program" in message
    render(spec(hyperparameters={f"h{index}": index for index in range(100 - added)}), job_name="j",
           launcher=launcher)


def test_environment_counts_what_the_launcher_adds():
    job = spec(environment={f"V{index}": "x" for index in range(100)})
    message = problems(job)["environment"]
    assert "101 entries in Environment" in message and "PYTHONPATH" in message
    # the toolkit launcher adds none: 100 are the API's limit
    render(job, job_name="j", launcher="toolkit")


def test_s3_uris_over_1024_characters():
    long = "s3://bucket/" + "k" * 1013
    assert len(long) == 1025
    with pytest.raises(SpecError) as caught:  # a channel's URI: the spec's own field says so (validate too)
        spec(inputs={"train": {"s3_data": long}})
    assert "at most 1024 characters" in str(caught.value) and "inputs.train.s3_data" in str(caught.value)
    request = render(spec(), job_name="job-1")  # the request check sees a channel's URI too
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = long
    found = {problem.path: problem.message for problem in request_problems(request)}
    assert "1025 characters long; CreateTrainingJob takes at most 1024" in found["output_path"]
    found = problems(spec(checkpoint_s3_uri=long))
    assert "at most 1024" in found["checkpoint_s3_uri"]
    # the launcher's code channels live under output_path: a long one is refused there
    found = problems(spec(output_path="s3://bucket/" + "o" * 1000))
    assert "at most 1024" in found["output_path"]


def refused(**fields):
    """The spec's own problems (the documented rules are spec rules: validate reports them too)."""
    with pytest.raises(SpecError) as caught:
        spec(**fields)
    return {problem.path: problem.message for problem in caught.value.problems}


def test_volume_kms_key_on_local_nvme_types():
    found = refused(volume_kms_key="arn:aws:kms:us-east-1:111122223333:key/abc")
    assert "ml.p4d.24xlarge" in found["volume_kms_key"] and "local NVMe" in found["volume_kms_key"]
    request = render(spec(instance_type="ml.p3.16xlarge", volume_kms_key="key-1"), job_name="j")
    assert request["ResourceConfig"]["VolumeKmsKeyId"] == "key-1"
    assert has_local_storage("ml.g5.xlarge") and has_local_storage("ml.trn1.32xlarge")
    assert not has_local_storage("ml.c5.xlarge") and not has_local_storage("local")


def test_augmented_manifest_needs_pipe_mode():
    channel = {"s3_data": "s3://bucket/train.manifest", "s3_data_type": "AugmentedManifestFile"}
    found = refused(inputs={"train": {**channel, "input_mode": "FastFile"}})
    assert "Pipe mode only" in found["inputs.train"]
    assert "Pipe mode only" in refused(inputs={"train": channel})["inputs.train"]
    render(spec(inputs={"train": {**channel, "input_mode": "Pipe"}}), job_name="j")
    render(spec(input_mode="Pipe", inputs={"train": channel}), job_name="j")


def test_request_checks_patterns_and_enums_generically():
    request = render(spec(), job_name="job-1")
    assert request_problems(request) == []
    request["Tags"] = [{"Key": "team#1", "Value": "v"}]
    request["InputDataConfig"][0]["InputMode"] = "Stream"
    request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 21601
    found = {problem.path: problem.message for problem in request_problems(request)}
    assert "does not match the API's pattern" in found["tags.0.Key"]
    assert "'Stream' is not one of the API's values" in found["output_path"]
    assert "over the API's maximum of 21600" in found["keep_alive_period_in_seconds"]
