"""The retraining DAG for real: ``dag.test()`` on a fresh SQLite Airflow home, offline, on the local backend.

Every task runs (the data export, staging, a 2-host DDP training job, the evaluation script, the gate, the local
registry); the test then reads the task instances and XComs back from the database. The training runs a few epochs
(DAG parameter ``hyperparameters``) so the whole test stays well under a minute of training on two shared cores.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.airflow_home import REPO, airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

DAG_FILE = REPO / "dags" / "retrain_pipeline.py"
TASKS = ("prepare", "stage", "train", "evaluate", "gate", "register")


@pytest.fixture(scope="module")
def retrain_run(airflow_home):  # noqa: F811 - pytest injects the imported fixture
    # 6 epochs: accuracy ~0.97 on the digits test set, clear of the pipeline's 0.95 gate.
    outcome, done = airflow_home.dag_test(DAG_FILE, "retrain_pipeline", {"hyperparameters": {"epochs": 6}})
    assert outcome is not None, f"dag.test() failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return airflow_home, outcome


def test_every_task_instance_succeeds(retrain_run):
    _, outcome = retrain_run
    assert outcome["state"] == "success"
    assert outcome["tasks"] == {task: "success" for task in TASKS}


def test_training_xcom_is_small_json_and_names_the_job_from_the_task(retrain_run):
    from trainops.spec.names import deterministic_job_name

    home, outcome = retrain_run
    result = outcome["xcom"]["train"]["return_value"]
    assert set(result) == {"backend", "job_name", "status", "secondary_status", "failure_reason", "model_artifact",
                           "billable_seconds", "duration_seconds", "metrics", "reattached", "region", "cost"}
    assert result["cost"]["attempts"] == 1 and result["cost"]["total"] > 0  # priced at the catalog's on-demand rate
    assert (result["backend"], result["status"], result["reattached"]) == ("local", "Completed", False)
    # Deterministic: the spec's name + a hash of dag id, task id, run id and map index (no try number).
    assert result["job_name"] == deterministic_job_name("digits", "retrain_pipeline", "train", outcome["run_id"], -1)
    artifact = Path(result["model_artifact"])
    assert artifact.name == "model.tar.gz" and artifact.is_file()
    assert home.path in artifact.parents, "the DAG must work under AIRFLOW_HOME, never inside the repository"
    assert len(json.dumps(result)) < 2000
    # multiple_outputs: each key is an XCom of its own, which downstream tasks take as arguments.
    assert outcome["xcom"]["train"]["model_artifact"] == result["model_artifact"]


def test_stage_copied_the_exported_data(retrain_run):
    home, outcome = retrain_run
    report = outcome["xcom"]["stage"]["return_value"]
    assert report["ok"] is True
    assert report["files_copied"] + report["files_skipped"] == report["files_found"] >= 2
    assert report["refused_count"] == report["failed_count"] == 0
    assert Path(report["destination"]).is_relative_to(home.path)


def test_evaluation_gate_and_registration_agree(retrain_run):
    _, outcome = retrain_run
    xcom = outcome["xcom"]
    evaluation = xcom["evaluate"]["return_value"]
    assert evaluation["passed"] is True
    assert evaluation["metrics"]["accuracy"] >= 0.95
    assert evaluation["gate"]["metric"] == "accuracy" and evaluation["gate"]["threshold"] == 0.95
    assert re.match(r"gate passed: accuracy = [0-9.]+ >= 0\.95", evaluation["message"])
    assert Path(evaluation["metrics_path"]).is_file()
    assert xcom["gate"]["return_value"] == {"passed": True, "message": evaluation["message"],
                                            "metrics": evaluation["metrics"]}
    entry = xcom["register"]["return_value"]
    assert (entry["backend"], entry["group"], entry["version"]) == ("local", "digits-classifier", 1)
    assert (entry["approval_status"], entry["champion"]) == ("Approved", True)
    assert entry["metrics"] == evaluation["metrics"]
    assert entry["job_name"] == xcom["train"]["return_value"]["job_name"]
    assert Path(entry["model_artifact"]).is_file()


def test_everything_the_run_wrote_is_under_the_airflow_home(retrain_run):
    # The pipeline file's own workdir is inside the repository (runs/digits); the DAG must not write there.
    home, outcome = retrain_run
    xcom = outcome["xcom"]
    written = [xcom["prepare"]["workdir"], xcom["stage"]["return_value"]["destination"],
               xcom["train"]["return_value"]["model_artifact"], xcom["evaluate"]["return_value"]["output_dir"],
               xcom["register"]["return_value"]["location"]]
    for path in written:
        assert Path(path).is_relative_to(home.path), path
        assert not Path(path).is_relative_to(REPO), path


def test_airflow_sees_trainops_as_a_provider(airflow_home):  # noqa: F811
    done = airflow_home.run("-m", "airflow", "providers", "list", "-o", "json", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    providers = {entry["package_name"]: entry for entry in json.loads(done.stdout[done.stdout.index("["):])}
    assert "trainops" in providers
    assert providers["trainops"]["version"] == "0.1.0"


def test_a_conf_key_the_dag_does_not_take_fails_the_run_naming_the_keys_it_takes(airflow_home):  # noqa: F811
    # `hyperparameter` for `hyperparameters`: refused before anything runs, not a training run with the defaults
    outcome, done = airflow_home.dag_test(DAG_FILE, "retrain_pipeline", {"hyperparameter": {"epochs": 2}})
    assert outcome is not None, f"dag.test() failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    assert outcome["state"] == "failed"
    assert outcome["tasks"]["prepare"] == "failed" and outcome["tasks"]["train"] == "upstream_failed"
    assert ("hyperparameter: this DAG takes no such key; it takes backend, hyperparameters, overrides, "
            "pipeline_file") in done.stdout + done.stderr
