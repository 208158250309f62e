"""A user error in a real Airflow run (``dag.test()``) fails the train task at once: AirflowFailException, so the
task's two retries are not spent on a script that would fail the same way (issue 17)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

SCRIPTS = Path(__file__).resolve().parents[1] / "reliability" / "scripts"

DAG_FILE = textwrap.dedent('''
    from datetime import timedelta

    from airflow.sdk import DAG
    from trainops.operators.training import DistributedTrainingOperator

    SPEC = {"name": "flaky", "entry_point": "faulty.py", "source_dir": SOURCE, "instance_type": "ml.g5.xlarge",
            "instance_count": 2, "output_path": OUTPUT, "distribution": {"torch_distributed": {"enabled": True}},
            "environment": {"STEPS": "6", "STEP_SECONDS": "0.2", "FAULT": "exit:1"}}

    with DAG(dag_id="user_error", schedule=None) as dag:
        DistributedTrainingOperator(task_id="train", spec=SPEC, backend="local", workdir=WORKDIR, retries=2,
                                    retry_delay=timedelta(seconds=0), retry_budgets={"infrastructure": 2})
''')


def test_a_user_error_fails_the_task_without_using_its_retries(airflow_home, tmp_path):  # noqa: F811
    path = tmp_path / "user_error_dag.py"
    path.write_text(f"SOURCE = {str(SCRIPTS)!r}\nOUTPUT = {str(tmp_path / 'out')!r}\n"
                    f"WORKDIR = {str(tmp_path / 'state')!r}\n" + DAG_FILE)
    outcome, done = airflow_home.dag_test(path, "user_error")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["tasks"] == {"train": "failed"} and outcome["state"] == "failed"
    assert outcome["tries"]["train"] == 1  # not up_for_retry: no second try of the task
    log = done.stdout + done.stderr
    assert "user failure" in log and "not retried" in log
    jobs = sorted(p.name for p in (tmp_path / "state" / "jobs").iterdir())
    assert len(jobs) == 1, jobs  # one job: no second attempt of the training either
