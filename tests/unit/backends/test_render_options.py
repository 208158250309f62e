"""The SDK estimator options (issue 25) in trainops' own requests: both launchers, the SageMaker-only problems, the
code location, the uncompressed model's location, and dependencies packed with the code. (Agreement with the SDK's
requests is tests/differential/test_render_estimator_params_differential.py.)"""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from trainops.backends.request.render import CODE_CHANNEL, RUNTIME_CHANNEL, render
from trainops.backends.sagemaker.locations import job_locations
from trainops.backends.sagemaker.uploads import code_files, source_tarball_bytes
from trainops.errors import SpecError
from trainops.spec import parse_job_spec
from trainops.spec.loader import resolve_relative_paths

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-reserved-plan"
BASE = {"role": "arn:aws:iam::123456789012:role/R", "region": "us-east-1", "entry_point": "train.py",
        "source_dir": "/src", "framework_version": "2.3.0", "py_version": "py311", "instance_type": "ml.p5.48xlarge",
        "instance_count": 2, "output_path": "s3://bkt-out/jobs", "inputs": {"train": "s3://bkt-data/train"}}


def _spec(**fields):
    return parse_job_spec({**BASE, **fields})


def test_the_options_reach_the_trainops_launchers_request():
    request = render(_spec(training_plan=PLAN, enable_infra_check=True, disable_output_compression=True,
                           enable_remote_debug=False, enable_session_tag_chaining=True, disable_profiler=True,
                           container_log_level=10, model_uri="s3://bkt-data/base/model.tar.gz",
                           tensorboard_output_config={"s3_output_path": "s3://bkt-out/tb"},
                           instance_placement_config={"PlacementSpecifications": [{"InstanceCount": 2}]}),
                     job_name="job-1")
    assert request["ResourceConfig"]["TrainingPlanArn"] == PLAN
    assert request["ResourceConfig"]["InstancePlacementConfig"] == {"PlacementSpecifications": [{"InstanceCount": 2}]}
    assert request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert request["RemoteDebugConfig"] == {"EnableRemoteDebug": False}
    assert request["SessionChainingConfig"] == {"EnableSessionTagChaining": True}
    assert request["ProfilerConfig"] == {"DisableProfiler": True}
    assert request["OutputDataConfig"]["CompressionType"] == "NONE"
    assert request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://bkt-out/tb"}
    assert request["HyperParameters"]["sagemaker_container_log_level"] == "10"
    names = [channel["ChannelName"] for channel in request["InputDataConfig"]]
    assert names == ["train", "model", CODE_CHANNEL, RUNTIME_CHANNEL]  # the model channel before the launcher's
    model = request["InputDataConfig"][1]
    assert model["ContentType"] == "application/x-sagemaker-model" and model["InputMode"] == "File"


def test_nothing_is_added_when_no_option_is_set():
    request = render(_spec(), job_name="job-1")
    for key in ("InfraCheckConfig", "RemoteDebugConfig", "SessionChainingConfig", "TensorBoardOutputConfig"):
        assert key not in request
    # The profiler is the SDK's default: system monitoring on, under the output path.
    assert request["ProfilerConfig"] == {"S3OutputPath": request["OutputDataConfig"]["S3OutputPath"],
                                         "DisableProfiler": False}
    assert "CompressionType" not in request["OutputDataConfig"]
    assert "TrainingPlanArn" not in request["ResourceConfig"]
    assert "sagemaker_container_log_level" not in request["HyperParameters"]  # trainops launcher, default level


def test_every_sagemaker_only_problem_is_reported_at_once():
    spec = _spec(container_entry_point=["python3", "x.py"], container_arguments=["--a"], model_uri="/models/base",
                 tensorboard_output_config={"s3_output_path": "/tmp/tb"})
    with pytest.raises(SpecError) as caught:
        render(spec, job_name="job-1")
    paths = sorted(problem.path for problem in caught.value.problems)
    assert paths == ["container_arguments", "container_entry_point", "model_uri",
                     "tensorboard_output_config.s3_output_path"]
    assert "launcher: toolkit" in str(caught.value)


def test_the_toolkit_runs_the_specs_entrypoint():
    request = render(_spec(container_entry_point=["bash", "-c"], container_arguments=["run.sh"]), job_name="job-1",
                     launcher="toolkit")
    assert request["AlgorithmSpecification"]["ContainerEntrypoint"] == ["bash", "-c"]
    assert request["AlgorithmSpecification"]["ContainerArguments"] == ["run.sh"]


def test_code_location_moves_the_code_channels_and_the_upload_targets():
    spec = _spec(code_location="s3://bkt-code/team")
    request = render(spec, job_name="job-1")
    uris = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
            for channel in request["InputDataConfig"]}
    locations = job_locations(spec, "job-1")
    assert uris[CODE_CHANNEL] == locations.code_prefix == "s3://bkt-code/team/job-1/trainops/code/"
    assert uris[RUNTIME_CHANNEL] == locations.runtime_prefix == "s3://bkt-code/team/job-1/trainops/runtime/"
    toolkit = render(spec, job_name="job-1", launcher="toolkit")
    assert json.loads(toolkit["HyperParameters"]["sagemaker_submit_directory"]) == locations.source_tarball
    assert locations.model_artifact == "s3://bkt-out/jobs/job-1/output/model.tar.gz"


def test_without_compression_the_model_is_the_output_model_prefix():
    locations = job_locations(_spec(disable_output_compression=True), "job-1")
    assert locations.model_artifact == "s3://bkt-out/jobs/job-1/output/model/"


def test_dependencies_are_packed_under_their_own_names(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("import common\n")
    library = tmp_path / "libs" / "common"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("VALUE = 1\n")
    names = [name for _, name in code_files(source, [str(library)])]
    assert names == ["common/__init__.py", "train.py"]
    with tarfile.open(fileobj=io.BytesIO(source_tarball_bytes(source, [str(library)]))) as archive:
        assert sorted(archive.getnames()) == ["common/__init__.py", "train.py"]
    with pytest.raises(SpecError, match="dependencies.0"):
        code_files(source, [str(tmp_path / "missing")])


def test_relative_dependencies_and_model_paths_resolve_against_the_spec_file(tmp_path):
    spec = parse_job_spec({"entry_point": "train.py", "instance_type": "local", "dependencies": ["libs/common"],
                           "model_uri": "models/base"})
    resolved = resolve_relative_paths(spec, tmp_path)
    assert resolved.dependencies == [str(tmp_path / "libs" / "common")]
    assert resolved.model_uri == str(tmp_path / "models" / "base")


@pytest.mark.parametrize(("fields", "path"), [
    ({"training_repository_credentials_provider_arn": "arn:aws:lambda:us-east-1:123456789012:function:f"},
     "training_repository_credentials_provider_arn"),
    ({"training_repository_access_mode": "Vpc"}, "training_repository_access_mode"),
    ({"model_uri": "s3://bkt-data/m/", "model_channel_name": "train"}, "model_channel_name"),
    ({"model_uri": "s3://bkt-data/m/", "model_channel_name": "trainops_code"}, "model_channel_name"),
    ({"instance_placement_config": {"PlacementSpecifications": [{"InstanceCount": 3}]}},
     "instance_placement_config.PlacementSpecifications"),
    ({"training_plan": "p5-plan"}, "training_plan"),
    ({"container_entry_point": []}, "container_entry_point"),
    ({"dependencies": ["a/lib", "b/lib"]}, "dependencies"),
    ({"code_location": "/tmp/code"}, "code_location"),
    ({"tensorboard_output_config": {"s3_output_path": "s3://bkt-out/tb", "container_local_output_path": "tb"}},
     "tensorboard_output_config.container_local_output_path"),
    ({"container_log_level": 60}, "container_log_level"),
    ({"dependencies": ["/libs/common"], "source_dir": "s3://bkt-code/src/sourcedir.tar.gz"}, "dependencies"),
])
def test_bad_options_name_their_field(fields, path):
    with pytest.raises(SpecError) as caught:
        _spec(**fields)
    assert path in [problem.path for problem in caught.value.problems], caught.value
