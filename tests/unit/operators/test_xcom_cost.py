"""The training task's XCom ``cost`` has the train step result's shape on every path (issue 25 item 4): the sums, each
attempt's cost, ``spent``, the ``forecast`` and the ``budget`` with what is left; here the local job trained in the
worker and the retry that re-attaches to it (the deferred path: tests/system/test_deferred_guards.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

from trainops.operators.training import DistributedTrainingOperator  # noqa: E402
from trainops.steps.train import train  # noqa: E402


def context(try_number: int = 1) -> dict:
    return {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1,
                                  try_number=try_number)}


def spec(tmp_path: Path) -> dict:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("import os, pathlib\nprint('trained', flush=True)\n"
                                   "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('ok')\n")
    return {"name": "priced", "entry_point": "train.py", "source_dir": str(code), "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 600, "max_cost_usd": 2.0, "output_path": str(tmp_path / "out")}


def check_shape(cost: dict) -> None:
    assert cost["attempts"] == 1 and len(cost["per_attempt"]) == 1
    assert cost["total"] is not None and cost["spent"] == cost["total"]
    assert cost["forecast"]["max_run_seconds"] == 600 and cost["forecast"]["attempt_usd"] > 0
    assert cost["budget"] == {"max_cost_usd": 2.0, "mode": "stop", "left": round(2.0 - cost["total"], 6)}


def test_the_worker_and_the_reattaching_retry_report_the_step_results_cost(tmp_path, monkeypatch):
    work = tmp_path / "w"
    first = DistributedTrainingOperator(task_id="train", spec=spec(tmp_path), backend="local", workdir=str(work),
                                        wait_mode="worker").execute(context())
    assert first["status"] == "Completed"
    check_shape(first["cost"])
    # A retry re-attaches to the completed job (submit + describe: no wait) and reports the same cost.
    again = DistributedTrainingOperator(task_id="train", spec=spec(tmp_path), backend="local", workdir=str(work),
                                        deferrable=True).execute(context(try_number=2))
    assert again["reattached"] is True and again["job_name"] == first["job_name"]
    check_shape(again["cost"])
    assert again["cost"]["total"] == first["cost"]["total"]
    # The train step's own result has the same keys.
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    step = train(spec(tmp_path), job_name="priced-step", log=lambda line: None)
    assert set(step["cost"]) == set(first["cost"])
