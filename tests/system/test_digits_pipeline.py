"""The digits retraining pipeline end to end, as `make run` runs it: real data, DDP on 2 simulated hosts, the gate,
the registry; then a re-run that re-attaches instead of training again, and a gate that fails stops before register.

The module runs the pipeline once (`digits_run`: `trainops run pipeline.yaml` on a copy of examples/digits, with a
state of its own) and its tests read that run in order: what it trained and registered, then what a new user does
next (issue 47 items 1 and 4: the last lines name the report and plot; the job is found by name from another
directory; the report is served on 127.0.0.1 and handed to the browser), then a strict gate and a forced retraining
on the same state. A test run alone still gets the run first."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"
TRAINOPS = str(Path(sys.executable).parent / "trainops")


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """`make run`'s pipeline, run once with its own state: (state root, environment, the finished command). It runs
    from a copy of the example (``<root>/example``), so a variant of the file beside it (the strict gate) has the
    same code and data and re-attaches to the job instead of training again."""
    root = tmp_path_factory.mktemp("digits-find")
    (root / "example").mkdir()
    for item in EXAMPLE.iterdir():
        if item.is_file():
            shutil.copy(item, root / "example" / item.name)
    env = {**os.environ, "TRAINOPS_HOME": str(root / "home"), "TRAINOPS_JOB_INDEX": str(root / "index")}
    ran = subprocess.run([TRAINOPS, "run", str(root / "example" / "pipeline.yaml"), "--workdir", str(root / "digits")],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=560)
    return root, env, ran


def run_pipeline(digits_run, path: Path, *extra: str) -> subprocess.CompletedProcess:
    """Another run of a pipeline file on the module run's state (its workdir, home and job index)."""
    root, env, _ = digits_run
    return subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(path), "--workdir", str(root / "digits"),
                           *extra], capture_output=True, text=True, timeout=600, cwd=str(ROOT), env=env)


def last_run(digits_run) -> dict:
    return json.loads((digits_run[0] / "digits" / "pipelines" / "digits-retrain" / "last-run.json").read_text())


def test_digits_pipeline_trains_evaluates_and_registers(digits_run):
    result = digits_run[2]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = last_run(digits_run)
    assert record["status"] == "Succeeded"
    assert list(record["steps"]) == ["prepare", "stage", "train", "evaluate", "register"]
    assert "world size 2" in result.stdout and "[algo-2] " in result.stdout  # DDP over 2 simulated hosts
    assert record["steps"]["evaluate"]["metrics"]["accuracy"] >= 0.95
    evaluation = Path(record["steps"]["evaluate"]["output_dir"])
    assert (evaluation / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "test accuracy" in (evaluation / "report.md").read_text()
    registered = record["steps"]["register"]
    assert registered["version"] == 1 and registered["approval_status"] == "Approved"
    # What the run's training cost, every attempt included: the run total is the train step's.
    assert record["cost"]["total"] is not None and record["cost"]["attempts"] == 1
    assert record["cost"]["total"] == record["steps"]["train"]["cost"]["total"] > 0
    assert "; training $" in result.stdout
    entry = json.loads((Path(registered["location"]) / "entry.json").read_text())
    assert entry["description"].startswith("trained by digits-") and entry["description"].endswith("over 1 attempt")

    again = run_pipeline(digits_run, digits_run[0] / "example" / "pipeline.yaml")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "training skipped" in again.stdout and "epoch 1/" not in again.stdout
    assert last_run(digits_run)["steps"]["register"]["version"] == 1  # the same job is registered once


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


def test_a_failing_gate_stops_before_register(digits_run):
    example = digits_run[0] / "example"
    strict = example / "strict.yaml"
    strict.write_text((example / "pipeline.yaml").read_text().replace('"accuracy >= 0.95"', '"accuracy >= 1.01"'))
    result = run_pipeline(digits_run, strict)
    assert result.returncode == 1
    record = last_run(digits_run)
    assert record["status"] == "GateFailed" and "register" not in record["steps"]
    assert "accuracy" in record["message"] and "1.01" in record["message"]


def test_forced_retraining_starts_from_scratch_not_from_the_last_checkpoint(digits_run):
    forced = run_pipeline(digits_run, digits_run[0] / "example" / "pipeline.yaml", "--force")
    assert forced.returncode == 0, forced.stdout[-3000:] + forced.stderr[-3000:]
    assert "epoch 1/12" in forced.stdout and "resumed from" not in forced.stdout
