"""`trainops run --backend local` as a user runs it, now that a local job is the executed CreateTrainingJob request:
a 2-host torch_distributed job through both launchers with the image stand-in (`--image-python`, a venv without
trainops: tests/support/image_venv.py, built once and cached), the fallback without a mount namespace, an s3://
source tarball used as given (moto), and MaxRuntimeInSeconds (SIGTERM, then SIGKILL after the grace)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from trainops.backends.local.processes import job_processes
from trainops.backends.local.request_exec import execute_training_request
from trainops.backends.request.render import render_local
from trainops.spec import parse_job_spec

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).parent / "scripts" / "executor" / "train_sm.py"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]


@pytest.fixture(scope="module")
def image_python():
    from support.image_venv import build

    return str(build())


def write_job(tmp_path: Path, *, source_dir: str = "src", extra: str = "") -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "train_sm.py").write_text(SCRIPT.read_text())
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("a.txt", "b.txt"):
        (data / name).write_text(name)
    spec = tmp_path / "job.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: executor
        entry_point: train_sm.py
        source_dir: {source_dir}
        framework_version: '2.3.0'
        py_version: py311
        instance_type: ml.g5.xlarge
        instance_count: 2
        distribution: {{torch_distributed: {{enabled: true}}}}
        hyperparameters: {{epochs: 2}}
        inputs: {{train: data}}
        output_path: out
        """) + extra)
    return spec


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def results(stdout: str) -> list[dict]:
    return sorted((json.loads(line.split("RESULT ", 1)[1]) for line in stdout.splitlines() if "RESULT " in line),
                  key=lambda record: record["rank"])


def model_of(archive: Path) -> dict:
    with tarfile.open(archive, "r:gz") as tar:
        return json.loads(tar.extractfile("model.json").read())


@pytest.mark.parametrize("launcher", ["trainops", "toolkit"])
def test_two_hosts_through_each_launcher_with_the_image_stand_in(tmp_path, image_python, launcher):
    spec = write_job(tmp_path)
    done = run_cli("run", str(spec), "--image-python", image_python, "--launcher", launcher,
                   "--workdir", str(tmp_path / "w"), "--job-name", f"exec-{launcher}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = results(done.stdout)
    assert [record["host"] for record in seen] == ["algo-1", "algo-2"]
    assert all(record["sum"] == 3.0 and record["files"] == ["a.txt", "b.txt"] for record in seen)
    # Inside the container: /opt/ml is the host's base directory; trainops only from the runtime channel.
    expected = "/opt/ml/input/data/trainops_runtime/trainops/__init__.py" if launcher == "trainops" else None
    assert all(record["trainops_from"] == expected for record in seen), seen
    assert model_of(tmp_path / "out" / f"exec-{launcher}" / "output" / "model.tar.gz")["world_size"] == 2
    if launcher == "toolkit":
        assert "Invoking TorchDistributed" in done.stdout
    config = json.loads((tmp_path / "w" / "jobs" / f"exec-{launcher}" / "hosts" / "algo-2" / "input" / "config"
                         / "resourceconfig.json").read_text())
    assert config["current_host"] == "algo-2" and config["hosts"] == ["algo-1", "algo-2"]


def test_without_a_mount_namespace_the_trainops_launcher_still_runs_and_the_toolkit_is_refused(tmp_path,
                                                                                                image_python):
    spec = write_job(tmp_path)
    env = {"TRAINOPS_LOCAL_NAMESPACE": "0"}
    done = run_cli("run", str(spec), "--image-python", image_python, "--workdir", str(tmp_path / "w"),
                   "--job-name", "shared-ns", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = results(done.stdout)
    runtime = tmp_path / "w" / "jobs" / "shared-ns" / "hosts"
    assert [record["trainops_from"] for record in seen] == [
        f"{runtime}/algo-{index}/input/data/trainops_runtime/trainops/__init__.py" for index in (1, 2)]
    refused = run_cli("run", str(spec), "--image-python", image_python, "--launcher", "toolkit",
                      "--workdir", str(tmp_path / "w"), "--job-name", "toolkit-no-ns", env=env)
    assert refused.returncode == 1
    assert "mount namespace" in refused.stdout + refused.stderr


def test_a_bad_image_python_is_an_input_error(tmp_path):
    spec = write_job(tmp_path)
    refused = run_cli("run", str(spec), "--image-python", str(tmp_path / "no-python"), "--workdir", str(tmp_path))
    # The flag is a shorthand for -o image_python=...: the local backend's options type refuses the path, naming it.
    assert refused.returncode == 2 and "image_python:" in refused.stderr and "Traceback" not in refused.stderr
    assert "is not an executable Python interpreter" in refused.stderr


def test_an_s3_source_tarball_runs_locally_as_given(tmp_path, aws_environment):
    import boto3

    bucket = f"trainops-src-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = SCRIPT.read_bytes()
        info = tarfile.TarInfo("train_sm.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    s3.put_object(Bucket=bucket, Key="releases/v1/sourcedir.tar.gz", Body=buffer.getvalue())
    spec = write_job(tmp_path, source_dir=f"s3://{bucket}/releases/v1/sourcedir.tar.gz")
    done = run_cli("run", str(spec), "--workdir", str(tmp_path / "w"), "--job-name", "s3-source")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [record["host"] for record in results(done.stdout)] == ["algo-1", "algo-2"]
    channel = tmp_path / "w" / "jobs" / "s3-source" / "data" / "trainops_code"
    assert sorted(path.name for path in channel.iterdir()) == ["sourcedir.tar.gz"]


def test_max_runtime_stops_with_sigterm_then_sigkill_after_the_grace(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "stubborn.py").write_text(
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: print('ignoring SIGTERM', flush=True))\n"
        "print('started', flush=True)\n"
        "while True:\n    time.sleep(0.2)\n")
    spec = parse_job_spec({"name": "stubborn", "entry_point": "stubborn.py", "source_dir": str(source),
                           "instance_type": "local", "instance_count": 2, "max_run": 3})
    runtime = tmp_path / "runtime"
    from trainops.backends.sagemaker.uploads import runtime_files

    for path, name in runtime_files():
        (runtime / name).parent.mkdir(parents=True, exist_ok=True)
        (runtime / name).write_bytes(path.read_bytes())
    request = render_local(spec, job_name="stubborn-1", launcher="trainops", code=str(source), runtime=str(runtime),
                           submit=str(source), output_path=(tmp_path / "out").as_uri())
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3}
    lines: list[str] = []
    jobs = []
    started = time.monotonic()
    outcome = execute_training_request(request, workdir=tmp_path / "w", log=lines.append,
                                       max_runtime_grace_seconds=4, on_job=jobs.append)
    elapsed = time.monotonic() - started
    assert outcome.status == "Stopped" and outcome.secondary_status == "MaxRuntimeExceeded"
    assert "MaxRuntimeExceeded" in outcome.failure_reason
    assert any("ignoring SIGTERM" in line for line in lines), lines[-20:]  # SIGTERM came first ...
    assert elapsed >= 3 + 4 - 0.5  # ... and SIGKILL only after the grace
    assert outcome.processes_left == 0 and job_processes(jobs[0].job_id) == []
