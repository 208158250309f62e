"""A job is found by its name alone, as a new user types the commands (issue 47 items 1 and 4): the venv's `trainops`
run as subprocesses on the local backend with several processes per host, then `status`, `logs`, `jobs`, `report`
and `stop` with no backend given, from another working directory; the same for `make run`'s pipeline
(examples/digits/pipeline.yaml), whose last lines name its report and plot, and whose report is served on
127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
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


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """`make run`'s pipeline, run once with its own state."""
    root = tmp_path_factory.mktemp("digits-find")
    env = {**os.environ, "TRAINOPS_HOME": str(root / "home"), "TRAINOPS_JOB_INDEX": str(root / "index")}
    ran = subprocess.run([TRAINOPS, "run", "examples/digits/pipeline.yaml", "--workdir", str(root / "digits")],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=560)
    return root, env, ran


def test_make_runs_pipeline_names_its_report_and_plot_last(digits_run):
    root, _, ran = digits_run
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr
    record = root / "digits" / "pipelines" / "digits-retrain" / "last-run.json"
    page = record.parent / "report.html"
    tail = ran.stdout.strip().splitlines()[-3:]
    assert tail[0] == f"[pipeline] results: {record}"
    assert tail[1] == f"[pipeline] report:  {page}  (trainops report digits-retrain)"
    plot = Path(tail[2].removeprefix("[pipeline] plot:    "))
    assert tail[2].startswith("[pipeline] plot:    ") and plot.name == "loss_curve.png" and plot.is_file()
    html = page.read_text()
    assert "<h1>Digits classifier evaluation</h1>" in html and "Quality gate passed" in html
    assert len(re.findall(r'src="data:image/png;base64,', html)) == 1  # the loss curve, inline, once


def test_the_pipelines_job_is_found_by_name_from_another_directory(digits_run, tmp_path):
    root, env, ran = digits_run
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr
    [name] = re.findall(r"^\[pipeline\] step train: (\S+) Completed", ran.stdout, re.M)

    def trainops(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([TRAINOPS, *args], capture_output=True, text=True, cwd=str(tmp_path), env=env,
                              timeout=120)

    status = trainops("status", name)
    assert status.returncode == 0 and "status: Completed" in status.stdout, status.stderr
    assert f"job_dir: {root / 'digits' / 'jobs' / name}" in status.stdout
    logs = trainops("logs", name)
    assert logs.returncode == 0 and "epoch 12/12" in logs.stdout, logs.stderr
    listed = trainops("jobs")
    assert re.search(rf"^{name}\s+local\s+Completed\s+.*workdir={root / 'digits'} \(pipeline digits-retrain\)$",
                     listed.stdout, re.M), listed.stdout
    page = str(root / "digits" / "pipelines" / "digits-retrain" / "report.html")
    assert trainops("report", name).stdout.strip() == page  # a pipeline's job: the run's page
    assert trainops("report", "digits-retrain").stdout.strip() == page


def test_the_report_is_served_on_localhost_under_the_sandbox(digits_run, tmp_path):
    root, env, ran = digits_run
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr
    server = subprocess.Popen([TRAINOPS, "report", "digits-retrain", "--serve"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=str(tmp_path), env=env)
    try:
        assert server.stdout is not None
        path = server.stdout.readline().strip()  # the path first, then the address it serves
        served = server.stdout.readline().strip()
        [url] = re.findall(r"^serving the report at (http://127\.0\.0\.1:\d+/) ", served)
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
            assert response.status == 200 and "sandbox" in response.headers["Content-Security-Policy"]
        assert body == Path(path).read_bytes()
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(url + "etc/passwd", timeout=30)
        assert other.value.code == 404
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=60)
    assert code == 0, server.stderr.read() if server.stderr else ""


def test_open_hands_the_page_to_the_users_browser(digits_run, tmp_path):
    root, env, ran = digits_run
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr
    opened = tmp_path / "opened"
    # $BROWSER, as Python's webbrowser reads it: a command that notes the address it was given
    browser = f"/bin/sh -c 'echo \"$0\" > {opened}' %s"
    shown = subprocess.run([TRAINOPS, "report", "digits-retrain", "--open"], capture_output=True, text=True,
                           cwd=str(tmp_path), env={**env, "BROWSER": browser}, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert opened.read_text().strip() == Path(shown.stdout.strip()).resolve().as_uri()
