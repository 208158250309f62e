"""code_location and dependencies on the SageMaker backend against a moto server on 127.0.0.1: the code is uploaded
where the rendered request points (under code_location, not the output path), with the dependencies inside it, for
both launchers."""

from __future__ import annotations

import io
import json
import tarfile
import uuid

import pytest

from trainops.backends.request.render import CODE_CHANNEL, render
from trainops.backends.sagemaker.locations import job_locations
from trainops.backends.sagemaker.uploads import upload_job_code
from trainops.spec import parse_job_spec

pytestmark = pytest.mark.system


@pytest.fixture
def spec(tmp_path, aws_clients):
    bucket = f"trainops-code-{uuid.uuid4().hex[:10]}"
    aws_clients("s3").create_bucket(Bucket=bucket)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import common\n")
    (tmp_path / "libs" / "common").mkdir(parents=True)
    (tmp_path / "libs" / "common" / "__init__.py").write_text("VALUE = 1\n")
    return bucket, parse_job_spec({
        "role": "arn:aws:iam::123456789012:role/R", "region": "us-east-1", "entry_point": "train.py",
        "source_dir": str(tmp_path / "src"), "dependencies": [str(tmp_path / "libs" / "common")],
        "framework_version": "2.3.0", "py_version": "py311", "instance_type": "ml.g5.2xlarge",
        "output_path": f"s3://{bucket}/out", "code_location": f"s3://{bucket}/code"})


def _keys(aws_clients, bucket, prefix):
    listed = aws_clients("s3").list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(item["Key"] for item in listed)


def test_the_toolkit_tarball_goes_under_code_location_with_the_dependencies(aws_clients, spec):
    bucket, job = spec
    request = render(job, job_name="code-1", launcher="toolkit")
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert submit == f"s3://{bucket}/code/code-1/source/sourcedir.tar.gz"
    upload_job_code(aws_clients, job, job_locations(job, "code-1"), "toolkit")
    body = aws_clients("s3").get_object(Bucket=bucket, Key="code/code-1/source/sourcedir.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        assert sorted(archive.getnames()) == ["common/__init__.py", "train.py"]
    assert _keys(aws_clients, bucket, "out/") == []  # nothing of the code under the output path


def test_the_trainops_launchers_code_and_runtime_go_under_code_location(aws_clients, spec):
    bucket, job = spec
    request = render(job, job_name="code-2")
    channels = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
                for channel in request["InputDataConfig"]}
    assert channels[CODE_CHANNEL] == f"s3://{bucket}/code/code-2/trainops/code/"
    upload_job_code(aws_clients, job, job_locations(job, "code-2"), "trainops")
    code = _keys(aws_clients, bucket, "code/code-2/trainops/code/")
    assert code == ["code/code-2/trainops/code/common/__init__.py", "code/code-2/trainops/code/train.py"]
    assert _keys(aws_clients, bucket, "code/code-2/trainops/runtime/trainops/runtime/")
    assert _keys(aws_clients, bucket, "out/") == []
