"""The SageMaker path run for real, per launcher: `trainops run SPEC --backend sagemaker` against a moto server, the
CreateTrainingJob request recorded from the boto3 client itself as it was sent, then that request executed by the
local executor (2 hosts) against moto's S3: the code, the runtime and the data come from the S3 objects the CLI
uploaded, and model.tar.gz goes back to S3.

The request is recorded by a botocore handler ('provide-client-params.sagemaker.CreateTrainingJob') installed in the
CLI's process by a sitecustomize module, not read back from moto: moto's DescribeTrainingJob drops Environment and
invents a MetricDefinitions entry, so what it describes is not what was sent.

The toolkit launcher runs AWS's own toolkit (sagemaker-training 5.1.4, sagemaker-pytorch-training 3.0.0) from the
image stand-in venv (tests/support/image_venv.py, built once and cached), exactly as a Deep Learning Container would.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import uuid
from pathlib import Path

import boto3
import pytest

from trainops.backends.local.request_exec import execute_training_request

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).parent / "scripts" / "executor" / "train_sm.py"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
RECORDER = """\
import json, os

import botocore.session

_create_client = botocore.session.Session.create_client


def create_client(self, *args, **kwargs):
    client = _create_client(self, *args, **kwargs)
    if client.meta.service_model.service_name == "sagemaker":
        def record(params, **_):
            with open(os.environ["TRAINOPS_TEST_RECORD"], "w") as handle:
                json.dump(params, handle)
        client.meta.events.register("provide-client-params.sagemaker.CreateTrainingJob", record)
    return client


botocore.session.Session.create_client = create_client
"""


@pytest.fixture(scope="module")
def image_python():
    from support.image_venv import build

    return str(build())


@pytest.fixture
def project(tmp_path, aws_environment):
    bucket = f"trainops-exec-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for name in ("a.txt", "b.txt"):
        s3.put_object(Bucket=bucket, Key=f"data/train/{name}", Body=name.encode())
    source = tmp_path / "src"
    source.mkdir()
    (source / "train_sm.py").write_text(SCRIPT.read_text())
    recorder = tmp_path / "recorder"
    recorder.mkdir()
    (recorder / "sitecustomize.py").write_text(RECORDER)
    return tmp_path, bucket


def write_spec(tmp_path: Path, bucket: str, launcher: str, hyperparameters: dict | None = None) -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: executed
        role: {ROLE}
        region: us-east-1
        framework_version: '2.3.0'
        py_version: py311
        launcher: {launcher}
        entry_point: train_sm.py
        source_dir: src
        instance_type: ml.g5.xlarge
        instance_count: 2
        distribution: {{torch_distributed: {{enabled: true}}}}
        hyperparameters: {json.dumps(hyperparameters or {"epochs": 2})}
        inputs: {{train: s3://{bucket}/data/train/}}
        output_path: s3://{bucket}/out
        max_run: 600
        """))
    return spec


def submit_and_record(tmp_path: Path, spec: Path, job_name: str) -> dict:
    record = tmp_path / f"{job_name}.request.json"
    env = {**os.environ, "TRAINOPS_TEST_RECORD": str(record),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "recorder"), os.environ.get("PYTHONPATH")]))}
    created = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(spec), "--backend", "sagemaker",
                              "--job-name", job_name], capture_output=True, text=True, timeout=180, env=env)
    assert created.returncode == 0, created.stdout + created.stderr
    assert f"created SageMaker training job {job_name}" in created.stdout
    return json.loads(record.read_text())


def model_file(bucket: str, key: str) -> dict:
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        return json.loads(archive.extractfile("model.json").read())


def run_request(request: dict, tmp_path: Path, image_python: str | None, lines: list[str]):
    return execute_training_request(request, workdir=tmp_path / "local", image_python=image_python,
                                    s3_client=boto3.client("s3"), log=lines.append)


def results(lines: list[str]) -> list[dict]:
    return sorted((json.loads(line.split("RESULT ", 1)[1]) for line in lines if "RESULT " in line),
                  key=lambda record: record["rank"])


@pytest.mark.parametrize("launcher", ["trainops", "toolkit"])
def test_the_request_as_sent_runs_two_hosts_and_puts_the_model_in_s3(project, launcher, image_python):
    tmp_path, bucket = project
    job_name = f"executed-{launcher}"
    request = submit_and_record(tmp_path, write_spec(tmp_path, bucket, launcher), job_name)
    assert request["TrainingJobName"] == job_name and request["ResourceConfig"]["InstanceCount"] == 2
    if launcher == "trainops":
        assert request["Environment"]["PYTHONPATH"] == "/opt/ml/input/data/trainops_runtime"  # moto drops this
    else:
        assert "ContainerEntrypoint" not in request["AlgorithmSpecification"]
        assert json.loads(request["HyperParameters"]["sagemaker_submit_directory"]).startswith(f"s3://{bucket}/")

    lines: list[str] = []
    outcome = run_request(request, tmp_path, image_python, lines)
    assert outcome.status == "Completed", (outcome.failure_reason, lines[-40:])
    assert outcome.model_artifact == f"s3://{bucket}/out/{job_name}/output/model.tar.gz"
    seen = results(lines)
    assert {record["host"] for record in seen} == {"algo-1", "algo-2"}
    world = seen[0]["world_size"]
    assert world >= 2 and len(seen) == world
    assert all(record["sum"] == world * (world + 1) / 2 for record in seen)
    assert all(record["files"] == ["a.txt", "b.txt"] and record["epochs"] == 2 for record in seen), json.dumps(seen)
    # The image has no trainops: the trainops launcher's ranks see only the runtime channel's copy, the toolkit's none.
    expected = "/opt/ml/input/data/trainops_runtime/trainops/__init__.py" if launcher == "trainops" else None
    assert all(record["trainops_from"] == expected for record in seen), json.dumps(seen)
    if launcher == "toolkit":  # AWS's toolkit ran the job: its own log lines, its torchrun on port 7777
        assert any("Invoking TorchDistributed" in line for line in lines), lines[-40:]
        assert any("--master_port 7777" in line or "'7777'" in line or '"7777"' in line for line in lines)
    stored = model_file(bucket, f"out/{job_name}/output/model.tar.gz")
    assert stored["rank"] == 0 and stored["world_size"] == world
    assert any(line.startswith("[algo-2") or "algo-2" in line.split(" ", 1)[0] for line in lines)


def test_a_failing_rank_names_host_rank_and_exit_code(project, image_python):
    tmp_path, bucket = project
    job_name = "executed-failing"
    request = submit_and_record(tmp_path, write_spec(tmp_path, bucket, "trainops", {"fail_rank": 1}), job_name)
    lines: list[str] = []
    outcome = run_request(request, tmp_path, image_python, lines)
    assert outcome.status == "Failed", (request["HyperParameters"], lines[-30:])
    reason = outcome.failure_reason
    assert "algo-2" in reason and "rank 1" in reason and "exited with code 3" in reason, reason
    assert outcome.processes_left == 0
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"out/{job_name}/output/").get("Contents", [])
    assert listed == []  # nothing is uploaded for a failed job
