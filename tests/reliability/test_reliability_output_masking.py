"""Secrets in every output path (issue 15, item 12): `trainops kfp compile`, `kfp run-local` and the Airflow DAG's
prepare task showed a spec's secret environment values in clear (the compiled YAML's spec_json default, kfp.local's
printed executor input, the prepare task's XComs and returned-value log line). Each now masks what `trainops render`
masks, by the one rule of `trainops.spec.secrets`, and the training script still gets the real values (the KFP train
component and the Airflow training task take them from their environment). The scenario is in
output_masking_scenario.py.
"""

from __future__ import annotations

import pytest
from output_masking_scenario import NEEDLES, PLAIN, SECRETS, airflow_prepare, kfp_compile, kfp_run_local
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture


def test_the_rule_masks_names_and_credential_urls_and_keeps_the_rest():
    from trainops.spec.secrets import MASK, masked_environment, restore_masked, secret_environment_names

    environment = {**SECRETS, **PLAIN, "API_TOKEN": "t", "DB_PASSWORD": "p", "sshKey": "k", "REDIS_URI":
                   "redis://:only-a-password@cache:6379/0", "TOKENIZER_NAME": "gpt2", "MAX_TOKENS": "512",
                   "NOTES": "see https://example.com/a@b", "KEYBOARD": "us", "PATH_PREFIX": "/opt"}
    assert secret_environment_names(environment) == sorted([*SECRETS, "API_TOKEN", "DB_PASSWORD", "sshKey",
                                                            "REDIS_URI"])
    masked = masked_environment(environment)
    assert masked["DATABASE_URL"] == MASK and masked["PLAIN_URL"] == PLAIN["PLAIN_URL"]
    assert masked["NOTES"] == environment["NOTES"]  # an @ without user:password@ is not a credential
    restored = restore_masked({"environment": masked}, environment)
    assert restored["environment"] == environment
    from trainops.errors import SpecError

    with pytest.raises(SpecError) as raised:
        restore_masked({"environment": masked}, {"HF_TOKEN": "x"}, "spec_json")
    fields = {problem.path for problem in raised.value.problems}
    assert "spec_json.environment.GH_PAT" in fields and "spec_json.environment.HF_TOKEN" not in fields


def test_render_masks_by_the_same_rule(tmp_path):
    import json

    from trainops.cli import main

    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"entry_point": "train.py", "instance_type": "ml.m5.xlarge", "role":
                                "arn:aws:iam::123456789012:role/SageMakerRole", "image_uri":
                                "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1", "output_path": "s3://bucket-1/out",
                                "source_dir": "s3://bucket-1/code/sourcedir.tar.gz", "environment": {**SECRETS, **PLAIN}}))
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["render", str(spec), "--job-name", "masking-1", "--region", "us-east-1"])
    assert code == 0, err.getvalue()
    request = json.loads(out.getvalue())
    assert not any(needle in out.getvalue() for needle in NEEDLES)
    assert request["Environment"]["PLAIN_URL"] == PLAIN["PLAIN_URL"]
    assert request["Environment"]["TRAINOPS_MASK_VARIABLES"].split(",") == sorted(SECRETS)


def test_kfp_compile_writes_no_secret(tmp_path):
    row = kfp_compile(tmp_path)
    assert row["returncode"] == 0, row["error"]
    assert row["in_output"] == 0 and row["in_console"] == 0, row
    assert row["masked"] >= len(SECRETS) and row["plain_kept"] >= 1, row


@pytest.mark.system
def test_kfp_run_local_shows_no_secret_and_the_script_gets_every_value(tmp_path):
    row = kfp_run_local(tmp_path)
    assert row["returncode"] == 0, row["error"]
    assert row["in_console"] == 0 and row["files_with_secret"] == [], row
    assert row["digests_seen"] == len(SECRETS), row  # the real values reached the script
    assert row["plain_kept"] >= 1, row


@pytest.mark.system
def test_the_airflow_prepare_task_logs_and_xcoms_hold_no_secret(tmp_path, airflow_home):  # noqa: F811
    row = airflow_prepare(tmp_path, airflow_home)
    assert row["returncode"] == 0, row["error"]
    assert row["in_prepare_xcom"] == 0 and row["in_output"] == 0, row
    assert row["masked_in_prepare_xcom"] >= len(SECRETS), row
    assert row["in_console"] == 0 and row["files_with_secret"] == [], row
    assert row["digests_seen"] == len(SECRETS), row  # the training task restored them from the worker's environment
