"""The gate task in a real Airflow run (``dag.test()``): a failed gate skips registration (``skip_downstream``, the
pipeline file's ``skip_register``) or fails the run naming the metric, value and threshold (``fail``)."""

from __future__ import annotations

import textwrap

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

DAG_FILE = textwrap.dedent('''
    """Gate test DAGs: a failed verdict, then a registration that must not happen."""
    from airflow.sdk import DAG
    from trainops.operators.evaluate import QualityGateOperator
    from trainops.operators.register import RegisterModelOperator

    VERDICT = {"passed": False, "message": "gate failed: accuracy = 0.912 is not >= 0.95",
               "metrics": {"accuracy": 0.912}}

    for dag_id, mode in (("gate_skips", "skip_downstream"), ("gate_fails", "fail")):
        with DAG(dag_id=dag_id, schedule=None) as dag:
            gate = QualityGateOperator(task_id="gate", evaluation=VERDICT, on_gate_failure=mode, retries=0)
            register = RegisterModelOperator(task_id="register", model_artifact="/nonexistent/model.tar.gz",
                                             metrics={"accuracy": 0.912}, group="never")
            gate >> register
        globals()[dag_id] = dag
''')


@pytest.fixture(scope="module")
def dag_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gate") / "gate_dags.py"
    path.write_text(DAG_FILE)
    return path


def test_skip_downstream_skips_registration_and_keeps_the_verdict(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "gate_skips")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["tasks"] == {"gate": "success", "register": "skipped"}
    assert outcome["state"] == "success"
    assert outcome["xcom"]["gate"]["return_value"]["passed"] is False


def test_fail_fails_the_run_with_metric_value_and_threshold(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "gate_fails")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["tasks"] == {"gate": "failed", "register": "upstream_failed"}
    assert outcome["state"] == "failed"
    assert "gate failed: accuracy = 0.912 is not >= 0.95" in done.stdout + done.stderr
