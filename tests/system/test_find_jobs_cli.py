"""A job is found by its name alone, as a new user types the commands (issue 47 items 1 and 4): the venv's `trainops`
run as subprocesses on the local backend with several processes per host, then `status`, `logs`, `jobs`, `report`
and `stop` with no backend given, from another working directory. The same for `make run`'s pipeline is in
test_digits_pipeline.py, on that module's one run of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
TRAINOPS = str(Path(sys.executable).parent / "trainops")
ALLREDUCE = ROOT / "tests" / "system" / "scripts" / "local" / "allreduce.py"


@pytest.fixture
def user(tmp_path):
    """A user's environment: their own state directory and job index, and a directory they work in."""
    env = {**os.environ, "TRAINOPS_HOME": str(tmp_path / "home"), "TRAINOPS_JOB_INDEX": str(tmp_path / "index")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def trainops(*args: str, cwd: Path = elsewhere, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([TRAINOPS, *args], capture_output=True, text=True, cwd=str(cwd), env=env,
                              timeout=timeout)

    trainops.env = env  # type: ignore[attr-defined]
    trainops.elsewhere = elsewhere  # type: ignore[attr-defined]
    return trainops


def job_project(tmp_path: Path) -> Path:
    (tmp_path / "project" / "src").mkdir(parents=True)
    (tmp_path / "project" / "src" / "train.py").write_text(ALLREDUCE.read_text())
    (tmp_path / "project" / "data").mkdir()
    (tmp_path / "project" / "data" / "part-0").write_text("x")
    spec = tmp_path / "project" / "job.yaml"
    spec.write_text("name: allreduce\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.g5.xlarge\n"
                    "instance_count: 2\ndistribution: {torch_distributed: {enabled: true}}\n"
                    "inputs: {train: data}\n")
    return spec


def test_a_job_is_found_by_name_from_anywhere(user, tmp_path):
    spec = job_project(tmp_path)
    workdir = tmp_path / "runs"
    ran = user("run", str(spec), "--workdir", str(workdir), "--job-name", "ar-1", "--processes-per-host", "2",
               cwd=spec.parent)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    assert ran.stdout.count("RESULT ") == 4  # 2 hosts x 2 processes
    last = ran.stdout.strip().splitlines()[-1]
    report = str(tmp_path / "home" / "reports" / "ar-1.html")
    assert last == f"report:     {report}  (trainops report ar-1)"
    assert "Training job ar-1 (local)" in Path(report).read_text()

    # status: no backend and no place given, from another directory; human times and lists
    status = user("status", "ar-1")
    assert status.returncode == 0, status.stderr
    assert "status: Completed" in status.stdout and f"job_dir: {workdir / 'jobs' / 'ar-1'}" in status.stdout
    assert "hosts: algo-1, algo-2" in status.stdout
    assert re.search(r"^started: 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d ", status.stdout, re.M), status.stdout
    assert "['algo-1'" not in status.stdout and not re.search(r"^started: 1\d{9}", status.stdout, re.M)
    assert re.search(r"^  - ar-1 Completed$", status.stdout, re.M)  # the attempts, one a line
    machine = json.loads(user("status", "ar-1", "--json").stdout)
    assert isinstance(machine["started"], float) and machine["hosts"] == ["algo-1", "algo-2"]

    logs = user("logs", "ar-1")
    assert logs.returncode == 0 and logs.stdout.count("RESULT ") == 4, logs.stderr

    listed = user("jobs")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.strip().splitlines()
    assert header.split() == ["NAME", "BACKEND", "STATUS", "STARTED", "WHERE"]
    assert row.split()[:3] == ["ar-1", "local", "Completed"] and row.endswith(f"workdir={workdir}")
    [entry] = json.loads(user("jobs", "--json").stdout)
    assert entry["name"] == "ar-1" and entry["status"] == "Completed" and entry["location"] == {
        "workdir": str(workdir)}
    assert user("jobs", "--backend", "sagemaker").stdout.strip() == "no jobs match"
    assert user("jobs", "--status", "failed").stdout.strip() == "no jobs match"
    assert [job["name"] for job in json.loads(user("jobs", "--status", "COMPLETED", "--json").stdout)] == ["ar-1"]
    assert user("jobs", "--limit", "-1").returncode == 2

    again = user("report", "ar-1")
    assert again.returncode == 0 and again.stdout.strip() == report, again.stderr

    # a corrupt entry in the index is skipped with a warning; the others are still found
    (tmp_path / "index" / "jobs" / "broken.0.json").write_text("{")
    warned = user("jobs")
    assert warned.returncode == 0 and "ar-1" in warned.stdout
    assert "warning: job index entry" in warned.stderr and "broken.0.json skipped" in warned.stderr

    stopped = user("stop", "ar-1")
    assert stopped.returncode == 0 and "Completed" in stopped.stdout, stopped.stdout + stopped.stderr


def test_the_same_name_in_two_places(user, tmp_path):
    spec = job_project(tmp_path)
    for place in ("first", "second"):
        ran = user("run", str(spec), "--workdir", str(tmp_path / place), "--job-name", "twice", cwd=spec.parent)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    status = user("status", "twice")
    assert status.returncode == 0 and f"job_dir: {tmp_path / 'second' / 'jobs' / 'twice'}" in status.stdout
    assert "the newest of 2 places the job index holds it" in status.stderr
    # a stop does not guess: it names both places and how to choose
    refused = user("stop", "twice")
    assert refused.returncode == 2
    assert "2 jobs are called 'twice'" in refused.stderr and str(tmp_path / "first") in refused.stderr
    chosen = user("stop", "twice", "--workdir", str(tmp_path / "first"))
    assert chosen.returncode == 0, chosen.stderr


def test_a_name_nobody_started_says_where_it_looked_and_how_to_list(user):
    missing = user("status", "never-ran")
    assert missing.returncode == 2
    assert "no job 'never-ran' on the local backend" in missing.stderr and "`trainops jobs` lists" in missing.stderr
    assert user("jobs").stdout.startswith("no jobs yet")
