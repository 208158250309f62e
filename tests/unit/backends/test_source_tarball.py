"""A source_dir given as an s3:// tarball is used as given: the request points at it, nothing of the code is uploaded
(the trainops runtime still is), and the trainops runtime unpacks it in the container as the toolkit would."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from trainops.backends.request.render import CODE_CHANNEL, RUNTIME_CHANNEL, artifact_locations, render
from trainops.backends.sagemaker.uploads import upload_job_code
from trainops.errors import SpecError
from trainops.runtime.contract import ContractError, find_code_dir, unpack_code_tarball
from trainops.spec.loader import parse_job_spec

TARBALL = "s3://code-bucket/releases/v7/sourcedir.tar.gz"
BASE = {"role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1", "entry_point": "train.py",
        "framework_version": "2.3.0", "instance_type": "ml.c5.xlarge", "instance_count": 2,
        "output_path": "s3://bucket/out", "source_dir": TARBALL}


def spec(**fields):
    return parse_job_spec({**BASE, **fields})


def channels(request):
    return {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
            for channel in request.get("InputDataConfig", [])}


def test_trainops_launcher_reads_the_tarball_as_its_code_channel():
    request = render(spec(), job_name="job-1", launcher="trainops")
    assert channels(request) == {CODE_CHANNEL: TARBALL,
                                 RUNTIME_CHANNEL: artifact_locations("s3://bucket/out", "job-1").runtime_prefix}


def test_toolkit_launcher_submits_the_tarball_itself():
    request = render(spec(), job_name="job-1", launcher="toolkit")
    assert json.loads(request["HyperParameters"]["sagemaker_submit_directory"]) == TARBALL
    assert channels(request) == {}


def test_toolkit_with_network_isolation_brings_the_tarball_as_the_code_channel():
    request = render(spec(enable_network_isolation=True), job_name="job-1", launcher="toolkit")
    assert channels(request) == {"code": TARBALL}
    assert json.loads(request["HyperParameters"]["sagemaker_submit_directory"]) == \
        "/opt/ml/input/data/code/sourcedir.tar.gz"


@pytest.mark.parametrize("source", ["s3://code-bucket/releases/v7/", "s3://code-bucket/code.zip", "s3://bucket.tar.gz"])
def test_an_s3_source_that_is_not_a_tarball_object_is_refused(source):
    with pytest.raises(SpecError) as caught:
        render(spec(source_dir=source), job_name="job-1", launcher="trainops")
    assert [problem.path for problem in caught.value.problems] == ["source_dir"]
    assert "sourcedir.tar.gz" in str(caught.value)


class _Recorder:
    """A client factory whose S3 client records the keys put (no AWS)."""

    def __init__(self):
        self.keys = []

    def __call__(self, service):
        assert service == "s3"
        return self

    def put_object(self, Bucket, Key, Body):
        self.keys.append(f"s3://{Bucket}/{Key}")


def test_only_the_runtime_is_uploaded_for_an_s3_tarball(tmp_path):
    recorder = _Recorder()
    locations = artifact_locations("s3://bucket/out", "job-1")
    upload_job_code(recorder, spec(), locations, "trainops")
    assert recorder.keys and all(key.startswith(locations.runtime_prefix) for key in recorder.keys)
    assert f"{locations.runtime_prefix}trainops/runtime/cli.py" in recorder.keys
    recorder.keys.clear()
    upload_job_code(recorder, spec(), locations, "toolkit")
    assert recorder.keys == []


def test_a_local_source_dir_uploads_code_and_runtime(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    recorder = _Recorder()
    locations = artifact_locations("s3://bucket/out", "job-1")
    upload_job_code(recorder, spec(source_dir=str(tmp_path)), locations, "trainops")
    assert f"{locations.code_prefix}train.py" in recorder.keys
    assert any(key.startswith(locations.runtime_prefix) for key in recorder.keys)
    recorder.keys.clear()
    upload_job_code(recorder, spec(source_dir=str(tmp_path)), locations, "toolkit")
    assert recorder.keys == [locations.source_tarball]


# --- the runtime's side: the tarball unpacked into <base>/code --------------------------------------------------------

def _tarball(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _contract(base):
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    (config / "hyperparameters.json").write_text(json.dumps({"sagemaker_program": '"train.py"'}))
    (base / "input" / "data" / CODE_CHANNEL).mkdir(parents=True)
    return base / "input" / "data" / CODE_CHANNEL


def test_the_runtime_unpacks_the_code_tarball_and_runs_from_it(tmp_path):
    channel = _contract(tmp_path / "ml")
    _tarball(channel / "sourcedir.tar.gz", {"train.py": b"import lib.util\n", "lib/util.py": b"X = 1\n"})
    assert find_code_dir(str(tmp_path / "ml"), {}) == str(tmp_path / "ml" / "code")
    result = subprocess.run([sys.executable, "-m", "trainops.runtime", "launch", "--dry-run", "--base-dir",
                             str(tmp_path / "ml")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["argv"][-1] == str(tmp_path / "ml" / "code" / "train.py")
    assert (tmp_path / "ml" / "code" / "lib" / "util.py").read_text() == "X = 1\n"


def test_a_tarball_reaching_outside_is_refused(tmp_path):
    channel = _contract(tmp_path / "ml")
    _tarball(channel / "sourcedir.tar.gz", {"../escape.py": b"bad\n"})
    with pytest.raises(ContractError, match="escape.py"):
        unpack_code_tarball(str(tmp_path / "ml"))
    assert not os.path.exists(tmp_path / "ml" / "escape.py")
