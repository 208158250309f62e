"""`trainops run --backend sagemaker`, `status`, `logs` and `stop` as a user runs them, against a moto server on
127.0.0.1 (moto creates training jobs already Completed; the InProgress walks are covered with Stubber elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest

BUCKET = "trainops-cli-test"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


@pytest.fixture
def project(tmp_path, aws_environment):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data/train/part-0", Body=b"x")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('training')\n")
    (source / "util.py").write_text("VALUE = 1\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: cli-moto\n"
        f"role: {ROLE}\nregion: us-east-1\nframework_version: '2.3.0'\npy_version: py311\n"
        "entry_point: train.py\nsource_dir: src\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {torch_distributed: {enabled: true}}\n"
        f"inputs: {{train: s3://{BUCKET}/data/train/}}\noutput_path: s3://{BUCKET}/out\n")
    return spec


def trainops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_run_status_logs_stop_against_moto(project):
    created = trainops("run", str(project), "--backend", "sagemaker", "--job-name", "cli-moto-1")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "created SageMaker training job cli-moto-1" in created.stdout
    assert "status:     Completed" in created.stdout
    keys = {item["Key"] for item in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/cli-moto-1/")
            .get("Contents", [])}
    assert "out/cli-moto-1/trainops/code/train.py" in keys and "out/cli-moto-1/trainops/code/util.py" in keys
    assert "out/cli-moto-1/trainops/runtime/trainops/runtime/__main__.py" in keys

    again = trainops("run", str(project), "--backend", "sagemaker", "--job-name", "cli-moto-1")
    assert again.returncode == 0 and "re-attached to SageMaker training job cli-moto-1" in again.stdout

    status = trainops("status", "cli-moto-1", "--backend", "sagemaker", "--json")
    assert status.returncode == 0, status.stderr
    described = json.loads(status.stdout)
    assert described["job_name"] == "cli-moto-1" and described["status"] == "Completed"
    assert described["instance_count"] == 2

    assert trainops("logs", "cli-moto-1", "--backend", "sagemaker").returncode == 0
    stopped = trainops("stop", "cli-moto-1", "--backend", "sagemaker")
    assert stopped.returncode == 0 and "Completed" in stopped.stdout  # stopping a finished job is not an error


def test_unknown_job_and_local_paths_are_input_errors(project, tmp_path):
    missing = trainops("status", "no-such-job", "--backend", "sagemaker")
    assert missing.returncode == 2, missing.stderr
    assert "no job 'no-such-job' on the sagemaker backend (looked in region us-east-1)" in missing.stderr
    assert "--backend NAME (local" in missing.stderr  # how to look elsewhere
    project.write_text(project.read_text().replace(f"s3://{BUCKET}/data/train/", str(tmp_path)))
    refused = trainops("run", str(project), "--backend", "sagemaker")
    assert refused.returncode == 2 and "inputs.train" in refused.stderr and "Traceback" not in refused.stderr
