"""A deferred train task's guards through Airflow itself: ``dag.test()`` runs the task, which submits a real local job
(a detached supervisor) and defers; Airflow serializes the trigger (the guards in its kwargs), runs it, and resumes
the task with its event. A budget stops a job that keeps printing, the stall watchdog a job that hangs; each task
fails with its guard's class. A deferred job that completes returns the XCom whose ``cost`` has the train step's
shape: per attempt, spent, the forecast and the budget with what is left.

The stand-ins are tests/system/scripts/guards/ (1 x ml.m5.large at $0.115/h: $0.0001 is about 3 s of wall time)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

SCRIPTS = Path(__file__).resolve().parent / "scripts" / "guards"

DAG_FILE = textwrap.dedent('''
    """Deferred local train tasks under trainops' guards."""
    from airflow.sdk import DAG
    from trainops.operators.training import DistributedTrainingOperator

    WORKDIR = {workdir!r}
    BASE = {{"instance_type": "ml.m5.large", "instance_count": 1, "max_run": 600, "output_path": {output!r}}}
    CASES = {{
        "deferred_budget": dict(BASE, name="pricey", entry_point="busy_printer.py", source_dir={scripts!r},
                                max_cost_usd=0.0001),
        "deferred_stall": dict(BASE, name="hung", entry_point="print_then_sleep.py", source_dir={scripts!r},
                               stall_timeout=3),
        "deferred_done": dict(BASE, name="quick", entry_point="train.py", source_dir={quick!r}, max_cost_usd=5.0),
    }}
    for dag_id, spec in CASES.items():
        with DAG(dag_id=dag_id, schedule=None) as dag:
            DistributedTrainingOperator(task_id="train", spec=spec, backend="local", workdir=WORKDIR,
                                        deferrable=True, check_interval=0.5, retries=0,
                                        retry_budgets={{"infrastructure": 0, "user": 0}})
        globals()[dag_id] = dag
''')


@pytest.fixture(scope="module")
def dag_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("deferred-guards")
    quick = root / "quick"
    quick.mkdir()
    (quick / "train.py").write_text("import os, pathlib\nprint('trained', flush=True)\n"
                                    "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('ok')\n")
    (root / "dags").mkdir()
    path = root / "dags" / "guarded_dags.py"  # a folder of its own: Airflow walks the DAG file's folder
    path.write_text(DAG_FILE.format(workdir=str(root / "work"), output=str(root / "out"), scripts=str(SCRIPTS),
                                    quick=str(quick)))
    return path


def test_a_deferred_job_is_stopped_at_its_budget_and_the_task_fails_as_budget(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "deferred_budget")
    output = done.stdout + done.stderr
    assert outcome is not None, output[-5000:]
    assert outcome["tasks"] == {"train": "failed"}, output[-5000:]
    assert "deferring: the triggerer waits for local training job" in output
    assert "budget: billable cost" in output and "stopping the job" in output  # the trigger's watch said it
    assert "[budget failure" in output and "not retried: the run's max_cost_usd is spent" in output


def test_a_deferred_job_that_hangs_is_stopped_as_stalled(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "deferred_stall")
    output = done.stdout + done.stderr
    assert outcome is not None, output[-5000:]
    assert outcome["tasks"] == {"train": "failed"}, output[-5000:]
    assert "step 1 done" in output  # the job's one line, streamed by the trigger
    assert "stalled: no new log line or metric" in output and "stall_timeout 3 s" in output
    assert "[infrastructure failure" in output


def test_a_deferred_job_that_completes_reports_forecast_spent_and_budget(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "deferred_done")
    output = done.stdout + done.stderr
    assert outcome is not None, output[-5000:]
    assert outcome["tasks"] == {"train": "success"}, output[-5000:]
    cost = outcome["xcom"]["train"]["return_value"]["cost"]
    assert cost["attempts"] == 1 and len(cost["per_attempt"]) == 1
    assert cost["spent"] == cost["total"] and cost["total"] is not None
    assert cost["forecast"]["instances"][0]["instance_type"] == "ml.m5.large"
    assert cost["forecast"]["max_run_seconds"] == 600
    assert cost["budget"]["max_cost_usd"] == 5.0 and cost["budget"]["mode"] == "stop"
    assert cost["budget"]["left"] == pytest.approx(5.0 - cost["total"])
