"""trainops on Airflow 2.11, as a platform team on MWAA 2.x has it: the DAGs parse, and ``retrain_pipeline`` passes
``airflow dags test`` with its train task deferred (the trigger run by ``dags test`` itself).

The Airflow 2.11 venv (with the Amazon provider) is built once and cached (`support.airflow2_venv`); trainops goes
into it as a wheel built from this checkout, installed non-editable into a directory of its own on ``PYTHONPATH``.
Everything runs in subprocesses of that venv against a temporary Airflow home (SQLite), offline, on the local
backend; the run's task states are read back from the database.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support import airflow2_venv
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

    def run(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), *arguments], env=env, cwd=str(root), capture_output=True, text=True,
                              timeout=timeout)

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
