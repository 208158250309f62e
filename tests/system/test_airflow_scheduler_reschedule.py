"""The no-triggerer mode under the real Airflow scheduler (issue 26 item 1): ``wait_mode="reschedule"``.

The components are test_airflow_scheduler.py's (its ``airflow`` fixture and helpers, imported: api-server, scheduler
with LocalExecutor, dag-processor on a temporary home), but no triggerer is started: a deployment without one. A
tiny DAG trains a local job of a few seconds with the train operator in reschedule mode, ``check_interval=2`` (the
operator raises it to its floor, `MIN_RESCHEDULE_SECONDS`: with 2 s pokes this very test failed, Airflow's scheduler
taking the first poke's late executor success for a task killed externally): the first poke submits the job to a
detached supervisor and gives the worker slot back (``up_for_reschedule``), the next re-attaches to the same job by
its task-instance name and returns its result. The test sees
the task pass through ``up_for_reschedule`` (and Airflow's reschedule records), end ``success``, and exactly one job
created for it.
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from test_airflow_scheduler import airflow, airflow_cli, answer, processes_of, query  # noqa: F401 - airflow: the fixture

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(900)]

DAG_ID = "reschedule_train"
RUN_ID = "manual__reschedule_test"
DAG_FILE = textwrap.dedent('''
    """One local training task in reschedule mode (no triggerer): short pokes."""
    import pathlib
    from airflow.sdk import DAG
    from trainops.operators.training import DistributedTrainingOperator

    CODE = pathlib.Path(__file__).resolve().parent.parent / "reschedule-code"
    SPEC = {"name": "tiny", "entry_point": "train.py", "source_dir": str(CODE), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 300}

    with DAG(dag_id="reschedule_train", schedule=None) as dag:
        DistributedTrainingOperator(task_id="train", spec=SPEC, backend="local", wait_mode="reschedule",
                                    check_interval=2, retries=0)
''')
TRAIN_SCRIPT = ("import os, pathlib, time\ntime.sleep(8)\n"
                "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n")


def state(database) -> str | None:
    rows = answer(database, "SELECT state FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = 'train'",
                 DAG_ID, RUN_ID)
    return rows[0][0] if rows else None


def test_reschedule_mode_under_the_real_scheduler_pokes_then_succeeds_with_one_job(airflow):  # noqa: F811
    home, env, components = airflow
    database = home / "airflow.db"
    (home / "reschedule-code").mkdir()
    (home / "reschedule-code" / "train.py").write_text(TRAIN_SCRIPT)
    (home / "dags" / "reschedule_train.py").write_text(DAG_FILE)
    started = time.monotonic()
    components.start("api-server", "api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"])
    components.start("dag-processor", "dag-processor")
    components.start("scheduler", "scheduler")  # and no triggerer

    deadline = time.monotonic() + 240
    while not query(database, "SELECT dag_id FROM dag WHERE dag_id = ?", DAG_ID):
        assert time.monotonic() < deadline, "the DAG processor never stored the DAG\n" + components.tail()
        time.sleep(2)
    for arguments in (("dags", "unpause", DAG_ID), ("dags", "trigger", DAG_ID, "--run-id", RUN_ID)):
        done = airflow_cli(env, *arguments)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    seen: set[str] = set()
    deadline = time.monotonic() + 480
    while state(database) not in ("success", "failed"):
        assert time.monotonic() < deadline, f"the task did not end: {seen}\n" + components.tail()
        seen.add(str(state(database)))
        time.sleep(0.5)
    print(f"\nreal scheduler, reschedule mode: train {state(database)} after {time.monotonic() - started:.0f} s "
          f"(states seen: {sorted(seen)})")

    assert state(database) == "success", components.tail()
    reschedules = answer(database, "SELECT count(*) FROM task_reschedule JOIN task_instance ON task_instance.id = "
                                  "task_reschedule.ti_id WHERE task_instance.dag_id = ? AND task_instance.run_id = ?",
                        DAG_ID, RUN_ID)
    # Airflow deletes a task's reschedule records when it ends; the state seen while polling is the evidence then
    assert "up_for_reschedule" in seen or (reschedules and reschedules[0][0] >= 1), (seen, reschedules)
    assert "deferred" not in seen  # no triggerer, no deferral
    jobs = sorted(path.name for path in (home / "trainops-home" / "jobs").iterdir())  # the home's TRAINOPS_HOME
    assert len(jobs) == 1, f"more than one job for one task instance: {jobs}"
    [(value,)] = answer(database, "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = 'train' "
                                 "AND key = 'return_value'", DAG_ID, RUN_ID)
    result = json.loads(value) if isinstance(value, (str, bytes)) else value
    assert (result["backend"], result["status"], result["job_name"]) == ("local", "Completed", jobs[0])

    components.stop_all()
    deadline = time.monotonic() + 30
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(home) == [], "processes of this Airflow home are still running"
