"""Forged log marks in a real Airflow run (issue 48, class 6): ``dag.test()`` runs a DAG whose first task sets the
Airflow Variables that say where each training task's log stands in its job's log (`trainops.operators.log_marks`,
``trainops_log_mark.<backend>.<job name>``), as anyone who may set Variables can, before the training tasks run:
text where an offset belongs, a negative offset, an offset far past the end of the log, one inside a line, a mark
that is not JSON. Each training task runs a real local job that prints five lines and defers to the trigger, which
writes the job's lines into the task log from the mark on. Before, such a mark hid every line of the job from the
task log; now each is ignored with a warning and every line is written.
"""

from __future__ import annotations

import textwrap

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

#: task id -> the forged mark. Each task defers (a local job's task log is written from its log by the trigger; a
#: task waiting in the worker runs a local job in its own process and streams its output, no mark involved).
TASKS = {"text": '{"algo-1": "forged"}', "negative": '{"algo-1": -5}', "past_the_end": '{"algo-1": 1000000000000}',
         "inside_a_line": '{"algo-1": 3}', "not_json": "forged"}

DAG_FILE = textwrap.dedent('''
    """A DAG whose first task forges the log marks of the training tasks after it."""
    import pathlib
    from airflow.sdk import DAG, Variable, get_current_context, task
    from trainops.operators.log_marks import key
    from trainops.operators.training import DistributedTrainingOperator
    from trainops.spec.names import deterministic_job_name
    from types import SimpleNamespace

    TASKS = %(tasks)r
    WORK = %(work)r
    CODE = %(code)r


    def spec(task_id):
        return {"name": task_id.replace("_", "-"), "entry_point": "train.py", "source_dir": CODE,
                "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 300,
                "environment": {"TASK": task_id}}


    with DAG(dag_id="forged_marks", schedule=None) as dag:
        @task
        def forge():
            run_id = get_current_context()["run_id"]
            for task_id, mark in TASKS.items():
                name = deterministic_job_name(spec(task_id)["name"], "forged_marks", task_id, run_id, -1)
                Variable.set(key(SimpleNamespace(backend="local", job_name=name)), mark)

        forged = forge()
        for task_id in TASKS:
            forged >> DistributedTrainingOperator(task_id=task_id, spec=spec(task_id), backend="local",
                                                  workdir=WORK, deferrable=True, check_interval=1, retries=0)
''')

JOB = "import os\nfor step in range(1, 6):\n    print(f'{os.environ[\"TASK\"]} line {step}', flush=True)\n"


def test_forged_log_marks_are_ignored_with_a_warning_and_every_line_reaches_the_task_log(airflow_home,  # noqa: F811
                                                                                        tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(JOB)
    dag_file = tmp_path / "dags" / "forged_marks.py"
    dag_file.parent.mkdir()
    dag_file.write_text(DAG_FILE % {"tasks": TASKS, "work": str(tmp_path / "work"), "code": str(code)})
    outcome, done = airflow_home.dag_test(dag_file, "forged_marks")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["tasks"] == {"forge": "success", **{task_id: "success" for task_id in TASKS}}, outcome
    logs = "".join(path.read_text(errors="replace") for path in (airflow_home.path / "logs").rglob("*")
                   if path.is_file()) if (airflow_home.path / "logs").exists() else ""
    shown = done.stdout + done.stderr + logs
    for task_id in TASKS:
        for step in range(1, 6):
            assert f"{task_id} line {step}" in shown, (task_id, step, shown[-5000:])
    assert shown.count("is not a place in its log") >= len(TASKS), shown[-5000:]
