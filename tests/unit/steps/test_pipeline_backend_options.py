"""A pipeline file's ``backend_options:`` (issue 38, item 1): the backend's one mapping of settings, resolved into the
plan every front end reads, checked by the backend before any step runs, and handed to each step; a run on another
backend (``--backend``) leaves the file's out, and the run's own (``-o``) lay over them."""

from __future__ import annotations

import json

import pytest

from trainops.errors import SpecError
from trainops.steps.pipeline import run_pipeline_file
from trainops.steps.plan import resolve_plan


def pipeline(tmp_path, options: str) -> str:
    (tmp_path / "train.py").write_text("import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm'), 'w')\n")
    (tmp_path / "prepare.py").write_text(f"open({str(tmp_path / 'prepared')!r}, 'w')\n")
    path = tmp_path / "pipeline.yaml"
    path.write_text("name: options-demo\nworkdir: work\n" + options +
                    "steps:\n  prepare: {script: prepare.py}\n"
                    "  train:\n    job_name: options-demo-1\n    spec: {entry_point: train.py, source_dir: .,"
                    " instance_type: ml.m5.large, instance_count: 2}\n")
    return str(path)


def test_the_files_options_reach_the_plan_and_the_training_job(tmp_path):
    path = pipeline(tmp_path, "backend_options:\n  processes_per_host: 2\n")
    plan = resolve_plan(path)
    assert plan.backend == "local" and plan.backend_options == {"processes_per_host": 2}
    assert plan.to_dict()["backend_options"] == {"processes_per_host": 2}
    assert plan.get_backend().options().processes_per_host == 2
    assert run_pipeline_file(path) == 0
    record = json.loads((tmp_path / "work" / "jobs" / "options-demo-1" / "status.json").read_text())
    assert record["status"] == "Completed" and record["processes_per_host"] == 2


def test_the_runs_options_lay_over_the_files_and_another_backend_leaves_the_files_out(tmp_path):
    path = pipeline(tmp_path, "backend_options: {processes_per_host: 2, launcher: trainops}\n")
    assert resolve_plan(path, backend_options={"processes_per_host": "3"}).backend_options == {
        "processes_per_host": "3", "launcher": "trainops"}
    from trainops.spec.pipeline import load_pipeline
    from trainops.steps.plan import options_of

    assert options_of(load_pipeline(path), "sagemaker", {"region": "eu-west-1"}) == {"region": "eu-west-1"}


def test_an_option_the_backend_does_not_take_fails_before_any_step_runs(tmp_path):
    path = pipeline(tmp_path, "backend_options: {preflight: false}\n")
    with pytest.raises(SpecError) as raised:
        run_pipeline_file(path)
    assert "preflight: is not a setting of the local backend" in str(raised.value)
    assert not (tmp_path / "prepared").exists()  # the prepare step never ran
