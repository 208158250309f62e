"""Staging from S3 (a moto server on 127.0.0.1) with hostile keys: nothing lands outside the destination, and every
hostile key is reported, by `stage_tree`, the stage step and the `trainops stage` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from trainops.backends.hostfs.stage_names import MANIFEST_NAME
from trainops.backends.hostfs.staging import stage_tree
from trainops.errors import JobFailed
from trainops.steps.stage import stage

pytestmark = pytest.mark.system

#: Keys under the prefix ``data/`` and the name each becomes once the prefix is taken off.
HOSTILE_UNDER_PREFIX = {"data/../x": "../x", "data//etc/x": "/etc/x", "data/a/../../x": "a/../../x",
                        "data/a\nb": "a\nb", "data/../../../tmp/escaped": "../../../tmp/escaped"}
GOOD_UNDER_PREFIX = {"data/train/part-0.csv": b"0,1,2\n", "data/train/part-1.csv": b"3,4,5\n" * 1000,
                     "data/labels.json": b'{"classes": 10}'}
OUTSIDE_PATHS = [Path("/etc/x"), Path("/tmp/escaped"), Path("/x")]


def put_object(client, bucket: str, key: str, data: bytes) -> None:
    """Through the S3 API, or straight into moto's store for keys its HTTP routing cannot carry (a newline)."""
    if "\n" in key:
        from moto.s3.models import s3_backends
        from support.moto_server import ACCOUNT_ID

        s3_backends[ACCOUNT_ID]["aws"].put_object(bucket, key, data)
    else:
        client.put_object(Bucket=bucket, Key=key, Body=data)


@pytest.fixture
def hostile_bucket(aws_environment):
    """A fresh bucket holding good objects and hostile keys, both under ``data/`` and at the bucket's root."""
    import boto3

    client = boto3.client("s3")
    bucket = f"staging-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    for key, data in GOOD_UNDER_PREFIX.items():
        put_object(client, bucket, key, data)
    for key in HOSTILE_UNDER_PREFIX:
        put_object(client, bucket, key, b"hostile")
    for key in ("/etc/x", "../x"):
        put_object(client, bucket, key, b"hostile at the root")
    return client, bucket


def tree_of(root: Path) -> set[str]:
    found = set()
    for directory, directories, files in os.walk(root):
        for entry in directories + files:
            found.add((Path(directory) / entry).relative_to(root).as_posix())
    return found


def outside_state() -> dict[Path, bool]:
    return {path: path.exists() for path in OUTSIDE_PATHS}


def test_hostile_keys_under_a_prefix_are_refused_and_nothing_lands_outside(hostile_bucket, tmp_path):
    _, bucket = hostile_bucket
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "neighbour.txt").write_text("untouched")
    destination = parent / "staged"
    parent_before, outside_before = sorted(os.listdir(parent)), outside_state()

    report = stage_tree(f"s3://{bucket}/data", str(destination), workers=4)

    assert sorted(os.listdir(parent)) == sorted(parent_before + ["staged"])
    assert tree_of(tmp_path) - {"parent/staged"} == {"parent", "parent/neighbour.txt"} | {
        f"parent/staged/{name}" for name in ("train", "train/part-0.csv", "train/part-1.csv", "labels.json",
                                             MANIFEST_NAME)}
    assert outside_state() == outside_before
    assert {item.name for item in report.refused} == set(HOSTILE_UNDER_PREFIX.values())
    assert all(item.reason for item in report.refused)
    assert not report.ok and report.files_copied == len(GOOD_UNDER_PREFIX)
    for key, data in GOOD_UNDER_PREFIX.items():
        assert (destination / key.removeprefix("data/")).read_bytes() == data


def test_hostile_keys_at_the_bucket_root_are_refused(hostile_bucket, tmp_path):
    _, bucket = hostile_bucket
    destination = tmp_path / "parent" / "staged"
    outside_before = outside_state()
    report = stage_tree(f"s3://{bucket}", str(destination))
    refused = {item.name for item in report.refused}
    assert {"/etc/x", "../x"} | set(HOSTILE_UNDER_PREFIX) <= refused
    assert outside_state() == outside_before
    assert tree_of(tmp_path / "parent") == {"staged"} | {
        f"staged/{name}" for name in ("data", "data/train", "data/train/part-0.csv", "data/train/part-1.csv",
                                      "data/labels.json", MANIFEST_NAME)}


def test_restaging_from_s3_skips_unchanged_objects_and_copies_changed_ones(aws_environment, tmp_path):
    import boto3

    client = boto3.client("s3")
    bucket = f"staging-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    for key, data in GOOD_UNDER_PREFIX.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    destination = tmp_path / "staged"
    first = stage_tree(f"s3://{bucket}/data/", str(destination))
    assert first.ok and first.files_copied == 3
    client.put_object(Bucket=bucket, Key="data/labels.json", Body=b'{"classes": 11}')
    second = stage_tree(f"s3://{bucket}/data/", str(destination))
    assert (second.files_copied, second.files_skipped) == (1, 2)
    assert (destination / "labels.json").read_bytes() == b'{"classes": 11}'


def test_the_stage_step_fails_on_hostile_keys(hostile_bucket, tmp_path):
    _, bucket = hostile_bucket
    with pytest.raises(JobFailed) as raised:
        stage(f"s3://{bucket}/data", str(tmp_path / "staged"))
    message = str(raised.value)
    for name in ("../x", "/etc/x", "a/../../x", "a\\nb"):
        assert f"refused {name}:" in message


def run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", "stage", *arguments], capture_output=True,
                          text=True, timeout=120)


def test_the_command_exits_1_and_prints_each_hostile_key(hostile_bucket, tmp_path):
    _, bucket = hostile_bucket
    completed = run_cli(f"s3://{bucket}/data", str(tmp_path / "staged"), "--json")
    assert completed.returncode == 1
    refused_lines = [line for line in completed.stderr.splitlines() if line.startswith("trainops stage: refused ")]
    assert sorted(line.split(": ")[1].removeprefix("refused ") for line in refused_lines) == sorted(
        ["../x", "/etc/x", "a/../../x", "a\\nb", "../../../tmp/escaped"])
    report = json.loads(completed.stdout)
    assert report["refused_count"] == 5 and report["files_copied"] == 3 and report["ok"] is False


def test_the_command_exits_0_on_a_clean_prefix_and_2_on_a_missing_bucket(hostile_bucket, tmp_path):
    _, bucket = hostile_bucket
    clean = run_cli(f"s3://{bucket}/data/train", str(tmp_path / "train"))
    assert clean.returncode == 0, clean.stderr
    assert "2 files copied" in clean.stdout
    missing = run_cli(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/data", str(tmp_path / "other"))
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    assert not (tmp_path / "other").exists()
