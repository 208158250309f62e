"""A SageMaker job is found by its name alone (issue 47 item 1), against the moto server as the README's user tries
it: `trainops run --backend sagemaker` with the region in the spec, then `status`, `logs`, `jobs` and `report` with
no backend and no region anywhere (no AWS_REGION, no profile): the job index remembers the region the job is in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

BUCKET = "trainops-find-test"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
TRAINOPS = str(Path(sys.executable).parent / "trainops")


@pytest.fixture
def project(tmp_path, aws_environment):
    s3 = boto3.client("s3", region_name="eu-west-1")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.put_object(Bucket=BUCKET, Key="data/train/part-0", Body=b"x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: find-moto\n"
        f"role: {ROLE}\nregion: eu-west-1\nframework_version: '2.3.0'\npy_version: py311\n"
        "entry_point: train.py\nsource_dir: src\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {torch_distributed: {enabled: true}}\n"
        f"inputs: {{train: s3://{BUCKET}/data/train/}}\noutput_path: s3://{BUCKET}/out\n")
    return spec


def test_status_logs_jobs_and_report_need_only_the_name(project, tmp_path):
    env = {**os.environ, "TRAINOPS_HOME": str(tmp_path / "home"), "TRAINOPS_JOB_INDEX": str(tmp_path / "index")}

    def trainops(*args: str, **changes: str | None) -> subprocess.CompletedProcess:
        here = {key: value for key, value in {**env, **changes}.items() if value is not None}
        return subprocess.run([TRAINOPS, *args], capture_output=True, text=True, timeout=120, env=here,
                              cwd=str(tmp_path / "src"))

    created = trainops("run", str(project), "--backend", "sagemaker", "--job-name", "find-moto-1", "--no-wait")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "created SageMaker training job find-moto-1" in created.stdout
    assert created.stdout.strip().splitlines()[-1].startswith("report:     ")

    # No region anywhere: the job index says where the job is.
    no_region = {"AWS_REGION": None, "AWS_DEFAULT_REGION": None}
    status = trainops("status", "find-moto-1", **no_region)
    assert status.returncode == 0, status.stderr
    assert "status: Completed" in status.stdout and "instance_count: 2" in status.stdout
    described = json.loads(trainops("status", "find-moto-1", "--json", **no_region).stdout)
    assert described["job_name"] == "find-moto-1" and described["status"] == "Completed"
    assert trainops("logs", "find-moto-1", **no_region).returncode == 0
    # the command of the issue: --backend alone, no region anywhere
    named = trainops("status", "find-moto-1", "--backend", "sagemaker", **no_region)
    assert named.returncode == 0 and "status: Completed" in named.stdout, named.stderr

    listed = trainops("jobs", **no_region)
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.strip().splitlines()[1:]
    assert row.split()[:3] == ["find-moto-1", "sagemaker", "Completed"] and row.endswith("region=eu-west-1")
    [entry] = json.loads(trainops("jobs", "--json", "--backend", "sagemaker", **no_region).stdout)
    assert entry["location"] == {"region": "eu-west-1"}
    text = "".join(path.read_text() for path in (tmp_path / "index" / "jobs").iterdir())
    assert "testing" not in text  # no credential reaches the index

    report = trainops("report", "find-moto-1", **no_region)
    assert report.returncode == 0, report.stderr
    page = Path(report.stdout.strip()).read_text()
    assert "Training job find-moto-1 (sagemaker)" in page and "Completed" in page
    assert 'href="https://console.aws.amazon.com/sagemaker/home?region=eu-west-1' in page  # the console, https only

    # Given a backend, the user's word stands (here without the region the job is in: said, exit 2)
    asked = trainops("status", "find-moto-1", "--backend", "sagemaker", "--region", "us-east-1")
    assert asked.returncode == 2 and "no job 'find-moto-1' on the sagemaker backend" in asked.stderr
