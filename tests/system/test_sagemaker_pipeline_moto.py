"""The retraining pipeline with ``backend: sagemaker`` (train, evaluate as a processing job, gate, register), run by
`trainops run PIPELINE` against a moto server, with the containers run on this machine from the requests as sent.

moto stores jobs and answers them Completed at once, but runs no container. So the requests are recorded from the
boto3 clients themselves (a botocore ``before-parameter-build`` handler: moto's describe answers drop or invent
fields) and, right after each create call, what the container would do is done here from that request: the training
request by the local executor (`execute_training_request`: 2 emulated hosts, channels read from moto's S3,
``model.tar.gz`` uploaded to it), the processing request by `run_processing_request` below (its inputs downloaded,
its entrypoint run with its environment, its output uploaded). The Model Registry is moto's.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.system

ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/digits-train:1"
PROCESSING_ROOT = "/opt/ml/processing"

TRAIN = """\
import json, os
files = sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as handle:
    json.dump({"accuracy": 0.97, "trained_on": files, "host": os.environ.get("SM_CURRENT_HOST")}, handle)
print("TRAINED", files, flush=True)
"""

EVALUATE = """\
import json, os
model = json.load(open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "model.json")))
tests = sorted(os.listdir(os.environ["SM_CHANNEL_TEST"]))
with open(os.path.join(os.environ["TRAINOPS_EVALUATION_DIR"], "metrics.json"), "w") as handle:
    json.dump({"accuracy": model["accuracy"], "test_files": len(tests)}, handle)
"""


def download_prefix(s3, uri: str, destination: Path) -> None:
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for item in (item for page in pages for item in page.get("Contents", [])):
        relative = item["Key"][len(prefix):].lstrip("/") or item["Key"].rsplit("/", 1)[-1]
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())


def run_processing_request(request: dict[str, Any], s3, root: Path) -> None:
    """What a processing container does with ``request``: inputs from S3 into their local paths, the entrypoint with
    the arguments and environment of the request (``/opt/ml/processing`` mapped under ``root``), outputs to S3."""
    def local(text: str) -> str:
        return text.replace(PROCESSING_ROOT, str(root))

    for item in request["ProcessingInputs"]:
        download_prefix(s3, item["S3Input"]["S3Uri"], Path(local(item["S3Input"]["LocalPath"])))
    outputs = request["ProcessingOutputConfig"]["Outputs"]
    for item in outputs:
        Path(local(item["S3Output"]["LocalPath"])).mkdir(parents=True, exist_ok=True)
    app = request["AppSpecification"]
    command = [sys.executable] + [local(part) for part in app["ContainerEntrypoint"][1:]] + \
        [local(part) for part in app.get("ContainerArguments", [])]
    environment = {"PATH": os.environ["PATH"], **{key: local(value) for key, value in
                                                  (request.get("Environment") or {}).items()}}
    subprocess.run(command, env=environment, check=True, timeout=120)
    for item in outputs:
        bucket, _, prefix = item["S3Output"]["S3Uri"][len("s3://"):].partition("/")
        for path in Path(local(item["S3Output"]["LocalPath"])).rglob("*"):
            if path.is_file():
                relative = path.relative_to(local(item["S3Output"]["LocalPath"])).as_posix()
                s3.put_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{relative}", Body=path.read_bytes())


@pytest.fixture
def recorded(monkeypatch, aws_environment, tmp_path):
    """Clients for moto that record every create request as sent and run its container here right after it."""
    request_exec = pytest.importorskip("trainops.backends.local.request_exec",
                                       reason="the local executor of training requests (issue 13, part A)")
    import trainops.backends.sagemaker.backend as backend_module
    from trainops.aws.clients import default_client_factory

    sent: dict[str, list[dict[str, Any]]] = {}
    real = default_client_factory(region="us-east-1")
    s3 = real("s3")

    def record(params, model, **_):
        sent.setdefault(model.name, []).append(json.loads(json.dumps(params, default=str)))

    def run_container(model, **_):
        request = sent[model.name][-1]
        if model.name == "CreateTrainingJob":
            outcome = request_exec.execute_training_request(request, workdir=str(tmp_path / "containers"),
                                                             s3_client=s3, log=lambda line: None)
            assert outcome.status == "Completed", outcome.failure_reason
        else:
            run_processing_request(request, s3, tmp_path / "processing" / request["ProcessingJobName"])

    def recording(service: str, client):
        if service == "sagemaker" and not getattr(client, "_trainops_recorded", False):
            client.meta.events.register("before-parameter-build.sagemaker.*", record)
            for operation in ("CreateTrainingJob", "CreateProcessingJob"):
                client.meta.events.register(f"after-call.sagemaker.{operation}", run_container)
            client._trainops_recorded = True
        return client

    def factory(service: str):
        return recording(service, real(service))

    # The preflight's advisory reads go through the advisory clients, as with the backend's own factory: one retry,
    # so a look moto cannot answer (ListServiceQuotas: a 500) becomes a note at once. Without them they took the
    # ordinary clients' ten adaptive attempts: 20 s of backoff per pipeline, a path no user's factory takes.
    factory.advisory = lambda service: recording(service, real.advisory(service))  # type: ignore[attr-defined]

    monkeypatch.setattr(backend_module, "default_client_factory", lambda region=None, profile=None: factory)
    return sent, s3


def write_pipeline(tmp_path: Path, bucket: str, gate: str = "accuracy >= 0.9") -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    spec = {"name": "digits", "framework": "pytorch", "framework_version": "2.3.0", "py_version": "py311",
            "entry_point": "train.py", "source_dir": "code", "instance_type": "ml.m5.large", "instance_count": 2,
            "role": ROLE, "region": "us-east-1", "image_uri": IMAGE, "max_run": 600,
            "inputs": {"train": f"s3://{bucket}/data/train/"}, "output_path": f"s3://{bucket}/out"}
    (tmp_path / "train.json").write_text(json.dumps(spec))
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        f"name: digits-sagemaker\nbackend: sagemaker\nworkdir: work\nsteps:\n"
        f"  train: {{spec: train.json}}\n"
        f"  evaluate: {{entry_point: evaluate.py, source_dir: ., channels: {{test: 's3://{bucket}/data/test/'}},\n"
        f"             gate: '{gate}'}}\n"
        f"  register: {{group: digits-{uuid.uuid4().hex[:8]}, approval: Approved}}\n")
    return pipeline


@pytest.fixture
def bucket(aws_clients):
    name = f"trainops-{uuid.uuid4().hex[:12]}"
    s3 = aws_clients("s3")
    s3.create_bucket(Bucket=name)
    for key in ("data/train/a.csv", "data/train/b.csv", "data/test/t1.csv", "data/test/t2.csv", "data/test/t3.csv"):
        s3.put_object(Bucket=name, Key=key, Body=b"1,2,3\n")
    return name


def test_the_sagemaker_pipeline_trains_evaluates_gates_and_registers(recorded, bucket, tmp_path):
    from trainops.steps.pipeline import run_pipeline_file

    sent, s3 = recorded
    pipeline = write_pipeline(tmp_path, bucket)
    assert run_pipeline_file(str(pipeline), log=lambda line: None) == 0
    record = json.loads((tmp_path / "work" / "pipelines" / "digits-sagemaker" / "last-run.json").read_text())
    assert record["status"] == "Succeeded", record

    (training,) = sent["CreateTrainingJob"]
    job = training["TrainingJobName"]
    assert training["RoleArn"] == ROLE and training["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert training["OutputDataConfig"]["S3OutputPath"] == f"s3://{bucket}/out"
    assert training["ResourceConfig"]["InstanceCount"] == 2
    archive = s3.get_object(Bucket=bucket, Key=f"out/{job}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(archive)) as bundle:
        model = json.loads(bundle.extractfile("model.json").read())
    assert model["trained_on"] == ["a.csv", "b.csv"]

    # Evaluate ran as a processing job with the training job's role and image, writing beside the model in S3.
    (processing,) = sent["CreateProcessingJob"]
    assert processing["RoleArn"] == ROLE and processing["AppSpecification"]["ImageUri"] == IMAGE
    (output,) = processing["ProcessingOutputConfig"]["Outputs"]
    assert output["S3Output"]["S3Uri"] == f"s3://{bucket}/out/{job}/evaluation"
    evaluate = record["steps"]["evaluate"]
    assert evaluate["passed"] is True and evaluate["metrics"] == {"accuracy": 0.97, "test_files": 3}
    assert evaluate["metrics_path"] == f"s3://{bucket}/out/{job}/evaluation/metrics.json"

    # Registered in moto's Model Registry, with the training image, as the group's champion.
    (package,) = sent["CreateModelPackage"]
    assert package["InferenceSpecification"]["Containers"][0]["Image"] == IMAGE
    assert package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"] == \
        f"s3://{bucket}/out/{job}/output/model.tar.gz"
    register = record["steps"]["register"]
    assert register["backend"] == "sagemaker" and register["champion"] is True
    assert register["location"].startswith("arn:aws:sagemaker:us-east-1:123456789012:model-package/")


def test_a_missed_gate_registers_nothing(recorded, bucket, tmp_path):
    from trainops.steps.pipeline import run_pipeline_file

    sent, _ = recorded
    pipeline = write_pipeline(tmp_path, bucket, gate="accuracy >= 0.99")
    assert run_pipeline_file(str(pipeline), log=lambda line: None) == 1
    record = json.loads((tmp_path / "work" / "pipelines" / "digits-sagemaker" / "last-run.json").read_text())
    assert record["status"] == "GateFailed" and "accuracy" in record["message"]
    assert "CreateModelPackage" not in sent and len(sent["CreateProcessingJob"]) == 1
