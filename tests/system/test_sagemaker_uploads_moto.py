"""Uploads into S3 on a moto server: every object and its bytes."""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from trainops.backends.sagemaker.uploads import upload_runtime, upload_source_dir, upload_source_tarball
from trainops.errors import JobFailed

pytestmark = pytest.mark.system


@pytest.fixture
def bucket(aws_clients):
    name = f"trainops-{uuid.uuid4().hex[:12]}"
    aws_clients("s3").create_bucket(Bucket=name)
    return name


def _objects(aws_clients, bucket, prefix):
    listed = aws_clients("s3").list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {item["Key"]: aws_clients("s3").get_object(Bucket=bucket, Key=item["Key"])["Body"].read() for item in listed}


@pytest.fixture
def source(tmp_path):
    root = tmp_path / "code"
    (root / "lib" / "__pycache__").mkdir(parents=True)
    (root / "train.py").write_text("import lib.util\n")
    (root / "lib" / "util.py").write_text("VALUE = 2\n")
    (root / "lib" / "__pycache__" / "util.pyc").write_bytes(b"junk")
    return root


def test_source_dir_is_uploaded_file_by_file(aws_clients, bucket, source):
    result = upload_source_dir(aws_clients, source, f"s3://{bucket}/jobs/digits/trainops/code/")
    assert result.keys == ["jobs/digits/trainops/code/lib/util.py", "jobs/digits/trainops/code/train.py"]
    assert _objects(aws_clients, bucket, "jobs/digits/") == {
        "jobs/digits/trainops/code/lib/util.py": b"VALUE = 2\n",
        "jobs/digits/trainops/code/train.py": b"import lib.util\n",
    }


def test_source_tarball_unpacks_to_the_same_files(aws_clients, bucket, source):
    uri = f"s3://{bucket}/jobs/digits/source/sourcedir.tar.gz"
    upload_source_tarball(aws_clients, source, uri)
    body = aws_clients("s3").get_object(Bucket=bucket, Key="jobs/digits/source/sourcedir.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        assert archive.getnames() == ["lib/util.py", "train.py"]
        assert archive.extractfile("train.py").read() == b"import lib.util\n"


def test_runtime_lands_as_an_importable_tree(aws_clients, bucket):
    import trainops

    result = upload_runtime(aws_clients, f"s3://{bucket}/jobs/digits/trainops/runtime/")
    objects = _objects(aws_clients, bucket, "jobs/digits/trainops/runtime/")
    assert set(objects) == set(result.keys)
    init = objects["jobs/digits/trainops/runtime/trainops/__init__.py"]
    with open(trainops.__file__, "rb") as handle:
        assert init == handle.read()
    assert "jobs/digits/trainops/runtime/trainops/runtime/__init__.py" in objects


def test_a_missing_bucket_says_so(aws_clients, source):
    with pytest.raises(JobFailed) as raised:
        upload_source_dir(aws_clients, source, "s3://trainops-no-such-bucket-here/x/")
    assert "trainops-no-such-bucket-here" in str(raised.value)


def test_a_v3_spec_s_ignore_patterns_stay_out_of_the_upload(aws_clients, bucket, source):
    from trainops.backends.request.render import artifact_locations
    from trainops.backends.sagemaker.uploads import upload_job_code
    from trainops.spec import parse_job_spec

    (source / ".env").write_text("TOKEN=1\n")
    (source / "weights.ckpt").write_bytes(b"\0")
    spec = parse_job_spec({"training_image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0",
                           "source_code": {"source_dir": str(source), "entry_script": "train.py",
                                           "ignore_patterns": ["*.ckpt", ".env", "__pycache__"]}})
    locations = artifact_locations(f"s3://{bucket}/jobs", "v3-job")
    upload_job_code(aws_clients, spec, locations, "trainops")
    assert sorted(_objects(aws_clients, bucket, "jobs/v3-job/trainops/code/")) == [
        "jobs/v3-job/trainops/code/lib/util.py", "jobs/v3-job/trainops/code/train.py"]
