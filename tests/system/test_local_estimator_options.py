"""The local backend and the SDK estimator options (issue 25): `trainops run` of real jobs on this machine.

What it honours: no output compression (the model's files under <output_path>/<job>/output/model/, no model.tar.gz),
TensorBoard files copied to their output path, dependencies beside the code, the model channel of model_uri, and the
request's ContainerEntrypoint/ContainerArguments starting the host. What it cannot emulate (infra check, remote
debugging) is said in the log, and recorded in the request.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tarfile

TRAINOPS = [sys.executable, "-m", "trainops.cli"]

SCRIPT = """
import json, os
from pathlib import Path

import common  # from the spec's dependencies, packed beside the code

base = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
weights = (base / "input" / "data" / "pretrained" / "weights.txt").read_text()
(base / "model" / "weights.txt").write_text(weights + "+trained")
(base / "model" / "nested").mkdir(exist_ok=True)
(base / "model" / "nested" / "config.json").write_text(json.dumps({"value": common.VALUE}))
events = base / "output" / "tensorboard"
events.mkdir(parents=True, exist_ok=True)
(events / "events.out.tfevents.1").write_text("scalar loss 0.5")
print("RESULT", json.dumps({"weights": weights, "value": common.VALUE}))
"""


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


def test_uncompressed_model_tensorboard_dependencies_and_model_channel(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    (tmp_path / "libs" / "common").mkdir(parents=True)
    (tmp_path / "libs" / "common" / "__init__.py").write_text("VALUE = 42\n")
    (tmp_path / "models" / "base").mkdir(parents=True)
    (tmp_path / "models" / "base" / "weights.txt").write_text("w0")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: options\nentry_point: train.py\nsource_dir: src\ninstance_type: local\noutput_path: out\n"
        "disable_output_compression: true\ntensorboard_output_config: {s3_output_path: tensorboard}\n"
        "dependencies: [libs/common]\nmodel_uri: models/base\nmodel_channel_name: pretrained\n"
        "enable_infra_check: true\nenable_remote_debug: true\n")
    result = run_cli("run", str(spec), "--workdir", str(tmp_path / "work"), "--job-name", "options-1")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    record = json.loads(output.split("RESULT ", 1)[1].splitlines()[0])
    assert record == {"weights": "w0", "value": 42}
    model = tmp_path / "out" / "options-1" / "output" / "model"
    assert (model / "weights.txt").read_text() == "w0+trained"
    assert json.loads((model / "nested" / "config.json").read_text()) == {"value": 42}
    assert not (tmp_path / "out" / "options-1" / "output" / "model.tar.gz").exists()
    assert not (tmp_path / "out" / "options-1" / "output" / "output.tar.gz").exists()  # output/data: files too
    assert (tmp_path / "tensorboard" / "events.out.tfevents.1").read_text() == "scalar loss 0.5"
    assert "SageMaker's infra check (enable_infra_check) runs on SageMaker's instances" in output
    assert "remote debugging (enable_remote_debug)" in output and "not emulated here" in output
    [status_file] = (tmp_path / "work" / "jobs").glob("*/status.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "Completed" and status["model_artifact"].rstrip(os.sep) == str(model)


def test_the_container_entrypoint_and_arguments_start_the_host(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("raise SystemExit('the entrypoint replaces the launcher')\n")
    code = ("import os, sys; from pathlib import Path; "
            "base = Path(os.environ.get('SAGEMAKER_BASE_DIR', '/opt/ml')); "
            "(base / 'model' / 'argv.txt').write_text(' '.join(sys.argv[1:])); print('ARGS', sys.argv[1:])")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: entry\nentry_point: train.py\nsource_dir: src\ninstance_type: local\noutput_path: out\n"
        f"launcher: toolkit\ncontainer_entry_point: [python3, -c, {json.dumps(code)}]\n"
        "container_arguments: [--epochs, '3']\n")
    result = run_cli("run", str(spec), "--workdir", str(tmp_path / "work"), "--job-name", "entry-1")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ARGS ['--epochs', '3']" in output
    with tarfile.open(tmp_path / "out" / "entry-1" / "output" / "model.tar.gz") as archive:
        assert archive.extractfile("argv.txt").read() == b"--epochs 3"


def test_an_s3_output_path_gets_the_model_files_and_the_tensorboard_files_under_their_prefixes(
        tmp_path, aws_clients, caplog):
    """Against a moto server: what the uncompressed model and TensorBoard sync upload for s3:// locations."""
    from trainops.backends.hostfs.layout import HostLayout
    from trainops.backends.local.estimator_options import sync_tensorboard, write_outputs_uncompressed

    s3 = aws_clients("s3")
    s3.create_bucket(Bucket="local-options-out")
    host = HostLayout("algo-1", tmp_path / "algo-1")
    (host.model_dir / "shards").mkdir(parents=True)
    (host.model_dir / "shards" / "part-0.bin").write_bytes(b"\0" * 10)
    (host.model_dir / "config.json").write_text("{}")
    (host.model_dir / "outside").symlink_to(tmp_path)  # a link is neither followed nor uploaded
    (host.output_dir / "data").mkdir(parents=True)
    (host.output_dir / "data" / "history.csv").write_text("loss\n0.5\n")
    (host.base_dir / "output" / "tensorboard").mkdir(parents=True)
    (host.base_dir / "output" / "tensorboard" / "events.1").write_text("e")
    job_dir = tmp_path / "jobs" / "s3-1"
    job_dir.mkdir(parents=True)
    model, output = write_outputs_uncompressed("s3://local-options-out/jobs", "s3-1", host, job_dir, aws_clients)
    assert model == "s3://local-options-out/jobs/s3-1/output/model/"
    assert output == "s3://local-options-out/jobs/s3-1/output/data/"
    keys = sorted(item["Key"] for item in s3.list_objects_v2(Bucket="local-options-out")["Contents"])
    assert keys == ["jobs/s3-1/output/data/history.csv", "jobs/s3-1/output/model/config.json",
                    "jobs/s3-1/output/model/shards/part-0.bin"]
    request = {"TensorBoardOutputConfig": {"S3OutputPath": "s3://local-options-out/tb/s3-1"}}
    caplog.clear()  # the model's link left out above is said; what follows is the sync's own line
    with caplog.at_level(logging.INFO, logger="trainops"):
        assert sync_tensorboard(request, [host], aws_clients) == 1
    assert s3.get_object(Bucket="local-options-out", Key="tb/s3-1/events.1")["Body"].read() == b"e"
    lines = [record.getMessage() for record in caplog.records if record.name.startswith("trainops")]
    assert lines == ["[trainops] TensorBoard: 1 file(s) copied to s3://local-options-out/tb/s3-1"]


def test_what_the_local_backend_does_not_emulate_is_said_once_per_setting():
    from trainops.backends.local.estimator_options import unemulated_lines

    request = {"InfraCheckConfig": {"EnableInfraCheck": True}, "RemoteDebugConfig": {"EnableRemoteDebug": False},
               "SessionChainingConfig": {"EnableSessionTagChaining": True},
               "ResourceConfig": {"TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"},
               "AlgorithmSpecification": {"TrainingImageConfig": {"TrainingRepositoryAccessMode": "Vpc"}}}
    lines = unemulated_lines(request)
    assert len(lines) == 2  # remote debug switched off is nothing to emulate
    assert "infra check (enable_infra_check)" in lines[0] and "not emulated here" in lines[0]
    assert lines[1] == ("[trainops] training_plan, training_repository_access_mode, enable_session_tag_chaining: "
                        "recorded in the request; no meaning on this machine")
    assert unemulated_lines({"ResourceConfig": {}, "AlgorithmSpecification": {}}) == []
