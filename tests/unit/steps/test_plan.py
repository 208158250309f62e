"""The pipeline file resolved once: the runner, the retraining DAG and the KFP components take the same values from
`trainops.steps.plan` (on SageMaker: the training job's role, image and region for evaluate and register, and an S3
evaluation output), so their defaults cannot drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

from trainops.errors import SpecError  # noqa: E402
from trainops.steps.plan import resolve_plan  # noqa: E402

DIGITS = REPO / "examples" / "digits" / "pipeline.yaml"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/digits-train:1"


def sagemaker_pipeline(tmp_path: Path, image: bool = True) -> Path:
    """A sagemaker pipeline file with its spec and evaluation script (the digits example, pointed at S3)."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('train')\n")
    (tmp_path / "evaluate.py").write_text("print('evaluate')\n")
    spec = {"name": "digits", "framework": "pytorch", "framework_version": "2.3.0", "py_version": "py311",
            "entry_point": "train.py", "source_dir": "code", "instance_type": "ml.g5.xlarge", "instance_count": 2,
            "distribution": {"torch_distributed": {"enabled": True}}, "role": ROLE, "region": "us-east-1",
            "inputs": {"train": "s3://data-bucket/digits/train/"}, "output_path": "s3://out-bucket/digits"}
    if image:
        spec["image_uri"] = IMAGE
    (tmp_path / "train.json").write_text(json.dumps(spec))
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "name: digits-sagemaker\nbackend: sagemaker\nworkdir: work\nsteps:\n"
        "  stage: {source: 's3://data-bucket/digits/', destination: 'fsx://fs-0123456789abcdef0/digits',\n"
        "          s3_prefix: null}\n"
        "  train: {spec: train.json}\n"
        "  evaluate: {entry_point: evaluate.py, source_dir: ., channels: {test: 's3://data-bucket/digits/test/'},\n"
        "             gate: 'accuracy >= 0.9', timeout: 900}\n"
        "  register: {group: digits-classifier, approval: PendingManualApproval}\n")
    return pipeline


def test_sagemaker_evaluate_and_register_get_the_training_role_image_and_an_s3_output(tmp_path):
    plan = resolve_plan(sagemaker_pipeline(tmp_path))
    assert plan.backend == "sagemaker" and plan.region == "us-east-1"
    arguments = plan.evaluate_arguments("s3://out-bucket/digits/job-1/output/model.tar.gz", "job-1")
    assert (arguments["role"], arguments["image_uri"], arguments["region"]) == (ROLE, IMAGE, "us-east-1")
    assert arguments["output_dir"] == ""  # the backend writes beside the model: s3://out-bucket/digits/job-1/evaluation
    assert arguments["timeout"] == 900 and arguments["champion_group"] == "digits-classifier"
    register = plan.register_arguments()
    assert (register["image_uri"], register["region"], register["approval"]) == (IMAGE, "us-east-1",
                                                                                 "PendingManualApproval")
    assert "role" not in register


def test_without_an_image_the_dlc_for_the_spec_is_used(tmp_path):
    plan = resolve_plan(sagemaker_pipeline(tmp_path, image=False))
    image = plan.evaluate.settings["image_uri"]
    assert image.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0")
    assert plan.register.settings["image_uri"] == image


def test_local_plans_carry_no_aws_settings_and_evaluate_under_the_workdir(tmp_path):
    plan = resolve_plan(DIGITS, workdir=str(tmp_path))
    assert plan.backend == "local" and plan.evaluate.settings == {} and plan.register.settings == {}
    assert plan.evaluate_arguments("/m.tar.gz", "digits-1")["output_dir"] == str(tmp_path / "evaluations" / "digits-1")
    assert plan.register.registry_dir == str(tmp_path / "registry")


def test_a_backend_outside_the_two_is_refused_by_name(tmp_path):
    with pytest.raises(SpecError) as raised:
        resolve_plan(DIGITS, "mainframe", workdir=str(tmp_path))
    assert raised.value.problems[0].path == "backend"


@pytest.mark.parametrize("backend", ["local", "sagemaker"])
def test_the_three_front_ends_take_the_same_defaults(tmp_path, backend):
    """Runner (PipelineRunner.plan), DAG (resolve_pipeline_steps) and KFP (the evaluate and register components'
    derivation, the compiled pipeline's backend default) agree on every value they share."""
    from trainops.components.evaluate_task import _backend_options
    from trainops.components.paths import places
    from trainops.components.pipeline import read_pipeline_source
    from trainops.operators.pipeline_file import resolve_pipeline_steps
    from trainops.spec.pipeline import load_pipeline
    from trainops.steps.pipeline import PipelineRunner

    path = sagemaker_pipeline(tmp_path) if backend == "sagemaker" else DIGITS
    workdir = tmp_path / "work"
    runner = PipelineRunner(load_pipeline(path, workdir_override=str(workdir)), path.parent).plan
    dag = resolve_pipeline_steps(path, workdir=str(workdir), run_id="digits-1")
    source = read_pipeline_source(path, workdir_override=str(workdir))
    model = ("s3://out-bucket/digits/digits-1/output/model.tar.gz" if backend == "sagemaker"
             else str(workdir / "model.tar.gz"))
    kfp_output, kfp_evaluate = _backend_options(backend, source.spec_json, source.spec_dir,
                                                places(str(source.directory), str(workdir)), model, "digits-1", "")

    shared = runner.to_dict()
    for key in ("backend", "workdir", "region", "evaluate_settings", "register_settings", "backend_options",
                "evaluate_gate", "evaluate_timeout", "evaluate_channels", "evaluate_source_dir", "register_group",
                "register_approval", "register_registry_dir", "train_channels", "stage_source", "stage_destination"):
        assert dag[key] == shared[key], key
    assert source.plan.backend == runner.backend == backend
    assert kfp_evaluate == runner.evaluate.settings
    # The evaluation output: the runner's (keyed by the job), the DAG's (keyed by the run) and KFP's agree.
    runner_output = runner.evaluate_arguments(model, "digits-1")["output_dir"]
    assert dag["evaluate_output_dir"] == runner_output
    if backend == "sagemaker":
        assert runner_output == "" and kfp_output == "s3://out-bucket/digits/digits-1/evaluation"
    else:
        assert kfp_output == runner_output == str(workdir / "evaluations" / "digits-1")
