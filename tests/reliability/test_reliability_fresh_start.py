"""Issue 39, class 5: no job lost or silently skipped.

- A new job name starts afresh: a second `trainops run` of one spec under a new name used to resume the first job's
  final checkpoint and train 0 epochs, with one log line as the only sign. It resumes only when asked
  (`--resume-from JOB`), and a re-run of a failed job's name (its retry `<name>-2`) resumes that job's checkpoints.
- A job that fails before its script starts (a package it needs is missing: boto3 for an S3 channel) is recorded as
  what it is (failure class `setup`, with the install hint), not as the training script's failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from local_breaks import cli

REPOSITORY = Path(__file__).resolve().parents[2]

# Trains EPOCHS epochs from its checkpoint (if any), saving the epoch reached; fails after saving when FAIL_FLAG is
# a file that exists (the first run of a job that fails once).
SCRIPT = """import json, os, sys
directory = os.environ.get("TRAINOPS_CHECKPOINT_DIR", "/opt/ml/checkpoints")
path = os.path.join(directory, "state.json")
start = json.load(open(path))["epoch"] if os.path.exists(path) else 0
print(f"STARTED-AT-EPOCH {start}", flush=True)
end = int(os.environ["EPOCHS"])
for epoch in range(start, end):
    json.dump({"epoch": epoch + 1}, open(path, "w"))
    if epoch + 1 == end // 2 and os.path.exists(os.environ.get("FAIL_FLAG", "/nonexistent")):
        os.remove(os.environ["FAIL_FLAG"])
        sys.exit("failing half way, once")
print(f"TRAINED-EPOCHS {end - start}", flush=True)
"""


def _spec(directory: Path, flag: Path) -> Path:
    (directory / "src").mkdir(exist_ok=True)
    (directory / "src" / "train.py").write_text(SCRIPT)
    spec = directory / "job.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: fresh
        entry_point: train.py
        source_dir: src
        instance_type: ml.m5.large
        instance_count: 1
        output_path: out
        environment: {{EPOCHS: "6", FAIL_FLAG: "{flag}"}}
        """))
    return spec


def _trained(output: str) -> tuple[int, int]:
    started = int(output.split("STARTED-AT-EPOCH ", 1)[1].split()[0])
    trained = int(output.split("TRAINED-EPOCHS ", 1)[1].split()[0])
    return started, trained


@pytest.mark.system
def test_a_new_job_name_starts_afresh_and_resumes_only_when_asked(tmp_path):
    env = {"TRAINOPS_HOME": str(tmp_path / "home")}
    spec = _spec(tmp_path, tmp_path / "no-flag")
    first = cli("run", str(spec), "--job-name", "fresh-1", env=env)
    assert first.returncode == 0 and _trained(first.stdout) == (0, 6), first.stdout
    second = cli("run", str(spec), "--job-name", "fresh-2", env=env)  # the same spec, a new name
    assert second.returncode == 0 and _trained(second.stdout) == (0, 6), second.stdout  # trained, not skipped
    assert "resuming" not in second.stdout
    asked = cli("run", str(spec), "--job-name", "fresh-3", "--resume-from", "fresh-1", env=env)
    assert asked.returncode == 0 and _trained(asked.stdout) == (6, 0), asked.stdout
    assert "resuming: checkpoint directory" in asked.stdout


@pytest.mark.system
def test_a_rerun_of_a_failed_jobs_name_resumes_its_checkpoints(tmp_path):
    env = {"TRAINOPS_HOME": str(tmp_path / "home")}
    flag = tmp_path / "fail-once"
    flag.write_text("")
    spec = _spec(tmp_path, flag)
    failed = cli("run", str(spec), "--job-name", "once", env=env)
    assert failed.returncode == 1 and "failing half way" in failed.stdout + failed.stderr, failed.stdout
    again = cli("run", str(spec), "--job-name", "once", env=env)  # retried as once-2, from once's checkpoints
    assert again.returncode == 0 and _trained(again.stdout) == (3, 3), again.stdout
    assert json.loads((tmp_path / "home" / "jobs" / "once-2" / "status.json").read_text())["status"] == "Completed"


# The `make run` venv in miniature (boto3 not installed), running a local job straight from the backend's job class:
# past the validation that now refuses such a run (tests/unit/commands/test_clean_errors.py), as a channel changed
# after validation would be.
WITHOUT_BOTO3 = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("boto3", "botocore", "s3transfer"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
from trainops.backends.local.job import LocalJob
from trainops.backends.local.job_input import from_spec
from trainops.errors import JobFailed
from trainops.spec.loader import load_job_spec
try:
    LocalJob(from_spec(load_job_spec(sys.argv[1])), "s3-channel", workdir=sys.argv[2]).run()
except JobFailed as error:
    print("JOBFAILED", error)
"""


def test_a_job_that_fails_before_its_script_starts_is_a_setup_failure_with_the_install_hint(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('ran')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text("name: s3-channel\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.m5.large\n"
                    "instance_count: 1\ninputs: {train: 's3://some-bucket/train/'}\n")
    done = subprocess.run([sys.executable, "-c", WITHOUT_BOTO3, str(spec), str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=120, cwd=REPOSITORY, env=dict(os.environ))
    assert "JOBFAILED local job s3-channel needs 'boto3'" in done.stdout, (done.stdout, done.stderr)
    assert "pip install 'trainops[aws]'" in done.stdout
    status = cli("status", "s3-channel", "--workdir", str(tmp_path / "work"), "--json")
    record = json.loads(status.stdout)
    assert record["status"] == "Failed", record
    assert record["failure_reason"].startswith("before the training script started: ModuleNotFoundError"), record
    assert "pip install 'trainops[aws]'" in record["failure_reason"]
    assert record["failure_class"] == "setup", record
