"""The pipeline file as the retraining DAG's task arguments: resolved paths, overrides, every problem reported."""

from __future__ import annotations

from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.errors import SpecError  # noqa: E402
from trainops.operators.pipeline_file import resolve_pipeline_steps  # noqa: E402

DIGITS = REPO / "examples" / "digits" / "pipeline.yaml"


def test_the_digits_pipeline_resolves_under_the_given_workdir(tmp_path):
    steps = resolve_pipeline_steps(DIGITS, workdir=str(tmp_path), run_id="scheduled__2026-01-05T03:00:00+00:00")
    assert steps["backend"] == "local" and steps["workdir"] == str(tmp_path)
    assert steps["stage_source"] == str(tmp_path / "raw")
    assert steps["train_channels"] == {"train": str(tmp_path / "fsx" / "digits" / "train")}
    assert steps["train_spec"]["source_dir"] == str(DIGITS.parent)  # relative paths resolved against the file
    assert steps["evaluate_gate"] == "accuracy >= 0.95" and steps["evaluate_on_gate_failure"] == "fail"
    assert steps["evaluate_output_dir"] == str(tmp_path / "evaluations" / "scheduled__2026-01-05T03_00_00_00_00")
    assert steps["register_registry_dir"] == str(tmp_path / "registry")
    assert steps["train_job_name"] == "digits"


def test_the_workdir_defaults_under_airflow_home_not_the_repository(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert resolve_pipeline_steps(DIGITS)["workdir"] == str(tmp_path / "trainops")


def test_hyperparameters_and_backend_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # SageMaker needs a region: the image is resolved for it
    steps = resolve_pipeline_steps(DIGITS, workdir=str(tmp_path), backend="sagemaker",
                                   hyperparameters={"epochs": 2})
    assert steps["backend"] == "sagemaker" and steps["region"] == "eu-west-1"
    assert steps["train_spec"]["hyperparameters"] == {"epochs": 2, "batch_size": 32, "learning_rate": 0.002}
    # Evaluate and register run in the training image (the spec names none: the DLC for it), beside the model in S3.
    assert steps["evaluate_settings"]["image_uri"] == steps["register_settings"]["image_uri"]
    assert steps["evaluate_settings"]["image_uri"].startswith(
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training")
    assert steps["evaluate_output_dir"] == ""


def test_sagemaker_without_a_region_is_refused_naming_it(tmp_path, monkeypatch):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SpecError) as raised:
        resolve_pipeline_steps(DIGITS, workdir=str(tmp_path), backend="sagemaker")
    assert "region" in str(raised.value)


def test_a_pipeline_without_the_dags_steps_names_each_missing_one(tmp_path):
    pipeline = tmp_path / "pipeline.yaml"
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.m5.large\n")
    pipeline.write_text("name: partial\nsteps:\n  train:\n    spec: train.yaml\n")
    with pytest.raises(SpecError) as raised:
        resolve_pipeline_steps(pipeline, workdir=str(tmp_path))
    message = str(raised.value)
    for step in ("steps.stage", "steps.evaluate", "steps.register"):
        assert step in message


def test_a_bad_pipeline_reports_every_problem_with_its_field(tmp_path):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: bad name\nbackend: mainframe\nsteps:\n  train:\n    spec: 3\n")
    with pytest.raises(SpecError) as raised:
        resolve_pipeline_steps(pipeline, workdir=str(tmp_path))
    message = str(raised.value)
    for field in ("name", "backend"):
        assert field in message


def test_the_prepare_step_runs_the_script_with_its_substituted_arguments(tmp_path):
    from trainops.errors import JobFailed
    from trainops.operators.pipeline_file import run_prepare_step

    (tmp_path / "export.py").write_text("import sys, pathlib\npathlib.Path(sys.argv[2]).write_text('rows')\n"
                                        "print('exported')\n")
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.m5.large\n")
    (tmp_path / "pipeline.yaml").write_text(
        "name: p\nsteps:\n  prepare:\n    script: export.py\n    args: ['--out', '${workdir}/data.csv']\n"
        "  stage: {source: '${workdir}/raw', destination: '${workdir}/staged'}\n  train: {spec: train.yaml}\n"
        "  evaluate: {entry_point: evaluate.py}\n  register: {group: g}\n")
    work = tmp_path / "work"
    steps = resolve_pipeline_steps(tmp_path / "pipeline.yaml", workdir=str(work))
    lines: list[str] = []
    work.mkdir()
    run_prepare_step(steps, log=lines.append)
    assert (work / "data.csv").read_text() == "rows"
    assert lines == ["[prepare] exported"]
    (tmp_path / "export.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(JobFailed, match="exited with code 3"):
        run_prepare_step(steps, log=lines.append)
    assert run_prepare_step({**steps, "prepare_script": None}, log=lines.append) is None


def test_a_bad_pipeline_file_and_its_bad_spec_and_missing_steps_fail_together(tmp_path):
    # one failure names the file's own problem, each missing step and the job spec's problems (its own fields)
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.nope\n"
                                         "instance_count: 0\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: bad name\nsteps:\n  train:\n    spec: train.yaml\n  evaluate: {entry_point: e.py}\n")
    with pytest.raises(SpecError) as raised:
        resolve_pipeline_steps(pipeline, workdir=str(tmp_path))
    fields = [problem.path for problem in raised.value.problems]
    assert "name" in fields
    assert "steps.stage" in fields and "steps.register" in fields and "steps.evaluate" not in fields
    assert "steps.train.spec.instance_type" in fields and "steps.train.spec.instance_count" in fields
    assert str(tmp_path / "train.yaml") in str(raised.value)


def test_a_valid_pipeline_with_a_bad_inline_spec_reports_it_with_the_missing_steps(tmp_path):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: p\nsteps:\n  train:\n    spec: {name: t, entry_point: train.py, max_run: -5,"
                        " instance_type: ml.m5.large}\n")
    with pytest.raises(SpecError) as raised:
        resolve_pipeline_steps(pipeline, workdir=str(tmp_path))
    fields = [problem.path for problem in raised.value.problems]
    assert {"steps.stage", "steps.evaluate", "steps.register", "steps.train.spec.max_run"} <= set(fields), fields


# --- a DAG run's settings from its conf: steps_for_run ------------------------------------------------------------
ACCEPTED = ("pipeline_file", "backend", "hyperparameters", "overrides")


def params(**values) -> dict:
    return {"pipeline_file": str(DIGITS), "backend": "local", "hyperparameters": {}, "overrides": {}, **values}


def test_a_conf_key_the_dag_does_not_take_is_refused_listing_the_keys_it_takes():
    from trainops.operators.pipeline_file import steps_for_run

    with pytest.raises(SpecError) as caught:
        steps_for_run(params(), {"hyperparameter": {"epochs": 2}, "backend": "local", "epoch": 1},
                      accepted=ACCEPTED, allowed_dirs=[str(REPO / "examples")])
    text = str(caught.value)
    assert "DAG run conf" in text and "2 problems" in text
    for key in ("hyperparameter", "epoch"):
        assert f"{key}: this DAG takes no such key; it takes backend, hyperparameters, overrides, pipeline_file" in text


def test_the_pipeline_file_of_a_conf_must_be_inside_the_allowed_directories(tmp_path, monkeypatch):
    from trainops.operators.pipeline_file import steps_for_run

    variables = {"trainops_workdir": str(tmp_path / "work")}  # the deployment's Airflow Variables
    monkeypatch.setattr("trainops.operators.compat.get_variable", lambda key, default=None: variables.get(key, default))
    conf = {"hyperparameters": {"epochs": 1}}  # Airflow lays the conf over the params the task gets
    steps = steps_for_run(params(**conf), conf, accepted=ACCEPTED,
                          allowed_dirs=[str(REPO / "examples")], run_id="manual__1")
    assert steps["pipeline_file"] == str(DIGITS) and steps["train_spec"]["hyperparameters"]["epochs"] == 1
    assert steps["workdir"] == str(tmp_path / "work")  # the deployment's (Variable), never the conf's
    with pytest.raises(SpecError, match="is not inside a directory this DAG reads pipeline files from"):
        steps_for_run(params(), None, accepted=ACCEPTED, allowed_dirs=[str(tmp_path)])
    with pytest.raises(TypeError, match="allowed_dirs"):  # no default: a library caller must say where from
        steps_for_run(params(), None, accepted=ACCEPTED)  # type: ignore[call-arg]
    with pytest.raises(SpecError, match="overrides.role: a DAG run's conf may not set this"):
        steps_for_run(params(overrides={"role": "arn:aws:iam::1:role/x"}), None, accepted=ACCEPTED,
                      allowed_dirs=[str(REPO / "examples")])
