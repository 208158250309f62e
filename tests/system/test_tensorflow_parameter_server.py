"""A TensorFlow parameter-server job on 2 emulated hosts, through the local backend (`trainops run`), to completion.

Every host runs a real parameter-server process (`python -m trainops.runtime.parameter_server`, started by the
host's launcher beside the worker, as AWS's TensorFlow toolkit does) and one worker. TensorFlow itself is too heavy
for `make test`: the job's code directory carries a TensorFlow-free stand-in (scripts/tensorflow_ps/tensorflow) for
the three calls the parameter server makes, whose server listens on its `ps` address and keeps counters; the
training script reads TF_CONFIG, pushes an update to every parameter server and waits until every worker's update is
on every one of them, which only works when both hosts' parameter servers are up and shared by both workers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from trainops.backends.local.processes import job_processes

SCRIPTS = Path(__file__).parent / "scripts" / "tensorflow_ps"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]


def write_job(tmp_path: Path, hosts: int) -> Path:
    shutil.copytree(SCRIPTS, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: tf-ps\nentry_point: train.py\nsource_dir: src\nframework: tensorflow\nframework_version: 2.16.2\n"
        f"py_version: py310\ninstance_type: ml.c5.xlarge\ninstance_count: {hosts}\n"
        "distribution: {parameter_server: {enabled: true}}\noutput_path: out\n")
    return spec


def results(output: str) -> list[dict]:
    return [json.loads(line.split("RESULT ", 1)[1]) for line in output.splitlines() if "RESULT " in line]


def test_two_hosts_each_run_a_parameter_server_and_the_job_completes(tmp_path):
    # The trainops launcher: the toolkit launcher needs AWS's toolkit in the image (locally, --image-python).
    launcher = "trainops"
    spec = write_job(tmp_path, hosts=2)
    workdir = tmp_path / "work"
    result = subprocess.run([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", f"tf-ps-{launcher}",
                             "--launcher", launcher], capture_output=True, text=True, timeout=180,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    workers = {record["task"]["type"]: record for record in results(result.stdout)}
    assert set(workers) == {"master", "worker"}, output
    assert workers["master"]["host"] == "algo-1" and workers["worker"]["host"] == "algo-2"
    assert {record["environment"] for record in workers.values()} == {"cloud"}
    # both workers saw the same two parameter servers, one per host, each its own process (not a worker)
    servers = [record["parameter_servers"] for record in workers.values()]
    assert servers[0] == servers[1]
    assert [(server["job"], server["index"]) for server in servers[0]] == [("ps", 0), ("ps", 1)]
    assert [server["host"] for server in servers[0]] == ["algo-1", "algo-2"]
    assert [server["task"] for server in servers[0]] == [{"index": 0, "type": "ps"}, {"index": 1, "type": "ps"}]
    # ps task i runs on the i-th host, in a process of its own (pids are per host: each has its PID namespace)
    assert servers[0][0]["pid"] != workers["master"]["pid"] and servers[0][1]["pid"] != workers["worker"]["pid"]
    # every worker's update reached every parameter server
    assert all(record["steps"] == [2, 2] for record in workers.values())
    for host in ("algo-1", "algo-2"):
        assert f"parameter server on host {host}: " in output
        assert f"parameter server on host {host} stopped" in output
    archive = tmp_path / "out" / f"tf-ps-{launcher}" / "output" / "model.tar.gz"
    with tarfile.open(archive) as tar:
        saved = json.load(tar.extractfile("result-master-0.json"))
    assert saved["task"] == {"index": 0, "type": "master"}
    [status_file] = list((workdir / "jobs").glob("*/status.json"))
    status = json.loads(status_file.read_text())
    assert status["status"] == "Completed" and status["processes_left"] == 0
    assert job_processes(status["job_id"]) == []  # the parameter servers were stopped with their hosts


def test_one_host_runs_no_parameter_server_and_no_tf_config(tmp_path):
    spec = write_job(tmp_path, hosts=1)
    (tmp_path / "src" / "train.py").write_text(
        "import os\nassert 'TF_CONFIG' not in os.environ, os.environ['TF_CONFIG']\nprint('RESULT {}')\n")
    result = subprocess.run([*TRAINOPS, "run", str(spec), "--workdir", str(tmp_path / "work"), "--job-name", "tf-ps-1"],
                            capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "parameter server on host" not in output
