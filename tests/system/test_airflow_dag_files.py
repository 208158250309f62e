"""The DAG files as the DAG processor sees them: they import cleanly (nothing heavy), have the promised shape, and
serialize (what the scheduler stores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.airflow_home import REPO, airflow_environment, isolate_airflow_home

isolate_airflow_home()

pytestmark = pytest.mark.system

DAGS = REPO / "dags"


def load_dags(dag_file) -> dict:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dag_file))
    assert bag.import_errors == {}, bag.import_errors
    return bag.dags


def test_retrain_pipeline_has_the_promised_tasks_order_and_schedule():
    from airflow.sdk import Asset, AssetOrTimeSchedule

    from trainops.operators.timetables import TickOnlyCronTimetable

    dag = load_dags(DAGS / "retrain_pipeline.py")["retrain_pipeline"]
    order = ["prepare", "stage", "train", "evaluate", "gate", "register"]
    assert sorted(dag.task_ids) == sorted(order)
    for upstream, downstream in zip(order, order[1:], strict=False):
        assert downstream in dag.get_task(upstream).downstream_task_ids, (upstream, downstream)
    schedule = dag.timetable
    assert isinstance(schedule, AssetOrTimeSchedule)
    assert isinstance(schedule.timetable, TickOnlyCronTimetable)  # at the tick only: never on unpause
    assert schedule.timetable._expression == "0 3 * * 1"  # weekly, Monday 03:00 UTC
    assert dag.catchup is False
    assert isinstance(schedule.asset_condition, Asset) and schedule.asset_condition.name == "digits_training_data"
    assert dag.params["backend"] is None  # the pipeline file's backend: the default file's is local, offline
    import yaml

    default = yaml.safe_load(Path(dag.params["pipeline_file"]).read_text())
    assert default["backend"] == "local"
    assert dag.get_task("train").deferrable is True
    # a retry re-attaches, so every step may retry; the gate is a verdict, not a flaky step
    for task_id in ("prepare", "stage", "train", "evaluate", "register"):
        assert dag.get_task(task_id).retries == 2, task_id
        assert dag.get_task(task_id).retry_delay.total_seconds() == 60, task_id
    assert dag.get_task("gate").retries == 0
    # the pipeline file's evaluation timeout reaches the evaluate task (an XCom of prepare, rendered at run time)
    timeout = dag.get_task("evaluate").timeout
    assert (timeout.operator.task_id, timeout.key) == ("prepare", "evaluate_timeout")
    assert dag.is_paused_upon_creation is True  # the first (immediate) run waits for someone to unpause it


def test_the_sagemaker_example_dags_render_before_they_train():
    dags = load_dags(DAGS / "sagemaker_examples.py")
    assert set(dags) == {"sagemaker_smddp_p4d", "sagemaker_smp_v2_p5", "sagemaker_torchrun_trn1_fsx"}
    for dag in dags.values():
        render, train = dag.get_task("render"), dag.get_task("train")
        assert train.backend == "sagemaker" and train.deferrable is True
        assert render.for_task_id == "train" and render.spec == train.spec
        assert "train" in render.get_flat_relative_ids(upstream=False)
    fsx = dags["sagemaker_torchrun_trn1_fsx"]
    assert fsx.get_task("stage_to_fsx").destination.startswith("fsx://fs-0123456789abcdef0/")
    assert "train" in fsx.get_task("stage_to_fsx").downstream_task_ids


def test_every_dag_serializes_as_the_scheduler_stores_it():
    from airflow.serialization.serialized_objects import DagSerialization

    for dag_file in sorted(DAGS.glob("*.py")):
        for dag in load_dags(dag_file).values():
            data = DagSerialization.to_dict(dag)
            json.dumps(data)  # what goes into the database
            rebuilt = DagSerialization.from_dict(data)
            assert sorted(rebuilt.task_ids) == sorted(dag.task_ids)


def test_parsing_the_dag_files_imports_nothing_heavy(tmp_path):
    # A fresh interpreter, as the DAG processor has: only airflow.sdk and the thin operator modules may load.
    code = ("import runpy, sys\n"
            f"for path in {[str(p) for p in sorted(DAGS.glob('*.py'))]!r}: runpy.run_path(path)\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'torch', 'kfp', "
            "'numpy', 'sklearn') or m.startswith(('trainops.spec', 'trainops.steps', 'trainops.backends', "
            "'airflow.providers.amazon.aws')))\n"
            "print(heavy)\n")
    done = subprocess.run([sys.executable, "-c", code], env=airflow_environment(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
