"""The digits retraining pipeline end to end, as `make run` runs it: real data, DDP on 2 simulated hosts, the gate,
the registry; then a re-run that re-attaches instead of training again, and a gate that fails stops before register."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits"


@pytest.fixture(scope="module")
def pipeline_copy(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("digits")
    for item in EXAMPLE.iterdir():
        if item.is_file():
            shutil.copy(item, directory / item.name)
    text = (directory / "pipeline.yaml").read_text().replace("workdir: ../../runs/digits", "workdir: state")
    (directory / "pipeline.yaml").write_text(text)
    return directory


def run_pipeline(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(path), *extra], capture_output=True,
                          text=True, timeout=600)


def last_run(directory: Path) -> dict:
    return json.loads((directory / "state" / "pipelines" / "digits-retrain" / "last-run.json").read_text())


def test_digits_pipeline_trains_evaluates_and_registers(pipeline_copy):
    result = run_pipeline(pipeline_copy / "pipeline.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = last_run(pipeline_copy)
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

    again = run_pipeline(pipeline_copy / "pipeline.yaml")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "training skipped" in again.stdout and "epoch 1/" not in again.stdout
    assert last_run(pipeline_copy)["steps"]["register"]["version"] == 1  # the same job is registered once


def test_a_failing_gate_stops_before_register(pipeline_copy):
    strict = pipeline_copy / "strict.yaml"
    strict.write_text((pipeline_copy / "pipeline.yaml").read_text().replace('"accuracy >= 0.95"',
                                                                           '"accuracy >= 1.01"'))
    result = run_pipeline(strict)
    assert result.returncode == 1
    record = last_run(pipeline_copy)
    assert record["status"] == "GateFailed" and "register" not in record["steps"]
    assert "accuracy" in record["message"] and "1.01" in record["message"]


def test_forced_retraining_starts_from_scratch_not_from_the_last_checkpoint(pipeline_copy):
    forced = run_pipeline(pipeline_copy / "pipeline.yaml", "--force")
    assert forced.returncode == 0, forced.stdout[-3000:] + forced.stderr[-3000:]
    assert "epoch 1/12" in forced.stdout and "resumed from" not in forced.stdout
