"""trainops on Airflow 2.11, as a platform team on MWAA 2.x has it: the DAGs parse, and ``retrain_pipeline`` passes
``airflow dags test`` with its train task deferred (the trigger run by ``dags test`` itself).

The Airflow 2.11 venv (with the Amazon provider) is built once and cached (`support.airflow2_venv`); trainops goes
into it as a wheel built from this checkout, installed non-editable into a directory of its own on ``PYTHONPATH``.
Everything runs in subprocesses of that venv against a temporary Airflow home (SQLite), offline, on the local
backend; the run's task states are read back from the database.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support import airflow2_venv
from support.airflow_db import answer, coming_tick_stored, rows, utc
from support.airflow_home import REPO

pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

TASKS = ("prepare", "stage", "train", "evaluate", "gate", "register")


@pytest.fixture(scope="module")
def airflow2(tmp_path_factory):
    python = airflow2_venv.build()
    root = tmp_path_factory.mktemp("airflow2")
    target = airflow2_venv.install_trainops(python, root / "site")
    home = root / "home"
    dags = root / "dags"
    dags.mkdir()
    for name in ("retrain_pipeline.py", "sagemaker_examples.py"):
        (dags / name).symlink_to(REPO / "dags" / name)  # the DAG finds examples/ beside its real folder
    env = {**airflow2_venv.clean_environment(),
           "PYTHONPATH": str(target), "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
           "TRAINOPS_HOME": str(home / "trainops-home")}
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])  # the executor runs `airflow tasks run`

    def run(*arguments: str, timeout: float = 300, start: bool = False, **more: str) -> Any:
        """A command of the venv; ``start``: a process of its own group, returned at once (a component)."""
        if start:
            with open(root / f"{arguments[-1]}.log", "ab") as log:
                return subprocess.Popen([str(python), *arguments], env={**env, **more}, cwd=str(root), stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        return subprocess.run([str(python), *arguments], env={**env, **more}, cwd=str(root), capture_output=True,
                              text=True, timeout=timeout)

    done = run("-m", "airflow", "db", "migrate")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return run, home, target


def test_trainops_comes_from_the_wheel_and_airflow_is_2_11(airflow2):
    run, _, target = airflow2
    done = run("-c", "import airflow, trainops; print(airflow.__version__); print(trainops.__file__)")
    assert done.returncode == 0, done.stderr[-3000:]
    version, location = done.stdout.split()[-2:]
    assert version.startswith("2.11."), version
    assert Path(location).is_relative_to(target), location  # not the checkout: the installed wheel
    providers = run("-m", "airflow", "providers", "list", "-o", "json")
    assert providers.returncode == 0, providers.stderr[-3000:]
    assert "trainops" in {item["package_name"] for item in json.loads(providers.stdout[providers.stdout.index("[") :])}


def test_both_dag_files_parse_on_airflow_2_11(airflow2):
    run, _, _ = airflow2
    code = ("from airflow.models import DagBag\n"
            "bag = DagBag(include_examples=False)\n"
            "import json; print(json.dumps({'errors': {k: str(v)[-800:] for k, v in bag.import_errors.items()},"
            " 'dags': sorted(bag.dag_ids)}))\n")
    done = run("-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    parsed = json.loads(done.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["dags"] == ["retrain_pipeline", "sagemaker_smddp_p4d", "sagemaker_smp_v2_p5",
                              "sagemaker_torchrun_trn1_fsx"]


EVERY_MINUTE = '''
"""The retraining DAG's timetable, ticking every minute (Airflow 2.11): one task that does nothing."""
from datetime import datetime, timezone
from airflow import DAG
from airflow.operators.empty import EmptyOperator
from trainops.operators.timetables import TickOnlyCronTimetable

with DAG(dag_id="tick_every_minute", schedule=TickOnlyCronTimetable("* * * * *", timezone="UTC"),
         start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False, is_paused_upon_creation=True):
    EmptyOperator(task_id="nothing")
'''


def test_unpausing_on_2_11_starts_no_run_but_the_tick_does(airflow2, tmp_path):
    """Airflow 2.11's scheduler (SQLite, its own DAG processing): unpausing ``retrain_pipeline`` days after its last
    Monday creates no run, and its next run is the coming Monday; a DAG on the same timetable ticking every minute,
    unpaused well after a tick, gets no run for that tick and one at the next."""
    run, home, _ = airflow2
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "retrain_pipeline.py").symlink_to(REPO / "dags" / "retrain_pipeline.py")
    (dags / "tick_every_minute.py").write_text(EVERY_MINUTE)
    database = home / "airflow.db"

    def scheduled(dag_id: str) -> list:  # once the database answers: busy is not "no runs"
        return answer(database, "SELECT run_type, data_interval_end FROM dag_run WHERE dag_id = ? AND "
                                "run_type != 'manual'", dag_id)

    def wait_for(condition: Any, what: str, seconds: float) -> Any:
        deadline = time.monotonic() + seconds
        while not (value := condition()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}: " + (
                home.parent / "scheduler.log").read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        return value

    scheduler = run("-m", "airflow", "scheduler", start=True, AIRFLOW__CORE__DAGS_FOLDER=str(dags),
                    AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL="5", AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL="5")
    try:
        for dag_id in ("retrain_pipeline", "tick_every_minute"):
            wait_for(lambda dag_id=dag_id: rows(database, "SELECT next_dagrun FROM dag WHERE dag_id = ? AND "
                                                          "next_dagrun IS NOT NULL", dag_id), dag_id, 300)
        # A quiet second, once the DAG processor has stored the coming tick as the next run (a parse before the tick
        # stored the missed one, which stays due until the next parse: test_airflow_scheduler_unpause.py says why).
        wait_for(lambda: coming_tick_stored(database, "tick_every_minute"), "a quiet second with the coming tick "
                 "stored", 180)
        unpaused = datetime.now(timezone.utc)
        for dag_id in ("retrain_pipeline", "tick_every_minute"):
            done = run("-m", "airflow", "dags", "unpause", dag_id, AIRFLOW__CORE__DAGS_FOLDER=str(dags))
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        # A later tick's run: the next one, or the one after if the scheduler reached the next past its grace.
        ticked = wait_for(lambda: scheduled("tick_every_minute"), "a later tick's run", 240)
        assert [kind for kind, _ in ticked] == ["scheduled"], (unpaused, ticked)
        end = utc(ticked[0][1])
        assert end > unpaused and (end.second, end.microsecond) == (0, 0), (unpaused, ticked)
        assert scheduled("retrain_pipeline") == []
        [(upcoming,)] = answer(database, "SELECT next_dagrun_create_after FROM dag WHERE dag_id = 'retrain_pipeline'")
        upcoming = utc(upcoming)
        assert upcoming > unpaused and (upcoming.weekday(), upcoming.hour) == (0, 3)
    finally:
        os.killpg(scheduler.pid, signal.SIGTERM)
        try:
            scheduler.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(scheduler.pid, signal.SIGKILL)
            scheduler.wait(timeout=30)


def test_retrain_pipeline_passes_airflow_dags_test_on_2_11(airflow2):
    run, home, _ = airflow2
    done = run("-m", "airflow", "dags", "test", "retrain_pipeline", "-c",
               json.dumps({"hyperparameters": {"epochs": 6}}), timeout=1200)
    output = done.stdout[-6000:] + done.stderr[-6000:]
    connection = sqlite3.connect(str(home / "airflow.db"))
    try:
        states = dict(connection.execute("SELECT task_id, state FROM task_instance WHERE dag_id = 'retrain_pipeline'"))
        xcom_rows = connection.execute("SELECT COUNT(*) FROM xcom WHERE dag_id = 'retrain_pipeline' "
                                       "AND task_id = 'train'").fetchone()[0]
    finally:
        connection.close()
    assert done.returncode == 0, output
    assert states == {task: "success" for task in TASKS}, output
    assert xcom_rows > 0
    # the train task deferred: its trigger ran (inline, as `dags test` runs triggers) and streamed the job's logs
    print(output)
