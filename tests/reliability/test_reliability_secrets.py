"""No secret leaks (issue 10, item 3): a secret passed through the spec's `environment` (a name that looks secret)
reaches the script, but not the console, the logs, the status record, the failure files, the rank records, the step
result (XCom), the pipeline record or `trainops render`. A script that prints its token, splits it across writes, and
fails with it in its exception message proves it.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest
import yaml
from secrets_scenario import SECRET, SECRET_DIGEST, files_holding, leaky_spec

from trainops.cli import main


def cli(*arguments: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(list(arguments))
    return out.getvalue() + err.getvalue()


@pytest.mark.system
def test_a_failing_rank_that_prints_and_raises_its_secret_leaks_it_nowhere(tmp_path):
    from trainops.errors import JobFailed
    from trainops.steps.train import train

    lines: list[str] = []
    with pytest.raises(JobFailed) as raised:
        train(leaky_spec(tmp_path, FAIL="1"), job_name="leaky-1", workdir=str(tmp_path / "work"),
              log=lines.append)
    result = raised.value.result  # what Airflow pushes to XCom and KFP returns
    console = "\n".join(lines)
    # The value reached the script (each rank printed the digest of what it saw) ...
    assert console.count(f"digest {SECRET_DIGEST}") == 2, console
    # ... and nothing shows it: console, step result, status, logs, failure files, rank records and tails.
    assert "token=****" in console and "split write **** done" in console
    assert SECRET not in console and SECRET not in json.dumps(result) and SECRET not in str(raised.value)
    assert result["failure_reason"].startswith("rank 1 on host algo-1 exited with code 1: RuntimeError: login "
                                               "refused for token ****")
    assert files_holding(tmp_path / "work", SECRET) == []
    job_dir = tmp_path / "work" / "jobs" / "leaky-1"
    assert "token ****" in (job_dir / "failure").read_text()
    assert "token ****" in (job_dir / "hosts" / "algo-1" / "output" / "failure").read_text()
    status = json.loads((job_dir / "status.json").read_text())
    assert status["spec"]["environment"] == {"HF_TOKEN": "****", "TOKENIZER_NAME": "gpt2", "FAIL": "1"}
    for command in (["status", "leaky-1", "--json"], ["logs", "leaky-1"]):
        shown = cli(*command, "--workdir", str(tmp_path / "work"))
        assert "leaky-1" in shown or "token=****" in shown
        assert SECRET not in shown


@pytest.mark.system
def test_a_pipeline_that_trains_with_a_secret_records_it_masked(tmp_path):
    spec = leaky_spec(tmp_path)
    spec["distribution"] = {}  # one plain process: the pipeline record is what is checked here
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({"name": "leaky-pipeline", "steps": {"train": {"spec": spec}}}))
    completed = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(pipeline), "--workdir",
                                str(tmp_path / "work")], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"digest {SECRET_DIGEST}" in completed.stdout and "token=****" in completed.stdout
    assert SECRET not in completed.stdout + completed.stderr
    record = json.loads((tmp_path / "work" / "pipelines" / "leaky-pipeline" / "last-run.json").read_text())
    assert record["steps"]["train"]["spec"]["environment"]["HF_TOKEN"] == "****"
    assert files_holding(tmp_path / "work", SECRET) == []


def test_render_masks_secret_environment_values(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
                                    "framework_version": "2.3.0", "py_version": "py311",
                                    "role": "arn:aws:iam::111122223333:role/R", "region": "us-east-1",
                                    "output_path": "s3://corpus-bucket/out",
                                    "environment": {"HF_TOKEN": SECRET, "DB_PASSWORD": "pw-123456",
                                                    "TOKENIZER_NAME": "gpt2"}}))
    (tmp_path / "train.py").write_text("")
    shown = cli("render", str(spec), "--job-name", "render-1")
    environment = json.JSONDecoder().raw_decode(shown)[0]["Environment"]  # the request; the forecast follows it
    assert environment["HF_TOKEN"] == environment["DB_PASSWORD"] == "****"
    assert environment["TOKENIZER_NAME"] == "gpt2" and SECRET not in shown
