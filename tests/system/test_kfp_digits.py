"""The digits retraining pipeline run end to end by kfp.local: real subprocess components, real DDP training on two
simulated hosts, real evaluation, the gate's two branches, and a re-run that re-attaches to the finished training.

`trainops kfp run-local` is what runs (kfp.local with SubprocessRunner(use_venv=False), nothing installed); the test
reads back what KFP recorded: each task's executor output (the Model artifact's URI and metadata, the Metrics
artifact, the HTML report) under <workdir>/kfp.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(480)]

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "digits" / "pipeline.yaml"


def run_local(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trainops.cli", "kfp", "run-local", str(PIPELINE), "--workdir", str(workdir),
               *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=420, cwd=str(ROOT),
                          env={**os.environ, "TRAINOPS_HOME": str(workdir / "home")})


def task_lines(stdout: str) -> dict[str, str]:
    """`[kfp]   <task> <STATE>[: detail]` lines, by task."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"^\[kfp\]\s{3}(?P<task>[a-z-]+)\s+(?P<rest>.*)$", line)
        if match:
            found[match.group("task")] = match.group("rest")
    return found


def run_dir(stdout: str) -> Path:
    [line] = [line for line in stdout.splitlines() if line.startswith("[kfp] outputs: ")]
    return Path(line.split(": ", 1)[1])


def executor_output(directory: Path, task: str) -> dict:
    return json.loads((directory / task / "executor_output.json").read_text())


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kfp-digits")
    result = run_local(workdir)
    return workdir, result


def test_the_digits_pipeline_runs_every_task_and_registers_the_model(first_run):
    workdir, result = first_run
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    states = task_lines(result.stdout)
    assert {task: line.split(":")[0] for task, line in states.items()} == {
        "prepare-data": "SUCCEEDED", "stage-data": "SUCCEEDED", "train-model": "SUCCEEDED",
        "evaluate-model": "SUCCEEDED", "register-model": "SUCCEEDED", "gate-failed": "SKIPPED"}
    assert "[kfp] pipeline digits-retrain: SUCCEEDED" in result.stdout
    assert re.search(r"^\[kfp\] metrics: accuracy=0\.9\d+, loss=[0-9.]+, test_images=360$", result.stdout, re.M)
    # nothing was installed: kfp.local saw no pip command (it would have said so), and no venv was made
    assert "pip install" not in result.stdout and "Installing collected packages" not in result.stdout

    outputs = run_dir(result.stdout)
    assert outputs.parent == workdir / "kfp"  # KFP's outputs stay in the work directory
    # The console is a summary (issue 47): each task's start and end, the steps' own lines (the epochs); kfp.local's
    # executor JSON is in the run's log, which the last line names.
    whole = outputs / "run-local.log"
    assert "Got executor_input" in whole.read_text() and "Got executor_input" not in result.stdout
    assert "pip install" not in whole.read_text()
    assert result.stdout.splitlines()[-1] == (f"[kfp] kfp.local's whole output (each task's executor input and "
                                              f"outputs): {whole} (-v prints it here)")
    assert re.search(r"^  \[algo-1 rank 0\] epoch 12/12 loss [0-9.]+ \(world size 2, [0-9.]+ s\)$", result.stdout,
                     re.M)
    assert "[kfp] train-model: running" in result.stdout and "[kfp] train-model: SUCCESS after " in result.stdout

    train = executor_output(outputs, "train-model")
    [model] = train["artifacts"]["model"]["artifacts"]
    archive = Path(model["uri"])
    assert archive.name == "model.tar.gz" and archive.is_file() and str(archive).startswith(str(workdir))
    assert model["metadata"]["model_artifact"] == str(archive)
    assert model["metadata"]["backend"] == "local" and model["metadata"]["job_name"].startswith("digits-")
    assert train["parameterValues"]["reattached"] is False
    with tarfile.open(archive) as tar:
        assert "model.pt" in tar.getnames()

    evaluate = executor_output(outputs, "evaluate-model")
    assert evaluate["parameterValues"]["Output"] is True
    [metrics] = evaluate["artifacts"]["metrics"]["artifacts"]
    assert set(metrics["metadata"]) == {"accuracy", "loss", "test_images"} and metrics["metadata"]["accuracy"] >= 0.95
    [report] = evaluate["artifacts"]["report"]["artifacts"]
    assert report["uri"].endswith(".html")  # the artifact is a page by its name
    page = Path(report["uri"]).read_text()
    [curve] = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert base64.b64decode(curve).startswith(b"\x89PNG")  # the loss curve, inlined
    assert "Digits classifier evaluation" in page  # the script's report.md
    assert "<h1>Digits classifier evaluation</h1>" in page and "# Digits" not in page  # rendered, not raw Markdown

    register = executor_output(outputs, "register-model")["parameterValues"]
    assert (register["version"], register["approval_status"]) == (1, "Approved")
    entry = json.loads((workdir / "registry" / "digits-classifier" / "v1" / "entry.json").read_text())
    assert entry["job_name"] == model["metadata"]["job_name"] and entry["metrics"]["accuracy"] >= 0.95


def test_a_gate_that_cannot_pass_skips_register_fails_the_run_and_training_reattaches(first_run):
    workdir, first = first_run
    assert first.returncode == 0
    first_job = executor_output(run_dir(first.stdout), "train-model")["parameterValues"]["job_name"]
    jobs_before = sorted(path.name for path in (workdir / "jobs").iterdir())

    result = run_local(workdir, "--gate", "accuracy > 1.0")
    assert result.returncode == 1, result.stdout[-6000:] + result.stderr[-3000:]
    states = task_lines(result.stdout)
    assert states["train-model"].startswith(f"SUCCEEDED: job {first_job} Completed (re-attached)")
    assert states["evaluate-model"].startswith("SUCCEEDED: gate failed: accuracy = 0.9")
    assert states["register-model"].startswith("SKIPPED")
    assert states["gate-failed"].startswith("FAILED")
    # the verdict is not a lost pod: the gate-failed task ran once, not again a minute and two minutes later
    # (kfp.local's own lines are in the run's log since issue 47: the console shows each task's start once too)
    whole = (run_dir(result.stdout) / "run-local.log").read_text()
    assert len(re.findall(r"Executing task \S*'gate-failed'", whole)) == 1
    assert result.stdout.count("[kfp] gate-failed: running") == 1
    assert "[kfp] pipeline digits-retrain: FAILED" in result.stdout
    assert not (run_dir(result.stdout) / "register-model").exists()
    # the same job, not a second one; and no new model version
    assert sorted(path.name for path in (workdir / "jobs").iterdir()) == jobs_before
    versions = (workdir / "registry" / "digits-classifier").glob("v*")
    assert sorted(path.name for path in versions) == ["v1"]
