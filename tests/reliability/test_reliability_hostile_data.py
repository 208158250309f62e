"""Hostile data (issue 10, item 2): staging from S3 (a moto server) and from local trees with `..` keys, absolute keys,
links that point outside, names with newlines and other control characters, names that collide with directories or
are too long for the file system. Whatever the front door (`stage_tree`, `trainops stage`, a pipeline's stage step,
an s3:// channel of `trainops run`), nothing is written outside the destination and every hostile name is reported.

The staging tests (tests/unit/backends/test_local_staging.py, tests/system/test_staging_s3.py) cover the basic
keys; these add the rest and the other front doors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from hostile_data import (
    HOSTILE_KEYS,
    LOCAL_HOSTILE,
    SENTINELS,
    make_hostile_tree,
    put_hostile_objects,
    reported,
    snapshot,
)

from trainops.backends.hostfs.staging import stage_tree

pytestmark = pytest.mark.system

@pytest.fixture
def hostile_bucket(aws_environment):
    """A bucket of the moto server holding the good and hostile keys."""
    import boto3

    bucket = f"hostile-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    put_hostile_objects(bucket)
    return bucket


@pytest.fixture
def hostile_tree(tmp_path) -> Path:
    return make_hostile_tree(tmp_path)


def test_hostile_s3_keys_are_each_reported_and_nothing_lands_outside(hostile_bucket, tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "neighbour.txt").write_text("untouched")
    destination = parent / "staged"
    before = snapshot(tmp_path, destination)
    sentinels = {path: path.exists() for path in SENTINELS}

    report = stage_tree(f"s3://{hostile_bucket}/data", str(destination), workers=4)

    assert snapshot(tmp_path, destination) == before  # the destination itself is left out of both
    assert {path: path.exists() for path in SENTINELS} == sentinels
    assert reported(report) >= set(HOSTILE_KEYS.values()) - {"both"}
    assert "both" in reported(report) or "both/inner" in reported(report)  # the file/directory collision
    assert all(item.reason for item in list(report.refused) + list(report.failed))
    assert (destination / "ok.txt").read_bytes() == b"ok"
    assert (destination / "\u00fcnic\u00f8de.txt").read_bytes() == b"unicode"
    assert not report.ok


def test_the_stage_command_prints_every_hostile_s3_key_on_one_line_each(hostile_bucket, tmp_path):
    completed = subprocess.run([sys.executable, "-m", "trainops.cli", "stage", f"s3://{hostile_bucket}/data",
                                str(tmp_path / "staged"), "--json"], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.startswith("trainops stage: ")]
    assert len(lines) >= len(HOSTILE_KEYS) - 1
    assert not any("\x1b" in line or "\x00" in line for line in completed.stderr.splitlines())  # escaped, not raw
    summary = json.loads(completed.stdout)
    assert summary["ok"] is False and summary["refused_count"] + summary.get("failed_count", 0) >= len(HOSTILE_KEYS) - 1


def test_a_job_with_a_hostile_s3_channel_is_refused_before_it_runs(hostile_bucket, tmp_path):
    (tmp_path / "train.py").write_text("open('ran', 'w').write('ran')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"entry_point": "train.py", "instance_type": "local",
                                    "inputs": {"train": f"s3://{hostile_bucket}/data"}}))
    completed = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(spec), "--workdir",
                                str(tmp_path / "work"), "--job-name", "hostile-channel"], capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (problem,) = [line for line in completed.stderr.splitlines() if line.startswith("  - inputs.train: ")]
    # Each refused object named once, escaped (was a list of reprs, and only the failed ones when both kinds).
    assert "refused or failed" in problem and "../escape-1: '..' segment" in problem
    assert "new\\nline: name contains the control character" in problem and "\x1b" not in completed.stderr
    assert "Traceback" not in completed.stderr and not list(tmp_path.rglob("ran"))
    job_dir = tmp_path / "work" / "jobs" / "hostile-channel"
    assert not (job_dir / "hosts").exists()  # no host was laid out, nothing started
    assert all(not path.exists() for path in SENTINELS)
    outside_job = snapshot(tmp_path, job_dir / "data")
    assert all(not name.startswith(("escape", "tmp")) for name in outside_job)


def test_a_hostile_local_tree_is_reported_and_nothing_lands_outside(hostile_tree, tmp_path):
    destination = tmp_path / "staged"
    before = snapshot(tmp_path, destination)
    report = stage_tree(str(hostile_tree), str(destination))
    assert snapshot(tmp_path, destination) == before
    assert reported(report) == LOCAL_HOSTILE
    staged = {str(path.relative_to(destination)) for path in destination.rglob("*") if path.is_file()}
    assert staged == {"ok.txt", "inner/real.txt", "inner-link", ".trainops-stage.json"}
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside the tree"


def test_a_pipeline_with_a_hostile_stage_source_stops_before_training(hostile_tree, tmp_path):
    (tmp_path / "train.py").write_text("open(__file__ + '.ran', 'w').write('ran')\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({
        "name": "hostile-stage",
        "steps": {"stage": {"source": str(hostile_tree), "destination": str(tmp_path / "staged")},
                  "train": {"spec": {"entry_point": "train.py", "source_dir": ".", "instance_type": "local"},
                            "channels": {}}}}))
    completed = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(pipeline), "--workdir",
                                str(tmp_path / "work")], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    output = completed.stdout + completed.stderr
    for name in ("up", "absolute", "dir-out", "new\\nline.txt"):
        assert f"refused {name}:" in output, output
    record = json.loads((tmp_path / "work" / "pipelines" / "hostile-stage" / "last-run.json").read_text())
    assert record["steps"]["stage"]["status"] == "Failed" and "train" not in record["steps"]
    assert not list(tmp_path.rglob("*.ran"))
